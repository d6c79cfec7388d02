package cluster

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShardsProtocol is the one protocol the gateways' group offers: a
// cooperative (KIP-429) assignment of the state topic's partitions, made by
// the group's leader with Balance.
const ShardsProtocol = "wasmassign-shards"

// MembershipConfig is what a gateway's membership in the gateways' own
// group needs. The group is an ordinary classic consumer group on the
// upstream, coordinated by Kafka.
type MembershipConfig struct {
	// Group is the gateways' group id, Topic the state topic whose
	// partitions (Shards of them) are handed out.
	Group, Topic string
	Shards       int
	// ID is this gateway's stable identity, its group.instance.id (KIP-345):
	// a restarted gateway takes its place back, and a paused one that comes
	// back after its successor joined is fenced. Address is where clients
	// reach it, Admin its admin API (empty for none).
	ID, Address, Admin string
	// SessionTimeout, RebalanceTimeout and HeartbeatInterval are the
	// member's Kafka timeouts; Lease is how long a confirmed request lets
	// the gateway answer for its shards (shorter than SessionTimeout).
	SessionTimeout, RebalanceTimeout, HeartbeatInterval, Lease time.Duration
}

// Owner is one gateway of the layout a generation of the gateways' group
// made, as every member learns it from its assignment. Refused says why a
// gateway got no shards at all: it cannot write the cluster's format.
// Brokers are the gateway's listeners for the upstream's brokers: node id
// to port, at Address's host. Admin is its admin API, empty for none.
type Owner struct {
	ID      string          `json:"id"`
	Address string          `json:"address"`
	Admin   string          `json:"admin,omitempty"`
	Shards  []int           `json:"shards"`
	Refused string          `json:"refused,omitempty"`
	Brokers map[int32]int32 `json:"brokers,omitempty"`
}

// gatewayInfo is what a gateway says of itself in its subscription's user
// data: who it is, where clients reach it and its listeners for the
// upstream's brokers, and the record formats it can write, oldest and
// newest. A gateway that knows no Brokers field ignores it.
type gatewayInfo struct {
	ID        string          `json:"id"`
	Address   string          `json:"address"`
	Admin     string          `json:"admin,omitempty"`
	Brokers   map[int32]int32 `json:"brokers,omitempty"`
	MinFormat byte            `json:"min_format"`
	MaxFormat byte            `json:"max_format"`
}

// layoutData is what the leader writes into every assignment: the format
// every gateway writes (the newest that all of them can), and the layout.
type layoutData struct {
	Format byte    `json:"format"`
	Owners []Owner `json:"owners"`
}

// minFormat is the oldest record format this gateway writes: FormatVersion
// is the only one so far.
const minFormat = 1

// ErrRefused ends the membership of a gateway the cluster cannot take: the
// oldest record format it writes is newer than another gateway reads.
var ErrRefused = errors.New("refused by the cluster")

// Change is what a Membership tells its owner after an answer or a tick:
// shards it now holds, shards it must stop answering for, and the layout.
type Change struct {
	// Assigned are shards newly held from Generation on, received at
	// ReceivedAt on the clock: the owner may serve them from
	// Lease.ServableFrom.
	Assigned   []int
	Generation int32
	ReceivedAt time.Duration
	// Revoked are shards to stop answering for now, and Reason why:
	// "moved" (the leader gives them to another gateway: release them
	// cleanly), "lost" (Kafka says this gateway is no longer the member it
	// was), "lease" (no confirmation in time), "leaving" or "fenced".
	Revoked []int
	Reason  string
	// Layout is every gateway's shards in Generation, when it changed, and
	// Format the record format every gateway writes in it.
	Layout []Owner
	Format byte
}

// ErrFenced is the end of a membership whose instance id another live
// gateway process took (FENCED_INSTANCE_ID): two gateways were given one
// id, or this one was paused past its session and restarted elsewhere.
var ErrFenced = errors.New("another gateway runs with this gateway's id")

type memberState int

const (
	joining memberState = iota
	syncing
	stable
	leaving
	left
)

// Membership is one gateway's member of the gateways' group, as a pure
// state machine: it says which request to send next and learns from the
// answers, so the I/O (a Kafka client) stays at the edge and tests drive it
// with a fake clock. It speaks KIP-429 cooperatively: a shard moves only
// after its holder revoked it, so a membership change stops no other shard.
//
// At most one request is in flight: Next gives it, Answered takes its
// answer. A Membership is not safe for concurrent use.
type Membership struct {
	cfg   MembershipConfig
	clock Clock
	lease *Lease

	state      memberState
	inFlight   bool
	memberID   string
	generation int32
	leader     bool
	members    []kmsg.JoinGroupResponseMember // the leader's, for SyncGroup
	owned      []int                          // ascending
	ownedGen   int32
	nextBeat   time.Duration
	retryAt    time.Duration
	// brokers are this gateway's listeners for the upstream's brokers
	// (SetBrokers); joinedWith what its last JoinGroup said of them.
	brokers, joinedWith map[int32]int32
	err                 error
	changes             []Change
}

// NewMembership returns a membership that has not joined yet, read on
// clock.
func NewMembership(cfg MembershipConfig, clock Clock) *Membership {
	return &Membership{cfg: cfg, clock: clock, lease: NewLease(cfg.Lease, clock), ownedGen: -1}
}

// Lease is the membership's lease on the shards it holds.
func (m *Membership) Lease() *Lease { return m.lease }

// Owned returns the shards held now, ascending, and the generation they
// were received in; nil once the lease has run out.
func (m *Membership) Owned() ([]int, int32) {
	if !m.lease.Held() {
		return nil, -1
	}
	return slices.Clone(m.owned), m.ownedGen
}

// Err is why the membership ended for good (ErrFenced, ErrRefused), or
// nil.
func (m *Membership) Err() error { return m.err }

// Left reports whether the membership has ended: it left the group, or
// was fenced.
func (m *Membership) Left() bool { return m.state == left }

// Changes returns what changed since the last call, oldest first.
func (m *Membership) Changes() []Change {
	c := m.changes
	m.changes = nil
	return c
}

// Leave asks for the membership to end: the shards are revoked at once
// ("leaving", or "lease" when the lease has run out), and Next then gives
// the LeaveGroup.
func (m *Membership) Leave() {
	if m.state == left || m.state == leaving {
		return
	}
	// A lease that ran out while the process was stopped ends first: its
	// shards may be another's already, so this is no clean release.
	m.checkLease(m.clock())
	m.revokeAll("leaving")
	m.state = leaving
}

// SetBrokers tells the membership this gateway's listeners for the
// upstream's brokers (node id to port), which the other gateways route
// clients to. A change is published with a JoinGroup: a stable member
// rejoins (KIP-429 keeps its shards where they are).
func (m *Membership) SetBrokers(ports map[int32]int32) {
	m.brokers = maps.Clone(ports)
}

// Next returns the request to send now, or nil and when to ask again.
func (m *Membership) Next() (kmsg.Request, time.Duration) {
	now := m.clock()
	m.checkLease(now)
	if m.inFlight || m.state == left {
		return nil, now + time.Hour
	}
	if now < m.retryAt {
		return nil, m.retryAt
	}
	var req kmsg.Request
	switch m.state {
	case joining:
		req = m.joinRequest()
	case syncing:
		req = m.syncRequest()
	case stable:
		if !maps.Equal(m.brokers, m.joinedWith) {
			m.state = joining
			req = m.joinRequest()
			break
		}
		if now < m.nextBeat {
			wake := m.nextBeat
			if u := m.lease.Until(); u > 0 && u < wake {
				wake = u
			}
			return nil, wake
		}
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Group, hb.Generation, hb.MemberID, hb.InstanceID = m.cfg.Group, m.generation, m.memberID, &m.cfg.ID
		req = hb
	case leaving:
		lv := kmsg.NewPtrLeaveGroupRequest()
		lv.Group = m.cfg.Group
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID, lm.InstanceID = m.memberID, &m.cfg.ID
		lv.Members = append(lv.Members, lm)
		req = lv
	}
	m.inFlight = true
	return req, now
}

// Answered takes the answer to the request Next gave, sent at sentAt on
// the clock (before its first attempt): resp, or err when no answer came.
func (m *Membership) Answered(sentAt time.Duration, resp kmsg.Response, err error) {
	m.inFlight = false
	now := m.clock()
	if err != nil {
		m.retry(now)
		return
	}
	if m.state == leaving || m.state == left {
		// Whatever was in flight when Leave came no longer counts: a late
		// SyncGroup answer must not hand the shards back.
		if _, ok := resp.(*kmsg.LeaveGroupResponse); ok {
			m.state = left
		}
		return
	}
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		m.joined(sentAt, now, r)
	case *kmsg.SyncGroupResponse:
		m.synced(sentAt, now, r)
	case *kmsg.HeartbeatResponse:
		m.beat(sentAt, now, r)
	}
	m.checkLease(now)
}

func (m *Membership) joinRequest() kmsg.Request {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 2
	meta.Topics = []string{m.cfg.Topic}
	meta.Generation = m.ownedGen
	if len(m.owned) > 0 {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic = m.cfg.Topic
		for _, s := range m.owned {
			op.Partitions = append(op.Partitions, int32(s))
		}
		meta.OwnedPartitions = append(meta.OwnedPartitions, op)
	}
	m.joinedWith = m.brokers
	meta.UserData, _ = json.Marshal(gatewayInfo{ID: m.cfg.ID, Address: m.cfg.Address, Admin: m.cfg.Admin, Brokers: m.brokers, MinFormat: minFormat, MaxFormat: FormatVersion})
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.MemberID, jg.InstanceID = m.cfg.Group, m.memberID, &m.cfg.ID
	jg.SessionTimeoutMillis = int32(m.cfg.SessionTimeout / time.Millisecond)
	jg.RebalanceTimeoutMillis = int32(m.cfg.RebalanceTimeout / time.Millisecond)
	jg.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = ShardsProtocol, meta.AppendTo(nil)
	jg.Protocols = append(jg.Protocols, p)
	return jg
}

func (m *Membership) joined(sentAt, now time.Duration, r *kmsg.JoinGroupResponse) {
	switch err := kerr.ErrorForCode(r.ErrorCode); {
	case err == nil:
	case errors.Is(err, kerr.MemberIDRequired):
		m.memberID = r.MemberID // KIP-394: join again at once with it
		return
	case m.lostOn(err):
		return
	default:
		m.retry(now)
		return
	}
	if len(m.owned) > 0 {
		m.lease.Confirmed(sentAt) // still a member, holding its shards
	}
	m.memberID, m.generation = r.MemberID, r.Generation
	m.leader = r.LeaderID == r.MemberID
	m.members = nil
	if m.leader {
		m.members = r.Members
	}
	m.state = syncing
}

func (m *Membership) syncRequest() kmsg.Request {
	sg := kmsg.NewPtrSyncGroupRequest()
	sg.Group, sg.Generation, sg.MemberID, sg.InstanceID = m.cfg.Group, m.generation, m.memberID, &m.cfg.ID
	pt, pn := "consumer", ShardsProtocol
	sg.ProtocolType, sg.Protocol = &pt, &pn
	if m.leader {
		for memberID, a := range m.assign() {
			ga := kmsg.NewSyncGroupRequestGroupAssignment()
			ga.MemberID, ga.MemberAssignment = memberID, a
			sg.GroupAssignment = append(sg.GroupAssignment, ga)
		}
		slices.SortFunc(sg.GroupAssignment, func(a, b kmsg.SyncGroupRequestGroupAssignment) int {
			return cmp.Compare(a.MemberID, b.MemberID)
		})
	}
	return sg
}

// assign is the leader's work: Balance over the members' claims, and each
// member's assignment, which carries the whole layout so that every
// gateway can route clients to the owner of any group.
func (m *Membership) assign() map[string][]byte {
	type gateway struct {
		memberID string
		info     gatewayInfo
		claim    Member
	}
	gateways := map[string]gateway{} // by gateway id; the first member of an id counts
	format := byte(FormatVersion)
	for _, jm := range m.members {
		var meta kmsg.ConsumerMemberMetadata
		if meta.ReadFrom(jm.ProtocolMetadata) != nil {
			continue // not a gateway's subscription: it gets nothing
		}
		var o gatewayInfo
		if json.Unmarshal(meta.UserData, &o) != nil || o.ID == "" {
			continue
		}
		o.MinFormat, o.MaxFormat = max(o.MinFormat, 1), max(o.MaxFormat, o.MinFormat, 1)
		c := Member{ID: o.ID, ClaimGeneration: meta.Generation}
		for _, op := range meta.OwnedPartitions {
			if op.Topic == m.cfg.Topic {
				for _, p := range op.Partitions {
					c.Claimed = append(c.Claimed, int(p))
				}
			}
		}
		if _, dup := gateways[o.ID]; !dup {
			gateways[o.ID] = gateway{memberID: jm.MemberID, info: o, claim: c}
			format = min(format, o.MaxFormat)
		}
	}
	// Every gateway writes the newest format all of them can read; one
	// whose oldest is newer than that is refused, and gets nothing.
	var ms []Member
	for _, g := range gateways {
		if g.info.MinFormat <= format {
			ms = append(ms, g.claim)
		}
	}
	owners := Balance(m.cfg.Shards, ms)
	shardsOf := map[string][]int{}
	for s, id := range owners {
		if id != "" {
			shardsOf[id] = append(shardsOf[id], s)
		}
	}
	var layout []Owner
	for id, g := range gateways {
		ow := Owner{ID: id, Address: g.info.Address, Admin: g.info.Admin, Shards: shardsOf[id], Brokers: g.info.Brokers}
		if g.info.MinFormat > format {
			ow.Refused = fmt.Sprintf("it writes state records in format %d or newer, and another gateway of the cluster reads only up to format %d: upgrade the others first", g.info.MinFormat, format)
		}
		layout = append(layout, ow)
	}
	slices.SortFunc(layout, func(a, b Owner) int { return cmp.Compare(a.ID, b.ID) })
	ud, _ := json.Marshal(layoutData{Format: format, Owners: layout})
	out := map[string][]byte{}
	for id, g := range gateways {
		a := kmsg.NewConsumerMemberAssignment()
		a.Version = 1
		t := kmsg.NewConsumerMemberAssignmentTopic()
		t.Topic = m.cfg.Topic
		for _, s := range shardsOf[id] {
			t.Partitions = append(t.Partitions, int32(s))
		}
		a.Topics = append(a.Topics, t)
		a.UserData = ud
		out[g.memberID] = a.AppendTo(nil)
	}
	for _, jm := range m.members {
		if _, ok := out[jm.MemberID]; !ok {
			out[jm.MemberID] = nil // a member that is no gateway, or a duplicate id
		}
	}
	return out
}

func (m *Membership) synced(sentAt, now time.Duration, r *kmsg.SyncGroupResponse) {
	switch err := kerr.ErrorForCode(r.ErrorCode); {
	case err == nil:
	case errors.Is(err, kerr.RebalanceInProgress):
		m.state = joining
		return
	case m.lostOn(err):
		return
	default:
		m.state = joining
		m.retry(now)
		return
	}
	var a kmsg.ConsumerMemberAssignment
	var ld layoutData
	var got []int
	if len(r.MemberAssignment) > 0 {
		if err := a.ReadFrom(r.MemberAssignment); err != nil {
			m.state = joining // a leader that is no gateway: ask again
			m.retry(now)
			return
		}
		for _, t := range a.Topics {
			if t.Topic != m.cfg.Topic {
				continue
			}
			for _, p := range t.Partitions {
				if p >= 0 && int(p) < m.cfg.Shards {
					got = append(got, int(p))
				}
			}
		}
		_ = json.Unmarshal(a.UserData, &ld)
	}
	slices.Sort(got)
	got = slices.Compact(got)
	layout := ld.Owners
	for _, o := range layout {
		if o.ID == m.cfg.ID && o.Refused != "" {
			m.revokeAll("refused")
			m.err = fmt.Errorf("gateways' group %s, gateway %s: %w: %s", m.cfg.Group, m.cfg.ID, ErrRefused, o.Refused)
			m.state = leaving
			return
		}
	}
	m.lease.Confirmed(sentAt)
	var revoked, added []int
	for _, s := range m.owned {
		if !slices.Contains(got, s) {
			revoked = append(revoked, s)
		}
	}
	for _, s := range got {
		if !slices.Contains(m.owned, s) {
			added = append(added, s)
		}
	}
	m.owned, m.ownedGen = got, m.generation
	m.changes = append(m.changes, Change{Assigned: added, Generation: m.generation, ReceivedAt: sentAt,
		Revoked: revoked, Reason: reasonIf(revoked, "moved"), Layout: layout, Format: ld.Format})
	m.state = stable
	m.nextBeat = now + m.cfg.HeartbeatInterval
	if len(revoked) > 0 {
		// KIP-429: rejoin at once without them, so that the leader can
		// give them out in the next generation.
		m.state = joining
	}
}

func (m *Membership) beat(sentAt, now time.Duration, r *kmsg.HeartbeatResponse) {
	m.nextBeat = now + m.cfg.HeartbeatInterval
	switch err := kerr.ErrorForCode(r.ErrorCode); {
	case err == nil:
		m.lease.Confirmed(sentAt)
	case errors.Is(err, kerr.RebalanceInProgress):
		// Still a member of this generation, holding its shards: the
		// cooperative rebalance keeps them until the leader moves them.
		m.lease.Confirmed(sentAt)
		m.state = joining
	case m.lostOn(err):
	default:
		m.retry(now)
	}
}

// lostOn handles the errors that say this gateway is no longer the member
// it was, and reports whether err was one.
func (m *Membership) lostOn(err error) bool {
	switch {
	case errors.Is(err, kerr.FencedInstanceID):
		m.revokeAll("fenced")
		m.err = fmt.Errorf("gateways' group %s, instance %s: %w", m.cfg.Group, m.cfg.ID, ErrFenced)
		m.state = left
		return true
	case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.IllegalGeneration):
		m.revokeAll("lost")
		if errors.Is(err, kerr.UnknownMemberID) {
			m.memberID = ""
		}
		m.state = joining
		return true
	}
	return false
}

// checkLease revokes everything once the lease has run out: another
// gateway may be given the shards from now on.
func (m *Membership) checkLease(now time.Duration) {
	if len(m.owned) > 0 && !m.lease.Held() {
		m.revokeAll("lease")
		if m.state == stable || m.state == syncing {
			m.state = joining
		}
	}
}

func (m *Membership) revokeAll(reason string) {
	if len(m.owned) > 0 {
		m.changes = append(m.changes, Change{Revoked: m.owned, Reason: reason, Generation: m.ownedGen})
	}
	m.owned, m.ownedGen = nil, -1
	m.lease.Lost()
}

// retry waits a heartbeat interval (at least 100 ms) before the next
// request: the coordinator was unreachable or not ready.
func (m *Membership) retry(now time.Duration) {
	m.retryAt = now + max(m.cfg.HeartbeatInterval, 100*time.Millisecond)
}

func reasonIf(revoked []int, reason string) string {
	if len(revoked) == 0 {
		return ""
	}
	return reason
}

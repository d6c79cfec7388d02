package coordinator

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// RequestID identifies one request of the driver. The coordinator hands it
// back with the reply, which may come out of a later call: JoinGroup and
// SyncGroup wait.
type RequestID uint64

// Reply is the response to one request.
type Reply struct {
	ID       RequestID
	Response kmsg.Response
}

// Forward is a request the coordinator has checked and that the driver must
// now send upstream (offset commits with generation -1 and no member, group
// and offset deletions). The driver answers the client with
// Complete(upstream response).
type Forward struct {
	ID RequestID
	// Request is what to send upstream, already rewritten.
	Request kmsg.Request
	// merge adds the coordinator's own refusals to the upstream answer.
	merge func(kmsg.Response) kmsg.Response
}

// Complete returns the response for the client: the upstream response with
// the parts the coordinator refused itself merged in. It modifies upstream.
func (f Forward) Complete(upstream kmsg.Response) kmsg.Response {
	if f.merge == nil {
		return upstream
	}
	return f.merge(upstream)
}

// Job asks the driver to run an assignor off the request path and to report
// the result with AssignmentDone. A job whose group has moved on is ignored
// when it completes, so the driver never needs to cancel one.
type Job struct {
	ID         uint64
	Group      string
	Generation int32
	// Assignor is the assignor to run, by name.
	Assignor string
	// Attempt counts fallbacks: 0 for the group's own assignor.
	Attempt int
	// Request carries everything the plugin needs, including the previous
	// assignment the coordinator handed out. Treat it as read-only.
	Request *abi.Request
}

// Output is everything one call produced.
type Output struct {
	Replies  []Reply
	Forwards []Forward
	Jobs     []Job
	Events   []Event
	// NeedMetadata lists subscribed topics no metadata update has covered
	// yet (see Metadata.Covered): a JoinGroup named them, or an assignment
	// waits for them (Config.MetadataWait). The driver should look them up
	// at once.
	NeedMetadata []string
	// NextDeadline is when the driver must call Tick next; zero when no timer
	// is armed.
	NextDeadline time.Time
}

// Coordinator is the classic group coordinator of every group the driver
// routes to it. It is not safe for concurrent use: a driver serialises calls.
type Coordinator struct {
	cfg    Config
	groups map[string]*group
	// protocols is the latest set of protocols plugins serve (Config.Served,
	// then SetServedProtocols).
	protocols ServedProtocols
	meta      *Metadata
	// place caches the ABI form of meta's placement; nil after a change.
	place *placement

	idSeed  uint64
	idCount uint64
	nextJob uint64
	jobs    map[uint64]*jobState
	// covered holds every topic the latest SetMetadata looked up, present
	// or not.
	covered map[string]bool
	// sessionsPaused is set while the upstream is unreachable
	// (PauseSessions): members cannot reach the gateway then, and must not
	// be expired for it.
	sessionsPaused bool

	// timers queues every group with an armed deadline by its earliest
	// one, then by group id, so that groups due at the same instant fire
	// in a fixed order. A group's own deadlines are queued within it, so
	// that every call costs the deadlines it moves.
	timers timerQueue[*group]
	// touched lists the groups the current call may have changed, whose
	// deadlines finish recomputes. A list with a mark in each group, not a
	// set: a map that a call touching every group once grew would cost its
	// size to range over on every later call.
	touched []*group
	// clients indexes the members of every group by client, for
	// FetchRacksSeen.
	clients clientIndex

	now    time.Time
	client Client
	out    Output
	// joinSubs are the subscriptions checkProtocols decoded from
	// joinSubsFor, the JoinGroup being handled, for setProtocols.
	joinSubs    map[string]*kmsg.ConsumerMemberMetadata
	joinSubsFor *kmsg.JoinGroupRequest
}

// New returns a coordinator with no groups. idSeed makes the member ids it
// generates unique across restarts; the driver passes a random value once.
func New(cfg Config, idSeed uint64) (*Coordinator, error) {
	if err := cfg.prepare(); err != nil {
		return nil, err
	}
	return &Coordinator{
		cfg:       cfg,
		groups:    make(map[string]*group),
		protocols: maps.Clone(cfg.Served),
		idSeed:    idSeed,
		jobs:      make(map[uint64]*jobState),
		covered:   make(map[string]bool),
		timers:    timerQueue[*group]{tie: func(a, b *group) bool { return a.id < b.id }},
		clients:   newClientIndex(),
	}, nil
}

// MaxVersion returns the highest version of an API key that Handle accepts,
// and false for keys it does not handle. A gateway advertises these in
// ApiVersions; requests above them get UNSUPPORTED_VERSION.
func MaxVersion(key int16) (int16, bool) {
	switch kmsg.Key(key) {
	case kmsg.JoinGroup:
		return 9, true
	case kmsg.SyncGroup:
		return 5, true
	case kmsg.Heartbeat:
		return 4, true
	case kmsg.LeaveGroup:
		return 5, true
	case kmsg.DescribeGroups:
		return 5, true
	case kmsg.ListGroups:
		return 5, true
	case kmsg.OffsetCommit:
		return 10, true
	case kmsg.TxnOffsetCommit:
		return 4, true
	case kmsg.DeleteGroups:
		return 2, true
	case kmsg.OffsetDelete:
		return 0, true
	}
	return 0, false
}

// Client is what the request header and the connection say about a client.
type Client struct {
	// ID is the request header's client id.
	ID string
	// Host is the client's address, in Kafka's form "/10.0.0.1".
	Host string
	// FetchRack is the KIP-392 rack this client (ID and Host) last sent
	// in a Fetch request, as the driver's book knows it; empty when none
	// is known.
	FetchRack string
}

// Handle processes one request at time now. Requests of other kinds are
// answered with nothing; the driver must not route them here.
func (c *Coordinator) Handle(now time.Time, id RequestID, client Client, req kmsg.Request) Output {
	c.begin(now)
	c.client = client
	if maxV, ok := MaxVersion(req.Key()); ok && req.GetVersion() > maxV {
		c.reply(id, ErrorResponse(req, kerr.UnsupportedVersion.Code))
		return c.finish()
	}
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		c.joinGroup(id, r)
	case *kmsg.SyncGroupRequest:
		c.syncGroup(id, r)
	case *kmsg.HeartbeatRequest:
		c.heartbeat(id, r)
	case *kmsg.LeaveGroupRequest:
		c.leaveGroup(id, r)
	case *kmsg.DescribeGroupsRequest:
		c.describeGroups(id, r)
	case *kmsg.ListGroupsRequest:
		c.listGroups(id, r)
	case *kmsg.OffsetCommitRequest:
		c.offsetCommit(id, r)
	case *kmsg.TxnOffsetCommitRequest:
		c.txnOffsetCommit(id, r)
	case *kmsg.DeleteGroupsRequest:
		c.deleteGroups(id, r)
	case *kmsg.OffsetDeleteRequest:
		c.offsetDelete(id, r)
	}
	return c.finish()
}

// Tick fires every timer due at now: initial rebalance delays, join and
// sync phase timeouts, KIP-394 pending members and session timeouts.
func (c *Coordinator) Tick(now time.Time) Output {
	c.begin(now)
	for {
		g, ok := c.timers.first()
		if !ok || g.next.at.After(now) {
			break
		}
		// Out of the queue until finish queues it again at its next
		// deadline: a group fires at most once per Tick.
		c.timers.remove(g)
		c.touch(g)
		c.tickGroup(g)
	}
	return c.finish()
}

// Groups returns the ids of the groups the coordinator holds, sorted.
func (c *Coordinator) Groups() []string { return c.sortedGroupIDs() }

func (c *Coordinator) begin(now time.Time) {
	c.joinSubs, c.joinSubsFor = nil, nil
	c.now = now
	c.client = Client{}
	c.out = Output{}
}

func (c *Coordinator) finish() Output {
	for _, g := range c.touched {
		g.touched = false
		if c.groups[g.id] != g {
			// Dropped during the call (dropGroup took it off the queue).
			continue
		}
		c.timers.set(g, g.nextDeadline(c.cfg.EmptyGroupRetention))
	}
	clear(c.touched)
	c.touched = c.touched[:0]
	out := c.out
	c.out = Output{}
	if g, ok := c.timers.first(); ok {
		out.NextDeadline = g.next.at
	}
	return out
}

// touch marks a group whose timers the current call may change.
func (c *Coordinator) touch(g *group) {
	if !g.touched {
		g.touched = true
		c.touched = append(c.touched, g)
	}
}

// dropGroup forgets a group and its timers.
func (c *Coordinator) dropGroup(g *group) {
	if c.groups[g.id] == g {
		delete(c.groups, g.id)
	}
	c.timers.remove(g)
	for _, m := range g.members {
		c.clients.remove(m)
	}
}

func (c *Coordinator) reply(id RequestID, resp kmsg.Response) {
	c.out.Replies = append(c.out.Replies, Reply{ID: id, Response: resp})
}

func (c *Coordinator) sortedGroupIDs() []string {
	ids := make([]string, 0, len(c.groups))
	for id := range c.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// nextDeadline returns the group's earliest armed timer, zero when none.
// The queues of pending ids and sessions keep their earliest first, so it
// costs the same in a group of any size.
func (g *group) nextDeadline(retention time.Duration) time.Time {
	next := earliest(g.joinDeadline, g.syncDeadline)
	next = earliest(next, g.metadataDeadline)
	next = earliest(next, g.assignDeadline)
	next = earliest(next, g.pending.next())
	if m, ok := g.sessions.first(); ok {
		next = earliest(next, m.heartbeatDeadline.at)
	}
	return earliest(next, g.retentionEnd(retention))
}

// earliest returns the earlier of two deadlines, a zero one meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// retentionEnd is when an Empty group without members is forgotten; zero
// for any other group.
func (g *group) retentionEnd(retention time.Duration) time.Time {
	if g.state != Empty || len(g.members) != 0 || g.emptySince.IsZero() {
		return time.Time{}
	}
	return g.emptySince.Add(retention)
}

// newMemberID returns prefix-UUID, the form Kafka gives member ids, with a
// UUID derived from the seed so the core stays deterministic.
func (c *Coordinator) newMemberID(prefix string) string {
	c.idCount++
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], splitmix(c.idSeed^c.idCount))
	binary.BigEndian.PutUint64(b[8:], splitmix(c.idSeed+c.idCount*0x9e3779b97f4a7c15))
	b[6] = b[6]&0x0f | 0x40 // version 4, as Java's UUID.randomUUID
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return fmt.Sprintf("%s-%s-%s-%s-%s-%s", prefix, h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func ms(v int32) time.Duration { return time.Duration(v) * time.Millisecond }

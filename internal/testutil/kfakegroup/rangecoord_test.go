package kfakegroup

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// noLeader is the JoinGroup leader id: no member has it, so every member
// sends an empty SyncGroup and takes the assignment the coordinator hands
// out (RATIONALE.md, "Why the JoinGroup leader is nobody").
const noLeader = "server-side-assignment"

// rangeCoordinator is the smallest group coordinator that hands out a
// server-side eager range assignment, for one group. It exists to prove the
// Bridge and the Rig with real kgo clients independently of package
// coordinator. It has no session expiry and no KIP-394 round trip, so tests
// that use it end their members with Leave. Static membership is reduced to
// KIP-345's restart rule: a known instance rejoining while the group is
// stable takes over its old assignment with no rebalance.
type rangeCoordinator struct {
	group      string
	partitions func(topic string) int32
	// window bounds how long a round waits for known members to rejoin.
	window time.Duration
	// expect holds the first round open until this many members joined
	// (or window passes), so a test can start all members in one round.
	expect int

	mu        sync.Mutex
	nextID    int
	gen       int32
	preparing bool
	members   map[string]*rcMember
	joined    map[string]bool
	roundDone chan struct{}
	timer     *time.Timer
	protocol  string
	assigned  map[string][]byte
	refused   int
	static    map[string]string // instance id -> member id
}

type rcMember struct {
	protocols map[string][]byte
	order     []string // protocol names in the member's preference order
}

func newRangeCoordinator(group string, partitions func(string) int32, expect int) *rangeCoordinator {
	return &rangeCoordinator{
		group:      group,
		partitions: partitions,
		window:     3 * time.Second,
		expect:     expect,
		members:    make(map[string]*rcMember),
		assigned:   make(map[string][]byte),
		static:     make(map[string]string),
	}
}

func (rc *rangeCoordinator) Manages(group string) bool { return group == rc.group }

func (rc *rangeCoordinator) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		return rc.join(ctx, r)
	case *kmsg.SyncGroupRequest:
		return rc.sync(r), nil
	case *kmsg.HeartbeatRequest:
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = rc.check(r.MemberID, r.Generation)
		return resp, nil
	case *kmsg.LeaveGroupRequest:
		return rc.leave(r), nil
	case *kmsg.DescribeGroupsRequest:
		return rc.describe(r), nil
	case *kmsg.ListGroupsRequest:
		resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType = rc.group, "consumer"
		resp.Groups = append(resp.Groups, g)
		return resp, nil
	}
	return nil, fmt.Errorf("rangeCoordinator: unexpected %s", kmsg.NameForKey(req.Key()))
}

func (rc *rangeCoordinator) FenceCommit(_ context.Context, r *kmsg.OffsetCommitRequest) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if _, ok := rc.members[r.MemberID]; !ok {
		rc.refused++
		return kerr.UnknownMemberID
	}
	// A commit with the current generation is accepted while preparing a
	// rebalance: an eager member commits in its revoke callback.
	if r.Generation != rc.gen {
		rc.refused++
		return kerr.IllegalGeneration
	}
	return nil
}

func (rc *rangeCoordinator) refusedCommits() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.refused
}

func (rc *rangeCoordinator) join(ctx context.Context, r *kmsg.JoinGroupRequest) (kmsg.Response, error) {
	rc.mu.Lock()
	id := r.MemberID
	if id == "" {
		rc.nextID++
		id = fmt.Sprintf("member-%d", rc.nextID)
	}
	m := &rcMember{protocols: make(map[string][]byte)}
	for _, p := range r.Protocols {
		m.protocols[p.Name] = p.Metadata
		m.order = append(m.order, p.Name)
	}
	if r.InstanceID != nil {
		old, known := rc.static[*r.InstanceID]
		rc.static[*r.InstanceID] = id
		if known && old != id && rc.members[old] != nil && !rc.preparing {
			// KIP-345 restart: the new member id inherits the old
			// one's assignment in the current generation.
			delete(rc.members, old)
			rc.members[id] = m
			rc.assigned[id] = rc.assigned[old]
			delete(rc.assigned, old)
			resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.Generation = rc.gen
			resp.ProtocolType = kmsg.StringPtr("consumer")
			resp.Protocol = kmsg.StringPtr(rc.protocol)
			resp.LeaderID = noLeader
			resp.MemberID = id
			rc.mu.Unlock()
			return resp, nil
		}
	}
	rc.members[id] = m
	if !rc.preparing {
		rc.startRound()
	}
	rc.joined[id] = true
	round := rc.roundDone
	rc.maybeComplete()
	rc.mu.Unlock()

	select {
	case <-round:
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	rc.mu.Lock()
	defer rc.mu.Unlock()
	resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
	if _, ok := rc.members[id]; !ok {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil
	}
	resp.Generation = rc.gen
	resp.ProtocolType = kmsg.StringPtr("consumer")
	resp.Protocol = kmsg.StringPtr(rc.protocol)
	resp.LeaderID = noLeader
	resp.MemberID = id
	return resp, nil
}

// startRound opens a join phase. Callers hold rc.mu.
func (rc *rangeCoordinator) startRound() {
	rc.preparing = true
	rc.joined = make(map[string]bool)
	done := make(chan struct{})
	rc.roundDone = done
	rc.timer = time.AfterFunc(rc.window, func() {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if rc.roundDone == done && rc.preparing {
			rc.complete()
		}
	})
}

// maybeComplete ends the join phase once every known member has rejoined.
// Callers hold rc.mu.
func (rc *rangeCoordinator) maybeComplete() {
	if !rc.preparing || len(rc.joined) < rc.expect {
		return
	}
	for id := range rc.members {
		if !rc.joined[id] {
			return
		}
	}
	rc.complete()
}

// complete drops members that did not rejoin, starts a new generation and
// computes its assignment at once, so the group is Stable before any
// SyncGroup arrives. Callers hold rc.mu.
func (rc *rangeCoordinator) complete() {
	for id := range rc.members {
		if !rc.joined[id] {
			delete(rc.members, id)
		}
	}
	rc.timer.Stop()
	rc.preparing = false
	rc.expect = 0
	rc.gen++
	rc.protocol = rc.chooseProtocol()
	rc.assigned = rc.assign()
	close(rc.roundDone)
}

func (rc *rangeCoordinator) chooseProtocol() string {
	ids := slices.Sorted(maps.Keys(rc.members))
	if len(ids) == 0 {
		return ""
	}
	for _, name := range rc.members[ids[0]].order {
		all := true
		for _, id := range ids {
			if _, ok := rc.members[id].protocols[name]; !ok {
				all = false
			}
		}
		if all {
			return name
		}
	}
	return ""
}

// assign computes a range assignment: for each topic, its subscribers in
// member-id order take contiguous runs, the first ones one extra.
func (rc *rangeCoordinator) assign() map[string][]byte {
	byMember := make(map[string]map[string][]int32)
	subscribers := make(map[string][]string)
	ids := slices.Sorted(maps.Keys(rc.members))
	for _, id := range ids {
		byMember[id] = make(map[string][]int32)
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(rc.members[id].protocols[rc.protocol]); err != nil {
			continue // such a member gets an empty assignment
		}
		for _, t := range meta.Topics {
			subscribers[t] = append(subscribers[t], id)
		}
	}
	for t, subs := range subscribers {
		n := rc.partitions(t)
		k := int32(len(subs))
		var next int32
		for i, id := range subs {
			take := n / k
			if int32(i) < n%k {
				take++
			}
			for p := next; p < next+take; p++ {
				byMember[id][t] = append(byMember[id][t], p)
			}
			next += take
		}
	}
	out := make(map[string][]byte, len(ids))
	for _, id := range ids {
		a := kmsg.NewConsumerMemberAssignment()
		for _, t := range slices.Sorted(maps.Keys(byMember[id])) {
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = t, byMember[id][t]
			a.Topics = append(a.Topics, at)
		}
		out[id] = a.AppendTo(nil)
	}
	return out
}

// check is the generation and member fencing shared by Heartbeat and
// SyncGroup.
func (rc *rangeCoordinator) check(member string, gen int32) int16 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	switch {
	case rc.members[member] == nil:
		return kerr.UnknownMemberID.Code
	case rc.preparing:
		return kerr.RebalanceInProgress.Code
	case gen != rc.gen:
		return kerr.IllegalGeneration.Code
	}
	return 0
}

func (rc *rangeCoordinator) sync(r *kmsg.SyncGroupRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
	if resp.ErrorCode = rc.check(r.MemberID, r.Generation); resp.ErrorCode != 0 {
		return resp
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	resp.ProtocolType = kmsg.StringPtr("consumer")
	resp.Protocol = kmsg.StringPtr(rc.protocol)
	resp.MemberAssignment = rc.assigned[r.MemberID]
	return resp
}

func (rc *rangeCoordinator) leave(r *kmsg.LeaveGroupRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
	ids := []string{r.MemberID}
	if r.Version >= 3 {
		ids = ids[:0]
		for _, m := range r.Members {
			ids = append(ids, m.MemberID)
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	removed := false
	for _, id := range ids {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID = id
		if rc.members[id] == nil {
			rm.ErrorCode = kerr.UnknownMemberID.Code
		} else {
			delete(rc.members, id)
			delete(rc.joined, id)
			removed = true
		}
		resp.Members = append(resp.Members, rm)
	}
	if r.Version < 3 && len(resp.Members) == 1 {
		resp.ErrorCode = resp.Members[0].ErrorCode
		resp.Members = nil
	}
	switch {
	case !removed:
	case rc.preparing:
		rc.maybeComplete()
	case len(rc.members) > 0:
		rc.startRound()
	}
	return resp
}

func (rc *rangeCoordinator) describe(r *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, name := range r.Groups {
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group = name
		switch {
		case name != rc.group:
			g.State = "Dead"
		case rc.preparing:
			g.State = "PreparingRebalance"
		case len(rc.members) == 0:
			g.State = "Empty"
		default:
			g.State = "Stable"
		}
		if name == rc.group {
			g.ProtocolType, g.Protocol = "consumer", rc.protocol
			for _, id := range slices.Sorted(maps.Keys(rc.members)) {
				m := kmsg.NewDescribeGroupsResponseGroupMember()
				m.MemberID = id
				m.ProtocolMetadata = rc.members[id].protocols[rc.protocol]
				m.MemberAssignment = rc.assigned[id]
				g.Members = append(g.Members, m)
			}
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp
}

package bench

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// groupPath turns JoinGroup members into SyncGroup assignments the way the
// daemon does: a coordinator.Coordinator that assigns server-side, driven
// with a fake clock and the assignor called in line, as the driver would
// call it off its loop. So what bench times is the daemon's own path:
// decoding each member's subscription at its JoinGroup, building the
// plugin's request from the group's state, validating the answer,
// withholding for KIP-429, and encoding each member's SyncGroup assignment.
//
// One groupPath serves the phases of one run of one side: the rejoin phase
// finds the group the initial phase left, as a member's rejoin finds it in
// the daemon, so owned partitions from the generation before count.
type groupPath struct {
	protocol string
	assign   func(*abi.Request) (*abi.Response, error)
	md       *coordinator.Metadata
	cfg      coordinator.Config

	coord *coordinator.Coordinator
	now   time.Time
	next  coordinator.RequestID
	// ids maps a bench member id to the member id the coordinator gave it.
	ids map[string]string
	gen int32
}

func newGroupPath(protocol, assignor string, rebalance abi.RebalanceProtocol, md *coordinator.Metadata, assign func(*abi.Request) (*abi.Response, error)) *groupPath {
	coop := []string{}
	if rebalance == abi.Cooperative {
		coop = []string{protocol}
	}
	return &groupPath{
		protocol: protocol, assign: assign, md: md,
		cfg: coordinator.Config{
			Served:  coordinator.ServedProtocols{protocol: assignor},
			Default: coordinator.GroupConfig{InitialRebalanceDelay: coordinator.DefaultInitialRebalanceDelay, CooperativeProtocols: coop},
		},
		now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		ids: make(map[string]string),
	}
}

// metadataOf is cluster metadata with the given partition counts, one
// leaderless partition each: the cases carry no replica placement.
func metadataOf(partitions map[string]int32) *coordinator.Metadata {
	md := &coordinator.Metadata{Topics: make(map[string]coordinator.TopicMetadata, len(partitions))}
	for t, n := range partitions {
		md.Topics[t] = coordinator.TopicMetadata{Partitions: make([]coordinator.PartitionMetadata, n)}
	}
	return md
}

// pending collects what one call into the coordinator produced.
type pending struct {
	replies  map[coordinator.RequestID]kmsg.Response
	jobs     []coordinator.Job
	deadline time.Time
}

func (p *pending) take(out coordinator.Output) {
	for _, r := range out.Replies {
		p.replies[r.ID] = r.Response
	}
	p.jobs = append(p.jobs, out.Jobs...)
	p.deadline = out.NextDeadline
}

func (gp *groupPath) handle(p *pending, req kmsg.Request) coordinator.RequestID {
	gp.next++
	p.take(gp.coord.Handle(gp.now, gp.next, coordinator.Client{ID: "bench", Host: "/127.0.0.1"}, req))
	return gp.next
}

// run is one phase: members that left send LeaveGroup, every member joins
// (a new one through KIP-394's MEMBER_ID_REQUIRED round trip), the plugin
// answers the coordinator's job, and every member syncs.
func (gp *groupPath) run(group string, members []kmsg.JoinGroupResponseMember) ([]kmsg.SyncGroupRequestGroupAssignment, error) {
	p := &pending{replies: make(map[coordinator.RequestID]kmsg.Response)}
	if gp.coord == nil {
		c, err := coordinator.New(gp.cfg, 1)
		if err != nil {
			return nil, err
		}
		gp.coord = c
		p.take(c.SetMetadata(gp.now, gp.md))
	}
	present := make(map[string]bool, len(members))
	for _, m := range members {
		present[m.MemberID] = true
	}
	for benchID, id := range gp.ids {
		if !present[benchID] {
			leave := kmsg.NewPtrLeaveGroupRequest()
			leave.SetVersion(5)
			leave.Group = group
			lm := kmsg.NewLeaveGroupRequestMember()
			lm.MemberID = id
			leave.Members = append(leave.Members, lm)
			gp.handle(p, leave)
			delete(gp.ids, benchID)
		}
	}
	joins := make([]coordinator.RequestID, len(members))
	for i, m := range members {
		id, known := gp.ids[m.MemberID]
		req := gp.joinRequest(group, id, m)
		rid := gp.handle(p, req)
		if !known && m.InstanceID == nil {
			// KIP-394: a new dynamic member learns its id first.
			resp, ok := p.replies[rid].(*kmsg.JoinGroupResponse)
			if !ok || resp.ErrorCode != kerr.MemberIDRequired.Code {
				return nil, fmt.Errorf("member %s: first JoinGroup answered %v", m.MemberID, p.replies[rid])
			}
			id = resp.MemberID
			rid = gp.handle(p, gp.joinRequest(group, id, m))
		}
		joins[i] = rid
	}
	// A member whose JoinGroup changed nothing was answered at once with the
	// generation it had; once a later member's changes start a rebalance,
	// its next heartbeat says so and it joins again.
	for i, m := range members {
		if resp, ok := p.replies[joins[i]].(*kmsg.JoinGroupResponse); ok && resp.ErrorCode == 0 && resp.Generation == gp.gen && gp.gen > 0 {
			joins[i] = gp.handle(p, gp.joinRequest(group, resp.MemberID, m))
		}
	}
	// A new group's join phase waits out the initial delay, and once more
	// for the members that arrived during it (Kafka's InitialDelayedJoin).
	for range 3 {
		if len(p.jobs) > 0 || p.deadline.IsZero() {
			break
		}
		gp.now = p.deadline
		p.take(gp.coord.Tick(gp.now))
	}
	for i, m := range members {
		resp, ok := p.replies[joins[i]].(*kmsg.JoinGroupResponse)
		if !ok || resp.ErrorCode != 0 {
			return nil, fmt.Errorf("member %s: JoinGroup answered %v", m.MemberID, p.replies[joins[i]])
		}
		gp.ids[m.MemberID] = resp.MemberID
		gp.gen = resp.Generation
	}
	if len(p.jobs) != 1 {
		return nil, fmt.Errorf("the join phase issued %d assignment jobs, want 1", len(p.jobs))
	}
	j := p.jobs[0]
	p.jobs = nil
	resp, err := gp.assign(j.Request)
	if err != nil {
		return nil, err
	}
	p.take(gp.coord.AssignmentDone(gp.now, j.ID, resp, nil))
	if j := p.jobs; len(j) > 0 {
		return nil, fmt.Errorf("the coordinator refused the assignment and asked %s", j[0].Assignor)
	}
	out := make([]kmsg.SyncGroupRequestGroupAssignment, 0, len(members))
	for _, m := range members {
		sync := kmsg.NewPtrSyncGroupRequest()
		sync.SetVersion(5)
		sync.Group, sync.MemberID, sync.Generation = group, gp.ids[m.MemberID], gp.gen
		sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr(gp.protocol)
		rid := gp.handle(p, sync)
		resp, ok := p.replies[rid].(*kmsg.SyncGroupResponse)
		if !ok || resp.ErrorCode != 0 {
			return nil, fmt.Errorf("member %s: SyncGroup answered %v", m.MemberID, p.replies[rid])
		}
		sa := kmsg.NewSyncGroupRequestGroupAssignment()
		sa.MemberID, sa.MemberAssignment = m.MemberID, resp.MemberAssignment
		out = append(out, sa)
	}
	// A second KIP-429 round the coordinator started after the syncs is
	// the next phase's business, as it would be the members'.
	slices.SortFunc(out, func(a, b kmsg.SyncGroupRequestGroupAssignment) int { return cmp.Compare(a.MemberID, b.MemberID) })
	return out, nil
}

func (gp *groupPath) joinRequest(group, id string, m kmsg.JoinGroupResponseMember) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.SetVersion(9)
	r.Group, r.MemberID, r.InstanceID = group, id, m.InstanceID
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 45000, 300000
	r.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = gp.protocol, m.ProtocolMetadata
	r.Protocols = append(r.Protocols, p)
	return r
}

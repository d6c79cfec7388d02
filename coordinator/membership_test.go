package coordinator

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

func oneMember(t *testing.T) (*harness, *simClient) {
	t.Helper()
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	settle(h, a)
	if a.phase != stable {
		t.Fatalf("setup: phase %v", a.phase)
	}
	return h, a
}

func TestSyncAndHeartbeat_Errors(t *testing.T) {
	h, a := oneMember(t)
	gen := a.generation
	other := "roundrobin"
	tests := []struct {
		name string
		req  kmsg.Request
		want int16
	}{
		{"sync: empty group id", syncReq(5, "", a.memberID, gen), kerr.InvalidGroupID.Code},
		{"sync: unknown group", syncReq(5, "nope", a.memberID, gen), kerr.UnknownMemberID.Code},
		{"sync: unknown member", syncReq(5, "g", "nobody", gen), kerr.UnknownMemberID.Code},
		{"sync: wrong generation", syncReq(5, "g", a.memberID, gen+1), kerr.IllegalGeneration.Code},
		{"sync: wrong protocol name", func() kmsg.Request {
			r := syncReq(5, "g", a.memberID, gen)
			r.Protocol = &other
			return r
		}(), kerr.InconsistentGroupProtocol.Code},
		{"sync: version above supported", syncReq(6, "g", a.memberID, gen), kerr.UnsupportedVersion.Code},
		{"heartbeat: empty group id", hbReq("", a.memberID, gen), kerr.InvalidGroupID.Code},
		{"heartbeat: unknown group", hbReq("nope", a.memberID, gen), kerr.UnknownMemberID.Code},
		{"heartbeat: unknown member", hbReq("g", "nobody", gen), kerr.UnknownMemberID.Code},
		{"heartbeat: wrong generation", hbReq("g", a.memberID, gen-1), kerr.IllegalGeneration.Code},
		{"heartbeat: version above supported", func() kmsg.Request { r := hbReq("g", a.memberID, gen); r.Version = 5; return r }(), kerr.UnsupportedVersion.Code},
		{"heartbeat: ok in Stable", hbReq("g", a.memberID, gen), 0},
	}
	for _, tt := range tests {
		var code int16
		switch r := h.do(a.client, tt.req).(type) {
		case *kmsg.SyncGroupResponse:
			code = r.ErrorCode
		case *kmsg.HeartbeatResponse:
			code = r.ErrorCode
		}
		if code != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, kerr.ErrorForCode(code), kerr.ErrorForCode(tt.want))
		}
	}
	if st := h.c.groups["g"].state; st != Stable {
		t.Fatalf("bad requests changed the group: %v", st)
	}
}

func TestPreparingRebalance_SyncAndHeartbeatSayRebalanceInProgress(t *testing.T) {
	h, a := oneMember(t)
	b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
	b.join()
	if code := h.do(a.client, syncReq(5, "g", a.memberID, a.generation)).(*kmsg.SyncGroupResponse).ErrorCode; code != kerr.RebalanceInProgress.Code {
		t.Fatalf("sync: %v", kerr.ErrorForCode(code))
	}
	deadline := h.c.groups["g"].members[a.memberID].heartbeatDeadline.at
	h.advance(time.Second)
	if code := h.do(a.client, hbReq("g", a.memberID, a.generation)).(*kmsg.HeartbeatResponse).ErrorCode; code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(code))
	}
	if !h.c.groups["g"].members[a.memberID].heartbeatDeadline.at.After(deadline) {
		t.Fatal("the heartbeat during PreparingRebalance did not extend the session")
	}
}

func TestLeaveGroup(t *testing.T) {
	h, a := oneMember(t)
	b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
	settle(h, a, b)
	// v0-2: one member, the error at the top level.
	v1 := kmsg.NewPtrLeaveGroupRequest()
	v1.Version, v1.Group, v1.MemberID = 1, "g", "nobody"
	if code := h.do(a.client, v1).(*kmsg.LeaveGroupResponse).ErrorCode; code != kerr.UnknownMemberID.Code {
		t.Fatalf("v1 unknown member: %v", kerr.ErrorForCode(code))
	}
	// v3+: a batch, each member with its own code.
	wrong := "not-b"
	batch := kmsg.NewPtrLeaveGroupRequest()
	batch.Version, batch.Group = 5, "g"
	batch.Members = []kmsg.LeaveGroupRequestMember{{MemberID: a.memberID}, {MemberID: "ghost"}, {MemberID: b.memberID, InstanceID: &wrong}}
	resp := h.do(a.client, batch).(*kmsg.LeaveGroupResponse)
	want := []int16{0, kerr.UnknownMemberID.Code, kerr.UnknownMemberID.Code}
	for i, m := range resp.Members {
		if m.ErrorCode != want[i] {
			t.Errorf("member %d: %v, want %v", i, kerr.ErrorForCode(m.ErrorCode), kerr.ErrorForCode(want[i]))
		}
	}
	g := h.c.groups["g"]
	if g.members[a.memberID] != nil || g.state != PreparingRebalance {
		t.Fatalf("a not removed or no rebalance: %v", g.state)
	}
	// Unknown group: UNKNOWN_MEMBER_ID per member.
	batch.Group = "nope"
	resp = h.do(a.client, batch).(*kmsg.LeaveGroupResponse)
	if resp.ErrorCode != 0 || resp.Members[0].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("unknown group: %+v", resp)
	}
}

func TestTimers(t *testing.T) {
	t.Run("session timeout removes a silent member and rebalances", func(t *testing.T) {
		h, a := oneMember(t)
		b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
		settle(h, a, b)
		for range 3 {
			h.advance(4 * time.Second)
			a.heartbeat()
		}
		g := h.c.groups["g"]
		if g.members[b.memberID] != nil || g.members[a.memberID] == nil {
			t.Fatal("wrong member expired")
		}
		// a alone: the join phase completes as soon as it rejoins.
		if a.phase != idle {
			t.Fatalf("a not told to rejoin: %v", a.phase)
		}
		settle(h, a)
		if count(a.held) != 4 {
			t.Fatalf("a holds %v", a.held)
		}
	})
	t.Run("members that do not sync within the rebalance timeout are removed", func(t *testing.T) {
		h, a := oneMember(t)
		b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
		b.join()
		a.heartbeat()
		a.join()
		a.poll()
		b.poll()
		a.sync() // b never syncs
		for range 20 {
			h.advance(4 * time.Second)
			a.heartbeat()
			if a.phase == idle {
				break
			}
		}
		if h.c.groups["g"].members[b.memberID] != nil {
			t.Fatal("b kept although it never synced")
		}
		if a.phase != idle {
			t.Fatal("no rebalance after the sync timeout")
		}
	})
	t.Run("dynamic members that do not rejoin are removed when the join phase times out", func(t *testing.T) {
		h, a := oneMember(t)
		b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
		b.join()
		// a keeps heartbeating (REBALANCE_IN_PROGRESS) but does not rejoin.
		for range 16 {
			h.advance(4 * time.Second)
			h.do(a.client, hbReq("g", a.memberID, a.generation))
		}
		b.poll()
		if b.phase != joined || h.c.groups["g"].members[a.memberID] != nil {
			t.Fatalf("b %v, a still member: %v", b.phase, h.c.groups["g"].members[a.memberID] != nil)
		}
	})
	t.Run("a member awaiting its join answer does not expire", func(t *testing.T) {
		h, a := oneMember(t)
		s := newSim(h, "s", "g", []string{"range"}, []string{"t"})
		s.instance = "si"
		settle(h, a, s)
		a.heartbeat()
		a.join() // parked: s is static and does not rejoin
		for range 5 {
			h.advance(4 * time.Second)
			h.do(s.client, &kmsg.HeartbeatRequest{Version: 4, Group: "g", MemberID: s.memberID, Generation: s.generation, InstanceID: &s.instance})
		}
		if h.c.groups["g"].members[a.memberID] == nil {
			t.Fatal("a expired while its JoinGroup was parked")
		}
	})
}

func TestProtocolChoice(t *testing.T) {
	tests := []struct {
		name     string
		priority []string
		members  [][]string
		want     string
		server   bool
	}{
		{"vote: most members' first choice", nil, [][]string{{"roundrobin", "range"}, {"roundrobin", "range"}, {"range", "roundrobin"}}, "roundrobin", true},
		{"priority beats the vote", []string{"range"}, [][]string{{"roundrobin", "range"}, {"roundrobin", "range"}}, "range", true},
		{"priority names no candidate: vote", []string{"sticky"}, [][]string{{"roundrobin", "range"}, {"roundrobin", "range"}, {"range", "roundrobin"}}, "roundrobin", true},
		{"only common protocols are candidates", nil, [][]string{{"roundrobin", "range"}, {"range"}}, "range", true},
		{"a name no plugin serves is classic", nil, [][]string{{"custom"}}, "custom", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{Default: GroupConfig{Priority: tt.priority}})
			h.setMetadata(meta(map[string]int{"t": 4}))
			var sims []*simClient
			for i, ps := range tt.members {
				s := newSim(h, string(rune('a'+i)), "g", ps, []string{"t"})
				s.join()
				sims = append(sims, s)
			}
			h.advance(2 * DefaultInitialRebalanceDelay)
			for _, s := range sims {
				s.poll()
				if s.phase != joined {
					t.Fatalf("%s did not join: %v", s.name, s.phase)
				}
			}
			g := h.c.groups["g"]
			if g.protocol != tt.want || g.serverSide != tt.server {
				t.Fatalf("protocol %q server-side %v, want %q %v", g.protocol, g.serverSide, tt.want, tt.server)
			}
		})
	}
}

func TestClassicGroup_LeaderAssignsAsInKafka(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	conn := func(member string) *kmsg.JoinGroupRequest {
		r := joinReq(9, "connect", member, "", proto{"sessioned", []byte("opaque")})
		r.ProtocolType = "connect"
		return r
	}
	var ids []string
	var joins []RequestID
	for _, c := range []string{"w1", "w2"} {
		r := h.do(Client{ID: c}, conn("")).(*kmsg.JoinGroupResponse)
		ids = append(ids, r.MemberID)
		joins = append(joins, h.send(Client{ID: c}, conn(r.MemberID)))
	}
	h.advance(0)
	var leader string
	for i, j := range joins {
		resp, _ := h.take(j)
		r := resp.(*kmsg.JoinGroupResponse)
		if r.ErrorCode != 0 || r.LeaderID == ServerLeaderID {
			t.Fatalf("join: %v leader %q", kerr.ErrorForCode(r.ErrorCode), r.LeaderID)
		}
		leader = r.LeaderID
		if (ids[i] == leader) != (len(r.Members) == 2) {
			t.Fatalf("member %s: %d members in its answer, leader %s", ids[i], len(r.Members), leader)
		}
	}
	follower := ids[0]
	if follower == leader {
		follower = ids[1]
	}
	fs := h.send(Client{}, syncReq(5, "connect", follower, 1))
	if _, ok := h.take(fs); ok {
		t.Fatal("follower sync answered before the leader's")
	}
	ls := syncReq(5, "connect", leader, 1)
	ls.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: follower, MemberAssignment: []byte("yours")}}
	lr := h.do(Client{}, ls).(*kmsg.SyncGroupResponse)
	fr, ok := h.take(fs)
	if !ok || string(fr.(*kmsg.SyncGroupResponse).MemberAssignment) != "yours" || len(lr.MemberAssignment) != 0 {
		t.Fatalf("follower %v %+v, leader %q", ok, fr, lr.MemberAssignment)
	}
}

func TestAssignment_FallbackChainEndsInAValidAssignment(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1, Assignor: "fancy", Fallback: "roundrobin"}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	h.autoJobs = false
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
	a.join()
	b.join()
	h.advance(0)
	var order []string
	fail := []func(Job) (*abi.Response, error){
		func(Job) (*abi.Response, error) { return nil, errors.New("trap") },
		func(j Job) (*abi.Response, error) {
			// Invalid: one partition twice.
			return &abi.Response{Members: []abi.MemberAssignment{{Member: 0, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{1}}}}, {Member: 1, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{1}}}}}}, nil
		},
		func(Job) (*abi.Response, error) { return &abi.Response{Error: "cannot"}, nil },
	}
	for _, f := range fail {
		if len(h.jobs) != 1 {
			t.Fatalf("jobs %d", len(h.jobs))
		}
		j := h.jobs[0]
		h.jobs = nil
		order = append(order, j.Assignor)
		resp, err := f(j)
		h.absorb(h.c.AssignmentDone(h.now, j.ID, resp, err))
	}
	if want := []string{"fancy", "roundrobin", "range"}; len(order) != 3 || order[0] != want[0] || order[1] != want[1] || order[2] != want[2] {
		t.Fatalf("assignor order %v, want %v", order, want)
	}
	if len(h.jobs) != 0 {
		t.Fatal("a job after the last resort")
	}
	settle(h, a, b)
	if count(a.held)+count(b.held) != 4 || count(a.held) != 2 {
		t.Fatalf("last-resort assignment a %v b %v", a.held, b.held)
	}
}

func TestUnsupportedVersions(t *testing.T) {
	h := newHarness(t, Config{})
	tests := []kmsg.Request{
		&kmsg.LeaveGroupRequest{Version: 6, Group: "g"},
		&kmsg.DescribeGroupsRequest{Version: 6, Groups: []string{"g"}},
		&kmsg.ListGroupsRequest{Version: 6},
		&kmsg.OffsetCommitRequest{Version: 11, Group: "g", Topics: []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{}}}}},
		&kmsg.DeleteGroupsRequest{Version: 3, Groups: []string{"g"}},
		&kmsg.OffsetDeleteRequest{Version: 1, Group: "g"},
	}
	for _, req := range tests {
		resp := h.do(Client{}, req)
		var code int16
		switch r := resp.(type) {
		case *kmsg.LeaveGroupResponse:
			code = r.ErrorCode
		case *kmsg.DescribeGroupsResponse:
			code = r.Groups[0].ErrorCode
		case *kmsg.ListGroupsResponse:
			code = r.ErrorCode
		case *kmsg.OffsetCommitResponse:
			code = r.Topics[0].Partitions[0].ErrorCode
		case *kmsg.DeleteGroupsResponse:
			code = r.Groups[0].ErrorCode
		case *kmsg.OffsetDeleteResponse:
			code = r.ErrorCode
		}
		if code != kerr.UnsupportedVersion.Code {
			t.Errorf("%T v%d: %v", req, req.GetVersion(), kerr.ErrorForCode(code))
		}
		if max, _ := MaxVersion(req.Key()); resp.GetVersion() > max {
			t.Errorf("%T answered at v%d, above what is supported", req, resp.GetVersion())
		}
	}
}

func TestDescribeAndListGroups(t *testing.T) {
	h, a := oneMember(t)
	d := h.do(Client{}, &kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"g", "nope"}}).(*kmsg.DescribeGroupsResponse)
	g0, g1 := d.Groups[0], d.Groups[1]
	if g0.State != "Stable" || g0.Protocol != "range" || g0.ProtocolType != "consumer" || len(g0.Members) != 1 {
		t.Fatalf("describe g: %+v", g0)
	}
	if m := g0.Members[0]; m.MemberID != a.memberID || m.ClientID != "a" || len(decodeAssignment(t, m.MemberAssignment)["t"]) != 4 || len(m.ProtocolMetadata) == 0 {
		t.Fatalf("describe member: %+v", m)
	}
	if g1.State != "Dead" || g1.ErrorCode != 0 {
		t.Fatalf("describe unknown: %+v", g1)
	}
	l := h.do(Client{}, &kmsg.ListGroupsRequest{Version: 5, StatesFilter: []string{"stable"}}).(*kmsg.ListGroupsResponse)
	if len(l.Groups) != 1 || l.Groups[0].Group != "g" || l.Groups[0].GroupState != "Stable" || l.Groups[0].GroupType != "classic" {
		t.Fatalf("list: %+v", l.Groups)
	}
	l = h.do(Client{}, &kmsg.ListGroupsRequest{Version: 5, StatesFilter: []string{"Empty"}}).(*kmsg.ListGroupsResponse)
	if len(l.Groups) != 0 {
		t.Fatalf("state filter ignored: %+v", l.Groups)
	}
}

func TestJoin_KnownMemberRejoiningWithSameMetadataGetsTheCurrentGeneration(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.autoJobs = false
	h.setMetadata(meta(map[string]int{"t": 4}))
	r := h.do(Client{ID: "a"}, joinReq(9, "g", "", "", rangeProto("t"))).(*kmsg.JoinGroupResponse)
	h.send(Client{ID: "a"}, joinReq(9, "g", r.MemberID, "", rangeProto("t")))
	h.advance(0)
	// CompletingRebalance: the member lost its answer and asks again.
	again := h.do(Client{ID: "a"}, joinReq(9, "g", r.MemberID, "", rangeProto("t"))).(*kmsg.JoinGroupResponse)
	if again.ErrorCode != 0 || again.Generation != 1 || h.c.groups["g"].state != CompletingRebalance {
		t.Fatalf("rejoin in CompletingRebalance: %v gen %d state %v", kerr.ErrorForCode(again.ErrorCode), again.Generation, h.c.groups["g"].state)
	}
	h.runJobs()
	h.do(Client{ID: "a"}, syncReq(5, "g", r.MemberID, 1)) // the leader's sync makes it Stable
	// Stable, same metadata: the current generation again, no rebalance.
	again = h.do(Client{ID: "a"}, joinReq(9, "g", r.MemberID, "", rangeProto("t"))).(*kmsg.JoinGroupResponse)
	if again.ErrorCode != 0 || again.Generation != 1 || h.c.groups["g"].state != Stable {
		t.Fatalf("rejoin in Stable: %v gen %d state %v", kerr.ErrorForCode(again.ErrorCode), again.Generation, h.c.groups["g"].state)
	}
	// Different metadata: a rebalance.
	h.send(Client{ID: "a"}, joinReq(9, "g", r.MemberID, "", rangeProto("t", "u")))
	if st := h.c.groups["g"].state; st == Stable {
		t.Fatal("changed subscription did not rebalance")
	}
}

func TestClassicGroup_LeaderRejoiningInStableForcesRebalance(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	p := proto{"stream", []byte("streams user data")}
	r := h.do(Client{ID: "s"}, joinReq(9, "streams", "", "", p)).(*kmsg.JoinGroupResponse)
	j := h.send(Client{ID: "s"}, joinReq(9, "streams", r.MemberID, "", p))
	h.advance(0)
	resp, _ := h.take(j)
	jr := resp.(*kmsg.JoinGroupResponse)
	if jr.LeaderID != r.MemberID || len(jr.Members) != 1 || string(jr.Members[0].ProtocolMetadata) != "streams user data" {
		t.Fatalf("streams leader answer: %+v", jr)
	}
	ls := syncReq(5, "streams", r.MemberID, 1)
	ls.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: r.MemberID, MemberAssignment: []byte("mine")}}
	if got := h.do(Client{}, ls).(*kmsg.SyncGroupResponse); string(got.MemberAssignment) != "mine" {
		t.Fatalf("leader assignment %q", got.MemberAssignment)
	}
	h.send(Client{ID: "s"}, joinReq(9, "streams", r.MemberID, "", p))
	if g := h.c.groups["streams"]; g.generation != 2 {
		t.Fatalf("leader rejoin in Stable: generation %d state %v", g.generation, g.state)
	}
}

func TestPauseSessions_AnUpstreamOutageExpiresNoMember(t *testing.T) {
	const session = 10 * time.Second // what the sims' JoinGroup asks for
	tests := []struct {
		name  string
		pause bool
		// wantMembers after an outage of three session timeouts.
		wantMembers int
	}{
		{"paused: everyone stays", true, 2},
		{"not paused: silent members expire", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
			h.setMetadata(meta(map[string]int{"t": 4}))
			a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
			b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
			settle(h, a, b)
			gen := a.generation
			if tt.pause {
				h.absorb(h.c.PauseSessions(h.now, true))
			}
			h.advance(3 * session)
			if got := len(h.c.groups["g"].members); got != tt.wantMembers {
				t.Fatalf("%d members after the outage, want %d", got, tt.wantMembers)
			}
			if !tt.pause {
				return
			}
			// Back up: a fresh session starts now, so a heartbeat just
			// inside it keeps the generation.
			h.absorb(h.c.PauseSessions(h.now, false))
			h.advance(session - time.Millisecond)
			for _, s := range []*simClient{a, b} {
				code := h.do(s.client, hbReq("g", s.memberID, s.generation)).(*kmsg.HeartbeatResponse).ErrorCode
				if code != 0 {
					t.Fatalf("%s heartbeat after the outage: %v", s.name, kerr.ErrorForCode(code))
				}
			}
			if a.generation != gen {
				t.Fatalf("generation %d after the outage, want %d", a.generation, gen)
			}
			// Sessions run again: members that stay silent now expire.
			h.advance(2 * session)
			if got := len(h.c.groups["g"].members); got != 0 {
				t.Fatalf("%d members still there after silent sessions with expiry back on", got)
			}
		})
	}
}

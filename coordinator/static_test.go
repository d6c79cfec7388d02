package coordinator

import (
	"maps"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func staticPair(t *testing.T) (*harness, *simClient, *simClient) {
	t.Helper()
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4, "u": 2}))
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	a.instance = "ia"
	b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
	b.instance = "ib"
	a.join()
	b.join()
	settle(h, a, b)
	if a.phase != stable || b.phase != stable {
		t.Fatalf("setup: %v %v", a.phase, b.phase)
	}
	return h, a, b
}

func TestStatic_FirstJoinIsAdmittedWithoutMemberIDRequired(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	j := h.send(Client{ID: "x"}, joinReq(9, "g", "", "inst-1", rangeProto("t")))
	h.advance(0)
	resp, ok := h.take(j)
	if !ok {
		t.Fatal("static join not answered")
	}
	r := resp.(*kmsg.JoinGroupResponse)
	if r.ErrorCode != 0 || !strings.HasPrefix(r.MemberID, "inst-1-") {
		t.Fatalf("static join: %v member %q", kerr.ErrorForCode(r.ErrorCode), r.MemberID)
	}
	// kgo on v8 and below takes a leader id "<instance id>-..." for itself.
	if strings.HasPrefix(r.LeaderID, "inst-1-") || strings.Contains(ServerLeaderID, "-") {
		t.Fatalf("leader id %q could be mistaken for the member", r.LeaderID)
	}
}

func TestStatic_RestartWithNewMemberIDGetsPreviousAssignmentWithoutRebalance(t *testing.T) {
	h, a, b := staticPair(t)
	gen := h.c.groups["g"].generation
	before := maps.Clone(a.held)
	oldID := a.memberID
	a.crash()
	n := newSim(h, "a2", "g", []string{"range"}, []string{"t"})
	n.instance = "ia"
	// Same topics, different bytes: user data changed across the restart.
	n.subVersion = 2
	n.join()
	if n.phase != joined || n.generation != gen {
		t.Fatalf("restart: phase %v generation %d, want the current generation %d at once", n.phase, n.generation, gen)
	}
	if g := h.c.groups["g"]; g.state != Stable || g.generation != gen {
		t.Fatalf("group %v generation %d: the restart rebalanced", g.state, g.generation)
	}
	n.sync()
	if count(n.held) != count(before) {
		t.Fatalf("restarted member got %v, previously %v", n.held, before)
	}
	for tp, ps := range before {
		for _, p := range ps {
			if !n.holds(tp, p) {
				t.Fatalf("restarted member lacks %s-%d", tp, p)
			}
		}
	}
	// The old process is fenced.
	inst := "ia"
	r := h.do(a.client, &kmsg.HeartbeatRequest{Version: 4, Group: "g", MemberID: oldID, Generation: gen, InstanceID: &inst}).(*kmsg.HeartbeatResponse)
	if r.ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("old member heartbeat: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	b.heartbeat()
	if b.phase != stable {
		t.Fatal("b was asked to rejoin")
	}
}

func TestStatic_RestartWithOtherTopicsRebalances(t *testing.T) {
	h, a, _ := staticPair(t)
	a.crash()
	n := newSim(h, "a2", "g", []string{"range"}, []string{"t", "u"})
	n.instance = "ia"
	n.join()
	if st := h.c.groups["g"].state; st != PreparingRebalance {
		t.Fatalf("state %v, want a rebalance for the new subscription", st)
	}
}

func TestStatic_RestartFencesTheOldMembersParkedJoin(t *testing.T) {
	h, a, _ := staticPair(t)
	c := newSim(h, "c", "g", []string{"range"}, []string{"t"})
	c.join() // a rebalance starts
	a.heartbeat()
	a.join() // parked: b has not rejoined
	if a.phase != joining {
		t.Fatalf("a phase %v", a.phase)
	}
	n := newSim(h, "a2", "g", []string{"range"}, []string{"t"})
	n.instance = "ia"
	n.join()
	resp, ok := h.take(a.req)
	if !ok || resp.(*kmsg.JoinGroupResponse).ErrorCode != kerr.FencedInstanceID.Code {
		t.Fatalf("old parked join: %v %+v", ok, resp)
	}
}

func TestStatic_ValidationErrors(t *testing.T) {
	h, a, _ := staticPair(t)
	gen := h.c.groups["g"].generation
	unknown, known := "nobody", "ia"
	tests := []struct {
		name     string
		member   string
		instance *string
		want     int16
	}{
		{"unknown instance id with a member id", a.memberID, &unknown, kerr.UnknownMemberID.Code},
		{"known instance id with another member id", "ia-00000000-0000-4000-8000-000000000000", &known, kerr.FencedInstanceID.Code},
		{"unknown member id", "zz", nil, kerr.UnknownMemberID.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jr := joinReq(9, "g", tt.member, "", rangeProto("t"))
			jr.InstanceID = tt.instance
			if code := h.do(a.client, jr).(*kmsg.JoinGroupResponse).ErrorCode; code != tt.want {
				t.Errorf("join: %v", kerr.ErrorForCode(code))
			}
			sr := syncReq(5, "g", tt.member, gen)
			sr.InstanceID = tt.instance
			if code := h.do(a.client, sr).(*kmsg.SyncGroupResponse).ErrorCode; code != tt.want {
				t.Errorf("sync: %v", kerr.ErrorForCode(code))
			}
			hr := hbReq("g", tt.member, gen)
			hr.InstanceID = tt.instance
			if code := h.do(a.client, hr).(*kmsg.HeartbeatResponse).ErrorCode; code != tt.want {
				t.Errorf("heartbeat: %v", kerr.ErrorForCode(code))
			}
			oc := commitReq(9, "g", tt.member, gen)
			oc.InstanceID = tt.instance
			if code := h.do(a.client, oc).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != tt.want {
				t.Errorf("commit: %v", kerr.ErrorForCode(code))
			}
		})
	}
}

func TestStatic_MemberIsRemovedOnlyBySessionTimeoutOrLeave(t *testing.T) {
	h, a, b := staticPair(t)
	// b leaves by an admin removal naming only its instance id.
	lr := kmsg.NewPtrLeaveGroupRequest()
	lr.Version, lr.Group = 5, "g"
	inst := "ib"
	lr.Members = []kmsg.LeaveGroupRequestMember{{InstanceID: &inst}}
	resp := h.do(Client{ID: "admin"}, lr).(*kmsg.LeaveGroupResponse)
	if resp.ErrorCode != 0 || resp.Members[0].ErrorCode != 0 {
		t.Fatalf("admin removal: %+v", resp)
	}
	if h.c.groups["g"].members[b.memberID] != nil {
		t.Fatal("b still a member")
	}
	// a never rejoins, and does not heartbeat: the session timeout removes it.
	h.advance(11_000_000_000)
	if len(h.c.groups["g"].members) != 0 {
		t.Fatalf("members left: %d", len(h.c.groups["g"].members))
	}
	_ = a
}

func TestStatic_RestartedClassicLeaderIsToldNotToAssignAgain(t *testing.T) {
	for _, version := range []int16{8, 9} {
		h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
		p := proto{"stream", []byte("x")}
		j := h.send(Client{ID: "s"}, joinReq(version, "streams", "", "inst", p))
		h.advance(0)
		resp, _ := h.take(j)
		first := resp.(*kmsg.JoinGroupResponse)
		ls := syncReq(5, "streams", first.MemberID, 1)
		inst := "inst"
		ls.InstanceID = &inst
		h.do(Client{}, ls)
		again := h.do(Client{ID: "s"}, joinReq(version, "streams", "", "inst", p)).(*kmsg.JoinGroupResponse)
		if again.ErrorCode != 0 || again.Generation != 1 || again.MemberID == first.MemberID {
			t.Fatalf("v%d restart: %v gen %d", version, kerr.ErrorForCode(again.ErrorCode), again.Generation)
		}
		if version >= 9 && (!again.SkipAssignment || again.LeaderID != again.MemberID) {
			t.Fatalf("v9: skip %v leader %q member %q", again.SkipAssignment, again.LeaderID, again.MemberID)
		}
		if version < 9 && again.LeaderID != first.MemberID {
			t.Fatalf("v8: leader %q, want the old id %q", again.LeaderID, first.MemberID)
		}
	}
}

// TestStatic_RestartWithOtherProtocolsFollowsTheVote: a static member that
// restarts offering other protocols keeps the group's protocol, with no
// rebalance, only while Kafka's vote still chooses it, whether the
// restart takes a candidate away, adds one or only reorders its choices.
func TestStatic_RestartWithOtherProtocolsFollowsTheVote(t *testing.T) {
	for _, tc := range []struct {
		name          string
		a, b, restart []string
		want          string
	}{
		{"a candidate leaves", []string{"range", "roundrobin"}, []string{"range", "roundrobin"}, []string{"roundrobin"}, "roundrobin"},
		{"a candidate arrives", []string{"roundrobin", "range"}, []string{"range"}, []string{"roundrobin", "range"}, "roundrobin"},
		{"the vote holds", []string{"range", "roundrobin"}, []string{"range", "roundrobin"}, []string{"roundrobin", "range"}, "range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
			h.setMetadata(meta(map[string]int{"t": 4}))
			a := newSim(h, "a", "g", tc.a, []string{"t"})
			a.instance = "ia"
			b := newSim(h, "b", "g", tc.b, []string{"t"})
			b.instance = "ib"
			settle(h, a, b)
			g := h.c.groups["g"]
			if g.state != Stable || g.protocol != "range" {
				t.Fatalf("setup: %v with protocol %q", g.state, g.protocol)
			}
			gen := g.generation
			b.crash()
			n := newSim(h, "b2", "g", tc.restart, []string{"t"})
			n.instance = "ib"
			n.join()
			if rebalanced := g.state != Stable; rebalanced != (tc.want != "range") {
				t.Fatalf("after the restart the group is %v (generation %d, was %d)", g.state, g.generation, gen)
			}
			settle(h, a, n)
			if g.state != Stable || g.protocol != tc.want {
				t.Fatalf("settled %v with protocol %q, want %q", g.state, g.protocol, tc.want)
			}
		})
	}
}

package cluster

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeClock is a Clock a test moves by hand.
type fakeClock struct{ now time.Duration }

func (c *fakeClock) read() time.Duration { return c.now }

func testMembership(id string, clk *fakeClock) *Membership {
	return NewMembership(MembershipConfig{
		Group: "wasmassign-t", Topic: "wasmassign-t-state", Shards: 4, ID: id, Address: id + ":9092",
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second, HeartbeatInterval: time.Second, Lease: 6 * time.Second,
	}, clk.read)
}

// next returns the request m wants sent now, failing the test if none.
func next[T kmsg.Request](t *testing.T, m *Membership) T {
	t.Helper()
	req, _ := m.Next()
	r, ok := req.(T)
	if !ok {
		t.Fatalf("next request is %T, want %T", req, *new(T))
	}
	return r
}

// joinedAlone takes m through KIP-394's round trip to a generation in which
// it is the only member and the leader, returning its SyncGroup.
func joinedAlone(t *testing.T, m *Membership, clk *fakeClock, gen int32) *kmsg.SyncGroupRequest {
	t.Helper()
	jg := next[*kmsg.JoinGroupRequest](t, m)
	if jg.MemberID == "" {
		resp := kmsg.NewPtrJoinGroupResponse()
		resp.ErrorCode, resp.MemberID = kerr.MemberIDRequired.Code, "m-"+*jg.InstanceID
		m.Answered(clk.now, resp, nil)
		jg = next[*kmsg.JoinGroupRequest](t, m)
	}
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Generation, resp.MemberID, resp.LeaderID = gen, jg.MemberID, jg.MemberID
	jm := kmsg.NewJoinGroupResponseMember()
	jm.MemberID, jm.InstanceID, jm.ProtocolMetadata = jg.MemberID, jg.InstanceID, jg.Protocols[0].Metadata
	resp.Members = append(resp.Members, jm)
	m.Answered(clk.now, resp, nil)
	return next[*kmsg.SyncGroupRequest](t, m)
}

// answerSync answers m's SyncGroup with the assignment the leader wrote
// for memberID in sg.
func answerSync(t *testing.T, m *Membership, clk *fakeClock, sg *kmsg.SyncGroupRequest, memberID string) {
	t.Helper()
	resp := kmsg.NewPtrSyncGroupResponse()
	for _, ga := range sg.GroupAssignment {
		if ga.MemberID == memberID {
			resp.MemberAssignment = ga.MemberAssignment
		}
	}
	m.Answered(clk.now, resp, nil)
}

func TestMembership_AloneItTakesEveryShardAndHoldsThemWhileKafkaConfirms(t *testing.T) {
	clk := &fakeClock{now: time.Minute}
	m := testMembership("gw-1", clk)
	sg := joinedAlone(t, m, clk, 1)
	answerSync(t, m, clk, sg, sg.MemberID)
	ch := m.Changes()
	if len(ch) != 1 || !slices.Equal(ch[0].Assigned, []int{0, 1, 2, 3}) || ch[0].Generation != 1 || ch[0].ReceivedAt != time.Minute {
		t.Fatalf("changes after the first generation: %+v", ch)
	}
	if len(ch[0].Layout) != 1 || ch[0].Layout[0].Address != "gw-1:9092" || len(ch[0].Layout[0].Shards) != 4 {
		t.Fatalf("layout: %+v", ch[0].Layout)
	}
	// Heartbeats answered keep the lease for a lease's length past the
	// last one sent.
	for range 20 {
		clk.now += time.Second
		hb := next[*kmsg.HeartbeatRequest](t, m)
		if hb.Generation != 1 || *hb.InstanceID != "gw-1" {
			t.Fatalf("heartbeat %+v", hb)
		}
		m.Answered(clk.now, kmsg.NewPtrHeartbeatResponse(), nil)
	}
	if owned, gen := m.Owned(); len(owned) != 4 || gen != 1 {
		t.Fatalf("owned %v at %d after confirmed heartbeats", owned, gen)
	}
	// Kafka stops answering: the lease ends a lease's length after the
	// last confirmed heartbeat was sent, and every shard is revoked then.
	lastSent := clk.now
	for clk.now < lastSent+6*time.Second {
		if owned, _ := m.Owned(); len(owned) != 4 {
			t.Fatalf("shards dropped at %v, before the lease ran out", clk.now-lastSent)
		}
		clk.now += 500 * time.Millisecond
		if req, _ := m.Next(); req != nil {
			m.Answered(clk.now, nil, errors.New("connection refused"))
		}
	}
	m.Next()
	if owned, _ := m.Owned(); owned != nil {
		t.Fatalf("still owns %v a lease's length after the last confirmation", owned)
	}
	if ch := m.Changes(); len(ch) != 1 || ch[0].Reason != "lease" || len(ch[0].Revoked) != 4 {
		t.Fatalf("changes at the lease's end: %+v", ch)
	}
}

// TestMembership_ANewGatewayGetsShardsOnlyAfterTheHolderRevokedThem is
// KIP-429 between two gateways: the leader (which holds every shard) keeps
// half, gives the other half to nobody for one generation, revokes them
// ("moved") and rejoins; only the next generation hands them to the
// newcomer.
func TestMembership_ANewGatewayGetsShardsOnlyAfterTheHolderRevokedThem(t *testing.T) {
	clk := &fakeClock{now: time.Minute}
	a, b := testMembership("gw-a", clk), testMembership("gw-b", clk)
	sg := joinedAlone(t, a, clk, 1)
	answerSync(t, a, clk, sg, sg.MemberID)
	a.Changes()

	// Generation 2: both join; a leads and claims its four shards.
	rebalance := kmsg.NewPtrHeartbeatResponse()
	rebalance.ErrorCode = kerr.RebalanceInProgress.Code
	clk.now += time.Second
	next[*kmsg.HeartbeatRequest](t, a)
	a.Answered(clk.now, rebalance, nil)
	// join is m's JoinGroup: a stable member learns of the rebalance from
	// its next heartbeat, as from Kafka.
	join := func(m *Membership) *kmsg.JoinGroupRequest {
		req, _ := m.Next()
		if _, ok := req.(*kmsg.HeartbeatRequest); ok {
			m.Answered(clk.now, rebalance, nil)
			req, _ = m.Next()
		}
		jg, ok := req.(*kmsg.JoinGroupRequest)
		if !ok {
			t.Fatalf("next request is %T, want a JoinGroup", req)
		}
		return jg
	}
	generation := func(gen int32) (*kmsg.SyncGroupRequest, *kmsg.SyncGroupRequest) {
		clk.now += time.Second
		ja, jb := join(a), join(b)
		if jb.MemberID == "" {
			resp := kmsg.NewPtrJoinGroupResponse()
			resp.ErrorCode, resp.MemberID = kerr.MemberIDRequired.Code, "m-gw-b"
			b.Answered(clk.now, resp, nil)
			jb = next[*kmsg.JoinGroupRequest](t, b)
		}
		ra := kmsg.NewPtrJoinGroupResponse()
		ra.Generation, ra.MemberID, ra.LeaderID = gen, ja.MemberID, ja.MemberID
		for _, j := range []*kmsg.JoinGroupRequest{ja, jb} {
			jm := kmsg.NewJoinGroupResponseMember()
			jm.MemberID, jm.InstanceID, jm.ProtocolMetadata = j.MemberID, j.InstanceID, j.Protocols[0].Metadata
			ra.Members = append(ra.Members, jm)
		}
		rb := kmsg.NewPtrJoinGroupResponse()
		rb.Generation, rb.MemberID, rb.LeaderID = gen, jb.MemberID, ja.MemberID
		a.Answered(clk.now, ra, nil)
		b.Answered(clk.now, rb, nil)
		return next[*kmsg.SyncGroupRequest](t, a), next[*kmsg.SyncGroupRequest](t, b)
	}
	sa, sb := generation(2)
	answerSync(t, a, clk, sa, sa.MemberID)
	answerSync(t, b, clk, sa, sb.MemberID)
	ca, cb := a.Changes(), b.Changes()
	if len(ca) != 1 || len(ca[0].Revoked) != 2 || ca[0].Reason != "moved" || len(ca[0].Assigned) != 0 {
		t.Fatalf("the holder's changes in generation 2: %+v", ca)
	}
	if len(cb) != 1 || len(cb[0].Assigned) != 0 {
		t.Fatalf("the newcomer got %+v in generation 2, while the holder still served them", cb)
	}
	// a rejoins at once without the moved shards; generation 3 gives them
	// to b.
	sa, sb = generation(3)
	answerSync(t, a, clk, sa, sa.MemberID)
	answerSync(t, b, clk, sa, sb.MemberID)
	ca, cb = a.Changes(), b.Changes()
	if len(cb) != 1 || !slices.Equal(cb[0].Assigned, ca0Revoked(t, ca, a)) {
		t.Fatalf("generation 3: the newcomer got %+v; the holder kept %v", cb, ownedOf(a))
	}
	var ld layoutData
	if err := json.Unmarshal(mustAssignment(t, sa, sb.MemberID).UserData, &ld); err != nil || len(ld.Owners) != 2 || ld.Format != FormatVersion {
		t.Fatalf("layout %+v (%v)", ld, err)
	}
}

// ca0Revoked is what a gave up: every shard it no longer owns.
func ca0Revoked(t *testing.T, ca []Change, a *Membership) []int {
	t.Helper()
	if len(ca) != 1 || len(ca[0].Revoked) != 0 {
		t.Fatalf("the holder's changes in generation 3: %+v", ca)
	}
	var gone []int
	for s := range 4 {
		if !slices.Contains(ownedOf(a), s) {
			gone = append(gone, s)
		}
	}
	return gone
}

func ownedOf(m *Membership) []int {
	o, _ := m.Owned()
	return o
}

func mustAssignment(t *testing.T, sg *kmsg.SyncGroupRequest, memberID string) kmsg.ConsumerMemberAssignment {
	t.Helper()
	var a kmsg.ConsumerMemberAssignment
	for _, ga := range sg.GroupAssignment {
		if ga.MemberID == memberID {
			if err := a.ReadFrom(ga.MemberAssignment); err != nil {
				t.Fatal(err)
			}
			return a
		}
	}
	t.Fatalf("no assignment for %s", memberID)
	return a
}

func TestMembership_KafkaSayingItIsNoLongerTheMemberEndsTheShardsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		err    *kerr.Error
		reason string
		ends   bool
	}{
		{kerr.UnknownMemberID, "lost", false},
		{kerr.IllegalGeneration, "lost", false},
		{kerr.FencedInstanceID, "fenced", true},
	} {
		t.Run(tc.err.Message, func(t *testing.T) {
			clk := &fakeClock{now: time.Minute}
			m := testMembership("gw-1", clk)
			sg := joinedAlone(t, m, clk, 1)
			answerSync(t, m, clk, sg, sg.MemberID)
			m.Changes()
			clk.now += time.Second
			next[*kmsg.HeartbeatRequest](t, m)
			resp := kmsg.NewPtrHeartbeatResponse()
			resp.ErrorCode = tc.err.Code
			m.Answered(clk.now, resp, nil)
			if owned, _ := m.Owned(); owned != nil {
				t.Fatalf("still owns %v", owned)
			}
			if ch := m.Changes(); len(ch) != 1 || ch[0].Reason != tc.reason || len(ch[0].Revoked) != 4 {
				t.Fatalf("changes: %+v", ch)
			}
			req, _ := m.Next()
			if tc.ends {
				if req != nil || !errors.Is(m.Err(), ErrFenced) {
					t.Fatalf("a fenced gateway sends %T, err %v", req, m.Err())
				}
				return
			}
			if _, ok := req.(*kmsg.JoinGroupRequest); !ok {
				t.Fatalf("after %v it sends %T, want a JoinGroup", tc.err, req)
			}
		})
	}
}

func TestMembership_LeavingRevokesFirstThenLeaves(t *testing.T) {
	clk := &fakeClock{now: time.Minute}
	m := testMembership("gw-1", clk)
	sg := joinedAlone(t, m, clk, 1)
	answerSync(t, m, clk, sg, sg.MemberID)
	m.Changes()
	m.Leave()
	if ch := m.Changes(); len(ch) != 1 || ch[0].Reason != "leaving" || len(ch[0].Revoked) != 4 {
		t.Fatalf("changes: %+v", ch)
	}
	lv := next[*kmsg.LeaveGroupRequest](t, m)
	if len(lv.Members) != 1 || *lv.Members[0].InstanceID != "gw-1" {
		t.Fatalf("leave %+v", lv)
	}
	m.Answered(clk.now, kmsg.NewPtrLeaveGroupResponse(), nil)
	if req, _ := m.Next(); req != nil {
		t.Fatalf("after leaving it sends %T", req)
	}
}

// TestMembership_AnAnswerThatArrivesAfterLeaveHandsNothingBack: a SyncGroup
// in flight when Leave came must not give the shards back when its answer
// lands (the ownership test found it).
func TestMembership_AnAnswerThatArrivesAfterLeaveHandsNothingBack(t *testing.T) {
	clk := &fakeClock{now: time.Minute}
	m := testMembership("gw-1", clk)
	sg := joinedAlone(t, m, clk, 1) // the SyncGroup is in flight
	m.Leave()
	answerSync(t, m, clk, sg, sg.MemberID)
	if owned, _ := m.Owned(); owned != nil {
		t.Fatalf("owns %v after leaving", owned)
	}
	if ch := m.Changes(); len(ch) != 0 {
		t.Fatalf("changes after leaving: %+v", ch)
	}
	next[*kmsg.LeaveGroupRequest](t, m)
}

// TestMembership_AGatewayThatCannotWriteTheClustersFormatIsRefused: the
// leader gives a member whose oldest format is newer than the cluster's
// nothing and marks it refused, and that member ends with ErrRefused,
// naming the cause, and leaves.
func TestMembership_AGatewayThatCannotWriteTheClustersFormatIsRefused(t *testing.T) {
	clk := &fakeClock{now: time.Minute}
	leader, newer := testMembership("gw-a", clk), testMembership("gw-z", clk)
	ja := next[*kmsg.JoinGroupRequest](t, leader)
	ja.MemberID = "m-a"
	// gw-z's subscription says it writes formats 2 to 3 only.
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version, meta.Topics, meta.Generation = 2, []string{"wasmassign-t-state"}, -1
	meta.UserData = []byte(`{"id":"gw-z","address":"gw-z:9092","min_format":2,"max_format":3}`)
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Generation, resp.MemberID, resp.LeaderID = 1, "m-a", "m-a"
	for _, jm := range []struct {
		id   string
		meta []byte
	}{{"m-a", ja.Protocols[0].Metadata}, {"m-z", meta.AppendTo(nil)}} {
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID, m.ProtocolMetadata = jm.id, jm.meta
		resp.Members = append(resp.Members, m)
	}
	leader.Answered(clk.now, resp, nil)
	sg := next[*kmsg.SyncGroupRequest](t, leader)
	if a := mustAssignment(t, sg, "m-a"); len(a.Topics) != 1 || len(a.Topics[0].Partitions) != 4 {
		t.Fatalf("the leader's own assignment %+v, want every shard", a)
	}
	if a := mustAssignment(t, sg, "m-z"); len(a.Topics[0].Partitions) != 0 {
		t.Fatalf("the refused gateway got %v", a.Topics[0].Partitions)
	}
	// gw-z reads its assignment.
	next[*kmsg.JoinGroupRequest](t, newer)
	jr := kmsg.NewPtrJoinGroupResponse()
	jr.Generation, jr.MemberID, jr.LeaderID = 1, "m-z", "m-a"
	newer.Answered(clk.now, jr, nil)
	next[*kmsg.SyncGroupRequest](t, newer)
	answerSync(t, newer, clk, sg, "m-z")
	if err := newer.Err(); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "reads only up to format 1") {
		t.Fatalf("the refused gateway's error: %v", err)
	}
	next[*kmsg.LeaveGroupRequest](t, newer)
}

// TestMembership_ChangedBrokersArePublishedByARejoinThatKeepsTheShards: a
// stable gateway whose listeners for the upstream's brokers change rejoins
// at once, rather than heartbeating, with them in its subscription; the
// leader's layout carries them, and the gateway keeps every shard it held.
func TestMembership_ChangedBrokersArePublishedByARejoinThatKeepsTheShards(t *testing.T) {
	clk := &fakeClock{now: time.Minute}
	m := testMembership("gw-1", clk)
	sg := joinedAlone(t, m, clk, 1)
	answerSync(t, m, clk, sg, sg.MemberID)
	if ch := m.Changes(); len(ch) != 1 || ch[0].Layout[0].Brokers != nil {
		t.Fatalf("changes before any brokers were set: %+v", ch)
	}
	for _, ports := range []map[int32]int32{{0: 19092, 1: 19093}, {0: 19092, 1: 19093, 2: 19094}} {
		m.SetBrokers(ports)
		sg = joinedAlone(t, m, clk, 2)
		answerSync(t, m, clk, sg, sg.MemberID)
		ch := m.Changes()
		if len(ch) != 1 || len(ch[0].Layout) != 1 || !maps.Equal(ch[0].Layout[0].Brokers, ports) || len(ch[0].Revoked) != 0 {
			t.Fatalf("changes after publishing %v: %+v", ports, ch)
		}
		if owned, _ := m.Owned(); len(owned) != 4 {
			t.Fatalf("owns %v after the rejoin, want all four shards", owned)
		}
		// The same ports again, in a map of their own: nothing to publish.
		m.SetBrokers(maps.Clone(ports))
		for range 2 {
			clk.now += time.Second
			if hb := next[*kmsg.HeartbeatRequest](t, m); hb.Generation != 2 {
				t.Fatalf("heartbeat %+v", hb)
			}
			m.Answered(clk.now, kmsg.NewPtrHeartbeatResponse(), nil)
		}
	}
}

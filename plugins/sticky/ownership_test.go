package sticky

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// claimsByName runs the claim reading and settling of kind k on req and
// returns who keeps what, by name, in the generation the claims carry.
func claimsByName(t *testing.T, k kind, req *abi.Request) map[string][]string {
	t.Helper()
	g, err := newGroup(req)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, c := range g.settle(g.claims(k == coop)) {
		id := req.Members[c.member].MemberID
		for x := c.start; x < c.end(); x++ {
			out[id] = append(out[id], fmt.Sprintf("%s-%d", req.Topics[g.byRank[c.topic]].Name, x-g.base[c.topic]))
		}
	}
	for id := range out {
		sortTPs(out[id])
	}
	return out
}

// TestSticky_StickyUserDataVersions covers StickyAssignor's user data
// schemas as Kafka reads them (StickyAssignorTest.testMemberData and
// testSchemaBackwardCompatibility): v1 with its generation, v0 without one,
// and v1 followed by bytes Kafka's schema never looks at.
func TestSticky_StickyUserDataVersions(t *testing.T) {
	c := cluster{topics: []topicSpec{{"topic1", 4}, {"topic2", 4}}}
	owned := []string{"topic1-0", "topic2-1", "topic2-2"}
	cases := []struct {
		name    string
		ud      []byte
		wantGen int32
	}{
		{"v1", stickyUserData(owned, 7, true), 7},
		{"v0", stickyUserData(owned, 0, false), -1},
		{"v0 with 1-3 trailing bytes", append(stickyUserData(owned, 0, false), 1, 2), -1},
		{"v1 with trailing bytes", append(stickyUserData(owned, 7, true), 9, 9, 9), 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A rival claim of topic1-0 in generation 6 tells which
			// generation the user data carried: 7 beats it, -1 loses to it.
			rival := memberSpec{id: "rival", topics: topics("topic1", "topic2"), userData: stickyUserData([]string{"topic1-0"}, 6, true)}
			me := memberSpec{id: "me", topics: topics("topic1", "topic2"), userData: tc.ud}
			got := claimsByName(t, eager, c.request(eager, 8, []memberSpec{me, rival}))
			want := owned
			if tc.wantGen < 6 {
				want = owned[1:]
			}
			eq(t, "me", got["me"], want)
		})
	}
}

// TestSticky_CorruptUserDataMeansNoOwnership feeds malformed sticky user
// data: the member counts as owning nothing, and nothing panics.
func TestSticky_CorruptUserDataMeansNoOwnership(t *testing.T) {
	c := cluster{topics: []topicSpec{{"topic", 3}}}
	good := stickyUserData([]string{"topic-0", "topic-1"}, 3, true)
	cases := map[string][]byte{
		"truncated count":      {0, 0},
		"negative topic count": {0xff, 0xff, 0xff, 0xff},
		"count past the end":   {0, 0, 0, 9},
		"negative name length": {0, 0, 0, 1, 0xff, 0xff},
		"name past the end":    {0, 0, 0, 1, 0, 40, 't'},
		"partitions past end":  good[:len(good)-8],
		"negative partitions":  {0, 0, 0, 1, 0, 5, 't', 'o', 'p', 'i', 'c', 0xff, 0xff, 0xff, 0xff},
		"partition count huge": {0, 0, 0, 1, 0, 5, 't', 'o', 'p', 'i', 'c', 0x7f, 0xff, 0xff, 0xff},
		"single byte":          {1},
	}
	for name, ud := range cases {
		t.Run(name, func(t *testing.T) {
			ms := []memberSpec{{id: "a", topics: topics("topic"), userData: ud}, {id: "b", topics: topics("topic"), userData: stickyUserData(nil, 3, true)}}
			req := c.request(eager, 4, ms)
			if got := claimsByName(t, eager, req); len(got["a"]) != 0 {
				t.Fatalf("corrupt user data gave claims %v", got)
			}
			_, p := eager.run(t, req)
			checkAll(t, c, ms, p, false)
		})
	}
	// Random bytes, and random cuts of valid user data, never panic.
	rnd := rand.New(rand.NewPCG(1, 1))
	for range 2000 {
		var ud []byte
		if rnd.IntN(2) == 0 {
			ud = make([]byte, rnd.IntN(40))
			for i := range ud {
				ud[i] = byte(rnd.IntN(256))
			}
		} else {
			ud = good[:rnd.IntN(len(good)+1)]
		}
		req := c.request(eager, 4, []memberSpec{{id: "a", topics: topics("topic"), userData: ud}})
		if _, err := AssignEager(req); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSticky_EagerReadsUserDataNotOwned checks StickyAssignorTest's
// testMemberDataWillHonorUserData and testMemberDataWithInconsistentData:
// the eager assignor believes the user data, whatever the subscription's
// owned partitions say.
func TestSticky_EagerReadsUserDataNotOwned(t *testing.T) {
	c := cluster{topics: []topicSpec{{"topic", 2}}}
	req := c.request(eager, 3, []memberSpec{{id: "a", topics: topics("topic"), userData: stickyUserData([]string{"topic-1"}, 2, true)}})
	req.Members[0].Owned = []abi.TopicPartitions{{Topic: 0, Partitions: []int32{0}}}
	req.Members[0].OwnedGeneration = 2
	eq(t, "a", claimsByName(t, eager, req)["a"], []string{"topic-1"})
}

// TestSticky_CooperativeGeneration covers where cooperative-sticky finds a
// member's generation: the v2+ field, else one big-endian int32 of user data
// (CooperativeStickyAssignorTest.testEncodeAndDecodeGeneration,
// testDecodeGeneration, testMemberDataWithInconsistentData), and that its
// own partitions always come from the owned field
// (testMemberDataWithEmptyPartitionsAndEqualGeneration).
func TestSticky_CooperativeGeneration(t *testing.T) {
	for _, tc := range []struct {
		ud   []byte
		want int32
	}{
		{nil, -1}, {be32(10), 10}, {be32(-1), -1}, {[]byte{0, 0, 1}, -1}, {append(be32(4), 1, 2), 4},
	} {
		if got := cooperativeUserDataGeneration(tc.ud); got != tc.want {
			t.Errorf("user data %x: generation %d, want %d", tc.ud, got, tc.want)
		}
	}
	c := cluster{topics: []topicSpec{{"topic", 2}}}
	// Both claim topic-0; "a" says generation 5 through user data, "b" 4
	// through the v2+ field: "a" keeps it.
	a := memberSpec{id: "a", topics: topics("topic"), owned: []string{"topic-0"}, gen: -1, userData: be32(5)}
	b := memberSpec{id: "b", topics: topics("topic"), owned: []string{"topic-0", "topic-1"}, gen: 4}
	got := claimsByName(t, coop, c.request(coop, 6, []memberSpec{a, b}))
	eq(t, "a", got["a"], []string{"topic-0"})
	eq(t, "b", got["b"], []string{"topic-1"})
	// Sticky-format user data listing partitions is not ownership for the
	// cooperative assignor.
	m := memberSpec{id: "m", topics: topics("topic"), owned: []string{}, gen: 5, userData: stickyUserData([]string{"topic-0"}, 5, true)}
	n := memberSpec{id: "n", topics: topics("topic"), owned: []string{"topic-1"}, gen: 5}
	got = claimsByName(t, coop, c.request(coop, 6, []memberSpec{m, n}))
	eq(t, "m", got["m"], nil)
}

// TestSticky_OwnershipThatCannotStay checks claims that must be dropped:
// partitions of deleted topics, of topics the member no longer subscribes
// to, beyond the partition count, and negative ones. What stays is kept.
func TestSticky_OwnershipThatCannotStay(t *testing.T) {
	c := cluster{topics: []topicSpec{{"a", 4}, {"b", 4}}}
	for _, k := range bothKinds {
		ms := []memberSpec{
			owns("m1", topics("a"), 3, "a-0", "a-1", "b-0", "gone-0", "a-9"),
			owns("m2", topics("a", "b"), 3, "b-1", "b-2"),
		}
		req := c.request(k, 4, ms)
		// A negative partition id, which no encoder above writes.
		for i := range req.Members {
			if req.Members[i].MemberID == "m1" && k == coop {
				req.Members[i].Owned[0].Partitions = append(req.Members[i].Owned[0].Partitions, -3)
			}
		}
		_, p := k.run(t, req)
		checkAll(t, c, ms, p, false)
		containsAll(t, "m1", p["m1"], []string{"a-0", "a-1"})
		containsAll(t, "m2", p["m2"], []string{"b-1", "b-2"})
	}
}

// TestSticky_PreviousWhenNobodyReports checks the fallback to the host's
// previous assignment: a group whose members report nothing (eager clients
// of another assignor, or members that lost their state) stays where the
// host put it.
func TestSticky_PreviousWhenNobodyReports(t *testing.T) {
	c := cluster{topics: []topicSpec{{"t", 12}}}
	prev := map[string][]string{
		"a": tps("t-9, t-10, t-11"), "b": tps("t-0, t-1, t-2, t-3"), "c": tps("t-4, t-5, t-6, t-7, t-8"),
	}
	for _, k := range bothKinds {
		var ms []memberSpec
		for _, id := range []string{"a", "b", "c"} {
			m := sub(id, "t")
			m.previous = prev[id]
			ms = append(ms, m)
		}
		h := &harness{t: t, kind: k, cluster: c, generation: 5}
		p := h.assign(ms)
		// Four each: a keeps its three, b its four, c four of its five.
		containsAll(t, "a", p["a"], prev["a"])
		eq(t, "b", p["b"], prev["b"])
		containsAll(t, "c", prev["c"], p["c"])
		// One member reporting ownership turns the fallback off: the
		// others then own nothing.
		ms[0] = owns("a", topics("t"), 4, "t-0")
		if k == eager {
			ms[0].userData = stickyUserData([]string{"t-0"}, 4, true)
		}
		req := c.request(k, 5, ms)
		got := claimsByName(t, k, req)
		if len(got) != 1 || !slices.Equal(got["a"], []string{"t-0"}) {
			t.Fatalf("%s: with one member reporting, claims are %v", k, got)
		}
	}
}

// TestSticky_StickyWritesUserData checks the user data the eager assignor
// writes: StickyAssignor's v1 structure of the member's own assignment and
// the request's generation, which a Java client would send back.
func TestSticky_StickyWritesUserData(t *testing.T) {
	c := cluster{topics: []topicSpec{{"x", 5}, {"y", 3}}}
	ms := []memberSpec{sub("m1", "x", "y"), sub("m2", "x", "y"), sub("m3", "y")}
	req := c.request(eager, 42, ms)
	resp, p := eager.run(t, req)
	checkUserData(t, req, resp, p)
	for _, ma := range resp.Members {
		if n := binary.BigEndian.Uint32(ma.UserData[len(ma.UserData)-4:]); n != 42 {
			t.Fatalf("generation %d in user data", n)
		}
	}
	// The cooperative assignor writes none.
	resp, _ = coop.run(t, c.request(coop, 42, ms))
	for _, ma := range resp.Members {
		if ma.UserData != nil {
			t.Fatalf("cooperative assignment carries user data %x", ma.UserData)
		}
	}
}

// TestSticky_ConflictingClaimsSettledPerPartition checks settle on
// overlapping runs: the highest generation wins each partition, and two
// members of that generation cancel each other out, however the runs
// overlap.
func TestSticky_ConflictingClaimsSettledPerPartition(t *testing.T) {
	c := cluster{topics: []topicSpec{{"t", 10}}}
	rnd := rand.New(rand.NewPCG(9, 9))
	for range 300 {
		var ms []memberSpec
		for i := range 1 + rnd.IntN(5) {
			var owned []string
			lo := rnd.IntN(10)
			for p := lo; p < lo+rnd.IntN(8) && p < 12; p++ {
				owned = append(owned, fmt.Sprintf("t-%d", p))
			}
			if rnd.IntN(4) == 0 && len(owned) > 0 {
				owned = append(owned, owned[0]) // a repeat
			}
			ms = append(ms, owns(fmt.Sprintf("m%d", i), topics("t"), int32(rnd.IntN(3)), owned...))
		}
		for _, k := range bothKinds {
			req := c.request(k, 5, ms)
			got := claimsByName(t, k, req)
			subs := map[string]map[string]bool{}
			for _, m := range ms {
				subs[m.id] = map[string]bool{"t": true}
			}
			want := map[string][]string{}
			for s, id := range priorOwners(ms, map[string]int32{"t": 10}, subs) {
				want[id] = append(want[id], s)
			}
			for id := range want {
				sortTPs(want[id])
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s: settled %v, want %v\nclaims %v", k, got, want, ms)
			}
		}
	}
}

// TestSticky_RunCutting checks how owned partition lists are cut into runs
// (contiguous or strided): whatever their order, repeats or out-of-range
// ids, the runs cover exactly the valid ids listed.
func TestSticky_RunCutting(t *testing.T) {
	rnd := rand.New(rand.NewPCG(2, 3))
	for range 2000 {
		limit := int32(1 + rnd.IntN(20))
		var parts []int32
		switch rnd.IntN(4) {
		case 0: // a contiguous range, maybe running past the end
			p0 := int32(rnd.IntN(25)) - 2
			for i := range rnd.IntN(12) + 1 {
				parts = append(parts, p0+int32(i))
			}
		case 1: // a progression, maybe running past the end
			p0, d := int32(rnd.IntN(25))-2, int32(rnd.IntN(5))-1
			for i := range rnd.IntN(8) + 1 {
				parts = append(parts, p0+d*int32(i))
			}
		default:
			for range rnd.IntN(12) + 1 {
				parts = append(parts, int32(rnd.IntN(25))-2)
			}
		}
		g := &group{rankOf: []int32{0}, base: []int32{0, limit}}
		cs := g.appendOwned(nil, []abi.TopicPartitions{{Topic: 0, Partitions: parts}}, 0, 1)
		var got []int32
		for _, c := range cs {
			for i := range c.n {
				got = append(got, c.start+i*c.stride())
			}
		}
		var want []int32
		for _, p := range parts {
			if p >= 0 && p < limit {
				want = append(want, p)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("parts %v below %d: runs %v cover %v", parts, limit, cs, got)
		}
	}
}

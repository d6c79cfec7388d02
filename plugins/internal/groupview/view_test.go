package groupview

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// memberIDs returns the member ids of req in the order of the indices.
func memberIDs(req *abi.Request, order []int32) []string {
	ids := make([]string, len(order))
	for i, m := range order {
		ids[i] = req.Members[m].MemberID
	}
	return ids
}

func TestView_OrdersStaticMembersByInstanceThenDynamicByMemberID(t *testing.T) {
	cases := []struct {
		name    string
		members []abi.Member // in request order
		want    []string     // member ids in Kafka's order
	}{
		{
			name:    "dynamic members by member id",
			members: []abi.Member{{MemberID: "c"}, {MemberID: "a"}, {MemberID: "b"}},
			want:    []string{"a", "b", "c"},
		},
		{
			name:    "static members by instance id, whatever their member ids",
			members: []abi.Member{{MemberID: "a", InstanceID: "i2"}, {MemberID: "b", InstanceID: "i1"}},
			want:    []string{"b", "a"},
		},
		{
			name:    "static members before dynamic ones",
			members: []abi.Member{{MemberID: "a"}, {MemberID: "z", InstanceID: "i9"}, {MemberID: "b"}, {MemberID: "y", InstanceID: "i1"}},
			want:    []string{"y", "z", "a", "b"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := &abi.Request{Members: tc.members}
			v, err := New(req)
			if err != nil {
				t.Fatal(err)
			}
			if got := memberIDs(req, v.Order); !slices.Equal(got, tc.want) {
				t.Errorf("order %q, want %q", got, tc.want)
			}
		})
	}
}

// TestView_MembersWithEqualIDsKeepRequestOrder: a valid group never has
// two members with the same ids, but the order must not depend on how a
// sort happens to break the tie.
func TestView_MembersWithEqualIDsKeepRequestOrder(t *testing.T) {
	// Enough members that an unstable sort would not fall back to insertion
	// sort, interleaved with others that sort before and after them.
	for _, instance := range []string{"", "i"} {
		req := &abi.Request{}
		var want []int32
		for i := range 200 {
			id := "m"
			switch i % 3 {
			case 1:
				id = "a"
			case 2:
				id = "z"
			}
			req.Members = append(req.Members, abi.Member{MemberID: id, InstanceID: instance})
			if id == "m" {
				want = append(want, int32(i))
			}
		}
		v, err := New(req)
		if err != nil {
			t.Fatal(err)
		}
		first := slices.Index(memberIDs(req, v.Order), "m")
		if got := v.Order[first : first+len(want)]; !slices.Equal(got, want) {
			t.Errorf("instance %q: members with id m in order %v, want %v", instance, got, want)
		}
	}
}

func TestNew_RejectsTopicIndexOutsideTheTable(t *testing.T) {
	for _, bad := range []int32{-1, 2, 1 << 30} {
		req := &abi.Request{
			Topics:  []abi.Topic{{Name: "a", Exists: true, PartitionCount: 1}, {Name: "b", Exists: true, PartitionCount: 1}},
			Members: []abi.Member{{MemberID: "ok", Topics: []int32{0, 1}}, {MemberID: "m", Topics: []int32{0, bad}}},
		}
		_, err := New(req)
		if err == nil || !strings.Contains(err.Error(), `member "m" subscribes to topic index`) || !strings.Contains(err.Error(), "the request has 2 topics") {
			t.Errorf("index %d: error %v, want one naming member m and the table size", bad, err)
		}
	}
}

// TestView_TopicListedTwiceTakesOneSlot: Kafka's subscription is a list, but
// a member that lists a topic twice is one subscriber of it.
func TestView_TopicListedTwiceTakesOneSlot(t *testing.T) {
	req := &abi.Request{
		Topics:  []abi.Topic{{Name: "t", Exists: true, PartitionCount: 4}},
		Members: []abi.Member{{MemberID: "b", Topics: []int32{0, 0}}, {MemberID: "a", Topics: []int32{0}}},
	}
	v, err := New(req)
	if err != nil {
		t.Fatal(err)
	}
	if n := v.SubscriberCount(0); n != 2 {
		t.Errorf("topic t has %d subscribers, want 2", n)
	}
	// a is first in Kafka's order, so b takes slot 1, once.
	if got := v.slot; !slices.Equal(got, []int32{1, -1, 0}) {
		t.Errorf("slots %v, want [1 -1 0]", got)
	}
	if got := memberIDs(req, v.Subscribers().Of(0)); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("subscribers %q, want [a b]", got)
	}
}

func TestView_ByNameHoldsTopicsWithPartitionsToAssignInNameOrder(t *testing.T) {
	req := &abi.Request{
		Topics: []abi.Topic{
			{Name: "zeta", Exists: true, PartitionCount: 3},
			{Name: "missing"},
			{Name: "alpha", Exists: true, PartitionCount: 1},
			{Name: "empty", Exists: true},
			{Name: "unsubscribed", Exists: true, PartitionCount: 5},
			{Name: "mid", Exists: true, PartitionCount: 2},
			// A valid request never has two topics of one name; if it had,
			// they would go by index.
			{Name: "alpha", Exists: true, PartitionCount: 1},
		},
		Members: []abi.Member{{MemberID: "m", Topics: []int32{0, 1, 2, 3, 6}}, {MemberID: "n", Topics: []int32{5}}},
	}
	v, err := New(req)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int32{2, 6, 5, 0}; !slices.Equal(v.ByName, want) {
		t.Errorf("ByName %v, want %v (alpha, alpha, mid, zeta)", v.ByName, want)
	}
}

// TestSubscribers_EveryTopicsSubscribersInKafkaOrder checks the per-topic
// lists, and the slots recorded for each member, against a plain filter of
// Kafka's member order, on random groups with identical and with mixed
// subscriptions.
func TestSubscribers_EveryTopicsSubscribersInKafkaOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 1))
	shape := assignortest.Shape{Topics: 12, SparseOneIn: 4, MissingOneIn: 6, PartitionCounts: assignortest.Below(5), Members: 20, UniformOneIn: 3, UniformSubset: true}
	for i := range 300 {
		req := assignortest.RandomGroup(r, shape)
		v, err := New(req)
		if err != nil {
			t.Fatal(err)
		}
		subs := v.Subscribers()
		for ti := range req.Topics {
			var want []int32
			for _, m := range v.Order {
				if slices.Contains(req.Members[m].Topics, int32(ti)) {
					want = append(want, m)
				}
			}
			got := subs.Of(int32(ti))
			if !slices.Equal(got, want) || int(v.SubscriberCount(int32(ti))) != len(want) {
				t.Fatalf("scenario %d topic %d: subscribers %v (count %d), want %v", i, ti, got, v.SubscriberCount(int32(ti)), want)
			}
		}
		for m := range req.Members {
			for j, ti := range req.Members[m].Topics {
				if s := v.slot[v.entry[m]+int32(j)]; subs.Of(ti)[s] != int32(m) {
					t.Fatalf("scenario %d: member %d has slot %d in topic %d, which lists member %d there", i, m, s, ti, subs.Of(ti)[s])
				}
			}
		}
	}
}

// TestMemberOrder_MatchesKafkaSortedWhetherOrNotAlreadySorted checks
// MemberOrder against the tests' own statement of Kafka's member order, on
// random groups in request order and on the same groups already sorted,
// which MemberOrder recognises without sorting.
func TestMemberOrder_MatchesKafkaSortedWhetherOrNotAlreadySorted(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 3))
	shape := assignortest.Shape{Topics: 3, MissingOneIn: 6, PartitionCounts: assignortest.Below(4), Members: 30, UniformOneIn: 2}
	for i := range 300 {
		req := assignortest.RandomGroup(r, shape)
		sorted := assignortest.KafkaSorted(req.Members)
		want := make([]string, len(sorted))
		for j, m := range sorted {
			want[j] = m.MemberID
		}
		if got := memberIDs(req, MemberOrder(req.Members)); !slices.Equal(got, want) {
			t.Fatalf("scenario %d: order %q, want %q", i, got, want)
		}
		identity := make([]int32, len(sorted))
		for j := range identity {
			identity[j] = int32(j)
		}
		if got := MemberOrder(sorted); !slices.Equal(got, identity) {
			t.Fatalf("scenario %d: members already in Kafka's order came out as %v", i, got)
		}
	}
}

// TestAssignableByName_AsksWhoSubscribes: the subscriber test is the
// caller's, and only topics that exist with partitions can pass.
func TestAssignableByName_AsksWhoSubscribes(t *testing.T) {
	req := &abi.Request{Topics: []abi.Topic{
		{Name: "c", Exists: true, PartitionCount: 1},
		{Name: "a", Exists: true, PartitionCount: 2},
		{Name: "missing"},
		{Name: "empty", Exists: true},
		{Name: "b", Exists: true, PartitionCount: 3},
	}}
	everyone := func(int32) bool { return true }
	if got, want := AssignableByName(req, everyone), []int32{1, 4, 0}; !slices.Equal(got, want) {
		t.Errorf("every topic subscribed: %v, want %v (a, b, c)", got, want)
	}
	notB := func(t int32) bool { return t != 4 }
	if got, want := AssignableByName(req, notB), []int32{1, 0}; !slices.Equal(got, want) {
		t.Errorf("b unsubscribed: %v, want %v (a, c)", got, want)
	}
}

package assignortest

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// KgoPlan runs franz-go's balancer b on req the way a kgo group leader
// would, with the members in the order given: it encodes each member's
// subscription as the leader receives it in JoinGroup, balances over the
// topics that exist, and decodes the SyncGroup assignments. Every member is
// in the plan, with an empty map when it gets nothing.
func KgoPlan(t testing.TB, b kgo.GroupBalancer, req *abi.Request, members []abi.Member) Plan {
	t.Helper()
	join := make([]kmsg.JoinGroupResponseMember, len(members))
	for i, m := range members {
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Version = 3
		for _, ti := range m.Topics {
			meta.Topics = append(meta.Topics, req.Topics[ti].Name)
		}
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.MemberID
		if m.InstanceID != "" {
			jm.InstanceID = &m.InstanceID
		}
		jm.ProtocolMetadata = meta.AppendTo(nil)
		join[i] = jm
	}
	mb, _, err := b.MemberBalancer(join)
	if err != nil {
		t.Fatalf("kgo member balancer: %v", err)
	}
	counts := map[string]int32{}
	for _, tp := range req.Topics {
		if tp.Exists {
			counts[tp.Name] = tp.PartitionCount
		}
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(counts)
	if err != nil {
		t.Fatalf("kgo balance: %v", err)
	}
	out := Plan{}
	for _, m := range members {
		out[m.MemberID] = map[string][]int32{}
	}
	for _, a := range into.IntoSyncAssignment() {
		var ma kmsg.ConsumerMemberAssignment
		if err := ma.ReadFrom(a.MemberAssignment); err != nil {
			t.Fatalf("kgo assignment for %q: %v", a.MemberID, err)
		}
		for _, tp := range ma.Topics {
			if len(tp.Partitions) > 0 {
				out[a.MemberID][tp.Topic] = slices.Sorted(slices.Values(tp.Partitions))
			}
		}
	}
	return out
}

// KafkaSorted returns a copy of members in Kafka's member order, static
// members by instance id and then dynamic members by member id, as kgo's
// group leader sorts them before balancing and as reference models walk
// them.
func KafkaSorted(members []abi.Member) []abi.Member {
	s := slices.Clone(members)
	sort.SliceStable(s, func(i, j int) bool {
		a, b := s[i], s[j]
		if (a.InstanceID != "") != (b.InstanceID != "") {
			return a.InstanceID != ""
		}
		if a.InstanceID != b.InstanceID {
			return a.InstanceID < b.InstanceID
		}
		return a.MemberID < b.MemberID
	})
	return s
}

// KgoShape is the shape of the groups that the kgo comparisons draw: up to
// 10 topics, some missing or empty, and up to 25 members, a third of them
// static. It has no racks, because kgo's balancers take racks only from a
// client's metadata cache, which a test cannot fill.
func KgoShape() Shape {
	return Shape{Topics: 10, MissingOneIn: 8, PartitionCounts: Below(40), Members: 25, UniformOneIn: 3}
}

// AsGiven returns members as they are: with CheckMatchesKgo, it hands kgo
// the members in the request's own, random order.
func AsGiven(members []abi.Member) []abi.Member { return members }

// CheckMatchesKgo draws n groups of KgoShape from r, runs fn and kgo's
// balancer b on each, and fails t at the first group on which the two
// disagree. b gets the members in the order each of orders puts them in,
// one run per order: KafkaSorted is how kgo's group leader hands them over.
func CheckMatchesKgo(t testing.TB, fn AssignFunc, b kgo.GroupBalancer, r *rand.Rand, n int, orders ...func([]abi.Member) []abi.Member) {
	t.Helper()
	for i := range n {
		req := RandomGroup(r, KgoShape())
		want := AsPlan(req, Run(t, fn, req))
		for _, order := range orders {
			if got := KgoPlan(t, b, req, order(req.Members)); !got.Equal(want) {
				t.Fatalf("scenario %d: kgo and the assignor disagree:\n kgo %v\nours %v", i, got, want)
			}
		}
	}
}

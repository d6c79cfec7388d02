package roundrobin_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/plugins/roundrobin"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// These tests hold the package to franz-go's kgo.RoundRobinBalancer, an
// independent implementation of Kafka's round-robin assignor. They live in
// an external test package so that the assignor itself never imports
// franz-go (it must build for wasip1 with the standard library only).
//
// The one difference: kgo's round-robin balancer walks the members in the
// order it is given them. kgo's own group leader sorts them first, by
// instance id and then member id, exactly as Kafka does, so a kgo client
// agrees with Kafka; code that calls MemberBalancer directly with unsorted
// members does not. TestRoundRobin_KgoFollowsTheOrderItIsGiven pins this down.

// kgoAssign runs balancer b on req with the members in the order given, and
// returns member id -> topic -> partitions.
func kgoAssign(t testing.TB, b kgo.GroupBalancer, req *abi.Request, members []abi.Member) map[string]map[string][]int32 {
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
	out := map[string]map[string][]int32{}
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

// kafkaSorted returns the members in Kafka's order, as kgo's group leader
// sorts them before balancing.
func kafkaSorted(members []abi.Member) []abi.Member {
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

// ours runs the package and returns member id -> topic -> partitions.
func ours(t testing.TB, req *abi.Request) map[string]map[string][]int32 {
	t.Helper()
	resp, err := roundrobin.Assign(req)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]int32{}
	for _, ma := range resp.Members {
		m := map[string][]int32{}
		for _, tp := range ma.Partitions {
			m[req.Topics[tp.Topic].Name] = tp.Partitions
		}
		out[req.Members[ma.Member].MemberID] = m
	}
	return out
}

func equalPlans(a, b map[string]map[string][]int32) bool {
	return maps.EqualFunc(a, b, func(x, y map[string][]int32) bool {
		return maps.EqualFunc(x, y, slices.Equal[[]int32])
	})
}

// randomGroup makes a group: some topics missing or empty, some static
// members, mixed or identical subscriptions, members in random order.
func randomGroup(r *rand.Rand) *abi.Request {
	req := &abi.Request{}
	nt := 1 + r.IntN(10)
	for i := range nt {
		t := abi.Topic{Name: fmt.Sprintf("%c%d", 'a'+r.IntN(26), i)}
		if r.IntN(8) > 0 {
			t.Exists = true
			t.PartitionCount = int32(r.IntN(40))
		}
		req.Topics = append(req.Topics, t)
	}
	nm := 1 + r.IntN(25)
	uniform := r.IntN(3) == 0
	ids := r.Perm(1000)
	for i := range nm {
		m := abi.Member{MemberID: fmt.Sprintf("m%03d", ids[i]), OwnedGeneration: -1}
		if r.IntN(3) == 0 {
			m.InstanceID = fmt.Sprintf("i%03d", ids[len(ids)-1-i])
		}
		for ti := range nt {
			if uniform || r.IntN(2) == 0 {
				m.Topics = append(m.Topics, int32(ti))
			}
		}
		req.Members = append(req.Members, m)
	}
	return req
}

// TestRoundRobin_MatchesKgoRoundRobinBalancer compares the package with
// kgo's round-robin balancer on random groups, with kgo given the members in
// Kafka's order as its group leader gives them.
func TestRoundRobin_MatchesKgoRoundRobinBalancer(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 54))
	for i := range 300 {
		req := randomGroup(r)
		want := ours(t, req)
		if got := kgoAssign(t, kgo.RoundRobinBalancer(), req, kafkaSorted(req.Members)); !equalPlans(got, want) {
			t.Fatalf("scenario %d: kgo and this package disagree:\n kgo %v\nours %v", i, got, want)
		}
	}
}

// TestRoundRobin_KgoFollowsTheOrderItIsGiven shows where kgo and Kafka part:
// given members in an arbitrary order, kgo's balancer deals to them in that
// order, while Kafka (and this package) sorts them. kgo's answer is then
// exactly Kafka's answer for a group whose ids happen to sort in the order
// kgo was given.
func TestRoundRobin_KgoFollowsTheOrderItIsGiven(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 54))
	differ := 0
	for i := range 200 {
		req := randomGroup(r)
		given := slices.Clone(req.Members)
		r.Shuffle(len(given), func(a, b int) { given[a], given[b] = given[b], given[a] })
		got := kgoAssign(t, kgo.RoundRobinBalancer(), req, given)

		// The same group, renamed so that Kafka's order is the given order.
		renamed := *req
		renamed.Members = slices.Clone(given)
		back := map[string]string{}
		for k := range renamed.Members {
			id := fmt.Sprintf("member-%04d", k)
			back[id] = renamed.Members[k].MemberID
			renamed.Members[k].MemberID, renamed.Members[k].InstanceID = id, ""
		}
		want := map[string]map[string][]int32{}
		for id, plan := range ours(t, &renamed) {
			want[back[id]] = plan
		}
		if !equalPlans(got, want) {
			t.Fatalf("scenario %d: kgo did not deal in the order it was given:\n kgo %v\nwant %v", i, got, want)
		}
		if !equalPlans(got, ours(t, req)) {
			differ++
		}
	}
	// The difference is real: on most shuffled inputs kgo's answer is not
	// Kafka's.
	if differ < 100 {
		t.Fatalf("kgo matched Kafka's order-independent answer on %d of 200 shuffled inputs; expected most to differ", 200-differ)
	}
}

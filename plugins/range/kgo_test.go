package rangeassignor_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// These tests hold the package to franz-go's kgo.RangeBalancer, an
// independent implementation of Kafka's range assignor, on groups without
// racks. They live in an external test package so that the assignor itself
// never imports franz-go (it must build for wasip1 with the standard
// library only).
//
// Known differences between kgo and Kafka, none of which shows up here:
//   - kgo's range balancer has its own rack mode, used only with
//     kgo.BalanceRacks() and fed by the client's metadata cache: it matches a
//     member's rack against the partition leader's rack only, assigns per
//     topic with no co-partitioning, and fixes the extra partition to the
//     first P%C members instead of the first members to go above the base
//     quota. KIP-881 (and this package) use every replica's rack,
//     co-partition topics with equal subscribers and partition counts, and
//     move the extra partition to whichever member first exceeds the base.
//     kgo's rack input is unexported, so it cannot be driven from here.
//   - Without racks the two agree exactly, whatever order kgo gets its
//     members in, because kgo sorts each topic's members itself.

// kgoAssign runs balancer b on req the way a kgo group leader would, with
// the members in the order given, and returns member id -> topic -> partitions.
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
	resp, err := rangeassignor.Assign(req)
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

// randomGroup makes a group without racks: some topics missing or empty,
// some static members, mixed or identical subscriptions, members in random
// order.
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

// TestRange_MatchesKgoRangeBalancer compares the package with kgo's range
// balancer on random groups without racks, feeding kgo the members both in
// Kafka's order and in the request's random order.
func TestRange_MatchesKgoRangeBalancer(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 881))
	for i := range 300 {
		req := randomGroup(r)
		want := ours(t, req)
		for _, members := range [][]abi.Member{kafkaSorted(req.Members), req.Members} {
			if got := kgoAssign(t, kgo.RangeBalancer(), req, members); !equalPlans(got, want) {
				t.Fatalf("scenario %d: kgo and this package disagree:\n kgo %v\nours %v", i, got, want)
			}
		}
	}
}

package assignortest

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// checkWellFormed fails t unless req is a request the host could send:
// unique member ids and topic names, subscriptions ascending and in range,
// placements and replica sets that fit their tables.
func checkWellFormed(t *testing.T, req *abi.Request) {
	t.Helper()
	ids := map[string]bool{}
	for _, m := range req.Members {
		if ids[m.MemberID] {
			t.Fatalf("member id %q twice", m.MemberID)
		}
		ids[m.MemberID] = true
		if !slices.IsSorted(m.Topics) {
			t.Fatalf("member %q: topics %v not ascending", m.MemberID, m.Topics)
		}
		for _, ti := range m.Topics {
			if ti < 0 || int(ti) >= len(req.Topics) {
				t.Fatalf("member %q: topic index %d out of range", m.MemberID, ti)
			}
		}
	}
	names := map[string]bool{}
	for _, tp := range req.Topics {
		if names[tp.Name] {
			t.Fatalf("topic %q twice", tp.Name)
		}
		names[tp.Name] = true
		if !tp.Exists && (tp.PartitionCount != 0 || tp.Partitions != nil) {
			t.Fatalf("missing topic %q has partitions", tp.Name)
		}
		if tp.Partitions != nil && len(tp.Partitions) != int(tp.PartitionCount) {
			t.Fatalf("topic %q: %d placements for %d partitions", tp.Name, len(tp.Partitions), tp.PartitionCount)
		}
		for _, p := range tp.Partitions {
			if int(p.Replicas) >= len(req.ReplicaSets) || int(p.ISR) >= len(req.ReplicaSets) {
				t.Fatalf("topic %q: replica set out of range", tp.Name)
			}
		}
	}
}

// subscriptions describes a group by names: member id -> subscribed topic
// names with their partition counts.
func subscriptions(req *abi.Request) map[string]map[string]int32 {
	out := map[string]map[string]int32{}
	for _, m := range req.Members {
		out[m.MemberID] = map[string]int32{}
		for _, ti := range m.Topics {
			out[m.MemberID][req.Topics[ti].Name] = req.Topics[ti].PartitionCount
		}
	}
	return out
}

// TestRandomGroup_WellFormedAndShuffledAlike checks that every shape draws
// requests the host could send, that the draws reach the cases the shapes
// promise (missing topics, static members, racks, identical
// subscriptions), and that Shuffled describes the same group.
func TestRandomGroup_WellFormedAndShuffledAlike(t *testing.T) {
	shapes := map[string]Shape{
		"kgo":   KgoShape(),
		"racks": {Topics: 8, SparseOneIn: 5, MissingOneIn: 10, PartitionCounts: []int32{0, 4, 4, 6}, Racks: true, Members: 12, UniformOneIn: 2, UniformSubset: true},
	}
	for name, shape := range shapes {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(9, 9))
			var missing, static, racked, uniform int
			for range 200 {
				req := RandomGroup(r, shape)
				checkWellFormed(t, req)
				again := Shuffled(r, req)
				checkWellFormed(t, again)
				if !maps.EqualFunc(subscriptions(req), subscriptions(again), maps.Equal) {
					t.Fatalf("Shuffled changed the group:\n%v\n%v", subscriptions(req), subscriptions(again))
				}
				if slices.ContainsFunc(req.Topics, func(tp abi.Topic) bool { return !tp.Exists }) {
					missing++
				}
				if slices.ContainsFunc(req.Members, func(m abi.Member) bool { return m.InstanceID != "" }) {
					static++
				}
				if slices.ContainsFunc(req.Members, func(m abi.Member) bool { return m.Rack != "" }) {
					racked++
				}
				if len(req.Members) > 1 && !slices.ContainsFunc(req.Members, func(m abi.Member) bool { return !slices.Equal(m.Topics, req.Members[0].Topics) }) {
					uniform++
				}
			}
			if missing == 0 || static == 0 || uniform == 0 || shape.Racks != (racked > 0) {
				t.Errorf("200 groups: %d with a missing topic, %d with static members, %d with racks, %d with identical subscriptions", missing, static, racked, uniform)
			}
		})
	}
}

// TestBuildRequest_PlacesReplicasLikeKafkasTests checks the table order
// (reversed), topics that only members mention, and the replica rule of
// Placement.
func TestBuildRequest_PlacesReplicasLikeKafkasTests(t *testing.T) {
	topics := []TopicSpec{{Name: "t1", Partitions: 2}, {Name: "t2", Partitions: 3}}
	members := []MemberSpec{{ID: "a", Rack: "x", Topics: []string{"t2", "gone"}}, {ID: "b", Instance: "i", Topics: []string{"t1"}}}
	for _, sameStart := range []bool{false, true} {
		req := BuildRequest(topics, members, &Placement{RF: 2, BrokerRacks: []string{"x", "y", ""}, SameStart: sameStart})
		checkWellFormed(t, req)
		if got := []string{req.Topics[0].Name, req.Topics[1].Name, req.Topics[2].Name}; !slices.Equal(got, []string{"t2", "t1", "gone"}) || req.Topics[2].Exists {
			t.Fatalf("topic table %v, want t2, t1 and the missing gone", req.Topics)
		}
		if req.Members[0].MemberID != "b" || req.Members[0].InstanceID != "i" || req.Members[1].Rack != "x" {
			t.Fatalf("member table %+v, want b (instance i), then a (rack x)", req.Members)
		}
		// t2 is the second topic: its partition 0 starts on broker 0 when
		// every topic starts there, else where t1 (2 partitions) stopped.
		start := 2
		if sameStart {
			start = 0
		}
		for p := range int32(3) {
			want := []int32{int32(100 + (int(p)+start)%3), int32(100 + (int(p)+start+1)%3)}
			if got := req.Replicas(0, p); !slices.Equal(got, want) {
				t.Errorf("sameStart=%v: t2-%d on brokers %v, want %v", sameStart, p, got, want)
			}
		}
	}
}

// TestShuffled_RemapsOwnedAndPrevious: after shuffling, every member still
// owns, and was previously given, the same partitions by topic name, and a
// member that reported nothing still reports nothing (nil, not empty).
func TestShuffled_RemapsOwnedAndPrevious(t *testing.T) {
	byName := func(req *abi.Request) map[string][2]map[string][]int32 {
		out := map[string][2]map[string][]int32{}
		for _, m := range req.Members {
			if m.Owned == nil && m.Previous == nil {
				continue
			}
			var got [2]map[string][]int32
			for i, list := range [][]abi.TopicPartitions{m.Owned, m.Previous} {
				got[i] = map[string][]int32{}
				for _, tp := range list {
					got[i][req.Topics[tp.Topic].Name] = tp.Partitions
				}
			}
			out[m.MemberID] = got
		}
		return out
	}
	r := rand.New(rand.NewPCG(4, 4))
	for range 100 {
		req := RandomGroup(r, KgoShape())
		for i := range req.Members {
			m := &req.Members[i]
			if i%3 == 0 {
				continue // reports nothing
			}
			for _, ti := range m.Topics {
				if p := req.Topics[ti].PartitionCount; p > 0 {
					m.Owned = append(m.Owned, abi.TopicPartitions{Topic: ti, Partitions: []int32{r.Int32N(p)}})
					m.Previous = append(m.Previous, abi.TopicPartitions{Topic: ti, Partitions: []int32{r.Int32N(p)}})
				}
			}
		}
		want := byName(req)
		again := Shuffled(r, req)
		got := byName(again)
		same := maps.EqualFunc(want, got, func(a, b [2]map[string][]int32) bool {
			return maps.EqualFunc(a[0], b[0], slices.Equal) && maps.EqualFunc(a[1], b[1], slices.Equal)
		})
		if !same {
			t.Fatalf("Shuffled changed ownership:\n%v\n%v", want, got)
		}
	}
}

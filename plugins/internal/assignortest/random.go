package assignortest

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Shape says what RandomGroup draws. Each test keeps its own shape, so
// that the scenarios a test has always run stay the same ones.
type Shape struct {
	// Topics is the most topics a group has: it has 1 to Topics.
	Topics int
	// SparseOneIn, when not 0, makes one group in SparseOneIn a group of 20
	// to 59 topics in which a member without the common subscription takes
	// about one topic in 12, rather than one in 2. Such groups reach the
	// code paths for members with few topics among many.
	SparseOneIn int
	// MissingOneIn makes one topic in MissingOneIn a name that members
	// mention but the cluster does not have.
	MissingOneIn int
	// PartitionCounts are the partition counts an existing topic draws from,
	// uniformly. Repeating a count makes co-partitioned topics common.
	PartitionCounts []int32
	// Racks gives brokers and most members racks (some none), and places
	// replicas at random, sometimes not at all.
	Racks bool
	// Members is the most members a group has: it has 1 to Members.
	Members int
	// UniformOneIn makes one group in UniformOneIn a group whose members all
	// have the same subscription.
	UniformOneIn int
	// UniformSubset makes that common subscription about two topics in
	// three, rather than every topic.
	UniformSubset bool
}

// RangeShape is what range's random tests draw: partition counts from a
// short list, so that topics with equal counts, and so co-partitioned topics
// (which Kafka's rack-aware range treats together), are common; identical
// subscriptions often, for the same reason; and one group in five with many
// topics and sparse subscriptions.
func RangeShape(withRacks bool) Shape {
	return Shape{
		Topics:          8,
		SparseOneIn:     5,
		MissingOneIn:    10,
		PartitionCounts: []int32{0, 1, 2, 3, 4, 4, 6, 6, 8, 12, 25},
		Racks:           withRacks,
		Members:         12,
		UniformOneIn:    2,
		UniformSubset:   true,
	}
}

// Below returns the counts 0 to n-1, for Shape.PartitionCounts.
func Below(n int32) []int32 {
	c := make([]int32, n)
	for i := range c {
		c[i] = int32(i)
	}
	return c
}

// RandomGroup draws a group of shape s from r. Topic names are in random
// order relative to the topic table, some members are static, and member
// ids are unique.
func RandomGroup(r *rand.Rand, s Shape) *abi.Request {
	req := &abi.Request{}
	nt, density := 1+r.IntN(s.Topics), 2
	if s.SparseOneIn > 0 && r.IntN(s.SparseOneIn) == 0 {
		nt, density = 20+r.IntN(40), 12
	}
	for i := range nt {
		t := abi.Topic{Name: fmt.Sprintf("%c%d", 'a'+r.IntN(26), i)}
		if r.IntN(s.MissingOneIn) > 0 {
			t.Exists = true
			t.PartitionCount = s.PartitionCounts[r.IntN(len(s.PartitionCounts))]
		}
		req.Topics = append(req.Topics, t)
	}
	if s.Racks {
		placeRandomReplicas(r, req)
	}
	nm := 1 + r.IntN(s.Members)
	uniform := r.IntN(s.UniformOneIn) == 0
	var shared []int32
	for ti := range nt {
		if !s.UniformSubset || r.IntN(3) > 0 {
			shared = append(shared, int32(ti))
		}
	}
	ids := r.Perm(1000)
	for i := range nm {
		m := abi.Member{MemberID: fmt.Sprintf("m%03d", ids[i]), OwnedGeneration: -1}
		if r.IntN(3) == 0 {
			m.InstanceID = fmt.Sprintf("i%03d", ids[len(ids)-1-i])
		}
		if s.Racks && r.IntN(10) < 7 {
			m.Rack = string(rune('a' + r.IntN(5)))
		}
		if uniform {
			m.Topics = slices.Clone(shared)
		} else {
			for ti := range nt {
				if r.IntN(density) == 0 {
					m.Topics = append(m.Topics, int32(ti))
				}
			}
		}
		req.Members = append(req.Members, m)
	}
	return req
}

// placeRandomReplicas adds 1 to 6 brokers, most with one of four racks, and
// places the replicas of most existing topics on 1 to 3 of them. Partitions
// with the same replicas share a replica set, as the host sends them.
func placeRandomReplicas(r *rand.Rand, req *abi.Request) {
	nb := 1 + r.IntN(6)
	for b := range nb {
		rack := ""
		if r.IntN(5) > 0 {
			rack = string(rune('a' + r.IntN(4)))
		}
		req.Brokers = append(req.Brokers, abi.Broker{ID: int32(b + 1), Rack: rack})
	}
	sets := map[string]uint32{}
	for ti := range req.Topics {
		t := &req.Topics[ti]
		if !t.Exists || r.IntN(10) == 0 {
			continue
		}
		rf := 1 + r.IntN(min(3, nb))
		for range t.PartitionCount {
			replicas := make([]int32, 0, rf)
			for _, b := range r.Perm(nb)[:rf] {
				replicas = append(replicas, int32(b+1))
			}
			key := fmt.Sprint(replicas)
			rs, ok := sets[key]
			if !ok {
				rs = uint32(len(req.ReplicaSets))
				sets[key] = rs
				req.ReplicaSets = append(req.ReplicaSets, replicas)
			}
			t.Partitions = append(t.Partitions, abi.Partition{Leader: replicas[0], Replicas: rs, ISR: rs})
		}
	}
}

// Shuffled returns req with its member and topic tables in a random order,
// every topic reference remapped (subscriptions, owned partitions and the
// previous assignment), so that it describes the same group.
func Shuffled(r *rand.Rand, req *abi.Request) *abi.Request {
	out := *req
	perm := r.Perm(len(req.Topics)) // old index -> new index
	out.Topics = make([]abi.Topic, len(req.Topics))
	for old, nw := range perm {
		out.Topics[nw] = req.Topics[old]
	}
	remap := func(tps []abi.TopicPartitions) []abi.TopicPartitions {
		if tps == nil {
			return nil
		}
		out := make([]abi.TopicPartitions, len(tps))
		for i, tp := range tps {
			out[i] = abi.TopicPartitions{Topic: int32(perm[tp.Topic]), Partitions: tp.Partitions}
		}
		return out
	}
	out.Members = make([]abi.Member, len(req.Members))
	for i, old := range r.Perm(len(req.Members)) {
		m := req.Members[old]
		m.Topics = make([]int32, len(req.Members[old].Topics))
		for j, t := range req.Members[old].Topics {
			m.Topics[j] = int32(perm[t])
		}
		slices.Sort(m.Topics)
		m.Owned, m.Previous = remap(m.Owned), remap(m.Previous)
		out.Members[i] = m
	}
	return &out
}

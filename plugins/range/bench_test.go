package rangeassignor

import (
	"fmt"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// benchRequest is a group of members subscribing to all of topics, each
// with the same partition count. With racks, members and brokers spread
// over three racks and each partition has two replicas, so partitions differ
// in racks and rack-aware assignment (with co-partitioning) runs.
func benchRequest(members, topics, partitions int, withRacks bool) *abi.Request {
	req := &abi.Request{}
	if withRacks {
		for b := range 6 {
			req.Brokers = append(req.Brokers, abi.Broker{ID: int32(b), Rack: string(rune('a' + b%3))})
		}
		for b := range 6 {
			req.ReplicaSets = append(req.ReplicaSets, []int32{int32(b), int32((b + 1) % 6)})
		}
	}
	subs := make([]int32, topics)
	for t := range topics {
		tp := abi.Topic{Name: fmt.Sprintf("topic-%04d", t), Exists: true, PartitionCount: int32(partitions)}
		if withRacks {
			tp.Partitions = make([]abi.Partition, partitions)
			for p := range tp.Partitions {
				rs := uint32((p + t) % 6)
				tp.Partitions[p] = abi.Partition{Leader: req.ReplicaSets[rs][0], Replicas: rs, ISR: rs}
			}
		}
		req.Topics = append(req.Topics, tp)
		subs[t] = int32(t)
	}
	for m := range members {
		mem := abi.Member{MemberID: fmt.Sprintf("consumer-%05d", m), Topics: subs, OwnedGeneration: -1}
		if withRacks {
			mem.Rack = string(rune('a' + m%3))
		}
		req.Members = append(req.Members, mem)
	}
	return req
}

// BenchmarkAssign measures the target sizes: 2,000 members over 1,000,000
// partitions (500 topics of 2,000), and 100 members over 25,000 partitions
// (25 topics of 1,000), with identical subscriptions.
func BenchmarkAssign(b *testing.B) {
	cases := []struct {
		name                        string
		members, topics, partitions int
		racks                       bool
	}{
		{"members=2000/partitions=500x2000", 2000, 500, 2000, false},
		{"members=100/partitions=25x1000", 100, 25, 1000, false},
		{"racks/members=2000/partitions=500x2000", 2000, 500, 2000, true},
		{"racks/members=100/partitions=25x1000", 100, 25, 1000, true},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			req := benchRequest(bc.members, bc.topics, bc.partitions, bc.racks)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Assign(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package roundrobin

import (
	"fmt"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// benchRequest is a group of members that all subscribe to all of topics,
// each with the same partition count.
func benchRequest(members, topics, partitions int) *abi.Request {
	req := &abi.Request{}
	subs := make([]int32, topics)
	for t := range topics {
		req.Topics = append(req.Topics, abi.Topic{Name: fmt.Sprintf("topic-%04d", t), Exists: true, PartitionCount: int32(partitions)})
		subs[t] = int32(t)
	}
	for m := range members {
		req.Members = append(req.Members, abi.Member{MemberID: fmt.Sprintf("consumer-%05d", m), Topics: subs, OwnedGeneration: -1})
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
	}{
		{"members=2000/partitions=500x2000", 2000, 500, 2000},
		{"members=100/partitions=25x1000", 100, 25, 1000},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			req := benchRequest(bc.members, bc.topics, bc.partitions)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Assign(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

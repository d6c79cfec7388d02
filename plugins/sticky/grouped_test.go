package sticky

import (
	"fmt"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// roundRobinGroup is a group of members subscribed to topics equally large
// topics of partitions each, with names in table order.
func roundRobinGroup(members, topics int, partitions int32) *abi.Request {
	req := &abi.Request{GroupID: "g", Generation: 1, Protocol: CooperativeName, RebalanceProtocol: abi.Cooperative}
	all := make([]int32, topics)
	for t := range topics {
		req.Topics = append(req.Topics, abi.Topic{Name: fmt.Sprintf("t%03d", t), Exists: true, PartitionCount: partitions})
		all[t] = int32(t)
	}
	for m := range members {
		req.Members = append(req.Members, abi.Member{MemberID: fmt.Sprintf("m%03d", m), Cooperative: true, Topics: all, OwnedGeneration: -1})
	}
	return req
}

// TestCooperative_GroupedLayoutKeepsARoundRobinShareOneEntry checks the
// point of the grouped layout at a small scale of the java-large benchmark:
// when every member holds partition i of each topic, the rejoin's request
// and answer carry one entry per member, and the answer is the plain
// layout's.
func TestCooperative_GroupedLayoutKeepsARoundRobinShareOneEntry(t *testing.T) {
	tests := []struct {
		name                string
		members, topics     int
		partitions          int32
		maxEntriesPerMember int
	}{
		{"as many partitions per topic as members", 20, 30, 20, 1},
		{"twice as many partitions as members", 10, 12, 20, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first := roundRobinGroup(tt.members, tt.topics, tt.partitions)
			resp, err := AssignCooperative(first)
			if err != nil {
				t.Fatal(err)
			}
			rejoin := roundRobinGroup(tt.members, tt.topics, tt.partitions)
			rejoin.Generation = 2
			for _, ma := range resp.Members {
				if ma.Member == 0 {
					continue // comes back with nothing, as a restarted consumer
				}
				m := &rejoin.Members[ma.Member]
				m.Owned, m.OwnedGeneration = ma.Partitions, 1
			}
			grouped := rejoin.Grouped()
			for i, m := range grouped.Members[1:] {
				if len(m.Owned) > tt.maxEntriesPerMember {
					t.Fatalf("member %d: %d grouped owned entries, want at most %d", i+1, len(m.Owned), tt.maxEntriesPerMember)
				}
			}
			plain, err := AssignCooperative(rejoin)
			if err != nil {
				t.Fatal(err)
			}
			checkGroupedAgrees(t, coop, rejoin, plain)
			got, err := AssignCooperative(grouped)
			if err != nil {
				t.Fatal(err)
			}
			for _, ma := range got.Members {
				if len(ma.Partitions) > tt.maxEntriesPerMember {
					t.Fatalf("member %d: %d entries in the grouped answer, want at most %d", ma.Member, len(ma.Partitions), tt.maxEntriesPerMember)
				}
			}
			if len(got.TopicLists) != 1 {
				t.Fatalf("%d topic lists in the answer, want the one list of every topic", len(got.TopicLists))
			}
		})
	}
}

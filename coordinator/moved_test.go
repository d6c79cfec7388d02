package coordinator

import (
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

func TestCountMoved_CountsPartitionsAMemberDidNotHold(t *testing.T) {
	req := &abi.Request{
		Topics: []abi.Topic{{Name: "a", Exists: true, PartitionCount: 4}, {Name: "b", Exists: true, PartitionCount: 2}},
		Members: []abi.Member{
			{MemberID: "m0", Previous: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{1, 0}}}},
			{MemberID: "m1", Previous: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{2, 3}}, {Topic: 1, Partitions: []int32{0}}}},
			{MemberID: "new"},
		},
	}
	tests := []struct {
		name   string
		target []abi.MemberAssignment
		want   int
	}{
		{"nothing changes", []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{0, 1}}}},
			{Member: 1, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{3, 2}}, {Topic: 1, Partitions: []int32{0}}}},
		}, 0},
		{"one partition to the new member, an unheld one to m0", []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{0, 1}}, {Topic: 1, Partitions: []int32{1}}}},
			{Member: 1, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{2}}, {Topic: 1, Partitions: []int32{0}}}},
			{Member: 2, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{3}}}},
		}, 2},
		{"swap", []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{0, 1}}}},
			{Member: 0, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{2, 3}}, {Topic: 1, Partitions: []int32{0}}}},
		}, 5},
	}
	for _, tt := range tests {
		if got := countMoved(req, &abi.Response{Members: tt.target}); got != tt.want {
			t.Errorf("%s: moved %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestRackLocality_CountsPartitionsWithAReplicaInTheMembersRack(t *testing.T) {
	req := &abi.Request{
		Brokers:     []abi.Broker{{ID: 0, Rack: "a"}, {ID: 1, Rack: "b"}, {ID: 2}},
		ReplicaSets: [][]int32{{0}, {1}, {0, 1}, {2}},
		Topics: []abi.Topic{{Name: "t", Exists: true, PartitionCount: 4, Partitions: []abi.Partition{
			{Leader: 0, Replicas: 0}, {Leader: 1, Replicas: 1}, {Leader: 0, Replicas: 2}, {Leader: 2, Replicas: 3},
		}}},
		Members: []abi.Member{{MemberID: "in-a", Rack: "a"}, {MemberID: "no-rack"}},
	}
	resp := &abi.Response{Members: []abi.MemberAssignment{
		// t-0 local (a), t-1 remote (b), t-2 local (a or b), t-3 unknown (broker 2 has no rack).
		{Member: 0, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{0, 1, 2, 3}}}},
		{Member: 1, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{0}}}},
	}}
	if local, known := rackLocality(req, resp); local != 2 || known != 3 {
		t.Errorf("local %d of %d known, want 2 of 3", local, known)
	}
	req.Brokers = []abi.Broker{{ID: 0}, {ID: 1}}
	if local, known := rackLocality(req, resp); local != 0 || known != 0 {
		t.Errorf("without broker racks: local %d of %d, want 0 of 0", local, known)
	}
}

func TestCountUnassigned_CountsSubscribedPartitionsNobodyGot(t *testing.T) {
	req := &abi.Request{
		Topics:  []abi.Topic{{Name: "a", Exists: true, PartitionCount: 3}, {Name: "b", Exists: true, PartitionCount: 2}, {Name: "gone"}, {Name: "c", Exists: true, PartitionCount: 5}},
		Members: []abi.Member{{MemberID: "m0", Topics: []int32{0, 2}}, {MemberID: "m1", Topics: []int32{0, 1}}},
	}
	resp := &abi.Response{Members: []abi.MemberAssignment{
		{Member: 0, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{0, 1}}}},
		{Member: 1, Partitions: []abi.TopicPartitions{{Topic: 1, Partitions: []int32{1}}}},
	}}
	// a has 3 and b 2 subscribed partitions (c nobody subscribes to, gone
	// does not exist); 3 were given out.
	if got := countUnassigned(req, resp); got != 2 {
		t.Errorf("unassigned %d, want 2", got)
	}
}

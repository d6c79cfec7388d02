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

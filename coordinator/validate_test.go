package coordinator

import (
	"errors"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// TestValidateResponse_RefusesEveryBrokenRule holds the coordinator to the
// ABI's response rules: an answer breaking any of them is refused as
// ErrInvalidAssignment, naming the rule, and the next assignor runs.
func TestValidateResponse_RefusesEveryBrokenRule(t *testing.T) {
	// t has 2 partitions, u 1, gone does not exist; a subscribes to t, b to
	// all three.
	req := &abi.Request{
		Topics: []abi.Topic{{Name: "t", Exists: true, PartitionCount: 2}, {Name: "u", Exists: true, PartitionCount: 1}, {Name: "gone"}},
		Members: []abi.Member{
			{MemberID: "a", Topics: []int32{0}, OwnedGeneration: -1},
			{MemberID: "b", Topics: []int32{0, 1, 2}, OwnedGeneration: -1},
		},
	}
	one := func(member int32, tps ...abi.TopicPartitions) *abi.Response {
		return &abi.Response{Members: []abi.MemberAssignment{{Member: member, Partitions: tps}}}
	}
	tps := func(topic int32, ps ...int32) abi.TopicPartitions {
		return abi.TopicPartitions{Topic: topic, Partitions: ps}
	}
	grouped := one(1, tps(abi.ListRef(0), 0))
	grouped.TopicLists = [][]int32{{0, 1}}
	tests := []struct {
		name string
		resp *abi.Response
		rule abi.Rule
	}{
		{"valid, u left out", one(1, tps(0, 0, 1)), ""},
		{"member index", one(2), abi.RuleMemberIndex},
		{"member twice", &abi.Response{Members: []abi.MemberAssignment{{Member: 0}, {Member: 0}}}, abi.RuleDuplicateMember},
		{"topic index", one(1, tps(3, 0)), abi.RuleTopicIndex},
		{"topic that does not exist", one(1, tps(2, 0)), abi.RuleNonexistentTopic},
		{"partition that does not exist", one(0, tps(0, 2)), abi.RulePartitionRange},
		{"partition twice", one(0, tps(0, 1), tps(0, 1)), abi.RuleDuplicatePartition},
		{"unsubscribed topic", one(0, tps(1, 0)), abi.RuleUnsubscribed},
		// The coordinator's requests are plain: it reads no topic lists.
		{"grouped entry", grouped, abi.RuleTopicIndex},
	}
	for _, tt := range tests {
		err := validateResponse(req, tt.resp)
		var e *abi.RuleError
		switch {
		case tt.rule == "" && err != nil:
			t.Errorf("%s: unexpected error %v", tt.name, err)
		case tt.rule != "" && (!errors.Is(err, ErrInvalidAssignment) || !errors.As(err, &e) || e.Rule != tt.rule):
			t.Errorf("%s: err = %v, want %v of rule %q", tt.name, err, ErrInvalidAssignment, tt.rule)
		}
	}
}

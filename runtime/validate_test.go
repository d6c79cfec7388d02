package wasmruntime

import (
	"errors"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

func tp(topic int32, parts ...int32) abi.TopicPartitions {
	return abi.TopicPartitions{Topic: topic, Partitions: parts}
}

// TestValidate_ReportsEveryRuleAsInvalidOutput breaks each rule once and
// holds Validate to the error operators and metrics see: kind
// ErrInvalidOutput, reason "invalid", the rule named in the message. The
// rules themselves are abi.ValidateResponse's, tested in package abi.
func TestValidate_ReportsEveryRuleAsInvalidOutput(t *testing.T) {
	// smallRequest: t0 has 2 partitions, t1 has 1; m0 subscribes to t0,
	// m1 to t0 and t1. A third, non-existent topic is mentioned by m1.
	req := smallRequest()
	req.Topics = append(req.Topics, abi.Topic{Name: "gone"})
	req.Members[1].Topics = []int32{0, 1, 2}
	info := abi.AssignorInfo{Name: "x"}
	lenient := abi.AssignorInfo{Name: "x", MayLeaveUnassigned: true}
	one := func(member int32, tps ...abi.TopicPartitions) abi.Response {
		return abi.Response{Members: []abi.MemberAssignment{{Member: member, Partitions: tps}}}
	}

	tests := []struct {
		resp abi.Response
		info abi.AssignorInfo
		rule Rule
	}{
		{abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tp(0, 0)}},
			{Member: 1, Partitions: []abi.TopicPartitions{tp(0, 1), tp(1, 0)}}}}, info, ""},
		{abi.Response{Error: "no"}, info, ""},
		{one(2), lenient, RuleMemberIndex},
		{abi.Response{Members: []abi.MemberAssignment{{Member: 0}, {Member: 0}}}, lenient, RuleDuplicateMember},
		{one(1, tp(7, 0)), lenient, RuleTopicIndex},
		{one(1, tp(2, 0)), lenient, RuleNonexistentTopic},
		{one(0, tp(0, 2)), lenient, RulePartitionRange},
		{one(0, tp(0, 0), tp(0, 0)), lenient, RuleDuplicatePartition},
		{one(0, tp(1, 0)), lenient, RuleUnsubscribed},
		{abi.Response{}, info, RuleUnassigned},
	}
	for _, tt := range tests {
		err := Validate(req, &tt.resp, tt.info)
		if tt.rule == "" {
			if err != nil {
				t.Errorf("%+v: unexpected error: %v", tt.resp, err)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, ErrInvalidOutput) || e.Rule != tt.rule || e.Reason() != "invalid" ||
			e.Detail == "" || e.Err != nil || !strings.Contains(err.Error(), ": invalid output: "+string(tt.rule)+": "+e.Detail) {
			t.Errorf("%+v: err = %v, want rule %q", tt.resp, err, tt.rule)
		}
	}
}

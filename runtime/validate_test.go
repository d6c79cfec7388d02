package wasmruntime

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

func tp(topic int32, parts ...int32) abi.TopicPartitions {
	return abi.TopicPartitions{Topic: topic, Partitions: parts}
}

func TestValidate_Rules(t *testing.T) {
	// smallRequest: t0 has 2 partitions, t1 has 1; m0 subscribes to t0,
	// m1 to t0 and t1. A third, non-existent topic is mentioned by m1.
	req := smallRequest()
	req.Topics = append(req.Topics, abi.Topic{Name: "gone"})
	req.Members[1].Topics = []int32{0, 1, 2}
	info := abi.AssignorInfo{Name: "x"}
	lenient := abi.AssignorInfo{Name: "x", MayLeaveUnassigned: true}

	tests := []struct {
		name string
		resp abi.Response
		info abi.AssignorInfo
		rule Rule
	}{
		{"complete and valid", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tp(0, 0)}},
			{Member: 1, Partitions: []abi.TopicPartitions{tp(0, 1), tp(1, 0)}}}}, info, ""},
		{"error responses are not checked", abi.Response{Error: "no"}, info, ""},
		{"member index out of range", abi.Response{Members: []abi.MemberAssignment{{Member: 2}}}, lenient, RuleMemberIndex},
		{"negative member index", abi.Response{Members: []abi.MemberAssignment{{Member: -1}}}, lenient, RuleMemberIndex},
		{"member twice", abi.Response{Members: []abi.MemberAssignment{{Member: 0}, {Member: 0}}}, lenient, RuleDuplicateMember},
		{"topic index out of range", abi.Response{Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tp(7, 0)}}}}, lenient, RuleTopicIndex},
		{"topic that does not exist", abi.Response{Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tp(2, 0)}}}}, lenient, RuleNonexistentTopic},
		{"partition beyond the count", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tp(0, 2)}}}}, lenient, RulePartitionRange},
		{"negative partition", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tp(0, -1)}}}}, lenient, RulePartitionRange},
		{"partition twice in one member", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tp(0, 0), tp(0, 0)}}}}, lenient, RuleDuplicatePartition},
		{"partition to two members", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tp(0, 1)}},
			{Member: 1, Partitions: []abi.TopicPartitions{tp(0, 1)}}}}, lenient, RuleDuplicatePartition},
		{"unsubscribed topic", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tp(1, 0)}}}}, lenient, RuleUnsubscribed},
		{"subscribed partition left out", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tp(0, 0)}},
			{Member: 1, Partitions: []abi.TopicPartitions{tp(1, 0)}}}}, info, RuleUnassigned},
		{"left out, but the assignor may", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tp(0, 0)}}}}, lenient, ""},
		{"nothing at all", abi.Response{}, info, RuleUnassigned},
		{"same topic listed twice, distinct partitions", abi.Response{Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tp(0, 0), tp(1, 0), tp(0, 1)}}}}, info, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(req, &tt.resp, tt.info)
			if tt.rule == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrInvalidOutput) || e.Rule != tt.rule {
				t.Fatalf("err = %v, want rule %q", err, tt.rule)
			}
		})
	}
}

// TestValidate_RandomAssignments deals every subscribed partition of random
// requests to a random subscriber, which must pass, then breaks one rule at a
// time, which must be caught under the right name.
func TestValidate_RandomAssignments(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	info := abi.AssignorInfo{Name: "x"}
	for iter := 0; iter < 300; iter++ {
		req := &abi.Request{}
		for ti := range 1 + rng.IntN(5) {
			req.Topics = append(req.Topics, abi.Topic{Name: string(rune('a' + ti)), Exists: true, PartitionCount: int32(rng.IntN(70))})
		}
		for mi := range 1 + rng.IntN(6) {
			m := abi.Member{MemberID: string(rune('A' + mi))}
			for ti := range req.Topics {
				if rng.IntN(2) == 0 {
					m.Topics = append(m.Topics, int32(ti))
				}
			}
			req.Members = append(req.Members, m)
		}
		resp := &abi.Response{Members: make([]abi.MemberAssignment, len(req.Members))}
		for mi := range resp.Members {
			resp.Members[mi].Member = int32(mi)
		}
		for ti, topic := range req.Topics {
			var subs []int
			for mi, m := range req.Members {
				for _, st := range m.Topics {
					if st == int32(ti) {
						subs = append(subs, mi)
					}
				}
			}
			if len(subs) == 0 {
				continue
			}
			for p := int32(0); p < topic.PartitionCount; p++ {
				ma := &resp.Members[subs[rng.IntN(len(subs))]]
				ma.Partitions = append(ma.Partitions, tp(int32(ti), p))
			}
		}
		if err := Validate(req, resp, info); err != nil {
			t.Fatalf("iteration %d: valid assignment rejected: %v", iter, err)
		}

		// Find an assigned partition to break the rules with.
		var victim *abi.MemberAssignment
		for i := range resp.Members {
			if len(resp.Members[i].Partitions) > 0 {
				victim = &resp.Members[i]
				break
			}
		}
		if victim == nil {
			continue
		}
		orig := victim.Partitions
		victim.Partitions = append([]abi.TopicPartitions(nil), orig...)
		victim.Partitions = append(victim.Partitions, orig[0])
		assertRule(t, req, resp, info, RuleDuplicatePartition)
		victim.Partitions = orig[1:]
		assertRule(t, req, resp, info, RuleUnassigned)
		victim.Partitions = append([]abi.TopicPartitions{tp(orig[0].Topic, req.Topics[orig[0].Topic].PartitionCount)}, orig...)
		assertRule(t, req, resp, info, RulePartitionRange)
		victim.Partitions = orig
	}
}

func assertRule(t *testing.T, req *abi.Request, resp *abi.Response, info abi.AssignorInfo, rule Rule) {
	t.Helper()
	var e *Error
	if err := Validate(req, resp, info); !errors.As(err, &e) || e.Rule != rule {
		t.Fatalf("err = %v, want rule %q", err, rule)
	}
}

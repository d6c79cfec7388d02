package wasmruntime

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

func TestValidate_GroupedRules(t *testing.T) {
	// smallRequest: t0 has 2 partitions, t1 has 1; m0 subscribes to t0,
	// m1 to t0 and t1.
	req := smallRequest()
	lenient := abi.AssignorInfo{Name: "x", MayLeaveUnassigned: true}
	both := [][]int32{{0, 1}}
	list := abi.ListRef(0)
	tests := []struct {
		name string
		resp abi.Response
		rule Rule
	}{
		{"partition 0 of both topics to m1", abi.Response{TopicLists: both, Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tp(list, 0)}}}}, ""},
		{"list with a topic beyond the table", abi.Response{TopicLists: [][]int32{{0, 5}}, Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tp(list, 0)}}}}, RuleTopicIndex},
		{"reference past the lists", abi.Response{TopicLists: both, Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tp(abi.ListRef(1), 0)}}}}, RuleTopicIndex},
		{"list reference in the plain layout", abi.Response{Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tp(list, 0)}}}}, RuleTopicIndex},
		{"a listed topic the member does not subscribe to", abi.Response{TopicLists: both, Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tp(list, 0)}}}}, RuleUnsubscribed},
		{"a partition only one listed topic has", abi.Response{TopicLists: both, Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tp(list, 1)}}}}, RulePartitionRange},
		{"a grouped partition also given plainly", abi.Response{TopicLists: both, Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tp(0, 0)}},
			{Member: 1, Partitions: []abi.TopicPartitions{tp(list, 0)}}}}, RuleDuplicatePartition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(req, &tt.resp, lenient)
			if tt.rule == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Rule != tt.rule {
				t.Fatalf("err = %v, want rule %q", err, tt.rule)
			}
		})
	}
}

// TestValidate_GroupedAgreesWithExpanded draws random grouped responses,
// valid or not, and holds Validate to the same verdict on each as on its
// expansion into plain entries, which the host hands on.
func TestValidate_GroupedAgreesWithExpanded(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	accepted := 0
	for iter := range 2000 {
		req := &abi.Request{}
		nt := 1 + rng.IntN(5)
		for ti := range nt {
			req.Topics = append(req.Topics, abi.Topic{Name: string(rune('a' + ti)), Exists: rng.IntN(8) > 0, PartitionCount: int32(rng.IntN(4))})
			if !req.Topics[ti].Exists {
				req.Topics[ti].PartitionCount = 0
			}
		}
		for mi := range 1 + rng.IntN(4) {
			m := abi.Member{MemberID: string(rune('A' + mi))}
			for ti := range nt {
				if rng.IntN(4) > 0 {
					m.Topics = append(m.Topics, int32(ti))
				}
			}
			req.Members = append(req.Members, m)
		}
		resp := &abi.Response{TopicLists: [][]int32{}}
		for range rng.IntN(3) {
			var l []int32
			for ti := range nt {
				if rng.IntN(2) == 0 {
					l = append(l, int32(ti))
				}
			}
			if len(l) == 0 {
				l = []int32{int32(rng.IntN(nt))}
			}
			resp.TopicLists = append(resp.TopicLists, l)
		}
		for mi := range req.Members {
			ma := abi.MemberAssignment{Member: int32(mi)}
			for range rng.IntN(4) {
				topic := int32(rng.IntN(nt))
				if len(resp.TopicLists) > 0 && rng.IntN(2) == 0 {
					topic = abi.ListRef(rng.IntN(len(resp.TopicLists)))
				}
				var ps []int32
				for p := range int32(3) {
					if rng.IntN(3) == 0 {
						ps = append(ps, p)
					}
				}
				ma.Partitions = append(ma.Partitions, tp(topic, ps...))
			}
			resp.Members = append(resp.Members, ma)
		}
		info := abi.AssignorInfo{Name: "x", MayLeaveUnassigned: rng.IntN(2) == 0}
		grouped, plain := Validate(req, resp, info), Validate(req, resp.Expanded(), info)
		if (grouped == nil) != (plain == nil) {
			t.Fatalf("iteration %d: grouped verdict %v, expanded verdict %v\n%+v", iter, grouped, plain, resp)
		}
		if grouped == nil {
			accepted++
		}
	}
	if accepted == 0 || accepted == 2000 {
		t.Fatalf("%d of 2000 random responses accepted: the draw tests only one verdict", accepted)
	}
}

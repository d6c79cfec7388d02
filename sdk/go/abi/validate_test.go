package abi_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

func tps(topic int32, parts ...int32) abi.TopicPartitions {
	return abi.TopicPartitions{Topic: topic, Partitions: parts}
}

// ruleRequest: t0 has 2 partitions, t1 has 1, "gone" does not exist; m0
// subscribes to t0, m1 to t0, t1 and gone.
func ruleRequest() *abi.Request {
	return &abi.Request{
		GroupID: "g", Generation: 3, Protocol: "p",
		Topics: []abi.Topic{
			{Name: "t0", Exists: true, PartitionCount: 2},
			{Name: "t1", Exists: true, PartitionCount: 1},
			{Name: "gone"},
		},
		Members: []abi.Member{
			{MemberID: "m0", Topics: []int32{0}, OwnedGeneration: -1},
			{MemberID: "m1", Topics: []int32{0, 1, 2}, OwnedGeneration: -1},
		},
	}
}

// checkRule fails unless err is a *RuleError of rule, or nil for no rule.
func checkRule(t *testing.T, err error, rule abi.Rule) {
	t.Helper()
	if rule == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var e *abi.RuleError
	if !errors.As(err, &e) || e.Rule != rule || e.Detail == "" || e.Error() != string(rule)+": "+e.Detail {
		t.Fatalf("err = %v, want rule %q", err, rule)
	}
}

func TestValidateResponse_Rules(t *testing.T) {
	req := ruleRequest()
	info := abi.AssignorInfo{Name: "x"}
	lenient := abi.AssignorInfo{Name: "x", MayLeaveUnassigned: true}
	both := [][]int32{{0, 1}}
	list := abi.ListRef(0)

	tests := []struct {
		name string
		resp abi.Response
		info abi.AssignorInfo
		rule abi.Rule
	}{
		{"complete and valid", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tps(0, 0)}},
			{Member: 1, Partitions: []abi.TopicPartitions{tps(0, 1), tps(1, 0)}}}}, info, ""},
		{"error responses are not checked", abi.Response{Error: "no"}, info, ""},
		{"member index out of range", abi.Response{Members: []abi.MemberAssignment{{Member: 2}}}, lenient, abi.RuleMemberIndex},
		{"negative member index", abi.Response{Members: []abi.MemberAssignment{{Member: -1}}}, lenient, abi.RuleMemberIndex},
		{"member twice", abi.Response{Members: []abi.MemberAssignment{{Member: 0}, {Member: 0}}}, lenient, abi.RuleDuplicateMember},
		{"topic index out of range", abi.Response{Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tps(7, 0)}}}}, lenient, abi.RuleTopicIndex},
		{"topic that does not exist", abi.Response{Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tps(2, 0)}}}}, lenient, abi.RuleNonexistentTopic},
		{"topic that does not exist, no partitions", abi.Response{Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tps(2)}}}}, lenient, abi.RuleNonexistentTopic},
		{"partition beyond the count", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tps(0, 2)}}}}, lenient, abi.RulePartitionRange},
		{"negative partition", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tps(0, -1)}}}}, lenient, abi.RulePartitionRange},
		{"negative partition among others", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tps(0, 0, -1)}}}}, lenient, abi.RulePartitionRange},
		{"partition twice in one member", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tps(0, 0), tps(0, 0)}}}}, lenient, abi.RuleDuplicatePartition},
		{"partition twice in one entry", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tps(0, 1, 1)}}}}, lenient, abi.RuleDuplicatePartition},
		{"partition to two members", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tps(0, 1)}},
			{Member: 1, Partitions: []abi.TopicPartitions{tps(0, 1)}}}}, lenient, abi.RuleDuplicatePartition},
		{"unsubscribed topic", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tps(1, 0)}}}}, lenient, abi.RuleUnsubscribed},
		{"unsubscribed topic, no partitions", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tps(1)}}}}, lenient, abi.RuleUnsubscribed},
		{"subscribed partition left out", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tps(0, 0)}},
			{Member: 1, Partitions: []abi.TopicPartitions{tps(1, 0)}}}}, info, abi.RuleUnassigned},
		{"left out, but the assignor may", abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tps(0, 0)}}}}, lenient, ""},
		{"nothing at all", abi.Response{}, info, abi.RuleUnassigned},
		{"same topic listed twice, distinct partitions", abi.Response{Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tps(0, 0), tps(1, 0), tps(0, 1)}}}}, info, ""},

		// The grouped layout (section 7): entries over the response's lists.
		{"grouped: partition 0 of both topics to m1", abi.Response{TopicLists: both, Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tps(list, 0)}}}}, lenient, ""},
		{"grouped: list with a topic beyond the table", abi.Response{TopicLists: [][]int32{{0, 5}}, Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tps(list, 0)}}}}, lenient, abi.RuleTopicIndex},
		{"grouped: reference past the lists", abi.Response{TopicLists: both, Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tps(abi.ListRef(1), 0)}}}}, lenient, abi.RuleTopicIndex},
		{"grouped: list reference in the plain layout", abi.Response{Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tps(list, 0)}}}}, lenient, abi.RuleTopicIndex},
		{"grouped: a listed topic the member does not subscribe to", abi.Response{TopicLists: both, Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tps(list, 0)}}}}, lenient, abi.RuleUnsubscribed},
		{"grouped: a listed topic that does not exist", abi.Response{TopicLists: [][]int32{{0, 2}}, Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tps(list, 0)}}}}, lenient, abi.RuleNonexistentTopic},
		{"grouped: a partition only one listed topic has", abi.Response{TopicLists: both, Members: []abi.MemberAssignment{
			{Member: 1, Partitions: []abi.TopicPartitions{tps(list, 1)}}}}, lenient, abi.RulePartitionRange},
		{"grouped: a grouped partition also given plainly", abi.Response{TopicLists: both, Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{tps(0, 0)}},
			{Member: 1, Partitions: []abi.TopicPartitions{tps(list, 0)}}}}, lenient, abi.RuleDuplicatePartition},
	}
	broken := map[abi.Rule]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRule(t, abi.ValidateResponse(req, &tt.resp, tt.info), tt.rule)
		})
		broken[tt.rule] = true
	}
	// Every rule ValidateResponse reports must be broken by some case, so
	// that the table fails when the validator stops catching one.
	for _, r := range []abi.Rule{
		abi.RuleMemberIndex, abi.RuleDuplicateMember, abi.RuleTopicIndex, abi.RuleNonexistentTopic,
		abi.RulePartitionRange, abi.RuleDuplicatePartition, abi.RuleUnsubscribed, abi.RuleUnassigned,
	} {
		if !broken[r] {
			t.Errorf("no case breaks rule %q", r)
		}
	}
}

// randomRequest draws up to five topics of up to maxParts partitions and up
// to six members, each subscribed to a random subset.
func randomRequest(rng *rand.Rand, maxParts int) *abi.Request {
	req := &abi.Request{}
	for ti := range 1 + rng.IntN(5) {
		req.Topics = append(req.Topics, abi.Topic{Name: string(rune('a' + ti)), Exists: true, PartitionCount: int32(rng.IntN(maxParts))})
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
	return req
}

// TestValidateResponse_RandomAssignments deals every subscribed partition
// of random requests to a random subscriber, which must pass, then breaks
// one rule at a time, which must be caught under the right name.
func TestValidateResponse_RandomAssignments(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	info := abi.AssignorInfo{Name: "x"}
	for iter := 0; iter < 300; iter++ {
		req := randomRequest(rng, 70)
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
				ma.Partitions = append(ma.Partitions, tps(int32(ti), p))
			}
		}
		if err := abi.ValidateResponse(req, resp, info); err != nil {
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
		checkRule(t, abi.ValidateResponse(req, resp, info), abi.RuleDuplicatePartition)
		victim.Partitions = orig[1:]
		checkRule(t, abi.ValidateResponse(req, resp, info), abi.RuleUnassigned)
		victim.Partitions = append([]abi.TopicPartitions{tps(orig[0].Topic, req.Topics[orig[0].Topic].PartitionCount)}, orig...)
		checkRule(t, abi.ValidateResponse(req, resp, info), abi.RulePartitionRange)
		victim.Partitions = orig
	}
}

// TestValidateResponse_GroupedAgreesWithExpanded draws random grouped
// responses, valid or not, and holds ValidateResponse to the same verdict
// on each as on its expansion into plain entries, which the host hands on.
func TestValidateResponse_GroupedAgreesWithExpanded(t *testing.T) {
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
				ma.Partitions = append(ma.Partitions, tps(topic, ps...))
			}
			resp.Members = append(resp.Members, ma)
		}
		info := abi.AssignorInfo{Name: "x", MayLeaveUnassigned: rng.IntN(2) == 0}
		grouped, plain := abi.ValidateResponse(req, resp, info), abi.ValidateResponse(req, resp.Expanded(), info)
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

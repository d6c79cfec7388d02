package scenario_test

import (
	"fmt"
	"os"

	"github.com/wasmassign/wasmassign/internal/scenario"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Example parses a scenario, builds the request a plugin would get, and
// prints an answer as the simulate command does.
func Example() {
	s, err := scenario.Parse([]byte(`{
		"protocol": "range",
		"brokers": [{"id": 0, "rack": "a"}, {"id": 1, "rack": "b"}],
		"topics": [{"name": "orders", "partition_count": 3}],
		"members": [
			{"id": "c1", "rack": "b", "topics": ["orders", "refunds"]},
			{"id": "c0", "rack": "a", "topics": ["orders"]}
		]
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	req, warnings, err := s.Request()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, w := range warnings {
		fmt.Println("warning:", w)
	}
	// A plugin would compute this; range gives c0 (first in member order)
	// the extra partition.
	target := &abi.Response{Members: []abi.MemberAssignment{
		{Member: 0, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{0, 1}}}},
		{Member: 1, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{2}}}},
	}}
	scenario.NewOutput(req, "range", target, nil).WriteTable(os.Stdout)
	// Output:
	// warning: members[0].topics: topic "refunds" does not exist; assignors skip it
	// assignor range, eager rebalance
	// MEMBER  RACK  PARTITIONS  ASSIGNMENT
	// c0      a     2           orders[0-1]
	// c1      b     1           orders[2]
	// 2 members, 3 partitions assigned, 0 withheld
}

// ExampleScenario_Sequence generates a group and steps through its
// rebalances, feeding each round's answer back as the next round's input,
// as the conformance suite does with a real assignor.
func ExampleScenario_Sequence() {
	s, err := scenario.Parse([]byte(`{
		"protocol": "cooperative-sticky",
		"generate": {
			"seed": 1,
			"topics": [{"count": 3, "partitions": 4}],
			"members": [{"count": 2, "subscribe": "all"}],
			"rounds": {"count": 3, "join": 1}
		}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	seq, err := s.Sequence()
	if err != nil {
		fmt.Println(err)
		return
	}
	for {
		round := seq.Scenario()
		// A plugin would compute this; here the first member takes all.
		got := &scenario.Output{Assignment: map[string]map[string][]int32{}}
		for _, t := range round.Topics {
			for p := range *t.PartitionCount {
				got.Assignment[round.Members[0].ID] = appendTo(got.Assignment[round.Members[0].ID], t.Name, p)
			}
		}
		var ids []string
		for _, m := range round.Members {
			ids = append(ids, fmt.Sprintf("%s(owns %d)", m.ID, count(m.Owned)))
		}
		fmt.Printf("round %d, generation %d: %v\n", seq.Round(), round.Generation, ids)
		if more, err := seq.Next(got); err != nil || !more {
			return
		}
	}
	// Output:
	// round 1, generation 1: [c0(owns 0) c1(owns 0)]
	// round 2, generation 2: [c0(owns 12) c1(owns 0) c2(owns 0)]
	// round 3, generation 3: [c0(owns 12) c1(owns 0) c2(owns 0) c3(owns 0)]
}

func appendTo(m map[string][]int32, topic string, p int32) map[string][]int32 {
	if m == nil {
		m = map[string][]int32{}
	}
	m[topic] = append(m[topic], p)
	return m
}

func count(tps map[string][]int32) int {
	n := 0
	for _, ps := range tps {
		n += len(ps)
	}
	return n
}

package scenario_test

import (
	"fmt"
	"os"

	"github.com/wasmassign/wasmassign/scenario"
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

//go:build wasip1

package main

import (
	"fmt"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// garbage allocates short-lived memory in proportion to the request, as
// real assignors do, then deals partitions like spread.
func garbage(r *abi.Request) (*abi.Response, error) {
	names := make([]string, 0, len(r.Topics))
	for _, t := range r.Topics {
		names = append(names, fmt.Sprintf("%s/%d", t.Name, t.PartitionCount))
		scratch := make([]int32, t.PartitionCount)
		for p := range scratch {
			scratch[p] = int32(p)
		}
	}
	if len(names) != len(r.Topics) {
		return nil, fmt.Errorf("lost topic names")
	}
	return spread(r)
}

package rangeassignor

import (
	"fmt"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// withOptions is the assignor with test-only switches set.
func withOptions(opt options) assignortest.AssignFunc {
	return func(req *abi.Request) (*abi.Response, error) { return assign(req, opt) }
}

// bothPreferences are the two settings of preferRackAwareLogic, for cases
// whose answer must not depend on it.
func bothPreferences() []options {
	return []options{{preferRackAware: true}, {}}
}

// String names the options in subtest names.
func (o options) String() string {
	return fmt.Sprintf("preferRackAware=%v", o.preferRackAware)
}

// rangeShape is what this package's random tests draw: partition counts
// from a short list, so that topics with equal counts, and so
// co-partitioned topics, are common; identical subscriptions often, for the
// same reason; and one group in five with many topics and sparse
// subscriptions.
func rangeShape(withRacks bool) assignortest.Shape {
	return assignortest.Shape{
		Topics:          8,
		SparseOneIn:     5,
		MissingOneIn:    10,
		PartitionCounts: []int32{0, 1, 2, 3, 4, 4, 6, 6, 8, 12, 25},
		Racks:           withRacks,
		Members:         12,
		UniformOneIn:    2,
		UniformSubset:   true,
	}
}

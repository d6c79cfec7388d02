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

// rangeShape is what this package's random tests draw.
func rangeShape(withRacks bool) assignortest.Shape { return assignortest.RangeShape(withRacks) }

package wasmruntime

import (
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Validate checks an assignor's response against its request, by the rules
// of sdk/ABI.md section 5 as abi.ValidateResponse holds them. It returns nil
// or an *Error of kind ErrInvalidOutput whose Rule names the broken rule and
// whose Detail names the member, topic and partition. A response with Error
// set is not checked.
func Validate(req *abi.Request, resp *abi.Response, info abi.AssignorInfo) error {
	err := abi.ValidateResponse(req, resp, info)
	if err == nil {
		return nil
	}
	re := err.(*abi.RuleError)
	return &Error{Kind: ErrInvalidOutput, Rule: re.Rule, Detail: re.Detail}
}

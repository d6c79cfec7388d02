package bench

import (
	"github.com/wasmassign/wasmassign/plugins/leaderrack"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/plugins/roundrobin"
	"github.com/wasmassign/wasmassign/plugins/sticky"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// NativePlugin returns the Go package behind a built-in assignor, run
// without the sandbox: the reference for the sandbox's own cost.
func NativePlugin(assignor string) (func(*abi.Request) (*abi.Response, error), bool) {
	switch assignor {
	case "range":
		return rangeassignor.Assign, true
	case "roundrobin":
		return roundrobin.Assign, true
	case leaderrack.Name:
		return leaderrack.Assign, true
	case sticky.EagerName:
		return sticky.AssignEager, true
	case sticky.CooperativeName:
		return sticky.AssignCooperative, true
	}
	return nil, false
}

// Package assignortest is what the tests of the built-in assignors share:
// requests built from short specs, random groups, shuffled copies of a
// request, checkers for a response's validity and balance, and a harness
// that runs franz-go's balancers on the same group for comparison.
//
// It is imported only from _test.go files. It imports testing and
// franz-go, which must never reach a wasm plugin, so no non-test package
// may import it. It must never import plugins/internal/groupview or an
// assignor either: it judges them, so it states every rule it checks
// independently of the code under test.
package assignortest

import "github.com/wasmassign/wasmassign/sdk/go/abi"

// AssignFunc is an assignor under test, such as rangeassignor.Assign.
type AssignFunc func(*abi.Request) (*abi.Response, error)

//go:build wasip1

// Command wasm is the range assignor as a wasmassign plugin. Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o range.wasm .
//
// It holds no logic of its own: package rangeassignor is the algorithm, and
// the guest SDK provides the ABI exports.
package main

import (
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/sdk/go/guest"
)

func init() { guest.Register(rangeassignor.Info(), rangeassignor.Assign) }

// main is never run: the module is a WASI reactor, initialised by
// _initialize, which runs init.
func main() {}

//go:build wasip1

// Command wasm is the leader-rack-range assignor as a wasmassign plugin.
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o leaderrack.wasm .
//
// It holds no logic of its own: package leaderrack is the algorithm, and
// the guest SDK provides the ABI exports.
package main

import (
	"github.com/wasmassign/wasmassign/plugins/leaderrack"
	"github.com/wasmassign/wasmassign/sdk/go/guest"
)

func init() { guest.Register(leaderrack.Info(), leaderrack.Assign) }

// main is never run: the module is a WASI reactor, initialised by
// _initialize, which runs init.
func main() {}

//go:build wasip1

// Command wasm is package sticky compiled to a wasmassign plugin: the Go
// guest of the reference, which `make testdata` builds into
// testdata/guests/go/sticky-go.wasm for BenchmarkStickyGuests and for the
// differential test when STICKY_WASM names it. The built-in sticky module is the Rust port in
// plugins/sticky/rust (RATIONALE.md). Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o sticky.wasm .
//
// It holds no logic of its own: package sticky is the algorithm, and the
// guest SDK provides the ABI exports and picks the assignor each request
// names.
package main

import (
	"github.com/wasmassign/wasmassign/plugins/sticky"
	"github.com/wasmassign/wasmassign/sdk/go/guest"
)

func init() {
	guest.Register(sticky.EagerInfo(), sticky.AssignEager)
	guest.Register(sticky.CooperativeInfo(), sticky.AssignCooperative)
}

// main is never run: the module is a WASI reactor, initialised by
// _initialize, which runs init.
func main() {}

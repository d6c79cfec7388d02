// Package builtin carries the built-in assignor plugins inside the binary, so
// that bin/wasmassign needs no plugin directory to serve range, roundrobin and
// the rest. `make build` compiles them to wasm/NAME.wasm before the binary is
// linked, and go:embed takes them in. Each is the Rust crate
// plugins/NAME/rust (sticky.wasm holds both sticky assignors), a port of the
// Go package plugins/NAME, which stays its reference (RATIONALE.md).
//
// It imports nothing of this project: the runtime loads what FS returns.
package builtin

import (
	"embed"
	"io/fs"
)

// files holds wasm/*.wasm. The "all:" prefix also takes wasm/.gitkeep, so the
// package compiles on a fresh checkout before any plugin is built; the
// registry then reports that the built-ins are missing.
//
//go:embed all:wasm
var files embed.FS

// FS returns the built-in plugins: one NAME.wasm per built-in, at the top.
func FS() fs.FS {
	sub, err := fs.Sub(files, "wasm")
	if err != nil {
		panic(err) // "wasm" is a constant, valid path
	}
	return sub
}

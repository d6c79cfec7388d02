// Package sdk hands out the Rust, C and AssemblyScript SDKs' sources, for
// `wasmassign new` to write into a new plugin project. It sits above the
// SDKs because go:embed takes files only from the embedding package's own
// directory tree, and sdk/c could not hold it: the go tool takes a directory
// with .c files for cgo. The Go SDK is a module of its own, out of this
// module's reach, and hands out its source itself (sdk/go's package gosdk).
package sdk

import (
	"embed"
	"io/fs"
)

// files holds what each SDK's build compiles, and nothing of its tests,
// kit, examples or build output.
//
//go:embed rust/Cargo.toml rust/src/*.rs
//go:embed c/wasmassign.h c/wasmassign.c
//go:embed assemblyscript/package.json assemblyscript/index.ts assemblyscript/exports.ts assemblyscript/assembly/*.ts
var files embed.FS

// Rust returns the files a copy of the Rust SDK needs to build, with paths
// relative to sdk/rust: Cargo.toml and src/*.rs.
func Rust() fs.FS { return sub("rust") }

// C returns the files a copy of the C SDK needs to build, with paths
// relative to sdk/c: wasmassign.h and wasmassign.c.
func C() fs.FS { return sub("c") }

// AssemblyScript returns the files a copy of the AssemblyScript SDK needs to
// build, with paths relative to sdk/assemblyscript: package.json, index.ts,
// exports.ts and assembly/*.ts.
func AssemblyScript() fs.FS { return sub("assemblyscript") }

// sub is files below dir. fs.Sub fails only on a malformed path, which the
// constant names above are not.
func sub(dir string) fs.FS {
	f, err := fs.Sub(files, dir)
	if err != nil {
		panic("sdk: " + err.Error())
	}
	return f
}

// Package gosdk hands out the Go SDK's own source, for `wasmassign new` to
// write into a new plugin project. It lives at the root of the sdk/go module
// because go:embed takes files only from the embedding package's directory
// tree and only within its own module: no package of the root module can
// reach these files. A plugin imports abi and guest, never this package.
//
// The import path ends in "go", which is not a usable package name, hence
// gosdk.
package gosdk

import (
	"embed"
	"io/fs"
	"slices"
	"strings"
)

// files is every .go file of abi and guest, tests included, because a
// go:embed pattern cannot leave a suffix out; source hides the tests.
//
//go:embed go.mod abi/*.go guest/*.go
var files embed.FS

// Source returns the files a copy of the SDK needs to build, with paths
// relative to sdk/go: go.mod and the .go files of abi and guest, without
// their tests. The kit, the tests and their testdata are the SDK's own
// business, not a plugin's.
func Source() fs.FS { return source{} }

// source is files without the tests.
type source struct{}

// isTest reports whether a file name is a Go test file.
func isTest(name string) bool { return strings.HasSuffix(name, "_test.go") }

// Open opens a file or directory of files, as if no test file were there.
func (source) Open(name string) (fs.File, error) {
	if isTest(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	f, err := files.Open(name)
	if err != nil {
		return nil, err
	}
	if d, ok := f.(fs.ReadDirFile); ok {
		return dir{d}, nil
	}
	return f, nil
}

// dir is an open directory of files whose listing leaves the tests out.
type dir struct{ fs.ReadDirFile }

// ReadDir lists the directory as fs.ReadDirFile does, without the tests.
// With n > 0 it reads on while filtering leaves nothing, because an empty
// slice must come with an error.
func (d dir) ReadDir(n int) ([]fs.DirEntry, error) {
	for {
		entries, err := d.ReadDirFile.ReadDir(n)
		entries = slices.DeleteFunc(entries, func(e fs.DirEntry) bool { return isTest(e.Name()) })
		if len(entries) > 0 || err != nil || n <= 0 {
			return entries, err
		}
	}
}

package sdk

import (
	"io/fs"
	"testing"
	"testing/fstest"
)

// Each SDK's file system is well-behaved and holds its entry points, at
// paths relative to the SDK's directory.
func TestSources_AreFileSystemsOfEachSDK(t *testing.T) {
	for _, tt := range []struct {
		name string
		fsys fs.FS
		want []string
	}{
		{"rust", Rust(), []string{"Cargo.toml", "src/lib.rs"}},
		{"c", C(), []string{"wasmassign.h", "wasmassign.c"}},
		{"assemblyscript", AssemblyScript(), []string{"package.json", "index.ts", "exports.ts", "assembly/index.ts"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := fstest.TestFS(tt.fsys, tt.want...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

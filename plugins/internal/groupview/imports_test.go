package groupview

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	module          = "github.com/wasmassign/wasmassign"
	abiPath         = module + "/sdk/go/abi"
	groupviewPath   = module + "/plugins/internal/groupview"
	assignortestPkg = module + "/plugins/internal/assignortest"
)

// pureStd reports whether path is a standard library package (its first
// element has no dot) that keeps an assignor a pure function of its
// request: not os or net, nor any package under them.
func pureStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".") && first != "os" && first != "net"
}

// TestImports_PluginsKeepTheirLayering holds the plugins tree to the import
// rules its package comments state, as the packages build for wasip1:
// groupview and the assignors import only abi, (the assignors) groupview,
// and the standard library short of os and net; assignortest never imports the code it judges;
// and no package outside tests imports assignortest.
func TestImports_PluginsKeepTheirLayering(t *testing.T) {
	ctx := build.Default
	ctx.GOOS, ctx.GOARCH = "wasip1", "wasm"
	cases := []struct {
		dir     string
		allowed func(path string) bool
	}{
		{".", func(p string) bool { return pureStd(p) || p == abiPath }},
		{"../../range", func(p string) bool { return pureStd(p) || p == abiPath || p == groupviewPath }},
		{"../../roundrobin", func(p string) bool { return pureStd(p) || p == abiPath || p == groupviewPath }},
		{"../../leaderrack", func(p string) bool { return pureStd(p) || p == abiPath || p == groupviewPath }},
		{"../../sticky", func(p string) bool { return pureStd(p) || p == abiPath || p == groupviewPath }},
		// Neither groupview nor any assignor: everything under plugins/.
		{"../assignortest", func(p string) bool { return !strings.HasPrefix(p, module+"/plugins/") }},
	}
	for _, tc := range cases {
		pkg, err := ctx.ImportDir(tc.dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", tc.dir, err)
		}
		for _, p := range pkg.Imports {
			if !tc.allowed(p) {
				t.Errorf("package %s imports %s", pkg.Name, p)
			}
		}
	}

	for _, c := range []build.Context{build.Default, ctx} {
		err := filepath.WalkDir("../..", func(dir string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			pkg, err := c.ImportDir(dir, 0)
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			if err != nil {
				return err
			}
			if pkg.Name != "assignortest" && slices.Contains(pkg.Imports, assignortestPkg) {
				t.Errorf("%s (GOOS=%s): non-test package %s imports assignortest", dir, c.GOOS, pkg.Name)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

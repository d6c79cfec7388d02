package coordinator

import (
	"go/build"
	"strings"
	"testing"
)

// TestImports_PureCore walks the coordinator's imports, direct and
// indirect, within the module: its last resort reaches into plugins/range,
// and nothing it pulls in may bring the runtime, wazero, the proxy or any
// other package that does I/O into the pure core.
func TestImports_PureCore(t *testing.T) {
	const module = "github.com/wasmassign/wasmassign"
	forbidden := func(path string) bool {
		switch {
		case path == "net", path == "os", path == "os/exec", path == "net/http":
			return true
		case path == module+"/runtime", strings.HasPrefix(path, module+"/runtime/"):
			return true
		}
		return strings.HasPrefix(path, "github.com/tetratelabs/") || strings.HasPrefix(path, module+"/internal/")
	}
	seen := map[string]bool{}
	var walk func(path, dir, from string)
	walk = func(path, dir, from string) {
		if seen[path] {
			return
		}
		seen[path] = true
		if forbidden(path) {
			t.Errorf("%s imports %s", from, path)
		}
		if !strings.HasPrefix(path, module+"/") && path != module {
			return
		}
		pkg, err := build.Default.Import(path, dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, p := range pkg.Imports {
			walk(p, pkg.Dir, path)
		}
	}
	walk(module+"/coordinator", ".", "the test")
}

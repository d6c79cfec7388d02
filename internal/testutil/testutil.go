// Package testutil holds helpers shared by the tests of several packages. It
// is imported only from _test.go files.
package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Root returns the repository's root directory: the nearest parent of the
// working directory with a go.mod that is not a nested module's.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "Makefile")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testutil: no repository root (a directory with go.mod and Makefile) above the working directory")
		}
		dir = parent
	}
}

// Artefact returns the path of a file that `make build` produces, relative to
// the repository root, and fails the test with the command to run when it is
// missing. Tests never build wasm themselves: the Makefile owns the
// toolchains.
func Artefact(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(Root(t), rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("missing %s: run `make build` first (make test does)", rel)
	}
	return p
}

// ReadArtefact returns the contents of Artefact(t, rel).
func ReadArtefact(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(Artefact(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// RunWithCompileCache runs a package's tests with env naming the shared
// compilation cache (unless env is already set) and returns their exit code.
// Packages call it from TestMain, so a Go guest compiles once per machine
// rather than once per test or per package.
func RunWithCompileCache(m *testing.M, env string) int {
	if os.Getenv(env) == "" {
		os.Setenv(env, SharedCacheDir())
	}
	return m.Run()
}

// SharedCacheDir is a compilation cache directory shared by every test
// process of this user: compiling a Go plugin takes a second or more, and
// on a busy machine a cold cache per test binary made tests miss their
// deadlines. wazero writes cache entries by rename, and keys them by module,
// wazero version and check mode, so concurrent processes can share it.
func SharedCacheDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("wasmassign-test-cache-%d", os.Getuid()))
}

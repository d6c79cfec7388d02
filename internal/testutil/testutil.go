// Package testutil holds helpers shared by the tests of several packages. It
// is imported only from _test.go files.
package testutil

import (
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

// RunWithTempDir runs a package's tests with env naming a fresh temporary
// directory, removed afterwards, and returns their exit code. Packages use it
// from TestMain to share one compilation cache among all their tests, so a
// Go guest compiles once per package instead of once per test.
func RunWithTempDir(m *testing.M, env string) int {
	dir, err := os.MkdirTemp("", "wasmassign-test-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	os.Setenv(env, dir)
	return m.Run()
}

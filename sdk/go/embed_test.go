package gosdk

import (
	"io/fs"
	"testing"
	"testing/fstest"
)

// Source is a well-behaved file system that holds the module's go.mod and
// the abi and guest sources.
func TestSource_IsAFileSystemOfTheSources(t *testing.T) {
	if err := fstest.TestFS(Source(), "go.mod", "abi/abi.go", "abi/decode.go", "guest/guest.go", "guest/exports_wasip1.go"); err != nil {
		t.Fatal(err)
	}
}

// No test file is in it, whether looked for by listing or by name.
func TestSource_LeavesTheTestsOut(t *testing.T) {
	err := fs.WalkDir(Source(), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && isTest(p) {
			t.Errorf("Source lists the test file %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(Source(), "abi/golden_test.go"); err == nil {
		t.Error("Source opens abi/golden_test.go")
	}
}

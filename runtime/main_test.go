package wasmruntime

import (
	"os"
	"testing"
)

// sharedCacheDir lets every test host of this process reuse compiled code:
// the Go test guest takes a second or more to compile and milliseconds to
// load from the cache.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wasmruntime-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv("WASMASSIGN_TEST_CACHE", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

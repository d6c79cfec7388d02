package wasmruntime

import (
	"os"
	"testing"

	"github.com/wasmassign/wasmassign/internal/testutil"
)

// TestMain first serves as a plugin worker when a process-mode host of this
// test binary started it. Otherwise it lets every test host of this process
// reuse compiled code: the Go test guest takes a second or more to compile
// and milliseconds to load from the cache that WASMASSIGN_TEST_CACHE names.
func TestMain(m *testing.M) {
	RunWorkerIfRequested()
	os.Exit(testutil.RunWithCompileCache(m, "WASMASSIGN_TEST_CACHE"))
}

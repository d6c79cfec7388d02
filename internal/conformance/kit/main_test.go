package kit

import (
	"os"
	"testing"

	"github.com/wasmassign/wasmassign/internal/testutil"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
)

// TestMain serves as a plugin worker when a process-isolated host of this
// test binary started it. Otherwise every host of the run shares one
// compilation cache, so the Go kit compiles once.
func TestMain(m *testing.M) {
	wasmruntime.RunWorkerIfRequested()
	os.Exit(testutil.RunWithCompileCache(m, "WASMASSIGN_TEST_CACHE"))
}

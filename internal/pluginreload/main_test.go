package pluginreload

import (
	"os"
	"testing"

	"github.com/wasmassign/wasmassign/internal/testutil"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
)

// TestMain serves as a plugin worker when a process-mode host starts this
// binary, and shares compiled code between test processes.
func TestMain(m *testing.M) {
	wasmruntime.RunWorkerIfRequested()
	os.Exit(testutil.RunWithCompileCache(m, "WASMASSIGN_TEST_CACHE"))
}

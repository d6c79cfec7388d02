package driver_test

import (
	"os"
	"testing"

	"github.com/wasmassign/wasmassign/internal/testutil"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
)

// TestMain serves as a plugin worker when the runtime started this binary as
// one, and otherwise shares one compilation cache among the test hosts.
func TestMain(m *testing.M) {
	wasmruntime.RunWorkerIfRequested()
	os.Exit(testutil.RunWithCompileCache(m, "WASMASSIGN_TEST_CACHE"))
}

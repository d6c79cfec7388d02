package bench

import (
	"os"
	"testing"

	wasmruntime "github.com/wasmassign/wasmassign/runtime"
)

// TestMain serves as a plugin worker when a process-isolated host of this
// test binary started it, and runs the tests otherwise.
func TestMain(m *testing.M) {
	wasmruntime.RunWorkerIfRequested()
	os.Exit(m.Run())
}

package loadtest

import (
	"os"
	"testing"
)

// TestMain first serves as the kfake target a run of this test binary
// started.
func TestMain(m *testing.M) {
	ServeKfakeIfRequested()
	os.Exit(m.Run())
}

package rangeassignor

import (
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
)

// BenchmarkAssign measures the target sizes (see assignortest.Benchmark),
// without racks and with racks on every member and broker, so that
// rack-aware assignment with co-partitioning runs.
func BenchmarkAssign(b *testing.B) {
	assignortest.Benchmark(b, Assign, true)
}

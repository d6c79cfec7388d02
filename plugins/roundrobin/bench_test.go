package roundrobin

import (
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
)

// BenchmarkAssign measures the target sizes (see assignortest.Benchmark).
// Round robin has no rack mode, so there are no rack variants.
func BenchmarkAssign(b *testing.B) {
	assignortest.Benchmark(b, Assign, false)
}

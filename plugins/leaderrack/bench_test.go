package leaderrack

import (
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
)

// BenchmarkAssign measures the target sizes (see assignortest.Benchmark),
// without racks and with members and brokers on three racks, so that every
// partition is placed by its leader's rack.
func BenchmarkAssign(b *testing.B) {
	assignortest.Benchmark(b, Assign, true)
}

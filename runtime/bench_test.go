package wasmruntime

import (
	"context"
	"testing"
)

func BenchmarkAssign_SmallRequest(b *testing.B) {
	h, _ := newTestHost(b, NewConfig().WithPoolSize(1))
	p := loadArtefact(b, h, testGuest)
	req := smallRequest()
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Assign(ctx, "test-spread", req); err != nil {
			b.Fatal(err)
		}
	}
}

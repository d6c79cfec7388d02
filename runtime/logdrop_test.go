package wasmruntime

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestAssign_LogLinesBelowTheLoggerLevelNeitherCountNorWarn runs the C guest,
// which writes one debug line per call, many times faster than the log rate
// limit allows: under an info logger its lines cost no budget, so no drop
// warning appears; under a debug logger the drops are reported, but not once
// per call.
func TestAssign_LogLinesBelowTheLoggerLevelNeitherCountNorWarn(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		const calls = 300
		tests := []struct {
			level slog.Level
			drops bool // whether the guest's lines count against the budget
		}{
			{level: slog.LevelInfo, drops: false},
			{level: slog.LevelDebug, drops: true},
		}
		for _, tt := range tests {
			t.Run(tt.level.String(), func(t *testing.T) {
				logs := &logBuffer{}
				cfg := NewConfig().WithIsolation(iso).
					WithLimits(DefaultLimits().WithLogLinesPerSecond(10)).
					WithCompilationCacheDir(t.TempDir()).
					WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: tt.level})))
				h, err := NewHost(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer h.Close(context.Background())
				p := loadArtefact(t, h, "testdata/guests/c/roundrobin.wasm")
				start := time.Now()
				for range calls {
					if _, err := p.Assign(context.Background(), "c-roundrobin", smallRequest()); err != nil {
						t.Fatal(err)
					}
				}
				warnings := strings.Count(logs.String(), "plugin log lines dropped")
				most := 0
				if tt.drops {
					most = 1 + int(time.Since(start)/dropWarningEvery)
				}
				if warnings > most || (tt.drops && warnings == 0) {
					t.Fatalf("%d drop warnings after %d calls at level %s, want between %d and %d",
						warnings, calls, tt.level, min(1, most), most)
				}
			})
		}
	})
}

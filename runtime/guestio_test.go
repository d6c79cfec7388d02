package wasmruntime

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestAssign_ManyShortLinesFinishWellWithinTheDeadline runs many-lines.wasm,
// which writes 100,000 one-character lines to stdout in one 200 KB write,
// under the default limits: the call succeeds, inside the deadline, and
// the log holds some of the lines and a drop warning for the rest.
func TestAssign_ManyShortLinesFinishWellWithinTheDeadline(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		h, logs := newTestHost(t, NewConfig().WithIsolation(iso))
		p := loadArtefact(t, h, "testdata/hostile/many-lines.wasm")
		for round := 0; round < 2; round++ { // the second on the reused instance
			start := time.Now()
			if _, err := p.Assign(context.Background(), "hostile-many-lines", smallRequest()); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			// A correctness bound, not a speed measure: the deadline is
			// what a guest may use, and splitting its output must not
			// spend it.
			if d, limit := time.Since(start), h.Config().Limits().Timeout(); d > limit {
				t.Fatalf("round %d: the call took %s, past the %s deadline", round, d, limit)
			}
		}
		out := logs.String()
		if !strings.Contains(out, "msg=x ") || !strings.Contains(out, "plugin log lines dropped") {
			t.Fatalf("want some x lines and a drop warning in the log:\n%.2000s", out)
		}
	})
}

// TestLineWriter_AllocatesInProportionToItsInput writes thousands of short
// lines in one Write, as a guest's libc does when it flushes its buffer,
// and counts the bytes the split allocates. Each line may cost a string of
// its own; a splitter that copies the rest of the buffer for every line
// allocates about lines²/2 × 2 bytes instead (64 MB here), which is what
// made a guest's 200 KB write of short lines outlast the call deadline.
func TestLineWriter_AllocatesInProportionToItsInput(t *testing.T) {
	const lines = 8000
	p := bytes.Repeat([]byte("x\n"), lines)
	io := newInstanceIO()
	io.begin(&callState{sink: newLogSink(slog.New(slog.DiscardHandler), DefaultLimits())}, 0)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n, err := io.stdout.Write(p)
	runtime.ReadMemStats(&after)
	if n != len(p) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(p))
	}
	// Generous: 16 bytes per input byte and room for the test's own
	// allocations, against the quadratic splitter's 64 MB.
	allocated := after.TotalAlloc - before.TotalAlloc
	if limit := uint64(16*len(p) + 256<<10); allocated > limit {
		t.Fatalf("splitting %d lines (%d bytes) allocated %d bytes, want at most %d: the split copies more than each line",
			lines, len(p), allocated, limit)
	}
	if got := io.call.lastWords(); got != "x | x | x" {
		t.Fatalf("last lines %q, want the last three x lines", got)
	}
}

// TestLineWriter_KeepsPartialLinesAcrossWrites checks that a line split
// over several writes is noted once, whole, and that a line longer than
// the cut is cut where note cuts it however it arrives.
func TestLineWriter_KeepsPartialLinesAcrossWrites(t *testing.T) {
	io := newInstanceIO()
	io.begin(&callState{sink: newLogSink(slog.New(slog.DiscardHandler), DefaultLimits())}, 0)
	for _, w := range []string{"he", "llo\nwor", "ld", "\n"} {
		io.stdout.Write([]byte(w))
	}
	long := bytes.Repeat([]byte("y"), 10*maxLineBytes)
	for i := 0; i < len(long); i += 100 {
		io.stdout.Write(long[i:min(i+100, len(long))])
	}
	io.stdout.Write([]byte("\n"))
	want := "hello | world | " + string(long[:maxLineBytes]) + "…(truncated)"
	if got := io.call.lastWords(); got != want {
		t.Fatalf("last lines %.80q…, want %.80q…", got, want)
	}
}

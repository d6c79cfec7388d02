package wasmruntime

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

const testGuest = "testdata/guests/go/testguest.wasm"

// logBuffer collects slog records for assertions; safe for the concurrent
// writes of several instances.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func newTestHost(t testing.TB, cfg Config) (*Host, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	cfg = cfg.WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if cfg.cacheDir == "" {
		cfg = cfg.WithCompilationCacheDir(os.Getenv("WASMASSIGN_TEST_CACHE"))
	}
	h, err := NewHost(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h, logs
}

func loadArtefact(t testing.TB, h *Host, rel string) *Plugin {
	t.Helper()
	p, err := h.LoadFile(context.Background(), testutil.Artefact(t, rel))
	if err != nil {
		t.Fatalf("load %s: %v", rel, err)
	}
	return p
}

// smallRequest is the request shape the hostile modules expect (see
// testdata/hostile/README.md): topic 0 with 2 partitions, topic 1 with 1;
// member 0 subscribes to topic 0 only, member 1 to both.
func smallRequest() *abi.Request {
	return &abi.Request{
		GroupID: "g", Generation: 3, Protocol: "p",
		Topics: []abi.Topic{
			{Name: "t0", Exists: true, PartitionCount: 2},
			{Name: "t1", Exists: true, PartitionCount: 1},
		},
		Members: []abi.Member{
			{MemberID: "m0", Topics: []int32{0}, OwnedGeneration: -1},
			{MemberID: "m1", Topics: []int32{0, 1}, OwnedGeneration: -1},
		},
	}
}

func TestLoad_RejectsBrokenModulesWithTypedErrors(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		tests := []struct {
			file   string
			limits func(Limits) Limits
			kind   error
			detail string
		}{
			{file: "not-wasm.wasm", kind: ErrNotWasm, detail: "magic"},
			{file: "wrong-abi.wasm", kind: ErrABIMismatch, detail: "version 2"},
			{file: "bad-import.wasm", kind: ErrABIMismatch, detail: "env.fetch_url"},
			{file: "unknown-wasi.wasm", kind: ErrABIMismatch, detail: "imports wasi_snapshot_preview1.sock_open, which the host does not provide"},
			{file: "wasi-wrong-signature.wasm", kind: ErrABIMismatch, detail: "import wasi_snapshot_preview1.fd_write has signature (i32) -> (i32), the host's is (i32, i32, i32, i32) -> (i32)"},
			{file: "wrong-signature.wasm", kind: ErrABIMismatch, detail: "wasmassign_assign has signature (i32) -> (i32), want (i32, i32) -> (i64)"},
			{file: "idle-wrong-signature.wasm", kind: ErrABIMismatch, detail: "wasmassign_idle has signature (i32) -> (i32), want () -> ()"},
			{file: "toobig.wasm", limits: func(l Limits) Limits { return l.WithMaxModuleBytes(4096) }, kind: ErrModuleTooLarge, detail: "limit is 4096"},
			// Its memory starts at 67 pages, more than 4 MiB.
			{file: "huge-error.wasm", limits: func(l Limits) Limits { return l.WithMemoryLimitMB(4) }, kind: ErrNotWasm, detail: "min 67 pages"},
			{file: "startloop.wasm", limits: func(l Limits) Limits { return l.WithTimeout(300 * time.Millisecond) }, kind: ErrTimeout, detail: "300ms"},
		}
		for _, tt := range tests {
			t.Run(tt.file, func(t *testing.T) {
				lim := DefaultLimits()
				if tt.limits != nil {
					lim = tt.limits(lim)
				}
				h, _ := newTestHost(t, NewConfig().WithIsolation(iso).WithLimits(lim))
				start := time.Now()
				_, err := h.LoadFile(context.Background(), testutil.Artefact(t, filepath.Join("testdata/hostile", tt.file)))
				if !errors.Is(err, tt.kind) {
					t.Fatalf("err = %v, want kind %v", err, tt.kind)
				}
				if !strings.Contains(err.Error(), tt.detail) || !strings.Contains(err.Error(), tt.file) {
					t.Errorf("err = %q, want it to name %q and the file", err, tt.detail)
				}
				if tt.kind == ErrTimeout && time.Since(start) > lim.Timeout()+2*time.Second {
					t.Errorf("start section ran %s, far past the %s deadline", time.Since(start), lim.Timeout())
				}
				// The host keeps serving other plugins afterwards. The one
				// used is tiny, to fit the tightest module cap above, and
				// answers every request with an error response.
				other := loadArtefact(t, h, "testdata/hostile/error-response.wasm")
				if _, err := other.Assign(context.Background(), "hostile-error-response", smallRequest()); !errors.Is(err, ErrAssignorFailed) {
					t.Fatalf("another plugin after %s: err = %v, want its error response", tt.file, err)
				}
			})
		}
	})
}

// TestLoad_CompileIsBoundedByTheCompileTimeout loads compile-bomb.wasm,
// whose compilation takes seconds, under a compile timeout of a fraction of
// that: the load fails as a timeout naming the compile and its limit, at the
// limit, and the host loads and runs another plugin afterwards. In process
// the compilation runs on in the background (Limits.WithCompileTimeout); in
// a worker it dies with the worker.
func TestLoad_CompileIsBoundedByTheCompileTimeout(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		const timeout = 500 * time.Millisecond
		lim := DefaultLimits().WithCompileTimeout(timeout)
		// A cache of its own: a module that compiled once would load from
		// a shared one in milliseconds.
		h, _ := newTestHost(t, NewConfig().WithIsolation(iso).WithLimits(lim).WithCompilationCacheDir(t.TempDir()))
		start := time.Now()
		_, err := h.LoadFile(context.Background(), testutil.Artefact(t, "testdata/hostile/compile-bomb.wasm"))
		took := time.Since(start)
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("err = %v after %s, want a timeout", err, took)
		}
		for _, want := range []string{"compile-bomb.wasm", "compile: ", "500ms", "the compile timeout"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("err = %q, want it to name %q", err, want)
			}
		}
		if took > timeout+2*time.Second {
			t.Errorf("the load took %s, far past the %s compile timeout", took, timeout)
		}
		if iso == IsolationProcess {
			if n := liveWorkers(h); n != 0 {
				t.Errorf("%d workers alive after the compile timeout, want the compiling one killed", n)
			}
		}
		other := loadArtefact(t, h, "testdata/hostile/error-response.wasm")
		if _, err := other.Assign(context.Background(), "hostile-error-response", smallRequest()); !errors.Is(err, ErrAssignorFailed) {
			t.Fatalf("another plugin after the compile bomb: err = %v, want its error response", err)
		}
		if iso == IsolationInProcess {
			// The host closes while the compilation it gave up on still
			// runs; when it ends, it must find its compiler still there.
			h.Close(context.Background())
			deadline := time.Now().Add(60 * time.Second)
			for running(h.eng) > 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if n := running(h.eng); n > 0 {
				t.Fatalf("%d compilations still running a minute after the host closed", n)
			}
		}
	})
}

// running counts an engine's compilations under way.
func running(e *engine) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running
}

// liveWorkers counts the worker processes of a process-mode host that have
// not been reaped.
func liveWorkers(h *Host) int {
	h.procs.mu.Lock()
	defer h.procs.mu.Unlock()
	return len(h.procs.live)
}

func TestAssign_HostileModulesGetTypedErrorsAndHostKeepsServing(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		tests := []struct {
			file   string
			kind   error
			rule   Rule
			detail string
		}{
			{file: "trap.wasm", kind: ErrTrap, detail: "about to trap"},
			{file: "loop.wasm", kind: ErrTimeout},
			{file: "membomb.wasm", kind: ErrOutOfMemory},
			{file: "grow-refused.wasm", kind: ErrOutOfMemory, detail: "memory.grow refused"},
			{file: "bad-partition.wasm", kind: ErrInvalidOutput, rule: RulePartitionRange, detail: "partition 999"},
			{file: "duplicate.wasm", kind: ErrInvalidOutput, rule: RuleDuplicatePartition},
			{file: "duplicate-members.wasm", kind: ErrInvalidOutput, rule: RuleDuplicatePartition, detail: `member "m1"`},
			{file: "unsubscribed.wasm", kind: ErrInvalidOutput, rule: RuleUnsubscribed, detail: `topic "t1"`},
			{file: "error-response.wasm", kind: ErrAssignorFailed, detail: "no capacity for group"},
			{file: "garbage-output.wasm", kind: ErrInvalidOutput, rule: RuleMalformed},
		}
		lim := DefaultLimits().WithTimeout(500 * time.Millisecond).WithMemoryLimitMB(16)
		h, _ := newTestHost(t, NewConfig().WithIsolation(iso).WithLimits(lim))
		good := loadArtefact(t, h, testGuest)
		for _, tt := range tests {
			t.Run(tt.file, func(t *testing.T) {
				p := loadArtefact(t, h, filepath.Join("testdata/hostile", tt.file))
				name := p.Info().Assignors[0].Name
				for round := 0; round < 2; round++ { // a second call must fail the same way on a fresh instance
					start := time.Now()
					_, err := p.Assign(context.Background(), name, smallRequest())
					var e *Error
					if !errors.As(err, &e) || !errors.Is(err, tt.kind) {
						t.Fatalf("round %d: err = %v, want kind %v", round, err, tt.kind)
					}
					if e.Rule != tt.rule {
						t.Errorf("rule = %q, want %q", e.Rule, tt.rule)
					}
					if !strings.Contains(err.Error(), tt.detail) || !strings.Contains(err.Error(), name) {
						t.Errorf("err = %q, want it to contain %q and the assignor name", err, tt.detail)
					}
					if tt.kind == ErrTimeout {
						if d := time.Since(start); d < lim.Timeout() || d > lim.Timeout()+2*time.Second {
							t.Errorf("loop cut after %s, want about %s", d, lim.Timeout())
						}
					}
				}
				if _, err := good.Assign(context.Background(), "test-spread", smallRequest()); err != nil {
					t.Fatalf("healthy plugin after %s: %v", tt.file, err)
				}
			})
		}
	})
}

// TestAssign_ErrorResponseMessageIsCutLikeALogLine runs huge-error.wasm,
// whose error response carries a 4 MiB message: the error keeps what a log
// line of the guest would keep, so that the warning about a failed
// rebalance is one line, not 4 MiB.
func TestAssign_ErrorResponseMessageIsCutLikeALogLine(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		h, _ := newTestHost(t, NewConfig().WithIsolation(iso))
		p := loadArtefact(t, h, "testdata/hostile/huge-error.wasm")
		_, err := p.Assign(context.Background(), "hostile-huge-error", smallRequest())
		var e *Error
		if !errors.As(err, &e) || e.Kind != ErrAssignorFailed {
			t.Fatalf("err = %.200v, want an assignor error", err)
		}
		if want := strings.Repeat("A", maxLineBytes) + "…(truncated)"; e.Detail != want {
			t.Fatalf("the message has %d bytes (%.40q…), want the first %d and the cut's mark", len(e.Detail), e.Detail, maxLineBytes)
		}
		if !strings.Contains(err.Error(), "hostile-huge-error") {
			t.Fatalf("err = %.200q, want it to name the assignor", err)
		}
	})
}

func TestAssign_GoGuestFailuresAreTyped(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		h, _ := newTestHost(t, NewConfig().WithIsolation(iso))
		p := loadArtefact(t, h, testGuest)
		tests := []struct {
			assignor string
			kind     error
			detail   string
		}{
			{"test-fail", ErrAssignorFailed, "no capacity for group"},
			{"test-panic", ErrAssignorFailed, "panic: invariant broken"},
			{"no-such-assignor", ErrUnknownAssignor, "test-spread"},
		}
		for _, tt := range tests {
			t.Run(tt.assignor, func(t *testing.T) {
				_, err := p.Assign(context.Background(), tt.assignor, smallRequest())
				if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.detail) {
					t.Fatalf("err = %v, want kind %v mentioning %q", err, tt.kind, tt.detail)
				}
			})
		}
	})
}

// TestAssign_SameRequestSameBytesOnFreshAndReusedInstances checks the
// determinism promise: WASI randomness and clocks are reset from the request
// before every call.
func TestAssign_SameRequestSameBytesOnFreshAndReusedInstances(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		req := smallRequest()
		fresh := func() []byte {
			h, _ := newTestHost(t, NewConfig().WithIsolation(iso).WithMaxInstances(1))
			resp, err := loadArtefact(t, h, testGuest).Assign(context.Background(), "test-random", req)
			if err != nil {
				t.Fatal(err)
			}
			return abi.AppendResponse(nil, resp)
		}
		want := fresh()
		if !bytes.Equal(want, fresh()) {
			t.Fatal("two fresh hosts answered the same request differently")
		}
		h, _ := newTestHost(t, NewConfig().WithIsolation(iso).WithMaxInstances(1))
		p := loadArtefact(t, h, testGuest)
		other := smallRequest()
		other.GroupID = "other"
		for i := 0; i < 1000; i++ {
			r := req
			if i%2 == 1 {
				r = other // interleave another request so the instance's state moves on
			}
			resp, err := p.Assign(context.Background(), "test-random", r)
			if err != nil {
				t.Fatal(err)
			}
			if got := abi.AppendResponse(nil, resp); r == req && !bytes.Equal(got, want) {
				t.Fatalf("call %d on a reused instance: %x, fresh instance: %x", i, got, want)
			}
		}
		resp, err := p.Assign(context.Background(), "test-random", other)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(abi.AppendResponse(nil, resp), want) {
			t.Fatal("a different request got the same random bytes: the seed does not depend on the request")
		}
	})
}

// TestGuest_MemoryStaysFlat checks that the Go SDK reuses its buffers and lets
// the collector run: on one instance, memory after call 100 equals memory
// after call 10,000 of the same request. It does so for this host, which
// calls the guest's idle export after every call, and for a host that never
// does, as hosts older than the export do.
func TestGuest_MemoryStaysFlat(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		for _, skipIdle := range []bool{false, true} {
			name := "idle after every call"
			if skipIdle {
				name = "never idle"
			}
			t.Run(name, func(t *testing.T) {
				cfg := NewConfig().WithIsolation(iso).WithMaxInstances(1)
				cfg.skipIdle = skipIdle
				h, _ := newTestHost(t, cfg)
				p := loadArtefact(t, h, testGuest)
				if !slices.Contains(p.Info().Exports, exportIdle) {
					t.Fatalf("the test guest does not export %s; rebuild it (make testdata)", exportIdle)
				}
				req := smallRequest()
				req.Topics[0].PartitionCount = 500
				var at100 uint64
				for i := 1; i <= 10000; i++ {
					if _, err := p.Assign(context.Background(), "test-garbage", req); err != nil {
						t.Fatal(err)
					}
					if i == 100 {
						at100 = p.MaxMemoryBytes()
					}
				}
				if got := p.MaxMemoryBytes(); got != at100 {
					t.Fatalf("memory after call 100: %d bytes, after call 10000: %d", at100, got)
				}
			})
		}
	})
}

func TestAssign_ResponseOverTheOutputCapIsInvalid(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		h, _ := newTestHost(t, NewConfig().WithIsolation(iso).WithLimits(DefaultLimits().WithMaxOutputBytes(1024))) // room for the description (~550 bytes)
		p := loadArtefact(t, h, testGuest)
		req := smallRequest()
		req.Topics[0].PartitionCount = 1000 // 4,000 bytes of partition ids alone
		_, err := p.Assign(context.Background(), "test-spread", req)
		var e *Error
		if !errors.As(err, &e) || e.Kind != ErrInvalidOutput || e.Rule != RuleOutputSize {
			t.Fatalf("err = %v, want invalid output, rule %q", err, RuleOutputSize)
		}
		if !strings.Contains(err.Error(), "limit is 1024") {
			t.Fatalf("err = %q, want it to name the limit", err)
		}
		// The same plugin still answers requests whose response fits.
		if _, err := p.Assign(context.Background(), "test-fail", smallRequest()); !errors.Is(err, ErrAssignorFailed) {
			t.Fatalf("after an oversized response: %v", err)
		}
	})
}

func TestAssign_ChattyGuestIsRateLimited(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		const perSecond = 50
		lim := DefaultLimits().WithLogLinesPerSecond(perSecond)
		h, logs := newTestHost(t, NewConfig().WithIsolation(iso).WithLimits(lim))
		p := loadArtefact(t, h, testGuest)
		start := time.Now()
		if _, err := p.Assign(context.Background(), "test-chatty", smallRequest()); err != nil {
			t.Fatal(err)
		}
		// The bucket starts full and refills while the guest prints.
		allowed := perSecond * (1 + int(time.Since(start).Seconds()+1))
		out := logs.String()
		lines := strings.Count(out, "line ")
		if lines == 0 || lines > allowed {
			t.Fatalf("%d of the guest's 10000 lines reached the log, want between 1 and %d", lines, allowed)
		}
		if !strings.Contains(out, "plugin log lines dropped") || !strings.Contains(out, "plugin=testguest.wasm") {
			t.Fatalf("no drop warning attributed to the plugin in:\n%.2000s", out)
		}
	})
}

func TestAssign_ConcurrentCallsAgree(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		h, _ := newTestHost(t, NewConfig().WithIsolation(iso).WithMaxInstances(2))
		p := loadArtefact(t, h, testGuest)
		req := smallRequest()
		want, err := p.Assign(context.Background(), "test-random", req)
		if err != nil {
			t.Fatal(err)
		}
		wantBytes := abi.AppendResponse(nil, want)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					resp, err := p.Assign(context.Background(), "test-random", req)
					if err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(abi.AppendResponse(nil, resp), wantBytes) {
						errs <- errors.New("concurrent call answered differently")
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	})
}

func TestAssign_CompilationCacheDirIsUsed(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		dir := t.TempDir()
		for i := 0; i < 2; i++ {
			h, _ := newTestHost(t, NewConfig().WithIsolation(iso).WithCompilationCacheDir(dir))
			loadArtefact(t, h, testGuest)
			h.Close(context.Background())
		}
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) == 0 {
			t.Fatalf("cache dir is empty after two loads (err %v)", err)
		}
	})
}

// isolations lists the modes this platform runs; behaviour the modes share
// is tested in each.
func isolations() []Isolation {
	if processIsolationSupported {
		return []Isolation{IsolationInProcess, IsolationProcess}
	}
	return []Isolation{IsolationInProcess}
}

// forEachIsolation runs test once per isolation mode, as a subtest named
// after the mode.
func forEachIsolation(t *testing.T, test func(t *testing.T, iso Isolation)) {
	for _, iso := range isolations() {
		t.Run(iso.String(), func(t *testing.T) { test(t, iso) })
	}
}

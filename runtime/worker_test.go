//go:build linux

package wasmruntime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/scenario"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/plugins/builtin"
	"github.com/wasmassign/wasmassign/runtime/internal/wire"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Tests of what only process isolation does: killing, reaping, restarting
// and distrusting workers. Behaviour both modes share is tested in both by
// the other test files.

func processConfig() Config { return NewConfig().WithIsolation(IsolationProcess) }

// idlePids returns the pids of the plugin's idle workers, in pool order,
// leaving the pool as it was.
func idlePids(t *testing.T, p *Plugin) []int {
	t.Helper()
	r, ok := p.run.(*procRunner)
	if !ok {
		t.Fatal("not a process-mode plugin")
	}
	p.host.pool.mu.Lock()
	defer p.host.pool.mu.Unlock()
	var pids []int
	for _, in := range r.owner.idle {
		pids = append(pids, in.v.(*workerProc).pid)
	}
	return pids
}

// reaped says whether pid no longer exists: killed and waited for, not a
// zombie.
func reaped(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// waitFor polls cond for up to 15 seconds: every wait is for a worker to
// start or be reaped, which takes far longer on a machine that `go test
// ./...` shares with other packages' brokers and gateways.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func TestWorker_TimeoutKillsLoopingGuestAndRefills(t *testing.T) {
	const timeout = 200 * time.Millisecond
	h, _ := newTestHost(t, processConfig().WithMaxInstances(1).WithLimits(DefaultLimits().WithTimeout(timeout)))
	p := loadArtefact(t, h, "testdata/hostile/loop.wasm")
	for round := range 2 {
		before := idlePids(t, p)
		if len(before) != 1 {
			t.Fatalf("round %d: %d idle workers before the call, want the spare", round, len(before))
		}
		start := time.Now()
		_, err := p.Assign(context.Background(), "hostile-loop", smallRequest())
		elapsed := time.Since(start)
		if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "stopped after 200ms") {
			t.Fatalf("round %d: err = %v, want a timeout naming the limit", round, err)
		}
		if elapsed < timeout || elapsed > timeout+time.Second { // the kill takes milliseconds; the margin is for loaded machines
			t.Errorf("round %d: the call returned after %s, want just over %s", round, elapsed, timeout)
		}
		if !reaped(before[0]) {
			t.Errorf("round %d: worker %d still exists after the timeout", round, before[0])
		}
		// A spare replaces the killed worker in the background.
		var after []int
		if !waitFor(func() bool { after = idlePids(t, p); return len(after) == 1 }) {
			t.Fatalf("round %d: no spare worker after the kill", round)
		}
		if after[0] == before[0] {
			t.Fatalf("round %d: the spare has the killed worker's pid %d", round, after[0])
		}
	}
}

func TestWorker_DeadlineOrCancelOfTheCallerKillsAndNextCallSucceeds(t *testing.T) {
	h, _ := newTestHost(t, processConfig().WithMaxInstances(1))
	p := loadArtefact(t, h, testGuest)
	big := uniformRequest(500, 200, 1000) // 200,000 partitions: far longer than the caller waits
	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 5*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(5*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := idlePids(t, p)
			ctx, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			_, err := p.Assign(ctx, "test-spread", big)
			if !errors.Is(err, ErrTimeout) || time.Since(start) > time.Second {
				t.Fatalf("err = %v after %s, want a timeout soon after the caller gave up", err, time.Since(start))
			}
			if tt.want == context.Canceled && !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want it to wrap context.Canceled", err)
			}
			if len(before) == 1 && !waitFor(func() bool { return reaped(before[0]) }) {
				t.Errorf("worker %d was not killed", before[0])
			}
			resp, err := p.Assign(context.Background(), "test-spread", smallRequest())
			if err != nil || len(resp.Members) != 2 {
				t.Fatalf("the next call: %v", err)
			}
		})
	}
}

func TestWorker_TrapKeepsTheWorkerAlive(t *testing.T) {
	h, _ := newTestHost(t, processConfig().WithMaxInstances(1))
	p := loadArtefact(t, h, "testdata/hostile/trap.wasm")
	before := idlePids(t, p)
	for round := range 3 {
		if _, err := p.Assign(context.Background(), "hostile-trap", smallRequest()); !errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), "about to trap") {
			t.Fatalf("round %d: err = %v, want a trap quoting the guest", round, err)
		}
		if got := idlePids(t, p); len(got) != 1 || got[0] != before[0] {
			t.Fatalf("round %d: idle workers %v, want the same worker %v: a trap costs a new instance, not a process", round, got, before)
		}
	}
}

func TestWorker_DiedMidCallIsTrapAndPoolRecovers(t *testing.T) {
	h, _ := newTestHost(t, processConfig().WithMaxInstances(1).WithLimits(DefaultLimits().WithTimeout(5*time.Second)))
	p := loadArtefact(t, h, "testdata/hostile/loop.wasm")
	pid := idlePids(t, p)[0]
	time.AfterFunc(100*time.Millisecond, func() { syscall.Kill(pid, syscall.SIGKILL) })
	start := time.Now()
	_, err := p.Assign(context.Background(), "hostile-loop", smallRequest())
	if !errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), "plugin worker exited: signal: killed") {
		t.Fatalf("err = %v, want a trap saying the worker was killed", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the death was noticed after %s", d)
	}
	if !waitFor(func() bool { got := idlePids(t, p); return len(got) == 1 && got[0] != pid }) {
		t.Fatal("no fresh spare after the worker died")
	}
}

// Under a memory limit of 16 MiB a worker may have 272 MiB: 16 for the
// guest's linear memory, 256 for its runtime, compiler and tables.
const (
	smallMemoryLimitMB = 16
	smallWorkerLimit   = "272 MiB"
)

// TestWorker_MemoryLimitHoldsTheWholeProcess checks that a worker runs under
// a limit on its private writable memory (RLIMIT_DATA) of the guest's
// memory limit and the worker's overhead.
func TestWorker_MemoryLimitHoldsTheWholeProcess(t *testing.T) {
	h, _ := newTestHost(t, processConfig().WithMaxInstances(1).WithLimits(DefaultLimits().WithMemoryLimitMB(smallMemoryLimitMB)))
	p := loadArtefact(t, h, cGuest)
	pid := idlePids(t, p)[0]
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.FormatUint(uint64(smallMemoryLimitMB+256)<<20, 10)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "Max data size") {
			if f := strings.Fields(line); len(f) < 5 || f[3] != want || f[4] != want {
				t.Fatalf("worker %d: %q, want soft and hard limits of %s bytes", pid, line, want)
			}
			return
		}
	}
	t.Fatalf("worker %d has no data size limit:\n%s", pid, b)
}

// TestWorker_CompileOverTheMemoryLimitIsOutOfMemory loads compile-bomb.wasm,
// whose compilation takes some 700 MiB, into a worker that may have 272: the
// load fails as out of memory naming the compile and the limit, no worker is
// left, and a Go guest, cold, compiles under the same limit.
func TestWorker_CompileOverTheMemoryLimitIsOutOfMemory(t *testing.T) {
	lim := DefaultLimits().WithMemoryLimitMB(smallMemoryLimitMB)
	h, _ := newTestHost(t, processConfig().WithLimits(lim).WithCompilationCacheDir(t.TempDir()))
	_, err := h.LoadFile(context.Background(), testutil.Artefact(t, "testdata/hostile/compile-bomb.wasm"))
	if !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("err = %v, want out of memory", err)
	}
	for _, want := range []string{"compile-bomb.wasm", "compile: ", smallWorkerLimit} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q, want it to name %q", err, want)
		}
	}
	if n := liveWorkers(h); n != 0 {
		t.Errorf("%d workers alive after the compile ran out of memory", n)
	}
	loadArtefact(t, h, testGuest)
}

// TestWorker_TableGrowthIsHeldByTheMemoryLimit runs table-bomb.wasm, which
// grows a table without bound, under a memory limit of 16 MiB: each call
// fails as out of memory naming the call and the limit, the worker's death
// takes the table, the host's own memory does not grow with it, and another
// plugin still answers.
func TestWorker_TableGrowthIsHeldByTheMemoryLimit(t *testing.T) {
	lim := DefaultLimits().WithMemoryLimitMB(smallMemoryLimitMB).WithTimeout(10 * time.Second)
	h, _ := newTestHost(t, processConfig().WithMaxInstances(1).WithLimits(lim))
	good := loadArtefact(t, h, cGuest)
	p := loadArtefact(t, h, "testdata/hostile/table-bomb.wasm")
	before := residentBytes(t)
	for round := range 2 {
		_, err := p.Assign(context.Background(), "hostile-table-bomb", smallRequest())
		if !errors.Is(err, ErrOutOfMemory) {
			t.Fatalf("round %d: err = %v, want out of memory", round, err)
		}
		for _, want := range []string{"table-bomb.wasm", "call: ", smallWorkerLimit} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("round %d: err = %q, want it to name %q", round, err, want)
			}
		}
	}
	if grown := residentBytes(t) - before; grown > 64<<20 {
		t.Errorf("the host's resident memory grew by %d MiB while the guest grew its table", grown>>20)
	}
	if _, err := good.Assign(context.Background(), "c-roundrobin", smallRequest()); err != nil {
		t.Fatalf("another plugin after the table bomb: %v", err)
	}
}

// residentBytes is this process's resident memory.
func residentBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

func TestWorker_GuestLogsReachTheParentLogger(t *testing.T) {
	h, logs := newTestHost(t, processConfig())
	p := loadArtefact(t, h, cGuest)
	trap := loadArtefact(t, h, "testdata/hostile/trap.wasm")
	if _, err := p.Assign(context.Background(), "c-roundrobin", smallRequest()); err != nil {
		t.Fatal(err)
	}
	trap.Assign(context.Background(), "hostile-trap", smallRequest())
	out := logs.String()
	for _, want := range []string{"level=DEBUG", "plugin=roundrobin.wasm", "plugin=trap.wasm", "about to trap"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
}

func TestWorker_CloseReapsIdleAndBusyWorkers(t *testing.T) {
	h, err := NewHost(context.Background(), processConfig().WithMaxInstances(2).
		WithCompilationCacheDir(os.Getenv("WASMASSIGN_TEST_CACHE")).
		WithLimits(DefaultLimits().WithTimeout(time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	good := loadArtefact(t, h, cGuest)
	loop := loadArtefact(t, h, "testdata/hostile/loop.wasm")
	pids := append(idlePids(t, good), idlePids(t, loop)...)
	busy := make(chan error, 1)
	go func() {
		_, err := loop.Assign(context.Background(), "hostile-loop", smallRequest())
		busy <- err
	}()
	time.Sleep(100 * time.Millisecond) // the loop is running
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if !reaped(pid) {
			t.Errorf("worker %d outlived Host.Close", pid)
		}
	}
	select {
	case err := <-busy:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("the busy call ended with %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the busy call did not return after Close")
	}
	if _, err := good.Assign(context.Background(), "c-roundrobin", smallRequest()); err == nil {
		t.Fatal("a call after Close succeeded")
	}
}

func TestWorker_CommandWithoutTheHookFailsClearly(t *testing.T) {
	for _, cmd := range []string{"/bin/true", "/bin/sleep"} {
		t.Run(filepath.Base(cmd), func(t *testing.T) {
			if _, err := os.Stat(cmd); err != nil {
				t.Skip(err)
			}
			h, _ := newTestHost(t, processConfig().WithWorkerCommand(cmd))
			_, err := h.LoadFile(context.Background(), testutil.Artefact(t, cGuest))
			if err == nil || !strings.Contains(err.Error(), "RunWorkerIfRequested") {
				t.Fatalf("err = %v, want it to name RunWorkerIfRequested", err)
			}
			t.Log(err)
		})
	}
}

func TestWorker_HostRefusesToStartInsideAWorker(t *testing.T) {
	t.Setenv(workerEnv, "1")
	if _, err := NewHost(context.Background(), processConfig()); err == nil || !strings.Contains(err.Error(), "RunWorkerIfRequested") {
		t.Fatalf("err = %v, want a refusal naming RunWorkerIfRequested", err)
	}
	h, err := NewHost(context.Background(), NewConfig().WithIsolation(IsolationInProcess))
	if err != nil {
		t.Fatalf("in-process hosts stay allowed: %v", err)
	}
	h.Close(context.Background())
}

// fakeWorker writes a shell script that plays a worker: it says HELLO,
// answers any LOAD with a valid LOADED, then writes then, and idles until
// killed. It returns the script's path.
func fakeWorker(t *testing.T, then []byte) string {
	t.Helper()
	frame := func(typ wire.Type, body []byte) []byte {
		var b bytes.Buffer
		if err := wire.WriteFrame(&b, typ, body); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	hello := wire.Hello{Magic: wire.Magic, Version: wire.Version, Pid: 1}
	desc := abi.AppendDescription(nil, &abi.Description{Assignors: []abi.AssignorInfo{
		{Name: "fake", Version: "1", Protocols: []string{"fake"}, Modes: abi.ModeEager}}})
	loaded := wire.Loaded{ABIVersion: abi.Version, Description: desc}
	var out []byte
	out = append(out, frame(wire.TypeHello, hello.Encode())...)
	out = append(out, frame(wire.TypeCompiled, nil)...)
	out = append(out, frame(wire.TypeLoaded, loaded.Encode())...)
	dir := t.TempDir()
	data := filepath.Join(dir, "out.bin")
	after := filepath.Join(dir, "then.bin")
	if err := os.WriteFile(data, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(after, then, 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "worker.sh")
	body := fmt.Sprintf("#!/bin/sh\ncat %s >&4\nhead -c 1 <&3 >/dev/null\ncat %s >&4\nexec cat <&3 >/dev/null\n", data, after)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

func TestWorker_HostileWorkerOutputIsAProtocolError(t *testing.T) {
	frame := func(typ wire.Type, body []byte) []byte {
		var b bytes.Buffer
		wire.WriteFrame(&b, typ, body)
		return b.Bytes()
	}
	result := func(r wire.Result) []byte { return frame(wire.TypeResult, r.Encode()) }
	tests := []struct {
		name   string
		then   []byte
		detail string
	}{
		{"response beyond the region", result(wire.Result{ResponseLen: 1 << 40}), "response of"},
		{"response over the output cap", result(wire.Result{ResponseLen: 70 << 20}), "cap"},
		{"frame over the cap", []byte{0xff, 0xff, 0xff, 0x7f, byte(wire.TypeResult)}, "cap"},
		{"unknown error kind", frame(wire.TypeResult, []byte{99, 0, 0, 0, 0, 0, 0}), "unknown error kind"},
		{"unexpected frame", frame(wire.TypeHello, nil), "unexpected frame"},
		{"garbage then exit", []byte("garbage"), "plugin worker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newTestHost(t, processConfig().WithMaxInstances(1).WithWorkerCommand(fakeWorker(t, tt.then)))
			p := loadArtefact(t, h, cGuest)
			if p.Info().Assignors[0].Name != "fake" {
				t.Fatalf("loaded %+v, want the fake worker's description", p.Info())
			}
			pid := idlePids(t, p)[0]
			start := time.Now()
			_, err := p.Assign(context.Background(), "fake", smallRequest())
			if !errors.Is(err, ErrTrap) || !strings.Contains(err.Error(), tt.detail) {
				t.Fatalf("err = %v, want a trap mentioning %q", err, tt.detail)
			}
			if time.Since(start) > time.Second {
				t.Errorf("the parent took %s to give up on the worker", time.Since(start))
			}
			if !waitFor(func() bool { return reaped(pid) }) {
				t.Errorf("the hostile worker %d was not killed", pid)
			}
		})
	}
}

// TestWorker_MatchesInProcess checks that isolation changes nothing a plugin
// answers: over the conformance scenarios and seeded random requests, every
// built-in gives byte-identical responses (or the same error) in both modes.
func TestWorker_MatchesInProcess(t *testing.T) {
	ctx := context.Background()
	// The conformance suite's cache: the built-ins compile once per machine,
	// not once per test run.
	cache := filepath.Join(os.TempDir(), "wasmassign-test-cache")
	registry := func(iso Isolation) (*Registry, error) {
		h, _ := newTestHost(t, NewConfig().WithIsolation(iso).WithMaxInstances(1).WithCompilationCacheDir(cache))
		reg := NewRegistry(h)
		return reg, reg.LoadBuiltins(ctx, builtin.FS())
	}
	var proc *Registry
	var procErr error
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		proc, procErr = registry(IsolationProcess)
	}()
	inProc, err := registry(IsolationInProcess)
	<-loaded
	if err != nil || procErr != nil {
		t.Fatalf("loading the built-ins: %v; %v", err, procErr)
	}
	type call struct {
		name     string
		assignor string
		req      *abi.Request
	}
	var calls []call
	suite := filepath.Join(testutil.Root(t), "testdata/conformance")
	err = filepath.WalkDir(suite, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		var c struct {
			Scenario json.RawMessage `json:"scenario"`
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if json.Unmarshal(data, &c) != nil {
			return nil
		}
		sc, err := scenario.Parse(c.Scenario)
		if err != nil {
			return nil // the conformance suite reports broken cases
		}
		req, _, err := sc.Request()
		if err != nil || partitions(req) > 20000 {
			return nil // the large cases would only slow this test down
		}
		name := sc.Assignor
		if name == "" {
			a, ok := inProc.ForProtocol(sc.Protocol)
			if !ok {
				return nil
			}
			name = a.Info.Name
		}
		calls = append(calls, call{path, name, req})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) < 50 {
		t.Fatalf("only %d conformance scenarios found", len(calls))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 40 {
		for _, a := range inProc.Assignors() {
			calls = append(calls, call{fmt.Sprintf("random %d", i), a.Info.Name, randomRequest(rng)})
		}
	}
	for _, c := range calls {
		want, wantErr := assignBytes(ctx, inProc, c.assignor, c.req)
		got, gotErr := assignBytes(ctx, proc, c.assignor, c.req)
		if !bytes.Equal(got, want) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("%s (%s): process mode answered %x (%v), in-process %x (%v)", c.name, c.assignor, got, gotErr, want, wantErr)
		}
	}
}

func assignBytes(ctx context.Context, reg *Registry, assignor string, req *abi.Request) ([]byte, error) {
	a, ok := reg.Lookup(assignor)
	if !ok {
		return nil, fmt.Errorf("no assignor %q", assignor)
	}
	resp, err := a.Assign(ctx, req)
	if err != nil {
		return nil, err
	}
	return abi.AppendResponse(nil, resp), nil
}

func partitions(req *abi.Request) int {
	n := 0
	for _, t := range req.Topics {
		n += int(t.PartitionCount)
	}
	return n
}

// randomRequest is a small group with random subscriptions, some of them to
// topics that do not exist.
func randomRequest(rng *rand.Rand) *abi.Request {
	req := &abi.Request{GroupID: fmt.Sprintf("g%d", rng.IntN(1000)), Generation: rng.Int32N(100), Protocol: "p"}
	nt := 1 + rng.IntN(6)
	for i := range nt {
		req.Topics = append(req.Topics, abi.Topic{Name: fmt.Sprintf("t%d", i), Exists: rng.IntN(8) != 0, PartitionCount: int32(rng.IntN(40))})
	}
	for m := range 1 + rng.IntN(8) {
		var subs []int32
		for i := range nt {
			if rng.IntN(2) == 0 {
				subs = append(subs, int32(i))
			}
		}
		req.Members = append(req.Members, abi.Member{MemberID: fmt.Sprintf("m%02d", m), Topics: subs, OwnedGeneration: -1})
	}
	return req
}

func TestWorker_IdleWorkerThatDiedIsReplacedWithoutFailingTheCall(t *testing.T) {
	h, _ := newTestHost(t, processConfig().WithMaxInstances(1))
	p := loadArtefact(t, h, cGuest)
	pid := idlePids(t, p)[0]
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitFor(func() bool { return reaped(pid) }) {
		t.Fatal("the killed worker was not reaped")
	}
	if _, err := p.Assign(context.Background(), "c-roundrobin", smallRequest()); err != nil {
		t.Fatalf("a call after an idle worker died: %v", err)
	}
	if got := idlePids(t, p); len(got) != 1 || got[0] == pid {
		t.Fatalf("idle workers %v, want one fresh worker", got)
	}
}

// TestWorker_HostileIdlePhaseIsKilledAndNoCallerFails checks that the parent
// distrusts what a worker sends after a RESULT that announces an idle call:
// anything but IDLE_DONE within the timeout gets the worker killed and
// logged, and the caller, who has its answer already, sees nothing of it.
func TestWorker_HostileIdlePhaseIsKilledAndNoCallerFails(t *testing.T) {
	frame := func(typ wire.Type, body []byte) []byte {
		var b bytes.Buffer
		wire.WriteFrame(&b, typ, body)
		return b.Bytes()
	}
	// The guest's error response stands in for an answer: a fake worker
	// cannot write one into the region.
	result := wire.Result{Failure: wire.Failure{Kind: wire.KindAssignorFailed, Detail: "fake says no"}, Idle: true}
	idleDone := func(d wire.IdleDone) []byte { return frame(wire.TypeIdleDone, d.Encode()) }
	tests := []struct {
		name   string
		after  []byte
		killed bool
		log    string
	}{
		{"idle done", idleDone(wire.IdleDone{}), false, ""},
		{"trap in idle", idleDone(wire.IdleDone{Failure: wire.Failure{Kind: wire.KindTrap, Detail: "idle trapped"}}), false, "idle trapped"},
		{"no idle done", nil, true, "stopped after 300ms"},
		{"unexpected frame", frame(wire.TypeHello, nil), true, "unexpected frame type 1 after a call"},
		{"malformed idle done", frame(wire.TypeIdleDone, []byte{99, 0, 0, 0, 0}), true, "unknown error kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			then := append(frame(wire.TypeResult, result.Encode()), tt.after...)
			h, logs := newTestHost(t, processConfig().WithMaxInstances(1).WithWorkerCommand(fakeWorker(t, then)).
				WithLimits(DefaultLimits().WithTimeout(300*time.Millisecond)))
			p := loadArtefact(t, h, cGuest)
			pid := idlePids(t, p)[0]
			start := time.Now()
			_, err := p.Assign(context.Background(), "fake", smallRequest())
			if !errors.Is(err, ErrAssignorFailed) || !strings.Contains(err.Error(), "fake says no") {
				t.Fatalf("err = %v, want the worker's answer", err)
			}
			if d := time.Since(start); d > 200*time.Millisecond {
				t.Errorf("the call took %s: it waited for the idle phase", d)
			}
			if tt.killed {
				if !waitFor(func() bool { return reaped(pid) }) {
					t.Fatalf("worker %d was not killed", pid)
				}
			} else if !waitFor(func() bool { got := idlePids(t, p); return len(got) == 1 && got[0] == pid }) {
				t.Fatalf("worker %d did not go back to the pool after IDLE_DONE", pid)
			}
			if tt.log != "" && !waitFor(func() bool {
				out := logs.String()
				return strings.Contains(out, "plugin idle call failed") && strings.Contains(out, tt.log)
			}) {
				t.Fatalf("the log does not report %q:\n%s", tt.log, logs.String())
			}
		})
	}
}

// TestOOMScanner_ReadsTheRuntimesEndsAtTheMemoryLimit: the worker's own
// output says out of memory either in words or, from the collector, as a
// fault at address 0 in the runtime's memory code; a fault elsewhere is
// no out-of-memory.
func TestOOMScanner_ReadsTheRuntimesEndsAtTheMemoryLimit(t *testing.T) {
	collectorFault := []string{
		"SIGSEGV: segmentation violation",
		"PC=0x43599d m=0 sigcode=1 addr=0x0",
		"",
		"goroutine 0 gp=0x14b4ec0 m=0 mp=0x14b6360 [idle]:",
		"runtime.(*spanQueue).tryDrain(0x7fff00000400?, 0x43e1e5?, 0x14b5508?)",
		"\t/usr/local/go/src/runtime/mgcmark_greenteagc.go:520 +0x5d fp=0x7fff96575ea0 sp=0x7fff96575e80 pc=0x43599d",
	}
	tests := []struct {
		name  string
		lines []string
		want  bool
	}{
		{"the runtime says so", []string{"fatal error: runtime: out of memory"}, true},
		{"a thread refused", []string{"runtime: failed to create new OS thread (have 5 already; errno=12)"}, true},
		{"the collector faults at address 0", collectorFault, true},
		{"a fault at another address", []string{collectorFault[0], "PC=0x43599d m=0 sigcode=1 addr=0x18", "", collectorFault[3], collectorFault[4], collectorFault[5]}, false},
		{"a nil fault outside the runtime's memory code", []string{collectorFault[0], collectorFault[1], "", "goroutine 7 gp=0x1 m=0 [running]:",
			"github.com/tetratelabs/wazero/internal/wasm.(*TableInstance).Grow(0x1, 0x2, 0x0)", "\t/root/go/pkg/mod/github.com/tetratelabs/wazero/internal/wasm/table.go:300 +0x5d"}, false},
		{"a panic", []string{"panic: runtime error: index out of range [3] with length 2"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s oomScanner
			got := false
			for _, l := range tt.lines {
				got = s.outOfMemory(l) || got
			}
			if got != tt.want {
				t.Errorf("out of memory = %v, want %v", got, tt.want)
			}
		})
	}
}

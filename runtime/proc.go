package wasmruntime

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wasmassign/wasmassign/runtime/internal/shm"
	"github.com/wasmassign/wasmassign/runtime/internal/wire"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

const (
	// helloTimeout bounds a worker's start: exec, the Go runtime, and the
	// hook in main. Without the hook there is no HELLO at all.
	helloTimeout = 5 * time.Second
	// shutdownGrace is how long an idle worker gets to exit after SHUTDOWN
	// before it is killed.
	shutdownGrace = time.Second
	// punchHoleAbove is the region footprint past which a call's pages are
	// given back: tmpfs keeps them resident otherwise.
	punchHoleAbove = 32 << 20
	// stderrTailLines is how many lines of a worker's own output an error
	// about its death quotes.
	stderrTailLines = 5
	// refillAttempts and refillBackoff pace the spare workers started after a
	// kill when starting one keeps failing.
	refillAttempts = 5
	refillBackoff  = 100 * time.Millisecond
)

// errMissingHook is what a worker command that never says HELLO gets.
const errMissingHook = "plugin worker did not start: the binary must call wasmruntime.RunWorkerIfRequested first in main (and in TestMain for tests)"

// procHost starts, tracks and stops the worker processes of a Host in
// IsolationProcess mode.
type procHost struct {
	cfg      Config
	command  string
	cacheDir string
	ownCache bool // cacheDir is a temporary directory of this host

	// bg runs the plugins' idle calls and spare workers; its context ends
	// at close, which stops spawns too. It closes under mu: whether the
	// host is closed is bg.isClosing.
	bg     *background
	spawns chan spawnRequest
	// stopSpawner ends the spawner thread, last thing in close: its exit
	// sends every worker still alive its parent-death signal.
	stopSpawner chan struct{}

	mu      sync.Mutex
	live    map[*workerProc]struct{}
	runners map[*procRunner]struct{}
}

// spawnRequest asks the spawner thread to start a command.
type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

func newProcHost(cfg Config) (*procHost, error) {
	if !processIsolationSupported {
		return nil, fmt.Errorf("wasmruntime: IsolationProcess is not supported on %s; use IsolationInProcess", runtime.GOOS)
	}
	if inWorker() {
		return nil, errors.New("wasmruntime: a plugin worker cannot start a Host with IsolationProcess: " +
			"the binary must call wasmruntime.RunWorkerIfRequested first in main (and in TestMain for tests)")
	}
	ph := &procHost{cfg: cfg, command: cfg.workerCommand, cacheDir: cfg.cacheDir,
		spawns: make(chan spawnRequest), stopSpawner: make(chan struct{}), live: make(map[*workerProc]struct{}), runners: make(map[*procRunner]struct{})}
	if ph.command == "" {
		exe, err := defaultWorkerCommand()
		if err != nil {
			return nil, fmt.Errorf("wasmruntime: worker command: %w", err)
		}
		ph.command = exe
	}
	if ph.cacheDir == "" {
		// Workers share compiled code through a directory: the first one
		// compiles, the rest load machine code in milliseconds.
		dir, err := os.MkdirTemp("", "wasmassign-cache-")
		if err != nil {
			return nil, fmt.Errorf("wasmruntime: compilation cache: %w", err)
		}
		ph.cacheDir, ph.ownCache = dir, true
	}
	ph.bg = newBackground(nil)
	go ph.spawner()
	return ph, nil
}

// spawner starts every worker from one locked OS thread. The kernel sends a
// worker its parent-death signal when the thread that forked it exits, not
// the process; a thread that lives as long as the host gives the signal the
// meaning "the host is gone".
func (ph *procHost) spawner() {
	runtime.LockOSThread() // never unlocked: the thread ends with the host
	for {
		select {
		case req := <-ph.spawns:
			req.done <- req.cmd.Start()
		case <-ph.stopSpawner:
			return
		}
	}
}

// close stops every worker: idle ones are asked to exit and killed after a
// grace period, busy ones are killed at once. It returns when all have been
// reaped.
func (ph *procHost) close(ctx context.Context) error {
	ph.mu.Lock()
	if ph.bg.isClosing() {
		ph.mu.Unlock()
		return nil
	}
	ph.bg.close()
	runners := make([]*procRunner, 0, len(ph.runners))
	for r := range ph.runners {
		runners = append(runners, r)
	}
	ph.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Go(func() { r.close(ctx) })
	}
	wg.Wait()
	ph.bg.wait()
	ph.mu.Lock()
	busy := make([]*workerProc, 0, len(ph.live))
	for w := range ph.live {
		busy = append(busy, w)
	}
	ph.mu.Unlock()
	for _, w := range busy {
		w.kill() // its caller releases its files when the call returns
		<-w.exited
	}
	close(ph.stopSpawner)
	if ph.ownCache {
		return os.RemoveAll(ph.cacheDir)
	}
	return nil
}

// workerProc is the parent's handle on one worker process. One goroutine
// uses it at a time; close may kill it from another.
type workerProc struct {
	ph     *procHost
	cmd    *exec.Cmd
	pid    int
	toW    *os.File
	fromW  *os.File
	rd     *bufio.Reader
	region *shm.Region
	buf    []byte

	exited     chan struct{} // closed once the process has been reaped
	status     string        // how it ended; set before exited closes
	stderrDone chan struct{}
	tail       lineTail
	oomScan    oomScanner
	killOnce   sync.Once

	mu  sync.Mutex
	gen uint64 // read session, so a stale cancellation cannot cut a later one
}

// spawn starts a worker and waits for its HELLO.
func (ph *procHost) spawn(ctx context.Context, sink *logSink, regionSize, reserve int64) (*workerProc, error) {
	region, err := shm.Create("wasmassign-plugin", regionSize, reserve)
	if err != nil {
		return nil, fmt.Errorf("plugin worker: %w", err)
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File) {
		if err != nil {
			return nil, nil
		}
		r, w, err = os.Pipe()
		files = append(files, r, w)
		return r, w
	}
	p2wR, p2wW := pipe()
	w2pR, w2pW := pipe()
	errR, errW := pipe()
	if err != nil {
		closeAll()
		region.Close()
		return nil, fmt.Errorf("plugin worker: %w", err)
	}
	cmd := &exec.Cmd{
		Path:        ph.command,
		Args:        []string{ph.command},
		Env:         []string{workerEnv + "=" + strconv.Itoa(wire.Version)},
		ExtraFiles:  []*os.File{p2wR, w2pW, region.File()},
		Stdout:      errW,
		Stderr:      errW,
		SysProcAttr: workerSysProcAttr(),
	}
	req := spawnRequest{cmd: cmd, done: make(chan error, 1)}
	select {
	case ph.spawns <- req:
		err = <-req.done
	case <-ph.bg.ctx.Done():
		err = ErrClosed
	}
	p2wR.Close()
	w2pW.Close()
	errW.Close()
	if err != nil {
		p2wW.Close()
		w2pR.Close()
		errR.Close()
		region.Close()
		return nil, fmt.Errorf("plugin worker %s: %w", ph.command, err)
	}
	w := &workerProc{ph: ph, cmd: cmd, pid: cmd.Process.Pid, toW: p2wW, fromW: w2pR,
		rd: bufio.NewReaderSize(w2pR, 64<<10), region: region,
		exited: make(chan struct{}), stderrDone: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		if cmd.ProcessState != nil {
			w.status = cmd.ProcessState.String()
		} else {
			w.status = err.Error()
		}
		close(w.exited)
	}()
	go w.readOutput(errR, sink)
	ph.mu.Lock()
	closed := ph.bg.isClosing()
	ph.live[w] = struct{}{}
	ph.mu.Unlock()
	if closed {
		w.close()
		return nil, ErrClosed
	}

	stop := w.watch(ctx, time.Now().Add(helloTimeout))
	t, body, err := w.recv()
	stop()
	if err == nil && t != wire.TypeHello {
		err = fmt.Errorf("first frame has type %d", t)
	}
	var hello wire.Hello
	if err == nil {
		hello, err = wire.DecodeHello(body)
	}
	if err == nil && (hello.Magic != wire.Magic || hello.Version != wire.Version) {
		err = fmt.Errorf("HELLO %q version %d, want %q version %d", hello.Magic, hello.Version, wire.Magic, wire.Version)
	}
	if err != nil {
		if ctx.Err() != nil {
			w.close()
			return nil, ctx.Err()
		}
		detail := w.death(err)
		w.close()
		return nil, fmt.Errorf("%s (%s %s)", errMissingHook, ph.command, detail)
	}
	return w, nil
}

// readOutput logs what the worker process itself writes (a Go panic, a
// wazero bug), attributed to the plugin and under its rate limit, and keeps
// the last lines for the error about the worker's death.
func (w *workerProc) readOutput(r *os.File, sink *logSink) {
	defer close(w.stderrDone)
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		line := cutLine(sc.Text())
		w.tail.add(line, w.oomScan.outOfMemory(sc.Text()))
		if sink.take() {
			sink.logger.Error("plugin worker: "+line, "pid", w.pid)
		}
	}
	io.Copy(io.Discard, r) // a line over the scanner's cap: drain the rest
}

// watch arms the read side for one exchange: reads fail once deadline
// passes (zero: never) or ctx ends. The returned function disarms it.
func (w *workerProc) watch(ctx context.Context, deadline time.Time) func() {
	w.mu.Lock()
	w.gen++
	gen := w.gen
	w.mu.Unlock()
	w.fromW.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.gen == gen {
			w.fromW.SetReadDeadline(time.Unix(1, 0))
		}
	})
	return func() {
		stop()
		w.mu.Lock()
		w.gen++
		w.mu.Unlock()
	}
}

// recv reads one frame from the worker.
func (w *workerProc) recv() (wire.Type, []byte, error) {
	t, body, err := wire.ReadFrame(w.rd, w.buf)
	if err == nil {
		w.buf = body[:0]
	}
	return t, body, err
}

func (w *workerProc) send(t wire.Type, body []byte) error {
	return wire.WriteFrame(w.toW, t, body)
}

// kill stops the process now; it is reaped by its wait goroutine.
func (w *workerProc) kill() {
	w.killOnce.Do(func() { w.cmd.Process.Kill() })
}

// death waits for a worker whose pipe failed to be reaped and describes
// how it ended, with the last lines it wrote.
func (w *workerProc) death(err error) string {
	select {
	case <-w.exited:
	case <-time.After(time.Second):
		w.kill() // the pipe broke but the process lives on: make it end
		<-w.exited
	}
	select {
	case <-w.stderrDone:
	case <-time.After(200 * time.Millisecond):
	}
	msg := w.status
	if msg == "" {
		msg = err.Error()
	}
	if tail := w.tail.String(); tail != "" {
		msg += "; stderr: " + tail
	}
	return msg
}

// close asks the worker to exit, kills it after the grace period, reaps it
// and releases its pipes and region. Only the goroutine that holds the
// worker may call it.
func (w *workerProc) close() {
	select {
	case <-w.exited:
	default:
		if w.send(wire.TypeShutdown, nil) != nil {
			w.kill()
		}
		select {
		case <-w.exited:
		case <-time.After(shutdownGrace):
			w.kill()
			<-w.exited
		}
	}
	w.toW.Close()
	w.fromW.Close()
	w.region.Close()
	w.ph.mu.Lock()
	delete(w.ph.live, w)
	w.ph.mu.Unlock()
}

// lineTail keeps the last few lines a worker wrote, and whether one of them
// said the worker ran out of memory: the stack traces that follow would push
// that line out of the tail.
type lineTail struct {
	mu    sync.Mutex
	lines []string
	oom   bool
}

// isOutOfMemory says whether a line of a worker's own output is the Go
// runtime's last word when the kernel refused it memory: at the worker's
// memory limit (limitWorkerMemory), that is the end of a guest that grows
// a table without bound, or of a module whose compilation takes too much.
// Guest output never reaches the worker's stderr (it crosses as LOG
// frames), so a guest cannot fake this line.
func isOutOfMemory(line string) bool {
	switch {
	case strings.HasPrefix(line, "fatal error: "):
		return strings.Contains(line, "out of memory") || strings.Contains(line, "cannot allocate memory")
	case strings.HasPrefix(line, "runtime: "):
		// The runtime's own account before it throws, when the throw
		// itself cannot be written in full: a thread or a heap arena
		// refused (errno 12, ENOMEM).
		return strings.Contains(line, "out of memory") || strings.Contains(line, "errno=12")
	}
	return false
}

// oomScanner reads a worker's own output, line by line, for the other way
// the Go runtime ends when the kernel refuses it memory: its collector
// faults on the nil it got for memory (a SIGSEGV at address 0 in the
// runtime's allocator or collector) instead of saying so. Seen under load
// when a guest grows a table to the worker's limit. Only the worker's Go
// runtime writes these lines, never the guest.
type oomScanner struct {
	state int // 0: nothing; 1: a SIGSEGV; 2: at address 0
}

func (s *oomScanner) outOfMemory(line string) bool {
	if isOutOfMemory(line) {
		return true
	}
	switch {
	case strings.HasPrefix(line, "SIGSEGV: segmentation violation"):
		s.state = 1
	case s.state == 1 && strings.HasPrefix(line, "PC=") && strings.HasSuffix(line, " addr=0x0"):
		s.state = 2
	case s.state == 2 && isAllocatorFile(line):
		s.state = 0
		return true
	case s.state == 2 && strings.HasPrefix(line, "goroutine ") && !strings.HasPrefix(line, "goroutine 0 "):
		s.state = 0 // the faulting frames are over, and were not the runtime's memory
	}
	return false
}

// isAllocatorFile says whether a traceback line names a file of the Go
// runtime's allocator or collector (malloc.go, mheap.go, mgc*.go, ...).
func isAllocatorFile(line string) bool {
	i := strings.LastIndex(line, "/src/runtime/")
	if i < 0 {
		return false
	}
	file := line[i+len("/src/runtime/"):]
	for _, prefix := range []string{"mgc", "malloc", "mheap", "mcentral", "mcache", "mspan", "mem_"} {
		if strings.HasPrefix(file, prefix) {
			return true
		}
	}
	return false
}

func (t *lineTail) add(line string, oom bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.oom = t.oom || oom
	if len(t.lines) == stderrTailLines {
		copy(t.lines, t.lines[1:])
		t.lines = t.lines[:stderrTailLines-1]
	}
	t.lines = append(t.lines, line)
}

// outOfMemory says whether the worker said it ran out of memory.
func (t *lineTail) outOfMemory() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.oom
}

func (t *lineTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, " | ")
}

// procRunner runs a plugin's instances in worker processes: a pool of
// loaded workers, refilled in the background after a kill. Their idle
// calls and refills run in the host's background, so that closing the
// plugin leaves them to finish and closing the host stops them.
type procRunner struct {
	lifecycle[*workerProc]
	ph      *procHost
	name    string
	wasm    []byte
	sink    *logSink
	reserve int64

	refilling atomic.Bool
}

// load starts the plugin's first worker, which compiles the module (filling
// the cache for the next ones) and describes it.
func (ph *procHost) load(ctx context.Context, p *Plugin, wasm []byte) (runner, ModuleInfo, error) {
	lim := ph.cfg.limits
	r := &procRunner{ph: ph, name: p.name, wasm: bytes.Clone(wasm), sink: p.sink,
		reserve: shm.AlignUp(int64(max(lim.maxModuleBytes, 1<<30))) + shm.AlignUp(int64(lim.maxOutputBytes))}
	r.lifecycle = newLifecycle[*workerProc](r, p.name, p.host.pool, ph.bg, &p.closed)
	ph.mu.Lock()
	if ph.bg.isClosing() {
		ph.mu.Unlock()
		r.drain(func(*workerProc) {})
		return nil, ModuleInfo{}, &Error{Plugin: p.name, Kind: ErrClosed}
	}
	ph.runners[r] = struct{}{}
	ph.mu.Unlock()
	// The first worker takes its place in the host's pool like any call's.
	var w *workerProc
	var info ModuleInfo
	s, err := r.owner.take(ctx)
	if err == nil {
		r.owner.endEvicted(s)
		var loaded wire.Loaded
		w, loaded, err = r.spawnLoaded(ctx)
		if err == nil {
			info, err = r.moduleInfo(loaded)
			if err != nil {
				w.close()
			}
		}
		if err != nil {
			r.lost()
		}
	}
	if err != nil {
		r.drain(func(*workerProc) {})
		ph.mu.Lock()
		delete(ph.runners, r)
		ph.mu.Unlock()
		return nil, ModuleInfo{}, err
	}
	r.release(ctx, w)
	return r, info, nil
}

// moduleInfo checks what a worker said about the module: the parent trusts
// no worker output it has not checked.
func (r *procRunner) moduleInfo(l wire.Loaded) (ModuleInfo, error) {
	if l.ABIVersion != abi.Version {
		return ModuleInfo{}, r.protocolError(fmt.Errorf("LOADED with ABI version %d", l.ABIVersion))
	}
	d, err := parseDescription(l.Description)
	if err != nil {
		return ModuleInfo{}, describeError(r.name, err)
	}
	return ModuleInfo{
		ABIVersion:  l.ABIVersion,
		Assignors:   d.Assignors,
		Imports:     l.Imports,
		Exports:     l.Exports,
		SizeBytes:   len(r.wasm),
		CompileTime: time.Duration(max(l.CompileNanos, 0)),
	}, nil
}

func (r *procRunner) protocolError(err error) *Error {
	return &Error{Plugin: r.name, Kind: ErrTrap, Detail: "plugin worker protocol error", Err: err}
}

// spawnLoaded starts a worker and loads the module into it. Compiling runs
// under the compile timeout, from LOAD to COMPILED: wazero's compiler is
// finite, but a module can make it run for minutes, and only killing the
// worker stops it. The start-up code of the guest and its description get
// the call timeout, as in-process.
func (r *procRunner) spawnLoaded(ctx context.Context) (*workerProc, wire.Loaded, error) {
	lim := r.ph.cfg.limits
	size := shm.AlignUp(int64(max(len(r.wasm), 1)))
	w, err := r.ph.spawn(ctx, r.sink, size, r.reserve)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, wire.Loaded{}, err
		}
		if errors.Is(err, ErrClosed) {
			return nil, wire.Loaded{}, &Error{Plugin: r.name, Kind: ErrClosed}
		}
		if ctx.Err() != nil {
			return nil, wire.Loaded{}, r.deadlineError(ctx)
		}
		return nil, wire.Loaded{}, &Error{Plugin: r.name, Kind: ErrTrap, Detail: err.Error()}
	}
	copy(w.region.Bytes(), r.wasm)
	load := wire.Load{
		Name:            r.name,
		MemoryLimitMB:   uint64(lim.memoryLimitMB),
		MaxOutputBytes:  uint64(lim.maxOutputBytes),
		LogBytesPerCall: uint64(lim.logBytesPerCall),
		MinLogLevel:     int64(r.sink.minEnabledLevel()),
		CacheDir:        r.ph.cacheDir,
		WasmLen:         uint64(len(r.wasm)),
		RegionSize:      uint64(size),
		RegionReserve:   uint64(r.reserve),
		SkipIdle:        r.ph.cfg.skipIdle,
	}
	ph := phaseCompile
	if err := w.send(wire.TypeLoad, load.Encode()); err != nil {
		return nil, wire.Loaded{}, r.fail(ctx, w, ph, err)
	}
	cs := &callState{sink: r.sink}
	defer cs.finish()
	stop := w.watch(ctx, time.Now().Add(lim.compileTimeout))
	defer stop()
	for {
		t, body, err := w.recv()
		if err != nil {
			return nil, wire.Loaded{}, r.fail(ctx, w, ph, err)
		}
		switch t {
		case wire.TypeLog:
			if err := noteLog(cs, body); err != nil {
				return nil, wire.Loaded{}, r.fail(ctx, w, ph, err)
			}
		case wire.TypeCompiled:
			// A stale cancellation cannot be lost here: the session of
			// watch is still current, and ctx is checked again.
			ph = phaseLoad
			w.fromW.SetReadDeadline(time.Now().Add(lim.timeout))
			if ctx.Err() != nil {
				w.fromW.SetReadDeadline(time.Unix(1, 0))
			}
		case wire.TypeLoaded:
			loaded, err := wire.DecodeLoaded(body)
			if err != nil {
				return nil, wire.Loaded{}, r.fail(ctx, w, ph, err)
			}
			w.region.PunchHole(0, size) // the module's bytes are not needed again
			return w, loaded, nil
		case wire.TypeFailed:
			f, err := wire.DecodeFailure(body)
			if err != nil {
				return nil, wire.Loaded{}, r.fail(ctx, w, ph, err)
			}
			w.close()
			return nil, wire.Loaded{}, errorOf(r.name, f)
		default:
			return nil, wire.Loaded{}, r.fail(ctx, w, ph, fmt.Errorf("unexpected frame type %d while loading", t))
		}
	}
}

// noteLog feeds a LOG frame into the call's log state.
func noteLog(cs *callState, body []byte) error {
	l, err := wire.DecodeLog(body)
	if err != nil {
		return err
	}
	level := slog.Level(max(min(l.Level, 1<<20), -1<<20))
	cs.note(level, l.Line)
	return nil
}

// phase is what a worker was doing when an exchange with it broke, as its
// error names it.
type phase string

const (
	phaseCompile phase = "compile" // from LOAD to COMPILED
	phaseLoad    phase = "load"    // instantiating and describing the module
	phaseCall    phase = "call"
	phaseIdle    phase = "idle call"
)

// fail ends a worker whose exchange broke in phase ph and says why: the
// deadline or ctx, a death (out of memory, when the worker's memory limit
// killed it), or output that breaks the protocol.
func (r *procRunner) fail(ctx context.Context, w *workerProc, ph phase, err error) error {
	lim := r.ph.cfg.limits
	var e *Error
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.kill()
		switch {
		case ctx.Err() != nil:
			e = r.deadlineError(ctx)
		case ph == phaseCompile:
			e = &Error{Plugin: r.name, Kind: ErrTimeout, Detail: fmt.Sprintf("compile: stopped after %s, the compile timeout", lim.compileTimeout)}
		default:
			e = &Error{Plugin: r.name, Kind: ErrTimeout, Detail: fmt.Sprintf("stopped after %s", lim.timeout)}
		}
	case r.ph.bg.isClosing():
		w.kill()
		e = &Error{Plugin: r.name, Kind: ErrClosed}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrClosed) || isPipeError(err):
		death := w.death(err)
		if w.tail.outOfMemory() {
			e = &Error{Plugin: r.name, Kind: ErrOutOfMemory, Detail: fmt.Sprintf("%s: the plugin worker reached its memory limit of %d MiB (%d MiB for the guest's memory, %d MiB for the worker's runtime, compiler and tables)",
				ph, lim.workerMemoryBytes()>>20, lim.memoryLimitBytes()>>20, workerOverheadBytes>>20)}
			break
		}
		e = &Error{Plugin: r.name, Kind: ErrTrap, Detail: "plugin worker exited: " + death}
	default:
		w.kill()
		e = r.protocolError(err)
	}
	<-w.exited
	w.close()
	return e
}

func isPipeError(err error) bool { return errors.Is(err, syscall.EPIPE) }

// deadlineError is the error of a call whose ctx ended, worded as
// in-process: a deadline names the host's timeout.
func (r *procRunner) deadlineError(ctx context.Context) *Error {
	return deadlineError(r.name, r.ph.cfg.limits.timeout, ctx.Err())
}

func (r *procRunner) newInstance(ctx context.Context) (*workerProc, error) {
	w, _, err := r.spawnLoaded(ctx)
	return w, err
}

// usable is false for a worker that died while in the pool (the OOM
// killer, an operator): not the next call's fault, so the call gets
// another worker.
func (r *procRunner) usable(w *workerProc) bool {
	select {
	case <-w.exited:
		return false
	default:
		return true
	}
}

func (r *procRunner) discard(_ context.Context, w *workerProc) { w.close() }

// abandon kills a worker whose idle phase has begun: it would read
// SHUTDOWN only once the guest's idle call ends.
func (r *procRunner) abandon(w *workerProc) {
	w.kill()
	<-w.exited
	w.close()
}

// refill starts one spare worker in the background after a kill, so that the
// next call does not pay for the start, when the host's pool has a free
// place and no call waits for one (a waiting call starts its own). One
// refill runs per plugin at a time; repeated failures back off and then
// give up, leaving the start to the next call.
func (r *procRunner) refill() {
	if !r.refilling.CompareAndSwap(false, true) {
		return
	}
	started := r.ph.bg.run(func() {
		defer r.refilling.Store(false)
		ctx := r.ph.bg.ctx
		backoff := refillBackoff
		for range refillAttempts {
			if r.closed.Load() || !r.owner.reserveSpare() {
				return
			}
			w, _, err := r.spawnLoaded(ctx)
			r.owner.spareStarted(w, err == nil)
			if err == nil {
				return
			}
			if ctx.Err() != nil {
				return // the host is closing
			}
			r.sink.logger.Warn("plugin worker: starting a spare failed", "err", err)
			select {
			case <-time.After(backoff):
				backoff *= 2
			case <-ctx.Done():
				return
			}
		}
	})
	if !started {
		r.refilling.Store(false)
	}
}

func (r *procRunner) close(ctx context.Context) error {
	var wg sync.WaitGroup
	r.drain(func(w *workerProc) { wg.Go(w.close) })
	wg.Wait()
	r.ph.mu.Lock()
	delete(r.ph.runners, r)
	r.ph.mu.Unlock()
	return nil
}

func (r *procRunner) call(ctx context.Context, req *abi.Request) (*abi.Response, uint64, error) {
	if ctx.Err() != nil {
		return nil, 0, r.deadlineError(ctx)
	}
	for attempt := 0; ; attempt++ {
		w, err := r.acquire(ctx)
		if err != nil {
			return nil, 0, err
		}
		resp, mem, after, err := r.assign(ctx, w, req)
		switch after {
		case workerFree:
			r.release(ctx, w)
		case workerIdling:
			r.idleThenRelease(w)
		default:
			r.lost()
			// acquire checks for a worker that died in the pool, but one
			// can die between that check and the request: the call never
			// reached it, so it goes to another worker, once.
			if after == workerGoneBefore && attempt == 0 {
				continue
			}
			r.refill()
		}
		return resp, mem, err
	}
}

// workerAfter is the state a call leaves its worker in.
type workerAfter int

const (
	workerGone   workerAfter = iota // killed or dead, and released
	workerFree                      // ready for the next call
	workerIdling                    // running the guest's idle call; IDLE_DONE follows
	// workerGoneBefore: the worker had died before the call reached it
	// (writing the request found its pipe closed); released.
	workerGoneBefore
)

// idleThenRelease returns w to the pool once its idle call has ended. The
// worker sends IDLE_DONE microseconds after RESULT when the guest has
// nothing to do, so the frame is often in the read buffer already: then w
// goes back at once. Otherwise the lifecycle waits for it in the
// background. An idle call past the timeout, or a worker that breaks the
// protocol, is killed and replaced, as after a failed call; a guest that
// trapped in idle has already replaced its instance. Both are logged: no
// caller is waiting for the idle call.
func (r *procRunner) idleThenRelease(w *workerProc) {
	cs := &callState{sink: r.sink}
	if r.idleDoneBuffered(w, cs) {
		cs.finish()
		r.release(context.Background(), w)
		return
	}
	r.releaseAfterIdle(w, func(ctx context.Context) bool {
		ok, err := r.awaitIdle(ctx, w, cs)
		if err != nil && !errors.Is(err, ErrClosed) {
			r.sink.logger.Warn("plugin idle call failed", "err", err, "worker_replaced", !ok)
		}
		if !ok {
			r.refill()
		}
		return ok
	})
}

// idleDoneBuffered consumes, without blocking, the LOG frames and the clean
// IDLE_DONE that are complete in w's read buffer, and says whether it got
// to IDLE_DONE. It stops before anything else, which awaitIdle then reads
// and judges.
func (r *procRunner) idleDoneBuffered(w *workerProc, cs *callState) bool {
	for {
		t, body, n, ok := wire.PeekFrame(w.rd)
		if !ok {
			return false
		}
		switch t {
		case wire.TypeLog:
			if noteLog(cs, body) != nil {
				return false
			}
			w.rd.Discard(n)
		case wire.TypeIdleDone:
			done, err := wire.DecodeIdleDone(body)
			if err != nil || done.Failure.Kind != wire.KindOK {
				return false
			}
			cs.dropped += int(min(done.Dropped, 1<<30))
			w.rd.Discard(n)
			return true
		default:
			return false
		}
	}
}

// awaitIdle reads w's frames up to IDLE_DONE, under the call timeout and
// ctx, the host's life, noting log lines in cs. ok is false when w was
// killed or died and has been released.
func (r *procRunner) awaitIdle(ctx context.Context, w *workerProc, cs *callState) (ok bool, err error) {
	defer cs.finish()
	stop := w.watch(ctx, time.Now().Add(r.ph.cfg.limits.timeout))
	defer stop()
	for {
		t, body, err := w.recv()
		if err == nil && t == wire.TypeLog {
			if err = noteLog(cs, body); err == nil {
				continue
			}
		}
		if err == nil && t != wire.TypeIdleDone {
			err = fmt.Errorf("unexpected frame type %d after a call", t)
		}
		var done wire.IdleDone
		if err == nil {
			done, err = wire.DecodeIdleDone(body)
		}
		if err != nil {
			if ctx.Err() != nil {
				// The host is closing: whatever the read saw, the worker
				// goes, and that is nobody's failure.
				err = os.ErrClosed
			}
			return false, r.fail(ctx, w, phaseIdle, err)
		}
		cs.dropped += int(min(done.Dropped, 1<<30))
		if done.Failure.Kind != wire.KindOK {
			return true, errorOf(r.name, done.Failure)
		}
		return true, nil
	}
}

// assign runs one call on w and says what state it left w in.
func (r *procRunner) assign(ctx context.Context, w *workerProc, req *abi.Request) (resp *abi.Response, mem uint64, after workerAfter, err error) {
	lim := r.ph.cfg.limits
	maxOut := int64(lim.maxOutputBytes)
	buf := w.region.Bytes()
	enc := abi.AppendRequest(buf[:0], req)
	if len(enc) > 0 && (len(buf) == 0 || &enc[0] != &buf[0]) {
		// The encoding outgrew the region and went to the heap.
		if err := w.region.Grow(shm.AlignUp(int64(len(enc))) + maxOut); err != nil {
			return nil, 0, workerGone, r.fail(ctx, w, phaseCall, err)
		}
		copy(w.region.Bytes(), enc)
	}
	respOff := shm.AlignUp(int64(len(enc)))
	if err := w.region.Grow(respOff + maxOut); err != nil {
		return nil, 0, workerGone, r.fail(ctx, w, phaseCall, err)
	}
	cs := &callState{sink: r.sink}
	defer cs.finish()
	stop := w.watch(ctx, time.Now().Add(lim.timeout))
	defer stop()
	a := wire.Assign{Seed: req.Seed, RequestLen: uint64(len(enc)), ResponseOffset: uint64(respOff), RegionSize: uint64(w.region.Size())}
	if err := w.send(wire.TypeAssign, a.Encode()); err != nil {
		after := workerGone
		if isPipeError(err) && !r.ph.bg.isClosing() {
			after = workerGoneBefore
		}
		return nil, 0, after, r.fail(ctx, w, phaseCall, err)
	}
	var res wire.Result
	for {
		t, body, err := w.recv()
		if err == nil && t == wire.TypeLog {
			err = noteLog(cs, body)
			if err == nil {
				continue
			}
		}
		if err == nil && t != wire.TypeResult {
			err = fmt.Errorf("unexpected frame type %d during a call", t)
		}
		if err == nil {
			res, err = wire.DecodeResult(body)
		}
		if err != nil {
			return nil, 0, workerGone, r.fail(ctx, w, phaseCall, err)
		}
		break
	}
	cs.dropped += int(min(res.Dropped, 1<<30))
	mem = min(res.MemoryBytes, 1<<32) // a metric only; capped at wasm32's reach
	after = workerFree
	if res.Idle {
		after = workerIdling
	}
	if res.Failure.Kind != wire.KindOK {
		return nil, mem, after, errorOf(r.name, res.Failure)
	}
	end := uint64(respOff) + res.ResponseLen
	if res.ResponseLen == 0 || res.ResponseLen > uint64(maxOut) || end > uint64(w.region.Size()) {
		return nil, 0, workerGone, r.fail(ctx, w, phaseCall, fmt.Errorf("response of %d bytes at %d, region %d, cap %d", res.ResponseLen, respOff, w.region.Size(), maxOut))
	}
	resp, err = decodeOutput(r.name, w.region.Bytes()[respOff:end])
	if end > punchHoleAbove {
		w.region.PunchHole(0, shm.AlignUp(int64(end)))
	}
	return resp, mem, after, err
}

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
	"runtime/debug"
	"strconv"
	"time"

	"github.com/wasmassign/wasmassign/runtime/internal/shm"
	"github.com/wasmassign/wasmassign/runtime/internal/wire"
)

// workerEnv marks a process as a plugin worker; its value is the protocol
// version. It is the only variable a worker's environment holds.
const workerEnv = "WASMASSIGN_WORKER"

// File descriptors a worker inherits (exec.Cmd.ExtraFiles starts at 3).
const (
	workerFdIn     = 3 // frames from the parent
	workerFdOut    = 4 // frames to the parent
	workerFdRegion = 5 // the shared region
)

// maxFailureText caps the detail and error text a worker sends, far below
// the frame cap.
const maxFailureText = 64 << 10

// RunWorkerIfRequested turns this process into a plugin worker when a Host
// in IsolationProcess mode started it, and returns at once otherwise. A
// worker serves its parent until told to stop and then exits the process;
// this call never returns in a worker.
//
// Every program that creates a Host with IsolationProcess (the default on
// Linux) must call it first thing in main, and every test binary that does
// so first thing in TestMain, because the host starts workers by executing
// its own binary again.
func RunWorkerIfRequested() {
	v, ok := os.LookupEnv(workerEnv)
	if !ok {
		return
	}
	os.Exit(runWorker(v))
}

// inWorker says whether this process is a worker. A Host in process mode
// refuses to start in one, so that a binary that forgot the hook fails
// instead of starting workers recursively.
func inWorker() bool {
	_, ok := os.LookupEnv(workerEnv)
	return ok
}

// worker is the state of a worker process: at most one module with at most
// one instance, serving one call at a time.
type worker struct {
	in     *bufio.Reader
	out    *os.File
	region *shm.Region
	buf    []byte

	eng  *engine
	mod  *engineModule
	inst *instance
	sink *logSink
	// skipIdle: the parent asked for no idle calls (Load.SkipIdle).
	skipIdle bool
}

func runWorker(version string) int {
	if version != strconv.Itoa(wire.Version) {
		fmt.Fprintf(os.Stderr, "wasmassign worker: protocol version %q, this binary speaks %d\n", version, wire.Version)
		return 2
	}
	w := &worker{
		in:  bufio.NewReaderSize(os.NewFile(workerFdIn, "from-parent"), 64<<10),
		out: os.NewFile(workerFdOut, "to-parent"),
	}
	hello := wire.Hello{Magic: wire.Magic, Version: wire.Version, Pid: int64(os.Getpid())}
	if err := w.send(wire.TypeHello, hello.Encode()); err != nil {
		return 1
	}
	err := w.serve(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "wasmassign worker: %v\n", err)
		return 1
	}
	return 0
}

func (w *worker) send(t wire.Type, body []byte) error {
	return wire.WriteFrame(w.out, t, body)
}

// serve handles frames until SHUTDOWN or the parent closes the pipe.
func (w *worker) serve(ctx context.Context) error {
	for {
		t, body, err := wire.ReadFrame(w.in, w.buf)
		if errors.Is(err, io.EOF) {
			return nil // the parent is gone or done with us
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		w.buf = body[:0]
		switch t {
		case wire.TypeLoad:
			m, err := wire.DecodeLoad(body)
			if err != nil {
				return err
			}
			if err := w.load(ctx, m); err != nil {
				return err
			}
		case wire.TypeAssign:
			m, err := wire.DecodeAssign(body)
			if err != nil {
				return err
			}
			if err := w.assign(ctx, m); err != nil {
				return err
			}
		case wire.TypeShutdown:
			return nil
		default:
			return fmt.Errorf("unexpected frame type %d", t)
		}
	}
}

// load compiles, instantiates and describes the module the parent put in
// the region. Only a broken pipe or region is an error; a module that fails
// to load is reported with FAILED.
func (w *worker) load(ctx context.Context, m wire.Load) error {
	if w.mod != nil {
		return errors.New("a second LOAD")
	}
	region, err := shm.Open(os.NewFile(workerFdRegion, "region"), int64(m.RegionSize), int64(m.RegionReserve))
	if err != nil {
		return err
	}
	w.region = region
	if m.WasmLen > uint64(region.Size()) {
		return fmt.Errorf("module of %d bytes in a %d-byte region", m.WasmLen, region.Size())
	}
	lim := DefaultLimits().
		WithMemoryLimitMB(uint32(min(m.MemoryLimitMB, 1<<16))).
		WithMaxOutputBytes(int(min(m.MaxOutputBytes, 1<<40))).
		WithLogBytesPerCall(int(min(m.LogBytesPerCall, 1<<40)))
	w.sink = &logSink{
		bytesPerCall: lim.logBytesPerCall,
		minLevel:     slog.Level(m.MinLogLevel),
		forward: func(level slog.Level, line string) {
			l := wire.Log{Level: int64(level), Line: line}
			// A failed write means the parent is gone; the next read ends
			// the worker.
			_ = w.send(wire.TypeLog, l.Encode())
		},
	}
	fail := func(err error) error {
		f := failureOf(err)
		return w.send(wire.TypeFailed, f.Encode())
	}
	// The memory limit holds the whole process from here on, compiling
	// included: a module can make the compiler take gigabytes, and a guest
	// can grow its tables without bound, and neither is linear memory,
	// which alone the allocator holds (memlimit.go).
	limit := lim.workerMemoryBytes()
	if err := limitWorkerMemory(limit); err != nil {
		return fail(&Error{Plugin: m.Name, Kind: ErrTrap,
			Detail: fmt.Sprintf("load: setting the plugin worker's memory limit of %d MiB", limit>>20), Err: err})
	}
	// The collector works hard as the heap nears the limit, so that
	// garbage it has not yet freed costs no compilation its module.
	debug.SetMemoryLimit(int64(limit))
	eng, err := newEngine(ctx, lim, m.CacheDir, false)
	if err != nil {
		return fail(err)
	}
	w.eng = eng
	// A private copy: the parent reuses the region for requests, and the
	// compiler must never see its input change.
	wasm := bytes.Clone(region.Bytes()[:m.WasmLen])
	mod, err := eng.compile(ctx, m.Name, wasm, w.sink)
	if err != nil {
		return fail(err)
	}
	w.mod = mod
	if err := w.send(wire.TypeCompiled, nil); err != nil {
		return err
	}
	start := time.Now()
	inst, err := mod.instantiate(ctx)
	if err != nil {
		return fail(err)
	}
	desc, err := mod.describe(ctx, inst)
	if err != nil {
		inst.close(ctx)
		return fail(err)
	}
	w.skipIdle = m.SkipIdle
	// The first idle call runs while loading, as in-process: off every
	// caller's path, and before the guest's first assignment.
	if inst.idleFn != nil && !w.skipIdle {
		if _, err := mod.idle(ctx, inst); err != nil {
			inst.close(ctx)
			return fail(err)
		}
	}
	w.inst = inst
	if len(desc) > wire.MaxFrame/2 {
		return fail(&Error{Plugin: m.Name, Kind: ErrABIMismatch,
			Detail: fmt.Sprintf("the description has %d bytes, a worker passes at most %d", len(desc), wire.MaxFrame/2)})
	}
	// Compiling leaves tens of megabytes of the compiler's garbage behind,
	// which the runtime would otherwise hand back to the system only
	// minutes later, if ever; a warm worker idles for far longer than that.
	debug.FreeOSMemory()
	loaded := wire.Loaded{
		ABIVersion:    mod.info.ABIVersion,
		Description:   desc,
		Imports:       mod.info.Imports,
		Exports:       mod.info.Exports,
		CompileNanos:  int64(mod.info.CompileTime),
		InstanceNanos: int64(time.Since(start)),
	}
	return w.send(wire.TypeLoaded, loaded.Encode())
}

// assign runs one call. The request is read from the region and the
// response written back to it; what the guest does wrong is reported in
// RESULT, and an instance that trapped is replaced before the next call.
// When the guest exports idle and the instance is kept, the idle call
// follows RESULT and IDLE_DONE reports its end.
func (w *worker) assign(ctx context.Context, m wire.Assign) error {
	if w.mod == nil {
		return errors.New("ASSIGN before LOAD")
	}
	if err := w.region.Extend(int64(m.RegionSize)); err != nil {
		return err
	}
	size := uint64(w.region.Size())
	if m.RequestLen > size || m.ResponseOffset < m.RequestLen || m.ResponseOffset > size {
		return fmt.Errorf("ASSIGN out of the region: request %d, response at %d, region %d", m.RequestLen, m.ResponseOffset, size)
	}
	region := w.region.Bytes()
	var res wire.Result
	if w.inst == nil {
		inst, err := w.mod.instantiate(ctx)
		if err != nil {
			res.Failure = failureOf(err)
			return w.send(wire.TypeResult, res.Encode())
		}
		w.inst = inst
	}
	cs := &callState{sink: w.sink}
	fits := true
	mem, err := w.mod.call(ctx, w.inst, cs, region[:m.RequestLen], m.Seed, "", func(out []byte) {
		res.ResponseLen = uint64(copy(region[m.ResponseOffset:], out))
		fits = res.ResponseLen == uint64(len(out))
	})
	if err == nil && !fits {
		// The parent sizes the region for the output cap, so this is a
		// parent bug, reported rather than truncated.
		err = &Error{Plugin: w.mod.name, Kind: ErrInvalidOutput, Rule: RuleOutputSize,
			Detail: fmt.Sprintf("no room in the shared region at %d", m.ResponseOffset)}
	}
	if err != nil {
		res.Failure = failureOf(err)
		res.ResponseLen = 0
		if !keepsInstance(err) {
			w.inst.close(ctx)
			w.inst = nil
		}
	}
	res.MemoryBytes = mem
	res.Dropped = uint64(cs.dropped)
	res.Idle = w.inst != nil && w.inst.idleFn != nil && !w.skipIdle
	if err := w.send(wire.TypeResult, res.Encode()); err != nil || !res.Idle {
		return err
	}
	// The parent has the response; the guest's housekeeping runs now, while
	// the parent's caller goes on, and the parent hands this worker no
	// other call until IDLE_DONE. The parent's timer bounds it.
	var done wire.IdleDone
	dropped, err := w.mod.idle(ctx, w.inst)
	if err != nil {
		done.Failure = failureOf(err)
		w.inst.close(ctx)
		w.inst = nil
	}
	done.Dropped = uint64(dropped)
	return w.send(wire.TypeIdleDone, done.Encode())
}

// kindOf returns the error kind of a wire code; unknown codes are traps.
func kindOf(code uint64) error {
	switch code {
	case wire.KindTimeout:
		return ErrTimeout
	case wire.KindOutOfMemory:
		return ErrOutOfMemory
	case wire.KindInvalidOutput:
		return ErrInvalidOutput
	case wire.KindABIMismatch:
		return ErrABIMismatch
	case wire.KindNotWasm:
		return ErrNotWasm
	case wire.KindModuleTooLarge:
		return ErrModuleTooLarge
	case wire.KindAssignorFailed:
		return ErrAssignorFailed
	}
	return ErrTrap
}

// codeOf returns the wire code of an error kind.
func codeOf(kind error) uint64 {
	for code := uint64(wire.KindTimeout); code <= wire.KindAssignorFailed; code++ {
		if kindOf(code) == kind {
			return code
		}
	}
	return wire.KindTrap
}

// failureOf encodes an error for the parent. Anything that is not an *Error
// (the engine failed to start, say) is reported as a trap.
func failureOf(err error) wire.Failure {
	var e *Error
	if !errors.As(err, &e) {
		return wire.Failure{Kind: wire.KindTrap, Detail: truncate(err.Error())}
	}
	f := wire.Failure{Kind: codeOf(e.Kind), Rule: string(e.Rule), Detail: truncate(e.Detail)}
	if e.Err != nil {
		f.Err = truncate(e.Err.Error())
	}
	return f
}

// errorOf rebuilds the *Error a worker reported. The underlying error
// survives as text only.
func errorOf(plugin string, f wire.Failure) *Error {
	e := &Error{Plugin: plugin, Kind: kindOf(f.Kind), Rule: Rule(f.Rule), Detail: f.Detail}
	if f.Err != "" {
		e.Err = errors.New(f.Err)
	}
	return e
}

func truncate(s string) string {
	if len(s) > maxFailureText {
		return s[:maxFailureText] + "…(truncated)"
	}
	return s
}

// Package wasmruntime runs wasmassign assignor plugins: WebAssembly modules
// that speak the ABI of sdk/ABI.md. It loads and compiles them with wazero,
// pools their instances, bounds each call in time, memory and output,
// validates every response, and turns every way a plugin can fail into an
// *Error whose Kind callers can branch on.
//
// On Linux each instance runs by default in a worker process, this program
// started again, so that guest code can run without wazero's per-loop
// deadline checks and still be stopped (killed) at the deadline; see
// Isolation and RATIONALE.md ("How a worker is isolated"). Programs and
// test binaries that create a Host must therefore call RunWorkerIfRequested
// first thing.
//
// The package knows nothing of consumer groups or the Kafka wire protocol: it
// maps an abi.Request to an abi.Response or an error. It must never import
// the coordinator, proxy or cmd packages. (Its directory is runtime/; the
// package is named wasmruntime so that it does not shadow the standard
// library's runtime.)
package wasmruntime

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Host compiles and runs plugins. One Host shares its compilation cache and
// its limits among all plugins loaded through it. With IsolationInProcess it
// runs every plugin on one wazero runtime in this process; with
// IsolationProcess each instance of a plugin runs in a worker process of its
// own, which the host kills when a call runs past its deadline.
// A Host is safe for concurrent use.
type Host struct {
	cfg   Config
	eng   *engine   // IsolationInProcess
	procs *procHost // IsolationProcess
	// pool bounds the instances of every plugin together and queues the
	// calls beyond them.
	pool *instancePool
	// stopReaper ends the goroutine that ends long-idle instances.
	stopReaper  chan struct{}
	reaped      chan struct{}
	closeReaper sync.Once
}

// Import module names a plugin may use (sdk/ABI.md section 1).
const (
	importHost = "wasmassign"
	importEnv  = "env"
	importWASI = wasi_snapshot_preview1.ModuleName
)

// NewHost starts a host under cfg: a wazero runtime with the host functions
// of the ABI in this process, or, with IsolationProcess, the machinery that
// starts worker processes (none is started before the first Load).
func NewHost(ctx context.Context, cfg Config) (*Host, error) {
	h := &Host{cfg: cfg, pool: newInstancePool(cfg.MaxInstances(), cfg.queueTimeout, cfg.hooks)}
	switch iso := cfg.Isolation(); iso {
	case IsolationInProcess:
		eng, err := newEngine(ctx, cfg.limits, cfg.cacheDir, true)
		if err != nil {
			return nil, err
		}
		h.eng = eng
	case IsolationProcess:
		procs, err := newProcHost(cfg)
		if err != nil {
			return nil, err
		}
		h.procs = procs
	default:
		return nil, fmt.Errorf("wasmruntime: unknown isolation %d", iso)
	}
	h.stopReaper, h.reaped = make(chan struct{}), make(chan struct{})
	if cfg.idleTimeout > 0 {
		go func() {
			defer close(h.reaped)
			h.pool.reapEvery(cfg.idleTimeout, h.stopReaper)
		}()
	} else {
		close(h.reaped)
	}
	return h, nil
}

// PoolStats returns a snapshot of the host's instances and its queue of
// calls.
func (h *Host) PoolStats() PoolStats { return h.pool.stats() }

// Config returns the host's configuration.
func (h *Host) Config() Config { return h.cfg }

// Close releases the runtime and every plugin loaded through it. In process
// isolation it stops every worker process and waits for each to exit.
func (h *Host) Close(ctx context.Context) error {
	h.closeReaper.Do(func() {
		close(h.stopReaper)
		<-h.reaped
	})
	if h.eng != nil {
		return h.eng.close(ctx)
	}
	return h.procs.close(ctx)
}

// LoadFile loads a plugin from a file; the plugin is named after the file.
func (h *Host) LoadFile(ctx context.Context, path string) (*Plugin, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", path, err)
	}
	if st.Size() > int64(h.cfg.limits.maxModuleBytes) {
		return nil, &Error{Plugin: path, Kind: ErrModuleTooLarge,
			Detail: fmt.Sprintf("%d bytes, the limit is %d", st.Size(), h.cfg.limits.maxModuleBytes)}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", path, err)
	}
	return h.Load(ctx, path, b)
}

type callKey struct{}

func callFrom(ctx context.Context) *callState {
	cs, _ := ctx.Value(callKey{}).(*callState)
	return cs
}

// hostLog is wasmassign.log: one line from the guest, at a slog level.
func hostLog(ctx context.Context, m api.Module, level int32, ptr, size uint32) {
	cs := callFrom(ctx)
	if cs == nil {
		return
	}
	if size > maxLineBytes*4 {
		size = maxLineBytes * 4
	}
	b, ok := m.Memory().Read(ptr, size)
	if !ok {
		cs.note(slog.LevelWarn, fmt.Sprintf("wasmassign.log: %d bytes at %#x are outside memory", size, ptr))
		return
	}
	cs.note(slog.Level(level), string(b))
}

// hostAbort is AssemblyScript's env.abort: log the message, then trap.
func hostAbort(ctx context.Context, m api.Module, msg, file, line, col uint32) {
	text := readASString(m.Memory(), msg)
	where := readASString(m.Memory(), file)
	full := fmt.Sprintf("abort: %s at %s:%d:%d", text, where, line, col)
	if cs := callFrom(ctx); cs != nil {
		cs.note(slog.LevelError, full)
	}
	panic(fmt.Errorf("%s", full))
}

// readASString decodes an AssemblyScript string: UTF-16LE code units whose
// byte length sits in the four bytes before the pointer.
func readASString(mem api.Memory, ptr uint32) string {
	if ptr < 4 {
		return ""
	}
	n, ok := mem.ReadUint32Le(ptr - 4)
	if !ok || n > 4096 {
		return ""
	}
	b, ok := mem.Read(ptr, n&^1)
	if !ok {
		return ""
	}
	r := make([]rune, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		r = append(r, rune(uint16(b[i])|uint16(b[i+1])<<8))
	}
	return string(r)
}

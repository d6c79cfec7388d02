// Package wasmruntime runs wasmassign assignor plugins: WebAssembly modules
// that speak the ABI of sdk/ABI.md. It loads and compiles them with wazero,
// pools their instances, bounds each call in time, memory and output,
// validates every response, and turns every way a plugin can fail into an
// *Error whose Kind callers can branch on.
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

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmassign/wasmassign/runtime/internal/linmem"
)

// Host compiles and runs plugins. One Host shares a wazero runtime, its
// compilation cache and its limits among all plugins loaded through it.
// A Host is safe for concurrent use.
type Host struct {
	cfg   Config
	rt    wazero.Runtime
	cache wazero.CompilationCache
	// memory backs each instance's linear memory with a mapping reserved at
	// its maximum size; nil where the platform has none.
	memory experimental.MemoryAllocator
}

// Import module names a plugin may use (sdk/ABI.md section 1).
const (
	importHost = "wasmassign"
	importEnv  = "env"
	importWASI = wasi_snapshot_preview1.ModuleName
)

// NewHost starts a wazero runtime with the host functions of the ABI.
func NewHost(ctx context.Context, cfg Config) (*Host, error) {
	rc := wazero.NewRuntimeConfig().
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(cfg.limits.memoryPages())
	h := &Host{cfg: cfg, memory: linmem.Allocator()}
	if cfg.cacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(cfg.cacheDir)
		if err != nil {
			return nil, fmt.Errorf("compilation cache %s: %w", cfg.cacheDir, err)
		}
		h.cache = cache
		rc = rc.WithCompilationCache(cache)
	}
	h.rt = wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, h.rt); err != nil {
		h.Close(ctx)
		return nil, fmt.Errorf("wasi: %w", err)
	}
	_, err := h.rt.NewHostModuleBuilder(importHost).
		NewFunctionBuilder().WithFunc(hostLog).WithParameterNames("level", "ptr", "len").Export("log").
		Instantiate(ctx)
	if err != nil {
		h.Close(ctx)
		return nil, fmt.Errorf("host module %s: %w", importHost, err)
	}
	_, err = h.rt.NewHostModuleBuilder(importEnv).
		NewFunctionBuilder().WithFunc(hostAbort).WithParameterNames("msg", "file", "line", "col").Export("abort").
		Instantiate(ctx)
	if err != nil {
		h.Close(ctx)
		return nil, fmt.Errorf("host module %s: %w", importEnv, err)
	}
	return h, nil
}

// Config returns the host's configuration.
func (h *Host) Config() Config { return h.cfg }

// Close releases the runtime and every plugin loaded through it.
func (h *Host) Close(ctx context.Context) error {
	err := h.rt.Close(ctx)
	if h.cache != nil {
		if cerr := h.cache.Close(ctx); err == nil {
			err = cerr
		}
	}
	return err
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

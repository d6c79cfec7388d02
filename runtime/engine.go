package wasmruntime

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmassign/wasmassign/runtime/internal/linmem"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// engine is one wazero runtime with the ABI's host modules: everything that
// runs guest code. The in-process host uses one with deadline checks compiled
// into every loop; a worker process uses one without them, and its parent
// enforces the deadline by killing the process.
type engine struct {
	rt wazero.Runtime
	// cache holds the compiler and the compiled code, in memory or in a
	// directory; it outlives rt while a compilation given up on still runs
	// (compileBounded), since closing it under one crashes wazero.
	cache  wazero.CompilationCache
	limits Limits
	// checked says whether guest code checks the context at loop headers,
	// so that a call's deadline stops it in-process.
	checked bool
	// memory backs each instance's linear memory, with a mapping reserved
	// at its maximum size where the platform has them; limitedAllocator
	// puts the limit on top (memlimit.go).
	memory experimental.MemoryAllocator
	// bg is the parent of every plugin's background, where idle calls
	// run (plugin.go). Closing the runtime frees the code and memory a
	// running guest uses, so close stops and waits for them first.
	bg *background
	mu sync.Mutex // guards compiling, running and closed

	// compiling serialises compiles of equal bytes (by hash under
	// compileSeed; a collision only serialises two compiles). wazero v1.12
	// publishes a module loaded from its file cache before it has finished
	// preparing it, and a second compile of the same bytes then returns it
	// at once: instantiating that panics in wazero. A Registry loads a
	// directory's files concurrently, and two files may be equal.
	compileSeed maphash.Seed
	compiling   map[uint64]*sync.Mutex
	// running counts compilations under way; once closed is set, the last
	// of them closes the cache. Both are guarded by mu.
	running int
	closed  bool

	// provided is every function the host's modules export, with its
	// signature: what a module may import (sdk/ABI.md section 1).
	provided map[importName]api.FunctionDefinition
}

// importName names an imported function: its module and its name.
type importName struct{ module, name string }

// newEngine starts a runtime under limits, caching compiled code in
// cacheDir when it is not empty.
func newEngine(ctx context.Context, limits Limits, cacheDir string, checked bool) (*engine, error) {
	// No WithMemoryLimitPages: the allocator holds the limit (memlimit.go).
	rc := wazero.NewRuntimeConfig().WithCloseOnContextDone(checked)
	e := &engine{limits: limits, checked: checked, memory: linmem.Allocator(),
		compileSeed: maphash.MakeSeed(), compiling: make(map[uint64]*sync.Mutex)}
	e.bg = newBackground(nil)
	// Always a cache, in memory when there is no directory: a runtime with
	// one leaves the compiler to it, so closing the runtime does not pull
	// the compiler from under a compilation that still runs.
	e.cache = wazero.NewCompilationCache()
	if cacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(cacheDir)
		if err != nil {
			return nil, fmt.Errorf("compilation cache %s: %w", cacheDir, err)
		}
		e.cache = cache
	}
	rc = rc.WithCompilationCache(e.cache)
	e.rt = wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, e.rt); err != nil {
		e.close(ctx)
		return nil, fmt.Errorf("wasi: %w", err)
	}
	_, err := e.rt.NewHostModuleBuilder(importHost).
		NewFunctionBuilder().WithFunc(hostLog).WithParameterNames("level", "ptr", "len").Export("log").
		Instantiate(ctx)
	if err != nil {
		e.close(ctx)
		return nil, fmt.Errorf("host module %s: %w", importHost, err)
	}
	_, err = e.rt.NewHostModuleBuilder(importEnv).
		NewFunctionBuilder().WithFunc(hostAbort).WithParameterNames("msg", "file", "line", "col").Export("abort").
		Instantiate(ctx)
	if err != nil {
		e.close(ctx)
		return nil, fmt.Errorf("host module %s: %w", importEnv, err)
	}
	e.provided = make(map[importName]api.FunctionDefinition)
	for _, mod := range []string{importWASI, importHost, importEnv} {
		for name, def := range e.rt.Module(mod).ExportedFunctionDefinitions() {
			e.provided[importName{mod, name}] = def
		}
	}
	return e, nil
}

func (e *engine) close(ctx context.Context) error {
	e.bg.close()
	e.bg.wait()
	err := e.rt.Close(ctx)
	e.mu.Lock()
	e.closed = true
	last := e.running == 0
	e.mu.Unlock()
	if last {
		if cerr := e.cache.Close(ctx); err == nil {
			err = cerr
		}
	}
	return err
}

// compileStarted counts a compilation under way; false once the engine is
// closed.
func (e *engine) compileStarted() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.running++
	return true
}

// compileEnded counts a compilation's end, and closes the cache after the
// last one when the engine closed meanwhile.
func (e *engine) compileEnded() {
	e.mu.Lock()
	e.running--
	last := e.closed && e.running == 0
	e.mu.Unlock()
	if last {
		e.cache.Close(context.Background())
	}
}

// withDeadline bounds a guest call by the timeout when the engine's code can
// be stopped by its context. Unchecked code ignores contexts, so there the
// deadline belongs to the parent process.
func (e *engine) withDeadline(ctx context.Context, cs *callState) (context.Context, context.CancelFunc) {
	ctx = context.WithValue(ctx, callKey{}, cs)
	if !e.checked {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, e.limits.timeout)
}

// engineModule is one compiled module, whose shape has been checked.
type engineModule struct {
	e        *engine
	name     string
	compiled wazero.CompiledModule
	sink     *logSink
	info     ModuleInfo
}

// instance is one instantiation of a plugin. It is used by one goroutine at a
// time and discarded after any failure, since a trapped guest's state cannot
// be trusted.
type instance struct {
	mod                             api.Module
	alloc, free, assign, describeFn api.Function
	idleFn                          api.Function // nil when the module has no idle export
	io                              *instanceIO
	buf                             []byte // reused request encoding
}

func (inst *instance) close(ctx context.Context) { inst.mod.Close(ctx) }

// lockCompile takes the lock for compiling wasm and returns its release.
// Locks are never removed: there is one per distinct module a host loads.
func (e *engine) lockCompile(wasm []byte) func() {
	key := maphash.Bytes(e.compileSeed, wasm)
	e.mu.Lock()
	l, ok := e.compiling[key]
	if !ok {
		l = &sync.Mutex{}
		e.compiling[key] = l
	}
	e.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// compile compiles a module and checks its exports and imports. In a
// worker the parent bounds the compilation and kills the process at its
// deadline; in process, the compilation cannot be stopped, so compile
// stops waiting for it at the compile timeout (compileBounded).
func (e *engine) compile(ctx context.Context, name string, wasm []byte, sink *logSink) (*engineModule, error) {
	start := time.Now()
	var compiled wazero.CompiledModule
	var err error
	if e.checked {
		compiled, err = e.compileBounded(ctx, name, wasm)
	} else {
		compiled, err = e.compileLocked(ctx, name, wasm)
	}
	if err != nil {
		return nil, err
	}
	m := &engineModule{e: e, name: name, compiled: compiled, sink: sink,
		info: ModuleInfo{SizeBytes: len(wasm), CompileTime: time.Since(start)}}
	if err := m.checkShape(); err != nil {
		compiled.Close(ctx)
		return nil, err
	}
	return m, nil
}

// compileLocked compiles wasm under its compile lock. wazero v1.12 panics
// when the mapping for the machine code is refused, as it is at a worker's
// memory limit: that is the module's doing, an out of memory like any
// other, so it is recovered as one.
func (e *engine) compileLocked(ctx context.Context, name string, wasm []byte) (compiled wazero.CompiledModule, err error) {
	unlock := e.lockCompile(wasm)
	defer unlock()
	defer func() {
		if v := recover(); v != nil {
			perr, ok := v.(error)
			if !ok || !errors.Is(perr, syscall.ENOMEM) {
				panic(v)
			}
			compiled, err = nil, perr
		}
		if err != nil {
			err = e.compileError(name, err)
		}
	}()
	return e.rt.CompileModule(ctx, wasm)
}

// compileError is the load error of a compilation that failed: the module
// is not wasm wazero can compile, or compiling it took more memory than
// the process may have.
func (e *engine) compileError(name string, err error) *Error {
	// wazero's cache reports a refused mapping as text only.
	if !errors.Is(err, syscall.ENOMEM) && !strings.Contains(err.Error(), syscall.ENOMEM.Error()) {
		return &Error{Plugin: name, Kind: ErrNotWasm, Detail: "compile", Err: err}
	}
	detail := "compile: memory for the machine code refused"
	if !e.checked { // in a worker, under its limit
		detail += fmt.Sprintf(" at the plugin worker's memory limit of %d MiB", e.limits.workerMemoryBytes()>>20)
	}
	return &Error{Plugin: name, Kind: ErrOutOfMemory, Detail: detail, Err: err}
}

// compileBounded compiles wasm in the background and waits for it until the
// compile timeout or the end of ctx. wazero's compiler checks no context
// and a goroutine cannot be killed, so one that is given up on runs to its
// end and then frees what it compiled; only a worker's compilation can be
// cut short (IsolationProcess).
func (e *engine) compileBounded(ctx context.Context, name string, wasm []byte) (wazero.CompiledModule, error) {
	type result struct {
		compiled wazero.CompiledModule
		err      error
	}
	if !e.compileStarted() {
		return nil, &Error{Plugin: name, Kind: ErrClosed}
	}
	done := make(chan result)
	abandoned := make(chan struct{})
	go func() {
		defer e.compileEnded()
		compiled, err := e.compileLocked(context.WithoutCancel(ctx), name, wasm)
		select {
		case done <- result{compiled, err}:
		case <-abandoned:
			if err == nil {
				compiled.Close(context.Background())
			}
		}
	}()
	timer := time.NewTimer(e.limits.compileTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.compiled, r.err
	case <-timer.C:
		close(abandoned)
		return nil, &Error{Plugin: name, Kind: ErrTimeout,
			Detail: fmt.Sprintf("compile: not done after %s, the compile timeout; it runs on in the background", e.limits.compileTimeout)}
	case <-ctx.Done():
		close(abandoned)
		return nil, deadlineError(name, e.limits.compileTimeout, ctx.Err())
	}
}

func (m *engineModule) close(ctx context.Context) error { return m.compiled.Close(ctx) }

// checkShape checks exports and imports before anything runs.
func (m *engineModule) checkShape() error {
	exports := m.compiled.ExportedFunctions()
	for name := range exports {
		m.info.Exports = append(m.info.Exports, name)
	}
	for name := range m.compiled.ExportedMemories() {
		m.info.Exports = append(m.info.Exports, name)
	}
	sort.Strings(m.info.Exports)
	for _, f := range m.compiled.ImportedFunctions() {
		mod, fn, _ := f.Import()
		m.info.Imports = append(m.info.Imports, mod+"."+fn)
	}
	for _, mem := range m.compiled.ImportedMemories() {
		mod, name, _ := mem.Import()
		m.info.Imports = append(m.info.Imports, mod+"."+name)
	}
	mem, ok := m.compiled.ExportedMemories()["memory"]
	if !ok {
		return &Error{Plugin: m.name, Kind: ErrABIMismatch, Detail: "the module exports no memory named \"memory\""}
	}
	if err := checkMemory(m.name, mem, m.e.limits); err != nil {
		return err
	}
	check := func(want exportSignature, required bool) error {
		f, ok := exports[want.name]
		if !ok {
			if !required {
				return nil
			}
			return &Error{Plugin: m.name, Kind: ErrABIMismatch, Detail: fmt.Sprintf("missing export %s", want.name)}
		}
		if !sameTypes(f.ParamTypes(), want.params) || !sameTypes(f.ResultTypes(), want.results) {
			return &Error{Plugin: m.name, Kind: ErrABIMismatch, Detail: fmt.Sprintf("export %s has signature %s, want %s",
				want.name, signature(f.ParamTypes(), f.ResultTypes()), signature(want.params, want.results))}
		}
		return nil
	}
	for _, want := range requiredExports() {
		if err := check(want, true); err != nil {
			return err
		}
	}
	for _, want := range optionalExports() {
		if err := check(want, false); err != nil {
			return err
		}
	}
	// Imports are held to what the host's modules export, so that an
	// unknown function, a WASI one included, or a known one with another
	// signature is an ABI mismatch now rather than a failed instantiation
	// later.
	for _, f := range m.compiled.ImportedFunctions() {
		mod, fn, _ := f.Import()
		host, ok := m.e.provided[importName{mod, fn}]
		if !ok {
			return &Error{Plugin: m.name, Kind: ErrABIMismatch,
				Detail: fmt.Sprintf("imports %s.%s, which the host does not provide", mod, fn)}
		}
		if !sameTypes(f.ParamTypes(), host.ParamTypes()) || !sameTypes(f.ResultTypes(), host.ResultTypes()) {
			return &Error{Plugin: m.name, Kind: ErrABIMismatch, Detail: fmt.Sprintf("import %s.%s has signature %s, the host's is %s",
				mod, fn, signature(f.ParamTypes(), f.ResultTypes()), signature(host.ParamTypes(), host.ResultTypes()))}
		}
	}
	if len(m.compiled.ImportedMemories()) > 0 {
		return &Error{Plugin: m.name, Kind: ErrABIMismatch, Detail: "the module imports a memory; it must define and export its own"}
	}
	return nil
}

func sameTypes(a, b []api.ValueType) bool {
	return string(a) == string(b)
}

func signature(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("(%s) -> (%s)", names(params), names(results))
}

// instantiate starts a new instance under the call deadline, so that a start
// section or _initialize that never returns is cut like any other call.
func (m *engineModule) instantiate(ctx context.Context) (*instance, error) {
	io := newInstanceIO()
	cs := &callState{sink: m.sink}
	io.begin(cs, 0)
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(exportInit).
		WithStdout(&io.stdout).
		WithStderr(&io.stderr).
		WithRandSource(&io.rand).
		WithNanotime(io.nanotime, 1).
		WithWalltime(io.walltime, 1)
	ctx = experimental.WithMemoryAllocator(ctx, limitedAllocator{base: m.e.memory, limit: m.e.limits.memoryLimitBytes(), io: io})
	cctx, cancel := m.e.withDeadline(ctx, cs)
	defer cancel()
	mod, err := m.e.rt.InstantiateModule(cctx, m.compiled, cfg)
	io.end()
	if err != nil {
		return nil, m.classify(cctx, "", nil, cs, fmt.Errorf("instantiate: %w", err))
	}
	return &instance{
		mod:        mod,
		alloc:      mod.ExportedFunction(exportAlloc),
		free:       mod.ExportedFunction(exportFree),
		assign:     mod.ExportedFunction(exportAssign),
		describeFn: mod.ExportedFunction(exportDescribe),
		idleFn:     mod.ExportedFunction(exportIdle),
		io:         io,
	}, nil
}

// describe reads the version and description from a fresh instance into
// m.info, and returns the encoded description.
func (m *engineModule) describe(ctx context.Context, inst *instance) ([]byte, error) {
	cs := &callState{sink: m.sink}
	inst.io.begin(cs, 0)
	defer inst.io.end()
	cctx, cancel := m.e.withDeadline(ctx, cs)
	defer cancel()
	res, err := inst.mod.ExportedFunction(exportVersion).Call(cctx)
	if err != nil {
		return nil, m.classify(cctx, "", inst, cs, fmt.Errorf("%s: %w", exportVersion, err))
	}
	m.info.ABIVersion = int32(res[0])
	if m.info.ABIVersion != abi.Version {
		return nil, &Error{Plugin: m.name, Kind: ErrABIMismatch,
			Detail: fmt.Sprintf("the module speaks ABI version %d, this host speaks %d", m.info.ABIVersion, abi.Version)}
	}
	res, err = inst.describeFn.Call(cctx)
	if err != nil {
		return nil, m.classify(cctx, "", inst, cs, fmt.Errorf("%s: %w", exportDescribe, err))
	}
	b, err := readPacked(inst.mod.Memory(), res[0], m.e.limits.maxOutputBytes)
	if err != nil {
		return nil, &Error{Plugin: m.name, Kind: ErrABIMismatch, Detail: exportDescribe, Err: err}
	}
	d, err := parseDescription(b)
	if err != nil {
		return nil, describeError(m.name, err)
	}
	m.info.Assignors = d.Assignors
	return append([]byte(nil), b...), nil
}

// descriptionError marks a description that decoded but breaks a rule, so
// that its message reads "description: ..." as before.
type descriptionError struct{ err error }

func (e descriptionError) Error() string { return e.err.Error() }

// parseDescription decodes and checks a description.
func parseDescription(b []byte) (*abi.Description, error) {
	d, err := abi.DecodeDescription(b)
	if err != nil {
		return nil, err
	}
	if err := checkDescription(d); err != nil {
		return nil, descriptionError{err}
	}
	return d, nil
}

// describeError turns a parseDescription error into the load error.
func describeError(name string, err error) *Error {
	var de descriptionError
	if errors.As(err, &de) {
		return &Error{Plugin: name, Kind: ErrABIMismatch, Detail: "description: " + de.Error()}
	}
	return &Error{Plugin: name, Kind: ErrABIMismatch, Detail: exportDescribe, Err: err}
}

// call performs one assignment on inst: alloc, write, assign, read, free. It
// hands use a view of the guest's response, valid only during use, and
// returns the guest's memory size. A response that cannot be read (outside
// memory, too large) is an ErrInvalidOutput *Error, returned after free.
func (m *engineModule) call(ctx context.Context, inst *instance, cs *callState, req []byte, seed uint64, assignor string, use func([]byte)) (uint64, error) {
	lim := m.e.limits
	inst.io.begin(cs, seed)
	defer inst.io.end()
	cctx, cancel := m.e.withDeadline(ctx, cs)
	defer cancel()

	size := uint64(len(req))
	res, err := inst.alloc.Call(cctx, size)
	if err != nil {
		return 0, m.classify(cctx, assignor, inst, cs, fmt.Errorf("%s: %w", exportAlloc, err))
	}
	ptr := uint32(res[0])
	if ptr == 0 {
		return 0, &Error{Plugin: m.name, Kind: ErrOutOfMemory, Detail: fmt.Sprintf("%s(%d) returned 0", exportAlloc, size)}
	}
	mem := inst.mod.Memory()
	if !mem.Write(ptr, req) {
		return 0, &Error{Plugin: m.name, Kind: ErrABIMismatch,
			Detail: fmt.Sprintf("%s(%d) returned %#x, outside its memory", exportAlloc, size, ptr)}
	}
	res, err = inst.assign.Call(cctx, uint64(ptr), size)
	if err != nil {
		return 0, m.classify(cctx, assignor, inst, cs, fmt.Errorf("%s: %w", exportAssign, err))
	}
	memBytes := uint64(mem.Size())
	out, readErr := readPacked(mem, res[0], lim.maxOutputBytes)
	if readErr == nil {
		use(out)
	}
	// The request buffer is freed whatever the guest answered: a guest that
	// keeps one buffer would otherwise fail every later call.
	if _, err := inst.free.Call(cctx, uint64(ptr), size); err != nil {
		return memBytes, m.classify(cctx, assignor, inst, cs, fmt.Errorf("%s: %w", exportFree, err))
	}
	if readErr != nil {
		rule := RuleMalformed
		if int64(uint32(res[0])) > int64(lim.maxOutputBytes) {
			rule = RuleOutputSize
		}
		return memBytes, &Error{Plugin: m.name, Kind: ErrInvalidOutput, Rule: rule, Err: readErr}
	}
	return memBytes, nil
}

// idle calls the guest's idle export on inst, under the call deadline, so
// that the guest can do its housekeeping between calls (sdk/ABI.md). The
// caller has checked that inst has one. Its randomness is seeded with 0: the
// next call resets it anyway. It returns the number of log lines dropped,
// and an error classified as for a call, after which inst must be
// discarded.
func (m *engineModule) idle(ctx context.Context, inst *instance) (dropped int, err error) {
	cs := &callState{sink: m.sink}
	inst.io.begin(cs, 0)
	defer func() {
		dropped = cs.dropped
		inst.io.end()
	}()
	cctx, cancel := m.e.withDeadline(ctx, cs)
	defer cancel()
	if _, err := inst.idleFn.Call(cctx); err != nil {
		return 0, m.classify(cctx, "", inst, cs, fmt.Errorf("%s: %w", exportIdle, err))
	}
	return 0, nil
}

// classify turns a wazero error into an *Error of the right kind.
func (m *engineModule) classify(ctx context.Context, assignor string, inst *instance, cs *callState, err error) error {
	lim := m.e.limits
	e := &Error{Plugin: m.name, Assignor: assignor, Err: err}
	var exit *sys.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded:
		e.Kind, e.Err = ErrTimeout, nil
		e.Detail = fmt.Sprintf("stopped after %s", lim.timeout)
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeContextCanceled:
		e.Kind, e.Err = ErrTimeout, context.Canceled
		e.Detail = "canceled"
	case cs.growRefused:
		e.Kind = ErrOutOfMemory
		e.Detail = fmt.Sprintf("memory.grow refused at the %d MiB limit", lim.memoryPages()/16)
	case strings.Contains(cs.lastWords(), "out of memory"):
		e.Kind = ErrOutOfMemory
	case inst != nil && !inst.mod.IsClosed() && uint64(inst.mod.Memory().Size())+2*65536 > uint64(lim.memoryPages())*65536:
		e.Kind = ErrOutOfMemory
		e.Detail = fmt.Sprintf("memory at the %d MiB limit", lim.memoryLimitMB)
	case m.e.checked && ctx.Err() == context.DeadlineExceeded:
		e.Kind, e.Err = ErrTimeout, nil
		e.Detail = fmt.Sprintf("stopped after %s", lim.timeout)
	default:
		e.Kind = ErrTrap
	}
	if words := cs.lastWords(); words != "" && e.Kind != ErrTimeout {
		e.Detail = strings.TrimPrefix(e.Detail+"; guest said: "+words, "; ")
	}
	return e
}

// keepsInstance says whether an instance may serve again after err: only
// when the guest returned normally, with a bad or error response.
func keepsInstance(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Kind == ErrInvalidOutput || e.Kind == ErrAssignorFailed)
}

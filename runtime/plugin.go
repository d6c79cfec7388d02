package wasmruntime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Names of the ABI's exports.
const (
	exportVersion  = "wasmassign_abi_version"
	exportAlloc    = "wasmassign_alloc"
	exportFree     = "wasmassign_free"
	exportDescribe = "wasmassign_describe"
	exportAssign   = "wasmassign_assign"
	exportInit     = "_initialize"
)

// requiredExports lists the ABI's function exports with their signatures.
func requiredExports() []exportSignature {
	i32, i64 := api.ValueTypeI32, api.ValueTypeI64
	return []exportSignature{
		{exportVersion, nil, []api.ValueType{i32}},
		{exportAlloc, []api.ValueType{i32}, []api.ValueType{i32}},
		{exportFree, []api.ValueType{i32, i32}, nil},
		{exportDescribe, nil, []api.ValueType{i64}},
		{exportAssign, []api.ValueType{i32, i32}, []api.ValueType{i64}},
	}
}

// exportSignature is what one required export must look like.
type exportSignature struct {
	name            string
	params, results []api.ValueType
}

// Plugin is one loaded module. It is safe for concurrent use: each call takes
// an instance from the plugin's pool, or starts a new one.
type Plugin struct {
	name     string
	host     *Host
	compiled wazero.CompiledModule
	info     ModuleInfo
	sink     *logSink
	pool     chan *instance
	closed   atomic.Bool
	// maxMemory is the largest linear memory seen after a call, in bytes.
	maxMemory atomic.Uint64
}

// ModuleInfo is what inspecting a module shows.
type ModuleInfo struct {
	ABIVersion  int32
	Assignors   []abi.AssignorInfo
	Imports     []string // "module.name"
	Exports     []string
	SizeBytes   int
	CompileTime time.Duration
}

// instance is one instantiation of a plugin. It is used by one goroutine at a
// time and discarded after any failure, since a trapped guest's state cannot
// be trusted.
type instance struct {
	mod                             api.Module
	alloc, free, assign, describeFn api.Function
	io                              *instanceIO
	buf                             []byte // reused request encoding
}

// Load compiles a module and checks that it speaks the ABI: its exports and
// imports, its version and its description. name identifies the plugin in
// errors and logs; for files it is the path.
func (h *Host) Load(ctx context.Context, name string, wasm []byte) (*Plugin, error) {
	fail := func(kind error, err error, format string, args ...any) (*Plugin, error) {
		return nil, &Error{Plugin: name, Kind: kind, Detail: fmt.Sprintf(format, args...), Err: err}
	}
	lim := h.cfg.limits
	if len(wasm) > lim.maxModuleBytes {
		return fail(ErrModuleTooLarge, nil, "%d bytes, the limit is %d", len(wasm), lim.maxModuleBytes)
	}
	if !bytes.HasPrefix(wasm, []byte("\x00asm")) {
		return fail(ErrNotWasm, nil, "the file does not start with the wasm magic bytes")
	}
	start := time.Now()
	compiled, err := h.rt.CompileModule(ctx, wasm)
	if err != nil {
		return fail(ErrNotWasm, err, "compile")
	}
	p := &Plugin{
		name:     name,
		host:     h,
		compiled: compiled,
		sink:     newLogSink(h.cfg.logger.With("plugin", filepath.Base(name)), lim),
		pool:     make(chan *instance, max(h.cfg.poolSize, 1)),
		info:     ModuleInfo{SizeBytes: len(wasm), CompileTime: time.Since(start)},
	}
	if err := p.checkShape(); err != nil {
		compiled.Close(ctx)
		return nil, err
	}
	inst, err := p.instantiate(ctx)
	if err != nil {
		compiled.Close(ctx)
		return nil, err
	}
	if err := p.describe(ctx, inst); err != nil {
		inst.mod.Close(ctx)
		compiled.Close(ctx)
		return nil, err
	}
	p.release(ctx, inst)
	return p, nil
}

// checkShape checks exports and imports before anything runs.
func (p *Plugin) checkShape() error {
	exports := p.compiled.ExportedFunctions()
	for name := range exports {
		p.info.Exports = append(p.info.Exports, name)
	}
	for name := range p.compiled.ExportedMemories() {
		p.info.Exports = append(p.info.Exports, name)
	}
	sort.Strings(p.info.Exports)
	for _, f := range p.compiled.ImportedFunctions() {
		mod, fn, _ := f.Import()
		p.info.Imports = append(p.info.Imports, mod+"."+fn)
	}
	for _, m := range p.compiled.ImportedMemories() {
		mod, name, _ := m.Import()
		p.info.Imports = append(p.info.Imports, mod+"."+name)
	}
	if _, ok := p.compiled.ExportedMemories()["memory"]; !ok {
		return &Error{Plugin: p.name, Kind: ErrABIMismatch, Detail: "the module exports no memory named \"memory\""}
	}
	for _, want := range requiredExports() {
		f, ok := exports[want.name]
		if !ok {
			return &Error{Plugin: p.name, Kind: ErrABIMismatch, Detail: fmt.Sprintf("missing export %s", want.name)}
		}
		if !sameTypes(f.ParamTypes(), want.params) || !sameTypes(f.ResultTypes(), want.results) {
			return &Error{Plugin: p.name, Kind: ErrABIMismatch, Detail: fmt.Sprintf("export %s has signature %s, want %s",
				want.name, signature(f.ParamTypes(), f.ResultTypes()), signature(want.params, want.results))}
		}
	}
	for _, f := range p.compiled.ImportedFunctions() {
		mod, fn, _ := f.Import()
		switch {
		case mod == importWASI:
		case mod == importHost && fn == "log":
		case mod == importEnv && fn == "abort":
		default:
			return &Error{Plugin: p.name, Kind: ErrABIMismatch,
				Detail: fmt.Sprintf("imports %s.%s, which the host does not provide", mod, fn)}
		}
	}
	if len(p.compiled.ImportedMemories()) > 0 {
		return &Error{Plugin: p.name, Kind: ErrABIMismatch, Detail: "the module imports a memory; it must define and export its own"}
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
func (p *Plugin) instantiate(ctx context.Context) (*instance, error) {
	io := newInstanceIO()
	cs := &callState{sink: p.sink}
	io.begin(cs, 0)
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(exportInit).
		WithStdout(&io.stdout).
		WithStderr(&io.stderr).
		WithRandSource(&io.rand).
		WithNanotime(io.nanotime, 1).
		WithWalltime(io.walltime, 1)
	if p.host.memory != nil {
		ctx = experimental.WithMemoryAllocator(ctx, p.host.memory)
	}
	cctx, cancel := context.WithTimeout(context.WithValue(ctx, callKey{}, cs), p.host.cfg.limits.timeout)
	defer cancel()
	mod, err := p.host.rt.InstantiateModule(cctx, p.compiled, cfg)
	io.end()
	if err != nil {
		return nil, p.classify(cctx, "", nil, cs, fmt.Errorf("instantiate: %w", err))
	}
	return &instance{
		mod:        mod,
		alloc:      mod.ExportedFunction(exportAlloc),
		free:       mod.ExportedFunction(exportFree),
		assign:     mod.ExportedFunction(exportAssign),
		describeFn: mod.ExportedFunction(exportDescribe),
		io:         io,
	}, nil
}

// describe reads the version and description from a fresh instance.
func (p *Plugin) describe(ctx context.Context, inst *instance) error {
	cs := &callState{sink: p.sink}
	inst.io.begin(cs, 0)
	defer inst.io.end()
	cctx, cancel := context.WithTimeout(context.WithValue(ctx, callKey{}, cs), p.host.cfg.limits.timeout)
	defer cancel()
	res, err := inst.mod.ExportedFunction(exportVersion).Call(cctx)
	if err != nil {
		return p.classify(cctx, "", inst, cs, fmt.Errorf("%s: %w", exportVersion, err))
	}
	p.info.ABIVersion = int32(res[0])
	if p.info.ABIVersion != abi.Version {
		return &Error{Plugin: p.name, Kind: ErrABIMismatch,
			Detail: fmt.Sprintf("the module speaks ABI version %d, this host speaks %d", p.info.ABIVersion, abi.Version)}
	}
	res, err = inst.describeFn.Call(cctx)
	if err != nil {
		return p.classify(cctx, "", inst, cs, fmt.Errorf("%s: %w", exportDescribe, err))
	}
	b, err := readPacked(inst.mod.Memory(), res[0], p.host.cfg.limits.maxOutputBytes)
	if err != nil {
		return &Error{Plugin: p.name, Kind: ErrABIMismatch, Detail: exportDescribe, Err: err}
	}
	d, err := abi.DecodeDescription(b)
	if err != nil {
		return &Error{Plugin: p.name, Kind: ErrABIMismatch, Detail: exportDescribe, Err: err}
	}
	if err := checkDescription(d); err != nil {
		return &Error{Plugin: p.name, Kind: ErrABIMismatch, Detail: "description: " + err.Error()}
	}
	p.info.Assignors = d.Assignors
	return nil
}

func checkDescription(d *abi.Description) error {
	if len(d.Assignors) == 0 {
		return errors.New("no assignors")
	}
	seen := make(map[string]bool)
	for i, a := range d.Assignors {
		switch {
		case a.Name == "":
			return fmt.Errorf("assignor %d has no name", i)
		case seen[a.Name]:
			return fmt.Errorf("assignor %q listed twice", a.Name)
		case len(a.Protocols) == 0:
			return fmt.Errorf("assignor %q serves no protocol", a.Name)
		case a.Modes == 0:
			return fmt.Errorf("assignor %q supports neither eager nor cooperative", a.Name)
		}
		for _, proto := range a.Protocols {
			if proto == "" {
				return fmt.Errorf("assignor %q lists an empty protocol name", a.Name)
			}
		}
		seen[a.Name] = true
	}
	return nil
}

// readPacked returns a view of a packed (ptr<<32 | len) guest buffer. The view
// is valid until the next call into the guest.
func readPacked(mem api.Memory, packed uint64, limit int) ([]byte, error) {
	ptr, n := uint32(packed>>32), uint32(packed)
	if n == 0 {
		return nil, errors.New("returned an empty buffer")
	}
	if int64(n) > int64(limit) {
		return nil, fmt.Errorf("returned %d bytes, the limit is %d", n, limit)
	}
	b, ok := mem.Read(ptr, n)
	if !ok {
		return nil, fmt.Errorf("returned %d bytes at %#x, outside its %d-byte memory", n, ptr, mem.Size())
	}
	return b, nil
}

// Name returns the plugin's name: its file path, or builtin:NAME.
func (p *Plugin) Name() string { return p.name }

// Info returns what the module declared about itself, and its size and
// compile time.
func (p *Plugin) Info() ModuleInfo { return p.info }

// Assignor returns the description of one of the module's assignors.
func (p *Plugin) Assignor(name string) (abi.AssignorInfo, bool) {
	for _, a := range p.info.Assignors {
		if a.Name == name {
			return a, true
		}
	}
	return abi.AssignorInfo{}, false
}

// MaxMemoryBytes returns the largest linear memory any instance of the
// plugin has had after a call: the plugin's peak memory.
func (p *Plugin) MaxMemoryBytes() uint64 { return p.maxMemory.Load() }

// Close discards the plugin's instances and compiled code.
func (p *Plugin) Close(ctx context.Context) error {
	if p.closed.Swap(true) {
		return nil
	}
	for {
		select {
		case inst := <-p.pool:
			inst.mod.Close(ctx)
		default:
			return p.compiled.Close(ctx)
		}
	}
}

func (p *Plugin) acquire(ctx context.Context) (*instance, error) {
	select {
	case inst := <-p.pool:
		return inst, nil
	default:
		return p.instantiate(ctx)
	}
}

func (p *Plugin) release(ctx context.Context, inst *instance) {
	if p.closed.Load() {
		inst.mod.Close(ctx)
		return
	}
	select {
	case p.pool <- inst:
	default:
		inst.mod.Close(ctx)
	}
}

// Assign runs the named assignor over req and returns its validated
// response. Any failure is an *Error; the caller falls back as it sees fit.
// req is not modified: its Assignor field is overridden by assignor, and a
// zero Seed is replaced by one derived from the request.
func (p *Plugin) Assign(ctx context.Context, assignor string, req *abi.Request) (*abi.Response, error) {
	info, ok := p.Assignor(assignor)
	if !ok {
		return nil, &Error{Plugin: p.name, Assignor: assignor, Kind: ErrUnknownAssignor,
			Detail: fmt.Sprintf("the module provides %s", strings.Join(p.assignorNames(), ", "))}
	}
	if p.closed.Load() {
		return nil, &Error{Plugin: p.name, Assignor: assignor, Kind: ErrClosed}
	}
	r := *req
	r.Assignor = assignor
	if r.Seed == 0 {
		r.Seed = Seed(&r)
	}
	inst, err := p.acquire(ctx)
	if err != nil {
		setAssignor(err, assignor)
		return nil, err
	}
	resp, err := p.call(ctx, inst, &r)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Kind != ErrInvalidOutput && e.Kind != ErrAssignorFailed {
			inst.mod.Close(ctx) // trapped, timed out or out of memory: never reuse
		} else {
			p.release(ctx, inst)
		}
		setAssignor(err, assignor)
		return nil, err
	}
	p.release(ctx, inst)
	if err := Validate(&r, resp, info); err != nil {
		e := err.(*Error)
		e.Plugin, e.Assignor = p.name, assignor
		return nil, e
	}
	return resp, nil
}

func setAssignor(err error, assignor string) {
	var e *Error
	if errors.As(err, &e) && e.Assignor == "" {
		e.Assignor = assignor
	}
}

func (p *Plugin) assignorNames() []string {
	names := make([]string, len(p.info.Assignors))
	for i, a := range p.info.Assignors {
		names[i] = a.Name
	}
	return names
}

// call performs one assignment on inst: alloc, write, assign, read, free.
func (p *Plugin) call(ctx context.Context, inst *instance, req *abi.Request) (*abi.Response, error) {
	lim := p.host.cfg.limits
	inst.buf = abi.AppendRequest(inst.buf[:0], req)
	cs := &callState{sink: p.sink}
	inst.io.begin(cs, req.Seed)
	defer inst.io.end()
	cctx, cancel := context.WithTimeout(context.WithValue(ctx, callKey{}, cs), lim.timeout)
	defer cancel()

	size := uint64(len(inst.buf))
	res, err := inst.alloc.Call(cctx, size)
	if err != nil {
		return nil, p.classify(cctx, req.Assignor, inst, cs, fmt.Errorf("%s: %w", exportAlloc, err))
	}
	ptr := uint32(res[0])
	if ptr == 0 {
		return nil, &Error{Plugin: p.name, Kind: ErrOutOfMemory, Detail: fmt.Sprintf("%s(%d) returned 0", exportAlloc, size)}
	}
	mem := inst.mod.Memory()
	if !mem.Write(ptr, inst.buf) {
		return nil, &Error{Plugin: p.name, Kind: ErrABIMismatch,
			Detail: fmt.Sprintf("%s(%d) returned %#x, outside its memory", exportAlloc, size, ptr)}
	}
	res, err = inst.assign.Call(cctx, uint64(ptr), size)
	if err != nil {
		return nil, p.classify(cctx, req.Assignor, inst, cs, fmt.Errorf("%s: %w", exportAssign, err))
	}
	if m := uint64(mem.Size()); m > p.maxMemory.Load() {
		p.maxMemory.Store(m) // racy max is fine: it only ever reports a size some instance had
	}
	resp, decodeErr := decodeResponse(mem, res[0], lim.maxOutputBytes)
	// The request buffer is freed whatever the guest answered: a guest that
	// keeps one buffer would otherwise fail every later call.
	if _, err := inst.free.Call(cctx, uint64(ptr), size); err != nil {
		return nil, p.classify(cctx, req.Assignor, inst, cs, fmt.Errorf("%s: %w", exportFree, err))
	}
	if decodeErr != nil {
		decodeErr.Plugin = p.name
		return nil, decodeErr
	}
	if resp.Error != "" {
		return nil, &Error{Plugin: p.name, Kind: ErrAssignorFailed, Detail: resp.Error}
	}
	return resp, nil
}

// decodeResponse reads and decodes the packed response buffer. Decoding
// copies everything it keeps, so the view of guest memory may go stale after.
func decodeResponse(mem api.Memory, packed uint64, limit int) (*abi.Response, *Error) {
	out, err := readPacked(mem, packed, limit)
	if err != nil {
		rule := RuleMalformed
		if int64(uint32(packed)) > int64(limit) {
			rule = RuleOutputSize
		}
		return nil, &Error{Kind: ErrInvalidOutput, Rule: rule, Err: err}
	}
	resp, err := abi.DecodeResponse(out)
	if err != nil {
		return nil, &Error{Kind: ErrInvalidOutput, Rule: RuleMalformed, Err: err}
	}
	return resp, nil
}

// classify turns a wazero error into an *Error of the right kind.
func (p *Plugin) classify(ctx context.Context, assignor string, inst *instance, cs *callState, err error) error {
	e := &Error{Plugin: p.name, Assignor: assignor, Err: err}
	var exit *sys.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded:
		e.Kind, e.Err = ErrTimeout, nil
		e.Detail = fmt.Sprintf("stopped after %s", p.host.cfg.limits.timeout)
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeContextCanceled:
		e.Kind, e.Err = ErrTimeout, context.Canceled
		e.Detail = "canceled"
	case strings.Contains(cs.lastWords(), "out of memory"):
		e.Kind = ErrOutOfMemory
	case inst != nil && !inst.mod.IsClosed() && uint64(inst.mod.Memory().Size())+2*65536 > uint64(p.host.cfg.limits.memoryPages())*65536:
		e.Kind = ErrOutOfMemory
		e.Detail = fmt.Sprintf("memory at the %d MiB limit", p.host.cfg.limits.memoryLimitMB)
	case ctx.Err() == context.DeadlineExceeded:
		e.Kind, e.Err = ErrTimeout, nil
		e.Detail = fmt.Sprintf("stopped after %s", p.host.cfg.limits.timeout)
	default:
		e.Kind = ErrTrap
	}
	if words := cs.lastWords(); words != "" && e.Kind != ErrTimeout {
		e.Detail = strings.TrimPrefix(e.Detail+"; guest said: "+words, "; ")
	}
	return e
}

// Seed derives a request's seed from the fields that identify a rebalance:
// group, generation, protocol, assignor, config and member ids. Equal
// requests get equal seeds; hashing the whole request would cost more than
// small assignments themselves.
func Seed(r *abi.Request) uint64 {
	h := fnv.New64a()
	write := func(s string) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	write(r.GroupID)
	write(fmt.Sprint(r.Generation))
	write(r.Protocol)
	write(r.Assignor)
	keys := make([]string, 0, len(r.Config))
	for k := range r.Config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		write(k)
		write(r.Config[k])
	}
	for i := range r.Members {
		write(r.Members[i].MemberID)
	}
	if s := h.Sum64(); s != 0 {
		return s
	}
	return 1
}

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

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Names of the ABI's exports.
const (
	exportVersion  = "wasmassign_abi_version"
	exportAlloc    = "wasmassign_alloc"
	exportFree     = "wasmassign_free"
	exportDescribe = "wasmassign_describe"
	exportAssign   = "wasmassign_assign"
	exportIdle     = "wasmassign_idle"
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

// optionalExports lists the ABI's function exports a module may leave out,
// with the signature they must have when present.
func optionalExports() []exportSignature {
	return []exportSignature{
		{exportIdle, nil, nil},
	}
}

// exportSignature is what one ABI export must look like.
type exportSignature struct {
	name            string
	params, results []api.ValueType
}

// Plugin is one loaded module. It is safe for concurrent use: each call takes
// an instance from the plugin's pool, or starts a new one. Depending on the
// host's Isolation, an instance lives in this process or in a worker
// process of its own.
type Plugin struct {
	name   string
	host   *Host
	info   ModuleInfo
	sink   *logSink
	run    runner
	closed atomic.Bool
	// maxMemory is the largest linear memory seen after a call, in bytes.
	maxMemory atomic.Uint64
}

// runner is where a plugin's instances live: in this process, or in worker
// processes.
type runner interface {
	// call runs one assignment of req, whose Assignor and Seed are set, and
	// returns the decoded response (not yet validated) and the guest's
	// memory size after the call, when known.
	call(ctx context.Context, req *abi.Request) (*abi.Response, uint64, error)
	// close discards every instance; calls in progress finish first.
	close(ctx context.Context) error
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

// Load compiles a module and checks that it speaks the ABI: its exports and
// imports, its version and its description. name identifies the plugin in
// errors and logs; for files it is the path.
func (h *Host) Load(ctx context.Context, name string, wasm []byte) (*Plugin, error) {
	fail := func(kind error, format string, args ...any) (*Plugin, error) {
		return nil, &Error{Plugin: name, Kind: kind, Detail: fmt.Sprintf(format, args...)}
	}
	lim := h.cfg.limits
	if len(wasm) > lim.maxModuleBytes {
		return fail(ErrModuleTooLarge, "%d bytes, the limit is %d", len(wasm), lim.maxModuleBytes)
	}
	if !bytes.HasPrefix(wasm, []byte("\x00asm")) {
		return fail(ErrNotWasm, "the file does not start with the wasm magic bytes")
	}
	p := &Plugin{
		name: name,
		host: h,
		sink: newLogSink(h.cfg.logger.With("plugin", filepath.Base(name)), lim),
	}
	var err error
	if h.eng != nil {
		p.run, p.info, err = loadInProcess(ctx, h, p, wasm)
	} else {
		p.run, p.info, err = h.procs.load(ctx, p, wasm)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// inProcess runs a plugin's instances in this process, with deadline checks
// compiled into the guest code.
type inProcess struct {
	lifecycle[*instance]
	mod      *engineModule
	skipIdle bool
}

// loadInProcess compiles wasm on the host's engine and describes it from a
// first instance, which it keeps in the pool after its first idle call.
func loadInProcess(ctx context.Context, h *Host, p *Plugin, wasm []byte) (*inProcess, ModuleInfo, error) {
	mod, err := h.eng.compile(ctx, p.name, wasm, p.sink)
	if err != nil {
		return nil, ModuleInfo{}, err
	}
	r := &inProcess{mod: mod, skipIdle: h.cfg.skipIdle}
	// The plugin's own background, so that closing the plugin stops its
	// idle calls at once and waits for them before the module goes.
	r.lifecycle = newLifecycle[*instance](r, p.name, h.pool, newBackground(h.eng.bg), &p.closed)
	fail := func(inst *instance, err error) (*inProcess, ModuleInfo, error) {
		if inst != nil {
			inst.close(ctx)
			r.lost()
		}
		r.drain(func(*instance) {})
		mod.close(ctx)
		return nil, ModuleInfo{}, err
	}
	// The first instance takes its place in the host's pool like any
	// call's.
	inst, err := r.acquire(ctx)
	if err != nil {
		return fail(nil, err)
	}
	if _, err := mod.describe(ctx, inst); err != nil {
		return fail(inst, err)
	}
	// The first idle call runs while loading, where it costs no caller
	// anything; it tells the guest that this host calls idle before its
	// first assignment, and lets it tidy up after its start-up.
	if inst.idleFn != nil && !r.skipIdle {
		if _, err := mod.idle(ctx, inst); err != nil {
			return fail(inst, err)
		}
	}
	r.release(ctx, inst)
	return r, mod.info, nil
}

func (r *inProcess) newInstance(ctx context.Context) (*instance, error) {
	return r.mod.instantiate(ctx)
}

func (r *inProcess) usable(*instance) bool { return true }

func (r *inProcess) discard(ctx context.Context, inst *instance) { inst.close(ctx) }

func (r *inProcess) abandon(inst *instance) { inst.close(context.Background()) }

func (r *inProcess) call(ctx context.Context, req *abi.Request) (*abi.Response, uint64, error) {
	inst, err := r.acquire(ctx)
	if err != nil {
		return nil, 0, err
	}
	inst.buf = abi.AppendRequest(inst.buf[:0], req)
	cs := &callState{sink: r.mod.sink}
	var resp *abi.Response
	var decodeErr error
	mem, err := r.mod.call(ctx, inst, cs, inst.buf, req.Seed, req.Assignor, func(out []byte) {
		resp, decodeErr = decodeOutput(r.mod.name, out)
	})
	if err == nil {
		err = decodeErr
	}
	switch {
	case err != nil && !keepsInstance(err):
		inst.close(ctx) // trapped, timed out or out of memory: never reuse
		r.lost()
	case inst.idleFn != nil && !r.skipIdle:
		r.releaseAfterIdle(inst, func(ctx context.Context) bool { return r.idleCall(ctx, inst) })
	default:
		r.release(ctx, inst)
	}
	if err != nil {
		return nil, mem, err
	}
	return resp, mem, nil
}

// idleCall runs the guest's idle call on inst, in the background: the
// caller's response has been decoded already. It reports whether inst may
// serve again: an idle call that fails costs the instance, and is logged,
// since no caller is waiting for it.
func (r *inProcess) idleCall(ctx context.Context, inst *instance) bool {
	if _, err := r.mod.idle(ctx, inst); err != nil {
		inst.close(context.Background())
		if !r.closed.Load() && !r.mod.e.bg.isClosing() {
			r.mod.sink.logger.Warn("plugin idle call failed; instance discarded", "err", err)
		}
		return false
	}
	return true
}

func (r *inProcess) close(ctx context.Context) error {
	r.bg.close()
	r.bg.wait()
	r.drain(func(inst *instance) { inst.close(ctx) })
	return r.mod.close(ctx)
}

// decodeOutput decodes a response the guest returned; an error response
// becomes ErrAssignorFailed, its message cut as a guest log line is, since
// callers log it on every failing call. Decoding copies everything it keeps.
func decodeOutput(name string, out []byte) (*abi.Response, error) {
	resp, err := abi.DecodeResponse(out)
	if err != nil {
		return nil, &Error{Plugin: name, Kind: ErrInvalidOutput, Rule: RuleMalformed, Err: err}
	}
	if resp.Error != "" {
		return nil, &Error{Plugin: name, Kind: ErrAssignorFailed, Detail: cutLine(resp.Error)}
	}
	return resp, nil
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

// Close discards the plugin's instances and compiled code. Calls in
// progress finish; later calls fail with ErrClosed.
func (p *Plugin) Close(ctx context.Context) error {
	if p.closed.Swap(true) {
		return nil
	}
	return p.run.close(ctx)
}

// Assign runs the named assignor over req and returns its validated
// response. Any failure is an *Error; the caller falls back as it sees fit.
// req is not modified: its Assignor field is overridden by assignor, and a
// zero Seed is replaced by one derived from the request.
//
// The grouped layout (sdk/ABI.md section 7) is negotiated here: an assignor
// that declares it gets req grouped (abi.Request.Grouped) and any other gets
// it plain (abi.Request.Expanded), whichever layout the caller used. The
// response comes back in the caller's layout: a caller whose req has
// TopicLists may get entries over topic lists, any other gets plain
// entries only.
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
	// The grouped layout is negotiated: an assignor that declares it gets
	// its request grouped, whatever the caller sent, and any other gets it
	// plain. The caller gets back the layout it sent.
	send := r.For(info)
	resp, mem, err := p.run.call(ctx, send)
	if mem > p.maxMemory.Load() {
		p.maxMemory.Store(mem) // racy max is fine: it only ever reports a size some instance had
	}
	if err != nil {
		setAssignor(err, assignor)
		return nil, err
	}
	if resp.TopicLists != nil && !info.Grouped {
		return nil, &Error{Plugin: p.name, Assignor: assignor, Kind: ErrInvalidOutput, Rule: RuleMalformed,
			Detail: "a response in the grouped layout from an assignor that does not declare it"}
	}
	if err := Validate(send, resp, info); err != nil {
		e := err.(*Error)
		e.Plugin, e.Assignor = p.name, assignor
		return nil, e
	}
	return resp.LayoutOf(req), nil
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

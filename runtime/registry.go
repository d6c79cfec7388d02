package wasmruntime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Assignor is one assignor of a loaded plugin, as the registry knows it.
type Assignor struct {
	Info   abi.AssignorInfo
	Plugin *Plugin
	// Builtin is true for assignors that ship inside the binary.
	Builtin bool

	// reg counts this assignor's calls, so that a replaced plugin is closed
	// only after the calls that started on it have finished.
	reg *Registry
}

// Assign runs this assignor; see Plugin.Assign. A call that starts while
// the plugin is still registered finishes on it, even if a new version
// replaces it meanwhile. An Assignor looked up before its plugin was
// replaced and closed runs on the plugin now registered under its name.
func (a *Assignor) Assign(ctx context.Context, req *abi.Request) (*abi.Response, error) {
	if a.reg == nil {
		return a.Plugin.Assign(ctx, a.Info.Name, req)
	}
	p, err := a.reg.acquire(a)
	if err != nil {
		return nil, err
	}
	defer a.reg.release(ctx, p)
	return p.Assign(ctx, a.Info.Name, req)
}

// Registry maps assignor names to loaded plugins: the built-ins, and every
// *.wasm of an operator's plugin directory. A file there may replace a
// built-in of the same name. A Registry is safe for concurrent use.
//
// The registry owns the plugins it holds and counts their references: the
// assignor names pointing at each, and the calls in flight on it. A plugin
// that no name points at any more is closed once its last call returns.
// Built-in plugins are never closed by the registry; the host closes them.
type Registry struct {
	host *Host
	log  *slog.Logger

	mu     sync.RWMutex
	byName map[string]*Assignor
	// builtins holds every built-in assignor, also while a file shadows
	// it, so that it serves again when the file goes.
	builtins map[string]*Assignor
	refs     map[*Plugin]*pluginRef
}

// pluginRef counts what keeps a plugin open.
type pluginRef struct {
	names   int // byName entries pointing at the plugin
	calls   int // Assign calls in flight
	builtin bool
}

// NewRegistry returns an empty registry whose plugins run on h.
func NewRegistry(h *Host) *Registry {
	return &Registry{host: h, log: h.cfg.logger, byName: make(map[string]*Assignor),
		builtins: make(map[string]*Assignor), refs: make(map[*Plugin]*pluginRef)}
}

// LoadBuiltins loads every *.wasm at the top of fsys as a built-in plugin
// named builtin:FILE. Built-ins must not claim the same assignor name twice.
func (r *Registry) LoadBuiltins(ctx context.Context, fsys fs.FS) error {
	names, err := fs.Glob(fsys, "*.wasm")
	if err != nil {
		return fmt.Errorf("built-in plugins: %w", err)
	}
	if len(names) == 0 {
		return errors.New("built-in plugins: none found (build them with `make build`)")
	}
	plugins, err := loadAll(ctx, names, func(name string) (*Plugin, error) {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("built-in plugin %s: %w", name, err)
		}
		return r.host.Load(ctx, "builtin:"+strings.TrimSuffix(path.Base(name), ".wasm"), b)
	})
	if err != nil {
		return err
	}
	loaded := make(map[string]*Assignor)
	for _, p := range plugins {
		if err := collect(loaded, p, true); err != nil {
			closeAll(ctx, plugins)
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for n, a := range loaded {
		a.reg = r
		r.builtins[n] = a
		if old, ok := r.byName[n]; ok && !old.Builtin {
			continue // a file loaded earlier shadows it
		}
		r.setLocked(n, a)
	}
	return nil
}

// LoadDir loads every *.wasm file directly in dir. Two files claiming the
// same assignor name is an error naming both. An assignor that replaces a
// built-in is logged. On error, nothing is added.
func (r *Registry) LoadDir(ctx context.Context, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("plugin directory: %w", err)
	}
	var paths []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".wasm") {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	plugins, err := loadAll(ctx, paths, func(path string) (*Plugin, error) { return r.host.LoadFile(ctx, path) })
	if err != nil {
		return err
	}
	loaded := make(map[string]*Assignor)
	for _, p := range plugins {
		if err := collect(loaded, p, false); err != nil {
			closeAll(ctx, plugins)
			return err
		}
	}
	return r.install(ctx, loaded, plugins)
}

// LoadFile loads one plugin file. Its assignors may replace built-ins, but
// not assignors of another file.
func (r *Registry) LoadFile(ctx context.Context, path string) error {
	p, err := r.host.LoadFile(ctx, path)
	if err != nil {
		return err
	}
	loaded := make(map[string]*Assignor)
	if err := collect(loaded, p, false); err != nil {
		p.Close(ctx)
		return err
	}
	return r.install(ctx, loaded, []*Plugin{p})
}

// loadAll loads every named plugin concurrently: with process isolation each
// load starts a worker, and starting them one after the other would add up
// their start-up times. It returns the plugins in the order of names, or the
// error of the first name that failed, after closing the others.
func loadAll(ctx context.Context, names []string, load func(string) (*Plugin, error)) ([]*Plugin, error) {
	plugins := make([]*Plugin, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { plugins[i], errs[i] = load(name) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			closeAll(ctx, plugins)
			return nil, err
		}
	}
	return plugins, nil
}

func closeAll(ctx context.Context, plugins []*Plugin) {
	for _, p := range plugins {
		if p != nil {
			p.Close(ctx)
		}
	}
}

// install adds loaded assignors, or none of them when one would take the name
// of an assignor that another file already provides.
func (r *Registry) install(ctx context.Context, loaded map[string]*Assignor, plugins []*Plugin) error {
	r.mu.Lock()
	for n, a := range loaded {
		if old, ok := r.byName[n]; ok && !old.Builtin {
			r.mu.Unlock()
			closeAll(ctx, plugins)
			return fmt.Errorf("assignor %q is provided by both %s and %s", n, old.Plugin.Name(), a.Plugin.Name())
		}
	}
	var closing []*Plugin
	for n, a := range loaded {
		if old, ok := r.byName[n]; ok {
			r.log.Info("plugin replaces a built-in assignor", "assignor", n, "plugin", a.Plugin.Name(), "replaced", old.Plugin.Name())
		}
		a.reg = r
		closing = append(closing, r.setLocked(n, a)...)
	}
	r.mu.Unlock()
	closeAll(context.WithoutCancel(ctx), closing)
	return nil
}

// ErrAssignorConflict is returned by Replace when the new version of a file
// claims an assignor name that another file provides.
var ErrAssignorConflict = errors.New("assignor provided by another file")

// Replace installs p, loaded from file, as the file's new version: all of
// p's assignor names switch to it at once. An assignor of the file's
// previous version that p no longer provides disappears (a shadowed
// built-in serves again), unless keep says a group still uses it: then it
// stays on the previous version, and its name is returned in kept. p may
// shadow built-ins, but not the assignors of another file; then nothing
// changes, p is closed and the error wraps ErrAssignorConflict.
//
// The previous version is closed once no name points at it and its calls in
// flight have finished. keep may be nil, and is called with the registry
// locked: it must not call back into it.
func (r *Registry) Replace(ctx context.Context, file string, p *Plugin, keep func(assignor string) bool) (kept []string, err error) {
	loaded := make(map[string]*Assignor)
	if err := collect(loaded, p, false); err != nil {
		p.Close(ctx)
		return nil, err
	}
	r.mu.Lock()
	for n := range loaded {
		if cur, ok := r.byName[n]; ok && !cur.Builtin && cur.Plugin.Name() != file {
			r.mu.Unlock()
			p.Close(ctx)
			return nil, fmt.Errorf("%s: %w: assignor %q is provided by %s", file, ErrAssignorConflict, n, cur.Plugin.Name())
		}
	}
	var closing []*Plugin
	for _, n := range sortedKeys(loaded) {
		a := loaded[n]
		if old, ok := r.byName[n]; ok && old.Builtin {
			r.log.Info("plugin replaces a built-in assignor", "assignor", n, "plugin", file, "replaced", old.Plugin.Name())
		}
		a.reg = r
		closing = append(closing, r.setLocked(n, a)...)
	}
	for _, n := range r.fileNamesLocked(file) {
		if r.byName[n].Plugin == p {
			continue
		}
		if keep != nil && keep(n) {
			kept = append(kept, n)
			continue
		}
		closing = append(closing, r.dropLocked(n)...)
	}
	r.mu.Unlock()
	closeAll(context.WithoutCancel(ctx), closing)
	return kept, nil
}

// Remove takes away the assignors of file, except those keep says a group
// still uses: they stay on the version loaded last, and are returned. A
// built-in the file shadowed serves again. keep may be nil, and is called
// with the registry locked: it must not call back into it.
func (r *Registry) Remove(ctx context.Context, file string, keep func(assignor string) bool) (kept []string) {
	r.mu.Lock()
	var closing []*Plugin
	for _, n := range r.fileNamesLocked(file) {
		if keep != nil && keep(n) {
			kept = append(kept, n)
			continue
		}
		closing = append(closing, r.dropLocked(n)...)
	}
	r.mu.Unlock()
	closeAll(context.WithoutCancel(ctx), closing)
	return kept
}

// fileNamesLocked returns the sorted assignor names that plugins loaded
// from file provide now.
func (r *Registry) fileNamesLocked(file string) []string {
	var names []string
	for n, a := range r.byName {
		if !a.Builtin && a.Plugin.Name() == file {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// setLocked points name at a and returns the plugin that thereby lost its
// last reference, if any, for the caller to close after unlocking.
func (r *Registry) setLocked(name string, a *Assignor) []*Plugin {
	ref := r.refs[a.Plugin]
	if ref == nil {
		ref = &pluginRef{builtin: a.Builtin}
		r.refs[a.Plugin] = ref
	}
	ref.names++
	var closing []*Plugin
	if old, ok := r.byName[name]; ok {
		closing = r.unrefLocked(old.Plugin, func(ref *pluginRef) { ref.names-- })
	}
	r.byName[name] = a
	return closing
}

// dropLocked removes name, putting back the built-in it shadowed, and
// returns the plugin that thereby lost its last reference, if any.
func (r *Registry) dropLocked(name string) []*Plugin {
	old, ok := r.byName[name]
	if !ok {
		return nil
	}
	if b, ok := r.builtins[name]; ok && b != old {
		r.log.Info("built-in assignor serves again", "assignor", name, "replaced", old.Plugin.Name())
		return r.setLocked(name, b)
	}
	delete(r.byName, name)
	return r.unrefLocked(old.Plugin, func(ref *pluginRef) { ref.names-- })
}

// unrefLocked applies dec to p's counts and returns p when nothing
// references it any more and it is not a built-in.
func (r *Registry) unrefLocked(p *Plugin, dec func(*pluginRef)) []*Plugin {
	ref := r.refs[p]
	if ref == nil {
		return nil
	}
	dec(ref)
	if ref.names > 0 || ref.calls > 0 {
		return nil
	}
	delete(r.refs, p)
	if ref.builtin {
		return nil
	}
	return []*Plugin{p}
}

// acquire counts a call on a's plugin, or, when that plugin was replaced and
// closed since a was looked up, on the plugin now serving a's name.
func (r *Registry) acquire(a *Assignor) (*Plugin, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := a.Plugin
	ref := r.refs[p]
	if ref == nil {
		cur, ok := r.byName[a.Info.Name]
		if !ok {
			return nil, &Error{Plugin: p.Name(), Assignor: a.Info.Name, Kind: ErrClosed, Detail: "the plugin was removed"}
		}
		p, ref = cur.Plugin, r.refs[cur.Plugin]
	}
	ref.calls++
	return p, nil
}

// release ends a call counted by acquire, closing p when it was the last
// reference.
func (r *Registry) release(ctx context.Context, p *Plugin) {
	r.mu.Lock()
	closing := r.unrefLocked(p, func(ref *pluginRef) { ref.calls-- })
	r.mu.Unlock()
	closeAll(context.WithoutCancel(ctx), closing)
}

// InUse reports whether the registry holds p: an assignor name points at
// it, or a call on it is in flight. A plugin not in use has been closed,
// or is about to be.
func (r *Registry) InUse(p *Plugin) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.refs[p]
	return ok
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func collect(into map[string]*Assignor, p *Plugin, builtin bool) error {
	for _, info := range p.Info().Assignors {
		if prev, ok := into[info.Name]; ok {
			return fmt.Errorf("assignor %q is provided by both %s and %s", info.Name, prev.Plugin.Name(), p.Name())
		}
		into[info.Name] = &Assignor{Info: info, Plugin: p, Builtin: builtin}
	}
	return nil
}

// Lookup returns the assignor with this name.
func (r *Registry) Lookup(name string) (*Assignor, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.byName[name]
	return a, ok
}

// ForProtocol returns the assignor that serves a client protocol name: the
// one named like the protocol if it serves it, otherwise the first by name
// among those that list it.
func (r *Registry) ForProtocol(protocol string) (*Assignor, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.forProtocolLocked(protocol)
}

// ServedProtocols maps every protocol name some assignor serves to the name
// of the assignor ForProtocol returns for it: the registry's current answer
// to every ForProtocol question at once, as a value a caller can hand on
// (the coordinator takes it as an input).
func (r *Registry) ServedProtocols() map[string]string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	served := make(map[string]string)
	for _, a := range r.byName {
		for _, p := range a.Info.Protocols {
			if _, done := served[p]; !done {
				best, _ := r.forProtocolLocked(p)
				served[p] = best.Info.Name
			}
		}
	}
	return served
}

func (r *Registry) forProtocolLocked(protocol string) (*Assignor, bool) {
	if a, ok := r.byName[protocol]; ok && serves(a.Info, protocol) {
		return a, true
	}
	var best *Assignor
	for _, a := range r.byName {
		if serves(a.Info, protocol) && (best == nil || a.Info.Name < best.Info.Name) {
			best = a
		}
	}
	return best, best != nil
}

func serves(info abi.AssignorInfo, protocol string) bool {
	for _, p := range info.Protocols {
		if p == protocol {
			return true
		}
	}
	return false
}

// Assignors returns every assignor, sorted by name.
func (r *Registry) Assignors() []*Assignor {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Assignor, 0, len(r.byName))
	for _, a := range r.byName {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Info.Name < out[j].Info.Name })
	return out
}

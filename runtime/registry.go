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
}

// Assign runs this assignor; see Plugin.Assign.
func (a *Assignor) Assign(ctx context.Context, req *abi.Request) (*abi.Response, error) {
	return a.Plugin.Assign(ctx, a.Info.Name, req)
}

// Registry maps assignor names to loaded plugins: the built-ins, and every
// *.wasm of an operator's plugin directory. A file there may replace a
// built-in of the same name. A Registry is safe for concurrent use.
type Registry struct {
	host *Host
	log  *slog.Logger

	mu     sync.RWMutex
	byName map[string]*Assignor
}

// NewRegistry returns an empty registry whose plugins run on h.
func NewRegistry(h *Host) *Registry {
	return &Registry{host: h, log: h.cfg.logger, byName: make(map[string]*Assignor)}
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
		r.byName[n] = a
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
	defer r.mu.Unlock()
	for n, a := range loaded {
		if old, ok := r.byName[n]; ok && !old.Builtin {
			for _, p := range plugins {
				p.Close(ctx)
			}
			return fmt.Errorf("assignor %q is provided by both %s and %s", n, old.Plugin.Name(), a.Plugin.Name())
		}
	}
	for n, a := range loaded {
		if old, ok := r.byName[n]; ok {
			r.log.Info("plugin replaces a built-in assignor", "assignor", n, "plugin", a.Plugin.Name(), "replaced", old.Plugin.Name())
		}
		r.byName[n] = a
	}
	return nil
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

// Package pluginreload keeps the plugins of the operator's plugin directory
// in service while files there are added, replaced and removed: it turns the
// events of a plugindir.Watcher into registry changes.
//
// A new version must load (which checks the ABI) and pass a smoke test, one
// small assignment per assignor that must validate, before it replaces the
// old one. A file that fails either, or that stays half written, is logged
// and counted, and the version already loaded keeps serving. A removed file
// whose assignors a group uses stays loaded, with a warning.
//
// The package sits between the daemon and the runtime: it must not import
// the coordinator, the gateway or the admin API; the daemon passes what it
// needs from them as functions.
package pluginreload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/wasmassign/wasmassign/internal/plugindir"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Status values of a plugin file, as the admin API reports them.
const (
	// StatusOK: the file's current content serves.
	StatusOK = "ok"
	// StatusFailed: the file's current content is broken; the last good
	// version, if any, serves.
	StatusFailed = "failed"
	// StatusRemoved: the file is gone; its last good version serves the
	// assignors that groups still use.
	StatusRemoved = "removed"
)

// Recorder counts reloads; *metrics.Metrics is one.
type Recorder interface {
	// PluginReload records one reload attempt and the number of plugin
	// modules in service, built-ins included.
	PluginReload(ok bool, loaded int)
}

// Options configure a Manager.
type Options struct {
	// Dir is the plugin directory.
	Dir string
	// Host compiles new versions.
	Host *wasmruntime.Host
	// Registry is where versions that pass the smoke test serve.
	Registry *wasmruntime.Registry
	// InUse reports whether a group is configured to use, or last used, an
	// assignor: such an assignor is never taken away. Nil means none is.
	// The manager calls it with no lock held.
	InUse func(assignor string) bool
	// Changed is called after every change to the registry's assignors (a
	// version took over, or a removed file's assignors went), before
	// Reloaded; nil for none. It runs on the manager's goroutine.
	Changed func()
	// Reloaded is called after a new version of a file took over, with the
	// assignor names it serves; nil for none. It runs on the manager's
	// goroutine.
	Reloaded func(assignors []string)
	// Metrics may be nil.
	Metrics Recorder
	Logger  *slog.Logger
	// Watch tunes the directory watcher.
	Watch plugindir.Options
}

// File is what the manager knows of one plugin file.
type File struct {
	// Path is the file's path.
	Path string
	// Status is StatusOK, StatusFailed or StatusRemoved.
	Status string
	// LastError is why the latest content was not loaded; empty when it was.
	LastError string
	// Serving is the version in service; nil when no version of the file
	// ever loaded, or when none serves any more.
	Serving *wasmruntime.Plugin
	// SHA256 is the hex digest of Serving's bytes, or of the broken content
	// when nothing serves.
	SHA256 string
}

// Manager applies plugin directory changes to a registry. Its methods are
// safe for concurrent use.
type Manager struct {
	opt Options
	log *slog.Logger

	mu    sync.Mutex
	files map[string]*File
	// digests remembers the digest of every plugin the manager installed,
	// for as long as the registry holds it.
	digests map[*wasmruntime.Plugin]string
}

// New returns a manager; nothing happens until LoadAll, Apply or Run.
func New(opt Options) *Manager {
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{opt: opt, log: log, files: make(map[string]*File), digests: make(map[*wasmruntime.Plugin]string)}
}

// LoadAll loads every complete plugin file in the directory, at start-up.
// A file that fails to load or to pass the smoke test is treated as on a
// reload: logged, counted and reported as failed in Files, serving nothing
// until a version of it loads, while the other files load and the start-up
// goes on. One module that the host rejects (a compilation past its time or
// memory, say) must not keep the daemon from becoming ready; a group
// configured to use its assignors still fails the start, on the daemon's
// check of the configuration. Only an unreadable directory is an error.
// Files still being written are left to the watcher.
func (m *Manager) LoadAll(ctx context.Context) error {
	entries, err := os.ReadDir(m.opt.Dir)
	if err != nil {
		return fmt.Errorf("plugin directory: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() || !plugindir.IsPluginName(e.Name()) {
			continue
		}
		path := filepath.Join(m.opt.Dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			m.fail(path, "", fmt.Errorf("plugin %s: %w", path, err))
			continue
		}
		if plugindir.Whole(data) != nil {
			m.log.Info("plugin file still being written; loading it when complete", "file", path)
			continue
		}
		if err := m.install(ctx, path, data, digest(data), false); err != nil {
			m.fail(path, digest(data), err)
		}
	}
	return nil
}

// Run watches the directory until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	w := plugindir.New(m.opt.Dir, m.opt.Watch)
	w.Run(ctx, func(events []plugindir.Event, err error) {
		if err != nil {
			m.log.Warn("plugin directory unreadable; the loaded plugins keep serving", "err", err)
			return
		}
		m.Apply(ctx, events)
	})
}

// Apply acts on watcher events, in order.
func (m *Manager) Apply(ctx context.Context, events []plugindir.Event) {
	for _, ev := range events {
		switch ev.Kind {
		case plugindir.Added, plugindir.Changed:
			m.reload(ctx, ev)
		case plugindir.Incomplete:
			m.fail(ev.Path, ev.SHA256, fmt.Errorf("the file stayed incomplete: %w", plugindir.Whole(ev.Data)))
		case plugindir.Removed:
			m.remove(ctx, ev.Path)
		}
	}
}

func (m *Manager) reload(ctx context.Context, ev plugindir.Event) {
	m.mu.Lock()
	f := m.files[ev.Path]
	same := f != nil && f.Status == StatusOK && f.SHA256 == ev.SHA256
	m.mu.Unlock()
	if same {
		return // loaded at start-up, or touched without a change
	}
	if err := m.install(ctx, ev.Path, ev.Data, ev.SHA256, true); err != nil {
		m.fail(ev.Path, ev.SHA256, err)
		return
	}
	m.count(true)
	m.log.Info("plugin loaded", "file", ev.Path, "sha256", ev.SHA256, "change", ev.Kind.String())
}

// install loads, smoke-tests and registers one version of a file, then
// calls Reloaded when notify is set.
func (m *Manager) install(ctx context.Context, path string, data []byte, sum string, notify bool) error {
	p, err := m.opt.Host.Load(ctx, path, data)
	if err != nil {
		return err
	}
	if err := SmokeTest(ctx, p); err != nil {
		p.Close(ctx)
		return err
	}
	m.mu.Lock()
	m.digests[p] = sum
	m.mu.Unlock()
	kept, err := m.opt.Registry.Replace(ctx, path, p, m.inUse())
	if err != nil {
		m.mu.Lock()
		delete(m.digests, p)
		m.mu.Unlock()
		return err
	}
	if len(kept) > 0 {
		m.log.Warn("the new plugin version lacks assignors a group uses; the previous version keeps serving them",
			"file", path, "assignors", kept)
	}
	m.mu.Lock()
	m.files[path] = &File{Path: path, Status: StatusOK, Serving: p, SHA256: sum}
	m.pruneLocked()
	m.mu.Unlock()
	m.changed()
	if notify && m.opt.Reloaded != nil {
		var names []string
		for _, a := range p.Info().Assignors {
			names = append(names, a.Name)
		}
		m.opt.Reloaded(names)
	}
	return nil
}

func (m *Manager) changed() {
	if m.opt.Changed != nil {
		m.opt.Changed()
	}
}

// fail records a version of a file that could not replace the one serving.
func (m *Manager) fail(path, sum string, err error) {
	m.mu.Lock()
	f := m.files[path]
	if f == nil {
		f = &File{Path: path}
		m.files[path] = f
	}
	f.Status, f.LastError = StatusFailed, err.Error()
	if f.Serving == nil {
		f.SHA256 = sum
	}
	serving := f.Serving != nil
	m.mu.Unlock()
	m.count(false)
	if serving {
		m.log.Error("plugin file is broken; the previous version keeps serving", "file", path, "sha256", sum, "err", err)
	} else {
		m.log.Error("plugin file is broken; it serves nothing", "file", path, "sha256", sum, "err", err)
	}
}

func (m *Manager) remove(ctx context.Context, path string) {
	kept := m.opt.Registry.Remove(ctx, path, m.inUse())
	m.changed()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(kept) == 0 {
		delete(m.files, path)
		m.pruneLocked()
		m.log.Info("plugin removed", "file", path)
		return
	}
	if f := m.files[path]; f != nil {
		f.Status, f.LastError = StatusRemoved, "the file was removed; its last good version serves the assignors groups use"
	}
	m.pruneLocked()
	m.log.Warn("plugin file removed, but groups use its assignors; its last good version keeps serving them",
		"file", path, "assignors", kept)
}

// inUse asks Options.InUse about every registered assignor now, so that the
// registry, which asks while locked, need not call out: InUse may well wait
// for a coordinator that is itself waiting for the registry.
func (m *Manager) inUse() func(string) bool {
	if m.opt.InUse == nil {
		return nil
	}
	used := make(map[string]bool)
	for _, a := range m.opt.Registry.Assignors() {
		if m.opt.InUse(a.Info.Name) {
			used[a.Info.Name] = true
		}
	}
	return func(name string) bool { return used[name] }
}

// pruneLocked forgets plugins the registry no longer holds.
func (m *Manager) pruneLocked() {
	for p := range m.digests {
		if !m.opt.Registry.InUse(p) {
			delete(m.digests, p)
		}
	}
	for _, f := range m.files {
		if f.Serving != nil && !m.opt.Registry.InUse(f.Serving) {
			f.Serving = nil
		}
	}
}

// count records a reload attempt with the number of plugin modules in
// service, built-ins included.
func (m *Manager) count(ok bool) {
	if m.opt.Metrics == nil {
		return
	}
	modules := map[*wasmruntime.Plugin]bool{}
	for _, a := range m.opt.Registry.Assignors() {
		modules[a.Plugin] = true
	}
	m.opt.Metrics.PluginReload(ok, len(modules))
}

// Files returns what the manager knows of each plugin file, sorted by path.
func (m *Manager) Files() []File {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked()
	out := make([]File, 0, len(m.files))
	for _, f := range m.files {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b File) int {
		if a.Path < b.Path {
			return -1
		}
		if a.Path > b.Path {
			return 1
		}
		return 0
	})
	return out
}

// Digest returns the SHA-256 of the bytes p was loaded from, for plugins
// the manager installed.
func (m *Manager) Digest(p *wasmruntime.Plugin) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.digests[p]
	return d, ok
}

// ErrSmokeTest is wrapped by SmokeTest's errors.
var ErrSmokeTest = errors.New("smoke test failed")

// SmokeTest runs one small assignment on each of p's assignors: two
// members, one topic of four partitions. The response must validate.
func SmokeTest(ctx context.Context, p *wasmruntime.Plugin) error {
	for _, info := range p.Info().Assignors {
		req := smokeRequest()
		req.Protocol = info.Protocols[0]
		if info.Modes&abi.ModeEager == 0 {
			req.RebalanceProtocol = abi.Cooperative
		}
		if _, err := p.Assign(ctx, info.Name, req); err != nil {
			return fmt.Errorf("%w: assignor %q: %w", ErrSmokeTest, info.Name, err)
		}
	}
	return nil
}

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// smokeRequest is the smoke test's request: two members, one topic.
func smokeRequest() *abi.Request {
	return &abi.Request{
		GroupID: "wasmassign-smoke-test", Generation: 1, Protocol: "smoke",
		Topics: []abi.Topic{{Name: "smoke", Exists: true, PartitionCount: 4}},
		Members: []abi.Member{
			{MemberID: "member-a", Topics: []int32{0}, OwnedGeneration: -1},
			{MemberID: "member-b", Topics: []int32{0}, OwnedGeneration: -1},
		},
	}
}

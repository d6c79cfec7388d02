package pluginreload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/plugindir"
	"github.com/wasmassign/wasmassign/internal/testutil"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
)

const cGuest = "testdata/guests/c/roundrobin.wasm" // assignor c-roundrobin

// recorder counts reloads as the metrics would.
type recorder struct {
	mu         sync.Mutex
	ok, failed int
	loaded     int
}

func (r *recorder) PluginReload(ok bool, loaded int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ok {
		r.ok++
	} else {
		r.failed++
	}
	r.loaded = loaded
}

func (r *recorder) counts() (ok, failed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ok, r.failed
}

// version returns the C guest with a custom section: the same plugin with
// other bytes, as a rebuilt plugin would be.
func version(t *testing.T, tag string) []byte {
	t.Helper()
	b := testutil.ReadArtefact(t, cGuest)
	payload := append([]byte{7}, "version"+tag...)
	b = append(b, 0, byte(len(payload))) // small: one-byte LEB128
	return append(b, payload...)
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

type rig struct {
	dir string
	reg *wasmruntime.Registry
	rec *recorder
	m   *Manager
	// used is the set of assignors groups use.
	used     map[string]bool
	reloaded [][]string
	// served is the registry's ServedProtocols at each Changed call;
	// calls lists "changed" and "reloaded" in the order they came.
	served []map[string]string
	calls  []string
}

func newRig(t *testing.T, files map[string][]byte) *rig {
	t.Helper()
	ctx := context.Background()
	h, err := wasmruntime.NewHost(ctx, wasmruntime.NewConfig().WithIsolation(wasmruntime.IsolationInProcess).
		WithCompilationCacheDir(os.Getenv("WASMASSIGN_TEST_CACHE")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	r := &rig{dir: t.TempDir(), reg: wasmruntime.NewRegistry(h), rec: &recorder{}, used: map[string]bool{}}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(r.dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.m = New(Options{
		Dir: r.dir, Host: h, Registry: r.reg, Metrics: r.rec,
		InUse: func(n string) bool { return r.used[n] },
		Reloaded: func(names []string) {
			r.reloaded = append(r.reloaded, names)
			r.calls = append(r.calls, "reloaded")
		},
		Changed: func() {
			r.served = append(r.served, r.reg.ServedProtocols())
			r.calls = append(r.calls, "changed")
		},
		Watch: plugindir.Options{Interval: 50 * time.Millisecond},
	})
	if err := r.m.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

// serving returns the digest of the version serving assignor, "" for none.
func (r *rig) serving(t *testing.T, assignor string) string {
	t.Helper()
	a, ok := r.reg.Lookup(assignor)
	if !ok {
		return ""
	}
	d, _ := r.m.Digest(a.Plugin)
	return d
}

func (r *rig) file(name string) File {
	for _, f := range r.m.Files() {
		if f.Path == filepath.Join(r.dir, name) {
			return f
		}
	}
	return File{}
}

// TestManager_ValidModuleWrittenInTwoHalvesLoadsOnceComplete checks the
// reload rule: a valid new version written in two halves, one second
// apart, counts no failure and serves within 5s of the second half.
func TestManager_ValidModuleWrittenInTwoHalvesLoadsOnceComplete(t *testing.T) {
	v1, v2 := version(t, "1"), version(t, "2")
	r := newRig(t, map[string][]byte{"rr.wasm": v1})
	if got := r.serving(t, "c-roundrobin"); got != sum(v1) {
		t.Fatalf("after LoadAll c-roundrobin serves %q, want v1", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); r.m.Run(ctx) }()
	defer func() { cancel(); <-done }()

	path := filepath.Join(r.dir, "rr.wasm")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	half := len(v2) / 2
	if _, err := f.Write(v2[:half]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if _, err := f.Write(v2[half:]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	written := time.Now()
	for r.serving(t, "c-roundrobin") != sum(v2) {
		if time.Since(written) > 5*time.Second {
			t.Fatalf("v2 does not serve 5s after its second half; status %+v", r.file("rr.wasm"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("v2 serves %v after the second half", time.Since(written).Round(time.Millisecond))
	if ok, failed := r.rec.counts(); failed != 0 || ok != 1 {
		t.Fatalf("reloads counted: %d ok, %d failed; want 1 ok, 0 failed", ok, failed)
	}
	if st := r.file("rr.wasm"); st.Status != StatusOK || st.LastError != "" || st.SHA256 != sum(v2) {
		t.Fatalf("file status %+v", st)
	}
}

// TestManager_BrokenVersionIsCountedAndTheOldKeepsServing feeds the
// manager each kind of broken version of a loaded file.
func TestManager_BrokenVersionIsCountedAndTheOldKeepsServing(t *testing.T) {
	v1 := version(t, "1")
	half := v1[:len(v1)/2]
	tests := []struct {
		name      string
		kind      plugindir.Kind
		data      []byte
		errSubstr string
	}{
		{"not wasm", plugindir.Changed, []byte("this is not a wasm module at all"), "magic"},
		{"corrupt sections", plugindir.Changed, append(slices.Clone(v1[:8]), 0x01, 0x02, 0xff, 0xff), "plugin"},
		{"wrong ABI import", plugindir.Changed, testutil.ReadArtefact(t, "testdata/hostile/bad-import.wasm"), "env.fetch_url"},
		{"assignment fails the smoke test", plugindir.Changed, testutil.ReadArtefact(t, "testdata/hostile/duplicate.wasm"), "smoke test"},
		{"stays half written", plugindir.Incomplete, half, "incomplete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, map[string][]byte{"rr.wasm": v1})
			old, _ := r.reg.Lookup("c-roundrobin")
			path := filepath.Join(r.dir, "rr.wasm")
			r.m.Apply(context.Background(), []plugindir.Event{{Kind: tt.kind, Path: path, Data: tt.data, SHA256: sum(tt.data)}})
			if ok, failed := r.rec.counts(); ok != 0 || failed != 1 {
				t.Errorf("counted %d ok, %d failed; want one failure", ok, failed)
			}
			st := r.file("rr.wasm")
			if st.Status != StatusFailed || !strings.Contains(st.LastError, tt.errSubstr) {
				t.Errorf("status %q, last error %q; want failed mentioning %q", st.Status, st.LastError, tt.errSubstr)
			}
			if st.Serving != old.Plugin || st.SHA256 != sum(v1) {
				t.Errorf("the file's serving version changed")
			}
			a, ok := r.reg.Lookup("c-roundrobin")
			if !ok || a.Plugin != old.Plugin || !r.reg.InUse(old.Plugin) {
				t.Fatal("the old version no longer serves")
			}
			if _, err := a.Assign(context.Background(), smokeRequest()); err != nil {
				t.Fatalf("the old version fails: %v", err)
			}
			if len(r.reloaded) != 0 {
				t.Errorf("Reloaded called for a broken version: %v", r.reloaded)
			}
		})
	}
}

// TestManager_StartUpGoesOnWithoutFilesThatFailToLoad starts a manager on
// a directory holding a good plugin, a module whose compilation outlasts
// the compile timeout, and a module that is not wasm: LoadAll loads the
// good one within a few compile timeouts, records and counts the two others
// as failed, naming why, and returns no error, so the daemon becomes ready.
func TestManager_StartUpGoesOnWithoutFilesThatFailToLoad(t *testing.T) {
	ctx := context.Background()
	const compileTimeout = 500 * time.Millisecond
	h, err := wasmruntime.NewHost(ctx, wasmruntime.NewConfig().
		WithLimits(wasmruntime.DefaultLimits().WithCompileTimeout(compileTimeout)).
		WithCompilationCacheDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	dir := t.TempDir()
	files := map[string][]byte{
		"bomb.wasm":     testutil.ReadArtefact(t, "testdata/hostile/compile-bomb.wasm"),
		"rr.wasm":       version(t, "1"),
		"not-wasm.wasm": []byte("this is not a wasm module at all"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recorder{}
	reg := wasmruntime.NewRegistry(h)
	m := New(Options{Dir: dir, Host: h, Registry: reg, Metrics: rec})
	start := time.Now()
	if err := m.LoadAll(ctx); err != nil {
		t.Fatalf("LoadAll: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("LoadAll took %s with a compile timeout of %s", took, compileTimeout)
	}
	if a, ok := reg.Lookup("c-roundrobin"); !ok {
		t.Fatal("the good plugin does not serve")
	} else if _, err := a.Assign(ctx, smokeRequest()); err != nil {
		t.Fatalf("the good plugin fails: %v", err)
	}
	status := map[string]File{}
	for _, f := range m.Files() {
		status[filepath.Base(f.Path)] = f
	}
	for name, want := range map[string]string{"bomb.wasm": "the compile timeout", "not-wasm.wasm": "magic"} {
		f := status[name]
		if f.Status != StatusFailed || f.Serving != nil || !strings.Contains(f.LastError, want) || f.SHA256 != sum(files[name]) {
			t.Errorf("%s: %+v; want failed, serving nothing, naming %q", name, f, want)
		}
	}
	if f := status["rr.wasm"]; f.Status != StatusOK {
		t.Errorf("rr.wasm: %+v; want ok", f)
	}
	if ok, failed := rec.counts(); ok != 0 || failed != 2 {
		t.Errorf("counted %d ok, %d failed; want the two failures", ok, failed)
	}
}

func TestManager_RemovedFileStaysOnlyWhileAGroupUsesIt(t *testing.T) {
	for _, used := range []bool{false, true} {
		t.Run(map[bool]string{false: "unused", true: "used"}[used], func(t *testing.T) {
			r := newRig(t, map[string][]byte{"rr.wasm": version(t, "1")})
			r.used["c-roundrobin"] = used
			old, _ := r.reg.Lookup("c-roundrobin")
			r.m.Apply(context.Background(), []plugindir.Event{{Kind: plugindir.Removed, Path: filepath.Join(r.dir, "rr.wasm")}})
			a, ok := r.reg.Lookup("c-roundrobin")
			if ok != used || (ok && a.Plugin != old.Plugin) {
				t.Fatalf("after removal: present %v; want %v (on the last good version)", ok, used)
			}
			if r.reg.InUse(old.Plugin) != used {
				t.Fatalf("old version held = %v, want %v", r.reg.InUse(old.Plugin), used)
			}
			st := r.file("rr.wasm")
			if used && (st.Status != StatusRemoved || st.Serving != old.Plugin) {
				t.Fatalf("status %+v; want removed, still serving", st)
			}
			if !used && st.Path != "" {
				t.Fatalf("an unused removed file is still listed: %+v", st)
			}
		})
	}
}

// TestManager_EveryRegistryChangeIsReportedBeforeReloaded: the daemon hands
// the coordinator the registry's served protocols on Changed, so it must
// come for every change (a new version, a removal) and before Reloaded,
// whose rebalances must see the new set.
func TestManager_EveryRegistryChangeIsReportedBeforeReloaded(t *testing.T) {
	v1, v2 := version(t, "1"), version(t, "2")
	r := newRig(t, map[string][]byte{"rr.wasm": v1})
	path := filepath.Join(r.dir, "rr.wasm")
	r.calls, r.served = nil, nil // start-up's LoadAll
	r.m.Apply(context.Background(), []plugindir.Event{{Kind: plugindir.Changed, Path: path, Data: v2, SHA256: sum(v2)}})
	if !slices.Equal(r.calls, []string{"changed", "reloaded"}) {
		t.Fatalf("calls after a new version: %v, want changed then reloaded", r.calls)
	}
	if got := r.served[0]["c-roundrobin"]; got != "c-roundrobin" {
		t.Fatalf("served protocols at Changed: %v, want c-roundrobin served", r.served[0])
	}
	r.m.Apply(context.Background(), []plugindir.Event{{Kind: plugindir.Removed, Path: path}})
	if !slices.Equal(r.calls, []string{"changed", "reloaded", "changed"}) {
		t.Fatalf("calls after a removal: %v", r.calls)
	}
	if _, ok := r.served[1]["c-roundrobin"]; ok {
		t.Fatalf("served protocols after the unused file was removed: %v", r.served[1])
	}
	// A broken version changes nothing in the registry.
	r.m.Apply(context.Background(), []plugindir.Event{{Kind: plugindir.Added, Path: path, Data: []byte("not wasm"), SHA256: sum([]byte("not wasm"))}})
	if len(r.calls) != 3 {
		t.Fatalf("calls after a broken version: %v", r.calls)
	}
}

func TestManager_NewVersionReplacesTheOldAndReportsItsAssignors(t *testing.T) {
	v1, v2 := version(t, "1"), version(t, "2")
	r := newRig(t, map[string][]byte{"rr.wasm": v1})
	old, _ := r.reg.Lookup("c-roundrobin")
	path := filepath.Join(r.dir, "rr.wasm")
	// The watcher's first report of the file loaded at start-up changes
	// nothing.
	r.m.Apply(context.Background(), []plugindir.Event{{Kind: plugindir.Added, Path: path, Data: v1, SHA256: sum(v1)}})
	if ok, failed := r.rec.counts(); ok+failed != 0 || len(r.reloaded) != 0 {
		t.Fatalf("the unchanged file was reloaded")
	}
	r.m.Apply(context.Background(), []plugindir.Event{{Kind: plugindir.Changed, Path: path, Data: v2, SHA256: sum(v2)}})
	if got := r.serving(t, "c-roundrobin"); got != sum(v2) {
		t.Fatal("v2 does not serve")
	}
	if r.reg.InUse(old.Plugin) {
		t.Fatal("v1 is still held after v2 replaced it")
	}
	if len(r.reloaded) != 1 || !slices.Equal(r.reloaded[0], []string{"c-roundrobin"}) {
		t.Fatalf("Reloaded calls: %v", r.reloaded)
	}
	if ok, failed := r.rec.counts(); ok != 1 || failed != 0 || r.rec.loaded != 1 {
		t.Fatalf("counted %d ok, %d failed, %d loaded", ok, failed, r.rec.loaded)
	}
}

package wasmruntime

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/wasmassign/wasmassign/internal/testutil"
)

const cGuest = "testdata/guests/c/roundrobin.wasm"

func builtinFS(t *testing.T, files map[string]string) fstest.MapFS {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, rel := range files {
		fsys[name] = &fstest.MapFile{Data: testutil.ReadArtefact(t, rel)}
	}
	return fsys
}

func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, rel := range files {
		if err := os.WriteFile(filepath.Join(dir, name), testutil.ReadArtefact(t, rel), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRegistry_DirectoryPluginReplacesBuiltinAndSaysSo(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		h, logs := newTestHost(t, NewConfig().WithIsolation(iso))
		reg := NewRegistry(h)
		ctx := context.Background()
		if err := reg.LoadBuiltins(ctx, builtinFS(t, map[string]string{"roundrobin.wasm": cGuest})); err != nil {
			t.Fatal(err)
		}
		a, ok := reg.Lookup("c-roundrobin")
		if !ok || !a.Builtin || a.Plugin.Name() != "builtin:roundrobin" {
			t.Fatalf("built-in lookup: %+v, %v", a, ok)
		}
		dir := writeDir(t, map[string]string{"mine.wasm": cGuest, "README.txt": cGuest})
		if err := reg.LoadDir(ctx, dir); err != nil {
			t.Fatal(err)
		}
		a, _ = reg.Lookup("c-roundrobin")
		if a.Builtin || filepath.Base(a.Plugin.Name()) != "mine.wasm" {
			t.Fatalf("after LoadDir the assignor comes from %s (builtin %v)", a.Plugin.Name(), a.Builtin)
		}
		if !strings.Contains(logs.String(), "replaces a built-in") || !strings.Contains(logs.String(), "mine.wasm") {
			t.Fatalf("no log line about the replacement:\n%s", logs)
		}
		if len(reg.Assignors()) != 1 {
			t.Fatalf("non-wasm files were loaded: %d assignors", len(reg.Assignors()))
		}
	})
}

func TestRegistry_TwoFilesClaimingOneNameNameBoth(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		h, _ := newTestHost(t, NewConfig().WithIsolation(iso))
		reg := NewRegistry(h)
		dir := writeDir(t, map[string]string{"first.wasm": cGuest, "second.wasm": cGuest})
		err := reg.LoadDir(context.Background(), dir)
		if err == nil || !strings.Contains(err.Error(), "first.wasm") || !strings.Contains(err.Error(), "second.wasm") {
			t.Fatalf("err = %v, want one naming both files", err)
		}
		if len(reg.Assignors()) != 0 {
			t.Fatal("a failed LoadDir added assignors")
		}
	})
}

func TestRegistry_LoadErrors(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		h, _ := newTestHost(t, NewConfig().WithIsolation(iso))
		reg := NewRegistry(h)
		ctx := context.Background()
		tests := []struct {
			name string
			load func() error
			want string
		}{
			{"no built-ins", func() error { return reg.LoadBuiltins(ctx, fstest.MapFS{".gitkeep": {}}) }, "make build"},
			{"missing directory", func() error { return reg.LoadDir(ctx, filepath.Join(t.TempDir(), "nope")) }, "plugin directory"},
			{"broken file in directory", func() error {
				return reg.LoadDir(ctx, writeDir(t, map[string]string{"x.wasm": "testdata/hostile/not-wasm.wasm"}))
			}, "x.wasm"},
			{"second file claiming a directory plugin's name", func() error {
				if err := reg.LoadDir(ctx, writeDir(t, map[string]string{"a.wasm": cGuest})); err != nil {
					return err
				}
				return reg.LoadFile(ctx, testutil.Artefact(t, cGuest))
			}, "a.wasm"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := tt.load(); err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.want)
				}
			})
		}
	})
}

func TestRegistry_ForProtocolPrefersTheAssignorNamedLikeIt(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		h, _ := newTestHost(t, NewConfig().WithIsolation(iso))
		reg := NewRegistry(h)
		if err := reg.LoadBuiltins(context.Background(), builtinFS(t, map[string]string{"g.wasm": testGuest, "c.wasm": cGuest})); err != nil {
			t.Fatal(err)
		}
		for _, proto := range []string{"test-spread", "c-roundrobin"} {
			a, ok := reg.ForProtocol(proto)
			if !ok || a.Info.Name != proto {
				t.Fatalf("ForProtocol(%q) = %v, %v", proto, a, ok)
			}
		}
		if _, ok := reg.ForProtocol("range"); ok {
			t.Fatal("ForProtocol found an assignor for a protocol nobody serves")
		}
		// ServedProtocols is every ForProtocol answer at once: each
		// protocol of each assignor, mapped to the assignor ForProtocol
		// picks, and nothing else.
		served := reg.ServedProtocols()
		want := 0
		for _, a := range reg.Assignors() {
			for _, p := range a.Info.Protocols {
				best, ok := reg.ForProtocol(p)
				if !ok || served[p] != best.Info.Name {
					t.Errorf("ServedProtocols()[%q] = %q, ForProtocol picks %v", p, served[p], best)
				}
				want++
			}
		}
		if len(served) == 0 || len(served) > want {
			t.Errorf("ServedProtocols() = %v: %d entries for %d protocol listings", served, len(served), want)
		}
	})
}

// TestRegistry_EqualFilesLoadConcurrently loads one module from several
// files at once, repeatedly, with a compilation cache: the compiles of equal
// bytes must not overlap (see engine.compiling), or wazero can hand out a
// module it has not finished preparing and instantiating it panics.
func TestRegistry_EqualFilesLoadConcurrently(t *testing.T) {
	files := map[string]string{}
	for i := range 4 {
		files[fmt.Sprintf("copy%d.wasm", i)] = testGuest
	}
	dir := writeDir(t, files)
	cache := t.TempDir()
	for round := range 5 {
		h, _ := newTestHost(t, NewConfig().WithIsolation(IsolationInProcess).WithCompilationCacheDir(cache))
		plugins, err := loadAll(context.Background(), slices.Sorted(maps.Keys(files)), func(name string) (*Plugin, error) {
			return h.LoadFile(context.Background(), filepath.Join(dir, name))
		})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for _, p := range plugins {
			if _, err := p.Assign(context.Background(), "test-spread", smallRequest()); err != nil {
				t.Fatalf("round %d, %s: %v", round, p.Name(), err)
			}
		}
		h.Close(context.Background())
	}
}

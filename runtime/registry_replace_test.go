package wasmruntime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/wasmassign/wasmassign/internal/testutil"
)

// withCustomSection returns module plus a custom section: another version
// of the same module, with other bytes and the same behaviour.
func withCustomSection(module []byte, tag string) []byte {
	payload := append([]byte{byte(len("version"))}, "version"...)
	payload = append(payload, tag...)
	out := append([]byte(nil), module...)
	out = append(out, 0)
	for n := uint32(len(payload)); ; n >>= 7 {
		if n < 0x80 {
			out = append(out, byte(n))
			break
		}
		out = append(out, byte(n&0x7f|0x80))
	}
	return append(out, payload...)
}

func loadVersion(t *testing.T, h *Host, file string, module []byte, tag string) *Plugin {
	t.Helper()
	p, err := h.Load(context.Background(), file, withCustomSection(module, tag))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// servingPlugins returns, for each name, the plugin serving it now.
func servingPlugins(reg *Registry, names ...string) []*Plugin {
	var out []*Plugin
	for _, n := range names {
		a, ok := reg.Lookup(n)
		if !ok {
			out = append(out, nil)
			continue
		}
		out = append(out, a.Plugin)
	}
	return out
}

func TestRegistry_ReplaceClosesTheOldVersionOnlyAfterItsLastCall(t *testing.T) {
	h, _ := newTestHost(t, NewConfig().WithIsolation(IsolationInProcess))
	reg := NewRegistry(h)
	ctx := context.Background()
	c := testutil.ReadArtefact(t, cGuest)
	v1 := loadVersion(t, h, "/plugins/rr.wasm", c, "1")
	if _, err := reg.Replace(ctx, "/plugins/rr.wasm", v1, nil); err != nil {
		t.Fatal(err)
	}
	a, _ := reg.Lookup("c-roundrobin")
	inFlight, err := reg.acquire(a) // a call that started on v1
	if err != nil || inFlight != v1 {
		t.Fatalf("acquire = %v, %v; want v1", inFlight, err)
	}
	v2 := loadVersion(t, h, "/plugins/rr.wasm", c, "2")
	if _, err := reg.Replace(ctx, "/plugins/rr.wasm", v2, nil); err != nil {
		t.Fatal(err)
	}
	if got := servingPlugins(reg, "c-roundrobin")[0]; got != v2 {
		t.Fatalf("after Replace the name serves %p, want v2 %p", got, v2)
	}
	if v1.closed.Load() || !reg.InUse(v1) {
		t.Fatal("v1 was closed while a call on it was in flight")
	}
	if _, err := v1.Assign(ctx, "c-roundrobin", smallRequest()); err != nil {
		t.Fatalf("the call in flight could not finish on v1: %v", err)
	}
	reg.release(ctx, v1)
	if !v1.closed.Load() || reg.InUse(v1) {
		t.Fatal("v1 stayed open after its last call returned")
	}
	// An Assignor looked up before the replacement runs on the version
	// serving its name now, rather than failing on the closed one.
	if _, err := a.Assign(ctx, smallRequest()); err != nil {
		t.Fatalf("stale Assignor: %v", err)
	}
	if v2.closed.Load() {
		t.Fatal("v2 closed")
	}
}

func TestRegistry_ReplaceDropsOrKeepsNamesTheNewVersionLacks(t *testing.T) {
	tests := []struct {
		name     string
		keep     func(string) bool
		wantKept bool
	}{
		{"unused name disappears", nil, false},
		{"name a group uses stays on the old version", func(n string) bool { return n == "c-roundrobin" }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newTestHost(t, NewConfig().WithIsolation(IsolationInProcess))
			reg := NewRegistry(h)
			ctx := context.Background()
			const file = "/plugins/mixed.wasm"
			v1 := loadVersion(t, h, file, testutil.ReadArtefact(t, cGuest), "1")
			if _, err := reg.Replace(ctx, file, v1, nil); err != nil {
				t.Fatal(err)
			}
			v2 := loadVersion(t, h, file, testutil.ReadArtefact(t, testGuest), "2")
			kept, err := reg.Replace(ctx, file, v2, tt.keep)
			if err != nil {
				t.Fatal(err)
			}
			a, ok := reg.Lookup("c-roundrobin")
			if ok != tt.wantKept || (len(kept) == 1) != tt.wantKept {
				t.Fatalf("c-roundrobin present %v, kept %v; want %v", ok, kept, tt.wantKept)
			}
			if ok && a.Plugin != v1 {
				t.Fatal("the kept name does not serve the old version")
			}
			if v1.closed.Load() == tt.wantKept {
				t.Fatalf("old version closed = %v, want %v", v1.closed.Load(), !tt.wantKept)
			}
			if p := servingPlugins(reg, "test-spread")[0]; p != v2 {
				t.Fatal("the new version's names do not serve it")
			}
			// Removing the file takes every name; both versions close.
			if kept := reg.Remove(ctx, file, nil); len(kept) != 0 {
				t.Fatalf("Remove kept %v with keep nil", kept)
			}
			if n := len(reg.Assignors()); n != 0 || !v1.closed.Load() || !v2.closed.Load() {
				t.Fatalf("after Remove: %d assignors, v1 closed %v, v2 closed %v", n, v1.closed.Load(), v2.closed.Load())
			}
		})
	}
}

func TestRegistry_RemovingAFileBringsBackTheBuiltinItShadowed(t *testing.T) {
	h, _ := newTestHost(t, NewConfig().WithIsolation(IsolationInProcess))
	reg := NewRegistry(h)
	ctx := context.Background()
	c := testutil.ReadArtefact(t, cGuest)
	if err := reg.LoadBuiltins(ctx, fstest.MapFS{"roundrobin.wasm": &fstest.MapFile{Data: c}}); err != nil {
		t.Fatal(err)
	}
	builtin, _ := reg.Lookup("c-roundrobin")
	file := loadVersion(t, h, "/plugins/rr.wasm", c, "file")
	if _, err := reg.Replace(ctx, "/plugins/rr.wasm", file, nil); err != nil {
		t.Fatal(err)
	}
	if a, _ := reg.Lookup("c-roundrobin"); a.Plugin != file || a.Builtin {
		t.Fatal("the file does not shadow the built-in")
	}
	reg.Remove(ctx, "/plugins/rr.wasm", nil)
	a, ok := reg.Lookup("c-roundrobin")
	if !ok || a != builtin || builtin.Plugin.closed.Load() {
		t.Fatalf("after Remove: %+v, %v; want the open built-in back", a, ok)
	}
	if !file.closed.Load() {
		t.Fatal("the removed file's plugin stayed open")
	}
}

func TestRegistry_ReplaceRefusesAnotherFilesName(t *testing.T) {
	h, _ := newTestHost(t, NewConfig().WithIsolation(IsolationInProcess))
	reg := NewRegistry(h)
	ctx := context.Background()
	c := testutil.ReadArtefact(t, cGuest)
	first := loadVersion(t, h, "/plugins/first.wasm", c, "1")
	if _, err := reg.Replace(ctx, "/plugins/first.wasm", first, nil); err != nil {
		t.Fatal(err)
	}
	second := loadVersion(t, h, "/plugins/second.wasm", c, "1")
	_, err := reg.Replace(ctx, "/plugins/second.wasm", second, nil)
	if !errors.Is(err, ErrAssignorConflict) {
		t.Fatalf("err = %v, want ErrAssignorConflict", err)
	}
	if a, _ := reg.Lookup("c-roundrobin"); a.Plugin != first || !second.closed.Load() || first.closed.Load() {
		t.Fatal("a refused Replace changed the registry or leaked the new plugin")
	}
}

// TestRegistry_ConcurrentAssignDuringReloadsNeverFails runs assignments on
// every name of a multi-assignor module while new versions replace it: no
// call may fail, every version but the last is closed in the end, and a
// snapshot never shows the module's names split between two versions.
func TestRegistry_ConcurrentAssignDuringReloadsNeverFails(t *testing.T) {
	h, _ := newTestHost(t, NewConfig().WithIsolation(IsolationInProcess))
	reg := NewRegistry(h)
	ctx := context.Background()
	guest := testutil.ReadArtefact(t, testGuest)
	const file = "/plugins/guest.wasm"
	const versions = 3
	var all []*Plugin
	for i := range versions {
		all = append(all, loadVersion(t, h, file, guest, fmt.Sprint(i)))
	}
	if _, err := reg.Replace(ctx, file, all[0], nil); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var calls, failures atomic.Int64
	var wg sync.WaitGroup
	for _, name := range []string{"test-spread", "test-random", "test-spread"} {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				a, ok := reg.Lookup(name)
				if !ok {
					failures.Add(1)
					continue
				}
				if _, err := a.Assign(ctx, smallRequest()); err != nil {
					t.Errorf("%s: %v", name, err)
					failures.Add(1)
				}
				calls.Add(1)
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			as := reg.Assignors()
			for _, a := range as[1:] {
				if a.Plugin != as[0].Plugin {
					t.Error("one snapshot shows two versions serving the module's names")
					return
				}
			}
			time.Sleep(100 * time.Microsecond)
		}
	})
	for _, p := range all[1:] {
		for calls.Load() < 10 && !t.Failed() {
			time.Sleep(time.Millisecond)
		}
		calls.Store(0)
		if _, err := reg.Replace(ctx, file, p, nil); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if failures.Load() != 0 {
		t.Fatalf("%d lookups or calls failed", failures.Load())
	}
	for i, p := range all {
		if want := i < versions-1; p.closed.Load() != want {
			t.Errorf("version %d closed = %v, want %v", i, p.closed.Load(), want)
		}
	}
}

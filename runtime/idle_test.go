package wasmruntime

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

// idleCount runs one call of a testdata/hostile idle-* module and returns the
// idle count its answer reports: the idle calls the host made on the
// instance before this call.
func idleCount(t *testing.T, p *Plugin) uint32 {
	t.Helper()
	name := p.Info().Assignors[0].Name
	resp, err := p.Assign(context.Background(), name, smallRequest())
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(resp.Members) != 1 || len(resp.Members[0].UserData) != 4 {
		t.Fatalf("%s answered %+v, want member 0 with 4 bytes of user data", name, resp)
	}
	return binary.LittleEndian.Uint32(resp.Members[0].UserData)
}

func TestIdle_HostCallsIdleOnceWhenLoadingAndAfterEveryCall(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		for _, skipIdle := range []bool{false, true} {
			t.Run(map[bool]string{false: "idle", true: "never idle"}[skipIdle], func(t *testing.T) {
				cfg := NewConfig().WithIsolation(iso).WithMaxInstances(1)
				cfg.skipIdle = skipIdle
				h, _ := newTestHost(t, cfg)
				p := loadArtefact(t, h, "testdata/hostile/idle-count.wasm")
				for call := uint32(1); call <= 20; call++ {
					want := call // one idle call while loading, one after each earlier call
					if skipIdle {
						want = 0
					}
					if got := idleCount(t, p); got != want {
						t.Fatalf("call %d saw %d idle calls before it, want %d", call, got, want)
					}
				}
			})
		}
	})
}

// TestIdle_LoopingIdleIsStoppedAndNoCallerFails checks that an idle call is
// off the caller's path and bounded: the call before it returns at once, the
// idle call is cut at the timeout (in process isolation, by killing the
// worker), and the next call succeeds on a new instance.
func TestIdle_LoopingIdleIsStoppedAndNoCallerFails(t *testing.T) {
	const timeout = 300 * time.Millisecond
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		h, logs := newTestHost(t, NewConfig().WithIsolation(iso).WithMaxInstances(1).WithLimits(DefaultLimits().WithTimeout(timeout)))
		p := loadArtefact(t, h, "testdata/hostile/idle-loop.wasm")
		var pids []int
		for round := range 3 {
			if iso == IsolationProcess {
				var idle []int
				if !waitFor(func() bool { idle = idlePids(t, p); return len(idle) == 1 }) {
					t.Fatalf("round %d: no idle worker", round)
				}
				pids = append(pids, idle[0])
			}
			start := time.Now()
			if got := idleCount(t, p); got > 1 {
				t.Fatalf("round %d ran on an instance that had %d idle calls: the looping one was reused", round, got)
			}
			// The call returns with its response; the idle call that loops
			// runs after it. Only a fresh instance (round 1 and later
			// wait for the looping one to be stopped) takes longer.
			if d := time.Since(start); round == 0 && d > timeout/2 {
				t.Errorf("round %d: the call took %s; it must not wait for the idle call", round, d)
			}
		}
		if iso == IsolationProcess {
			for _, pid := range pids {
				if !waitFor(func() bool { return reaped(pid) }) {
					t.Errorf("worker %d, whose idle call looped, was not killed", pid)
				}
			}
		}
		if !waitFor(func() bool { return strings.Contains(logs.String(), "plugin idle call failed") }) {
			t.Fatalf("the stopped idle call was not logged:\n%s", logs.String())
		}
		if out := logs.String(); !strings.Contains(out, "stopped after 300ms") {
			t.Errorf("the log does not name the timeout:\n%s", out)
		}
	})
}

func TestIdle_TrapInIdleDiscardsTheInstanceAndNoCallerFails(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		h, logs := newTestHost(t, NewConfig().WithIsolation(iso).WithMaxInstances(1))
		p := loadArtefact(t, h, "testdata/hostile/idle-trap.wasm")
		for round := range 4 {
			if got := idleCount(t, p); got > 1 {
				t.Fatalf("round %d ran on an instance that had %d idle calls: the trapped one was reused", round, got)
			}
		}
		if !waitFor(func() bool { return strings.Contains(logs.String(), "plugin idle call failed") }) {
			t.Fatalf("the trap in idle was not logged:\n%s", logs.String())
		}
	})
}

func TestIdle_CallerCanceledWhileWaitingForAnIdleInstance(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso Isolation) {
		h, _ := newTestHost(t, NewConfig().WithIsolation(iso).WithMaxInstances(1).WithLimits(DefaultLimits().WithTimeout(5*time.Second)))
		p := loadArtefact(t, h, "testdata/hostile/idle-loop.wasm")
		idleCount(t, p) // the idle call after it loops until the timeout
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := p.Assign(ctx, "hostile-idle-loop", smallRequest())
		if !errors.Is(err, ErrTimeout) || time.Since(start) > 2*time.Second {
			t.Fatalf("err = %v after %s, want a timeout when the caller's deadline passes", err, time.Since(start))
		}
	})
}

package guest

import "testing"

// step is one event the collector sees: a call or an idle call, after which
// the heap's cumulative allocations stand at allocs.
type step struct {
	idle   bool
	allocs uint64
}

// run feeds steps to a collector that starts as after warmUp (nothing
// counted, warmUp's allocations above collectAfterBytes) and returns the
// indices of the steps at which it collected, running each collection as
// collect does.
func run(steps []step) []int {
	var c collector
	var at []int
	for i, s := range steps {
		var now bool
		if s.idle {
			now = c.idle(func() uint64 { return s.allocs })
		} else {
			now = c.afterCall(s.allocs)
		}
		if now {
			at = append(at, i)
			c.didCollect(s.allocs)
		}
	}
	return at
}

// calls returns n calls that each allocate per bytes, after a start-up that
// allocated start bytes, with an idle call after every call when idle is
// set, and one idle call before the first call when first is set.
func calls(n int, start, per uint64, idle, first bool) []step {
	var steps []step
	allocs := start
	if first {
		steps = append(steps, step{idle: true, allocs: allocs})
	}
	for range n {
		allocs += per
		steps = append(steps, step{allocs: allocs})
		if idle {
			steps = append(steps, step{idle: true, allocs: allocs})
		}
	}
	return steps
}

func TestCollector_CollectsAtTheSamePointsInlineOrInIdle(t *testing.T) {
	const start = collectAfterBytes + 1 // warmUp's garbage
	tests := []struct {
		name string
		per  uint64
	}{
		{"small calls: every collectEvery calls", 1000},
		{"large calls: every collectAfterBytes", collectAfterBytes/3 + 1},
		{"huge calls: after every call", 2 * collectAfterBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inline := calls(200, start, tt.per, false, false)
			idle := calls(200, start, tt.per, true, false)
			gotInline, gotIdle := run(inline), run(idle)
			if len(gotInline) < 200/collectEvery {
				t.Fatalf("only %d collections in 200 calls: %v", len(gotInline), gotInline)
			}
			for _, i := range gotInline {
				if inline[i].idle {
					t.Fatalf("a host that never calls idle got a collection in idle")
				}
			}
			// The first call of a host that idles collects inline: it has
			// not called idle yet. After that every collection runs in the
			// idle call right after the call that made it due.
			if len(gotIdle) != len(gotInline) {
				t.Fatalf("%d collections with idle calls, %d without: %v, %v", len(gotIdle), len(gotInline), gotIdle, gotInline)
			}
			for k, i := range gotInline {
				call := i // the index of the call in inline; in idle, call n is at 2n and its idle at 2n+1
				want := 2*call + 1
				if k == 0 {
					want = 2 * call
				}
				if gotIdle[k] != want {
					t.Fatalf("collection %d: at step %d with idle calls, want %d (call %d)", k, gotIdle[k], want, call)
				}
				if k > 0 && !idle[gotIdle[k]].idle {
					t.Fatalf("collection %d ran inside a call although the host calls idle", k)
				}
			}
		})
	}
}

func TestCollector_IdleBeforeTheFirstCallTakesTheStartUpCollection(t *testing.T) {
	steps := calls(100, collectAfterBytes+1, 1000, true, true)
	got := run(steps)
	if len(got) == 0 || got[0] != 0 {
		t.Fatalf("collections at %v, want the first in the idle call before any call", got)
	}
	for _, i := range got {
		if !steps[i].idle {
			t.Fatalf("collection at step %d ran inside a call", i)
		}
	}
	if len(got) != 1+100/collectEvery {
		t.Fatalf("%d collections in 100 small calls, want %d: %v", len(got), 1+100/collectEvery, got)
	}
}

func TestCollector_HostThatStopsCallingIdleStillGetsCollections(t *testing.T) {
	// One idle call, then none: the owed collection runs inline once it has
	// waited a further collectEvery calls.
	steps := calls(1, collectAfterBytes+1, 1000, true, true)
	steps = append(steps, calls(300, collectAfterBytes+2000, 1000, false, false)...)
	got := run(steps)
	if len(got) < 1+300/(2*collectEvery) {
		t.Fatalf("collections at %v: too few after the host stopped calling idle", got)
	}
	for k := 1; k < len(got); k++ {
		n := 0
		for _, s := range steps[got[k-1]+1 : got[k]+1] {
			if !s.idle {
				n++
			}
		}
		if n > 2*collectEvery {
			t.Fatalf("%d calls between collections %d and %d, want at most %d", n, k-1, k, 2*collectEvery)
		}
	}
}

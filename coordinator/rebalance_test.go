package coordinator

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRebalance_StartsANewGenerationOfAStableGroupOnly(t *testing.T) {
	tests := []struct {
		name  string
		group string
		want  bool
	}{
		{"stable group rebalances", "g", true},
		{"unknown group is left alone", "other", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
			h.setMetadata(meta(map[string]int{"t": 4}))
			a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
			settle(h, a)
			before := a.generation
			h.absorb(h.c.Rebalance(h.now, tt.group, "plugin reloaded"))
			code := h.do(a.client, hbReq("g", a.memberID, a.generation)).(*kmsg.HeartbeatResponse).ErrorCode
			if got := code == kerr.RebalanceInProgress.Code; got != tt.want {
				t.Fatalf("heartbeat %v, want rebalance %v", kerr.ErrorForCode(code), tt.want)
			}
			if !tt.want {
				return
			}
			a.phase = idle
			settle(h, a)
			if a.generation != before+1 || count(a.held) != 4 {
				t.Fatalf("after the rebalance: generation %d (was %d), holding %v", a.generation, before, a.held)
			}
			var reason string
			for _, e := range h.events {
				if e.Kind == EventRebalanceStarted && e.Generation == before {
					reason = e.Detail
				}
			}
			if reason != "plugin reloaded" {
				t.Fatalf("rebalance started with reason %q", reason)
			}
		})
	}
}

// TestAssignmentTimeout_ASyncGroupNeverOutwaitsTheBound: when no assignor
// answers (a hanging plugin, then its hanging fallback), or the metadata
// never comes, the members' parked SyncGroups are answered at
// Config.AssignmentTimeout after the join phase ended, with the range
// plugin's assignment the coordinator computes itself, and the abandoned
// job's late answer is stale.
func TestAssignmentTimeout_ASyncGroupNeverOutwaitsTheBound(t *testing.T) {
	const bound = 7 * time.Second
	for _, waitFor := range []string{"assignor", "metadata"} {
		t.Run(waitFor, func(t *testing.T) {
			cfg := Config{Default: GroupConfig{InitialRebalanceDelay: -1, Fallback: "roundrobin"}, AssignmentTimeout: bound}
			if waitFor == "metadata" {
				cfg.MetadataWait = time.Minute // longer than the bound
			}
			h := newHarness(t, cfg)
			h.autoJobs = false
			if waitFor == "assignor" {
				h.setMetadata(meta(map[string]int{"t": 4}))
			}
			a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
			b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
			a.join()
			b.join()
			h.advance(0)
			a.poll()
			b.poll()
			a.sync()
			b.sync()
			start := h.now
			var abandoned []Job
			for h.now.Sub(start) < bound-time.Second {
				// Each assignor hangs until the driver gives up on it,
				// and the next one hangs too.
				abandoned = append(abandoned, h.jobs...)
				h.jobs = nil
				h.advance(time.Second)
			}
			if _, ok := h.replies[a.req]; ok {
				t.Fatalf("SyncGroup answered before the bound")
			}
			h.advance(2 * time.Second)
			for _, s := range []*simClient{a, b} {
				s.poll()
				if s.phase != stable {
					t.Fatalf("%s is %v past the bound, want stable with an assignment", s.name, s.phase)
				}
			}
			want := 4 // the partitions of t, split
			if waitFor == "metadata" {
				want = 0 // t was never seen: assigned from what is known
			}
			if n := len(a.held["t"]) + len(b.held["t"]); n != want {
				t.Fatalf("held a %v, b %v: want %d partitions of t", a.held, b.held, want)
			}
			timedOut := 0
			for _, e := range h.events {
				if e.Kind == EventAssignmentTimedOut {
					timedOut++
					if !strings.Contains(e.Detail, waitFor) {
						t.Errorf("timeout event says %q, want it to name the %s", e.Detail, waitFor)
					}
				}
			}
			if timedOut != 1 {
				t.Errorf("%d timeout events, want 1", timedOut)
			}
			// A hanging plugin that answers at last is too late.
			for _, j := range append(abandoned, h.jobs...) {
				h.finishJob(j)
			}
			if g := h.c.groups["g"]; g.state != Stable || g.generation != 1 {
				t.Errorf("a late answer moved the group to %v generation %d", g.state, g.generation)
			}
		})
	}
}

// TestAssignment_ABusyRunnerAsksTheSameAssignorAgain: a Job the runner had
// no room for is no failure of the assignor. The group keeps its assignor
// through any number of such answers, with no fallback, and the assignment
// timeout still bounds the wait.
func TestAssignment_ABusyRunnerAsksTheSameAssignorAgain(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1, Fallback: "roundrobin"}, AssignmentTimeout: 20 * time.Second})
	h.autoJobs = false
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	a.join()
	h.advance(0)
	a.poll()
	a.sync()
	busy := fmt.Errorf("%w: waited 10s for a worker", ErrRunnerBusy)
	for i := range 3 {
		if len(h.jobs) != 1 || h.jobs[0].Assignor != "range" || h.jobs[0].Attempt != 0 {
			t.Fatalf("after %d busy answers, jobs %+v; want range asked again, as the first attempt", i, h.jobs)
		}
		j := h.jobs[0]
		h.jobs = nil
		h.advance(5 * time.Second)
		h.assignmentDone(j.ID, nil, busy)
	}
	h.runJobs()
	a.poll()
	if a.phase != stable || len(a.held["t"]) != 4 {
		t.Fatalf("a is %v holding %v; want stable with the 4 partitions", a.phase, a.held)
	}
	deferred := 0
	for _, e := range h.events {
		switch e.Kind {
		case EventAssignmentFailed, EventAssignmentTimedOut:
			t.Errorf("event %+v: a busy runner is neither a failure nor a timeout", e)
		case EventAssignmentDeferred:
			deferred++
		case EventAssignmentCompleted:
			if e.Detail != "range" || e.Attempt != 0 {
				t.Errorf("completed by %q at attempt %d, want range at the first", e.Detail, e.Attempt)
			}
		}
	}
	if deferred != 3 {
		t.Errorf("%d deferred events, want 3", deferred)
	}

	// A runner that stays busy past the bound: the timeout stands in.
	h = newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}, AssignmentTimeout: 20 * time.Second})
	h.autoJobs = false
	h.setMetadata(meta(map[string]int{"t": 4}))
	b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
	b.join()
	h.advance(0)
	b.poll()
	b.sync()
	for range 25 {
		jobs := h.jobs
		h.jobs = nil
		for _, j := range jobs {
			h.assignmentDone(j.ID, nil, busy)
		}
		h.advance(time.Second)
	}
	b.poll()
	timedOut := 0
	for _, e := range h.events {
		if e.Kind == EventAssignmentTimedOut {
			timedOut++
		}
	}
	if timedOut != 1 || b.phase != stable || len(b.held["t"]) != 4 {
		t.Fatalf("%d timeout events, b %v holding %v; want one timeout and the range assignment", timedOut, b.phase, b.held)
	}
}

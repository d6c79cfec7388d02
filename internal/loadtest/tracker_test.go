package loadtest

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTracker_Rules steps a tracker of two groups of two members through
// the states a run goes through, checking after each whether the groups
// count as stable, and since when.
func TestTracker_Rules(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var none []kmsg.ConsumerMemberAssignmentTopic
	type step struct {
		name string
		do   func(*tracker)
		// at and hold ask stableFor; want is whether the hold is met,
		// since when the stable state began (zero: not stable).
		at, hold  int
		want      bool
		wantSince int
		notStable bool // stableFor must report no stable state at all
	}
	steps := []step{
		{name: "nobody joined", do: func(*tracker) {}, at: 0, notStable: true},
		{name: "all join", do: func(tr *tracker) {
			for g := range 2 {
				for m := range 2 {
					tr.joining(g, m, at(0))
				}
			}
		}, at: 10, notStable: true},
		{name: "group 0 synced at one generation, group 1 not", do: func(tr *tracker) {
			tr.synced(0, 0, 1, none, false, at(20))
			tr.synced(0, 1, 1, none, false, at(20))
		}, at: 30, notStable: true},
		{name: "group 1 synced at two generations", do: func(tr *tracker) {
			tr.synced(1, 0, 1, none, false, at(40))
			tr.synced(1, 1, 2, none, false, at(40))
		}, at: 50, notStable: true},
		{name: "group 1 member 0 synced with a revocation pending", do: func(tr *tracker) {
			tr.synced(1, 0, 2, none, true, at(60))
		}, at: 70, notStable: true},
		{name: "it rejoins", do: func(tr *tracker) { tr.joining(1, 0, at(80)) }, at: 90, notStable: true},
		{name: "and syncs with nothing to revoke: every group stable", do: func(tr *tracker) {
			tr.synced(1, 0, 2, none, false, at(100))
		}, at: 150, hold: 100, want: false, wantSince: 100},
		{name: "held long enough", do: func(*tracker) {}, at: 200, hold: 100, want: true, wantSince: 100},
		{name: "a heartbeat announces a rebalance", do: func(tr *tracker) { tr.joining(0, 1, at(250)) }, at: 260, notStable: true},
		{name: "the group settles again: the hold starts over", do: func(tr *tracker) {
			tr.joining(0, 0, at(270))
			tr.synced(0, 0, 2, none, false, at(300))
			tr.synced(0, 1, 2, none, false, at(300))
		}, at: 350, hold: 100, want: false, wantSince: 300},
		{name: "a member leaves: its group needs a new generation", do: func(tr *tracker) { tr.left(0, 1, at(400)) }, at: 410, notStable: true},
		{name: "the survivor resyncs at the old generation", do: func(tr *tracker) {
			tr.synced(0, 0, 2, none, false, at(420))
		}, at: 430, notStable: true},
		{name: "and at a new one", do: func(tr *tracker) {
			tr.joining(0, 0, at(440))
			tr.synced(0, 0, 3, none, false, at(450))
		}, at: 560, hold: 100, want: true, wantSince: 450},
	}
	tr := newTracker(2, 2)
	for _, s := range steps {
		s.do(tr)
		since, ok := tr.stableFor(at(s.at), time.Duration(s.hold)*time.Millisecond)
		switch {
		case s.notStable:
			if !since.IsZero() || ok {
				t.Errorf("%s: stable since %v (held: %v), want not stable", s.name, since.Sub(t0), ok)
			}
		case ok != s.want || !since.Equal(at(s.wantSince)):
			t.Errorf("%s: stable since %v, held %v; want since %v, held %v", s.name, since.Sub(t0), ok, at(s.wantSince).Sub(t0), s.want)
		}
	}
	if n, _ := tr.unstable([]string{"a", "b"}, 5); n != 0 {
		t.Errorf("%d groups unstable at the end", n)
	}
}

func TestTracker_UnstableDescribesTheGroups(t *testing.T) {
	tr := newTracker(2, 3)
	tr.synced(1, 0, 4, nil, false, time.Now())
	tr.synced(1, 1, 5, nil, true, time.Now())
	n, desc := tr.unstable([]string{"g0", "g1"}, 1)
	if n != 2 || len(desc) != 1 || desc[0] != "g0: 0 of 3 members synced (generations none), 0 about to rejoin" {
		t.Errorf("unstable: %d, %q", n, desc)
	}
	_, desc = tr.unstable([]string{"g0", "g1"}, 2)
	if desc[1] != "g1: 2 of 3 members synced (generations 4,5), 1 about to rejoin" {
		t.Errorf("unstable: %q", desc[1])
	}
}

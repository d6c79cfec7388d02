package loadtest

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// tracker decides when the groups are stable: every group has each of its
// live members answered by SyncGroup, without error, at one generation,
// and no member is about to rejoin (a cooperative revocation, or a
// rebalance a heartbeat announced). Members report to it; the run asks
// it how long the state has held. Times are passed in, so its rules are
// tested without a clock.
type tracker struct {
	mu     sync.Mutex
	groups []trackedGroup
	// stableGroups counts the groups stable now; since is when it last
	// reached len(groups), zero while it is below.
	stableGroups int
	since        time.Time
}

type trackedGroup struct {
	members []trackedMember
	stable  bool
	// minGeneration is the least generation the group can be stable at:
	// after a member left, the others' generation still counts it.
	minGeneration int32
}

type trackedMember struct {
	// gone is set for a member that stopped (killed in a test, or its
	// run ended); the group is judged by the others.
	gone bool
	// synced is set by a successful SyncGroup and cleared by a JoinGroup
	// or an announced rebalance; pending marks a member that will rejoin.
	synced, pending bool
	generation      int32
	// assignment is what the SyncGroup gave, for the coverage check.
	assignment []kmsg.ConsumerMemberAssignmentTopic
}

func newTracker(groups, members int) *tracker {
	t := &tracker{groups: make([]trackedGroup, groups)}
	for i := range t.groups {
		t.groups[i].members = make([]trackedMember, members)
	}
	return t
}

// joining records that a member sent a JoinGroup, or learnt that it must.
func (t *tracker) joining(g, m int, now time.Time) {
	t.update(g, now, func(tm *trackedMember) { tm.synced, tm.pending = false, true }, m)
}

// synced records a successful SyncGroup at generation with assignment;
// revoking says the member gave partitions up and rejoins (KIP-429).
func (t *tracker) synced(g, m int, generation int32, assignment []kmsg.ConsumerMemberAssignmentTopic, revoking bool, now time.Time) {
	t.update(g, now, func(tm *trackedMember) {
		tm.synced, tm.pending, tm.generation, tm.assignment = true, revoking, generation, assignment
	}, m)
}

// left records that a member stopped for good: the group's next stable
// state needs a generation after every one seen so far.
func (t *tracker) left(g, m int, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tg := &t.groups[g]
	for _, tm := range tg.members {
		if tm.generation >= tg.minGeneration {
			tg.minGeneration = tm.generation + 1
		}
	}
	tg.members[m].gone = true
	t.recheck(g, now)
}

func (t *tracker) update(g int, now time.Time, f func(*trackedMember), m int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(&t.groups[g].members[m])
	t.recheck(g, now)
}

// recheck re-evaluates group g after a change; t.mu is held.
func (t *tracker) recheck(g int, now time.Time) {
	tg := &t.groups[g]
	was := tg.stable
	tg.stable = tg.isStable()
	switch {
	case was && !tg.stable:
		t.stableGroups--
		t.since = time.Time{}
	case !was && tg.stable:
		t.stableGroups++
		if t.stableGroups == len(t.groups) {
			t.since = now
		}
	}
}

func (tg *trackedGroup) isStable() bool {
	live, gen := 0, int32(-1)
	for _, tm := range tg.members {
		if tm.gone {
			continue
		}
		if !tm.synced || tm.pending {
			return false
		}
		if live > 0 && tm.generation != gen {
			return false
		}
		gen = tm.generation
		live++
	}
	return live > 0 && gen >= tg.minGeneration
}

// stableFor reports whether every group has been stable for at least hold
// at now, and since when.
func (t *tracker) stableFor(now time.Time, hold time.Duration) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.since.IsZero() {
		return time.Time{}, false
	}
	return t.since, now.Sub(t.since) >= hold
}

// unstable describes, for the report, up to limit groups that are not
// stable, and how many are not.
func (t *tracker) unstable(names []string, limit int) (count int, described []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, tg := range t.groups {
		if tg.stable {
			continue
		}
		count++
		if len(described) >= limit {
			continue
		}
		synced, pending, live := 0, 0, 0
		gens := map[int32]bool{}
		for _, tm := range tg.members {
			if tm.gone {
				continue
			}
			live++
			if tm.synced {
				synced++
				gens[tm.generation] = true
			}
			if tm.pending {
				pending++
			}
		}
		var gs []string
		for g := range gens {
			gs = append(gs, fmt.Sprint(g))
		}
		sort.Strings(gs)
		if len(gs) == 0 {
			gs = []string{"none"}
		}
		described = append(described, fmt.Sprintf("%s: %d of %d members synced (generations %s), %d about to rejoin",
			names[i], synced, live, strings.Join(gs, ","), pending))
	}
	return count, described
}

// assignments returns each group's live members' assignments.
func (t *tracker) assignments() [][][]kmsg.ConsumerMemberAssignmentTopic {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([][][]kmsg.ConsumerMemberAssignmentTopic, len(t.groups))
	for i, tg := range t.groups {
		for _, tm := range tg.members {
			if !tm.gone {
				out[i] = append(out[i], tm.assignment)
			}
		}
	}
	return out
}

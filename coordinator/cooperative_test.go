package coordinator

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stableGroup runs sims until each has its assignment.
func settle(h *harness, sims ...*simClient) {
	for round := 0; round < 20; round++ {
		h.advance(0)
		done := true
		for _, s := range sims {
			s.poll()
			switch s.phase {
			case idle:
				s.join()
				done = false
			case joined:
				s.sync()
				done = false
			case joining, syncing:
				done = false
			case stable:
				s.heartbeat()
				if s.phase != stable {
					done = false
				}
			}
		}
		if done {
			return
		}
	}
}

func count(held map[string][]int32) int {
	n := 0
	for _, ps := range held {
		n += len(ps)
	}
	return n
}

func lastCompleted(h *harness) Event {
	for i := len(h.events) - 1; i >= 0; i-- {
		if h.events[i].Kind == EventAssignmentCompleted {
			return h.events[i]
		}
	}
	return Event{}
}

func TestCooperative_MovedPartitionsAreWithheldThenHandedOverInTheNextGeneration(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"cooperative-sticky"}, []string{"t"})
	settle(h, a)
	if count(a.held) != 4 {
		t.Fatalf("a holds %v", a.held)
	}
	b := newSim(h, "b", "g", []string{"cooperative-sticky"}, []string{"t"})
	b.join()
	a.heartbeat() // REBALANCE_IN_PROGRESS
	a.join()      // cooperative: keeps and reports its four partitions
	a.poll()
	b.poll()
	if a.generation != 2 || b.generation != 2 {
		t.Fatalf("generations %d %d", a.generation, b.generation)
	}
	// b syncs first; its SyncGroup waits for the leader's, as in Kafka,
	// although the assignment is computed.
	b.sync()
	if e := lastCompleted(h); e.N != 2 || e.Generation != 2 {
		t.Fatalf("completion event %+v, want 2 withheld in generation 2", e)
	}
	if st := h.c.groups["g"].state; st != CompletingRebalance || b.phase != syncing {
		t.Fatalf("state %v, b's sync answered: %v; want CompletingRebalance until the leader syncs", st, b.phase != syncing)
	}
	a.sync() // a learns it keeps two and revokes the others
	b.poll()
	if count(a.held) != 2 {
		t.Fatalf("a holds %v after revoking", a.held)
	}
	// The target gives b two of a's partitions, but a still held them, so b
	// received nothing yet.
	if b.phase != stable || count(b.held) != 0 {
		t.Fatalf("b (phase %v) received %v while a still held everything", b.phase, b.held)
	}
	// Every member synced: the coordinator starts the second round itself,
	// even for a member that would not rejoin on its own.
	if st := h.c.groups["g"].state; st != PreparingRebalance {
		t.Fatalf("state %v, want the follow-up rebalance", st)
	}
	b.heartbeat()
	if b.phase != idle {
		t.Fatal("b was not told to rejoin")
	}
	settle(h, a, b)
	if count(a.held) != 2 || count(b.held) != 2 || h.c.groups["g"].generation != 3 {
		t.Fatalf("after the second round: a %v b %v generation %d", a.held, b.held, h.c.groups["g"].generation)
	}
	for p := range int32(4) {
		if a.holds("t", p) == b.holds("t", p) {
			t.Fatalf("partition %d held by both or neither", p)
		}
	}
	if st := h.c.groups["g"].state; st != Stable {
		t.Fatalf("state %v, want Stable with nothing left to hand over", st)
	}
}

func TestEager_NothingIsWithheldAndNoSecondRound(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	settle(h, a)
	b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
	b.join()
	a.heartbeat()
	a.join() // eager: revokes everything before rejoining
	a.poll()
	b.poll()
	b.sync()
	a.sync()
	b.poll() // answered once the leader, a, synced
	if count(a.held) != 2 || count(b.held) != 2 {
		t.Fatalf("a %v b %v", a.held, b.held)
	}
	if e := lastCompleted(h); e.N != 0 {
		t.Fatalf("eager group withheld %d", e.N)
	}
	if st := h.c.groups["g"].state; st != Stable {
		t.Fatalf("state %v, want Stable", st)
	}
}

func TestWithholding_FollowsReportedOwnershipNotTheProtocolName(t *testing.T) {
	// Both offer [cooperative-sticky, range]; the priority list picks range,
	// an eager protocol. a still reports what it owns, so the coordinator
	// withholds.
	h2 := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1, Priority: []string{"range"}}})
	h2.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h2, "a", "g", []string{"cooperative-sticky", "range"}, []string{"t"})
	a.cooperative = true // reports owned partitions, like a Java consumer in transition
	settle(h2, a)
	if got := h2.c.groups["g"].protocol; got != "range" {
		t.Fatalf("protocol %q, want range from the priority list", got)
	}
	b := newSim(h2, "b", "g", []string{"cooperative-sticky", "range"}, []string{"t"})
	b.join()
	a.heartbeat()
	a.join()
	a.poll()
	b.poll()
	b.sync()
	if count(b.held) != 0 {
		t.Fatalf("b received %v while a reports owning all", b.held)
	}
}

func TestWithholding_StaleClaimsDoNotBlockTheRightfulOwner(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"cooperative-sticky"}, []string{"t"})
	settle(h, a)
	b := newSim(h, "b", "g", []string{"cooperative-sticky"}, []string{"t"})
	b.join()
	settle(h, a, b)
	if count(a.held)+count(b.held) != 4 || h.c.groups["g"].generation < 2 {
		t.Fatalf("setup: a %v b %v", a.held, b.held)
	}
	// z claims every partition from generation 1, which is older than what
	// a and b report: its claim is stale.
	z := newSim(h, "z", "g", []string{"cooperative-sticky"}, []string{"t"})
	z.staleClaim = map[string][]int32{"t": {0, 1, 2, 3}}
	z.join()
	a.heartbeat()
	b.heartbeat()
	a.join()
	b.join()
	for _, s := range []*simClient{a, b, z} {
		s.poll()
		s.sync()
	}
	// Had z's claims counted, every partition would be in conflict and
	// withheld from a and b too. Stale, they are ignored: a and b keep all
	// but the one partition the target moves to z.
	if got := count(a.held) + count(b.held); got != 3 {
		t.Fatalf("a %v b %v after z's stale claim; want them to keep 3", a.held, b.held)
	}
	settle(h, a, b, z)
	if count(a.held)+count(b.held)+count(z.held) != 4 || count(z.held) != 1 {
		t.Fatalf("a %v b %v z %v", a.held, b.held, z.held)
	}
}

func TestWithholding_StaticMemberThatDidNotRejoinStillCountsAsHolder(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	s := newSim(h, "s", "g", []string{"range"}, []string{"t"})
	s.instance = "static-1"
	settle(h, s)
	if count(s.held) != 4 {
		t.Fatalf("s holds %v", s.held)
	}
	// d joins; s is slow and does not rejoin, so the join phase ends by
	// timeout with s kept. s still holds its four partitions (it never
	// heard of the rebalance), so d gets none of them.
	d := newSim(h, "d", "g", []string{"range"}, []string{"t"})
	d.join()
	// s's heartbeat thread keeps its session alive while its poll loop is
	// busy elsewhere: it is told to rejoin but does not, yet.
	for range 7 {
		h.advance(9 * time.Second)
		h.do(s.client, &kmsg.HeartbeatRequest{Version: 4, Group: "g", MemberID: s.memberID, Generation: s.generation, InstanceID: &s.instance})
		d.heartbeat()
	}
	d.poll()
	if d.phase != joined {
		t.Fatalf("d phase %v", d.phase)
	}
	if g := h.c.groups["g"]; g.members[s.memberID] == nil {
		t.Fatal("static member dropped at the end of the join phase")
	}
	d.sync()
	if count(d.held) != 0 {
		t.Fatalf("d received %v while static s still holds them", d.held)
	}
	// s now rejoins (eager: revokes first) and everything settles.
	settle(h, s, d)
	if count(s.held)+count(d.held) != 4 || count(d.held) == 0 {
		t.Fatalf("s %v d %v", s.held, d.held)
	}
}

func TestSync_PendingSyncsFailWhenARebalanceStartsDuringCompletingRebalance(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.autoJobs = false
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	a.join()
	h.advance(0)
	a.poll()
	a.sync()
	if a.phase != syncing {
		t.Fatalf("a phase %v, want a parked sync", a.phase)
	}
	b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
	b.join()
	resp, ok := h.take(a.req)
	if !ok || resp.(*kmsg.SyncGroupResponse).ErrorCode != kerr.RebalanceInProgress.Code {
		t.Fatalf("parked sync: %v %+v", ok, resp)
	}
	// The abandoned job's result is ignored.
	h.runJobs()
	if st := h.c.groups["g"].state; st != PreparingRebalance {
		t.Fatalf("state %v after a stale job", st)
	}
}

func TestCooperative_FollowUpRoundsStopWhenAClientNeverLetsGo(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"cooperative-sticky"}, []string{"t"})
	settle(h, a)
	b := newSim(h, "b", "g", []string{"cooperative-sticky"}, []string{"t"})
	b.join()
	for range 40 {
		h.advance(0)
		for _, s := range []*simClient{a, b} {
			s.poll()
			switch s.phase {
			case idle:
				s.join()
			case joined:
				s.sync()
			case stable:
				s.heartbeat()
			}
			s.poll()
		}
		// a is buggy: it keeps reporting everything and never rejoins by
		// itself.
		a.held = map[string][]int32{"t": {0, 1, 2, 3}}
		if a.phase == idle && h.c.groups["g"].state == Stable {
			a.phase = stable
		}
	}
	followUps := 0
	for _, e := range h.events {
		if e.Kind == EventRebalanceStarted && e.Detail == "KIP-429: hand over withheld partitions" {
			followUps++
		}
	}
	if followUps != maxFollowUps {
		t.Fatalf("%d follow-up rounds, want %d", followUps, maxFollowUps)
	}
	if count(b.held) != 0 {
		t.Fatalf("b got %v although a never let go", b.held)
	}
}

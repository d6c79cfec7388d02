package coordinator

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// restart exports h's coordinator through JSON into a new one, as a
// restarted daemon would, and points h and the given sims at it.
func restart(t testing.TB, h *harness) {
	t.Helper()
	h.absorb(h.call(restartInput{now: h.now, seed: 7}))
}

func TestRestore_StableGroupContinuesWithoutRebalance(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"cooperative-sticky"}, []string{"t"})
	s := newSim(h, "s", "g", []string{"cooperative-sticky"}, []string{"t"})
	s.instance = "si"
	settle(h, a)
	s.join()
	settle(h, a, s)
	before := h.c.Export()
	heldA, heldS := maps.Clone(a.held), maps.Clone(s.held)
	restart(t, h)
	after := h.c.Export()
	if len(after) != 1 || after[0].Generation != before[0].Generation || after[0].State != "Stable" || len(after[0].Members) != 2 {
		t.Fatalf("restored %+v", after)
	}
	h.advance(5 * time.Second)
	a.heartbeat()
	s.heartbeat()
	if a.phase != stable || s.phase != stable {
		t.Fatalf("members asked to rejoin after a restart: %v %v", a.phase, s.phase)
	}
	// A static restart after the daemon restart still gets its assignment
	// back.
	s.crash()
	n := newSim(h, "s2", "g", []string{"cooperative-sticky"}, []string{"t"})
	n.instance = "si"
	n.join()
	n.sync()
	if !maps.EqualFunc(n.held, heldS, slices.Equal) || !maps.EqualFunc(a.held, heldA, slices.Equal) {
		t.Fatalf("after restore: s2 %v (was %v), a %v (was %v)", n.held, heldS, a.held, heldA)
	}
}

func TestRestore_RebalancingGroupRestartsItsJoinPhase(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	h.autoJobs = false
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	a.join()
	h.advance(0)
	a.poll() // CompletingRebalance, job outstanding
	restart(t, h)
	h.jobs = nil
	if st := h.c.groups["g"].state; st != PreparingRebalance {
		t.Fatalf("state %v", st)
	}
	code := h.do(a.client, hbReq("g", a.memberID, a.generation)).(*kmsg.HeartbeatResponse).ErrorCode
	if code == 0 {
		t.Fatal("heartbeat did not ask to rejoin")
	}
	a.phase = idle
	h.autoJobs = true
	settle(h, a)
	if count(a.held) != 4 || a.generation != 2 {
		t.Fatalf("a %v generation %d", a.held, a.generation)
	}
}

func TestRestore_RefusesBadState(t *testing.T) {
	c, _ := New(Config{}, 1)
	bad := [][]GroupState{
		{{Group: ""}},
		{{Group: "g", Members: []MemberState{{MemberID: "m", SessionTimeout: time.Second}, {MemberID: "m", SessionTimeout: time.Second}}}},
		{{Group: "g", Members: []MemberState{{MemberID: "m"}}}},
	}
	for _, s := range bad {
		out, err := c.Restore(t0, s)
		if err == nil {
			t.Errorf("restored %+v", s)
		}
		// A refused group leaves nothing behind: no member in the index of
		// clients, no timer.
		if err := checkBookkeeping(c, out.NextDeadline); err != nil {
			t.Errorf("after refusing %+v: %v", s, err)
		}
		delete(c.groups, "g")
	}
}

func TestExportGroup_AndSummariesAgreeWithExport(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g1", []string{"range"}, []string{"t"})
	b := newSim(h, "b", "g1", []string{"range"}, []string{"t"})
	c := newSim(h, "c", "g2", []string{"range"}, []string{"t"})
	settle(h, a, b, c)
	all := h.c.Export()
	sums := h.c.Summaries()
	if len(all) != 2 || len(sums) != len(all) {
		t.Fatalf("export %d groups, summaries %d, want 2 each", len(all), len(sums))
	}
	for i, want := range all {
		got, ok := h.c.ExportGroup(want.Group)
		if !ok {
			t.Fatalf("ExportGroup(%q) found nothing", want.Group)
		}
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if string(gj) != string(wj) {
			t.Errorf("ExportGroup(%q) = %s, Export has %s", want.Group, gj, wj)
		}
		s := sums[i]
		if s.Group != want.Group || s.State != want.State || s.Generation != want.Generation || s.Members != len(want.Members) {
			t.Errorf("summary %+v disagrees with export of %s (%s, gen %d, %d members)", s, want.Group, want.State, want.Generation, len(want.Members))
		}
	}
	if _, ok := h.c.ExportGroup("nope"); ok {
		t.Error("ExportGroup found a group that does not exist")
	}
}

// TestSummary_MeasuresTheAssignmentTheMembersHold: a summary carries the
// counts of the assignment the group holds, as its completion event gave
// them, and none once the group is Empty: nobody holds anything then.
func TestSummary_MeasuresTheAssignmentTheMembersHold(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	// An assignor that hands out only the first partition leaves three
	// unassigned.
	h.assignors["range"] = func(req *abi.Request) (*abi.Response, error) {
		return &abi.Response{Members: []abi.MemberAssignment{{Member: 0, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{0}}}}}}, nil
	}
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
	settle(h, a, b)
	var done *Event
	for i := range h.events {
		if h.events[i].Kind == EventAssignmentCompleted {
			done = &h.events[i]
		}
	}
	if done == nil {
		t.Fatal("no assignment completed")
	}
	s, ok := h.c.Summary("g")
	if !ok {
		t.Fatal("Summary found no group g")
	}
	if s.Unassigned != 3 || s.Unassigned != done.Unassigned || s.RackLocal != done.RackLocal || s.RackKnown != done.RackKnown {
		t.Errorf("summary %+v, want the counts of the completed assignment %+v (3 unassigned)", s, *done)
	}
	if all := h.c.Summaries(); len(all) != 1 || all[0] != s {
		t.Errorf("Summaries %+v, want [%+v]", all, s)
	}
	a.leave()
	b.leave()
	h.advance(0)
	s, _ = h.c.Summary("g")
	if s.State != Empty.String() || s.Members != 0 || s.Unassigned != 0 || s.RackLocal != 0 || s.RackKnown != 0 {
		t.Errorf("summary of the emptied group %+v, want Empty with no members and no assignment counts", s)
	}
	if _, ok := h.c.Summary("nope"); ok {
		t.Error("Summary found a group that does not exist")
	}
}

// TestState_OwnsItsData: what the coordinator keeps of a plugin's answer and
// of restored records is its own. A driver that reuses the response it
// handed to AssignmentDone, or the records it handed to Restore, must not
// change the group's state, its export or the next request's Previous.
func TestState_OwnsItsData(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.autoJobs = false
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	a.join()
	h.advance(0)
	if len(h.jobs) != 1 {
		t.Fatalf("%d jobs", len(h.jobs))
	}
	j := h.jobs[0]
	h.jobs = nil
	resp, err := h.assignors["range"](j.Request)
	if err != nil {
		t.Fatal(err)
	}
	h.absorb(h.c.AssignmentDone(h.now, j.ID, resp, nil))
	before, _ := json.Marshal(h.c.Export())
	for _, ma := range resp.Members {
		for _, tp := range ma.Partitions {
			for i := range tp.Partitions {
				tp.Partitions[i] = 99
			}
		}
	}
	if after, _ := json.Marshal(h.c.Export()); string(after) != string(before) {
		t.Fatalf("changing the plugin's response after AssignmentDone changed the state:\n%s\n%s", before, after)
	}

	var states []GroupState
	if err := json.Unmarshal(before, &states); err != nil {
		t.Fatal(err)
	}
	c, err := New(h.c.cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Restore(h.now, states); err != nil {
		t.Fatal(err)
	}
	restored, _ := json.Marshal(c.Export())
	for _, ps := range states[0].Members[0].Assigned {
		for i := range ps {
			ps[i] = 99
		}
	}
	if after, _ := json.Marshal(c.Export()); string(after) != string(restored) {
		t.Fatalf("changing the records after Restore changed the state:\n%s\n%s", restored, after)
	}
}

// checkBookkeeping compares what the coordinator keeps to answer without
// scanning (its queues of deadlines, the counts of members awaiting join,
// the index of members by client) with a scan of every group and member,
// and next, an Output's NextDeadline, with the earliest deadline the scan
// finds.
func checkBookkeeping(c *Coordinator, next time.Time) error {
	var earliestAll time.Time
	clients := 0
	for _, id := range c.sortedGroupIDs() {
		g := c.groups[id]
		var want time.Time
		consider := func(t time.Time) {
			if !t.IsZero() && (want.IsZero() || t.Before(want)) {
				want = t
			}
		}
		consider(g.joinDeadline)
		consider(g.syncDeadline)
		consider(g.metadataDeadline)
		consider(g.assignDeadline)
		for _, pm := range g.pending.byID {
			consider(pm.deadline.at)
		}
		joining, sessions := 0, 0
		for mid, m := range g.members {
			consider(m.heartbeatDeadline.at)
			if m.id != mid {
				return fmt.Errorf("group %s: member %s filed as %s", id, m.id, mid)
			}
			if m.joinWait != nil {
				joining++
			}
			if !m.heartbeatDeadline.at.IsZero() {
				sessions++
				if p := m.heartbeatDeadline.pos; p == 0 || p > g.sessions.len() || g.sessions.slots[p-1].x != m {
					return fmt.Errorf("group %s: member %s's session deadline is not queued", id, mid)
				}
			}
			if ms := c.clients.members(m.clientID, m.host); m.clientPos >= len(ms) || ms[m.clientPos] != (clientMember{g, m}) {
				return fmt.Errorf("group %s: member %s is not indexed under client %q %q", id, mid, m.clientID, m.host)
			}
			clients++
		}
		consider(g.retentionEnd(c.cfg.EmptyGroupRetention))
		if g.joining != joining {
			return fmt.Errorf("group %s: %d members counted as awaiting join, %d are", id, g.joining, joining)
		}
		if g.votesValid {
			votes := map[string]int{}
			cand := g.candidates()
			for _, m := range g.members {
				for _, p := range m.protocols {
					if cand[p.Name] {
						votes[p.Name]++
						break
					}
				}
			}
			if !maps.Equal(votes, g.votes) {
				return fmt.Errorf("group %s: votes kept %v, members vote %v", id, g.votes, votes)
			}
		}
		if g.sessions.len() != sessions {
			return fmt.Errorf("group %s: %d sessions queued, %d members have one", id, g.sessions.len(), sessions)
		}
		if g.pending.queue.len() != g.pending.len() {
			return fmt.Errorf("group %s: %d pending ids queued of %d", id, g.pending.queue.len(), g.pending.len())
		}
		if err := checkHeap(&g.sessions); err != nil {
			return fmt.Errorf("group %s sessions: %w", id, err)
		}
		if err := checkHeap(&g.pending.queue); err != nil {
			return fmt.Errorf("group %s pending ids: %w", id, err)
		}
		if got := g.nextDeadline(c.cfg.EmptyGroupRetention); !got.Equal(want) {
			return fmt.Errorf("group %s: next deadline %v from the queues, %v from a scan", id, got, want)
		}
		switch queued := g.next.pos != 0; {
		case want.IsZero() && queued:
			return fmt.Errorf("group %s queued at %v with no deadline", id, g.next.at)
		case !want.IsZero() && (!queued || !g.next.at.Equal(want)):
			return fmt.Errorf("group %s: queued %v at %v, its next deadline is %v", id, queued, g.next.at, want)
		}
		if g.touched {
			return fmt.Errorf("group %s still marked touched", id)
		}
		if !want.IsZero() && (earliestAll.IsZero() || want.Before(earliestAll)) {
			earliestAll = want
		}
	}
	for _, s := range c.timers.slots {
		if g := s.x; c.groups[g.id] != g {
			return fmt.Errorf("group %s queued but not held", g.id)
		}
	}
	if err := checkHeap(&c.timers); err != nil {
		return fmt.Errorf("groups: %w", err)
	}
	indexed := 0
	for _, ms := range c.clients.byClient {
		if len(ms) == 0 {
			return errors.New("an empty client in the index")
		}
		indexed += len(ms)
	}
	if indexed != clients {
		return fmt.Errorf("%d members indexed by client, %d held", indexed, clients)
	}
	if len(c.touched) != 0 {
		return fmt.Errorf("%d groups left on the touched list", len(c.touched))
	}
	if !next.Equal(earliestAll) {
		return fmt.Errorf("NextDeadline %v, the earliest deadline of any group is %v", next, earliestAll)
	}
	return nil
}

// checkHeap verifies a queue's positions and heap order.
func checkHeap[T timed](q *timerQueue[T]) error {
	for i := range q.slots {
		s := &q.slots[i]
		if t := s.x.timer(); t.pos != i+1 || !t.at.Equal(s.at) {
			return fmt.Errorf("entry %d records position %d and deadline %v, queued at %v", i, t.pos-1, t.at, s.at)
		}
		if s.at.IsZero() {
			return fmt.Errorf("entry %d queued with no deadline", i)
		}
		if i > 0 && q.before(s, &q.slots[(i-1)/2]) {
			return fmt.Errorf("entry %d due before its parent", i)
		}
	}
	return nil
}

// TestUnload_ParkedRequestsAreToldToLookAgainAndNothingEnds: a group given
// up mid-rebalance answers its parked JoinGroup and SyncGroup
// NOT_COORDINATOR, says nothing of a state change (no Dead, so no
// tombstone is saved), and is held no more; the assignment it was running
// is stale when it completes.
func TestUnload_ParkedRequestsAreToldToLookAgainAndNothingEnds(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.autoJobs = false
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	a.join()
	for range 3 {
		h.advance(0)
		a.poll()
	}
	if a.phase != joined {
		t.Fatalf("a: phase %v", a.phase)
	}
	a.sync() // parked: the assignment has not come
	if _, answered := h.replies[a.req]; answered || len(h.jobs) != 1 {
		t.Fatalf("setup: sync answered %v, %d jobs", answered, len(h.jobs))
	}
	b := newSim(h, "b", "h", []string{"range"}, []string{"t"})
	b.join()
	b.poll() // b's group "h" stays

	out := h.c.Unload(h.now, []string{"g", "unknown"})
	h.absorb(out)
	for _, e := range out.Events {
		if e.Group == "g" && e.Kind != EventUnloaded {
			t.Errorf("unloading said %+v", e)
		}
	}
	if len(out.Events) != 1 || out.Events[0].Kind != EventUnloaded || out.Events[0].Generation != 1 {
		t.Errorf("events %+v, want one EventUnloaded of g at generation 1", out.Events)
	}
	r, ok := h.take(a.req)
	if !ok || r.(*kmsg.SyncGroupResponse).ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("the parked SyncGroup: %+v, %v; want NOT_COORDINATOR", r, ok)
	}
	if _, ok := h.c.Summary("g"); ok {
		t.Error("g is still held")
	}
	if _, ok := h.c.Summary("h"); !ok {
		t.Error("h, not unloaded, is gone")
	}
	j := h.jobs[0]
	done := h.c.AssignmentDone(h.now, j.ID, &abi.Response{}, nil)
	if len(done.Events) != 1 || done.Events[0].Kind != EventStaleAssignment || len(done.Replies) != 0 {
		t.Errorf("the unloaded group's assignment completing: %+v", done)
	}
	if err := checkBookkeeping(h.c, done.NextDeadline); err != nil {
		t.Fatal(err)
	}
}

// TestUnload_TheNextOwnerContinuesWithoutRebalance: what one coordinator
// exported of a stable group, another restores after the first unloads it,
// and the members heartbeat the new one at their generation with no error.
func TestUnload_TheNextOwnerContinuesWithoutRebalance(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"cooperative-sticky"}, []string{"t"})
	b := newSim(h, "b", "g", []string{"cooperative-sticky"}, []string{"t"})
	settle(h, a, b)
	gen := a.generation
	states := h.c.Export()
	h.absorb(h.c.Unload(h.now, []string{"g"}))
	h.absorb(h.call(restartInput{now: h.now, seed: 9})) // the next owner: a new coordinator
	restored, err := h.c.Restore(h.now, states)
	if err != nil {
		t.Fatal(err)
	}
	h.savedOf = nil // what was restored is what was saved
	h.absorb(restored)
	for _, s := range []*simClient{a, b} {
		s.heartbeat()
		if s.phase != stable || s.generation != gen {
			t.Errorf("%s after the move: phase %v generation %d, want stable at %d", s.name, s.phase, s.generation, gen)
		}
	}
}

package e2e

import (
	"maps"
	"testing"
)

// javaStaticRestart restarts one static member (group.instance.id) of a
// cooperative group: SIGTERM, which for a static member commits but sends
// no LeaveGroup, then a new process with the same instance id well inside
// the session timeout. There is no rebalance: the generation stays, the
// other members see no callback at all, and the new process gets the old
// one's partitions back under a new member id and resumes at its commits.
// A second member then restarts offering [CooperativeStickyAssignor,
// RangeAssignor], as in a rolling upgrade: the selected protocol does not
// change, so neither does anything else.
func (r *javaRig) javaStaticRestart(t *testing.T) {
	r.record(t, "cooperative-sticky, static members")
	const group, topic = "java-static", "java-static"
	pl := r.javaTopic(t, topic, javaParts)
	start := func(name string) *procMember {
		return r.startJava(t, javaSpec{group: group, topic: topic, assignors: javaCoop,
			clientID: group + "-" + name, instance: group + "-" + name, rack: "az-a",
			// Room for a JVM to start on a loaded machine.
			props: []string{"session.timeout.ms=30000"}})
	}
	a := start("a")
	r.javaSettle(t, group, topic, pl, javaProtoCoop, a)
	b := start("b")
	r.javaSettle(t, group, topic, pl, javaProtoCoop, a, b)
	c := start("c")
	g0 := r.javaSettle(t, group, topic, pl, javaProtoCoop, a, b, c)
	produce(r.ctx, t, r.c.Addrs(), topic, 120)
	mustReadAllToEnd(r.ctx, t, r.direct, topic, javaParts, []*procMember{a, b, c})

	// restart bounces one static member into a new process offering
	// assignors, and checks that nobody else noticed.
	restart := func(old *procMember, name, assignors string, others []*procMember, g0 adminGroup) *procMember {
		t.Helper()
		held, marks, oldID := old.ownedNow(), memberMarks(others), javaMemberID(g0, old.clientID)
		old.stop()
		m := r.startJava(t, javaSpec{group: group, topic: topic, assignors: assignors,
			clientID: group + "-" + name, instance: group + "-" + name, rack: "az-a",
			props: []string{"session.timeout.ms=30000"}})
		g, err := settledJava(r.ctx, r.d, group, topic, javaParts, append([]*procMember{m}, others...))
		if err != nil {
			t.Fatal(err)
		}
		checkBackInPlace(t, g0, g, m, held)
		if id := javaMemberID(g, m.clientID); id == oldID || id == "" {
			t.Errorf("the restarted member's id is %q, the old one's %q: the new process did not join as a new incarnation", id, oldID)
		}
		for i, o := range others {
			if evs := o.eventsSince(marks[i]); len(evs) > 0 {
				t.Errorf("%s saw callbacks during a static member's restart: %+v", o.clientID, evs)
			}
		}
		return m
	}
	b2 := restart(b, "b", javaCoop, []*procMember{a, c}, g0)
	produce(r.ctx, t, r.c.Addrs(), topic, 120)
	// A rolling upgrade bounces static members with a new assignor list.
	// As long as the protocol the group would select stays the same, Kafka
	// (KIP-345) hands the member its assignment back without a rebalance.
	c2 := restart(c, "c", javaCoopOrRange, []*procMember{a, b2}, g0)
	produce(r.ctx, t, r.c.Addrs(), topic, 120)
	r.finish(t, group, topic, javaParts, []*procMember{a, b, b2, c, c2})
}

// javaMemberID is the member id the gateway shows for clientID, or "".
func javaMemberID(g adminGroup, clientID string) string {
	for _, m := range g.Members {
		if m.ClientID == clientID {
			return m.MemberID
		}
	}
	return ""
}

// javaCommitsSurviveRestart runs one consumer at a time in a range group.
// The first reads everything and stops cleanly, committing through the
// gateway; the second, a new process, must start exactly at those commits.
// The second is then killed without committing, and the third must read
// again exactly what the second read, and nothing before it. The commits
// are read back both through the gateway and straight from the broker.
func (r *javaRig) javaCommitsSurviveRestart(t *testing.T) {
	r.record(t, "range")
	const group, topic, parts = "java-commits", "java-commits", 4
	pl := r.javaTopic(t, topic, parts)
	start := func(n string) *procMember {
		return r.startJava(t, javaSpec{group: group, topic: topic, assignors: "RangeAssignor", clientID: group + "-" + n})
	}
	settle := func(m *procMember) {
		t.Helper()
		g, err := settledJava(r.ctx, r.d, group, topic, parts, []*procMember{m})
		if err != nil {
			t.Fatal(err)
		}
		r.checkAssignment(t, g, topic, pl, []*procMember{m})
	}
	// produceTo appends records and returns the new end offsets.
	produceTo := func() map[int32]int64 {
		t.Helper()
		produce(r.ctx, t, r.c.Addrs(), topic, 80)
		end, err := endOffsets(r.ctx, r.direct, topic, parts)
		if err != nil {
			t.Fatal(err)
		}
		return end
	}
	committedAt := func(want map[int32]int64, when string) {
		t.Helper()
		for _, side := range []struct {
			name string
			cl   func() map[int32]int64
		}{
			{"straight from the broker", func() map[int32]int64 {
				got, err := committedOffsets(r.ctx, r.direct, group, topic, parts)
				if err != nil {
					t.Fatal(err)
				}
				return got
			}},
			{"through the gateway", func() map[int32]int64 {
				got, err := committedOffsets(r.ctx, r.gw, group, topic, parts)
				if err != nil {
					t.Fatal(err)
				}
				return got
			}},
		} {
			if got := side.cl(); !maps.Equal(got, want) {
				t.Errorf("%s, the commits read %s are %v; want %v", when, side.name, got, want)
			}
		}
	}

	end1 := produceTo()
	m1 := start("1")
	settle(m1)
	mustReadAllOnce(r.ctx, t, []*procMember{m1}, end1)
	m1.stop()
	committedAt(end1, "after a clean stop")

	end2 := produceTo()
	m2 := start("2")
	settle(m2)
	// Read once across both processes: the second began at the commits.
	mustReadAllOnce(r.ctx, t, []*procMember{m1, m2}, end2)
	m2.crash()
	committedAt(end1, "after a crash")

	end3 := produceTo()
	m3 := start("3")
	settle(m3) // once the crashed member's session has expired
	// Across the first and third: the third read everything past the
	// first's commits once, so what it read again is exactly what the
	// crashed second process read without committing.
	mustReadAllOnce(r.ctx, t, []*procMember{m1, m3}, end3)
	for p, offs := range m2.reads() {
		for _, o := range offs {
			if o < end1[p] || o >= end2[p] {
				t.Errorf("the second process read %d@%d, outside what was past the commits [%d, %d)", p, o, end1[p], end2[p])
			}
		}
	}
	m3.stop()
	committedAt(end3, "after the third process stopped")
	if err := javaNoDoubleOwnership([]*procMember{m1, m2, m3}); err != nil {
		t.Error(err)
	}
}

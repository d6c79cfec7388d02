package e2e

import (
	"fmt"
	"slices"
	"testing"
)

// The Java assignor lists of a rolling upgrade from eager range to
// cooperative-sticky. A member's rebalance protocol is the newest one that
// all its assignors support, so both mixed lists run eager.
const (
	javaCoop        = "CooperativeStickyAssignor"
	javaCoopOrRange = "CooperativeStickyAssignor,RangeAssignor"
	javaRangeOrCoop = "RangeAssignor,CooperativeStickyAssignor"
	javaProtoCoop   = "cooperative-sticky"
	javaProtoRange  = "range"
	javaParts       = 6
)

// javaSettle waits until group is stable with exactly ms, then checks the
// protocol (when want is set) both in the admin API and through
// DescribeGroups on the gateway, and the assignment against the serving
// plugin.
func (r *javaRig) javaSettle(t *testing.T, group, topic string, pl placement, want string, ms ...*procMember) adminGroup {
	t.Helper()
	g, err := settledJava(r.ctx, r.d, group, topic, javaParts, ms)
	if err != nil {
		t.Fatal(err)
	}
	if want != "" && (g.Protocol != want || g.Assignor != want) {
		t.Errorf("generation %d: protocol %q served by %q; want %q chosen and serving", g.Generation, g.Protocol, g.Assignor, want)
	}
	dg, err := describeGroup(r.ctx, r.gw, group)
	if err == nil && dg.ErrorCode != 0 {
		err = fmt.Errorf("describe group %s: error code %d", group, dg.ErrorCode)
	}
	if err != nil {
		t.Fatal(err)
	}
	if dg.ProtocolType != "consumer" || dg.Protocol != g.Protocol || len(dg.Members) != len(ms) {
		t.Errorf("DescribeGroups through the gateway: type %q protocol %q with %d members; the admin API shows %q with %d",
			dg.ProtocolType, dg.Protocol, len(dg.Members), g.Protocol, len(g.Members))
	}
	r.checkAssignment(t, g, topic, pl, ms)
	t.Logf("generation %d: %s served by %s: %v", g.Generation, g.Protocol, g.Assignor, javaByClient(g, topic))
	return g
}

// javaByClient is g's assignment of topic by client id, for logs.
func javaByClient(g adminGroup, topic string) map[string][]int32 {
	out := map[string][]int32{}
	for _, m := range g.Members {
		out[m.ClientID] = slices.Sorted(slices.Values(m.Assignment[topic]))
	}
	return out
}

// javaRollingUpgrade puts a Java consumer configured with
// [CooperativeStickyAssignor, RangeAssignor], the middle step of a rolling
// upgrade, which therefore rebalances eagerly, into a group of members that
// offer only CooperativeStickyAssignor. Every member offers
// cooperative-sticky, so the vote picks it. The eager member reports
// nothing owned when it rejoins; the gateway must still never hand a
// partition to one member while another holds it, and the cooperative
// members must keep what does not move.
func (r *javaRig) javaRollingUpgrade(t *testing.T) {
	r.record(t, "cooperative-sticky + [cooperative-sticky, range] (eager: rolling upgrade)")
	const group, topic = "java-upgrade", "java-upgrade"
	pl := r.javaTopic(t, topic, javaParts)
	start := func(id, assignors string) *procMember {
		return r.startJava(t, javaSpec{group: group, topic: topic, assignors: assignors, clientID: id, rack: "az-a"})
	}
	settle := func(ms ...*procMember) adminGroup {
		t.Helper()
		return r.javaSettle(t, group, topic, pl, javaProtoCoop, ms...)
	}

	a := start("java-upgrade-a", javaCoop)
	settle(a)
	b := start("java-upgrade-b", javaCoop)
	settle(a, b)
	produce(r.ctx, t, r.c.Addrs(), topic, 120)

	marks := memberMarks([]*procMember{a, b})
	u := start("java-upgrade-u", javaCoopOrRange)
	g := settle(a, b, u)
	checkUnmovedKept(t, topic, []*procMember{a, b}, marks)
	if len(u.ownedNow()) == 0 {
		t.Errorf("the upgrading member got nothing: %v", adminAssignment(g))
	}
	produce(r.ctx, t, r.c.Addrs(), topic, 120)

	held, marks := u.ownedNow(), memberMarks([]*procMember{b, u})
	a.stop()
	settle(b, u)
	checkUnmovedKept(t, topic, []*procMember{b}, marks[:1])
	// The member runs eager: on a rebalance it gives up everything before
	// rejoining, even what it gets back. Otherwise this would not test a
	// mixed group at all.
	if rv := u.revokedSince(marks[1]); !javaIsSubset(held, rv) {
		t.Errorf("the [cooperative-sticky, range] member revoked %v of %v when a member left: it did not run eager", rv, held)
	}
	produce(r.ctx, t, r.c.Addrs(), topic, 120)

	r.finish(t, group, topic, javaParts, []*procMember{a, b, u})
}

// javaIsSubset reports whether every element of sub is in set.
func javaIsSubset(sub, set []int32) bool {
	for _, x := range sub {
		if !slices.Contains(set, x) {
			return false
		}
	}
	return true
}

// javaProtocolVote mixes members that prefer range ([RangeAssignor,
// CooperativeStickyAssignor]) with members that prefer cooperative-sticky
// ([CooperativeStickyAssignor, RangeAssignor]). Kafka picks, among the
// protocols every member supports, the one most members list first: range
// while the range-first members are the majority, cooperative-sticky once
// they are not. The test reads the choice through DescribeGroups on the
// gateway; the group is served by the chosen protocol's plugin, and as
// every member is eager, no partition ever has two owners.
func (r *javaRig) javaProtocolVote(t *testing.T) {
	r.record(t, "[range, cooperative-sticky] + [cooperative-sticky, range] (vote)")
	const group, topic = "java-vote", "java-vote"
	pl := r.javaTopic(t, topic, javaParts)
	start := func(id, assignors string) *procMember {
		return r.startJava(t, javaSpec{group: group, topic: topic, assignors: assignors, clientID: id})
	}
	settle := func(want string, ms ...*procMember) adminGroup {
		t.Helper()
		return r.javaSettle(t, group, topic, pl, want, ms...)
	}

	r1 := start("java-vote-r1", javaRangeOrCoop)
	r2 := start("java-vote-r2", javaRangeOrCoop)
	c1 := start("java-vote-c1", javaCoopOrRange)
	settle(javaProtoRange, r1, r2, c1) // two votes to one
	produce(r.ctx, t, r.c.Addrs(), topic, 120)

	c2 := start("java-vote-c2", javaCoopOrRange)
	// Two votes each: Kafka breaks the tie arbitrarily, so only the
	// assignment is checked, against whichever plugin serves.
	settle("", r1, r2, c1, c2)
	produce(r.ctx, t, r.c.Addrs(), topic, 120)

	r1.stop()
	settle(javaProtoCoop, r2, c1, c2) // two votes to one
	produce(r.ctx, t, r.c.Addrs(), topic, 120)

	r.finish(t, group, topic, javaParts, []*procMember{r1, r2, c1, c2})
}

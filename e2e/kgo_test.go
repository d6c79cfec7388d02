package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/plugins/sticky"
)

// rackedConfig is an embedded cluster of three brokers, one per rack, and
// one topic of six partitions with a single replica each, so every
// partition lives in exactly one rack (partition p on broker p % 3).
const rackedConfig = `
[server]
listen = "127.0.0.1:0"
advertised_host = "127.0.0.1"
broker_port_base = 0
admin_listen = "127.0.0.1:0"

[upstream]
metadata_refresh = "1s"
[upstream.embedded]
brokers = 3
topics = ["events:6:1"]
[upstream.broker_racks]
"0" = "az-a"
"1" = "az-b"
"2" = "az-c"

[[groups]]
match = "*"
initial_rebalance_delay = "0s"
min_session_timeout = "1s"
`

var rackedBrokers = map[int32]string{0: "az-a", 1: "az-b", 2: "az-c"}

// settled waits until the gateway shows group Stable with exactly the rig
// consumers named in want, and each of them holds, by its own callbacks,
// exactly what the gateway assigned it. It returns the admin view.
func settled(ctx context.Context, d *daemon, group string, l *kfakegroup.Ledger, want []string) (adminGroup, error) {
	var g adminGroup
	err := kfakegroup.WaitFor(ctx, func() error {
		var err error
		if g, err = d.group(ctx, group); err != nil {
			return err
		}
		if g.State != "Stable" || len(g.Members) != len(want) {
			return fmt.Errorf("group %s is %s with %d members, want Stable with %d", group, g.State, len(g.Members), len(want))
		}
		owned := l.Owned()
		for _, m := range g.Members {
			name, ok := strings.CutPrefix(m.ClientID, "kfakegroup-")
			if !ok || !slices.Contains(want, name) {
				return fmt.Errorf("member %s (client %s) is not one of %v", m.MemberID, m.ClientID, want)
			}
			var assigned []kfakegroup.TopicPartition
			for t, ps := range m.Assignment {
				for _, p := range ps {
					assigned = append(assigned, kfakegroup.TopicPartition{Topic: t, Partition: p})
				}
			}
			slices.SortFunc(assigned, func(a, b kfakegroup.TopicPartition) int { return strings.Compare(a.String(), b.String()) })
			held := slices.Clone(owned[name])
			slices.SortFunc(held, func(a, b kfakegroup.TopicPartition) int { return strings.Compare(a.String(), b.String()) })
			if !slices.Equal(assigned, held) {
				return fmt.Errorf("%s holds %v but the gateway assigned %v", name, held, assigned)
			}
		}
		return kfakegroup.NoSharedOwnership(owned)
	})
	return g, err
}

// consumeAll produces n records with the rig's producer (its ledger counts
// them) and waits until the rig has consumed every record produced so far.
func consumeAll(ctx context.Context, t *testing.T, rig *kfakegroup.Rig, n int) {
	t.Helper()
	if err := rig.Produce(ctx, "events", n); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.WaitFor(ctx, kfakegroup.AllConsumed(rig.Ledger())); err != nil {
		t.Fatal(err)
	}
}

// rackOf returns the rack of the broker that leads partition p of topic
// (with one replica, the only one) in rackedConfig.
func rackOf(pl map[string]placement, topic string, p int32) string {
	return rackedBrokers[pl[topic].leaders[p]]
}

// TestKgo_CooperativeStickyKeepsRackLocalityThroughJoinAndLeave runs kgo
// cooperative-sticky consumers that send their rack (broker racks come from
// [upstream.broker_racks]): with one member per rack each holds exactly
// its rack's partitions; after a join and after a leave the gateway hands
// out what the cooperative-sticky plugin computes from what each member
// owned; partitions that stay put are never revoked; and every record is
// consumed exactly once, with the commits reaching the upstream.
func TestKgo_CooperativeStickyKeepsRackLocalityThroughJoinAndLeave(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 90*time.Second)
	d := startDaemon(t, t.TempDir(), rackedConfig)
	const group = "coop-racks"
	rig := kfakegroup.NewRig([]string{d.bootstrap}, group, []string{"events"}, nil)
	defer rig.Close(context.Background())
	l := rig.Ledger()
	coop := []kgo.GroupBalancer{kgo.CooperativeStickyBalancer()}
	racks := map[string]string{"a1": "az-a", "b1": "az-b", "c1": "az-c", "a2": "az-a"}
	cl := adminClient(t, []string{d.bootstrap})
	pl, err := topicPlacement(ctx, cl, "events")
	if err != nil {
		t.Fatal(err)
	}
	start := func(name string) {
		if _, err := rig.Start(name, kfakegroup.ConsumerOptions{Balancers: coop, Rack: racks[name]}); err != nil {
			t.Fatal(err)
		}
	}
	rackLocal := func(g adminGroup) {
		t.Helper()
		for _, m := range g.Members {
			for _, p := range m.Assignment["events"] {
				if r := rackOf(pl, "events", p); r != m.Rack {
					t.Errorf("member %s in rack %q holds events/%d, which lives in %s; assignment %v", m.ClientID, m.Rack, p, r, adminAssignment(g))
				}
			}
			if m.Rack != racks[strings.TrimPrefix(m.ClientID, "kfakegroup-")] {
				t.Errorf("member %s has rack %q in the gateway, but sent %q", m.ClientID, m.Rack, racks[strings.TrimPrefix(m.ClientID, "kfakegroup-")])
			}
		}
	}

	// With two members in one rack, stickiness comes before rack locality
	// (as in Kafka), so from then on the check is that the gateway handed
	// out what the plugin computes from what each member owned.
	asPlugin := func(g adminGroup, before map[string][]kfakegroup.TopicPartition, gen int32) {
		t.Helper()
		owned := map[string][]kfakegroup.TopicPartition{}
		for name, tps := range before {
			owned["kfakegroup-"+name] = tps
		}
		want, err := expected(g, sticky.AssignCooperative, pl, rackedBrokers, owned, gen)
		if err != nil {
			t.Fatal(err)
		}
		if got := adminAssignment(g); !sameAssignment(got, want) {
			t.Errorf("gateway assigned %v; cooperative-sticky computes %v from %v", got, want, before)
		}
	}

	for _, n := range []string{"a1", "b1", "c1"} {
		start(n)
	}
	g, err := settled(ctx, d, group, l, []string{"a1", "b1", "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Protocol != "cooperative-sticky" {
		t.Errorf("protocol %q, want cooperative-sticky", g.Protocol)
	}
	// One member per rack: kgo's own balancer knows no broker racks, so
	// only the gateway's rack-aware plugin gives each its rack's two
	// partitions.
	rackLocal(g)
	consumeAll(ctx, t, rig, 300)

	before, mark, gen := l.Owned(), l.Mark(), g.Generation
	start("a2")
	g, err = settled(ctx, d, group, l, []string{"a1", "b1", "c1", "a2"})
	if err != nil {
		t.Fatal(err)
	}
	asPlugin(g, before, gen)
	if len(l.Owned()["a2"]) == 0 {
		t.Errorf("the joining member got nothing: %v", l.Owned())
	}
	unmoved := kfakegroup.Unmoved(before, l.Owned())
	if len(unmoved) < 4 {
		t.Errorf("only %v stayed put when one member joined six partitions over three", unmoved)
	}
	if err := kfakegroup.NoRevocationOf(l, mark, unmoved); err != nil {
		t.Error(err)
	}
	consumeAll(ctx, t, rig, 300)

	before, mark, gen = l.Owned(), l.Mark(), g.Generation
	if err := rig.Consumers()["b1"].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if g, err = settled(ctx, d, group, l, []string{"a1", "c1", "a2"}); err != nil {
		t.Fatal(err)
	}
	delete(before, "b1")
	asPlugin(g, before, gen)
	unmoved = kfakegroup.Unmoved(before, l.Owned())
	if err := kfakegroup.NoRevocationOf(l, mark, unmoved); err != nil {
		t.Error(err)
	}
	consumeAll(ctx, t, rig, 300)

	if err := rig.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.AllConsumedOnce(l); err != nil {
		t.Error(err)
	}
	if err := checkCommittedAtEnd(ctx, cl, group, "events", 6); err != nil {
		t.Error(err)
	}
}

// TestKgo_RangeGroupGetsWhatTheRangePluginComputes runs kgo range
// consumers (no rack sent) through a join and a leave: after every
// rebalance the gateway's assignment, and what each consumer holds, equal
// the range assignor's answer for those members, and every record is
// consumed exactly once.
func TestKgo_RangeGroupGetsWhatTheRangePluginComputes(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 90*time.Second)
	d := startDaemon(t, t.TempDir(), rackedConfig)
	const group = "ranged"
	rig := kfakegroup.NewRig([]string{d.bootstrap}, group, []string{"events"}, nil)
	defer rig.Close(context.Background())
	l := rig.Ledger()
	cl := adminClient(t, []string{d.bootstrap})
	pl, err := topicPlacement(ctx, cl, "events")
	if err != nil {
		t.Fatal(err)
	}
	check := func(g adminGroup) {
		t.Helper()
		want, err := expected(g, rangeassignor.Assign, pl, rackedBrokers, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := adminAssignment(g); !sameAssignment(got, want) {
			t.Errorf("gateway assigned %v; range computes %v", got, want)
		}
		if g.Protocol != "range" || g.Assignor != "range" {
			t.Errorf("protocol %q assignor %q, want range and range", g.Protocol, g.Assignor)
		}
	}
	for _, n := range []string{"a", "b"} {
		if _, err := rig.Start(n, kfakegroup.ConsumerOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	g, err := settled(ctx, d, group, l, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	check(g)
	consumeAll(ctx, t, rig, 300)

	if _, err := rig.Start("c", kfakegroup.ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}
	if g, err = settled(ctx, d, group, l, []string{"a", "b", "c"}); err != nil {
		t.Fatal(err)
	}
	check(g)
	consumeAll(ctx, t, rig, 300)

	if err := rig.Consumers()["a"].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if g, err = settled(ctx, d, group, l, []string{"b", "c"}); err != nil {
		t.Fatal(err)
	}
	check(g)
	consumeAll(ctx, t, rig, 300)

	if err := rig.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.AllConsumedOnce(l); err != nil {
		t.Error(err)
	}
	if err := checkCommittedAtEnd(ctx, cl, group, "events", 6); err != nil {
		t.Error(err)
	}
}

// TestKgo_StaticMemberRestartCausesNoRebalance restarts one static member
// (closed without LeaveGroup, back with the same instance id inside its
// session timeout): the generation stays, nobody's partitions move, and the
// returning member gets its old partitions back.
func TestKgo_StaticMemberRestartCausesNoRebalance(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 90*time.Second)
	d := startDaemon(t, t.TempDir(), rackedConfig)
	const group = "static"
	rig := kfakegroup.NewRig([]string{d.bootstrap}, group, []string{"events"}, nil)
	defer rig.Close(context.Background())
	l := rig.Ledger()
	cl := adminClient(t, []string{d.bootstrap})
	opts := func(name string) kfakegroup.ConsumerOptions {
		return kfakegroup.ConsumerOptions{
			Balancers:      []kgo.GroupBalancer{kgo.CooperativeStickyBalancer()},
			InstanceID:     "instance-" + name,
			SessionTimeout: 10 * time.Second,
		}
	}
	for _, n := range []string{"a", "b", "c"} {
		if _, err := rig.Start(n, opts(n)); err != nil {
			t.Fatal(err)
		}
	}
	g, err := settled(ctx, d, group, l, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	consumeAll(ctx, t, rig, 300)
	// Everything read is committed before the restart, so a redelivery
	// would show up as a record consumed twice.
	if err := kfakegroup.WaitFor(ctx, func() error { return checkCommittedAtEnd(ctx, cl, group, "events", 6) }); err != nil {
		t.Fatal(err)
	}

	before, mark := l.Owned(), l.Mark()
	rig.Consumers()["b"].Abandon()
	if _, err := rig.Start("b", opts("b")); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.WaitFor(ctx, func() error {
		if !slices.Equal(l.Owned()["b"], before["b"]) {
			return fmt.Errorf("restarted b holds %v, held %v", l.Owned()["b"], before["b"])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	after, err := settled(ctx, d, group, l, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != g.Generation {
		t.Errorf("generation went from %d to %d over a static member restart", g.Generation, after.Generation)
	}
	for _, e := range l.Events(mark) {
		if e.Member != "b" {
			t.Errorf("member %s saw %s %v during b's restart", e.Member, e.Kind, e.Partitions)
		}
	}
	if !maps.EqualFunc(before, l.Owned(), slices.Equal) {
		t.Errorf("ownership changed over the restart: %v -> %v", before, l.Owned())
	}
	consumeAll(ctx, t, rig, 300)
	if err := rig.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.AllConsumedOnce(l); err != nil {
		t.Error(err)
	}
	if err := checkCommittedAtEnd(ctx, cl, group, "events", 6); err != nil {
		t.Error(err)
	}
}

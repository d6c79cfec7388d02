package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
	"github.com/wasmassign/wasmassign/internal/testutil/matrix"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/plugins/sticky"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// rackedConfig is an embedded cluster of three brokers, one per rack, and
// one topic of six partitions with a single replica each, so every
// partition lives in exactly one rack (partition p on broker p % 3).
func rackedConfig() string { return rackedGateway().String() }

// rackedGateway is rackedConfig, for tests that add to it.
func rackedGateway() testutil.GatewayConfig {
	return testutil.GatewayConfig{
		EmbeddedBrokers: 3,
		EmbeddedTopics:  []string{"events:6:1"},
		BrokerRacks:     rackedBrokers,
		Groups:          []testutil.GroupRule{{Match: "*"}},
	}
}

var rackedBrokers = map[int32]string{0: "az-a", 1: "az-b", 2: "az-c"}

// rkKgoRow is the interop-matrix row of a kgo group offering strategy in
// front of upstream, at the franz-go version this test binary links.
func rkKgoRow(t *testing.T, strategy, upstream string) matrix.Row {
	t.Helper()
	return matrix.Row{Client: "kgo (franz-go)", Version: rkModuleVersion(t, "github.com/twmb/franz-go"), Strategy: strategy, Upstream: upstream}
}

// rkModuleVersion is the version, without the leading v, of module path as
// the root module's go.mod requires it. Test binaries carry no list of
// dependencies in their build information, so go.mod is the record of
// what was linked.
func rkModuleVersion(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(path) + `\s+v(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("go.mod does not require %s", path)
	}
	return string(m[1])
}

// rkKgoEnv is what the kgo group scenarios need from the cluster behind
// the gateway, so the same scenario runs on the embedded kfake cluster and
// on a real broker.
type rkKgoEnv struct {
	d *daemon
	// admin reads metadata, end offsets and committed offsets: straight
	// from a real upstream, so the commits are seen where they landed, or
	// through the gateway in front of kfake.
	admin *kgo.Client
	// topic has partitions partitions and is used by this group alone.
	topic      string
	partitions int32
	// brokerRacks are the racks the gateway knows the brokers by.
	brokerRacks map[int32]string
}

// placement asks for the topic's leaders and replicas.
func (e rkKgoEnv) placement(ctx context.Context, t *testing.T) map[string]placement {
	t.Helper()
	pl, err := topicPlacement(ctx, e.admin, e.topic)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

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
		if g.LastRebalance != nil && g.LastRebalance.Withheld > 0 {
			// Stable between a cooperative round and its follow-up.
			return fmt.Errorf("group %s withheld %d partitions for a KIP-429 follow-up round", group, g.LastRebalance.Withheld)
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

// consumeAll produces n records to topic with the rig's producer (its
// ledger counts them) and waits until the rig has consumed every record
// produced so far.
func consumeAll(ctx context.Context, t *testing.T, rig *kfakegroup.Rig, topic string, n int) {
	t.Helper()
	if err := rig.Produce(ctx, topic, n); err != nil {
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

// rkKgoFinish closes the rig's consumers (each commits what it read and
// leaves) and checks every record was consumed once and the group
// committed the end offsets. Then it checks the commits survive a consumer
// restart: a new member of the group, started with opts, reads only
// records produced after the restart.
func rkKgoFinish(ctx context.Context, t *testing.T, e rkKgoEnv, rig *kfakegroup.Rig, group string, opts kfakegroup.ConsumerOptions) {
	t.Helper()
	l := rig.Ledger()
	if err := rig.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.AllConsumedOnce(l); err != nil {
		t.Error(err)
	}
	if err := checkCommittedAtEnd(ctx, e.admin, group, e.topic, e.partitions); err != nil {
		t.Fatal(err)
	}
	// A member that ignored the commits would start from the earliest
	// offset (the rig's reset policy) and read old records a second time.
	if _, err := rig.Start("restarted", opts); err != nil {
		t.Fatal(err)
	}
	if _, err := settled(ctx, e.d, group, l, []string{"restarted"}); err != nil {
		t.Fatal(err)
	}
	consumeAll(ctx, t, rig, e.topic, 120)
	if err := rig.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.AllConsumedOnce(l); err != nil {
		t.Errorf("after a consumer restart: %v", err)
	}
	if err := checkCommittedAtEnd(ctx, e.admin, group, e.topic, e.partitions); err != nil {
		t.Error(err)
	}
}

// rkKgoCooperative runs kgo cooperative-sticky consumers that send the
// racks in racks (members a1, b1 and c1 start together, a2 joins, then b1
// leaves): each member's rack reaches the gateway; with rackLocal, every
// member of the first generation holds only partitions of its rack; after
// the join and the leave the gateway hands out what the cooperative-sticky
// plugin computes from what each member owned; partitions that stay put
// are never revoked; every record is consumed exactly once, with the
// commits reaching the upstream; and they survive a consumer restart.
func rkKgoCooperative(ctx context.Context, t *testing.T, e rkKgoEnv, group string, racks map[string]string, rackLocal bool) {
	t.Helper()
	rig := kfakegroup.NewRig([]string{e.d.bootstrap}, group, []string{e.topic}, nil)
	defer rig.Close(context.Background())
	l := rig.Ledger()
	coop := []kgo.GroupBalancer{kgo.CooperativeStickyBalancer()}
	pl := e.placement(ctx, t)
	start := func(name string) {
		if _, err := rig.Start(name, kfakegroup.ConsumerOptions{Balancers: coop, Rack: racks[name]}); err != nil {
			t.Fatal(err)
		}
	}
	checkRacks := func(g adminGroup, local bool) {
		t.Helper()
		for _, m := range g.Members {
			name := strings.TrimPrefix(m.ClientID, "kfakegroup-")
			if m.Rack != racks[name] {
				t.Errorf("member %s has rack %q in the gateway, but sent %q", m.ClientID, m.Rack, racks[name])
			}
			if !local {
				continue
			}
			for _, p := range m.Assignment[e.topic] {
				if r := e.brokerRacks[pl[e.topic].leaders[p]]; r != m.Rack {
					t.Errorf("member %s in rack %q holds %s/%d, which lives in %s; assignment %v", m.ClientID, m.Rack, e.topic, p, r, adminAssignment(g))
				}
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
		want, err := expected(g, sticky.AssignCooperative, pl, e.brokerRacks, owned, gen)
		if err != nil {
			t.Fatal(err)
		}
		if got := adminAssignment(g); !sameAssignment(got, want) {
			t.Errorf("gateway assigned %v; cooperative-sticky computes %v from %v", got, want, before)
		}
		checkRacks(g, false)
	}

	for _, n := range []string{"a1", "b1", "c1"} {
		start(n)
	}
	g, err := settled(ctx, e.d, group, l, []string{"a1", "b1", "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if g.Protocol != "cooperative-sticky" {
		t.Errorf("protocol %q, want cooperative-sticky", g.Protocol)
	}
	// One member per rack: kgo's own balancer knows no broker racks, so
	// only the gateway's rack-aware plugin gives each its rack's
	// partitions.
	checkRacks(g, rackLocal)
	consumeAll(ctx, t, rig, e.topic, 300)

	before, mark, gen := l.Owned(), l.Mark(), g.Generation
	start("a2")
	g, err = settled(ctx, e.d, group, l, []string{"a1", "b1", "c1", "a2"})
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
	consumeAll(ctx, t, rig, e.topic, 300)

	before, mark, gen = l.Owned(), l.Mark(), g.Generation
	if err := rig.Consumers()["b1"].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if g, err = settled(ctx, e.d, group, l, []string{"a1", "c1", "a2"}); err != nil {
		t.Fatal(err)
	}
	delete(before, "b1")
	asPlugin(g, before, gen)
	unmoved = kfakegroup.Unmoved(before, l.Owned())
	if err := kfakegroup.NoRevocationOf(l, mark, unmoved); err != nil {
		t.Error(err)
	}
	consumeAll(ctx, t, rig, e.topic, 300)
	rkKgoFinish(ctx, t, e, rig, group, kfakegroup.ConsumerOptions{Balancers: coop})
}

// rkKgoEager describes an eager kgo group: what its members offer, the
// plugin the gateway serves it with, and, when that is not the offered
// assignor, the offered one, which must compute something else.
type rkKgoEager struct {
	balancer           kgo.GroupBalancer
	protocol, assignor string
	assign, relayed    func(*abi.Request) (*abi.Response, error)
}

// rkKgoEagerJoinLeave runs kgo consumers (no rack sent) of an eager group
// through a join and a leave: after every rebalance the gateway's
// assignment, and what each consumer holds, equal the configured plugin's
// answer for those members; every record is consumed exactly once; and the
// commits survive a consumer restart.
func rkKgoEagerJoinLeave(ctx context.Context, t *testing.T, e rkKgoEnv, group string, s rkKgoEager) {
	t.Helper()
	rig := kfakegroup.NewRig([]string{e.d.bootstrap}, group, []string{e.topic}, nil)
	defer rig.Close(context.Background())
	l := rig.Ledger()
	pl := e.placement(ctx, t)
	opts := kfakegroup.ConsumerOptions{Balancers: []kgo.GroupBalancer{s.balancer}}
	check := func(g adminGroup) {
		t.Helper()
		want, err := expected(g, s.assign, pl, e.brokerRacks, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := adminAssignment(g); !sameAssignment(got, want) {
			t.Errorf("gateway assigned %v; %s computes %v", got, s.assignor, want)
		}
		checkServedBy(t, g, s.protocol, s.assignor)
		if s.relayed != nil {
			other, err := expected(g, s.relayed, pl, e.brokerRacks, nil, 0)
			checkRelayTellable(t, other, err, want)
		}
	}
	for _, n := range []string{"a", "b"} {
		if _, err := rig.Start(n, opts); err != nil {
			t.Fatal(err)
		}
	}
	g, err := settled(ctx, e.d, group, l, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	check(g)
	consumeAll(ctx, t, rig, e.topic, 300)

	if _, err := rig.Start("c", opts); err != nil {
		t.Fatal(err)
	}
	if g, err = settled(ctx, e.d, group, l, []string{"a", "b", "c"}); err != nil {
		t.Fatal(err)
	}
	check(g)
	consumeAll(ctx, t, rig, e.topic, 300)

	if err := rig.Consumers()["a"].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if g, err = settled(ctx, e.d, group, l, []string{"b", "c"}); err != nil {
		t.Fatal(err)
	}
	check(g)
	consumeAll(ctx, t, rig, e.topic, 300)
	rkKgoFinish(ctx, t, e, rig, group, opts)
}

// rkKgoStaticRestart restarts one static member (closed without
// LeaveGroup, back with the same instance id inside its session timeout):
// the generation stays, nobody's partitions move, the returning member
// gets its old partitions back, and it reads on from the committed
// offsets. Then a static member joins and one leaves, as in the other
// kgo scenarios, and every record is read exactly once.
func rkKgoStaticRestart(ctx context.Context, t *testing.T, e rkKgoEnv, group string) {
	t.Helper()
	rig := kfakegroup.NewRig([]string{e.d.bootstrap}, group, []string{e.topic}, nil)
	defer rig.Close(context.Background())
	l := rig.Ledger()
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
	g, err := settled(ctx, e.d, group, l, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	consumeAll(ctx, t, rig, e.topic, 300)
	// Everything read is committed before the restart, so a redelivery
	// would show up as a record consumed twice.
	if err := kfakegroup.WaitFor(ctx, func() error { return checkCommittedAtEnd(ctx, e.admin, group, e.topic, e.partitions) }); err != nil {
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
	after, err := settled(ctx, e.d, group, l, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != g.Generation {
		t.Errorf("generation went from %d to %d over a static member restart", g.Generation, after.Generation)
	}
	for _, ev := range l.Events(mark) {
		if ev.Member != "b" {
			t.Errorf("member %s saw %s %v during b's restart", ev.Member, ev.Kind, ev.Partitions)
		}
	}
	if !maps.EqualFunc(before, l.Owned(), slices.Equal) {
		t.Errorf("ownership changed over the restart: %v -> %v", before, l.Owned())
	}
	consumeAll(ctx, t, rig, e.topic, 300)

	// A static member joins midway, and one leaves: kgo sends no
	// LeaveGroup for a static member, so the group learns of it from its
	// session timeout, as Kafka's would. Partitions that stay put are
	// never revoked, and nothing is read twice (the leaver commits first).
	before, mark = l.Owned(), l.Mark()
	if _, err := rig.Start("d", opts("d")); err != nil {
		t.Fatal(err)
	}
	if _, err := settled(ctx, e.d, group, l, []string{"a", "b", "c", "d"}); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.NoRevocationOf(l, mark, kfakegroup.Unmoved(before, l.Owned())); err != nil {
		t.Error(err)
	}
	consumeAll(ctx, t, rig, e.topic, 300)
	before, mark = l.Owned(), l.Mark()
	if err := rig.Consumers()["a"].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := settled(ctx, e.d, group, l, []string{"b", "c", "d"}); err != nil {
		t.Fatal(err)
	}
	delete(before, "a")
	if err := kfakegroup.NoRevocationOf(l, mark, kfakegroup.Unmoved(before, l.Owned())); err != nil {
		t.Error(err)
	}
	consumeAll(ctx, t, rig, e.topic, 300)
	if err := rig.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.AllConsumedOnce(l); err != nil {
		t.Error(err)
	}
	if err := checkCommittedAtEnd(ctx, e.admin, group, e.topic, e.partitions); err != nil {
		t.Error(err)
	}
}

// rackedEnv is the "events" topic of rackedConfig behind d.
func rackedEnv(t *testing.T, d *daemon) rkKgoEnv {
	return rkKgoEnv{d: d, admin: adminClient(t, []string{d.bootstrap}), topic: "events", partitions: 6, brokerRacks: rackedBrokers}
}

// TestKgo_CooperativeStickyKeepsRackLocalityThroughJoinAndLeave runs kgo
// cooperative-sticky consumers that send their rack (broker racks come from
// [upstream.broker_racks]) through the scenario of rkKgoCooperative on the
// embedded cluster: with one member per rack each holds exactly its rack's
// partitions.
func TestKgo_CooperativeStickyKeepsRackLocalityThroughJoinAndLeave(t *testing.T) {
	t.Parallel()
	matrix.Record(t, rkKgoRow(t, "cooperative-sticky", "kfake"))
	ctx := testCtx(t, 90*time.Second)
	d := startDaemon(t, t.TempDir(), rackedConfig())
	racks := map[string]string{"a1": "az-a", "b1": "az-b", "c1": "az-c", "a2": "az-a"}
	rkKgoCooperative(ctx, t, rackedEnv(t, d), "coop-racks", racks, true)
}

// TestKgo_RangeGroupGetsWhatTheRangePluginComputes runs kgo range
// consumers through a join and a leave on the embedded cluster: after
// every rebalance the gateway's assignment, and what each consumer holds,
// equal the range assignor's answer for those members.
func TestKgo_RangeGroupGetsWhatTheRangePluginComputes(t *testing.T) {
	t.Parallel()
	matrix.Record(t, rkKgoRow(t, "range", "kfake"))
	ctx := testCtx(t, 90*time.Second)
	d := startDaemon(t, t.TempDir(), rackedConfig())
	rkKgoEagerJoinLeave(ctx, t, rackedEnv(t, d), "ranged", rkKgoEager{
		balancer: kgo.RangeBalancer(), protocol: "range", assignor: "range", assign: rangeassignor.Assign,
	})
}

// TestKgo_StaticMemberRestartCausesNoRebalance restarts one static
// cooperative-sticky member on the embedded cluster: no rebalance, no
// partition moves.
func TestKgo_StaticMemberRestartCausesNoRebalance(t *testing.T) {
	t.Parallel()
	matrix.Record(t, rkKgoRow(t, "cooperative-sticky", "kfake"))
	ctx := testCtx(t, 90*time.Second)
	d := startDaemon(t, t.TempDir(), rackedConfig())
	rkKgoStaticRestart(ctx, t, rackedEnv(t, d), "static")
}

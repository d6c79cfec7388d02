package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
)

// clusterGateways starts n gateway processes of one cluster in front of
// upstream, each on ports of its own, with short cluster timeouts so that
// a failover fits a test: a session of 3 s and a lease of 1.5 s.
func clusterGateways(t *testing.T, upstream []string, n int) []*daemon {
	t.Helper()
	var ds []*daemon
	for i := range n {
		ports := freePorts(t, 5)
		cfg := testutil.GatewayConfig{
			Listen:      fmt.Sprintf("127.0.0.1:%d", ports[0]),
			AdminListen: fmt.Sprintf("127.0.0.1:%d", ports[1]),
			BrokerPorts: map[int32]int{0: ports[2], 1: ports[3], 2: ports[4]},
			Brokers:     upstream,
			Groups:      []testutil.GroupRule{{Match: "*"}},
			Extra: fmt.Sprintf("[cluster]\nname = \"e2e\"\nid = \"gw-%d\"\npartitions = 4\n"+
				"session_timeout = \"3s\"\nheartbeat_interval = \"300ms\"\nrebalance_timeout = \"3s\"\nlease = \"1500ms\"\n", i),
		}.String()
		ds = append(ds, startDaemon(t, t.TempDir(), cfg))
	}
	return ds
}

// ownerOf returns the gateway that holds group, once exactly one does.
func ownerOf(ctx context.Context, ds []*daemon, group string) (*daemon, adminGroup, error) {
	var owner *daemon
	var g adminGroup
	err := kfakegroup.WaitFor(ctx, func() error {
		owner = nil
		for _, d := range ds {
			dg, err := d.group(ctx, group)
			if err != nil {
				continue
			}
			if owner != nil {
				return fmt.Errorf("%s and %s both hold %s", owner.bootstrap, d.bootstrap, group)
			}
			owner, g = d, dg
		}
		if owner == nil {
			return errors.New("no gateway holds the group")
		}
		return nil
	})
	return owner, g, err
}

// TestCluster_AKilledGatewaysGroupsMoveWithTheirState runs two gateway
// processes of one cluster in front of kfake, and consumers of a group
// that bootstrap from both. The gateway that owns the group is killed
// (SIGKILL) mid-traffic: the other takes the group over from the state
// topic, and consumption resumes within 30 s with the members it had
// (their ids, which a gateway without the state would refuse), every
// record consumed and the commits at the end. A kgo member whose
// heartbeat could not dial the dead gateway gives its partitions up and
// rejoins (kgo's way with a coordinator that is gone); when none did, the
// group kept its generation and every record was consumed exactly once.
func TestCluster_AKilledGatewaysGroupsMoveWithTheirState(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 120*time.Second)
	upstream, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(6, "events"), kfake.GroupMinSessionTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(upstream.Close) // after the gateways stop: they leave the cluster on it
	ds := clusterGateways(t, upstream.ListenAddrs(), 2)

	const group = "failover"
	rig := kfakegroup.NewRig([]string{ds[0].bootstrap, ds[1].bootstrap}, group, []string{"events"}, nil)
	defer rig.Close(context.Background())
	l := rig.Ledger()
	opts := kfakegroup.ConsumerOptions{
		Balancers:      []kgo.GroupBalancer{kgo.CooperativeStickyBalancer()},
		SessionTimeout: 20 * time.Second,
		Extra:          []kgo.Opt{kgo.RetryTimeout(30 * time.Second)},
	}
	names := []string{"a", "b", "c"}
	for _, n := range names {
		if _, err := rig.Start(n, opts); err != nil {
			t.Fatal(err)
		}
	}
	owner, _, err := ownerOf(ctx, ds, group)
	if err != nil {
		t.Fatal(err)
	}
	g, err := settled(ctx, owner, group, l, names)
	if err != nil {
		t.Fatal(err)
	}
	consumeAll(ctx, t, rig, "events", 300)
	survivor := ds[0]
	if owner == ds[0] {
		survivor = ds[1]
	}

	before, mark := l.Owned(), l.Mark()
	killed := time.Now()
	if err := owner.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-owner.exited
	consumeAll(ctx, t, rig, "events", 150)
	resumed := time.Since(killed)
	if resumed > 30*time.Second {
		t.Errorf("consumption resumed %v after the kill, want within 30s", resumed)
	}
	after, err := settled(ctx, survivor, group, l, names)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(memberIDs(after)) != fmt.Sprint(memberIDs(g)) || after.Generation < g.Generation {
		t.Errorf("after the failover: generation %d, members %v; before: generation %d, members %v",
			after.Generation, memberIDs(after), g.Generation, memberIDs(g))
	}
	events := l.Events(mark)
	var rebalanced []string
	for _, e := range events {
		if e.Kind != kfakegroup.Assigned && len(e.Partitions) > 0 {
			rebalanced = append(rebalanced, fmt.Sprintf("%s %s %v (generation %d)", e.Member, e.Kind, e.Partitions, e.Generation))
		}
	}
	t.Logf("consumption resumed %v after the kill; partitions given up across the failover: %v", resumed.Round(time.Millisecond), rebalanced)
	if len(rebalanced) == 0 {
		if after.Generation != g.Generation {
			t.Errorf("no member gave partitions up, yet the generation moved from %d to %d", g.Generation, after.Generation)
		}
		if owned := l.Owned(); fmt.Sprint(owned) != fmt.Sprint(before) {
			t.Errorf("ownership changed across the failover: %v -> %v", before, owned)
		}
	}
	if err := kfakegroup.NoSharedOwnership(l.Owned()); err != nil {
		t.Error(err)
	}
	if err := rig.Close(ctx); err != nil {
		t.Fatal(err)
	}
	check := kfakegroup.AllConsumedOnce
	if len(rebalanced) > 0 {
		check = kfakegroup.AllConsumedAtLeastOnce // what was read and not committed is read again
	}
	if err := check(l); err != nil {
		t.Error(err)
	}
	cl := adminClient(t, upstream.ListenAddrs())
	if err := checkCommittedAtEnd(ctx, cl, group, "events", 6); err != nil {
		t.Error(err)
	}
}

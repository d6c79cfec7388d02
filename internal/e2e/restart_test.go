package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
	"github.com/wasmassign/wasmassign/internal/testutil/matrix"
)

// TestRestart_ConsumersKeepTheirPartitionsAcrossADaemonRestart restarts the
// daemon (SIGTERM, then the same config) under running kgo
// cooperative-sticky consumers. The upstream is a kfake cluster the test
// owns, so it outlives the daemon and holds the groups' state in its state
// topic, and the gateway listens on the same ports again (so it has the
// same id). No partition is revoked or lost, no record is read twice, and
// the group continues its generation.
func TestRestart_ConsumersKeepTheirPartitionsAcrossADaemonRestart(t *testing.T) {
	t.Parallel()
	matrix.Record(t, rkKgoRow(t, "cooperative-sticky", "kfake"))
	ctx := testCtx(t, 90*time.Second)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(6, "events"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	ports := freePorts(t, 5)
	dir := t.TempDir()
	cfg := testutil.GatewayConfig{
		Listen:      fmt.Sprintf("127.0.0.1:%d", ports[0]),
		AdminListen: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		BrokerPorts: map[int32]int{0: ports[2], 1: ports[3], 2: ports[4]},
		Brokers:     cluster.ListenAddrs(),
		Groups:      []testutil.GroupRule{{Match: "*"}},
	}.String()
	d := startDaemon(t, dir, cfg)

	const group = "restarted"
	rig := kfakegroup.NewRig([]string{d.bootstrap}, group, []string{"events"}, nil)
	defer rig.Close(context.Background())
	l := rig.Ledger()
	opts := kfakegroup.ConsumerOptions{
		Balancers: []kgo.GroupBalancer{kgo.CooperativeStickyBalancer()},
		// Long enough for the daemon to come back inside it.
		SessionTimeout: 20 * time.Second,
		Extra:          []kgo.Opt{kgo.RetryTimeout(30 * time.Second)},
	}
	for _, n := range []string{"a", "b", "c"} {
		if _, err := rig.Start(n, opts); err != nil {
			t.Fatal(err)
		}
	}
	g, err := settled(ctx, d, group, l, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	consumeAll(ctx, t, rig, "events", 300)
	cl := adminClient(t, []string{d.bootstrap})
	if err := kfakegroup.WaitFor(ctx, func() error { return checkCommittedAtEnd(ctx, cl, group, "events", 6) }); err != nil {
		t.Fatal(err)
	}

	before, mark := l.Owned(), l.Mark()
	down := time.Now()
	if err := d.stop(); err != nil {
		t.Fatalf("daemon exited with %v after SIGTERM, want status 0", err)
	}
	stopped := time.Now()
	d2 := startDaemonFile(t, d.cfgFile)
	t.Logf("the gateway was down for %v (SIGTERM to exit %v)", time.Since(down).Round(time.Millisecond), stopped.Sub(down).Round(time.Millisecond))
	if d2.bootstrap != d.bootstrap {
		t.Fatalf("restarted daemon listens on %s, not %s", d2.bootstrap, d.bootstrap)
	}
	// Served once its shard is read: at once, since the stop released it.
	var restored adminGroup
	if err := kfakegroup.WaitFor(ctx, func() (err error) {
		restored, err = d2.group(ctx, group)
		return err
	}); err != nil {
		t.Fatalf("the group is not back after the restart: %v", err)
	}
	t.Logf("the group was back %v after the gateway went down", time.Since(down).Round(time.Millisecond))
	if restored.Generation < g.Generation || fmt.Sprint(memberIDs(restored)) != fmt.Sprint(memberIDs(g)) {
		t.Errorf("restored generation %d, members %v; saved: generation %d, members %v",
			restored.Generation, memberIDs(restored), g.Generation, memberIDs(g))
	}
	consumeAll(ctx, t, rig, "events", 150)
	after, err := settled(ctx, d2, group, l, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	// A restart without the saved state would start the group again:
	// new member ids, generations from 0.
	if after.Generation < g.Generation || fmt.Sprint(memberIDs(after)) != fmt.Sprint(memberIDs(g)) {
		t.Errorf("after the restart: generation %d, members %v; before: generation %d, members %v",
			after.Generation, memberIDs(after), g.Generation, memberIDs(g))
	}
	if owned := l.Owned(); fmt.Sprint(owned) != fmt.Sprint(before) {
		t.Errorf("ownership changed across the restart: %v -> %v", before, owned)
	}
	events := l.Events(mark)
	if err := rig.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.AllConsumedOnce(l); err != nil {
		t.Error(err)
	}
	if err := checkCommittedAtEnd(ctx, cl, group, "events", 6); err != nil {
		t.Error(err)
	}
	t.Run("no partition revoked or lost", func(t *testing.T) {
		var bad []string
		for _, e := range events {
			if e.Kind != kfakegroup.Assigned && len(e.Partitions) > 0 {
				bad = append(bad, fmt.Sprintf("%s %s %v (gen %d)", e.Member, e.Kind, e.Partitions, e.Generation))
			}
		}
		if len(bad) > 0 {
			// The daemon binds its listeners before loading plugins, so a
			// heartbeat during the restart waits in the accept queue
			// instead of failing to dial and ending the session.
			t.Errorf("partitions revoked or lost across the restart: %v", bad)
		}
	})
}

// memberIDs lists the group's member ids, sorted.
func memberIDs(g adminGroup) []string {
	var ids []string
	for _, m := range g.Members {
		ids = append(ids, m.MemberID)
	}
	slices.Sort(ids)
	return ids
}

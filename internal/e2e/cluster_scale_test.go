package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/loadtest"
	"github.com/wasmassign/wasmassign/internal/testutil"
)

// TestCluster_AKilledGatewaysHundredsOfGroupsAreTakenOverMidRebalance runs
// two gateway processes of one cluster in front of kfake in a process of
// its own, and starts a few hundred groups through them at once, a
// connection per member. While the groups wait out their initial
// rebalance delay (each one's members joined, no assignment yet), the
// gateway that holds at least a hundred of them is killed (SIGKILL). The
// survivor takes those groups over mid-rebalance from the state topic, and
// their members, following FindCoordinator, complete the rebalances there
// all at once: every group becomes stable with a valid assignment made by
// its assignor at the survivor, through the plugin host's queue, with no
// fallback, no plugin failure, no overload and no assignment timeout.
func TestCluster_AKilledGatewaysHundredsOfGroupsAreTakenOverMidRebalance(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 4*time.Minute)
	kp, err := loadtest.StartKfake(ctx, nil, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kp.Stop) // after the gateways stop: they leave the cluster on it
	// The groups' initial rebalance delay (Kafka's default, 3 s) is the
	// window in which the victim holds them mid-rebalance.
	ds := clusterGatewaysManaging(t, []string{kp.Addr()}, 2, fastFailover, []testutil.GroupRule{{Match: "*", InitialRebalanceDelay: "3s"}})
	waitAllReady(ctx, t, ds)
	// The members bootstrap from the survivor, and FindCoordinator sends
	// each to its group's owner.
	survivor, victim := ds[0], ds[1]

	lc := loadtest.DefaultConfig()
	lc.Groups, lc.Members, lc.Topics, lc.Partitions = 300, 3, 10, 8
	lc.GroupPrefix = "takeover-"
	lc.Heartbeat, lc.Commit, lc.Duration = 500*time.Millisecond, 2*time.Second, 3*time.Second
	lc.SessionTimeout, lc.RebalanceTimeout, lc.StableTimeout = 30*time.Second, 60*time.Second, 2*time.Minute
	type outcome struct {
		res *loadtest.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := loadtest.Run(ctx, lc, loadtest.Target{Name: "cluster", Addr: survivor.bootstrap}, nil)
		done <- outcome{res, err}
	}()

	// Kill the victim once it holds a hundred of the groups mid-rebalance.
	const enough = 100
	var pending []string
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for len(pending) < enough {
		select {
		case o := <-done:
			t.Fatalf("the load ended before the victim held %d groups mid-rebalance (%d): %v, %+v", enough, len(pending), o.err, o.res)
		case <-ctx.Done():
			t.Fatalf("the victim never held %d groups mid-rebalance (last: %d)", enough, len(pending))
		case <-tick.C:
		}
		groups, err := fetchAdminGroups(ctx, victim)
		if err != nil {
			t.Fatal(err)
		}
		pending = pending[:0]
		for _, g := range groups {
			if strings.HasPrefix(g.Group, lc.GroupPrefix) && g.State == "PreparingRebalance" && g.Generation == 0 {
				pending = append(pending, g.Group)
			}
		}
	}
	killed := time.Now()
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-victim.exited

	out := <-done
	if out.err != nil {
		t.Fatal(out.err)
	}
	res := out.res
	if !res.Stable || res.Assignment.Valid != lc.Groups {
		t.Fatalf("stable %v, %d of %d groups with a valid assignment: %v %v", res.Stable, res.Assignment.Valid, lc.Groups, res.Unstable, res.Assignment.Problems)
	}
	t.Logf("killed the holder of %d groups mid-rebalance; join-to-stable %v; the run ended %v after the kill",
		len(pending), res.JoinToStable.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))

	// The survivor made those groups' assignments: it holds them, and each
	// names the assignor of the generation it formed.
	held := map[string]adminGroupSummary{}
	for _, g := range adminGroups(ctx, t, survivor) {
		held[g.Group] = g
	}
	for _, name := range pending {
		g, ok := held[name]
		switch {
		case !ok:
			t.Errorf("group %s, taken over mid-rebalance, is not at the survivor", name)
		case g.Generation < 1 || g.Assignor != lc.Protocol:
			t.Errorf("group %s at the survivor: generation %d, assignor %q; want a generation it formed with %q", name, g.Generation, g.Assignor, lc.Protocol)
		}
	}
	body := survivor.metrics(t)
	for _, series := range []string{"wasmassign_fallbacks_total", "wasmassign_plugin_failures_total", "wasmassign_plugin_overloads_total", "wasmassign_assignment_timeouts_total"} {
		if n := metricSum(body, series); n != 0 {
			t.Errorf("survivor: %s = %v, want 0", series, n)
		}
	}
	t.Logf("survivor: %v rebalances, %v plugin calls queued (waited %.3f s in all)", metricSum(body, "wasmassign_rebalances_total"),
		metricSum(body, "wasmassign_plugin_queue_wait_seconds_count"), metricSum(body, "wasmassign_plugin_queue_wait_seconds_sum"))
	if n := metricSum(body, "wasmassign_cluster_failovers_total"); n < 1 {
		t.Errorf("survivor: wasmassign_cluster_failovers_total = %v, want at least 1", n)
	}
}

package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
)

// TestAssignmentTimeout_AHangingPluginCostsTheBoundNotTheChain serves a kgo
// group with a plugin whose assign never returns, under a one-second
// assignment_timeout. The members' SyncGroups are answered with the range
// assignment at the bound, the rebalance names the range assignor, and
// wasmassign_assignment_timeouts_total counts it.
func TestAssignmentTimeout_AHangingPluginCostsTheBoundNotTheChain(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	brokers, dir, plugins := clusterWithPlugins(t, map[string][]byte{
		"slow.wasm": testutil.ReadArtefact(t, "testdata/hostile/slow.wasm"), // assignor hostile-slow
	})
	cfg := testutil.GatewayConfig{
		Brokers: brokers,
		Groups:  []testutil.GroupRule{{Match: "*", Assignor: "hostile-slow"}},
		Extra:   fmt.Sprintf("[plugins]\ndir = %q\ntimeout = \"1s\"\nassignment_timeout = \"1s\"\n", plugins),
	}.String()
	d := startDaemon(t, dir, cfg)
	const group = "hanging"
	_, g := settledRig(ctx, t, d, group, kfakegroup.ConsumerOptions{}, "a")
	if g.Assignor != "range" {
		t.Errorf("the rebalance was assigned by %q, want range", g.Assignor)
	}
	body := d.metrics(t)
	m := regexp.MustCompile(`(?m)^wasmassign_assignment_timeouts_total (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no wasmassign_assignment_timeouts_total")
	}
	if n, _ := strconv.ParseFloat(m[1], 64); n < 1 {
		t.Errorf("wasmassign_assignment_timeouts_total = %v, want at least 1", n)
	}
}

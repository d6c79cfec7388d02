package e2e

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
)

// groupGauges are the per-group gauges, by name.
var groupGauges = []string{
	"wasmassign_group_members",
	"wasmassign_group_generation",
	"wasmassign_group_unassigned_partitions",
	"wasmassign_group_rack_local_ratio",
}

// TestGroupGauges_FollowTheGroupThroughEveryState runs a group of three
// rack-aware members through a session expiry, the others leaving, and its
// deletion, and checks at each step that the per-group gauges say what the
// admin API says: a gauge that kept the last rebalance's numbers would show
// members of a group that has none.
func TestGroupGauges_FollowTheGroupThroughEveryState(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 90*time.Second)
	cluster := eventsCluster(t, 1, 6)
	cfg := testutil.GatewayConfig{
		Brokers:     cluster.ListenAddrs(),
		BrokerRacks: map[int32]string{0: "rack-a"},
		Groups:      []testutil.GroupRule{{Match: "*"}},
	}.String()
	d := startDaemon(t, t.TempDir(), cfg)
	const group = "gauged"
	rig, g := settledRig(ctx, t, d, group, kfakegroup.ConsumerOptions{Rack: "rack-a"}, "a", "b", "c")
	want := map[string]float64{
		"wasmassign_group_members":               3,
		"wasmassign_group_generation":            float64(g.Generation),
		"wasmassign_group_unassigned_partitions": 0,
		"wasmassign_group_rack_local_ratio":      1,
	}
	waitGauges(ctx, t, d, group, "three members, Stable", want)

	// A session expiry: the group rebalances to two members.
	rig.Consumers()["c"].Crash()
	g, err := settled(ctx, d, group, rig.Ledger(), []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	want["wasmassign_group_members"] = 2
	want["wasmassign_group_generation"] = float64(g.Generation)
	waitGauges(ctx, t, d, group, "after a session expiry", want)

	// Everyone else leaves: the group is Empty, at the generation the
	// coordinator has, and holds no assignment.
	for _, name := range []string{"a", "b"} {
		if err := rig.Consumers()[name].Leave(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := kfakegroup.WaitFor(ctx, func() error {
		if g, err = d.group(ctx, group); err != nil {
			return err
		}
		if g.State != "Empty" || len(g.Members) != 0 {
			return fmt.Errorf("group is %s with %d members, want Empty with none", g.State, len(g.Members))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitGauges(ctx, t, d, group, "Empty", map[string]float64{
		"wasmassign_group_members":               0,
		"wasmassign_group_generation":            float64(g.Generation),
		"wasmassign_group_unassigned_partitions": 0,
	})

	// Deleted: every series of the group goes.
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{group}
	resp, err := del.RequestWith(ctx, adminClient(t, []string{d.bootstrap}))
	if err != nil || len(resp.Groups) != 1 || (resp.Groups[0].ErrorCode != 0 && resp.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code) {
		t.Fatalf("DeleteGroups: %v %+v", err, resp)
	}
	if _, err := d.group(ctx, group); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("deleted group still listed: %v", err)
	}
	waitGauges(ctx, t, d, group, "deleted", map[string]float64{})
}

// waitGauges waits until the group's per-group gauges on d's metrics page
// are exactly want: the gauges want leaves out must have no series.
func waitGauges(ctx context.Context, t *testing.T, d *daemon, group, when string, want map[string]float64) {
	t.Helper()
	// The gauges are set on the coordinator's loop as the admin API's
	// answer is read from it, so they agree at once; the short wait only
	// covers a step still in flight.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := kfakegroup.WaitFor(ctx, func() error {
		got := scrapeGroup(d.metrics(t), group)
		for _, name := range groupGauges {
			w, wok := want[name]
			v, ok := got[name]
			switch {
			case wok && !ok:
				return fmt.Errorf("%s: no %s series, want %v", when, name, w)
			case !wok && ok:
				return fmt.Errorf("%s: %s is %v, want no series", when, name, v)
			case wok && v != w:
				return fmt.Errorf("%s: %s is %v, want %v", when, name, v, w)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// scrapeGroup returns the value of every metric on a metrics page whose
// only label is group.
func scrapeGroup(body, group string) map[string]float64 {
	out := make(map[string]float64)
	suffix := `{group="` + group + `"}`
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		series, value, ok := strings.Cut(sc.Text(), " ")
		name, found := strings.CutSuffix(series, suffix)
		if !ok || !found {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

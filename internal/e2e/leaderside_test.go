package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
)

// customRange is kgo's range balancer under a protocol name no plugin
// serves, as a client-side custom assignor is: the gateway leaves the
// assignment to the group's own leader.
type customRange struct{ kgo.GroupBalancer }

func (customRange) ProtocolName() string { return "custom-range" }

// TestLeaderSide_TheLeadersAssignmentIsShown runs kgo members whose only
// protocol no plugin serves, so their leader assigns. The admin API must
// show what each member holds (the leader's SyncGroup assignment), and the
// group's per-group metrics must exist, rather than empty assignments and
// no series.
func TestLeaderSide_TheLeadersAssignmentIsShown(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	cluster, err := kfake.NewCluster(append(kfakegroup.FastKfakeOpts(), kfake.NumBrokers(1), kfake.SeedTopics(6, "events"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cfg := testutil.GatewayConfig{Brokers: cluster.ListenAddrs(), Groups: []testutil.GroupRule{{Match: "*"}}}.String()
	d := startDaemon(t, t.TempDir(), cfg)
	const group = "leader-assigned"
	rig := kfakegroup.NewRig([]string{d.bootstrap}, group, []string{"events"}, nil)
	defer rig.Close(ctx)
	opts := kfakegroup.ConsumerOptions{Balancers: []kgo.GroupBalancer{customRange{kgo.RangeBalancer()}}}
	for _, n := range []string{"a", "b"} {
		if _, err := rig.Start(n, opts); err != nil {
			t.Fatal(err)
		}
	}
	// settled requires the admin API's assignment of each member to be
	// what the member holds by its own callbacks.
	g, err := settled(ctx, d, group, rig.Ledger(), []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, m := range g.Members {
		for _, ps := range m.Assignment {
			total += len(ps)
		}
	}
	if total != 6 {
		t.Errorf("the admin API shows %d partitions assigned, want all 6", total)
	}
	if g.Protocol != "custom-range" {
		t.Errorf("protocol %q, want custom-range", g.Protocol)
	}
	resp, err := http.Get("http://" + d.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `wasmassign_group_members{group="leader-assigned"} 2`) {
		t.Error("no per-group members metric for the leader-assigned group")
	}
}

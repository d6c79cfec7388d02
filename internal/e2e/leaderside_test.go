package e2e

import (
	"strings"
	"testing"
	"time"

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
	cluster := eventsCluster(t, 1, 6)
	cfg := testutil.GatewayConfig{Brokers: cluster.ListenAddrs(), Groups: []testutil.GroupRule{{Match: "*"}}}.String()
	d := startDaemon(t, t.TempDir(), cfg)
	const group = "leader-assigned"
	// settled requires the admin API's assignment of each member to be
	// what the member holds by its own callbacks.
	opts := kfakegroup.ConsumerOptions{Balancers: []kgo.GroupBalancer{customRange{kgo.RangeBalancer()}}}
	_, g := settledRig(ctx, t, d, group, opts, "a", "b")
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
	body := d.metrics(t)
	if !strings.Contains(body, `wasmassign_group_members{group="leader-assigned"} 2`) {
		t.Error("no per-group members metric for the leader-assigned group")
	}
}

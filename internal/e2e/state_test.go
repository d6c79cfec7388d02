package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
)

// TestRestart_StateSavedAtEveryTransitionComesBackTruthfully kills the
// daemon (SIGKILL: no shutdown hook runs) after one group's only member
// left and another group was deleted, and starts it again, in front of an
// external upstream (the state is in its state topic) and of the embedded
// cluster (in state_dir). The emptied group comes back Empty with no
// members, not Stable with a ghost whose session would block offset resets
// and admin commits, and the deleted group stays gone: state is saved when
// a group turns Empty or Dead, not only when it turns Stable.
func TestRestart_StateSavedAtEveryTransitionComesBackTruthfully(t *testing.T) {
	t.Parallel()
	for _, home := range []string{"state topic", "state_dir"} {
		t.Run(home, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := testutil.GatewayConfig{Groups: []testutil.GroupRule{{Match: "*"}}}
			if home == "state_dir" {
				cfg.EmbeddedTopics = []string{"events:4"}
				cfg.Server = fmt.Sprintf("state_dir = %q", filepath.Join(dir, "state"))
			} else {
				cfg.Brokers = eventsCluster(t, 1, 4).ListenAddrs()
				// The restarted gateway finds its state topic by its id
				// (its port changes).
				cfg.Extra = "[cluster]\nid = \"state-test\"\n"
			}
			stateComesBackTruthfully(t, dir, cfg.String())
		})
	}
}

func stateComesBackTruthfully(t *testing.T, dir, cfg string) {
	ctx := testCtx(t, 90*time.Second)
	d := startDaemon(t, dir, cfg)

	for _, group := range []string{"deleted", "emptied"} {
		// emptied turns Stable last: no later Stable saves its Empty.
		rig, _ := settledRig(ctx, t, d, group, kfakegroup.ConsumerOptions{}, "a")
		if err := rig.Consumers()["a"].Leave(ctx); err != nil {
			t.Fatal(err)
		}
		if err := kfakegroup.WaitFor(ctx, func() error {
			g, err := d.group(ctx, group)
			if err != nil {
				return err
			}
			if g.State != "Empty" || len(g.Members) != 0 {
				return fmt.Errorf("group %s is %s with %d members, want Empty with none", group, g.State, len(g.Members))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	cl := adminClient(t, []string{d.bootstrap})
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"deleted"}
	// The upstream never saw the group (no member committed), so it may
	// answer GROUP_ID_NOT_FOUND for its part; the gateway's group goes.
	resp, err := del.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 || (resp.Groups[0].ErrorCode != 0 && resp.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code) {
		t.Fatalf("DeleteGroups: %v %+v", err, resp)
	}
	if err := kfakegroup.WaitFor(ctx, func() error {
		if _, err := d.group(ctx, "deleted"); err == nil || !strings.Contains(err.Error(), "404") {
			return fmt.Errorf("deleted group still listed: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// No shutdown hook: only what was saved at the transitions counts.
	_ = d.cmd.Process.Kill()
	<-d.exited
	d2 := startDaemonFile(t, d.cfgFile)
	// The state topic's shard is served once it is read, and once the
	// killed process's lease has run out.
	var g adminGroup
	if err := kfakegroup.WaitFor(ctx, func() (err error) {
		g, err = d2.group(ctx, "emptied")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if g.State != "Empty" || len(g.Members) != 0 {
		t.Errorf("after a restart the emptied group is %s with %d members, want Empty with none", g.State, len(g.Members))
	}
	if _, err := d2.group(ctx, "deleted"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("after a restart the deleted group is back: %v", err)
	}
}

package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
)

// TestGroupsAndPlugins_ReadARunningDaemon runs the daemon, lets one kgo
// consumer join, and reads the group and the plugins back through the CLI.
func TestGroupsAndPlugins_ReadARunningDaemon(t *testing.T) {
	d := startServe(t, serveConfig)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rig := kfakegroup.NewRig([]string{d.bootstrap}, "cli-group", []string{"events"}, nil)
	defer rig.Close(context.Background())
	if _, err := rig.Start("a", kfakegroup.ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.WaitFor(ctx, func() error {
		if n := len(rig.Ledger().Owned()["a"]); n != 6 {
			return fmt.Errorf("a holds %d partitions", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	code, out, stderr := wasmassign(t, "groups", "--admin", d.admin)
	if code != 0 || !strings.Contains(out, "cli-group") || !strings.Contains(out, "Stable") || !strings.Contains(out, "range") {
		t.Errorf("groups: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = wasmassign(t, "groups", "--admin", d.admin, "cli-group")
	if code != 0 || !strings.Contains(out, "events[0-5]") || !strings.Contains(out, "generation") {
		t.Errorf("groups cli-group: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = wasmassign(t, "plugins", "--admin", d.admin)
	if code != 0 || !strings.Contains(out, "cooperative-sticky") || !strings.Contains(out, "ok") || !strings.Contains(out, "instances: ") || !strings.Contains(out, "0 overloads") {
		t.Errorf("plugins: exit %d\n%s%s", code, out, stderr)
	}
	code, _, stderr = wasmassign(t, "groups", "--admin", d.admin, "no-such-group")
	if code != 1 || !strings.Contains(stderr, "404") {
		t.Errorf("unknown group: exit %d, stderr %q", code, stderr)
	}
}

func TestGroups_UnreachableAdminNamesTheAddress(t *testing.T) {
	code, _, stderr := wasmassign(t, "groups", "--admin", "127.0.0.1:1")
	if code != 1 || !strings.Contains(stderr, "127.0.0.1:1") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = wasmassign(t, "plugins", "extra")
	if code != 2 || !strings.Contains(stderr, "no arguments") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func TestServe_AdminTokenGuardsTheAPI(t *testing.T) {
	d := startServe(t, strings.Replace(serveConfig, `admin_listen = "127.0.0.1:0"`, "admin_listen = \"127.0.0.1:0\"\nadmin_token = \"s3cret\"", 1))
	if code, _, stderr := wasmassign(t, "plugins", "--admin", d.admin, "--token", ""); code != 1 || !strings.Contains(stderr, "401") {
		t.Errorf("without the token: exit %d, stderr %q", code, stderr)
	}
	if code, out, stderr := wasmassign(t, "plugins", "--admin", d.admin, "--token", "s3cret"); code != 0 || !strings.Contains(out, "roundrobin") {
		t.Errorf("with the token: exit %d\n%s%s", code, out, stderr)
	}
}

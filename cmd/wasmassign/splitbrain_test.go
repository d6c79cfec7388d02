package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
)

// TestServe_SplitBrainIsCountedAndLogged runs the daemon in front of a
// kfake cluster while one consumer of a managed group bypasses the gateway
// and joins the same group on the cluster directly.
func TestServe_SplitBrainIsCountedAndLogged(t *testing.T) {
	cluster, err := kfake.NewCluster(append(kfakegroup.FastKfakeOpts(), kfake.NumBrokers(1), kfake.SeedTopics(4, "events"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	d := startServe(t, fmt.Sprintf(`
[server]
listen = "127.0.0.1:0"
broker_port_base = 0
admin_listen = "127.0.0.1:0"
[upstream]
brokers = [%q]
metadata_refresh = "300ms"
[[groups]]
match = "*"
initial_rebalance_delay = "0s"
min_session_timeout = "1s"
`, cluster.ListenAddrs()[0]))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	through := kfakegroup.NewRig([]string{d.bootstrap}, "sb", []string{"events"}, nil)
	defer through.Close(context.Background())
	bypass := kfakegroup.NewRig(cluster.ListenAddrs(), "sb", []string{"events"}, nil)
	defer bypass.Close(context.Background())
	if _, err := through.Start("via-gateway", kfakegroup.ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bypass.Start("bypassing", kfakegroup.ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}
	err = kfakegroup.WaitFor(ctx, func() error {
		resp, err := http.Get("http://" + d.admin + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), `wasmassign_split_brain_total{group="sb"}`) {
			return fmt.Errorf("no split-brain count yet")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

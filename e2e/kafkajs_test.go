package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/plugins/roundrobin"
)

// needKafkajs returns the node executable and the directory of the
// kafkajs consumer script, installing node, npm and the locked kafkajs
// 2.2.4 (npm ci from e2e/js/package-lock.json) when they are missing.
func needKafkajs(t *testing.T) (node, dir string) {
	t.Helper()
	node = needCommand(t, "node", "nodejs")
	dir = filepath.Join(env.root, "e2e", "js")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs", "package.json")); err == nil {
		return node, dir
	}
	npm := needCommand(t, "npm", "npm")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, tail(string(out), 20))
	}
	return node, dir
}

// kafkajsConfig serves js-* groups with range, whatever their members
// offer.
const kafkajsConfig = `
[server]
listen = "127.0.0.1:0"
advertised_host = "127.0.0.1"
broker_port_base = 0
admin_listen = "127.0.0.1:0"

[upstream]
metadata_refresh = "1s"
[upstream.embedded]
brokers = 2
topics = ["orders:6"]

[[groups]]
match = "js-*"
assignor = "range"
initial_rebalance_delay = "0s"
min_session_timeout = "1s"
`

// TestKafkajs_RoundRobinGroupServedByTheConfiguredAssignor runs two
// kafkajs 2.2.4 consumers, which offer only RoundRobinAssigner (eager).
// The group's rule names range: the gateway answers under the name they
// offered, and each process reads exactly what range computes, which here
// differs from round robin. Every record is read once and the commits
// reach the upstream.
func TestKafkajs_RoundRobinGroupServedByTheConfiguredAssignor(t *testing.T) {
	t.Parallel()
	node, dir := needKafkajs(t)
	ctx := testCtx(t, 90*time.Second)
	d := startDaemon(t, t.TempDir(), kafkajsConfig)
	cl := adminClient(t, []string{d.bootstrap})
	pl, err := topicPlacement(ctx, cl, "orders")
	if err != nil {
		t.Fatal(err)
	}
	const group = "js-orders"
	var ks []*consumerProc
	for _, id := range []string{"kafkajs-1", "kafkajs-2"} {
		cmd := exec.Command(node, filepath.Join(dir, "consumer.js"), d.bootstrap, group, "orders", id)
		cmd.Dir = dir
		ks = append(ks, startReader(t, id, cmd))
	}
	if _, err := stableWith(ctx, d, group, 2, "orders", 6); err != nil {
		t.Fatal(err)
	}
	produce(ctx, t, []string{d.bootstrap}, "orders", 300)
	end, err := endOffsets(ctx, cl, "orders", 6)
	if err != nil {
		t.Fatal(err)
	}
	if err := readAllOnce(ctx, ks, end); err != nil {
		t.Fatal(err)
	}
	g, err := stableWith(ctx, d, group, 2, "orders", 6)
	if err != nil {
		t.Fatal(err)
	}
	if g.Protocol != "RoundRobinAssigner" || g.Assignor != "range" {
		t.Errorf("protocol %q assignor %q; want the offered RoundRobinAssigner served by range", g.Protocol, g.Assignor)
	}
	want, err := expected(g, rangeassignor.Assign, pl, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := adminAssignment(g); !sameAssignment(got, want) {
		t.Errorf("gateway assigned %v; range computes %v", got, want)
	}
	if rr, err := expected(g, roundrobin.Assign, pl, nil, nil, 0); err != nil || sameAssignment(rr, want) {
		t.Fatalf("round robin gives the same assignment (%v, %v): the test could not tell a relay from the gateway", rr, err)
	}
	checkReads(t, g, ks, "orders")
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := kfakeWait(cctx, func() error { return checkCommittedAtEnd(cctx, cl, group, "orders", 6) }); err != nil {
		t.Error(err)
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/matrix"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/plugins/roundrobin"
)

// needKafkajs returns the node executable and the directory of the
// kafkajs consumer script, installing node, npm and the locked kafkajs
// 2.2.4 (npm ci from internal/e2e/js/package-lock.json) when they are missing.
func needKafkajs(t *testing.T) (node, dir string) {
	t.Helper()
	node = needCommand(t, "node", "nodejs")
	dir = filepath.Join(env.root, "internal", "e2e", "js")
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

// rkKafkajsRow is the interop-matrix row of a kafkajs group offering
// strategy in front of upstream, at the kafkajs version installed in dir.
func rkKafkajsRow(t *testing.T, dir, strategy, upstream string) matrix.Row {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", "kafkajs", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil || pkg.Version == "" {
		t.Fatalf("no version in kafkajs's package.json (%v)", err)
	}
	return matrix.Row{Client: "kafkajs", Version: pkg.Version, Strategy: strategy, Upstream: upstream}
}

// rkStartKafkajs runs the kafkajs consumer script as clientID in group,
// reading topic through bootstrap.
func rkStartKafkajs(t *testing.T, node, dir, bootstrap, group, topic, clientID string) *consumerProc {
	t.Helper()
	cmd := exec.Command(node, filepath.Join(dir, "consumer.js"), bootstrap, group, topic, clientID)
	cmd.Dir = dir
	return startReader(t, clientID, cmd)
}

// kafkajsConfig serves js-* groups with range, whatever their members
// offer.
func kafkajsConfig() string {
	return testutil.GatewayConfig{
		EmbeddedBrokers: 2,
		EmbeddedTopics:  []string{"orders:6"},
		Groups:          []testutil.GroupRule{{Match: "js-*", Assignor: "range"}},
	}.String()
}

// TestKafkajs_RoundRobinGroupServedByTheConfiguredAssignor runs kafkajs
// 2.2.4 consumers, which offer only RoundRobinAssigner (eager), through a
// join, a leave and a restart (rkProcJoinLeave). The group's rule names
// range: the gateway answers under the name they offered, and each process
// reads exactly what range computes, which here differs from round robin.
// Every record is read once and the commits reach the upstream.
func TestKafkajs_RoundRobinGroupServedByTheConfiguredAssignor(t *testing.T) {
	t.Parallel()
	node, dir := needKafkajs(t)
	matrix.Record(t, rkKafkajsRow(t, dir, "RoundRobinAssigner served by range", "kfake"))
	ctx := testCtx(t, 120*time.Second)
	d := startDaemon(t, t.TempDir(), kafkajsConfig())
	const group = "js-orders"
	rkProcJoinLeave(ctx, t, d, adminClient(t, []string{d.bootstrap}), rkProcGroup{
		group: group, topic: "orders", partitions: 6,
		start: func(t *testing.T, id string) *consumerProc {
			return rkStartKafkajs(t, node, dir, d.bootstrap, group, "orders", id)
		},
		protocol: "RoundRobinAssigner", assignor: "range", assign: rangeassignor.Assign, relayed: roundrobin.Assign,
	})
}

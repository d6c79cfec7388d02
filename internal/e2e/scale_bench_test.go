package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/loadtest"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/realkafka"
)

// BenchmarkLoadtestWithABroker runs one loadtest load on kfake (the
// reference, a process of its own), on the gateway in front of a real
// Kafka 4.4 broker, and on that broker's own coordinator, one after
// another, and reports each one's ratios against kfake. The load is sized
// for one broker on 2 cores (-Xmx256m): 100 groups of 10 on 20 topics of
// 16 partitions. The broker is sampled for CPU and memory; the gateway's
// figures are the daemon's and its workers'. Each result's table is logged.
func BenchmarkLoadtestWithABroker(b *testing.B) {
	root := testutil.Root(b)
	if _, err := realkafka.EnsureCache(context.Background(), root, realkafka.DefaultCacheDir(root, realkafka.DefaultVersion), realkafka.DefaultVersion, false); err != nil {
		if os.Getenv(realkafka.EnvRequired) == "1" {
			b.Fatal(err)
		}
		b.Skipf("no real broker: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	broker := realkafka.Start(ctx, b, realkafka.Options{JVMFlags: benchJVMFlags()})
	d := startDaemon(b, b.TempDir(), testutil.GatewayConfig{
		Brokers: broker.Addrs(),
		Groups:  []testutil.GroupRule{{Match: "*"}},
		Extra:   "[log]\nlevel = \"warn\"\n",
	}.String())
	cfg := loadtest.DefaultConfig()
	cfg.Groups, cfg.Members, cfg.Topics, cfg.Partitions = 100, 10, 20, 16
	cfg.Duration = 20 * time.Second
	targets := []loadtest.Target{
		{Name: "kfake", Embedded: true},
		{Name: "gateway", Addr: d.bootstrap, PID: d.cmd.Process.Pid},
		{Name: "kafka", Addr: broker.Addrs()[0], PID: broker.Node(1).PID()},
	}
	// The broker's JIT warms up under whichever load comes first, which
	// would favour the one after it: both go through a shorter load of
	// their own first, and its figures are dropped.
	warm := cfg
	warm.Groups, warm.Duration = 20, 5*time.Second
	for _, t := range targets[1:] {
		w := warm
		w.GroupPrefix = "rk-warm-" + t.Name + "-"
		if _, err := loadtest.Run(ctx, w, t, nil); err != nil {
			b.Fatal(err)
		}
	}
	for range b.N {
		var results []*loadtest.Result
		for i, t := range targets {
			c := cfg
			c.GroupPrefix = "rk-" + t.Name + "-"
			res, err := loadtest.Run(ctx, c, t, nil)
			if err != nil {
				b.Fatal(err)
			}
			if !res.Stable {
				b.Fatalf("%s never became stable: %v", t.Name, res.Unstable)
			}
			results = append(results, res)
			b.Logf("%s: join-to-stable %v, heartbeat p50/p99 %v/%v, commit p50/p99 %v/%v (%d measured)", t.Name, res.JoinToStable,
				res.Heartbeat.P50, res.Heartbeat.P99, res.Commit.P50, res.Commit.P99, res.Commit.Count)
			if i == 0 {
				continue
			}
			r := loadtest.Compare(results[0], res)
			report := func(name string, v *float64) {
				if v != nil {
					b.ReportMetric(*v, t.Name+"-"+name+"-ratio")
				}
			}
			report("join", r.JoinToStable)
			report("hbp99", r.HeartbeatP99)
			report("commitp99", r.CommitP99)
			report("cpu", r.CPUPerHeartbeat)
			report("rss", r.RSSPer1000Members)
		}
	}
}

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/matrix"
	"github.com/wasmassign/wasmassign/internal/testutil/realkafka"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/plugins/roundrobin"
	"github.com/wasmassign/wasmassign/plugins/sticky"
)

// rkClientsConfig fronts one real broker: rk-rr-* groups are served by
// roundrobin and rk-range-* groups by range whatever their members offer,
// the rest by the assignor of the protocol they agree on. There is no
// [upstream.broker_racks]: the broker's rack is its own broker.rack.
func rkClientsConfig(broker string) string {
	return testutil.GatewayConfig{
		Brokers: []string{broker},
		Groups: []testutil.GroupRule{
			{Match: "rk-rr-*", Assignor: "roundrobin"},
			{Match: "rk-range-*", Assignor: "range"},
			{Match: "*"},
		},
	}.String()
}

// TestRealKafkaClients_KgoKcatAndKafkajsThroughTheGatewayOnARealBroker runs
// the kgo, kcat and kafkajs scenarios of the kfake tests through
// `wasmassign serve` in front of one real Apache Kafka broker (with
// broker.rack az-a), each group on its own topic, in parallel:
//
//   - kgo cooperative-sticky with racks, through a join and a leave: each
//     rebalance is what the plugin computes from what the members owned,
//     unmoved partitions are never revoked;
//   - kgo range served by roundrobin, through a join and a leave;
//   - kgo static members: a restart causes no rebalance;
//   - kcat range served by roundrobin, and kcat cooperative-sticky, whose
//     members (by kcat's own rebalance log) never give up a partition they
//     keep;
//   - kafkajs RoundRobinAssigner served by range.
//
// In every group each record is read once, by the member the gateway
// assigned its partition, after every rebalance the assignment is what the
// configured plugin computes, the commits, read straight from the broker,
// are the end offsets, and a consumer restarted after everyone stopped
// reads on from them. The groups served by another plugin than their
// members offer check that the offered one would compute something else.
func TestRealKafkaClients_KgoKcatAndKafkajsThroughTheGatewayOnARealBroker(t *testing.T) {
	ctx := testCtx(t, 240*time.Second)
	kcat := needCommand(t, "kcat", "kcat")
	node, jsDir := needKafkajs(t)
	startCtx, cancel := context.WithTimeout(ctx, 120*time.Second)
	c := realkafka.Start(startCtx, t, realkafka.Options{Racks: []string{"az-a"}})
	cancel()
	upstream := "Apache Kafka " + c.Cache.Version
	direct := c.Client(t)
	const parts = 6
	topics := []string{"rk-kgo-coop", "rk-kgo-rr", "rk-kgo-static", "rk-kcat-rr", "rk-kcat-coop", "rk-js"}
	createTopics(ctx, t, direct, parts, topics...)
	d := startDaemon(t, t.TempDir(), rkClientsConfig(c.Nodes[0].Addr))
	brokers := map[int32]string{c.Nodes[0].ID: "az-a"}
	kgoEnv := func(topic string) rkKgoEnv {
		return rkKgoEnv{d: d, admin: direct, topic: topic, partitions: parts, brokerRacks: brokers}
	}
	kcatStart := func(group, strategy, topic string) func(*testing.T, string) *consumerProc {
		return func(t *testing.T, id string) *consumerProc {
			return startKcat(t, kcat, d.bootstrap, group, id, strategy, topic)
		}
	}

	tests := []struct {
		name, strategy string
		row            func(t *testing.T, strategy string) matrix.Row
		run            func(t *testing.T)
	}{
		{
			name: "kgo cooperative-sticky", strategy: "cooperative-sticky",
			row: func(t *testing.T, s string) matrix.Row { return rkKgoRow(t, s, upstream) },
			run: func(t *testing.T) {
				// One broker, in az-a: members elsewhere cannot be rack-local,
				// and the plugin's answer is the check.
				racks := map[string]string{"a1": "az-a", "b1": "az-b", "c1": "az-c", "a2": "az-a"}
				rkKgoCooperative(ctx, t, kgoEnv("rk-kgo-coop"), "rk-kgo-coop", racks, false)
			},
		},
		{
			name: "kgo range served by roundrobin", strategy: "range served by roundrobin",
			row: func(t *testing.T, s string) matrix.Row { return rkKgoRow(t, s, upstream) },
			run: func(t *testing.T) {
				rkKgoEagerJoinLeave(ctx, t, kgoEnv("rk-kgo-rr"), "rk-rr-kgo", rkKgoEager{
					balancer: kgo.RangeBalancer(), protocol: "range", assignor: "roundrobin",
					assign: roundrobin.Assign, relayed: rangeassignor.Assign,
				})
			},
		},
		{
			name: "kgo static members", strategy: "cooperative-sticky",
			row: func(t *testing.T, s string) matrix.Row { return rkKgoRow(t, s, upstream) },
			run: func(t *testing.T) { rkKgoStaticRestart(ctx, t, kgoEnv("rk-kgo-static"), "rk-kgo-static") },
		},
		{
			name: "kcat range served by roundrobin", strategy: "range served by roundrobin",
			row: func(t *testing.T, s string) matrix.Row { return rkKcatRow(t, kcat, s, upstream) },
			run: func(t *testing.T) {
				rkProcJoinLeave(ctx, t, d, direct, rkProcGroup{
					group: "rk-rr-kcat", topic: "rk-kcat-rr", partitions: parts,
					start:    kcatStart("rk-rr-kcat", "range", "rk-kcat-rr"),
					protocol: "range", assignor: "roundrobin", assign: roundrobin.Assign, relayed: rangeassignor.Assign,
					commitsOnRevoke: true, brokerRacks: brokers,
				})
			},
		},
		{
			name: "kcat cooperative-sticky", strategy: "cooperative-sticky",
			row: func(t *testing.T, s string) matrix.Row { return rkKcatRow(t, kcat, s, upstream) },
			run: func(t *testing.T) {
				rkProcJoinLeave(ctx, t, d, direct, rkProcGroup{
					group: "rk-kcat-coop", topic: "rk-kcat-coop", partitions: parts,
					start:    kcatStart("rk-kcat-coop", "cooperative-sticky", "rk-kcat-coop"),
					protocol: "cooperative-sticky", assignor: "cooperative-sticky", assign: sticky.AssignCooperative,
					cooperative: true, revokes: func(k *consumerProc) [][]int32 { return k.rkRevokes("rk-kcat-coop") },
					commitsOnRevoke: true, brokerRacks: brokers,
				})
			},
		},
		{
			name: "kafkajs RoundRobinAssigner served by range", strategy: "RoundRobinAssigner served by range",
			row: func(t *testing.T, s string) matrix.Row { return rkKafkajsRow(t, jsDir, s, upstream) },
			run: func(t *testing.T) {
				rkProcJoinLeave(ctx, t, d, direct, rkProcGroup{
					group: "rk-range-js", topic: "rk-js", partitions: parts,
					start: func(t *testing.T, id string) *consumerProc {
						return rkStartKafkajs(t, node, jsDir, d.bootstrap, "rk-range-js", "rk-js", id)
					},
					protocol: "RoundRobinAssigner", assignor: "range", assign: rangeassignor.Assign, relayed: roundrobin.Assign,
					brokerRacks: brokers,
				})
			},
		},
	}
	// The groups share the broker and the gateway; a group wrapper waits
	// for all of them before the cleanups stop the broker.
	t.Run("groups", func(t *testing.T) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				matrix.Record(t, tt.row(t, tt.strategy))
				began := time.Now()
				tt.run(t)
				t.Logf("%s took %v", tt.name, time.Since(began).Round(time.Millisecond))
			})
		}
	})
}

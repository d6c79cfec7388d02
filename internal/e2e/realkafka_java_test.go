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
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// oneBrokerConfig fronts one real broker (node 1, in rack az-a): groups
// matching rrMatch are served by roundrobin whatever their members offer,
// the rest by the assignor of the protocol they agree on.
func oneBrokerConfig(broker, rrMatch string) string {
	return testutil.GatewayConfig{
		Brokers:     []string{broker},
		BrokerRacks: map[int32]string{1: "az-a"},
		Groups:      []testutil.GroupRule{{Match: rrMatch, Assignor: "roundrobin"}, {Match: "*"}},
	}.String()
}

// javaClient is the matrix's name for the Java reference client.
const javaClient = "Java kafka-clients"

// javaRig is what the Java interop tests share within one test function:
// the real cluster, the compiled client program, one gateway in front of
// the cluster, and clients straight to the cluster and through the gateway.
type javaRig struct {
	ctx    context.Context
	c      *realkafka.Cluster
	run    *javaRunner
	d      *daemon
	direct *kgo.Client // bypasses the gateway
	gw     *kgo.Client // through the gateway
	// brokers are the broker racks the gateway should see, by node id.
	brokers map[int32]string
	// upstream is the matrix's name for the cluster.
	upstream string
}

// javaStartRig starts the gateway with configText in front of c and
// compiles the Java client program.
func javaStartRig(ctx context.Context, t *testing.T, c *realkafka.Cluster, configText, upstream string, brokers map[int32]string) *javaRig {
	t.Helper()
	d := startDaemon(t, t.TempDir(), configText)
	return &javaRig{
		ctx:      ctx,
		c:        c,
		run:      javaBuild(ctx, t, c),
		d:        d,
		direct:   c.Client(t),
		gw:       adminClient(t, []string{d.bootstrap}),
		brokers:  brokers,
		upstream: upstream,
	}
}

// record adds t's row to the interop matrix.
func (r *javaRig) record(t *testing.T, strategy string) {
	t.Helper()
	matrix.Record(t, matrix.Row{Client: javaClient, Version: r.run.version, Strategy: strategy, Upstream: r.upstream})
}

// TestRealKafkaJava_GroupsThroughTheGatewayOnARealBroker runs the Java
// reference consumer (kafka-clients, classic protocol) through the gateway
// in front of one real Apache Kafka broker, one group and topic per
// subtest:
//
//   - a RangeAssignor group that the rules serve with roundrobin, and a
//     CooperativeStickyAssignor group with client.rack set: two members
//     start, a third joins and the first leaves;
//   - rolling upgrades: a member offering [cooperative-sticky, range] (so
//     eager) among cooperative ones, and members whose preferences differ
//     so that the vote changes the protocol (realkafka_java_upgrade_test.go);
//   - a static member restarting without a rebalance, and commits that
//     survive a consumer's restart and crash (realkafka_java_restart_test.go).
//
// Throughout, each member holds what the serving plugin computes, every
// record is read once and only by the member that owned its partition,
// and the commits, read straight from the broker, are the end offsets.
func TestRealKafkaJava_GroupsThroughTheGatewayOnARealBroker(t *testing.T) {
	ctx := testCtx(t, 300*time.Second)
	startCtx, cancel := context.WithTimeout(ctx, 100*time.Second)
	c := realkafka.Start(startCtx, t, realkafka.Options{})
	cancel()
	r := javaStartRig(ctx, t, c, oneBrokerConfig(c.Nodes[0].Addr, "jrr-*"), "Apache Kafka "+c.Cache.Version, map[int32]string{1: "az-a"})

	tests := []struct {
		name, group, topic, assignors, rack string
		protocol, assignor                  string
		cooperative                         bool
		// relayed, when set, is the plugin of the protocol the members
		// offered, which must compute something else than the one serving.
		relayed func(*abi.Request) (*abi.Response, error)
	}{
		{name: "range served by roundrobin", group: "jrr-range", topic: "java-range", assignors: "RangeAssignor",
			protocol: "range", assignor: "roundrobin", relayed: rangeassignor.Assign},
		{name: "cooperative sticky with racks", group: "java-coop", topic: "java-coop", assignors: "CooperativeStickyAssignor",
			rack: "az-a", protocol: "cooperative-sticky", assignor: "cooperative-sticky", cooperative: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			strategy := tt.protocol
			if tt.assignor != tt.protocol {
				strategy += " served by " + tt.assignor
			}
			r.record(t, strategy)
			const parts = 6
			pl := r.javaTopic(t, tt.topic, parts)
			start := func(id string) *procMember {
				return r.startJava(t, javaSpec{group: tt.group, topic: tt.topic, assignors: tt.assignors, clientID: id, rack: tt.rack})
			}
			check := func(g adminGroup, ms []*procMember) {
				t.Helper()
				checkServedBy(t, g, tt.protocol, tt.assignor)
				r.checkAssignment(t, g, tt.topic, pl, ms)
				if tt.relayed != nil && len(ms) > 1 {
					rounds := map[string]javaRound{}
					for _, m := range ms {
						rounds[m.clientID], _ = m.round(g.Generation)
					}
					other, err := javaExpected(g, tt.relayed, tt.topic, pl, r.brokers, rounds)
					checkRelayTellable(t, other, err, adminAssignment(g))
				}
				for _, m := range g.Members {
					if m.Rack != tt.rack {
						t.Errorf("%s has rack %q in the gateway, want %q", m.ClientID, m.Rack, tt.rack)
					}
				}
			}
			settle := func(ms ...*procMember) adminGroup {
				t.Helper()
				g, err := settledJava(ctx, r.d, tt.group, tt.topic, parts, ms)
				if err != nil {
					t.Fatal(err)
				}
				check(g, ms)
				return g
			}

			// Members join one at a time, so that every stable state is
			// the plugin's answer to the holdings of the one before.
			a := start(tt.group + "-a")
			settle(a)
			marks := memberMarks([]*procMember{a})
			b := start(tt.group + "-b")
			settle(a, b)
			if tt.cooperative {
				checkUnmovedKept(t, tt.topic, []*procMember{a}, marks)
			}
			produce(ctx, t, c.Addrs(), tt.topic, 120)

			marks = memberMarks([]*procMember{a, b})
			cm := start(tt.group + "-c")
			g := settle(a, b, cm)
			if len(cm.ownedNow()) == 0 {
				t.Errorf("the joining member got nothing: %v", adminAssignment(g))
			}
			if tt.cooperative {
				checkUnmovedKept(t, tt.topic, []*procMember{a, b}, marks)
			}
			produce(ctx, t, c.Addrs(), tt.topic, 120)

			marks = memberMarks([]*procMember{b, cm})
			a.stop()
			settle(b, cm)
			if tt.cooperative {
				// A member leaving moves only its partitions.
				checkNoneRevoked(t, []*procMember{b, cm}, marks, "when another member left")
			}
			produce(ctx, t, c.Addrs(), tt.topic, 120)

			r.finish(t, tt.group, tt.topic, parts, []*procMember{a, b, cm})
		})
	}
	t.Run("rolling upgrade: an eager member among cooperative ones", r.javaRollingUpgrade)
	t.Run("rolling upgrade: the vote changes the protocol", r.javaProtocolVote)
	t.Run("static member restarts without a rebalance", r.javaStaticRestart)
	t.Run("commits survive a restart and a crash", r.javaCommitsSurviveRestart)
}

// finish waits until members have read every record of topic once, checks
// that no partition had two owners at once, stops the members and checks
// that the group's commits, read straight from the broker, are the end
// offsets.
func (r *javaRig) finish(t *testing.T, group, topic string, parts int32, ms []*procMember) {
	t.Helper()
	mustReadAllToEnd(r.ctx, t, r.direct, topic, parts, ms)
	for _, m := range ms {
		m.stop()
	}
	if err := javaNoDoubleOwnership(ms); err != nil {
		t.Error(err)
	}
	// Read straight from the broker: the commits went through the gateway
	// to the real group coordinator.
	if err := checkCommittedAtEnd(r.ctx, r.direct, group, topic, parts); err != nil {
		t.Error(err)
	}
}

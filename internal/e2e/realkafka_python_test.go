package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
	"github.com/wasmassign/wasmassign/internal/testutil/matrix"
	"github.com/wasmassign/wasmassign/internal/testutil/realkafka"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/plugins/roundrobin"
	"github.com/wasmassign/wasmassign/plugins/sticky"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// pyInterpreter is the virtualenv's python that `make python-clients`
// fills. Without it the test skips, or fails under REALKAFKA_REQUIRED=1.
func pyInterpreter(t *testing.T) string {
	t.Helper()
	p := filepath.Join(env.root, ".cache", "python", "bin", "python")
	if _, err := os.Stat(p); err != nil {
		msg := fmt.Sprintf("no Python clients at %s (%v); run `make python-clients`", p, err)
		if os.Getenv(realkafka.EnvRequired) == "1" {
			t.Fatalf("%s (%s=1 forbids skipping)", msg, realkafka.EnvRequired)
		}
		t.Skip(msg)
	}
	return p
}

// pyClient is one Python Kafka library and its consumer script.
type pyClient struct {
	lib    string // the PyPI name, for test names
	script string // in testdata/realkafka/python
	// name and version are the matrix's Client and Version, from the
	// library itself (the script's --version line).
	name, version string
}

// pyVersion asks script which library versions it runs on.
func pyVersion(ctx context.Context, t *testing.T, python, script string) pyClient {
	t.Helper()
	path := filepath.Join(env.root, "testdata", "realkafka", "python", script)
	out, err := exec.CommandContext(ctx, python, path, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", script, err, out)
	}
	f := strings.Fields(string(out))
	c := pyClient{script: path}
	switch {
	case len(f) == 5 && f[0] == "client" && f[1] == "confluent-kafka" && f[3] == "librdkafka":
		c.lib, c.name, c.version = f[1], fmt.Sprintf("confluent-kafka (librdkafka %s)", f[4]), f[2]
	case len(f) == 3 && f[0] == "client":
		c.lib, c.name, c.version = f[1], f[1], f[2]
	default:
		t.Fatalf("%s --version printed %q", script, out)
	}
	return c
}

// pyStart runs the client's script as clientID in group and stops it
// (SIGTERM) when the test ends. rack and instance may be "-" for none;
// props are KEY=VALUE client properties, for the scripts that take them.
func pyStart(ctx context.Context, t *testing.T, python string, c pyClient, bootstrap, group, topic, strategy, clientID, rack, instance string, props ...string) *procMember {
	t.Helper()
	cmd := exec.CommandContext(ctx, python, append([]string{"-u", c.script, bootstrap, group, topic, strategy, clientID, rack, instance}, props...)...)
	return startProcMember(t, clientID, topic, cmd)
}

// pySettled waits until the gateway shows group Stable with exactly
// members, holding all partitions of topic, each with rack, and each
// member holds by its own callbacks exactly what the gateway assigned it.
func pySettled(ctx context.Context, d *daemon, group, topic string, partitions int, rack string, members []*procMember) (adminGroup, error) {
	return settledMembers(ctx, d, group, topic, partitions, members, func(_ adminGroup, x adminMember, m *procMember) error {
		if x.Rack != rack {
			return fmt.Errorf("%s has rack %q in the gateway, want %q", m.clientID, x.Rack, rack)
		}
		return nil
	})
}

// TestRealKafkaPython_GroupsThroughTheGatewayOnARealBroker runs the Python
// clients, confluent-kafka (librdkafka) and kafka-python, through the
// gateway in front of a real Apache Kafka broker. For each library, a
// range group that the rules serve with roundrobin and a
// cooperative-sticky group: two members start, a third joins and the first
// leaves. After every rebalance each member holds, by its own callbacks,
// what the configured plugin computes; every record is read once, and only
// by the member that owned its partition; cooperative members never revoke
// a partition they keep. The commits, read straight from the broker, are
// the end offsets, and a member started after everyone left reads only the
// records produced since: the commits survived. confluent-kafka's
// client.rack reaches the gateway in its subscription (KIP-881);
// kafka-python's only in its Fetch requests (KIP-392), from which the
// gateway learns it without a rebalance (Kafka never rebalances for a
// rack). For each library, a static
// member (group.instance.id) that restarts takes its old partitions back
// without a rebalance.
func TestRealKafkaPython_GroupsThroughTheGatewayOnARealBroker(t *testing.T) {
	python := pyInterpreter(t)
	ctx := testCtx(t, 240*time.Second)
	confluent := pyVersion(ctx, t, python, "consume_confluent.py")
	kafkaPython := pyVersion(ctx, t, python, "consume_kafka_python.py")
	startCtx, cancel := context.WithTimeout(ctx, 100*time.Second)
	c := realkafka.Start(startCtx, t, realkafka.Options{})
	cancel()
	upstream := "Apache Kafka " + c.Cache.Version
	direct := c.Client(t)
	d := startDaemon(t, t.TempDir(), oneBrokerConfig(c.Nodes[0].Addr, "pyrr-*"))
	brokers := map[int32]string{1: "az-a"}

	tests := []struct {
		name         string
		client       pyClient
		group, topic string
		strategy     string // what the members offer
		// rack is the members' client.rack ("-" for none); subRack the rack
		// their subscription carries, as the gateway shows it before they
		// fetch; wantRack the one it shows once they fetch (KIP-392).
		rack, subRack, wantRack string
		protocol, assignor      string
		cooperative             bool
		// assign is the plugin the rules pick; relayed, when set, is the
		// one the members offered, which must compute something else.
		assign, relayed func(*abi.Request) (*abi.Response, error)
	}{
		{name: "confluent-kafka range served by roundrobin", client: confluent, group: "pyrr-ck-range", topic: "py-ck-range",
			strategy: "range", rack: "-", protocol: "range", assignor: "roundrobin", assign: roundrobin.Assign, relayed: rangeassignor.Assign},
		{name: "confluent-kafka cooperative-sticky with client.rack", client: confluent, group: "py-ck-coop", topic: "py-ck-coop",
			strategy: "cooperative-sticky", rack: "az-a", subRack: "az-a", wantRack: "az-a", protocol: "cooperative-sticky", assignor: "cooperative-sticky",
			cooperative: true, assign: sticky.AssignCooperative},
		{name: "kafka-python range served by roundrobin", client: kafkaPython, group: "pyrr-kp-range", topic: "py-kp-range",
			strategy: "range", rack: "-", protocol: "range", assignor: "roundrobin", assign: roundrobin.Assign, relayed: rangeassignor.Assign},
		{name: "kafka-python cooperative-sticky", client: kafkaPython, group: "py-kp-coop", topic: "py-kp-coop",
			strategy: "cooperative-sticky", rack: "az-a", wantRack: "az-a", protocol: "cooperative-sticky", assignor: "cooperative-sticky",
			cooperative: true, assign: sticky.AssignCooperative},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			strategy := tt.strategy
			if tt.assignor != tt.protocol {
				strategy += " served by " + tt.assignor
			}
			matrix.Record(t, matrix.Row{Client: tt.client.name, Version: tt.client.version, Strategy: strategy, Upstream: upstream})
			const parts = 6
			pl := createTopicPlaced(ctx, t, direct, tt.topic, parts)
			start := func(id string) *procMember {
				return pyStart(ctx, t, python, tt.client, d.bootstrap, tt.group, tt.topic, tt.strategy, id, tt.rack, "-")
			}
			// check compares the gateway's assignment with the plugin's, from
			// what each member held before the rebalance (cooperative only).
			check := func(g adminGroup, before map[string][]int32, gen int32) {
				t.Helper()
				checkServedBy(t, g, tt.protocol, tt.assignor)
				var owned map[string][]kfakegroup.TopicPartition
				if tt.cooperative {
					owned = map[string][]kfakegroup.TopicPartition{}
					for id, ps := range before {
						for _, p := range ps {
							owned[id] = append(owned[id], kfakegroup.TopicPartition{Topic: tt.topic, Partition: p})
						}
					}
				}
				want, err := expected(g, tt.assign, pl, brokers, owned, gen)
				if err != nil {
					t.Fatal(err)
				}
				if got := adminAssignment(g); !sameAssignment(got, want) {
					t.Errorf("gateway assigned %v; %s computes %v", got, tt.assignor, want)
				}
				if tt.relayed != nil {
					other, err := expected(g, tt.relayed, pl, brokers, nil, 0)
					checkRelayTellable(t, other, err, want)
				}
			}
			holdings := func(ms []*procMember) map[string][]int32 {
				out := map[string][]int32{}
				for _, m := range ms {
					out[m.clientID] = m.ownedNow()
				}
				return out
			}
			readAll := func(ms []*procMember) {
				t.Helper()
				mustReadAllToEnd(ctx, t, direct, tt.topic, parts, ms)
			}

			// Members join one at a time, so that every stable state is
			// the plugin's answer to the holdings of the one before.
			a := start(tt.group + "-a")
			g, err := pySettled(ctx, d, tt.group, tt.topic, parts, tt.wantRack, []*procMember{a})
			if err != nil {
				t.Fatal(err)
			}
			// The first member fetches only once it has partitions, so a
			// rack the gateway learns from its Fetch requests arrives after
			// the first assignment; it costs no rebalance, as in Kafka,
			// and one from the subscription is there from the start.
			if tt.wantRack != "" && g.Generation != 1 {
				t.Errorf("generation %d once %s's rack is known: a rack, from the subscription or from Fetch requests, costs no rebalance", g.Generation, a.clientID)
			}
			before, gen := holdings([]*procMember{a}), g.Generation
			marks := memberMarks([]*procMember{a})
			b := start(tt.group + "-b")
			if g, err = pySettled(ctx, d, tt.group, tt.topic, parts, tt.wantRack, []*procMember{a, b}); err != nil {
				t.Fatal(err)
			}
			check(g, before, gen)
			if tt.cooperative {
				checkUnmovedKept(t, tt.topic, []*procMember{a}, marks)
			}
			produce(ctx, t, c.Addrs(), tt.topic, 120)

			before, gen = holdings([]*procMember{a, b}), g.Generation
			marks = memberMarks([]*procMember{a, b})
			cm := start(tt.group + "-c")
			if g, err = pySettled(ctx, d, tt.group, tt.topic, parts, tt.wantRack, []*procMember{a, b, cm}); err != nil {
				t.Fatal(err)
			}
			check(g, before, gen)
			if len(cm.ownedNow()) == 0 {
				t.Errorf("the joining member got nothing: %v", adminAssignment(g))
			}
			if tt.cooperative {
				checkUnmovedKept(t, tt.topic, []*procMember{a, b}, marks)
			}
			produce(ctx, t, c.Addrs(), tt.topic, 120)

			before, gen = holdings([]*procMember{b, cm}), g.Generation
			marks = memberMarks([]*procMember{b, cm})
			a.stop()
			if g, err = pySettled(ctx, d, tt.group, tt.topic, parts, tt.wantRack, []*procMember{b, cm}); err != nil {
				t.Fatal(err)
			}
			check(g, before, gen)
			if tt.cooperative {
				// A member leaving moves only its partitions.
				checkNoneRevoked(t, []*procMember{b, cm}, marks, "when another member left")
			}
			produce(ctx, t, c.Addrs(), tt.topic, 120)
			readAll([]*procMember{a, b, cm})
			b.stop()
			cm.stop()
			// Read straight from the broker: the commits went through the
			// gateway to the real group coordinator.
			if err := checkCommittedAtEnd(ctx, direct, tt.group, tt.topic, parts); err != nil {
				t.Fatal(err)
			}

			// A restarted member resumes from the commits: with
			// auto.offset.reset=earliest, lost commits would show as records
			// read twice.
			produce(ctx, t, c.Addrs(), tt.topic, 60)
			r := start(tt.group + "-restarted")
			if _, err := pySettled(ctx, d, tt.group, tt.topic, parts, tt.wantRack, []*procMember{r}); err != nil {
				t.Fatal(err)
			}
			readAll([]*procMember{a, b, cm, r})
			r.stop()
			if err := checkCommittedAtEnd(ctx, direct, tt.group, tt.topic, parts); err != nil {
				t.Error(err)
			}
		})
	}

	// Static members (group.instance.id, KIP-345) do not leave the group on
	// shutdown; one that comes back within its session takes its old
	// place: same generation, same partitions, and the other member sees
	// no rebalance at all.
	for _, st := range []struct {
		client       pyClient
		group, topic string
	}{
		{client: confluent, group: "py-ck-static", topic: "py-ck-static"},
		{client: kafkaPython, group: "py-kp-static", topic: "py-kp-static"},
	} {
		t.Run(st.client.lib+" static member restarts without a rebalance", func(t *testing.T) {
			matrix.Record(t, matrix.Row{Client: st.client.name, Version: st.client.version, Strategy: "range", Upstream: upstream})
			const parts = 6
			pl := createTopicPlaced(ctx, t, direct, st.topic, parts)
			start := func(n string) *procMember {
				id := st.group + "-" + n
				return pyStart(ctx, t, python, st.client, d.bootstrap, st.group, st.topic, "range", id, "-", id)
			}
			s1, s2 := start("1"), start("2")
			g, err := pySettled(ctx, d, st.group, st.topic, parts, "", []*procMember{s1, s2})
			if err != nil {
				t.Fatal(err)
			}
			if g.Protocol != "range" || g.Assignor != "range" {
				t.Errorf("protocol %q assignor %q; want range served by range", g.Protocol, g.Assignor)
			}
			for _, m := range g.Members {
				if m.InstanceID == nil || *m.InstanceID != m.ClientID {
					t.Errorf("%s has instance id %v in the gateway, want %q", m.ClientID, m.InstanceID, m.ClientID)
				}
			}
			want, err := expected(g, rangeassignor.Assign, pl, brokers, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := adminAssignment(g); !sameAssignment(got, want) {
				t.Errorf("gateway assigned %v; range computes %v", got, want)
			}
			held, mark := s1.ownedNow(), s2.mark()
			produce(ctx, t, c.Addrs(), st.topic, 60)
			readAll := func(ms []*procMember) {
				t.Helper()
				mustReadAllToEnd(ctx, t, direct, st.topic, parts, ms)
			}
			readAll([]*procMember{s1, s2})

			s1.stop()
			produce(ctx, t, c.Addrs(), st.topic, 60)
			back := start("1")
			g2, err := pySettled(ctx, d, st.group, st.topic, parts, "", []*procMember{back, s2})
			if err != nil {
				t.Fatal(err)
			}
			checkBackInPlace(t, g, g2, back, held)
			checkNoneRevoked(t, []*procMember{s2}, []int{mark}, "while a static member restarted")
			readAll([]*procMember{s1, s2, back})
			back.stop()
			s2.stop()
			if err := checkCommittedAtEnd(ctx, direct, st.group, st.topic, parts); err != nil {
				t.Error(err)
			}
		})
	}
}

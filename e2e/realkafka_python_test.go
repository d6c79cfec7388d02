package e2e

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
	"github.com/wasmassign/wasmassign/internal/testutil/matrix"
	"github.com/wasmassign/wasmassign/internal/testutil/realkafka"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/plugins/roundrobin"
	"github.com/wasmassign/wasmassign/plugins/sticky"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// pyConfig fronts one real broker (node 1, in rack az-a): groups named
// pyrr-* are served by roundrobin whatever their members offer, the rest
// by the assignor of the protocol they agree on.
func pyConfig(broker string) string {
	return fmt.Sprintf(`
[server]
listen = "127.0.0.1:0"
advertised_host = "127.0.0.1"
broker_port_base = 0
admin_listen = "127.0.0.1:0"

[upstream]
brokers = [%q]
metadata_refresh = "1s"
[upstream.broker_racks]
"1" = "az-a"

[[groups]]
match = "pyrr-*"
assignor = "roundrobin"
initial_rebalance_delay = "0s"
min_session_timeout = "1s"

[[groups]]
match = "*"
initial_rebalance_delay = "0s"
min_session_timeout = "1s"
`, broker)
}

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

// pyEvent is one rebalance callback a Python member printed.
type pyEvent struct {
	kind       string // assigned, revoked, lost
	partitions []int32
	closing    bool // printed after the member began shutting down
}

// pyMember is one consumer script process and what it has printed.
type pyMember struct {
	clientID string
	cmd      *exec.Cmd
	stderr   *syncBuffer
	exited   chan struct{}

	mu      sync.Mutex
	read    map[[2]int64]int // (partition, offset) -> times read
	owned   map[int32]bool   // by its own callbacks
	events  []pyEvent
	closing bool
	// strays are records read of partitions it did not own at the time.
	strays []string
}

// pyStart runs the client's script as clientID in group and stops it
// (SIGTERM) when the test ends. rack and instance may be "-" for none.
func pyStart(ctx context.Context, t *testing.T, python string, c pyClient, bootstrap, group, topic, strategy, clientID, rack, instance string) *pyMember {
	t.Helper()
	cmd := exec.CommandContext(ctx, python, "-u", c.script, bootstrap, group, topic, strategy, clientID, rack, instance)
	m := &pyMember{clientID: clientID, cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{}),
		read: map[[2]int64]int{}, owned: map[int32]bool{}}
	cmd.Stderr = m.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	prefix := topic + "/"
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			m.line(prefix, sc.Text())
		}
		_ = cmd.Wait()
		close(m.exited)
	}()
	t.Cleanup(func() {
		m.stop()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", clientID, tail(m.stderr.String(), 20))
		}
	})
	return m
}

// line records one printed line.
func (m *pyMember) line(prefix, s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := strings.Fields(s)
	switch {
	case len(f) == 0:
	case f[0] == "closing":
		m.closing = true
	case f[0] == "assigned" || f[0] == "revoked" || f[0] == "lost":
		ev := pyEvent{kind: f[0], closing: m.closing}
		for _, tp := range f[1:] {
			p, err := strconv.ParseInt(strings.TrimPrefix(tp, prefix), 10, 32)
			if err != nil {
				continue
			}
			ev.partitions = append(ev.partitions, int32(p))
			if f[0] == "assigned" {
				m.owned[int32(p)] = true
			} else {
				delete(m.owned, int32(p))
			}
		}
		m.events = append(m.events, ev)
	case strings.HasPrefix(f[0], prefix):
		ps, os, ok := strings.Cut(strings.TrimPrefix(f[0], prefix), "@")
		p, err1 := strconv.ParseInt(ps, 10, 32)
		o, err2 := strconv.ParseInt(os, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return
		}
		if !m.owned[int32(p)] {
			m.strays = append(m.strays, f[0])
		}
		m.read[[2]int64{p, o}]++
	}
}

// stop ends the process with SIGTERM and waits for it to exit, killing it
// after 20 s.
func (m *pyMember) stop() {
	select {
	case <-m.exited:
		return
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(20 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
}

// ownedNow is the sorted set the member holds by its callbacks.
func (m *pyMember) ownedNow() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.owned))
}

// mark is the number of events so far, for revokedSince.
func (m *pyMember) mark() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.events)
}

// revokedSince is every partition revoked or lost since mark, except on
// the member's own shutdown.
func (m *pyMember) revokedSince(mark int) []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int32
	for _, ev := range m.events[mark:] {
		if ev.kind != "assigned" && !ev.closing {
			out = append(out, ev.partitions...)
		}
	}
	return out
}

// pySettled waits until the gateway shows group Stable with exactly
// members, holding all partitions of topic, each with rack, and each
// member holds by its own callbacks exactly what the gateway assigned it.
func pySettled(ctx context.Context, d *daemon, group, topic string, partitions int, rack string, members []*pyMember) (adminGroup, error) {
	for {
		g, err := stableWith(ctx, d, group, len(members), topic, partitions)
		if err != nil {
			return g, err
		}
		var last error
		for _, m := range members {
			var want []int32
			found := false
			for _, x := range g.Members {
				if x.ClientID == m.clientID {
					found, want = true, slices.Sorted(slices.Values(x.Assignment[topic]))
					if x.Rack != rack {
						last = fmt.Errorf("%s has rack %q in the gateway, want %q", m.clientID, x.Rack, rack)
					}
				}
			}
			if !found {
				last = fmt.Errorf("%s is not a member: %v", m.clientID, adminAssignment(g))
			}
			if last != nil {
				break
			}
			if got := m.ownedNow(); !slices.Equal(got, want) {
				last = fmt.Errorf("%s holds %v by its callbacks; the gateway assigned it %v", m.clientID, got, want)
				break
			}
		}
		if last == nil {
			return g, nil
		}
		select {
		case <-ctx.Done():
			return g, fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pyReadAllOnce waits until members together read every offset below end,
// then checks none was read twice and none read while not owned.
func pyReadAllOnce(ctx context.Context, ms []*pyMember, end map[int32]int64) error {
	total := int64(0)
	for _, e := range end {
		total += e
	}
	for {
		seen, twice, strays := map[[2]int64]bool{}, []string{}, []string{}
		for _, m := range ms {
			m.mu.Lock()
			for po, n := range m.read {
				if seen[po] || n > 1 {
					twice = append(twice, fmt.Sprintf("%d@%d", po[0], po[1]))
				}
				seen[po] = true
			}
			strays = append(strays, m.strays...)
			m.mu.Unlock()
		}
		if len(twice) > 0 {
			return fmt.Errorf("records read more than once: %v", twice)
		}
		if len(strays) > 0 {
			return fmt.Errorf("records read of partitions the reader did not own: %v", strays)
		}
		if int64(len(seen)) == total {
			for po := range seen {
				if po[1] >= end[int32(po[0])] {
					return fmt.Errorf("read %d@%d, beyond the end offsets %v", po[0], po[1], end)
				}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("read %d of %d records before %w", len(seen), total, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pyReadAll fails the test unless members together read every record of
// topic below its current end offsets within 30 s, each once (pyReadAllOnce).
func pyReadAll(ctx context.Context, t *testing.T, direct *kgo.Client, topic string, partitions int32, members []*pyMember) {
	t.Helper()
	end, err := endOffsets(ctx, direct, topic, partitions)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := pyReadAllOnce(ctx, members, end); err != nil {
		t.Fatal(err)
	}
}

// pyTopic creates topic on the real broker, bypassing the gateway, and
// returns its placement once the broker's metadata has it: CreateTopics
// answers before the metadata cache has caught up, and a Metadata request
// in between gets UNKNOWN_TOPIC_OR_PARTITION.
func pyTopic(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partitions int32) map[string]placement {
	t.Helper()
	createTopic(ctx, t, cl, topic, partitions)
	for {
		pl, err := topicPlacement(ctx, cl, topic)
		if err == nil {
			return pl
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s never showed in the metadata: %v", topic, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
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
// gateway learns it, one rebalance later. For each library, a static
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
	d := startDaemon(t, t.TempDir(), pyConfig(c.Nodes[0].Addr))
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
			pl := pyTopic(ctx, t, direct, tt.topic, parts)
			start := func(id string) *pyMember {
				return pyStart(ctx, t, python, tt.client, d.bootstrap, tt.group, tt.topic, tt.strategy, id, tt.rack, "-")
			}
			// check compares the gateway's assignment with the plugin's, from
			// what each member held before the rebalance (cooperative only).
			check := func(g adminGroup, before map[string][]int32, gen int32) {
				t.Helper()
				if g.Protocol != tt.protocol || g.Assignor != tt.assignor {
					t.Errorf("protocol %q assignor %q; want %q served by %q", g.Protocol, g.Assignor, tt.protocol, tt.assignor)
				}
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
					if other, err := expected(g, tt.relayed, pl, brokers, nil, 0); err != nil || sameAssignment(other, want) {
						t.Errorf("the offered assignor gives the same assignment (%v, %v): a relay could not be told from the gateway", other, err)
					}
				}
			}
			holdings := func(ms []*pyMember) map[string][]int32 {
				out := map[string][]int32{}
				for _, m := range ms {
					out[m.clientID] = m.ownedNow()
				}
				return out
			}
			// unmovedKept checks no member in ms revoked, since marks, a
			// partition it holds again now.
			unmovedKept := func(ms []*pyMember, marks []int) {
				t.Helper()
				for i, m := range ms {
					now := m.ownedNow()
					for _, p := range m.revokedSince(marks[i]) {
						if slices.Contains(now, p) {
							t.Errorf("%s had %s/%d revoked but holds it again: an unmoved partition was revoked", m.clientID, tt.topic, p)
						}
					}
				}
			}
			readAll := func(ms []*pyMember) {
				t.Helper()
				pyReadAll(ctx, t, direct, tt.topic, parts, ms)
			}

			// Members join one at a time, so that every stable state is
			// the plugin's answer to the holdings of the one before.
			a := start(tt.group + "-a")
			g, err := pySettled(ctx, d, tt.group, tt.topic, parts, tt.wantRack, []*pyMember{a})
			if err != nil {
				t.Fatal(err)
			}
			// The first member fetches only once it has partitions, so a
			// rack the gateway learns from its Fetch requests takes a second
			// rebalance, and one from its subscription does not.
			switch {
			case tt.wantRack == "":
			case tt.subRack == tt.wantRack && g.Generation != 1:
				t.Errorf("generation %d once %s's rack is known; its subscription carries the rack, so the first generation should have it", g.Generation, a.clientID)
			case tt.subRack != tt.wantRack && g.Generation == 1:
				t.Errorf("%s's rack is known in generation 1, but its subscription has none: where did it come from?", a.clientID)
			}
			before, gen := holdings([]*pyMember{a}), g.Generation
			marks := []int{a.mark()}
			b := start(tt.group + "-b")
			if g, err = pySettled(ctx, d, tt.group, tt.topic, parts, tt.wantRack, []*pyMember{a, b}); err != nil {
				t.Fatal(err)
			}
			check(g, before, gen)
			if tt.cooperative {
				unmovedKept([]*pyMember{a}, marks)
			}
			produce(ctx, t, c.Addrs(), tt.topic, 120)

			before, gen = holdings([]*pyMember{a, b}), g.Generation
			marks = []int{a.mark(), b.mark()}
			cm := start(tt.group + "-c")
			if g, err = pySettled(ctx, d, tt.group, tt.topic, parts, tt.wantRack, []*pyMember{a, b, cm}); err != nil {
				t.Fatal(err)
			}
			check(g, before, gen)
			if len(cm.ownedNow()) == 0 {
				t.Errorf("the joining member got nothing: %v", adminAssignment(g))
			}
			if tt.cooperative {
				unmovedKept([]*pyMember{a, b}, marks)
			}
			produce(ctx, t, c.Addrs(), tt.topic, 120)

			before, gen = holdings([]*pyMember{b, cm}), g.Generation
			marks = []int{b.mark(), cm.mark()}
			a.stop()
			if g, err = pySettled(ctx, d, tt.group, tt.topic, parts, tt.wantRack, []*pyMember{b, cm}); err != nil {
				t.Fatal(err)
			}
			check(g, before, gen)
			if tt.cooperative {
				// A member leaving moves only its partitions.
				for i, m := range []*pyMember{b, cm} {
					if r := m.revokedSince(marks[i]); len(r) > 0 {
						t.Errorf("%s had %v revoked when another member left", m.clientID, r)
					}
				}
			}
			produce(ctx, t, c.Addrs(), tt.topic, 120)
			readAll([]*pyMember{a, b, cm})
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
			if _, err := pySettled(ctx, d, tt.group, tt.topic, parts, tt.wantRack, []*pyMember{r}); err != nil {
				t.Fatal(err)
			}
			readAll([]*pyMember{a, b, cm, r})
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
			pl := pyTopic(ctx, t, direct, st.topic, parts)
			start := func(n string) *pyMember {
				id := st.group + "-" + n
				return pyStart(ctx, t, python, st.client, d.bootstrap, st.group, st.topic, "range", id, "-", id)
			}
			s1, s2 := start("1"), start("2")
			g, err := pySettled(ctx, d, st.group, st.topic, parts, "", []*pyMember{s1, s2})
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
			readAll := func(ms []*pyMember) {
				t.Helper()
				pyReadAll(ctx, t, direct, st.topic, parts, ms)
			}
			readAll([]*pyMember{s1, s2})

			s1.stop()
			produce(ctx, t, c.Addrs(), st.topic, 60)
			back := start("1")
			g2, err := pySettled(ctx, d, st.group, st.topic, parts, "", []*pyMember{back, s2})
			if err != nil {
				t.Fatal(err)
			}
			if g2.Generation != g.Generation {
				t.Errorf("generation %d after the static member came back, was %d: its restart caused a rebalance", g2.Generation, g.Generation)
			}
			if got := back.ownedNow(); !slices.Equal(got, held) {
				t.Errorf("the restarted static member holds %v, held %v before", got, held)
			}
			if r := s2.revokedSince(mark); len(r) > 0 {
				t.Errorf("%s had %v revoked while a static member restarted", s2.clientID, r)
			}
			readAll([]*pyMember{s1, s2, back})
			back.stop()
			s2.stop()
			if err := checkCommittedAtEnd(ctx, direct, st.group, st.topic, parts); err != nil {
				t.Error(err)
			}
		})
	}
}

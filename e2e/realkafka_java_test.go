package e2e

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
	"github.com/wasmassign/wasmassign/internal/testutil/realkafka"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/plugins/roundrobin"
	"github.com/wasmassign/wasmassign/plugins/sticky"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// realJavaConfig fronts one real broker (node 1, in rack az-a): groups
// named jrr-* are served by roundrobin whatever their members offer, the
// rest by the assignor of the protocol they agree on.
func realJavaConfig(broker string) string {
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
match = "jrr-*"
assignor = "roundrobin"
initial_rebalance_delay = "0s"
min_session_timeout = "1s"

[[groups]]
match = "*"
initial_rebalance_delay = "0s"
min_session_timeout = "1s"
`, broker)
}

// javaEvent is one rebalance-listener callback a Java member printed.
type javaEvent struct {
	kind       string // assigned, revoked, lost
	partitions []int32
	closing    bool // printed after the member began shutting down
}

// javaMember is one Consume.java process and what it has printed.
type javaMember struct {
	clientID string
	signal   func() error
	kill     func() error
	stderr   *syncBuffer
	exited   chan struct{}

	mu      sync.Mutex
	read    map[[2]int64]int // (partition, offset) -> times read
	owned   map[int32]bool   // by its own callbacks
	events  []javaEvent
	closing bool
	// strays are records read of partitions it did not own at the time.
	strays []string
}

// startJava runs Consume.java as clientID in group and stops it (SIGTERM)
// when the test ends.
func startJava(ctx context.Context, t *testing.T, c *realkafka.Cluster, bootstrap, group, topic, assignors, clientID, rack string) *javaMember {
	t.Helper()
	src := filepath.Join(testutil.Root(t), "testdata", "realkafka", "java", "Consume.java")
	cmd := c.JavaCommand(ctx, src, bootstrap, group, topic, assignors, clientID, rack, "-", "0")
	m := &javaMember{clientID: clientID, stderr: &syncBuffer{}, exited: make(chan struct{}),
		read: map[[2]int64]int{}, owned: map[int32]bool{}}
	cmd.Stderr = m.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m.signal = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	m.kill = cmd.Process.Kill
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
func (m *javaMember) line(prefix, s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := strings.Fields(s)
	switch {
	case len(f) == 0:
	case f[0] == "closing":
		m.closing = true
	case f[0] == "assigned" || f[0] == "revoked" || f[0] == "lost":
		ev := javaEvent{kind: f[0], closing: m.closing}
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

// stop ends the process with SIGTERM and waits for its clean exit.
func (m *javaMember) stop() {
	select {
	case <-m.exited:
		return
	default:
	}
	_ = m.signal()
	select {
	case <-m.exited:
	case <-time.After(20 * time.Second):
		_ = m.kill()
		<-m.exited
	}
}

// ownedNow is the sorted set the member holds by its callbacks.
func (m *javaMember) ownedNow() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.owned))
}

// mark is the number of events so far, for revokedSince.
func (m *javaMember) mark() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.events)
}

// revokedSince is every partition revoked or lost since mark, except on
// the member's own shutdown.
func (m *javaMember) revokedSince(mark int) []int32 {
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

// settledJava waits until the gateway shows group Stable with exactly
// members, holding all partitions of topic, and each member holds by its
// own callbacks exactly what the gateway assigned it.
func settledJava(ctx context.Context, d *daemon, group, topic string, partitions int, members []*javaMember) (adminGroup, error) {
	var last error
	for {
		g, err := stableWith(ctx, d, group, len(members), topic, partitions)
		if err != nil {
			return g, err
		}
		last = nil
		for _, m := range members {
			var want []int32
			found := false
			for _, x := range g.Members {
				if x.ClientID == m.clientID {
					found, want = true, slices.Sorted(slices.Values(x.Assignment[topic]))
				}
			}
			if !found {
				last = fmt.Errorf("%s is not a member: %v", m.clientID, adminAssignment(g))
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

// javaReadAllOnce waits until members together read every offset below
// end, then checks none was read twice and none read while not owned.
func javaReadAllOnce(ctx context.Context, ms []*javaMember, end map[int32]int64) error {
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

// createTopic creates topic on the real broker, bypassing the gateway.
func createTopic(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if ec := resp.Topics[0].ErrorCode; ec != 0 {
		t.Fatalf("create topic %s: error code %d", topic, ec)
	}
}

// TestRealKafkaJava_GroupsThroughTheGatewayOnARealBroker runs the Java
// reference consumer (kafka-clients 4.4.0, classic protocol) through the
// gateway in front of a real Apache Kafka broker. For a RangeAssignor group
// that the rules serve with roundrobin, and for a CooperativeStickyAssignor
// group with client.rack set, two members start, a third joins and the
// first leaves. After every rebalance each member holds what the
// configured plugin computes; every record is read once, and only by the
// member that owned its partition; cooperative members never revoke a
// partition they keep; and the commits, read straight from the broker,
// are the end offsets.
func TestRealKafkaJava_GroupsThroughTheGatewayOnARealBroker(t *testing.T) {
	ctx := testCtx(t, 150*time.Second)
	startCtx, cancel := context.WithTimeout(ctx, 100*time.Second)
	c := realkafka.Start(startCtx, t, realkafka.Options{})
	cancel()
	direct := c.Client(t)
	d := startDaemon(t, t.TempDir(), realJavaConfig(c.Nodes[0].Addr))
	brokers := map[int32]string{1: "az-a"}

	tests := []struct {
		name, group, topic, assignors, rack string
		protocol, assignor                  string
		cooperative                         bool
		// assign is the plugin the rules pick; relayed, when set, is the
		// one the members offered, which must compute something else.
		assign, relayed func(*abi.Request) (*abi.Response, error)
	}{
		{name: "range served by roundrobin", group: "jrr-range", topic: "java-range", assignors: "RangeAssignor",
			rack: "-", protocol: "range", assignor: "roundrobin", assign: roundrobin.Assign, relayed: rangeassignor.Assign},
		{name: "cooperative sticky with racks", group: "java-coop", topic: "java-coop", assignors: "CooperativeStickyAssignor",
			rack: "az-a", protocol: "cooperative-sticky", assignor: "cooperative-sticky", cooperative: true, assign: sticky.AssignCooperative},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const parts = 6
			createTopic(ctx, t, direct, tt.topic, parts)
			pl, err := topicPlacement(ctx, direct, tt.topic)
			if err != nil {
				t.Fatal(err)
			}
			start := func(id string) *javaMember {
				return startJava(ctx, t, c, d.bootstrap, tt.group, tt.topic, tt.assignors, id, tt.rack)
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
				for _, m := range g.Members {
					want := tt.rack
					if want == "-" {
						want = ""
					}
					if m.Rack != want {
						t.Errorf("%s has rack %q in the gateway, want %q", m.ClientID, m.Rack, want)
					}
				}
			}
			holdings := func(ms []*javaMember) map[string][]int32 {
				out := map[string][]int32{}
				for _, m := range ms {
					out[m.clientID] = m.ownedNow()
				}
				return out
			}
			// unmovedKept checks no member in ms revoked, since marks, a
			// partition it holds again now.
			unmovedKept := func(ms []*javaMember, marks []int) {
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

			// Members join one at a time, so that every stable state is
			// the plugin's answer to the holdings of the one before.
			a := start(tt.group + "-a")
			g, err := settledJava(ctx, d, tt.group, tt.topic, parts, []*javaMember{a})
			if err != nil {
				t.Fatal(err)
			}
			before, gen := holdings([]*javaMember{a}), g.Generation
			marks := []int{a.mark()}
			b := start(tt.group + "-b")
			if g, err = settledJava(ctx, d, tt.group, tt.topic, parts, []*javaMember{a, b}); err != nil {
				t.Fatal(err)
			}
			check(g, before, gen)
			if tt.cooperative {
				unmovedKept([]*javaMember{a}, marks)
			}
			produce(ctx, t, c.Addrs(), tt.topic, 120)

			before, gen = holdings([]*javaMember{a, b}), g.Generation
			marks = []int{a.mark(), b.mark()}
			cm := start(tt.group + "-c")
			if g, err = settledJava(ctx, d, tt.group, tt.topic, parts, []*javaMember{a, b, cm}); err != nil {
				t.Fatal(err)
			}
			check(g, before, gen)
			if len(cm.ownedNow()) == 0 {
				t.Errorf("the joining member got nothing: %v", adminAssignment(g))
			}
			if tt.cooperative {
				unmovedKept([]*javaMember{a, b}, marks)
			}
			produce(ctx, t, c.Addrs(), tt.topic, 120)

			before, gen = holdings([]*javaMember{b, cm}), g.Generation
			marks = []int{b.mark(), cm.mark()}
			a.stop()
			if g, err = settledJava(ctx, d, tt.group, tt.topic, parts, []*javaMember{b, cm}); err != nil {
				t.Fatal(err)
			}
			check(g, before, gen)
			if tt.cooperative {
				// A member leaving moves only its partitions.
				for i, m := range []*javaMember{b, cm} {
					if r := m.revokedSince(marks[i]); len(r) > 0 {
						t.Errorf("%s had %v revoked when another member left", m.clientID, r)
					}
				}
			}
			produce(ctx, t, c.Addrs(), tt.topic, 120)

			end, err := endOffsets(ctx, direct, tt.topic, parts)
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := javaReadAllOnce(rctx, []*javaMember{a, b, cm}, end); err != nil {
				t.Fatal(err)
			}
			b.stop()
			cm.stop()
			// Read straight from the broker: the commits went through the
			// gateway to the real group coordinator.
			if err := checkCommittedAtEnd(ctx, direct, tt.group, tt.topic, parts); err != nil {
				t.Error(err)
			}
		})
	}
}

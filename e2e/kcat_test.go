package e2e

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/plugins/roundrobin"
)

// kcatConfig is rackedConfig with [[racks]] rules that place kcat
// consumers by client id (librdkafka 2.0.2 sends no rack of its own), and a
// group rule that serves rr-* groups with roundrobin whatever they offer.
var kcatConfig = strings.Replace(rackedConfig, `topics = ["events:6:1"]`, `topics = ["events:6:1", "kcat-range:6:1", "kcat-cooperative-sticky:6:1"]`, 1) + `
[[racks]]
client_id = "^kcat-a"
rack = "az-a"
[[racks]]
client_id = "^kcat-b"
rack = "az-b"
[[racks]]
client_id = "^kcat-c"
rack = "az-c"
`

// kcatGroupsConfig puts the rr-* rule before the catch-all.
func kcatGroupsConfig() string {
	return strings.Replace(kcatConfig, "[[groups]]\nmatch = \"*\"", `[[groups]]
match = "rr-*"
assignor = "roundrobin"
initial_rebalance_delay = "0s"
min_session_timeout = "1s"

[[groups]]
match = "*"`, 1)
}

// consumerProc is one consumer process (`kcat -G`, or the kafkajs script)
// and the "partition offset" lines it has printed.
type consumerProc struct {
	clientID string
	cmd      *exec.Cmd
	stderr   *syncBuffer
	exited   chan struct{}

	mu   sync.Mutex
	read map[[2]int64]int // (partition, offset) -> times read
}

// startKcat runs kcat as a balanced consumer of topic in group.
func startKcat(t *testing.T, kcat, bootstrap, group, clientID, strategy, topic string) *consumerProc {
	t.Helper()
	return startReader(t, clientID, exec.Command(kcat, "-b", bootstrap, "-G", group,
		"-X", "client.id="+clientID,
		"-X", "partition.assignment.strategy="+strategy,
		"-X", "auto.offset.reset=earliest",
		"-X", "session.timeout.ms=6000",
		"-X", "heartbeat.interval.ms=200",
		"-X", "auto.commit.interval.ms=200",
		"-q", "-u", "-f", "%p %o\n", topic))
}

// startReader runs cmd, which prints a "partition offset" line per record
// it consumes as clientID, and stops it when the test ends.
func startReader(t *testing.T, clientID string, cmd *exec.Cmd) *consumerProc {
	t.Helper()
	k := &consumerProc{clientID: clientID, cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{}), read: map[[2]int64]int{}}
	k.cmd.Stderr = k.stderr
	out, err := k.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 {
				continue
			}
			p, err1 := strconv.ParseInt(f[0], 10, 32)
			o, err2 := strconv.ParseInt(f[1], 10, 64)
			if err1 == nil && err2 == nil {
				k.mu.Lock()
				k.read[[2]int64{p, o}]++
				k.mu.Unlock()
			}
		}
		_ = k.cmd.Wait()
		close(k.exited)
	}()
	t.Cleanup(func() {
		k.stop()
		if t.Failed() {
			t.Logf("%s (%s) stderr:\n%s", clientID, cmd.Path, tail(k.stderr.String(), 20))
		}
	})
	return k
}

// stop ends the process with SIGTERM, as an operator would.
func (k *consumerProc) stop() {
	select {
	case <-k.exited:
		return
	default:
	}
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.exited:
	case <-time.After(15 * time.Second):
		_ = k.cmd.Process.Kill()
		<-k.exited
	}
}

// partitions returns the partitions k printed records of.
func (k *consumerProc) partitions() []int32 {
	k.mu.Lock()
	defer k.mu.Unlock()
	seen := map[int32]bool{}
	for po := range k.read {
		seen[int32(po[0])] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// readAllOnce waits until the consumers together have printed every
// offset below end of each partition, then checks none was printed twice.
func readAllOnce(ctx context.Context, ks []*consumerProc, end map[int32]int64) error {
	total := int64(0)
	for _, e := range end {
		total += e
	}
	for {
		seen, twice := map[[2]int64]bool{}, []string{}
		for _, k := range ks {
			k.mu.Lock()
			for po, n := range k.read {
				if seen[po] || n > 1 {
					twice = append(twice, fmt.Sprintf("%d@%d", po[0], po[1]))
				}
				seen[po] = true
			}
			k.mu.Unlock()
		}
		if len(twice) > 0 {
			return fmt.Errorf("records read more than once: %v", twice)
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
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// checkReads checks that each kcat consumer read exactly the partitions
// the gateway assigned it.
func checkReads(t *testing.T, g adminGroup, ks []*consumerProc, topic string) {
	t.Helper()
	for _, k := range ks {
		var assigned []int32
		found := false
		for _, m := range g.Members {
			if m.ClientID == k.clientID {
				found = true
				assigned = slices.Sorted(slices.Values(m.Assignment[topic]))
			}
		}
		if !found {
			t.Errorf("%s is not a member of %s", k.clientID, g.Group)
			continue
		}
		if got := k.partitions(); !slices.Equal(got, assigned) {
			t.Errorf("%s read partitions %v; the gateway assigned it %v", k.clientID, got, assigned)
		}
	}
}

// stableWith waits until the gateway shows group Stable with n members that
// together hold all partitions of topic.
func stableWith(ctx context.Context, d *daemon, group string, n int, topic string, partitions int) (adminGroup, error) {
	var g adminGroup
	for {
		var err error
		g, err = d.group(ctx, group)
		if err == nil {
			held := 0
			for _, m := range g.Members {
				held += len(m.Assignment[topic])
			}
			if g.State == "Stable" && len(g.Members) == n && held == partitions {
				return g, nil
			}
			err = fmt.Errorf("group %s: %s, %d members holding %d partitions", group, g.State, len(g.Members), held)
		}
		select {
		case <-ctx.Done():
			return g, fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestKcat_RacksFromRulesAndAssignmentAsConfigured runs three kcat
// consumers per strategy, one per [[racks]] client-id rule: the gateway
// gives each member the rule's rack, the assignment is what the configured
// plugin computes (rack-local, one member per rack), and each process reads
// exactly its assigned partitions, every record once.
func TestKcat_RacksFromRulesAndAssignmentAsConfigured(t *testing.T) {
	t.Parallel()
	kcat := needCommand(t, "kcat", "kcat")
	ctx := testCtx(t, 120*time.Second)
	d := startDaemon(t, t.TempDir(), kcatConfig)
	cl := adminClient(t, []string{d.bootstrap})
	pl, err := topicPlacement(ctx, cl, "kcat-range", "kcat-cooperative-sticky")
	if err != nil {
		t.Fatal(err)
	}
	wantRack := map[string]string{"kcat-a": "az-a", "kcat-b": "az-b", "kcat-c": "az-c"}
	for _, strategy := range []string{"range", "cooperative-sticky"} {
		t.Run(strategy, func(t *testing.T) {
			group, topic := "kcat-"+strategy, "kcat-"+strategy
			var ks []*consumerProc
			for _, id := range slices.Sorted(maps.Keys(wantRack)) {
				ks = append(ks, startKcat(t, kcat, d.bootstrap, group, id, strategy, topic))
			}
			// Records are produced once the group is whole, so that no
			// member reads partitions it held only while others were
			// still joining.
			g, err := stableWith(ctx, d, group, 3, topic, 6)
			if err != nil {
				t.Fatal(err)
			}
			produce(ctx, t, []string{d.bootstrap}, topic, 300)
			end, err := endOffsets(ctx, cl, topic, 6)
			if err != nil {
				t.Fatal(err)
			}
			if err := readAllOnce(ctx, ks, end); err != nil {
				t.Fatal(err)
			}
			// The group may have settled again while reading.
			if g, err = stableWith(ctx, d, group, 3, topic, 6); err != nil {
				t.Fatal(err)
			}
			if g.Protocol != strategy {
				t.Errorf("protocol %q, want %q", g.Protocol, strategy)
			}
			for _, m := range g.Members {
				if m.Rack != wantRack[m.ClientID] {
					t.Errorf("%s has rack %q, want %q from the [[racks]] rules", m.ClientID, m.Rack, wantRack[m.ClientID])
				}
				for _, p := range m.Assignment[topic] {
					if r := rackOf(pl, topic, p); r != m.Rack {
						t.Errorf("%s in %s holds %s/%d of %s", m.ClientID, m.Rack, topic, p, r)
					}
				}
			}
			if strategy == "range" {
				want, err := expected(g, rangeassignor.Assign, map[string]placement{topic: pl[topic]}, rackedBrokers, nil, 0)
				if err != nil {
					t.Fatal(err)
				}
				if got := adminAssignment(g); !sameAssignment(got, want) {
					t.Errorf("gateway assigned %v; range computes %v", got, want)
				}
			}
			checkReads(t, g, ks, topic)
			// kcat commits on librdkafka's auto-commit timer (not when
			// it is stopped), so wait for the commits while it runs.
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := kfakeWait(cctx, func() error { return checkCommittedAtEnd(cctx, cl, group, topic, 6) }); err != nil {
				t.Error(err)
			}
			for _, k := range ks {
				k.stop()
			}
		})
	}
}

// TestKcat_RangeGroupServedByRoundRobin is the proof that the gateway
// assigns: kcat consumers offer only range, the group's rule says
// roundrobin, and each process reads exactly what roundrobin computes,
// which for this group is not what range would give.
func TestKcat_RangeGroupServedByRoundRobin(t *testing.T) {
	t.Parallel()
	kcat := needCommand(t, "kcat", "kcat")
	ctx := testCtx(t, 90*time.Second)
	d := startDaemon(t, t.TempDir(), kcatGroupsConfig())
	cl := adminClient(t, []string{d.bootstrap})
	pl, err := topicPlacement(ctx, cl, "events")
	if err != nil {
		t.Fatal(err)
	}
	const group = "rr-kcat"
	ks := []*consumerProc{
		startKcat(t, kcat, d.bootstrap, group, "kcat-x1", "range", "events"),
		startKcat(t, kcat, d.bootstrap, group, "kcat-x2", "range", "events"),
	}
	if _, err := stableWith(ctx, d, group, 2, "events", 6); err != nil {
		t.Fatal(err)
	}
	produce(ctx, t, []string{d.bootstrap}, "events", 300)
	end, err := endOffsets(ctx, cl, "events", 6)
	if err != nil {
		t.Fatal(err)
	}
	if err := readAllOnce(ctx, ks, end); err != nil {
		t.Fatal(err)
	}
	g, err := stableWith(ctx, d, group, 2, "events", 6)
	if err != nil {
		t.Fatal(err)
	}
	if g.Protocol != "range" || g.Assignor != "roundrobin" {
		t.Errorf("protocol %q assignor %q; want the offered range served by roundrobin", g.Protocol, g.Assignor)
	}
	want, err := expected(g, roundrobin.Assign, pl, rackedBrokers, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := adminAssignment(g); !sameAssignment(got, want) {
		t.Errorf("gateway assigned %v; roundrobin computes %v", got, want)
	}
	if relayed, err := expected(g, rangeassignor.Assign, pl, rackedBrokers, nil, 0); err != nil || sameAssignment(relayed, want) {
		t.Fatalf("range would give the same assignment (%v, %v): the test could not tell a relay from the gateway", relayed, err)
	}
	checkReads(t, g, ks, "events")
}

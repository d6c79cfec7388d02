package e2e

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
	"github.com/wasmassign/wasmassign/internal/testutil/matrix"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/plugins/roundrobin"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// kcatConfig is rackedConfig with [[racks]] rules that place kcat
// consumers by client id (librdkafka 2.0.2 sends no rack of its own), and,
// with servedByRoundRobin, a group rule before the catch-all that serves
// rr-* groups with roundrobin whatever they offer.
func kcatConfig(servedByRoundRobin bool) string {
	c := rackedGateway()
	c.EmbeddedTopics = append(c.EmbeddedTopics, "kcat-range:6:1", "kcat-cooperative-sticky:6:1")
	if servedByRoundRobin {
		c.Groups = append([]testutil.GroupRule{{Match: "rr-*", Assignor: "roundrobin"}}, c.Groups...)
	}
	c.Extra = `[[racks]]
client_id = "^kcat-a"
rack = "az-a"
[[racks]]
client_id = "^kcat-b"
rack = "az-b"
[[racks]]
client_id = "^kcat-c"
rack = "az-c"`
	return c.String()
}

// consumerProc is one consumer process (`kcat -G`, or the kafkajs script)
// and the "partition offset" lines it has printed.
type consumerProc struct {
	*proc
	readLog
}

// startKcat runs kcat as a balanced consumer of topic in group, with the
// extra librdkafka properties props ("key=value"). kcat runs without -q, so
// its stderr logs each rebalance it sees (rkRevokes reads them).
func startKcat(t *testing.T, kcat, bootstrap, group, clientID, strategy, topic string, props ...string) *consumerProc {
	t.Helper()
	args := []string{"-b", bootstrap, "-G", group,
		"-X", "client.id=" + clientID,
		"-X", "partition.assignment.strategy=" + strategy,
		"-X", "auto.offset.reset=earliest",
		"-X", "session.timeout.ms=6000",
		"-X", "heartbeat.interval.ms=200",
		"-X", "auto.commit.interval.ms=200"}
	for _, p := range props { // more librdkafka properties, "key=value"
		args = append(args, "-X", p)
	}
	args = append(args, "-u", "-f", "%p %o\n", topic)
	return startReader(t, clientID, exec.Command(kcat, args...))
}

// startReader runs cmd, which prints a "partition offset" line per record
// it consumes as clientID, and stops it (SIGTERM, then SIGKILL after 15 s)
// when the test ends.
func startReader(t *testing.T, clientID string, cmd *exec.Cmd) *consumerProc {
	t.Helper()
	k := &consumerProc{readLog: readLog{read: map[[2]int64]int{}}}
	k.proc = startProc(t, clientID, cmd, 15*time.Second, func(line string) {
		f := strings.Fields(line)
		if len(f) != 2 {
			return
		}
		p, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 == nil && err2 == nil {
			k.add(p, o)
		}
	}, nil)
	return k
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
	d := startDaemon(t, t.TempDir(), kcatConfig(false))
	cl := adminClient(t, []string{d.bootstrap})
	pl, err := topicPlacement(ctx, cl, "kcat-range", "kcat-cooperative-sticky")
	if err != nil {
		t.Fatal(err)
	}
	wantRack := map[string]string{"kcat-a": "az-a", "kcat-b": "az-b", "kcat-c": "az-c"}
	for _, strategy := range []string{"range", "cooperative-sticky"} {
		t.Run(strategy, func(t *testing.T) {
			matrix.Record(t, rkKcatRow(t, kcat, strategy, "kfake"))
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
			// librdkafka 2.0.2's auto-commit timer first fires about 5 s
			// after the assignment, whatever auto.commit.interval.ms
			// says (measured the same straight against a real broker).
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := kfakegroup.WaitFor(cctx, func() error { return checkCommittedAtEnd(cctx, cl, group, topic, 6) }); err != nil {
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
// roundrobin, and through a join, a leave and a restart (rkProcJoinLeave)
// each process reads exactly what roundrobin computes, which for this
// group is not what range would give.
func TestKcat_RangeGroupServedByRoundRobin(t *testing.T) {
	t.Parallel()
	kcat := needCommand(t, "kcat", "kcat")
	matrix.Record(t, rkKcatRow(t, kcat, "range served by roundrobin", "kfake"))
	ctx := testCtx(t, 120*time.Second)
	d := startDaemon(t, t.TempDir(), kcatConfig(true))
	const group = "rr-kcat"
	rkProcJoinLeave(ctx, t, d, adminClient(t, []string{d.bootstrap}), rkProcGroup{
		group: group, topic: "events", partitions: 6,
		start: func(t *testing.T, id string) *consumerProc {
			return startKcat(t, kcat, d.bootstrap, group, id, "range", "events")
		},
		protocol: "range", assignor: "roundrobin", assign: roundrobin.Assign, relayed: rangeassignor.Assign,
		commitsOnRevoke: true, brokerRacks: rackedBrokers,
	})
}

// rkKcatRow is the interop-matrix row of a kcat group offering strategy
// in front of upstream, at the kcat and librdkafka versions installed.
func rkKcatRow(t *testing.T, kcat, strategy, upstream string) matrix.Row {
	t.Helper()
	out, err := exec.Command(kcat, "-V").CombinedOutput()
	if err != nil {
		t.Fatalf("kcat -V: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Version (\S+) .*librdkafka (\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("kcat -V printed no version:\n%s", out)
	}
	return matrix.Row{Client: "kcat", Version: fmt.Sprintf("%s (librdkafka %s)", m[1], m[2]), Strategy: strategy, Upstream: upstream}
}

// rkRevokeLine is how kcat logs a cooperative revocation to stderr.
var rkRevokeLine = regexp.MustCompile(`rebalanced: incremental revoke of \d+ partition\(s\) \(.*\): (.*)$`)

// rkRevokes returns, for every cooperative revocation kcat has logged, the
// partitions of topic it gave up, in order.
func (k *consumerProc) rkRevokes(topic string) [][]int32 {
	var out [][]int32
	item := regexp.MustCompile(`(\S+) \[(\d+)\]`)
	for _, line := range strings.Split(k.stderr.String(), "\n") {
		m := rkRevokeLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var ps []int32
		for _, it := range item.FindAllStringSubmatch(m[1], -1) {
			if p, err := strconv.ParseInt(it[2], 10, 32); err == nil && it[1] == topic {
				ps = append(ps, int32(p))
			}
		}
		out = append(out, ps)
	}
	return out
}

// rkProcGroup describes a group of consumer processes (kcat or kafkajs)
// for rkProcJoinLeave.
type rkProcGroup struct {
	group, topic string
	partitions   int32
	// start runs one member as clientID; the test's cleanup stops it.
	start func(t *testing.T, clientID string) *consumerProc
	// protocol is what the members offer and assignor the plugin the
	// gateway serves them with; assign is that plugin's Go code and
	// relayed, when set, the offered assignor's, which must compute
	// something else.
	protocol, assignor string
	assign, relayed    func(*abi.Request) (*abi.Response, error)
	// cooperative members report what they own, so the plugin computes
	// from the previous generation's assignment.
	cooperative bool
	// revokes, when set, lists a member's cooperative revocations so far
	// (consumerProc.rkRevokes for kcat): no member may give up a partition
	// it holds again after the rebalance.
	revokes func(*consumerProc) [][]int32
	// commitsOnRevoke says the client commits what it read when it gives
	// partitions up or closes (librdkafka does), so the test does not wait
	// for its commit timer before a member change: a commit lost in the
	// rebalance shows as records read twice.
	commitsOnRevoke bool
	brokerRacks     map[int32]string
}

// rkProcJoinLeave runs the join-and-leave scenario for processes: one
// member, a second joins, a third joins, the first leaves, the rest stop
// and a new one starts. Records are produced (through the gateway) once
// each membership is stable, and before every change the test waits for
// the commits, read through admin (straight from a real upstream), to
// reach the end offsets (unless the client commits on revocation). After
// every rebalance the gateway's assignment is
// what the configured plugin computes, and each process read exactly the
// partitions the gateway assigned it; every record is read once across the
// whole run, so the restarted member resumed from the commits.
func rkProcJoinLeave(ctx context.Context, t *testing.T, d *daemon, admin *kgo.Client, s rkProcGroup) {
	t.Helper()
	pl, err := topicPlacement(ctx, admin, s.topic)
	if err != nil {
		t.Fatal(err)
	}
	var all []*consumerProc
	ids := 0
	start := func() *consumerProc {
		ids++
		p := s.start(t, fmt.Sprintf("%s-%d", s.group, ids))
		all = append(all, p)
		return p
	}
	// prev is the last stable assignment by client id, which cooperative
	// members report owning in the next rebalance; marks are how many
	// revocations each member had logged by then.
	var prev adminGroup
	marks := map[*consumerProc]int{}
	// moved counts the revocations seen, so that a log format the parser
	// no longer understands fails the test instead of passing it.
	moved := 0
	settle := func(g adminGroup) {
		prev = g
		if s.revokes != nil {
			for _, k := range all {
				marks[k] = len(s.revokes(k))
			}
		}
	}
	// unmovedKept checks that no member gave up, in the rebalance to g, a
	// partition it holds in g; when a member left, nobody else gives up
	// anything.
	unmovedKept := func(g adminGroup, members []*consumerProc) {
		t.Helper()
		if s.revokes == nil {
			return
		}
		left := len(members) < len(prev.Members)
		for _, k := range members {
			mark, ok := marks[k]
			if !ok {
				continue
			}
			for _, m := range g.Members {
				if m.ClientID != k.clientID {
					continue
				}
				for _, revoked := range s.revokes(k)[mark:] {
					moved += len(revoked)
					for _, p := range revoked {
						if left || slices.Contains(m.Assignment[s.topic], p) {
							t.Errorf("%s gave up %s/%d in the rebalance to generation %d, and holds %v after it (members %d -> %d)",
								k.clientID, s.topic, p, g.Generation, m.Assignment[s.topic], len(prev.Members), len(members))
						}
					}
				}
			}
		}
	}
	check := func(g adminGroup) {
		t.Helper()
		checkServedBy(t, g, s.protocol, s.assignor)
		var owned map[string][]kfakegroup.TopicPartition
		if s.cooperative {
			owned = map[string][]kfakegroup.TopicPartition{}
			for _, m := range prev.Members {
				for _, p := range m.Assignment[s.topic] {
					owned[m.ClientID] = append(owned[m.ClientID], kfakegroup.TopicPartition{Topic: s.topic, Partition: p})
				}
			}
		}
		want, err := expected(g, s.assign, pl, s.brokerRacks, owned, prev.Generation)
		if err != nil {
			t.Fatal(err)
		}
		if got := adminAssignment(g); !sameAssignment(got, want) {
			t.Errorf("gateway assigned %v; %s computes %v", got, s.assignor, want)
		}
		if s.relayed != nil && len(g.Members) > 1 {
			other, err := expected(g, s.relayed, pl, s.brokerRacks, nil, 0)
			checkRelayTellable(t, other, err, want)
		}
	}
	end, err := endOffsets(ctx, admin, s.topic, s.partitions)
	if err != nil {
		t.Fatal(err)
	}
	// phase produces records for the members now in the group, waits until
	// everything is read once, checks who read what, and waits for the
	// commits.
	phase := func(members []*consumerProc) {
		t.Helper()
		began := time.Now()
		var stable, read time.Duration
		defer func() {
			t.Logf("%d member(s): stable after %v, all read after %v, done after %v",
				len(members), stable.Round(time.Millisecond), read.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
		}()
		g, err := stableWith(ctx, d, s.group, len(members), s.topic, int(s.partitions))
		if err != nil {
			t.Fatal(err)
		}
		stable = time.Since(began)
		check(g)
		unmovedKept(g, members)
		produce(ctx, t, []string{d.bootstrap}, s.topic, 120)
		from := end
		if end, err = endOffsets(ctx, admin, s.topic, s.partitions); err != nil {
			t.Fatal(err)
		}
		if err := readAllOnce(ctx, all, end); err != nil {
			t.Fatal(err)
		}
		read = time.Since(began)
		if g2, err := d.group(ctx, s.group); err != nil || g2.Generation != g.Generation {
			t.Fatalf("the group rebalanced while reading (generation %d, now %d, %v)", g.Generation, g2.Generation, err)
		}
		for _, k := range members {
			var assigned []int32
			for _, m := range g.Members {
				if m.ClientID == k.clientID {
					assigned = slices.Sorted(slices.Values(m.Assignment[s.topic]))
				}
			}
			if got := k.partitionsBetween(from, end); !slices.Equal(got, assigned) {
				t.Errorf("%s read partitions %v; the gateway assigned it %v", k.clientID, got, assigned)
			}
		}
		// A client that commits only on a timer must not have a partition
		// handed over before its records are committed.
		if !s.commitsOnRevoke {
			if err := kfakegroup.WaitFor(ctx, func() error { return checkCommittedAtEnd(ctx, admin, s.group, s.topic, s.partitions) }); err != nil {
				t.Fatal(err)
			}
		}
		settle(g)
	}

	a := start()
	g, err := stableWith(ctx, d, s.group, 1, s.topic, int(s.partitions))
	if err != nil {
		t.Fatal(err)
	}
	settle(g)
	b := start()
	phase([]*consumerProc{a, b})
	c := start()
	phase([]*consumerProc{a, b, c})
	a.stop()
	phase([]*consumerProc{b, c})
	b.stop()
	c.stop()
	if err := kfakegroup.WaitFor(ctx, func() error { return checkCommittedAtEnd(ctx, admin, s.group, s.topic, s.partitions) }); err != nil {
		t.Fatalf("after every member stopped: %v", err)
	}
	// A restarted member that ignored the commits would read from the
	// earliest offset, and readAllOnce would see records read twice.
	settle(adminGroup{Generation: -1})
	r := start()
	phase([]*consumerProc{r})
	if err := kfakegroup.WaitFor(ctx, func() error { return checkCommittedAtEnd(ctx, admin, s.group, s.topic, s.partitions) }); err != nil {
		t.Errorf("after the restart: %v", err)
	}
	if s.revokes != nil && moved == 0 {
		t.Error("no member logged a revocation when members joined: the check that unmoved partitions stay could not fail")
	}
}

// TestKcat_TwoStaticMembersOnOneHostKeepTheirOwnFetchRacks runs two kcat
// (librdkafka) static members on one host with one client id and
// client.rack az-a and az-b: librdkafka sends its rack only in Fetch
// requests. The group must not rebalance for the racks (Kafka never does),
// and each member must end up with its own rack, not the other's.
func TestKcat_TwoStaticMembersOnOneHostKeepTheirOwnFetchRacks(t *testing.T) {
	t.Parallel()
	kcat := needCommand(t, "kcat", "kcat")
	ctx := testCtx(t, 90*time.Second)
	c := rackedGateway()
	c.EmbeddedTopics = append(c.EmbeddedTopics, "kcat-racks:6:1")
	d := startDaemon(t, t.TempDir(), c.String())
	const group, topic = "kcat-racks", "kcat-racks"
	racks := map[string]string{"static-1": "az-a", "static-2": "az-b"}
	for _, inst := range slices.Sorted(maps.Keys(racks)) {
		startKcat(t, kcat, d.bootstrap, group, "rdkafka", "range", topic,
			"group.instance.id="+inst, "client.rack="+racks[inst])
	}
	g, err := stableWith(ctx, d, group, 2, topic, 6)
	if err != nil {
		t.Fatal(err)
	}
	produce(ctx, t, []string{d.bootstrap}, topic, 60) // every member fetches
	err = kfakegroup.WaitFor(ctx, func() error {
		now, err := d.group(ctx, group)
		if err != nil {
			return err
		}
		if now.Generation != g.Generation {
			return fmt.Errorf("generation %d, was %d: the group rebalanced after it settled", now.Generation, g.Generation)
		}
		for _, m := range now.Members {
			if m.InstanceID == nil || m.Rack != racks[*m.InstanceID] {
				return fmt.Errorf("member %v has rack %q, want its own, %v", m.InstanceID, m.Rack, racks)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Some time more: a rebalance for a rack would come now.
	time.Sleep(3 * time.Second)
	if now, err := d.group(ctx, group); err != nil || now.Generation != g.Generation {
		t.Errorf("generation %d (err %v), want %d: a rebalance Kafka would not make", now.Generation, err, g.Generation)
	}
}

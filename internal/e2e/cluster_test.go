package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmassign/wasmassign/internal/loadtest"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
)

// fastFailover are cluster timeouts short enough for a failover after a
// kill to fit a test: a session of 3 s and a lease of 1.5 s.
const fastFailover = "session_timeout = \"3s\"\nheartbeat_interval = \"300ms\"\nrebalance_timeout = \"3s\"\nlease = \"1500ms\"\n"

// clusterGateways starts n gateway processes of one cluster in front of
// upstream, each on ports of its own, with timing (TOML keys of
// [cluster]; empty for the defaults).
func clusterGateways(t *testing.T, upstream []string, n int, timing string) []*daemon {
	t.Helper()
	return clusterGatewaysManaging(t, upstream, n, timing, []testutil.GroupRule{{Match: "*"}})
}

// clusterGatewaysManaging is clusterGateways with the gateways' [[groups]]
// rules.
func clusterGatewaysManaging(t *testing.T, upstream []string, n int, timing string, groups []testutil.GroupRule) []*daemon {
	t.Helper()
	var ds []*daemon
	for i := range n {
		ports := freePorts(t, 5)
		cfg := testutil.GatewayConfig{
			Listen:      fmt.Sprintf("127.0.0.1:%d", ports[0]),
			AdminListen: fmt.Sprintf("127.0.0.1:%d", ports[1]),
			BrokerPorts: map[int32]int{0: ports[2], 1: ports[3], 2: ports[4]},
			Brokers:     upstream,
			Groups:      groups,
			Extra:       debugLogSection() + fmt.Sprintf("[cluster]\nname = \"e2e\"\nid = \"gw-%d\"\npartitions = 4\n%s", i, timing),
		}.String()
		ds = append(ds, startDaemon(t, t.TempDir(), cfg))
	}
	return ds
}

// waitAllReady waits until every gateway of ds answers /readyz 200, as a
// load balancer's health check would before it sends clients.
func waitAllReady(ctx context.Context, t *testing.T, ds []*daemon) {
	t.Helper()
	if err := kfakegroup.WaitFor(ctx, func() error {
		for _, d := range ds {
			if code := readyz(t, d); code != 200 {
				return fmt.Errorf("%s: /readyz %d", d.bootstrap, code)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// ownerOf returns the gateway that holds group, once exactly one does.
func ownerOf(ctx context.Context, ds []*daemon, group string) (*daemon, adminGroup, error) {
	var owner *daemon
	var g adminGroup
	err := kfakegroup.WaitFor(ctx, func() error {
		owner = nil
		for _, d := range ds {
			dg, err := d.group(ctx, group)
			if err != nil {
				continue
			}
			if owner != nil {
				return fmt.Errorf("%s and %s both hold %s", owner.bootstrap, d.bootstrap, group)
			}
			owner, g = d, dg
		}
		if owner == nil {
			return errors.New("no gateway holds the group")
		}
		return nil
	})
	return owner, g, err
}

// failoverRig is two gateways of one cluster in front of kfake, and three
// kgo consumers of one group that bootstrap from both, settled and past
// a first batch of records.
type failoverRig struct {
	upstream        []string // the cluster's brokers, direct
	gateways        []*daemon
	rig             *kfakegroup.Rig
	owner, survivor *daemon // survivor: another gateway
	settled         adminGroup
	clientLog       *syncBuffer // the consumers' kgo logs
	group, topic    string
	members         []string
	partitions      int32
}

// rigSpec shapes a failoverRig: how many gateways, their [cluster]
// timing (empty for the defaults), and whether kfake runs in a process of
// its own rather than in the test's.
type rigSpec struct {
	gateways      int
	timing        string
	kfakeOfItsOwn bool
	// clientOpts are added to the consumers' options.
	clientOpts []kgo.Opt
}

func startFailoverRig(ctx context.Context, t *testing.T, spec rigSpec) *failoverRig {
	t.Helper()
	f := &failoverRig{group: "failover", topic: "events", members: []string{"a", "b", "c"}, partitions: 6}
	var err error
	if spec.kfakeOfItsOwn {
		kp, err := loadtest.StartKfake(ctx, []string{f.topic}, f.partitions)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(kp.Stop) // after the gateways stop: they leave the cluster on it
		f.upstream = []string{kp.Addr()}
	} else {
		c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(f.partitions, f.topic), kfake.GroupMinSessionTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		f.upstream = c.ListenAddrs()
	}
	ds := clusterGateways(t, f.upstream, spec.gateways, spec.timing)
	f.gateways = ds
	// The first gateway serves the shards nobody claimed at once; the
	// group is placed once every gateway has its share.
	waitAllReady(ctx, t, ds)
	var seeds []string
	for _, d := range ds {
		seeds = append(seeds, d.bootstrap)
	}

	clientLog := &syncBuffer{}
	f.clientLog = clientLog
	f.rig = kfakegroup.NewRig(seeds, f.group, []string{f.topic}, slog.New(slog.NewTextHandler(clientLog, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() {
		f.rig.Close(context.Background())
		// Under WASMASSIGN_E2E_DEBUG the consumers' log is kept whatever
		// the outcome: a partition given up is logged, not failed.
		kept := keepLog(t, "consumers", clientLog.String())
		if t.Failed() {
			t.Logf("consumers' log%s:\n%s", keptNote(kept), tail(clientLog.String(), 80))
		}
	})
	opts := kfakegroup.ConsumerOptions{
		Balancers:      []kgo.GroupBalancer{kgo.CooperativeStickyBalancer()},
		SessionTimeout: 20 * time.Second,
		Extra:          append([]kgo.Opt{kgo.RetryTimeout(30 * time.Second)}, spec.clientOpts...),
	}
	for _, n := range f.members {
		if _, err := f.rig.Start(n, opts); err != nil {
			t.Fatal(err)
		}
	}
	if f.owner, _, err = ownerOf(ctx, ds, f.group); err != nil {
		t.Fatal(err)
	}
	if f.settled, err = settled(ctx, f.owner, f.group, f.rig.Ledger(), f.members); err != nil {
		t.Fatal(err)
	}
	consumeAll(ctx, t, f.rig, f.topic, 300)
	f.survivor = ds[0]
	if f.owner == ds[0] {
		f.survivor = ds[1]
	}
	return f
}

// others are the rig's gateways but d.
func (f *failoverRig) others(d *daemon) []*daemon {
	var out []*daemon
	for _, g := range f.gateways {
		if g != d {
			out = append(out, g)
		}
	}
	return out
}

// groupErrors are the consumers' log lines that say why a member left its
// group session.
func (f *failoverRig) groupErrors() []string {
	var out []string
	for line := range strings.Lines(f.clientLog.String()) {
		if strings.Contains(line, "heartbeat errored") && !strings.Contains(line, "REBALANCE_IN_PROGRESS") || strings.Contains(line, "group manage loop errored") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// readyz is the status of d's /readyz; 0 when it could not be asked.
func readyz(t *testing.T, d *daemon) int {
	resp, err := http.Get("http://" + d.admin + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// ownerID is the cluster id of the gateway that owns the rig's group.
func (f *failoverRig) ownerID(t *testing.T) string {
	t.Helper()
	var c struct {
		Gateway string `json:"gateway"`
	}
	resp, err := http.Get("http://" + f.owner.admin + "/v1/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	return c.Gateway
}

// givenUp lists the partitions members gave up (revoked or lost) in the
// ledger's events since mark.
func givenUp(l *kfakegroup.Ledger, mark int) []string {
	var out []string
	for _, e := range l.Events(mark) {
		if e.Kind != kfakegroup.Assigned && len(e.Partitions) > 0 {
			out = append(out, fmt.Sprintf("%s %s %v (generation %d)", e.Member, e.Kind, e.Partitions, e.Generation))
		}
	}
	return out
}

// finish closes the consumers and checks what they consumed and committed:
// every record exactly once, or at least once when members gave
// partitions up (what was read and not committed is read again).
func (f *failoverRig) finish(ctx context.Context, t *testing.T, once bool) {
	t.Helper()
	l := f.rig.Ledger()
	if err := kfakegroup.NeverShared(l); err != nil {
		t.Error(err)
	}
	if err := f.rig.Close(ctx); err != nil {
		t.Fatal(err)
	}
	check := kfakegroup.AllConsumedOnce
	if !once {
		check = kfakegroup.AllConsumedAtLeastOnce
	}
	if err := check(l); err != nil {
		t.Error(err)
	}
	cl := adminClient(t, f.upstream)
	if err := checkCommittedAtEnd(ctx, cl, f.group, f.topic, f.partitions); err != nil {
		t.Error(err)
	}
}

// TestCluster_AKilledGatewaysGroupsMoveWithTheirState runs two gateway
// processes of one cluster in front of kfake, and consumers of a group
// that bootstrap from both. The gateway that owns the group is killed
// (SIGKILL) mid-traffic: the other takes the group over from the state
// topic, and consumption resumes within 30 s with the members it had
// (their ids, which a gateway without the state would refuse), every
// record consumed and the commits at the end. kgo retries a heartbeat
// whose coordinator cannot be dialled, looking the coordinator up each
// time, but sends each lookup to one broker of its metadata with no retry
// of its own: a lookup that goes to a node routed through the dead
// gateway ends the member's session, and it gives its partitions up and
// rejoins (about one run in three). When no member did, the group kept
// its generation and every record was consumed exactly once.
func TestCluster_AKilledGatewaysGroupsMoveWithTheirState(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 120*time.Second)
	f := startFailoverRig(ctx, t, rigSpec{gateways: 2, timing: fastFailover})
	owner, survivor, g, l := f.owner, f.survivor, f.settled, f.rig.Ledger()

	before, mark := l.Owned(), l.Mark()
	killed := time.Now()
	if err := owner.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-owner.exited
	consumeAll(ctx, t, f.rig, f.topic, 150)
	resumed := time.Since(killed)
	if resumed > 30*time.Second {
		t.Errorf("consumption resumed %v after the kill, want within 30s", resumed)
	}
	after, err := settled(ctx, survivor, f.group, l, f.members)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(memberIDs(after)) != fmt.Sprint(memberIDs(g)) || after.Generation < g.Generation {
		t.Errorf("after the failover: generation %d, members %v; before: generation %d, members %v",
			after.Generation, memberIDs(after), g.Generation, memberIDs(g))
	}
	rebalanced := givenUp(l, mark)
	t.Logf("consumption resumed %v after the kill; partitions given up across the failover: %v", resumed.Round(time.Millisecond), rebalanced)
	if len(rebalanced) > 0 {
		t.Logf("why: %s", strings.Join(f.groupErrors(), "\n"))
	}
	if len(rebalanced) == 0 {
		if after.Generation != g.Generation {
			t.Errorf("no member gave partitions up, yet the generation moved from %d to %d", g.Generation, after.Generation)
		}
		if owned := l.Owned(); fmt.Sprint(owned) != fmt.Sprint(before) {
			t.Errorf("ownership changed across the failover: %v -> %v", before, owned)
		}
	}
	f.finish(ctx, t, len(rebalanced) == 0)
}

// TestCluster_ATerminatedGatewayHandsItsGroupsOverWithNoRebalance: with
// the default cluster timeouts (a session of 10 s, a lease of 6 s), the
// owner of a group gets SIGTERM mid-traffic. It releases its shards and
// leaves the gateways' group before it stops serving, so the survivor
// holds the group well before the lease or a session timeout could have
// let it, with the generation, the member ids and the assignment the
// members had: no member gives a partition up, consumption goes on, and
// every record is consumed exactly once.
func TestCluster_ATerminatedGatewayHandsItsGroupsOverWithNoRebalance(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 120*time.Second)
	f := startFailoverRig(ctx, t, rigSpec{gateways: 2})
	l := f.rig.Ledger()
	before, mark := l.Owned(), l.Mark()

	// What operators see before: both gateways ready, each with its
	// shards, and the group at its owner.
	for _, d := range []*daemon{f.owner, f.survivor} {
		if code := readyz(t, d); code != 200 {
			t.Errorf("/readyz of a gateway serving its shards: %d", code)
		}
	}
	out, err := exec.CommandContext(ctx, env.binary, "cluster", "--admin", f.survivor.admin).CombinedOutput()
	if err != nil {
		t.Fatalf("wasmassign cluster: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(f.group)+`\s+\d+\s+`+regexp.QuoteMeta(f.ownerID(t))+`$`).Match(out) ||
		!strings.Contains(string(out), "gw-0") || !strings.Contains(string(out), "gw-1") {
		t.Errorf("wasmassign cluster does not show both gateways and the group at its owner:\n%s", out)
	}

	signalled := time.Now()
	if err := f.owner.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Not ready while it hands over and drains, until it exits.
	notReady := make(chan bool, 1)
	go func() {
		for {
			select {
			case <-f.owner.exited:
				notReady <- false
				return
			default:
			}
			if readyz(t, f.owner) == 503 {
				notReady <- true
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	held, err := settled(ctx, f.survivor, f.group, l, f.members)
	if err != nil {
		t.Fatal(err)
	}
	// Below the lease: a hand-over that waited it out, or the gateways'
	// session, would take longer.
	if took := time.Since(signalled); took > 5*time.Second {
		t.Errorf("the survivor held the group %v after the SIGTERM, want within 5s (the lease is 6s)", took)
	}
	handedOver := time.Since(signalled)
	select {
	case <-f.owner.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the terminated gateway did not exit within 30s")
	}
	if f.owner.exitErr != nil {
		t.Errorf("the terminated gateway exited with %v", f.owner.exitErr)
	}
	if !<-notReady {
		t.Error("/readyz of the gateway handing its groups over never said 503 before it exited")
	}
	metrics := f.survivor.metrics(t)
	for _, want := range []string{`wasmassign_cluster_owned_shards{state="serving"} 4`, `wasmassign_cluster_shards_taken_total{how="handover"}`, `wasmassign_cluster_owned_groups 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("the survivor's metrics lack %s", want)
		}
	}
	consumeAll(ctx, t, f.rig, f.topic, 150)
	t.Logf("the survivor held the group %v after the SIGTERM; consumption went on %v after it",
		handedOver.Round(time.Millisecond), time.Since(signalled).Round(time.Millisecond))

	if held.Generation != f.settled.Generation || fmt.Sprint(memberIDs(held)) != fmt.Sprint(memberIDs(f.settled)) {
		t.Errorf("after the hand-over: generation %d, members %v; before: generation %d, members %v",
			held.Generation, memberIDs(held), f.settled.Generation, memberIDs(f.settled))
	}
	if given := givenUp(l, mark); len(given) > 0 {
		t.Errorf("members gave partitions up across the hand-over: %v", given)
	}
	if owned := l.Owned(); fmt.Sprint(owned) != fmt.Sprint(before) {
		t.Errorf("ownership changed across the hand-over: %v -> %v", before, owned)
	}
	f.finish(ctx, t, true)
}

// watchCommits samples the group's committed offsets on the upstream
// every 50 ms until the returned stop is called, which says whether any
// partition's offset ever moved backwards (and how often it was read).
func (f *failoverRig) watchCommits(ctx context.Context, t *testing.T) (stop func() (samples int, err error)) {
	cl := adminClient(t, f.upstream)
	done := make(chan struct{})
	result := make(chan error, 1)
	var samples int
	go func() {
		high := map[int32]int64{}
		var back []string
		var lastErr error
		for {
			got, err := committedOffsets(ctx, cl, f.group, f.topic, f.partitions)
			if err != nil {
				lastErr = err
			} else {
				samples++
				for p, off := range got {
					if h, ok := high[p]; ok && off < h {
						back = append(back, fmt.Sprintf("%s/%d from %d to %d at %s", f.topic, p, h, off, time.Now().Format("15:04:05.000")))
						continue
					}
					high[p] = off
				}
			}
			select {
			case <-done:
				if len(back) > 0 {
					result <- fmt.Errorf("committed offsets moved backwards: %v", back)
				} else if samples < 10 {
					result <- fmt.Errorf("the committed offsets were read %d times (last error: %v): too few to say they never moved backwards", samples, lastErr)
				}
				close(result)
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() (int, error) {
		close(done)
		err := <-result
		return samples, err
	}
}

// TestCluster_APausedOwnerIsTakenOverAndCommitsNothingAfter: three
// gateways in front of kfake in a process of its own. The owner of a group
// is stopped (SIGSTOP) mid-traffic for twice its session: the others take
// the group over and consumption goes on; then it is continued (SIGCONT).
// At no moment do two members own a partition (the listeners' timeline),
// no committed offset ever moves backwards (sampled throughout), the
// continued gateway answers for the group no more, and every record is
// consumed with the commits at the end.
//
// A paused coordinator holds its clients' requests until they time out;
// a member that waits past its session timeout is removed by the new
// owner, and its partitions handed on while it still believes it holds
// them. So the consumers give a request up after 2 s and a retry after 6,
// well within their 20 s session (as Kafka advises request timeouts below
// the session timeout); a member that gave up rejoins with nothing.
func TestCluster_APausedOwnerIsTakenOverAndCommitsNothingAfter(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 150*time.Second)
	f := startFailoverRig(ctx, t, rigSpec{gateways: 3, timing: fastFailover, kfakeOfItsOwn: true,
		clientOpts: []kgo.Opt{kgo.RequestTimeoutOverhead(2 * time.Second), kgo.RetryTimeout(6 * time.Second)}})
	l := f.rig.Ledger()
	stopWatching := f.watchCommits(ctx, t)
	mark := l.Mark()

	if err := f.owner.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	continued := false
	cont := func() {
		if !continued {
			continued = true
			f.owner.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	defer cont()
	consumeAll(ctx, t, f.rig, f.topic, 150)
	t.Logf("consumption resumed %v after the SIGSTOP", time.Since(stopped).Round(time.Millisecond))
	takeover, _, err := ownerOf(ctx, f.others(f.owner), f.group)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(stopped.Add(6 * time.Second))) // twice the session
	cont()
	// The continued gateway finds its lease gone: it drops the group, and
	// what it still had to send goes nowhere.
	if err := kfakegroup.WaitFor(ctx, func() error {
		if _, err := f.owner.group(ctx, f.group); err == nil {
			return errors.New("the continued gateway still holds the group")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if now, _, err := ownerOf(ctx, f.gateways, f.group); err != nil || now != takeover {
		t.Fatalf("after the SIGCONT: owner %v (%v), want the gateway that took over", now, err)
	}
	consumeAll(ctx, t, f.rig, f.topic, 150)
	given := givenUp(l, mark)
	t.Logf("partitions given up across the pause: %v", given)
	if len(given) > 0 {
		t.Logf("why: %s", strings.Join(f.groupErrors(), "\n"))
	}
	f.finish(ctx, t, len(given) == 0)
	samples, err := stopWatching()
	if err != nil {
		t.Error(err)
	}
	t.Logf("committed offsets read %d times", samples)
}

// TestCluster_ARollingRestartMovesNoPartition: three gateways with the
// default timing, each restarted in turn (SIGTERM, then started again on
// its configuration) under traffic. The group's state is handed over
// every time, so no member ever gives a partition up, no record is lost
// or read twice, and the commits reach the end.
func TestCluster_ARollingRestartMovesNoPartition(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 150*time.Second)
	f := startFailoverRig(ctx, t, rigSpec{gateways: 3})
	l := f.rig.Ledger()
	mark := l.Mark()
	for i, d := range f.gateways {
		if err := d.stop(); err != nil {
			t.Fatalf("gateway %d exited with %v", i, err)
		}
		consumeAll(ctx, t, f.rig, f.topic, 60)
		f.gateways[i] = startDaemonFile(t, d.cfgFile)
		consumeAll(ctx, t, f.rig, f.topic, 60)
	}
	if _, err := settledAnywhere(ctx, f, l); err != nil {
		t.Fatal(err)
	}
	if given := givenUp(l, mark); len(given) > 0 {
		t.Errorf("members gave partitions up across the rolling restart: %v\nwhy: %s", given, strings.Join(f.groupErrors(), "\n"))
	}
	f.finish(ctx, t, true)
}

// settledAnywhere waits for one gateway of the rig to hold the group,
// settled with the rig's members.
func settledAnywhere(ctx context.Context, f *failoverRig, l *kfakegroup.Ledger) (adminGroup, error) {
	owner, _, err := ownerOf(ctx, f.gateways, f.group)
	if err != nil {
		return adminGroup{}, err
	}
	return settled(ctx, owner, f.group, l, f.members)
}

package kfakegroup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	testGroup = "managed"
	testTopic = "events"
)

// testLogger shows kgo's and the bridge's logs with -v and KFAKEGROUP_LOG=1.
func testLogger() *slog.Logger {
	if os.Getenv("KFAKEGROUP_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// setup starts a two-broker kfake cluster with testTopic (partitions
// partitions) whose testGroup is run by a rangeCoordinator, and a rig for
// that group.
func setup(t *testing.T, partitions int32, expect int) (*Bridge, *rangeCoordinator, *Rig) {
	t.Helper()
	var cluster *kfake.Cluster
	rc := newRangeCoordinator(testGroup, func(topic string) int32 {
		return int32(len(cluster.PartitionInfos(topic)))
	}, expect)
	var bopts []BridgeOption
	if l := testLogger(); l != nil {
		bopts = append(bopts, WithLogger(l))
	}
	b, err := NewBridge(rc, append(FastKfakeOpts(), kfake.NumBrokers(2), kfake.SeedTopics(partitions, testTopic)), bopts...)
	if err != nil {
		t.Fatal(err)
	}
	cluster = b.Cluster()
	rig := NewRig(b.Addrs(), testGroup, []string{testTopic}, testLogger())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := rig.Close(ctx); err != nil {
			t.Logf("closing consumers: %v", err)
		}
		b.Close()
	})
	return b, rc, rig
}

func waitCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// ownedBy returns a WaitFor check that passes once exactly the named
// consumers hold partitions and together hold each partition once.
func ownedBy(l *Ledger, partitions int32, names ...string) func() error {
	return func() error {
		owned := l.Owned()
		if len(owned) != len(names) {
			return fmt.Errorf("%d members hold partitions, want %d: %v", len(owned), len(names), owned)
		}
		for _, n := range names {
			if len(owned[n]) == 0 {
				return fmt.Errorf("%s holds nothing: %v", n, owned)
			}
		}
		if err := NoSharedOwnership(owned); err != nil {
			return err
		}
		return Covers(owned, map[string]int32{testTopic: partitions})
	}
}

func TestKgoConsumersAcceptServerSideRangeAssignmentThroughBridge(t *testing.T) {
	const partitions = 6
	b, rc, rig := setup(t, partitions, 3)
	ctx := waitCtx(t, 10*time.Second)
	if err := rig.Produce(ctx, testTopic, 300); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		if _, err := rig.Start(n, ConsumerOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := WaitFor(ctx, ownedBy(rig.Ledger(), partitions, "a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, AllConsumed(rig.Ledger())); err != nil {
		t.Fatal(err)
	}
	if err := AllConsumedOnce(rig.Ledger()); err != nil {
		t.Error(err)
	}
	// Range over 6 partitions and 3 members gives each member 2.
	for m, tps := range rig.Ledger().Owned() {
		if len(tps) != 2 {
			t.Errorf("%s holds %v, want 2 partitions", m, tps)
		}
	}
	// kfake never saw the group's members: the bridge answered every
	// group request, and kfake only stored the forwarded commits.
	if err := rig.Close(ctx); err != nil {
		t.Fatal(err)
	}
	info := b.Cluster().GroupInfo(testGroup)
	if info == nil {
		t.Fatal("kfake holds no commits for the group")
	}
	if len(info.Members) != 0 {
		t.Errorf("kfake saw members %v; the bridge should have answered their joins", info.Members)
	}
	var committed int64
	for p, c := range info.Commits[testTopic] {
		committed += c.Offset
		if c.Offset != 50 {
			t.Errorf("partition %d committed at %d, want 50 (the end of the partition)", p, c.Offset)
		}
	}
	if committed != 300 {
		t.Errorf("commits add up to %d records, want 300", committed)
	}
	if b.Routed(kmsg.JoinGroup) < 3 || b.Routed(kmsg.SyncGroup) < 3 || b.Routed(kmsg.OffsetCommit) == 0 {
		t.Errorf("routed %d joins, %d syncs, %d commits; want at least 3, 3, 1",
			b.Routed(kmsg.JoinGroup), b.Routed(kmsg.SyncGroup), b.Routed(kmsg.OffsetCommit))
	}
	if n := rc.refusedCommits(); n != 0 {
		t.Errorf("%d commits were refused in a clean run", n)
	}
}

func TestRecordsProducedAroundAJoinAndALeaveAreEachConsumedOnce(t *testing.T) {
	const partitions = 4
	_, _, rig := setup(t, partitions, 1)
	ctx := waitCtx(t, 15*time.Second)
	l := rig.Ledger()

	if err := rig.Produce(ctx, testTopic, 100); err != nil {
		t.Fatal(err)
	}
	a, err := rig.Start("a", ConsumerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, AllConsumed(l)); err != nil {
		t.Fatal(err)
	}

	// Join: b arrives while records keep coming.
	if _, err := rig.Start("b", ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rig.Produce(ctx, testTopic, 100); err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, ownedBy(l, partitions, "a", "b")); err != nil {
		t.Fatal(err)
	}
	if err := rig.Produce(ctx, testTopic, 100); err != nil {
		t.Fatal(err)
	}

	// Leave: a goes, b must take over a's partitions from a's commits.
	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rig.Produce(ctx, testTopic, 100); err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, ownedBy(l, partitions, "b")); err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, AllConsumed(l)); err != nil {
		t.Fatal(err)
	}
	if err := AllConsumedOnce(l); err != nil {
		t.Error(err)
	}
	if p, _ := l.Counts(); p != 400 {
		t.Errorf("ledger holds %d produced records, want 400", p)
	}
}

func TestJoinGroupWaitingForItsRoundDoesNotStallTheCluster(t *testing.T) {
	const partitions = 2
	_, rc, rig := setup(t, partitions, 2)
	rc.window = 20 * time.Second // only the second member can end the round
	ctx := waitCtx(t, 10*time.Second)

	if _, err := rig.Start("a", ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}
	// Wait until a's JoinGroup is parked in the coordinator.
	if err := WaitFor(ctx, func() error {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if !rc.preparing || len(rc.joined) != 1 {
			return errors.New("a's JoinGroup has not arrived")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := rig.Produce(ctx, testTopic, 50); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("producing took %v while a JoinGroup waited", d)
	}
	if _, err := rig.Start("b", ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, ownedBy(rig.Ledger(), partitions, "a", "b")); err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, AllConsumed(rig.Ledger())); err != nil {
		t.Fatal(err)
	}
	if err := AllConsumedOnce(rig.Ledger()); err != nil {
		t.Error(err)
	}
}

func TestUnmanagedGroupIsRunByKfake(t *testing.T) {
	const partitions = 3
	b, _, _ := setup(t, partitions, 1)
	ctx := waitCtx(t, 10*time.Second)
	other := NewRig(b.Addrs(), "unmanaged", []string{testTopic}, testLogger())
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	if err := other.Produce(ctx, testTopic, 30); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Start("x", ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, AllConsumed(other.Ledger())); err != nil {
		t.Fatal(err)
	}
	if err := AllConsumedOnce(other.Ledger()); err != nil {
		t.Error(err)
	}
	info, err := b.Cluster().WaitGroupStable(ctx, "unmanaged", 1)
	if err != nil {
		t.Fatalf("kfake does not run the unmanaged group: %v (info %+v)", err, info)
	}
	for _, k := range []kmsg.Key{kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.OffsetCommit} {
		if n := b.Routed(k); n != 0 {
			t.Errorf("%d %s requests of an unmanaged group reached the handler", n, kmsg.NameForKey(int16(k)))
		}
	}
}

func TestCommitsAreFencedByTheHandlerAndOnlyAcceptedOnesStored(t *testing.T) {
	const partitions = 2
	b, rc, rig := setup(t, partitions, 1)
	ctx := waitCtx(t, 10*time.Second)
	if err := rig.Produce(ctx, testTopic, 20); err != nil {
		t.Fatal(err)
	}
	a, err := rig.Start("a", ConsumerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, AllConsumed(rig.Ledger())); err != nil {
		t.Fatal(err)
	}
	if err := a.Client().CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	member, gen := a.Joined()
	p0 := TopicPartition{testTopic, 0}

	// Each case commits offset 3 on partition 0 (the group is at 10) and
	// says what partition 0 holds afterwards.
	tests := []struct {
		name    string
		member  string
		gen     int32
		want    error
		refused bool
		stored  int64
	}{
		{"stale generation", member, gen - 1, kerr.IllegalGeneration, true, 10},
		{"future generation", member, gen + 1, kerr.IllegalGeneration, true, 10},
		{"unknown member", "nobody", gen, kerr.UnknownMemberID, true, 10},
		{"current member and generation", member, gen, nil, false, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := rc.refusedCommits()
			got, err := a.CommitAs(ctx, Commit{MemberID: tt.member, Generation: tt.gen, Offsets: map[TopicPartition]int64{p0: 3}})
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(got[p0], tt.want) || (tt.want == nil && got[p0] != nil) {
				t.Errorf("commit answered %v, want %v", got[p0], tt.want)
			}
			if refused := rc.refusedCommits() - before; refused != map[bool]int{true: 1}[tt.refused] {
				t.Errorf("handler refused %d commits, want refused=%v", refused, tt.refused)
			}
			if c := b.Cluster().GroupInfo(testGroup).Commits[testTopic][0]; c.Offset != tt.stored {
				t.Errorf("partition 0 committed at %d, want %d", c.Offset, tt.stored)
			}
		})
	}
}

func TestStaticMemberRestartThroughBridgeKeepsItsPartitionsWithoutRebalance(t *testing.T) {
	const partitions = 4
	// kfake's own coordinator cannot run this: it compares the rejoin's
	// raw metadata bytes, and kgo's differ after a restart (the
	// subscription carries the generation), so kfake rebalances.
	b, _, rig := setup(t, partitions, 2)
	ctx := waitCtx(t, 15*time.Second)
	l := rig.Ledger()
	if err := rig.Produce(ctx, testTopic, 80); err != nil {
		t.Fatal(err)
	}
	s1, err := rig.Start("s1", ConsumerOptions{InstanceID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := rig.Start("s2", ConsumerOptions{InstanceID: "s2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, ownedBy(l, partitions, "s1", "s2")); err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, AllConsumed(l)); err != nil {
		t.Fatal(err)
	}
	_, gen := s2.Joined()
	before := l.Owned()
	if err := s1.Leave(ctx); err != nil { // static: commits, sends no LeaveGroup
		t.Fatal(err)
	}
	mark, joins := l.Mark(), b.Routed(kmsg.JoinGroup)
	if _, err := rig.Start("s1", ConsumerOptions{InstanceID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if err := rig.Produce(ctx, testTopic, 80); err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, func() error {
		if got := l.Owned()["s1"]; fmt.Sprint(got) != fmt.Sprint(before["s1"]) {
			return fmt.Errorf("restarted s1 holds %v, held %v", got, before["s1"])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, AllConsumed(l)); err != nil {
		t.Fatal(err)
	}
	if _, g := s2.Joined(); g != gen {
		t.Errorf("s2 moved from generation %d to %d: the restart caused a rebalance", gen, g)
	}
	for _, e := range l.Events(mark) {
		if e.Member == "s2" {
			t.Errorf("s2 saw %s %v after s1's restart", e.Kind, e.Partitions)
		}
	}
	if n := b.Routed(kmsg.JoinGroup) - joins; n != 1 {
		t.Errorf("the restart sent %d JoinGroups, want 1", n)
	}
	if err := AllConsumedOnce(l); err != nil {
		t.Error(err)
	}
}

// failingHandler manages every group and fails every request.
type failingHandler struct{}

func (failingHandler) Manages(string) bool { return true }
func (failingHandler) Handle(context.Context, kmsg.Request) (kmsg.Response, error) {
	return nil, errors.New("handler broke")
}
func (failingHandler) FenceCommit(context.Context, *kmsg.OffsetCommitRequest) error {
	return errors.New("handler broke")
}

func TestHandlerFailureClosesTheConnectionAndTheClusterKeepsServing(t *testing.T) {
	b, err := NewBridge(failingHandler{}, []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, testTopic)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := waitCtx(t, 10*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Groups = []string{testGroup}
	if _, err := describe.RequestWith(ctx, cl); err == nil {
		t.Error("DescribeGroups succeeded although the handler failed")
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group = testGroup
	if _, err := commit.RequestWith(ctx, cl); err == nil {
		t.Error("OffsetCommit succeeded although fencing failed")
	}
	meta := kmsg.NewPtrMetadataRequest()
	resp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("cluster stopped serving after handler failures: %v", err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Errorf("metadata after handler failures: %+v", resp.Topics)
	}
	if b.Routed(kmsg.DescribeGroups) != 1 || b.Routed(kmsg.OffsetCommit) != 1 {
		t.Errorf("routed %d DescribeGroups and %d OffsetCommit, want 1 each",
			b.Routed(kmsg.DescribeGroups), b.Routed(kmsg.OffsetCommit))
	}
}

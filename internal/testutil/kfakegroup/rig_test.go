package kfakegroup

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// These tests run the Rig against groups that kfake coordinates itself (no
// handler manages them), so that the rig's records and checks are proven
// against a known coordinator before coordinator tests rely on them.

func kfakeRig(t *testing.T, group string, partitions int32) (*kfake.Cluster, *Rig) {
	t.Helper()
	c, err := kfake.NewCluster(append(FastKfakeOpts(), kfake.NumBrokers(2), kfake.SeedTopics(partitions, testTopic))...)
	if err != nil {
		t.Fatal(err)
	}
	rig := NewRig(c.ListenAddrs(), group, []string{testTopic}, testLogger())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = rig.Close(ctx)
		c.Close()
	})
	return c, rig
}

func TestCooperativeJoinRevokesOnlyThePartitionsThatMove(t *testing.T) {
	const partitions = 6
	_, rig := kfakeRig(t, "coop", partitions)
	ctx := waitCtx(t, 15*time.Second)
	l := rig.Ledger()
	coop := ConsumerOptions{Balancers: []kgo.GroupBalancer{kgo.CooperativeStickyBalancer()}}

	if err := rig.Produce(ctx, testTopic, 120); err != nil {
		t.Fatal(err)
	}
	a := coop
	a.Rack = "rack-a"
	if _, err := rig.Start("a", a); err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, ownedBy(l, partitions, "a")); err != nil {
		t.Fatal(err)
	}
	mark, before := l.Mark(), l.Owned()

	b := coop
	b.Rack = "rack-b"
	if _, err := rig.Start("b", b); err != nil {
		t.Fatal(err)
	}
	if err := rig.Produce(ctx, testTopic, 120); err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, ownedBy(l, partitions, "a", "b")); err != nil {
		t.Fatal(err)
	}
	after := l.Owned()
	stayed := Unmoved(before, after)
	if len(stayed) != partitions/2 {
		t.Fatalf("sticky kept %v with a, want %d partitions (before %v, after %v)", stayed, partitions/2, before, after)
	}
	if err := NoRevocationOf(l, mark, stayed); err != nil {
		t.Error(err)
	}
	// The same check must fail for the partitions that did move: a
	// cooperative member revokes them before b is given them.
	if err := NoRevocationOf(l, mark, after["b"]); err == nil {
		t.Errorf("no revocation of %v recorded, though they moved from a to b", after["b"])
	}
	if err := WaitFor(ctx, AllConsumed(l)); err != nil {
		t.Fatal(err)
	}
	if err := AllConsumedOnce(l); err != nil {
		t.Error(err)
	}
}

func TestCrashedMemberIsReplacedAndItsRecordsAreStillConsumed(t *testing.T) {
	const partitions = 4
	_, rig := kfakeRig(t, "crash", partitions)
	ctx := waitCtx(t, 15*time.Second)
	l := rig.Ledger()
	short := ConsumerOptions{SessionTimeout: 500 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond}
	if err := rig.Produce(ctx, testTopic, 100); err != nil {
		t.Fatal(err)
	}
	a, err := rig.Start("a", short)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rig.Start("b", short); err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, ownedBy(l, partitions, "a", "b")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	a.Crash()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Crash took %v", d)
	}
	if err := rig.Produce(ctx, testTopic, 100); err != nil {
		t.Fatal(err)
	}
	// a's own revoke callback ran on close (kgo calls it), so its local
	// view is empty; b must come to hold everything.
	if err := WaitFor(ctx, func() error {
		if got := len(l.Owned()["b"]); got != partitions {
			return fmt.Errorf("b holds %d partitions", got)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := WaitFor(ctx, AllConsumed(l)); err != nil {
		t.Fatal(err)
	}
	if err := AllConsumedAtLeastOnce(l); err != nil {
		t.Error(err)
	}
}

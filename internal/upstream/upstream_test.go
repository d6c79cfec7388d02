package upstream

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/testutil"
)

// TestClient_ForwardKeepsTheClientsVersion forwards commits at the
// versions older clients send (librdkafka 2.0.2 and kafkajs use v7 and
// below, naming topics): each must land upstream. Raised to v10, a commit
// names its topic by an id the client never filled in, and is lost.
func TestClient_ForwardKeepsTheClientsVersion(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	up := New(cl, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, version := range []int16{2, 5, 7, 8, 9} {
		group := "g" + string(rune('a'+version))
		resp, err := up.Forward(ctx, testutil.SimpleCommit(version, group, "t", 1, 42+int64(version)))
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		cr := resp.(*kmsg.OffsetCommitResponse)
		if cr.GetVersion() != version || len(cr.Topics) != 1 || cr.Topics[0].Topic != "t" || cr.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Errorf("v%d: response %+v; want v%d, topic t, no error", version, cr, version)
		}
		fetch := kmsg.NewPtrOffsetFetchRequest()
		fetch.Group = group
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = "t", []int32{1}
		fetch.Topics = append(fetch.Topics, ft)
		fr, err := fetch.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		var got int64 = -2
		for _, g := range fr.Groups {
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					got = p.Offset
				}
			}
		}
		for _, t := range fr.Topics {
			for _, p := range t.Partitions {
				got = p.Offset
			}
		}
		if want := 42 + int64(version); got != want {
			t.Errorf("v%d: upstream holds offset %d for %s, want %d", version, got, group, want)
		}
	}
}

// TestClient_CoordinatorsOfBatchesAndRemembers looks up many groups'
// coordinators in one FindCoordinator, agrees with the upstream's own
// answer for each, and asks again only for groups it has not seen.
func TestClient_CoordinatorsOfBatchesAndRemembers(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var lookups, keys atomic.Int32
	c.ControlKey(int16(kmsg.FindCoordinator), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		lookups.Add(1)
		fc := req.(*kmsg.FindCoordinatorRequest)
		keys.Add(int32(max(len(fc.CoordinatorKeys), 1)))
		return nil, nil, false
	})
	cl, up := upstreamOn(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var groups []string
	for i := range 12 {
		groups = append(groups, fmt.Sprintf("group-%d", i))
	}
	nodes, err := up.CoordinatorsOf(ctx, append(groups, groups[0]))
	if err != nil {
		t.Fatal(err)
	}
	if n := lookups.Load(); n != 1 {
		t.Errorf("%d FindCoordinator requests for %d groups, want one batch", n, len(groups))
	}
	if k := keys.Load(); k != int32(len(groups)) {
		t.Errorf("the batch asked for %d keys, want %d (each group once)", k, len(groups))
	}
	seen := map[int32]bool{}
	for _, g := range groups {
		node, ok := nodes[g]
		if !ok {
			t.Fatalf("no coordinator for %s in %v", g, nodes)
		}
		seen[node] = true
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = g, []string{g}
		resp, err := req.RequestWith(ctx, cl.Broker(0))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Coordinators) != 1 || resp.Coordinators[0].NodeID != node {
			t.Errorf("%s: batched lookup says node %d, the upstream alone %+v", g, node, resp.Coordinators)
		}
	}
	if len(seen) < 2 {
		t.Errorf("12 groups all on node(s) %v: the test cannot tell groups apart", seen)
	}

	before := lookups.Load()
	again, err := up.CoordinatorsOf(ctx, []string{groups[3], "group-new"})
	if err != nil {
		t.Fatal(err)
	}
	if again[groups[3]] != nodes[groups[3]] {
		t.Errorf("remembered node %d for %s, first answer %d", again[groups[3]], groups[3], nodes[groups[3]])
	}
	if n := lookups.Load() - before; n != 1 {
		t.Errorf("%d lookups for one remembered and one new group, want 1", n)
	}

	// A forgotten group is asked for again; the others stay remembered.
	up.Forget(groups[3])
	before = lookups.Load()
	keysBefore := keys.Load()
	if _, err := up.CoordinatorsOf(ctx, []string{groups[3], groups[4]}); err != nil {
		t.Fatal(err)
	}
	if n, k := lookups.Load()-before, keys.Load()-keysBefore; n != 1 || k != 1 {
		t.Errorf("after forgetting one group: %d lookups of %d keys, want 1 of 1", n, k)
	}
}

// TestClient_ConcurrentLookupsOfOneGroupShareOneRequest starts many
// lookups of a new group at once, as the members of a group starting
// together do: the upstream is asked once, every caller gets its answer,
// and a lookup that fails fails for every caller waiting on it.
func TestClient_ConcurrentLookupsOfOneGroupShareOneRequest(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var lookups atomic.Int32
	var fail atomic.Bool
	c.ControlKey(int16(kmsg.FindCoordinator), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		lookups.Add(1)
		// Slow enough that every caller starts while it is in flight.
		time.Sleep(200 * time.Millisecond)
		if fail.Load() {
			fc := req.(*kmsg.FindCoordinatorRequest)
			resp := fc.ResponseKind().(*kmsg.FindCoordinatorResponse)
			for _, k := range fc.CoordinatorKeys {
				rc := kmsg.NewFindCoordinatorResponseCoordinator()
				rc.Key, rc.ErrorCode = k, kerr.CoordinatorLoadInProgress.Code
				resp.Coordinators = append(resp.Coordinators, rc)
			}
			return resp, nil, true
		}
		return nil, nil, false
	})
	_, up := upstreamOn(t, c, kgo.RequestRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	for _, tc := range []struct {
		group string
		fail  bool
	}{{"together", false}, {"refused", true}} {
		fail.Store(tc.fail)
		before := lookups.Load()
		const callers = 20
		nodes := make([]map[string]int32, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() { nodes[i], errs[i] = up.CoordinatorsOf(ctx, []string{tc.group}) })
		}
		wg.Wait()
		if n := lookups.Load() - before; n != 1 {
			t.Errorf("%s: %d FindCoordinator requests for %d concurrent lookups, want 1", tc.group, n, callers)
		}
		for i := range callers {
			_, ok := nodes[i][tc.group]
			switch {
			case tc.fail && (ok || errs[i] == nil || !strings.Contains(errs[i].Error(), "COORDINATOR_LOAD_IN_PROGRESS")):
				t.Errorf("%s: caller %d got %v, %v; want no node and the upstream's error", tc.group, i, nodes[i], errs[i])
			case !tc.fail && (!ok || errs[i] != nil):
				t.Errorf("%s: caller %d got %v, %v; want the node", tc.group, i, nodes[i], errs[i])
			}
		}
	}
}

// upstreamOn returns a kgo client of c, closed when the test ends, and a
// Client over it that remembers coordinators for a minute.
func upstreamOn(t *testing.T, c *kfake.Cluster, opts ...kgo.Opt) (*kgo.Client, *Client) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, New(cl, time.Minute)
}

// TestClient_ALookupCutShortIsAskedAgainForTheOthers starts a lookup
// under a context that ends while the upstream answers, and a second
// lookup of the same group that waits for it: the second, whose context
// is still live, asks again and gets the coordinator.
func TestClient_ALookupCutShortIsAskedAgainForTheOthers(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var lookups atomic.Int32
	c.ControlKey(int16(kmsg.FindCoordinator), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		lookups.Add(1)
		time.Sleep(200 * time.Millisecond)
		return nil, nil, false
	})
	_, up := upstreamOn(t, c, kgo.RequestRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	first := make(chan error, 1)
	go func() {
		_, err := up.CoordinatorsOf(short, []string{"g"})
		first <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); lookups.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first lookup never reached the upstream")
		}
	}
	nodes, err := up.CoordinatorsOf(ctx, []string{"g"})
	if _, ok := nodes["g"]; !ok || err != nil {
		t.Errorf("the waiting lookup got %v, %v; want the coordinator", nodes, err)
	}
	if err := <-first; err == nil {
		t.Error("the lookup whose context ended reported no error")
	}
	if n := lookups.Load(); n != 2 {
		t.Errorf("%d FindCoordinator requests, want 2: the cut-short one and the retry", n)
	}
}

// TestClient_ForwardersSpreadGroupsOverConnections holds one group's commit
// at the broker, which answers a connection's requests one at a time, and
// requires another group's commit to be answered meanwhile: with the
// forwarders, the two groups go over different connections.
func TestClient_ForwardersSpreadGroupsOverConnections(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, up := upstreamOn(t, c)
	for range 3 {
		extra, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(extra.Close)
		up.WithForwarders(extra)
	}
	held, free := "held", ""
	for i := 0; free == ""; i++ {
		if g := fmt.Sprintf("free-%d", i); up.forwarderOf(g) != up.forwarderOf(held) {
			free = g
		}
	}
	arrived, release := make(chan struct{}), make(chan struct{})
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if req.(*kmsg.OffsetCommitRequest).Group == held {
			close(arrived)
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	commit := func(ctx context.Context, group string) error {
		_, err := up.Forward(ctx, testutil.SimpleCommit(7, group, "t", 0, 1))
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	heldDone := make(chan error, 1)
	go func() { heldDone <- commit(ctx, held) }()
	<-arrived
	quick, stop := context.WithTimeout(ctx, 3*time.Second)
	defer stop()
	if err := commit(quick, free); err != nil {
		t.Errorf("group %s's commit while group %s's is held at the broker: %v", free, held, err)
	}
	close(release)
	if err := <-heldDone; err != nil {
		t.Fatalf("the held commit: %v", err)
	}
}

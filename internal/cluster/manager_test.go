package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmassign/wasmassign/coordinator"
)

// heldGroups stands in for the coordinator's driver: it holds what it was
// loaded with, and refuses a group it holds already, as the driver does.
type heldGroups struct {
	mu   sync.Mutex
	held map[string]coordinator.GroupState
}

func (h *heldGroups) Load(states []coordinator.GroupState) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, gs := range states {
		if _, ok := h.held[gs.Group]; ok {
			return fmt.Errorf("group %s loaded twice", gs.Group)
		}
		h.held[gs.Group] = gs
	}
	return nil
}

func (h *heldGroups) Unload(groups []string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range groups {
		delete(h.held, g)
	}
	return nil
}

func (h *heldGroups) Groups() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for g := range h.held {
		out = append(out, g)
	}
	return out
}

func (h *heldGroups) state(group string) (coordinator.GroupState, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	gs, ok := h.held[group]
	return gs, ok
}

// groupOfShard is a group id of each of n shards.
func groupOfShard(n int) []string {
	out := make([]string, n)
	for i, found := 0, 0; found < n; i++ {
		g := fmt.Sprintf("group-%d", i)
		if s := ShardOf(g, n); out[s] == "" {
			out[s] = g
			found++
		}
	}
	return out
}

// TestManager_GatewaysShareTheShardsAndHandThemOverCleanly runs two
// gateways' Managers on kfake: the first takes every shard, and a group's
// saved state; the second joins and gets some of them, loading the state
// of those it takes; the first leaves and the second takes the rest at
// once, from the first's release rather than after its lease. Sampled all
// along, no shard is ever served by both.
func TestManager_GatewaysShareTheShardsAndHandThemOverCleanly(t *testing.T) {
	const shards = 4
	const lease = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, cl := kfakeClient(t)
	topic := "wasmassign-m-state"
	if _, err := EnsureStateTopic(ctx, cl, topic, shards); err != nil {
		t.Fatal(err)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	hooks := map[string]*recordingHook{}
	newGateway := func(id string) (*Manager, *heldGroups, chan error) {
		held := &heldGroups{held: map[string]coordinator.GroupState{}}
		hooks[id] = &recordingHook{}
		m := NewManager(ManagerConfig{
			Name: "m", Topic: topic, Shards: shards, ID: id, Address: id + ":9092", Admin: id + ":9644",
			SessionTimeout: 6 * time.Second, RebalanceTimeout: 5 * time.Second, HeartbeatInterval: 200 * time.Millisecond, Lease: lease,
			Opts: opts, Groups: held, Logger: testLogger(t), Hooks: []Hook{hooks[id]},
		})
		m.SetBrokers(map[int32]int32{0: 19092})
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		return m, held, done
	}
	groups := groupOfShard(shards)
	servedBy := func(ms ...*Manager) [][]int { // per shard, the gateways serving it
		out := make([][]int, shards)
		for s, g := range groups {
			for i, m := range ms {
				if o, _ := m.Owner(g); o == Serving {
					out[s] = append(out[s], i)
				}
			}
		}
		return out
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("waiting for %s: %v", what, ctx.Err())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	started := time.Now()
	a, heldA, doneA := newGateway("gw-a")
	waitFor("the first gateway to serve every shard", func() bool {
		for _, by := range servedBy(a) {
			if len(by) != 1 {
				return false
			}
		}
		return true
	})
	if took := time.Since(started); took >= lease {
		t.Errorf("the first gateway served shards no gateway had claimed %v after it started: it waited out a lease (%v) nobody held", took, lease)
	}
	saved := make(chan error, shards)
	for i, g := range groups {
		// As the driver does: the coordinator holds the group, and saves it.
		gs := coordinator.GroupState{Group: g, State: "Empty", Generation: int32(10 + i)}
		if err := heldA.Load([]coordinator.GroupState{gs}); err != nil {
			t.Fatal(err)
		}
		a.Save(g, &gs, func(err error) { saved <- err })
	}
	for range groups {
		if err := <-saved; err != nil {
			t.Fatal(err)
		}
	}
	if o, owner := a.Owner(groups[0]); o != Serving || owner.ID != "gw-a" || owner.Address != "gw-a:9092" {
		t.Fatalf("the first gateway's ownership of a group: %v, %+v", o, owner)
	}
	if resp, err := a.Commit(ctx, offsetCommit(topic, groups[0], 0, 42)); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("a commit at the gateway serving the group: %+v, %v", resp, err)
	}

	var both sync.Mutex
	var doubles []string
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	b, heldB, doneB := newGateway("gw-b")
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stopSampling:
				return
			default:
			}
			for s, by := range servedBy(a, b) {
				if len(by) > 1 {
					both.Lock()
					doubles = append(doubles, fmt.Sprintf("shard %d at %v", s, time.Now()))
					both.Unlock()
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	waitFor("the shards to be shared by both gateways", func() bool {
		per := map[int]int{}
		for _, by := range servedBy(a, b) {
			if len(by) != 1 {
				return false
			}
			per[by[0]]++
		}
		return per[0] > 0 && per[1] > 0
	})
	for s, by := range servedBy(a, b) {
		held := []*heldGroups{heldA, heldB}[by[0]]
		gs, ok := held.state(groups[s])
		if !ok || gs.Generation != int32(10+s) {
			t.Errorf("shard %d's group at the gateway serving it: %+v (held %v), want generation %d", s, gs, ok, 10+s)
		}
		if _, ok := []*heldGroups{heldB, heldA}[by[0]].state(groups[s]); ok {
			t.Errorf("shard %d's group is still held by the gateway that gave it up", s)
		}
	}

	a.Leave()
	if err := <-doneA; err != nil {
		t.Fatalf("the first gateway's Run after Leave: %v", err)
	}
	left := time.Now()
	a.Save(groups[0], &coordinator.GroupState{Group: groups[0]}, func(err error) { saved <- err })
	if err := <-saved; !errors.Is(err, ErrNotOwner) {
		t.Fatalf("a save at the gateway that left: %v, want ErrNotOwner", err)
	}
	if _, err := a.Commit(ctx, offsetCommit(topic, groups[0], 0, 42)); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("a commit at the gateway that left: %v, want ErrNotOwner", err)
	}
	waitFor("the second gateway to serve every shard", func() bool {
		return !slices.ContainsFunc(servedBy(b), func(by []int) bool { return len(by) != 1 })
	})
	if took := time.Since(left); took >= lease {
		t.Errorf("the second gateway served the handed-over shards %v after the first left: it waited out a lease (%v) the release should have spared", took, lease)
	}
	for s, g := range groups {
		if gs, ok := heldB.state(g); !ok || gs.Generation != int32(10+s) {
			t.Errorf("after the hand-over, shard %d's group at the second gateway: %+v (held %v)", s, gs, ok)
		}
	}
	close(stopSampling)
	<-sampled
	if len(doubles) > 0 {
		t.Fatalf("shards served by both gateways at once: %v", doubles)
	}

	// What operators see: the hooks and the status.
	if given := hooks["gw-a"].givenUp(); len(given) != shards || slices.ContainsFunc(given, func(r string) bool { return r != "moved" && r != "leaving" }) {
		t.Errorf("the first gateway gave shards up for %v, want each of %d moved or leaving", given, shards)
	}
	if served := hooks["gw-b"].served(); len(served) != shards || slices.ContainsFunc(served, func(how string) bool { return how != "handover" }) {
		t.Errorf("the second gateway took its shards by %v, want %d hand-overs", served, shards)
	}
	if served := hooks["gw-a"].served(); len(served) != shards || slices.ContainsFunc(served, func(how string) bool { return how != "first" }) {
		t.Errorf("the first gateway took the new cluster's shards by %v, want %d firsts", served, shards)
	}
	st := b.Status()
	if len(st.Shards) != shards || slices.ContainsFunc(st.Shards, func(s ShardStatus) bool { return s.State != "serving" || s.Since.IsZero() }) {
		t.Errorf("the second gateway's status: shards %+v, want all %d serving", st.Shards, shards)
	}
	if len(st.Gateways) != 1 || st.Gateways[0].ID != "gw-b" || st.Gateways[0].Admin != "gw-b:9644" || st.Gateways[0].Brokers[0] != 19092 || st.MovedAt.IsZero() || st.LayoutAt.IsZero() {
		t.Errorf("the second gateway's status: %+v", st)
	}
	cancel()
	<-doneB
}

// recordingHook records what a Manager's Hook is told.
type recordingHook struct {
	mu      sync.Mutex
	serving []string // how, per shard served
	gone    []string
}

func (h *recordingHook) OnShardServing(_, _ int, _ time.Duration, how string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.serving = append(h.serving, how)
}

func (h *recordingHook) OnShardGivenUp(_ int, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gone = append(h.gone, reason)
}

func (h *recordingHook) OnRecordsSkipped(int, string, int) {}

func (h *recordingHook) served() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.serving)
}

func (h *recordingHook) givenUp() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.gone)
}

// testLogger writes through t, so a failing test shows what its gateways
// did.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

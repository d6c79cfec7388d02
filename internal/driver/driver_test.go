package driver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/internal/driver"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
	"github.com/wasmassign/wasmassign/plugins/builtin"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

const (
	group = "orders"
	topic = "events"
)

// registry loads the built-in wasm plugins once per test binary run.
func registry(t *testing.T) *wasmruntime.Registry {
	t.Helper()
	ctx := context.Background()
	h, err := wasmruntime.NewHost(ctx, wasmruntime.NewConfig().
		WithLogger(slog.New(slog.DiscardHandler)).
		WithCompilationCacheDir(os.Getenv("WASMASSIGN_TEST_CACHE")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	reg := wasmruntime.NewRegistry(h)
	if err := reg.LoadBuiltins(ctx, builtin.FS()); err != nil {
		t.Fatal(err)
	}
	return reg
}

// plugins adapts the registry to the driver and the coordinator.
type plugins struct{ reg *wasmruntime.Registry }

func (p plugins) Assign(ctx context.Context, name string, req *abi.Request) (*abi.Response, error) {
	a, ok := p.reg.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("no assignor %q", name)
	}
	return a.Assign(ctx, req)
}

// acceptAll answers a forwarded commit with success on every partition; the
// bridge lets kfake store the commit itself once fencing passed.
type acceptAll struct{}

func (acceptAll) Forward(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r, ok := req.(*kmsg.OffsetCommitRequest)
	if !ok {
		return nil, fmt.Errorf("unexpected forward of %s", kmsg.NameForKey(req.Key()))
	}
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

// handler is the bridge's view of the driver.
type handler struct{ d *driver.Driver }

func (handler) Manages(g string) bool { return g == group }

func (h handler) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return h.d.Handle(ctx, coordinator.Client{ID: "kgo", Host: "/127.0.0.1"}, req)
}

func (h handler) FenceCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) error {
	resp, err := h.d.Handle(ctx, coordinator.Client{ID: "kgo", Host: "/127.0.0.1"}, req)
	if err != nil {
		return err
	}
	for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return kerr.ErrorForCode(p.ErrorCode)
			}
		}
	}
	return nil
}

type env struct {
	bridge *kfakegroup.Bridge
	driver *driver.Driver
	rig    *kfakegroup.Rig
	md     *coordinator.Metadata // the cluster's metadata, as the driver has it
}

// start runs a kfake cluster of brokers brokers whose group requests for
// group go to a driver over the real wasm plugins. Partition p of topic
// has one replica, on broker p % brokers, whose rack is "r<broker>".
func start(t *testing.T, brokers int, partitions int32) *env {
	t.Helper()
	return startWith(t, brokers, partitions, false)
}

// startWith is start; with lazyMetadata the driver learns the topic's
// metadata only when it asks for it (Config.NeedMetadata), after a delay,
// as the daemon's metadata fetch does.
func startWith(t *testing.T, brokers int, partitions int32, lazyMetadata bool) *env {
	t.Helper()
	// Loading the plugins compiles them when the cache is cold, which can
	// take seconds on a busy machine; the cluster's deadline starts after.
	reg := registry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := plugins{reg}
	e := &env{}
	var md *coordinator.Metadata // set below, before any consumer starts
	var need func([]string)
	var wait time.Duration
	if lazyMetadata {
		wait = 20 * time.Second
		need = func(topics []string) {
			go func() {
				time.Sleep(200 * time.Millisecond)
				_ = e.driver.SetMetadata(md, topics)
			}()
		}
	}
	d, err := driver.Start(driver.Config{
		Coordinator: coordinator.Config{
			Default:      coordinator.GroupConfig{InitialRebalanceDelay: -1, MinSessionTimeout: 100 * time.Millisecond},
			Served:       reg.ServedProtocols(),
			MetadataWait: wait,
		},
		Plugins:      p,
		Forwarder:    acceptAll{},
		Logger:       testLogger(),
		NeedMetadata: need,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.driver = d
	b, err := kfakegroup.NewBridge(handler{d}, append(kfakegroup.FastKfakeOpts(), kfake.NumBrokers(brokers)))
	if err != nil {
		t.Fatal(err)
	}
	e.bridge = b
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if e.rig != nil {
			e.rig.Close(ctx)
		}
		b.Close()
		d.Close()
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, partitions, 1
	create.Topics = append(create.Topics, ct)
	if _, err := create.RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	for p := range partitions {
		if err := b.Cluster().MoveTopicPartition(topic, p, p%int32(brokers)); err != nil {
			t.Fatal(err)
		}
	}
	md = &coordinator.Metadata{Topics: map[string]coordinator.TopicMetadata{}}
	for i := range int32(brokers) {
		md.Brokers = append(md.Brokers, coordinator.Broker{ID: i, Rack: fmt.Sprintf("r%d", i)})
	}
	tm := coordinator.TopicMetadata{}
	for p := range partitions {
		b := p % int32(brokers)
		tm.Partitions = append(tm.Partitions, coordinator.PartitionMetadata{Leader: b, Replicas: []int32{b}, ISR: []int32{b}})
	}
	md.Topics[topic] = tm
	e.md = md
	if !lazyMetadata {
		if err := d.SetMetadata(md, []string{topic}); err != nil {
			t.Fatal(err)
		}
	}
	e.rig = kfakegroup.NewRig(b.Addrs(), group, []string{topic}, testLogger())
	return e
}

func testLogger() *slog.Logger {
	if os.Getenv("DRIVER_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func waitCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// holding waits until exactly the named consumers hold partitions, each
// partition once, and returns what each holds.
func holding(ctx context.Context, t *testing.T, l *kfakegroup.Ledger, partitions int32, names ...string) map[string][]kfakegroup.TopicPartition {
	t.Helper()
	var owned map[string][]kfakegroup.TopicPartition
	err := kfakegroup.WaitFor(ctx, func() error {
		owned = l.Owned()
		if len(owned) != len(names) {
			return fmt.Errorf("%d members hold partitions, want %v: %v", len(owned), names, owned)
		}
		if err := kfakegroup.NoSharedOwnership(owned); err != nil {
			return err
		}
		return kfakegroup.Covers(owned, map[string]int32{topic: partitions})
	})
	if err != nil {
		t.Fatal(err)
	}
	return owned
}

func TestDriver_CooperativeStickyWithRacksOverRealPlugins(t *testing.T) {
	const partitions = 6
	e := start(t, 3, partitions)
	ctx := waitCtx(t, 30*time.Second)
	l := e.rig.Ledger()
	if err := e.rig.Produce(ctx, topic, 300); err != nil {
		t.Fatal(err)
	}
	coop := []kgo.GroupBalancer{kgo.CooperativeStickyBalancer()}
	for i, n := range []string{"a", "b", "c"} {
		if _, err := e.rig.Start(n, kfakegroup.ConsumerOptions{Balancers: coop, Rack: fmt.Sprintf("r%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	owned := holding(ctx, t, l, partitions, "a", "b", "c")
	// Each rack holds two partitions' only replica; rack-aware
	// cooperative-sticky gives each member exactly its rack's two.
	for i, n := range []string{"a", "b", "c"} {
		for _, tp := range owned[n] {
			if tp.Partition%3 != int32(i) {
				t.Errorf("%s (rack r%d) holds %v, whose replica is on r%d", n, i, tp, tp.Partition%3)
			}
		}
	}
	if err := kfakegroup.WaitFor(ctx, kfakegroup.AllConsumed(l)); err != nil {
		t.Fatal(err)
	}

	// A fourth member joins; partitions that do not move are never
	// revoked, and everything produced around the join is read once.
	mark := l.Mark()
	if _, err := e.rig.Start("d", kfakegroup.ConsumerOptions{Balancers: coop, Rack: "r0"}); err != nil {
		t.Fatal(err)
	}
	if err := e.rig.Produce(ctx, topic, 120); err != nil {
		t.Fatal(err)
	}
	after := holding(ctx, t, l, partitions, "a", "b", "c", "d")
	if err := kfakegroup.NoRevocationOf(l, mark, kfakegroup.Unmoved(owned, after)); err != nil {
		t.Error(err)
	}
	if err := kfakegroup.WaitFor(ctx, kfakegroup.AllConsumed(l)); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.AllConsumedOnce(l); err != nil {
		t.Error(err)
	}
	r, ok := e.driver.LastRebalance(group)
	if !ok || r.Assignor != "cooperative-sticky" || r.Fallback || r.At.IsZero() {
		t.Errorf("last rebalance %+v, %v; want one served by cooperative-sticky without fallback", r, ok)
	}
}

func TestDriver_RangeJoinAndLeaveConsumeEveryRecordOnce(t *testing.T) {
	const partitions = 4
	e := start(t, 2, partitions)
	ctx := waitCtx(t, 30*time.Second)
	l := e.rig.Ledger()
	if err := e.rig.Produce(ctx, topic, 200); err != nil {
		t.Fatal(err)
	}
	a, err := e.rig.Start("a", kfakegroup.ConsumerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holding(ctx, t, l, partitions, "a")
	if _, err := e.rig.Start("b", kfakegroup.ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}
	owned := holding(ctx, t, l, partitions, "a", "b")
	// Range gives the member with the smaller id the first half.
	for n, tps := range owned {
		if len(tps) != 2 {
			t.Errorf("%s holds %v, want 2 partitions", n, tps)
		}
	}
	if err := e.rig.Produce(ctx, topic, 200); err != nil {
		t.Fatal(err)
	}
	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	holding(ctx, t, l, partitions, "b")
	if err := e.rig.Produce(ctx, topic, 100); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.WaitFor(ctx, kfakegroup.AllConsumed(l)); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.AllConsumedOnce(l); err != nil {
		t.Error(err)
	}
}

func TestDriver_StaticRestartCausesNoRebalance(t *testing.T) {
	const partitions = 4
	e := start(t, 2, partitions)
	ctx := waitCtx(t, 30*time.Second)
	l := e.rig.Ledger()
	s1, err := e.rig.Start("s1", kfakegroup.ConsumerOptions{InstanceID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := e.rig.Start("s2", kfakegroup.ConsumerOptions{InstanceID: "s2"})
	if err != nil {
		t.Fatal(err)
	}
	before := holding(ctx, t, l, partitions, "s1", "s2")
	_, gen := s2.Joined()
	if err := s1.Leave(ctx); err != nil { // static: no LeaveGroup
		t.Fatal(err)
	}
	mark, joins := l.Mark(), e.bridge.Routed(kmsg.JoinGroup)
	if _, err := e.rig.Start("s1", kfakegroup.ConsumerOptions{InstanceID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.WaitFor(ctx, func() error {
		if got := l.Owned()["s1"]; !slices.Equal(got, before["s1"]) {
			return fmt.Errorf("restarted s1 holds %v, held %v", got, before["s1"])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, g := s2.Joined(); g != gen {
		t.Errorf("s2 moved from generation %d to %d: the restart rebalanced", gen, g)
	}
	for _, ev := range l.Events(mark) {
		if ev.Member == "s2" {
			t.Errorf("s2 saw %s %v after s1's restart", ev.Kind, ev.Partitions)
		}
	}
	if n := e.bridge.Routed(kmsg.JoinGroup) - joins; n != 1 {
		t.Errorf("the restart sent %d JoinGroups, want 1", n)
	}
}

func TestDriver_StaleGenerationCommitIsRefused(t *testing.T) {
	const partitions = 2
	e := start(t, 1, partitions)
	ctx := waitCtx(t, 20*time.Second)
	l := e.rig.Ledger()
	c, err := e.rig.Start("a", kfakegroup.ConsumerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holding(ctx, t, l, partitions, "a")
	member, gen := c.Joined()
	tp := kfakegroup.TopicPartition{Topic: topic, Partition: 0}
	tests := []struct {
		name string
		cm   kfakegroup.Commit
		want error
	}{
		{"current generation", kfakegroup.Commit{MemberID: member, Generation: gen}, nil},
		{"stale generation", kfakegroup.Commit{MemberID: member, Generation: gen - 1}, kerr.IllegalGeneration},
		{"unknown member", kfakegroup.Commit{MemberID: "ghost", Generation: gen}, kerr.UnknownMemberID},
	}
	for _, tt := range tests {
		tt.cm.Offsets = map[kfakegroup.TopicPartition]int64{tp: 0}
		got, err := c.CommitAs(ctx, tt.cm)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !errors.Is(got[tp], tt.want) && got[tp] != tt.want {
			t.Errorf("%s: commit gave %v, want %v", tt.name, got[tp], tt.want)
		}
	}
}

func TestDriver_RebalanceGroupsRebalancesOnlyMatchingGroups(t *testing.T) {
	const partitions = 4
	e := start(t, 2, partitions)
	ctx := waitCtx(t, 30*time.Second)
	l := e.rig.Ledger()
	if _, err := e.rig.Start("a", kfakegroup.ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}
	holding(ctx, t, l, partitions, "a")
	generation := func() int32 {
		for _, g := range e.driver.Export() {
			if g.Group == group && g.State == "Stable" {
				return g.Generation
			}
		}
		return -1
	}
	before := generation()
	var asked []string
	none := e.driver.RebalanceGroups(func(g, assignor string) bool { asked = append(asked, g+"/"+assignor); return false }, "plugin reloaded")
	if len(none) != 0 || len(asked) != 1 || asked[0] != group+"/range" {
		t.Fatalf("no match: rebalanced %v, asked about %v; want none, asked about %s/range", none, asked, group)
	}
	got := e.driver.RebalanceGroups(func(g, assignor string) bool { return assignor == "range" }, "plugin reloaded")
	if len(got) != 1 || got[0] != group {
		t.Fatalf("rebalanced %v, want [%s]", got, group)
	}
	err := kfakegroup.WaitFor(ctx, func() error {
		if g := generation(); g <= before {
			return fmt.Errorf("generation %d, want above %d and Stable", g, before)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	holding(ctx, t, l, partitions, "a")
}

func TestDriver_NewGroupsFirstAssignmentWaitsForItsTopicsMetadata(t *testing.T) {
	const partitions = 6
	e := startWith(t, 1, partitions, true)
	ctx := waitCtx(t, 60*time.Second)
	if _, err := e.rig.Start("a", kfakegroup.ConsumerOptions{}); err != nil {
		t.Fatal(err)
	}
	holding(ctx, t, e.rig.Ledger(), partitions, "a")
	for _, g := range e.driver.Export() {
		if g.Group == group && g.Generation != 1 {
			t.Fatalf("generation %d: the first assignment missed the topic and a second rebalance followed", g.Generation)
		}
	}
}

// TestDriver_AFetchRackReachesItsMemberWithoutARebalance: a Fetch rack the
// driver sees goes to the member that owns the partitions the Fetch read,
// and costs no rebalance (Kafka never rebalances because of a rack), alone
// or in a burst of sightings among other clients'.
func TestDriver_AFetchRackReachesItsMemberWithoutARebalance(t *testing.T) {
	// The handler presents every request as client "kgo" on /127.0.0.1.
	sighting := func(client, rack string) coordinator.FetchRack {
		return coordinator.FetchRack{ClientID: client, Host: "/127.0.0.1", Rack: rack,
			Fetched: []coordinator.FetchedTopic{{Topic: topic, Partitions: []int32{0, 1, 2, 3}}}}
	}
	tests := []struct {
		name string
		// learn has the driver see the client's Fetch rack r1.
		learn func(e *env)
	}{
		{name: "one sighting", learn: func(e *env) {
			e.driver.RecordFetchRack(sighting("kgo", "r1"))
		}},
		{name: "a burst of sightings among others", learn: func(e *env) {
			// As from many new connections at once: merged into few
			// passes; other clients' racks change nothing.
			var wg sync.WaitGroup
			for i := range 20 {
				wg.Go(func() {
					e.driver.RecordFetchRack(sighting(fmt.Sprintf("other-%d", i), "r0"))
					e.driver.RecordFetchRack(sighting("kgo", "r1"))
				})
			}
			wg.Wait()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const partitions = 4
			e := start(t, 2, partitions)
			ctx := waitCtx(t, 30*time.Second)
			l := e.rig.Ledger()
			if _, err := e.rig.Start("a", kfakegroup.ConsumerOptions{}); err != nil {
				t.Fatal(err)
			}
			holding(ctx, t, l, partitions, "a")
			stable := func() (generation int32, rack string, ok bool) {
				g, found := e.driver.ExportGroup(group)
				if !found || g.State != "Stable" || len(g.Members) != 1 {
					return 0, "", false
				}
				return g.Generation, g.Members[0].Rack, true
			}
			before, rack, ok := stable()
			if !ok || rack != "" {
				t.Fatalf("before any Fetch rack: stable %v, rack %q; want a stable member without a rack", ok, rack)
			}

			tt.learn(e)
			err := kfakegroup.WaitFor(ctx, func() error {
				if _, rack, ok := stable(); !ok || rack != "r1" {
					return fmt.Errorf("stable %v, rack %q; want the member in r1", ok, rack)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond)
			if gen, _, ok := stable(); !ok || gen != before {
				t.Errorf("after the rack: stable %v, generation %d, want %d: a rebalance Kafka would not make", ok, gen, before)
			}
			holding(ctx, t, l, partitions, "a")
		})
	}
}

// noPlugins fails every assignment: the persistence test needs none.
type noPlugins struct{}

func (noPlugins) Assign(context.Context, string, *abi.Request) (*abi.Response, error) {
	return nil, fmt.Errorf("no plugins here")
}

// TestDriver_CloseSavesTheLastState: Close hands Persist the state as the
// loop left it, so a clean stop saves what changed since the last
// transition; it saves once, however often Close is called.
func TestDriver_CloseSavesTheLastState(t *testing.T) {
	var saves [][]coordinator.GroupState
	d, err := driver.Start(driver.Config{
		Coordinator: coordinator.Config{Default: coordinator.GroupConfig{InitialRebalanceDelay: -1}},
		Plugins:     noPlugins{},
		Forwarder:   acceptAll{},
		Logger:      testLogger(),
		Persist:     func(s []coordinator.GroupState) { saves = append(saves, s) },
		Restore:     []coordinator.GroupState{{Group: "g", State: "Empty", ProtocolType: "consumer"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	before := len(saves)
	d.Close()
	d.Close()
	if len(saves) != before+1 {
		t.Fatalf("Close saved %d times, want once", len(saves)-before)
	}
	if last := saves[len(saves)-1]; len(last) != 1 || last[0].Group != "g" {
		t.Errorf("Close saved %+v, want group g", last)
	}
}

// overloadedRunner answers the first calls as a plugin host whose queue
// stayed full, then runs the range plugin natively.
type overloadedRunner struct {
	mu      sync.Mutex
	refused int
	calls   []string
}

type overloadErr struct{}

func (overloadErr) Error() string {
	return "plugin \"builtin:range\": overloaded: waited 10s for an instance"
}
func (overloadErr) Reason() string { return "overloaded" }

func (r *overloadedRunner) Assign(_ context.Context, name string, req *abi.Request) (*abi.Response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, name)
	if r.refused < 2 {
		r.refused++
		return nil, overloadErr{}
	}
	return rangeassignor.Assign(req)
}

type countingHooks struct {
	mu                          sync.Mutex
	overloads, calls, fallbacks int
}

func (h *countingHooks) OnPluginOverload(string) { h.mu.Lock(); h.overloads++; h.mu.Unlock() }
func (h *countingHooks) OnPluginCall(string, time.Duration, string) {
	h.mu.Lock()
	h.calls++
	h.mu.Unlock()
}
func (h *countingHooks) OnFallback(string, string) { h.mu.Lock(); h.fallbacks++; h.mu.Unlock() }

// TestDriver_AnOverloadedHostIsNoPluginFailure: a call that never ran for
// want of a plugin instance is counted as an overload, never as a plugin
// call or a fallback, and the group still gets its own assignor's answer.
func TestDriver_AnOverloadedHostIsNoPluginFailure(t *testing.T) {
	runner := &overloadedRunner{}
	hooks := &countingHooks{}
	d, err := driver.Start(driver.Config{
		Coordinator: coordinator.Config{Default: coordinator.GroupConfig{InitialRebalanceDelay: -1, Fallback: "roundrobin"}, Served: coordinator.ServedProtocols{"range": "range"}},
		Plugins:     runner,
		Forwarder:   acceptAll{},
		Logger:      testLogger(),
		Hooks:       []driver.Hook{hooks},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.SetMetadata(metadataOf(4), nil); err != nil {
		t.Fatal(err)
	}
	ctx := waitCtx(t, 10*time.Second)
	m := &rawMember{client: coordinator.Client{ID: "c", Host: "/127.0.0.1"}}
	a, err := m.join(ctx, d, group)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Topics) != 1 || len(a.Topics[0].Partitions) != 4 {
		t.Fatalf("assignment %+v, want the 4 partitions", a.Topics)
	}
	runner.mu.Lock()
	calls := slices.Clone(runner.calls)
	runner.mu.Unlock()
	if !slices.Equal(calls, []string{"range", "range", "range"}) {
		t.Errorf("assignors called %v, want range three times: never the fallback", calls)
	}
	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	if hooks.overloads != 2 || hooks.calls != 1 || hooks.fallbacks != 0 {
		t.Errorf("hooks saw %d overloads, %d plugin calls, %d fallbacks; want 2, 1, 0", hooks.overloads, hooks.calls, hooks.fallbacks)
	}
}

package driver_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/internal/driver"
)

// groupStates records HookGroupState and HookGroupRemoved calls: the latest
// summary of each group, and whether its latest call was a removal.
type groupStates struct {
	mu      sync.Mutex
	last    map[string]coordinator.Summary
	removed map[string]bool
}

func (g *groupStates) OnGroupState(s coordinator.Summary) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.last[s.Group] = s
	delete(g.removed, s.Group)
}

func (g *groupStates) OnGroupRemoved(group string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.last, group)
	g.removed[group] = true
}

// agree checks that the hooks last reported every group as the driver's
// summaries show it, and a removal for every group in gone.
func (g *groupStates) agree(t *testing.T, d *driver.Driver, when string, gone ...string) {
	t.Helper()
	// Overviews runs on the loop, after the step the test's last call
	// made: the hooks of that step have run.
	ovs := d.Overviews()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, o := range ovs {
		if got, ok := g.last[o.Group]; !ok || got != o.Summary {
			t.Errorf("%s: hooks last reported %s as %+v (reported %v), the coordinator has %+v", when, o.Group, got, ok, o.Summary)
		}
	}
	if len(g.last) != len(ovs) {
		t.Errorf("%s: hooks report %d groups, the coordinator holds %d", when, len(g.last), len(ovs))
	}
	for _, group := range gone {
		if !g.removed[group] {
			t.Errorf("%s: no removal reported for %s", when, group)
		}
	}
}

// deleteGroups answers a forwarded DeleteGroups for every group.
type deleteGroups struct{}

func (deleteGroups) Forward(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	r, ok := req.(*kmsg.DeleteGroupsRequest)
	if !ok {
		return nil, fmt.Errorf("unexpected forward of %s", kmsg.NameForKey(req.Key()))
	}
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, g := range r.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = g
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}

// TestDriver_GroupStateHooksFollowEveryStep takes a group through its
// life: created by a KIP-394 first join with no member yet, Stable,
// emptied by its member leaving, and deleted; and a restored group that no
// event names, until it is unloaded. After every step the hooks' latest word on each group is
// the coordinator's summary of it, the one the admin API reads.
func TestDriver_GroupStateHooksFollowEveryStep(t *testing.T) {
	rec := &groupStates{last: map[string]coordinator.Summary{}, removed: map[string]bool{}}
	d, err := driver.Start(driver.Config{
		Coordinator: coordinator.Config{
			Default: coordinator.GroupConfig{InitialRebalanceDelay: -1},
			Served:  coordinator.ServedProtocols{"range": "range"},
		},
		Plugins:   noPlugins{}, // the coordinator's own range stands in
		Forwarder: deleteGroups{},
		Logger:    testLogger(),
		Hooks:     []driver.Hook{rec},
		Restore:   []coordinator.GroupState{{Group: "restored", State: "Empty", Generation: 7, ProtocolType: "consumer"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rec.agree(t, d, "restored")
	md := &coordinator.Metadata{
		Brokers: []coordinator.Broker{{ID: 0}},
		Topics:  map[string]coordinator.TopicMetadata{topic: {Partitions: []coordinator.PartitionMetadata{{Replicas: []int32{0}}, {Replicas: []int32{0}}}}},
	}
	if err := d.SetMetadata(md, []string{topic}); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := coordinator.Client{ID: "c", Host: "/127.0.0.1"}
	do := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := d.Handle(ctx, client, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType = 9, group, "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 10_000, 10_000
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{topic}
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
	first := do(join).(*kmsg.JoinGroupResponse)
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("first join: %v, want MEMBER_ID_REQUIRED", kerr.ErrorForCode(first.ErrorCode))
	}
	rec.agree(t, d, "created by a first join")

	join.MemberID = first.MemberID
	joined := do(join).(*kmsg.JoinGroupResponse)
	if joined.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(joined.ErrorCode))
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.MemberID, sync.Generation = 5, group, joined.MemberID, joined.Generation
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	if r := do(sync).(*kmsg.SyncGroupResponse); r.ErrorCode != 0 {
		t.Fatalf("sync: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	rec.agree(t, d, "Stable")

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 5, group
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = joined.MemberID
	leave.Members = append(leave.Members, lm)
	do(leave)
	for _, o := range d.Overviews() {
		if o.Group == group && (o.State != "Empty" || o.Members != 0) {
			t.Fatalf("after the leave the group is %s with %d members, want Empty with none", o.State, o.Members)
		}
	}
	rec.agree(t, d, "Empty")

	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version, del.Groups = 2, []string{group}
	do(del)
	rec.agree(t, d, "deleted", group)

	// A group given up to another gateway goes from the hooks too.
	if err := d.Unload([]string{"restored"}); err != nil {
		t.Fatal(err)
	}
	rec.agree(t, d, "unloaded", "restored")
}

// TestDriver_LoadTakesAGroupOverWithItsGenerationAndAssignment moves a
// stable group from one driver to another the way a gateway cluster moves
// it: the first exports and unloads it, the second loads what was
// exported. Its members heartbeat and commit at the new driver with the
// generation they had, with no rebalance; loading a group the driver holds
// is refused and changes nothing.
func TestDriver_LoadTakesAGroupOverWithItsGenerationAndAssignment(t *testing.T) {
	from, to := nativeRangeDriver(t, 6), nativeRangeDriver(t, 6)
	ms := stableGroup(t, from, group, 3)
	state, ok := from.ExportGroup(group)
	if !ok {
		t.Fatal("the first driver does not hold the group")
	}
	if err := from.Unload([]string{group}); err != nil {
		t.Fatal(err)
	}
	if err := to.Load([]coordinator.GroupState{state}); err != nil {
		t.Fatal(err)
	}
	ctx := waitCtx(t, 10*time.Second)
	for i, m := range ms {
		code, err := m.heartbeat(ctx, to, group)
		if err != nil || code != 0 {
			t.Fatalf("member %d's heartbeat at generation %d after the move: %v, %v; want no error", i, m.generation, err, kerr.ErrorForCode(code))
		}
		a := kmsg.ConsumerMemberAssignment{Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: []int32{int32(i)}}}}
		if code, err := m.commit(ctx, to, group, a); err != nil || code != 0 {
			t.Fatalf("member %d's commit after the move: %v, %v; want it accepted", i, err, kerr.ErrorForCode(code))
		}
	}
	again := state
	again.Generation++
	if err := to.Load([]coordinator.GroupState{again}); err == nil {
		t.Fatal("loading a group the driver holds succeeded")
	}
	if got, _ := to.ExportGroup(group); got.Generation != state.Generation {
		t.Fatalf("after the refused load the group is at generation %d, want %d", got.Generation, state.Generation)
	}
}

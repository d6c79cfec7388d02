package driver_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/internal/driver"
)

// refusals is what a gateway cluster's Refuse hook answers: the code set
// for a group, 0 for the others.
type refusals struct {
	mu    sync.Mutex
	codes map[string]int16
}

func (r *refusals) set(group string, code int16) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.codes[group] = code
}

func (r *refusals) refuse(group string) int16 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.codes[group]
}

// TestDriver_ARefusedGroupIsAnsweredWithTheRefusalNotByTheCoordinator: a
// request that passed the gateway's ownership check just before its
// group's shard was given up (and the group unloaded) reaches the driver
// after the unload. The coordinator, which no longer holds the group,
// would answer UNKNOWN_MEMBER_ID, and the member would drop its id and
// rejoin: a rebalance. The driver asks Refuse on its own goroutine, where
// the unload is ordered, and answers the refusal instead; nothing of the
// group reaches the coordinator or the upstream.
func TestDriver_ARefusedGroupIsAnsweredWithTheRefusalNotByTheCoordinator(t *testing.T) {
	refused := &refusals{codes: map[string]int16{}}
	fwd := &countingForwarder{}
	d, err := driver.Start(driver.Config{
		Coordinator: coordinator.Config{Default: coordinator.GroupConfig{InitialRebalanceDelay: -1}, Served: coordinator.ServedProtocols{"range": "range"}},
		Plugins:     nativeRange{},
		Forwarder:   fwd,
		Logger:      testLogger(),
		Refuse:      refused.refuse,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	if err := d.SetMetadata(metadataOf(4), nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m := stableGroup(t, d, group, 1)[0]
	assigned := kmsg.ConsumerMemberAssignment{Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: []int32{0}}}}
	if code, err := m.commit(ctx, d, group, assigned); err != nil || code != 0 {
		t.Fatalf("a commit while served: %v, code %d", err, code)
	}
	commits := fwd.count()

	for _, code := range []int16{kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code} {
		refused.set(group, code)
		if err := d.Unload([]string{group}); err != nil {
			t.Fatal(err)
		}
		if got, err := m.heartbeat(ctx, d, group); err != nil || got != code {
			t.Fatalf("a heartbeat of an unloaded, refused group: %v, code %d; want %d", err, got, code)
		}
		if got, err := m.commit(ctx, d, group, assigned); err != nil || got != code {
			t.Fatalf("a commit of an unloaded, refused group: %v, code %d; want %d", err, got, code)
		}
		join := kmsg.NewPtrJoinGroupRequest()
		join.SetVersion(5)
		join.Group, join.MemberID, join.ProtocolType = group, m.id, "consumer"
		join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30000, 30000
		join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: (&kmsg.ConsumerMemberMetadata{Topics: []string{topic}}).AppendTo(nil)}}
		resp, err := d.Handle(ctx, m.client, join)
		if err != nil || resp.(*kmsg.JoinGroupResponse).ErrorCode != code {
			t.Fatalf("a join of a refused group: %+v, %v; want code %d", resp, err, code)
		}
		if slices.Contains(d.Groups(), group) {
			t.Fatal("a refused join made the group in the coordinator")
		}
	}
	if n := fwd.count(); n != commits {
		t.Fatalf("%d refused commits went upstream", n-commits)
	}

	// Served again but not loaded: the coordinator answers, as it does any
	// group it does not hold.
	refused.set(group, 0)
	if got, err := m.heartbeat(ctx, d, group); err != nil || got != kerr.UnknownMemberID.Code {
		t.Fatalf("a heartbeat of a served group the coordinator does not hold: %v, code %d; want UNKNOWN_MEMBER_ID", err, got)
	}
}

package driver_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/internal/driver"
)

// manualSaver records saves and completes them when the test says.
type manualSaver struct {
	mu    sync.Mutex
	saves []manualSave
	auto  bool // complete every save at once, successfully
}

type manualSave struct {
	group string
	state *coordinator.GroupState
	done  func(error)
}

func (s *manualSaver) Save(group string, state *coordinator.GroupState, done func(error)) {
	s.mu.Lock()
	auto := s.auto
	if !auto {
		s.saves = append(s.saves, manualSave{group, state, done})
	}
	s.mu.Unlock()
	if auto {
		done(nil)
	}
}

// take waits for the next save not yet completed.
func (s *manualSaver) take(t *testing.T) manualSave {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.mu.Lock()
		if len(s.saves) > 0 {
			sv := s.saves[0]
			s.saves = s.saves[1:]
			s.mu.Unlock()
			return sv
		}
		s.mu.Unlock()
	}
	t.Fatal("no save came")
	return manualSave{}
}

// countingForwarder answers commits and counts them.
type countingForwarder struct {
	mu sync.Mutex
	n  int
}

func (f *countingForwarder) Forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
	return acceptAll{}.Forward(ctx, req)
}

func (f *countingForwarder) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func saverDriver(t *testing.T, saver driver.Saver, fwd driver.Forwarder) *driver.Driver {
	t.Helper()
	d, err := driver.Start(driver.Config{
		Coordinator: coordinator.Config{Default: coordinator.GroupConfig{InitialRebalanceDelay: -1}, Served: coordinator.ServedProtocols{"range": "range"}},
		Plugins:     nativeRange{},
		Forwarder:   fwd,
		Logger:      testLogger(),
		Saver:       saver,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	if err := d.SetMetadata(metadataOf(4), nil); err != nil {
		t.Fatal(err)
	}
	return d
}

// answer runs fn and returns a channel that closes when it returns.
func answer(fn func()) <-chan struct{} {
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	return done
}

func answered(ch <-chan struct{}, within time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(within):
		return false
	}
}

// TestSaver_AGroupIsAnsweredOnlyOnceSaved: the JoinGroup that makes a
// member waits for the save of the group with that member in it; a
// heartbeat of another group meanwhile does not; and a failed save
// answers what waited NOT_COORDINATOR.
func TestSaver_AGroupIsAnsweredOnlyOnceSaved(t *testing.T) {
	saver := &manualSaver{auto: true}
	d := saverDriver(t, saver, acceptAll{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	other := stableGroup(t, d, "other", 1)[0]

	saver.mu.Lock()
	saver.auto = false
	saver.mu.Unlock()
	m := &rawMember{client: coordinator.Client{ID: "c", Host: "/127.0.0.1"}}
	var joinErr error
	joined := answer(func() { _, joinErr = m.join(ctx, d, group) })
	sv := saver.take(t) // the group created by the KIP-394 first join
	if answered(joined, 50*time.Millisecond) {
		t.Fatal("the first JoinGroup was answered before its group was saved")
	}
	if code, err := other.heartbeat(ctx, d, "other"); err != nil || code != 0 {
		t.Fatalf("another group's heartbeat while this one saves: %v, code %d", err, code)
	}
	sv.done(nil)
	for !answered(joined, 100*time.Millisecond) {
		sv = saver.take(t)
		if sv.group != group {
			t.Fatalf("saved %s", sv.group)
		}
		sv.done(nil)
	}
	if joinErr != nil {
		t.Fatal(joinErr)
	}
	if sv.state == nil || len(sv.state.Members) != 1 || sv.state.State != "Stable" {
		t.Fatalf("the last save before the member's answer holds %+v, want the stable group with it", sv.state)
	}

	// The member leaves; the save of its leaving fails: the gateway lost
	// the group, and the LeaveGroup is answered NOT_COORDINATOR.
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group = 4, group
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = m.id
	leave.Members = append(leave.Members, lm)
	var resp kmsg.Response
	var err error
	left := answer(func() { resp, err = d.Handle(ctx, m.client, leave) })
	saver.take(t).done(errors.New("fenced: another gateway took the shard"))
	if !answered(left, 5*time.Second) {
		t.Fatal("the LeaveGroup was not answered after its save failed")
	}
	if err != nil || resp.(*kmsg.LeaveGroupResponse).ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("LeaveGroup after a failed save: %+v, %v; want NOT_COORDINATOR", resp, err)
	}
}

// TestSaver_ACommitWaitsForItsGroupsSaveAndIsDroppedIfItFails: a commit
// of a group whose save is in flight goes upstream only once it is saved,
// and never when the save fails.
func TestSaver_ACommitWaitsForItsGroupsSaveAndIsDroppedIfItFails(t *testing.T) {
	for _, fail := range []bool{false, true} {
		saver := &manualSaver{auto: true}
		fwd := &countingForwarder{}
		d := saverDriver(t, saver, fwd)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		// One member: the helper's members join one after another, and a
		// second would wait a rebalance timeout for the first to rejoin.
		ms := stableGroup(t, d, group, 1)
		assigned := kmsg.ConsumerMemberAssignment{Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: []int32{0}}}}

		saver.mu.Lock()
		saver.auto = false
		saver.mu.Unlock()
		// A new member joining starts a rebalance: a save is in flight.
		join := kmsg.NewPtrJoinGroupRequest()
		join.SetVersion(5)
		join.Group, join.ProtocolType = group, "consumer"
		join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30000, 30000
		join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: (&kmsg.ConsumerMemberMetadata{Topics: []string{topic}}).AppendTo(nil)}}
		newcomer := coordinator.Client{ID: "n", Host: "/127.0.0.1"}
		first, err := d.Handle(ctx, newcomer, join) // KIP-394: a member id, nothing to save
		if err != nil || first.(*kmsg.JoinGroupResponse).ErrorCode != kerr.MemberIDRequired.Code {
			t.Fatalf("the newcomer's first join: %+v, %v", first, err)
		}
		join.MemberID = first.(*kmsg.JoinGroupResponse).MemberID
		go d.Handle(ctx, newcomer, join)
		sv := saver.take(t)
		var code int16
		committed := answer(func() { code, err = ms[0].commit(ctx, d, group, assigned) })
		if answered(committed, 50*time.Millisecond) || fwd.count() != 0 {
			t.Fatalf("fail %v: the commit went on while its group's save was in flight", fail)
		}
		if fail {
			sv.done(errors.New("fenced"))
		} else {
			sv.done(nil)
		}
		if !answered(committed, 5*time.Second) {
			t.Fatalf("fail %v: the commit was never answered", fail)
		}
		switch {
		case err != nil:
			t.Fatalf("fail %v: %v", fail, err)
		case fail && (code != kerr.NotCoordinator.Code || fwd.count() != 0):
			t.Errorf("after a failed save: code %v, %d forwards; want NOT_COORDINATOR and none", kerr.ErrorForCode(code), fwd.count())
		case !fail && (code != 0 || fwd.count() != 1):
			t.Errorf("after the save: code %v, %d forwards; want the commit forwarded", kerr.ErrorForCode(code), fwd.count())
		}
		cancel()
	}
}

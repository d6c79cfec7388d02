package coordinator

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRetention_EmptyGroupIsForgottenWhenItEnds(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}, EmptyGroupRetention: time.Hour})
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	settle(h, a)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group, leave.MemberID = 1, "g", a.memberID
	h.do(a.client, leave)
	if st := h.c.groups["g"].state; st != Empty {
		t.Fatalf("after the last member left: %v, want Empty", st)
	}
	h.advance(59 * time.Minute)
	if _, ok := h.c.groups["g"]; !ok {
		t.Fatal("the Empty group was forgotten before its retention ended")
	}
	h.advance(2 * time.Minute)
	if _, ok := h.c.groups["g"]; ok {
		t.Fatal("the Empty group is still held after its retention ended")
	}
	if ids := h.c.Groups(); len(ids) != 0 {
		t.Errorf("groups %v, want none", ids)
	}
}

func TestRetention_AJoinRestartsTheClock(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}, EmptyGroupRetention: time.Hour})
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	settle(h, a)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group, leave.MemberID = 1, "g", a.memberID
	h.do(a.client, leave)
	h.advance(30 * time.Minute)
	// b joins and then goes silent: its session ends 10 s later and the
	// group is Empty again, with a fresh hour of retention.
	b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
	settle(h, b)
	h.advance(45 * time.Minute) // past the first hour, within the second
	if _, ok := h.c.groups["g"]; !ok {
		t.Fatal("the group was forgotten by the retention that b's join interrupted")
	}
	h.advance(20 * time.Minute)
	if _, ok := h.c.groups["g"]; ok {
		t.Fatal("the group outlived the retention that began when b's session ended")
	}
}

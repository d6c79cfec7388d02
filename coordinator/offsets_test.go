package coordinator

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func commitReq(version int16, group, member string, gen int32) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.MemberID, r.Generation = version, group, member, gen
	r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 5}}}}
	return r
}

// commitOutcome sends a commit and returns its error code, or -1 when it
// was forwarded; a forwarded commit must carry no group identity.
func commitOutcome(t *testing.T, h *harness, r *kmsg.OffsetCommitRequest) int16 {
	t.Helper()
	id := h.send(Client{ID: "x"}, r)
	if f, ok := h.forwards[id]; ok {
		fr := f.Request.(*kmsg.OffsetCommitRequest)
		if fr.Generation != -1 || fr.MemberID != "" || fr.InstanceID != nil || fr.Group != r.Group {
			t.Fatalf("forwarded commit keeps group identity: %+v", fr)
		}
		if r.Generation == -1 && r.MemberID == "" {
			return -1
		}
		return -1
	}
	resp, ok := h.take(id)
	if !ok {
		t.Fatal("commit neither answered nor forwarded")
	}
	return resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
}

func TestOffsetCommit_Fencing(t *testing.T) {
	const forwarded = -1
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.autoJobs = false
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})

	// Before any member: generation -1 with no member is an admin commit.
	if got := commitOutcome(t, h, commitReq(9, "fresh", "", -1)); got != forwarded {
		t.Fatalf("admin commit to an unknown group: %v", got)
	}
	if got := commitOutcome(t, h, commitReq(9, "fresh", "m", 3)); got != kerr.GroupIDNotFound.Code {
		t.Fatalf("v9 commit to an unknown group: %v", got)
	}
	if got := commitOutcome(t, h, commitReq(8, "fresh", "m", 3)); got != kerr.IllegalGeneration.Code {
		t.Fatalf("v8 commit to an unknown group: %v", got)
	}

	a.join()
	h.advance(0)
	a.poll() // generation 1, CompletingRebalance: the job has not run
	if got := commitOutcome(t, h, commitReq(9, "g", a.memberID, 1)); got != kerr.RebalanceInProgress.Code {
		t.Fatalf("commit in CompletingRebalance: %v", kerr.ErrorForCode(got))
	}
	h.runJobs()
	a.sync()
	tests := []struct {
		name   string
		member string
		gen    int32
		want   int16
	}{
		{"current generation in Stable", a.memberID, 1, forwarded},
		{"stale generation", a.memberID, 0, kerr.IllegalGeneration.Code},
		{"unknown member", "nobody", 1, kerr.UnknownMemberID.Code},
		{"admin commit while the group has members", "", -1, kerr.UnknownMemberID.Code},
	}
	for _, tt := range tests {
		if got := commitOutcome(t, h, commitReq(9, "g", tt.member, tt.gen)); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	// PreparingRebalance: eager members commit in their revoke callback with
	// the pre-bump generation, and that must be accepted.
	b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
	b.join()
	if st := h.c.groups["g"].state; st != PreparingRebalance {
		t.Fatalf("state %v", st)
	}
	if got := commitOutcome(t, h, commitReq(9, "g", a.memberID, 1)); got != forwarded {
		t.Fatalf("commit with the current generation in PreparingRebalance: %v", kerr.ErrorForCode(got))
	}
	// Once everyone is gone, admin commits pass again.
	a.leave()
	b.leave()
	h.advance(0)
	if st := h.c.groups["g"].state; st != Empty {
		t.Fatalf("state %v after everyone left", st)
	}
	if got := commitOutcome(t, h, commitReq(9, "g", "", -1)); got != forwarded {
		t.Fatalf("admin commit to an Empty group: %v", got)
	}
}

func TestTxnOffsetCommit_FencesMembersButNotState(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.autoJobs = false
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	a.join()
	h.advance(0)
	a.poll()
	txn := func(member string, gen int32) kmsg.Request {
		r := kmsg.NewPtrTxnOffsetCommitRequest()
		r.Version, r.Group, r.MemberID, r.Generation, r.TransactionalID = 3, "g", member, gen, "tx"
		r.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0}}}}
		return r
	}
	// CompletingRebalance does not refuse transactional commits.
	if id := h.send(Client{}, txn(a.memberID, 1)); h.forwards[id].Request == nil {
		t.Fatal("txn commit with the current generation was not forwarded")
	}
	id := h.send(Client{}, txn(a.memberID, 0))
	resp, ok := h.take(id)
	if !ok || resp.(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("stale txn commit: %v %+v", ok, resp)
	}
}

func TestDeleteGroups_OnlyEmptyGroups(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "busy", []string{"range"}, []string{"t"})
	settle(h, a)
	e := newSim(h, "e", "idle", []string{"range"}, []string{"t"})
	settle(h, e)
	e.leave()
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Version, req.Groups = 2, []string{"busy", "idle", "elsewhere"}
	id := h.send(Client{}, req)
	f, ok := h.forwards[id]
	if !ok {
		t.Fatal("not forwarded")
	}
	if got := f.Request.(*kmsg.DeleteGroupsRequest).Groups; len(got) != 2 || got[0] != "idle" || got[1] != "elsewhere" {
		t.Fatalf("forwarded groups %v", got)
	}
	up := kmsg.NewPtrDeleteGroupsResponse()
	up.Groups = []kmsg.DeleteGroupsResponseGroup{{Group: "idle"}, {Group: "elsewhere"}}
	final := f.Complete(up).(*kmsg.DeleteGroupsResponse)
	codes := map[string]int16{}
	for _, g := range final.Groups {
		codes[g.Group] = g.ErrorCode
	}
	if codes["busy"] != kerr.NonEmptyGroup.Code || codes["idle"] != 0 || len(codes) != 3 {
		t.Fatalf("codes %v", codes)
	}
	if h.c.groups["idle"] != nil || h.c.groups["busy"] == nil {
		t.Fatal("wrong groups deleted locally")
	}
	// The driver learns of the deletion as of any end of a group: it
	// saves the state and drops the group's metrics on it.
	dead := 0
	for _, e := range h.events {
		if e.Kind == EventStateChanged && e.State == Dead {
			if e.Group != "idle" {
				t.Errorf("group %s reported Dead", e.Group)
			}
			dead++
		}
	}
	if dead != 1 {
		t.Errorf("%d Dead events for one deleted group", dead)
	}
}

func TestOffsetDelete_RefusesSubscribedTopics(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4, "old": 1}))
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	settle(h, a)
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	req.Topics = []kmsg.OffsetDeleteRequestTopic{
		{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
		{Topic: "old", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}},
	}
	id := h.send(Client{}, req)
	f, ok := h.forwards[id]
	if !ok {
		t.Fatal("not forwarded")
	}
	if got := f.Request.(*kmsg.OffsetDeleteRequest).Topics; len(got) != 1 || got[0].Topic != "old" {
		t.Fatalf("forwarded %v", got)
	}
	up := kmsg.NewPtrOffsetDeleteResponse()
	up.Topics = []kmsg.OffsetDeleteResponseTopic{{Topic: "old", Partitions: []kmsg.OffsetDeleteResponseTopicPartition{{Partition: 0}}}}
	final := f.Complete(up).(*kmsg.OffsetDeleteResponse)
	for _, tp := range final.Topics {
		want := int16(0)
		if tp.Topic == "t" {
			want = kerr.GroupSubscribedToTopic.Code
		}
		if tp.Partitions[0].ErrorCode != want {
			t.Errorf("topic %s: %v", tp.Topic, tp.Partitions[0].ErrorCode)
		}
	}
	if len(final.Topics) != 2 {
		t.Fatalf("topics %v", final.Topics)
	}
}

package coordinator

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func rangeProto(topics ...string) proto {
	return proto{"range", sub{version: 3, topics: topics, gen: -1}.bytes()}
}

func TestJoin_ServerSideGroupGetsLeaderThatIsNoMemberAndAssignmentInSync(t *testing.T) {
	h := newHarness(t, Config{})
	h.setMetadata(meta(map[string]int{"t0": 3, "t1": 3}))
	c0, c1 := Client{ID: "c0"}, Client{ID: "c1"}

	// KIP-394: an unknown dynamic member is given an id and sent back.
	r := h.do(c0, joinReq(9, "g", "", "", rangeProto("t0", "t1"))).(*kmsg.JoinGroupResponse)
	if r.ErrorCode != kerr.MemberIDRequired.Code || !strings.HasPrefix(r.MemberID, "c0-") || len(r.MemberID) != len("c0-")+36 {
		t.Fatalf("first join: code %d member %q, want MEMBER_ID_REQUIRED and c0-<uuid>", r.ErrorCode, r.MemberID)
	}
	id0 := r.MemberID
	j0 := h.send(c0, joinReq(9, "g", id0, "", rangeProto("t0", "t1")))
	r1 := h.do(c1, joinReq(9, "g", "", "", rangeProto("t0", "t1"))).(*kmsg.JoinGroupResponse)
	j1 := h.send(c1, joinReq(9, "g", r1.MemberID, "", rangeProto("t0", "t1")))
	if _, ok := h.take(j0); ok {
		t.Fatal("join answered before the initial rebalance delay")
	}
	// The second arrival extends the delay once more.
	h.advance(DefaultInitialRebalanceDelay)
	if _, ok := h.replies[j0]; ok {
		t.Fatal("join answered although a member arrived during the delay")
	}
	h.advance(DefaultInitialRebalanceDelay)
	var gen int32
	for _, j := range []RequestID{j0, j1} {
		resp, ok := h.take(j)
		if !ok {
			t.Fatal("join not answered after the initial delay")
		}
		jr := resp.(*kmsg.JoinGroupResponse)
		if jr.ErrorCode != 0 || jr.LeaderID != ServerLeaderID || jr.LeaderID == jr.MemberID || len(jr.Members) != 0 {
			t.Fatalf("join answer: code %d leader %q members %d", jr.ErrorCode, jr.LeaderID, len(jr.Members))
		}
		if *jr.Protocol != "range" || *jr.ProtocolType != "consumer" {
			t.Fatalf("protocol %q type %q", *jr.Protocol, *jr.ProtocolType)
		}
		gen = jr.Generation
	}
	if gen != 1 {
		t.Fatalf("generation %d, want 1", gen)
	}
	// The assignment was computed as the join phase ended, but the group
	// stays in CompletingRebalance until its leader (c0, the first to
	// join) syncs, as in Kafka; c1's SyncGroup waits for c0's, and then
	// both are answered.
	if st := h.c.groups["g"].state; st != CompletingRebalance {
		t.Fatalf("state %v before any SyncGroup, want CompletingRebalance", st)
	}
	if l := h.c.groups["g"].leader; l != id0 {
		t.Fatalf("leader %q, want the first member %q", l, id0)
	}
	s1 := h.send(c1, syncReq(5, "g", r1.MemberID, gen))
	if _, ok := h.take(s1); ok {
		t.Fatal("a SyncGroup was answered before the leader's")
	}
	a0 := decodeAssignment(t, h.do(c0, syncReq(5, "g", id0, gen)).(*kmsg.SyncGroupResponse).MemberAssignment)
	resp, ok := h.take(s1)
	if !ok || h.c.groups["g"].state != Stable {
		t.Fatalf("after the leader's SyncGroup: other answered %v, state %v", ok, h.c.groups["g"].state)
	}
	a1 := decodeAssignment(t, resp.(*kmsg.SyncGroupResponse).MemberAssignment)
	// Range over two members: whoever sorts first gets partitions 0 and 1.
	first, second := a0, a1
	if r1.MemberID < id0 {
		first, second = a1, a0
	}
	if len(first["t0"]) != 2 || len(first["t1"]) != 2 || len(second["t0"]) != 1 || len(second["t1"]) != 1 {
		t.Fatalf("assignments %v and %v are not Kafka's range", first, second)
	}
}

func TestSync_WaitsForTheAssignmentAndIsAnsweredWhenItIsReady(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.autoJobs = false
	h.setMetadata(meta(map[string]int{"t": 4}))
	c := Client{ID: "c"}
	r := h.do(c, joinReq(9, "g", "", "", rangeProto("t"))).(*kmsg.JoinGroupResponse)
	j := h.send(c, joinReq(9, "g", r.MemberID, "", rangeProto("t")))
	h.advance(0)
	jr, ok := h.take(j)
	if !ok {
		t.Fatal("join not answered")
	}
	gen := jr.(*kmsg.JoinGroupResponse).Generation
	s := h.send(c, syncReq(5, "g", r.MemberID, gen))
	if _, ok := h.take(s); ok {
		t.Fatal("sync answered before the assignment was ready")
	}
	if len(h.jobs) != 1 || h.jobs[0].Assignor != "range" || h.jobs[0].Request.Generation != gen {
		t.Fatalf("jobs %+v", h.jobs)
	}
	// Heartbeats keep working while the plugin runs.
	if code := h.do(c, hbReq("g", r.MemberID, gen)).(*kmsg.HeartbeatResponse).ErrorCode; code != 0 {
		t.Fatalf("heartbeat during assignment: %d", code)
	}
	h.runJobs()
	resp, ok := h.take(s)
	if !ok {
		t.Fatal("sync not answered once the assignment was ready")
	}
	if got := decodeAssignment(t, resp.(*kmsg.SyncGroupResponse).MemberAssignment); len(got["t"]) != 4 {
		t.Fatalf("assignment %v", got)
	}
}

func TestJoin_PhaseCompletesAsSoonAsEveryMemberRejoined(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
	a.join()
	h.advance(0)
	a.poll()
	a.sync()
	if a.phase != stable {
		t.Fatalf("a phase %v", a.phase)
	}
	b.join() // starts a rebalance; a must rejoin
	a.heartbeat()
	if a.phase != idle {
		t.Fatal("a was not told to rejoin")
	}
	a.join()
	// No time passes: the join phase ends because everyone is in, not
	// because the 60s rebalance timeout ran out.
	a.poll()
	b.poll()
	if a.phase != joined || b.phase != joined || a.generation != 2 {
		t.Fatalf("phases %v %v generation %d", a.phase, b.phase, a.generation)
	}
}

func TestJoin_InitialDelayIsExtendedByArrivalsUpToTheRebalanceTimeout(t *testing.T) {
	h := newHarness(t, Config{})
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	a.join()
	h.advance(2 * time.Second)
	b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
	b.join()
	h.advance(1 * time.Second) // the first delay ends, but b arrived in it
	a.poll()
	if a.phase != joining {
		t.Fatal("join completed although a member arrived during the delay")
	}
	h.advance(3 * time.Second)
	a.poll()
	b.poll()
	if a.phase != joined || b.phase != joined {
		t.Fatalf("join did not complete after the extended delay: %v %v", a.phase, b.phase)
	}
}

func TestJoin_Errors(t *testing.T) {
	badMeta := proto{"range", []byte{0, 3, 0, 0}}
	tests := []struct {
		name string
		req  func() *kmsg.JoinGroupRequest
		want int16
	}{
		{"empty group id", func() *kmsg.JoinGroupRequest { return joinReq(9, "", "", "", rangeProto("t")) }, kerr.InvalidGroupID.Code},
		{"session timeout below minimum", func() *kmsg.JoinGroupRequest {
			r := joinReq(9, "g", "", "", rangeProto("t"))
			r.SessionTimeoutMillis = 1000
			return r
		}, kerr.InvalidSessionTimeout.Code},
		{"session timeout above maximum", func() *kmsg.JoinGroupRequest {
			r := joinReq(9, "g", "", "", rangeProto("t"))
			r.SessionTimeoutMillis = 31 * 60 * 1000
			return r
		}, kerr.InvalidSessionTimeout.Code},
		{"member id for a group that does not exist", func() *kmsg.JoinGroupRequest { return joinReq(9, "new", "x-1", "", rangeProto("t")) }, kerr.UnknownMemberID.Code},
		{"no protocols", func() *kmsg.JoinGroupRequest { return joinReq(9, "g", "", "") }, kerr.InconsistentGroupProtocol.Code},
		{"empty protocol type", func() *kmsg.JoinGroupRequest {
			r := joinReq(9, "g", "", "", rangeProto("t"))
			r.ProtocolType = ""
			return r
		}, kerr.InconsistentGroupProtocol.Code},
		{"undecodable subscription for a served protocol", func() *kmsg.JoinGroupRequest { return joinReq(9, "g", "", "", badMeta) }, kerr.InconsistentGroupProtocol.Code},
		{"empty subscription for a served protocol", func() *kmsg.JoinGroupRequest { return joinReq(9, "g", "", "", proto{"range", nil}) }, kerr.InconsistentGroupProtocol.Code},
		{"oversized metadata", func() *kmsg.JoinGroupRequest {
			return joinReq(9, "g", "", "", proto{"stream", make([]byte, DefaultMaxProtocolMetadataBytes+1)})
		}, kerr.InconsistentGroupProtocol.Code},
		{"version above supported", func() *kmsg.JoinGroupRequest {
			r := joinReq(9, "g", "", "", rangeProto("t"))
			r.Version = 10
			return r
		}, kerr.UnsupportedVersion.Code},
		{"undecodable metadata of a protocol no plugin serves is opaque", func() *kmsg.JoinGroupRequest {
			return joinReq(9, "g", "", "", proto{"stream", []byte{9, 9, 9}})
		}, kerr.MemberIDRequired.Code},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			resp := h.do(Client{ID: "c"}, tt.req()).(*kmsg.JoinGroupResponse)
			if resp.ErrorCode != tt.want {
				t.Fatalf("code %v, want %v", kerr.ErrorForCode(resp.ErrorCode), kerr.ErrorForCode(tt.want))
			}
			if tt.want != kerr.MemberIDRequired.Code && len(h.c.groups) != 0 {
				t.Fatalf("a refused join left group state behind: %v", h.c.Groups())
			}
			// A group the join left behind, even without a member yet, is
			// announced, so that its observers know it exists; a refused
			// join announces none.
			created := 0
			for _, e := range h.events {
				if e.Kind == EventGroupCreated && e.Group == "g" {
					created++
				}
			}
			if want := len(h.c.groups); created != want {
				t.Errorf("%d EventGroupCreated, want %d", created, want)
			}
		})
	}
}

func TestJoin_ProtocolMismatchWithTheGroupIsInconsistent(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	a.join()
	tests := []struct {
		name string
		req  *kmsg.JoinGroupRequest
	}{
		{"no common protocol", joinReq(9, "g", "", "", proto{"roundrobin", sub{version: 1, topics: []string{"t"}}.bytes()})},
		{"other protocol type", func() *kmsg.JoinGroupRequest {
			r := joinReq(9, "g", "", "", rangeProto("t"))
			r.ProtocolType = "connect"
			return r
		}()},
	}
	for _, tt := range tests {
		resp := h.do(Client{ID: "b"}, tt.req).(*kmsg.JoinGroupResponse)
		if resp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
			t.Errorf("%s: code %v", tt.name, kerr.ErrorForCode(resp.ErrorCode))
		}
	}
	// The group is unharmed: a completes its join.
	h.advance(0)
	a.poll()
	if a.phase != joined {
		t.Fatalf("a phase %v after refused joins", a.phase)
	}
}

func TestJoin_GroupMaxSize(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1, MaxSize: 2}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	var sims []*simClient
	for _, n := range []string{"a", "b"} {
		s := newSim(h, n, "g", []string{"range"}, []string{"t"})
		s.join()
		sims = append(sims, s)
	}
	h.advance(0)
	for _, s := range sims {
		s.poll()
		s.sync()
	}
	// Kafka refuses before handing out a KIP-394 id.
	r := h.do(Client{ID: "c"}, joinReq(4, "g", "", "", rangeProto("t"))).(*kmsg.JoinGroupResponse)
	if r.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("third member: %v, want GROUP_MAX_SIZE_REACHED", kerr.ErrorForCode(r.ErrorCode))
	}
	if g := h.c.groups["g"]; len(g.members) != 2 || g.state != Stable {
		t.Fatalf("group changed: %d members, %v", len(g.members), g.state)
	}
}

func TestJoin_PendingMemberThatNeverReturnsIsDroppedAfterItsSessionTimeout(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	a.join()
	h.advance(0)
	a.poll()
	a.sync()
	b := h.do(Client{ID: "b"}, joinReq(9, "g", "", "", rangeProto("t"))).(*kmsg.JoinGroupResponse)
	if h.c.groups["g"].pending.len() != 1 {
		t.Fatal("no pending member")
	}
	h.advance(10 * time.Second)
	if h.c.groups["g"].pending.len() != 0 {
		t.Fatal("pending member outlived its session timeout")
	}
	r := h.do(Client{ID: "b"}, joinReq(9, "g", b.MemberID, "", rangeProto("t"))).(*kmsg.JoinGroupResponse)
	if r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("expired pending id: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

func TestJoin_OldVersionsJoinWithoutMemberIDRequired(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	j := h.send(Client{ID: "old"}, joinReq(3, "g", "", "", rangeProto("t")))
	h.advance(0)
	resp, ok := h.take(j)
	if !ok {
		t.Fatal("v3 join not answered")
	}
	if r := resp.(*kmsg.JoinGroupResponse); r.ErrorCode != 0 || !strings.HasPrefix(r.MemberID, "old-") || r.Generation != 1 {
		t.Fatalf("v3 join: %v member %q gen %d", kerr.ErrorForCode(r.ErrorCode), r.MemberID, r.Generation)
	}
}

// TestJoin_AMemberKeepsItsMetadataNotItsRequest: a member keeps a copy of
// its protocol metadata that holds nothing else of the request it came in
// (the proxy's frame, here a large buffer later overwritten), and members
// that joined with the same bytes share one copy.
func TestJoin_AMemberKeepsItsMetadataNotItsRequest(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.autoJobs = false
	h.setMetadata(meta(map[string]int{"t": 4}))
	want := rangeProto("t").meta
	var frames [][]byte
	inFrame := func() proto {
		frame := make([]byte, 64<<10)
		n := copy(frame[100:], want)
		frames = append(frames, frame)
		return proto{"range", frame[100 : 100+n]}
	}
	// Straight to the coordinator, as the driver hands it what the proxy
	// decoded: the harness would encode and decode it again.
	var next RequestID = 1 << 20
	handle := func(c string, r *kmsg.JoinGroupRequest) RequestID {
		next++
		h.absorb(h.c.Handle(h.now, next, Client{ID: c}, r))
		return next
	}
	var ids []string
	for _, c := range []string{"a", "b", "c"} {
		resp, ok := h.take(handle(c, joinReq(9, "g", "", "", inFrame())))
		if !ok {
			t.Fatal("no answer to a first JoinGroup")
		}
		id := resp.(*kmsg.JoinGroupResponse).MemberID
		handle(c, joinReq(9, "g", id, "", inFrame()))
		ids = append(ids, id)
	}
	for _, f := range frames {
		for i := range f {
			f[i] = 0xff
		}
	}
	g := h.c.groups["g"]
	var first []byte
	for _, id := range ids {
		m := g.members[id]
		if m == nil || len(m.protocols) != 1 {
			t.Fatalf("member %s: %+v", id, m)
		}
		kept := m.protocols[0].Metadata
		if !bytes.Equal(kept, want) {
			t.Fatalf("member %s keeps metadata %x, want %x: it shares its request's buffer", id, kept, want)
		}
		if cap(kept) > 2*len(want) {
			t.Errorf("member %s keeps %d bytes for %d of metadata", id, cap(kept), len(want))
		}
		if first == nil {
			first = kept
		} else if &first[0] != &kept[0] {
			t.Errorf("member %s keeps its own copy of metadata another member sent the same", id)
		}
	}
}

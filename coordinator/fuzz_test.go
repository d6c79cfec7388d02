package coordinator

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzJoinGroupMetadata feeds arbitrary subscription bytes to a group with
// a Stable member: the newcomer is admitted or refused with
// INCONSISTENT_GROUP_PROTOCOL, and the group ends with valid assignments
// either way.
func FuzzJoinGroupMetadata(f *testing.F) {
	f.Add(sub{version: 3, topics: []string{"t"}, gen: -1}.bytes())
	f.Add(sub{version: 1, topics: []string{"t", "t"}, owned: map[string][]int32{"t": {9, -1, 0}}}.bytes())
	f.Add(sub{version: 2, topics: []string{"missing"}, owned: map[string][]int32{"t": {0}}, gen: 1 << 30}.bytes())
	f.Add([]byte{0, 3, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x80, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, metadata []byte) {
		h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
		h.setMetadata(meta(map[string]int{"t": 4}))
		a := newSim(h, "a", "g", []string{"cooperative-sticky"}, []string{"t"})
		settle(h, a)
		r := h.do(Client{ID: "fuzz"}, joinReq(9, "g", "", "", proto{"cooperative-sticky", metadata})).(*kmsg.JoinGroupResponse)
		if r.ErrorCode == kerr.MemberIDRequired.Code {
			h.send(Client{ID: "fuzz"}, joinReq(9, "g", r.MemberID, "", proto{"cooperative-sticky", metadata}))
		} else if r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
			t.Fatalf("join: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		settle(h, a)
		h.advance(0)
		g := h.c.groups["g"]
		if g.state == Stable {
			given := map[string]bool{}
			for _, m := range g.members {
				a := decodeAssignmentErr(m.assignment)
				if a == nil {
					t.Fatalf("member %s: no valid assignment", m.id)
				}
				for tp, ps := range a {
					for _, p := range ps {
						k := fmt.Sprintf("%s-%d", tp, p)
						if given[k] || tp != "t" || p < 0 || p > 3 {
							t.Fatalf("bad or repeated partition %s-%d", tp, p)
						}
						given[k] = true
					}
				}
			}
		}
	})
}

// FuzzDecodeSubscription checks that the decoder never panics and never
// accepts a negative version or partition.
func FuzzDecodeSubscription(f *testing.F) {
	f.Add(sub{version: 3, topics: []string{"t"}, owned: map[string][]int32{"t": {1}}, gen: 4, rack: "r"}.bytes())
	f.Add([]byte{0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSubscription(b)
		if err != nil {
			return
		}
		if s.Version < 0 {
			t.Fatalf("version %d accepted", s.Version)
		}
		for _, o := range s.OwnedPartitions {
			for _, p := range o.Partitions {
				if p < 0 {
					t.Fatalf("partition %d accepted", p)
				}
			}
		}
	})
}

// FuzzRestore feeds arbitrary state records, as a state file holds them, to
// Restore: it accepts them or refuses with an error, and never panics. What
// it accepts works: timers fire, a newcomer can join every restored group,
// the coordinator's bookkeeping agrees with its groups after every call,
// and the state exports and restores again to the same records.
func FuzzRestore(f *testing.F) {
	h := newHarness(f, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"cooperative-sticky"}, []string{"t"})
	b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
	b.instance = "static-b"
	settle(h, a)
	good, err := json.Marshal(h.c.Export())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`[{"Group":"g","State":"Stable","Generation":-5,"Members":[{"MemberID":"m","SessionTimeout":1,"Protocols":[{"Name":"range","Metadata":"AAA="}],"Assigned":{"t":[-1,99]}}]}]`))
	f.Add([]byte(`[{"Group":"g","State":"PreparingRebalance","Leader":"nobody","Members":[{"MemberID":"m","InstanceID":"i","SessionTimeout":1000000000}]}]`))
	f.Add([]byte(`[{"Group":"","Members":[]}]`))
	f.Add([]byte(`[{"Group":"g"},{"Group":"g"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var states []GroupState
		if json.Unmarshal(data, &states) != nil {
			return // not JSON: the daemon refuses the file before the coordinator sees it
		}
		now := t0
		c, err := New(Config{Default: GroupConfig{InitialRebalanceDelay: -1}, Served: builtinNames()}, 1)
		if err != nil {
			t.Fatal(err)
		}
		c.SetMetadata(now, meta(map[string]int{"t": 4}))
		check := func(out Output) {
			t.Helper()
			if err := checkBookkeeping(c, out.NextDeadline); err != nil {
				t.Fatal(err)
			}
		}
		out, err := c.Restore(now, states)
		check(out)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("a refusal without a reason")
			}
			return
		}
		exported := c.Export()
		for _, g := range c.Groups() {
			check(c.Handle(now, 1, Client{ID: "newcomer"}, joinReq(9, g, "", "", proto{"range", sub{version: 3, topics: []string{"t"}, gen: -1}.bytes()})))
		}
		check(c.Tick(now.Add(time.Hour)))
		b, err := json.Marshal(exported)
		if err != nil {
			t.Fatal(err)
		}
		var again []GroupState
		if err := json.Unmarshal(b, &again); err != nil {
			t.Fatal(err)
		}
		c2, _ := New(Config{Default: GroupConfig{InitialRebalanceDelay: -1}, Served: builtinNames()}, 1)
		c2.SetMetadata(now, meta(map[string]int{"t": 4}))
		if _, err := c2.Restore(now, again); err != nil {
			t.Fatalf("an exported state does not restore: %v", err)
		}
		if b2, _ := json.Marshal(c2.Export()); string(b2) != string(b) {
			t.Fatalf("export, restore, export differs:\n%s\n%s", b, b2)
		}
	})
}

package coordinator

import (
	"fmt"
	"testing"

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

package groupview

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// sortedByName returns a copy of req whose topic names sort in table
// order, so that every member's topics are in name order and Response
// takes its fast path. Shuffled copies of it then take the others.
func sortedByName(req *abi.Request) *abi.Request {
	out := *req
	out.Topics = make([]abi.Topic, len(req.Topics))
	for i, t := range req.Topics {
		t.Name = fmt.Sprintf("t%04d", i)
		out.Topics[i] = t
	}
	return &out
}

// randomLayout lays out every assignable topic of v at random: as an even
// split from a random first slot, with the slot j turns after it taking
// partitions j, j+S, j+2S, ... as round robin does, or as random windows of
// consecutive partitions. It returns, per topic index and slot, the
// partitions the slot must receive.
func randomLayout(r *rand.Rand, req *abi.Request, v *View) (*Layout, [][][]int32) {
	lay := v.NewLayout()
	want := make([][][]int32, len(req.Topics))
	for _, t := range v.ByName {
		p, s := req.Topics[t].PartitionCount, v.SubscriberCount(t)
		want[t] = make([][]int32, s)
		if r.IntN(2) == 0 {
			first := r.Int32N(s)
			ids, even := lay.Split(t, first)
			for j := range s {
				start, n := even.Turn(j)
				for k := range n {
					ids[start+k] = j + k*s
				}
			}
			for q := range p {
				slot := (first + q%s) % s
				want[t][slot] = append(want[t][slot], q)
			}
		} else {
			counts := make([]int32, s)
			for range p {
				counts[r.IntN(int(s))]++
			}
			ids := lay.Place(t, NewWindows(counts))
			for i := range ids {
				ids[i] = int32(i)
			}
			q := int32(0)
			for slot, c := range counts {
				for range c {
					want[t][slot] = append(want[t][slot], q)
					q++
				}
			}
		}
	}
	return lay, want
}

// TestLayout_ResponseGivesEverySlotItsWindowInNameOrder builds random
// layouts and checks the response: every partition exactly once, topics in
// name order, partitions ascending, each slot with exactly the partitions
// its window holds, and no entry able to overwrite another through append.
// Topic tables sorted by name, shuffled, and with many topics per member
// reach each of Response's paths.
func TestLayout_ResponseGivesEverySlotItsWindowInNameOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 2))
	shape := assignortest.Shape{Topics: 12, SparseOneIn: 3, MissingOneIn: 6, PartitionCounts: assignortest.Below(20), Members: 12, UniformOneIn: 3}
	for i := range 300 {
		base := sortedByName(assignortest.RandomGroup(r, shape))
		for _, req := range []*abi.Request{base, assignortest.Shuffled(r, base)} {
			v, err := New(req)
			if err != nil {
				t.Fatal(err)
			}
			lay, want := randomLayout(r, req, v)
			resp := lay.Response()
			assignortest.CheckValid(t, req, resp)
			assignortest.CheckAppendSafe(t, req, resp)
			subs := v.Subscribers()
			for _, ti := range v.ByName {
				for slot, m := range subs.Of(ti) {
					var got []int32
					for _, tp := range resp.Members[m].Partitions {
						if tp.Topic == ti {
							got = tp.Partitions
						}
					}
					if !slices.Equal(got, want[ti][slot]) {
						t.Fatalf("scenario %d: topic %q slot %d got %v, want %v", i, req.Topics[ti].Name, slot, got, want[ti][slot])
					}
				}
			}
		}
	}
}

// TestLayout_CoPartitionedTopicsShareWindows: topics placed with one
// Windows give each slot the same partition ids in every one of them.
func TestLayout_CoPartitionedTopicsShareWindows(t *testing.T) {
	req := &abi.Request{
		Topics: []abi.Topic{{Name: "b", Exists: true, PartitionCount: 5}, {Name: "a", Exists: true, PartitionCount: 5}},
		Members: []abi.Member{
			{MemberID: "m1", Topics: []int32{0, 1}},
			{MemberID: "m0", Topics: []int32{0, 1}},
		},
	}
	v, err := New(req)
	if err != nil {
		t.Fatal(err)
	}
	lay := v.NewLayout()
	w := NewWindows([]int32{2, 3}) // slot 0 is m0
	for _, ti := range v.ByName {
		copy(lay.Place(ti, w), []int32{1, 4, 0, 2, 3})
	}
	want := map[string]string{"m0": "a-1, a-4, b-1, b-4", "m1": "a-0, a-2, a-3, b-0, b-2, b-3"}
	if got := assignortest.Render(req, lay.Response()); !maps.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

package sticky

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// cycleRequest is a cooperative group (17 members, 138 partitions, chain
// 11042 round 3 of the differential test) on which Kafka's own
// AbstractStickyAssignor (kafka-clients 4.4.0) never returns: its
// reassignment walk hands app2-t0-4 back and forth between two members,
// one pass after another. Encoded as the module receives it (grouped
// layout, seed filled in).
const cycleRequest = "testdata/general-cycle-seed11042.req"

// cycleDeadline is how long the assignor may take on cycleRequest: it
// answers in milliseconds, and a hang must fail the test, not stall it.
const cycleDeadline = 30 * time.Second

func loadCycleRequest(t *testing.T) *abi.Request {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(cycleRequest))
	if err != nil {
		t.Fatal(err)
	}
	req, err := abi.DecodeRequest(b)
	if err != nil {
		t.Fatalf("%s: %v", cycleRequest, err)
	}
	return req
}

// TestGeneral_StopsTheWalkWhereKafkaCyclesForever runs the request Kafka
// loops on, in both layouts, and requires a valid and balanced answer
// within the deadline, the same on every run.
func TestGeneral_StopsTheWalkWhereKafkaCyclesForever(t *testing.T) {
	grouped := loadCycleRequest(t)
	for _, req := range []*abi.Request{grouped, grouped.Expanded()} {
		var plans []plan
		for range 2 {
			done := make(chan *abi.Response, 1)
			errs := make(chan error, 1)
			go func() {
				resp, err := AssignCooperative(req)
				if err != nil {
					errs <- err
					return
				}
				done <- resp
			}()
			select {
			case resp := <-done:
				p := planOf(t, req.Expanded(), resp.Expanded())
				checkBalancedAsKafka(t, req.Expanded(), p)
				plans = append(plans, p)
			case err := <-errs:
				t.Fatal(err)
			case <-time.After(cycleDeadline):
				// The goroutine cannot be stopped; end the test binary's
				// interest in it.
				t.Fatalf("no answer in %v: the reassignment walk does not end", cycleDeadline)
			}
		}
		for id, ps := range plans[0] {
			if !slices.Equal(ps, plans[1][id]) {
				t.Fatalf("two runs differ for %s: %v and %v", id, ps, plans[1][id])
			}
		}
	}
}

// checkBalancedAsKafka fails t unless p is balanced as Kafka's isBalanced
// and the package comment define it: no member holds a partition of a
// topic while a subscriber of that topic holds two or more fewer.
func checkBalancedAsKafka(t *testing.T, req *abi.Request, p plan) {
	t.Helper()
	for ti, topic := range req.Topics {
		least := -1
		for _, m := range req.Members {
			if slices.Contains(m.Topics, int32(ti)) && (least < 0 || len(p[m.MemberID]) < least) {
				least = len(p[m.MemberID])
			}
		}
		for id, tps := range p {
			for _, tp := range tps {
				if tp[:strings.LastIndex(tp, "-")] == topic.Name && len(tps) > least+1 {
					t.Fatalf("unbalanced: %s holds %d partitions, among them %s, while a subscriber of %s holds %d\n%v",
						id, len(tps), tp, topic.Name, least, p)
				}
			}
		}
	}
}

// TestGeneral_WalkStateTellsStatesApart checks the cycle detection's
// state comparison: equal right after saving, different once a partition
// moved, equal again once it moved back through the same movement sets,
// and different when only a movement set's order differs.
func TestGeneral_WalkStateTellsStatesApart(t *testing.T) {
	s := &general{
		holder: []int32{0, 0, 1, 1},
		moved:  []int32{-1, -1, -1, -1},
		moves:  map[moveKey]*javaHashSet{},
	}
	var w walkState
	s.saveState(&w)
	if !s.inState(&w) {
		t.Fatal("state differs from itself right after saving")
	}
	take := func(x, from, to int32) {
		s.holder[x] = to
		if s.moved[x] == to {
			s.moved[x] = -1
			k := moveKey{0, to, from}
			s.moves[k].remove(x)
			if len(s.moves[k].elems) == 0 {
				delete(s.moves, k)
			}
			return
		}
		s.moved[x] = from
		k := moveKey{0, from, to}
		if s.moves[k] == nil {
			s.moves[k] = &javaHashSet{}
		}
		s.moves[k].add(x, uint32(x))
	}
	take(0, 0, 1)
	if s.inState(&w) {
		t.Fatal("a moved partition went unnoticed")
	}
	take(0, 1, 0)
	if !s.inState(&w) {
		t.Fatal("moving a partition back does not restore the state")
	}
	take(0, 0, 1)
	take(1, 0, 1)
	s.saveState(&w)
	take(0, 1, 0)
	take(0, 0, 1) // now after partition 1 in its movement set
	if !slices.Equal(s.holder, w.holder) || !slices.Equal(s.moved, w.moved) {
		t.Fatal("holders or origins differ; the case needs only the order to differ")
	}
	if s.inState(&w) {
		t.Fatal("a movement set in another order went unnoticed")
	}
}

// TestDifferential_CycleRequestAnswersLikeGoPackage holds the built-in
// module to the package's answer on the request Kafka loops on: the Rust
// port stops its walk at the same pass.
func TestDifferential_CycleRequestAnswersLikeGoPackage(t *testing.T) {
	d := newDiffer(t)
	defer d.finish()
	d.check(coop, loadCycleRequest(t).Expanded(), cycleRequest)
}

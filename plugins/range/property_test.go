package rangeassignor

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	"github.com/wasmassign/wasmassign/plugins/internal/groupview"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// referenceRange is a deliberately plain model of Kafka's RangeAssignor
// (KIP-881 included), written for clarity with maps and sets the way Kafka's
// source reads, against which the optimised package is checked.
func referenceRange(req *abi.Request, prefer bool) assignortest.Plan {
	type state struct {
		topic     string
		consumers []string // Kafka order
		racks     []map[string]bool
		hasRacks  bool
		needs     bool
		free      []bool
		assigned  map[string]int
		base, rem int
	}
	rackOf := map[string]string{}
	out := assignortest.Plan{}
	topicConsumers := map[string][]string{} // Kafka order
	for _, m := range assignortest.KafkaSorted(req.Members) {
		rackOf[m.MemberID] = m.Rack
		out[m.MemberID] = map[string][]int32{}
		for _, t := range m.Topics {
			name := req.Topics[t].Name
			topicConsumers[name] = append(topicConsumers[name], m.MemberID)
		}
	}
	brokerRack := map[int32]string{}
	for _, b := range req.Brokers {
		brokerRack[b.ID] = b.Rack
	}
	var states []*state
	for ti, t := range req.Topics {
		cs := topicConsumers[t.Name]
		if !t.Exists || t.PartitionCount == 0 || len(cs) == 0 {
			continue
		}
		s := &state{topic: t.Name, consumers: cs, assigned: map[string]int{}}
		consumerRacks := map[string]bool{}
		for _, c := range cs {
			if rk := rackOf[c]; rk != "" {
				consumerRacks[rk] = true
			}
		}
		n := int(t.PartitionCount)
		s.free = make([]bool, n)
		for p := range s.free {
			s.free[p] = true
		}
		s.base, s.rem = n/len(cs), n%len(cs)
		union := map[string]bool{}
		if len(consumerRacks) > 0 {
			s.hasRacks = true
			for p := range n {
				set := map[string]bool{}
				for _, b := range req.Replicas(int32(ti), int32(p)) {
					if rk := brokerRack[b]; rk != "" {
						set[rk] = true
						union[rk] = true
					}
				}
				s.racks = append(s.racks, set)
			}
		}
		disjoint := true
		for rk := range consumerRacks {
			if union[rk] {
				disjoint = false
			}
		}
		if len(consumerRacks) > 0 && !disjoint {
			s.needs = prefer
			for _, set := range s.racks {
				if !maps.Equal(set, union) {
					s.needs = true
				}
			}
		}
		states = append(states, s)
	}
	maxAssignable := func(s *state, c string) int {
		n := s.base - s.assigned[c]
		if s.rem > 0 {
			n++
		}
		return max(n, 0)
	}
	racksMatch := func(s *state, c string, p int) bool {
		rk := rackOf[c]
		return rk == "" || s.racks[p][rk]
	}
	give := func(s *state, c string, ps []int) {
		for _, p := range ps {
			out[c][s.topic] = append(out[c][s.topic], int32(p))
			s.free[p] = false
		}
		s.assigned[c] += len(ps)
		if s.assigned[c] > s.base {
			s.rem--
		}
	}
	assignRanges := func(s *state, may func(c string, p int) bool) {
		for _, c := range s.consumers {
			var ps []int
			for p, free := range s.free {
				if free && may(c, p) && len(ps) < maxAssignable(s, c) {
					ps = append(ps, p)
				}
			}
			if len(ps) > 0 {
				give(s, c, ps)
			}
		}
	}

	useRack := false
	for _, s := range states {
		useRack = useRack || s.needs
	}
	if useRack {
		groups := map[string][]*state{}
		var keys []string
		for _, s := range states {
			key := fmt.Sprintf("%s|%d", strings.Join(s.consumers, ","), len(s.racks))
			if _, ok := groups[key]; !ok {
				keys = append(keys, key)
			}
			groups[key] = append(groups[key], s)
		}
		for _, key := range keys {
			g := groups[key]
			if len(g) == 1 {
				if s := g[0]; s.needs {
					assignRanges(s, func(c string, p int) bool { return racksMatch(s, c, p) })
				}
				continue
			}
			remaining := slices.Clone(g[0].consumers)
			for p := range len(g[0].racks) {
				for i, c := range remaining {
					ok := true
					for _, s := range g {
						ok = ok && racksMatch(s, c, p) && maxAssignable(s, c) > 0
					}
					if !ok {
						continue
					}
					for _, s := range g {
						give(s, c, []int{p})
					}
					left := false
					for _, s := range g {
						left = left || maxAssignable(s, c) > 0
					}
					if !left {
						remaining = slices.Delete(remaining, i, i+1)
					}
					break
				}
			}
		}
	}
	for _, s := range states {
		assignRanges(s, func(string, int) bool { return true })
	}
	for _, m := range out {
		for name, ps := range m {
			slices.Sort(ps)
			if len(ps) == 0 {
				delete(m, name)
			}
		}
	}
	return out
}

// TestRange_MatchesPlainModelOfKafka compares the package with
// referenceRange on random groups, with and without racks, with and without
// preferRackAwareLogic.
func TestRange_MatchesPlainModelOfKafka(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 881))
	rackMode := 0
	for i := range 600 {
		withRacks := i%4 != 0
		req := assignortest.RandomGroup(r, rangeShape(withRacks))
		for _, opt := range []options{{}, {preferRackAware: true}} {
			resp := assignortest.Run(t, withOptions(opt), req)
			want := referenceRange(req, opt.preferRackAware)
			if got := assignortest.AsPlan(req, resp); !got.Equal(want) {
				t.Fatalf("scenario %d (prefer=%v): \n got %v\nwant %v\nrequest %+v", i, opt.preferRackAware, got, want, req)
			}
		}
		if withRacks && usesRackMode(req) {
			rackMode++
		}
	}
	// The comparison is only worth something if rack mode was exercised.
	if rackMode < 150 {
		t.Fatalf("only %d of 450 rack scenarios used rack-aware assignment", rackMode)
	}
}

// usesRackMode reports whether Kafka would run the rack-aware passes on req.
func usesRackMode(req *abi.Request) bool {
	v, err := groupview.New(req)
	if err != nil {
		return false
	}
	rv, err := newRackView(req, v, options{})
	return err == nil && rv != nil
}

// TestRange_ValidAndBalancedPerTopic checks, on random groups, that every
// subscribed partition goes to exactly one subscriber, that each topic's
// subscribers hold counts within one of each other, and that members'
// partition slices, which share a backing array, cannot overwrite each
// other through append, rack mode or not.
func TestRange_ValidAndBalancedPerTopic(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 881))
	for i := range 400 {
		req := assignortest.RandomGroup(r, rangeShape(i%2 == 0))
		resp := assignortest.Run(t, Assign, req)
		assignortest.CheckTopicBalance(t, req, resp)
		assignortest.CheckAppendSafe(t, req, resp)
	}
}

// TestRange_SameResultWhateverTheRequestOrder checks that the assignment
// depends on member and topic identities only, not on where they sit in the
// request's tables.
func TestRange_SameResultWhateverTheRequestOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 881))
	for i := range 300 {
		req := assignortest.RandomGroup(r, rangeShape(i%2 == 0))
		want := assignortest.AsPlan(req, assignortest.Run(t, Assign, req))
		for range 3 {
			req2 := assignortest.Shuffled(r, req)
			if got := assignortest.AsPlan(req2, assignortest.Run(t, Assign, req2)); !got.Equal(want) {
				t.Fatalf("scenario %d: shuffling the request changed the assignment:\n got %v\nwant %v", i, got, want)
			}
		}
	}
}

package rangeassignor

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// randomRequest makes a random group. Partition counts come from a short
// list so that topics with equal counts, and so co-partitioned topics, are
// common; identical subscriptions are common for the same reason. Some
// groups have many topics with sparse subscriptions. Topic names are in
// random order relative to the topic table. With
// racks, brokers and members get racks (some none), and replicas are placed
// at random, sometimes not at all.
func randomRequest(r *rand.Rand, withRacks bool) *abi.Request {
	req := &abi.Request{}
	counts := []int32{0, 1, 2, 3, 4, 4, 6, 6, 8, 12, 25}
	nt, density := 1+r.IntN(8), 2
	if r.IntN(5) == 0 {
		// Many topics, few per member.
		nt, density = 20+r.IntN(40), 12
	}
	for i := range nt {
		// Names in random order relative to the table.
		t := abi.Topic{Name: fmt.Sprintf("%c%d", 'a'+r.IntN(26), i)}
		if r.IntN(10) > 0 {
			t.Exists = true
			t.PartitionCount = counts[r.IntN(len(counts))]
		}
		req.Topics = append(req.Topics, t)
	}
	if withRacks {
		nb := 1 + r.IntN(6)
		for b := range nb {
			rack := ""
			if r.IntN(5) > 0 {
				rack = string(rune('a' + r.IntN(4)))
			}
			req.Brokers = append(req.Brokers, abi.Broker{ID: int32(b + 1), Rack: rack})
		}
		sets := map[string]uint32{}
		for ti := range req.Topics {
			t := &req.Topics[ti]
			if !t.Exists || r.IntN(10) == 0 {
				continue
			}
			rf := 1 + r.IntN(min(3, nb))
			for range t.PartitionCount {
				replicas := make([]int32, 0, rf)
				for _, b := range r.Perm(nb)[:rf] {
					replicas = append(replicas, int32(b+1))
				}
				key := fmt.Sprint(replicas)
				rs, ok := sets[key]
				if !ok {
					rs = uint32(len(req.ReplicaSets))
					sets[key] = rs
					req.ReplicaSets = append(req.ReplicaSets, replicas)
				}
				t.Partitions = append(t.Partitions, abi.Partition{Leader: replicas[0], Replicas: rs, ISR: rs})
			}
		}
	}
	nm := 1 + r.IntN(12)
	uniform := r.IntN(2) == 0
	var shared []int32
	for ti := range nt {
		if r.IntN(3) > 0 {
			shared = append(shared, int32(ti))
		}
	}
	ids := r.Perm(1000)
	for i := range nm {
		m := abi.Member{MemberID: fmt.Sprintf("m%03d", ids[i]), OwnedGeneration: -1}
		if r.IntN(3) == 0 {
			m.InstanceID = fmt.Sprintf("i%03d", ids[len(ids)-1-i])
		}
		if withRacks && r.IntN(10) < 7 {
			m.Rack = string(rune('a' + r.IntN(5)))
		}
		if uniform {
			m.Topics = slices.Clone(shared)
		} else {
			for ti := range nt {
				if r.IntN(density) == 0 {
					m.Topics = append(m.Topics, int32(ti))
				}
			}
		}
		req.Members = append(req.Members, m)
	}
	return req
}

// referenceRange is a deliberately plain model of Kafka's RangeAssignor
// (KIP-881 included), written for clarity with maps and sets the way Kafka's
// source reads, against which the optimised package is checked. It returns
// member id -> topic name -> partitions.
func referenceRange(req *abi.Request, prefer bool) map[string]map[string][]int32 {
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
	type member struct{ id, instance, rack string }
	byID := map[string]member{}
	out := map[string]map[string][]int32{}
	topicConsumers := map[string][]member{}
	for _, m := range req.Members {
		byID[m.MemberID] = member{m.MemberID, m.InstanceID, m.Rack}
		out[m.MemberID] = map[string][]int32{}
		for _, t := range m.Topics {
			name := req.Topics[t].Name
			topicConsumers[name] = append(topicConsumers[name], byID[m.MemberID])
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
		sort.SliceStable(cs, func(i, j int) bool {
			a, b := cs[i], cs[j]
			switch {
			case a.instance != "" && b.instance != "":
				return a.instance < b.instance
			case a.instance != "":
				return true
			case b.instance != "":
				return false
			}
			return a.id < b.id
		})
		s := &state{topic: t.Name, assigned: map[string]int{}}
		consumerRacks := map[string]bool{}
		for _, c := range cs {
			s.consumers = append(s.consumers, c.id)
			if c.rack != "" {
				consumerRacks[c.rack] = true
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
		rk := byID[c].rack
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

// asMap turns a response into member id -> topic name -> partitions.
func asMap(req *abi.Request, resp *abi.Response) map[string]map[string][]int32 {
	out := map[string]map[string][]int32{}
	for _, ma := range resp.Members {
		m := map[string][]int32{}
		for _, tp := range ma.Partitions {
			m[req.Topics[tp.Topic].Name] = tp.Partitions
		}
		out[req.Members[ma.Member].MemberID] = m
	}
	return out
}

func sameAssignment(a, b map[string]map[string][]int32) bool {
	return maps.EqualFunc(a, b, func(x, y map[string][]int32) bool {
		return maps.EqualFunc(x, y, slices.Equal[[]int32])
	})
}

// TestRange_MatchesPlainModelOfKafka compares the package with
// referenceRange on random groups, with and without racks, with and without
// preferRackAwareLogic.
func TestRange_MatchesPlainModelOfKafka(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 881))
	rackMode := 0
	for i := range 600 {
		withRacks := i%4 != 0
		req := randomRequest(r, withRacks)
		for _, opt := range []options{{}, {preferRackAware: true}} {
			resp, err := assign(req, opt)
			if err != nil {
				t.Fatalf("scenario %d: %v", i, err)
			}
			want := referenceRange(req, opt.preferRackAware)
			if got := asMap(req, resp); !sameAssignment(got, want) {
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
	order := memberOrder(req.Members)
	subs, err := subscribersOf(req, order)
	if err != nil {
		return false
	}
	rv, err := newRackView(req, order, &subs, assignableTopics(req, &subs), options{})
	return err == nil && rv != nil
}

// TestRange_ValidAndBalancedPerTopic checks, on random groups, that every
// subscribed partition goes to exactly one subscriber and that each topic's
// subscribers hold counts within one of each other, rack mode or not.
func TestRange_ValidAndBalancedPerTopic(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 881))
	for i := range 400 {
		req := randomRequest(r, i%2 == 0)
		resp, err := Assign(req)
		if err != nil {
			t.Fatalf("scenario %d: %v", i, err)
		}
		checkValid(t, req, resp)
		checkTopicBalance(t, req, resp)
	}
}

// shuffled returns req with its member and topic tables in a random order,
// every topic reference remapped, so that it describes the same group.
func shuffled(r *rand.Rand, req *abi.Request) *abi.Request {
	out := *req
	perm := r.Perm(len(req.Topics)) // old index -> new index
	out.Topics = make([]abi.Topic, len(req.Topics))
	for old, nw := range perm {
		out.Topics[nw] = req.Topics[old]
	}
	out.Members = make([]abi.Member, len(req.Members))
	for i, old := range r.Perm(len(req.Members)) {
		m := req.Members[old]
		m.Topics = make([]int32, len(req.Members[old].Topics))
		for j, t := range req.Members[old].Topics {
			m.Topics[j] = int32(perm[t])
		}
		slices.Sort(m.Topics)
		out.Members[i] = m
	}
	return &out
}

// TestRange_SameResultWhateverTheRequestOrder checks that the assignment
// depends on member and topic identities only, not on where they sit in the
// request's tables.
func TestRange_SameResultWhateverTheRequestOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 881))
	for i := range 300 {
		req := randomRequest(r, i%2 == 0)
		want, err := Assign(req)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			req2 := shuffled(r, req)
			got, err := Assign(req2)
			if err != nil {
				t.Fatal(err)
			}
			if !sameAssignment(asMap(req2, got), asMap(req, want)) {
				t.Fatalf("scenario %d: shuffling the request changed the assignment:\n got %v\nwant %v", i, asMap(req2, got), asMap(req, want))
			}
		}
	}
}

package sticky

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
)

// randomSublist is AbstractStickyAssignorTest.getRandomSublist: the list
// with a random number of random elements removed.
func randomSublist(rnd *rand.Rand, list []string) []string {
	out := slices.Clone(list)
	for range rnd.IntN(len(list)) {
		i := rnd.IntN(len(out))
		out = slices.Delete(out, i, i+1)
	}
	return out
}

// TestSticky_RandomSubscriptionsAndChanges is Kafka's
// testReassignmentWithRandomSubscriptionsAndChanges: 100 rounds of a random
// group (10-20 topics of 1-20 partitions, 20-40 members with random
// subscriptions), then new random subscriptions with each member owning its
// first assignment. For cooperative-sticky the owned partitions fed back
// are the target, as if the host's withholding round had completed. The
// harness checks validity, balance, stickiness and two-cycles each time.
func TestSticky_RandomSubscriptionsAndChanges(t *testing.T) {
	for _, k := range bothKinds {
		t.Run(k.String(), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(7, uint64(k)))
			for round := range 100 {
				h := &harness{t: t, kind: k, generation: 2}
				nt := 10 + rnd.IntN(10)
				var names []string
				for i := range nt {
					names = append(names, padded("t", i, 20))
					h.cluster.topics = append(h.cluster.topics, topicSpec{names[i], int32(i + 1)})
				}
				nc := 20 + rnd.IntN(20)
				var ms []memberSpec
				for i := range nc {
					ms = append(ms, sub(padded("c", i, 40), randomSublist(rnd, names)...))
				}
				p := h.assign(ms)
				for i := range ms {
					ms[i].topics = randomSublist(rnd, names)
				}
				ms = feedBack(ms, p, generationID)
				if t.Failed() {
					t.Fatalf("round %d", round)
				}
				h.assign(ms)
			}
		})
	}
}

// TestSticky_GroupEvolution runs one group through 100 generations of
// joins, leaves (static and dynamic), subscription changes and topics
// growing, feeding every result back as the next owned partitions. Half the
// groups subscribe uniformly, to exercise both paths across generations.
func TestSticky_GroupEvolution(t *testing.T) {
	for _, k := range bothKinds {
		for _, uniform := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/uniform=%v", k, uniform), func(t *testing.T) {
				rnd := rand.New(rand.NewPCG(11, uint64(k)))
				h := &harness{t: t, kind: k}
				var names []string
				for i := range 12 {
					names = append(names, fmt.Sprintf("topic%02d", i))
					h.cluster.topics = append(h.cluster.topics, topicSpec{names[i], int32(1 + rnd.IntN(30))})
				}
				pick := func() []string {
					if uniform {
						return names
					}
					return randomSublist(rnd, names)
				}
				var ms []memberSpec
				next := 0
				join := func() {
					m := sub(fmt.Sprintf("m%03d", next), pick()...)
					if rnd.IntN(3) == 0 {
						m.instance = fmt.Sprintf("i%03d", 999-next)
					}
					next++
					ms = append(ms, m)
				}
				for range 5 {
					join()
				}
				for gen := int32(1); gen <= 100; gen++ {
					h.generation = gen
					p := h.assign(ms)
					ms = feedBack(ms, p, gen)
					switch op := rnd.IntN(10); {
					case op < 3:
						for range 1 + rnd.IntN(3) {
							join()
						}
					case op < 5 && len(ms) > 1:
						i := rnd.IntN(len(ms))
						ms = slices.Delete(ms, i, i+1)
					case op < 7 && !uniform:
						ms[rnd.IntN(len(ms))].topics = pick()
					case op < 8:
						i := rnd.IntN(len(h.cluster.topics))
						h.cluster.topics[i].partitions += int32(rnd.IntN(5))
					}
				}
			})
		}
	}
}

// TestSticky_IndependentOfRequestOrder shuffles the member and topic tables
// of random requests: the assignment by name must not change, since Kafka's
// member order and topic names decide everything.
func TestSticky_IndependentOfRequestOrder(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, k := range bothKinds {
		for round := range 50 {
			c := cluster{}
			var names []string
			for i := range 2 + rnd.IntN(6) {
				names = append(names, fmt.Sprintf("t%d", i))
				c.topics = append(c.topics, topicSpec{names[i], int32(rnd.IntN(20))})
			}
			if round%2 == 0 {
				c.placement = &assignortest.Placement{RF: 2, BrokerRacks: []string{"a", "b", "c", "a"}, SameStart: true}
			}
			var ms []memberSpec
			for i := range 1 + rnd.IntN(12) {
				m := sub(fmt.Sprintf("c%02d", rnd.IntN(100)*100+i), names...)
				if round%3 == 0 {
					m.topics = randomSublist(rnd, names)
				}
				if rnd.IntN(3) == 0 {
					m.instance = fmt.Sprintf("s%d", rnd.IntN(1000))
				}
				if round%2 == 0 {
					m.rack = []string{"a", "b", "c", ""}[rnd.IntN(4)]
				}
				ms = append(ms, m)
			}
			_, want := k.run(t, c.request(k, 1, ms))
			// Feed the first answer back, then ask again on shuffled copies.
			req := c.request(k, 2, feedBack(ms, want, 1))
			_, want = k.run(t, req)
			for range 3 {
				shuffled := assignortest.Shuffled(rnd, req)
				if _, got := k.run(t, shuffled); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s round %d: shuffled request gave\n%v\nwant\n%v", k, round, got, want)
				}
			}
		}
	}
}

// TestSticky_MembersInKafkaOrder checks that the first assignment deals
// partitions in the sticky assignors' member order: by member id, static
// members included (Kafka's leader keys subscriptions by member id; only
// range and round robin put static members first, by instance id).
func TestSticky_MembersInKafkaOrder(t *testing.T) {
	c := cluster{topics: []topicSpec{{"t", 5}}}
	ms := []memberSpec{sub("a", "t"), sub("b", "t"), sub("c", "t"), sub("d", "t")}
	ms[1].instance = "z"
	ms[3].instance = "y"
	for _, k := range bothKinds {
		_, p := k.run(t, c.request(k, 1, ms))
		want := plan{"a": {"t-0", "t-4"}, "b": {"t-1"}, "c": {"t-2"}, "d": {"t-3"}}
		if fmt.Sprint(p) != fmt.Sprint(want) {
			t.Fatalf("%s: got %v, want %v", k, p, want)
		}
	}
}

// TestSticky_InitialAssignmentIsRoundRobin checks Kafka's layout of a
// first assignment with identical subscriptions: the partitions in (topic
// name, partition) order are dealt one at a time round robin, so the i-th
// member in member order gets positions i, i+M, i+2M, ...
func TestSticky_InitialAssignmentIsRoundRobin(t *testing.T) {
	c := cluster{topics: []topicSpec{{"b", 7}, {"a", 5}, {"c", 11}}}
	var order []string
	for _, ts := range []topicSpec{{"a", 5}, {"b", 7}, {"c", 11}} {
		for p := range ts.partitions {
			order = append(order, fmt.Sprintf("%s-%d", ts.name, p))
		}
	}
	for _, members := range []int{1, 4, 6, 23, 30} {
		var ms []memberSpec
		for i := range members {
			ms = append(ms, sub(fmt.Sprintf("m%02d", i), "a", "b", "c"))
		}
		for _, k := range bothKinds {
			_, p := k.run(t, c.request(k, 1, ms))
			for i := range ms {
				var want []string
				for j := i; j < len(order); j += members {
					want = append(want, order[j])
				}
				eq(t, fmt.Sprintf("%s, %d members: m%02d", k, members, i), p[fmt.Sprintf("m%02d", i)], want)
			}
		}
	}
}

// TestSticky_RejoinKeepsEverything checks the rejoin of the benchmarks:
// every member but the first reports what it owns and the first owns
// nothing; only the first member's former partitions move, to it. (With
// P%M extra partitions, the first member would have held one, and Kafka
// gives that extra to the first member that kept the minimum instead; see
// TestSticky_MatchesKafkaConstrainedBuilder.)
func TestSticky_RejoinKeepsEverything(t *testing.T) {
	c := cluster{}
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("t%02d", i))
		c.topics = append(c.topics, topicSpec{names[i], 37})
	}
	var ms []memberSpec
	for i := range 37 {
		ms = append(ms, sub(fmt.Sprintf("m%02d", i), names...))
	}
	for _, k := range bothKinds {
		h := &harness{t: t, kind: k, cluster: c, generation: 1}
		first := h.assign(ms)
		again := feedBack(ms, first, 1)
		again[0] = sub(ms[0].id, names...)
		h.generation = 2
		second := h.assign(again)
		if fmt.Sprint(first) != fmt.Sprint(second) {
			t.Fatalf("%s: rejoin changed the assignment", k)
		}
	}
}

// TestSticky_DisjointApplicationsAreEachUniform checks groups shared by
// applications with disjoint topics, and many one-topic members: each part
// whose members subscribe alike is laid out like a uniform group, dealt
// round robin in member order, and stays sticky (the harness checks
// stickiness per such part).
func TestSticky_DisjointApplicationsAreEachUniform(t *testing.T) {
	c := cluster{topics: []topicSpec{{"a1", 10}, {"a2", 7}, {"b1", 9}, {"shared", 4}}}
	for i := range 40 {
		c.topics = append(c.topics, topicSpec{fmt.Sprintf("own%02d", i), int32(1 + i%3)})
	}
	var ms []memberSpec
	for i := range 4 {
		ms = append(ms, sub(fmt.Sprintf("a%d", i), "a1", "a2"))
	}
	for i := range 3 {
		ms = append(ms, sub(fmt.Sprintf("b%d", i), "b1", "shared"))
	}
	ms = append(ms, sub("c0", "shared"))
	for i := range 40 {
		ms = append(ms, sub(fmt.Sprintf("o%02d", i), fmt.Sprintf("own%02d", i)))
	}
	for _, k := range bothKinds {
		h := &harness{t: t, kind: k, cluster: c, generation: 1}
		p := h.assign(ms)
		// The "a" application: 17 partitions dealt over 4 members.
		order := tps("a1-0, a1-1, a1-2, a1-3, a1-4, a1-5, a1-6, a1-7, a1-8, a1-9, a2-0, a2-1, a2-2, a2-3, a2-4, a2-5, a2-6")
		for i := range 4 {
			var want []string
			for j := i; j < len(order); j += 4 {
				want = append(want, order[j])
			}
			eq(t, fmt.Sprintf("a%d", i), p[fmt.Sprintf("a%d", i)], want)
		}
		for i := range 40 {
			if len(p[fmt.Sprintf("o%02d", i)]) != 1+i%3 {
				t.Fatalf("o%02d should own its whole topic: %v", i, p)
			}
		}
		// A new member of the "a" application takes from the others' ends.
		ms2 := feedBack(ms, p, 1)
		ms2 = append(ms2, sub("a9", "a1", "a2"))
		h.generation = 2
		h.assign(ms2)
	}
}

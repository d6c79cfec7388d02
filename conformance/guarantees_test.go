package conformance

import (
	"fmt"
	"maps"
	"slices"

	"github.com/wasmassign/wasmassign/scenario"
)

// group is what the guarantee checkers need to know of a scenario: who
// subscribes to what, how many partitions each existing topic has, and what
// each member held before the rebalance.
type group struct {
	members    []string
	subscribed map[string]map[string]bool // member → topic → subscribed
	partitions map[string]int32           // existing topic → partition count
	// before maps member → topic → partitions the member held before:
	// its owned partitions, or when it reports none its previous
	// assignment. Only claims that still mean something are kept: the
	// topic exists and is subscribed by the member, the partition exists,
	// and no other member claims it too.
	before map[string]map[string][]int32
}

func newGroup(sc *scenario.Scenario) *group {
	g := &group{
		subscribed: map[string]map[string]bool{},
		partitions: map[string]int32{},
		before:     map[string]map[string][]int32{},
	}
	for _, t := range sc.Topics {
		if t.PartitionCount != nil {
			g.partitions[t.Name] = *t.PartitionCount
		} else {
			g.partitions[t.Name] = int32(len(t.Partitions))
		}
	}
	type tp struct {
		topic string
		p     int32
	}
	claims := map[tp][]string{}
	for _, m := range sc.Members {
		g.members = append(g.members, m.ID)
		g.subscribed[m.ID] = map[string]bool{}
		for _, t := range m.Topics {
			g.subscribed[m.ID][t] = true
		}
		held := m.Owned
		if len(held) == 0 {
			held = m.Previous
		}
		for topic, ps := range held {
			n, exists := g.partitions[topic]
			if !exists || !g.subscribed[m.ID][topic] {
				continue
			}
			for _, p := range ps {
				if p >= 0 && p < n && !slices.Contains(claims[tp{topic, p}], m.ID) {
					claims[tp{topic, p}] = append(claims[tp{topic, p}], m.ID)
				}
			}
		}
	}
	for k, owners := range claims {
		if len(owners) != 1 {
			continue
		}
		if g.before[owners[0]] == nil {
			g.before[owners[0]] = map[string][]int32{}
		}
		g.before[owners[0]][k.topic] = append(g.before[owners[0]][k.topic], k.p)
	}
	slices.Sort(g.members)
	return g
}

func count(topics map[string][]int32) int {
	n := 0
	for _, ps := range topics {
		n += len(ps)
	}
	return n
}

// owners maps topic → partition → the member got assigns it to.
func owners(got assignment) map[string]map[int32]string {
	out := map[string]map[int32]string{}
	for m, topics := range got {
		for t, ps := range topics {
			if out[t] == nil {
				out[t] = map[int32]string{}
			}
			for _, p := range ps {
				out[t][p] = m
			}
		}
	}
	return out
}

// checkValid: every partition of an existing topic that someone subscribes
// to is assigned exactly once, and only to a member subscribed to its topic.
func checkValid(g *group, got assignment) error {
	seen := map[string]map[int32]string{}
	for _, m := range slices.Sorted(maps.Keys(got)) {
		if _, ok := g.subscribed[m]; !ok {
			return fmt.Errorf("assigns to %q, which is not a member", m)
		}
		for _, t := range slices.Sorted(maps.Keys(got[m])) {
			n, exists := g.partitions[t]
			if !exists {
				return fmt.Errorf("assigns %s to %s, a topic that does not exist", t, m)
			}
			if !g.subscribed[m][t] {
				return fmt.Errorf("assigns %s to %s, which does not subscribe to it", t, m)
			}
			if seen[t] == nil {
				seen[t] = map[int32]string{}
			}
			for _, p := range got[m][t] {
				if p < 0 || p >= n {
					return fmt.Errorf("assigns %s-%d to %s; %s has %d partitions", t, p, m, t, n)
				}
				if other, dup := seen[t][p]; dup {
					return fmt.Errorf("assigns %s-%d to both %s and %s", t, p, other, m)
				}
				seen[t][p] = m
			}
		}
	}
	for _, t := range slices.Sorted(maps.Keys(g.partitions)) {
		wanted := false
		for _, subs := range g.subscribed {
			wanted = wanted || subs[t]
		}
		if !wanted {
			continue
		}
		for p := range g.partitions[t] {
			if _, ok := seen[t][p]; !ok {
				return fmt.Errorf("leaves %s-%d unassigned though it is subscribed", t, p)
			}
		}
	}
	return nil
}

// checkBalanced is Kafka's definition: two members' partition counts differ
// by at most one, unless the lighter one subscribes to none of the heavier
// one's topics, so that no single move could even them out.
func checkBalanced(g *group, got assignment) error {
	for _, heavy := range g.members {
		for _, light := range g.members {
			if count(got[heavy]) <= count(got[light])+1 {
				continue
			}
			for _, t := range slices.Sorted(maps.Keys(got[heavy])) {
				if g.subscribed[light][t] && len(got[heavy][t]) > 0 {
					return fmt.Errorf("%s has %d partitions and %s only %d, yet %s could take %s-%d",
						heavy, count(got[heavy]), light, count(got[light]), light, t, got[heavy][t][0])
				}
			}
		}
	}
	return nil
}

// checkSticky checks that no partition moves that balance does not require.
// It needs identical subscriptions, where the fewest moves is computable:
// the partitions split into quotas of floor(N/M) and, for N mod M members,
// one more; the fewest moves gives the larger quotas to the members that
// held most, and every partition held above a member's quota must move.
func checkSticky(g *group, got assignment) error {
	if len(g.members) == 0 {
		return nil
	}
	first := g.subscribed[g.members[0]]
	for _, m := range g.members[1:] {
		if !sameSet(first, g.subscribed[m]) {
			return fmt.Errorf("the sticky check needs identical subscriptions; %s and %s differ", g.members[0], m)
		}
	}
	total := 0
	for t := range first {
		total += int(g.partitions[t])
	}
	held := make([]int, 0, len(g.members))
	for _, m := range g.members {
		held = append(held, count(g.before[m]))
	}
	slices.Sort(held)
	slices.Reverse(held)
	quota, extra := total/len(g.members), total%len(g.members)
	fewest := 0
	for i, h := range held {
		q := quota
		if i < extra {
			q++
		}
		fewest += max(0, h-q)
	}
	now := owners(got)
	moved := 0
	var moves []string
	for _, m := range g.members {
		for _, t := range slices.Sorted(maps.Keys(g.before[m])) {
			for _, p := range g.before[m][t] {
				if to := now[t][p]; to != m {
					moved++
					moves = append(moves, fmt.Sprintf("%s-%d %s->%s", t, p, m, to))
				}
			}
		}
	}
	if moved != fewest {
		return fmt.Errorf("moved %d partitions %v, balance needs only %d", moved, moves, fewest)
	}
	return nil
}

// checkNoTwoCycles: no partition of a topic moves from A to B while another
// partition of the same topic moves from B to A; such a swap gains nothing.
func checkNoTwoCycles(g *group, got assignment) error {
	now := owners(got)
	type move struct{ topic, from, to string }
	moves := map[move]int32{}
	for _, m := range g.members {
		for _, t := range slices.Sorted(maps.Keys(g.before[m])) {
			for _, p := range g.before[m][t] {
				if to, ok := now[t][p]; ok && to != m {
					moves[move{t, m, to}] = p
				}
			}
		}
	}
	for mv, p := range moves {
		if q, back := moves[move{mv.topic, mv.to, mv.from}]; back {
			return fmt.Errorf("%s-%d moves %s->%s while %s-%d moves back", mv.topic, p, mv.from, mv.to, mv.topic, q)
		}
	}
	return nil
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

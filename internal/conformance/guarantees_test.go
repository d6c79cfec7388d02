package conformance

import (
	"fmt"
	"maps"
	"slices"

	"github.com/wasmassign/wasmassign/internal/scenario"
)

// group is what the guarantee checkers need to know of a scenario: who
// subscribes to what, how many partitions each existing topic has, and what
// each member held before the rebalance. Members and topics are numbered
// (members by id, topics in scenario order) and partitions kept in arrays,
// so that a group of 2,000 members and a million partitions is checked in
// well under a second.
type group struct {
	members    []string // sorted
	memberIdx  map[string]int
	topics     []string
	topicIdx   map[string]int
	partitions []int32  // per topic
	subscribed [][]bool // member → topic → subscribed
	identical  bool     // every member subscribes to the same existing topics
	// before is, per topic and partition, the member that held it before
	// plus one (0 for nobody): its owned partitions, or when it reports
	// none its previous assignment. Only claims that still mean something
	// are kept: the topic exists and is subscribed by the member, the
	// partition exists, and no other member claims it too.
	before [][]int32
	// holders is, per topic and partition, the member that still holds it
	// at the newest reported generation plus one, -1 for several, 0 for
	// nobody: what the handed-over assignment of a cooperative group must
	// respect. Unlike before, subscription plays no part: a member holds
	// what it owns until it lets go.
	holders [][]int32
}

func newGroup(sc *scenario.Scenario) *group {
	g := &group{memberIdx: map[string]int{}, topicIdx: map[string]int{}}
	for _, t := range sc.Topics {
		g.topicIdx[t.Name] = len(g.topics)
		g.topics = append(g.topics, t.Name)
		if t.PartitionCount != nil {
			g.partitions = append(g.partitions, *t.PartitionCount)
		} else {
			g.partitions = append(g.partitions, int32(len(t.Partitions)))
		}
	}
	byID := map[string]*scenario.Member{}
	for i := range sc.Members {
		byID[sc.Members[i].ID] = &sc.Members[i]
		g.members = append(g.members, sc.Members[i].ID)
	}
	slices.Sort(g.members)
	newest, found := int32(0), false
	for _, id := range g.members {
		m := byID[id]
		if hasAny(m.Owned) && (!found || m.Generation > newest) {
			newest, found = m.Generation, true
		}
	}
	g.before = make([][]int32, len(g.topics))
	g.holders = make([][]int32, len(g.topics))
	for t, n := range g.partitions {
		g.before[t] = make([]int32, n)
		g.holders[t] = make([]int32, n)
	}
	var first []bool
	g.identical = true
	for i, id := range g.members {
		g.memberIdx[id] = i
		m := byID[id]
		subs := make([]bool, len(g.topics))
		for _, name := range m.Topics {
			if t, ok := g.topicIdx[name]; ok {
				subs[t] = true
			}
		}
		g.subscribed = append(g.subscribed, subs)
		if first == nil {
			first = subs
		} else if !slices.Equal(first, subs) {
			g.identical = false
		}
		if found && m.Generation == newest {
			for name, ps := range m.Owned {
				if t, ok := g.topicIdx[name]; ok {
					mark(g.holders[t], ps, int32(i+1))
				}
			}
		}
		held := m.Owned
		if !hasAny(held) {
			held = m.Previous
		}
		for name, ps := range held {
			if t, ok := g.topicIdx[name]; ok && subs[t] {
				mark(g.before[t], ps, int32(i+1))
			}
		}
	}
	for _, claims := range g.before {
		for p, c := range claims {
			if c < 0 {
				claims[p] = 0
			}
		}
	}
	return g
}

// mark records who claims each partition of ps: self, or -1 once two
// members do.
func mark(claims []int32, ps []int32, self int32) {
	for _, p := range ps {
		if p < 0 || int(p) >= len(claims) {
			continue
		}
		switch claims[p] {
		case 0:
			claims[p] = self
		case self, -1:
		default:
			claims[p] = -1
		}
	}
}

func hasAny(tps map[string][]int32) bool {
	for _, ps := range tps {
		if len(ps) > 0 {
			return true
		}
	}
	return false
}

// assigned is an assignment in the group's numbering, built once and shared
// by the checkers.
type assigned struct {
	// invalid is the first reason the assignment cannot be numbered at
	// all: an unknown member or topic, a partition out of range, or one
	// given twice. checkValid reports it; the other checkers look only at
	// what could be numbered.
	invalid error
	owner   [][]int32 // topic → partition → member + 1, 0 for nobody
	count   []int     // per member
	topics  [][]int   // per member: topics it receives partitions of
}

func (g *group) number(a assignment) *assigned {
	out := &assigned{owner: make([][]int32, len(g.topics)), count: make([]int, len(g.members)), topics: make([][]int, len(g.members))}
	for t, n := range g.partitions {
		out.owner[t] = make([]int32, n)
	}
	fail := func(err error) {
		if out.invalid == nil {
			out.invalid = err
		}
	}
	for _, id := range slices.Sorted(maps.Keys(a)) {
		m, ok := g.memberIdx[id]
		if !ok {
			fail(fmt.Errorf("assigns to %q, which is not a member", id))
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(a[id])) {
			ps := a[id][name]
			if len(ps) == 0 {
				continue
			}
			t, ok := g.topicIdx[name]
			if !ok {
				fail(fmt.Errorf("assigns %s to %s, a topic that does not exist", name, id))
				continue
			}
			out.topics[m] = append(out.topics[m], t)
			for _, p := range ps {
				if p < 0 || p >= g.partitions[t] {
					fail(fmt.Errorf("assigns %s-%d to %s; %s has %d partitions", name, p, id, name, g.partitions[t]))
					continue
				}
				if prev := out.owner[t][p]; prev != 0 {
					fail(fmt.Errorf("assigns %s-%d to both %s and %s", name, p, g.members[prev-1], id))
					continue
				}
				out.owner[t][p] = int32(m + 1)
				out.count[m]++
			}
		}
	}
	return out
}

// checkValid: every partition of an existing topic that someone subscribes
// to is assigned exactly once, and only to a member subscribed to its topic.
func checkValid(g *group, a *assigned) error {
	if a.invalid != nil {
		return a.invalid
	}
	for m, ts := range a.topics {
		for _, t := range ts {
			if !g.subscribed[m][t] {
				return fmt.Errorf("assigns %s to %s, which does not subscribe to it", g.topics[t], g.members[m])
			}
		}
	}
	for t, owners := range a.owner {
		wanted := false
		for m := range g.members {
			wanted = wanted || g.subscribed[m][t]
		}
		if !wanted {
			continue
		}
		for p, o := range owners {
			if o == 0 {
				return fmt.Errorf("leaves %s-%d unassigned though it is subscribed", g.topics[t], p)
			}
		}
	}
	return nil
}

// checkBalanced is Kafka's definition: two members' partition counts differ
// by at most one, unless the lighter one subscribes to none of the heavier
// one's topics, so that no single move could even them out.
func checkBalanced(g *group, a *assigned) error {
	byCount := make([]int, len(g.members))
	for i := range byCount {
		byCount[i] = i
	}
	slices.SortStableFunc(byCount, func(x, y int) int { return a.count[x] - a.count[y] })
	for _, heavy := range slices.Backward(byCount) {
		for _, light := range byCount {
			if a.count[heavy] <= a.count[light]+1 {
				break
			}
			for _, t := range a.topics[heavy] {
				if g.subscribed[light][t] {
					return fmt.Errorf("%s has %d partitions and %s only %d, yet %s could take one of %s",
						g.members[heavy], a.count[heavy], g.members[light], a.count[light], g.members[light], g.topics[t])
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
func checkSticky(g *group, a *assigned) error {
	if len(g.members) == 0 {
		return nil
	}
	if !g.identical {
		return fmt.Errorf("the sticky check needs identical subscriptions")
	}
	total := 0
	for t, n := range g.partitions {
		if g.subscribed[0][t] {
			total += int(n)
		}
	}
	held := make([]int, len(g.members))
	moved := 0
	var moves []string
	for t, claims := range g.before {
		for p, c := range claims {
			if c == 0 {
				continue
			}
			held[c-1]++
			if to := a.owner[t][p]; to != c {
				moved++
				if len(moves) < 10 {
					moves = append(moves, fmt.Sprintf("%s-%d %s->%s", g.topics[t], p, g.members[c-1], name(g, to)))
				}
			}
		}
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
	if moved != fewest {
		return fmt.Errorf("moved %d partitions (first: %v), balance needs only %d", moved, moves, fewest)
	}
	return nil
}

func name(g *group, owner int32) string {
	if owner <= 0 {
		return "nobody"
	}
	return g.members[owner-1]
}

// checkNoTwoCycles: no partition of a topic moves from A to B while another
// partition of the same topic moves from B to A; such a swap gains nothing.
func checkNoTwoCycles(g *group, a *assigned) error {
	type move struct{ from, to int32 }
	for t, claims := range g.before {
		moves := map[move]int{}
		for p, c := range claims {
			if to := a.owner[t][p]; c != 0 && to != 0 && to != c {
				moves[move{c, to}] = p
			}
		}
		for mv, p := range moves {
			if q, back := moves[move{mv.to, mv.from}]; back {
				return fmt.Errorf("%s-%d moves %s->%s while %s-%d moves back",
					g.topics[t], p, name(g, mv.from), name(g, mv.to), g.topics[t], q)
			}
		}
	}
	return nil
}

// checkHandover checks the assignment the members receive in a cooperative
// group (KIP-429) against the target: it is the target minus exactly the
// partitions another member still holds at the newest generation. So no
// partition is given while someone else holds it, and nothing is held back
// that need not be.
func checkHandover(g *group, target, handed *assigned) error {
	if handed.invalid != nil {
		return fmt.Errorf("handed-over assignment: %w", handed.invalid)
	}
	for t, owners := range handed.owner {
		for p, m := range owners {
			want := target.owner[t][p]
			h := g.holders[t][p]
			blocked := h != 0 && h != want
			switch {
			case m != 0 && m != want:
				return fmt.Errorf("hands %s-%d to %s, but the target gives it to %s", g.topics[t], p, name(g, m), name(g, want))
			case m != 0 && blocked && h == -1:
				return fmt.Errorf("hands %s-%d to %s while several members still claim it", g.topics[t], p, name(g, m))
			case m != 0 && blocked:
				return fmt.Errorf("hands %s-%d to %s while %s still owns it", g.topics[t], p, name(g, m), name(g, h))
			case m == 0 && want != 0 && !blocked:
				return fmt.Errorf("withholds %s-%d from %s though nobody else holds it", g.topics[t], p, name(g, want))
			}
		}
	}
	return nil
}

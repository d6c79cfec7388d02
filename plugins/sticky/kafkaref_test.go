package sticky

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// refConstrained restates, one partition at a time, Kafka's
// ConstrainedAssignmentBuilder without racks (identical subscriptions to
// topics): members (in member order) keep their owned partitions up to the
// quota, first by partition id then topic, and the rest is dealt round
// robin to the members below the minimum, then one each to members at the
// minimum. Where Kafka walks a HashMap (who of several members owning more
// than the minimum keeps one more), member order stands in. owned must be
// valid (existing partitions, no partition twice).
func refConstrained(topics []topicSpec, members []string, owned map[string][]tp) map[string][]tp {
	total := 0
	for _, ts := range topics {
		total += int(ts.partitions)
	}
	n := len(members)
	minQ, maxQ, expected := total/n, (total+n-1)/n, total%n
	out := map[string][]tp{}
	taken := map[tp]bool{}
	var under, atMin []string
	over := 0
	for _, m := range members {
		mine := slices.Clone(owned[m])
		slices.SortFunc(mine, func(a, b tp) int {
			if a.p != b.p {
				return int(a.p - b.p)
			}
			if a.topic < b.topic {
				return -1
			}
			return 1
		})
		keep := len(mine)
		switch {
		case len(mine) < minQ:
			under = append(under, m)
		case len(mine) >= maxQ && over < expected:
			keep = maxQ
			over++
			if over == expected {
				atMin = nil
			}
		default:
			keep = minQ
			if over < expected {
				atMin = append(atMin, m)
			}
		}
		out[m] = mine[:keep]
		for _, x := range mine[:keep] {
			taken[x] = true
		}
	}
	var free []tp
	sorted := slices.Clone(topics)
	slices.SortFunc(sorted, func(a, b topicSpec) int {
		if a.name < b.name {
			return -1
		}
		return 1
	})
	for _, ts := range sorted {
		for p := range ts.partitions {
			if x := (tp{ts.name, p}); !taken[x] {
				free = append(free, x)
			}
		}
	}
	it := 0
	for _, x := range free {
		var m string
		fromUnder := true
		switch {
		case it < len(under):
			m = under[it]
			it++
		case len(under) > 0:
			m, it = under[0], 1
		default:
			m, atMin = atMin[0], atMin[1:]
			fromUnder = false
		}
		out[m] = append(out[m], x)
		if fromUnder && len(out[m]) == minQ {
			it--
			under = slices.Delete(under, it, it+1)
			atMin = append(atMin, m)
		}
	}
	return out
}

// TestSticky_MatchesKafkaConstrainedBuilder compares both assignors, on
// random groups with identical subscriptions and random (valid) ownership,
// with refConstrained: Kafka's exact answer wherever it does not hang on
// HashMap order. It covers the runs machinery the reference has none of:
// strided runs in claims, trimming by partition id, blocks of equal
// deficit, and progressions over the free partitions.
func TestSticky_MatchesKafkaConstrainedBuilder(t *testing.T) {
	rnd := rand.New(rand.NewPCG(11, 12))
	for round := range 400 {
		var topics []topicSpec
		var names []string
		for i := range 1 + rnd.IntN(5) {
			names = append(names, fmt.Sprintf("t%d", i))
			topics = append(topics, topicSpec{names[i], int32(1 + rnd.IntN(15))})
		}
		var members []string
		for i := range 1 + rnd.IntN(9) {
			members = append(members, fmt.Sprintf("m%d", i))
		}
		// Ownership: from nothing, from a round-robin layout of another
		// group size (what a previous Kafka assignment looks like), or at
		// random.
		owned := map[string][]tp{}
		mode := rnd.IntN(3)
		others := 1 + rnd.IntN(9)
		j := 0
		for _, ts := range topics {
			for p := range ts.partitions {
				x := tp{ts.name, p}
				switch mode {
				case 1:
					if k := j % others; k < len(members) {
						owned[members[k]] = append(owned[members[k]], x)
					}
				case 2:
					if k := rnd.IntN(len(members) + 1); k < len(members) {
						owned[members[k]] = append(owned[members[k]], x)
					}
				}
				j++
			}
		}
		want := refConstrained(topics, members, owned)
		for _, k := range bothKinds {
			h := &harness{t: t, kind: k, cluster: cluster{topics: topics}, generation: 2}
			var ms []memberSpec
			// The request lists members in reverse, so order comes from ids.
			for i := len(members) - 1; i >= 0; i-- {
				var list []string
				for _, x := range owned[members[i]] {
					list = append(list, fmt.Sprintf("%s-%d", x.topic, x.p))
				}
				ms = append(ms, owns(members[i], names, 1, list...))
			}
			got := h.assign(ms)
			for _, m := range members {
				var w []string
				for _, x := range want[m] {
					w = append(w, fmt.Sprintf("%s-%d", x.topic, x.p))
				}
				if !slices.Equal(got[m], sortTPs(w)) {
					t.Fatalf("round %d, %s, topics %v, owned %v: %s got %v, Kafka %v", round, k, topics, owned, m, got[m], sortTPs(w))
				}
			}
		}
	}
}

// TestSticky_LargeRejoinMatchesKafka runs the benchmarks' uniform rejoin at
// a size where the layout is a few strided runs per member (one partition
// per topic each), against refConstrained.
func TestSticky_LargeRejoinMatchesKafka(t *testing.T) {
	for _, size := range []struct{ members, topics, partitions int }{{50, 20, 50}, {40, 7, 130}, {64, 3, 101}} {
		var topics []topicSpec
		var names []string
		for i := range size.topics {
			names = append(names, fmt.Sprintf("t%02d", i))
			topics = append(topics, topicSpec{names[i], int32(size.partitions)})
		}
		var ms []memberSpec
		var members []string
		for i := range size.members {
			members = append(members, fmt.Sprintf("m%03d", i))
			ms = append(ms, sub(members[i], names...))
		}
		for _, k := range bothKinds {
			h := &harness{t: t, kind: k, cluster: cluster{topics: topics}, generation: 1}
			first := h.assign(ms)
			again := feedBack(ms, first, 1)
			again[0] = sub(ms[0].id, names...)
			// A member more, too: everybody above the new quota gives up
			// what comes last by partition id.
			again = append(again, sub("m999", names...))
			h.generation = 2
			got := h.assign(again)
			owned := map[string][]tp{}
			for _, m := range again {
				for _, s := range m.owned {
					owned[m.id] = append(owned[m.id], parseTP(s))
				}
			}
			want := refConstrained(topics, append(slices.Clone(members), "m999"), owned)
			for id, list := range want {
				var w []string
				for _, x := range list {
					w = append(w, fmt.Sprintf("%s-%d", x.topic, x.p))
				}
				if !slices.Equal(got[id], sortTPs(w)) {
					t.Fatalf("%v %s: %s got %v, Kafka %v", size, k, id, got[id], sortTPs(w))
				}
			}
		}
	}
}

// TestSticky_StridedRunSets checks the two ways strided runs are set
// against each other, on random progressions of one stride (some
// overlapping): disjoint must agree with counting every partition, and the
// free runs found by residue class (when that applies) with those found
// with a bit set, partition for partition.
func TestSticky_StridedRunSets(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 8))
	expand := func(runs []claim) []int32 {
		var out []int32
		for _, c := range runs {
			for i := range c.n {
				out = append(out, c.start+i*c.stride())
			}
		}
		slices.Sort(out)
		return out
	}
	byResidues := 0
	for round := range 3000 {
		nt := 1 + rnd.IntN(4)
		g := &group{base: []int32{0}}
		for r := range nt {
			g.byRank = append(g.byRank, int32(r))
			g.base = append(g.base, g.base[r]+int32(1+rnd.IntN(30)))
		}
		total := g.base[nt]
		s := int32(2 + rnd.IntN(6))
		var runs []claim
		mode := rnd.IntN(3)
		if mode == 2 {
			// A rejoin: every residue class but the first is held whole,
			// the first in pieces or not at all.
			for i := int32(1); i < s && i < total; i++ {
				runs = append(runs, claim{start: i, n: (total-1-i)/s + 1, gap: s - 1})
			}
			for x := int32(0); x < total; x += s * int32(1+rnd.IntN(3)) {
				if rnd.IntN(2) == 0 {
					runs = append(runs, claim{start: x, n: 1})
				}
			}
		}
		distinct := mode == 1 // one residue class per run: disjoint
		for i := range rnd.IntN(8) * (1 - mode/2) {
			x := int32(rnd.IntN(int(total)))
			if distinct {
				if int32(i) >= s || int32(i) >= total {
					break
				}
				x = int32(i) + s*int32(rnd.IntN(int((total-1-int32(i))/s)+1))
			}
			n := int32(1 + rnd.IntN(int((total-1-x)/s)+1))
			runs = append(runs, claim{start: x, n: n, gap: s - 1, member: int32(rnd.IntN(3))})
			if n == 1 {
				runs[len(runs)-1].gap = 0
			}
		}
		for i := range runs {
			runs[i].topic = g.topicAt(runs[i].start)
		}
		sortByStart(runs)
		parts := expand(runs)
		want := len(slices.Compact(slices.Clone(parts))) == len(parts)
		if got := g.disjoint(runs); got != want {
			t.Fatalf("round %d: disjoint(%v) = %v, want %v", round, runs, got, want)
		}
		if !want {
			continue
		}
		ranks := g.allRanks()
		bits := g.freeByBits(runs, ranks)
		if free, ok := g.freeByResidues(runs, ranks); ok {
			byResidues++
			if !slices.Equal(expand(free), expand(bits)) {
				t.Fatalf("round %d: kept %v: by residues %v, by bits %v", round, runs, free, bits)
			}
			for i := 1; i < len(free); i++ {
				if free[i-1].last() >= free[i].start {
					t.Fatalf("round %d: free runs interleave: %v", round, free)
				}
			}
		}
		var all []int32
		for x := range total {
			if _, ok := slices.BinarySearch(parts, x); !ok {
				all = append(all, x)
			}
		}
		if got := expand(bits); !slices.Equal(got, all) {
			t.Fatalf("round %d: kept %v: free by bits %v, want %v", round, runs, got, all)
		}
	}
	if byResidues < 500 {
		t.Fatalf("only %d rounds took the residue path", byResidues)
	}
}

// TestSticky_SortPieces checks the merge of sorted chains of pieces against
// a plain sort, for any number of chains.
func TestSticky_SortPieces(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	var spare []piece
	for round := range 2000 {
		var ps []piece
		for range rnd.IntN(25) {
			// One chain: ascending pieces over a few topics.
			r, p0 := int32(rnd.IntN(3)), int32(rnd.IntN(5))
			for range 1 + rnd.IntN(6) {
				ps = append(ps, piece{r: r, p0: p0, k: 1, step: 1})
				if rnd.IntN(2) == 0 {
					r++
				} else {
					p0 += int32(1 + rnd.IntN(3))
				}
			}
		}
		want := slices.Clone(ps)
		slices.SortStableFunc(want, comparePieces)
		got := sortPieces(slices.Clone(ps), &spare)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: sorted %v to %v, want %v", round, ps, got, want)
		}
	}
}

package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBalance_Examples pins the rules on small cases.
func TestBalance_Examples(t *testing.T) {
	for _, tc := range []struct {
		name    string
		shards  int
		members []Member
		want    []string
	}{
		{"nobody", 3, nil, []string{"", "", ""}},
		{"one gateway takes all", 3, []Member{{ID: "a"}}, []string{"a", "a", "a"}},
		{"spread by what each is owed, the first by id owed the extra", 5, []Member{{ID: "b"}, {ID: "a"}}, []string{"a", "a", "b", "a", "b"}},
		{"a holder keeps its shards", 4, []Member{{ID: "a", Claimed: []int{2, 3}, ClaimGeneration: 4}, {ID: "b"}}, []string{"b", "b", "a", "a"}},
		{"a newcomer waits for what is released", 4, []Member{{ID: "a", Claimed: []int{0, 1, 2, 3}, ClaimGeneration: 4}, {ID: "b"}}, []string{"a", "a", "", ""}},
		{"a stale claim loses to a newer one", 2, []Member{{ID: "a", Claimed: []int{0, 1}, ClaimGeneration: 2}, {ID: "b", Claimed: []int{0}, ClaimGeneration: 5}}, []string{"b", "a"}},
		{"two claims at one generation make nobody's", 2, []Member{{ID: "a", Claimed: []int{0}, ClaimGeneration: 5}, {ID: "b", Claimed: []int{0}, ClaimGeneration: 5}}, []string{"", "a"}},
		{"a claim out of range is nothing", 2, []Member{{ID: "a", Claimed: []int{-1, 7}, ClaimGeneration: 1}}, []string{"a", "a"}},
		{"one id twice is one gateway", 2, []Member{{ID: "a"}, {ID: "a"}}, []string{"a", "a"}},
	} {
		if got := Balance(tc.shards, tc.members); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestBalance_Properties runs random clusters through rounds of the
// gateways' group, members joining, leaving and coming back with stale
// claims, and holds every round to the rules that keep one owner per
// shard: no shard passes straight from one live holder to another, nobody
// is given more than it is owed, and once members stop changing, two
// rounds at most give out every shard, evenly, and nothing moves after.
func TestBalance_Properties(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		shards := 1 + rng.IntN(24)
		live := map[string]*Member{}
		gen := int32(0)
		round := func() []string {
			gen++
			var ms []Member
			for _, m := range live {
				ms = append(ms, *m)
			}
			owners := Balance(shards, ms)
			holders := map[int][]string{}
			for _, m := range ms {
				for _, s := range m.Claimed {
					holders[s] = append(holders[s], m.ID)
				}
			}
			count := map[string]int{}
			for s, o := range owners {
				if o == "" {
					continue
				}
				count[o]++
				if live[o] == nil {
					t.Fatalf("seed %d: shard %d given to %s, no member", seed, s, o)
				}
				for _, h := range holders[s] {
					if h != o && live[h].ClaimGeneration >= newestClaim(ms, s) {
						t.Fatalf("seed %d gen %d: shard %d passes from its holder %s to %s in one round", seed, gen, s, h, o)
					}
				}
			}
			for id, n := range count {
				if most := (shards + len(ms) - 1) / len(ms); n > most {
					t.Fatalf("seed %d: %s owns %d of %d shards among %d members", seed, id, n, shards, len(ms))
				}
			}
			for _, m := range live {
				m.Claimed = m.Claimed[:0]
				for s, o := range owners {
					if o == m.ID {
						m.Claimed = append(m.Claimed, s)
					}
				}
				m.ClaimGeneration = gen
			}
			return owners
		}
		for range 12 {
			switch r := rng.IntN(10); {
			case r < 4 || len(live) == 0:
				id := fmt.Sprintf("gw-%d", rng.IntN(6))
				if live[id] == nil {
					// A gateway coming back may claim what it held long ago.
					stale := &Member{ID: id, ClaimGeneration: gen - int32(1+rng.IntN(3))}
					for s := range shards {
						if rng.IntN(3) == 0 {
							stale.Claimed = append(stale.Claimed, s)
						}
					}
					live[id] = stale
				}
			case r < 6:
				for id := range live {
					delete(live, id)
					break
				}
			}
			round()
		}
		if len(live) == 0 {
			continue
		}
		round()
		settled := round()
		counts := map[string]int{}
		for s, o := range settled {
			if o == "" {
				t.Fatalf("seed %d: shard %d is nobody's two rounds after the members settled: %q", seed, s, settled)
			}
			counts[o]++
		}
		least, most := shards, 0
		for id := range live {
			least, most = min(least, counts[id]), max(most, counts[id])
		}
		if most-least > 1 {
			t.Fatalf("seed %d: settled unevenly %v", seed, counts)
		}
		if again := round(); !slices.Equal(again, settled) {
			t.Fatalf("seed %d: a settled cluster moved %q -> %q", seed, settled, again)
		}
	}
}

// newestClaim is the newest generation at which a member claims shard s.
func newestClaim(ms []Member, s int) int32 {
	newest := int32(-1 << 31)
	for _, m := range ms {
		if slices.Contains(m.Claimed, s) {
			newest = max(newest, m.ClaimGeneration)
		}
	}
	return newest
}

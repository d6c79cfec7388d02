package cluster

import (
	"cmp"
	"slices"
)

// A Member is one gateway of the cluster as the leader of the gateways'
// own group sees it: its id, the shards it says it holds, and the
// generation of that group in which it last received them.
type Member struct {
	ID              string
	Claimed         []int
	ClaimGeneration int32
}

// Balance is the leader's assignment of shards to the members: owners[s] is
// the member that serves shard s from this generation, or "" for none. It
// is sticky, balanced, and never hands a shard straight from one member to
// another, in the way of KIP-429:
//
//   - a shard's holder is the member that claims it at the newest claim
//     generation among its claimants; two claims at that generation make it
//     nobody's this round, since only one of them can be right;
//   - each member is owed ⌊shards/members⌋ or, the first shards mod members
//     of them by id, one more; a holder keeps what it holds up to that;
//   - a shard whose holder has more than it is owed goes to nobody this
//     round (the holder releases it; the next round gives it out), so that
//     its next owner starts only after the last one stopped;
//   - a shard nobody holds, or whose holder left, goes to the member owed
//     the most, ties by id.
//
// Members with the same id are the same gateway; the first is taken.
func Balance(shards int, members []Member) []string {
	owners := make([]string, max(shards, 0))
	ms := slices.Clone(members)
	slices.SortStableFunc(ms, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	ms = slices.CompactFunc(ms, func(a, b Member) bool { return a.ID == b.ID })
	if len(ms) == 0 || shards <= 0 {
		return owners
	}

	// Each shard's holder: the newest claim wins, a tie makes none.
	holder := make([]int, shards) // index into ms, -1 none, -2 disputed
	newest := make([]int32, shards)
	for s := range holder {
		holder[s] = -1
	}
	for i, m := range ms {
		for _, s := range m.Claimed {
			if s < 0 || s >= shards {
				continue
			}
			switch {
			case holder[s] == -1 || m.ClaimGeneration > newest[s]:
				holder[s], newest[s] = i, m.ClaimGeneration
			case m.ClaimGeneration == newest[s] && holder[s] != i:
				holder[s] = -2
			}
		}
	}

	owed := make([]int, len(ms))
	for i := range ms {
		owed[i] = shards / len(ms)
		if i < shards%len(ms) {
			owed[i]++
		}
	}
	// Holders keep what they are owed, lowest shards first; what they hold
	// beyond it, and disputed shards, go to nobody this round.
	free := []int{}
	for s := range shards {
		switch h := holder[s]; {
		case h == -2:
		case h == -1:
			free = append(free, s)
		case owed[h] > 0:
			owners[s] = ms[h].ID
			owed[h]--
		}
	}
	for _, s := range free {
		best := -1
		for i := range ms {
			if owed[i] > 0 && (best == -1 || owed[i] > owed[best]) {
				best = i
			}
		}
		if best == -1 {
			break
		}
		owners[s] = ms[best].ID
		owed[best]--
	}
	return owners
}

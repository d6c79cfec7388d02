package sticky

import (
	"math/bits"

	"github.com/wasmassign/wasmassign/plugins/internal/groupview"
)

// racks is what rack mode (KIP-881) needs: each member's rack and, for each
// replica set of the request, the set of racks its brokers are on, as bits.
// Rack ids are groupview.Racks': those below consumerRacks are racks some
// member is on; the others are racks only brokers are on, which count when
// deciding whether rack mode applies and never match a member.
type racks struct {
	// member[m] is member m's rack id, or -1 when it has none: a member
	// without a rack matches every partition.
	member []int32
	// onRack[k] is the number of members on consumer rack k.
	onRack        []int32
	consumerRacks int
	words         int
	// masks[s*words:(s+1)*words] are the racks of replica set s.
	masks []uint64
	// cand[s] caches candidates(s) plus one; 0 when not computed yet.
	cand []int32
	// room is scratch for rackQueues, per member.
	room []int32
}

// newRacks decides rack mode as Kafka's AbstractStickyAssignor does, over the
// partitions of every assignable topic: some member must be on a rack that
// holds a replica, and not every partition may have the same set of replica
// racks (otherwise every partition matches every member). It returns nil
// when rack mode is off.
func newRacks(g *group) *racks {
	req := g.req
	numbered := groupview.NewRacks(req)
	if numbered == nil {
		return nil
	}
	rk := &racks{member: numbered.Member, consumerRacks: int(numbered.MemberRacks), words: (int(numbered.Total) + 63) / 64}
	brokerRack := numbered.Broker
	rk.masks = make([]uint64, len(req.ReplicaSets)*rk.words)
	for s, set := range req.ReplicaSets {
		mask := rk.masks[s*rk.words : (s+1)*rk.words]
		for _, b := range set {
			if id, ok := brokerRack[b]; ok {
				mask[id/64] |= 1 << (id % 64)
			}
		}
	}

	// Which replica sets do the assignable partitions use, and does any of
	// them lack placement (an empty rack set)?
	used := make([]bool, len(req.ReplicaSets))
	empty := false
	for _, t := range g.byRank {
		tp := &req.Topics[t]
		if len(tp.Partitions) != int(tp.PartitionCount) {
			empty = true
			continue
		}
		for _, p := range tp.Partitions {
			if int(p.Replicas) < len(used) {
				used[p.Replicas] = true
			} else {
				empty = true
			}
		}
	}
	union := make([]uint64, rk.words)
	for s, u := range used {
		if u {
			orInto(union, rk.masks[s*rk.words:(s+1)*rk.words])
		}
	}
	if !rk.anyConsumerRack(union) {
		return nil
	}
	differs := empty
	for s, u := range used {
		if u && !equalWords(union, rk.masks[s*rk.words:(s+1)*rk.words]) {
			differs = true
			break
		}
	}
	if !differs {
		return nil
	}
	rk.onRack = make([]int32, rk.consumerRacks)
	for _, id := range rk.member {
		if id >= 0 {
			rk.onRack[id]++
		}
	}
	return rk
}

// replicaSet returns the replica-set index of partition p of rank r, or -1
// when the request has no placement for it.
func (g *group) replicaSet(r, p int32) int32 {
	t := &g.req.Topics[g.byRank[r]]
	if int(p) >= len(t.Partitions) || len(t.Partitions) != int(t.PartitionCount) {
		return -1
	}
	s := t.Partitions[p].Replicas
	if int(s) >= len(g.req.ReplicaSets) {
		return -1
	}
	return int32(s)
}

func orInto(dst, src []uint64) {
	for i := range dst {
		dst[i] |= src[i]
	}
}

func equalWords(a, b []uint64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// anyConsumerRack reports whether mask holds a rack some member is on.
func (rk *racks) anyConsumerRack(mask []uint64) bool {
	for k := 0; k < rk.consumerRacks; k++ {
		if mask[k/64]&(1<<(k%64)) != 0 {
			return true
		}
	}
	return false
}

// matches reports whether member m may take a partition of replica set s
// without breaking rack alignment.
func (rk *racks) matches(m, s int32) bool {
	id := rk.member[m]
	if id < 0 {
		return true
	}
	if s < 0 {
		return false
	}
	return rk.masks[int(s)*rk.words+int(id/64)]&(1<<(id%64)) != 0
}

// eachRack calls fn with every consumer rack of replica set s.
func (rk *racks) eachRack(s int32, fn func(rack int32)) {
	if s < 0 {
		return
	}
	mask := rk.masks[int(s)*rk.words : int(s+1)*rk.words]
	for w, word := range mask {
		for word != 0 {
			k := w*64 + bits.TrailingZeros64(word)
			if k >= rk.consumerRacks {
				return
			}
			fn(int32(k))
			word &= word - 1
		}
	}
}

// candidates returns Kafka's numConsumersByPartition for replica set s: the
// number of members on the racks of its replicas (0 for no placement).
func (rk *racks) candidates(s int32) int32 {
	if s < 0 {
		return 0
	}
	if rk.cand == nil {
		rk.cand = make([]int32, len(rk.masks)/rk.words)
	}
	if c := rk.cand[s]; c > 0 {
		return c - 1
	}
	n := int32(0)
	rk.eachRack(s, func(k int32) { n += rk.onRack[k] })
	rk.cand[s] = n + 1
	return n
}

// byCandidates returns the order in which the rack-matching passes visit
// parts, and each part's candidates: partitions with the fewest
// rack-matching members go first (Kafka's sortPartitionsByRackConsumers),
// and a stable counting sort by that number keeps them in partition order
// otherwise.
func (rk *racks) byCandidates(parts []freePartition) (order, cands []int32) {
	cands = make([]int32, len(parts))
	for i := range parts {
		cands[i] = rk.candidates(parts[i].set)
	}
	return countingOrder(cands), cands
}

// memberOnRack reports whether member m is on one of the racks of replica set s:
// unlike matches, a member without a rack is on none.
func (rk *racks) memberOnRack(m, s int32) bool {
	id := rk.member[m]
	return id >= 0 && s >= 0 && rk.masks[int(s)*rk.words+int(id/64)]&(1<<(id%64)) != 0
}

// nextOnRack is Kafka's RackInfo.nextRackConsumer: the index of the first
// member of list, from first on and wrapping around, on one of the racks of
// replica set s; -1 when there is none.
func (rk *racks) nextOnRack(s int32, list []int32, first int) int {
	if s < 0 || len(list) == 0 {
		return -1
	}
	for i := range list {
		idx := first + i
		if idx >= len(list) {
			idx -= len(list)
		}
		if rk.memberOnRack(list[idx], s) {
			return idx
		}
	}
	return -1
}

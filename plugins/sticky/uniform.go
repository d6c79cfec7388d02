package sticky

import (
	"math/bits"
	"slices"
)

// This file is the assignment for groups whose members all subscribe to the
// same topics: Kafka's ConstrainedAssignmentBuilder, reworked to operate on
// runs. With P partitions and M members every member gets P/M partitions,
// and P%M of them one more. Members keep up to their quota of what they own,
// first in Kafka's order (partition id, then topic); what is left is dealt
// one partition at a time, round robin, as Kafka does: first to the members
// below the minimum, then one extra each to the members at it.

// dealing is the state Kafka's assignOwnedPartitions leaves for the
// round-robin passes.
type dealing struct {
	min, slots int32
	// over is the number of members that kept one more than the minimum.
	over int32
	// under are the members that kept less than the minimum, in member
	// order (Kafka's sorted unfilledMembersWithUnderMinQuotaPartitions).
	under []int32
	// atMin are the members that kept exactly the minimum and may take one
	// more (Kafka's sorted unfilledMembersWithExactlyMinQuotaPartitions,
	// empty once no extra slot is left).
	atMin []int32
}

// max is Kafka's maxQuota.
func (d *dealing) max() int32 {
	if d.slots > 0 {
		return d.min + 1
	}
	return d.min
}

// assignUniform returns the runs each of members (in Kafka's member order)
// is assigned, when all of them subscribe to exactly the topic ranks ranks
// (ascending) and nobody else does. kept are the settled claims of those
// members on those topics, sorted by start (contiguous runs within one
// topic each in rack mode); rk is nil outside rack mode.
func (g *group) assignUniform(members, ranks []int32, kept []claim, rk *racks) []claim {
	n := int32(len(members))
	total := int32(0)
	for _, r := range ranks {
		total += g.partitions(r)
	}
	if n == 0 || total == 0 {
		return nil
	}
	d := &dealing{min: total / n, slots: total % n}

	if rk != nil {
		// Kafka's assignOwnedPartitions only keeps owned partitions on
		// their owner's rack.
		kept, _ = g.splitByRack(kept, rk)
	}
	// Per-member state lives in group-wide arrays, allocated once.
	sc := g.memberScratch()
	count, keep := sc.count, sc.keep
	for i, m := range members {
		count[m] = 0
		sc.pos[m] = int32(i)
	}
	for i := range kept {
		count[kept[i].member] += kept[i].n
	}
	// Kafka's assignOwnedPartitions. Which members that own more than the
	// minimum keep one more is Java HashMap order in Kafka; member order
	// here.
	for _, m := range members {
		switch {
		case count[m] < d.min:
			keep[m] = count[m]
			d.under = append(d.under, m)
		case count[m] > d.min && d.over < d.slots:
			keep[m] = d.min + 1
			d.over++
		default:
			keep[m] = d.min
			d.atMin = append(d.atMin, m)
		}
	}
	if d.over == d.slots {
		d.atMin = nil
	}
	kept = g.trim(kept, members, count, keep)

	var free []claim
	if allContiguous(kept) {
		free = mergeFree(g.universeGaps(kept, ranks, nil))
	} else if f, ok := g.freeByResidues(kept, ranks); ok {
		free = f
	} else {
		free = g.freeByBits(kept, ranks)
	}
	if rk != nil {
		return g.fillUniformRacks(kept, free, members, d, keep, rk)
	}
	return g.deal(kept, free, d, keep)
}

// allContiguous reports whether no run of cs has holes.
func allContiguous(cs []claim) bool {
	for i := range cs {
		if !cs[i].contiguous() {
			return false
		}
	}
	return true
}

// deal hands the free partitions out as Kafka's assignRoundRobin does and
// appends the runs to out: one at a time, in partition order, round robin
// over the members below the minimum (dropping each as it reaches it), then
// one each to the members at the minimum, in d.atMin's order followed by
// the order in which the others reached it. keep is what each member kept.
//
// Members of equal deficit form blocks: while the set of members still
// below the minimum does not change, member i of c takes every c-th free
// partition, so each member's share of a block is one progression over the
// free runs, and the result stays a few runs per member.
func (g *group) deal(out, free []claim, d *dealing, keep []int32) []claim {
	fc := newFreeCursor(free)
	n := len(d.under)
	join, leave := make([]int32, n), make([]int32, n)
	for i, m := range d.under {
		leave[i] = d.min - keep[m]
	}
	out, pos := fc.dealRounds(out, d.under, join, leave)
	// Then one extra each: first the members that kept the minimum, then
	// the others in the order they reached it (by deficit, ties in member
	// order).
	for _, m := range d.atMin {
		if pos >= fc.total {
			return out
		}
		out = fc.emit(out, m, pos, 1, 1)
		pos++
	}
	keys := make([]uint64, n)
	for i := range d.under {
		keys[i] = uint64(leave[i])<<32 | uint64(i)
	}
	slices.Sort(keys)
	for _, key := range keys {
		if pos >= fc.total {
			return out
		}
		out = fc.emit(out, d.under[uint32(key)], pos, 1, 1)
		pos++
	}
	return out
}

// dealRounds hands out the free positions from the first in rounds: in round
// l (lowest first) every member ms[i] with join[i] <= l < leave[i], in the
// order of ms, takes the next position. It returns out and the first
// position left.
//
// With join 0 and leave the deficit, that is Kafka's round robin over the
// members below the minimum. With join a member's load and leave its load
// after, it is Kafka's maybeAssign, which hands each partition to the
// least-loaded member, ties in member order. While the set of members in a
// round does not change, member i of c takes every c-th position, so each
// member's share of such a stretch of rounds is one progression.
func (fc *freeCursor) dealRounds(out []claim, ms, join, leave []int32) ([]claim, int64) {
	levels := make([]int32, 0, 2*len(ms))
	levels = append(append(levels, join...), leave...)
	slices.Sort(levels)
	levels = slices.Compact(levels)
	pos := int64(0)
	active := make([]int32, 0, len(ms))
	for j := 0; j+1 < len(levels); j++ {
		a, b := levels[j], levels[j+1]
		active = active[:0]
		for i, m := range ms {
			if join[i] <= a && a < leave[i] {
				active = append(active, m)
			}
		}
		c := int64(len(active))
		for i, m := range active {
			out = fc.emit(out, m, pos+int64(i), c, b-a)
		}
		pos += c * int64(b-a)
	}
	return out, pos
}

// freeCursor maps positions in a list of free runs (sorted by start, not
// interleaved) to global partition numbers.
type freeCursor struct {
	runs  []claim
	off   []int64 // off[i] is the position of runs[i]'s first partition
	total int64
}

func newFreeCursor(runs []claim) *freeCursor {
	fc := &freeCursor{runs: runs, off: make([]int64, len(runs)+1)}
	for i := range runs {
		fc.off[i+1] = fc.off[i] + int64(runs[i].n)
	}
	fc.total = fc.off[len(runs)]
	return fc
}

// emit appends, as runs for member m, the free partitions at positions u,
// u+step, ..., n of them (fewer if the free runs end first).
func (fc *freeCursor) emit(out []claim, m int32, u, step int64, n int32) []claim {
	s := 0
	for n > 0 && u < fc.total {
		// The run holding position u: the last whose offset is <= u.
		if !(fc.off[s] <= u && u < fc.off[s+1]) {
			s, _ = slices.BinarySearch(fc.off, u+1)
			s--
		}
		r := &fc.runs[s]
		k := int32(min(int64(n), (fc.off[s+1]-u+step-1)/step))
		stride := int64(r.stride())
		c := claim{start: r.start + int32((u-fc.off[s])*stride), n: k, member: m}
		if k > 1 {
			c.gap = int32(stride*step - 1)
		}
		out = pushClaim(out, c)
		u += int64(k) * step
		n -= k
	}
	return out
}

// trim keeps, of each member's runs, keep[m] partitions when the member
// holds count[m] > keep[m]: Kafka keeps the first owned partitions ordered
// by partition id, then topic. It returns the kept runs sorted by start.
func (g *group) trim(kept []claim, members, count, keep []int32) []claim {
	cut := false
	for _, m := range members {
		if count[m] > keep[m] {
			cut = true
			break
		}
	}
	if !cut {
		return kept
	}
	pos := g.memberScratch().pos
	byMember, start := bucketByMember(kept, int32(len(members)), pos)
	out := make([]claim, 0, len(kept))
	for i, m := range members {
		runs := byMember[start[i]:start[i+1]]
		if count[m] <= keep[m] {
			out = append(out, runs...)
			continue
		}
		out = g.firstByPartition(out, runs, keep[m])
	}
	sortByStart(out)
	return out
}

// firstByPartition appends to out the first q partitions of runs (one
// member's, not overlapping) in the order (partition id, topic).
func (g *group) firstByPartition(out, runs []claim, q int32) []claim {
	if q <= 0 {
		return out
	}
	if len(runs) == 1 && g.samePartitionID(&runs[0]) {
		// One partition id throughout, so the order is the topics':
		// Kafka's layout of a large group, where a member holds partition
		// i of every topic.
		c := runs[0]
		c.n = q
		return pushClaim(out, c)
	}
	var pieces []claim
	for _, c := range runs {
		switch {
		case c.last() < g.base[c.topic+1]:
			pieces = append(pieces, c)
		case c.contiguous():
			pieces = g.appendSplit(pieces, c)
		default:
			pieces = g.appendStridedPieces(pieces, c)
		}
	}
	// below(x) is how many of the pieces' partitions have an id below x.
	below := func(x int32) int64 {
		total := int64(0)
		for i := range pieces {
			c := &pieces[i]
			if p0 := c.start - g.base[c.topic]; x > p0 {
				s := int64(c.stride())
				total += min(int64(c.n), (int64(x-p0)+s-1)/s)
			}
		}
		return total
	}
	// The partition id of the q-th partition in that order: the smallest t
	// with below(t+1) >= q.
	lo, hi := int32(0), int32(0)
	for i := range pieces {
		hi = max(hi, pieces[i].last()-g.base[pieces[i].topic])
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if below(mid+1) >= int64(q) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	t := lo
	need := int64(q) - below(t)
	var ties []claim
	for _, c := range pieces {
		p0 := c.start - g.base[c.topic]
		k := int32(0)
		if t > p0 {
			k = int32(min(int64(c.n), (int64(t-p0)+int64(c.stride())-1)/int64(c.stride())))
		}
		if k > 0 {
			prefix := c
			prefix.n = k
			out = pushClaim(out, prefix)
		}
		if k < c.n && p0+k*c.stride() == t {
			tie := c
			tie.start, tie.n, tie.gap = c.start+k*c.stride(), 1, 0
			ties = append(ties, tie)
		}
	}
	// Partitions of the same id go by topic name, that is by rank. One
	// partition per topic, the layout of a large group, joins up again into
	// one progression.
	sortByStart(ties)
	for _, c := range ties[:need] {
		out = pushClaim(out, c)
	}
	return out
}

// samePartitionID reports whether every partition of the strided run c has
// the same partition id: its stride is the partition count of every topic
// it spans.
func (g *group) samePartitionID(c *claim) bool {
	if c.contiguous() {
		return false
	}
	if g.sizeRun == nil {
		// sizeRun[r] is the last rank of the stretch from r on whose
		// topics all have r's partition count.
		nt := len(g.byRank)
		g.sizeRun = make([]int32, nt)
		for r := nt - 1; r >= 0; r-- {
			g.sizeRun[r] = int32(r)
			if r+1 < nt && g.partitions(int32(r)) == g.partitions(int32(r+1)) {
				g.sizeRun[r] = g.sizeRun[r+1]
			}
		}
	}
	r := g.topicAt(c.start)
	return g.partitions(r) == c.stride() && g.topicAt(c.last()) <= g.sizeRun[r]
}

// freeByResidues is freeByBits for the common case after Kafka's round
// robin: the topics ranks are consecutive and every kept run of more than
// one partition has the same stride s. Each residue class modulo s is then
// a chain of its own, and what is free in it are the gaps between its kept
// runs. It reports false when that does not apply, or when the free
// progressions of different classes interleave (free partitions then are
// no longer a list of runs in partition order, which dealing needs).
func (g *group) freeByResidues(kept []claim, ranks []int32) ([]claim, bool) {
	s, ok := commonStride(kept)
	if !ok || int64(s) > 4*int64(len(kept))+64 || len(ranks) == 0 {
		return nil, false
	}
	for i, r := range ranks {
		if r != ranks[0]+int32(i) {
			return nil, false
		}
	}
	lo, hi := g.base[ranks[0]], g.base[ranks[len(ranks)-1]+1]
	keys := residueOrder(kept, s)
	var free []claim
	gap := func(from, to int32) { // the chain's partitions in [from, to)
		if from < to {
			free = append(free, claim{start: from, n: (to-from-1)/s + 1, gap: s - 1, member: -1})
		}
	}
	k := 0
	for r := range s {
		at := lo + ((r-lo%s)%s+s)%s // the class's first partition
		for ; k < len(keys) && int32(keys[k]>>32) == r; k++ {
			c := &kept[uint32(keys[k])]
			gap(at, c.start)
			at = c.last() + s
		}
		gap(at, hi)
	}
	sortByStart(free)
	for i := range free {
		c := &free[i]
		if c.n == 1 {
			c.gap = 0
		}
		c.topic = g.topicAt(c.start)
		if i > 0 && free[i-1].last() > c.start {
			return nil, false
		}
	}
	return free, true
}

// freeByBits returns the runs of the topics ranks that no run of kept covers,
// sorted by start, found through a bit set: kept may be strided, and what
// is left between interleaved progressions is no simple difference of
// intervals. Single free partitions at equal distances are joined into one
// strided run.
func (g *group) freeByBits(kept []claim, ranks []int32) []claim {
	bits := newBitset(g.base[len(g.byRank)])
	for i := range kept {
		bits.mark(&kept[i])
	}
	var out []claim
	for _, r := range ranks {
		x, end := g.base[r], g.base[r+1]
		for x < end {
			from := bits.next(x, end, false)
			if from == end {
				break
			}
			to := bits.next(from, end, true)
			out = pushClaim(out, claim{start: from, n: to - from, member: -1, topic: r})
			x = to
		}
	}
	return out
}

// next returns the first x' in [x, end) whose bit is set (set) or clear
// (!set), or end.
func (b bitset) next(x, end int32, set bool) int32 {
	for x < end {
		w := b[x>>6]
		if !set {
			w = ^w
		}
		w &= ^uint64(0) << uint(x&63)
		if w != 0 {
			return min(end, x&^63+int32(bits.TrailingZeros64(w)))
		}
		x = x&^63 + 64
	}
	return end
}

// universeGaps appends to dst the runs of the topics ranks (ascending) that
// no run of kept (sorted by start, within those topics) covers.
func (g *group) universeGaps(kept []claim, ranks []int32, dst []claim) []claim {
	i := 0
	for _, r := range ranks {
		j := upTo(kept, i, g.base[r+1])
		dst = gaps(kept[i:j], g.base[r], g.base[r+1], dst)
		i = j
	}
	return dst
}

// bucketByMember groups runs by member, keeping their order within each
// member: with pos nil, member m's runs are out[start[m]:start[m+1]]; else
// bucket pos[m] (below n) holds them.
func bucketByMember(runs []claim, n int32, pos []int32) (out []claim, start []int32) {
	bucket := func(m int32) int32 {
		if pos != nil {
			return pos[m]
		}
		return m
	}
	start = make([]int32, n+1)
	for i := range runs {
		start[bucket(runs[i].member)+1]++
	}
	for b := range n {
		start[b+1] += start[b]
	}
	out = make([]claim, len(runs))
	next := make([]int32, n)
	copy(next, start[:n])
	for _, c := range runs {
		b := bucket(c.member)
		out[next[b]] = c
		next[b]++
	}
	return out, start
}

// gaps appends to dst the runs of [from, to) that no run of kept (sorted by
// start, not overlapping, within [from, to)) covers.
func gaps(kept []claim, from, to int32, dst []claim) []claim {
	at := from
	for i := range kept {
		if kept[i].start > at {
			dst = append(dst, claim{start: at, n: kept[i].start - at, member: -1})
		}
		at = kept[i].end()
	}
	if at < to {
		dst = append(dst, claim{start: at, n: to - at, member: -1})
	}
	return dst
}

// mergeFree sorts free runs by start and joins neighbours.
func mergeFree(runs []claim) []claim {
	sortByStart(runs)
	out := runs[:0]
	for _, c := range runs {
		if k := len(out) - 1; k >= 0 && out[k].end() == c.start {
			out[k].n += c.n
			continue
		}
		out = append(out, c)
	}
	return out
}

// splitByRack splits kept runs into the partitions whose replicas are on
// their owner's rack and those that are not. Both keep start order, and
// every other field of the runs.
func (g *group) splitByRack(kept []claim, rk *racks) (match, mismatch []claim) {
	match = make([]claim, 0, len(kept))
	for _, c := range kept {
		if rk.member[c.member] < 0 {
			match = append(match, c)
			continue
		}
		p0 := c.start - g.base[c.topic]
		for i := int32(0); i < c.n; {
			ok := rk.matches(c.member, g.replicaSet(c.topic, p0+i))
			j := i + 1
			for j < c.n && rk.matches(c.member, g.replicaSet(c.topic, p0+j)) == ok {
				j++
			}
			piece := c
			piece.start, piece.n = c.start+i, j-i
			if ok {
				match = append(match, piece)
			} else {
				mismatch = append(mismatch, piece)
			}
			i = j
		}
	}
	return match, mismatch
}

// freePartition is one free partition in rack mode: its global number, the
// member that owned it before rack alignment took it away (-1 for none), and
// who it goes to (-1 until decided).
type freePartition struct {
	x, owner, to int32
	set          int32 // replica set, -1 without placement
}

// expandFree lists the partitions of the free runs (sorted by start, not
// interleaved, so that their partitions come in ascending order) one by one,
// tagged with the member that owned them when they come from mismatched
// (contiguous runs sorted by start, within free).
func (g *group) expandFree(free, mismatched []claim) []freePartition {
	size := 0
	for i := range free {
		size += int(free[i].n)
	}
	out := make([]freePartition, 0, size)
	j := 0
	r := int32(0)
	for _, c := range free {
		x, stride := c.start, c.stride()
		for i := int32(0); i < c.n; i, x = i+1, x+stride {
			for j < len(mismatched) && mismatched[j].end() <= x {
				j++
			}
			owner := int32(-1)
			if j < len(mismatched) && mismatched[j].start <= x {
				owner = mismatched[j].member
			}
			for g.base[r+1] <= x {
				r++
			}
			out = append(out, freePartition{x: x, owner: owner, to: -1, set: g.replicaSet(r, x-g.base[r])})
		}
	}
	return out
}

// fillUniformRacks hands out the free partitions of a uniform group in rack
// mode as Kafka's assignRackAwareRoundRobin and then assignRoundRobin do,
// one partition at a time: partitions with the fewest rack-matching members
// first, each to the next member on one of its racks in the circular list
// of members below the minimum, else to the first such member among those
// at the minimum while extra slots remain; what no rack-matching member
// takes is then dealt as deal does. out holds the kept runs; keep is what
// each member kept.
func (g *group) fillUniformRacks(out, free []claim, members []int32, d *dealing, keep []int32, rk *racks) []claim {
	parts := g.expandFree(free, nil)
	order, _ := rk.byCandidates(parts)
	count := g.memberScratch().count
	for _, m := range members {
		count[m] = keep[m]
	}
	maxQ := d.max()
	under, atMin, over := newRackList(rk, d.under), newRackList(rk, d.atMin), d.over
	next := 0
	for _, i := range order {
		p := &parts[i]
		m := int32(-1)
		if idx := under.next(p.set, next); idx >= 0 {
			m = under.members[idx]
			if count[m]+1 >= d.min {
				under.delete(idx)
				if count[m]+1 < maxQ && over < d.slots {
					atMin.add(m)
				}
			} else {
				idx++
			}
			next = 0
			if len(under.members) > 0 {
				next = idx % len(under.members)
			}
		} else if len(atMin.members) > 0 {
			if idx := atMin.next(p.set, 0); idx >= 0 {
				m = atMin.members[idx]
				if count[m]+1 == maxQ {
					atMin.delete(idx)
					over++
					if over == d.slots {
						atMin.clear()
					}
				}
			}
		}
		if m >= 0 {
			p.to = m
			count[m]++
		}
	}
	// assignRoundRobin over what is left, in the same order.
	it := 0
	unders, mins := under.members, atMin.members
	for _, i := range order {
		p := &parts[i]
		if p.to >= 0 {
			continue
		}
		var m int32
		fromUnder := true
		switch {
		case it < len(unders):
			m = unders[it]
			it++
		case len(unders) > 0:
			m = unders[0]
			it = 1
		case len(mins) > 0:
			m = mins[0]
			mins = mins[1:]
			fromUnder = false
		default:
			// Kafka fails here; quotas add up, so it cannot happen.
			m = members[0]
			fromUnder = false
		}
		p.to = m
		count[m]++
		if fromUnder && count[m] == d.min {
			it--
			unders = slices.Delete(unders, it, it+1)
			mins = append(mins, m)
		}
	}
	for i := range parts {
		out = append(out, claim{start: parts[i].x, n: 1, member: parts[i].to})
	}
	return out
}

// rackList is one of Kafka's lists of unfilled members in rack mode, with
// how many of them are on each consumer rack, so that a partition no member
// of the list could take costs no scan.
type rackList struct {
	rk      *racks
	members []int32
	onRack  []int32
}

func newRackList(rk *racks, members []int32) *rackList {
	l := &rackList{rk: rk, onRack: make([]int32, rk.consumerRacks)}
	for _, m := range members {
		l.add(m)
	}
	return l
}

func (l *rackList) add(m int32) {
	l.members = append(l.members, m)
	if k := l.rk.member[m]; k >= 0 {
		l.onRack[k]++
	}
}

func (l *rackList) delete(i int) {
	if k := l.rk.member[l.members[i]]; k >= 0 {
		l.onRack[k]--
	}
	l.members = slices.Delete(l.members, i, i+1)
}

func (l *rackList) clear() {
	l.members = l.members[:0]
	clear(l.onRack)
}

// next is Kafka's RackInfo.nextRackConsumer over the list: the index of the
// first member, from first on and wrapping around, on one of the racks of
// replica set s; -1 when there is none.
func (l *rackList) next(s int32, first int) int {
	some := false
	l.rk.eachRack(s, func(k int32) { some = some || l.onRack[k] > 0 })
	if !some {
		return -1
	}
	return l.rk.nextOnRack(s, l.members, first)
}

// countingOrder returns the indices of keys (each >= 0) sorted by key, ties
// in index order.
func countingOrder(keys []int32) []int32 {
	limit := int32(0)
	for _, k := range keys {
		limit = max(limit, k)
	}
	start := make([]int32, limit+2)
	for _, k := range keys {
		start[k+1]++
	}
	for i := int32(1); i < int32(len(start)); i++ {
		start[i] += start[i-1]
	}
	out := make([]int32, len(keys))
	for i, k := range keys {
		out[start[k]] = int32(i)
		start[k]++
	}
	return out
}

// rackQueues are, per consumer rack, the members on it in member order, with
// how many partitions each may still take and how many all of them may.
type rackQueues struct {
	members [][]int32 // per rack, in member order
	head    []int
	left    []int32 // per rack: sum of room
	room    []int32 // per member
}

// newRackQueues builds the queues over the members of order that have a
// rack. Their room lives in the rack info's group-wide array, which only
// one set of queues uses at a time.
func newRackQueues(rk *racks, order []int32) *rackQueues {
	if rk.room == nil {
		rk.room = make([]int32, len(rk.member))
	}
	q := &rackQueues{
		members: make([][]int32, rk.consumerRacks),
		head:    make([]int, rk.consumerRacks),
		left:    make([]int32, rk.consumerRacks),
		room:    rk.room,
	}
	for _, m := range order {
		if k := rk.member[m]; k >= 0 {
			q.members[k] = append(q.members[k], m)
		}
	}
	return q
}

// reset sets every member's room, and rewinds the queues.
func (q *rackQueues) reset(room func(m int32) int32) {
	for k, ms := range q.members {
		q.head[k] = 0
		q.left[k] = 0
		for _, m := range ms {
			q.room[m] = room(m)
			q.left[k] += q.room[m]
		}
	}
}

// matchRacks is Kafka's rack-matching pass: it visits parts in order (see
// racks.byCandidates) and gives each one that has candidates and no taker
// yet to a member with room on one of its racks (see pick), telling took.
// It stops when took returns false.
func (q *rackQueues) matchRacks(rk *racks, parts []freePartition, order, cands []int32, took func(m int32) bool) {
	for _, i := range order {
		p := &parts[i]
		if p.to >= 0 || cands[i] == 0 {
			continue
		}
		if m := q.pick(rk, p.set); m >= 0 {
			p.to = m
			if !took(m) {
				return
			}
		}
	}
}

// pick returns the next member with room on the rack of replica set s that
// has the most room left, and takes one unit of its room; -1 when none has.
func (q *rackQueues) pick(rk *racks, s int32) int32 {
	best := int32(-1)
	rk.eachRack(s, func(k int32) {
		if q.left[k] > 0 && (best < 0 || q.left[k] > q.left[best]) {
			best = k
		}
	})
	if best < 0 {
		return -1
	}
	ms := q.members[best]
	for q.room[ms[q.head[best]]] == 0 {
		q.head[best]++
	}
	m := ms[q.head[best]]
	q.room[m]--
	q.left[best]--
	return m
}

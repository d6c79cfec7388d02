package sticky

// This file is the assignment for groups whose members all subscribe to the
// same topics: Kafka's ConstrainedAssignmentBuilder, reworked to operate on
// runs. With P partitions and M members every member gets P/M partitions,
// and P%M of them one more. Members keep up to their quota of what they own;
// what is left over is laid out in member order as contiguous ranges.

// assignUniform returns the runs each of members (in Kafka's member order)
// is assigned, when all of them subscribe to exactly the topic ranks ranks
// (ascending) and nobody else does. kept are the settled claims of those
// members on those topics, sorted by start; rk is nil outside rack mode.
func (g *group) assignUniform(members, ranks []int32, kept []claim, rk *racks) []claim {
	n := int32(len(members))
	total := int32(0)
	for _, r := range ranks {
		total += g.partitions(r)
	}
	if n == 0 || total == 0 {
		return nil
	}
	q := quotas{min: total / n, slots: total % n}

	var mismatched []claim
	if rk != nil {
		kept, mismatched = g.splitByRack(kept, rk)
	}
	// Per-member state lives in group-wide arrays: components do not share
	// members, so each call only touches its own entries, and a group of
	// many components costs no more than one.
	sc := g.memberScratch()
	count, quota := sc.count, sc.quota
	for _, m := range members {
		count[m] = 0
	}
	for i := range kept {
		count[kept[i].member] += kept[i].n
	}
	// A member that owns more than the minimum keeps one more while Kafka's
	// expected number of members above the minimum is not reached
	// (assignOwnedPartitions); member order decides who, where Kafka leaves
	// it to HashMap order.
	for _, m := range members {
		quota[m] = q.min
		if q.slots > 0 && count[m] > q.min {
			quota[m]++
			q.slots--
		}
	}
	if rk == nil {
		// Without racks the remaining extra partitions may as well be
		// decided now, in member order, so that each member's share is
		// laid out in one go.
		for _, m := range members {
			if q.slots == 0 {
				break
			}
			if quota[m] == q.min {
				quota[m]++
				q.slots--
			}
		}
	}

	for i, m := range members {
		sc.pos[m] = int32(i)
	}
	byMember, start := bucketByMember(kept, n, sc.pos)
	out := make([]claim, 0, len(kept)+int(n))
	pool := g.universeGaps(kept, ranks, nil)
	for i, m := range members {
		runs := byMember[start[i]:start[i+1]]
		left := quota[m]
		for _, c := range runs {
			switch {
			case left >= c.n:
				out = append(out, c)
				left -= c.n
			case left > 0:
				out = append(out, claim{start: c.start, n: left, member: m})
				pool = append(pool, claim{start: c.start + left, n: c.n - left, member: -1})
				left = 0
			default:
				pool = append(pool, claim{start: c.start, n: c.n, member: -1})
			}
		}
		count[m] = quota[m] - left
	}
	pool = mergeFree(pool)

	if rk != nil {
		return g.fillUniformRacks(out, pool, mismatched, members, q, rk)
	}
	cur := cursor{runs: pool}
	for _, m := range members {
		out = cur.take(out, m, quota[m]-count[m])
	}
	return out
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

// quotas are a uniform group's quotas: every member gets min partitions,
// and slots more members get one more.
type quotas struct {
	min, slots int32
}

// cursor hands out partitions of a sorted list of free runs from the front.
type cursor struct {
	runs []claim
	i    int
	off  int32
}

// take appends up to k partitions for member m to out, as runs.
func (c *cursor) take(out []claim, m, k int32) []claim {
	for k > 0 && c.i < len(c.runs) {
		r := &c.runs[c.i]
		d := min(k, r.n-c.off)
		out = append(out, claim{start: r.start + c.off, n: d, member: m})
		k -= d
		c.off += d
		if c.off == r.n {
			c.i++
			c.off = 0
		}
	}
	return out
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

// expandFree lists the partitions of the sorted free runs one by one, tagged
// with the member that owned them when they come from mismatched (sorted,
// within free).
func (g *group) expandFree(free, mismatched []claim) []freePartition {
	size := 0
	for i := range free {
		size += int(free[i].n)
	}
	out := make([]freePartition, 0, size)
	j := 0
	r := int32(0)
	for _, c := range free {
		for x := c.start; x < c.end(); x++ {
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
// mode, as Kafka's assignRackAwareRoundRobin and assignRoundRobin do: first
// to members on a rack of the partition's replicas that are below the
// minimum quota, then to such members at the minimum while extra slots are
// left, then (a partition no rack-matching member took) back to the member
// that owned it if it still has room, and finally to members in order.
func (g *group) fillUniformRacks(out, free, mismatched []claim, members []int32, q quotas, rk *racks) []claim {
	parts := g.expandFree(free, mismatched)
	sc := g.memberScratch()
	count, full := sc.count, sc.full // full: at the maximum, an extra slot taken
	for _, m := range members {
		full[m] = sc.quota[m] > q.min
	}

	byCand, keys := rk.byCandidates(parts)

	queues := newRackQueues(rk, members)
	// Below the minimum first.
	queues.reset(func(m int32) int32 { return max(0, q.min-count[m]) })
	queues.matchRacks(rk, parts, byCand, keys, func(m int32) bool {
		count[m]++
		return true
	})
	// Then one extra each, while extra slots remain.
	if q.slots > 0 {
		queues.reset(func(m int32) int32 {
			if count[m] == q.min && !full[m] {
				return 1
			}
			return 0
		})
		queues.matchRacks(rk, parts, byCand, keys, func(m int32) bool {
			count[m]++
			full[m] = true
			q.slots--
			return q.slots > 0
		})
	}
	room := func(m int32) bool {
		if count[m] < q.min {
			return true
		}
		return count[m] == q.min && !full[m] && q.slots > 0
	}
	take := func(p *freePartition, m int32) {
		p.to = m
		count[m]++
		if count[m] > q.min {
			full[m] = true
			q.slots--
		}
	}
	// Back to the previous owner, for what rack alignment could not place.
	for i := range parts {
		if p := &parts[i]; p.to < 0 && p.owner >= 0 && room(p.owner) {
			take(p, p.owner)
		}
	}
	// The rest in member order: up to the minimum, then the extra slots.
	next := 0
	give := func(m int32, upto int32) {
		for count[m] < upto && next < len(parts) {
			if parts[next].to < 0 {
				take(&parts[next], m)
			}
			next++
		}
	}
	for _, m := range members {
		give(m, q.min)
	}
	for _, m := range members {
		if q.slots == 0 {
			break
		}
		if count[m] == q.min && !full[m] {
			give(m, q.min+1)
		}
	}
	for i := range parts {
		out = append(out, claim{start: parts[i].x, n: 1, member: parts[i].to})
	}
	return out
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

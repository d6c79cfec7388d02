package sticky

import "slices"

// This file is the assignment for groups whose members subscribe to
// different topics: Kafka's GeneralAssignmentBuilder, reworked to balance
// counts per (member, topic) before choosing any partition.
//
// An entry e is one (member, subscribed topic) pair: member m's entries are
// subStart[m] to subStart[m+1]-1, and entry e is for topic rank subs[e].

// general is the state of one general assignment.
type general struct {
	g  *group
	rk *racks

	entryMember []int32 // per entry
	// topicEntries[topicStart[r]:topicStart[r+1]] are the entries of
	// topic rank r, in member order.
	topicStart, topicEntries []int32

	own   []int32 // per entry: partitions kept from what the member owned
	x     []int32 // per entry: partitions planned
	count []int32 // per member: partitions planned in all
	// pre is per entry the member's count when its topic was poured: its
	// load when Kafka's maybeAssign reaches the topic.
	pre []int32
}

// assignGeneral returns the runs each member of in is assigned; the members
// of in and the topics they subscribe to must be closed (nobody else
// subscribes to those topics). kept are their settled claims on those
// topics, sorted by start; rk is nil outside rack mode.
func (g *group) assignGeneral(kept []claim, rk *racks, in []bool) []claim {
	n := int32(len(g.req.Members))
	nt := int32(len(g.byRank))
	if n == 0 || nt == 0 {
		return nil
	}
	s := &general{g: g, rk: rk}
	ne := len(g.subs)
	s.entryMember = make([]int32, ne)
	for m := range n {
		for e := g.subStart[m]; e < g.subStart[m+1]; e++ {
			s.entryMember[e] = m
		}
	}
	s.topicStart = make([]int32, nt+1)
	for m := range n {
		if in[m] {
			for _, r := range g.memberTopics(m) {
				s.topicStart[r+1]++
			}
		}
	}
	for r := range nt {
		s.topicStart[r+1] += s.topicStart[r]
	}
	s.topicEntries = make([]int32, ne)
	next := slices.Clone(s.topicStart[:nt])
	for _, m := range g.order {
		if !in[m] {
			continue
		}
		for e := g.subStart[m]; e < g.subStart[m+1]; e++ {
			r := g.subs[e]
			s.topicEntries[next[r]] = e
			next[r]++
		}
	}

	// Keep what members own of topics they still subscribe to; in rack mode
	// only what is on their rack. claim.gen holds the entry from here on.
	valid := kept[:0]
	for _, c := range kept {
		if e := s.entryOf(c.member, c.topic); e >= 0 {
			c.gen = e
			valid = append(valid, c)
		}
	}
	var mismatched []claim
	if rk != nil {
		valid, mismatched = g.splitByRack(valid, rk)
	}
	s.own = make([]int32, ne)
	s.x = make([]int32, ne)
	s.pre = make([]int32, ne)
	s.count = make([]int32, n)
	free := make([]int32, nt)
	for r := range nt {
		if s.subscribers(r) > 0 {
			free[r] = g.partitions(r)
		}
	}
	for _, c := range valid {
		s.own[c.gen] += c.n
		s.count[c.member] += c.n
		free[c.topic] -= c.n
	}
	copy(s.x, s.own)

	// Pour the free partitions of each topic onto its least-loaded
	// subscribers, topics with the fewest subscribers first (Kafka's
	// TopicComparator order for sortedAllPartitions). In rack mode each
	// free partition first goes to the least-loaded subscriber on one of
	// its racks, as Kafka's rack-matching maybeAssign pass does; only what
	// no such subscriber can take is poured.
	topics := make([]int32, nt)
	for r := range topics {
		topics[r] = int32(r)
	}
	slices.SortStableFunc(topics, func(a, b int32) int {
		return int(s.subscribers(a) - s.subscribers(b))
	})
	var fresh []claim
	if rk != nil {
		fresh = s.rackFill(topics, valid, free)
	}
	var scratch []uint64
	for _, r := range topics {
		scratch = s.pour(r, free[r], scratch)
	}
	s.balance(topics)
	return s.materialize(valid, fresh, mismatched)
}

// subscribers returns the number of members subscribed to rank r.
func (s *general) subscribers(r int32) int32 {
	return s.topicStart[r+1] - s.topicStart[r]
}

// entryOf returns member m's entry for rank r, or -1 when m does not
// subscribe to it.
func (s *general) entryOf(m, r int32) int32 {
	subs := s.g.memberTopics(m)
	if i, ok := slices.BinarySearch(subs, r); ok {
		return s.g.subStart[m] + int32(i)
	}
	return -1
}

// pour gives u more partitions of rank r to its subscribers, raising the
// least-loaded ones to a common level (water filling), as Kafka's
// maybeAssign does one partition at a time: each goes to the least-loaded
// subscriber, ties in member order.
func (s *general) pour(r, u int32, keys []uint64) []uint64 {
	ents := s.topicEntries[s.topicStart[r]:s.topicStart[r+1]]
	for _, e := range ents {
		s.pre[e] = s.count[s.entryMember[e]]
	}
	if u <= 0 || len(ents) == 0 {
		return keys
	}
	keys = keys[:0]
	for i, e := range ents {
		keys = append(keys, uint64(s.count[s.entryMember[e]])<<32|uint64(i))
	}
	slices.Sort(keys)
	// Raise the first k to a level between keys[k-1] and keys[k].
	sum := int64(keys[0] >> 32)
	k := 1
	for k < len(keys) {
		next := int64(keys[k] >> 32)
		if next*int64(k)-sum >= int64(u) {
			break
		}
		sum += next
		k++
	}
	level, rem := (int64(u)+sum)/int64(k), (int64(u)+sum)%int64(k)
	// Once all k are at the level, the rem partitions left go to the
	// first of them in member order.
	first := keys[:k]
	for i := range first {
		first[i] = uint64(uint32(first[i]))
	}
	slices.Sort(first)
	for i := range k {
		e := ents[uint32(keys[i])]
		m := s.entryMember[e]
		add := int32(level) - s.count[m]
		if int64(i) < rem {
			add++
		}
		s.x[e] += add
		s.count[m] += add
	}
	return keys
}

// balance moves partitions, topic by topic, from the most-loaded member
// holding some to the least-loaded subscriber while they differ by two or
// more, until no topic can improve: Kafka's isBalanced. Each move lowers
// the sum of squared counts, so it ends. A topic is looked at again only
// when one of its subscribers' count changed.
func (s *general) balance(order []int32) {
	g := s.g
	nt := len(g.byRank)
	queue := make([]int32, nt) // a ring: each topic is in it at most once
	inQueue := make([]bool, nt)
	copy(queue, order)
	for _, r := range order {
		inQueue[r] = true
	}
	head, size := 0, nt
	touched := make([]bool, len(s.count))
	var changed []int32
	for size > 0 {
		r := queue[head]
		head = (head + 1) % nt
		size--
		inQueue[r] = false
		changed = s.balanceTopic(r, touched, changed[:0])
		for _, m := range changed {
			touched[m] = false
			for _, t := range g.memberTopics(m) {
				if !inQueue[t] {
					inQueue[t] = true
					queue[(head+size)%nt] = t
					size++
				}
			}
		}
	}
}

// balanceTopic balances rank r against its subscribers' current counts and
// appends the members whose count changed to changed.
func (s *general) balanceTopic(r int32, touched []bool, changed []int32) []int32 {
	ents := s.topicEntries[s.topicStart[r]:s.topicStart[r+1]]
	if len(ents) < 2 {
		return changed
	}
	for {
		lo, hi := s.extremes(ents)
		if hi < 0 {
			return changed
		}
		lm, hm := s.entryMember[lo], s.entryMember[hi]
		if s.count[hm] < s.count[lm]+2 {
			return changed
		}
		s.x[hi]--
		s.count[hm]--
		s.x[lo]++
		s.count[lm]++
		for _, m := range [2]int32{lm, hm} {
			if !touched[m] {
				touched[m] = true
				changed = append(changed, m)
			}
		}
	}
}

// extremes returns the least-loaded subscriber among ents (first in member
// order on ties) and the most-loaded one holding a partition of the topic,
// preferring on ties one that holds more than it kept, so that what moves
// is what it was only just given; hi is -1 when nobody holds any.
//
//go:noinline
func (s *general) extremes(ents []int32) (lo, hi int32) {
	count, x, own, em := s.count, s.x, s.own, s.entryMember
	lo, hi = ents[0], -1
	loC, hiC := count[em[lo]], int32(-1)
	hiFresh := false
	for _, e := range ents {
		c := count[em[e]]
		if c < loC {
			lo, loC = e, c
		}
		if x[e] == 0 {
			continue
		}
		fresh := x[e] > own[e]
		if c > hiC || (c == hiC && fresh && !hiFresh) {
			hi, hiC, hiFresh = e, c, fresh
		}
	}
	return lo, hi
}

// materialize chooses the partitions. Per topic, a member whose plan is
// smaller than what it holds keeps what it owned before the partitions it
// was only just given (rack mode), each in partition order, and frees the
// rest; members whose plan is larger take the free partitions as Kafka's
// maybeAssign deals them (in rack mode, rack-matching members first, then
// previous owners, then members in order). valid are
// the kept owned runs and fresh the partitions rack mode handed out, both
// sorted by start and with the entry in gen.
func (s *general) materialize(valid, fresh, mismatched []claim) []claim {
	g := s.g
	out := make([]claim, 0, len(valid)+len(fresh)+len(s.x))
	left := make([]int32, len(s.x)) // per entry: still to keep
	copy(left, s.x)
	var pool, held []claim
	var ms, join, leave []int32
	vi, fi, mi := 0, 0, 0
	keep := func(runs []claim) {
		for _, c := range runs {
			e := c.gen
			k := min(left[e], c.n)
			if k > 0 {
				out = append(out, claim{start: c.start, n: k, member: c.member})
				left[e] -= k
			}
			if k < c.n {
				pool = append(pool, claim{start: c.start + k, n: c.n - k, member: -1})
			}
		}
	}
	for r := range int32(len(g.byRank)) {
		if s.subscribers(r) == 0 {
			continue // another component's
		}
		lo, hi := g.base[r], g.base[r+1]
		vi, fi, mi = upTo(valid, vi, lo), upTo(fresh, fi, lo), upTo(mismatched, mi, lo)
		vj, fj, mj := upTo(valid, vi, hi), upTo(fresh, fi, hi), upTo(mismatched, mi, hi)
		held = append(append(held[:0], valid[vi:vj]...), fresh[fi:fj]...)
		if fj > fi {
			sortByStart(held)
		}
		pool = gaps(held, lo, hi, pool[:0])
		keep(valid[vi:vj])
		keep(fresh[fi:fj])
		pool = mergeFree(pool)
		ents := s.topicEntries[s.topicStart[r]:s.topicStart[r+1]]
		if s.rk == nil {
			// Deal as maybeAssign would from each member's load then.
			ms, join, leave = ms[:0], join[:0], leave[:0]
			for _, e := range ents {
				if left[e] > 0 {
					ms = append(ms, s.entryMember[e])
					join = append(join, s.pre[e])
					leave = append(leave, s.pre[e]+left[e])
				}
			}
			out, _ = newFreeCursor(pool).dealRounds(out, ms, join, leave)
		} else {
			out = s.placeRacks(out, r, pool, mismatched[mi:mj], ents, left)
		}
		vi, fi, mi = vj, fj, mj
	}
	return out
}

// upTo returns the end of the runs of cs, from i on, that start before hi.
func upTo(cs []claim, i int, hi int32) int {
	for i < len(cs) && cs[i].start < hi {
		i++
	}
	return i
}

// placeRacks hands the free partitions of rank r to the entries with room
// left in rack mode: rack-matching members first (partitions with the
// fewest candidates first), then the member that owned a partition before
// rack alignment took it, then members in order.
func (s *general) placeRacks(out []claim, r int32, pool, mismatched []claim, ents, left []int32) []claim {
	g, rk := s.g, s.rk
	parts := g.expandFree(pool, mismatched)
	if len(parts) == 0 {
		return out
	}
	byCand, keys := rk.byCandidates(parts)
	members := make([]int32, 0, len(ents))
	for _, e := range ents {
		if left[e] > 0 {
			members = append(members, s.entryMember[e])
		}
	}
	entry := func(m int32) int32 { return s.entryOf(m, r) }
	queues := newRackQueues(rk, members)
	queues.reset(func(m int32) int32 { return left[entry(m)] })
	queues.matchRacks(rk, parts, byCand, keys, func(m int32) bool {
		left[entry(m)]--
		return true
	})
	for i := range parts {
		if p := &parts[i]; p.to < 0 && p.owner >= 0 {
			if e := entry(p.owner); e >= 0 && left[e] > 0 {
				p.to = p.owner
				left[e]--
			}
		}
	}
	next := 0
	for _, e := range ents {
		for left[e] > 0 && next < len(parts) {
			if parts[next].to < 0 {
				parts[next].to = s.entryMember[e]
				left[e]--
			}
			next++
		}
	}
	for i := range parts {
		out = append(out, claim{start: parts[i].x, n: 1, member: parts[i].to})
	}
	return out
}

// rackFill hands each free partition, topic by topic in the given order, to
// the least-loaded subscriber (ties in member order) on one of the racks of
// its replicas, or without a rack, as Kafka's maybeAssign does with rack
// matching. It lowers free by what it hands out and returns those
// partitions as runs of one, sorted by start, with the entry in gen.
func (s *general) rackFill(order []int32, valid []claim, free []int32) []claim {
	g, rk := s.g, s.rk
	// The kept runs of each topic, to find its gaps.
	from := make([]int32, len(g.byRank)+1)
	for i := range valid {
		from[valid[i].topic+1]++
	}
	for r := range g.byRank {
		from[r+1] += from[r]
	}
	heaps := make([]minHeap, rk.consumerRacks+1) // the last: members without a rack
	var out []claim
	var gapsBuf []claim
	for _, r := range order {
		if free[r] == 0 {
			continue
		}
		for k := range heaps {
			heaps[k] = heaps[k][:0]
		}
		for _, e := range s.topicEntries[s.topicStart[r]:s.topicStart[r+1]] {
			m := s.entryMember[e]
			k := rk.member[m]
			if k < 0 {
				k = int32(rk.consumerRacks)
			}
			heaps[k].push(uint64(s.count[m])<<32 | uint64(g.rank[m]))
		}
		anyRack := &heaps[rk.consumerRacks]
		gapsBuf = gaps(valid[from[r]:from[r+1]], g.base[r], g.base[r+1], gapsBuf[:0])
		for _, c := range gapsBuf {
			for x := c.start; x < c.end(); x++ {
				set := g.replicaSet(r, x-g.base[r])
				best := anyRack
				rk.eachRack(set, func(k int32) {
					if h := &heaps[k]; len(*h) > 0 && (len(*best) == 0 || (*h)[0] < (*best)[0]) {
						best = h
					}
				})
				if len(*best) == 0 {
					continue
				}
				key := best.pop()
				m := g.order[uint32(key)]
				e := s.entryOf(m, r)
				s.x[e]++
				s.count[m]++
				free[r]--
				best.push(key + 1<<32)
				out = append(out, claim{start: x, n: 1, member: m, gen: e, topic: r})
			}
		}
	}
	sortByStart(out)
	return out
}

// minHeap is a binary min-heap of packed keys.
type minHeap []uint64

func (h *minHeap) push(v uint64) {
	*h = append(*h, v)
	a := *h
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if a[p] <= a[i] {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *minHeap) pop() uint64 {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		if r := l + 1; r < n && a[r] < a[l] {
			l = r
		}
		if a[i] <= a[l] {
			break
		}
		a[i], a[l] = a[l], a[i]
		i = l
	}
	*h = a
	return top
}

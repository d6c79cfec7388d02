package sticky

import "slices"

// This file is the assignment for groups whose members do not all send the
// same subscription: Kafka's GeneralAssignmentBuilder, restated partition
// by partition so that it makes the same choices in the same order.
//
// Kafka's rules, in the order it applies them:
//
//  1. Each member keeps the owned partitions of topics it still subscribes
//     to (in rack mode, only those with a replica on its rack, or all of
//     them for a member without a rack). Dropping any other owned partition
//     means a revocation is required.
//  2. Partitions are listed topic by topic, topics with fewer subscribers
//     first, then by name; partitions by id. The ones nobody kept are dealt
//     in that order, each to the first member, by (partitions held, member
//     id), that subscribes to its topic. In rack mode a first pass deals
//     only to members on one of the partition's replica racks (or without
//     a rack), and a second pass deals what is left without that rule.
//  3. Topics with one subscriber, and members that hold everything they
//     could and nothing of a topic with two or more subscribers, take no
//     further part.
//  4. Unless a revocation is required, the partitions just dealt are
//     walked, then (whatever happened) all partitions are walked, in the
//     order of rule 2, each walk repeated while it moved something. Before
//     each partition the walk stops if the group is balanced (Kafka's
//     isBalanced). A partition whose previous-generation owner holds two or
//     more fewer partitions than its holder goes back to it; otherwise, if
//     some subscriber of its topic holds two or more fewer than its holder,
//     it goes to the first subscriber by (partitions held, member id).
//     When an earlier move in this rebalance took a partition of the same
//     topic the opposite way (from the new holder to the partition's
//     original holder), that partition moves back instead, the one a Java
//     HashSet would iterate first, so that no two-cycle forms.
//     Deliberately unlike Kafka, when a pass starts in the state an
//     earlier pass started in (Kafka would repeat that cycle for ever),
//     such a reversal is from then on taken only when the partition it
//     moves back is held by the member giving one up (see walk).
//  5. If some member kept something, and the walks moved partitions without
//     lowering the sum of the pairwise differences of the members' counts,
//     every move of step 4 is undone.
//
// Kafka's rack-aware check in step 4 prefers a subscriber on the
// partition's rack only to decide whether to move it; the destination is
// the same either way, so it has no effect and is not restated.

// general is the state of one general assignment.
type general struct {
	g  *group
	rk *racks

	holder []int32 // per global partition: the member holding it, or -1
	prev   []int32 // per global partition: Kafka's prevAssignment, or -1; nil when empty
	size   []int32 // per member: partitions held
	most   []int32 // per member: partitions of the topics it subscribes to
	// held[entry[m]+i] counts the partitions member m holds of its i-th
	// subscribed topic.
	entry, held []int32
	subs        []int32 // per rank: number of subscribers
	// bits[m*words:(m+1)*words] has bit r set when member m subscribes to
	// rank r: the member scans ask that of every member they pass. Nil
	// for groups too large for it, which then search the member's list.
	bits  []uint64
	words int
	// memberList[memberStart[r]:memberStart[r+1]] are rank r's
	// subscribers.
	memberStart, memberList []int32
	fixed                   []bool // per member: takes no part in step 4
	set                     *memberSet

	// order lists the ranks in Kafka's partition order (rule 2).
	order []int32

	// moved[x] is the member partition x was first taken from in this
	// rebalance, or -1; moves are the partitions that went from one member
	// to another per (topic, from, to): Kafka's PartitionMovements.
	moved []int32
	moves map[moveKey]*javaHashSet
	// off counts what members hold of topics they do not subscribe to,
	// per (member, rank); strays is set once that happened (see walk).
	off       map[[2]int32]int32
	strays    bool
	topicHash []int32 // per rank: Java hash code of the topic name
	undo      []int32 // pairs (partition, member it was taken from)
	// cycled is set once a walk came back to a state it had been in,
	// where Kafka would loop for ever (see walk).
	cycled     bool
	version    int32 // counts moves, to cache what depends on counts
	balVersion int32
	balanced   bool
	// Per rank, cached for one version: the first subscriber by (count,
	// member id), and the largest count among members holding some of it.
	minSub, minVer, maxHold, maxVer []int32
}

// rankedPartition is a global partition number with its topic rank.
type rankedPartition struct{ x, r int32 }

// moveKey names the partitions of a topic that moved from one member to
// another.
type moveKey struct{ rank, from, to int32 }

// assignGeneral assigns a group whose members do not all send the same
// subscription, as Kafka's GeneralAssignmentBuilder does; see the
// comment at the top of this file.
func (g *group) assignGeneral(kept []claim, rk *racks) []claim {
	n := int32(len(g.req.Members))
	nt := int32(len(g.byRank))
	if n == 0 || nt == 0 {
		return nil
	}
	total := g.base[nt]
	s := &general{g: g, rk: rk}
	s.size = make([]int32, n)
	s.most = make([]int32, n)
	s.entry = make([]int32, n+1)
	s.subs = make([]int32, nt)
	for m := range n {
		ts := g.memberTopics(m)
		s.entry[m+1] = s.entry[m] + int32(len(ts))
		for _, r := range ts {
			s.subs[r]++
			s.most[m] += g.partitions(r)
		}
	}
	s.held = make([]int32, s.entry[n])
	if s.words = int(nt+63) / 64; int64(n)*int64(s.words) <= 1<<20 {
		s.bits = make([]uint64, int(n)*s.words)
		for m := range n {
			for _, r := range g.memberTopics(m) {
				s.bits[int(m)*s.words+int(r/64)] |= 1 << (r % 64)
			}
		}
	}
	s.holder = make([]int32, total)
	for x := range s.holder {
		s.holder[x] = -1
	}
	s.order = g.allRanks()
	slices.SortStableFunc(s.order, func(a, b int32) int { return int(s.subs[a] - s.subs[b]) })

	// Rule 1.
	revocation := false
	for i := range kept {
		c := &kept[i]
		r := g.topicAt(c.start)
		e := s.entryOf(c.member, r)
		for k := range c.n {
			x := c.start + k*c.stride()
			if x >= g.base[r+1] {
				// A strided run may go on into later topics.
				r = g.topicAt(x)
				e = s.entryOf(c.member, r)
			}
			if e < 0 || (rk != nil && !rk.matches(c.member, g.replicaSet(r, x-g.base[r]))) {
				revocation = true
				continue
			}
			s.holder[x] = c.member
			s.held[e]++
			s.size[c.member]++
		}
	}
	s.prev = g.previousGeneration(s.holder)

	// Rule 2.
	// unassigned lists the partitions nobody kept, each with its rank.
	var unassigned []rankedPartition
	for _, r := range s.order {
		for x := g.base[r]; x < g.base[r+1]; x++ {
			if s.holder[x] < 0 {
				unassigned = append(unassigned, rankedPartition{x, r})
			}
		}
	}
	initializing := true
	for m := range n {
		if s.size[m] > 0 {
			initializing = false
		}
	}
	s.topicMembers()
	if rk != nil {
		s.deal(unassigned, true)
	}
	s.deal(unassigned, false)
	s.set = newMemberSet(s.size, g.rank)
	for m := range n {
		s.set.add(m)
	}

	// Rule 3.
	s.fixed = make([]bool, n)
	for m := range n {
		if !s.participates(m) {
			s.fixed[m] = true
			s.set.remove(m)
		}
	}
	nr := 0
	for _, r := range s.order {
		if s.subs[r] >= 2 {
			s.order[nr] = r
			nr++
		}
	}
	s.order = s.order[:nr]
	fresh := unassigned[:0]
	for _, p := range unassigned {
		if s.subs[p.r] >= 2 {
			fresh = append(fresh, p)
		}
	}

	// Rules 4 and 5.
	s.moves = make(map[moveKey]*javaHashSet)
	s.moved = make([]int32, total)
	for x := range s.moved {
		s.moved[x] = -1
	}
	s.topicHash = make([]int32, nt)
	for r, t := range g.byRank {
		s.topicHash[r] = javaStringHash(g.req.Topics[t].Name)
	}
	s.minSub, s.minVer = make([]int32, nt), make([]int32, nt)
	s.maxHold, s.maxVer = make([]int32, nt), make([]int32, nt)
	for r := range nt {
		s.minVer[r], s.maxVer[r] = -1, -1
	}
	s.balVersion = -1
	before := s.score()
	if !revocation {
		s.walk(func(yield func(x, r int32) bool) {
			for _, p := range fresh {
				if !yield(p.x, p.r) {
					return
				}
			}
		})
	}
	performed := s.walk(func(yield func(x, r int32) bool) {
		for _, r := range s.order {
			for x := g.base[r]; x < g.base[r+1]; x++ {
				if !yield(x, r) {
					return
				}
			}
		}
	})
	if !initializing && performed && s.score() >= before {
		for i := len(s.undo) - 2; i >= 0; i -= 2 {
			s.holder[s.undo[i]] = s.undo[i+1]
		}
	} else if s.strays {
		s.repair()
	}
	return s.runs()
}

// subscribes reports whether member m subscribes to rank r.
func (s *general) subscribes(m, r int32) bool {
	if s.bits != nil {
		i := int(m)*s.words + int(r/64)
		return s.bits[i]&(1<<(r%64)) != 0
	}
	return s.entryOf(m, r) >= 0
}

// entryOf returns the index in held of member m's count for rank r, or -1
// when m does not subscribe to r.
func (s *general) entryOf(m, r int32) int32 {
	if i, ok := slices.BinarySearch(s.g.memberTopics(m), r); ok {
		return s.entry[m] + int32(i)
	}
	return -1
}

// topicMembers lists each rank's subscribers: memberList[memberStart[r]:
// memberStart[r+1]].
func (s *general) topicMembers() {
	g := s.g
	nt := len(g.byRank)
	s.memberStart = make([]int32, nt+1)
	for r := range nt {
		s.memberStart[r+1] = s.memberStart[r] + s.subs[r]
	}
	s.memberList = make([]int32, s.memberStart[nt])
	next := slices.Clone(s.memberStart[:nt])
	for m := range int32(len(s.size)) {
		for _, r := range g.memberTopics(m) {
			s.memberList[next[r]] = m
			next[r]++
		}
	}
}

// deal is one of rule 2's dealing passes over unassigned (grouped by rank,
// in Kafka's order): each partition still free goes to the first member,
// by (count, member id), that subscribes to its topic; in the rack pass
// (onRacks) only to one on a rack of its replicas or without a rack, and
// it stays free when there is none. Only a topic's subscribers can take
// its partitions, and only their counts change while it is dealt, so a
// heap of them per topic (per rack in the rack pass) gives the member
// Kafka's scan of its whole member set finds.
func (s *general) deal(unassigned []rankedPartition, onRacks bool) {
	g, rk := s.g, s.rk
	nh := 1
	if onRacks {
		nh = rk.consumerRacks + 1 // the last: members without a rack
	}
	heaps := make([]minHeap, nh)
	for i := 0; i < len(unassigned); {
		r := unassigned[i].r
		j := i
		for j < len(unassigned) && unassigned[j].r == r {
			j++
		}
		for k := range heaps {
			heaps[k] = heaps[k][:0]
		}
		for _, m := range s.memberList[s.memberStart[r]:s.memberStart[r+1]] {
			k := 0
			if onRacks {
				if k = int(rk.member[m]); k < 0 {
					k = nh - 1
				}
			}
			heaps[k] = append(heaps[k], uint64(s.size[m])<<32|uint64(g.rank[m]))
		}
		for k := range heaps {
			heaps[k].init()
		}
		for _, p := range unassigned[i:j] {
			if s.holder[p.x] >= 0 {
				continue
			}
			h := &heaps[0]
			if onRacks {
				h = &heaps[nh-1]
				rk.eachRack(g.replicaSet(r, p.x-g.base[r]), func(k int32) {
					if c := &heaps[k]; len(*c) > 0 && (len(*h) == 0 || (*c)[0] < (*h)[0]) {
						h = c
					}
				})
			}
			if len(*h) == 0 {
				continue
			}
			m := g.order[uint32((*h)[0])]
			s.holder[p.x] = m
			s.held[s.entryOf(m, r)]++
			s.size[m]++
			(*h)[0] += 1 << 32
			h.down(0)
		}
		i = j
	}
}

// minHeap is a binary min-heap of packed (count, member rank) keys.
type minHeap []uint64

func (h minHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// down restores the heap below i after h[i] grew.
func (h minHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		if r := l + 1; r < len(h) && h[r] < h[l] {
			l = r
		}
		if h[i] <= h[l] {
			return
		}
		h[i], h[l] = h[l], h[i]
		i = l
	}
}

// participates is Kafka's canConsumerParticipateInReassignment: member m
// can still gain partitions, or holds some of a topic with two or more
// subscribers.
func (s *general) participates(m int32) bool {
	if s.size[m] < s.most[m] {
		return true
	}
	ts := s.g.memberTopics(m)
	for i, r := range ts {
		if s.held[s.entry[m]+int32(i)] > 0 && s.subs[r] >= 2 {
			return true
		}
	}
	return false
}

// score is Kafka's getBalanceScore over the members that take part: the
// sum over all pairs of the difference of their counts, in Java int
// arithmetic.
func (s *general) score() int32 {
	var counts []int32
	s.set.ascend(func(m int32) bool {
		counts = append(counts, s.size[m])
		return false
	})
	// counts ascend: member i is above the i before it and below the
	// k-1-i after it.
	var sum int64
	k := int64(len(counts))
	for i, c := range counts {
		sum += int64(c) * (2*int64(i) - k + 1)
	}
	return int32(sum)
}

// walk is Kafka's performReassignments over the partitions parts yields,
// in that order: it reports whether it moved anything.
//
// Kafka repeats the walk while it moves something, and its reversal of
// earlier movements (see reassign) can hand a partition back and forth
// between two members for ever (Kafka 4.4 as well: wanting to move a
// partition from C to B, it moves one back from A to B instead, and on
// the next pass, wanting to move one from C to A, it moves that one back
// from B to A; C keeps its excess). Everything a pass does is decided by
// the holders and the movement records at its start, so a pass that
// starts in the state an earlier pass started in begins a cycle Kafka
// never leaves. Deliberately unlike Kafka, the walk then goes on with
// cycled set for the rest of the rebalance: a reversal is taken only when
// the partition it moves back is held by the member that is to give one
// up, so every move takes a partition from a member holding two or more
// than the one receiving it, the sum of the squared counts falls with
// each, and the walks end (balanced, unless step 5 undoes them, as it
// would Kafka's). The state is saved at the start of
// passes 1, 2, 4, 8, ... and compared at the start of every later pass
// (Brent's cycle detection), which finds any cycle within twice its
// length plus the passes before it, at the cost of two copies and one
// comparison of the holders in the usual walk of two or three passes.
func (s *general) walk(parts func(yield func(x, r int32) bool)) bool {
	performed := false
	var seen walkState
	for pass := 1; ; pass++ {
		if pass > 1 && !s.cycled && s.inState(&seen) {
			s.cycled = true
		}
		if pass&(pass-1) == 0 {
			s.saveState(&seen)
		}
		modified := false
		parts(func(x, r int32) bool {
			if s.isBalanced() {
				return false
			}
			c := s.holder[x]
			if s.prev != nil {
				// Kafka does not check that the previous owner still
				// subscribes to the topic; the partition may then pass
				// through it, and repair settles what stays there. (A
				// previous owner that takes no part in step 4 makes
				// Kafka fail; it is passed over.)
				if p := s.prev[x]; p >= 0 && !s.fixed[p] && s.size[c] > s.size[p]+1 {
					s.reassign(x, r, p)
					performed, modified = true, true
					return true
				}
			}
			if to := s.firstSubscriber(r); to >= 0 && s.size[c] > s.size[to]+1 {
				s.reassign(x, r, to)
				performed, modified = true, true
			}
			return true
		})
		if !modified {
			return performed
		}
	}
}

// walkState is what decides the course of a pass of walk: the holders,
// where each partition was first taken from, and each movement set's
// table size and iteration order.
type walkState struct {
	holder, moved []int32
	moves         map[moveKey]savedMoves
}

// savedMoves is one movement set as walkState keeps it.
type savedMoves struct {
	buckets uint32
	xs      []int32
}

// saveState copies the walk's current state into w.
func (s *general) saveState(w *walkState) {
	w.holder = append(w.holder[:0], s.holder...)
	w.moved = append(w.moved[:0], s.moved...)
	clear(w.moves)
	if w.moves == nil {
		w.moves = make(map[moveKey]savedMoves, len(s.moves))
	}
	for k, set := range s.moves {
		w.moves[k] = savedMoves{set.buckets, set.order()}
	}
}

// inState reports whether the walk is in state w.
func (s *general) inState(w *walkState) bool {
	if !slices.Equal(s.holder, w.holder) || !slices.Equal(s.moved, w.moved) || len(s.moves) != len(w.moves) {
		return false
	}
	for k, saved := range w.moves {
		set := s.moves[k]
		if set == nil || set.buckets != saved.buckets || !set.inOrder(saved.xs) {
			return false
		}
	}
	return true
}

// firstSubscriber returns the first member, by (count, member id), taking
// part in step 4 that subscribes to rank r.
func (s *general) firstSubscriber(r int32) int32 {
	if s.minVer[r] != s.version {
		s.minVer[r] = s.version
		s.minSub[r] = s.set.ascend(func(m int32) bool { return s.subscribes(m, r) })
	}
	return s.minSub[r]
}

// mostHeld returns the largest count among the members taking part that
// hold a partition of rank r, or -1.
func (s *general) mostHeld(r int32) int32 {
	if s.maxVer[r] != s.version {
		s.maxVer[r] = s.version
		m := s.set.descend(func(m int32) bool { return s.holds(m, r) })
		s.maxHold[r] = -1
		if m >= 0 {
			s.maxHold[r] = s.size[m]
		}
	}
	return s.maxHold[r]
}

// isBalanced is Kafka's isBalanced over the members taking part: their
// counts differ by at most one, or no member that could take more
// subscribes to a topic some member holding two or more partitions more
// than it has a partition of.
func (s *general) isBalanced() bool {
	if s.balVersion == s.version {
		return s.balanced
	}
	s.balVersion = s.version
	s.balanced = true
	lo, hi := s.set.first(), s.set.last()
	if lo < 0 || s.size[lo] >= s.size[hi]-1 {
		return true
	}
	top := s.size[hi]
	s.set.ascend(func(m int32) bool {
		if s.size[m] >= top-1 {
			return true // no holder can have two more than m
		}
		if s.size[m] == s.most[m] {
			return false
		}
		for _, r := range s.g.memberTopics(m) {
			if s.mostHeld(r) > s.size[m]+1 {
				s.balanced = false
				return true
			}
		}
		return false
	})
	return s.balanced
}

// reassign is Kafka's reassignPartition: partition x of rank r is to go to
// member to, unless an earlier move took a partition of r from to towards
// x's original holder, in which case that one goes back instead (once the
// walk has cycled, only when x's holder holds it; see walk).
func (s *general) reassign(x, r, to int32) {
	from := s.holder[x]
	if o := s.moved[x]; o >= 0 {
		from = o
	}
	if back := s.moves[moveKey{r, to, from}]; back != nil {
		if y := back.first(); !s.cycled || s.holder[y] == s.holder[x] {
			x = y
		}
	}
	s.move(x, r, to)
}

// move is Kafka's processPartitionMovement: partition x of rank r goes to
// member to, and the movement records follow.
func (s *general) move(x, r, to int32) {
	from := s.holder[x]
	s.set.remove(from)
	s.set.remove(to)
	if o := s.moved[x]; o >= 0 {
		s.forget(moveKey{r, o, from}, x)
		if o != to {
			s.record(moveKey{r, o, to}, x)
		} else {
			s.moved[x] = -1
		}
	} else {
		s.record(moveKey{r, from, to}, x)
		s.moved[x] = from
	}
	s.count(from, r, -1)
	s.count(to, r, 1)
	s.size[from]--
	s.size[to]++
	s.holder[x] = to
	s.undo = append(s.undo, x, from)
	s.set.add(to)
	s.set.add(from)
	s.version++
}

// count adds d to what member m holds of rank r, which m may not
// subscribe to (see walk).
func (s *general) count(m, r, d int32) {
	if e := s.entryOf(m, r); e >= 0 {
		s.held[e] += d
		return
	}
	if s.off == nil {
		s.off = make(map[[2]int32]int32)
	}
	k := [2]int32{m, r}
	if s.off[k] += d; s.off[k] == 0 {
		delete(s.off, k)
	}
	s.strays = true
}

// holds reports whether member m holds a partition of rank r.
func (s *general) holds(m, r int32) bool {
	if e := s.entryOf(m, r); e >= 0 {
		return s.held[e] > 0
	}
	return len(s.off) > 0 && s.off[[2]int32{m, r}] > 0
}

// repair hands every partition held by a member that does not subscribe
// to its topic (Kafka's answer would leave it there) to the first
// subscriber by (count, member id), in Kafka's partition order.
func (s *general) repair() {
	g := s.g
	for _, r := range s.order {
		for x := g.base[r]; x < g.base[r+1]; x++ {
			if c := s.holder[x]; s.entryOf(c, r) < 0 {
				s.moved[x] = -1 // no movement record: this is not Kafka's move
				to := s.firstSubscriber(r)
				s.set.remove(c)
				s.set.remove(to)
				s.count(c, r, -1)
				s.count(to, r, 1)
				s.size[c]--
				s.size[to]++
				s.holder[x] = to
				s.set.add(to)
				s.set.add(c)
				s.version++
			}
		}
	}
}

func (s *general) record(k moveKey, x int32) {
	set := s.moves[k]
	if set == nil {
		set = &javaHashSet{}
		s.moves[k] = set
	}
	set.add(x, tpHash(s.topicHash[k.rank], x-s.g.base[k.rank]))
}

// forget removes x from the movements k; a set left empty is dropped, so
// that the next one starts afresh as Kafka's does.
func (s *general) forget(k moveKey, x int32) {
	if set := s.moves[k]; set != nil {
		set.remove(x)
		if len(set.elems) == 0 {
			delete(s.moves, k)
		}
	}
}

// runs returns the assignment as runs, member by member: each member's
// partitions in ascending order, joined into progressions where they
// continue one (Kafka's dealing gives a member every k-th partition, topic
// after topic), which keeps the response as compact as the uniform path's.
func (s *general) runs() []claim {
	g := s.g
	n := len(s.size)
	start := make([]int32, n+1)
	for _, m := range s.holder {
		if m >= 0 {
			start[m+1]++
		}
	}
	for m := range n {
		start[m+1] += start[m]
	}
	next := slices.Clone(start[:n])
	byMember := make([]rankedPartition, start[n])
	for r := range int32(len(g.byRank)) {
		for x := g.base[r]; x < g.base[r+1]; x++ {
			if m := s.holder[x]; m >= 0 {
				byMember[next[m]] = rankedPartition{x, r}
				next[m]++
			}
		}
	}
	var out []claim
	for m := range int32(n) {
		for _, p := range byMember[start[m]:start[m+1]] {
			out = pushClaim(out, claim{start: p.x, n: 1, member: m, topic: p.r})
		}
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

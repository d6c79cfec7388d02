package sticky

import (
	"encoding/binary"
	"slices"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// claim is a run of partitions that one member says it owns: the n global
// numbers start, start+stride, start+2*stride, ..., claimed in generation
// gen. After settle, the same type holds runs that a member keeps, or is
// assigned, and gen is meaningless.
//
// Kafka deals partitions round robin, so what a member holds is typically an
// arithmetic progression over the global numbering (member i of M holding i,
// i+M, i+2M, ...), often one partition per topic: carrying the stride keeps
// such a holding one run instead of one run per partition.
//
// A contiguous run (stride 1) lies within one topic, topic; a strided run
// may cross topics, and topic is then the rank of its first partition.
// Code that needs runs of one topic cuts them first (unstride,
// appendSplit, appendStridedPieces).
type claim struct {
	start, n int32
	// gap is the stride minus one, so that a claim literal without it is
	// a contiguous run.
	gap    int32
	member int32
	gen    int32
	topic  int32
}

// stride returns the distance between consecutive partitions of the run.
func (c *claim) stride() int32 { return c.gap + 1 }

// last returns the run's last global number.
func (c *claim) last() int32 { return c.start + (c.n-1)*(c.gap+1) }

// end returns the global number just past the run's last partition.
func (c *claim) end() int32 { return c.last() + 1 }

// contiguous reports whether the run has no holes.
func (c *claim) contiguous() bool { return c.gap == 0 || c.n == 1 }

// pushClaim appends c to out, or extends out's last claim when c continues
// it: same member and generation, and c's partitions carry on the last
// claim's progression. Contiguous runs are only joined within one topic.
func pushClaim(out []claim, c claim) []claim {
	if c.n == 1 {
		c.gap = 0
	}
	k := len(out) - 1
	if k < 0 {
		return append(out, c)
	}
	p := &out[k]
	if p.member != c.member || p.gen != c.gen || c.start <= p.last() {
		return append(out, c)
	}
	d := int64(c.start) - int64(p.last())
	switch {
	case p.n == 1 && (c.n == 1 || int64(c.stride()) == d):
	case int64(p.stride()) == d && (c.n == 1 || c.gap == p.gap):
	default:
		return append(out, c)
	}
	if d == 1 && p.topic != c.topic {
		return append(out, c)
	}
	p.gap = int32(d - 1)
	p.n += c.n
	return out
}

// defaultGeneration is Kafka's DEFAULT_GENERATION: the generation of a
// member that did not say.
const defaultGeneration = -1

// claims collects what every member says it owns, cut into runs of
// consecutive partitions, following each assignor's rules for where
// ownership comes from (see the package comment).
func (g *group) claims(cooperative bool) []claim {
	req := g.req
	var out []claim
	if cooperative {
		if anyOwned(req.Members) {
			for m := range req.Members {
				mem := &req.Members[m]
				gen := mem.OwnedGeneration
				if gen < 0 {
					// CooperativeStickyAssignor.memberData: without a v2+
					// generation, the generation is in the user data.
					gen = cooperativeUserDataGeneration(mem.UserData)
				}
				out = g.appendOwned(out, mem.Owned, int32(m), gen)
			}
			return out
		}
		return g.previousClaims(out)
	}
	anyUserData := false
	for m := range req.Members {
		if len(req.Members[m].UserData) > 0 {
			anyUserData = true
			break
		}
	}
	if !anyUserData {
		return g.previousClaims(out)
	}
	names := req.TopicIndex()
	for m := range req.Members {
		if ud := req.Members[m].UserData; len(ud) > 0 {
			out = g.appendStickyUserData(out, ud, int32(m), names)
		}
	}
	return out
}

// previousClaims is the fallback when members report nothing: what the host
// assigned in the previous generation, one generation for all, so that it
// never conflicts with itself.
func (g *group) previousClaims(out []claim) []claim {
	for m := range g.req.Members {
		out = g.appendOwned(out, g.req.Members[m].Previous, int32(m), 0)
	}
	return out
}

// anyOwned reports whether some member reports an owned partition.
func anyOwned(ms []abi.Member) bool {
	for i := range ms {
		for _, tp := range ms[i].Owned {
			if len(tp.Partitions) > 0 {
				return true
			}
		}
	}
	return false
}

// appendOwned appends member m's claims from a topic-partitions list.
// Partitions of topics that cannot be assigned, or that do not exist, are
// skipped.
func (g *group) appendOwned(out []claim, tps []abi.TopicPartitions, m, gen int32) []claim {
	rankOf, base := g.rankOf, g.base
	from := len(out)
	// next is the global number that would continue the member's last
	// claim as a progression of stride step; -1 when there is none.
	next, step := int32(-1), int32(0)
	for i := range tps {
		tp := &tps[i]
		if tp.Topic < 0 {
			// An entry over a topic list (the grouped layout): Kafka's
			// round robin over equal topics makes it one progression.
			out = g.appendOwnedList(out, tp, m, gen)
			next = -1
			if k := len(out) - 1; k >= from {
				if c := &out[k]; c.n > 1 && c.gap > 0 {
					step = c.gap + 1
					next = c.last() + step
				}
			}
			continue
		}
		if uint32(tp.Topic) >= uint32(len(rankOf)) {
			continue
		}
		r := rankOf[tp.Topic]
		parts := tp.Partitions
		if r < 0 || len(parts) == 0 {
			continue
		}
		limit := base[r+1] - base[r]
		if len(parts) == 1 {
			// Kafka's round robin gives a member of a large group one
			// partition of each of many topics: extend the member's last
			// progression in place when the partition continues it.
			p := parts[0]
			if uint32(p) >= uint32(limit) {
				continue
			}
			if base[r]+p == next {
				out[len(out)-1].n++
				next += step
				continue
			}
			out = pushClaim(out, claim{start: base[r] + p, n: 1, member: m, gen: gen, topic: r})
		} else if d, ok := progression(parts, limit); ok {
			// Members usually own one progression per topic (a
			// contiguous range, or Kafka's round-robin share): check that
			// without a branch per partition before cutting it into runs.
			out = pushClaim(out, claim{start: base[r] + parts[0], n: int32(len(parts)), gap: d - 1, member: m, gen: gen, topic: r})
		} else {
			out = appendRuns(out, parts, limit, base[r], m, gen, r)
		}
		next = -1
		if k := len(out) - 1; k >= from {
			if c := &out[k]; c.n > 1 && c.gap > 0 {
				step = c.gap + 1
				next = c.last() + step
			}
		}
	}
	return out
}

// listSpan says where a topic list of the request lies among the ranks:
// when ok, its topics are the n consecutive ranks from r0, and each has
// size partitions.
type listSpan struct {
	r0, n, size int32
	ok          bool
}

// span returns the span of the request's topic list k, worked out once per
// list: lists are shared by every member whose entries refer to them.
func (g *group) span(k int32) listSpan {
	if g.spans == nil {
		g.spans = make([]listSpan, len(g.req.TopicLists))
		g.spanDone = make([]bool, len(g.req.TopicLists))
	}
	if g.spanDone[k] {
		return g.spans[k]
	}
	g.spanDone[k] = true
	l := g.req.TopicLists[k] // the decoder refuses empty lists
	r0 := g.rankOf[l[0]]
	if r0 < 0 {
		return listSpan{}
	}
	size := g.partitions(r0)
	for i, t := range l {
		if r := g.rankOf[t]; r != r0+int32(i) || g.partitions(r) != size {
			return listSpan{}
		}
	}
	g.spans[k] = listSpan{r0: r0, n: int32(len(l)), size: size, ok: true}
	return g.spans[k]
}

// appendOwnedList appends member m's claims from an entry over a topic
// list. The usual entry, one partition of each of equally large topics
// with consecutive ranks, is one progression whose stride is the topic
// size; anything else is read topic by topic.
func (g *group) appendOwnedList(out []claim, tp *abi.TopicPartitions, m, gen int32) []claim {
	k := ^tp.Topic
	if int(k) >= len(g.req.TopicLists) || len(tp.Partitions) == 0 {
		return out
	}
	// Kafka's round robin deals member i of M the partitions i, i+M, ...
	// of every topic: when M divides the topic size, the entry's
	// progression p0, p0+d, ... with len*d = size continues from topic to
	// topic, so the whole list is one progression of stride d. A stride
	// of one would make it contiguous across topics, which claims never
	// are.
	if sp := g.span(k); sp.ok {
		parts := tp.Partitions
		d, ok := sp.size, uint32(parts[0]) < uint32(sp.size) // one partition per topic
		if len(parts) > 1 {
			d, ok = progression(parts, sp.size)
			ok = ok && int64(len(parts))*int64(d) == int64(sp.size)
		}
		if ok && d > 1 && parts[0] < d {
			c := claim{start: g.base[sp.r0] + parts[0], n: sp.n * int32(len(parts)), gap: d - 1, member: m, gen: gen, topic: sp.r0}
			return pushClaim(out, c)
		}
	}
	l := g.req.TopicLists[k]
	each := make([]abi.TopicPartitions, len(l))
	for i, t := range l {
		each[i] = abi.TopicPartitions{Topic: t, Partitions: tp.Partitions}
	}
	return g.appendOwned(out, each, m, gen)
}

// appendRuns cuts parts into runs of consecutive ids below limit and appends
// them as claims; ids out of range are skipped.
//
//go:noinline
func appendRuns(dst []claim, parts []int32, limit, base, member, gen, topic int32) []claim {
	for i := 0; i < len(parts); {
		p := parts[i]
		i++
		if uint32(p) >= uint32(limit) {
			continue
		}
		j := i + runLength(parts[i:], p+1, limit)
		dst = pushClaim(dst, claim{start: base + p, n: int32(j - i + 1), member: member, gen: gen, topic: topic})
		i = j
	}
	return dst
}

// progression reports whether parts (not empty) is p0, p0+d, p0+2d, ...
// with d = parts[1]-parts[0] > 0 (1 for a single partition), all within
// [0, limit), and returns d.
func progression(parts []int32, limit int32) (int32, bool) {
	p0, d := parts[0], int32(1)
	if len(parts) > 1 {
		d = parts[1] - p0
	}
	// Within these bounds no p0+i*d wraps around, so comparing modulo
	// 2^32 is exact.
	if p0 < 0 || d <= 0 || int64(p0)+int64(len(parts)-1)*int64(d) >= int64(limit) {
		return 0, false
	}
	return d, strided(parts, p0, d)
}

// strided reports whether parts is p0, p0+d, p0+2d, and so on.
//
//go:noinline
func strided(parts []int32, p0, d int32) bool {
	var diff int32
	at := p0
	for _, p := range parts {
		diff |= p ^ at
		at += d
	}
	return diff == 0
}

// runLength returns how many leading elements of parts continue the run
// next, next+1, ... below limit.
//
//go:noinline
func runLength(parts []int32, next, limit int32) int {
	n := min(len(parts), int(limit-next))
	if n <= 0 {
		return 0
	}
	parts = parts[:n]
	for i, p := range parts {
		if p != next+int32(i) {
			return i
		}
	}
	return n
}

// cooperativeUserDataGeneration reads CooperativeStickyAssignor's user data:
// one big-endian int32 generation. Kafka reads it with a schema that ignores
// trailing bytes, returns no generation for no user data and
// DEFAULT_GENERATION for user data it cannot read; both count as -1 here.
func cooperativeUserDataGeneration(ud []byte) int32 {
	if len(ud) < 4 {
		return defaultGeneration
	}
	return int32(binary.BigEndian.Uint32(ud))
}

// appendStickyUserData appends the claims of StickyAssignor user data:
//
//	previous_assignment: [ {topic: int16-length string, partitions: [int32]} ]
//	generation: int32    (v1 only)
//
// in Kafka's big-endian protocol encoding. Kafka reads it as v1 and falls
// back to v0 when that fails, and neither schema minds trailing bytes, so
// four or more bytes after the array are a v1 generation and fewer mean v0,
// with generation -1. User data that does not decode as either yields no
// claims at all.
func (g *group) appendStickyUserData(out []claim, ud []byte, m int32, names map[string]int32) []claim {
	from := len(out)
	r := beReader{b: ud, ok: true}
	topics := r.count()
	guess := int32(0) // the rank the next topic probably has
	for i := 0; i < topics && r.ok; i++ {
		name := r.str()
		k := r.count()
		if !r.need(4 * k) {
			break
		}
		raw := r.b[r.off : r.off+4*k]
		r.off += 4 * k
		// User data lists topics in name order, so the next topic is
		// usually the next rank: with Kafka's round-robin layout a
		// member holds partitions of hundreds of topics, and comparing
		// one name costs less than hashing it.
		rk := int32(-1)
		if int(guess) < len(g.byRank) && string(name) == g.req.Topics[g.byRank[guess]].Name {
			rk = guess
		} else if t, known := names[string(name)]; known {
			rk = g.rankOf[t]
		}
		if rk < 0 {
			continue
		}
		guess = rk + 1
		if k > 0 {
			// As with owned partitions, a progression is the common case
			// and is checked without a branch per partition.
			limit := g.partitions(rk)
			if k == 1 {
				// As in appendOwned: extend the last progression.
				p := int32(binary.BigEndian.Uint32(raw))
				if uint32(p) >= uint32(limit) {
					continue
				}
				x := g.base[rk] + p
				if j := len(out) - 1; j >= from {
					if c := &out[j]; c.n > 1 && c.gap > 0 && x == c.start+c.n*(c.gap+1) {
						c.n++
						continue
					}
				}
				out = pushClaim(out, claim{start: x, n: 1, member: m, topic: rk})
				continue
			}
			p0, d := int32(binary.BigEndian.Uint32(raw)), int32(1)
			if k > 1 {
				d = int32(binary.BigEndian.Uint32(raw[4:])) - p0
			}
			if p0 >= 0 && d > 0 && int64(p0)+int64(k-1)*int64(d) < int64(limit) && stridedBE(raw, p0, d) {
				out = pushClaim(out, claim{start: g.base[rk] + p0, n: int32(k), gap: d - 1, member: m, topic: rk})
				continue
			}
			out = appendRunsBE(out, raw, limit, g.base[rk], m, rk)
		}
	}
	if !r.ok {
		return out[:from]
	}
	gen := int32(defaultGeneration)
	if len(ud)-r.off >= 4 {
		gen = int32(binary.BigEndian.Uint32(ud[r.off:]))
	}
	for i := from; i < len(out); i++ {
		out[i].gen = gen
	}
	return out
}

// stridedBE reports whether raw holds the big-endian int32s p0, p0+d,
// p0+2d, and so on.
//
//go:noinline
func stridedBE(raw []byte, p0, d int32) bool {
	var diff uint32
	at := uint32(p0)
	for i := 0; i+4 <= len(raw); i += 4 {
		diff |= binary.BigEndian.Uint32(raw[i:i+4:i+4]) ^ at
		at += uint32(d)
	}
	return diff == 0
}

// appendRunsBE is appendRuns over big-endian int32s, with the generation
// left for the caller to fill in.
//
//go:noinline
func appendRunsBE(dst []claim, raw []byte, limit, base, member, topic int32) []claim {
	n := len(raw) / 4
	for i := 0; i < n; {
		p := int32(binary.BigEndian.Uint32(raw[4*i:]))
		i++
		if uint32(p) >= uint32(limit) {
			continue
		}
		j := i
		for j < n && p+int32(j-i+1) < limit && int32(binary.BigEndian.Uint32(raw[4*j:])) == p+int32(j-i+1) {
			j++
		}
		dst = pushClaim(dst, claim{start: base + p, n: int32(j - i + 1), member: member, topic: topic})
		i = j
	}
	return dst
}

// beReader reads Kafka's big-endian protocol types; ok turns false at the
// first thing that does not fit.
type beReader struct {
	b   []byte
	off int
	ok  bool
}

func (r *beReader) need(n int) bool {
	if n < 0 || len(r.b)-r.off < n {
		r.ok = false
	}
	return r.ok
}

// count reads an int32 array length; a negative one (a null array, which
// these schemas do not allow) is a failure.
func (r *beReader) count() int {
	if !r.need(4) {
		return 0
	}
	v := int32(binary.BigEndian.Uint32(r.b[r.off:]))
	r.off += 4
	if v < 0 {
		r.ok = false
		return 0
	}
	return int(v)
}

// str reads an int16-length string; a negative length (a null string) is a
// failure.
func (r *beReader) str() []byte {
	if !r.need(2) {
		return nil
	}
	l := int(int16(binary.BigEndian.Uint16(r.b[r.off:])))
	r.off += 2
	if l < 0 || !r.need(l) {
		r.ok = false
		return nil
	}
	s := r.b[r.off : r.off+l]
	r.off += l
	return s
}

// settle resolves conflicting claims and returns the runs each member keeps,
// sorted by start; no partition is in two runs. Per partition, the claims
// with the highest generation win; when they come from more than one
// member, nobody keeps the partition (Kafka's
// partitionsWithMultiplePreviousOwners). A member that claims a partition
// twice claims it once. claims is reordered.
//
// Claims that do not overlap, the usual case, cost a sort of the runs (and,
// with strided runs, one bit per partition to prove they do not share
// one); only overlapping strided claims are cut into single partitions.
func (g *group) settle(claims []claim) []claim {
	if len(claims) == 0 {
		return nil
	}
	sortByStart(claims)
	for i := range claims {
		if !claims[i].contiguous() {
			if g.disjoint(claims) {
				return claims
			}
			return settleRuns(g.unstride(claims))
		}
	}
	return settleRuns(claims)
}

// settleRuns is settle for contiguous runs sorted by start.
func settleRuns(claims []claim) []claim {
	overlap := false
	for i := 1; i < len(claims); i++ {
		if claims[i].start < claims[i-1].end() {
			overlap = true
			break
		}
	}
	if !overlap {
		return coalesce(claims)
	}
	return sweep(claims)
}

// disjoint reports whether no partition is in two of runs (sorted by
// start). When every run of more than one partition has the same stride,
// as after Kafka's round robin, runs can only meet within one residue class
// modulo that stride, and comparing neighbours there is enough; otherwise
// each partition is marked in a bit set of all assignable partitions.
func (g *group) disjoint(runs []claim) bool {
	if s, ok := commonStride(runs); ok && int64(s) <= 4*int64(len(runs))+64 {
		keys := residueOrder(runs, s)
		for k := 1; k < len(keys); k++ {
			if keys[k]>>32 == keys[k-1]>>32 && runs[uint32(keys[k])].start <= runs[uint32(keys[k-1])].last() {
				return false
			}
		}
		return true
	}
	bits := newBitset(g.base[len(g.byRank)])
	for i := range runs {
		if !bits.mark(&runs[i]) {
			return false
		}
	}
	return true
}

// commonStride returns the stride of the runs of runs that hold more than
// one partition, when there are some and all of them are strided alike.
func commonStride(runs []claim) (int32, bool) {
	s := int32(0)
	for i := range runs {
		c := &runs[i]
		switch {
		case c.n == 1:
		case c.gap == 0 || (s != 0 && c.stride() != s):
			return 0, false
		default:
			s = c.stride()
		}
	}
	return s, s > 0
}

// residueOrder returns runs' indices ordered by start modulo s, then by
// index (start order, for runs sorted by start), each packed under its
// residue.
func residueOrder(runs []claim, s int32) []uint64 {
	keys := make([]uint64, len(runs))
	for i := range runs {
		keys[i] = uint64(runs[i].start%s)<<32 | uint64(i)
	}
	slices.Sort(keys)
	return keys
}

// bitset is a set of global partition numbers.
type bitset []uint64

func newBitset(n int32) bitset { return make(bitset, (int(n)+63)/64) }

// mark adds the partitions of c and reports whether none was in the set.
func (b bitset) mark(c *claim) bool {
	if c.contiguous() {
		return b.markRange(c.start, c.start+c.n)
	}
	return b.markStrided(c.start, c.stride(), c.n)
}

// markRange adds [from, to) a word at a time.
func (b bitset) markRange(from, to int32) bool {
	var clash uint64
	for x := from; x < to; {
		w := x >> 6
		lo := uint(x & 63)
		hi := min(to-w<<6, 64)
		mask := ^uint64(0) << lo
		if hi < 64 {
			mask &= (1 << uint(hi)) - 1
		}
		clash |= b[w] & mask
		b[w] |= mask
		x = (w + 1) << 6
	}
	return clash == 0
}

// markStrided adds x, x+stride, ... (n of them).
//
//go:noinline
func (b bitset) markStrided(x, stride, n int32) bool {
	var clash uint64
	for ; n > 0; n-- {
		bit := uint64(1) << uint(x&63)
		clash |= b[x>>6] & bit
		b[x>>6] |= bit
		x += stride
	}
	return clash == 0
}

// unstride returns runs cut into contiguous runs within one topic each,
// sorted by start, with every other field kept.
func (g *group) unstride(runs []claim) []claim {
	size := 0
	for i := range runs {
		if runs[i].contiguous() {
			size++
		} else {
			size += int(runs[i].n)
		}
	}
	out := make([]claim, 0, size)
	interleaved := false
	for _, c := range runs {
		if c.contiguous() {
			out = g.appendSplit(out, c)
			continue
		}
		interleaved = true
		stride, x, r := c.stride(), c.start, g.topicAt(c.start)
		for range c.n {
			for g.base[r+1] <= x {
				r++
			}
			out = append(out, claim{start: x, n: 1, member: c.member, gen: c.gen, topic: r})
			x += stride
		}
	}
	if interleaved {
		sortByStart(out)
		out = coalesceSameGen(out)
	}
	return out
}

// appendSplit appends the contiguous run c cut at topic boundaries.
func (g *group) appendSplit(out []claim, c claim) []claim {
	x, end, r := c.start, c.end(), g.topicAt(c.start)
	for x < end {
		e := min(end, g.base[r+1])
		piece := c
		piece.start, piece.n, piece.gap, piece.topic = x, e-x, 0, r
		out = append(out, piece)
		x = e
		r++
	}
	return out
}

// appendStridedPieces appends the pieces of the strided run c, one per
// topic it has partitions in.
func (g *group) appendStridedPieces(out []claim, c claim) []claim {
	stride := int64(c.stride())
	x, left := int64(c.start), c.n
	for left > 0 {
		r := g.topicAt(int32(x))
		k := int32(min(int64(left), (int64(g.base[r+1])-x+stride-1)/stride))
		piece := c
		piece.start, piece.n, piece.topic = int32(x), k, r
		if k == 1 {
			piece.gap = 0
		}
		out = append(out, piece)
		x += int64(k) * stride
		left -= k
	}
	return out
}

// coalesceSameGen is coalesce for claims that still carry generations.
func coalesceSameGen(cs []claim) []claim {
	out := cs[:0]
	for _, c := range cs {
		if k := len(out) - 1; k >= 0 && out[k].member == c.member && out[k].gen == c.gen && out[k].topic == c.topic && out[k].end() == c.start {
			out[k].n += c.n
			continue
		}
		out = append(out, c)
	}
	return out
}

// sortByStart sorts runs by start, keeping the order of equal starts,
// through packed keys: it runs over up to a million runs, and sorting plain
// integers is several times faster than sorting structs with a closure.
func sortByStart(cs []claim) {
	sorted := true
	for i := 1; i < len(cs); i++ {
		if cs[i].start < cs[i-1].start {
			sorted = false
			break
		}
	}
	if sorted {
		return
	}
	keys := make([]uint64, len(cs))
	for i := range cs {
		keys[i] = uint64(cs[i].start)<<32 | uint64(i)
	}
	slices.Sort(keys)
	tmp := make([]claim, len(cs))
	for i, k := range keys {
		tmp[i] = cs[uint32(k)]
	}
	copy(cs, tmp)
}

// coalesce merges neighbouring runs of the same member and topic, in place.
func coalesce(cs []claim) []claim {
	out := cs[:0]
	for _, c := range cs {
		if k := len(out) - 1; k >= 0 && out[k].member == c.member && out[k].topic == c.topic && out[k].end() == c.start {
			out[k].n += c.n
			continue
		}
		out = append(out, c)
	}
	return out
}

// sweep settles overlapping claims, sorted by start, interval by interval
// between consecutive run boundaries.
func sweep(cs []claim) []claim {
	points := make([]int32, 0, 2*len(cs))
	for i := range cs {
		points = append(points, cs[i].start, cs[i].end())
	}
	slices.Sort(points)
	points = slices.Compact(points)

	var kept []claim
	var active []int32
	next := 0
	for k := 0; k+1 < len(points); k++ {
		a, b := points[k], points[k+1]
		for next < len(cs) && cs[next].start == a {
			active = append(active, int32(next))
			next++
		}
		live := active[:0]
		for _, i := range active {
			if cs[i].end() > a {
				live = append(live, i)
			}
		}
		active = live
		if len(active) == 0 {
			continue
		}
		w := winner(cs, active)
		if w < 0 {
			continue
		}
		c := cs[w]
		if j := len(kept) - 1; j >= 0 && kept[j].member == c.member && kept[j].topic == c.topic && kept[j].end() == a {
			kept[j].n += b - a
			continue
		}
		kept = append(kept, claim{start: a, n: b - a, member: c.member, topic: c.topic})
	}
	return kept
}

// winner returns the claim that keeps an interval covered by the active
// claims, or -1 when members of the highest generation disagree.
func winner(cs []claim, active []int32) int32 {
	best := active[0]
	for _, i := range active[1:] {
		if cs[i].gen > cs[best].gen {
			best = i
		}
	}
	for _, i := range active {
		if cs[i].gen == cs[best].gen && cs[i].member != cs[best].member {
			return -1
		}
	}
	return best
}

package sticky

import (
	"encoding/binary"
	"slices"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// claim is a run of partitions that one member says it owns: global
// numbers start to start+n-1, all of topic rank topic, claimed in
// generation gen. After settle, the same type holds runs that a member
// keeps, and gen is meaningless.
type claim struct {
	start, n int32
	member   int32
	gen      int32
	topic    int32
}

// end returns the global number just past the run.
func (c *claim) end() int32 { return c.start + c.n }

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
	for _, tp := range tps {
		if tp.Topic < 0 || int(tp.Topic) >= len(g.rankOf) {
			continue
		}
		r := g.rankOf[tp.Topic]
		if r < 0 || len(tp.Partitions) == 0 {
			continue
		}
		parts, limit := tp.Partitions, g.partitions(r)
		// Members usually own one contiguous range per topic: check that
		// without a branch per partition before cutting it into runs.
		if p0 := parts[0]; p0 >= 0 && int64(p0)+int64(len(parts)) <= int64(limit) && consecutive(parts) {
			out = append(out, claim{start: g.base[r] + p0, n: int32(len(parts)), member: m, gen: gen, topic: r})
			continue
		}
		out = appendRuns(out, parts, limit, g.base[r], m, gen, r)
	}
	return out
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
		dst = append(dst, claim{start: base + p, n: int32(j - i + 1), member: member, gen: gen, topic: topic})
		i = j
	}
	return dst
}

// consecutive reports whether parts is parts[0], parts[0]+1, and so on.
//
//go:noinline
func consecutive(parts []int32) bool {
	p0 := parts[0]
	var diff int32
	for i, p := range parts {
		diff |= (p - int32(i)) ^ p0
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
	for i := 0; i < topics && r.ok; i++ {
		name := r.str()
		k := r.count()
		if !r.need(4 * k) {
			break
		}
		raw := r.b[r.off : r.off+4*k]
		r.off += 4 * k
		t, known := names[string(name)]
		if !known {
			continue
		}
		if rk := g.rankOf[t]; rk >= 0 && k > 0 {
			// As with owned partitions, a contiguous range is the common
			// case and is checked without a branch per partition.
			limit := g.partitions(rk)
			if p0 := int32(binary.BigEndian.Uint32(raw)); p0 >= 0 && int64(p0)+int64(k) <= int64(limit) && consecutiveBE(raw, p0) {
				out = append(out, claim{start: g.base[rk] + p0, n: int32(k), member: m, topic: rk})
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

// consecutiveBE reports whether raw holds the big-endian int32s p0, p0+1,
// and so on.
//
//go:noinline
func consecutiveBE(raw []byte, p0 int32) bool {
	var diff uint32
	for i := 0; i+4 <= len(raw); i += 4 {
		diff |= binary.BigEndian.Uint32(raw[i:i+4:i+4]) ^ uint32(p0+int32(i/4))
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
		dst = append(dst, claim{start: base + p, n: int32(j - i + 1), member: member, topic: topic})
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
// sorted by start and not overlapping. Per partition, the claims with the
// highest generation win; when they come from more than one member, nobody
// keeps the partition (Kafka's partitionsWithMultiplePreviousOwners). A
// member that claims a partition twice claims it once. claims is reordered.
func settle(claims []claim) []claim {
	if len(claims) == 0 {
		return nil
	}
	sortByStart(claims)
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

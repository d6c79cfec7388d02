package sticky

import (
	"encoding/binary"
	"slices"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// piece is a run of partitions p0, p0+step, ..., k of them, of topic rank r.
type piece struct {
	r, p0, k, step int32
}

// response turns assigned runs (member, start, n, stride) into the answer:
// one MemberAssignment per member, in request order, topics in name order,
// partitions ascending. A member's contiguous run of one topic becomes a
// window of one shared buffer of ascending ids, so it costs nothing per
// partition; other partitions are written into one shared buffer. With
// userData, each member also gets StickyAssignor's v1 user data for
// generation.
//
// Kafka's round-robin layout gives a member of a large group one partition
// of each of hundreds of topics, so the answer can hold a million topic
// entries: every table is sized from the runs first and allocated once.
func (g *group) response(runs []claim, userData bool, generation int32) *abi.Response {
	req := g.req
	n := int32(len(req.Members))
	resp := &abi.Response{Members: make([]abi.MemberAssignment, n)}
	byMember, start := bucketByMember(runs, n, nil)

	// Bounds: a run has at most one entry per topic it spans, and each
	// entry at most its partitions.
	maxP, maxName := int32(0), 0
	for r, t := range g.byRank {
		maxP = max(maxP, g.partitions(int32(r)))
		maxName = max(maxName, len(req.Topics[t].Name))
	}
	// Partitions need writing out unless a topic's share is one
	// contiguous run (a window of ids), which a member with one run whose
	// stride exceeds every topic always has.
	entries, most, udSize, joined := 0, 0, 0, 0
	for m := range n {
		rs := byMember[start[m]:start[m+1]]
		perMember := 0
		for i := range rs {
			c := &rs[i]
			spans := int(g.topicAt(c.last())-g.topicAt(c.start)) + 1
			perMember += min(int(c.n), spans)
			udSize += 4 * int(c.n)
			if len(rs) > 1 || (!c.contiguous() && c.stride() < maxP) {
				joined += int(c.n)
			}
		}
		entries += perMember
		most = max(most, perMember)
		udSize += 8 + perMember*(6+maxName)
	}
	ids := make([]int32, maxP)
	ascending(ids)
	// User data lists partitions big-endian; laying the ids out once that
	// way turns writing a range into one copy.
	var beIDs []byte
	var ud []byte
	if userData {
		beIDs = make([]byte, 4*maxP)
		bigEndianAscending(beIDs)
		ud = make([]byte, 0, udSize)
	}
	// A request with topic lists accepts a response with them (sdk/ABI.md
	// section 7). Sticky user data names every topic, so it is written
	// from plain entries.
	var lists *rankLists
	if req.TopicLists != nil && !userData {
		lists = &rankLists{byKey: make(map[[2]int32]int32)}
		// Grouped, a member of a large group in Kafka's round robin has
		// one entry rather than hundreds: sizing for the plain bound
		// would clear a table a hundred times too large. Members with
		// more entries grow it.
		entries = min(entries, 4*int(n)+64)
	}
	tps := make([]abi.TopicPartitions, 0, entries)
	pieces, spare := make([]piece, 0, most), []piece(nil)
	buf := &idBuffer{left: joined}
	for m := range n {
		first := len(tps)
		rs := byMember[start[m]:start[m+1]]
		var w wholeTopics
		switch {
		case lists != nil && len(rs) == 1 && g.wholeTopics(&rs[0], &w) && lists.add(g, w.r0, w.topics):
			// The same progression in each of equally large topics: the
			// share of a member in Kafka's round robin when the member
			// count divides the topic size, as one entry.
			var parts []int32
			if w.k == 1 {
				parts = ids[w.p0 : w.p0+1 : w.p0+1]
			} else {
				parts = appendProgression(buf.take(w.k), w.p0, w.stride, w.k)
			}
			tps = append(tps, abi.TopicPartitions{Topic: lists.ref(w.r0, w.topics), Partitions: parts})
		case len(rs) == 1 && !rs[0].contiguous() && rs[0].stride() >= maxP:
			// One partition per topic, each its own entry: the layout of a
			// member of a large group in Kafka's round robin.
			tps = g.appendSingles(tps, rs[0], ids)
		default:
			tps = g.appendEntries(tps, rs, pieces, &spare, ids, buf)
		}
		if lists != nil && len(tps)-first >= abi.MinRun {
			// Topics that share one partition list (a progression whose
			// stride divides the topic sizes) become one entry. Group
			// writes no further than it has read, so it works in place.
			tps = lists.grouper.Group(tps[:first], tps[first:])
		}
		ma := &resp.Members[m]
		ma.Member = m
		if cur := len(tps); cur > first {
			ma.Partitions = tps[first:cur:cur]
		}
		if userData {
			from := len(ud)
			ud = appendUserData(ud, req, tps[first:], beIDs, generation)
			ma.UserData = ud[from:len(ud):len(ud)]
		}
	}
	if lists != nil {
		resp.TopicLists = lists.grouper.Lists()
	}
	return resp
}

// rankLists is the topic-list table of a grouped response, with the lists
// of consecutive ranks found by their first rank and length rather than by
// their contents: every member of a large group gets the same one.
type rankLists struct {
	grouper abi.Grouper
	byKey   map[[2]int32]int32 // {first rank, ranks} to list reference, or 0 when the ranks cannot be a list
}

// wholeTopics describes a strided run that holds the same progression of
// k partitions p0, p0+stride, ... in each of topics consecutive ranks from
// r0, all of one size.
type wholeTopics struct {
	r0, topics, p0, stride, k int32
}

// wholeTopics reports whether the run c is such a run, and fills w. Only
// then can one entry over a topic list stand for it.
func (g *group) wholeTopics(c *claim, w *wholeTopics) bool {
	if c.contiguous() {
		return false
	}
	s := c.stride()
	r0 := g.topicAt(c.start)
	size := g.partitions(r0)
	if size%s != 0 {
		return false
	}
	k := size / s
	p0 := c.start - g.base[r0]
	if p0 >= s || c.n%k != 0 {
		return false
	}
	topics := c.n / k
	if g.sizeRun == nil {
		// sizeRun[r] is the last rank of the stretch from r on whose
		// topics all have r's partition count (see samePartitionID).
		g.samePartitionID(c)
	}
	if int(r0+topics) > len(g.byRank) || g.sizeRun[r0] < r0+topics-1 {
		return false
	}
	*w = wholeTopics{r0: r0, topics: topics, p0: p0, stride: s, k: k}
	return true
}

// add makes sure the list of the n ranks from r0 is in the table, and
// reports whether those ranks can be a list at all: their request indices
// must ascend, which they do when the topic table is in name order, as
// hosts send it.
func (l *rankLists) add(g *group, r0, n int32) bool {
	key := [2]int32{r0, n}
	if ref, ok := l.byKey[key]; ok {
		return ref != 0
	}
	ts := g.byRank[r0 : r0+n]
	for i := 1; i < len(ts); i++ {
		if ts[i] <= ts[i-1] {
			l.byKey[key] = 0
			return false
		}
	}
	l.byKey[key] = l.grouper.List(ts)
	return true
}

// ref returns the reference of a list that add accepted.
func (l *rankLists) ref(r0, n int32) int32 { return l.byKey[[2]int32{r0, n}] }

// appendSingles appends the entries of the strided run c whose stride
// exceeds every topic, so that each partition is in a topic of its own.
//
// A member of a large group in Kafka's round robin gets one such run of
// hundreds of partitions, and the group a million in all, so this loop
// writes four entries per iteration: in a wasm guest each loop iteration
// costs an exit to the host's deadline check.
func (g *group) appendSingles(tps []abi.TopicPartitions, c claim, ids []int32) []abi.TopicPartitions {
	byRank := g.byRank
	x, stride, r := c.start, c.stride(), g.topicAt(c.start)
	n := int(c.n)
	at := len(tps)
	tps = slices.Grow(tps, n)[:at+n]
	out := tps[at:]
	entry := func(x, r int32) abi.TopicPartitions {
		p := x - g.base[r]
		return abi.TopicPartitions{Topic: byRank[r], Partitions: ids[p : p+1 : p+1]}
	}
	i := 0
	for ; i+4 <= n; i += 4 {
		q := out[i : i+4 : i+4]
		r = g.rankFrom(r, x)
		q[0] = entry(x, r)
		x += stride
		r = g.rankFrom(r, x)
		q[1] = entry(x, r)
		x += stride
		r = g.rankFrom(r, x)
		q[2] = entry(x, r)
		x += stride
		r = g.rankFrom(r, x)
		q[3] = entry(x, r)
		x += stride
	}
	for ; i < n; i++ {
		r = g.rankFrom(r, x)
		out[i] = entry(x, r)
		x += stride
	}
	return tps
}

// rankFrom returns the rank of the topic holding global number x, which is
// in topic r or a later one. The stride of a run of singles is at least
// every topic's size, so x is usually in the very next topic: an if
// settles that, and only a run that skips topics pays for the search.
func (g *group) rankFrom(r, x int32) int32 {
	if g.base[r+1] > x {
		return r
	}
	if r++; g.base[r+1] > x {
		return r
	}
	return g.topicAt(x)
}

// appendEntries appends the entries of one member's runs rs, cutting them
// into pieces (pieces and *spare are scratch) and writing partitions that
// are no window of ids into buf.
func (g *group) appendEntries(tps []abi.TopicPartitions, rs []claim, pieces []piece, spare *[]piece, ids []int32, buf *idBuffer) []abi.TopicPartitions {
	pieces = pieces[:0]
	for _, c := range rs {
		pieces = g.appendPieces(pieces, 0, c)
	}
	pieces = sortPieces(pieces, spare)
	var last piece
	var lastParts []int32
	for i := 0; i < len(pieces); {
		j, total := groupEnd(pieces, i)
		var parts []int32
		if p := pieces[i]; j-i == 1 && (p.step == 1 || p.k == 1) {
			parts = ids[p.p0 : p.p0+p.k : p.p0+p.k]
		} else if j-i == 1 && lastParts != nil && p.p0 == last.p0 && p.step == last.step && p.k == last.k {
			// A progression whose stride divides the topic sizes takes
			// the same partition ids in every topic: share them.
			parts = lastParts
		} else {
			parts = buf.take(total)
			for _, p := range pieces[i:j] {
				if p.step == 1 {
					parts = append(parts, ids[p.p0:p.p0+p.k]...)
					continue
				}
				parts = appendProgression(parts, p.p0, p.step, p.k)
			}
			if j-i > 1 && !slices.IsSorted(parts) {
				// Progressions of one member within a topic may
				// interleave.
				slices.Sort(parts)
			}
			if j-i == 1 {
				last, lastParts = pieces[i], parts
			}
		}
		tps = append(tps, abi.TopicPartitions{Topic: g.byRank[pieces[i].r], Partitions: parts})
		i = j
	}
	return tps
}

// idBuffer hands out room for partition ids from shared chunks, so that
// written-out partition lists cost one allocation per chunk.
type idBuffer struct {
	chunk []int32
	// left bounds what may still be asked for, so that no chunk is larger
	// than needed.
	left int
}

// take returns an empty slice with capacity n.
func (b *idBuffer) take(n int32) []int32 {
	if len(b.chunk) < int(n) {
		b.chunk = make([]int32, max(int(n), min(b.left, 1<<12)))
	}
	out := b.chunk[:0:n]
	b.chunk = b.chunk[n:]
	b.left -= int(n)
	return out
}

// appendProgression appends p0, p0+step, ..., k of them. A member of a
// mid-sized group gets such a progression in every topic (every Mth
// partition), so it writes four values per iteration: in a wasm guest each
// loop iteration costs an exit to the host's deadline check.
//
//go:noinline
func appendProgression(dst []int32, p0, step, k int32) []int32 {
	if k <= 0 {
		return dst
	}
	at := len(dst)
	dst = slices.Grow(dst, int(k))[:at+int(k)]
	out := dst[at:]
	i := 0
	for ; i+4 <= len(out); i += 4 {
		q := out[i : i+4 : i+4]
		q[0], q[1], q[2], q[3] = p0, p0+step, p0+2*step, p0+3*step
		p0 += 4 * step
	}
	for ; i < len(out); i++ {
		out[i] = p0
		p0 += step
	}
	return dst
}

// appendPieces appends the pieces of run c, one per topic it touches, to
// pieces, joining a contiguous piece to the previous one of the same member
// (pieces from from on) when it continues it.
func (g *group) appendPieces(pieces []piece, from int, c claim) []piece {
	x, r := c.start, g.topicAt(c.start)
	if c.contiguous() {
		end := c.end()
		for x < end {
			e := min(end, g.base[r+1])
			p0 := x - g.base[r]
			if k := len(pieces) - 1; k >= from && pieces[k].r == r && pieces[k].step == 1 && pieces[k].p0+pieces[k].k == p0 {
				pieces[k].k += e - x
			} else {
				pieces = append(pieces, piece{r: r, p0: p0, k: e - x, step: 1})
			}
			x = e
			r++
		}
		return pieces
	}
	stride := int64(c.stride())
	for left := c.n; left > 0; {
		for g.base[r+1] <= x {
			r++
		}
		k := int32(min(int64(left), (int64(g.base[r+1]-x)+stride-1)/stride))
		step := int32(1)
		if k > 1 {
			step = int32(stride)
		}
		pieces = append(pieces, piece{r: r, p0: x - g.base[r], k: k, step: step})
		left -= k
		x += int32(int64(k) * stride)
	}
	return pieces
}

// sortPieces sorts one member's pieces by topic rank, then first partition.
// Each run yields its pieces in that order, so they are a few sorted chains
// (a member keeps a progression over every topic and is dealt another):
// those are merged pairwise rather than sorted, through *spare.
func sortPieces(ps []piece, spare *[]piece) []piece {
	chains := 1
	for i := 1; i < len(ps); i++ {
		if comparePieces(ps[i-1], ps[i]) > 0 {
			chains++
		}
	}
	if chains == 1 {
		return ps
	}
	if chains > 16 {
		slices.SortFunc(ps, comparePieces)
		return ps
	}
	if cap(*spare) < len(ps) {
		*spare = make([]piece, len(ps))
	}
	tmp := (*spare)[:len(ps)]
	for chains > 1 {
		// Merge chains two by two from src into dst.
		src, dst := ps, tmp[:0]
		chains = 0
		for i := 0; i < len(src); {
			a := chainEnd(src, i)
			b := chainEnd(src, a)
			dst = mergePieces(dst, src[i:a], src[a:b])
			chains++
			i = b
		}
		ps, tmp = dst, src
	}
	return ps
}

// chainEnd returns the end of the sorted chain of ps starting at i.
func chainEnd(ps []piece, i int) int {
	if i >= len(ps) {
		return i
	}
	for i++; i < len(ps) && comparePieces(ps[i-1], ps[i]) <= 0; i++ {
	}
	return i
}

// mergePieces appends the merge of the sorted a and b to dst.
func mergePieces(dst, a, b []piece) []piece {
	for len(a) > 0 && len(b) > 0 {
		if comparePieces(a[0], b[0]) <= 0 {
			dst, a = append(dst, a[0]), a[1:]
		} else {
			dst, b = append(dst, b[0]), b[1:]
		}
	}
	return append(append(dst, a...), b...)
}

// comparePieces orders pieces by topic rank, then first partition.
func comparePieces(a, b piece) int {
	if a.r != b.r {
		return int(a.r - b.r)
	}
	return int(a.p0 - b.p0)
}

// groupEnd returns the end of the pieces of ps that share ps[i]'s topic, and
// how many partitions they hold.
func groupEnd(ps []piece, i int) (int, int32) {
	total := ps[i].k
	j := i + 1
	for j < len(ps) && ps[j].r == ps[i].r {
		total += ps[j].k
		j++
	}
	return j, total
}

// ascending writes 0, 1, 2, ... into s.
//
//go:noinline
func ascending(s []int32) {
	for i := range s {
		s[i] = int32(i)
	}
}

// bigEndianAscending writes 0, 1, 2, ... into b as big-endian int32s.
//
//go:noinline
func bigEndianAscending(b []byte) {
	for i := 0; i+4 <= len(b); i += 4 {
		binary.BigEndian.PutUint32(b[i:i+4:i+4], uint32(i/4))
	}
}

// appendUserData appends StickyAssignor's v1 user data for the assignment
// tps (topics in name order, partitions ascending): the array of {topic,
// partitions} in Kafka's big-endian encoding, then the generation. A Java
// StickyAssignor client writes the same structure into its next
// subscription. Kafka topic names are at most 249 bytes, well within the
// int16 length.
func appendUserData(dst []byte, req *abi.Request, tps []abi.TopicPartitions, beIDs []byte, generation int32) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(tps)))
	for _, tp := range tps {
		name := req.Topics[tp.Topic].Name
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(name)))
		dst = append(dst, name...)
		parts := tp.Partitions
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(parts)))
		// Ascending and without repeats: a range when its ends say so.
		if p0 := parts[0]; parts[len(parts)-1]-p0 == int32(len(parts)-1) {
			dst = append(dst, beIDs[4*p0:4*(p0+int32(len(parts)))]...)
			continue
		}
		dst = appendBigEndian(dst, parts)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(generation))
}

// appendBigEndian appends parts as big-endian int32s.
//
//go:noinline
func appendBigEndian(dst []byte, parts []int32) []byte {
	for _, p := range parts {
		dst = binary.BigEndian.AppendUint32(dst, uint32(p))
	}
	return dst
}

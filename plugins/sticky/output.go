package sticky

import (
	"encoding/binary"
	"slices"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// piece is a run of partitions p0 to p0+k-1 of topic rank r.
type piece struct {
	r, p0, k int32
}

// response turns assigned runs (member, start, n) into the answer: one
// MemberAssignment per member, in request order, topics in name order,
// partitions ascending. A member's run of one topic becomes a window of one
// shared buffer of ascending ids, so a contiguous range costs nothing per
// partition. With userData, each member also gets StickyAssignor's v1 user
// data for generation.
func (g *group) response(runs []claim, userData bool, generation int32) *abi.Response {
	req := g.req
	n := int32(len(req.Members))
	resp := &abi.Response{Members: make([]abi.MemberAssignment, n)}
	byMember, start := bucketByMember(runs, n, nil)

	pieces := make([]piece, 0, len(runs)+len(g.byRank))
	pstart := make([]int32, n+1)
	for m := range n {
		rs := byMember[start[m]:start[m+1]]
		if !slices.IsSortedFunc(rs, func(a, b claim) int { return int(a.start - b.start) }) {
			slices.SortFunc(rs, func(a, b claim) int { return int(a.start - b.start) })
		}
		from := len(pieces)
		for _, c := range rs {
			x, end := c.start, c.end()
			r := g.topicAt(x)
			for x < end {
				e := min(end, g.base[r+1])
				p0 := x - g.base[r]
				if k := len(pieces) - 1; k >= from && pieces[k].r == r && pieces[k].p0+pieces[k].k == p0 {
					pieces[k].k += e - x
				} else {
					pieces = append(pieces, piece{r: r, p0: p0, k: e - x})
				}
				x = e
				r++
			}
		}
		pstart[m+1] = int32(len(pieces))
	}

	// Size everything first, so each table is allocated once.
	entries, joined, udSize := 0, 0, 0
	maxP := int32(0)
	for r := range g.byRank {
		maxP = max(maxP, g.partitions(int32(r)))
	}
	for m := range n {
		ps := pieces[pstart[m]:pstart[m+1]]
		if userData {
			udSize += 8
		}
		for i := 0; i < len(ps); {
			j, total := groupEnd(ps, i)
			entries++
			if j-i > 1 {
				joined += int(total)
			}
			if userData {
				udSize += 6 + len(req.Topics[g.byRank[ps[i].r]].Name) + 4*int(total)
			}
			i = j
		}
	}
	ids := make([]int32, maxP)
	ascending(ids)
	// User data lists partitions big-endian; laying the ids out once that
	// way turns writing a run into one copy.
	var beIDs []byte
	if userData {
		beIDs = make([]byte, 4*maxP)
		bigEndianAscending(beIDs)
	}
	tps := make([]abi.TopicPartitions, entries)
	buf := make([]int32, joined)
	var ud []byte
	if userData {
		ud = make([]byte, 0, udSize)
	}
	cur := 0
	for m := range n {
		ps := pieces[pstart[m]:pstart[m+1]]
		first := cur
		for i := 0; i < len(ps); {
			j, total := groupEnd(ps, i)
			var parts []int32
			if j-i == 1 {
				parts = ids[ps[i].p0 : ps[i].p0+ps[i].k : ps[i].p0+ps[i].k]
			} else {
				parts = buf[:0:total]
				buf = buf[total:]
				for _, p := range ps[i:j] {
					parts = append(parts, ids[p.p0:p.p0+p.k]...)
				}
			}
			tps[cur] = abi.TopicPartitions{Topic: g.byRank[ps[i].r], Partitions: parts}
			cur++
			i = j
		}
		ma := &resp.Members[m]
		ma.Member = m
		if cur > first {
			ma.Partitions = tps[first:cur:cur]
		}
		if userData {
			from := len(ud)
			ud = g.appendUserData(ud, ps, beIDs, generation)
			ma.UserData = ud[from:len(ud):len(ud)]
		}
	}
	return resp
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
// of pieces ps (sorted, one topic's pieces adjacent): the array of {topic,
// partitions} in Kafka's big-endian encoding, then the generation. A Java
// StickyAssignor client writes the same structure into its next
// subscription. Kafka topic names are at most 249 bytes, well within the
// int16 length.
func (g *group) appendUserData(dst []byte, ps []piece, beIDs []byte, generation int32) []byte {
	topics := 0
	for i := 0; i < len(ps); {
		i, _ = groupEnd(ps, i)
		topics++
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(topics))
	for i := 0; i < len(ps); {
		j, total := groupEnd(ps, i)
		name := g.req.Topics[g.byRank[ps[i].r]].Name
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(name)))
		dst = append(dst, name...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(total))
		for _, p := range ps[i:j] {
			dst = append(dst, beIDs[4*p.p0:4*(p.p0+p.k)]...)
		}
		i = j
	}
	return binary.BigEndian.AppendUint32(dst, uint32(generation))
}

package sticky

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wasmassign/wasmassign/plugins/internal/groupview"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// group is a request read the way both sticky assignors need it.
//
// Assignable topics (they exist, have partitions and at least one
// subscriber) are numbered by name: topic rank r is the r-th of them in name
// order. Their partitions are numbered globally, rank after rank, so that
// partition p of rank r is base[r]+p, and a run of consecutive global numbers
// is a run of partitions in Kafka's (topic, partition) order.
type group struct {
	// cooperative says whose claims count: owned partitions
	// (cooperative-sticky) or user data (sticky).
	cooperative bool
	req         *abi.Request

	// order lists member indices in the sticky assignors' member order
	// (see memberIDOrder); rank is its inverse.
	order, rank []int32

	// byRank[r] is the request index of topic rank r; rankOf[t] is the rank
	// of request topic t, or -1 when t is not assignable.
	byRank, rankOf []int32
	// base[r] is the global number of partition 0 of rank r; base[len(byRank)]
	// is the total number of assignable partitions.
	base []int32

	// subs[subStart[m]:subStart[m+1]] are member m's assignable subscribed
	// topics, as ranks, ascending and without repeats. When shared is true,
	// every member sent the same subscription, subStart is nil and subs is
	// every member's list.
	subStart, subs []int32
	shared         bool
	// uniform is true when every member sent the same subscription, topics
	// that do not exist included: Kafka's allSubscriptionsEqual, which
	// picks its constrained builder only then.
	uniform bool

	// scratch is allocated on first use; see memberScratch.
	scratch *memberScratch
	// sizeRun is allocated on first use; see samePartitionID.
	sizeRun []int32
	// spans and spanDone cache where the request's topic lists lie among
	// the ranks; allocated on first use, see span.
	spans    []listSpan
	spanDone []bool
}

// memberScratch is per-member working state, allocated once per request.
type memberScratch struct {
	// pos is a member's position in the member order; count
	// what it holds; keep how many of its owned partitions it keeps.
	pos, count, keep []int32
}

// memberScratch returns the group's per-member scratch arrays.
func (g *group) memberScratch() *memberScratch {
	if g.scratch == nil {
		n := len(g.req.Members)
		g.scratch = &memberScratch{pos: make([]int32, n), count: make([]int32, n), keep: make([]int32, n)}
	}
	return g.scratch
}

// partitions returns the partition count of rank r.
func (g *group) partitions(r int32) int32 { return g.base[r+1] - g.base[r] }

// topicAt returns the rank whose partitions include global number x.
func (g *group) topicAt(x int32) int32 {
	// base is ascending; find the last rank whose base is <= x.
	lo, hi := 0, len(g.byRank)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if g.base[mid+1] <= x {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return int32(lo)
}

// allRanks returns every assignable topic rank, ascending.
func (g *group) allRanks() []int32 {
	rs := make([]int32, len(g.byRank))
	for r := range rs {
		rs[r] = int32(r)
	}
	return rs
}

// memberTopics returns member m's assignable subscribed topic ranks.
func (g *group) memberTopics(m int32) []int32 {
	if g.shared {
		return g.subs
	}
	return g.subs[g.subStart[m]:g.subStart[m+1]]
}

// ranksOf appends the ranks of the assignable topics among ts to dst,
// ascending and without repeats.
func (g *group) ranksOf(dst, ts []int32) []int32 {
	from := len(dst)
	sorted := true
	for _, t := range ts {
		if r := g.rankOf[t]; r >= 0 {
			if k := len(dst); k > from && dst[k-1] >= r {
				sorted = false
			}
			dst = append(dst, r)
		}
	}
	if !sorted {
		// Ranks follow names, not request indices; drop repeats too.
		s := dst[from:]
		slices.Sort(s)
		dst = dst[:from+len(slices.Compact(s))]
	}
	return dst
}

// newGroup reads req. The error names the member whose subscription refers
// to a topic the request does not have.
func newGroup(req *abi.Request) (*group, error) {
	nt, n := len(req.Topics), len(req.Members)
	g := &group{req: req}
	g.order = memberIDOrder(req.Members)
	g.rank = make([]int32, n)
	for r, m := range g.order {
		g.rank[m] = int32(r)
	}

	// Members of one application usually send the very same subscription;
	// then one member's list stands for all, and a million-entry group
	// costs nothing per (member, topic) pair.
	g.shared = true
	for m := 1; m < n && g.shared; m++ {
		g.shared = equalInt32s(req.Members[m].Topics, req.Members[0].Topics)
	}
	subscribed := make([]bool, nt)
	for m := range req.Members {
		if g.shared && m > 0 {
			break
		}
		mem := &req.Members[m]
		for _, t := range mem.Topics {
			if t < 0 || int(t) >= nt {
				return nil, fmt.Errorf("member %q subscribes to topic index %d, but the request has %d topics", mem.MemberID, t, nt)
			}
			subscribed[t] = true
		}
	}
	g.byRank = groupview.AssignableByName(req, func(t int32) bool { return subscribed[t] })
	g.rankOf = make([]int32, nt)
	for t := range g.rankOf {
		g.rankOf[t] = -1
	}
	g.base = make([]int32, len(g.byRank)+1)
	for r, t := range g.byRank {
		g.rankOf[t] = int32(r)
		next := int64(g.base[r]) + int64(req.Topics[t].PartitionCount)
		if next > 1<<31-1 {
			return nil, fmt.Errorf("the subscribed topics have more than 2^31-1 partitions in total")
		}
		g.base[r+1] = int32(next)
	}

	g.uniform = g.shared
	if g.shared {
		if n > 0 {
			g.subs = g.ranksOf(nil, req.Members[0].Topics)
		}
		return g, nil
	}
	// subStart[m] is set to where member m's ranks begin as they are
	// appended, which is also where member m-1's end.
	g.subStart = make([]int32, n+1)
	capacity := 0
	for m := range req.Members {
		capacity += len(req.Members[m].Topics)
	}
	g.subs = make([]int32, 0, capacity)
	for m := range req.Members {
		from := len(g.subs)
		g.subs = g.ranksOf(g.subs, req.Members[m].Topics)
		g.subStart[m] = int32(from)
	}
	g.subStart[n] = int32(len(g.subs))
	return g, nil
}

// memberIDOrder returns the indices of ms ordered by member id. Kafka's
// consumer leader keys the subscriptions it hands the sticky assignors by
// member id, static members included, and their sorted member lists and
// tie-breaks follow that key (not group.instance.id, which only
// AbstractPartitionAssignor's range and round-robin orders use). Java
// compares UTF-16 code units, Go bytes: the two orders differ only between
// characters above U+FFFF and those from U+E000 to U+FFFF.
func memberIDOrder(ms []abi.Member) []int32 {
	order := make([]int32, len(ms))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		return strings.Compare(ms[a].MemberID, ms[b].MemberID)
	})
	return order
}

// equalInt32s reports whether a and b are equal. It has no branch in its
// loop, which Go's wasm code generation makes cheap: two million
// subscription entries are compared per large request.
//
//go:noinline
func equalInt32s(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		// Decoders share one slice between members with the same
		// subscription (the grouped layout sends it once).
		return true
	}
	b = b[:len(a)]
	var diff int32
	for i := range a {
		diff |= a[i] ^ b[i]
	}
	return diff == 0
}

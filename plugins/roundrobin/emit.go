package roundrobin

import (
	"slices"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// layout is an assignment before it becomes a response: every assignable
// topic's partition ids sit in one flat buffer, grouped by the subscriber
// that owns them, and each subscriber's window of that buffer becomes one
// topic entry of its member.
type layout struct {
	topics  []topicLayout // per topic index
	rank    []int32       // per topic index: position by name, -1 when not assignable
	ids     []int32
	entries int // topic entries over all members
}

// topicLayout places a topic's partitions in layout.ids. The subscriber
// that is j turns after the first one takes partitions j, j+s, j+2s, ...:
// q of them, plus one when j < r. They are stored in turn order, so turn j
// starts at j*q+min(j,r).
type topicLayout struct {
	base     int32
	first, s int32 // slot of the subscriber taking partition 0; subscribers
	q, r     int32 // partitions / s, partitions % s
}

// window is a run of n ids starting at start.
type window struct{ start, n int32 }

// turn returns where the partitions of the subscriber j turns after the
// first one sit, relative to the topic's base.
func (tl *topicLayout) turn(j int32) window {
	w := window{start: j*tl.q + min(j, tl.r), n: tl.q}
	if j < tl.r {
		w.n++
	}
	return w
}

func newLayout(req *abi.Request, byName []int32) *layout {
	lay := &layout{
		topics: make([]topicLayout, len(req.Topics)),
		rank:   make([]int32, len(req.Topics)),
	}
	for t := range lay.rank {
		lay.rank[t] = -1
	}
	total := int32(0)
	for i, t := range byName {
		lay.rank[t] = int32(i)
		lay.topics[t].base = total
		total += req.Topics[t].PartitionCount
	}
	lay.ids = make([]int32, total)
	return lay
}

// window returns the partitions of topic t that slot s takes: a window of
// ids, with its capacity capped so that appending to it can never overwrite
// a neighbour.
func (lay *layout) window(t, s int32) []int32 {
	tl := &lay.topics[t]
	j := s - tl.first
	if j < 0 {
		j += tl.s
	}
	w := tl.turn(j)
	start := tl.base + w.start
	return lay.ids[start : start+w.n : start+w.n]
}

// emit builds the response, member by member in request order, so that the
// topic-entry table is written front to back.
func (lay *layout) emit(req *abi.Request, subs *subscribers) *abi.Response {
	n := len(req.Members)
	resp := &abi.Response{Members: make([]abi.MemberAssignment, n)}
	tps := make([]abi.TopicPartitions, lay.entries)
	var scratch sortScratch
	cur := 0
	for m := range n {
		topics := req.Members[m].Topics
		slots := subs.slot[subs.entry[m]:subs.entry[m+1]]
		first := cur
		var inOrder bool
		if cur, inOrder = lay.emitInOrder(tps, cur, topics, slots); !inOrder {
			cur = lay.emitSorted(tps, first, topics, slots, &scratch)
		}
		resp.Members[m].Member = int32(m)
		if cur > first {
			resp.Members[m].Partitions = tps[first:cur:cur]
		}
	}
	return resp
}

// sortScratch is reused by emitSorted from one member to the next.
type sortScratch struct {
	keys   []int64 // name rank << 32 | entry
	byRank []int32 // entry+1 per name rank
}

// emitSorted is emitInOrder for a member whose topics are not in name
// order, which happens only when the request's topic table is not sorted by
// name. A member with few topics among many is sorted; otherwise its
// entries are bucketed by name rank.
func (lay *layout) emitSorted(tps []abi.TopicPartitions, cur int, topics, slots []int32, sc *sortScratch) int {
	put := func(j int32) {
		t := topics[j]
		if w := lay.window(t, slots[j]); len(w) > 0 {
			tps[cur] = abi.TopicPartitions{Topic: t, Partitions: w}
			cur++
		}
	}
	if len(topics)*8 < len(lay.rank) {
		sc.keys = sc.keys[:0]
		for j, t := range topics {
			if slots[j] >= 0 && lay.rank[t] >= 0 {
				sc.keys = append(sc.keys, int64(lay.rank[t])<<32|int64(j))
			}
		}
		slices.Sort(sc.keys)
		for _, k := range sc.keys {
			put(int32(k))
		}
		return cur
	}
	if sc.byRank == nil {
		sc.byRank = make([]int32, len(lay.rank))
	}
	for j, t := range topics {
		if slots[j] >= 0 && lay.rank[t] >= 0 {
			sc.byRank[lay.rank[t]] = int32(j + 1)
		}
	}
	for r, e := range sc.byRank {
		if e > 0 {
			sc.byRank[r] = 0
			put(e - 1)
		}
	}
	return cur
}

// emitInOrder writes the entries of a member whose topics are in name order
// into tps from cur on, and returns the new cur. It stops and reports false
// at the first topic out of order. It is the hot loop of a large
// assignment, kept small and free of calls for the sake of Go's wasm code.
//
//go:noinline
func (lay *layout) emitInOrder(tps []abi.TopicPartitions, cur int, topics, slots []int32) (int, bool) {
	rank, tls, ids := lay.rank, lay.topics, lay.ids
	slots = slots[:len(topics)]
	prev := int32(-1)
	for j, t := range topics {
		s, r := slots[j], rank[t]
		if s < 0 || r < 0 {
			continue
		}
		if r < prev {
			return cur, false
		}
		prev = r
		tl := &tls[t]
		turn := s - tl.first
		if turn < 0 {
			turn += tl.s
		}
		start, n := turn*tl.q+min(turn, tl.r), tl.q
		if turn < tl.r {
			n++
		}
		if n == 0 {
			continue
		}
		start += tl.base
		tps[cur] = abi.TopicPartitions{Topic: t, Partitions: ids[start : start+n : start+n]}
		cur++
	}
	return cur, true
}

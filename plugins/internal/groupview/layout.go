package groupview

import (
	"slices"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Layout is an assignment before it becomes a response. Every assignable
// topic's partition ids sit in one flat buffer, grouped by the slot that
// owns them, and each slot's window of that buffer becomes one topic entry
// of its member. An assignor lays out each topic of View.ByName exactly
// once, with Split or Place, fills in the ids, and calls Response.
type Layout struct {
	view    *View
	topics  []topicLayout // per topic index
	rank    []int32       // per topic index: position in ByName, -1 when not assignable
	ids     []int32
	entries int // non-empty windows over all topics: the response's topic entries
}

// topicLayout says where a topic's slots find their partitions in
// Layout.ids, relative to base. A split topic's windows are computed: the
// slot that is j turns after first owns the window even.Turn(j). A placed
// topic looks its windows up in fixed.
type topicLayout struct {
	base        int32
	first, subs int32
	even        EvenSplit
	fixed       *Windows
}

// EvenSplit is the window arithmetic of a split topic: P partitions over S
// subscribers in runs of q = P/S, the first r = P%S of them one longer.
type EvenSplit struct{ q, r int32 }

// Turn returns where the window of the slot that is j turns after the
// first one lies, within the ids that Split returned.
func (e EvenSplit) Turn(j int32) (start, n int32) {
	start, n = j*e.q+min(j, e.r), e.q
	if j < e.r {
		n++
	}
	return start, n
}

// window returns slot s's window.
func (tl *topicLayout) window(s int32) (start, n int32) {
	if w := tl.fixed; w != nil {
		return w.Start[s], w.Count[s]
	}
	j := s - tl.first
	if j < 0 {
		j += tl.subs
	}
	return tl.even.Turn(j)
}

// Windows gives each slot of a topic its own window, for assignments that
// are not an even split. Topics whose slots own the same windows (Kafka's
// co-partitioned topics) share one Windows.
type Windows struct {
	// Count[s] is the number of partitions slot s owns, and Start[s] where
	// they begin: the windows follow each other in slot order. Neither may
	// change once the Windows has been placed.
	Count, Start []int32
	owners       int // slots that own at least one partition
}

// NewWindows returns the windows of slots that own count[s] partitions
// each. It keeps count.
func NewWindows(count []int32) *Windows {
	w := &Windows{Count: count, Start: make([]int32, len(count))}
	off := int32(0)
	for s, c := range count {
		w.Start[s] = off
		off += c
		if c > 0 {
			w.owners++
		}
	}
	return w
}

// NewLayout returns an empty layout of v's assignable topics, with room for
// every one of their partitions.
func (v *View) NewLayout() *Layout {
	req := v.req
	lay := &Layout{
		view:   v,
		topics: make([]topicLayout, len(req.Topics)),
		rank:   make([]int32, len(req.Topics)),
	}
	for t := range lay.rank {
		lay.rank[t] = -1
	}
	total := int32(0)
	for i, t := range v.ByName {
		lay.rank[t] = int32(i)
		lay.topics[t].base = total
		total += req.Topics[t].PartitionCount
	}
	lay.ids = make([]int32, total)
	return lay
}

// Split lays topic t out as an even split: with P partitions and S
// subscribers, the slot first and the slots after it in turn, wrapping
// around, own windows of P/S partitions, and the first P%S of them one
// more. It returns the topic's P ids, for the caller to fill window by
// window, and the arithmetic that finds the windows. t must be one of
// View.ByName.
func (l *Layout) Split(t, first int32) ([]int32, EvenSplit) {
	tl := &l.topics[t]
	p, s := l.view.req.Topics[t].PartitionCount, l.view.count[t]
	tl.first, tl.subs, tl.even = first, s, EvenSplit{q: p / s, r: p % s}
	l.entries += int(min(s, p))
	return l.ids[tl.base : tl.base+p], tl.even
}

// Place lays topic t out as w says, and returns the topic's ids for the
// caller to fill window by window. w must have one window per subscriber
// of t, and they must cover its partitions exactly. t must be one of
// View.ByName.
func (l *Layout) Place(t int32, w *Windows) []int32 {
	tl := &l.topics[t]
	tl.fixed = w
	l.entries += w.owners
	return l.ids[tl.base : tl.base+l.view.req.Topics[t].PartitionCount]
}

// window returns slot s's partitions of topic t: a window of ids, with its
// capacity capped so that appending to it can never overwrite a neighbour.
func (l *Layout) window(t, s int32) []int32 {
	tl := &l.topics[t]
	start, n := tl.window(s)
	start += tl.base
	return l.ids[start : start+n : start+n]
}

// Response builds the assignment: one abi.MemberAssignment per member, in
// request order, each with its non-empty windows as topic entries in name
// order. Partition slices point into the layout's buffer, with capacity
// capped at length, so appending to one copies it rather than overwriting a
// neighbour. Members are written in request order so that the topic-entry
// table is filled front to back.
func (l *Layout) Response() *abi.Response {
	req, v := l.view.req, l.view
	n := len(req.Members)
	resp := &abi.Response{Members: make([]abi.MemberAssignment, n)}
	tps := make([]abi.TopicPartitions, l.entries)
	var scratch sortScratch
	cur := 0
	for m := range n {
		topics := req.Members[m].Topics
		slots := v.slot[v.entry[m]:v.entry[m+1]]
		first := cur
		var inOrder bool
		if cur, inOrder = l.emitInOrder(tps, cur, topics, slots); !inOrder {
			cur = l.emitSorted(tps, first, topics, slots, &scratch)
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
func (l *Layout) emitSorted(tps []abi.TopicPartitions, cur int, topics, slots []int32, sc *sortScratch) int {
	put := func(j int32) {
		t := topics[j]
		if w := l.window(t, slots[j]); len(w) > 0 {
			tps[cur] = abi.TopicPartitions{Topic: t, Partitions: w}
			cur++
		}
	}
	if len(topics)*8 < len(l.rank) {
		sc.keys = sc.keys[:0]
		for j, t := range topics {
			if slots[j] >= 0 && l.rank[t] >= 0 {
				sc.keys = append(sc.keys, int64(l.rank[t])<<32|int64(j))
			}
		}
		slices.Sort(sc.keys)
		for _, k := range sc.keys {
			put(int32(k))
		}
		return cur
	}
	if sc.byRank == nil {
		sc.byRank = make([]int32, len(l.rank))
	}
	for j, t := range topics {
		if slots[j] >= 0 && l.rank[t] >= 0 {
			sc.byRank[l.rank[t]] = int32(j + 1)
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
// assignment, kept small, with its one helper inlined, for the sake of Go's
// wasm code.
//
//go:noinline
func (l *Layout) emitInOrder(tps []abi.TopicPartitions, cur int, topics, slots []int32) (int, bool) {
	rank, tls, ids := l.rank, l.topics, l.ids
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
		start, n := tl.window(s)
		if n == 0 {
			continue
		}
		start += tl.base
		tps[cur] = abi.TopicPartitions{Topic: t, Partitions: ids[start : start+n : start+n]}
		cur++
	}
	return cur, true
}

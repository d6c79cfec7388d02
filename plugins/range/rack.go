package rangeassignor

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/wasmassign/wasmassign/plugins/internal/groupview"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// rackView is what the rack-aware passes need to know about a request:
// racks as small integers, and each partition's replica racks as an id of an
// interned rack set, so that comparing two partitions' racks is comparing two
// integers.
type rackView struct {
	// Racks that some member is on have ids 0..nRacks-1; racks only brokers
	// are on come after them. Rack sets are sorted, so a set's member racks
	// are a prefix of it.
	nRacks     int32
	memberRack []int32   // per member index; -1 when the member has no rack
	sets       [][]int32 // interned rack sets, sorted; sets[0] is the empty set

	// Per topic index, for topics that at least one member with a rack
	// subscribes to.
	rackSub   []bool  // some subscriber has a rack
	needs     []bool  // Kafka's useRackAwareAssignment for this topic
	psetStart []int32 // where the topic's partitions start in pset
	pset      []int32 // rack set id per partition

	subs *groupview.Subscribers
}

// newRackView returns the rack view of req, or nil when Kafka would not use
// rack-aware assignment at all: no member has a rack, or no topic has a
// subscriber whose rack hosts some of its replicas while its partitions'
// replica racks differ.
func newRackView(req *abi.Request, v *groupview.View, opt options) (*rackView, error) {
	rk := groupview.NewRacks(req)
	if rk == nil {
		return nil, nil
	}
	rv := &rackView{nRacks: rk.MemberRacks, memberRack: rk.Member}
	brokerRack, memberRack := rk.Broker, rk.Member

	intern := map[string]int32{"": 0}
	rv.sets = [][]int32{nil}
	setOf := make([]int32, len(req.ReplicaSets))
	var racks []int32
	var key []byte
	for i, replicas := range req.ReplicaSets {
		racks = racks[:0]
		for _, b := range replicas {
			if r, ok := brokerRack[b]; ok {
				racks = append(racks, r)
			}
		}
		slices.Sort(racks)
		racks = slices.Compact(racks)
		key = key[:0]
		for _, r := range racks {
			key = binary.LittleEndian.AppendUint32(key, uint32(r))
		}
		id, ok := intern[string(key)]
		if !ok {
			id = int32(len(rv.sets))
			intern[string(key)] = id
			rv.sets = append(rv.sets, slices.Clone(racks))
		}
		setOf[i] = id
	}

	nt := len(req.Topics)
	rv.rackSub = make([]bool, nt)
	rv.needs = make([]bool, nt)
	rv.psetStart = make([]int32, nt)
	total := 0
	for _, t := range v.ByName {
		total += int(req.Topics[t].PartitionCount)
	}
	rv.pset = make([]int32, 0, total)

	// Stamps (topic index + 1) instead of per-topic sets: stamp[r] marks the
	// racks of the current topic's subscribers, seen[s] the rack sets whose
	// overlap with them has been checked already.
	stamp := make([]int32, rv.nRacks)
	seen := make([]int32, len(rv.sets))
	rv.subs = v.Subscribers()
	used := false
	for _, t := range v.ByName {
		mark := t + 1
		for _, m := range rv.subs.Of(t) {
			if r := memberRack[m]; r >= 0 {
				stamp[r] = mark
				rv.rackSub[t] = true
			}
		}
		if !rv.rackSub[t] {
			continue
		}
		topic := &req.Topics[t]
		base := len(rv.pset)
		rv.psetStart[t] = int32(base)
		for p := range int(topic.PartitionCount) {
			s := int32(0) // no placement: no racks
			if p < len(topic.Partitions) {
				ri := topic.Partitions[p].Replicas
				if int(ri) >= len(setOf) {
					return nil, fmt.Errorf("range: topic %q partition %d refers to replica set %d, but the request has %d", topic.Name, p, ri, len(setOf))
				}
				s = setOf[ri]
			}
			rv.pset = append(rv.pset, s)
		}

		// Kafka's useRackAwareAssignment: a subscriber's rack must host a
		// replica of the topic, and the partitions' replica racks must not
		// all equal their union. They all equal the union exactly when they
		// are all the same set.
		ps := rv.pset[base:]
		allSame, overlap := true, false
		for _, s := range ps {
			if s != ps[0] {
				allSame = false
			}
			if !overlap && seen[s] != mark {
				seen[s] = mark
				for _, r := range rv.memberRacks(s) {
					if stamp[r] == mark {
						overlap = true
						break
					}
				}
			}
		}
		rv.needs[t] = overlap && (opt.preferRackAware || !allSame)
		used = used || rv.needs[t]
	}
	if !used {
		return nil, nil
	}
	return rv, nil
}

// memberRacks returns the racks of set s that some member is on.
func (rv *rackView) memberRacks(s int32) []int32 {
	set := rv.sets[s]
	n := 0
	for n < len(set) && set[n] < rv.nRacks {
		n++
	}
	return set[:n]
}

// coGroup is a set of topics with the same subscribers and the same
// partition count. In Kafka's rack mode such topics are co-partitioned:
// partition p of all of them goes to one member. Their assignment states
// stay identical through every pass, so the group is solved once.
type coGroup struct {
	p      int32
	subs   []int32 // member indices in Kafka order; a subscriber's slot is its index here
	topics []int32

	// Once solved: slot s owns the window s of win in ids, ascending.
	win *groupview.Windows
	ids []int32
}

// quota is Kafka's per-topic range quota: every subscriber may take base
// partitions, and the first rem subscribers to go above base one more.
type quota struct {
	base, rem int32
	count     []int32
}

// room is how many more partitions slot s may take now. It never grows, so
// a slot that has no room stays full.
func (q *quota) room(s int32) int32 {
	n := q.base - q.count[s]
	if q.rem > 0 {
		n++
	}
	return max(n, 0)
}

// add records n partitions given to slot s in one step. Like Kafka, a slot
// that goes above base uses up one extra partition, however far above it
// goes.
func (q *quota) add(s, n int32) {
	q.count[s] += n
	if q.count[s] > q.base {
		q.rem--
	}
}

// layout solves every group and lays out the result.
func (rv *rackView) layout(req *abi.Request, v *groupview.View) (*groupview.Layout, error) {
	lay := v.NewLayout()
	var groups []*coGroup
	buckets := make(map[uint64][]int32)
	for _, t := range v.ByName {
		list := rv.subs.Of(t)
		p := req.Topics[t].PartitionCount
		h := groupHash(p, list)
		var g *coGroup
		for _, gi := range buckets[h] {
			if groups[gi].p == p && slices.Equal(groups[gi].subs, list) {
				g = groups[gi]
				break
			}
		}
		if g == nil {
			g = &coGroup{p: p, subs: list}
			buckets[h] = append(buckets[h], int32(len(groups)))
			groups = append(groups, g)
		}
		g.topics = append(g.topics, t)
	}
	for _, g := range groups {
		if err := rv.solve(req, g); err != nil {
			return nil, err
		}
		for _, t := range g.topics {
			copy(lay.Place(t, g.win), g.ids)
		}
	}
	return lay, nil
}

// groupHash is FNV-1a over a group's partition count and subscribers.
func groupHash(p int32, list []int32) uint64 {
	h := uint64(14695981039346656037)
	h = (h ^ uint64(uint32(p))) * 1099511628211
	for _, m := range list {
		h = (h ^ uint64(uint32(m))) * 1099511628211
	}
	return h
}

// solve runs Kafka's passes over one group: the co-partitioned rack pass
// (several topics) or the single-topic rack pass (one topic that qualifies
// for rack awareness), then the plain range pass for what is left.
func (rv *rackView) solve(req *abi.Request, g *coGroup) error {
	owner := make([]int32, g.p)
	for i := range owner {
		owner[i] = -1
	}
	s := int32(len(g.subs))
	q := quota{base: g.p / s, rem: g.p % s, count: make([]int32, s)}
	t0 := g.topics[0]
	switch {
	case len(g.topics) > 1 && rv.rackSub[t0]:
		rv.coPartition(g, &q, owner)
	case len(g.topics) == 1 && rv.needs[t0]:
		rv.rackRanges(g, &q, owner)
	}
	plainRanges(&q, owner)

	g.win = groupview.NewWindows(q.count)
	next := slices.Clone(g.win.Start)
	g.ids = make([]int32, g.p)
	for p, o := range owner {
		if o < 0 {
			return fmt.Errorf("range: internal error: topic %q partition %d left unassigned", req.Topics[t0].Name, p)
		}
		g.ids[next[o]] = int32(p)
		next[o]++
	}
	return nil
}

// coPartition is Kafka's assignCoPartitionedWithRackMatching: for each
// partition index in turn, the first subscriber with room whose rack hosts a
// replica of that index in every topic of the group (or that has no rack)
// takes it.
//
// Instead of scanning all subscribers per index, it keeps one queue of slots
// per rack and one of slots without a rack, and drops full slots from the
// front of each queue; the first candidate is the lowest head among the
// queues that match.
func (rv *rackView) coPartition(g *coGroup, q *quota, owner []int32) {
	nr := rv.nRacks
	qstart := make([]int32, nr+1)
	var rackless []int32
	for s, m := range g.subs {
		if r := rv.memberRack[m]; r >= 0 {
			qstart[r+1]++
		} else {
			rackless = append(rackless, int32(s))
		}
	}
	for r := range nr {
		qstart[r+1] += qstart[r]
	}
	queue := make([]int32, qstart[nr])
	head := slices.Clone(qstart[:nr])
	for s, m := range g.subs {
		if r := rv.memberRack[m]; r >= 0 {
			queue[head[r]] = int32(s)
			head[r]++
		}
	}
	copy(head, qstart[:nr])

	var scratch []int32
	rl := 0
	for p := range owner {
		best := int32(-1)
		for rl < len(rackless) && q.room(rackless[rl]) == 0 {
			rl++
		}
		if rl < len(rackless) {
			best = rackless[rl]
		}
		var matching []int32
		matching, scratch = rv.commonRacks(g.topics, p, scratch)
		for _, r := range matching {
			h, end := head[r], qstart[r+1]
			for h < end && q.room(queue[h]) == 0 {
				h++
			}
			head[r] = h
			if h < end && (best < 0 || queue[h] < best) {
				best = queue[h]
			}
		}
		if best >= 0 {
			owner[p] = best
			q.add(best, 1)
		}
	}
}

// commonRacks returns the member racks that host a replica of partition p in
// every topic of topics. It may use scratch, and returns it for reuse.
func (rv *rackView) commonRacks(topics []int32, p int, scratch []int32) (common, reuse []int32) {
	s0 := rv.pset[int(rv.psetStart[topics[0]])+p]
	same := true
	for _, t := range topics[1:] {
		if rv.pset[int(rv.psetStart[t])+p] != s0 {
			same = false
			break
		}
	}
	if same {
		return rv.memberRacks(s0), scratch
	}
	common = append(scratch[:0], rv.memberRacks(s0)...)
	for _, t := range topics[1:] {
		other := rv.sets[rv.pset[int(rv.psetStart[t])+p]]
		n, j := 0, 0
		for _, r := range common {
			for j < len(other) && other[j] < r {
				j++
			}
			if j < len(other) && other[j] == r {
				common[n] = r
				n++
			}
		}
		common = common[:n]
		if n == 0 {
			break
		}
	}
	return common, common
}

// rackRanges is Kafka's assignRanges with rack matching, for a topic that is
// not co-partitioned with another: each subscriber in turn takes the lowest
// unassigned partitions that have a replica on its rack (any partitions, for
// a subscriber without a rack), up to its room.
//
// Partitions are listed per rack; a subscriber resumes its rack's list where
// the previous subscriber of that rack stopped, because everything before
// that point is assigned already.
func (rv *rackView) rackRanges(g *coGroup, q *quota, owner []int32) {
	t := g.topics[0]
	nr := rv.nRacks
	ps := rv.pset[rv.psetStart[t] : int(rv.psetStart[t])+int(g.p)]
	lstart := make([]int32, nr+1)
	for _, s := range ps {
		for _, r := range rv.memberRacks(s) {
			lstart[r+1]++
		}
	}
	for r := range nr {
		lstart[r+1] += lstart[r]
	}
	lists := make([]int32, lstart[nr])
	head := slices.Clone(lstart[:nr])
	for p, s := range ps {
		for _, r := range rv.memberRacks(s) {
			lists[head[r]] = int32(p)
			head[r]++
		}
	}
	copy(head, lstart[:nr])

	cur := 0
	for s, m := range g.subs {
		slot := int32(s)
		k := q.room(slot)
		if k == 0 {
			continue
		}
		n := int32(0)
		if r := rv.memberRack[m]; r < 0 {
			for cur < len(owner) && n < k {
				if owner[cur] < 0 {
					owner[cur] = slot
					n++
				}
				cur++
			}
		} else {
			h, end := head[r], lstart[r+1]
			for h < end && n < k {
				if p := lists[h]; owner[p] < 0 {
					owner[p] = slot
					n++
				}
				h++
			}
			head[r] = h
		}
		if n > 0 {
			q.add(slot, n)
		}
	}
}

// plainRanges is Kafka's assignRanges without a rack condition: each
// subscriber in turn takes the lowest unassigned partitions up to its room.
func plainRanges(q *quota, owner []int32) {
	cur := 0
	for s := range q.count {
		if cur == len(owner) {
			return
		}
		slot := int32(s)
		k := q.room(slot)
		if k == 0 {
			continue
		}
		n := int32(0)
		for cur < len(owner) && n < k {
			if owner[cur] < 0 {
				owner[cur] = slot
				n++
			}
			cur++
		}
		if n > 0 {
			q.add(slot, n)
		}
	}
}

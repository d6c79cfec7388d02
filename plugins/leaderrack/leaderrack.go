package leaderrack

import (
	"fmt"

	"github.com/wasmassign/wasmassign/plugins/internal/groupview"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Name is the assignor's name, and the one client protocol it answers for.
const Name = "leader-rack-range"

// Info describes the assignor to the host. Both modes are declared because
// the host does the KIP-429 withholding for cooperative groups.
func Info() abi.AssignorInfo {
	return abi.AssignorInfo{
		Name:        Name,
		Version:     "1.0.0",
		Protocols:   []string{Name},
		Modes:       abi.ModeEager | abi.ModeCooperative,
		Description: "NAVER's RackAwareRangeAssignor: range quotas, each partition to a consumer on its leader's rack, else a follower's",
	}
}

// Assign computes the assignment for req: per topic, range quotas filled
// from the leader's rack, then the followers' racks, then in order (see the
// package comment). It returns one MemberAssignment per member, in request
// order.
func Assign(req *abi.Request) (*abi.Response, error) {
	v, err := groupview.New(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	rk := newRacks(req)
	subs := v.Subscribers()
	lay := v.NewLayout()
	var tp topicPass
	for _, t := range v.ByName {
		topic := &req.Topics[t]
		list := subs.Of(t)
		if topic.Partitions == nil || !rk.anyBroker || !tp.start(rk, list, topic.PartitionCount) {
			// Nothing can match: Kafka's plain range, which is an even
			// split in member order starting at slot 0.
			ids, _ := lay.Split(t, 0)
			for i := range ids {
				ids[i] = int32(i)
			}
			continue
		}
		if err := tp.leaders(req, rk, topic); err != nil {
			return nil, err
		}
		tp.followers(req, rk, topic)
		if err := tp.rest(topic); err != nil {
			return nil, err
		}
		tp.place(lay, t)
	}
	return lay.Response(), nil
}

// topicPass is the state of one topic's three steps. Its buffers are reused
// from topic to topic.
type topicPass struct {
	// Range quota: a slot may hold base partitions, and the first rem slots
	// to go above base one more.
	base, rem int32
	count     []int32 // per slot; handed to the topic's Windows, so new per topic
	owner     []int32 // per partition: the owning slot, -1 while unassigned
	left      int     // partitions still unassigned: when 0, steps 2 and 3 have nothing to scan for

	// ring lists the slots of rack r's subscribers in member order at
	// ring[first[r]:first[r+1]]; cursor[r] is the position of the one that
	// serves rack r next. Every pick of steps 1 and 2 goes through a cursor,
	// which then moves on, so the slot under the cursor is always the first
	// in member order among the rack's least-loaded subscribers.
	ring, first, cursor []int32

	need, at []int32 // scratch for rest and place
}

// start prepares the pass for a topic of p partitions whose subscribers, in
// slot order, are list. It reports false when none of them has a rack, in
// which case the topic is plain range.
func (tp *topicPass) start(rk *racks, list []int32, p int32) bool {
	nr := rk.n
	tp.first = resize(tp.first, int(nr)+1)
	clear(tp.first)
	racked := 0
	for _, m := range list {
		if r := rk.member[m]; r >= 0 {
			tp.first[r+1]++
			racked++
		}
	}
	if racked == 0 {
		return false
	}
	for r := range nr {
		tp.first[r+1] += tp.first[r]
	}
	tp.cursor = resize(tp.cursor, int(nr))
	copy(tp.cursor, tp.first[:nr])
	tp.ring = resize(tp.ring, racked)
	for s, m := range list {
		if r := rk.member[m]; r >= 0 {
			tp.ring[tp.cursor[r]] = int32(s)
			tp.cursor[r]++
		}
	}
	copy(tp.cursor, tp.first[:nr])

	c := int32(len(list))
	tp.base, tp.rem = p/c, p%c
	tp.count = make([]int32, c)
	tp.owner = resize(tp.owner, int(p))
	tp.left = int(p)
	for i := range tp.owner {
		tp.owner[i] = -1
	}
	return true
}

// resize returns s with length n, reusing its array when it is big enough.
func resize(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

// next returns the slot that serves rack r next, or -1 when the rack has no
// subscriber with quota left. Because the cursor's slot is among the rack's
// least loaded, when it is full the whole rack is.
func (tp *topicPass) next(r int32) int32 {
	if r < 0 || tp.first[r] == tp.first[r+1] {
		return -1
	}
	s := tp.ring[tp.cursor[r]]
	if c := tp.count[s]; c < tp.base || (c == tp.base && tp.rem > 0) {
		return s
	}
	return -1
}

// take gives partition p to slot s, the one under rack r's cursor, and
// moves the cursor on.
func (tp *topicPass) take(p int, s, r int32) {
	tp.owner[p] = s
	tp.left--
	tp.count[s]++
	if tp.count[s] == tp.base+1 {
		tp.rem-- // s is the next to go above base: it uses up an extra
	}
	if tp.cursor[r]++; tp.cursor[r] == tp.first[r+1] {
		tp.cursor[r] = tp.first[r]
	}
}

// leaders is step 1: each partition, in ascending order, to the next
// subscriber with quota on its leader's rack. It also checks every
// placement's replica set, so that a malformed request is refused whether
// or not step 2 reads it.
func (tp *topicPass) leaders(req *abi.Request, rk *racks, topic *abi.Topic) error {
	for p := range tp.owner {
		if p >= len(topic.Partitions) {
			break // no placement: matches nothing
		}
		pt := &topic.Partitions[p]
		if int(pt.Replicas) >= len(req.ReplicaSets) {
			return fmt.Errorf("%s: topic %q partition %d refers to replica set %d, but the request has %d", Name, topic.Name, p, pt.Replicas, len(req.ReplicaSets))
		}
		r := rk.broker(pt.Leader)
		if s := tp.next(r); s >= 0 {
			tp.take(p, s, r)
		}
	}
	return nil
}

// followers is step 2: each partition still left, in ascending order, to
// the least-loaded subscriber with quota on the rack of a replica other
// than the leader, the first in member order among equals.
func (tp *topicPass) followers(req *abi.Request, rk *racks, topic *abi.Topic) {
	if tp.left == 0 {
		return
	}
	for p, o := range tp.owner {
		if o >= 0 || p >= len(topic.Partitions) {
			continue
		}
		pt := &topic.Partitions[p]
		best, bestRack := int32(-1), int32(-1)
		for _, b := range req.ReplicaSets[pt.Replicas] {
			if b == pt.Leader {
				continue
			}
			r := rk.broker(b)
			s := tp.next(r)
			if s < 0 {
				continue
			}
			if best < 0 || tp.count[s] < tp.count[best] || (tp.count[s] == tp.count[best] && s < best) {
				best, bestRack = s, r
			}
		}
		if best >= 0 {
			tp.take(p, best, bestRack)
		}
	}
}

// rest is step 3, Kafka's plain range pass over what is left: each slot in
// member order takes the lowest partitions left up to its quota, the extra
// going to the first slots still at or below base. The quotas add up to P
// exactly, so every slot gets its whole quota: first fix each slot's final
// count, then deal the partitions left out in ascending order.
func (tp *topicPass) rest(topic *abi.Topic) error {
	if tp.left == 0 {
		return nil // every slot is at base or base+1 already
	}
	tp.need = resize(tp.need, len(tp.count))
	for s, c := range tp.count {
		tp.need[s] = 0
		if c <= tp.base {
			final := tp.base
			if tp.rem > 0 {
				final++
				tp.rem--
			}
			tp.need[s], tp.count[s] = final-c, final
		}
	}
	s := 0
	for p, o := range tp.owner {
		if o >= 0 {
			continue
		}
		for s < len(tp.need) && tp.need[s] == 0 {
			s++
		}
		if s == len(tp.need) {
			return fmt.Errorf("%s: internal error: topic %q partition %d is left over after every quota is full", Name, topic.Name, p)
		}
		tp.owner[p] = int32(s)
		tp.need[s]--
	}
	return nil
}

// place lays the topic out from the owners: each slot's partitions,
// ascending, in one window.
func (tp *topicPass) place(lay *groupview.Layout, t int32) {
	w := groupview.NewWindows(tp.count)
	ids := lay.Place(t, w)
	tp.at = resize(tp.at, len(w.Start))
	copy(tp.at, w.Start)
	for p, s := range tp.owner {
		ids[tp.at[s]] = int32(p)
		tp.at[s]++
	}
}

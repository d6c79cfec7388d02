package groupview

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// View is a request read the way Kafka's AbstractPartitionAssignor reads a
// group: members in Kafka's order, each topic's subscribers, and the topics
// that have partitions to assign. It keeps a pointer to the request, which
// must not change while the View is in use.
type View struct {
	req *abi.Request

	// Order lists the indices of the request's members in Kafka's member
	// order: static members (with a group.instance.id) by instance id, then
	// dynamic members by member id. Assignors must not trust the request's
	// own order, which the host does not promise to keep stable.
	Order []int32
	// ByName lists the topics that have partitions to assign, ordered by
	// name: each exists, has at least one partition and at least one
	// subscriber. Kafka's assignors skip every other topic.
	ByName []int32

	// count[t] is the number of members subscribed to topic t.
	count []int32
	// slot[entry[m]+j] is member m's slot in topic Members[m].Topics[j], or
	// -1 when the member lists that topic a second time.
	entry []int32
	slot  []int32
}

// New reads req in one pass over its members in Kafka's order, with no map
// keyed by names. A member that lists a topic twice counts once. The error
// names the member whose subscription refers to a topic the request does
// not have; callers prefix it with the assignor's name.
func New(req *abi.Request) (*View, error) {
	// Locals rather than v's fields, so that the compiler keeps the slice
	// headers in registers through the loop over every subscription.
	order := MemberOrder(req.Members)
	nt, n := len(req.Topics), len(req.Members)
	entry := make([]int32, n+1)
	for m := range n {
		entry[m+1] = entry[m] + int32(len(req.Members[m].Topics))
	}
	count := make([]int32, nt)
	slot := make([]int32, entry[n])
	last := make([]int32, nt) // rank+1 of the last member counted per topic
	for rank, m := range order {
		mem := &req.Members[m]
		slots := slot[entry[m]:entry[m+1]]
		for j, t := range mem.Topics {
			if t < 0 || int(t) >= nt {
				return nil, fmt.Errorf("member %q subscribes to topic index %d, but the request has %d topics", mem.MemberID, t, nt)
			}
			if last[t] == int32(rank+1) {
				slots[j] = -1
				continue
			}
			last[t] = int32(rank + 1)
			slots[j] = count[t]
			count[t]++
		}
	}
	v := &View{req: req, Order: order, count: count, entry: entry, slot: slot}
	v.ByName = AssignableByName(req, func(t int32) bool { return count[t] > 0 })
	return v, nil
}

// MemberOrder returns the indices of ms in Kafka's member order (Kafka's
// AbstractPartitionAssignor.MemberInfo ordering): static members (with a
// group.instance.id) by instance id, then dynamic members by member id.
func MemberOrder(ms []abi.Member) []int32 {
	order := make([]int32, len(ms))
	for i := range order {
		order[i] = int32(i)
	}
	// The host usually sends members in this order already: checking costs
	// one comparison per member where sorting costs a dozen. Stable, so that
	// members with equal ids (which a valid group never has) still come out
	// in a fixed order.
	cmp := func(a, b int32) int { return compareMembers(&ms[a], &ms[b]) }
	if !slices.IsSortedFunc(order, cmp) {
		slices.SortStableFunc(order, cmp)
	}
	return order
}

func compareMembers(a, b *abi.Member) int {
	aStatic, bStatic := a.InstanceID != "", b.InstanceID != ""
	switch {
	case aStatic && bStatic:
		if c := strings.Compare(a.InstanceID, b.InstanceID); c != 0 {
			return c
		}
	case aStatic:
		return -1
	case bStatic:
		return 1
	}
	return strings.Compare(a.MemberID, b.MemberID)
}

// AssignableByName returns the topics of req that have partitions to
// assign, ordered by name: each exists, has at least one partition, and
// subscribed(t) says some member subscribes to it. A topic missing from the
// cluster or without partitions is skipped, as Kafka's
// AbstractPartitionAssignor does; ties between equal names (which a valid
// request never has) go by index, so that the order is still fixed. It is
// View.ByName for assignors that find their subscribers another way.
func AssignableByName(req *abi.Request, subscribed func(t int32) bool) []int32 {
	var byName []int32
	for t := range req.Topics {
		tp := &req.Topics[t]
		if tp.Exists && tp.PartitionCount > 0 && subscribed(int32(t)) {
			byName = append(byName, int32(t))
		}
	}
	slices.SortFunc(byName, func(a, b int32) int {
		if c := strings.Compare(req.Topics[a].Name, req.Topics[b].Name); c != 0 {
			return c
		}
		return int(a - b)
	})
	return byName
}

// SubscriberCount returns the number of members subscribed to topic t.
func (v *View) SubscriberCount(t int32) int32 {
	return v.count[t]
}

// Subscribers lists each topic's subscribers in Kafka's order. Index i of a
// topic's list is the member in slot i.
type Subscribers struct {
	count []int32
	// order lists every member in Kafka's order. It is the list of each
	// topic that every member subscribes to, so the common case of
	// identical subscriptions needs no per-topic lists at all.
	order       []int32
	start, list []int32 // the other topics: list[start[t]:start[t+1]]
}

// Of returns the member indices subscribed to topic t, in Kafka's order.
// The slice is shared: callers must not change it.
func (l *Subscribers) Of(t int32) []int32 {
	if int(l.count[t]) == len(l.order) {
		return l.order
	}
	return l.list[l.start[t]:l.start[t+1]]
}

// Subscribers builds the subscriber list of every topic. It costs one pass
// over the subscriptions, and nothing at all when subscriptions are
// identical, so assignors that decide per slot alone need not call it.
func (v *View) Subscribers() *Subscribers {
	nt, n := len(v.count), len(v.Order)
	l := &Subscribers{count: v.count, order: v.Order, start: make([]int32, nt+1)}
	for t, c := range v.count {
		l.start[t+1] = l.start[t]
		if int(c) != n {
			l.start[t+1] += c
		}
	}
	if l.start[nt] == 0 {
		return l
	}
	list, start, count, entry, slot := make([]int32, l.start[nt]), l.start, v.count, v.entry, v.slot
	for m := range v.req.Members {
		slots := slot[entry[m]:entry[m+1]]
		for j, t := range v.req.Members[m].Topics {
			if slots[j] >= 0 && int(count[t]) != n {
				list[start[t]+slots[j]] = int32(m)
			}
		}
	}
	l.list = list
	return l
}

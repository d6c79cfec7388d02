package rangeassignor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Info describes the range assignor to the host. Both modes are declared
// because the host does the KIP-429 withholding for cooperative groups.
func Info() abi.AssignorInfo {
	return abi.AssignorInfo{
		Name:        "range",
		Version:     "1.0.0",
		Protocols:   []string{"range"},
		Modes:       abi.ModeEager | abi.ModeCooperative,
		Description: "Kafka's RangeAssignor: consecutive partitions per topic, rack-aware per KIP-881",
	}
}

// Assign computes Kafka's range assignment for req. It returns one
// MemberAssignment per member, in request order.
func Assign(req *abi.Request) (*abi.Response, error) {
	return assign(req, options{})
}

// options holds switches that only tests set.
type options struct {
	// preferRackAware mirrors AbstractPartitionAssignor.preferRackAwareLogic,
	// the switch Kafka's own tests use to run the rack-aware passes even when
	// every partition has replicas on the same racks. Kafka's test
	// expectations for those cases can only be checked with it on.
	preferRackAware bool
}

func assign(req *abi.Request, opt options) (*abi.Response, error) {
	order := memberOrder(req.Members)
	subs, err := subscribersOf(req, order)
	if err != nil {
		return nil, err
	}
	byName := assignableTopics(req, &subs)

	rv, err := newRackView(req, order, &subs, byName, opt)
	if err != nil {
		return nil, err
	}
	if rv == nil {
		return plainLayout(req, &subs, byName).emit(req, &subs), nil
	}
	lay, err := rv.layout(req, byName)
	if err != nil {
		return nil, err
	}
	return lay.emit(req, &subs), nil
}

// memberOrder returns the indices of ms in Kafka's member order: static
// members by instance id, then dynamic members by member id (Kafka's
// AbstractPartitionAssignor.MemberInfo ordering).
func memberOrder(ms []abi.Member) []int32 {
	order := make([]int32, len(ms))
	for i := range order {
		order[i] = int32(i)
	}
	// Stable, so that members with equal ids (which a valid group never has)
	// still come out in a fixed order.
	slices.SortStableFunc(order, func(a, b int32) int {
		return compareMembers(&ms[a], &ms[b])
	})
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

// subscribers is the subscription table. It is built in one pass over the
// members in Kafka's order and needs no map keyed by names.
type subscribers struct {
	// count[t] is the number of members subscribed to topic t.
	count []int32
	// slot[entry[m]+j] is member m's position among the subscribers of
	// topic Members[m].Topics[j] (its slot there), or -1 when the member
	// lists that topic a second time.
	entry []int32
	slot  []int32
}

// subscribersOf builds the subscription table. A member that lists a topic
// twice counts once.
func subscribersOf(req *abi.Request, order []int32) (subscribers, error) {
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
				return subscribers{}, fmt.Errorf("range: member %q subscribes to topic index %d, but the request has %d topics", mem.MemberID, t, nt)
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
	return subscribers{count: count, entry: entry, slot: slot}, nil
}

// subscriberLists gives each topic's subscribers in Kafka's order.
type subscriberLists struct {
	count []int32
	// order lists every member in Kafka's order. It is the list of each
	// topic that every member subscribes to, so the common case of
	// identical subscriptions needs no per-topic lists at all.
	order       []int32
	start, list []int32 // the other topics: list[start[t]:start[t+1]]
}

func (l *subscriberLists) of(t int32) []int32 {
	if int(l.count[t]) == len(l.order) {
		return l.order
	}
	return l.list[l.start[t]:l.start[t+1]]
}

// lists builds the subscriber list of every topic.
func (s *subscribers) lists(req *abi.Request, order []int32) *subscriberLists {
	nt, n := len(s.count), len(order)
	l := &subscriberLists{count: s.count, order: order, start: make([]int32, nt+1)}
	for t, c := range s.count {
		l.start[t+1] = l.start[t]
		if int(c) != n {
			l.start[t+1] += c
		}
	}
	if l.start[nt] == 0 {
		return l
	}
	l.list = make([]int32, l.start[nt])
	for m := range req.Members {
		slots := s.slot[s.entry[m]:s.entry[m+1]]
		for j, t := range req.Members[m].Topics {
			if slots[j] >= 0 && int(s.count[t]) != n {
				l.list[l.start[t]+slots[j]] = int32(m)
			}
		}
	}
	return l
}

// assignableTopics returns the topics that have partitions to assign, ordered
// by name: a topic that is missing from the cluster or has no partitions is
// skipped, as Kafka's AbstractPartitionAssignor does.
func assignableTopics(req *abi.Request, subs *subscribers) []int32 {
	var byName []int32
	for t := range req.Topics {
		tp := &req.Topics[t]
		if tp.Exists && tp.PartitionCount > 0 && subs.count[t] > 0 {
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

// plainLayout is the classic range assignment. Subscriber i of a topic with
// P partitions and C subscribers takes P/C partitions, plus one when
// i < P%C, starting where subscriber i-1 stopped. Each topic's ids are laid
// out once in ascending order and every member gets a window of them, so
// nothing is done per partition beyond writing its id.
func plainLayout(req *abi.Request, subs *subscribers, byName []int32) *layout {
	lay := newLayout(req, byName)
	for _, t := range byName {
		tl := &lay.topics[t]
		p := req.Topics[t].PartitionCount
		c := subs.count[t]
		tl.q, tl.r = p/c, p%c
		lay.entries += int(min(c, p))
		ascending(lay.ids[tl.base : tl.base+p])
	}
	return lay
}

// ascending writes 0, 1, 2, ... into s.
//
//go:noinline
func ascending(s []int32) {
	for i := range s {
		s[i] = int32(i)
	}
}

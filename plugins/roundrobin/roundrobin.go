package roundrobin

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Info describes the roundrobin assignor to the host. "RoundRobinAssigner"
// is the protocol name kafkajs uses for the same strategy. Both modes are
// declared because the host does the KIP-429 withholding for cooperative
// groups.
func Info() abi.AssignorInfo {
	return abi.AssignorInfo{
		Name:        "roundrobin",
		Version:     "1.0.0",
		Protocols:   []string{"roundrobin", "RoundRobinAssigner"},
		Modes:       abi.ModeEager | abi.ModeCooperative,
		Description: "Kafka's RoundRobinAssignor: partitions dealt to members in turn, by topic name",
	}
}

// Assign computes Kafka's round-robin assignment for req. It returns one
// MemberAssignment per member, in request order.
func Assign(req *abi.Request) (*abi.Response, error) {
	n := len(req.Members)
	order := memberOrder(req.Members)
	rank := make([]int32, n) // position of each member in Kafka's order
	for i, m := range order {
		rank[m] = int32(i)
	}
	subs, err := subscribersOf(req, order)
	if err != nil {
		return nil, err
	}
	byName := assignableTopics(req, &subs)
	lists := subs.lists(req, order)
	lay := newLayout(req, byName)

	// Kafka's iterator stands on some member when a topic starts. The
	// topic's first partition goes to the first subscriber at or after it
	// (wrapping), and each following partition to the next subscriber in
	// the cycle, since every member in between is skipped. After the topic
	// the iterator stands just past the subscriber that took the last one.
	pos := int32(0)
	for _, t := range byName {
		tl := &lay.topics[t]
		subsOf := lists.of(t)
		s, p := int32(len(subsOf)), req.Topics[t].PartitionCount
		k, _ := slices.BinarySearchFunc(subsOf, pos, func(m, pos int32) int {
			return cmp.Compare(rank[m], pos)
		})
		tl.first = int32(k) % s
		tl.s, tl.q, tl.r = s, p/s, p%s
		last := subsOf[(int64(tl.first)+int64(p)-1)%int64(s)]
		pos = (rank[last] + 1) % int32(n)

		// The partitions that the j-th subscriber from the first one takes
		// (j, j+s, j+2s, ...) are stored together, in turn order.
		region := lay.ids[tl.base : tl.base+p]
		for j := range min(s, p) {
			w := tl.turn(j)
			stride(region[w.start:w.start+w.n], j, s)
		}
		lay.entries += int(min(s, p))
	}
	return lay.emit(req, &subs), nil
}

// stride writes from, from+step, from+2*step, ... into seg.
//
//go:noinline
func stride(seg []int32, from, step int32) {
	for i := range seg {
		seg[i] = from
		from += step
	}
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
				return subscribers{}, fmt.Errorf("roundrobin: member %q subscribes to topic index %d, but the request has %d topics", mem.MemberID, t, nt)
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

// assignableTopics returns the subscribed topics that have partitions to
// assign, ordered by name: a topic that is missing from the cluster or has
// no partitions is skipped, as Kafka's AbstractPartitionAssignor does.
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

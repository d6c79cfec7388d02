package wasmruntime

import (
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Validate checks an assignor's response against its request, by the rules
// of sdk/ABI.md section 5. It returns nil or an *Error of kind
// ErrInvalidOutput whose Rule names the broken rule and whose Detail names the
// member, topic and partition. A response with Error set is not checked.
//
// It runs in time linear in the request and response and allocates one bit
// per partition, so it costs little next to the plugin at a million
// partitions.
func Validate(req *abi.Request, resp *abi.Response, info abi.AssignorInfo) error {
	if resp.Error != "" {
		return nil
	}
	nTopics := int32(len(req.Topics))
	seen := make([]bool, len(req.Members))
	assigned := make([][]uint64, len(req.Topics)) // bitset per topic, made on first use
	counts := make([]int32, len(req.Topics))
	// subscribed[t] == stamp says the current member subscribes to t. Members
	// of one group usually share one subscription slice, so a new stamp is
	// written only when the slice changes, not once per member.
	subscribed := make([]int32, len(req.Topics))
	stamp := int32(0)
	var stamped []int32

	// In the grouped layout an entry may stand for many topics; every list
	// of the response's table is checked against the topic table once,
	// and each entry's partitions once for all topics of its list.
	for k, l := range resp.TopicLists {
		for _, t := range l {
			if t < 0 || t >= nTopics {
				return invalid(RuleTopicIndex, "topic list %d: topic index %d, the request has %d topics", k, t, nTopics)
			}
		}
	}
	var one [1]int32
	for _, ma := range resp.Members {
		if ma.Member < 0 || int(ma.Member) >= len(req.Members) {
			return invalid(RuleMemberIndex, "member index %d, the request has %d members", ma.Member, len(req.Members))
		}
		m := &req.Members[ma.Member]
		if seen[ma.Member] {
			return invalid(RuleDuplicateMember, "member %q appears twice", m.MemberID)
		}
		seen[ma.Member] = true
		if stamp == 0 || !sameSlice(m.Topics, stamped) {
			stamp++
			for _, t := range m.Topics {
				subscribed[t] = stamp
			}
			stamped = m.Topics
		}
		for i := range ma.Partitions {
			tp := &ma.Partitions[i]
			if tp.Topic < 0 && (resp.TopicLists == nil || int(^tp.Topic) >= len(resp.TopicLists)) || tp.Topic >= nTopics {
				return invalid(RuleTopicIndex, "member %q: topic index %d, the request has %d topics", m.MemberID, tp.Topic, nTopics)
			}
			topics := abi.EntryTopics(resp.TopicLists, tp, &one)
			if len(tp.Partitions) == 1 {
				// The usual entry of a large group, one partition of each
				// of many topics: its bit is found once.
				if err := markOne(req, topics, tp.Partitions[0], subscribed, stamp, assigned, counts, m.MemberID); err != nil {
					return err
				}
				continue
			}
			// The partition ids' range, found once per entry, settles
			// most range checks per topic with one comparison.
			lo, hi := int32(0), int32(-1)
			if len(tp.Partitions) > 0 {
				lo, hi = minMax(tp.Partitions)
			}
			for _, ti := range topics {
				t := &req.Topics[ti]
				if !t.Exists {
					return invalid(RuleNonexistentTopic, "member %q: topic %q", m.MemberID, t.Name)
				}
				if subscribed[ti] != stamp {
					return invalid(RuleUnsubscribed, "member %q: topic %q", m.MemberID, t.Name)
				}
				if len(tp.Partitions) == 0 {
					continue
				}
				if lo < 0 || hi >= t.PartitionCount {
					p := lo
					if lo >= 0 {
						p = hi
					}
					return invalid(RulePartitionRange, "member %q: partition %d of topic %q, which has %d partitions", m.MemberID, p, t.Name, t.PartitionCount)
				}
				bits := assigned[ti]
				if bits == nil {
					bits = make([]uint64, (t.PartitionCount+63)/64)
					assigned[ti] = bits
				}
				if p, ok := markAll(bits, tp.Partitions); !ok {
					return invalid(RuleDuplicatePartition, "partition %d of topic %q, the second time to member %q", p, t.Name, m.MemberID)
				}
				counts[ti] += int32(len(tp.Partitions))
			}
		}
	}

	if info.MayLeaveUnassigned {
		return nil
	}
	// Partitions are never assigned twice by now, so a topic whose count
	// matches its partition count is complete. Only when some topic is not
	// do the members' subscriptions (a million entries in a large group)
	// need walking to find one that subscribes to it.
	complete := true
	for ti := range req.Topics {
		if t := &req.Topics[ti]; t.Exists && counts[ti] != t.PartitionCount {
			complete = false
			break
		}
	}
	if complete {
		return nil
	}
	for i := range req.Members {
		m := &req.Members[i]
		for _, ti := range m.Topics {
			t := &req.Topics[ti]
			if !t.Exists || counts[ti] == t.PartitionCount {
				continue
			}
			bits := assigned[ti]
			for p := int32(0); p < t.PartitionCount; p++ {
				if bits == nil || bits[p>>6]&(1<<(p&63)) == 0 {
					return invalid(RuleUnassigned, "partition %d of topic %q, to which member %q subscribes, is assigned to nobody", p, t.Name, m.MemberID)
				}
			}
		}
	}
	return nil
}

// sameSlice reports whether a and b are the same slice of the same array.
func sameSlice(a, b []int32) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// minMax returns the smallest and largest of ps, which is not empty.
func minMax(ps []int32) (lo, hi int32) {
	lo, hi = ps[0], ps[0]
	for _, p := range ps[1:] {
		lo, hi = min(lo, p), max(hi, p)
	}
	return lo, hi
}

// markAll sets the bit of every partition of ps, all within bits, and
// reports the first one that was set already.
func markAll(bits []uint64, ps []int32) (int32, bool) {
	for _, p := range ps {
		w, b := p>>6, uint64(1)<<(p&63)
		if bits[w]&b != 0 {
			return p, false
		}
		bits[w] |= b
	}
	return 0, true
}

// markOne records partition p of each of topics as assigned to the member
// memberID, checking each topic as Validate does.
func markOne(req *abi.Request, topics []int32, p int32, subscribed []int32, stamp int32, assigned [][]uint64, counts []int32, memberID string) error {
	w, b := p>>6, uint64(1)<<(p&63)
	for _, ti := range topics {
		t := &req.Topics[ti]
		switch {
		case !t.Exists:
			return invalid(RuleNonexistentTopic, "member %q: topic %q", memberID, t.Name)
		case subscribed[ti] != stamp:
			return invalid(RuleUnsubscribed, "member %q: topic %q", memberID, t.Name)
		case p < 0 || p >= t.PartitionCount:
			return invalid(RulePartitionRange, "member %q: partition %d of topic %q, which has %d partitions", memberID, p, t.Name, t.PartitionCount)
		}
		bits := assigned[ti]
		if bits == nil {
			bits = make([]uint64, (t.PartitionCount+63)/64)
			assigned[ti] = bits
		}
		if bits[w]&b != 0 {
			return invalid(RuleDuplicatePartition, "partition %d of topic %q, the second time to member %q", p, t.Name, memberID)
		}
		bits[w] |= b
		counts[ti]++
	}
	return nil
}

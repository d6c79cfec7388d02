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
		for _, tp := range ma.Partitions {
			if tp.Topic < 0 || tp.Topic >= nTopics {
				return invalid(RuleTopicIndex, "member %q: topic index %d, the request has %d topics", m.MemberID, tp.Topic, nTopics)
			}
			t := &req.Topics[tp.Topic]
			if !t.Exists {
				return invalid(RuleNonexistentTopic, "member %q: topic %q", m.MemberID, t.Name)
			}
			if subscribed[tp.Topic] != stamp {
				return invalid(RuleUnsubscribed, "member %q: topic %q", m.MemberID, t.Name)
			}
			bits := assigned[tp.Topic]
			if bits == nil && len(tp.Partitions) > 0 {
				bits = make([]uint64, (t.PartitionCount+63)/64)
				assigned[tp.Topic] = bits
			}
			for _, p := range tp.Partitions {
				if p < 0 || p >= t.PartitionCount {
					return invalid(RulePartitionRange, "member %q: partition %d of topic %q, which has %d partitions", m.MemberID, p, t.Name, t.PartitionCount)
				}
				w, b := p>>6, uint64(1)<<(p&63)
				if bits[w]&b != 0 {
					return invalid(RuleDuplicatePartition, "partition %d of topic %q, the second time to member %q", p, t.Name, m.MemberID)
				}
				bits[w] |= b
			}
			counts[tp.Topic] += int32(len(tp.Partitions))
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

package abi

import "fmt"

// Rule names a rule of sdk/ABI.md section 5 that a response broke. Its
// text is what operators read after "invalid output: ", so it never
// changes.
type Rule string

// The rules of sdk/ABI.md, section 5. ValidateResponse reports all but the
// first two, which only a host reading the guest's buffer can break.
const (
	RuleMalformed          Rule = "malformed response"
	RuleOutputSize         Rule = "response too large"
	RuleMemberIndex        Rule = "member not in request"
	RuleDuplicateMember    Rule = "member assigned twice"
	RuleTopicIndex         Rule = "topic not in request"
	RuleNonexistentTopic   Rule = "topic does not exist"
	RulePartitionRange     Rule = "partition does not exist"
	RuleDuplicatePartition Rule = "partition assigned twice"
	RuleUnsubscribed       Rule = "topic not subscribed"
	RuleUnassigned         Rule = "subscribed partition unassigned"
)

// RuleError is a response's breach of a rule, as ValidateResponse reports
// it: the host wraps it into its own error type, a guest may use it to
// check itself before answering.
type RuleError struct {
	// Rule is the rule broken.
	Rule Rule
	// Detail names the member, topic and partition, in words for an
	// operator.
	Detail string
}

// Error reads "rule: detail", as the host's "invalid output: " message
// continues.
func (e *RuleError) Error() string { return string(e.Rule) + ": " + e.Detail }

func broken(rule Rule, format string, args ...any) error {
	return &RuleError{Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// ValidateResponse checks resp against req by the rules of sdk/ABI.md
// section 5: every member and topic it names is in the request, every
// topic exists and is one the member subscribes to, every partition exists
// and is assigned once, and, unless info declares MayLeaveUnassigned, every
// subscribed partition is assigned. Entries over resp's topic lists
// (section 7) are checked as the plain entries they stand for; whether the
// assignor may answer in that layout at all is the caller's to check. It
// returns nil or a *RuleError. A response with Error set is not checked.
//
// req must be well formed, as a decoded or host-built request is: its
// members' topics index its topic table.
//
// It runs in time linear in the request and response and allocates one bit
// per partition, so it costs little next to the assignor at a million
// partitions.
func ValidateResponse(req *Request, resp *Response, info AssignorInfo) error {
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
				return broken(RuleTopicIndex, "topic list %d: topic index %d, the request has %d topics", k, t, nTopics)
			}
		}
	}
	var one [1]int32
	for _, ma := range resp.Members {
		if ma.Member < 0 || int(ma.Member) >= len(req.Members) {
			return broken(RuleMemberIndex, "member index %d, the request has %d members", ma.Member, len(req.Members))
		}
		m := &req.Members[ma.Member]
		if seen[ma.Member] {
			return broken(RuleDuplicateMember, "member %q appears twice", m.MemberID)
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
				return broken(RuleTopicIndex, "member %q: topic index %d, the request has %d topics", m.MemberID, tp.Topic, nTopics)
			}
			topics := EntryTopics(resp.TopicLists, tp, &one)
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
					return broken(RuleNonexistentTopic, "member %q: topic %q", m.MemberID, t.Name)
				}
				if subscribed[ti] != stamp {
					return broken(RuleUnsubscribed, "member %q: topic %q", m.MemberID, t.Name)
				}
				if len(tp.Partitions) == 0 {
					continue
				}
				if lo < 0 || hi >= t.PartitionCount {
					p := lo
					if lo >= 0 {
						p = hi
					}
					return broken(RulePartitionRange, "member %q: partition %d of topic %q, which has %d partitions", m.MemberID, p, t.Name, t.PartitionCount)
				}
				bits := assigned[ti]
				if bits == nil {
					bits = make([]uint64, (t.PartitionCount+63)/64)
					assigned[ti] = bits
				}
				if p, ok := markAll(bits, tp.Partitions); !ok {
					return broken(RuleDuplicatePartition, "partition %d of topic %q, the second time to member %q", p, t.Name, m.MemberID)
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
					return broken(RuleUnassigned, "partition %d of topic %q, to which member %q subscribes, is assigned to nobody", p, t.Name, m.MemberID)
				}
			}
		}
	}
	return nil
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
// memberID, checking each topic as ValidateResponse does.
func markOne(req *Request, topics []int32, p int32, subscribed []int32, stamp int32, assigned [][]uint64, counts []int32, memberID string) error {
	w, b := p>>6, uint64(1)<<(p&63)
	for _, ti := range topics {
		t := &req.Topics[ti]
		switch {
		case !t.Exists:
			return broken(RuleNonexistentTopic, "member %q: topic %q", memberID, t.Name)
		case subscribed[ti] != stamp:
			return broken(RuleUnsubscribed, "member %q: topic %q", memberID, t.Name)
		case p < 0 || p >= t.PartitionCount:
			return broken(RulePartitionRange, "member %q: partition %d of topic %q, which has %d partitions", memberID, p, t.Name, t.PartitionCount)
		}
		bits := assigned[ti]
		if bits == nil {
			bits = make([]uint64, (t.PartitionCount+63)/64)
			assigned[ti] = bits
		}
		if bits[w]&b != 0 {
			return broken(RuleDuplicatePartition, "partition %d of topic %q, the second time to member %q", p, t.Name, memberID)
		}
		bits[w] |= b
		counts[ti]++
	}
	return nil
}

// Package handover decides what the members of a group may receive in this
// generation, given the target assignment an assignor returned. It is how the
// host, not every plugin, keeps a partition from being owned by two members
// at once: a plugin always returns its target, and Withhold holds back each
// partition that is still with someone else until that member has let go.
//
// # The rule: withhold by reported ownership, not by protocol name
//
// A partition is never added to a member while another member still holds
// it. A member holds a partition when it reports it in Owned and its
// OwnedGeneration equals the highest OwnedGeneration among the members that
// report any owned partitions. Claims from older generations are stale and
// ignored, so a zombie that missed a rebalance cannot block the rightful
// owner; this matches how Kafka's cooperative-sticky assignor drops claims
// older than the newest generation.
//
// The rebalance protocol and each member's Cooperative flag play no part. A
// Java consumer configured with [cooperative-sticky, range] runs eager yet may
// still report what it owns, and an eager member that reports nothing
// withholds nothing, so for an eager group the assignment equals the target.
//
// Consequences, each deliberate:
//   - A member keeps the partitions of its target that it holds itself.
//   - When two members hold the same partition at the newest generation
//     (conflicting claims), the partition is withheld from everyone, holders
//     included: whoever receives it, some other member still holds it. It
//     goes out in the follow-up rebalance, once the conflict has been
//     resolved by the members revoking it.
//   - A partition held by no one, or only by stale claims, is never withheld.
//
// # Holders the members did not report
//
// The coordinator also knows holders that report nothing yet: a member it has
// handed a partition to that has not rejoined since. It expresses them by
// filling that member's Owned in the request it passes here, with
// OwnedGeneration set to the generation it handed the partitions over in,
// which is the newest one. Likewise a claim sent without a generation (-1, a
// subscription v1) loses to any claim that has one, so the caller should fill
// in the generation it knows before calling Withhold. Which generation is
// safe is the caller's call: the coordinator treats such a claim as current
// only when the member has synced under the same member id, because taking
// the generation of its last SyncGroup alone let a stale claim win in its
// randomized tests.
//
// This package is a pure function of its inputs. It must never import the
// runtime, the coordinator, wazero or anything with I/O, clocks or state: it
// imports only the abi package and the standard library.
package handover

import (
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Withhold returns the assignment the members receive this generation: target
// minus every partition that a member other than the receiver holds (see the
// package comment for what holding means), and how many partitions it
// withheld. User data passes through unchanged, and a member whose every
// partition is withheld still has its entry.
//
// Both may be in the grouped layout (sdk/ABI.md section 7): owned entries
// over req.TopicLists, target entries over target.TopicLists. The result
// keeps target's lists; an entry over a list that gives away a held
// partition is split into plain entries of what may move now.
//
// Neither input is modified. The result shares partition lists and user data
// with target wherever nothing was withheld, so treat both as read-only. An
// error response is returned as a copy, with nothing withheld.
//
// # Notes
//
// The cost is linear in the owned and target partitions, with one int32 per
// partition of each topic that has a holder; 2,000 members and a million
// partitions take milliseconds. Claims and target entries outside the topic
// table, or naming partitions a topic does not have, hold nothing and are
// never withheld; the runtime's validation rejects such targets anyway.
func Withhold(req *abi.Request, target *abi.Response) (assignment *abi.Response, withheld int) {
	if target == nil {
		return nil, 0
	}
	out := &abi.Response{Error: target.Error, TopicLists: target.TopicLists}
	if target.Error != "" || len(target.Members) == 0 {
		out.Members = append([]abi.MemberAssignment(nil), target.Members...)
		return out, 0
	}
	holders := holdersOf(req)
	out.Members = make([]abi.MemberAssignment, len(target.Members))
	for i := range target.Members {
		ma := &target.Members[i]
		out.Members[i] = abi.MemberAssignment{Member: ma.Member, Partitions: ma.Partitions, UserData: ma.UserData}
		if holders == nil {
			continue
		}
		var kept []abi.TopicPartitions // allocated on the first topic that changes
		self := ma.Member + 1
		for k := range ma.Partitions {
			tp := &ma.Partitions[k]
			if tp.Topic < 0 {
				// An entry over a topic list (the grouped layout) stays whole
				// unless it gives away something held; then each of its
				// topics becomes a plain entry of what may move now.
				topics := listOf(target.TopicLists, tp.Topic)
				if kept == nil && !anyBlocked(holders, topics, tp.Partitions, self) {
					continue
				}
				if kept == nil {
					kept = make([]abi.TopicPartitions, 0, len(ma.Partitions)+len(topics))
					kept = append(kept, ma.Partitions[:k]...)
				}
				for _, t := range topics {
					ps, n := keep(tp.Partitions, ownersOf(holders, t), ma.Member)
					withheld += n
					if len(ps) > 0 {
						kept = append(kept, abi.TopicPartitions{Topic: t, Partitions: ps})
					}
				}
				continue
			}
			var owners []int32
			if tp.Topic >= 0 && int(tp.Topic) < len(holders) {
				owners = holders[tp.Topic]
			}
			if kept == nil && len(tp.Partitions) == 1 && !blocked(owners, tp.Partitions[0], self) {
				// A large group's target is mostly one-partition entries
				// that stay put: settle those without a call.
				continue
			}
			ps, n := keep(tp.Partitions, owners, ma.Member)
			if n == 0 && kept == nil {
				continue
			}
			if kept == nil {
				kept = make([]abi.TopicPartitions, 0, len(ma.Partitions))
				kept = append(kept, ma.Partitions[:k]...)
			}
			withheld += n
			if len(ps) > 0 {
				kept = append(kept, abi.TopicPartitions{Topic: tp.Topic, Partitions: ps})
			}
		}
		if kept != nil {
			out.Members[i].Partitions = kept
		}
	}
	return out, withheld
}

// Values in the per-topic holder arrays: otherwise an entry is the holding
// member's index plus one, so that a fresh array means "no holder".
const (
	noHolder    int32 = 0
	manyHolders int32 = -1
)

// holdersOf returns, for each topic of req by index, who holds each
// partition. A topic no one holds anything of has a nil entry, and the result
// is nil when no one holds anything. Arrays indexed by partition, not maps,
// keep a million partitions cheap.
func holdersOf(req *abi.Request) [][]int32 {
	newest, found := int32(0), false
	for i := range req.Members {
		m := &req.Members[i]
		if reportsOwned(m) && (!found || m.OwnedGeneration > newest) {
			newest, found = m.OwnedGeneration, true
		}
	}
	if !found {
		return nil
	}
	holders := make([][]int32, len(req.Topics))
	any := false
	// Grouped claims (sdk/ABI.md section 7) name the same partitions in
	// every topic of a list. When no topic is claimed through two lists or
	// through a list and a plain entry, the topics of a list share one
	// holder array, and a claim is marked once, not once per topic.
	shared := sharedLists(req, newest)
	for i := range req.Members {
		m := &req.Members[i]
		if m.OwnedGeneration != newest {
			continue // stale, or reports nothing
		}
		self := int32(i) + 1
		for k := range m.Owned {
			tp := &m.Owned[k]
			if tp.Topic < 0 {
				if owners, ok := shared[tp.Topic]; ok {
					if owners == nil {
						owners = newSharedOwners(req, tp.Topic, holders)
						shared[tp.Topic] = owners
					}
					if owners != nil {
						mark(owners, tp.Partitions, self)
						any = true
					}
					continue
				}
				for _, ti := range listOf(req.TopicLists, tp.Topic) {
					if owners := topicOwners(req, holders, ti); owners != nil {
						mark(owners, tp.Partitions, self)
						any = true
					}
				}
				continue
			}
			if owners := topicOwners(req, holders, tp.Topic); owners != nil {
				mark(owners, tp.Partitions, self)
				any = true
			}
		}
	}
	if !any {
		return nil
	}
	return holders
}

// topicOwners returns topic ti's holder array, made on first use; nil for a
// topic outside the table or without partitions, which nobody can hold.
func topicOwners(req *abi.Request, holders [][]int32, ti int32) []int32 {
	if ti < 0 || int(ti) >= len(req.Topics) {
		return nil
	}
	t := &req.Topics[ti]
	if !t.Exists || t.PartitionCount <= 0 {
		return nil
	}
	if holders[ti] == nil {
		holders[ti] = make([]int32, t.PartitionCount)
	}
	return holders[ti]
}

// sharedLists returns, as keys, the lists whose topics may share one holder
// array: those claimed by newest-generation members where no topic is also
// claimed through another list or a plain entry. Values start nil.
func sharedLists(req *abi.Request, newest int32) map[int32][]int32 {
	if req.TopicLists == nil {
		return nil
	}
	// via[t] is the list that claims topic t, plainClaim, or 0 when
	// nothing does yet (list references are negative).
	via := make([]int32, len(req.Topics))
	const plainClaim = int32(1)
	clash := make(map[int32]bool)
	// walked holds the lists already walked: walking one again changes
	// nothing, since any claim on its topics made in between was checked
	// against it then. Members of a large group share one or two lists.
	walked := make(map[int32]bool)
	// claimed holds the lists that claimed a topic first: only they can
	// share a holder array.
	claimed := make(map[int32]bool)
	for i := range req.Members {
		m := &req.Members[i]
		if m.OwnedGeneration != newest {
			continue
		}
		for k := range m.Owned {
			tp := &m.Owned[k]
			topics, by := []int32{tp.Topic}, plainClaim
			if tp.Topic < 0 {
				if walked[tp.Topic] {
					continue
				}
				walked[tp.Topic] = true
				topics, by = listOf(req.TopicLists, tp.Topic), tp.Topic
			}
			for _, t := range topics {
				if t < 0 || int(t) >= len(via) {
					continue // not a topic of the request: it holds nothing
				}
				switch prev := via[t]; {
				case prev == 0:
					via[t] = by
					claimed[by] = true
				case prev != by || by == plainClaim:
					if prev < 0 {
						clash[prev] = true
					}
					if by < 0 {
						clash[by] = true
					}
				}
			}
		}
	}
	out := make(map[int32][]int32)
	for by := range claimed {
		if by < 0 && !clash[by] {
			out[by] = nil
		}
	}
	return out
}

// newSharedOwners makes the holder array of list ref's topics, sized for
// the largest, and installs it as each existing topic's array. It returns
// nil when no topic of the list has partitions.
func newSharedOwners(req *abi.Request, ref int32, holders [][]int32) []int32 {
	topics := listOf(req.TopicLists, ref)
	size := int32(0)
	for _, ti := range topics {
		if ti >= 0 && int(ti) < len(req.Topics) && req.Topics[ti].Exists {
			size = max(size, req.Topics[ti].PartitionCount)
		}
	}
	if size <= 0 {
		return nil
	}
	owners := make([]int32, size)
	for _, ti := range topics {
		if ti >= 0 && int(ti) < len(req.Topics) && req.Topics[ti].Exists && req.Topics[ti].PartitionCount > 0 {
			holders[ti] = owners
		}
	}
	return owners
}

// listOf returns the topics of list reference ref in lists, or nothing when
// it refers past the table.
func listOf(lists [][]int32, ref int32) []int32 {
	if k := int(^ref); k >= 0 && k < len(lists) {
		return lists[k]
	}
	return nil
}

// ownersOf returns the holder array of topic t, nil when no one holds any
// of it.
func ownersOf(holders [][]int32, t int32) []int32 {
	if t < 0 || int(t) >= len(holders) {
		return nil
	}
	return holders[t]
}

// anyBlocked reports whether a member other than self holds any of ps in
// any of topics.
func anyBlocked(holders [][]int32, topics, ps []int32, self int32) bool {
	var last []int32
	for _, t := range topics {
		owners := ownersOf(holders, t)
		if owners == nil || (last != nil && &owners[0] == &last[0]) {
			continue // topics of one grouped claim share their array
		}
		last = owners
		for _, p := range ps {
			if blocked(owners, p, self) {
				return true
			}
		}
	}
	return false
}

// mark records self as a holder of each partition in ps.
func mark(owners, ps []int32, self int32) {
	for _, p := range ps {
		if p < 0 || int(p) >= len(owners) {
			continue
		}
		switch owners[p] {
		case noHolder:
			owners[p] = self
		case self, manyHolders:
		default:
			owners[p] = manyHolders
		}
	}
}

// keep returns the partitions of ps that member may receive given owners, and
// how many it dropped. It returns ps itself when it drops nothing.
func keep(ps, owners []int32, member int32) ([]int32, int) {
	if owners == nil {
		return ps, 0
	}
	self := member + 1
	first := -1
	for k, p := range ps {
		if blocked(owners, p, self) {
			first = k
			break
		}
	}
	if first < 0 {
		return ps, 0
	}
	out := make([]int32, first, len(ps)-1)
	copy(out, ps[:first])
	for _, p := range ps[first+1:] {
		if !blocked(owners, p, self) {
			out = append(out, p)
		}
	}
	return out, len(ps) - len(out)
}

// blocked reports whether a member other than self holds p.
func blocked(owners []int32, p, self int32) bool {
	if p < 0 || int(p) >= len(owners) {
		return false
	}
	h := owners[p]
	return h != noHolder && h != self
}

// reportsOwned reports whether m claims at least one partition.
func reportsOwned(m *abi.Member) bool {
	for _, tp := range m.Owned {
		if len(tp.Partitions) > 0 {
			return true
		}
	}
	return false
}

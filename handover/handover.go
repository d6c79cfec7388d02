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
	out := &abi.Response{Error: target.Error}
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
	var holders [][]int32
	for i := range req.Members {
		m := &req.Members[i]
		if m.OwnedGeneration != newest {
			continue // stale, or reports nothing
		}
		self := int32(i) + 1
		for _, tp := range m.Owned {
			if tp.Topic < 0 || int(tp.Topic) >= len(req.Topics) {
				continue
			}
			t := &req.Topics[tp.Topic]
			if !t.Exists || t.PartitionCount <= 0 {
				continue
			}
			if holders == nil {
				holders = make([][]int32, len(req.Topics))
			}
			owners := holders[tp.Topic]
			if owners == nil {
				owners = make([]int32, t.PartitionCount)
				holders[tp.Topic] = owners
			}
			mark(owners, tp.Partitions, self)
		}
	}
	return holders
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

package loadtest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// subscriptionVersion is the ConsumerProtocol subscription version members
// send: v1 added owned partitions (KIP-429), v2 their generation, v3 the
// rack (KIP-881), which the generator leaves null.
const subscriptionVersion = 3

// subscription encodes a member's JoinGroup protocol metadata: its topics,
// and what it owns at ownedGeneration.
func subscription(topics []string, owned []kmsg.ConsumerMemberAssignmentTopic, ownedGeneration int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = subscriptionVersion
	meta.Topics = topics
	meta.Generation = ownedGeneration
	for _, t := range owned {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic, op.Partitions = t.Topic, t.Partitions
		meta.OwnedPartitions = append(meta.OwnedPartitions, op)
	}
	return meta.AppendTo(nil)
}

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}

// leaderAssign is what a member does as its group's leader: Kafka's range
// assignor over the members' subscriptions, which brokers (and kfake)
// need, since they leave the assignment to the leader. The gateway never
// makes a member leader for a group it manages.
//
// Under the cooperative protocol a partition whose owner changes is held
// back for a round, as KIP-429's leader does: the owner sees it dropped,
// revokes it and rejoins, and the next round gives it to its new owner.
func leaderAssign(members []kmsg.JoinGroupResponseMember, partitions map[string]int32, cooperative bool) ([]kmsg.SyncGroupRequestGroupAssignment, error) {
	subscribers := map[string][]string{} // topic -> member ids
	owner := map[topicPartition]string{}
	for _, m := range members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.ProtocolMetadata); err != nil {
			return nil, fmt.Errorf("member %s's subscription: %w", m.MemberID, err)
		}
		for _, t := range meta.Topics {
			subscribers[t] = append(subscribers[t], m.MemberID)
		}
		for _, op := range meta.OwnedPartitions {
			for _, p := range op.Partitions {
				owner[topicPartition{op.Topic, p}] = m.MemberID
			}
		}
	}
	byMember := map[string]map[string][]int32{}
	for _, m := range members {
		byMember[m.MemberID] = map[string][]int32{}
	}
	for topic, ids := range subscribers {
		n, ok := partitions[topic]
		if !ok {
			continue // a topic the target does not have: Kafka assigns none of it
		}
		// Kafka's RangeAssignor: members in member-id order; each takes
		// n/m consecutive partitions and the first n%m one more.
		slices.Sort(ids)
		ids = slices.Compact(ids)
		per, extra := n/int32(len(ids)), n%int32(len(ids))
		for i, id := range ids {
			start := int32(i)*per + min(int32(i), extra)
			length := per
			if int32(i) < extra {
				length++
			}
			for p := start; p < start+length; p++ {
				if was, ok := owner[topicPartition{topic, p}]; cooperative && ok && was != id {
					continue // KIP-429: revoked first, assigned next round
				}
				byMember[id][topic] = append(byMember[id][topic], p)
			}
		}
	}
	out := make([]kmsg.SyncGroupRequestGroupAssignment, 0, len(members))
	for _, m := range members {
		var a kmsg.ConsumerMemberAssignment
		topics := byMember[m.MemberID]
		for _, t := range slices.Sorted(maps.Keys(topics)) {
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = t, topics[t]
			a.Topics = append(a.Topics, at)
		}
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = m.MemberID, a.AppendTo(nil)
		out = append(out, ga)
	}
	return out, nil
}

// decodeAssignment decodes a SyncGroup's member assignment, sorted by
// topic and partition; an empty one assigns nothing.
func decodeAssignment(b []byte) ([]kmsg.ConsumerMemberAssignmentTopic, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		return nil, err
	}
	topics := a.Topics[:0]
	for _, t := range a.Topics {
		if len(t.Partitions) > 0 {
			slices.Sort(t.Partitions)
			topics = append(topics, t)
		}
	}
	slices.SortFunc(topics, func(x, y kmsg.ConsumerMemberAssignmentTopic) int { return strings.Compare(x.Topic, y.Topic) })
	return topics, nil
}

// revoked reports whether next drops any partition of owned; both are
// sorted as decodeAssignment sorts them.
func revoked(owned, next []kmsg.ConsumerMemberAssignmentTopic) bool {
	for _, o := range owned {
		i := slices.IndexFunc(next, func(t kmsg.ConsumerMemberAssignmentTopic) bool { return t.Topic == o.Topic })
		if i < 0 {
			return true
		}
		for _, p := range o.Partitions {
			if _, found := slices.BinarySearch(next[i].Partitions, p); !found {
				return true
			}
		}
	}
	return false
}

// partitionCount is the number of partitions an assignment holds.
func partitionCount(a []kmsg.ConsumerMemberAssignmentTopic) int {
	n := 0
	for _, t := range a {
		n += len(t.Partitions)
	}
	return n
}

// checkCoverage checks one group's assignments: every partition of every
// topic held by exactly one member, and nothing else held.
func checkCoverage(partitions map[string]int32, members [][]kmsg.ConsumerMemberAssignmentTopic) error {
	held := map[topicPartition]int{}
	for _, a := range members {
		for _, t := range a {
			for _, p := range t.Partitions {
				held[topicPartition{t.Topic, p}]++
			}
		}
	}
	var problems []string
	for _, topic := range slices.Sorted(maps.Keys(partitions)) {
		for p := range partitions[topic] {
			tp := topicPartition{topic, p}
			switch n := held[tp]; n {
			case 1:
			case 0:
				problems = append(problems, fmt.Sprintf("%s-%d unassigned", topic, p))
			default:
				problems = append(problems, fmt.Sprintf("%s-%d held by %d members", topic, p, n))
			}
			delete(held, tp)
		}
	}
	for tp := range held {
		problems = append(problems, fmt.Sprintf("%s-%d is not a partition of the target", tp.topic, tp.partition))
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		if len(problems) > 4 {
			problems = append(problems[:4], fmt.Sprintf("and %d more", len(problems)-4))
		}
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

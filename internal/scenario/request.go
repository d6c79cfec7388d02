package scenario

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// ResolvedRebalanceProtocol returns the rebalance protocol the scenario runs
// under: RebalanceProtocol when set, otherwise Cooperative when the protocol
// name (or, without one, the assignor name) starts with "cooperative", as
// Kafka's "cooperative-sticky" does, and Eager for anything else. Call it
// after the caller has settled Protocol, since the default depends on it.
func (s *Scenario) ResolvedRebalanceProtocol() abi.RebalanceProtocol {
	switch s.RebalanceProtocol {
	case "cooperative":
		return abi.Cooperative
	case "eager":
		return abi.Eager
	}
	if strings.HasPrefix(s.protocol(), "cooperative") {
		return abi.Cooperative
	}
	return abi.Eager
}

// protocol is Protocol, defaulting to Assignor as Parse does, for scenarios
// built in code.
func (s *Scenario) protocol() string {
	if s.Protocol == "" {
		return s.Assignor
	}
	return s.Protocol
}

// Request validates the scenario and builds the request a plugin is asked to
// solve, with warnings about things that are legal but suspicious.
//
// The request holds:
//   - Protocol and Assignor as they are when Request is called: the caller
//     fills an empty Assignor (and Protocol) from its registry first. Seed is
//     left 0; the runtime derives it from the request.
//   - The brokers in file order.
//   - A topic table with every scenario topic, in file order, then a
//     non-existent entry (Exists false) for each other name a member
//     subscribes to or lists in owned or previous, sorted by name. Placement
//     is included only when the scenario lists brokers; replica and ISR lists
//     are shared through ReplicaSets, each distinct list once.
//   - The members in Kafka's order: static members by instance id, then
//     dynamic members by member id. Each member's Cooperative flag is the
//     group's rebalance protocol, since a scenario has no per-member
//     protocol lists. OwnedGeneration is the member's generation.
//     Subscriptions, owned and previous partitions are ascending and
//     duplicate-free; empty owned or previous lists are left out.
func (s *Scenario) Request() (*abi.Request, []string, error) {
	if s.Generate != nil {
		q, err := s.Sequence()
		if err != nil {
			return nil, nil, err
		}
		return q.Scenario().Request()
	}
	warnings, err := s.check()
	if err != nil {
		return nil, nil, err
	}
	rp := s.ResolvedRebalanceProtocol()
	req := &abi.Request{
		GroupID:           s.Group,
		Generation:        s.Generation,
		Protocol:          s.protocol(),
		Assignor:          s.Assignor,
		RebalanceProtocol: rp,
	}
	if len(s.Config) > 0 {
		req.Config = make(map[string]string, len(s.Config))
		for k, v := range s.Config {
			req.Config[k] = v
		}
	}
	if len(s.Brokers) > 0 {
		req.Brokers = make([]abi.Broker, len(s.Brokers))
		for i, b := range s.Brokers {
			req.Brokers[i] = abi.Broker{ID: b.ID, Rack: b.Rack}
		}
	}
	s.buildTopics(req)
	if err := s.buildMembers(req, rp == abi.Cooperative); err != nil {
		return nil, nil, err
	}
	return req, warnings, nil
}

// buildTopics fills the topic table and the replica sets of req. The
// scenario must be valid.
func (s *Scenario) buildTopics(req *abi.Request) {
	sets := replicaSets{index: make(map[string]uint32)}
	req.Topics = make([]abi.Topic, 0, len(s.Topics))
	n := int64(len(s.Brokers))
	var offset int64 // running partition offset over all topics, in file order
	for i := range s.Topics {
		t := &s.Topics[i]
		count := t.count()
		at := abi.Topic{Name: t.Name, Exists: true, PartitionCount: count}
		switch {
		case n == 0:
			// No brokers, no placement.
		case t.PartitionCount != nil:
			rf := int64(1)
			if t.ReplicationFactor != nil {
				rf = int64(*t.ReplicationFactor)
			}
			// Placement depends only on (p + offset) mod n, so each of the
			// n possible replica lists is built once, when first needed,
			// not once per partition.
			ring := make([]abi.Partition, n)
			built := make([]bool, n)
			at.Partitions = make([]abi.Partition, count)
			for p := range at.Partitions {
				r := (int64(p) + offset) % n
				if !built[r] {
					replicas := make([]int32, rf)
					for j := range replicas {
						replicas[j] = s.Brokers[(r+int64(j))%n].ID
					}
					set := sets.add(replicas)
					ring[r] = abi.Partition{Leader: replicas[0], Replicas: set, ISR: set}
					built[r] = true
				}
				at.Partitions[p] = ring[r]
			}
		default:
			at.Partitions = make([]abi.Partition, count)
			for _, p := range t.Partitions {
				leader := int32(-1)
				if len(p.Replicas) > 0 {
					leader = p.Replicas[0]
				}
				if p.Leader != nil {
					leader = *p.Leader
				}
				replicas := sets.add(p.Replicas)
				isr := replicas
				if p.ISR != nil {
					isr = sets.add(p.ISR)
				}
				at.Partitions[p.ID] = abi.Partition{Leader: leader, Replicas: replicas, ISR: isr}
			}
		}
		offset += int64(count)
		req.Topics = append(req.Topics, at)
	}
	req.ReplicaSets = sets.lists
}

// buildMembers fills the members of req, adding a non-existent topic entry
// for every name they mention that the scenario does not have.
func (s *Scenario) buildMembers(req *abi.Request, cooperative bool) error {
	index := req.TopicIndex()
	var missing []string
	note := func(name string) {
		if _, ok := index[name]; !ok {
			index[name] = -1
			missing = append(missing, name)
		}
	}
	for i := range s.Members {
		m := &s.Members[i]
		for _, name := range m.Topics {
			note(name)
		}
		for _, tps := range []map[string][]int32{m.Owned, m.Previous} {
			for name, ps := range tps {
				if len(ps) > 0 {
					note(name)
				}
			}
		}
	}
	sort.Strings(missing)
	for _, name := range missing {
		index[name] = int32(len(req.Topics))
		req.Topics = append(req.Topics, abi.Topic{Name: name})
	}

	order := make([]int, len(s.Members))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		return kafkaLess(&s.Members[order[a]], &s.Members[order[b]])
	})
	req.Members = make([]abi.Member, len(order))
	for k, i := range order {
		m := &s.Members[i]
		am := abi.Member{
			MemberID:        m.ID,
			InstanceID:      m.InstanceID,
			ClientID:        m.ClientID,
			ClientHost:      m.Host,
			Rack:            m.Rack,
			Cooperative:     cooperative,
			OwnedGeneration: m.Generation,
			Owned:           topicPartitions(m.Owned, index),
			Previous:        topicPartitions(m.Previous, index),
		}
		am.Topics = make([]int32, 0, len(m.Topics))
		for _, name := range m.Topics {
			am.Topics = append(am.Topics, index[name])
		}
		slices.Sort(am.Topics)
		am.Topics = slices.Compact(am.Topics)
		if m.UserData != "" {
			data, err := base64.StdEncoding.DecodeString(m.UserData)
			if err != nil { // check() has already accepted it
				return fmt.Errorf("members[%d].user_data: %w", i, err)
			}
			am.UserData = data
		}
		req.Members[k] = am
	}
	return nil
}

// kafkaLess orders members as Kafka's assignors do: static members first, by
// group.instance.id, then dynamic members by member id.
func kafkaLess(a, b *Member) bool {
	if (a.InstanceID != "") != (b.InstanceID != "") {
		return a.InstanceID != ""
	}
	if a.InstanceID != b.InstanceID {
		return a.InstanceID < b.InstanceID
	}
	return a.ID < b.ID
}

// topicPartitions converts a name-keyed claim to the ABI form: topics by
// index, partitions ascending, empty lists left out.
func topicPartitions(m map[string][]int32, index map[string]int32) []abi.TopicPartitions {
	var out []abi.TopicPartitions
	for name, ps := range m {
		if len(ps) == 0 {
			continue
		}
		sorted := slices.Clone(ps)
		slices.Sort(sorted)
		out = append(out, abi.TopicPartitions{Topic: index[name], Partitions: sorted})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Topic < out[b].Topic })
	return out
}

// replicaSets collects distinct broker-id lists for Request.ReplicaSets.
type replicaSets struct {
	index map[string]uint32
	lists [][]int32
	key   []byte
}

// add returns the index of list in the table, adding it when new. The empty
// list is a list like any other: a partition with no replicas points at it.
func (r *replicaSets) add(list []int32) uint32 {
	r.key = r.key[:0]
	for _, id := range list {
		r.key = binary.LittleEndian.AppendUint32(r.key, uint32(id))
	}
	if i, ok := r.index[string(r.key)]; ok {
		return i
	}
	i := uint32(len(r.lists))
	r.index[string(r.key)] = i
	stored := make([]int32, len(list))
	copy(stored, list)
	r.lists = append(r.lists, stored)
	return i
}

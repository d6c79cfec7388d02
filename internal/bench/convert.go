// Package bench compares a wasm assignor, run on the daemon's own path (a
// coordinator.Coordinator, as the driver runs it, around the wasmassign
// host), with the native balancer of franz-go's kgo for the same protocol,
// on the same JoinGroup member metadata. It holds the built-in benchmark
// cases, the member metadata encoding, and the timing loop. It must never import cmd/ packages; it is a
// measuring tool, so nothing in the request path may import it.
package bench

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Member is one group member as it joins: what it subscribes to and what it
// says it owns.
type Member struct {
	ID         string
	InstanceID string // empty for a dynamic member
	Topics     []string
	// Owned is what the member reports owning, topic to partitions.
	Owned map[string][]int32
	// Generation is the generation in which the member held Owned, -1 when
	// it holds nothing.
	Generation int32
}

// EncodeMembers builds the JoinGroup response members a group leader would
// see: each member's ConsumerMemberMetadata v3 (owned partitions and
// generation, no rack), encoded. suffix is appended to every member id, so
// that each run of a benchmark sees members no earlier run saw.
func EncodeMembers(members []Member, suffix string) []kmsg.JoinGroupResponseMember {
	out := make([]kmsg.JoinGroupResponseMember, len(members))
	for i, m := range members {
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Version = 3
		meta.Topics = m.Topics
		meta.Generation = m.Generation
		for _, t := range slices.Sorted(maps.Keys(m.Owned)) {
			op := kmsg.NewConsumerMemberMetadataOwnedPartition()
			op.Topic = t
			op.Partitions = m.Owned[t]
			meta.OwnedPartitions = append(meta.OwnedPartitions, op)
		}
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.ID + suffix
		if m.InstanceID != "" {
			id := m.InstanceID + suffix
			jm.InstanceID = &id
		}
		jm.ProtocolMetadata = meta.AppendTo(nil)
		out[i] = jm
	}
	return out
}

// joinLess orders members as Kafka's assignors do: static members by
// instance id, then dynamic members by member id.
func joinLess(a, b *kmsg.JoinGroupResponseMember) int {
	switch {
	case a.InstanceID != nil && b.InstanceID != nil:
		if c := cmp.Compare(*a.InstanceID, *b.InstanceID); c != 0 {
			return c
		}
	case a.InstanceID != nil:
		return -1
	case b.InstanceID != nil:
		return 1
	}
	return cmp.Compare(a.MemberID, b.MemberID)
}

// Group is what the leader knows when it assigns, besides the members.
type Group struct {
	ID         string
	Generation int32
	Protocol   string
	Rebalance  abi.RebalanceProtocol
	// Partitions maps each topic of the cluster metadata to its partition
	// count.
	Partitions map[string]int32
}

// DecodeAssignments parses SyncGroup assignments back into member id to
// topic to partitions.
func DecodeAssignments(sync []kmsg.SyncGroupRequestGroupAssignment) (map[string]map[string][]int32, error) {
	out := make(map[string]map[string][]int32, len(sync))
	for _, sa := range sync {
		var ka kmsg.ConsumerMemberAssignment
		if err := ka.ReadFrom(sa.MemberAssignment); err != nil {
			return nil, fmt.Errorf("assignment of member %q: %w", sa.MemberID, err)
		}
		m := make(map[string][]int32, len(ka.Topics))
		for _, t := range ka.Topics {
			m[t.Topic] = append(m[t.Topic], t.Partitions...)
		}
		out[sa.MemberID] = m
	}
	return out, nil
}

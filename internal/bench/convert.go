// Package bench compares a wasm assignor, run through the wasmassign host,
// with the native balancer of franz-go's kgo for the same protocol, on the
// same JoinGroup member metadata. It holds the built-in benchmark cases, the
// conversions a broker-side or client-side host would do around a plugin
// call, and the timing loop. It must never import cmd/ packages; it is a
// measuring tool, so nothing in the request path may import it.
package bench

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/consumerproto"
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

// RequestFromJoin decodes the members' metadata and builds the abi.Request a
// host sends a plugin: members sorted static-by-instance-id then by member
// id, the topic table sorted by name (every subscribed or owned topic, with
// Exists false for names the cluster does not have), Owned from
// OwnedPartitions and OwnedGeneration from Generation. The request is in
// the grouped layout: runs of owned topics with equal partitions are one
// entry over a topic list.
//
// It decodes with a fresh consumerproto.Decoder each time, so a benchmark
// run gains nothing from an earlier one; within one call, members with equal
// subscriptions share their decoded topic lists, as a real host's would.
func RequestFromJoin(g Group, members []kmsg.JoinGroupResponseMember) (*abi.Request, error) {
	sorted := make([]*kmsg.JoinGroupResponseMember, len(members))
	for i := range members {
		sorted[i] = &members[i]
	}
	slices.SortFunc(sorted, joinLess)

	names := consumerproto.NewNames()
	dec := consumerproto.NewDecoder(names)
	subs := make([]consumerproto.Subscription, len(sorted))
	for i, m := range sorted {
		s, err := dec.DecodeRuns(m.ProtocolMetadata)
		if err != nil {
			return nil, fmt.Errorf("member %q: %w", m.MemberID, err)
		}
		subs[i] = s
	}

	// The topic table holds every name some member mentions, sorted; table
	// maps a decoder id to its index there.
	ids := make([]int32, names.Len())
	for i := range ids {
		ids[i] = int32(i)
	}
	slices.SortFunc(ids, func(a, b int32) int { return cmp.Compare(names.Name(a), names.Name(b)) })
	table := make([]int32, names.Len())
	req := &abi.Request{
		GroupID:           g.ID,
		Generation:        g.Generation,
		Protocol:          g.Protocol,
		RebalanceProtocol: g.Rebalance,
		Topics:            make([]abi.Topic, len(ids)),
		Members:           make([]abi.Member, len(sorted)),
	}
	for i, id := range ids {
		name := names.Name(id)
		n, ok := g.Partitions[name]
		table[id] = int32(i)
		req.Topics[i] = abi.Topic{Name: name, Exists: ok, PartitionCount: n}
	}

	// Members with equal subscriptions share one decoded slice, so they can
	// share its translation too.
	translated := make(map[*int32][]int32)
	var grouper abi.Grouper
	// Owned entries are decoded as runs with equal partitions, and a run
	// of topics that ascend in the table becomes one entry over a topic
	// list (sdk/ABI.md section 7): at 2,000 members owning a partition of
	// each of 500 topics, a million entries become 2,000 over one list.
	// Members' runs share their topic ids, so each distinct run is
	// translated once; refs holds its list reference, or 0 when it is
	// written as plain entries.
	type runKey struct {
		first *int32
		n     int
	}
	refs := make(map[runKey]int32)
	var owned []abi.TopicPartitions
	for i, m := range sorted {
		s := &subs[i]
		am := &req.Members[i]
		am.MemberID = m.MemberID
		if m.InstanceID != nil {
			am.InstanceID = *m.InstanceID
		}
		am.Rack = s.Rack
		am.Cooperative = g.Rebalance == abi.Cooperative
		am.UserData = s.UserData
		am.OwnedGeneration = s.Generation
		if len(s.Topics) > 0 {
			key := unsafe.SliceData(s.Topics)
			ts, ok := translated[key]
			if !ok {
				ts = make([]int32, len(s.Topics))
				for k, id := range s.Topics {
					ts[k] = table[id]
				}
				slices.Sort(ts)
				// The subscription travels as a reference to the
				// topic-list table (sdk/ABI.md section 7).
				ref := grouper.List(ts)
				ts = grouper.Lists()[^ref]
				translated[key] = ts
			}
			am.Topics = ts
		} else {
			am.Topics = []int32{}
		}
		if len(s.OwnedRuns) > 0 {
			from := len(owned)
			for _, run := range s.OwnedRuns {
				key := runKey{&run.Topics[0], len(run.Topics)}
				ref, ok := refs[key]
				if !ok {
					ref = listOf(&grouper, run.Topics, table)
					refs[key] = ref
				}
				if ref != 0 {
					owned = append(owned, abi.TopicPartitions{Topic: ref, Partitions: run.Partitions})
					continue
				}
				for _, id := range run.Topics {
					owned = append(owned, abi.TopicPartitions{Topic: table[id], Partitions: run.Partitions})
				}
			}
			am.Owned = owned[from:len(owned):len(owned)]
		}
	}
	req.TopicLists = grouper.Lists()
	return req, nil
}

// listOf returns the reference to the topic list of the decoder ids ids,
// translated to table indices, or 0 when they make no list: fewer than
// abi.MinRun, or not strictly ascending in the table.
func listOf(g *abi.Grouper, ids, table []int32) int32 {
	if len(ids) < abi.MinRun {
		return 0
	}
	ts := make([]int32, len(ids))
	for i, id := range ids {
		ts[i] = table[id]
		if i > 0 && ts[i] <= ts[i-1] {
			return 0
		}
	}
	return g.List(ts)
}

// EncodeResponse turns a plugin's response into the SyncGroup assignments
// the leader sends: one per member of req (empty for a member the response
// leaves out), ordered by member id, each a ConsumerMemberAssignment with
// topics by name and partitions ascending, as kgo encodes its plans.
//
// A response in the grouped layout is expanded member by member, into one
// reused buffer.
func EncodeResponse(req *abi.Request, resp *abi.Response) []kmsg.SyncGroupRequestGroupAssignment {
	var scratch []abi.TopicPartitions
	byMember := make([]*abi.MemberAssignment, len(req.Members))
	for i := range resp.Members {
		ma := &resp.Members[i]
		byMember[ma.Member] = ma
	}
	topicNames := make([]string, len(req.Topics))
	for i, t := range req.Topics {
		topicNames[i] = t.Name
	}
	enc := consumerproto.NewAssignmentEncoder(topicNames)
	out := make([]kmsg.SyncGroupRequestGroupAssignment, len(req.Members))
	for i := range req.Members {
		sa := kmsg.NewSyncGroupRequestGroupAssignment()
		sa.MemberID = req.Members[i].MemberID
		if ma := byMember[i]; ma != nil {
			parts := ma.Partitions
			if resp.TopicLists != nil {
				scratch = abi.AppendExpanded(scratch[:0], resp.TopicLists, parts)
				parts = scratch
			}
			sa.MemberAssignment = enc.Append(nil, parts, ma.UserData)
		} else {
			sa.MemberAssignment = enc.Append(nil, nil, nil)
		}
		out[i] = sa
	}
	slices.SortFunc(out, func(a, b kmsg.SyncGroupRequestGroupAssignment) int { return cmp.Compare(a.MemberID, b.MemberID) })
	return out
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

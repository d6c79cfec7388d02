package assignortest

import (
	"fmt"
	"slices"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// TopicSpec is a topic of a test cluster.
type TopicSpec struct {
	Name       string
	Partitions int32
}

// MemberSpec is a group member of a test. Topics that no TopicSpec names
// are put in the request as topics that do not exist.
type MemberSpec struct {
	ID, Instance, Rack string
	Topics             []string
}

// Placement describes replicas the way Kafka's
// AbstractPartitionAssignorTest lays them out: broker i has rack
// BrokerRacks[i] ("" for none), and replica j of partition i of a topic is
// on broker (i + j + start) % len(BrokerRacks).
type Placement struct {
	RF          int
	BrokerRacks []string
	// SameStart puts every topic's partition 0 on broker 0, like
	// RangeAssignorTest.partitionInfos; otherwise each topic starts where the
	// previous one stopped, like AbstractPartitionAssignorTest's
	// partitionsPerTopic.
	SameStart bool
}

// BuildRequest makes a request of the given topics and members, with
// replicas placed as pl says, or no placement at all when pl is nil. The
// topic and member tables are filled in reverse order, so that no test
// passes by relying on the request's order.
func BuildRequest(topics []TopicSpec, members []MemberSpec, pl *Placement) *abi.Request {
	req := &abi.Request{}
	if pl != nil {
		for i, r := range pl.BrokerRacks {
			req.Brokers = append(req.Brokers, abi.Broker{ID: int32(100 + i), Rack: r})
		}
	}
	index := map[string]int32{}
	start := 0
	placed := make([]abi.Topic, len(topics))
	for i, ts := range topics {
		t := abi.Topic{Name: ts.Name, Exists: true, PartitionCount: ts.Partitions}
		if pl != nil {
			nb := len(pl.BrokerRacks)
			if pl.SameStart {
				start = 0
			}
			for p := range int(ts.Partitions) {
				replicas := make([]int32, pl.RF)
				for j := range replicas {
					replicas[j] = int32(100 + (p+j+start)%nb)
				}
				req.ReplicaSets = append(req.ReplicaSets, replicas)
				rs := uint32(len(req.ReplicaSets) - 1)
				t.Partitions = append(t.Partitions, abi.Partition{Leader: replicas[0], Replicas: rs, ISR: rs})
			}
			start += int(ts.Partitions)
		}
		placed[i] = t
	}
	for i := len(placed) - 1; i >= 0; i-- {
		index[placed[i].Name] = int32(len(req.Topics))
		req.Topics = append(req.Topics, placed[i])
	}
	for i := len(members) - 1; i >= 0; i-- {
		ms := members[i]
		m := abi.Member{MemberID: ms.ID, InstanceID: ms.Instance, Rack: ms.Rack, OwnedGeneration: -1}
		for _, name := range ms.Topics {
			t, ok := index[name]
			if !ok {
				t = int32(len(req.Topics))
				index[name] = t
				req.Topics = append(req.Topics, abi.Topic{Name: name})
			}
			m.Topics = append(m.Topics, t)
		}
		slices.Sort(m.Topics)
		req.Members = append(req.Members, m)
	}
	return req
}

// BenchRequest is a group of members subscribing to all of topics, each
// with the same partition count: the shape of the target sizes. With racks,
// members and brokers spread over three racks and each partition has two
// replicas, so partitions differ in racks and a rack-aware assignor has
// work to do.
func BenchRequest(members, topics, partitions int, withRacks bool) *abi.Request {
	req := &abi.Request{}
	if withRacks {
		for b := range 6 {
			req.Brokers = append(req.Brokers, abi.Broker{ID: int32(b), Rack: string(rune('a' + b%3))})
		}
		for b := range 6 {
			req.ReplicaSets = append(req.ReplicaSets, []int32{int32(b), int32((b + 1) % 6)})
		}
	}
	subs := make([]int32, topics)
	for t := range topics {
		tp := abi.Topic{Name: fmt.Sprintf("topic-%04d", t), Exists: true, PartitionCount: int32(partitions)}
		if withRacks {
			tp.Partitions = make([]abi.Partition, partitions)
			for p := range tp.Partitions {
				rs := uint32((p + t) % 6)
				tp.Partitions[p] = abi.Partition{Leader: req.ReplicaSets[rs][0], Replicas: rs, ISR: rs}
			}
		}
		req.Topics = append(req.Topics, tp)
		subs[t] = int32(t)
	}
	for m := range members {
		mem := abi.Member{MemberID: fmt.Sprintf("consumer-%05d", m), Topics: subs, OwnedGeneration: -1}
		if withRacks {
			mem.Rack = string(rune('a' + m%3))
		}
		req.Members = append(req.Members, mem)
	}
	return req
}

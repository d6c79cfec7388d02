package rangeassignor

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// topicSpec is a topic of a test cluster.
type topicSpec struct {
	name       string
	partitions int32
}

// memberSpec is a group member of a test. Topics that no topicSpec names are
// put in the request as topics that do not exist.
type memberSpec struct {
	id, instance, rack string
	topics             []string
}

// placement describes replicas the way Kafka's AbstractPartitionAssignorTest
// lays them out: broker i has rack brokerRacks[i] ("" for none), and replica
// j of partition i of a topic is on broker (i + j + start) % len(brokerRacks).
type placement struct {
	rf          int
	brokerRacks []string
	// sameStart puts every topic's partition 0 on broker 0, like
	// RangeAssignorTest.partitionInfos; otherwise each topic starts where the
	// previous one stopped, like AbstractPartitionAssignorTest's
	// partitionsPerTopic.
	sameStart bool
}

// buildRequest makes a request. The topic and member tables are filled in
// reverse order, so that no test passes by relying on the request's order.
func buildRequest(topics []topicSpec, members []memberSpec, pl *placement) *abi.Request {
	req := &abi.Request{}
	if pl != nil {
		for i, r := range pl.brokerRacks {
			req.Brokers = append(req.Brokers, abi.Broker{ID: int32(100 + i), Rack: r})
		}
	}
	index := map[string]int32{}
	start := 0
	placed := make([]abi.Topic, len(topics))
	for i, ts := range topics {
		t := abi.Topic{Name: ts.name, Exists: true, PartitionCount: ts.partitions}
		if pl != nil {
			nb := len(pl.brokerRacks)
			if pl.sameStart {
				start = 0
			}
			for p := range int(ts.partitions) {
				replicas := make([]int32, pl.rf)
				for j := range replicas {
					replicas[j] = int32(100 + (p+j+start)%nb)
				}
				req.ReplicaSets = append(req.ReplicaSets, replicas)
				rs := uint32(len(req.ReplicaSets) - 1)
				t.Partitions = append(t.Partitions, abi.Partition{Leader: replicas[0], Replicas: rs, ISR: rs})
			}
			start += int(ts.partitions)
		}
		placed[i] = t
	}
	for i := len(placed) - 1; i >= 0; i-- {
		index[placed[i].Name] = int32(len(req.Topics))
		req.Topics = append(req.Topics, placed[i])
	}
	for i := len(members) - 1; i >= 0; i-- {
		ms := members[i]
		m := abi.Member{MemberID: ms.id, InstanceID: ms.instance, Rack: ms.rack, OwnedGeneration: -1}
		for _, name := range ms.topics {
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

// render gives each member's assignment as Kafka's tests write it:
// "t1-0, t1-1, t2-0", sorted by topic, then partition.
func render(t testing.TB, req *abi.Request, resp *abi.Response) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ma := range resp.Members {
		var parts []string
		for _, tp := range ma.Partitions {
			for _, p := range tp.Partitions {
				parts = append(parts, fmt.Sprintf("%s-%d", req.Topics[tp.Topic].Name, p))
			}
		}
		out[req.Members[ma.Member].MemberID] = strings.Join(parts, ", ")
	}
	return out
}

// rackMismatches counts the partitions given to a member with a rack that
// have no replica on that rack, as Kafka's verifyRackAssignment does.
func rackMismatches(req *abi.Request, resp *abi.Response) int {
	brokerRack := map[int32]string{}
	for _, b := range req.Brokers {
		brokerRack[b.ID] = b.Rack
	}
	n := 0
	for _, ma := range resp.Members {
		rack := req.Members[ma.Member].Rack
		if rack == "" {
			continue
		}
		for _, tp := range ma.Partitions {
			for _, p := range tp.Partitions {
				if !slices.ContainsFunc(req.Replicas(tp.Topic, p), func(b int32) bool { return brokerRack[b] == rack }) {
					n++
				}
			}
		}
	}
	return n
}

// allRacks is AbstractPartitionAssignorTest.ALL_RACKS, one letter a rack.
const allRacks = "abcdef"

// rackAt is ALL_RACKS[i % ALL_RACKS.length].
func rackAt(i int) string {
	i %= len(allRacks)
	return allRacks[i : i+1]
}

// racks is AbstractPartitionAssignorTest.racks(n).
func racks(n int) []string {
	r := make([]string, n)
	for i := range r {
		r[i] = rackAt(i)
	}
	return r
}

// nullRacks is AbstractPartitionAssignorTest.nullRacks(n).
func nullRacks(n int) []string { return make([]string, n) }

// checkValid fails t unless resp is a valid answer to req: one entry per
// member in request order, topics by name, partitions ascending, only
// subscribed existing partitions, and every one of them exactly once.
func checkValid(t testing.TB, req *abi.Request, resp *abi.Response) {
	t.Helper()
	if len(resp.Members) != len(req.Members) {
		t.Fatalf("response has %d members, request %d", len(resp.Members), len(req.Members))
	}
	owner := make([][]int32, len(req.Topics))
	for i, tp := range req.Topics {
		owner[i] = make([]int32, tp.PartitionCount)
		for p := range owner[i] {
			owner[i][p] = -1
		}
	}
	for i, ma := range resp.Members {
		if ma.Member != int32(i) {
			t.Fatalf("response entry %d is for member %d", i, ma.Member)
		}
		m := &req.Members[i]
		for j, tp := range ma.Partitions {
			topic := &req.Topics[tp.Topic]
			if j > 0 && req.Topics[ma.Partitions[j-1].Topic].Name >= topic.Name {
				t.Fatalf("member %q: topic %q follows %q", m.MemberID, topic.Name, req.Topics[ma.Partitions[j-1].Topic].Name)
			}
			if !slices.Contains(m.Topics, tp.Topic) {
				t.Fatalf("member %q got unsubscribed topic %q", m.MemberID, topic.Name)
			}
			if len(tp.Partitions) == 0 {
				t.Fatalf("member %q has an empty entry for topic %q", m.MemberID, topic.Name)
			}
			for k, p := range tp.Partitions {
				if k > 0 && tp.Partitions[k-1] >= p {
					t.Fatalf("member %q topic %q: partitions not ascending: %v", m.MemberID, topic.Name, tp.Partitions)
				}
				if !topic.Exists || p < 0 || p >= topic.PartitionCount {
					t.Fatalf("member %q got nonexistent partition %s-%d", m.MemberID, topic.Name, p)
				}
				if o := owner[tp.Topic][p]; o >= 0 {
					t.Fatalf("partition %s-%d given to %q and %q", topic.Name, p, req.Members[o].MemberID, m.MemberID)
				}
				owner[tp.Topic][p] = int32(i)
			}
		}
	}
	for _, m := range req.Members {
		for _, ti := range m.Topics {
			for p, o := range owner[ti] {
				if o < 0 {
					t.Fatalf("partition %s-%d, subscribed by %q, is unassigned", req.Topics[ti].Name, p, m.MemberID)
				}
			}
		}
	}
}

// checkTopicBalance fails t unless, for every topic, the partition counts of
// its subscribers differ by at most one: range's guarantee, rack mode or not.
func checkTopicBalance(t testing.TB, req *abi.Request, resp *abi.Response) {
	t.Helper()
	count := make([]map[int32]int, len(req.Topics))
	for i := range count {
		count[i] = map[int32]int{}
	}
	for _, ma := range resp.Members {
		for _, tp := range ma.Partitions {
			count[tp.Topic][ma.Member] += len(tp.Partitions)
		}
	}
	for ti, topic := range req.Topics {
		lo, hi := -1, -1
		for mi, m := range req.Members {
			if !slices.Contains(m.Topics, int32(ti)) {
				continue
			}
			c := count[ti][int32(mi)]
			if lo < 0 || c < lo {
				lo = c
			}
			if c > hi {
				hi = c
			}
		}
		if hi-lo > 1 {
			t.Fatalf("topic %q: subscribers hold between %d and %d partitions", topic.Name, lo, hi)
		}
	}
}

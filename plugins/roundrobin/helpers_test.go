package roundrobin

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
	id, instance string
	topics       []string
}

// buildRequest makes a request. The topic and member tables are filled in
// reverse order, so that no test passes by relying on the request's order.
func buildRequest(topics []topicSpec, members []memberSpec) *abi.Request {
	req := &abi.Request{}
	index := map[string]int32{}
	for i := len(topics) - 1; i >= 0; i-- {
		index[topics[i].name] = int32(len(req.Topics))
		req.Topics = append(req.Topics, abi.Topic{Name: topics[i].name, Exists: true, PartitionCount: topics[i].partitions})
	}
	for i := len(members) - 1; i >= 0; i-- {
		ms := members[i]
		m := abi.Member{MemberID: ms.id, InstanceID: ms.instance, OwnedGeneration: -1}
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

// render gives each member's assignment as "t1-0, t1-1, t2-0", in the order
// the response lists it.
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

// asMap turns a response into member id -> topic name -> partitions.
func asMap(req *abi.Request, resp *abi.Response) map[string]map[string][]int32 {
	out := map[string]map[string][]int32{}
	for _, ma := range resp.Members {
		m := map[string][]int32{}
		for _, tp := range ma.Partitions {
			m[req.Topics[tp.Topic].Name] = tp.Partitions
		}
		out[req.Members[ma.Member].MemberID] = m
	}
	return out
}

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

package daemon

import (
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/internal/cluster"
)

// TestRouteNode_SpreadsTheUpstreamsNodesOverTheGatewaysThatListen: every
// gateway routes a node to the same gateway of a layout, the nodes spread
// over all of them, a gateway that does not listen for a node is never
// named for it, and a leaving gateway is left out (its own answer names
// another).
func TestRouteNode_SpreadsTheUpstreamsNodesOverTheGatewaysThatListen(t *testing.T) {
	layout := []cluster.Owner{
		{ID: "gw-a", Address: "10.0.0.1:9092", Brokers: map[int32]int32{0: 19092, 1: 19093, 2: 19094, 3: 19095}},
		{ID: "gw-b", Address: "10.0.0.2:9092", Brokers: map[int32]int32{0: 29092, 1: 29093, 2: 29094, 3: 29095}},
		{ID: "gw-c", Address: "10.0.0.3:9092", Brokers: map[int32]int32{0: 39092, 1: 39093}}, // knows no node 2 or 3 yet
		{ID: "gw-old", Address: "10.0.0.4:9092"},                                             // publishes no listeners
	}
	// via is where a client of gateway self is sent for node.
	via := func(self string, leaving bool, node int32) string {
		p, ok := routeNode(layout, self, leaving, node)
		if !ok {
			return self
		}
		for _, o := range layout {
			if host, _, _ := net.SplitHostPort(o.Address); o.Brokers[node] == p.Port && host == p.Host {
				return o.ID
			}
		}
		t.Fatalf("gateway %s routes node %d to %+v, no gateway's listener", self, node, p)
		return ""
	}
	uses := map[string]int{}
	for node := int32(0); node < 4; node++ {
		first := via("gw-a", false, node)
		for _, self := range []string{"gw-b", "gw-c", "gw-old"} {
			if got := via(self, false, node); got != first {
				t.Errorf("node %d: gw-a routes to %s, %s to %s", node, first, self, got)
			}
		}
		if first == "gw-old" || (node >= 2 && first == "gw-c") {
			t.Errorf("node %d routed to %s, which does not listen for it", node, first)
		}
		uses[first]++
		if got := via(first, true, node); got == first {
			t.Errorf("node %d: leaving %s still routes it to itself", node, first)
		}
	}
	if len(uses) < 2 {
		t.Errorf("four nodes all routed to %v", uses)
	}
	if _, ok := routeNode(nil, "gw-a", false, 0); ok {
		t.Error("no layout yet, and a node routed elsewhere")
	}
	if _, ok := routeNode(layout, "gw-a", false, -1); ok {
		t.Error("a negative node id routed")
	}
}

// TestClusterMaxVersion_OffsetCommitStopsBelowTopicIDs: a cluster's
// commits go upstream as TxnOffsetCommit, which names topics, so clients
// are offered no OffsetCommit that names them by id alone; every other
// version is the coordinator's.
func TestClusterMaxVersion_OffsetCommitStopsBelowTopicIDs(t *testing.T) {
	for _, k := range []kmsg.Key{kmsg.OffsetCommit, kmsg.TxnOffsetCommit, kmsg.JoinGroup, kmsg.OffsetFetch, kmsg.Produce} {
		key := int16(k)
		want, wantOK := coordinator.MaxVersion(key)
		if k == kmsg.OffsetCommit {
			want = 9
		}
		if got, ok := clusterMaxVersion(key); got != want || ok != wantOK {
			t.Errorf("%s: %d, %v; want %d, %v", kmsg.NameForKey(key), got, ok, want, wantOK)
		}
	}
}

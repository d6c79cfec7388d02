package coordinator

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// rackedRequest draws a request with everything the range plugin reads:
// members in any order, static and dynamic, subscribed to topics that may
// be missing, empty or listed twice; brokers and members that may have
// racks, and partitions placed on them.
func rackedRequest(rng *rand.Rand) *abi.Request {
	req := &abi.Request{ReplicaSets: [][]int32{{0}, {1}, {2}, {0, 1}, {1, 2}}}
	racks := []string{"", "r0", "r1", "r2"}
	for b := range int32(3) {
		req.Brokers = append(req.Brokers, abi.Broker{ID: b, Rack: racks[rng.IntN(len(racks))]})
	}
	for ti := range rng.IntN(6) {
		t := abi.Topic{Name: fmt.Sprintf("t%d", ti), Exists: rng.IntN(6) > 0}
		if t.Exists {
			t.PartitionCount = int32(rng.IntN(12))
			for range t.PartitionCount {
				set := uint32(rng.IntN(len(req.ReplicaSets)))
				t.Partitions = append(t.Partitions, abi.Partition{Leader: req.ReplicaSets[set][0], Replicas: set, ISR: set})
			}
		}
		req.Topics = append(req.Topics, t)
	}
	for mi := range rng.IntN(7) {
		m := abi.Member{MemberID: fmt.Sprintf("m%03d", rng.IntN(50)*10+mi), Rack: racks[rng.IntN(len(racks))], OwnedGeneration: -1}
		if rng.IntN(3) == 0 {
			m.InstanceID = fmt.Sprintf("i%03d", rng.IntN(50)*10+mi)
		}
		for ti := range req.Topics {
			if rng.IntN(2) == 0 {
				m.Topics = append(m.Topics, int32(ti))
			}
		}
		if len(m.Topics) > 0 && rng.IntN(5) == 0 {
			m.Topics = append(m.Topics, m.Topics[0])
		}
		req.Members = append(req.Members, m)
	}
	return req
}

// withoutRacks returns a copy of req in which no broker or member has a
// rack.
func withoutRacks(req *abi.Request) *abi.Request {
	r := *req
	r.Brokers = append([]abi.Broker(nil), req.Brokers...)
	r.Members = append([]abi.Member(nil), req.Members...)
	for i := range r.Brokers {
		r.Brokers[i].Rack = ""
	}
	for i := range r.Members {
		r.Members[i].Rack = ""
	}
	return &r
}

// TestLastResort_IsTheRangePluginWithoutRacks holds the coordinator's last
// resort to the range plugin's answer for the same group with every rack
// removed, exactly, over random requests: the plugin's range and the last
// resort are one algorithm.
func TestLastResort_IsTheRangePluginWithoutRacks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	c, err := New(Config{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	g := newGroup("g", c.cfg.defaultGroup, &c.clients)
	lastResortRange := func(req *abi.Request) *abi.Response { return c.lastResortRange(g, req) }
	racked := 0
	for iter := range 3000 {
		req := rackedRequest(rng)
		got := lastResortRange(req)
		plain := withoutRacks(req)
		want, err := rangeassignor.Assign(plain)
		if err != nil {
			t.Fatalf("iteration %d: the range plugin failed: %v", iter, err)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(lastResortRange(plain), want) {
			t.Fatalf("iteration %d: last resort\n%+v\nthe range plugin without racks\n%+v\nfor %+v", iter, got, want, req)
		}
		if err := abi.ValidateResponse(req, got, abi.AssignorInfo{}); err != nil {
			t.Fatalf("iteration %d: the last resort is invalid: %v", iter, err)
		}
		if withRacks, _ := rangeassignor.Assign(req); !reflect.DeepEqual(withRacks, want) {
			racked++
		}
	}
	// The racks must matter to the plugin somewhere, or the draw does not
	// show that the last resort ignores them.
	t.Logf("racks changed the plugin's answer in %d of 3000 draws", racked)
	if racked == 0 {
		t.Fatal("no draw where racks change the range plugin's answer")
	}
}

package wasmruntime

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// roundRobinRejoin is a cooperative group of members subscribed to topics
// equally large topics, in which member m > 0 reports owning partition m of
// each topic: the java-large benchmark's rejoin, scaled down.
func roundRobinRejoin(members, topics int) *abi.Request {
	req := &abi.Request{GroupID: "g", Generation: 2, Protocol: "cooperative-sticky", RebalanceProtocol: abi.Cooperative}
	all := make([]int32, topics)
	for t := range topics {
		req.Topics = append(req.Topics, abi.Topic{Name: fmt.Sprintf("t%03d", t), Exists: true, PartitionCount: int32(members)})
		all[t] = int32(t)
	}
	for m := range members {
		mem := abi.Member{MemberID: fmt.Sprintf("m%03d", m), Cooperative: true, Topics: all, OwnedGeneration: -1}
		if m > 0 {
			mem.OwnedGeneration = 1
			for t := range topics {
				mem.Owned = append(mem.Owned, abi.TopicPartitions{Topic: int32(t), Partitions: []int32{int32(m)}})
			}
		}
		req.Members = append(req.Members, mem)
	}
	return req
}

// TestAssign_GroupedLayoutIsNegotiated runs the built-in sticky plugin,
// which declares the grouped layout, for a caller that sends the plain
// layout and for one that sends the grouped layout: each gets its own
// layout back, with the same assignment.
func TestAssign_GroupedLayoutIsNegotiated(t *testing.T) {
	h, _ := newTestHost(t, NewConfig())
	p := loadArtefact(t, h, "plugins/builtin/wasm/sticky.wasm")
	info, ok := p.Assignor("cooperative-sticky")
	if !ok || !info.Grouped {
		t.Fatalf("the built-in cooperative-sticky does not declare the grouped layout: %+v", info)
	}
	ctx := context.Background()
	plain := roundRobinRejoin(30, 40)
	got, err := p.Assign(ctx, "cooperative-sticky", plain)
	if err != nil {
		t.Fatal(err)
	}
	if got.TopicLists != nil {
		t.Fatalf("a plain caller got a response in the grouped layout")
	}
	grouped := plain.Grouped()
	if len(grouped.TopicLists) == 0 {
		t.Fatalf("the rejoin did not group: %+v", grouped.Members[1].Owned)
	}
	gotGrouped, err := p.Assign(ctx, "cooperative-sticky", grouped)
	if err != nil {
		t.Fatal(err)
	}
	if gotGrouped.TopicLists == nil {
		t.Fatalf("a grouped caller got a plain response from a grouped assignor")
	}
	entries := 0
	for _, ma := range gotGrouped.Members {
		entries += len(ma.Partitions)
	}
	if entries > len(plain.Members) {
		t.Fatalf("%d entries in the grouped answer for %d members: the round robin shares were not grouped", entries, len(plain.Members))
	}
	if x := gotGrouped.Expanded(); !reflect.DeepEqual(x, got) {
		t.Fatalf("the grouped answer differs from the plain one")
	}
}

// TestAssign_PlainAssignorGetsGroupedRequestsExpanded sends a request in
// the grouped layout to the C guest, which does not declare the layout: it
// must answer as it does to the plain request.
func TestAssign_PlainAssignorGetsGroupedRequestsExpanded(t *testing.T) {
	h, _ := newTestHost(t, NewConfig())
	g := cRoundRobin()
	p := loadArtefact(t, h, g.file)
	if info, _ := p.Assignor(g.assignor); info.Grouped {
		t.Fatalf("%s declares the grouped layout; this test needs one that does not", g.assignor)
	}
	ctx := context.Background()
	plain := roundRobinRejoin(10, 12)
	plain.Protocol = g.assignor
	want, err := p.Assign(ctx, g.assignor, plain)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Assign(ctx, g.assignor, plain.Grouped())
	if err != nil {
		t.Fatal(err)
	}
	if got.TopicLists != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("grouped request: %+v, want %+v", got, want)
	}
}

package conformance

import (
	"testing"

	"github.com/wasmassign/wasmassign/internal/scenario"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// TestGuarantees_RejectBadAssignments shows each checker can fail: the
// plugins pass them, so without this a checker that accepted everything
// would go unnoticed.
func TestGuarantees_RejectBadAssignments(t *testing.T) {
	six := int32(6)
	// a held 0-2 and b held 3-5 of one topic; c is new.
	sc := &scenario.Scenario{
		Topics: []scenario.Topic{{Name: "t", PartitionCount: &six}},
		Members: []scenario.Member{
			{ID: "a", Topics: []string{"t"}, Previous: map[string][]int32{"t": {0, 1, 2}}},
			{ID: "b", Topics: []string{"t"}, Previous: map[string][]int32{"t": {3, 4, 5}}},
			{ID: "c", Topics: []string{"t"}},
		},
	}
	good := assignment{"a": {"t": {0, 1}}, "b": {"t": {3, 4}}, "c": {"t": {2, 5}}}
	tests := []struct {
		name string
		bad  assignment
	}{
		{"valid", assignment{"a": {"t": {0, 1, 2}}, "b": {"t": {3, 4}}, "c": {"t": {2}}}},         // 2 twice, 5 never
		{"balanced", assignment{"a": {"t": {0, 1, 2}}, "b": {"t": {3, 4, 5}}}},                    // c idle
		{"sticky", assignment{"a": {"t": {0, 1}}, "b": {"t": {2, 3}}, "c": {"t": {4, 5}}}},        // 3 moves, 2 needed
		{"no_two_cycles", assignment{"a": {"t": {0, 3}}, "b": {"t": {1, 4}}, "c": {"t": {2, 5}}}}, // 1 a->b, 3 b->a
	}
	g := newGroup(sc)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check, ok := guarantee(tt.name)
			if !ok {
				t.Fatalf("no checker for %q", tt.name)
			}
			if err := check(g, g.number(good)); err != nil {
				t.Fatalf("rejects a good assignment: %v", err)
			}
			if err := check(g, g.number(tt.bad)); err == nil {
				t.Fatal("accepts a bad assignment")
			}
		})
	}
}

// TestHandoverCheck_RejectsEveryWayOfGettingItWrong shows the cooperative
// handover check can fail: a holds 0-2 and b holds 3-5 at generation 3, c's
// stale claim on 2 (generation 2) holds nothing, and the target moves 2 to c
// and 5 to a.
func TestHandoverCheck_RejectsEveryWayOfGettingItWrong(t *testing.T) {
	six := int32(6)
	sc := &scenario.Scenario{
		Topics: []scenario.Topic{{Name: "t", PartitionCount: &six}},
		Members: []scenario.Member{
			{ID: "a", Topics: []string{"t"}, Generation: 3, Owned: map[string][]int32{"t": {0, 1, 2}}},
			{ID: "b", Topics: []string{"t"}, Generation: 3, Owned: map[string][]int32{"t": {3, 4, 5}}},
			{ID: "c", Topics: []string{"t"}, Generation: 2, Owned: map[string][]int32{"t": {2}}},
		},
	}
	g := newGroup(sc)
	target := g.number(assignment{"a": {"t": {0, 1, 5}}, "b": {"t": {3, 4}}, "c": {"t": {2}}})
	good := assignment{"a": {"t": {0, 1}}, "b": {"t": {3, 4}}}
	if err := checkHandover(g, target, g.number(good)); err != nil {
		t.Fatalf("rejects the right handover: %v", err)
	}
	tests := []struct {
		name   string
		handed assignment
	}{
		{"gives a partition someone else holds", assignment{"a": {"t": {0, 1, 5}}, "b": {"t": {3, 4}}}},
		{"withholds what nobody else holds", assignment{"a": {"t": {0}}, "b": {"t": {3, 4}}}},
		{"gives what the target does not", assignment{"a": {"t": {0, 1}}, "b": {"t": {3, 4}}, "c": {"t": {5}}}},
		{"gives a partition twice", assignment{"a": {"t": {0, 1}}, "b": {"t": {1, 3, 4}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := checkHandover(g, target, g.number(tt.handed)); err == nil {
				t.Fatal("accepts a wrong handover")
			}
		})
	}
}

// TestRackMismatches_CountsOnlyOffRackPartitionsOfMembersWithARack pins the
// rack_mismatches count to Kafka's verifyRackAssignment: a partition counts
// when its member has a rack and no replica is on it; members without a
// rack never count.
func TestRackMismatches_CountsOnlyOffRackPartitionsOfMembersWithARack(t *testing.T) {
	three, one := int32(3), int32(1)
	sc := &scenario.Scenario{
		Protocol: "range",
		Brokers:  []scenario.Broker{{ID: 0, Rack: "a"}, {ID: 1, Rack: "b"}},
		// Partitions 0 and 2 live on rack a, partition 1 on rack b.
		Topics: []scenario.Topic{{Name: "t", PartitionCount: &three, ReplicationFactor: &one}},
		Members: []scenario.Member{
			{ID: "m1", Rack: "a", Topics: []string{"t"}},
			{ID: "m2", Topics: []string{"t"}},
		},
	}
	req, _, err := sc.Request()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		m1, m2   []int32
		mismatch int
	}{
		{"all on the member's rack", []int32{0, 2}, []int32{1}, 0},
		{"one off rack", []int32{0, 1}, []int32{2}, 1},
		{"rackless member never counts", nil, []int32{0, 1, 2}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &abi.Response{Members: []abi.MemberAssignment{
				{Member: 0, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: tt.m1}}},
				{Member: 1, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: tt.m2}}},
			}}
			if got := rackMismatches(req, resp); got != tt.mismatch {
				t.Errorf("rackMismatches = %d, want %d", got, tt.mismatch)
			}
		})
	}
}

package conformance

import (
	"testing"

	"github.com/wasmassign/wasmassign/scenario"
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
			if err := check(g, good); err != nil {
				t.Fatalf("rejects a good assignment: %v", err)
			}
			if err := check(g, tt.bad); err == nil {
				t.Fatal("accepts a bad assignment")
			}
		})
	}
}

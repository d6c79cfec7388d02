package assignortest

import (
	"slices"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

func TestRacks_AreKafkasRackLists(t *testing.T) {
	if got, want := Racks(8), []string{"a", "b", "c", "d", "e", "f", "a", "b"}; !slices.Equal(got, want) {
		t.Errorf("Racks(8) = %q, want %q", got, want)
	}
	if got := NullRacks(3); !slices.Equal(got, []string{"", "", ""}) {
		t.Errorf("NullRacks(3) = %q", got)
	}
}

func TestRackConfig_LaysOutKafkasRacks(t *testing.T) {
	cases := []struct {
		cfg       RackConfig
		brokers   []string // BrokerRacks(2, 3)
		consumers []string // ConsumerRack(0..4, 3)
	}{
		{NoBrokerRack, []string{"", ""}, []string{"a", "b", "c", "a", "b"}},
		{NoConsumerRack, []string{"a", "b", "c", "a", "b", "c"}, []string{"", "", "", "", ""}},
		{BrokerAndConsumerRack, []string{"a", "b", "c", "a", "b", "c"}, []string{"a", "b", "c", "a", "b"}},
	}
	if got := AllRackConfigs(); len(got) != len(cases) {
		t.Fatalf("AllRackConfigs() = %v, want %d configs", got, len(cases))
	}
	for i, tc := range cases {
		t.Run(tc.cfg.String(), func(t *testing.T) {
			if AllRackConfigs()[i] != tc.cfg {
				t.Errorf("AllRackConfigs()[%d] = %v", i, AllRackConfigs()[i])
			}
			if got := tc.cfg.BrokerRacks(2, 3); !slices.Equal(got, tc.brokers) {
				t.Errorf("BrokerRacks(2, 3) = %q, want %q", got, tc.brokers)
			}
			var consumers []string
			for j := range 5 {
				consumers = append(consumers, tc.cfg.ConsumerRack(j, 3))
			}
			if !slices.Equal(consumers, tc.consumers) {
				t.Errorf("ConsumerRack(0..4, 3) = %q, want %q", consumers, tc.consumers)
			}
		})
	}
}

// TestRackMismatches_CountsPartitionsOffTheirMembersRack: topic t has four
// partitions with one replica each, on brokers of racks a, b, none and a.
func TestRackMismatches_CountsPartitionsOffTheirMembersRack(t *testing.T) {
	req := BuildRequest([]TopicSpec{{Name: "t", Partitions: 4}},
		[]MemberSpec{{ID: "onA", Rack: "a", Topics: []string{"t"}}, {ID: "onC", Rack: "c", Topics: []string{"t"}}, {ID: "none", Topics: []string{"t"}}},
		&Placement{RF: 1, BrokerRacks: []string{"a", "b", ""}, SameStart: true})
	index := map[string]int32{}
	for i, m := range req.Members {
		index[m.MemberID] = int32(i)
	}
	cases := []struct {
		name string
		plan map[string][]int32 // member id -> partitions of t
		want int
	}{
		{"every partition on its member's rack", map[string][]int32{"onA": {0, 3}, "none": {1, 2}}, 0},
		{"a member without a rack never counts", map[string][]int32{"none": {0, 1, 2, 3}}, 0},
		{"partitions on another rack and on no rack count", map[string][]int32{"onA": {0, 1, 2}, "none": {3}}, 2},
		{"a member rack without brokers counts everything", map[string][]int32{"onC": {0, 1, 2, 3}}, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := &abi.Response{Members: make([]abi.MemberAssignment, len(req.Members))}
			for i := range resp.Members {
				resp.Members[i].Member = int32(i)
			}
			for id, ps := range tc.plan {
				m := index[id]
				resp.Members[m].Partitions = []abi.TopicPartitions{{Topic: 0, Partitions: ps}}
			}
			if got := RackMismatches(req, resp); got != tc.want {
				t.Errorf("%d mismatches, want %d", got, tc.want)
			}
		})
	}
}

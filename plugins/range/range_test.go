package rangeassignor

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

func TestRange_InfoDeclaresRangeForBothModes(t *testing.T) {
	info := Info()
	if info.Name != "range" || !slices.Equal(info.Protocols, []string{"range"}) {
		t.Errorf("name %q protocols %q, want range [range]", info.Name, info.Protocols)
	}
	if !info.Modes.Has(abi.Eager) || !info.Modes.Has(abi.Cooperative) {
		t.Errorf("modes %v, want eager and cooperative", info.Modes.Strings())
	}
	if info.MayLeaveUnassigned || info.Version == "" || info.Description == "" || strings.Contains(info.Description, "\n") {
		t.Errorf("info %+v: want a version, a one-line description and no unassigned partitions", info)
	}
}

func TestRange_RejectsMalformedRequests(t *testing.T) {
	cases := []struct {
		name    string
		req     *abi.Request
		wantErr string
	}{
		{
			name: "topic index out of range",
			req: &abi.Request{
				Topics:  []abi.Topic{{Name: "t", Exists: true, PartitionCount: 1}},
				Members: []abi.Member{{MemberID: "m", Topics: []int32{1}}},
			},
			wantErr: `member "m" subscribes to topic index 1`,
		},
		{
			name: "replica set out of range",
			req: &abi.Request{
				Brokers:     []abi.Broker{{ID: 1, Rack: "a"}, {ID: 2, Rack: "b"}},
				ReplicaSets: [][]int32{{1}},
				Topics: []abi.Topic{{Name: "t", Exists: true, PartitionCount: 2,
					Partitions: []abi.Partition{{Leader: 1, Replicas: 0}, {Leader: 2, Replicas: 7}}}},
				Members: []abi.Member{{MemberID: "m", Rack: "a", Topics: []int32{0}}},
			},
			wantErr: `topic "t" partition 1 refers to replica set 7`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Assign(tc.req)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(err.Error(), "range: ") {
				t.Fatalf("error %v, want one starting with \"range: \" and containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestRange_TopicListedTwiceCountsOnce: Kafka's subscription is a list, but a
// member subscribing to a topic twice must not get a double share.
func TestRange_TopicListedTwiceCountsOnce(t *testing.T) {
	req := buildRequest([]topicSpec{{"t", 4}}, []memberSpec{{id: "a", topics: []string{"t"}}, {id: "b", topics: []string{"t"}}}, nil)
	req.Members[0].Topics = append(req.Members[0].Topics, req.Members[0].Topics...)
	resp, err := Assign(req)
	if err != nil {
		t.Fatal(err)
	}
	checkValid(t, req, resp)
	want := map[string]string{"a": "t-0, t-1", "b": "t-2, t-3"}
	if got := render(t, req, resp); !maps.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestRange_ReplicasWithoutKnownRackDoNotMatch: a replica on a broker with no
// rack, or on a broker missing from the broker list (offline), gives its
// partition no rack, as a Node with a null rack does in Kafka.
func TestRange_ReplicasWithoutKnownRackDoNotMatch(t *testing.T) {
	req := &abi.Request{
		Brokers:     []abi.Broker{{ID: 1, Rack: "a"}, {ID: 2}, {ID: 3, Rack: "b"}},
		ReplicaSets: [][]int32{{2, 9}, {1}, {3}},
		Topics: []abi.Topic{{Name: "t", Exists: true, PartitionCount: 4, Partitions: []abi.Partition{
			{Replicas: 0}, {Replicas: 1}, {Replicas: 2}, {Replicas: 1},
		}}},
		Members: []abi.Member{
			{MemberID: "m1", Rack: "b", Topics: []int32{0}},
			{MemberID: "m2", Rack: "a", Topics: []int32{0}},
		},
	}
	resp, err := Assign(req)
	if err != nil {
		t.Fatal(err)
	}
	checkValid(t, req, resp)
	// m1 (rack b) takes t-2 in the rack pass, m2 (rack a) takes t-1 and t-3;
	// m1 then gets the rackless t-0 in the plain pass.
	want := map[string]string{"m1": "t-0, t-2", "m2": "t-1, t-3"}
	if got := render(t, req, resp); !maps.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestRange_MembersDoNotShareWritableMemory: members' partition slices share
// a backing array, so appending to one must not overwrite another's.
func TestRange_MembersDoNotShareWritableMemory(t *testing.T) {
	for _, withRacks := range []bool{false, true} {
		members := []memberSpec{{id: "a", rack: "a", topics: []string{"t"}}, {id: "b", rack: "b", topics: []string{"t"}}}
		pl := &placement{rf: 1, brokerRacks: []string{"a", "b"}}
		if !withRacks {
			pl = nil
		}
		req := buildRequest([]topicSpec{{"t", 6}}, members, pl)
		resp, err := Assign(req)
		if err != nil {
			t.Fatal(err)
		}
		before := render(t, req, resp)
		for i := range resp.Members {
			for j := range resp.Members[i].Partitions {
				tp := &resp.Members[i].Partitions[j]
				_ = append(tp.Partitions, -1)
			}
		}
		if after := render(t, req, resp); !maps.Equal(before, after) {
			t.Errorf("racks=%v: appending to one member's partitions changed another's: %q -> %q", withRacks, before, after)
		}
	}
}

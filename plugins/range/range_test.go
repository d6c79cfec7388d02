package rangeassignor

import (
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

func TestRange_InfoDeclaresRangeForBothModes(t *testing.T) {
	assignortest.CheckInfo(t, Info(), "range", []string{"range"})
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
	req := assignortest.BuildRequest([]assignortest.TopicSpec{{Name: "t", Partitions: 4}},
		[]assignortest.MemberSpec{{ID: "a", Topics: []string{"t"}}, {ID: "b", Topics: []string{"t"}}}, nil)
	req.Members[0].Topics = append(req.Members[0].Topics, req.Members[0].Topics...)
	assignortest.Expect(t, Assign, req, map[string]string{"a": "t-0, t-1", "b": "t-2, t-3"})
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
	// m1 (rack b) takes t-2 in the rack pass, m2 (rack a) takes t-1 and t-3;
	// m1 then gets the rackless t-0 in the plain pass.
	assignortest.Expect(t, Assign, req, map[string]string{"m1": "t-0, t-2", "m2": "t-1, t-3"})
}

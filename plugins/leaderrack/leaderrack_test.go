package leaderrack

import (
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// TestLeaderRack_RejectsMalformedRequests: errors name the assignor and
// the part of the request at fault. The replica set is checked even where
// the leader's rack alone places the partition, before step 2 needs it.
func TestLeaderRack_RejectsMalformedRequests(t *testing.T) {
	unknownTopic := oneSet(nil, []int32{1}, []int32{1}, []abi.Member{{MemberID: "m"}})
	unknownTopic.Members[0].Topics = []int32{1}
	unknownSet := oneSet(map[int32]string{1: "a", 2: "b"}, []int32{1}, []int32{1, 2}, []abi.Member{{MemberID: "m", Rack: "b"}})
	unknownSet.Topics[0].Partitions[1].Replicas = 7
	for want, req := range map[string]*abi.Request{
		`member "m" subscribes to topic index 1`:        unknownTopic,
		`topic "t" partition 1 refers to replica set 7`: unknownSet,
	} {
		_, err := Assign(req)
		if err == nil || !strings.HasPrefix(err.Error(), "leader-rack-range: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one starting with \"leader-rack-range: \" and containing %q", err, want)
		}
	}
}

// threeRacks places replicas as Kafka's tests do: brokers 100 (rack a), 101
// (b) and 102 (c); partition p of every topic has replicas on brokers
// 100+p%3 and 100+(p+1)%3, and the first of them leads. So partition p is
// led from rack a, b, c, a, ... and has its follower on the next rack.
var threeRacks = &assignortest.Placement{RF: 2, BrokerRacks: []string{"a", "b", "c"}, SameStart: true}

// oneSet is a request whose partitions of topic t all have the replicas
// set and the leaders given, over brokers with the racks given (by broker
// id).
func oneSet(brokers map[int32]string, set []int32, leaders []int32, members []abi.Member) *abi.Request {
	req := &abi.Request{ReplicaSets: [][]int32{set}}
	for id := range int32(10) {
		if rk, ok := brokers[id]; ok {
			req.Brokers = append(req.Brokers, abi.Broker{ID: id, Rack: rk})
		}
	}
	t := abi.Topic{Name: "t", Exists: true, PartitionCount: int32(len(leaders))}
	for _, l := range leaders {
		t.Partitions = append(t.Partitions, abi.Partition{Leader: l})
	}
	req.Topics = []abi.Topic{t}
	for i := range members {
		members[i].Topics = []int32{0}
		members[i].OwnedGeneration = -1
	}
	req.Members = members
	return req
}

// TestLeaderRack_Examples shows each step and rule on a small group. Each
// case names what plain range would give where that differs, to show the
// case is not passing by accident.
func TestLeaderRack_Examples(t *testing.T) {
	t6 := []assignortest.TopicSpec{{Name: "t", Partitions: 6}}
	cases := []struct {
		name string
		req  *abi.Request
		want map[string]string
	}{
		{
			// Step 1 alone: every partition is read from its leader's rack,
			// and each rack's two members take turns (plain range: a-1 gets
			// t-0 and t-1).
			name: "leaders spread round the members of their rack",
			req: assignortest.BuildRequest([]assignortest.TopicSpec{{Name: "t", Partitions: 12}}, []assignortest.MemberSpec{
				{ID: "c-1", Rack: "c", Topics: []string{"t"}}, {ID: "a-1", Rack: "a", Topics: []string{"t"}},
				{ID: "b-1", Rack: "b", Topics: []string{"t"}}, {ID: "a-2", Rack: "a", Topics: []string{"t"}},
				{ID: "b-2", Rack: "b", Topics: []string{"t"}}, {ID: "c-2", Rack: "c", Topics: []string{"t"}},
			}, threeRacks),
			want: map[string]string{
				"a-1": "t-0, t-6", "a-2": "t-3, t-9",
				"b-1": "t-1, t-7", "b-2": "t-4, t-10",
				"c-1": "t-2, t-8", "c-2": "t-5, t-11",
			},
		},
		{
			// Nobody is on rack b: t-1 and t-4, led from b, fall to their
			// followers on rack c in step 2, after c's members took t-2 and
			// t-5 from their leaders in step 1.
			name: "follower's rack when nobody is on the leader's",
			req: assignortest.BuildRequest(t6, []assignortest.MemberSpec{
				{ID: "a1", Rack: "a", Topics: []string{"t"}}, {ID: "c1", Rack: "c", Topics: []string{"t"}}, {ID: "c2", Rack: "c", Topics: []string{"t"}},
			}, threeRacks),
			want: map[string]string{"a1": "t-0, t-3", "c1": "t-1, t-2", "c2": "t-4, t-5"},
		},
		{
			// Every partition is led from broker 1 on rack a, whose one
			// member's quota is 2; the rest go to the follower's rack. The
			// leader is Partition.Leader, not the first replica. (Plain
			// range: m1 gets t-0 and t-1.)
			name: "follower's rack when the leader's is full",
			req: oneSet(map[int32]string{1: "a", 2: "b"}, []int32{2, 1}, []int32{1, 1, 1, 1},
				[]abi.Member{{MemberID: "m1", Rack: "b"}, {MemberID: "m2", Rack: "a"}}),
			want: map[string]string{"m1": "t-2, t-3", "m2": "t-0, t-1"},
		},
		{
			// n1 has no rack, so it matches nothing and takes what steps 1
			// and 2 leave: t-1 (nobody on b or c) and t-2 (its follower's
			// rack a is full). (Plain range: a1 gets t-0 and t-1.)
			name: "members without a rack take what no rack claims",
			req: assignortest.BuildRequest([]assignortest.TopicSpec{{Name: "t", Partitions: 4}}, []assignortest.MemberSpec{
				{ID: "n1", Topics: []string{"t"}}, {ID: "a1", Rack: "a", Topics: []string{"t"}},
			}, threeRacks),
			want: map[string]string{"a1": "t-0, t-3", "n1": "t-1, t-2"},
		},
		{
			// 5 partitions over 3 members: quota 1, and 2 extras. Rack a
			// leads everything; its members take turns in member order (the
			// static z9 first) and claim both extras, and b1 gets the one
			// partition left, within its quota.
			name: "quotas hold and the extras go to whoever first goes above base",
			req: oneSet(map[int32]string{1: "a", 2: "b"}, []int32{1}, []int32{1, 1, 1, 1, 1}, []abi.Member{
				{MemberID: "a1", Rack: "a"}, {MemberID: "z9", InstanceID: "pod-0", Rack: "a"}, {MemberID: "b1", Rack: "b"},
			}),
			want: map[string]string{"z9": "t-0, t-2", "a1": "t-1, t-3", "b1": "t-4"},
		},
		{
			// No known leader: every replica is a follower, so both
			// partitions look for rack b in step 2. m2 takes one, which is
			// its quota when 2 partitions go to 3 members. (Plain range: m1
			// gets t-0, m2 t-1.)
			name: "no leader: every replica counts as a follower",
			req: oneSet(map[int32]string{1: "a", 2: "b"}, []int32{1, 2}, []int32{-1, -1},
				[]abi.Member{{MemberID: "m1", Rack: "x"}, {MemberID: "m2", Rack: "b"}, {MemberID: "m3"}}),
			want: map[string]string{"m1": "t-1", "m2": "t-0", "m3": ""},
		},
		{
			// The leaders are on a broker without a rack and on one that is
			// not in the broker list: neither matches, so step 2 sends both
			// partitions to rack b, whose two members take one each.
			// (Plain range: m1 gets t-0 and m2 t-1.)
			name: "leaders with no known rack match nothing",
			req: oneSet(map[int32]string{1: "", 2: "b"}, []int32{1, 9, 2}, []int32{1, 9},
				[]abi.Member{{MemberID: "m1", Rack: "a"}, {MemberID: "m2", Rack: "b"}, {MemberID: "m3", Rack: "b"}}),
			want: map[string]string{"m1": "", "m2": "t-0", "m3": "t-1"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := assignortest.Expect(t, Assign, tc.req, tc.want)
			assignortest.CheckTopicBalance(t, tc.req, resp)
		})
	}
}

// TestLeaderRack_TopicWithoutPlacementIsPlainRange: a topic the host sent
// no placement for matches no rack and is split in member order, while its
// neighbour, led from racks a, b and c, follows the members' racks.
func TestLeaderRack_TopicWithoutPlacementIsPlainRange(t *testing.T) {
	req := assignortest.BuildRequest([]assignortest.TopicSpec{{Name: "bare", Partitions: 3}, {Name: "placed", Partitions: 3}}, []assignortest.MemberSpec{
		{ID: "c1", Rack: "a", Topics: []string{"bare", "placed"}},
		{ID: "a1", Rack: "c", Topics: []string{"bare", "placed"}},
		{ID: "b1", Rack: "b", Topics: []string{"bare", "placed"}},
	}, threeRacks)
	for i := range req.Topics {
		if req.Topics[i].Name == "bare" {
			req.Topics[i].Partitions = nil
		}
	}
	assignortest.Expect(t, Assign, req, map[string]string{
		"a1": "bare-0, placed-2",
		"b1": "bare-1, placed-1",
		"c1": "bare-2, placed-0",
	})
}

// TestLeaderRack_TopicListedTwiceCountsOnce: Kafka's subscription is a list,
// but a member subscribing to a topic twice must not get a double share.
func TestLeaderRack_TopicListedTwiceCountsOnce(t *testing.T) {
	req := assignortest.BuildRequest([]assignortest.TopicSpec{{Name: "t", Partitions: 4}},
		[]assignortest.MemberSpec{{ID: "a", Rack: "b", Topics: []string{"t"}}, {ID: "b", Rack: "a", Topics: []string{"t"}}}, threeRacks)
	req.Members[0].Topics = append(req.Members[0].Topics, req.Members[0].Topics...)
	// Leaders on a, b, c, a: b (rack a) takes t-0 and t-3, a (rack b) t-1,
	// then t-2 in step 3.
	assignortest.Expect(t, Assign, req, map[string]string{"a": "t-1, t-2", "b": "t-0, t-3"})
}

// TestLeaderRack_BrokerIDsBeyondTheTableAreFound: broker ids too large or
// negative for the dense rack table are looked up in a map instead, with
// the same result.
func TestLeaderRack_BrokerIDsBeyondTheTableAreFound(t *testing.T) {
	for _, shift := range []int32{0, denseLimit, -denseLimit} {
		req := oneSet(map[int32]string{1: "a", 2: "b"}, []int32{1, 2}, []int32{2, 1},
			[]abi.Member{{MemberID: "m1", Rack: "a"}, {MemberID: "m2", Rack: "b"}})
		for i := range req.Brokers {
			req.Brokers[i].ID += shift
		}
		req.ReplicaSets[0] = []int32{1 + shift, 2 + shift}
		for i := range req.Topics[0].Partitions {
			req.Topics[0].Partitions[i].Leader += shift
		}
		assignortest.Expect(t, Assign, req, map[string]string{"m1": "t-1", "m2": "t-0"})
	}
}

func TestLeaderRack_InfoDeclaresLeaderRackRangeForBothModes(t *testing.T) {
	assignortest.CheckInfo(t, Info(), "leader-rack-range", []string{"leader-rack-range"})
}

package loadtest

import (
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// joined is the JoinGroup answer a leader gets: each member's id and
// subscription.
func joined(owned map[string]map[string][]int32, topics []string, ids ...string) []kmsg.JoinGroupResponseMember {
	var ms []kmsg.JoinGroupResponseMember
	for _, id := range ids {
		var own []kmsg.ConsumerMemberAssignmentTopic
		for topic, ps := range owned[id] {
			own = append(own, kmsg.ConsumerMemberAssignmentTopic{Topic: topic, Partitions: ps})
		}
		ms = append(ms, kmsg.JoinGroupResponseMember{MemberID: id, ProtocolMetadata: subscription(topics, own, 3)})
	}
	return ms
}

// decoded is leaderAssign's answer by member and topic.
func decoded(t *testing.T, ga []kmsg.SyncGroupRequestGroupAssignment) map[string]map[string][]int32 {
	t.Helper()
	out := map[string]map[string][]int32{}
	for _, a := range ga {
		topics, err := decodeAssignment(a.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		out[a.MemberID] = map[string][]int32{}
		for _, tp := range topics {
			out[a.MemberID][tp.Topic] = tp.Partitions
		}
	}
	return out
}

func TestLeaderAssign(t *testing.T) {
	parts := map[string]int32{"t0": 3, "t1": 3, "t2": 1}
	cases := []struct {
		name        string
		ids         []string
		topics      []string
		owned       map[string]map[string][]int32
		cooperative bool
		want        map[string]map[string][]int32
	}{{
		// KAFKA-SEMANTICS.md's example: range deals each topic in
		// member-id order, the first members one more.
		name: "range over two topics", ids: []string{"c1", "c0"}, topics: []string{"t0", "t1"},
		want: map[string]map[string][]int32{"c0": {"t0": {0, 1}, "t1": {0, 1}}, "c1": {"t0": {2}, "t1": {2}}},
	}, {
		name: "more members than partitions", ids: []string{"a", "b"}, topics: []string{"t2"},
		want: map[string]map[string][]int32{"a": {"t2": {0}}, "b": {}},
	}, {
		name: "a topic the target lacks is not assigned", ids: []string{"a"}, topics: []string{"t2", "nope"},
		want: map[string]map[string][]int32{"a": {"t2": {0}}},
	}, {
		name: "eager ignores ownership", ids: []string{"a", "b"}, topics: []string{"t0"},
		owned: map[string]map[string][]int32{"b": {"t0": {0, 1, 2}}},
		want:  map[string]map[string][]int32{"a": {"t0": {0, 1}}, "b": {"t0": {2}}},
	}, {
		// KIP-429: b gives 0 and 1 up this round; a gets them next.
		name: "cooperative withholds what changes owner", ids: []string{"a", "b"}, topics: []string{"t0"}, cooperative: true,
		owned: map[string]map[string][]int32{"b": {"t0": {0, 1, 2}}},
		want:  map[string]map[string][]int32{"a": {}, "b": {"t0": {2}}},
	}, {
		name: "cooperative next round", ids: []string{"a", "b"}, topics: []string{"t0"}, cooperative: true,
		owned: map[string]map[string][]int32{"b": {"t0": {2}}},
		want:  map[string]map[string][]int32{"a": {"t0": {0, 1}}, "b": {"t0": {2}}},
	}, {
		name: "cooperative: a departed owner's partitions move at once", ids: []string{"a"}, topics: []string{"t0"}, cooperative: true,
		owned: map[string]map[string][]int32{"a": {"t0": {0}}},
		want:  map[string]map[string][]int32{"a": {"t0": {0, 1, 2}}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ga, err := leaderAssign(joined(tc.owned, tc.topics, tc.ids...), parts, tc.cooperative)
			if err != nil {
				t.Fatal(err)
			}
			if got := decoded(t, ga); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestLeaderAssign_BadSubscriptionNamesTheMember(t *testing.T) {
	_, err := leaderAssign([]kmsg.JoinGroupResponseMember{{MemberID: "m-1", ProtocolMetadata: []byte{0}}}, nil, false)
	if err == nil || !strings.Contains(err.Error(), "m-1") {
		t.Errorf("error %v, want one naming m-1", err)
	}
}

func TestRevoked(t *testing.T) {
	tp := func(topic string, ps ...int32) kmsg.ConsumerMemberAssignmentTopic {
		return kmsg.ConsumerMemberAssignmentTopic{Topic: topic, Partitions: ps}
	}
	type a = []kmsg.ConsumerMemberAssignmentTopic
	cases := []struct {
		name        string
		owned, next a
		want        bool
	}{
		{"nothing owned", nil, a{tp("t", 0)}, false},
		{"same", a{tp("t", 0, 1)}, a{tp("t", 0, 1)}, false},
		{"gains only", a{tp("t", 1)}, a{tp("t", 0, 1, 2), tp("u", 0)}, false},
		{"drops a partition", a{tp("t", 0, 1)}, a{tp("t", 1)}, true},
		{"drops a topic", a{tp("t", 0), tp("u", 0)}, a{tp("t", 0)}, true},
		{"drops everything", a{tp("t", 0)}, nil, true},
	}
	for _, tc := range cases {
		if got := revoked(tc.owned, tc.next); got != tc.want {
			t.Errorf("%s: revoked %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDecodeAssignment_SortsAndDropsEmptyTopics(t *testing.T) {
	a := kmsg.ConsumerMemberAssignment{Topics: []kmsg.ConsumerMemberAssignmentTopic{
		{Topic: "z", Partitions: []int32{3, 1}}, {Topic: "empty"}, {Topic: "a", Partitions: []int32{2}},
	}}
	got, err := decodeAssignment(a.AppendTo(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []kmsg.ConsumerMemberAssignmentTopic{{Topic: "a", Partitions: []int32{2}}, {Topic: "z", Partitions: []int32{1, 3}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got, err := decodeAssignment(nil); got != nil || err != nil {
		t.Errorf("empty assignment: %v, %v", got, err)
	}
}

func TestCheckCoverage(t *testing.T) {
	parts := map[string]int32{"t": 2}
	tp := func(ps ...int32) []kmsg.ConsumerMemberAssignmentTopic {
		return []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: ps}}
	}
	cases := []struct {
		name    string
		members [][]kmsg.ConsumerMemberAssignmentTopic
		problem string
	}{
		{"covered", [][]kmsg.ConsumerMemberAssignmentTopic{tp(0), tp(1), nil}, ""},
		{"unassigned", [][]kmsg.ConsumerMemberAssignmentTopic{tp(0)}, "t-1 unassigned"},
		{"twice", [][]kmsg.ConsumerMemberAssignmentTopic{tp(0, 1), tp(1)}, "t-1 held by 2 members"},
		{"unknown", [][]kmsg.ConsumerMemberAssignmentTopic{tp(0, 1, 7)}, "t-7 is not a partition of the target"},
	}
	for _, tc := range cases {
		err := checkCoverage(parts, tc.members)
		switch {
		case tc.problem == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.problem != "" && (err == nil || !strings.Contains(err.Error(), tc.problem)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.problem)
		}
	}
}

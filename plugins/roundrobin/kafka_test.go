package roundrobin

import (
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// TestRoundRobin_KafkaCases mirrors RoundRobinAssignorTest, one case per
// Kafka @Test (two for the tests that assign twice), plus the example of
// RoundRobinAssignor's Javadoc.
func TestRoundRobin_KafkaCases(t *testing.T) {
	both := []string{"topic1", "topic2"}
	topic := []string{"topic"}
	two := func(p1, p2 int32) []assignortest.TopicSpec {
		return []assignortest.TopicSpec{{Name: "topic1", Partitions: p1}, {Name: "topic2", Partitions: p2}}
	}
	one := func(p int32) []assignortest.TopicSpec {
		return []assignortest.TopicSpec{{Name: "topic", Partitions: p}}
	}
	type kafkaCase struct {
		name    string
		topics  []assignortest.TopicSpec
		members []assignortest.MemberSpec
		want    map[string]string
	}
	cases := []kafkaCase{
		{
			name:    "testOneConsumerNoTopic",
			members: []assignortest.MemberSpec{{ID: "consumer"}},
			want:    map[string]string{"consumer": ""},
		},
		{
			name:    "testOneConsumerNonexistentTopic",
			members: []assignortest.MemberSpec{{ID: "consumer", Topics: topic}},
			want:    map[string]string{"consumer": ""},
		},
		{
			name:    "testOneConsumerOneTopic",
			topics:  one(3),
			members: []assignortest.MemberSpec{{ID: "consumer", Topics: topic}},
			want:    map[string]string{"consumer": "topic-0, topic-1, topic-2"},
		},
		{
			name:    "testOnlyAssignsPartitionsFromSubscribedTopics",
			topics:  []assignortest.TopicSpec{{Name: "topic", Partitions: 3}, {Name: "other", Partitions: 3}},
			members: []assignortest.MemberSpec{{ID: "consumer", Topics: topic}},
			want:    map[string]string{"consumer": "topic-0, topic-1, topic-2"},
		},
		{
			name:    "testOneConsumerMultipleTopics",
			topics:  two(1, 2),
			members: []assignortest.MemberSpec{{ID: "consumer", Topics: both}},
			want:    map[string]string{"consumer": "topic1-0, topic2-0, topic2-1"},
		},
		{
			name:    "testTwoConsumersOneTopicOnePartition",
			topics:  one(1),
			members: []assignortest.MemberSpec{{ID: "consumer1", Topics: topic}, {ID: "consumer2", Topics: topic}},
			want:    map[string]string{"consumer1": "topic-0", "consumer2": ""},
		},
		{
			name:    "testTwoConsumersOneTopicTwoPartitions",
			topics:  one(2),
			members: []assignortest.MemberSpec{{ID: "consumer1", Topics: topic}, {ID: "consumer2", Topics: topic}},
			want:    map[string]string{"consumer1": "topic-0", "consumer2": "topic-1"},
		},
		{
			name:   "testMultipleConsumersMixedTopics",
			topics: two(3, 2),
			members: []assignortest.MemberSpec{
				{ID: "consumer1", Topics: []string{"topic1"}},
				{ID: "consumer2", Topics: both},
				{ID: "consumer3", Topics: []string{"topic1"}},
			},
			want: map[string]string{"consumer1": "topic1-0", "consumer2": "topic1-1, topic2-0, topic2-1", "consumer3": "topic1-2"},
		},
		{
			name:    "testTwoDynamicConsumersTwoTopicsSixPartitions",
			topics:  two(3, 3),
			members: []assignortest.MemberSpec{{ID: "consumer1", Topics: both}, {ID: "consumer2", Topics: both}},
			want:    map[string]string{"consumer1": "topic1-0, topic1-2, topic2-1", "consumer2": "topic1-1, topic2-0, topic2-2"},
		},
		{
			// Unequal subscriptions: the iterator skips members that do not
			// subscribe, which leaves C2 with most of the partitions.
			name:   "RoundRobinAssignor javadoc, unequal subscriptions",
			topics: []assignortest.TopicSpec{{Name: "t0", Partitions: 1}, {Name: "t1", Partitions: 2}, {Name: "t2", Partitions: 3}},
			members: []assignortest.MemberSpec{
				{ID: "C0", Topics: []string{"t0"}},
				{ID: "C1", Topics: []string{"t0", "t1"}},
				{ID: "C2", Topics: []string{"t0", "t1", "t2"}},
			},
			want: map[string]string{"C0": "t0-0", "C1": "t1-0", "C2": "t1-1, t2-0, t2-1, t2-2"},
		},
	}
	// The member ids sort the other way: with two static members instance
	// ids decide, and a static member comes before a dynamic one whatever
	// the ids.
	for _, tc := range []struct{ name, secondInstance string }{
		{"testTwoStaticConsumersTwoTopicsSixPartitions", "instance2"},
		{"testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions", ""},
	} {
		cases = append(cases, kafkaCase{
			name:   tc.name,
			topics: two(3, 3),
			members: []assignortest.MemberSpec{
				{ID: "consumer-b", Instance: "instance1", Topics: both},
				{ID: "consumer-a", Instance: tc.secondInstance, Topics: both},
			},
			want: map[string]string{"consumer-b": "topic1-0, topic1-2, topic2-1", "consumer-a": "topic1-1, topic2-0, topic2-2"},
		})
	}
	// testStaticMemberRoundRobinAssignmentPersistent: the dynamic consumer4
	// is replaced by consumer5, which takes over its partitions while the
	// static members keep theirs.
	for _, dynamic := range []string{"consumer4", "consumer5"} {
		cases = append(cases, kafkaCase{
			name:   "testStaticMemberRoundRobinAssignmentPersistent/" + dynamic,
			topics: two(3, 3),
			members: []assignortest.MemberSpec{
				{ID: "consumer1", Instance: "instance1", Topics: both},
				{ID: "consumer2", Instance: "instance2", Topics: both},
				{ID: "consumer3", Instance: "instance3", Topics: both},
				{ID: dynamic, Topics: both},
			},
			want: map[string]string{
				"consumer1": "topic1-0, topic2-1",
				"consumer2": "topic1-1, topic2-2",
				"consumer3": "topic1-2",
				dynamic:     "topic2-0",
			},
		})
	}
	// testStaticMemberRoundRobinAssignmentPersistentAfterMemberIdChanges:
	// consumer5 takes over instance2 and consumer4 instance3, and each
	// instance keeps its partitions.
	for _, phase := range []struct {
		name string
		ids  [3]string // of instance1, instance2, instance3
	}{
		{"before", [3]string{"consumer1", "consumer2", "consumer3"}},
		{"after", [3]string{"consumer1", "consumer5", "consumer4"}},
	} {
		cases = append(cases, kafkaCase{
			name:   "testStaticMemberRoundRobinAssignmentPersistentAfterMemberIdChanges/" + phase.name,
			topics: two(5, 5),
			members: []assignortest.MemberSpec{
				{ID: phase.ids[0], Instance: "instance1", Topics: both},
				{ID: phase.ids[1], Instance: "instance2", Topics: both},
				{ID: phase.ids[2], Instance: "instance3", Topics: both},
			},
			want: map[string]string{
				phase.ids[0]: "topic1-0, topic1-3, topic2-1, topic2-4",
				phase.ids[1]: "topic1-1, topic1-4, topic2-2",
				phase.ids[2]: "topic1-2, topic2-0, topic2-3",
			},
		})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assignortest.Expect(t, Assign, assignortest.BuildRequest(tc.topics, tc.members, nil), tc.want)
		})
	}
}

func TestRoundRobin_InfoDeclaresJavaAndKafkajsProtocols(t *testing.T) {
	assignortest.CheckInfo(t, Info(), "roundrobin", []string{"roundrobin", "RoundRobinAssigner"})
}

func TestRoundRobin_RejectsTopicIndexOutOfRange(t *testing.T) {
	req := &abi.Request{
		Topics:  []abi.Topic{{Name: "t", Exists: true, PartitionCount: 1}},
		Members: []abi.Member{{MemberID: "m", Topics: []int32{0, 3}}},
	}
	_, err := Assign(req)
	if err == nil || !strings.HasPrefix(err.Error(), "roundrobin: ") || !strings.Contains(err.Error(), `member "m" subscribes to topic index 3`) {
		t.Fatalf("error %v, want one naming the member and the index", err)
	}
}

// TestRoundRobin_TopicListedTwiceCountsOnce: a member subscribing to a topic
// twice must still take one turn per round.
func TestRoundRobin_TopicListedTwiceCountsOnce(t *testing.T) {
	req := assignortest.BuildRequest([]assignortest.TopicSpec{{Name: "t", Partitions: 4}},
		[]assignortest.MemberSpec{{ID: "a", Topics: []string{"t"}}, {ID: "b", Topics: []string{"t"}}}, nil)
	req.Members[1].Topics = append(req.Members[1].Topics, req.Members[1].Topics...)
	assignortest.Expect(t, Assign, req, map[string]string{"a": "t-0, t-2", "b": "t-1, t-3"})
}

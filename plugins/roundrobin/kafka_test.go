package roundrobin

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// TestRoundRobin_KafkaCases mirrors RoundRobinAssignorTest, one case per
// Kafka @Test (two for the tests that assign twice), plus the example of
// RoundRobinAssignor's Javadoc.
func TestRoundRobin_KafkaCases(t *testing.T) {
	both := []string{"topic1", "topic2"}
	two := func(p1, p2 int32) []topicSpec { return []topicSpec{{"topic1", p1}, {"topic2", p2}} }
	cases := []struct {
		name    string
		topics  []topicSpec
		members []memberSpec
		want    map[string]string
	}{
		{
			name:    "testOneConsumerNoTopic",
			members: []memberSpec{{id: "consumer"}},
			want:    map[string]string{"consumer": ""},
		},
		{
			name:    "testOneConsumerNonexistentTopic",
			members: []memberSpec{{id: "consumer", topics: []string{"topic"}}},
			want:    map[string]string{"consumer": ""},
		},
		{
			name:    "testOneConsumerOneTopic",
			topics:  []topicSpec{{"topic", 3}},
			members: []memberSpec{{id: "consumer", topics: []string{"topic"}}},
			want:    map[string]string{"consumer": "topic-0, topic-1, topic-2"},
		},
		{
			name:    "testOnlyAssignsPartitionsFromSubscribedTopics",
			topics:  []topicSpec{{"topic", 3}, {"other", 3}},
			members: []memberSpec{{id: "consumer", topics: []string{"topic"}}},
			want:    map[string]string{"consumer": "topic-0, topic-1, topic-2"},
		},
		{
			name:    "testOneConsumerMultipleTopics",
			topics:  two(1, 2),
			members: []memberSpec{{id: "consumer", topics: both}},
			want:    map[string]string{"consumer": "topic1-0, topic2-0, topic2-1"},
		},
		{
			name:    "testTwoConsumersOneTopicOnePartition",
			topics:  []topicSpec{{"topic", 1}},
			members: []memberSpec{{id: "consumer1", topics: []string{"topic"}}, {id: "consumer2", topics: []string{"topic"}}},
			want:    map[string]string{"consumer1": "topic-0", "consumer2": ""},
		},
		{
			name:    "testTwoConsumersOneTopicTwoPartitions",
			topics:  []topicSpec{{"topic", 2}},
			members: []memberSpec{{id: "consumer1", topics: []string{"topic"}}, {id: "consumer2", topics: []string{"topic"}}},
			want:    map[string]string{"consumer1": "topic-0", "consumer2": "topic-1"},
		},
		{
			name:   "testMultipleConsumersMixedTopics",
			topics: two(3, 2),
			members: []memberSpec{
				{id: "consumer1", topics: []string{"topic1"}},
				{id: "consumer2", topics: both},
				{id: "consumer3", topics: []string{"topic1"}},
			},
			want: map[string]string{"consumer1": "topic1-0", "consumer2": "topic1-1, topic2-0, topic2-1", "consumer3": "topic1-2"},
		},
		{
			name:    "testTwoDynamicConsumersTwoTopicsSixPartitions",
			topics:  two(3, 3),
			members: []memberSpec{{id: "consumer1", topics: both}, {id: "consumer2", topics: both}},
			want:    map[string]string{"consumer1": "topic1-0, topic1-2, topic2-1", "consumer2": "topic1-1, topic2-0, topic2-2"},
		},
		{
			// The member ids sort the other way; instance ids decide.
			name:   "testTwoStaticConsumersTwoTopicsSixPartitions",
			topics: two(3, 3),
			members: []memberSpec{
				{id: "consumer-b", instance: "instance1", topics: both},
				{id: "consumer-a", instance: "instance2", topics: both},
			},
			want: map[string]string{"consumer-b": "topic1-0, topic1-2, topic2-1", "consumer-a": "topic1-1, topic2-0, topic2-2"},
		},
		{
			// A static member comes before a dynamic one whatever the ids.
			name:   "testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions",
			topics: two(3, 3),
			members: []memberSpec{
				{id: "consumer-b", instance: "instance1", topics: both},
				{id: "consumer-a", topics: both},
			},
			want: map[string]string{"consumer-b": "topic1-0, topic1-2, topic2-1", "consumer-a": "topic1-1, topic2-0, topic2-2"},
		},
		{
			name:   "testStaticMemberRoundRobinAssignmentPersistent/with consumer4",
			topics: two(3, 3),
			members: []memberSpec{
				{id: "consumer1", instance: "instance1", topics: both},
				{id: "consumer2", instance: "instance2", topics: both},
				{id: "consumer3", instance: "instance3", topics: both},
				{id: "consumer4", topics: both},
			},
			want: map[string]string{
				"consumer1": "topic1-0, topic2-1",
				"consumer2": "topic1-1, topic2-2",
				"consumer3": "topic1-2",
				"consumer4": "topic2-0",
			},
		},
		{
			name:   "testStaticMemberRoundRobinAssignmentPersistent/consumer4 replaced by consumer5",
			topics: two(3, 3),
			members: []memberSpec{
				{id: "consumer1", instance: "instance1", topics: both},
				{id: "consumer2", instance: "instance2", topics: both},
				{id: "consumer3", instance: "instance3", topics: both},
				{id: "consumer5", topics: both},
			},
			want: map[string]string{
				"consumer1": "topic1-0, topic2-1",
				"consumer2": "topic1-1, topic2-2",
				"consumer3": "topic1-2",
				"consumer5": "topic2-0",
			},
		},
		{
			name:   "testStaticMemberRoundRobinAssignmentPersistentAfterMemberIdChanges/before",
			topics: two(5, 5),
			members: []memberSpec{
				{id: "consumer1", instance: "instance1", topics: both},
				{id: "consumer2", instance: "instance2", topics: both},
				{id: "consumer3", instance: "instance3", topics: both},
			},
			want: map[string]string{
				"consumer1": "topic1-0, topic1-3, topic2-1, topic2-4",
				"consumer2": "topic1-1, topic1-4, topic2-2",
				"consumer3": "topic1-2, topic2-0, topic2-3",
			},
		},
		{
			// consumer4 takes over instance3 and consumer5 instance2; each
			// instance keeps its partitions.
			name:   "testStaticMemberRoundRobinAssignmentPersistentAfterMemberIdChanges/after",
			topics: two(5, 5),
			members: []memberSpec{
				{id: "consumer1", instance: "instance1", topics: both},
				{id: "consumer5", instance: "instance2", topics: both},
				{id: "consumer4", instance: "instance3", topics: both},
			},
			want: map[string]string{
				"consumer1": "topic1-0, topic1-3, topic2-1, topic2-4",
				"consumer5": "topic1-1, topic1-4, topic2-2",
				"consumer4": "topic1-2, topic2-0, topic2-3",
			},
		},
		{
			// Unequal subscriptions: the iterator skips members that do not
			// subscribe, which leaves C2 with most of the partitions.
			name:   "RoundRobinAssignor javadoc, unequal subscriptions",
			topics: []topicSpec{{"t0", 1}, {"t1", 2}, {"t2", 3}},
			members: []memberSpec{
				{id: "C0", topics: []string{"t0"}},
				{id: "C1", topics: []string{"t0", "t1"}},
				{id: "C2", topics: []string{"t0", "t1", "t2"}},
			},
			want: map[string]string{"C0": "t0-0", "C1": "t1-0", "C2": "t1-1, t2-0, t2-1, t2-2"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := buildRequest(tc.topics, tc.members)
			resp, err := Assign(req)
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, req, resp)
			if got := render(t, req, resp); !maps.Equal(got, tc.want) {
				t.Errorf("\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestRoundRobin_InfoDeclaresJavaAndKafkajsProtocols(t *testing.T) {
	info := Info()
	if info.Name != "roundrobin" || !slices.Equal(info.Protocols, []string{"roundrobin", "RoundRobinAssigner"}) {
		t.Errorf("name %q protocols %q, want roundrobin [roundrobin RoundRobinAssigner]", info.Name, info.Protocols)
	}
	if !info.Modes.Has(abi.Eager) || !info.Modes.Has(abi.Cooperative) {
		t.Errorf("modes %v, want eager and cooperative", info.Modes.Strings())
	}
	if info.MayLeaveUnassigned || info.Version == "" || info.Description == "" || strings.Contains(info.Description, "\n") {
		t.Errorf("info %+v: want a version, a one-line description and no unassigned partitions", info)
	}
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
	req := buildRequest([]topicSpec{{"t", 4}}, []memberSpec{{id: "a", topics: []string{"t"}}, {id: "b", topics: []string{"t"}}})
	req.Members[1].Topics = append(req.Members[1].Topics, req.Members[1].Topics...)
	resp, err := Assign(req)
	if err != nil {
		t.Fatal(err)
	}
	checkValid(t, req, resp)
	want := map[string]string{"a": "t-0, t-2", "b": "t-1, t-3"}
	if got := render(t, req, resp); !maps.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestRoundRobin_MembersDoNotShareWritableMemory: members' partition slices
// share a backing array, so appending to one must not overwrite another's.
func TestRoundRobin_MembersDoNotShareWritableMemory(t *testing.T) {
	req := buildRequest([]topicSpec{{"t", 7}, {"u", 3}}, []memberSpec{{id: "a", topics: []string{"t", "u"}}, {id: "b", topics: []string{"t", "u"}}})
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
		t.Errorf("appending to one member's partitions changed another's: %q -> %q", before, after)
	}
}

package rangeassignor

import (
	"maps"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// rackConfig is AbstractPartitionAssignorTest.RackConfig: which side of the
// cluster knows its racks.
type rackConfig int

const (
	noBrokerRack rackConfig = iota
	noConsumerRack
	brokerAndConsumerRack
)

func (c rackConfig) String() string {
	return [...]string{"NO_BROKER_RACK", "NO_CONSUMER_RACK", "BROKER_AND_CONSUMER_RACK"}[c]
}

// kafkaMember is a member of one of RangeAssignorTest's parameterized tests.
// index is the consumerIndex its subscription was made with, which picks its
// rack.
type kafkaMember struct {
	id, instance string
	index        int
	topics       []string
}

// paramRequest builds the cluster of RangeAssignorTest.initializeRacks(cfg,
// maxConsumers): replication factor maxConsumers, maxConsumers broker racks
// unless cfg has none, and consumer i on rack ALL_RACKS[i % racks].
func paramRequest(cfg rackConfig, maxConsumers int, topics []topicSpec, members []kafkaMember) *abi.Request {
	rf := maxConsumers
	numBrokerRacks := 0
	if cfg != noBrokerRack {
		numBrokerRacks = maxConsumers
	}
	brokers := nullRacks(rf)
	if numBrokerRacks > 0 {
		brokers = make([]string, numBrokerRacks*rf)
		for i := range brokers {
			brokers[i] = rackAt(i % numBrokerRacks)
		}
	}
	numRacks := numBrokerRacks
	if numRacks == 0 {
		numRacks = len(allRacks)
	}
	specs := make([]memberSpec, len(members))
	for i, m := range members {
		specs[i] = memberSpec{id: m.id, instance: m.instance, topics: m.topics}
		if cfg != noConsumerRack {
			specs[i].rack = rackAt(m.index % numRacks)
		}
	}
	return buildRequest(topics, specs, &placement{rf: rf, brokerRacks: brokers, sameStart: true})
}

// TestRange_KafkaParameterizedCases runs RangeAssignorTest's tests that are
// parameterized by RackConfig. Kafka runs them with preferRackAwareLogic on,
// and with every partition on every rack, so rack awareness must not change
// the classic answer.
func TestRange_KafkaParameterizedCases(t *testing.T) {
	both := []string{"topic1", "topic2"}
	two := func(p1, p2 int32) []topicSpec { return []topicSpec{{"topic1", p1}, {"topic2", p2}} }
	cases := []struct {
		name         string
		maxConsumers int
		topics       []topicSpec
		members      []kafkaMember
		want         map[string]string
	}{
		{
			name:    "testOneConsumerNoTopic",
			members: []kafkaMember{{id: "consumer1"}},
			want:    map[string]string{"consumer1": ""},
		},
		{
			name:    "testOneConsumerNonexistentTopic",
			members: []kafkaMember{{id: "consumer1", topics: []string{"topic1"}}},
			want:    map[string]string{"consumer1": ""},
		},
		{
			name:    "testOneConsumerOneTopic",
			topics:  []topicSpec{{"topic1", 3}},
			members: []kafkaMember{{id: "consumer1", topics: []string{"topic1"}}},
			want:    map[string]string{"consumer1": "topic1-0, topic1-1, topic1-2"},
		},
		{
			name:    "testOnlyAssignsPartitionsFromSubscribedTopics",
			topics:  []topicSpec{{"topic1", 3}, {"other", 3}},
			members: []kafkaMember{{id: "consumer1", topics: []string{"topic1"}}},
			want:    map[string]string{"consumer1": "topic1-0, topic1-1, topic1-2"},
		},
		{
			name:    "testOneConsumerMultipleTopics",
			topics:  two(1, 2),
			members: []kafkaMember{{id: "consumer1", topics: both}},
			want:    map[string]string{"consumer1": "topic1-0, topic2-0, topic2-1"},
		},
		{
			name:    "testTwoConsumersOneTopicOnePartition",
			topics:  []topicSpec{{"topic1", 1}},
			members: []kafkaMember{{id: "consumer1", index: 0, topics: []string{"topic1"}}, {id: "consumer2", index: 1, topics: []string{"topic1"}}},
			want:    map[string]string{"consumer1": "topic1-0", "consumer2": ""},
		},
		{
			name:    "testTwoConsumersOneTopicTwoPartitions",
			topics:  []topicSpec{{"topic1", 2}},
			members: []kafkaMember{{id: "consumer1", index: 0, topics: []string{"topic1"}}, {id: "consumer2", index: 1, topics: []string{"topic1"}}},
			want:    map[string]string{"consumer1": "topic1-0", "consumer2": "topic1-1"},
		},
		{
			name:   "testMultipleConsumersMixedTopics",
			topics: two(3, 2),
			members: []kafkaMember{
				{id: "consumer1", index: 0, topics: []string{"topic1"}},
				{id: "consumer2", index: 1, topics: both},
				{id: "consumer3", index: 2, topics: []string{"topic1"}},
			},
			want: map[string]string{"consumer1": "topic1-0", "consumer2": "topic1-1, topic2-0, topic2-1", "consumer3": "topic1-2"},
		},
		{
			name:    "testTwoConsumersTwoTopicsSixPartitions",
			topics:  two(3, 3),
			members: []kafkaMember{{id: "consumer1", index: 0, topics: both}, {id: "consumer2", index: 1, topics: both}},
			want:    map[string]string{"consumer1": "topic1-0, topic1-1, topic2-0, topic2-1", "consumer2": "topic1-2, topic2-2"},
		},
		{
			// The member ids sort the other way; instance ids decide.
			name:   "testTwoStaticConsumersTwoTopicsSixPartitions",
			topics: two(3, 3),
			members: []kafkaMember{
				{id: "consumer-b", instance: "instance1", index: 0, topics: both},
				{id: "consumer-a", instance: "instance2", index: 1, topics: both},
			},
			want: map[string]string{"consumer-b": "topic1-0, topic1-1, topic2-0, topic2-1", "consumer-a": "topic1-2, topic2-2"},
		},
		{
			// A static member comes before a dynamic one whatever the ids.
			name:   "testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions",
			topics: two(3, 3),
			members: []kafkaMember{
				{id: "consumer-b", instance: "instance1", index: 0, topics: both},
				{id: "consumer-a", index: 1, topics: both},
			},
			want: map[string]string{"consumer-b": "topic1-0, topic1-1, topic2-0, topic2-1", "consumer-a": "topic1-2, topic2-2"},
		},
		{
			name:         "testStaticMemberRangeAssignmentPersistent/with consumer4",
			maxConsumers: 5,
			topics:       two(5, 4),
			members: []kafkaMember{
				{id: "consumer1", instance: "instance1", index: 0, topics: both},
				{id: "consumer2", instance: "instance2", index: 1, topics: both},
				{id: "consumer3", instance: "instance3", index: 2, topics: both},
				{id: "consumer4", index: 3, topics: both},
			},
			want: map[string]string{
				"consumer1": "topic1-0, topic1-1, topic2-0",
				"consumer2": "topic1-2, topic2-1",
				"consumer3": "topic1-3, topic2-2",
				"consumer4": "topic1-4, topic2-3",
			},
		},
		{
			name:         "testStaticMemberRangeAssignmentPersistent/consumer4 replaced by consumer5",
			maxConsumers: 5,
			topics:       two(5, 4),
			members: []kafkaMember{
				{id: "consumer1", instance: "instance1", index: 0, topics: both},
				{id: "consumer2", instance: "instance2", index: 1, topics: both},
				{id: "consumer3", instance: "instance3", index: 2, topics: both},
				{id: "consumer5", index: 4, topics: both},
			},
			want: map[string]string{
				"consumer1": "topic1-0, topic1-1, topic2-0",
				"consumer2": "topic1-2, topic2-1",
				"consumer3": "topic1-3, topic2-2",
				"consumer5": "topic1-4, topic2-3",
			},
		},
		{
			name:   "testStaticMemberRangeAssignmentPersistentAfterMemberIdChanges/before",
			topics: two(5, 5),
			members: []kafkaMember{
				{id: "consumer1", instance: "instance1", index: 0, topics: both},
				{id: "consumer2", instance: "instance2", index: 1, topics: both},
				{id: "consumer3", instance: "instance3", index: 2, topics: both},
			},
			want: map[string]string{
				"consumer1": "topic1-0, topic1-1, topic2-0, topic2-1",
				"consumer2": "topic1-2, topic1-3, topic2-2, topic2-3",
				"consumer3": "topic1-4, topic2-4",
			},
		},
		{
			// consumer4 takes over instance3 and consumer5 instance2; each
			// instance keeps its partitions.
			name:   "testStaticMemberRangeAssignmentPersistentAfterMemberIdChanges/after",
			topics: two(5, 5),
			members: []kafkaMember{
				{id: "consumer1", instance: "instance1", index: 0, topics: both},
				{id: "consumer5", instance: "instance2", index: 1, topics: both},
				{id: "consumer4", instance: "instance3", index: 2, topics: both},
			},
			want: map[string]string{
				"consumer1": "topic1-0, topic1-1, topic2-0, topic2-1",
				"consumer5": "topic1-2, topic1-3, topic2-2, topic2-3",
				"consumer4": "topic1-4, topic2-4",
			},
		},
	}
	for _, tc := range cases {
		for _, cfg := range []rackConfig{noBrokerRack, noConsumerRack, brokerAndConsumerRack} {
			t.Run(tc.name+"/"+cfg.String(), func(t *testing.T) {
				maxConsumers := tc.maxConsumers
				if maxConsumers == 0 {
					maxConsumers = 3
				}
				req := paramRequest(cfg, maxConsumers, tc.topics, tc.members)
				for _, opt := range []options{{preferRackAware: true}, {}} {
					resp, err := assign(req, opt)
					if err != nil {
						t.Fatal(err)
					}
					checkValid(t, req, resp)
					if got := render(t, req, resp); !maps.Equal(got, tc.want) {
						t.Errorf("preferRackAware=%v:\n got %q\nwant %q", opt.preferRackAware, got, tc.want)
					}
				}
			})
		}
	}
}

// TestRange_KafkaRackAwareStaticMembersKeepPartitionsAfterMemberIdChanges is
// RangeAssignorTest.testRackAwareStaticMemberRangeAssignmentPersistentAfterMemberIdChanges:
// replication factor 2 over three racks, so partitions differ in racks, and
// static members keep their rack-aligned partitions when their member ids
// change.
func TestRange_KafkaRackAwareStaticMembersKeepPartitionsAfterMemberIdChanges(t *testing.T) {
	both := []string{"topic1", "topic2"}
	topics := []topicSpec{{"topic1", 5}, {"topic2", 5}}
	pl := &placement{rf: 2, brokerRacks: []string{"a", "b", "c", "a", "b", "c"}, sameStart: true}
	cases := []struct {
		name    string
		members []memberSpec
		want    map[string]string
	}{
		{
			name: "before",
			members: []memberSpec{
				{id: "consumer1", instance: "instance1", rack: "a", topics: both},
				{id: "consumer2", instance: "instance2", rack: "b", topics: both},
				{id: "consumer3", instance: "instance3", rack: "c", topics: both},
			},
			want: map[string]string{
				"consumer1": "topic1-0, topic1-2, topic2-0, topic2-2",
				"consumer2": "topic1-1, topic1-3, topic2-1, topic2-3",
				"consumer3": "topic1-4, topic2-4",
			},
		},
		{
			name: "after",
			members: []memberSpec{
				{id: "consumer1", instance: "instance1", rack: "a", topics: both},
				{id: "consumer5", instance: "instance2", rack: "b", topics: both},
				{id: "consumer4", instance: "instance3", rack: "c", topics: both},
			},
			want: map[string]string{
				"consumer1": "topic1-0, topic1-2, topic2-0, topic2-2",
				"consumer5": "topic1-1, topic1-3, topic2-1, topic2-3",
				"consumer4": "topic1-4, topic2-4",
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := buildRequest(topics, tc.members, pl)
			for _, opt := range []options{{preferRackAware: true}, {}} {
				resp, err := assign(req, opt)
				if err != nil {
					t.Fatal(err)
				}
				checkValid(t, req, resp)
				if got := render(t, req, resp); !maps.Equal(got, tc.want) {
					t.Errorf("preferRackAware=%v:\n got %q\nwant %q", opt.preferRackAware, got, tc.want)
				}
				if n := rackMismatches(req, resp); n != 0 {
					t.Errorf("%d partitions off their member's rack, want 0", n)
				}
			}
		})
	}
}

// rackCase is one call of Kafka's verifyRackAssignment: consumer i is
// "consumer<i>" on rack consumerRacks[i] ("" for none) subscribing to
// consumerTopics[i], and replicas follow placement{rf, brokerRacks}.
type rackCase struct {
	name           string
	topics         []topicSpec
	consumerTopics [][]string
	rf             int
	brokerRacks    []string
	consumerRacks  []string
	prefer         bool
	want           []string
	mismatches     int // -1: Kafka does not check
}

// nonRackAware is RangeAssignorTest.verifyNonRackAwareAssignment: the
// combinations in which rack awareness must not change the classic answer.
func nonRackAware(name string, topics []topicSpec, consumerTopics [][]string, want []string) []rackCase {
	c := func(suffix string, rf int, brokers, consumers []string, prefer bool, mismatches int) rackCase {
		return rackCase{name + "/nonRackAware/" + suffix, topics, consumerTopics, rf, brokers, consumers, prefer, want, mismatches}
	}
	return []rackCase{
		c("no broker racks", 3, nullRacks(3), racks(3), false, -1),
		c("no consumer racks", 3, racks(3), nullRacks(3), false, -1),
		c("every partition on every rack", 3, racks(3), racks(3), false, 0),
		c("every partition on every rack, one rack without consumers", 4, racks(4), racks(3), false, 0),
		c("consumer racks match no broker", 3, racks(3), []string{"d", "e", "f"}, false, -1),
		c("consumer racks partly missing and unmatched", 3, racks(3), []string{"", "e", "f"}, false, -1),
		c("every partition on every rack, preferRackAwareLogic", 3, racks(3), racks(3), true, 0),
	}
}

// TestRange_KafkaRackAwareCases runs the KIP-881 tests of RangeAssignorTest,
// checking both the exact assignment and Kafka's count of partitions that
// are not on their member's rack.
func TestRange_KafkaRackAwareCases(t *testing.T) {
	var cases []rackCase
	all3 := []string{"t1", "t2", "t3"}

	{
		name := "testRackAwareAssignmentWithUniformSubscription"
		topics := []topicSpec{{"t1", 6}, {"t2", 7}, {"t3", 2}}
		ct := [][]string{all3, all3, all3}
		plain := []string{"t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"}
		cases = append(cases, nonRackAware(name, topics, ct, plain)...)
		cases = append(cases,
			rackCase{name + "/rf1", topics, ct, 1, racks(3), racks(3), false,
				[]string{"t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"}, 0},
			rackCase{name + "/rf2", topics, ct, 2, racks(3), racks(3), false,
				[]string{"t1-0, t1-2, t2-0, t2-2, t2-3, t3-1", "t1-1, t1-3, t2-1, t2-4, t3-0", "t1-4, t1-5, t2-5, t2-6"}, 1},
			rackCase{name + "/consumer on a rack without partitions", topics, ct, 3, racks(2), racks(3), false, plain, 4},
		)
	}
	{
		name := "testRackAwareAssignmentWithNonEqualSubscription"
		topics := []topicSpec{{"t1", 6}, {"t2", 7}, {"t3", 2}}
		ct := [][]string{all3, all3, {"t1", "t3"}}
		cases = append(cases, nonRackAware(name, topics, ct,
			[]string{"t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"})...)
		cases = append(cases,
			rackCase{name + "/rf1", topics, ct, 1, racks(3), racks(3), false,
				[]string{"t1-0, t1-3, t2-0, t2-2, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t2-5, t3-0", "t1-2, t1-5, t3-1"}, 2},
			rackCase{name + "/rf2", topics, ct, 2, racks(3), racks(3), false,
				[]string{"t1-0, t1-2, t2-0, t2-2, t2-3, t2-5, t3-1", "t1-1, t1-3, t2-1, t2-4, t2-6, t3-0", "t1-4, t1-5"}, 0},
			rackCase{name + "/consumer on a rack without partitions", topics, ct, 3, racks(2), racks(3), false,
				[]string{"t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"}, 2},
		)
	}
	{
		// Co-partitioning wins over rack alignment.
		name := "testRackAwareAssignmentWithUniformPartitions"
		topics := []topicSpec{{"t1", 5}, {"t2", 5}, {"t3", 5}}
		ct := [][]string{all3, all3, all3}
		plain := []string{"t1-0, t1-1, t2-0, t2-1, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t2-4, t3-4"}
		cases = append(cases, nonRackAware(name, topics, ct, plain)...)
		cases = append(cases,
			rackCase{name + "/rf1", topics, ct, 1, racks(3), racks(3), false, plain, 10},
			rackCase{name + "/rf2", topics, ct, 2, racks(3), racks(3), false, plain, 5},
			rackCase{name + "/consumer on a rack without partitions", topics, ct, 3, racks(2), racks(3), false, plain, 3},
		)
	}
	{
		name := "testRackAwareAssignmentWithUniformPartitionsNonEqualSubscription"
		topics := []topicSpec{{"t1", 5}, {"t2", 5}, {"t3", 5}}
		ct := [][]string{all3, all3, {"t1", "t3"}}
		cases = append(cases, nonRackAware(name, topics, ct,
			[]string{"t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3", "t1-4, t3-4"})...)
		cases = append(cases,
			rackCase{name + "/rf1", topics, ct, 1, racks(3), racks(3), false,
				[]string{"t1-0, t1-1, t2-0, t2-1, t2-4, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t3-4"}, 9},
			rackCase{name + "/rf2", topics, ct, 2, racks(3), racks(3), false,
				[]string{"t1-2, t2-0, t2-1, t2-3, t3-2", "t1-0, t1-3, t2-2, t2-4, t3-0, t3-3", "t1-1, t1-4, t3-1, t3-4"}, 0},
			rackCase{name + "/consumer on a rack without partitions", topics, ct, 3, racks(2), racks(3), false,
				[]string{"t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3", "t1-4, t3-4"}, 2},
		)
	}
	{
		name := "testRackAwareAssignmentWithCoPartitioning"
		topics := []topicSpec{{"t1", 6}, {"t2", 6}, {"t3", 2}, {"t4", 2}}
		consumerRacks := []string{"a", "b", "b", "a"}
		ct := [][]string{{"t1", "t2"}, {"t1", "t2"}, {"t3", "t4"}, {"t3", "t4"}}
		plain := []string{"t1-0, t1-1, t1-2, t2-0, t2-1, t2-2", "t1-3, t1-4, t1-5, t2-3, t2-4, t2-5", "t3-0, t4-0", "t3-1, t4-1"}
		cases = append(cases,
			rackCase{name + "/pairs/rf3", topics, ct, 3, racks(2), consumerRacks, false, plain, -1},
			rackCase{name + "/pairs/rf2", topics, ct, 2, racks(2), consumerRacks, false, plain, 0},
			rackCase{name + "/pairs/rf1", topics, ct, 1, racks(2), consumerRacks, false,
				[]string{"t1-0, t1-2, t1-4, t2-0, t2-2, t2-4", "t1-1, t1-3, t1-5, t2-1, t2-3, t2-5", "t3-1, t4-1", "t3-0, t4-0"}, 0},
		)
		all4 := []string{"t1", "t2", "t3", "t4"}
		ct = [][]string{all4, all4, all4, all4}
		plain = []string{"t1-0, t1-1, t2-0, t2-1, t3-0, t4-0", "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1", "t1-4, t2-4", "t1-5, t2-5"}
		cases = append(cases,
			rackCase{name + "/all/rf3", topics, ct, 3, racks(2), consumerRacks, false, plain, -1},
			rackCase{name + "/all/rf2", topics, ct, 2, racks(2), consumerRacks, false, plain, 0},
			rackCase{name + "/all/rf1", topics, ct, 1, racks(2), consumerRacks, false,
				[]string{"t1-0, t1-2, t2-0, t2-2, t3-0, t4-0", "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1", "t1-5, t2-5", "t1-4, t2-4"}, 0},
			rackCase{name + "/all/rf1 three racks", topics, ct, 1, racks(3), consumerRacks, false,
				[]string{"t1-0, t1-3, t2-0, t2-3, t3-0, t4-0", "t1-1, t1-4, t2-1, t2-4, t3-1, t4-1", "t1-2, t2-2", "t1-5, t2-5"}, 6},
		)
	}
	{
		// t7, t8 and t9 do not exist.
		name := "testCoPartitionedAssignmentWithSameSubscription"
		topics := []topicSpec{{"t1", 6}, {"t2", 6}, {"t3", 2}, {"t4", 2}, {"t5", 4}, {"t6", 4}}
		list := []string{"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"}
		ct := [][]string{list, list, list}
		plain := []string{
			"t1-0, t1-1, t2-0, t2-1, t3-0, t4-0, t5-0, t5-1, t6-0, t6-1",
			"t1-2, t1-3, t2-2, t2-3, t3-1, t4-1, t5-2, t6-2",
			"t1-4, t1-5, t2-4, t2-5, t5-3, t6-3",
		}
		cases = append(cases,
			rackCase{name + "/no broker racks", topics, ct, 3, nullRacks(3), racks(3), false, plain, -1},
			rackCase{name + "/every partition on every rack, preferRackAwareLogic", topics, ct, 3, racks(3), racks(3), true, plain, 0},
			rackCase{name + "/rf2, preferRackAwareLogic", topics, ct, 2, racks(3), racks(3), true, []string{
				"t1-0, t1-2, t2-0, t2-2, t3-0, t4-0, t5-1, t6-1",
				"t1-1, t1-3, t2-1, t2-3, t3-1, t4-1, t5-2, t6-2",
				"t1-4, t1-5, t2-4, t2-5, t5-0, t5-3, t6-0, t6-3",
			}, 0},
		)
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			members := make([]memberSpec, len(tc.consumerTopics))
			want := map[string]string{}
			for i := range members {
				id := "consumer" + string(rune('0'+i))
				members[i] = memberSpec{id: id, rack: tc.consumerRacks[i], topics: tc.consumerTopics[i]}
				want[id] = tc.want[i]
			}
			req := buildRequest(tc.topics, members, &placement{rf: tc.rf, brokerRacks: tc.brokerRacks})
			resp, err := assign(req, options{preferRackAware: tc.prefer})
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, req, resp)
			checkTopicBalance(t, req, resp)
			if got := render(t, req, resp); !maps.Equal(got, want) {
				t.Errorf("\n got %q\nwant %q", got, want)
			}
			if tc.mismatches >= 0 {
				if n := rackMismatches(req, resp); n != tc.mismatches {
					t.Errorf("%d partitions off their member's rack, Kafka counts %d", n, tc.mismatches)
				}
			}
		})
	}
}

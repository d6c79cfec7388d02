package rangeassignor

import (
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

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
func paramRequest(cfg assignortest.RackConfig, maxConsumers int, topics []assignortest.TopicSpec, members []kafkaMember) *abi.Request {
	rf := maxConsumers
	// Consumers spread over the broker racks, or over all of ALL_RACKS when
	// brokers have none.
	numRacks := maxConsumers
	if cfg == assignortest.NoBrokerRack {
		numRacks = len(assignortest.AllRacks)
	}
	specs := make([]assignortest.MemberSpec, len(members))
	for i, m := range members {
		specs[i] = assignortest.MemberSpec{ID: m.id, Instance: m.instance, Topics: m.topics, Rack: cfg.ConsumerRack(m.index, numRacks)}
	}
	return assignortest.BuildRequest(topics, specs, &assignortest.Placement{RF: rf, BrokerRacks: cfg.BrokerRacks(rf, maxConsumers), SameStart: true})
}

// TestRange_KafkaParameterizedCases runs RangeAssignorTest's tests that are
// parameterized by RackConfig. Kafka runs them with preferRackAwareLogic on,
// and with every partition on every rack, so rack awareness must not change
// the classic answer.
func TestRange_KafkaParameterizedCases(t *testing.T) {
	both := []string{"topic1", "topic2"}
	topic1 := []string{"topic1"}
	two := func(p1, p2 int32) []assignortest.TopicSpec {
		return []assignortest.TopicSpec{{Name: "topic1", Partitions: p1}, {Name: "topic2", Partitions: p2}}
	}
	one := func(p int32) []assignortest.TopicSpec {
		return []assignortest.TopicSpec{{Name: "topic1", Partitions: p}}
	}
	type paramCase struct {
		name         string
		maxConsumers int // 3 when 0
		topics       []assignortest.TopicSpec
		members      []kafkaMember
		want         map[string]string
	}
	cases := []paramCase{
		{
			name:    "testOneConsumerNoTopic",
			members: []kafkaMember{{id: "consumer1"}},
			want:    map[string]string{"consumer1": ""},
		},
		{
			name:    "testOneConsumerNonexistentTopic",
			members: []kafkaMember{{id: "consumer1", topics: topic1}},
			want:    map[string]string{"consumer1": ""},
		},
		{
			name:    "testOneConsumerOneTopic",
			topics:  one(3),
			members: []kafkaMember{{id: "consumer1", topics: topic1}},
			want:    map[string]string{"consumer1": "topic1-0, topic1-1, topic1-2"},
		},
		{
			name:    "testOnlyAssignsPartitionsFromSubscribedTopics",
			topics:  []assignortest.TopicSpec{{Name: "topic1", Partitions: 3}, {Name: "other", Partitions: 3}},
			members: []kafkaMember{{id: "consumer1", topics: topic1}},
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
			topics:  one(1),
			members: []kafkaMember{{id: "consumer1", index: 0, topics: topic1}, {id: "consumer2", index: 1, topics: topic1}},
			want:    map[string]string{"consumer1": "topic1-0", "consumer2": ""},
		},
		{
			name:    "testTwoConsumersOneTopicTwoPartitions",
			topics:  one(2),
			members: []kafkaMember{{id: "consumer1", index: 0, topics: topic1}, {id: "consumer2", index: 1, topics: topic1}},
			want:    map[string]string{"consumer1": "topic1-0", "consumer2": "topic1-1"},
		},
		{
			name:   "testMultipleConsumersMixedTopics",
			topics: two(3, 2),
			members: []kafkaMember{
				{id: "consumer1", index: 0, topics: topic1},
				{id: "consumer2", index: 1, topics: both},
				{id: "consumer3", index: 2, topics: topic1},
			},
			want: map[string]string{"consumer1": "topic1-0", "consumer2": "topic1-1, topic2-0, topic2-1", "consumer3": "topic1-2"},
		},
		{
			name:    "testTwoConsumersTwoTopicsSixPartitions",
			topics:  two(3, 3),
			members: []kafkaMember{{id: "consumer1", index: 0, topics: both}, {id: "consumer2", index: 1, topics: both}},
			want:    map[string]string{"consumer1": "topic1-0, topic1-1, topic2-0, topic2-1", "consumer2": "topic1-2, topic2-2"},
		},
	}
	// The member ids sort the other way: with two static members instance
	// ids decide, and a static member comes before a dynamic one whatever
	// the ids.
	for _, tc := range []struct{ name, secondInstance string }{
		{"testTwoStaticConsumersTwoTopicsSixPartitions", "instance2"},
		{"testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions", ""},
	} {
		cases = append(cases, paramCase{
			name:   tc.name,
			topics: two(3, 3),
			members: []kafkaMember{
				{id: "consumer-b", instance: "instance1", index: 0, topics: both},
				{id: "consumer-a", instance: tc.secondInstance, index: 1, topics: both},
			},
			want: map[string]string{"consumer-b": "topic1-0, topic1-1, topic2-0, topic2-1", "consumer-a": "topic1-2, topic2-2"},
		})
	}
	// testStaticMemberRangeAssignmentPersistent: the dynamic consumer4 is
	// replaced by consumer5, which takes over its partitions while the
	// static members keep theirs.
	for _, dynamic := range []kafkaMember{{id: "consumer4", index: 3, topics: both}, {id: "consumer5", index: 4, topics: both}} {
		cases = append(cases, paramCase{
			name:         "testStaticMemberRangeAssignmentPersistent/" + dynamic.id,
			maxConsumers: 5,
			topics:       two(5, 4),
			members: []kafkaMember{
				{id: "consumer1", instance: "instance1", index: 0, topics: both},
				{id: "consumer2", instance: "instance2", index: 1, topics: both},
				{id: "consumer3", instance: "instance3", index: 2, topics: both},
				dynamic,
			},
			want: map[string]string{
				"consumer1": "topic1-0, topic1-1, topic2-0",
				"consumer2": "topic1-2, topic2-1",
				"consumer3": "topic1-3, topic2-2",
				dynamic.id:  "topic1-4, topic2-3",
			},
		})
	}
	// testStaticMemberRangeAssignmentPersistentAfterMemberIdChanges:
	// consumer5 takes over instance2 and consumer4 instance3, and each
	// instance keeps its partitions.
	for _, phase := range []struct {
		name string
		ids  [3]string // of instance1, instance2, instance3
	}{
		{"before", [3]string{"consumer1", "consumer2", "consumer3"}},
		{"after", [3]string{"consumer1", "consumer5", "consumer4"}},
	} {
		cases = append(cases, paramCase{
			name:   "testStaticMemberRangeAssignmentPersistentAfterMemberIdChanges/" + phase.name,
			topics: two(5, 5),
			members: []kafkaMember{
				{id: phase.ids[0], instance: "instance1", index: 0, topics: both},
				{id: phase.ids[1], instance: "instance2", index: 1, topics: both},
				{id: phase.ids[2], instance: "instance3", index: 2, topics: both},
			},
			want: map[string]string{
				phase.ids[0]: "topic1-0, topic1-1, topic2-0, topic2-1",
				phase.ids[1]: "topic1-2, topic1-3, topic2-2, topic2-3",
				phase.ids[2]: "topic1-4, topic2-4",
			},
		})
	}

	for _, tc := range cases {
		for _, cfg := range assignortest.AllRackConfigs() {
			t.Run(tc.name+"/"+cfg.String(), func(t *testing.T) {
				maxConsumers := tc.maxConsumers
				if maxConsumers == 0 {
					maxConsumers = 3
				}
				req := paramRequest(cfg, maxConsumers, tc.topics, tc.members)
				for _, opt := range bothPreferences() {
					t.Run(opt.String(), func(t *testing.T) {
						assignortest.Expect(t, withOptions(opt), req, tc.want)
					})
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
	topics := []assignortest.TopicSpec{{Name: "topic1", Partitions: 5}, {Name: "topic2", Partitions: 5}}
	pl := &assignortest.Placement{RF: 2, BrokerRacks: []string{"a", "b", "c", "a", "b", "c"}, SameStart: true}
	for _, phase := range []struct {
		name string
		ids  [3]string // of instance1, instance2, instance3
	}{
		{"before", [3]string{"consumer1", "consumer2", "consumer3"}},
		{"after", [3]string{"consumer1", "consumer5", "consumer4"}},
	} {
		members := []assignortest.MemberSpec{
			{ID: phase.ids[0], Instance: "instance1", Rack: "a", Topics: both},
			{ID: phase.ids[1], Instance: "instance2", Rack: "b", Topics: both},
			{ID: phase.ids[2], Instance: "instance3", Rack: "c", Topics: both},
		}
		want := map[string]string{
			phase.ids[0]: "topic1-0, topic1-2, topic2-0, topic2-2",
			phase.ids[1]: "topic1-1, topic1-3, topic2-1, topic2-3",
			phase.ids[2]: "topic1-4, topic2-4",
		}
		req := assignortest.BuildRequest(topics, members, pl)
		for _, opt := range bothPreferences() {
			t.Run(phase.name+"/"+opt.String(), func(t *testing.T) {
				resp := assignortest.Expect(t, withOptions(opt), req, want)
				if n := assignortest.RackMismatches(req, resp); n != 0 {
					t.Errorf("%d partitions off their member's rack, want 0", n)
				}
			})
		}
	}
}

// rackCase is one call of Kafka's verifyRackAssignment: consumer i is
// "consumer<i>" on rack consumerRacks[i] ("" for none) subscribing to
// consumerTopics[i], and replicas follow Placement{rf, brokerRacks}.
type rackCase struct {
	name           string
	topics         []assignortest.TopicSpec
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
func nonRackAware(name string, topics []assignortest.TopicSpec, consumerTopics [][]string, want []string) []rackCase {
	c := func(suffix string, rf int, brokers, consumers []string, prefer bool, mismatches int) rackCase {
		return rackCase{name + "/nonRackAware/" + suffix, topics, consumerTopics, rf, brokers, consumers, prefer, want, mismatches}
	}
	return []rackCase{
		c("no broker racks", 3, assignortest.NullRacks(3), assignortest.Racks(3), false, -1),
		c("no consumer racks", 3, assignortest.Racks(3), assignortest.NullRacks(3), false, -1),
		c("every partition on every rack", 3, assignortest.Racks(3), assignortest.Racks(3), false, 0),
		c("every partition on every rack, one rack without consumers", 4, assignortest.Racks(4), assignortest.Racks(3), false, 0),
		c("consumer racks match no broker", 3, assignortest.Racks(3), []string{"d", "e", "f"}, false, -1),
		c("consumer racks partly missing and unmatched", 3, assignortest.Racks(3), []string{"", "e", "f"}, false, -1),
		c("every partition on every rack, preferRackAwareLogic", 3, assignortest.Racks(3), assignortest.Racks(3), true, 0),
	}
}

// TestRange_KafkaRackAwareCases runs the KIP-881 tests of RangeAssignorTest,
// checking both the exact assignment and Kafka's count of partitions that
// are not on their member's rack.
func TestRange_KafkaRackAwareCases(t *testing.T) {
	all3 := []string{"t1", "t2", "t3"}
	t672 := []assignortest.TopicSpec{{Name: "t1", Partitions: 6}, {Name: "t2", Partitions: 7}, {Name: "t3", Partitions: 2}}
	t555 := []assignortest.TopicSpec{{Name: "t1", Partitions: 5}, {Name: "t2", Partitions: 5}, {Name: "t3", Partitions: 5}}

	// Four of Kafka's tests have one shape: three consumers on racks a, b
	// and c go through verifyNonRackAwareAssignment, then through replication
	// factors 1 and 2 over those racks, and last with three replicas over
	// racks a and b only, so that consumer c's rack has no partitions.
	type outcome struct {
		want       []string // nil: the classic answer
		mismatches int
	}
	var cases []rackCase
	for _, k := range []struct {
		name        string
		topics      []assignortest.TopicSpec
		ct          [][]string
		plain       []string // the classic answer
		rf1, rf2    outcome
		rackWithout outcome
	}{
		{
			name:        "testRackAwareAssignmentWithUniformSubscription",
			topics:      t672,
			ct:          [][]string{all3, all3, all3},
			plain:       []string{"t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"},
			rf1:         outcome{[]string{"t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"}, 0},
			rf2:         outcome{[]string{"t1-0, t1-2, t2-0, t2-2, t2-3, t3-1", "t1-1, t1-3, t2-1, t2-4, t3-0", "t1-4, t1-5, t2-5, t2-6"}, 1},
			rackWithout: outcome{nil, 4},
		},
		{
			name:        "testRackAwareAssignmentWithNonEqualSubscription",
			topics:      t672,
			ct:          [][]string{all3, all3, {"t1", "t3"}},
			plain:       []string{"t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"},
			rf1:         outcome{[]string{"t1-0, t1-3, t2-0, t2-2, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t2-5, t3-0", "t1-2, t1-5, t3-1"}, 2},
			rf2:         outcome{[]string{"t1-0, t1-2, t2-0, t2-2, t2-3, t2-5, t3-1", "t1-1, t1-3, t2-1, t2-4, t2-6, t3-0", "t1-4, t1-5"}, 0},
			rackWithout: outcome{nil, 2},
		},
		{
			// Co-partitioning wins over rack alignment.
			name:        "testRackAwareAssignmentWithUniformPartitions",
			topics:      t555,
			ct:          [][]string{all3, all3, all3},
			plain:       []string{"t1-0, t1-1, t2-0, t2-1, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t2-4, t3-4"},
			rf1:         outcome{nil, 10},
			rf2:         outcome{nil, 5},
			rackWithout: outcome{nil, 3},
		},
		{
			name:        "testRackAwareAssignmentWithUniformPartitionsNonEqualSubscription",
			topics:      t555,
			ct:          [][]string{all3, all3, {"t1", "t3"}},
			plain:       []string{"t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3", "t1-4, t3-4"},
			rf1:         outcome{[]string{"t1-0, t1-1, t2-0, t2-1, t2-4, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t3-4"}, 9},
			rf2:         outcome{[]string{"t1-2, t2-0, t2-1, t2-3, t3-2", "t1-0, t1-3, t2-2, t2-4, t3-0, t3-3", "t1-1, t1-4, t3-1, t3-4"}, 0},
			rackWithout: outcome{nil, 2},
		},
	} {
		cases = append(cases, nonRackAware(k.name, k.topics, k.ct, k.plain)...)
		for _, v := range []struct {
			suffix string
			rf     int
			racks  int
			o      outcome
		}{
			{"rf1", 1, 3, k.rf1},
			{"rf2", 2, 3, k.rf2},
			{"consumer on a rack without partitions", 3, 2, k.rackWithout},
		} {
			want := v.o.want
			if want == nil {
				want = k.plain
			}
			cases = append(cases, rackCase{k.name + "/" + v.suffix, k.topics, k.ct, v.rf, assignortest.Racks(v.racks), assignortest.Racks(3), false, want, v.o.mismatches})
		}
	}

	{
		name := "testRackAwareAssignmentWithCoPartitioning"
		topics := []assignortest.TopicSpec{{Name: "t1", Partitions: 6}, {Name: "t2", Partitions: 6}, {Name: "t3", Partitions: 2}, {Name: "t4", Partitions: 2}}
		consumerRacks := []string{"a", "b", "b", "a"}
		ct := [][]string{{"t1", "t2"}, {"t1", "t2"}, {"t3", "t4"}, {"t3", "t4"}}
		plain := []string{"t1-0, t1-1, t1-2, t2-0, t2-1, t2-2", "t1-3, t1-4, t1-5, t2-3, t2-4, t2-5", "t3-0, t4-0", "t3-1, t4-1"}
		cases = append(cases,
			rackCase{name + "/pairs/rf3", topics, ct, 3, assignortest.Racks(2), consumerRacks, false, plain, -1},
			rackCase{name + "/pairs/rf2", topics, ct, 2, assignortest.Racks(2), consumerRacks, false, plain, 0},
			rackCase{name + "/pairs/rf1", topics, ct, 1, assignortest.Racks(2), consumerRacks, false,
				[]string{"t1-0, t1-2, t1-4, t2-0, t2-2, t2-4", "t1-1, t1-3, t1-5, t2-1, t2-3, t2-5", "t3-1, t4-1", "t3-0, t4-0"}, 0},
		)
		all4 := []string{"t1", "t2", "t3", "t4"}
		ct = [][]string{all4, all4, all4, all4}
		plain = []string{"t1-0, t1-1, t2-0, t2-1, t3-0, t4-0", "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1", "t1-4, t2-4", "t1-5, t2-5"}
		cases = append(cases,
			rackCase{name + "/all/rf3", topics, ct, 3, assignortest.Racks(2), consumerRacks, false, plain, -1},
			rackCase{name + "/all/rf2", topics, ct, 2, assignortest.Racks(2), consumerRacks, false, plain, 0},
			rackCase{name + "/all/rf1", topics, ct, 1, assignortest.Racks(2), consumerRacks, false,
				[]string{"t1-0, t1-2, t2-0, t2-2, t3-0, t4-0", "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1", "t1-5, t2-5", "t1-4, t2-4"}, 0},
			rackCase{name + "/all/rf1 three racks", topics, ct, 1, assignortest.Racks(3), consumerRacks, false,
				[]string{"t1-0, t1-3, t2-0, t2-3, t3-0, t4-0", "t1-1, t1-4, t2-1, t2-4, t3-1, t4-1", "t1-2, t2-2", "t1-5, t2-5"}, 6},
		)
	}
	{
		// t7, t8 and t9 do not exist.
		name := "testCoPartitionedAssignmentWithSameSubscription"
		topics := []assignortest.TopicSpec{
			{Name: "t1", Partitions: 6}, {Name: "t2", Partitions: 6}, {Name: "t3", Partitions: 2},
			{Name: "t4", Partitions: 2}, {Name: "t5", Partitions: 4}, {Name: "t6", Partitions: 4},
		}
		list := []string{"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"}
		ct := [][]string{list, list, list}
		plain := []string{
			"t1-0, t1-1, t2-0, t2-1, t3-0, t4-0, t5-0, t5-1, t6-0, t6-1",
			"t1-2, t1-3, t2-2, t2-3, t3-1, t4-1, t5-2, t6-2",
			"t1-4, t1-5, t2-4, t2-5, t5-3, t6-3",
		}
		cases = append(cases,
			rackCase{name + "/no broker racks", topics, ct, 3, assignortest.NullRacks(3), assignortest.Racks(3), false, plain, -1},
			rackCase{name + "/every partition on every rack, preferRackAwareLogic", topics, ct, 3, assignortest.Racks(3), assignortest.Racks(3), true, plain, 0},
			rackCase{name + "/rf2, preferRackAwareLogic", topics, ct, 2, assignortest.Racks(3), assignortest.Racks(3), true, []string{
				"t1-0, t1-2, t2-0, t2-2, t3-0, t4-0, t5-1, t6-1",
				"t1-1, t1-3, t2-1, t2-3, t3-1, t4-1, t5-2, t6-2",
				"t1-4, t1-5, t2-4, t2-5, t5-0, t5-3, t6-0, t6-3",
			}, 0},
		)
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			members := make([]assignortest.MemberSpec, len(tc.consumerTopics))
			want := map[string]string{}
			for i := range members {
				id := "consumer" + string(rune('0'+i))
				members[i] = assignortest.MemberSpec{ID: id, Rack: tc.consumerRacks[i], Topics: tc.consumerTopics[i]}
				want[id] = tc.want[i]
			}
			req := assignortest.BuildRequest(tc.topics, members, &assignortest.Placement{RF: tc.rf, BrokerRacks: tc.brokerRacks})
			resp := assignortest.Expect(t, withOptions(options{preferRackAware: tc.prefer}), req, want)
			assignortest.CheckTopicBalance(t, req, resp)
			if tc.mismatches >= 0 {
				if n := assignortest.RackMismatches(req, resp); n != tc.mismatches {
					t.Errorf("%d partitions off their member's rack, Kafka counts %d", n, tc.mismatches)
				}
			}
		})
	}
}

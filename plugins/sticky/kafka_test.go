package sticky

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
)

// kafkaHarness is AbstractStickyAssignorTest after initializeRacks(cfg):
// replication factor 3 over three broker racks (none with
// NO_BROKER_RACK), and consumer i on rack ALL_RACKS[i % 3] (none with
// NO_CONSUMER_RACK). Every partition then has a replica on every rack, so
// rack awareness must not change any answer. Kafka starts each topic one
// broker further than the last; with every partition on every rack that
// makes no difference, so every topic starts at the first broker here.
func kafkaHarness(t *testing.T, k kind, cfg assignortest.RackConfig) *harness {
	pl := &assignortest.Placement{RF: 3, BrokerRacks: cfg.BrokerRacks(3, 3), SameStart: true}
	h := &harness{t: t, kind: k, generation: 2, cluster: cluster{placement: pl}}
	if cfg != assignortest.NoConsumerRack {
		h.consumerRacks = 3
	}
	return h
}

// rack is consumerRackId(i).
func (h *harness) rack(i int) string {
	if h.consumerRacks == 0 {
		return ""
	}
	return assignortest.RackAt(i % h.consumerRacks)
}

// sub is subscription(topics, i).
func (h *harness) sub(id string, i int, topics ...string) memberSpec {
	m := sub(id, topics...)
	m.rack = h.rack(i)
	return m
}

// owns is buildSubscriptionV2Above(topics, owned, gen, i).
func (h *harness) owns(id string, i int, topics []string, gen int32, owned ...string) memberSpec {
	m := owns(id, topics, gen, owned...)
	m.rack = h.rack(i)
	return m
}

// onRacks returns ms with member i on consumerRackId(i), as Kafka's tests
// number the consumers they list.
func (h *harness) onRacks(ms []memberSpec) []memberSpec {
	out := slices.Clone(ms)
	for i := range out {
		out[i].rack = h.rack(i)
	}
	return out
}

// addTopics adds topics prefix+from to prefix+to, numbers zero-padded to
// the width of width as getCanonicalName does, topic i with partitions(i)
// partitions, and returns their names.
func (h *harness) addTopics(prefix string, from, to, width int, partitions func(i int) int32) []string {
	var names []string
	for i := from; i <= to; i++ {
		names = append(names, padded(prefix, i, width))
		h.cluster.topics = append(h.cluster.topics, topicSpec{names[len(names)-1], partitions(i)})
	}
	return names
}

// consumers returns consumers "c"+from to "c"+to, padded like addTopics,
// consumer i on consumerRackId(i) and subscribed to topics(i).
func (h *harness) consumers(from, to, width int, topics func(i int) []string) []memberSpec {
	var ms []memberSpec
	for i := from; i <= to; i++ {
		ms = append(ms, h.sub(padded("c", i, width), i, topics(i)...))
	}
	return ms
}

// twoRounds assigns ms, then has every member report what it got in
// generationID, lets change alter the group, and assigns again.
func (h *harness) twoRounds(ms []memberSpec, change func(ms []memberSpec) []memberSpec) {
	p := h.assign(ms)
	h.assign(change(feedBack(ms, p, generationID)))
}

// rejoinFirst is the change of Kafka's large tests: consumer 0 rejoins
// with no history, the others keep reporting what they own.
func (h *harness) rejoinFirst(ms []memberSpec) []memberSpec {
	ms[0] = h.sub(ms[0].id, 0, ms[0].topics...)
	return ms
}

// without returns ms without the member with the given id.
func without(ms []memberSpec, id string) []memberSpec {
	return slices.DeleteFunc(ms, func(m memberSpec) bool { return m.id == id })
}

// generationID is AbstractStickyAssignorTest.generationId.
const generationID = 1

func topics(names ...string) []string { return names }

func eq(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, sortTPs(slices.Clone(want))) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func containsAll(t *testing.T, what string, set, sub []string) {
	t.Helper()
	for _, s := range sub {
		if !slices.Contains(set, s) {
			t.Fatalf("%s: %v lacks %s of %v", what, set, s, sub)
		}
	}
}

// holdEach fails t unless every one of ids holds exactly n partitions.
func holdEach(t *testing.T, what string, p plan, n int, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if len(p[id]) != n {
			t.Fatalf("%s: %s holds %d partitions, want %d each of %v: %v", what, id, len(p[id]), n, ids, p)
		}
	}
}

// perTopic fails t unless every one of ids holds exactly n partitions of
// each of topics.
func perTopic(t *testing.T, what string, p plan, topics []string, n int, ids ...string) {
	t.Helper()
	for _, id := range ids {
		for _, topic := range topics {
			held := 0
			for _, s := range p[id] {
				if parseTP(s).topic == topic {
					held++
				}
			}
			if held != n {
				t.Fatalf("%s: %s holds %d partitions of %s, want %d: %v", what, id, held, topic, n, p)
			}
		}
	}
}

// padded is AbstractStickyAssignorTest.getCanonicalName.
func padded(prefix string, i, max int) string {
	return fmt.Sprintf("%s%0*d", prefix, len(fmt.Sprint(max)), i)
}

// kafkaCase is one @Test of AbstractStickyAssignorTest, StickyAssignorTest
// or CooperativeStickyAssignorTest. Where Kafka's expected assignment
// depends on HashMap order, the case asserts what Kafka's guarantees fix
// (counts, what stays, what moves) rather than the layout; the harness
// checks validity, balance, stickiness and two-cycles on every assignment.
type kafkaCase struct {
	name  string
	kinds []kind // both when nil
	run   func(h *harness)
}

// large reports whether a case is one of Kafka's large ones, which run with
// one rack configuration only: every partition is on every rack, so the
// configurations cannot differ, and the package tests must stay fast.
func (c kafkaCase) large() bool {
	return strings.HasPrefix(c.name, "testLarge") || strings.HasPrefix(c.name, "testAssignmentAndGroupWithNonEqual")
}

func TestSticky_KafkaCases(t *testing.T) {
	for _, c := range kafkaCases() {
		kinds := c.kinds
		if kinds == nil {
			kinds = bothKinds
		}
		for _, k := range kinds {
			for _, cfg := range assignortest.AllRackConfigs() {
				if c.large() && cfg != assignortest.BrokerAndConsumerRack {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/%s", c.name, k, cfg), func(t *testing.T) {
					c.run(kafkaHarness(t, k, cfg))
				})
			}
		}
	}
}

func kafkaCases() []kafkaCase {
	cases := oneAssignmentCases()
	cases = append(cases, largeCases()...)
	cases = append(cases, evolvingCases()...)
	for _, equal := range []bool{true, false} {
		suffix := " (all subscriptions equal)"
		if !equal {
			suffix = " (subscriptions differ)"
		}
		cases = append(cases,
			kafkaCase{"testAssignmentWithMultipleGenerations1" + suffix, nil, func(h *harness) { multipleGenerations1(h, equal) }},
			kafkaCase{"testAssignmentWithMultipleGenerations2" + suffix, nil, func(h *harness) { multipleGenerations2(h, equal) }},
			kafkaCase{"testAssignmentWithConflictingPreviousGenerations" + suffix, nil, func(h *harness) { conflictingPreviousGenerations(h, equal) }},
		)
	}
	return cases
}

// oneAssignmentCase is a Kafka test of a single assignment. Member i of
// members is Kafka's consumer i, on consumerRackId(i). want fixes the
// assignment of the members it lists, as "topic-0, topic-1"; the others are
// held to the harness's checks only.
type oneAssignmentCase struct {
	name    string
	topics  []topicSpec
	members []memberSpec
	want    map[string]string
}

func oneAssignmentCases() []kafkaCase {
	const (
		topic, topic1, topic2, topic3 = "topic", "topic1", "topic2", "topic3"
		c1, c2, c3, c4                = "consumer1", "consumer2", "consumer3", "consumer4"
	)
	var five, six []topicSpec
	for i := 1; i <= 6; i++ {
		if i <= 5 {
			five = append(five, topicSpec{fmt.Sprintf("topic%d", i), int32(i%2 + 1)})
		}
		six = append(six, topicSpec{fmt.Sprintf("topic%d", i), 1})
	}
	cases := []oneAssignmentCase{
		{"testOneConsumerNoTopic", nil, []memberSpec{sub("consumer")}, map[string]string{"consumer": ""}},
		{"testOneConsumerNonexistentTopic", []topicSpec{{topic, 0}}, []memberSpec{sub("consumer", topic)}, map[string]string{"consumer": ""}},
		{"testOneConsumerOneTopic", []topicSpec{{topic, 3}}, []memberSpec{sub("consumer", topic)}, map[string]string{"consumer": "topic-0, topic-1, topic-2"}},
		{
			"testOnlyAssignsPartitionsFromSubscribedTopics", []topicSpec{{topic, 2}},
			[]memberSpec{owns("consumer", topics(topic), generationID, "topic-0", "topic-1", "other-0", "other-1")},
			map[string]string{"consumer": "topic-0, topic-1"},
		},
		{
			"testOneConsumerMultipleTopics", []topicSpec{{topic1, 1}, {topic2, 2}},
			[]memberSpec{sub("consumer", topic1, topic2)},
			map[string]string{"consumer": "topic1-0, topic2-0, topic2-1"},
		},
		{"testTwoConsumersOneTopicOnePartition", []topicSpec{{topic, 1}}, []memberSpec{sub(c1, topic), sub(c2, topic)}, nil},
		{
			"testTwoConsumersOneTopicTwoPartitions", []topicSpec{{topic, 2}},
			[]memberSpec{sub(c1, topic), sub(c2, topic)},
			map[string]string{c1: "topic-0", c2: "topic-1"},
		},
		{
			"testTwoConsumersTwoTopicsSixPartitions", []topicSpec{{topic1, 3}, {topic2, 3}},
			[]memberSpec{sub(c1, topic1, topic2), sub(c2, topic1, topic2)},
			map[string]string{c1: "topic1-0, topic1-2, topic2-1", c2: "topic1-1, topic2-0, topic2-2"},
		},
		{
			"testMultipleConsumersMixedTopicSubscriptions", []topicSpec{{topic1, 3}, {topic2, 2}},
			[]memberSpec{sub(c1, topic1), sub(c2, topic1, topic2), sub(c3, topic1)},
			map[string]string{c1: "topic1-0, topic1-2", c2: "topic2-0, topic2-1", c3: "topic1-1"},
		},
		{
			"testAllConsumersAreUnderMinQuota", []topicSpec{{topic1, 2}, {topic2, 3}},
			[]memberSpec{
				owns(c1, topics(topic1, topic2), generationID, "topic1-0"),
				owns(c2, topics(topic1, topic2), generationID, "topic1-1"),
				owns(c3, topics(topic1, topic2), generationID),
			},
			map[string]string{c1: "topic1-0, topic2-1", c2: "topic1-1, topic2-2", c3: "topic2-0"},
		},
		{
			// Also StickyAssignorTest's. The cooperative target gives
			// consumer3 topic-0, which both others claimed; the host
			// withholds it until they have revoked it, which is what
			// CooperativeStickyAssignorTest's version asserts.
			"testAllConsumersHaveOwnedPartitionInvalidatedWhenClaimedByMultipleConsumersInSameGenerationWithUnequalPartitionsPerConsumer", []topicSpec{{topic, 4}},
			[]memberSpec{
				owns(c1, topics(topic), generationID, "topic-0", "topic-1"),
				owns(c2, topics(topic), generationID, "topic-0", "topic-2"),
				owns(c3, topics(topic), generationID),
			},
			map[string]string{c1: "topic-1, topic-3", c2: "topic-2", c3: "topic-0"},
		},
		{
			"testConsumerOwningMinQuotaExpectedMaxQuota", []topicSpec{{topic1, 2}, {topic2, 3}},
			[]memberSpec{
				owns(c1, topics(topic1, topic2), generationID, "topic1-0", "topic2-1"),
				owns(c2, topics(topic1, topic2), generationID, "topic1-1", "topic2-2"),
			},
			map[string]string{c1: "topic1-0, topic2-1, topic2-0", c2: "topic1-1, topic2-2"},
		},
		{
			// Which of consumer1 and consumer2 keeps two is HashMap order in
			// Kafka; here member order picks consumer1. Either way exactly
			// one partition moves, to consumer3.
			"testMaxQuotaConsumerMoreThanNumExpectedMaxCapacityMembers", []topicSpec{{topic1, 2}, {topic2, 2}},
			[]memberSpec{
				owns(c1, topics(topic1, topic2), generationID, "topic1-0", "topic2-0"),
				owns(c2, topics(topic1, topic2), generationID, "topic1-1", "topic2-1"),
				owns(c3, topics(topic1, topic2), generationID),
			},
			map[string]string{c1: "topic1-0, topic2-0", c2: "topic1-1", c3: "topic2-1"},
		},
		{
			"testPoorRoundRobinAssignmentScenario", five,
			[]memberSpec{
				sub(c1, "topic1", "topic2", "topic3", "topic4", "topic5"),
				sub(c2, "topic1", "topic3", "topic5"),
				sub(c3, "topic1", "topic3", "topic5"),
				sub(c4, "topic1", "topic2", "topic3", "topic4", "topic5"),
			},
			nil,
		},
		{
			"testMoveExistingAssignments", six,
			[]memberSpec{
				owns(c1, topics("topic1", "topic2"), generationID, "topic1-0"),
				owns(c2, topics("topic1", "topic2", "topic3", "topic4"), generationID, "topic2-0", "topic3-0"),
				owns(c3, topics("topic2", "topic3", "topic4", "topic5", "topic6"), generationID, "topic4-0", "topic5-0", "topic6-0"),
			},
			nil,
		},
		{
			"testAllConsumersReachExpectedQuotaAndAreConsideredFilled", []topicSpec{{topic, 4}},
			[]memberSpec{
				owns(c1, topics(topic), generationID, "topic-0", "topic-1"),
				owns(c2, topics(topic), generationID, "topic-2"),
				owns(c3, topics(topic), generationID),
			},
			map[string]string{c1: "topic-0, topic-1", c2: "topic-2", c3: "topic-3"},
		},
		{
			"testOwnedPartitionsAreInvalidatedForConsumerWithStaleGeneration", []topicSpec{{topic, 3}, {topic2, 3}},
			[]memberSpec{
				owns(c1, topics(topic, topic2), 10, "topic-0", "topic-2", "topic2-1"),
				owns(c2, topics(topic, topic2), 9, "topic-0", "topic-2", "topic2-1"),
			},
			map[string]string{c1: "topic-0, topic-2, topic2-1", c2: "topic-1, topic2-0, topic2-2"},
		},
		{
			"testOwnedPartitionsAreInvalidatedForConsumerWithNoGeneration", []topicSpec{{topic, 3}, {topic2, 3}},
			[]memberSpec{
				owns(c1, topics(topic, topic2), 10, "topic-0", "topic-2", "topic2-1"),
				owns(c2, topics(topic, topic2), -1, "topic-0", "topic-2", "topic2-1"),
			},
			map[string]string{c1: "topic-0, topic-2, topic2-1", c2: "topic-1, topic2-0, topic2-2"},
		},
		{
			// Also StickyAssignorTest's and CooperativeStickyAssignorTest's
			// ...InSameGenerationWithEqualPartitionsPerConsumer. The
			// cooperative target gives consumer3 topic-0; the host withholds
			// it until both claimants have revoked it.
			"testPartitionsTransferringOwnershipIncludeThePartitionClaimedByMultipleConsumersInSameGeneration", []topicSpec{{topic, 3}},
			[]memberSpec{
				owns(c1, topics(topic), generationID, "topic-0", "topic-1"),
				owns(c2, topics(topic), generationID, "topic-0", "topic-2"),
				owns(c3, topics(topic), generationID),
			},
			map[string]string{c1: "topic-1", c2: "topic-2", c3: "topic-0"},
		},
		{
			"testEnsurePartitionsAssignedToHighestGeneration", []topicSpec{{topic, 3}, {topic2, 3}, {topic3, 3}},
			[]memberSpec{
				owns(c1, topics(topic, topic2, topic3), 10, "topic-0", "topic2-0", "topic3-0"),
				owns(c2, topics(topic, topic2, topic3), 9, "topic-1", "topic2-1", "topic3-1"),
				owns(c3, topics(topic, topic2, topic3), 8, "topic2-1", "topic3-0", "topic3-2"),
			},
			map[string]string{c1: "topic-0, topic2-0, topic3-0", c2: "topic-1, topic2-1, topic3-1", c3: "topic-2, topic2-2, topic3-2"},
		},
		{
			"testNoReassignmentOnCurrentMembers", []topicSpec{{topic, 3}, {topic1, 3}, {topic2, 3}, {topic3, 3}},
			[]memberSpec{
				owns(c1, topics(topic, topic2, topic3, topic1), -1),
				owns(c2, topics(topic, topic2, topic3, topic1), 9, "topic-0", "topic2-0", "topic1-0"),
				owns(c3, topics(topic, topic2, topic3, topic1), 8, "topic3-2", "topic2-2", "topic1-1"),
				owns(c4, topics(topic, topic2, topic3, topic1), 7, "topic3-1", "topic-1", "topic-2"),
			},
			map[string]string{c1: "topic1-2, topic2-1, topic3-0"},
		},
		{
			"testOwnedPartitionsAreInvalidatedForConsumerWithMultipleGeneration", []topicSpec{{topic, 3}, {topic2, 3}},
			[]memberSpec{
				owns(c1, topics(topic, topic2), 10, "topic-0", "topic2-1", "topic-1"),
				owns(c2, topics(topic, topic2), 8, "topic-0", "topic2-1", "topic2-2"),
			},
			map[string]string{c1: "topic-0, topic2-1, topic-1", c2: "topic-2, topic2-2, topic2-0"},
		},
	}
	var out []kafkaCase
	for _, oc := range cases {
		out = append(out, kafkaCase{oc.name, nil, func(h *harness) {
			h.cluster.topics = oc.topics
			p := h.assign(h.onRacks(oc.members))
			for _, id := range slices.Sorted(maps.Keys(oc.want)) {
				eq(h.t, id, p[id], tps(oc.want[id]))
			}
		}})
	}
	return out
}

// largeCases are Kafka's large tests, scaled down where noted (full size in
// the benchmarks): topics t0.. of np partitions each, consumers c0..
// subscribing as subs says; after the first assignment every consumer
// reports what it owns, except consumer 0, which rejoins with no history.
func largeCases() []kafkaCase {
	type large struct {
		name       string
		nt, np, nc int
		subs       func(all []string, i, nc int) []string
	}
	cases := []large{
		{"testLargeAssignmentAndGroupWithUniformSubscription (scaled down; full size in benchmarks)", 50, 200, 200,
			func(all []string, _, _ int) []string { return all }},
		{"testLargeAssignmentAndGroupWithNonEqualSubscription (scaled down)", 50, 200, 200,
			func(all []string, i, nc int) []string {
				if i == nc-1 {
					return all[:1]
				}
				return all
			}},
		{"testAssignmentAndGroupWithNonEqualSubscriptionNotTimeout", 100, 200, 500,
			func(all []string, i, _ int) []string {
				if i%4 == 0 {
					return all[:len(all)/2]
				}
				return all[len(all)/2:]
			}},
	}
	var out []kafkaCase
	for _, lc := range cases {
		out = append(out, kafkaCase{lc.name, nil, func(h *harness) {
			all := h.addTopics("t", 0, lc.nt-1, lc.nt, func(int) int32 { return int32(lc.np) })
			ms := h.consumers(0, lc.nc-1, lc.nc, func(i int) []string { return lc.subs(all, i, lc.nc) })
			h.twoRounds(ms, h.rejoinFirst)
		}})
	}
	return out
}

// evolvingCases are Kafka's tests whose assignments depend on earlier ones
// or that check more than one member's exact assignment can say.
func evolvingCases() []kafkaCase {
	const (
		topic, topic1, topic2, topic3 = "topic", "topic1", "topic2", "topic3"
		c1, c2, c3, c4                = "consumer1", "consumer2", "consumer3", "consumer4"
	)
	t0 := func(p int) string { return fmt.Sprintf("topic-%d", p) }
	t1 := func(p int) string { return fmt.Sprintf("topic1-%d", p) }
	return []kafkaCase{
		{"testAddRemoveConsumerOneTopic", nil, func(h *harness) {
			h.cluster.topics = []topicSpec{{topic, 3}}
			p := h.assign([]memberSpec{h.sub(c1, 0, topic)})
			eq(h.t, c1, p[c1], tps("topic-0, topic-1, topic-2"))
			p = h.assign([]memberSpec{h.owns(c1, 0, topics(topic), generationID, p[c1]...), h.owns(c2, 1, topics(topic), generationID)})
			eq(h.t, c1, p[c1], tps("topic-0, topic-1"))
			eq(h.t, c2, p[c2], tps("topic-2"))
			p = h.assign([]memberSpec{h.owns(c2, 1, topics(topic), generationID, p[c2]...)})
			eq(h.t, c2, p[c2], tps("topic-0, topic-1, topic-2"))
		}},
		{"testTopicBalanceAfterReassignment", nil, func(h *harness) {
			// Every member holds an equal share of each topic at every step.
			h.cluster.topics = []topicSpec{{topic1, 12}, {topic2, 12}}
			all := topics(topic1, topic2)
			p := h.assign([]memberSpec{h.sub(c1, 0, all...)})
			perTopic(h.t, "one consumer", p, all, 12, c1)
			p = h.assign([]memberSpec{h.owns(c1, 0, all, generationID, p[c1]...), h.owns(c2, 1, all, generationID)})
			perTopic(h.t, "two consumers", p, all, 6, c1, c2)
			p = h.assign([]memberSpec{
				h.owns(c1, 0, all, generationID, p[c1]...), h.owns(c2, 1, all, generationID, p[c2]...),
				h.owns(c3, 2, all, generationID), h.owns(c4, 3, all, generationID),
			})
			perTopic(h.t, "four consumers", p, all, 3, c1, c2, c3, c4)
			p = h.assign([]memberSpec{h.owns(c3, 2, all, generationID, p[c3]...), h.owns(c4, 3, all, generationID, p[c4]...)})
			perTopic(h.t, "two left", p, all, 6, c3, c4)
		}},
		{"testAddRemoveTwoConsumersTwoTopics", nil, func(h *harness) {
			h.cluster.topics = []topicSpec{{topic1, 3}, {topic2, 4}}
			all := topics(topic1, topic2)
			p := h.assign([]memberSpec{h.sub(c1, 0, all...), h.sub(c2, 1, all...)})
			eq(h.t, "first "+c1, p[c1], tps("topic1-0, topic1-2, topic2-1, topic2-3"))
			eq(h.t, "first "+c2, p[c2], tps("topic1-1, topic2-0, topic2-2"))
			// consumer1 keeps its first two owned partitions by partition
			// id, then topic: topic1-0 and topic2-1, not topic1-2.
			p = h.assign([]memberSpec{
				h.owns(c1, 0, all, generationID, p[c1]...), h.owns(c2, 1, all, generationID, p[c2]...),
				h.owns(c3, 2, all, generationID), h.owns(c4, 3, all, generationID),
			})
			eq(h.t, "added "+c1, p[c1], tps("topic1-0, topic2-1"))
			eq(h.t, "added "+c2, p[c2], tps("topic2-0, topic1-1"))
			eq(h.t, "added "+c3, p[c3], tps("topic1-2, topic2-3"))
			eq(h.t, "added "+c4, p[c4], tps("topic2-2"))
			p = h.assign([]memberSpec{h.owns(c3, 2, all, generationID, p[c3]...), h.owns(c4, 3, all, generationID, p[c4]...)})
			eq(h.t, "removed "+c3, p[c3], tps("topic1-2, topic2-3, topic1-0, topic2-1"))
			eq(h.t, "removed "+c4, p[c4], tps("topic2-2, topic1-1, topic2-0"))
		}},
		{"testAddRemoveTopicTwoConsumers", nil, func(h *harness) {
			h.cluster.topics = []topicSpec{{topic, 3}}
			p1 := h.assign([]memberSpec{h.sub(c1, 0, topic), h.sub(c2, 1, topic)})
			h.cluster.topics = append(h.cluster.topics, topicSpec{topic2, 3})
			both := topics(topic, topic2)
			p2 := h.assign([]memberSpec{h.owns(c1, 0, both, generationID, p1[c1]...), h.owns(c2, 1, both, generationID, p1[c2]...)})
			holdEach(h.t, "topic added", p2, 3, c1, c2)
			containsAll(h.t, c1, p2[c1], p1[c1])
			containsAll(h.t, c2, p2[c2], p1[c2])
			h.cluster.topics = h.cluster.topics[1:]
			p3 := h.assign([]memberSpec{h.owns(c1, 0, topics(topic2), generationID, p2[c1]...), h.owns(c2, 1, topics(topic2), generationID, p2[c2]...)})
			containsAll(h.t, c1, p2[c1], p3[c1])
			containsAll(h.t, c2, p2[c2], p3[c2])
		}},
		{"testReassignmentAfterOneConsumerLeaves", nil, func(h *harness) {
			names := h.addTopics("t", 1, 19, 20, func(i int) int32 { return int32(i) })
			ms := h.consumers(1, 19, 20, func(i int) []string { return names[:i] })
			h.twoRounds(ms, func(ms []memberSpec) []memberSpec { return without(ms, "c10") })
		}},
		{"testReassignmentAfterOneConsumerAdded", nil, func(h *harness) {
			h.cluster.topics = []topicSpec{{"topic", 20}}
			ms := h.consumers(1, 9, 10, func(int) []string { return topics("topic") })
			h.assign(ms)
			ms = append(ms, h.sub(padded("c", 10, 10), 10, "topic"))
			h.assign(ms)
		}},
		{"testSameSubscriptions", nil, func(h *harness) {
			all := h.addTopics("t", 1, 14, 15, func(i int) int32 { return int32(i) })
			ms := h.consumers(1, 8, 9, func(int) []string { return all })
			h.twoRounds(ms, func(ms []memberSpec) []memberSpec { return without(ms, padded("c", 5, 9)) })
		}},
		{"testSubscriptionNotEqualAndAssignSamePartitionWith3Generation", nil, func(h *harness) {
			h.cluster.topics = []topicSpec{{topic, 6}, {topic1, 1}}
			for _, gens := range [][3]int32{{1, 2, 3}, {1, 3, 2}, {2, 1, 3}, {2, 3, 1}, {3, 1, 2}, {3, 2, 1}} {
				p := h.assign([]memberSpec{
					h.owns(c1, 0, topics(topic), gens[0], t0(0), t0(2)),
					h.owns(c2, 1, topics(topic), gens[1], t0(1), t0(2), t0(3)),
					h.owns(c3, 2, topics(topic), gens[2], t0(2), t0(4), t0(5)),
					h.owns(c4, 3, topics(topic1), 2, t1(0)),
				})
				for id, list := range p {
					if len(list) < 1 || len(list) > 2 {
						h.t.Fatalf("gens %v: %s has %d partitions: %v", gens, id, len(list), p)
					}
				}
			}
		}},
		{"testLargeAssignmentWithMultipleConsumersLeavingAndRandomSubscription", nil, func(h *harness) {
			rnd := rand.New(rand.NewPCG(1, 2))
			nt, nc := 40, 200
			h.addTopics("t", 0, nt-1, nt, func(int) int32 { return int32(rnd.IntN(10) + 1) })
			ms := h.consumers(0, nc-1, nc, func(int) []string {
				var ts []string
				for range rnd.IntN(20) {
					ts = append(ts, padded("t", rnd.IntN(nt), nt))
				}
				return ts
			})
			h.twoRounds(ms, func(ms []memberSpec) []memberSpec {
				ms = h.rejoinFirst(ms)
				for range 50 {
					ms = without(ms, padded("c", rnd.IntN(nc), nc))
				}
				return ms
			})
		}},
		{"testNewSubscription", nil, func(h *harness) {
			h.addTopics("t", 1, 4, 5, func(int) int32 { return 1 })
			ms := h.consumers(0, 2, 3, func(i int) []string {
				var ts []string
				for j := i; j <= 3*i-2; j++ {
					ts = append(ts, padded("t", j, 5))
				}
				return ts
			})
			h.assign(ms)
			ms[0].topics = append(ms[0].topics, padded("t", 1, 5))
			h.assign(ms)
		}},
		{"testStickiness", nil, func(h *harness) {
			h.cluster.topics = []topicSpec{{topic1, 3}}
			p := h.assign([]memberSpec{h.sub(c1, 0, topic1), h.sub(c2, 1, topic1), h.sub(c3, 2, topic1), h.sub(c4, 3, topic1)})
			before := map[string]string{}
			for id, list := range p {
				if len(list) > 1 {
					h.t.Fatalf("%s has more than one: %v", id, p)
				}
				if len(list) == 1 {
					before[id] = list[0]
				}
			}
			q := h.assign([]memberSpec{
				h.owns(c2, 1, topics(topic1), generationID, p[c2]...),
				h.owns(c3, 2, topics(topic1), generationID, p[c3]...),
				h.owns(c4, 3, topics(topic1), generationID, p[c4]...),
			})
			holdEach(h.t, "after consumer1 left", q, 1, c2, c3, c4)
			for id, list := range q {
				if had, ok := before[id]; ok && list[0] != had {
					h.t.Fatalf("stickiness not honored for %s: had %s, got %s", id, had, list[0])
				}
			}
		}},
		{"testAssignmentUpdatedForDeletedTopic", nil, func(h *harness) {
			h.cluster.topics = []topicSpec{{topic1, 1}, {topic3, 100}}
			p := h.assign([]memberSpec{h.sub("consumer", 0, topic1, topic2, topic3)})
			holdEach(h.t, "topic2 deleted", p, 101, "consumer")
		}},
		{"testNoExceptionThrownWhenOnlySubscribedTopicDeleted", nil, func(h *harness) {
			h.cluster.topics = []topicSpec{{topic, 3}}
			p := h.assign([]memberSpec{h.sub("consumer", 0, topic)})
			h.cluster.topics = nil
			p = h.assign([]memberSpec{h.owns("consumer", 0, topics(topic), generationID, p["consumer"]...)})
			eq(h.t, "consumer", p["consumer"], nil)
		}},
		{"testSchemaBackwardCompatibility", []kind{eager}, func(h *harness) {
			h.cluster.topics = []topicSpec{{topic, 3}}
			p := h.assign([]memberSpec{
				h.owns(c1, 0, topics(topic), 1, t0(0), t0(2)),
				{id: c2, topics: topics(topic), rack: h.rack(1), userData: stickyUserData([]string{t0(1)}, 0, false), owned: []string{t0(1)}, gen: -1},
				h.sub(c3, 2, topic),
			})
			holdEach(h.t, "three consumers", p, 1, c1, c2, c3)
			containsAll(h.t, c1, []string{t0(0), t0(2)}, p[c1])
			eq(h.t, c2, p[c2], []string{t0(1)})
		}},
		{"testAssignorWithOldVersionSubscriptions", nil, func(h *harness) {
			// V0 and V1 subscriptions: generation only in user data.
			h.cluster.topics = []topicSpec{{topic1, 3}}
			old := func(id string, i int, owned ...string) memberSpec {
				m := h.owns(id, i, topics(topic1), -1, owned...)
				if h.kind == coop {
					m.userData = be32(generationID)
				} else {
					m.userData = stickyUserData(owned, generationID, true)
				}
				return m
			}
			p := h.assign([]memberSpec{old(c1, 0, t1(0)), old(c2, 1, t1(1)), h.owns(c3, 2, topics(topic1), generationID)})
			eq(h.t, c1, p[c1], []string{t1(0)})
			eq(h.t, c2, p[c2], []string{t1(1)})
			eq(h.t, c3, p[c3], []string{t1(2)})
		}},
		{"testUniformSubscriptionTransferOwnershipListIsRight", []kind{coop}, func(h *harness) {
			// Replication factor 1 over racks a and b: topic1-0 and -2 on a,
			// -1 and -3 on b. Each consumer owns one partition off its rack,
			// so exactly those two change owner.
			h.cluster = cluster{topics: []topicSpec{{topic1, 4}}, placement: &assignortest.Placement{RF: 1, BrokerRacks: []string{"a", "b"}, SameStart: true}}
			h.rackMode = true
			p := h.assign([]memberSpec{
				{id: "c0", rack: "a", topics: topics(topic1), owned: []string{t1(0), t1(1)}, gen: generationID},
				{id: "c1", rack: "b", topics: topics(topic1), owned: []string{t1(2), t1(3)}, gen: generationID},
			})
			eq(h.t, "c0", p["c0"], []string{t1(0), t1(2)})
			eq(h.t, "c1", p["c1"], []string{t1(1), t1(3)})
		}},
	}
}

// be32 is one big-endian int32, CooperativeStickyAssignor's user data.
func be32(v int32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

// multipleGenerations1 is StickyAssignorTest.testAssignmentWithMultipleGenerations1.
func multipleGenerations1(h *harness, equal bool) {
	const c1, c2, c3 = "consumer1", "consumer2", "consumer3"
	h.cluster.topics = []topicSpec{{"topic", 6}, {"topic2", 6}}
	all := topics("topic", "topic2")
	c2topics := all
	if !equal {
		c2topics = topics("topic")
	}
	r1 := h.assign([]memberSpec{h.sub(c1, 0, all...), h.sub(c2, 1, c2topics...), h.sub(c3, 2, all...)})
	holdEach(h.t, "round 1", r1, 4, c1, c2, c3)
	r2 := h.assign([]memberSpec{h.owns(c1, 0, all, generationID, r1[c1]...), h.owns(c2, 1, c2topics, generationID, r1[c2]...)})
	holdEach(h.t, "round 2", r2, 6, c1, c2)
	if equal {
		containsAll(h.t, "round 2 "+c1, r2[c1], r1[c1])
	}
	containsAll(h.t, "round 2 "+c2, r2[c2], r1[c2])
	overlap := false
	for _, s := range r2[c2] {
		overlap = overlap || slices.Contains(r1[c3], s)
	}
	if !overlap {
		h.t.Fatalf("round 2: consumer2 should have taken some of consumer3's: %v %v", r2, r1)
	}
	r3 := h.assign([]memberSpec{h.owns(c2, 1, c2topics, 2, r2[c2]...), h.owns(c3, 2, all, 1, r1[c3]...)})
	holdEach(h.t, "round 3", r3, 6, c2, c3)
}

// multipleGenerations2 is StickyAssignorTest.testAssignmentWithMultipleGenerations2.
func multipleGenerations2(h *harness, equal bool) {
	const c1, c2, c3 = "consumer1", "consumer2", "consumer3"
	h.cluster.topics = []topicSpec{{"topic", 4}, {"topic2", 4}, {"topic3", 4}}
	all := topics("topic", "topic2", "topic3")
	c1topics, c3topics := all, all
	if !equal {
		c1topics, c3topics = topics("topic"), topics("topic", "topic2")
	}
	r1 := h.assign([]memberSpec{h.sub(c1, 0, c1topics...), h.sub(c2, 1, all...), h.sub(c3, 2, c3topics...)})
	holdEach(h.t, "round 1", r1, 4, c1, c2, c3)
	r2 := h.assign([]memberSpec{h.owns(c2, 1, all, 1, r1[c2]...)})
	holdEach(h.t, "round 2", r2, 12, c2)
	containsAll(h.t, "round 2", r2[c2], r1[c2])
	r3 := h.assign([]memberSpec{
		h.owns(c1, 0, c1topics, 1, r1[c1]...),
		h.owns(c2, 1, all, 2, r2[c2]...),
		h.owns(c3, 2, c3topics, 1, r1[c3]...),
	})
	holdEach(h.t, "round 3", r3, 4, c1, c2, c3)
}

// conflictingPreviousGenerations is
// StickyAssignorTest.testAssignmentWithConflictingPreviousGenerations.
func conflictingPreviousGenerations(h *harness, equal bool) {
	const c1, c2, c3 = "consumer1", "consumer2", "consumer3"
	h.cluster.topics = []topicSpec{{"topic", 4}, {"topic2", 4}, {"topic3", 4}}
	all := topics("topic", "topic2", "topic3")
	c1topics, c2topics := all, all
	c1owned := tps("topic-0, topic-1, topic-2, topic2-2, topic2-3, topic3-0")
	if !equal {
		c1topics, c2topics = topics("topic"), topics("topic", "topic2")
		c1owned = tps("topic-0, topic-1, topic-2, topic-3")
	}
	c2owned := tps("topic-0, topic-1, topic2-0, topic2-1, topic2-2, topic2-3")
	c3owned := tps("topic-2, topic-3, topic3-0, topic3-1, topic3-2, topic3-3")
	p := h.assign([]memberSpec{
		h.owns(c1, 0, c1topics, 1, c1owned...),
		h.owns(c2, 1, c2topics, 2, c2owned...),
		h.owns(c3, 2, all, 2, c3owned...),
	})
	holdEach(h.t, "conflicting generations", p, 4, c1, c2, c3)
	containsAll(h.t, c2, c2owned, p[c2])
	containsAll(h.t, c3, c3owned, p[c3])
}

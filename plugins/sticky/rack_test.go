package sticky

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// rackCase is one verifyRackAssignment call of Kafka's
// testRackAwareAssignmentWith{Uniform,NonEqual}Subscription: topics t1 (6),
// t2 (7) and t3 (2) placed by AbstractPartitionAssignorTest's
// partitionsPerTopic, three consumers with the given racks. maxMismatch is
// Kafka's expected number of partitions off their member's rack, -1 when it
// does not check; rack alignment is best effort, so this package must do at
// least as well.
type rackCase struct {
	rf                       int
	brokerRacks, memberRacks []string
	owned                    []string // per consumer, "t1-0, t1-3"; nil for none
	maxMismatch              int
	wantOwnedKept            bool // owned is rack-aligned and balanced: nothing may move
}

func TestSticky_KafkaRackAwareAssignment(t *testing.T) {
	uniform := [][]string{{"t1", "t2", "t3"}, {"t1", "t2", "t3"}, {"t1", "t2", "t3"}}
	nonEqual := [][]string{{"t1", "t2", "t3"}, {"t1", "t2", "t3"}, {"t1", "t3"}}
	misaligned := []string{"t1-0, t1-1, t1-2, t1-3, t1-4", "t1-5, t2-0, t2-1, t2-2, t2-3", "t2-4, t2-5, t2-6, t3-0, t3-1"}
	aligned := []string{"t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"}
	common := []rackCase{
		{rf: 3, brokerRacks: assignortest.NullRacks(3), memberRacks: assignortest.Racks(3), maxMismatch: -1},
		{rf: 3, brokerRacks: assignortest.Racks(3), memberRacks: assignortest.NullRacks(3), maxMismatch: -1},
		{rf: 3, brokerRacks: assignortest.Racks(3), memberRacks: assignortest.Racks(3), maxMismatch: 0},
		{rf: 4, brokerRacks: assignortest.Racks(4), memberRacks: assignortest.Racks(3), maxMismatch: 0},
		{rf: 3, brokerRacks: assignortest.Racks(3), memberRacks: []string{"d", "e", "f"}, maxMismatch: -1},
		{rf: 3, brokerRacks: assignortest.Racks(3), memberRacks: []string{"", "e", "f"}, maxMismatch: -1},
	}
	cases := map[string]struct {
		topics [][]string
		cases  []rackCase
	}{
		"testRackAwareAssignmentWithUniformSubscription": {uniform, append(slices.Clone(common),
			rackCase{rf: 1, brokerRacks: assignortest.Racks(3), memberRacks: assignortest.Racks(3), maxMismatch: 0},
			rackCase{rf: 2, brokerRacks: assignortest.Racks(3), memberRacks: assignortest.Racks(3), maxMismatch: 0},
			// One consumer on a rack with no partitions takes its share off
			// its rack, to keep the balance.
			rackCase{rf: 3, brokerRacks: assignortest.Racks(2), memberRacks: assignortest.Racks(3), maxMismatch: 5},
			// Owned partitions off their rack are realigned.
			rackCase{rf: 1, brokerRacks: assignortest.Racks(3), memberRacks: assignortest.Racks(3), owned: misaligned, maxMismatch: 0},
			// An aligned, balanced assignment stays as it is.
			rackCase{rf: 1, brokerRacks: assignortest.Racks(3), memberRacks: assignortest.Racks(3), owned: aligned, maxMismatch: 0, wantOwnedKept: true},
		)},
		"testRackAwareAssignmentWithNonEqualSubscription": {nonEqual, append(slices.Clone(common),
			rackCase{rf: 1, brokerRacks: assignortest.Racks(3), memberRacks: assignortest.Racks(3), maxMismatch: 4},
			rackCase{rf: 2, brokerRacks: assignortest.Racks(3), memberRacks: assignortest.Racks(3), maxMismatch: 0},
			rackCase{rf: 3, brokerRacks: assignortest.Racks(2), memberRacks: assignortest.Racks(3), maxMismatch: 5},
			rackCase{rf: 1, brokerRacks: assignortest.Racks(3), memberRacks: assignortest.Racks(3), owned: misaligned, maxMismatch: 4},
		)},
	}
	for name, tc := range cases {
		for i, rc := range tc.cases {
			for _, k := range bothKinds {
				t.Run(fmt.Sprintf("%s/%d/%s", name, i, k), func(t *testing.T) {
					c := cluster{
						topics:    []topicSpec{{"t1", 6}, {"t2", 7}, {"t3", 2}},
						placement: &assignortest.Placement{RF: rc.rf, BrokerRacks: rc.brokerRacks},
					}
					var ms []memberSpec
					for j := range 3 {
						m := sub(fmt.Sprintf("consumer%d", j), tc.topics[j]...)
						m.rack = rc.memberRacks[j]
						if rc.owned != nil {
							m.owned, m.gen = tps(rc.owned[j]), generationID
						}
						ms = append(ms, m)
					}
					req := c.request(k, 2, ms)
					resp, p := k.run(t, req)
					checkAll(t, c, ms, p, true)
					got := assignortest.RackMismatches(req, resp)
					if rc.maxMismatch >= 0 && got > rc.maxMismatch {
						t.Fatalf("%d partitions off their member's rack, Kafka manages %d: %v", got, rc.maxMismatch, p)
					}
					if rc.wantOwnedKept {
						for _, m := range ms {
							eq(t, m.id, p[m.id], m.owned)
						}
					}
					// Fed back, the answer must stand: nothing is left to
					// realign or balance.
					again := feedBack(ms, p, generationID)
					if _, q := k.run(t, c.request(k, 3, again)); fmt.Sprint(q) != fmt.Sprint(p) {
						t.Fatalf("fed back, the assignment changed:\n%v\n%v", p, q)
					}
				})
			}
		}
	}
}

// TestSticky_RandomRackGroups runs random groups with random racks and
// replica placement through a few generations, feeding each answer back,
// with members leaving and joining: validity and balance must hold in rack
// mode, on both paths.
func TestSticky_RandomRackGroups(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	racks := []string{"a", "b", "c", ""}
	for _, k := range bothKinds {
		for round := range 300 {
			h := &harness{t: t, kind: k, rackMode: true}
			var names []string
			for i := range 2 + rnd.IntN(4) {
				names = append(names, fmt.Sprintf("t%d", i))
				h.cluster.topics = append(h.cluster.topics, topicSpec{names[i], int32(rnd.IntN(9))})
			}
			brokers := make([]string, 2+rnd.IntN(4))
			for i := range brokers {
				brokers[i] = racks[rnd.IntN(len(racks))]
			}
			h.cluster.placement = &assignortest.Placement{RF: 1 + rnd.IntN(2), BrokerRacks: brokers, SameStart: true}
			var ms []memberSpec
			for i := range 1 + rnd.IntN(6) {
				m := sub(fmt.Sprintf("c%d", i), names...)
				if round%2 == 1 {
					m.topics = randomSublist(rnd, names)
				}
				m.rack = racks[rnd.IntN(len(racks))]
				ms = append(ms, m)
			}
			for gen := int32(1); gen <= 4; gen++ {
				h.generation = gen
				p := h.assign(ms)
				ms = feedBack(ms, p, gen)
				if rnd.IntN(2) == 0 && len(ms) > 1 {
					ms = ms[1:]
				}
				if rnd.IntN(2) == 0 {
					// A newcomer shrinks the quota: members give up what
					// comes last by partition id.
					m := sub(fmt.Sprintf("n%d", gen), ms[0].topics...)
					m.rack = racks[rnd.IntN(len(racks))]
					ms = append(ms, m)
				}
			}
		}
	}
}

// TestSticky_RackModeDecision checks Kafka's rule for when rack awareness
// applies: off unless some member's rack holds a replica and the partitions
// do not all sit on the same racks.
func TestSticky_RackModeDecision(t *testing.T) {
	cases := []struct {
		name        string
		rf          int
		brokerRacks []string
		memberRacks []string
		want        bool
	}{
		{"no member racks", 1, []string{"a", "b"}, []string{"", ""}, false},
		{"no broker racks", 1, []string{"", ""}, []string{"a", "b"}, false},
		{"member racks hold no replica", 1, []string{"a", "b"}, []string{"x", "y"}, false},
		{"every partition on every rack", 2, []string{"a", "b"}, []string{"a", "b"}, false},
		{"partitions on different racks", 1, []string{"a", "b"}, []string{"a", ""}, true},
		{"one member rack matches", 1, []string{"a", "b"}, []string{"x", "b"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cluster{topics: []topicSpec{{"t", 4}}, placement: &assignortest.Placement{RF: tc.rf, BrokerRacks: tc.brokerRacks, SameStart: true}}
			var ms []memberSpec
			for i, r := range tc.memberRacks {
				m := sub(fmt.Sprintf("m%d", i), "t")
				m.rack = r
				ms = append(ms, m)
			}
			g, err := newGroup(c.request(coop, 1, ms))
			if err != nil {
				t.Fatal(err)
			}
			if got := newRacks(g) != nil; got != tc.want {
				t.Fatalf("rack mode %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSticky_RackModeTrimsIntoProgressions is a regression case from the
// wasm parity test: in rack mode a member trimmed to its quota keeps
// partitions 1 and 3 (one strided run), so what is free (0, 4, 6 and 7)
// includes a strided run too, and must be handed out partition by
// partition, not as the interval it spans (which held 5, kept by another
// member). planOf checks that no partition goes to two members.
func TestSticky_RackModeTrimsIntoProgressions(t *testing.T) {
	req := &abi.Request{GroupID: "g", Generation: 7,
		Brokers:     []abi.Broker{{ID: 0, Rack: "c"}, {ID: 1, Rack: "b"}},
		ReplicaSets: [][]int32{{0}, {1}, {0, 1}, {1, 0}},
		Topics: []abi.Topic{
			{Name: "t0", Exists: true, PartitionCount: 8, Partitions: []abi.Partition{
				{Replicas: 0}, {Replicas: 1}, {Replicas: 3}, {Replicas: 3}, {Replicas: 2}, {Replicas: 3}, {Replicas: 3}, {Replicas: 2},
			}},
			{Name: "t1", Exists: true},
		},
		Members: []abi.Member{
			{MemberID: "m-10", Topics: []int32{0, 1}, OwnedGeneration: -1},
			{MemberID: "m-241", Rack: "a", Topics: []int32{0, 1}, OwnedGeneration: -1},
			{MemberID: "m-472", Topics: []int32{0, 1}, OwnedGeneration: -1},
			{MemberID: "m-83", Rack: "b", Topics: []int32{0, 1}, OwnedGeneration: 4, Owned: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{0, 2, 5}}}},
			{MemberID: "m-174", Topics: []int32{0, 1}, OwnedGeneration: 0, Owned: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{0, 1, 3, 4, 7}}}},
			{MemberID: "m-555", Rack: "a", Topics: []int32{0, 1}, OwnedGeneration: 1},
		},
	}
	// Every member sends the same subscription (t1 has no partitions), so
	// this is Kafka's constrained path, where the trimming happens.
	_, p := coop.run(t, req)
	// m-83 keeps 2 and 5 (0 is off its rack); m-174 keeps the first two of
	// 1, 3, 4, 7 by partition id.
	eq(t, "m-83", p["m-83"], tps("t0-2, t0-5"))
	eq(t, "m-174", p["m-174"], tps("t0-1, t0-3"))
	for _, id := range []string{"m-10", "m-241", "m-472", "m-555"} {
		if len(p[id]) != 1 {
			t.Fatalf("%s should get one partition: %v", id, p)
		}
	}
}

package scenario

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestRand_IsSplitMix64 pins the stream to SplitMix64's published first
// outputs for seed 0, so that the generator never silently changes what a
// seed describes.
func TestRand_IsSplitMix64(t *testing.T) {
	r := NewRand(0)
	want := []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}
	for i, w := range want {
		if got := r.Uint64(); got != w {
			t.Fatalf("draw %d = %#x, want %#x", i, got, w)
		}
	}
}

const generated = `{
	"protocol": "cooperative-sticky",
	"generation": 5,
	"generate": {
		"seed": 11,
		"topics": [{"count": 12, "partitions": 1, "partitions_max": 9}, {"prefix": "big", "count": 2, "partitions": 100}],
		"members": [{"count": 8, "subscribe": "random", "racks": ["a", "b", "c"]}, {"prefix": "x", "count": 2, "topics": ["t00", "nope"]}],
		"rounds": {"count": 30, "leave": 2, "join": 2, "resubscribe": 3, "forget": ["c00"]}
	}
}`

// feedBack plays the assignor in a sequence: it gives every partition of
// each subscribed topic to the first subscriber, which is enough to see
// what Next feeds back.
func feedBack(s *Scenario) *Output {
	out := &Output{Assignment: map[string]map[string][]int32{}}
	taken := map[string]bool{}
	for _, m := range s.Members {
		out.Assignment[m.ID] = map[string][]int32{}
		for _, name := range m.Topics {
			for _, t := range s.Topics {
				if t.Name == name && !taken[name] {
					taken[name] = true
					for p := range *t.PartitionCount {
						out.Assignment[m.ID][name] = append(out.Assignment[m.ID][name], p)
					}
				}
			}
		}
	}
	return out
}

func runSequence(t *testing.T, s *Scenario) []*Scenario {
	t.Helper()
	q, err := s.Sequence()
	if err != nil {
		t.Fatal(err)
	}
	var rounds []*Scenario
	for {
		rounds = append(rounds, q.Scenario())
		if _, _, err := q.Scenario().Request(); err != nil {
			t.Fatalf("round %d does not build: %v", q.Round(), err)
		}
		more, err := q.Next(feedBack(q.Scenario()))
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			return rounds
		}
	}
}

func TestSequence_GeneratedRoundsAreDeterministicAndFedBack(t *testing.T) {
	a := runSequence(t, parse(t, generated))
	b := runSequence(t, parse(t, generated))
	if len(a) != 30 {
		t.Fatalf("%d rounds, want 30", len(a))
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same file gave two different sequences")
	}
	first := a[0]
	if first.Generate != nil || first.Generation != 5 || len(first.Topics) != 14 || len(first.Members) != 10 {
		t.Fatalf("first round: generate %v, generation %d, %d topics, %d members; want plain, 5, 14, 10",
			first.Generate, first.Generation, len(first.Topics), len(first.Members))
	}
	if first.Topics[0].Name != "t00" || first.Topics[12].Name != "big0" || first.Members[0].ID != "c00" || first.Members[9].ID != "x09" {
		t.Errorf("names %s %s %s %s, want Kafka's padded t00, big0, c00, x09", first.Topics[0].Name, first.Topics[12].Name, first.Members[0].ID, first.Members[9].ID)
	}
	if first.Members[4].Rack != "b" || !slices.Equal(first.Members[9].Topics, []string{"t00", "nope"}) {
		t.Errorf("member 4 rack %q, member 9 topics %v; want b and the explicit list", first.Members[4].Rack, first.Members[9].Topics)
	}
	changed := false
	for r := 1; r < len(a); r++ {
		prev, cur := a[r-1], a[r]
		if cur.Generation != prev.Generation+1 {
			t.Fatalf("round %d generation %d after %d", r+1, cur.Generation, prev.Generation)
		}
		fed := feedBack(prev)
		ids := map[string]bool{}
		for _, m := range prev.Members {
			ids[m.ID] = true
		}
		for _, m := range cur.Members {
			switch {
			case !ids[m.ID] || m.ID == "c00":
				if m.Owned != nil || m.Previous != nil || m.Generation != -1 {
					t.Errorf("round %d: %s (new or forgotten) claims %v gen %d", r+1, m.ID, m.Owned, m.Generation)
				}
			default:
				want := fed.Assignment[m.ID]
				if countAll(want) == 0 {
					want = nil
				}
				if !reflect.DeepEqual(m.Owned, want) || m.Generation != prev.Generation {
					t.Errorf("round %d: %s owns %v gen %d, want what it received %v gen %d", r+1, m.ID, m.Owned, m.Generation, want, prev.Generation)
				}
			}
		}
		changed = changed || len(cur.Members) != len(prev.Members)
	}
	if !changed {
		t.Error("30 rounds with joins and leaves never changed the group size")
	}
}

func countAll(tps map[string][]int32) int {
	n := 0
	for _, ps := range tps {
		n += len(ps)
	}
	return n
}

func TestSequence_EagerMembersReportOnlyPreviousAndEchoUserData(t *testing.T) {
	s := parse(t, `{"protocol": "sticky", "generate": {"seed": 1,
		"topics": [{"count": 2, "partitions": 3}], "members": [{"count": 2, "subscribe": "all"}],
		"rounds": {"count": 2, "echo_user_data": true}}}`)
	q, err := s.Sequence()
	if err != nil {
		t.Fatal(err)
	}
	out := feedBack(q.Scenario())
	out.UserData = map[string]string{"c0": "AAE="}
	if more, err := q.Next(out); !more || err != nil {
		t.Fatalf("Next = %v, %v", more, err)
	}
	c0 := q.Scenario().Members[0]
	if c0.Owned != nil || c0.Generation != -1 || countAll(c0.Previous) != 6 || c0.UserData != "AAE=" {
		t.Errorf("eager c0: owned %v gen %d previous %v user data %q; want no claim, previous of 6, echoed user data", c0.Owned, c0.Generation, c0.Previous, c0.UserData)
	}
	if more, _ := q.Next(out); more {
		t.Error("Next went past the last round")
	}
}

func TestSequence_PlainScenarioIsOneRound(t *testing.T) {
	s := parse(t, `{"topics": [{"name": "t", "partition_count": 1}], "members": [{"id": "m", "topics": ["t"]}]}`)
	q, err := s.Sequence()
	if err != nil || q.Rounds() != 1 || q.Scenario() != s {
		t.Fatalf("Sequence = %v rounds, same scenario %v, err %v", q.Rounds(), q.Scenario() == s, err)
	}
	if more, err := q.Next(&Output{}); more || err != nil {
		t.Errorf("Next = %v, %v; want done", more, err)
	}
}

func TestRequest_GeneratedLargeGroupBuildsTheFirstRound(t *testing.T) {
	s := parse(t, `{"protocol": "range", "generate": {"seed": 1,
		"topics": [{"count": 500, "partitions": 2000}],
		"members": [{"count": 1999, "subscribe": "all"}, {"count": 1, "topics": ["t000"]}]}}`)
	req, _, err := s.Request()
	if err != nil {
		t.Fatal(err)
	}
	total := int32(0)
	for _, tp := range req.Topics {
		total += tp.PartitionCount
	}
	if len(req.Members) != 2000 || total != 1_000_000 || len(req.Members[1999].Topics) != 1 || req.Members[1999].MemberID != "c1999" {
		t.Errorf("%d members, %d partitions, last member %s with %d topics; want 2000, 1M, c1999 with 1",
			len(req.Members), total, req.Members[1999].MemberID, len(req.Members[1999].Topics))
	}
}

func TestParse_GeneratedScenarioRoundTripsThroughJSON(t *testing.T) {
	s := parse(t, generated)
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(data)
	if err != nil {
		t.Fatalf("the written scenario does not parse: %v\n%s", err, data)
	}
	if !reflect.DeepEqual(s, again) {
		t.Errorf("round trip changed the scenario:\n%s", data)
	}
}

func TestParse_InvalidGenerateNamesTheField(t *testing.T) {
	wrap := func(gen string) string { return `{"generate": ` + gen + `}` }
	ok := `"topics": [{"count": 2, "partitions": 1}], "members": [{"count": 2, "subscribe": "all"}]`
	tests := []struct{ name, json, want string }{
		{"TopicsToo", `{"topics": [], "generate": {` + ok + `}}`, "topics: not allowed with generate"},
		{"MembersToo", `{"members": [], "generate": {` + ok + `}}`, "members: not allowed with generate"},
		{"NoTopicSpecs", wrap(`{"members": [{"count": 1, "subscribe": "all"}]}`), "generate.topics: required"},
		{"NoMemberSpecs", wrap(`{"topics": [{"count": 1, "partitions": 1}]}`), "generate.members: required"},
		{"ZeroTopics", wrap(`{"topics": [{"count": 0, "partitions": 1}], "members": [{"count": 1, "subscribe": "all"}]}`), "generate.topics[0].count: must be >= 1, got 0"},
		{"NegativePartitions", wrap(`{"topics": [{"count": 1, "partitions": -1}], "members": [{"count": 1, "subscribe": "all"}]}`), "generate.topics[0].partitions: must be >= 0, got -1"},
		{"MaxBelowMin", wrap(`{"topics": [{"count": 1, "partitions": 5, "partitions_max": 4}], "members": [{"count": 1, "subscribe": "all"}]}`), "generate.topics[0].partitions_max: must be >= partitions (5), got 4"},
		{"ZeroReplication", wrap(`{"topics": [{"count": 1, "partitions": 1, "replication_factor": 0}], "members": [{"count": 1, "subscribe": "all"}]}`), "generate.topics[0].replication_factor: must be >= 1, got 0"},
		{"TooManyPartitions", wrap(`{"topics": [{"count": 65536, "partitions": 1025}], "members": [{"count": 1, "subscribe": "all"}]}`), "generate.topics[0]: the scenario would have more than 67108864 partitions"},
		{"DuplicateTopic", wrap(`{"topics": [{"count": 2, "partitions": 1}, {"count": 3, "partitions": 1}], "members": [{"count": 1, "subscribe": "all"}]}`), `generate.topics[1]: generates topic "t0", as generate.topics[0] does`},
		{"ZeroMembers", wrap(`{"topics": [{"count": 1, "partitions": 1}], "members": [{"count": 0, "subscribe": "all"}]}`), "generate.members[0].count: must be >= 1, got 0"},
		{"TooManyMembers", wrap(`{"topics": [{"count": 1, "partitions": 1}], "members": [{"count": 2000000, "subscribe": "all"}]}`), "generate.members[0].count: the scenario would have more than 1048576 members"},
		{"BothSubscriptions", wrap(`{"topics": [{"count": 1, "partitions": 1}], "members": [{"count": 1, "subscribe": "all", "topics": ["t0"]}]}`), "generate.members[0]: has both subscribe and topics"},
		{"NoSubscription", wrap(`{"topics": [{"count": 1, "partitions": 1}], "members": [{"count": 1}]}`), "generate.members[0]: needs subscribe"},
		{"BadSubscribe", wrap(`{"topics": [{"count": 1, "partitions": 1}], "members": [{"count": 1, "subscribe": "some"}]}`), `generate.members[0].subscribe: must be "all" or "random", got "some"`},
		{"EmptyTopicName", wrap(`{"topics": [{"count": 1, "partitions": 1}], "members": [{"count": 1, "topics": [""]}]}`), "generate.members[0].topics[0]: empty topic name"},
		{"ZeroRounds", wrap(`{` + ok + `, "rounds": {"count": 0}}`), "generate.rounds.count: must be >= 1, got 0"},
		{"NegativeLeave", wrap(`{` + ok + `, "rounds": {"count": 2, "leave": -1}}`), "generate.rounds.leave: must be >= 0, got -1"},
		{"NegativeJoin", wrap(`{` + ok + `, "rounds": {"count": 2, "join": -1}}`), "generate.rounds.join: must be >= 0, got -1"},
		{"NegativeResubscribe", wrap(`{` + ok + `, "rounds": {"count": 2, "resubscribe": -1}}`), "generate.rounds.resubscribe: must be >= 0, got -1"},
		{"JoinAsWithCount", wrap(`{` + ok + `, "rounds": {"count": 2, "join_as": {"count": 1, "subscribe": "all"}}}`), "generate.rounds.join_as: count and prefix are not allowed"},
		{"JoinAsWithoutSubscription", wrap(`{` + ok + `, "rounds": {"count": 2, "join_as": {}}}`), "generate.rounds.join_as: needs subscribe"},
		{"ForgetUnknown", wrap(`{` + ok + `, "rounds": {"count": 2, "forget": ["c0", "c7"]}}`), `generate.rounds.forget[1]: "c7" is not a generated member`},
		{"UnknownKey", wrap(`{` + ok + `, "sead": 1}`), `generate: unknown field "sead"`},
		{"WrongType", wrap(`{"seed": "x", ` + ok + `}`), "generate.seed: expected an integer, got string"},
		{"BrokersStillChecked", `{"brokers": [{"id": 1}, {"id": 1}], "generate": {` + ok + `}}`, "brokers[1].id: duplicate broker id 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Parse error = %v, want one line containing %q", err, tt.want)
			}
		})
	}
}

// FuzzParse feeds Parse arbitrary bytes: it must never panic, and whatever
// it accepts must survive being written back and parsed again. Generated
// scenarios small enough to expand quickly must also build every round.
func FuzzParse(f *testing.F) {
	f.Add([]byte(generated))
	f.Add([]byte(`{"topics": [{"name": "t", "partition_count": 3}], "members": [{"id": "m", "topics": ["t"], "owned": {"t": [1]}, "generation": 2}]}`))
	f.Add([]byte(`{"protocol": "sticky", "generate": {"seed": -3, "topics": [{"count": 2, "partitions": 0, "partitions_max": 3}], "members": [{"count": 3, "topics": ["t0", "zz"]}], "rounds": {"count": 3, "leave": 5, "join_as": {"subscribe": "random"}, "join": 1}}}`))
	f.Add([]byte(`{"generate": {"topics": [{"count": 1, "partitions": 1}], "members": [{"count": 1, "topics": []}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		again, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("an accepted scenario does not marshal: %v", err)
		}
		if _, err := Parse(again); err != nil {
			t.Fatalf("an accepted scenario, written back, fails: %v\n%s", err, again)
		}
		if g := s.Generate; g != nil && small(g) {
			runSequence(t, s)
		}
	})
}

// small reports whether a generated scenario expands to a size a fuzz
// iteration can afford.
func small(g *Generate) bool {
	topics, members := int64(0), int64(0)
	for _, t := range g.Topics {
		most := int64(t.Partitions)
		if t.PartitionsMax != nil {
			most = int64(*t.PartitionsMax)
		}
		topics += int64(t.Count) * (1 + most)
	}
	for _, m := range g.Members {
		members += int64(m.Count)
	}
	rounds := int64(1)
	if g.Rounds != nil {
		rounds = int64(g.Rounds.Count)
		members += int64(g.Rounds.Join) * rounds
	}
	return topics <= 1000 && members <= 100 && rounds <= 20
}

package scenario

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

const testdata = "../../testdata/scenarios"

func load(t *testing.T, name string) *Scenario {
	t.Helper()
	s, err := Load(filepath.Join(testdata, name))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func request(t *testing.T, s *Scenario) (*abi.Request, []string) {
	t.Helper()
	req, warnings, err := s.Request()
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	return req, warnings
}

func parse(t *testing.T, data string) *Scenario {
	t.Helper()
	s, err := Parse([]byte(data))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

// TestRequest_ValidScenariosAreWellFormedABIRequests runs every valid
// scenario through the ABI codec, whose decoder checks every reference, and
// checks the ordering rules the ABI promises guests.
func TestRequest_ValidScenariosAreWellFormedABIRequests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testdata, "*.json"))
	if err != nil || len(files) < 3 {
		t.Fatalf("want at least 3 valid scenarios, found %d (%v)", len(files), err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			s := load(t, filepath.Base(file))
			req, _ := request(t, s)
			enc := abi.AppendRequest(nil, req)
			dec, err := abi.DecodeRequest(enc)
			if err != nil {
				t.Fatalf("the request does not decode: %v", err)
			}
			if !bytes.Equal(abi.AppendRequest(nil, dec), enc) {
				t.Fatal("the request does not survive an encode/decode round trip")
			}
			checkRequestShape(t, s, req)
		})
	}
}

// checkRequestShape checks what every built request must satisfy.
func checkRequestShape(t *testing.T, s *Scenario, req *abi.Request) {
	t.Helper()
	if len(req.Topics) < len(s.Topics) {
		t.Fatalf("%d topics in the table, want at least the scenario's %d", len(req.Topics), len(s.Topics))
	}
	for i, st := range s.Topics {
		rt := req.Topics[i]
		if rt.Name != st.Name || !rt.Exists || rt.PartitionCount != st.count() {
			t.Errorf("topic %d = %q exists=%v count=%d, want %q exists with %d", i, rt.Name, rt.Exists, rt.PartitionCount, st.Name, st.count())
		}
		if (rt.Partitions != nil) != (len(s.Brokers) > 0) {
			t.Errorf("topic %q has placement %v, want placement exactly when there are brokers", rt.Name, rt.Partitions != nil)
		}
	}
	for _, rt := range req.Topics[len(s.Topics):] {
		if rt.Exists || rt.PartitionCount != 0 || rt.Partitions != nil {
			t.Errorf("mentioned-only topic %q = %+v, want a non-existent entry", rt.Name, rt)
		}
	}
	for i := 1; i < len(req.ReplicaSets); i++ {
		for j := 0; j < i; j++ {
			if slices.Equal(req.ReplicaSets[i], req.ReplicaSets[j]) {
				t.Errorf("replica sets %d and %d are both %v", j, i, req.ReplicaSets[i])
			}
		}
	}
	if len(req.Members) != len(s.Members) {
		t.Fatalf("%d members, want %d", len(req.Members), len(s.Members))
	}
	for i := 1; i < len(req.Members); i++ {
		a, b := req.Members[i-1], req.Members[i]
		if !kafkaLess(&Member{ID: a.MemberID, InstanceID: a.InstanceID}, &Member{ID: b.MemberID, InstanceID: b.InstanceID}) {
			t.Errorf("members %q and %q are out of Kafka order", a.MemberID, b.MemberID)
		}
	}
	for _, m := range req.Members {
		if !isStrictlyAscending(m.Topics) {
			t.Errorf("member %q topics %v are not strictly ascending", m.MemberID, m.Topics)
		}
		for _, tps := range [][]abi.TopicPartitions{m.Owned, m.Previous} {
			for k, tp := range tps {
				if k > 0 && tps[k-1].Topic >= tp.Topic {
					t.Errorf("member %q topic partitions are not ordered by topic: %v", m.MemberID, tps)
				}
				if !isStrictlyAscending(tp.Partitions) || len(tp.Partitions) == 0 {
					t.Errorf("member %q partitions %v are empty or not strictly ascending", m.MemberID, tp.Partitions)
				}
			}
		}
	}
}

func isStrictlyAscending(s []int32) bool {
	for i := 1; i < len(s); i++ {
		if s[i] <= s[i-1] {
			return false
		}
	}
	return true
}

func TestRequest_RangeBasicHasNoPlacementAndSortedMembers(t *testing.T) {
	req, warnings := request(t, load(t, "range-basic.json"))
	if len(warnings) != 0 {
		t.Errorf("warnings = %q, want none", warnings)
	}
	if req.GroupID != "orders" || req.Generation != 3 || req.Protocol != "range" || req.Assignor != "" || req.RebalanceProtocol != abi.Eager {
		t.Errorf("header = %q gen %d protocol %q assignor %q %v", req.GroupID, req.Generation, req.Protocol, req.Assignor, req.RebalanceProtocol)
	}
	if req.Brokers != nil || req.ReplicaSets != nil {
		t.Errorf("brokers %v, replica sets %v, want none", req.Brokers, req.ReplicaSets)
	}
	var ids []string
	for _, m := range req.Members {
		ids = append(ids, m.MemberID)
		if !slices.Equal(m.Topics, []int32{0, 1}) || m.OwnedGeneration != -1 || m.Cooperative {
			t.Errorf("member %q: topics %v generation %d cooperative %v", m.MemberID, m.Topics, m.OwnedGeneration, m.Cooperative)
		}
	}
	if !slices.Equal(ids, []string{"c0", "c1"}) {
		t.Errorf("members = %v, want [c0 c1]", ids)
	}
	if req.Members[0].ClientHost != "10.0.0.5" || req.Members[0].ClientID != "app" {
		t.Errorf("c0 client = %q@%q", req.Members[0].ClientID, req.Members[0].ClientHost)
	}
}

func TestRequest_StaticMembersBeforeDynamic(t *testing.T) {
	req, _ := request(t, load(t, "racks.json"))
	var got []string
	for _, m := range req.Members {
		got = append(got, m.MemberID)
	}
	want := []string{"consumer-a-9", "consumer-c-1", "consumer-b-2", "consumer-x-4"}
	if !slices.Equal(got, want) {
		t.Errorf("members = %v, want %v (pod-a, pod-c, then dynamic by id)", got, want)
	}
}

// TestRequest_PlacementFollowsRunningOffset checks generated and explicit
// placement against replica lists worked out by hand from the rule on Topic.
func TestRequest_PlacementFollowsRunningOffset(t *testing.T) {
	s := parse(t, `{
		"brokers": [{"id": 10, "rack": "a"}, {"id": 11, "rack": "b"}, {"id": 12}],
		"topics": [
			{"name": "five", "partition_count": 5, "replication_factor": 2},
			{"name": "listed", "partitions": [
				{"id": 1, "replicas": [12, 10], "isr": [12]},
				{"id": 0, "leader": 11, "replicas": [10, 11]},
				{"id": 2, "replicas": []}
			]},
			{"name": "four", "partition_count": 4, "replication_factor": 3},
			{"name": "one", "partition_count": 2}
		],
		"members": []
	}`)
	req, _ := request(t, s)
	type want struct {
		leader        int32
		replicas, isr []int32
	}
	wants := map[string][]want{
		// offset 0, replication factor 2
		"five": {{10, []int32{10, 11}, nil}, {11, []int32{11, 12}, nil}, {12, []int32{12, 10}, nil}, {10, []int32{10, 11}, nil}, {11, []int32{11, 12}, nil}},
		// explicit; the offset moves on to 5 + 3 = 8
		"listed": {{11, []int32{10, 11}, nil}, {12, []int32{12, 10}, []int32{12}}, {-1, []int32{}, nil}},
		// offset 8: partition p starts at broker (p + 8) % 3
		"four": {{12, []int32{12, 10, 11}, nil}, {10, []int32{10, 11, 12}, nil}, {11, []int32{11, 12, 10}, nil}, {12, []int32{12, 10, 11}, nil}},
		// offset 12, default replication factor 1
		"one": {{10, []int32{10}, nil}, {11, []int32{11}, nil}},
	}
	for ti, topic := range req.Topics {
		w := wants[topic.Name]
		if len(topic.Partitions) != len(w) {
			t.Fatalf("topic %q has %d placed partitions, want %d", topic.Name, len(topic.Partitions), len(w))
		}
		for p, pw := range w {
			got := topic.Partitions[p]
			isr := pw.isr
			if isr == nil {
				isr = pw.replicas
			}
			if got.Leader != pw.leader || !slices.Equal(req.Replicas(int32(ti), int32(p)), pw.replicas) || !slices.Equal(req.ReplicaSets[got.ISR], isr) {
				t.Errorf("%s-%d = leader %d replicas %v isr %v, want leader %d replicas %v isr %v",
					topic.Name, p, got.Leader, req.Replicas(int32(ti), int32(p)), req.ReplicaSets[got.ISR], pw.leader, pw.replicas, isr)
			}
		}
	}
	if len(req.Brokers) != 3 || req.Brokers[0] != (abi.Broker{ID: 10, Rack: "a"}) || req.Brokers[2] != (abi.Broker{ID: 12}) {
		t.Errorf("brokers = %v", req.Brokers)
	}
}

func TestRequest_ReplicationFactorAboveBrokerCountWrapsRound(t *testing.T) {
	req, _ := request(t, parse(t, `{
		"brokers": [{"id": 0}, {"id": 1}],
		"topics": [{"name": "t", "partition_count": 2, "replication_factor": 5}],
		"members": []
	}`))
	if got := req.Replicas(0, 1); !slices.Equal(got, []int32{1, 0, 1, 0, 1}) {
		t.Errorf("t-1 replicas = %v, want [1 0 1 0 1]", got)
	}
}

func TestRequest_NoBrokersMeansNoPlacement(t *testing.T) {
	req, warnings := request(t, parse(t, `{
		"topics": [
			{"name": "gen", "partition_count": 3, "replication_factor": 3},
			{"name": "listed", "partitions": [{"id": 0, "leader": 4, "replicas": [4, 5]}]}
		],
		"members": []
	}`))
	for _, topic := range req.Topics {
		if topic.Partitions != nil {
			t.Errorf("topic %q has placement %v, want none without brokers", topic.Name, topic.Partitions)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "topics[1].partitions") {
		t.Errorf("warnings = %q, want one about topics[1].partitions being ignored", warnings)
	}
}

func TestRequest_CooperativeScenarioCarriesClaims(t *testing.T) {
	req, warnings := request(t, load(t, "cooperative-owned.json"))
	if req.RebalanceProtocol != abi.Cooperative {
		t.Errorf("rebalance protocol = %v, want cooperative from the protocol name", req.RebalanceProtocol)
	}
	index := req.TopicIndex()
	retired, ok := index["retired"]
	if !ok || req.Topics[retired].Exists {
		t.Fatalf("topic table %v lacks a non-existent entry for the claimed topic \"retired\"", req.Topics)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `"retired"`) {
		t.Errorf("warnings = %q, want one about \"retired\"", warnings)
	}
	byID := make(map[string]abi.Member)
	for _, m := range req.Members {
		byID[m.MemberID] = m
		if !m.Cooperative {
			t.Errorf("member %q is not flagged cooperative", m.MemberID)
		}
	}
	stock, prices := index["stock"], index["prices"]
	c1 := byID["c1"]
	wantOwned := []abi.TopicPartitions{{Topic: stock, Partitions: []int32{3, 4, 5}}, {Topic: prices, Partitions: []int32{1}}, {Topic: retired, Partitions: []int32{0}}}
	slices.SortFunc(wantOwned, func(a, b abi.TopicPartitions) int { return int(a.Topic - b.Topic) })
	if !reflect.DeepEqual(c1.Owned, wantOwned) || c1.OwnedGeneration != 7 {
		t.Errorf("c1 owned = %v at %d, want %v at 7", c1.Owned, c1.OwnedGeneration, wantOwned)
	}
	if !bytes.Equal(c1.UserData, []byte{0, 0, 0, 7}) {
		t.Errorf("c1 user data = %v, want the base64-decoded [0 0 0 7]", c1.UserData)
	}
	if want := []abi.TopicPartitions{{Topic: stock, Partitions: []int32{0, 1, 2}}, {Topic: prices, Partitions: []int32{0}}}; !reflect.DeepEqual(byID["c0"].Previous, want) {
		t.Errorf("c0 previous = %v, want %v", byID["c0"].Previous, want)
	}
	if c2 := byID["c2"]; c2.OwnedGeneration != -1 || c2.Owned != nil || c2.UserData != nil {
		t.Errorf("c2 = %+v, want no claim and generation -1", c2)
	}
	if z := byID["zombie"]; z.OwnedGeneration != 5 {
		t.Errorf("zombie generation = %d, want 5", z.OwnedGeneration)
	}
}

func TestRequest_SubscriptionIsDeduplicatedAndAscending(t *testing.T) {
	req, warnings := request(t, parse(t, `{
		"topics": [{"name": "a", "partition_count": 1}, {"name": "b", "partition_count": 1}],
		"members": [{"id": "m", "topics": ["zz", "b", "a", "b", "yy", "zz"]}]
	}`))
	if got := req.Members[0].Topics; !slices.Equal(got, []int32{0, 1, 2, 3}) {
		t.Errorf("topics = %v, want [0 1 2 3]", got)
	}
	var names []string
	for _, topic := range req.Topics {
		names = append(names, topic.Name)
	}
	if !slices.Equal(names, []string{"a", "b", "yy", "zz"}) {
		t.Errorf("topic table = %v, want scenario topics then missing names sorted", names)
	}
	if len(warnings) != 2 {
		t.Errorf("warnings = %q, want one per missing subscribed topic", warnings)
	}
}

func TestRequest_DoesNotShareConfigWithScenario(t *testing.T) {
	s := parse(t, `{"config": {"k": "v"}, "topics": [], "members": []}`)
	req, _ := request(t, s)
	req.Config["k"] = "changed"
	if s.Config["k"] != "v" {
		t.Errorf("changing the request's config changed the scenario's")
	}
}

func TestParse_Defaults(t *testing.T) {
	s := parse(t, `{
		"assignor": "sticky",
		"topics": [{"name": "t", "partitions": [{"id": 0, "replicas": [3, 4]}]}],
		"members": [{"id": "m", "topics": ["t"]}, {"id": "n", "topics": [], "generation": 0}]
	}`)
	if s.Generation != 1 {
		t.Errorf("generation = %d, want the default 1", s.Generation)
	}
	if s.Protocol != "sticky" {
		t.Errorf("protocol = %q, want the assignor name", s.Protocol)
	}
	if s.Members[0].Generation != -1 || s.Members[1].Generation != 0 {
		t.Errorf("member generations = %d, %d, want -1 (absent) and 0 (given)", s.Members[0].Generation, s.Members[1].Generation)
	}
	if s.ResolvedRebalanceProtocol() != abi.Eager {
		t.Errorf("rebalance protocol = %v, want eager", s.ResolvedRebalanceProtocol())
	}
	bare := parse(t, `{"topics": [], "members": []}`)
	if bare.Protocol != "" || bare.Assignor != "" {
		t.Errorf("protocol %q assignor %q, want both left for the caller", bare.Protocol, bare.Assignor)
	}
}

func TestResolvedRebalanceProtocol(t *testing.T) {
	tests := []struct {
		protocol, assignor, explicit string
		want                         abi.RebalanceProtocol
	}{
		{"range", "", "", abi.Eager},
		{"cooperative-sticky", "", "", abi.Cooperative},
		{"", "cooperative-sticky", "", abi.Cooperative},
		{"cooperative-sticky", "", "eager", abi.Eager},
		{"range", "", "cooperative", abi.Cooperative},
		{"sticky", "", "", abi.Eager},
		{"", "", "", abi.Eager},
	}
	for _, tt := range tests {
		s := &Scenario{Protocol: tt.protocol, Assignor: tt.assignor, RebalanceProtocol: tt.explicit}
		if got := s.ResolvedRebalanceProtocol(); got != tt.want {
			t.Errorf("protocol %q assignor %q rebalance_protocol %q: got %v, want %v", tt.protocol, tt.assignor, tt.explicit, got, tt.want)
		}
	}
}

func TestParse_InvalidScenariosNameTheField(t *testing.T) {
	tests := map[string]string{
		"bad-base64.json":                `members[0].user_data: invalid base64 at byte 3`,
		"bad-rebalance-protocol.json":    `rebalance_protocol: must be "eager" or "cooperative", got "incremental"`,
		"duplicate-broker.json":          `brokers[2].id: duplicate broker id 0`,
		"duplicate-instance.json":        `members[1].instance_id: duplicate instance id "i0"`,
		"duplicate-member.json":          `members[1].id: duplicate member id "c0"`,
		"duplicate-topic.json":           `topics[1].name: duplicate topic "t0"`,
		"isr-not-replica.json":           `topics[0].partitions[0].isr: broker 1 is not a replica`,
		"leader-not-replica.json":        `topics[0].partitions[0].leader: broker 1 is not a replica`,
		"member-generation-too-low.json": `members[0].generation: must be >= -1, got -2`,
		"missing-member-id.json":         `members[0].id: required`,
		"missing-member-topics.json":     `members[0].topics: required`,
		"missing-members.json":           `members: required`,
		"missing-topics.json":            `topics: required`,
		"negative-partition-count.json":  `topics[1].partition_count: must be >= 0, got -2`,
		"owned-out-of-range.json":        `members[0].owned["t0"]: partition 3 out of range`,
		"owned-twice.json":               `members[2].owned["t0"]: partition 3 listed twice`,
		"partition-id-gap.json":          `topics[0].partitions[1].id: must be in 0..1`,
		"partition-id-twice.json":        `topics[0].partitions[1].id: partition 1 listed twice`,
		"partitions-and-count.json":      `topics[0]: has both partitions and partition_count`,
		"previous-negative.json":         `members[0].previous["gone"]: partition -1 is negative`,
		"previous-two-members.json":      `members[1].previous["t0"]: partition 1 is also in members[0].previous`,
		"replication-factor-zero.json":   `topics[0].replication_factor: must be >= 1, got 0`,
		"syntax-error.json":              `line 3, column 15: invalid character ','`,
		"trailing-data.json":             `unexpected data after the JSON value`,
		"unknown-broker.json":            `topics[0].partitions[1].replicas: unknown broker id 7`,
		"unknown-field.json":             `members[1]: unknown field "ownd"`,
		"unknown-top-level-field.json":   `unknown field "topic"`,
		"wrong-type.json":                `topics[0].partition_count: expected a 32-bit integer, got string`,
	}
	files, _ := filepath.Glob(filepath.Join(testdata, "invalid", "*.json"))
	if len(files) != len(tests) {
		t.Errorf("%d invalid scenarios on disk, %d in the table: keep them in step", len(files), len(tests))
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(testdata, "invalid", name)
			_, err := Load(path)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, path+": ") {
				t.Errorf("error %q does not start with the file path", msg)
			}
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not contain %q", msg, want)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error %q is not one line", msg)
			}
		})
	}
}

func TestParse_InlineErrors(t *testing.T) {
	tests := []struct{ name, json, want string }{
		{"TopLevelNotAnObject", `[1]`, "scenario: expected an object, got array"},
		{"Empty", ``, "empty input"},
		{"NegativeGeneration", `{"generation": -1, "topics": [], "members": []}`, "generation: must be >= 0, got -1"},
		{"NeitherPartitionsNorCount", `{"topics": [{"name": "t"}], "members": []}`, "topics[0]: needs partitions or partition_count"},
		{"EmptyTopicName", `{"topics": [{"partition_count": 1}], "members": []}`, "topics[0].name: required"},
		{"ReplicationFactorWithPartitions", `{"topics": [{"name": "t", "partitions": [], "replication_factor": 2}], "members": []}`, "topics[0].replication_factor: only valid with partition_count"},
		{"NegativeBroker", `{"brokers": [{"id": -1}], "topics": [], "members": []}`, "brokers[0].id: must be >= 0, got -1"},
		{"EmptySubscribedName", `{"topics": [], "members": [{"id": "m", "topics": ["a", ""]}]}`, "members[0].topics[1]: empty topic name"},
		{"EmptyOwnedName", `{"topics": [], "members": [{"id": "m", "topics": [], "owned": {"": [1]}}]}`, "members[0].owned: empty topic name"},
		{"ConfigValueNotString", `{"config": {"k": 1}, "topics": [], "members": []}`, "config: expected a string, got number"},
		{"PartitionFieldTypo", `{"topics": [{"name": "t", "partitions": [{"id": 0, "leadr": 1}]}], "members": []}`, `topics[0]: unknown field "leadr"`},
		{"TooManyPartitions", `{"topics": [{"name": "a", "partition_count": 67108864}, {"name": "b", "partition_count": 1}], "members": []}`, "topics[1]: the scenario would have more than 67108864 partitions"},
		{"Int32Overflow", `{"topics": [{"name": "a", "partition_count": 3000000000}], "members": []}`, "topics[0].partition_count: expected a 32-bit integer, got number 3000000000"},
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

func TestParse_LegalOddities(t *testing.T) {
	// A member may claim partitions of a deleted topic, subscribe to a
	// missing one, and two members may claim the same partition.
	s := parse(t, `{
		"generation": 4,
		"topics": [{"name": "t", "partition_count": 2}],
		"members": [
			{"id": "a", "topics": ["t", "nope"], "owned": {"gone": [5], "t": [1]}, "generation": 3},
			{"id": "b", "topics": ["t"], "owned": {"t": [1]}, "generation": 3}
		]
	}`)
	_, warnings := request(t, s)
	if len(warnings) != 2 {
		t.Errorf("warnings = %q, want one for the missing subscription and one for the deleted topic", warnings)
	}
}

func TestRequest_WarnsAboutClaimNewerThanGroup(t *testing.T) {
	_, warnings := request(t, parse(t, `{
		"generation": 4,
		"topics": [{"name": "t", "partition_count": 2}],
		"members": [{"id": "a", "topics": ["t"], "owned": {"t": [1]}, "generation": 9}]
	}`))
	if len(warnings) != 1 || !strings.Contains(warnings[0], "members[0].generation") {
		t.Errorf("warnings = %q, want one about members[0].generation", warnings)
	}
}

func TestParse_ScenarioRoundTripsThroughJSON(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testdata, "*.json"))
	scenarios := map[string]*Scenario{
		// Empty lists that differ from absent ones must survive.
		"inline": parse(t, `{
			"brokers": [{"id": 1}],
			"topics": [
				{"name": "none", "partitions": []},
				{"name": "offline", "partitions": [{"id": 0, "leader": -1, "replicas": [1], "isr": []}]}
			],
			"members": [{"id": "m", "topics": []}]
		}`),
	}
	for _, file := range files {
		scenarios[file] = load(t, filepath.Base(file))
	}
	for file, s := range scenarios {
		data, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(data)
		if err != nil {
			t.Fatalf("%s: re-parsing the marshalled scenario: %v", file, err)
		}
		if !reflect.DeepEqual(s, again) {
			t.Errorf("%s: scenario changed through marshal and parse:\n%+v\n%+v", file, s, again)
		}
	}
}

func TestLoad_MissingFileNamesThePath(t *testing.T) {
	_, err := Load("no/such/scenario.json")
	if err == nil || !strings.Contains(err.Error(), "no/such/scenario.json") {
		t.Errorf("Load error = %v, want it to name the path", err)
	}
}

func BenchmarkRequest_1MPartitions(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"brokers": [{"id": 0, "rack": "a"}, {"id": 1, "rack": "b"}, {"id": 2, "rack": "c"}], "topics": [`)
	for i := 0; i < 100; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"name": "t` + string(rune('A'+i%26)) + string(rune('A'+i/26)) + `", "partition_count": 10000, "replication_factor": 3}`)
	}
	sb.WriteString(`], "members": [{"id": "m", "topics": ["tAA"]}]}`)
	s, err := Parse([]byte(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := s.Request(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWriteTable_EscapesWhatATerminalWouldObey: the assignor's name may be
// a plugin's and member ids a scenario's; the table shows them escaped.
func TestWriteTable_EscapesWhatATerminalWouldObey(t *testing.T) {
	o := &Output{Assignor: "evil\x1b[2J", RebalanceProtocol: "eager",
		Assignment: map[string]map[string][]int32{"m\x1b]0;x\x07": {"t": {0}}}}
	var b strings.Builder
	if err := o.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(b.String(), "\x1b\x07") {
		t.Fatalf("raw control characters in the table:\n%q", b.String())
	}
	if !strings.Contains(b.String(), `evil\x1b[2J`) {
		t.Errorf("the assignor is not shown escaped:\n%s", b.String())
	}
}

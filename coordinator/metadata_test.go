package coordinator

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMetadata_ChangesUnderASubscriptionTriggerARebalance(t *testing.T) {
	moveReplica := func(md *Metadata) {
		p := md.Topics["t"].Partitions
		p[0].Replicas = []int32{2}
	}
	tests := []struct {
		name   string
		rack   string
		change func(*Metadata)
		want   bool
	}{
		{"partition count grows", "", func(md *Metadata) { md.Topics["t"] = meta(map[string]int{"t": 6}).Topics["t"] }, true},
		{"subscribed topic deleted", "", func(md *Metadata) { delete(md.Topics, "t") }, true},
		{"subscribed topic created", "", func(md *Metadata) { md.Topics["later"] = meta(map[string]int{"later": 1}).Topics["later"] }, true},
		{"unsubscribed topic created", "", func(md *Metadata) { md.Topics["other"] = meta(map[string]int{"other": 1}).Topics["other"] }, false},
		{"replica moves, no member has a rack", "", moveReplica, false},
		{"replica moves in a rack-aware group", "a", moveReplica, true},
		{"replica moves, the member's rack is no broker's", "elsewhere", moveReplica, false},
		{"broker changes rack in a rack-aware group", "a", func(md *Metadata) { md.Brokers[1].Rack = "z" }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
			md := meta(map[string]int{"t": 4})
			h.setMetadata(md)
			a := newSim(h, "a", "g", []string{"range"}, []string{"t", "later"})
			a.rack = tt.rack
			settle(h, a)
			next := meta(map[string]int{"t": 4})
			tt.change(next)
			h.setMetadata(next)
			before := a.generation
			code := h.do(a.client, hbReq("g", a.memberID, a.generation)).(*kmsg.HeartbeatResponse).ErrorCode
			if got := code == kerr.RebalanceInProgress.Code; got != tt.want {
				t.Fatalf("heartbeat %v, want rebalance %v", kerr.ErrorForCode(code), tt.want)
			}
			if tt.want {
				a.phase = idle
				settle(h, a)
				if a.generation != before+1 {
					t.Fatalf("generation %d after the metadata rebalance", a.generation)
				}
				if n := len(next.Topics["t"].Partitions) + len(next.Topics["later"].Partitions); count(a.held) != n {
					t.Fatalf("a holds %v, want %d partitions", a.held, n)
				}
			}
		})
	}
}

func TestRack_ResolutionOrder(t *testing.T) {
	rules := []RackRule{
		{ClientID: regexp.MustCompile("^web-"), Rack: "rule-id"},
		{CIDR: netip.MustParsePrefix("10.2.0.0/16"), Rack: "rule-cidr"},
		{CIDR: netip.MustParsePrefix("10.0.0.0/8"), Rack: "rule-wide"},
	}
	tests := []struct {
		name     string
		subRack  string
		clientID string
		host     string
		fetch    string
		want     string
	}{
		{"subscription rack wins", "sub", "web-1", "/10.2.0.1", "fetch", "sub"},
		{"then the fetch rack", "", "web-1", "/10.2.0.1", "fetch", "fetch"},
		{"then the first matching rule: client id", "", "web-1", "/10.2.0.1", "", "rule-id"},
		{"then the first matching rule: cidr", "", "batch-1", "/10.2.3.4", "", "rule-cidr"},
		{"rules are ordered", "", "batch-1", "/10.9.0.1", "", "rule-wide"},
		{"nothing matches", "", "batch-1", "/192.168.0.1", "", ""},
		{"an IPv4-mapped host matches as IPv4", "", "batch-1", "/::ffff:10.2.3.4", "", "rule-cidr"},
		{"a host that is no address matches no cidr", "", "batch-1", "", "", ""},
		{"but may match by client id", "", "web-2", "", "", "rule-id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Default: GroupConfig{InitialRebalanceDelay: -1, RackRules: rules}}
			h := newHarness(t, cfg)
			h.autoJobs = false
			s := newSim(h, tt.clientID, "g", []string{"range"}, []string{"t"})
			s.client.Host = tt.host
			s.client.FetchRack = tt.fetch
			s.rack = tt.subRack
			s.join()
			h.advance(0)
			if len(h.jobs) != 1 {
				t.Fatalf("jobs %d", len(h.jobs))
			}
			if got := h.jobs[0].Request.Members[0].Rack; got != tt.want {
				t.Fatalf("rack %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConfig_RejectsBadRackRules(t *testing.T) {
	bad := [][]RackRule{
		{{Rack: "r"}},
		{{CIDR: netip.MustParsePrefix("10.0.0.0/8"), ClientID: regexp.MustCompile("x"), Rack: "r"}},
		{{CIDR: netip.MustParsePrefix("10.0.0.0/8")}},
		{{ClientID: regexp.MustCompile("x")}},
	}
	for _, rules := range bad {
		if _, err := New(Config{Groups: map[string]GroupConfig{"g": {RackRules: rules}}}, 1); err == nil {
			t.Errorf("rules %+v accepted", rules)
		}
	}
}

func TestAssignmentRequest_CarriesPreviousAssignmentAndMemberModes(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1, PluginConfig: map[string]string{"k": "v"}}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	s := newSim(h, "s", "g", []string{"range"}, []string{"t"})
	s.instance = "z-static"
	d := newSim(h, "d", "g", []string{"range"}, []string{"t"})
	s.join()
	d.join()
	settle(h, s, d)
	h.autoJobs = false
	e := newSim(h, "e", "g", []string{"range"}, []string{"t"})
	e.join()
	settle(h, s, d, e)
	if len(h.jobs) != 1 {
		t.Fatalf("jobs %d", len(h.jobs))
	}
	req := h.jobs[0].Request
	if req.Members[0].InstanceID != "z-static" {
		t.Fatalf("static members come first: %+v", req.Members[0])
	}
	if req.Config["k"] != "v" || req.Protocol != "range" || req.Generation != 2 {
		t.Fatalf("request header %+v", req)
	}
	prev := 0
	for _, m := range req.Members {
		for _, tp := range m.Previous {
			prev += len(tp.Partitions)
		}
		if m.Cooperative {
			t.Fatalf("range member marked cooperative")
		}
	}
	if prev != 4 {
		t.Fatalf("previous assignment covers %d partitions, want 4", prev)
	}
}

// TestRack_AFetchRackNeverRebalancesAndBelongsToItsMember: two members
// behind one client id and host (two consumers in one pod) send Fetch
// racks az1 and az2. Each rack goes to the member that owns the partitions
// its Fetch read; neither sighting, nor the metadata refreshes after them,
// rebalances the group (Kafka never rebalances because of a rack); the
// next rebalance, for a reason of its own, carries both racks.
func TestRack_AFetchRackNeverRebalancesAndBelongsToItsMember(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	md := meta(map[string]int{"t": 4})
	md.Brokers = []Broker{{1, "az1"}, {2, "az2"}, {3, "az3"}}
	h.setMetadata(md)
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	b := newSim(h, "b", "g", []string{"range"}, []string{"t"})
	a.client.ID, b.client.ID = "rdkafka", "rdkafka" // one client id, one host
	settle(h, a, b)
	gen := h.c.groups["g"].generation
	fetched := func(s *simClient) []FetchedTopic {
		return []FetchedTopic{{Topic: "t", Partitions: slices.Clone(s.held["t"])}}
	}
	h.absorb(h.c.FetchRacksSeen(h.now, []FetchRack{
		{ClientID: "rdkafka", Host: a.client.Host, Rack: "az1", Fetched: fetched(a)},
		{ClientID: "rdkafka", Host: b.client.Host, Rack: "az2", Fetched: fetched(b)},
	}))
	h.setMetadata(md) // a refresh after the racks were learned
	h.advance(time.Second)
	if g := h.c.groups["g"]; g.state != Stable || g.generation != gen {
		t.Fatalf("after Fetch racks: %v generation %d, want Stable at %d", g.state, g.generation, gen)
	}
	members := h.c.groups["g"].members
	if ra, rb := members[a.memberID].rack, members[b.memberID].rack; ra != "az1" || rb != "az2" {
		t.Fatalf("racks a %q, b %q, want az1 and az2", ra, rb)
	}
	// A member joining rebalances the group: the assignment sees both.
	h.autoJobs = false
	c := newSim(h, "c", "g", []string{"range"}, []string{"t"})
	c.join()
	a.heartbeat()
	b.heartbeat()
	settle(h, a, b, c)
	if len(h.jobs) == 0 {
		t.Fatal("no assignment after a member joined")
	}
	got := map[string]string{}
	for _, m := range h.jobs[0].Request.Members {
		got[m.MemberID] = m.Rack
	}
	if got[a.memberID] != "az1" || got[b.memberID] != "az2" {
		t.Errorf("the next assignment sees racks %v, want a az1, b az2", got)
	}
}

// TestRack_AStaticRestartOnANewAddressKeepsItsRack: a static member that
// restarts on another host keeps the rack its old client sent, and the
// restart costs no rebalance.
func TestRack_AStaticRestartOnANewAddressKeepsItsRack(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	a.instance = "static-a"
	settle(h, a)
	h.absorb(h.c.FetchRacksSeen(h.now, []FetchRack{{ClientID: "a", Host: a.client.Host, Rack: "az1",
		Fetched: []FetchedTopic{{Topic: "t", Partitions: []int32{0}}}}}))
	gen := h.c.groups["g"].generation
	a.crash()
	n := newSim(h, "a", "g", []string{"range"}, []string{"t"})
	n.instance, n.client.Host = "static-a", "/10.0.0.99"
	n.join()
	settle(h, n)
	g := h.c.groups["g"]
	if g.generation != gen || g.state != Stable {
		t.Fatalf("the static restart: %v generation %d, want Stable at %d", g.state, g.generation, gen)
	}
	for _, m := range g.members {
		if m.rack != "az1" {
			t.Errorf("the restarted member's rack is %q, want az1", m.rack)
		}
	}
}

// TestServedProtocols_ReloadEventDecidesLaterJoins: the set of served
// protocols arrives as an event; a group formed after it sees the new set,
// so a protocol no plugin serves any more falls back to leader-side
// assignment and a newly served one is assigned server-side.
func TestServedProtocols_ReloadEventDecidesLaterJoins(t *testing.T) {
	h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 4}))
	h.absorb(h.c.SetServedProtocols(h.now, ServedProtocols{"custom": "range"}))
	a := newSim(h, "a", "served", []string{"custom"}, []string{"t"})
	settle(h, a)
	if g := h.c.groups["served"]; !g.serverSide {
		t.Fatalf("group with a newly served protocol is not assigned server-side")
	}
	h.absorb(h.c.SetServedProtocols(h.now, ServedProtocols{}))
	b := newSim(h, "b", "unserved", []string{"custom"}, []string{"t"})
	b.join()
	h.advance(0)
	if g := h.c.groups["unserved"]; g == nil || g.serverSide {
		t.Fatalf("group with a protocol no longer served is assigned server-side")
	}
}

func TestConfig_PerGroupConfigOverridesTheDefault(t *testing.T) {
	h := newHarness(t, Config{
		Default: GroupConfig{InitialRebalanceDelay: -1},
		Groups:  map[string]GroupConfig{"vip": {InitialRebalanceDelay: -1, Priority: []string{"roundrobin"}}},
	})
	h.setMetadata(meta(map[string]int{"t": 4, "u": 1}))
	for _, group := range []string{"vip", "plain"} {
		s := newSim(h, "a-"+group, group, []string{"range", "roundrobin"}, []string{"t"})
		settle(h, s)
	}
	if p := h.c.groups["vip"].protocol; p != "roundrobin" {
		t.Fatalf("vip protocol %q", p)
	}
	if p := h.c.groups["plain"].protocol; p != "range" {
		t.Fatalf("plain protocol %q", p)
	}
	if got := h.c.Groups(); len(got) != 2 || got[0] != "plain" {
		t.Fatalf("groups %v", got)
	}
	if got := h.c.SubscribedTopics(); len(got) != 1 || got[0] != "t" {
		t.Fatalf("subscribed topics %v", got)
	}
}

func TestMetadataWait_FirstAssignmentWaitsForTopicsNeverLookedUp(t *testing.T) {
	const wait = 5 * time.Second
	tests := []struct {
		name string
		wait time.Duration
		// before are the metadata updates made before the member joins, in
		// order.
		before []*Metadata
		// arriveAfter is when metadata with "t" arrives after the join
		// completes; negative for never.
		arriveAfter time.Duration
		// wantWaited: the assignment was held for metadata.
		wantWaited bool
		// wantGeneration is the group's generation once everything settled:
		// 1 when the first assignment saw "t", 2 when a second rebalance
		// had to follow.
		wantGeneration int32
	}{
		{name: "held until the metadata arrives", wait: wait, arriveAfter: time.Second, wantWaited: true, wantGeneration: 1},
		{name: "assigned when the wait ends, rebalanced on arrival", wait: wait, arriveAfter: 2 * wait, wantWaited: true, wantGeneration: 2},
		{name: "no waiting configured", arriveAfter: time.Second, wantGeneration: 2},
		{name: "a topic looked up and found absent is not waited for", wait: wait, before: []*Metadata{{Topics: map[string]TopicMetadata{}, Covered: []string{"t"}}}, arriveAfter: time.Second, wantGeneration: 2},
		{name: "a topic already known is not waited for", wait: wait, before: []*Metadata{meta(map[string]int{"t": 4})}, arriveAfter: -1, wantGeneration: 1},
		// Each update covers every subscribed topic, so one that a later
		// update left out is no longer known, and is looked up again.
		{name: "a topic a later update left out is waited for again", wait: wait, before: []*Metadata{meta(map[string]int{"t": 4}), meta(map[string]int{"u": 2})}, arriveAfter: time.Second, wantWaited: true, wantGeneration: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}, MetadataWait: tt.wait})
			h.autoJobs = false
			for _, md := range tt.before {
				h.setMetadata(md)
			}
			a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
			a.join()
			h.advance(0)
			// The member waits for its assignment in SyncGroup, where its
			// session cannot expire.
			a.poll()
			a.sync()
			waited := len(h.jobs) == 0
			if waited != tt.wantWaited {
				t.Fatalf("assignment held: %v, want %v (jobs %d)", waited, tt.wantWaited, len(h.jobs))
			}
			// Asked when the member joined and again when the assignment
			// started waiting: always for t alone.
			if asked := slices.Compact(slices.Sorted(slices.Values(h.needMetadata))); waited && !slices.Equal(asked, []string{"t"}) {
				t.Fatalf("asked for metadata of %v, want [t]", h.needMetadata)
			}
			if len(tt.before) == 0 && len(h.needMetadata) == 0 {
				t.Fatal("a JoinGroup naming a topic never looked up did not ask for its metadata")
			}
			if tt.arriveAfter >= 0 {
				h.advance(tt.arriveAfter)
				if waited && tt.arriveAfter >= tt.wait && len(h.jobs) != 1 {
					t.Fatalf("%d jobs after the wait ended, want 1", len(h.jobs))
				}
				h.setMetadata(meta(map[string]int{"t": 4}))
			}
			h.autoJobs = true
			h.runJobs()
			settle(h, a)
			if a.generation != tt.wantGeneration {
				t.Fatalf("generation %d, want %d", a.generation, tt.wantGeneration)
			}
			if count(a.held) != 4 {
				t.Fatalf("a holds %v, want all 4 partitions of t", a.held)
			}
		})
	}
}

// TestMetadata_ReplicaMovesRebalanceOnlyWhenRacksChange: as Kafka's
// ConsumerCoordinator compares, a rack-aware group's assignment depends on
// each partition's count and the set of its replicas' racks. A replica
// moving to another broker of the same rack, or replicas listed in another
// order, changes neither; a replica moving to another rack does, and so
// does a new partition. A group without racks ignores racks altogether.
func TestMetadata_ReplicaMovesRebalanceOnlyWhenRacksChange(t *testing.T) {
	base := func() *Metadata {
		return &Metadata{
			Brokers: []Broker{{1, "a"}, {2, "b"}, {3, "c"}, {4, "a"}},
			Topics: map[string]TopicMetadata{"t": {Partitions: []PartitionMetadata{
				{Leader: 1, Replicas: []int32{1, 2}},
				{Leader: 2, Replicas: []int32{2, 3}},
			}}},
		}
	}
	tests := []struct {
		name      string
		change    func(md *Metadata)
		rebalance bool
	}{
		{"nothing", func(*Metadata) {}, false},
		{"a replica moves to a broker of the same rack", func(md *Metadata) {
			md.Topics["t"].Partitions[0] = PartitionMetadata{Leader: 4, Replicas: []int32{4, 2}}
		}, false},
		{"replicas listed in another order", func(md *Metadata) {
			md.Topics["t"].Partitions[1] = PartitionMetadata{Leader: 3, Replicas: []int32{3, 2}}
		}, false},
		{"a replica moves to another rack", func(md *Metadata) {
			md.Topics["t"].Partitions[0] = PartitionMetadata{Leader: 1, Replicas: []int32{1, 3}}
		}, true},
		{"a partition is added", func(md *Metadata) {
			tm := md.Topics["t"]
			tm.Partitions = append(tm.Partitions, PartitionMetadata{Leader: 1, Replicas: []int32{1}})
			md.Topics["t"] = tm
		}, true},
	}
	for _, withRack := range []bool{true, false} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("rack-aware=%v/%s", withRack, tt.name), func(t *testing.T) {
				h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
				h.setMetadata(base())
				a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
				if withRack {
					a.rack = "a"
				}
				settle(h, a)
				gen := h.c.groups["g"].generation
				md := base()
				tt.change(md)
				h.setMetadata(md)
				want := tt.rebalance && (withRack || tt.name == "a partition is added")
				if got := h.c.groups["g"].state == PreparingRebalance; got != want {
					t.Errorf("rebalancing %v after the change (generation %d), want %v", got, gen, want)
				}
			})
		}
	}
}

package scenario

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// MaxGeneratedMembers caps the members a generate section may describe,
// joins included, for the same reason as MaxPartitions: a typo must not make
// the host allocate for millions of members.
const MaxGeneratedMembers = 1 << 20

// Generate describes a group by rule instead of listing it, so that a
// scenario with a million partitions or a hundred rebalances stays a few
// lines long. It replaces the scenario's topics and members, which must then
// be absent; brokers, group, generation, protocol, assignor and config are
// taken from the scenario as usual.
//
// Everything random is drawn from one stream seeded by Seed (see Rand), in a
// fixed order, so the same file always describes the same rebalances: any
// tool that implements the rules below reproduces them.
//
// # Names
//
// Topics are numbered within their TopicSpec and named Prefix plus the number
// zero-padded to the digits of the spec's Count, as Kafka's sticky assignor
// tests name them ("t000".."t499" for 500 topics). Members are numbered
// across all MemberSpecs, in order, and named their spec's Prefix plus the
// number padded to the digits of the total member count ("c0000".."c1999").
// Members that join in later rounds continue the numbering with the same
// padding.
//
// # Drawing order
//
// Topic partition counts first (topics in order, one draw for each topic of
// a spec with partitions_max), then subscriptions (members in order, for
// each member of a "random" spec), then each later round as described on
// Rounds.
type Generate struct {
	// Seed seeds the random stream. Any integer; 0 is a seed like another.
	Seed int64 `json:"seed"`
	// Topics lists groups of generated topics. Required, non-empty.
	Topics []TopicSpec `json:"topics"`
	// Members lists groups of generated members. Required, non-empty.
	Members []MemberSpec `json:"members"`
	// Rounds makes the scenario a sequence of rebalances. Absent means one
	// rebalance of the generated group.
	Rounds *Rounds `json:"rounds,omitempty"`
}

// TopicSpec is a group of generated topics.
type TopicSpec struct {
	// Prefix starts each topic's name. Defaults to "t".
	Prefix string `json:"prefix,omitempty"`
	// Count is the number of topics, >= 1.
	Count int32 `json:"count"`
	// Partitions is each topic's partition count, >= 0; with PartitionsMax
	// it is the lowest count drawn.
	Partitions int32 `json:"partitions"`
	// PartitionsMax, when set, gives each topic a partition count drawn
	// uniformly from Partitions..PartitionsMax (one draw per topic).
	PartitionsMax *int32 `json:"partitions_max,omitempty"`
	// ReplicationFactor is as on Topic: the replicas per partition, placed
	// round the scenario's brokers. Defaults to 1.
	ReplicationFactor *int32 `json:"replication_factor,omitempty"`
}

// MemberSpec is a group of generated members. Each has the subscription
// Subscribe or Topics describe (exactly one of the two) and no claims: in
// the first rebalance nobody owns anything.
type MemberSpec struct {
	// Prefix starts each member's id. Defaults to "c".
	Prefix string `json:"prefix,omitempty"`
	// Count is the number of members, >= 1.
	Count int `json:"count"`
	// Subscribe is "all" (every generated topic) or "random": Kafka's
	// getRandomSublist over all generated topics in order. Draw k in
	// 0..n-1, then k times remove the topic at a drawn index of what is
	// left, so that at least one topic stays.
	Subscribe string `json:"subscribe,omitempty"`
	// Topics is an explicit subscription, the same for every member of the
	// spec. Names need not be generated ones: a missing topic is legal.
	Topics []string `json:"topics"`
	// Racks, when set, gives the member numbered i (across all specs) the
	// rack Racks[i mod len(Racks)], as Kafka's tests give consumer i rack
	// ALL_RACKS[i mod racks]. An empty string means no rack.
	Racks []string `json:"racks,omitempty"`
}

// Rounds makes a generated scenario a sequence of Count rebalances. The first
// is the generated group; each later one starts from what the members
// received in the one before (see Sequence.Next) and then changes the group:
//
//  1. leave: draw k in 0..Leave; k times, unless only one member is left,
//     remove the member at a drawn index of the current members in id order.
//  2. join: draw k in 0..Join; add k members subscribed as Join describes.
//  3. resubscribe: draw k in 0..Resubscribe; k times, give the member at a
//     drawn index a new random subscription, drawn as for "random".
//
// A member keeps claiming what it received even when it no longer subscribes
// to the topic, as a real consumer does until it rejoins.
type Rounds struct {
	// Count is the number of rebalances, >= 1.
	Count int `json:"count"`
	// Leave is the most members that leave in one round, >= 0.
	Leave int `json:"leave,omitempty"`
	// Join is the most members that join in one round, >= 0.
	Join int `json:"join,omitempty"`
	// JoinAs describes the subscription and racks of joining members, as a
	// MemberSpec without count or prefix; it defaults to the first member
	// spec. Joining members take the first spec's prefix.
	JoinAs *MemberSpec `json:"join_as,omitempty"`
	// Resubscribe is the most members that change subscription in one
	// round, >= 0.
	Resubscribe int `json:"resubscribe,omitempty"`
	// Forget lists member ids that lose their state: in every later round
	// they report nothing they own, have no previous assignment and send
	// no user data, as member 0 does in Kafka's large-group tests.
	Forget []string `json:"forget,omitempty"`
	// EchoUserData makes each member send, as its subscription user data,
	// the assignment user data it received last round, as a client of
	// Kafka's eager StickyAssignor effectively does.
	EchoUserData bool `json:"echo_user_data,omitempty"`
}

// Rand is the scenario generator's random stream: SplitMix64. It is spelt
// out rather than taken from math/rand so that other tools, and later Go
// versions, draw exactly the same numbers from a seed.
type Rand struct{ state uint64 }

// NewRand returns the stream for seed.
func NewRand(seed int64) *Rand { return &Rand{state: uint64(seed)} }

// Uint64 returns the next number of the stream.
func (r *Rand) Uint64() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// IntN returns a number in 0..n-1 as Uint64() mod n; n must be > 0. The slight
// bias of a plain modulus does not matter here, and it is trivial to
// reproduce.
func (r *Rand) IntN(n int) int { return int(r.Uint64() % uint64(n)) }

// checkGenerate validates the generate section. It is the whole of the
// scenario's topics and members, so those must be absent.
func (s *Scenario) checkGenerate() error {
	g := s.Generate
	if s.Topics != nil {
		return errors.New("topics: not allowed with generate, which generates the topics")
	}
	if s.Members != nil {
		return errors.New("members: not allowed with generate, which generates the members")
	}
	if len(g.Topics) == 0 {
		return errors.New("generate.topics: required, give at least one topic spec")
	}
	if len(g.Members) == 0 {
		return errors.New("generate.members: required, give at least one member spec")
	}
	names := map[string]int{}
	var total int64
	for i, t := range g.Topics {
		path := fmt.Sprintf("generate.topics[%d]", i)
		if t.Count < 1 {
			return fmt.Errorf("%s.count: must be >= 1, got %d", path, t.Count)
		}
		if t.Partitions < 0 {
			return fmt.Errorf("%s.partitions: must be >= 0, got %d", path, t.Partitions)
		}
		most := t.Partitions
		if t.PartitionsMax != nil {
			if *t.PartitionsMax < t.Partitions {
				return fmt.Errorf("%s.partitions_max: must be >= partitions (%d), got %d", path, t.Partitions, *t.PartitionsMax)
			}
			most = *t.PartitionsMax
		}
		if t.ReplicationFactor != nil && *t.ReplicationFactor < 1 {
			return fmt.Errorf("%s.replication_factor: must be >= 1, got %d", path, *t.ReplicationFactor)
		}
		total += int64(t.Count) * int64(most)
		if total > MaxPartitions {
			return fmt.Errorf("%s: the scenario would have more than %d partitions", path, MaxPartitions)
		}
		for _, name := range topicNames(t) {
			if j, dup := names[name]; dup {
				return fmt.Errorf("%s: generates topic %q, as generate.topics[%d] does", path, name, j)
			}
			names[name] = i
		}
	}
	members := 0
	for i := range g.Members {
		m := &g.Members[i]
		path := fmt.Sprintf("generate.members[%d]", i)
		if m.Count < 1 {
			return fmt.Errorf("%s.count: must be >= 1, got %d", path, m.Count)
		}
		members += m.Count
		if members > MaxGeneratedMembers {
			return fmt.Errorf("%s.count: the scenario would have more than %d members", path, MaxGeneratedMembers)
		}
		if err := checkSubscription(path, m); err != nil {
			return err
		}
	}
	r := g.Rounds
	if r == nil {
		return nil
	}
	switch {
	case r.Count < 1:
		return fmt.Errorf("generate.rounds.count: must be >= 1, got %d", r.Count)
	case r.Leave < 0:
		return fmt.Errorf("generate.rounds.leave: must be >= 0, got %d", r.Leave)
	case r.Join < 0:
		return fmt.Errorf("generate.rounds.join: must be >= 0, got %d", r.Join)
	case r.Resubscribe < 0:
		return fmt.Errorf("generate.rounds.resubscribe: must be >= 0, got %d", r.Resubscribe)
	case int64(members)+int64(r.Join)*int64(r.Count) > MaxGeneratedMembers:
		return fmt.Errorf("generate.rounds.join: the scenario could reach more than %d members", MaxGeneratedMembers)
	}
	if r.JoinAs != nil {
		if r.JoinAs.Count != 0 || r.JoinAs.Prefix != "" {
			return errors.New("generate.rounds.join_as: count and prefix are not allowed; joining members are numbered on from the others")
		}
		if err := checkSubscription("generate.rounds.join_as", r.JoinAs); err != nil {
			return err
		}
	}
	initial := map[string]bool{}
	for _, id := range memberIDs(g) {
		initial[id] = true
	}
	for k, id := range r.Forget {
		if !initial[id] {
			return fmt.Errorf("generate.rounds.forget[%d]: %q is not a generated member", k, id)
		}
	}
	return nil
}

func checkSubscription(path string, m *MemberSpec) error {
	switch {
	case m.Subscribe != "" && m.Topics != nil:
		return fmt.Errorf("%s: has both subscribe and topics; give one", path)
	case m.Subscribe == "" && m.Topics == nil:
		return fmt.Errorf(`%s: needs subscribe ("all" or "random") or topics`, path)
	case m.Subscribe != "" && m.Subscribe != "all" && m.Subscribe != "random":
		return fmt.Errorf(`%s.subscribe: must be "all" or "random", got %q`, path, m.Subscribe)
	}
	for k, name := range m.Topics {
		if name == "" {
			return fmt.Errorf("%s.topics[%d]: empty topic name", path, k)
		}
	}
	return nil
}

// pad writes i zero-padded to the digits of n, as Kafka's tests do.
func pad(prefix string, i, n int) string {
	s := strconv.Itoa(i)
	width := len(strconv.Itoa(n))
	for len(s) < width {
		s = "0" + s
	}
	return prefix + s
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func topicNames(t TopicSpec) []string {
	out := make([]string, t.Count)
	for i := range out {
		out[i] = pad(orDefault(t.Prefix, "t"), i, int(t.Count))
	}
	return out
}

// memberIDs returns the ids of the generated members in number order.
func memberIDs(g *Generate) []string {
	total := 0
	for _, m := range g.Members {
		total += m.Count
	}
	ids := make([]string, 0, total)
	for _, m := range g.Members {
		for range m.Count {
			ids = append(ids, pad(orDefault(m.Prefix, "c"), len(ids), total))
		}
	}
	return ids
}

// Sequence steps through the rebalances of a scenario: one for a plain
// scenario or a generated one without rounds, Rounds.Count otherwise. Each
// step is a plain scenario (no generate section), so everything that runs
// plain scenarios runs each round unchanged.
//
// A Sequence is not safe for concurrent use.
type Sequence struct {
	gen    *Generate
	rng    *Rand
	round  int
	total  int
	topics []string // every generated topic, in order
	// members holds the current members, in id order, with what each one
	// subscribes to and will claim next round.
	members  []*Member
	number   int // members generated so far, for the next joiner's id
	width    int // the padding total for member ids
	forget   map[string]bool
	current  *Scenario
	joinSpec *MemberSpec
}

// Sequence validates s and returns its rebalances. For a scenario without
// generate, the only round is s itself.
func (s *Scenario) Sequence() (*Sequence, error) {
	if _, err := s.check(); err != nil {
		return nil, err
	}
	if s.Generate == nil {
		return &Sequence{total: 1, round: 1, current: s}, nil
	}
	q := &Sequence{gen: s.Generate, rng: NewRand(s.Generate.Seed), round: 1, total: 1, forget: map[string]bool{}}
	if r := s.Generate.Rounds; r != nil {
		q.total = r.Count
		for _, id := range r.Forget {
			q.forget[id] = true
		}
	}
	first := *s
	first.Generate = nil
	for _, t := range q.gen.Topics {
		for _, name := range topicNames(t) {
			count := t.Partitions
			if t.PartitionsMax != nil {
				count += int32(q.rng.IntN(int(*t.PartitionsMax-t.Partitions) + 1))
			}
			first.Topics = append(first.Topics, Topic{Name: name, PartitionCount: &count, ReplicationFactor: t.ReplicationFactor})
			q.topics = append(q.topics, name)
		}
	}
	ids := memberIDs(q.gen)
	q.width = len(ids)
	all := slices.Clone(q.topics)
	for _, spec := range q.gen.Members {
		for range spec.Count {
			id := ids[q.number]
			m := &Member{ID: id, Generation: -1, Rack: rackFor(spec.Racks, q.number)}
			switch spec.Subscribe {
			case "all":
				m.Topics = all
			case "random":
				m.Topics = q.randomSublist()
			default:
				m.Topics = spec.Topics
			}
			q.members = append(q.members, m)
			q.number++
		}
	}
	q.joinSpec = &q.gen.Members[0]
	if r := q.gen.Rounds; r != nil && r.JoinAs != nil {
		q.joinSpec = r.JoinAs
	}
	slices.SortFunc(q.members, func(a, b *Member) int { return strings.Compare(a.ID, b.ID) })
	first.Members = q.snapshot()
	q.current = &first
	return q, nil
}

func rackFor(racks []string, number int) string {
	if len(racks) == 0 {
		return ""
	}
	return racks[number%len(racks)]
}

// randomSublist is Kafka's getRandomSublist over all generated topics.
func (q *Sequence) randomSublist() []string {
	left := slices.Clone(q.topics)
	remove := q.rng.IntN(len(left))
	for range remove {
		i := q.rng.IntN(len(left))
		left = slices.Delete(left, i, i+1)
	}
	return left
}

// snapshot copies the current members for a round's scenario, so that
// later rounds do not change it. Their lists and maps stay shared with the
// sequence, which is why a round must be treated as read-only.
func (q *Sequence) snapshot() []Member {
	out := make([]Member, len(q.members))
	for i, m := range q.members {
		out[i] = *m
	}
	return out
}

// Rounds is the number of rebalances in the sequence.
func (q *Sequence) Rounds() int { return q.total }

// Round is the number of the current rebalance, from 1.
func (q *Sequence) Round() int { return q.round }

// Scenario returns the current round as a plain scenario. Its generation is
// the scenario's generation plus the round number minus one. It shares data
// with the sequence: read it, do not change it.
func (q *Sequence) Scenario() *Scenario { return q.current }

// Next moves to the next round given what the members received in the
// current one (an Output's Assignment and UserData; for a cooperative group,
// the assignment after withholding, since that is what members then own).
// It returns false when the sequence is over.
//
// For every member that stays, the coordinator's previous assignment is what
// it received; in a cooperative group the member also reports it as owned,
// with the current round's generation (an eager member has revoked it
// before rejoining). Then the group changes as Rounds describes.
func (q *Sequence) Next(received *Output) (bool, error) {
	if q.round >= q.total {
		return false, nil
	}
	if received == nil {
		return false, errors.New("scenario: Next needs the previous round's output")
	}
	prev := q.current
	r := q.gen.Rounds
	// An eager member revokes everything before it rejoins, so it reports
	// no owned partitions; only a cooperative one still holds what it got.
	cooperative := prev.ResolvedRebalanceProtocol() == abi.Cooperative
	for _, m := range q.members {
		got := received.Assignment[m.ID]
		m.Owned, m.Previous, m.UserData, m.Generation = nil, nil, "", -1
		if q.forget[m.ID] {
			continue
		}
		for _, topic := range slices.Sorted(maps.Keys(got)) {
			if len(got[topic]) == 0 {
				continue
			}
			if m.Previous == nil {
				m.Previous = map[string][]int32{}
			}
			m.Previous[topic] = slices.Clone(got[topic])
		}
		if cooperative {
			m.Owned = m.Previous
			m.Generation = prev.Generation
		}
		if r.EchoUserData {
			m.UserData = received.UserData[m.ID]
		}
	}
	// 1. leave
	for range q.rng.IntN(r.Leave + 1) {
		if len(q.members) <= 1 {
			break
		}
		i := q.rng.IntN(len(q.members))
		q.members = slices.Delete(q.members, i, i+1)
	}
	// 2. join
	for range q.rng.IntN(r.Join + 1) {
		m := &Member{ID: pad(orDefault(q.gen.Members[0].Prefix, "c"), q.number, q.width), Generation: -1, Rack: rackFor(q.joinSpec.Racks, q.number)}
		switch q.joinSpec.Subscribe {
		case "all":
			m.Topics = slices.Clone(q.topics)
		case "random":
			m.Topics = q.randomSublist()
		default:
			m.Topics = q.joinSpec.Topics
		}
		q.number++
		q.members = append(q.members, m)
	}
	slices.SortFunc(q.members, func(a, b *Member) int { return strings.Compare(a.ID, b.ID) })
	// 3. resubscribe
	for range q.rng.IntN(r.Resubscribe + 1) {
		q.members[q.rng.IntN(len(q.members))].Topics = q.randomSublist()
	}
	next := *prev
	next.Generation = prev.Generation + 1
	next.Members = q.snapshot()
	q.current = &next
	q.round++
	return true, nil
}

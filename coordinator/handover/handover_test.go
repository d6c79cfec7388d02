package handover

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// member describes a member for the examples: its claim and generation.
type member struct {
	owned       []abi.TopicPartitions
	gen         int32
	cooperative bool
}

func tp(topic int32, ps ...int32) abi.TopicPartitions {
	return abi.TopicPartitions{Topic: topic, Partitions: ps}
}

// request builds a request with topics t0 and t1 of 4 partitions each, and a
// deleted topic "gone" at index 2.
func request(members ...member) *abi.Request {
	req := &abi.Request{
		Generation:        5,
		RebalanceProtocol: abi.Cooperative,
		Topics: []abi.Topic{
			{Name: "t0", Exists: true, PartitionCount: 4},
			{Name: "t1", Exists: true, PartitionCount: 4},
			{Name: "gone"},
		},
	}
	for i, m := range members {
		req.Members = append(req.Members, abi.Member{
			MemberID:        string(rune('a' + i)),
			Cooperative:     m.cooperative,
			Topics:          []int32{0, 1, 2},
			OwnedGeneration: m.gen,
			Owned:           m.owned,
		})
	}
	return req
}

func assign(pairs ...any) *abi.Response {
	resp := &abi.Response{}
	for i := 0; i < len(pairs); i += 2 {
		resp.Members = append(resp.Members, abi.MemberAssignment{
			Member:     int32(pairs[i].(int)),
			Partitions: pairs[i+1].([]abi.TopicPartitions),
		})
	}
	return resp
}

func tps(list ...abi.TopicPartitions) []abi.TopicPartitions { return list }

func TestWithhold_Examples(t *testing.T) {
	tests := []struct {
		name     string
		req      *abi.Request
		target   *abi.Response
		want     *abi.Response
		withheld int
	}{
		{
			name:   "EagerMembersReportNothingSoAssignmentIsTarget",
			req:    request(member{gen: -1}, member{gen: -1}),
			target: assign(0, tps(tp(0, 0, 1), tp(1, 0, 1)), 1, tps(tp(0, 2, 3), tp(1, 2, 3))),
			want:   assign(0, tps(tp(0, 0, 1), tp(1, 0, 1)), 1, tps(tp(0, 2, 3), tp(1, 2, 3))),
		},
		{
			name: "PartitionMovingToAnotherMemberIsWithheld",
			req: request(
				member{owned: tps(tp(0, 0, 1, 2, 3)), gen: 4, cooperative: true},
				member{gen: -1, cooperative: true},
			),
			target:   assign(0, tps(tp(0, 0, 1)), 1, tps(tp(0, 2, 3))),
			want:     assign(0, tps(tp(0, 0, 1)), 1, tps()),
			withheld: 2,
		},
		{
			name: "MemberKeepsWhatItHoldsItself",
			req: request(
				member{owned: tps(tp(0, 0, 1), tp(1, 3)), gen: 4},
				member{owned: tps(tp(0, 2, 3)), gen: 4},
			),
			target:   assign(0, tps(tp(0, 0, 1), tp(1, 2, 3)), 1, tps(tp(0, 2, 3), tp(1, 0, 1))),
			want:     assign(0, tps(tp(0, 0, 1), tp(1, 2, 3)), 1, tps(tp(0, 2, 3), tp(1, 0, 1))),
			withheld: 0,
		},
		{
			name: "StaleClaimDoesNotBlockTheRightfulOwner",
			req: request(
				member{owned: tps(tp(0, 0, 1)), gen: 3}, // zombie from generation 3
				member{owned: tps(tp(0, 2)), gen: 4},
				member{gen: -1},
			),
			target:   assign(1, tps(tp(0, 0, 2)), 2, tps(tp(0, 1, 3))),
			want:     assign(1, tps(tp(0, 0, 2)), 2, tps(tp(0, 1, 3))),
			withheld: 0,
		},
		{
			name: "ConflictingClaimsWithholdFromEveryoneIncludingAHolder",
			req: request(
				member{owned: tps(tp(0, 0, 1)), gen: 4},
				member{owned: tps(tp(0, 1)), gen: 4},
				member{gen: -1},
			),
			target:   assign(0, tps(tp(0, 0, 1)), 2, tps(tp(0, 2, 3))),
			want:     assign(0, tps(tp(0, 0)), 2, tps(tp(0, 2, 3))),
			withheld: 1,
		},
		{
			name: "EagerFlaggedMemberThatReportsOwnedStillBlocks",
			req: request(
				member{owned: tps(tp(1, 0)), gen: 4, cooperative: false},
				member{gen: -1, cooperative: true},
			),
			target:   assign(1, tps(tp(1, 0, 1))),
			want:     assign(1, tps(tp(1, 1))),
			withheld: 1,
		},
		{
			name: "ClaimsWithoutGenerationHoldWhenNoClaimHasOne",
			req: request(
				member{owned: tps(tp(0, 3)), gen: -1},
				member{},
			),
			target:   assign(1, tps(tp(0, 3))),
			want:     assign(1, tps()),
			withheld: 1,
		},
		{
			name: "ClaimWithoutGenerationLosesToOneWithGeneration",
			req: request(
				member{owned: tps(tp(0, 3)), gen: -1},
				member{owned: tps(tp(1, 0)), gen: 2},
				member{gen: -1},
			),
			target:   assign(2, tps(tp(0, 3), tp(1, 0))),
			want:     assign(2, tps(tp(0, 3))),
			withheld: 1,
		},
		{
			name: "NewestGenerationComesOnlyFromMembersThatReportPartitions",
			req: request(
				member{owned: tps(tp(0, 0)), gen: 4},
				member{owned: tps(tp(0)), gen: 9}, // an empty claim sets no generation
				member{gen: -1},
			),
			target:   assign(2, tps(tp(0, 0, 1))),
			want:     assign(2, tps(tp(0, 1))),
			withheld: 1,
		},
		{
			name: "MemberListingAPartitionTwiceStillHoldsItAlone",
			req: request(
				member{owned: tps(tp(0, 1, 1), tp(0, 1)), gen: 4},
				member{gen: -1},
			),
			target:   assign(0, tps(tp(0, 1)), 1, tps(tp(0, 0))),
			want:     assign(0, tps(tp(0, 1)), 1, tps(tp(0, 0))),
			withheld: 0,
		},
		{
			name: "ClaimOnDeletedTopicSetsTheGenerationButBlocksNothing",
			req: request(
				member{owned: tps(tp(2, 7)), gen: 6},
				member{owned: tps(tp(0, 0)), gen: 5}, // now stale
				member{gen: -1},
			),
			target:   assign(2, tps(tp(0, 0, 1))),
			want:     assign(2, tps(tp(0, 0, 1))),
			withheld: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, withheld := Withhold(tt.req, tt.target)
			if withheld != tt.withheld {
				t.Errorf("withheld = %d, want %d", withheld, tt.withheld)
			}
			if !equalAssignment(got, tt.want) {
				t.Errorf("assignment = %v, want %v", got.Members, tt.want.Members)
			}
		})
	}
}

// equalAssignment compares responses by what each member receives, so that
// an empty and a missing topic list are the same.
func equalAssignment(a, b *abi.Response) bool {
	return reflect.DeepEqual(flatten(a), flatten(b)) && a.Error == b.Error
}

func flatten(r *abi.Response) map[int32]map[[2]int32]bool {
	out := make(map[int32]map[[2]int32]bool)
	for _, ma := range r.Members {
		if out[ma.Member] == nil {
			out[ma.Member] = make(map[[2]int32]bool)
		}
		for _, tp := range ma.Partitions {
			for _, p := range tp.Partitions {
				out[ma.Member][[2]int32{tp.Topic, p}] = true
			}
		}
	}
	return out
}

func TestWithhold_UserDataAndEmptiedMembersPassThrough(t *testing.T) {
	req := request(member{owned: tps(tp(0, 0, 1, 2, 3)), gen: 4}, member{gen: -1})
	target := &abi.Response{Members: []abi.MemberAssignment{
		{Member: 0, Partitions: tps(tp(0, 0, 1)), UserData: []byte("zero")},
		{Member: 1, Partitions: tps(tp(0, 2, 3)), UserData: []byte("one")},
	}}
	got, withheld := Withhold(req, target)
	if withheld != 2 {
		t.Fatalf("withheld = %d, want 2", withheld)
	}
	if len(got.Members) != 2 {
		t.Fatalf("got %d member entries, want 2 (an emptied member keeps its entry)", len(got.Members))
	}
	for i, ma := range got.Members {
		if ma.Member != target.Members[i].Member || string(ma.UserData) != string(target.Members[i].UserData) {
			t.Errorf("entry %d = member %d user data %q, want member %d user data %q",
				i, ma.Member, ma.UserData, target.Members[i].Member, target.Members[i].UserData)
		}
	}
	if len(got.Members[1].Partitions) != 0 {
		t.Errorf("member 1 receives %v, want nothing", got.Members[1].Partitions)
	}
}

func TestWithhold_ErrorResponseIsCopiedWithNothingWithheld(t *testing.T) {
	req := request(member{owned: tps(tp(0, 0)), gen: 1})
	target := &abi.Response{Error: "cannot assign"}
	got, withheld := Withhold(req, target)
	if got == target || got.Error != target.Error || withheld != 0 {
		t.Errorf("Withhold(error) = %p %+v, %d; want a copy of %p with nothing withheld", got, got, withheld, target)
	}
}

// TestWithhold_Invariants checks the rule on random groups: members with
// random claims at a few generations, some conflicting, and random targets.
func TestWithhold_Invariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		req, target := randomCase(rng)
		reqBefore, targetBefore := cloneRequest(req), cloneResponse(target)

		got, withheld := Withhold(req, target)

		if !reflect.DeepEqual(req, reqBefore) || !reflect.DeepEqual(target, targetBefore) {
			t.Fatalf("case %d: Withhold modified its inputs", iter)
		}
		holders := referenceHolders(req)
		wantSet, gotSet := flatten(target), flatten(got)
		total, kept := 0, 0
		for m, parts := range wantSet {
			for part := range parts {
				total++
				blockedBy := false
				for h := range holders[part] {
					if h != m {
						blockedBy = true
					}
				}
				switch {
				case blockedBy && gotSet[m][part]:
					t.Fatalf("case %d: member %d receives %v while another member holds it (holders %v)", iter, m, part, holders[part])
				case !blockedBy && !gotSet[m][part]:
					t.Fatalf("case %d: member %d is denied %v that no other member holds (holders %v)", iter, m, part, holders[part])
				}
			}
		}
		for m, parts := range gotSet {
			for part := range parts {
				kept++
				if !wantSet[m][part] {
					t.Fatalf("case %d: member %d receives %v, which is not in its target", iter, m, part)
				}
			}
		}
		if withheld != total-kept {
			t.Fatalf("case %d: withheld = %d, want |target| - |assignment| = %d", iter, withheld, total-kept)
		}
		if len(got.Members) != len(target.Members) {
			t.Fatalf("case %d: %d member entries, want %d", iter, len(got.Members), len(target.Members))
		}
		for i := range got.Members {
			if got.Members[i].Member != target.Members[i].Member || !slices.Equal(got.Members[i].UserData, target.Members[i].UserData) {
				t.Fatalf("case %d: entry %d lost its member or user data", iter, i)
			}
		}
	}
}

// referenceHolders is the rule written as plainly as possible: the set of
// members holding each partition at the newest reported generation.
func referenceHolders(req *abi.Request) map[[2]int32]map[int32]bool {
	newest, found := int32(0), false
	for _, m := range req.Members {
		n := 0
		for _, tp := range m.Owned {
			n += len(tp.Partitions)
		}
		if n > 0 && (!found || m.OwnedGeneration > newest) {
			newest, found = m.OwnedGeneration, true
		}
	}
	out := make(map[[2]int32]map[int32]bool)
	for i, m := range req.Members {
		if !found || m.OwnedGeneration != newest {
			continue
		}
		for _, tp := range m.Owned {
			for _, p := range tp.Partitions {
				k := [2]int32{tp.Topic, p}
				if out[k] == nil {
					out[k] = make(map[int32]bool)
				}
				out[k][int32(i)] = true
			}
		}
	}
	return out
}

// randomCase makes a group whose members claim partitions at generations 2
// to 4 (or report none), with occasional double claims, and a target that
// gives each partition to at most one member.
func randomCase(rng *rand.Rand) (*abi.Request, *abi.Response) {
	req := &abi.Request{Generation: 5}
	nTopics := 1 + rng.IntN(4)
	for i := 0; i < nTopics; i++ {
		req.Topics = append(req.Topics, abi.Topic{Name: string(rune('a' + i)), Exists: true, PartitionCount: int32(rng.IntN(12))})
	}
	nMembers := 1 + rng.IntN(6)
	for i := 0; i < nMembers; i++ {
		m := abi.Member{MemberID: string(rune('m' + i)), OwnedGeneration: -1}
		if rng.IntN(4) > 0 {
			m.OwnedGeneration = int32(2 + rng.IntN(3))
			for t := range req.Topics {
				var ps []int32
				for p := int32(0); p < req.Topics[t].PartitionCount; p++ {
					if rng.IntN(nMembers+1) == 0 {
						ps = append(ps, p)
					}
				}
				if len(ps) > 0 {
					m.Owned = append(m.Owned, abi.TopicPartitions{Topic: int32(t), Partitions: ps})
					if rng.IntN(10) == 0 { // a sloppy client repeating itself
						m.Owned = append(m.Owned, abi.TopicPartitions{Topic: int32(t), Partitions: ps[:1]})
					}
				}
			}
		}
		req.Members = append(req.Members, m)
	}
	target := &abi.Response{}
	perMember := make([]map[int32][]int32, nMembers)
	for t := range req.Topics {
		for p := int32(0); p < req.Topics[t].PartitionCount; p++ {
			if rng.IntN(8) == 0 {
				continue // left unassigned
			}
			m := rng.IntN(nMembers)
			if perMember[m] == nil {
				perMember[m] = make(map[int32][]int32)
			}
			perMember[m][int32(t)] = append(perMember[m][int32(t)], p)
		}
	}
	for m, topics := range perMember {
		if topics == nil && rng.IntN(2) == 0 {
			continue
		}
		ma := abi.MemberAssignment{Member: int32(m)}
		if rng.IntN(3) == 0 {
			ma.UserData = []byte{byte(m)}
		}
		for t := int32(0); t < int32(nTopics); t++ {
			if ps := topics[t]; len(ps) > 0 {
				ma.Partitions = append(ma.Partitions, abi.TopicPartitions{Topic: t, Partitions: ps})
			}
		}
		target.Members = append(target.Members, ma)
	}
	rng.Shuffle(len(target.Members), func(i, j int) {
		target.Members[i], target.Members[j] = target.Members[j], target.Members[i]
	})
	return req, target
}

func cloneTPs(tps []abi.TopicPartitions) []abi.TopicPartitions {
	if tps == nil {
		return nil
	}
	out := make([]abi.TopicPartitions, len(tps))
	for i, tp := range tps {
		out[i] = abi.TopicPartitions{Topic: tp.Topic, Partitions: slices.Clone(tp.Partitions)}
	}
	return out
}

func cloneRequest(r *abi.Request) *abi.Request {
	c := *r
	c.Topics = slices.Clone(r.Topics)
	c.Members = slices.Clone(r.Members)
	for i := range c.Members {
		c.Members[i].Owned = cloneTPs(r.Members[i].Owned)
	}
	return &c
}

func cloneResponse(r *abi.Response) *abi.Response {
	c := *r
	c.Members = slices.Clone(r.Members)
	for i := range c.Members {
		c.Members[i].Partitions = cloneTPs(r.Members[i].Partitions)
		c.Members[i].UserData = slices.Clone(r.Members[i].UserData)
	}
	return &c
}

// BenchmarkWithhold_2000Members1MPartitions measures a cooperative rebalance
// of Kafka's large-assignor size: 100 topics of 10,000 partitions, 2,000
// members that each own a run of 500, and a target that moves one partition
// in ten to the next member.
func BenchmarkWithhold_2000Members1MPartitions(b *testing.B) {
	const members, topics, perTopic = 2000, 100, 10000
	req := &abi.Request{Generation: 8, RebalanceProtocol: abi.Cooperative}
	for t := 0; t < topics; t++ {
		req.Topics = append(req.Topics, abi.Topic{Name: "t", Exists: true, PartitionCount: perTopic})
	}
	owned := make([][]abi.TopicPartitions, members)
	next := make([][]abi.TopicPartitions, members)
	for t := int32(0); t < topics; t++ {
		for p := int32(0); p < perTopic; p++ {
			flat := int(t)*perTopic + int(p)
			m := flat / (topics * perTopic / members)
			to := m
			if p%10 == 0 {
				to = (m + 1) % members
			}
			owned[m] = addPartition(owned[m], t, p)
			next[to] = addPartition(next[to], t, p)
		}
	}
	target := &abi.Response{}
	for m := 0; m < members; m++ {
		req.Members = append(req.Members, abi.Member{MemberID: "m", Cooperative: true, OwnedGeneration: 7, Owned: owned[m]})
		target.Members = append(target.Members, abi.MemberAssignment{Member: int32(m), Partitions: next[m]})
	}
	b.ResetTimer()
	for b.Loop() {
		_, withheld := Withhold(req, target)
		if withheld == 0 {
			b.Fatal("nothing withheld")
		}
	}
}

func addPartition(tps []abi.TopicPartitions, t, p int32) []abi.TopicPartitions {
	if n := len(tps); n > 0 && tps[n-1].Topic == t {
		tps[n-1].Partitions = append(tps[n-1].Partitions, p)
		return tps
	}
	return append(tps, abi.TopicPartitions{Topic: t, Partitions: []int32{p}})
}

// groupedCase builds a cooperative request and target over many topics in
// which members own, and are given, the same partitions across runs of
// topics, so that the grouped layout has lists to make.
func groupedCase(rng *rand.Rand) (*abi.Request, *abi.Response) {
	const topics, partitions = 9, 6
	req := &abi.Request{Generation: 3, RebalanceProtocol: abi.Cooperative}
	for t := range topics {
		req.Topics = append(req.Topics, abi.Topic{Name: string(rune('a' + t)), Exists: true, PartitionCount: partitions})
	}
	all := make([]int32, topics)
	for t := range all {
		all[t] = int32(t)
	}
	// pick returns, for each topic, a partition list that mostly repeats
	// across topics and sometimes differs.
	pick := func() []abi.TopicPartitions {
		base := []int32{int32(rng.IntN(partitions))}
		if rng.IntN(2) == 0 {
			base = append(base, int32(partitions-1))
			base = slices.Compact(base)
		}
		var out []abi.TopicPartitions
		for t := range topics {
			if rng.IntN(6) == 0 {
				continue
			}
			ps := base
			if rng.IntN(5) == 0 {
				ps = []int32{int32(rng.IntN(partitions))}
			}
			out = append(out, abi.TopicPartitions{Topic: int32(t), Partitions: ps})
		}
		return out
	}
	members := 2 + rng.IntN(4)
	target := &abi.Response{}
	for m := range members {
		req.Members = append(req.Members, abi.Member{MemberID: string(rune('m' + m)), Cooperative: true, Topics: all, OwnedGeneration: 3, Owned: pick()})
		target.Members = append(target.Members, abi.MemberAssignment{Member: int32(m), Partitions: pick()})
	}
	return req, target
}

func TestWithhold_GroupedLayoutWithholdsWhatThePlainOneDoes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	lists := 0
	for iter := 0; iter < 2000; iter++ {
		req, target := groupedCase(rng)
		want, wantN := Withhold(req, target)

		var g abi.Grouper
		gt := &abi.Response{}
		for _, ma := range target.Members {
			gt.Members = append(gt.Members, abi.MemberAssignment{Member: ma.Member, Partitions: g.Group(nil, ma.Partitions)})
		}
		gt.TopicLists = g.Lists()
		lists += len(gt.TopicLists)
		greq := req.Grouped()
		got, gotN := Withhold(greq, gt)
		if gotN != wantN {
			t.Fatalf("case %d: grouped withholds %d, plain %d", iter, gotN, wantN)
		}
		if !equalAssignment(got.Expanded(), want) {
			t.Fatalf("case %d: grouped gives %v, plain %v", iter, flatten(got.Expanded()), flatten(want))
		}
	}
	if lists == 0 {
		t.Fatal("no case made a topic list: the test does not exercise the grouped layout")
	}
}

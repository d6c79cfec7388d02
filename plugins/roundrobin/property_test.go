package roundrobin

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// randomRequest makes a random group: some topics missing or empty, some
// static members, identical or mixed subscriptions, and sometimes many
// topics with sparse subscriptions. Topic names are in random order relative
// to the topic table.
func randomRequest(r *rand.Rand) *abi.Request {
	req := &abi.Request{}
	nt, density := 1+r.IntN(10), 2
	if r.IntN(4) == 0 {
		nt, density = 20+r.IntN(40), 12
	}
	for i := range nt {
		t := abi.Topic{Name: fmt.Sprintf("%c%d", 'a'+r.IntN(26), i)}
		if r.IntN(8) > 0 {
			t.Exists = true
			t.PartitionCount = int32(r.IntN(30))
		}
		req.Topics = append(req.Topics, t)
	}
	nm := 1 + r.IntN(15)
	uniform := r.IntN(3) == 0
	ids := r.Perm(1000)
	for i := range nm {
		m := abi.Member{MemberID: fmt.Sprintf("m%03d", ids[i]), OwnedGeneration: -1}
		if r.IntN(3) == 0 {
			m.InstanceID = fmt.Sprintf("i%03d", ids[len(ids)-1-i])
		}
		for ti := range nt {
			if uniform || r.IntN(density) == 0 {
				m.Topics = append(m.Topics, int32(ti))
			}
		}
		req.Members = append(req.Members, m)
	}
	return req
}

// referenceRoundRobin is a literal model of Kafka's RoundRobinAssignor: sort
// the members, lay out every partition by topic name, and walk a circular
// iterator, skipping members that do not subscribe. It returns member id ->
// topic name -> partitions.
func referenceRoundRobin(req *abi.Request) map[string]map[string][]int32 {
	members := slices.Clone(req.Members)
	sort.SliceStable(members, func(i, j int) bool {
		a, b := members[i], members[j]
		switch {
		case a.InstanceID != "" && b.InstanceID != "":
			return a.InstanceID < b.InstanceID
		case a.InstanceID != "":
			return true
		case b.InstanceID != "":
			return false
		}
		return a.MemberID < b.MemberID
	})
	subscribed := map[string]map[string]bool{}
	out := map[string]map[string][]int32{}
	topics := map[string]bool{}
	for _, m := range members {
		subscribed[m.MemberID] = map[string]bool{}
		out[m.MemberID] = map[string][]int32{}
		for _, t := range m.Topics {
			subscribed[m.MemberID][req.Topics[t].Name] = true
			topics[req.Topics[t].Name] = true
		}
	}
	count := map[string]int32{}
	for _, t := range req.Topics {
		if t.Exists {
			count[t.Name] = t.PartitionCount
		}
	}
	next := 0
	for _, topic := range slices.Sorted(maps.Keys(topics)) {
		for p := range count[topic] {
			for !subscribed[members[next].MemberID][topic] {
				next = (next + 1) % len(members)
			}
			id := members[next].MemberID
			out[id][topic] = append(out[id][topic], p)
			next = (next + 1) % len(members)
		}
	}
	return out
}

func sameAssignment(a, b map[string]map[string][]int32) bool {
	return maps.EqualFunc(a, b, func(x, y map[string][]int32) bool {
		return maps.EqualFunc(x, y, slices.Equal[[]int32])
	})
}

// TestRoundRobin_MatchesLiteralModelOfKafka compares the package, which
// jumps straight to each partition's owner, with a member-by-member walk of
// Kafka's circular iterator.
func TestRoundRobin_MatchesLiteralModelOfKafka(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 54))
	for i := range 600 {
		req := randomRequest(r)
		resp, err := Assign(req)
		if err != nil {
			t.Fatalf("scenario %d: %v", i, err)
		}
		checkValid(t, req, resp)
		if got, want := asMap(req, resp), referenceRoundRobin(req); !sameAssignment(got, want) {
			t.Fatalf("scenario %d:\n got %v\nwant %v", i, got, want)
		}
	}
}

// TestRoundRobin_IdenticalSubscriptionsBalanceWithinOne checks Kafka's
// promise for identical subscriptions: member partition counts differ by at
// most one.
func TestRoundRobin_IdenticalSubscriptionsBalanceWithinOne(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 54))
	for i := range 300 {
		req := randomRequest(r)
		for m := range req.Members {
			req.Members[m].Topics = req.Members[0].Topics
		}
		resp, err := Assign(req)
		if err != nil {
			t.Fatal(err)
		}
		checkValid(t, req, resp)
		lo, hi := -1, 0
		for _, ma := range resp.Members {
			n := 0
			for _, tp := range ma.Partitions {
				n += len(tp.Partitions)
			}
			if lo < 0 || n < lo {
				lo = n
			}
			hi = max(hi, n)
		}
		if hi-lo > 1 {
			t.Fatalf("scenario %d: members hold between %d and %d partitions", i, lo, hi)
		}
	}
}

// shuffled returns req with its member and topic tables in a random order,
// every topic reference remapped, so that it describes the same group.
func shuffled(r *rand.Rand, req *abi.Request) *abi.Request {
	out := *req
	perm := r.Perm(len(req.Topics)) // old index -> new index
	out.Topics = make([]abi.Topic, len(req.Topics))
	for old, nw := range perm {
		out.Topics[nw] = req.Topics[old]
	}
	out.Members = make([]abi.Member, len(req.Members))
	for i, old := range r.Perm(len(req.Members)) {
		m := req.Members[old]
		m.Topics = make([]int32, len(req.Members[old].Topics))
		for j, t := range req.Members[old].Topics {
			m.Topics[j] = int32(perm[t])
		}
		slices.Sort(m.Topics)
		out.Members[i] = m
	}
	return &out
}

// TestRoundRobin_SameResultWhateverTheRequestOrder checks that the
// assignment depends on member and topic identities only, not on where they
// sit in the request's tables.
func TestRoundRobin_SameResultWhateverTheRequestOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 54))
	for i := range 300 {
		req := randomRequest(r)
		want, err := Assign(req)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			req2 := shuffled(r, req)
			got, err := Assign(req2)
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, req2, got)
			if !sameAssignment(asMap(req2, got), asMap(req, want)) {
				t.Fatalf("scenario %d: shuffling the request changed the assignment:\n got %v\nwant %v", i, asMap(req2, got), asMap(req, want))
			}
		}
	}
}

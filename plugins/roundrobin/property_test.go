package roundrobin

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// roundRobinShape is what this package's random tests draw: some topics
// missing or empty, identical subscriptions in one group of three, and one
// group in four with many topics and sparse subscriptions.
func roundRobinShape() assignortest.Shape {
	return assignortest.Shape{
		Topics:          10,
		SparseOneIn:     4,
		MissingOneIn:    8,
		PartitionCounts: assignortest.Below(30),
		Members:         15,
		UniformOneIn:    3,
	}
}

// referenceRoundRobin is a literal model of Kafka's RoundRobinAssignor: sort
// the members, lay out every partition by topic name, and walk a circular
// iterator, skipping members that do not subscribe.
func referenceRoundRobin(req *abi.Request) assignortest.Plan {
	members := assignortest.KafkaSorted(req.Members)
	subscribed := map[string]map[string]bool{}
	out := assignortest.Plan{}
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

// TestRoundRobin_MatchesLiteralModelOfKafka compares the package, which
// jumps straight to each partition's owner, with a member-by-member walk of
// Kafka's circular iterator. It also checks that members' partition slices,
// which share a backing array, cannot overwrite each other through append.
func TestRoundRobin_MatchesLiteralModelOfKafka(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 54))
	for i := range 600 {
		req := assignortest.RandomGroup(r, roundRobinShape())
		resp := assignortest.Run(t, Assign, req)
		if got, want := assignortest.AsPlan(req, resp), referenceRoundRobin(req); !got.Equal(want) {
			t.Fatalf("scenario %d:\n got %v\nwant %v", i, got, want)
		}
		assignortest.CheckAppendSafe(t, req, resp)
	}
}

// TestRoundRobin_IdenticalSubscriptionsBalanceWithinOne checks Kafka's
// promise for identical subscriptions: member partition counts differ by at
// most one.
func TestRoundRobin_IdenticalSubscriptionsBalanceWithinOne(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 54))
	for range 300 {
		req := assignortest.RandomGroup(r, roundRobinShape())
		for m := range req.Members {
			req.Members[m].Topics = req.Members[0].Topics
		}
		assignortest.CheckMemberBalance(t, assignortest.Run(t, Assign, req))
	}
}

// TestRoundRobin_SameResultWhateverTheRequestOrder checks that the
// assignment depends on member and topic identities only, not on where they
// sit in the request's tables.
func TestRoundRobin_SameResultWhateverTheRequestOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 54))
	for i := range 300 {
		req := assignortest.RandomGroup(r, roundRobinShape())
		want := assignortest.AsPlan(req, assignortest.Run(t, Assign, req))
		for range 3 {
			req2 := assignortest.Shuffled(r, req)
			if got := assignortest.AsPlan(req2, assignortest.Run(t, Assign, req2)); !got.Equal(want) {
				t.Fatalf("scenario %d: shuffling the request changed the assignment:\n got %v\nwant %v", i, got, want)
			}
		}
	}
}

package roundrobin_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	"github.com/wasmassign/wasmassign/plugins/roundrobin"
)

// These tests hold the package to franz-go's kgo.RoundRobinBalancer, an
// independent implementation of Kafka's round-robin assignor. They live in
// an external test package so that the assignor itself never imports
// franz-go (it must build for wasip1 with the standard library only).
//
// The one difference: kgo's round-robin balancer walks the members in the
// order it is given them. kgo's own group leader sorts them first, by
// instance id and then member id, exactly as Kafka does, so a kgo client
// agrees with Kafka; code that calls MemberBalancer directly with unsorted
// members does not. TestRoundRobin_KgoFollowsTheOrderItIsGiven pins this down.

// TestRoundRobin_MatchesKgoRoundRobinBalancer compares the package with
// kgo's round-robin balancer on random groups, with kgo given the members in
// Kafka's order as its group leader gives them.
func TestRoundRobin_MatchesKgoRoundRobinBalancer(t *testing.T) {
	assignortest.CheckMatchesKgo(t, roundrobin.Assign, kgo.RoundRobinBalancer(), rand.New(rand.NewPCG(4, 54)), 300, assignortest.KafkaSorted)
}

// TestRoundRobin_KgoFollowsTheOrderItIsGiven shows where kgo and Kafka part:
// given members in an arbitrary order, kgo's balancer deals to them in that
// order, while Kafka (and this package) sorts them. kgo's answer is then
// exactly Kafka's answer for a group whose ids happen to sort in the order
// kgo was given.
func TestRoundRobin_KgoFollowsTheOrderItIsGiven(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 54))
	differ := 0
	for i := range 200 {
		req := assignortest.RandomGroup(r, assignortest.KgoShape())
		given := slices.Clone(req.Members)
		r.Shuffle(len(given), func(a, b int) { given[a], given[b] = given[b], given[a] })
		got := assignortest.KgoPlan(t, kgo.RoundRobinBalancer(), req, given)

		// The same group, renamed so that Kafka's order is the given order.
		renamed := *req
		renamed.Members = slices.Clone(given)
		back := map[string]string{}
		for k := range renamed.Members {
			id := fmt.Sprintf("member-%04d", k)
			back[id] = renamed.Members[k].MemberID
			renamed.Members[k].MemberID, renamed.Members[k].InstanceID = id, ""
		}
		want := assignortest.Plan{}
		for id, plan := range assignortest.AsPlan(&renamed, assignortest.Run(t, roundrobin.Assign, &renamed)) {
			want[back[id]] = plan
		}
		if !got.Equal(want) {
			t.Fatalf("scenario %d: kgo did not deal in the order it was given:\n kgo %v\nwant %v", i, got, want)
		}
		if !got.Equal(assignortest.AsPlan(req, assignortest.Run(t, roundrobin.Assign, req))) {
			differ++
		}
	}
	// The difference is real: on most shuffled inputs kgo's answer is not
	// Kafka's.
	if differ < 100 {
		t.Fatalf("kgo matched Kafka's order-independent answer on %d of 200 shuffled inputs; expected most to differ", 200-differ)
	}
}

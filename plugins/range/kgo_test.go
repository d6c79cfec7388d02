package rangeassignor_test

import (
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
)

// These tests hold the package to franz-go's kgo.RangeBalancer, an
// independent implementation of Kafka's range assignor, on groups without
// racks. They live in an external test package so that the assignor itself
// never imports franz-go (it must build for wasip1 with the standard
// library only).
//
// Known differences between kgo and Kafka, none of which shows up here:
//   - kgo's range balancer has its own rack mode, used only with
//     kgo.BalanceRacks() and fed by the client's metadata cache: it matches a
//     member's rack against the partition leader's rack only, assigns per
//     topic with no co-partitioning, and fixes the extra partition to the
//     first P%C members instead of the first members to go above the base
//     quota. KIP-881 (and this package) use every replica's rack,
//     co-partition topics with equal subscribers and partition counts, and
//     move the extra partition to whichever member first exceeds the base.
//     kgo's rack input is unexported, so it cannot be driven from here.
//   - Without racks the two agree exactly, whatever order kgo gets its
//     members in, because kgo sorts each topic's members itself.

// TestRange_MatchesKgoRangeBalancer compares the package with kgo's range
// balancer on random groups without racks, feeding kgo the members both in
// Kafka's order and in the request's random order.
func TestRange_MatchesKgoRangeBalancer(t *testing.T) {
	assignortest.CheckMatchesKgo(t, rangeassignor.Assign, kgo.RangeBalancer(), rand.New(rand.NewPCG(4, 881)), 300,
		assignortest.KafkaSorted, assignortest.AsGiven)
}

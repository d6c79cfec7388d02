package rangeassignor

import (
	"fmt"
	"slices"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// withOptions is the assignor with test-only switches set.
func withOptions(opt options) assignortest.AssignFunc {
	return func(req *abi.Request) (*abi.Response, error) { return assign(req, opt) }
}

// bothPreferences are the two settings of preferRackAwareLogic, for cases
// whose answer must not depend on it.
func bothPreferences() []options {
	return []options{{preferRackAware: true}, {}}
}

// String names the options in subtest names.
func (o options) String() string {
	return fmt.Sprintf("preferRackAware=%v", o.preferRackAware)
}

// rangeShape is what this package's random tests draw: partition counts
// from a short list, so that topics with equal counts, and so
// co-partitioned topics, are common; identical subscriptions often, for the
// same reason; and one group in five with many topics and sparse
// subscriptions.
func rangeShape(withRacks bool) assignortest.Shape {
	return assignortest.Shape{
		Topics:          8,
		SparseOneIn:     5,
		MissingOneIn:    10,
		PartitionCounts: []int32{0, 1, 2, 3, 4, 4, 6, 6, 8, 12, 25},
		Racks:           withRacks,
		Members:         12,
		UniformOneIn:    2,
		UniformSubset:   true,
	}
}

// rackMismatches counts the partitions given to a member with a rack that
// have no replica on that rack, as Kafka's verifyRackAssignment does.
func rackMismatches(req *abi.Request, resp *abi.Response) int {
	brokerRack := map[int32]string{}
	for _, b := range req.Brokers {
		brokerRack[b.ID] = b.Rack
	}
	n := 0
	for _, ma := range resp.Members {
		rack := req.Members[ma.Member].Rack
		if rack == "" {
			continue
		}
		for _, tp := range ma.Partitions {
			for _, p := range tp.Partitions {
				if !slices.ContainsFunc(req.Replicas(tp.Topic, p), func(b int32) bool { return brokerRack[b] == rack }) {
					n++
				}
			}
		}
	}
	return n
}

// allRacks is AbstractPartitionAssignorTest.ALL_RACKS, one letter a rack.
const allRacks = "abcdef"

// rackAt is ALL_RACKS[i % ALL_RACKS.length].
func rackAt(i int) string {
	i %= len(allRacks)
	return allRacks[i : i+1]
}

// racks is AbstractPartitionAssignorTest.racks(n).
func racks(n int) []string {
	r := make([]string, n)
	for i := range r {
		r[i] = rackAt(i)
	}
	return r
}

// nullRacks is AbstractPartitionAssignorTest.nullRacks(n).
func nullRacks(n int) []string { return make([]string, n) }

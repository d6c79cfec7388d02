package assignortest

import (
	"slices"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// AllRacks is AbstractPartitionAssignorTest.ALL_RACKS, one letter a rack.
const AllRacks = "abcdef"

// RackAt is ALL_RACKS[i % ALL_RACKS.length].
func RackAt(i int) string {
	i %= len(AllRacks)
	return AllRacks[i : i+1]
}

// Racks is AbstractPartitionAssignorTest.racks(n): the first n racks of
// AllRacks, around again past the sixth.
func Racks(n int) []string {
	r := make([]string, n)
	for i := range r {
		r[i] = RackAt(i)
	}
	return r
}

// NullRacks is AbstractPartitionAssignorTest.nullRacks(n): n times no rack.
func NullRacks(n int) []string { return make([]string, n) }

// RackConfig is AbstractPartitionAssignorTest.RackConfig: which side of the
// cluster knows its racks. Kafka runs many assignor tests once per config.
type RackConfig int

// The configs, in Kafka's order.
const (
	NoBrokerRack RackConfig = iota
	NoConsumerRack
	BrokerAndConsumerRack
)

// AllRackConfigs returns every RackConfig, in Kafka's order.
func AllRackConfigs() []RackConfig {
	return []RackConfig{NoBrokerRack, NoConsumerRack, BrokerAndConsumerRack}
}

// String is Kafka's name of the config, for subtest names.
func (c RackConfig) String() string {
	return [...]string{"NO_BROKER_RACK", "NO_CONSUMER_RACK", "BROKER_AND_CONSUMER_RACK"}[c]
}

// BrokerRacks returns the brokers' racks as the initializeRacks of Kafka's
// assignor tests lays them out for replication factor rf over racks broker
// racks: rf brokers without a rack under NoBrokerRack, otherwise racks*rf
// brokers, broker i on RackAt(i % racks). Used with a Placement of
// replication factor rf, it puts every partition on every rack when rf is
// at least racks.
func (c RackConfig) BrokerRacks(rf, racks int) []string {
	if c == NoBrokerRack {
		return NullRacks(rf)
	}
	brokers := make([]string, racks*rf)
	for i := range brokers {
		brokers[i] = RackAt(i % racks)
	}
	return brokers
}

// ConsumerRack is consumerRackId(i) over racks consumer racks: RackAt(i %
// racks), or no rack under NoConsumerRack.
func (c RackConfig) ConsumerRack(i, racks int) string {
	if c == NoConsumerRack {
		return ""
	}
	return RackAt(i % racks)
}

// RackMismatches counts the partitions that resp gives to a member with a
// rack although none of their replicas is on a broker of that rack, as
// Kafka's verifyRackAssignment does. Members without a rack never count.
func RackMismatches(req *abi.Request, resp *abi.Response) int {
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

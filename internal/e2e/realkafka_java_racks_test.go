package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/realkafka"
)

// javaCreatePlacedTopic creates topic with replicas[p] as partition p's
// replica list, bypassing the gateway, so that which racks hold which
// partition is the test's choice rather than the broker's.
func javaCreatePlacedTopic(ctx context.Context, t *testing.T, r *javaRig, topic string, replicas [][]int32) placement {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, rs := range replicas {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(p), rs
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(ctx, r.direct)
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
	if ec := resp.Topics[0].ErrorCode; ec != 0 {
		t.Fatalf("create topic %s: error code %d", topic, ec)
	}
	// Leaders are elected asynchronously: wait until every partition has
	// one, as the gateway's metadata will.
	return waitPlacement(ctx, t, r.direct, topic, len(replicas))
}

// javaRackLocal checks that every member of g reads only partitions with
// a replica in its own rack.
func javaRackLocal(g adminGroup, topic string, pl placement, brokers map[int32]string) error {
	for _, m := range g.Members {
		for _, p := range m.Assignment[topic] {
			racks := map[string]bool{}
			for _, id := range pl.replicas[p] {
				racks[brokers[id]] = true
			}
			if !racks[m.Rack] {
				return fmt.Errorf("generation %d: %s in rack %q reads %s/%d, whose replicas are in racks %v",
					g.Generation, m.ClientID, m.Rack, topic, p, slices.Sorted(maps.Keys(racks)))
			}
		}
	}
	return nil
}

// TestRealKafkaJava_RackAwareWithBrokerRacksFromTheUpstream runs Java
// CooperativeStickyAssignor members with client.rack through the gateway
// in front of three real brokers, one per rack (broker.rack), with no
// broker racks in the gateway's configuration. The gateway must learn the
// racks from the cluster's metadata: through a join and a leave, the
// assignment is what the plugin computes from the cluster's racks, and
// whenever every rack has one member each member reads only partitions
// with a replica in its rack. Every record is read once and no partition
// ever has two owners.
func TestRealKafkaJava_RackAwareWithBrokerRacksFromTheUpstream(t *testing.T) {
	ctx := testCtx(t, 300*time.Second)
	startCtx, cancel := context.WithTimeout(ctx, 200*time.Second)
	c := realkafka.Start(startCtx, t, realkafka.Options{Brokers: 3, Racks: []string{"az-a", "az-b", "az-c"}})
	cancel()
	brokers := map[int32]string{}
	for _, n := range c.Nodes {
		brokers[n.ID] = n.Rack
	}
	r := javaStartRig(ctx, t, c, testutil.GatewayConfig{
		// Unlike oneBrokerConfig, nothing about broker racks: they must
		// come from the upstream's own metadata.
		Brokers: c.Addrs(),
		Groups:  []testutil.GroupRule{{Match: "*"}},
	}.String(), "Apache Kafka "+c.Cache.Version+", 3 brokers with racks", brokers)
	r.record(t, "cooperative-sticky")

	const group, topic = "java-racks", "java-racks"
	// One replica per partition, two partitions per broker, so two per
	// rack. With one member per rack, each with a quota of two, Kafka's
	// rack-aware sticky rule (KIP-881) always ends fully rack-local: a
	// member keeps only owned partitions of its rack, and the rest go
	// first to the member of their rack. With two members in one rack the
	// greedy rule may not (a member keeps its first owned partitions by
	// number, whatever the joiner's rack), so there only the plugin's
	// answer is checked.
	var replicas [][]int32
	for p := range int32(javaParts) {
		replicas = append(replicas, []int32{p%3 + 1})
	}
	pl := javaCreatePlacedTopic(ctx, t, r, topic, replicas)
	start := func(name, rack string) *procMember {
		return r.startJava(t, javaSpec{group: group, topic: topic, assignors: javaCoop, clientID: group + "-" + name, rack: rack})
	}
	// settle waits for ms, checks the assignment against the plugin fed
	// the cluster's racks and, when local, that every member reads in its
	// own rack: that needs the racks of the brokers, which only the
	// upstream's metadata gave the gateway.
	settle := func(local bool, ms ...*procMember) adminGroup {
		t.Helper()
		g := r.javaSettle(t, group, topic, pl, javaProtoCoop, ms...)
		if local {
			if err := javaRackLocal(g, topic, pl, brokers); err != nil {
				t.Error(err)
			}
		}
		return g
	}

	a := start("a", "az-a")
	settle(false, a)
	b := start("b", "az-b")
	settle(false, a, b)
	cm := start("c", "az-c")
	settle(true, a, b, cm)
	produce(ctx, t, c.Addrs(), topic, 120)

	marks := memberMarks([]*procMember{a, b, cm})
	d := start("d", "az-a")
	settle(false, a, b, cm, d)
	checkUnmovedKept(t, topic, []*procMember{a, b, cm}, marks)
	produce(ctx, t, c.Addrs(), topic, 120)

	marks = memberMarks([]*procMember{b, cm, d})
	a.stop()
	settle(true, b, cm, d)
	checkUnmovedKept(t, topic, []*procMember{b, cm, d}, marks)
	produce(ctx, t, c.Addrs(), topic, 120)

	r.finish(t, group, topic, javaParts, []*procMember{a, b, cm, d})
}

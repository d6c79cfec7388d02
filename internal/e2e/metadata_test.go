package e2e

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
)

// TestMetadata_AReplicaMovedWithinItsRackCostsNoRebalance runs a rack-aware
// kgo cooperative-sticky group through the gateway in front of a kfake
// cluster of seven brokers on racks a, b, c, a, b, c, d, and moves a
// partition as a rebalancer such as Cruise Control does. kfake gives a
// partition led by broker n the replicas n, n+1 and n+2, so moving
// partition 0 from broker 0 to broker 3 changes every replica but keeps its
// set of replica racks, which is what Kafka's ConsumerCoordinator compares:
// no rebalance over several metadata refreshes. Moving it to broker 4
// (racks b, c, d) must rebalance.
func TestMetadata_AReplicaMovedWithinItsRackCostsNoRebalance(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 90*time.Second)
	cluster := eventsCluster(t, 7, 4)
	place := func(leader int32) {
		for p := int32(0); p < 4; p++ {
			l := p % 3
			if p == 0 {
				l = leader
			}
			if err := cluster.MoveTopicPartition("events", p, l); err != nil {
				t.Fatal(err)
			}
			cluster.SetFollowers("events", p, nil)
		}
	}
	place(0)
	cfg := testutil.GatewayConfig{
		Brokers:     cluster.ListenAddrs(),
		BrokerRacks: map[int32]string{0: "az-a", 1: "az-b", 2: "az-c", 3: "az-a", 4: "az-b", 5: "az-c", 6: "az-d"},
		Groups:      []testutil.GroupRule{{Match: "*"}},
	}.String()
	d := startDaemon(t, t.TempDir(), cfg)
	const group = "rack-moves"
	opts := kfakegroup.ConsumerOptions{
		Balancers: []kgo.GroupBalancer{kgo.CooperativeStickyBalancer()},
		Rack:      "az-a",
	}
	_, g := settledRig(ctx, t, d, group, opts, "a", "b")
	if g.Members[0].Rack != "az-a" {
		t.Fatalf("member rack %q: the group is not rack-aware, so the test shows nothing", g.Members[0].Rack)
	}

	place(3)                    // broker 3 is in az-a too
	time.Sleep(4 * time.Second) // four metadata refreshes (the test config's 1 s)
	if after, err := d.group(ctx, group); err != nil || after.Generation != g.Generation {
		t.Fatalf("after a move within the rack: generation %d (err %v), want %d: a rebalance Kafka would not make", after.Generation, err, g.Generation)
	}

	place(4) // replicas 4, 5, 6: racks b, c, d
	if err := kfakegroup.WaitFor(ctx, func() error {
		after, err := d.group(ctx, group)
		if err != nil {
			return err
		}
		if after.Generation == g.Generation {
			return fmt.Errorf("still generation %d after a move to another rack", after.Generation)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestMetadata_ATopicErrorIsNoDeletion has the upstream answer a subscribed
// topic with LEADER_NOT_AVAILABLE, as during an election, for a few
// metadata refreshes. The gateway keeps the topic's last known metadata:
// the group, a kgo range group through the gateway, does not rebalance,
// neither when the error starts (a dropped topic) nor when it ends (the
// topic back). The error is counted in
// wasmassign_topic_metadata_errors_total.
func TestMetadata_ATopicErrorIsNoDeletion(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 90*time.Second)
	cluster := eventsCluster(t, 1, 4)
	cfg := testutil.GatewayConfig{
		Brokers: cluster.ListenAddrs(),
		Groups:  []testutil.GroupRule{{Match: "*"}},
	}.String()
	d := startDaemon(t, t.TempDir(), cfg)
	const group = "topic-errors"
	_, g := settledRig(ctx, t, d, group, kfakegroup.ConsumerOptions{Balancers: []kgo.GroupBalancer{kgo.RangeBalancer()}}, "a", "b")

	var failing atomic.Bool
	failing.Store(true)
	cluster.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		if !failing.Load() {
			return nil, nil, false
		}
		r := req.(*kmsg.MetadataRequest)
		resp := r.ResponseKind().(*kmsg.MetadataResponse)
		for i, addr := range cluster.ListenAddrs() {
			host, port, _ := net.SplitHostPort(addr)
			p, _ := strconv.Atoi(port)
			b := kmsg.NewMetadataResponseBroker()
			b.NodeID, b.Host, b.Port = int32(i), host, int32(p)
			resp.Brokers = append(resp.Brokers, b)
		}
		for _, rt := range r.Topics {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.ErrorCode = rt.Topic, kerr.LeaderNotAvailable.Code
			resp.Topics = append(resp.Topics, mt)
		}
		return resp, nil, true
	})
	time.Sleep(3 * time.Second) // three of the gateway's refreshes (1 s)
	failing.Store(false)
	time.Sleep(2500 * time.Millisecond)
	after, err := d.group(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != g.Generation {
		t.Errorf("generation %d after a topic error came and went, want %d: a topic error read as a deletion", after.Generation, g.Generation)
	}
	body := d.metrics(t)
	if !strings.Contains(body, `wasmassign_topic_metadata_errors_total{error="LEADER_NOT_AVAILABLE"}`) {
		t.Error("the topic error is not counted in wasmassign_topic_metadata_errors_total")
	}
}

package proxy

import (
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProxy_KIP951EndpointsInProduceAndFetchAreRewritten sends Produce and
// Fetch to a broker that does not lead the partition: kfake answers
// NOT_LEADER with the leader's endpoint, which must name the proxy.
func TestProxy_KIP951EndpointsInProduceAndFetchAreRewritten(t *testing.T) {
	for _, mode := range responseModes {
		t.Run(mode.name, func(t *testing.T) { testKIP951Endpoints(t, mode.tweak) })
	}
}

func testKIP951Endpoints(t *testing.T, tweak func(*Options)) {
	e := startEnv(t, 4, tweak)
	leader := e.cluster.LeaderFor(testTopic, 0)

	boot := dialRaw(t, e.proxy.Addr())
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mresp := boot.roundTrip(md).(*kmsg.MetadataResponse)
	var topicID [16]byte
	var replicas []int32
	for _, tp := range mresp.Topics {
		if tp.Topic != nil && *tp.Topic == testTopic {
			topicID = tp.TopicID
			for _, p := range tp.Partitions {
				if p.Partition == 0 {
					replicas = p.Replicas
				}
			}
		}
	}
	// Produce: any broker but the leader; Fetch: one that does not even
	// follow the partition (followers serve fetches, KIP-392).
	var notLeader, notReplica int32 = -1, -1
	for _, b := range mresp.Brokers {
		if b.NodeID != leader && notLeader < 0 {
			notLeader = b.NodeID
		}
		if !slices.Contains(replicas, b.NodeID) {
			notReplica = b.NodeID
		}
	}
	if notLeader < 0 || notReplica < 0 {
		t.Fatalf("no suitable broker: leader %d, replicas %v", leader, replicas)
	}
	// Every endpoint is its node's proxy listener, and the leader is
	// among them.
	check := func(what string, nodes []int32, hosts []string, ports []int32) {
		t.Helper()
		if !slices.Contains(nodes, leader) {
			t.Errorf("%s: endpoints %v lack the leader %d", what, nodes, leader)
		}
		for i, node := range nodes {
			want, _ := e.proxy.BrokerAddr(node)
			if got := net.JoinHostPort(hosts[i], strconv.Itoa(int(ports[i]))); got != want {
				t.Errorf("%s: endpoint node %d at %s, want %s", what, node, got, want)
			}
		}
	}

	addr, _ := e.proxy.BrokerAddr(notLeader)
	r := dialRaw(t, addr)
	for v := int16(10); v <= kmsgMax(int16(kmsg.Produce)); v++ {
		pr := kmsg.NewPtrProduceRequest()
		pr.Version = v
		pr.Acks = 1
		pr.TimeoutMillis = 1000
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic, pt.TopicID = testTopic, topicID
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = []byte{}
		pt.Partitions = append(pt.Partitions, pp)
		pr.Topics = append(pr.Topics, pt)
		resp := r.roundTrip(pr).(*kmsg.ProduceResponse)
		var nodes, ports []int32
		var hosts []string
		for _, b := range resp.Brokers {
			nodes, hosts, ports = append(nodes, b.NodeID), append(hosts, b.Host), append(ports, b.Port)
		}
		check("Produce v"+strconv.Itoa(int(v)), nodes, hosts, ports)
	}

	addr, _ = e.proxy.BrokerAddr(notReplica)
	r = dialRaw(t, addr)
	for v := int16(16); v <= kmsgMax(int16(kmsg.Fetch)); v++ {
		fr := kmsg.NewPtrFetchRequest()
		fr.Version = v
		fr.MaxBytes = 1 << 20
		ft := kmsg.NewFetchRequestTopic()
		ft.TopicID = topicID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		fr.Topics = append(fr.Topics, ft)
		resp := r.roundTrip(fr).(*kmsg.FetchResponse)
		var nodes, ports []int32
		var hosts []string
		for _, b := range resp.Brokers {
			nodes, hosts, ports = append(nodes, b.NodeID), append(hosts, b.Host), append(ports, b.Port)
		}
		check("Fetch v"+strconv.Itoa(int(v)), nodes, hosts, ports)
	}
}

package proxy

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/internal/proxy/frame"
)

func TestProxy_KgoProducesAndConsumesInAGroupThroughProxyAddressesOnly(t *testing.T) {
	for _, mode := range responseModes {
		t.Run(mode.name, func(t *testing.T) { testProduceConsume(t, mode.tweak) })
	}
}

func testProduceConsume(t *testing.T, tweak func(*Options)) {
	e := startEnv(t, 3, tweak)
	prod := e.client(t, kgo.DefaultProduceTopic(testTopic))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const n = 2000
	for i := range n {
		prod.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 17)), Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce: %v", err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	cons := e.client(t, kgo.ConsumeTopics(testTopic), kgo.ConsumerGroup("g1"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := make(map[string]int)
	for len(seen) < n && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				t.Errorf("fetch %s/%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	if len(seen) != n {
		t.Fatalf("consumed %d distinct records, want %d", len(seen), n)
	}
	for v, k := range seen {
		if k != 1 {
			t.Errorf("record %s consumed %d times", v, k)
		}
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit through the proxy: %v", err)
	}
	// Every broker kgo learnt is reached through the client's dialer,
	// which refuses anything but a proxy listener.
	for _, b := range cons.DiscoveredBrokers() {
		if _, err := b.Request(ctx, kmsg.NewPtrApiVersionsRequest()); err != nil {
			t.Errorf("a broker kgo learnt, through the proxy: %v", err)
		}
	}
	if got := len(cons.DiscoveredBrokers()); got != 3 {
		t.Errorf("kgo discovered %d brokers, want 3", got)
	}
}

func TestProxy_BrokerAddressesRewrittenInEveryVersion(t *testing.T) {
	e := startEnv(t, 3, nil)
	ports := e.proxyPorts()
	upstream := map[string]bool{}
	for _, a := range e.cluster.ListenAddrs() {
		upstream[a] = true
	}
	check := func(what string, node int32, host string, port int32) {
		t.Helper()
		addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
		if upstream[addr] {
			t.Errorf("%s: node %d leaks the upstream address %s", what, node, addr)
		}
		if host != "127.0.0.1" || !ports[strconv.Itoa(int(port))] {
			t.Errorf("%s: node %d at %s, not a proxy address", what, node, addr)
		}
		want, _ := e.proxy.BrokerAddr(node)
		if addr != want {
			t.Errorf("%s: node %d at %s, its listener is %s", what, node, addr, want)
		}
	}
	r := dialRaw(t, e.proxy.Addr())

	for v := int16(0); v <= kmsg.NewPtrMetadataRequest().MaxVersion(); v++ {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		resp := r.roundTrip(req).(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 3 {
			t.Errorf("Metadata v%d: %d brokers, want 3", v, len(resp.Brokers))
		}
		for _, b := range resp.Brokers {
			check(fmt.Sprintf("Metadata v%d", v), b.NodeID, b.Host, b.Port)
		}
	}
	for v := int16(0); v <= 6; v++ {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = v
		req.CoordinatorKey = "g-a"
		req.CoordinatorKeys = []string{"g-a", "g-b", "g-c", "g-d"}
		resp := r.roundTrip(req).(*kmsg.FindCoordinatorResponse)
		what := fmt.Sprintf("FindCoordinator v%d", v)
		if v < 4 {
			if resp.ErrorCode != 0 {
				t.Errorf("%s: error %d", what, resp.ErrorCode)
			}
			check(what, resp.NodeID, resp.Host, resp.Port)
			continue
		}
		if len(resp.Coordinators) != 4 {
			t.Errorf("%s: %d coordinators, want 4", what, len(resp.Coordinators))
		}
		for _, c := range resp.Coordinators {
			check(what+" key "+c.Key, c.NodeID, c.Host, c.Port)
		}
	}
	for v := int16(0); v <= 2; v++ {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.Version = v
		resp := r.roundTrip(req).(*kmsg.DescribeClusterResponse)
		if len(resp.Brokers) != 3 {
			t.Errorf("DescribeCluster v%d: %d brokers, want 3", v, len(resp.Brokers))
		}
		for _, b := range resp.Brokers {
			check(fmt.Sprintf("DescribeCluster v%d", v), b.NodeID, b.Host, b.Port)
		}
	}
}

func TestProxy_ApiVersionsOffersOnlyWhatTheGatewaySpeaks(t *testing.T) {
	e := startEnv(t, 1, nil)
	r := dialRaw(t, e.proxy.Addr())
	maxAV := kmsg.NewPtrApiVersionsRequest().MaxVersion()
	for v := int16(0); v <= maxAV; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
		resp := r.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("ApiVersions v%d: error %d", v, resp.ErrorCode)
		}
		keys := map[int16]bool{}
		for _, k := range resp.ApiKeys {
			keys[k.ApiKey] = true
			if k.ApiKey == int16(kmsg.ConsumerGroupHeartbeat) || k.ApiKey == int16(kmsg.ConsumerGroupDescribe) {
				t.Errorf("ApiVersions v%d offers KIP-848 key %d", v, k.ApiKey)
			}
			kr := kmsg.RequestForKey(k.ApiKey)
			if kr == nil {
				t.Errorf("ApiVersions v%d offers key %d that the gateway cannot parse", v, k.ApiKey)
				continue
			}
			if k.MaxVersion > kr.MaxVersion() || k.MinVersion > k.MaxVersion {
				t.Errorf("ApiVersions v%d: key %d range v%d-v%d, gateway max v%d", v, k.ApiKey, k.MinVersion, k.MaxVersion, kr.MaxVersion())
			}
		}
		for _, want := range []kmsg.Key{kmsg.Produce, kmsg.Fetch, kmsg.Metadata, kmsg.FindCoordinator, kmsg.JoinGroup, kmsg.ApiVersions} {
			if !keys[want.Int16()] {
				t.Errorf("ApiVersions v%d lacks %s", v, want.Name())
			}
		}
	}

	// KIP-511: a version the gateway does not know gets a v0
	// UNSUPPORTED_VERSION answer naming the ApiVersions range.
	future := kmsg.NewPtrApiVersionsRequest()
	future.Version = maxAV + 1
	r.send(future, 9)
	v0 := kmsg.NewPtrApiVersionsRequest()
	v0.Version = 0
	corr, resp := r.recv(v0)
	av := resp.(*kmsg.ApiVersionsResponse)
	if corr != 9 || av.ErrorCode != 35 || len(av.ApiKeys) != 1 || av.ApiKeys[0].ApiKey != int16(kmsg.ApiVersions) || av.ApiKeys[0].MaxVersion > maxAV {
		t.Errorf("future ApiVersions answered corr %d %+v, want corr 9, UNSUPPORTED_VERSION, key 18 up to v%d", corr, av, maxAV)
	}

	// The connection still works after that answer.
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 4
	if got := r.roundTrip(md).(*kmsg.MetadataResponse); len(got.Brokers) != 1 {
		t.Errorf("metadata after the KIP-511 answer: %d brokers", len(got.Brokers))
	}
}

func TestProxy_RefusedRequestsCloseOnlyTheirConnection(t *testing.T) {
	for _, mode := range responseModes {
		t.Run(mode.name, func(t *testing.T) { testRefused(t, mode.tweak) })
	}
}

func testRefused(t *testing.T, tweak func(*Options)) {
	e := startEnv(t, 1, tweak)
	bystander := dialRaw(t, e.proxy.Addr())
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 1
	bystander.roundTrip(md)

	cases := []struct {
		name  string
		bytes []byte
	}{
		{"ConsumerGroupHeartbeat is hidden", reqBytes(kmsg.NewPtrConsumerGroupHeartbeatRequest(), 0)},
		{"StopReplica is not advertised upstream", reqBytes(kmsg.NewPtrStopReplicaRequest(), 0)},
		{"unknown api key", reqBytes(&unknownKey{key: kmsg.MaxKey + 1}, 0)},
		{"negative api key", reqBytes(&unknownKey{key: -3}, 0)},
		{"metadata version above the gateway's", reqBytes(kmsg.NewPtrMetadataRequest(), kmsg.NewPtrMetadataRequest().MaxVersion()+1)},
		{"negative version", reqBytes(kmsg.NewPtrMetadataRequest(), -1)},
		{"truncated header", int32Frame(3, []byte{0, 3, 0})},
		{"oversized size prefix", int32Frame(2<<20, []byte{0, 3, 0, 1})},
		{"negative size prefix", int32Frame(-5, nil)},
		{"garbage body", int32Frame(12, []byte{0, 3, 0, 9, 0, 0, 0, 1, 0x7f, 0xff, 0, 0})},
		{"bad produce acks", int32Frame(10, []byte{0, 0, 0, 9, 0, 0, 0, 1, 0xff, 0xff})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.logs.String())
			r := dialRaw(t, e.proxy.Addr())
			r.write(tc.bytes)
			if !r.closedByPeer() {
				t.Fatal("connection not closed")
			}
			time.Sleep(10 * time.Millisecond)
			if logs := e.logs.String()[before:]; !strings.Contains(logs, "closing client connection") {
				t.Errorf("no log line for the closed connection; log:\n%s", logs)
			}
			bystander.t = t
			bystander.roundTrip(md)
		})
	}

	t.Run("abrupt disconnect mid-request", func(t *testing.T) {
		before := len(e.logs.String())
		r := dialRaw(t, e.proxy.Addr())
		r.write(int32Frame(100, []byte{0, 3, 0, 1, 0, 0}))
		r.nc.Close()
		bystander.t = t
		bystander.roundTrip(md)
		// A client gone between requests closes quietly; one gone
		// mid-request is logged, naming the cut.
		deadline := time.Now().Add(5 * time.Second)
		for {
			logs := e.logs.String()[before:]
			if strings.Contains(logs, "closing client connection") && strings.Contains(logs, "unexpected EOF") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no log line for the request cut short; log:\n%s", logs)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// unknownKey is a request kmsg does not know, to send keys no broker has.
type unknownKey struct {
	key, version int16
}

func (u *unknownKey) Key() int16                  { return u.key }
func (u *unknownKey) MaxVersion() int16           { return 0 }
func (u *unknownKey) SetVersion(v int16)          { u.version = v }
func (u *unknownKey) GetVersion() int16           { return u.version }
func (u *unknownKey) IsFlexible() bool            { return false }
func (u *unknownKey) AppendTo(b []byte) []byte    { return append(b, 1, 2, 3) }
func (u *unknownKey) ReadFrom([]byte) error       { return nil }
func (u *unknownKey) ResponseKind() kmsg.Response { return nil }

// reqBytes encodes req at version as a whole frame.
func reqBytes(req kmsg.Request, version int16) []byte {
	req.SetVersion(version)
	flexible := version >= 0 && req.IsFlexible()
	cid := "x"
	b, at := frame.AppendSize(nil)
	b = frame.AppendRequestHeader(b, frame.RequestHeader{Key: req.Key(), Version: version, CorrelationID: 1, ClientID: &cid, Flexible: flexible})
	b = req.AppendTo(b)
	frame.FinishSize(b, at)
	return b
}

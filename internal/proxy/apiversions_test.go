package proxy

import (
	"bytes"
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProxy_ApiVersionsOnANewConnectionIsAnsweredAtOnceAndStillForwarded
// checks the remembered ApiVersions answer: once one connection's request
// at a version went upstream, a new connection's request at that version
// gets the same answer without waiting for the upstream, the upstream still
// receives it (KIP-511's client software record) once the connection
// forwards anything, and a request whose software name the broker would
// refuse is not answered locally.
func TestProxy_ApiVersionsOnANewConnectionIsAnsweredAtOnceAndStillForwarded(t *testing.T) {
	e := startEnv(t, 1, nil)
	// The upstream counts ApiVersions and, once slow is set, takes that
	// long over each, so that a local answer is told apart by its speed.
	var seen atomic.Int64
	var slow atomic.Int64
	e.cluster.ControlKey(int16(kmsg.ApiVersions), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		seen.Add(1)
		time.Sleep(time.Duration(slow.Load()))
		return nil, nil, false
	})
	const delay = 700 * time.Millisecond
	encode := func(r *kmsg.ApiVersionsResponse) []byte {
		cp := *r
		cp.ThrottleMillis = 0
		return cp.AppendTo(nil)
	}
	request := func(v int16, software string) *kmsg.ApiVersionsRequest {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = software, "1.0"
		return req
	}
	waitSeen := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for seen.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("upstream saw %d ApiVersions requests, want %d", seen.Load(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	for v := int16(0); v <= kmsg.NewPtrApiVersionsRequest().MaxVersion(); v++ {
		slow.Store(0)
		before := seen.Load()
		first := dialRaw(t, e.proxy.Addr()).roundTrip(request(v, "first")).(*kmsg.ApiVersionsResponse)
		if first.ErrorCode != 0 {
			t.Fatalf("v%d: upstream answered error %d", v, first.ErrorCode)
		}
		waitSeen(before + 1)

		slow.Store(int64(delay))
		began := time.Now()
		r := dialRaw(t, e.proxy.Addr())
		second := r.roundTrip(request(v, "second")).(*kmsg.ApiVersionsResponse)
		if took := time.Since(began); took >= delay {
			t.Errorf("v%d: a new connection's ApiVersions took %v: it waited for the upstream", v, took)
		}
		if !bytes.Equal(encode(first), encode(second)) {
			t.Errorf("v%d: the local answer differs from the upstream's:\n%+v\n%+v", v, first, second)
		}
		// The connection has forwarded nothing yet, so it has no upstream
		// connection; its first forwarded request opens one, the
		// ApiVersions going first.
		r.roundTrip(kmsg.NewPtrMetadataRequest())
		waitSeen(before + 2)

		if v < 3 {
			continue // no software name before v3
		}
		began = time.Now()
		dialRaw(t, e.proxy.Addr()).roundTrip(request(v, "not valid!"))
		if took := time.Since(began); took < delay {
			t.Errorf("v%d: an ApiVersions with a software name brokers refuse was answered locally after %v", v, took)
		}
	}
}

func TestAnswerableLocallyFollowsKIP511SoftwarePattern(t *testing.T) {
	for _, tc := range []struct {
		version         int16
		name, swVersion string
		want            bool
	}{
		{0, "", "", true}, // no software fields before v3
		{3, "apache-kafka-java", "4.4.0", true},
		{3, "franz-go", "v1.22.3", true},
		{4, "librdkafka", "2.16.0", true},
		{3, "", "1.0", false},
		{3, "kgo", "", false},
		{3, "-lead", "1", false},
		{3, "trail.", "1", false},
		{3, "sp ace", "1", false},
		{4, "kgo", "1.0_rc", false},
	} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = tc.version
		req.ClientSoftwareName, req.ClientSoftwareVersion = tc.name, tc.swVersion
		if got := answerableLocally(tc.version, decodeApiVersions(tc.version, req.AppendTo(nil)), 0, ""); got != tc.want {
			t.Errorf("v%d name %q version %q: answerable locally %v, want %v", tc.version, tc.name, tc.swVersion, got, tc.want)
		}
	}
	if answerableLocally(3, decodeApiVersions(3, []byte{0xff}), 0, "") {
		t.Error("an undecodable v3 request was called answerable locally")
	}
}

// TestProxy_NewConnectionIsServedWhileItsUpstreamIsDialled checks that a
// client connection's requests are read while its upstream connection is
// still being dialled: an ApiVersions the proxy can answer from the
// remembered answer, and a request the interceptor answers, are answered
// before the dial completes; requests that must go upstream wait for it,
// more of them than the proxy holds during a dial included, and are then
// answered in order, followed by the interceptor's answer to a request
// sent after them.
func TestProxy_NewConnectionIsServedWhileItsUpstreamIsDialled(t *testing.T) {
	var gate dialGate
	e := startEnv(t, 1, func(o *Options) {
		o.Interceptor = &testInterceptor{}
		gate.install(o)
	})
	av := rememberedApiVersions(t, e)
	release := gate.hold(nil)
	defer release()
	r := dialRaw(t, e.proxy.Addr())
	r.send(av, 1)
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version = 5
	dg.Groups = []string{"early"}
	r.send(dg, 2)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	const forwarded = maxEarlyFrames + 8
	for i := range int32(forwarded) {
		r.send(md, 3+i)
	}
	r.send(dg, 3+forwarded)
	if corr, resp := r.recv(av); corr != 1 || resp.(*kmsg.ApiVersionsResponse).ErrorCode != 0 {
		t.Fatalf("ApiVersions during the dial: correlation id %d, error %d", corr, resp.(*kmsg.ApiVersionsResponse).ErrorCode)
	}
	if corr, resp := r.recv(dg); corr != 2 || len(resp.(*kmsg.DescribeGroupsResponse).Groups) != 1 {
		t.Fatalf("intercepted DescribeGroups during the dial: correlation id %d, response %+v", corr, resp)
	}
	// No Metadata can have been answered: nothing reached the upstream yet.
	r.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [1]byte
	if n, err := r.nc.Read(b[:]); n > 0 || err == nil {
		t.Fatal("a response arrived before the upstream connection was open")
	}
	release()
	for i := range int32(forwarded) {
		if corr, resp := r.recv(md); corr != 3+i || len(resp.(*kmsg.MetadataResponse).Brokers) != 1 {
			t.Fatalf("Metadata %d after the dial: correlation id %d, %d brokers", i, corr, len(resp.(*kmsg.MetadataResponse).Brokers))
		}
	}
	if corr, _ := r.recv(dg); corr != 3+forwarded {
		t.Fatalf("DescribeGroups after the forwarded requests: correlation id %d, want %d", corr, 3+forwarded)
	}
}

// TestProxy_ConnectionAnsweredLocallyNeverDialsTheUpstream checks that the
// upstream connection waits for a request to forward: a connection whose
// ApiVersions is answered from the remembered answer, and which sends
// nothing else, never reaches the broker (a consumer's group connection
// behaves so when the coordinator answers its group requests); the next
// connection that forwards a request dials once, and the broker sees its
// ApiVersions before that request.
func TestProxy_ConnectionAnsweredLocallyNeverDialsTheUpstream(t *testing.T) {
	var dials atomic.Int64
	e := startEnv(t, 1, func(o *Options) {
		o.DialUpstream = func(ctx context.Context, addr string) (net.Conn, error) {
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}
	})
	var order []int16 // keys the broker saw on connections after the first
	var mu sync.Mutex
	watch := func(k int16) {
		e.cluster.ControlKey(k, func(kmsg.Request) (kmsg.Response, error, bool) {
			e.cluster.KeepControl()
			mu.Lock()
			order = append(order, k)
			mu.Unlock()
			return nil, nil, false
		})
	}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1.0"
	// The first connection has no remembered answer: it dials.
	dialRaw(t, e.proxy.Addr()).roundTrip(av)
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d upstream dials after the first ApiVersions, want 1", n)
	}
	watch(int16(kmsg.ApiVersions))
	watch(int16(kmsg.Metadata))

	// A broker's own listener: the bootstrap listener dials as a
	// connection opens, since its connections always forward.
	brokerAddr, ok := e.proxy.BrokerAddr(0) // kfake numbers its one broker 0
	if !ok {
		t.Fatal("no listener for the broker")
	}
	local := dialRaw(t, brokerAddr)
	if r := local.roundTrip(av).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 || len(r.ApiKeys) == 0 {
		t.Fatalf("local ApiVersions answer: error %d, %d keys", r.ErrorCode, len(r.ApiKeys))
	}
	local.nc.Close()

	forwarding := dialRaw(t, brokerAddr)
	forwarding.roundTrip(av)
	if md := forwarding.roundTrip(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse); len(md.Brokers) == 0 {
		t.Fatal("Metadata through the proxy named no brokers")
	}
	if n := dials.Load(); n != 2 {
		t.Errorf("%d upstream dials, want 2: the connection answered locally dialled too", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []int16{int16(kmsg.ApiVersions), int16(kmsg.Metadata)}; !slices.Equal(order, want) {
		t.Errorf("the broker saw keys %v after the first connection, want %v", order, want)
	}
}

// TestProxy_ApiVersionsNamingANodeIsCheckedAgainstTheBrokerMeant covers
// KIP-1242's ApiVersions v5, which names the cluster and node a client
// means to reach. A client that names a gateway of the cluster (a node of
// Options.Peers, the coordinator FindCoordinator gives) on the bootstrap
// listener is answered as that node would be, cold (forwarded) and warm
// (answered from the remembered answer): a REBOOTSTRAP_REQUIRED there
// makes a Java consumer drop its connections with its JoinGroup queued.
// A client that means another cluster, or another node than the broker
// listener it reached, still gets REBOOTSTRAP_REQUIRED, warm or cold.
func TestProxy_ApiVersionsNamingANodeIsCheckedAgainstTheBrokerMeant(t *testing.T) {
	const cluster, gateway = "wasmassign-test-cluster", int32(1<<30 | 12345)
	e := startEnv(t, 2, func(o *Options) {
		o.Peers = func() []Peer { return []Peer{{Node: gateway, Host: "127.0.0.1", Port: 1}} }
	}, kfake.ClusterID(cluster))
	node0, ok := e.proxy.BrokerAddr(0)
	if !ok {
		t.Fatal("no listener for node 0")
	}
	other := "another-cluster"
	for _, tc := range []struct {
		name      string
		addr      string
		clusterID *string // nil: bootstrapping
		node      int32
		want      int16
	}{
		{"bootstrapping", e.proxy.Addr(), nil, -1, 0},
		{"a gateway on the bootstrap listener", e.proxy.Addr(), kmsg.StringPtr(cluster), gateway, 0},
		{"a gateway of another cluster", e.proxy.Addr(), &other, gateway, kerr.RebootstrapRequired.Code},
		{"the broker of the listener", node0, kmsg.StringPtr(cluster), 0, 0},
		{"another broker than the listener's", node0, kmsg.StringPtr(cluster), 1, kerr.RebootstrapRequired.Code},
		{"another cluster on a broker listener", node0, &other, 0, kerr.RebootstrapRequired.Code},
	} {
		for _, round := range []string{"cold", "warm"} {
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version = 5
			req.ClientSoftwareName, req.ClientSoftwareVersion = "apache-kafka-java", "4.4.0"
			req.ClusterID, req.NodeID = tc.clusterID, tc.node
			resp := dialRaw(t, tc.addr).roundTrip(req).(*kmsg.ApiVersionsResponse)
			if resp.ErrorCode != tc.want {
				t.Errorf("%s (%s): error %d, want %d", tc.name, round, resp.ErrorCode, tc.want)
			}
			if tc.want == 0 && len(resp.ApiKeys) == 0 {
				t.Errorf("%s (%s): no api keys in the answer", tc.name, round)
			}
		}
	}
}

package proxy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testInterceptor answers DescribeGroups itself after a random delay (and
// blocks on the group "block" until released or cancelled), and lets
// ListGroups through with a group added to the upstream's answer.
type testInterceptor struct {
	release chan struct{}
	seen    chan string
}

func (ti *testInterceptor) Intercepts(key int16) bool {
	return key == int16(kmsg.DescribeGroups) || key == int16(kmsg.ListGroups)
}

func (ti *testInterceptor) Intercept(ctx context.Context, r Request) (Decision, error) {
	// Failing closes the connection, which fails the test.
	if r.Conn.Upstream < 0 || !r.Conn.Remote.IsValid() || r.Conn.ClientHost != KafkaHost(r.Conn.Remote) || !strings.HasPrefix(r.Conn.ClientHost, "/127.") || r.ClientID == nil || *r.ClientID != "raw" {
		return Decision{}, fmt.Errorf("bad request context %+v client id %v", r.Conn, r.ClientID)
	}
	switch req := r.Req.(type) {
	case *kmsg.DescribeGroupsRequest:
		if len(req.Groups) == 1 && req.Groups[0] == "block" {
			if ti.seen != nil {
				ti.seen <- "block"
			}
			select {
			case <-ti.release:
			case <-ctx.Done():
				return Decision{}, ctx.Err()
			}
		} else {
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		}
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, g := range req.Groups {
			dg := kmsg.NewDescribeGroupsResponseGroup()
			dg.Group = g
			dg.State = "Stable"
			resp.Groups = append(resp.Groups, dg)
		}
		return Decision{Respond: resp}, nil
	case *kmsg.ListGroupsRequest:
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		return Decision{OnResponse: func(resp kmsg.Response) kmsg.Response {
			lg := resp.(*kmsg.ListGroupsResponse)
			g := kmsg.NewListGroupsResponseGroup()
			g.Group = "injected"
			lg.Groups = append(lg.Groups, g)
			return lg
		}}, nil
	}
	return Decision{}, errors.New("unexpected request")
}

func TestProxy_PipelinedResponsesLeaveInRequestOrder(t *testing.T) {
	for _, mode := range responseModes {
		t.Run(mode.name, func(t *testing.T) { testPipelining(t, mode.tweak) })
	}
}

func testPipelining(t *testing.T, tweak func(*Options)) {
	ti := &testInterceptor{release: make(chan struct{})}
	e := startEnv(t, 3, func(o *Options) { tweak(o); o.Interceptor = ti })
	r := dialRaw(t, e.proxy.Addr())

	const n = 600
	reqs := make([]kmsg.Request, n)
	for i := range reqs {
		switch i % 7 {
		case 0:
			md := kmsg.NewPtrMetadataRequest()
			md.Version = 12
			reqs[i] = md
		case 1:
			dg := kmsg.NewPtrDescribeGroupsRequest()
			dg.Version = 5
			dg.Groups = []string{"g-" + strconv.Itoa(i)}
			reqs[i] = dg
		case 2:
			av := kmsg.NewPtrApiVersionsRequest()
			av.Version = 3
			av.ClientSoftwareName, av.ClientSoftwareVersion = "t", "1"
			reqs[i] = av
		case 3:
			lg := kmsg.NewPtrListGroupsRequest()
			lg.Version = 4
			reqs[i] = lg
		case 4:
			lo := kmsg.NewPtrListOffsetsRequest()
			lo.Version = 4
			lt := kmsg.NewListOffsetsRequestTopic()
			lt.Topic = testTopic
			lp := kmsg.NewListOffsetsRequestTopicPartition()
			lp.Partition = int32(i % 6)
			lp.Timestamp = -1
			lt.Partitions = append(lt.Partitions, lp)
			lo.Topics = append(lo.Topics, lt)
			reqs[i] = lo
		case 5:
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.Version = 4
			fc.CoordinatorKeys = []string{"a", "b"}
			reqs[i] = fc
		case 6:
			md := kmsg.NewPtrMetadataRequest()
			md.Version = 1
			reqs[i] = md
		}
	}
	// Write everything before reading anything: the proxy must pipeline.
	go func() {
		for i, req := range reqs {
			r.send(req, int32(i))
		}
	}()
	for i, req := range reqs {
		corr, resp := r.recv(req)
		if corr != int32(i) {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
		switch resp := resp.(type) {
		case *kmsg.DescribeGroupsResponse:
			if want := "g-" + strconv.Itoa(i); len(resp.Groups) != 1 || resp.Groups[0].Group != want {
				t.Errorf("response %d describes %+v, want group %s", i, resp.Groups, want)
			}
		case *kmsg.ListGroupsResponse:
			if len(resp.Groups) == 0 || resp.Groups[len(resp.Groups)-1].Group != "injected" {
				t.Errorf("response %d: ListGroups without the interceptor's group: %+v", i, resp.Groups)
			}
		case *kmsg.MetadataResponse:
			if len(resp.Brokers) != 3 {
				t.Errorf("response %d: %d brokers", i, len(resp.Brokers))
			}
		case *kmsg.ListOffsetsResponse:
			// The bootstrap connection's broker may not lead the
			// partition; what matters is that the answer is for it.
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].Partition != int32(i%6) {
				t.Errorf("response %d: ListOffsets %+v, want partition %d", i, resp.Topics, i%6)
			}
		}
	}
}

func TestProxy_BlockedInterceptorHoldsOnlyLaterResponsesOfItsConnection(t *testing.T) {
	ti := &testInterceptor{release: make(chan struct{}), seen: make(chan string, 1)}
	e := startEnv(t, 1, func(o *Options) { o.Interceptor = ti })
	a := dialRaw(t, e.proxy.Addr())
	block := kmsg.NewPtrDescribeGroupsRequest()
	block.Groups = []string{"block"}
	a.send(block, 1)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 4
	a.send(md, 2)
	<-ti.seen

	// Another connection is served while the first waits.
	b := dialRaw(t, e.proxy.Addr())
	start := time.Now()
	b.roundTrip(md)
	if d := time.Since(start); d > time.Second {
		t.Errorf("other connection waited %v", d)
	}
	// The first connection's later response waits for the blocked one.
	a.nc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var one [1]byte
	if _, err := a.nc.Read(one[:]); err == nil {
		t.Fatal("a response overtook the blocked request")
	}
	close(ti.release)
	if corr, _ := a.recv(block); corr != 1 {
		t.Errorf("first response has correlation id %d, want 1", corr)
	}
	if corr, _ := a.recv(md); corr != 2 {
		t.Errorf("second response has correlation id %d, want 2", corr)
	}
}

func TestProxy_ProduceWithAcksZeroGetsNoResponse(t *testing.T) {
	e := startEnv(t, 1, nil)
	r := dialRaw(t, e.proxy.Addr())
	pr := kmsg.NewPtrProduceRequest()
	pr.Version = 9
	pr.Acks = 0
	pr.TimeoutMillis = 1000
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	r.send(pr, 1)
	r.send(md, 2)
	if corr, _ := r.recv(md); corr != 2 {
		t.Fatalf("first response has correlation id %d, want 2 (acks=0 produce must not be answered)", corr)
	}

	// And records written with acks=0 through the proxy arrive.
	prod := e.client(t, kgo.DefaultProduceTopic(testTopic), kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 300
	for i := range n {
		prod.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	direct, err := kgo.NewClient(kgo.SeedBrokers(e.cluster.ListenAddrs()...), kgo.ConsumeTopics(testTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	got := 0
	for got < n && ctx.Err() == nil {
		got += direct.PollFetches(ctx).NumRecords()
	}
	if got != n {
		t.Fatalf("upstream has %d records, want %d", got, n)
	}
}

func TestProxy_BrokerAddedUpstreamGetsAListener(t *testing.T) {
	e := startEnv(t, 1, func(o *Options) { o.MetadataRefresh = 50 * time.Millisecond })
	node, _, err := e.cluster.AddNode(-1, 0)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	var addr string
	for {
		var ok bool
		if addr, ok = e.proxy.BrokerAddr(node); ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if addr == "" {
		t.Fatalf("no listener for new broker %d", node)
	}
	r := dialRaw(t, addr)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	resp := r.roundTrip(md).(*kmsg.MetadataResponse)
	found := false
	for _, b := range resp.Brokers {
		if b.NodeID == node {
			found = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) == addr
		}
	}
	if !found {
		t.Errorf("new broker's metadata does not name it at %s: %+v", addr, resp.Brokers)
	}
}

func TestProxy_FetchRackReportedOncePerConnection(t *testing.T) {
	var mu sync.Mutex
	racks := map[uint64][]string{}
	e := startEnv(t, 3, func(o *Options) {
		o.OnFetchRack = func(c ConnInfo, clientID, rack string, topics []kmsg.FetchRequestTopic) {
			mu.Lock()
			defer mu.Unlock()
			if c.Node < 0 || c.Upstream != c.Node || !c.Remote.IsValid() || clientID != "rack-consumer" {
				t.Errorf("rack reported for connection %+v, client id %q", c, clientID)
			}
			// The partitions fetched tell which member sent it: the
			// report waits for a Fetch that names some.
			if len(topics) == 0 || len(topics[0].Partitions) == 0 {
				t.Errorf("rack reported without the fetched partitions: %+v", topics)
			}
			racks[c.ID] = append(racks[c.ID], rack)
		}
	})
	prod := e.client(t, kgo.DefaultProduceTopic(testTopic))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 60 {
		prod.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cons := e.client(t, kgo.ConsumeTopics(testTopic), kgo.Rack("az-x"), kgo.ClientID("rack-consumer"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 60 && ctx.Err() == nil {
		got += cons.PollFetches(ctx).NumRecords()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(racks) == 0 {
		t.Fatal("no rack reported")
	}
	for id, rs := range racks {
		if len(rs) != 1 || rs[0] != "az-x" {
			t.Errorf("connection %d reported racks %q, want once az-x", id, rs)
		}
	}
}

func TestProxy_CloseLetsInFlightRequestsFinish(t *testing.T) {
	ti := &testInterceptor{release: make(chan struct{}), seen: make(chan string, 1)}
	e := startEnv(t, 1, func(o *Options) { o.Interceptor = ti })
	r := dialRaw(t, e.proxy.Addr())
	block := kmsg.NewPtrDescribeGroupsRequest()
	block.Groups = []string{"block"}
	r.send(block, 1)
	<-ti.seen

	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		closed <- e.proxy.Close(ctx)
	}()
	time.Sleep(50 * time.Millisecond)
	if c, err := net.DialTimeout("tcp", e.proxy.Addr(), time.Second); err == nil {
		c.Close()
		t.Error("proxy accepts connections while closing")
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) before the in-flight request finished", err)
	default:
	}
	close(ti.release)
	if corr, _ := r.recv(block); corr != 1 {
		t.Errorf("in-flight response has correlation id %d", corr)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	if !r.closedByPeer() {
		t.Error("connection still open after Close")
	}
}

func TestProxy_CloseCutsRequestsShortAtItsDeadline(t *testing.T) {
	ti := &testInterceptor{release: make(chan struct{}), seen: make(chan string, 1)}
	e := startEnv(t, 1, func(o *Options) { o.Interceptor = ti })
	r := dialRaw(t, e.proxy.Addr())
	block := kmsg.NewPtrDescribeGroupsRequest()
	block.Groups = []string{"block"}
	r.send(block, 1)
	<-ti.seen
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := e.proxy.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want the deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
	if !r.closedByPeer() {
		t.Error("connection still open after Close")
	}
}

// forwardInterceptor replaces every Metadata request with one for
// testTopic, as the coordinator replaces commits it has fenced.
type forwardInterceptor struct{}

func (forwardInterceptor) Intercepts(key int16) bool { return key == int16(kmsg.Metadata) }

func (forwardInterceptor) Intercept(_ context.Context, r Request) (Decision, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(testTopic)
	req.Topics = append(req.Topics, rt)
	return Decision{Forward: req}, nil
}

func TestProxy_InterceptorForwardReplacesTheRequestAndKeepsRewriting(t *testing.T) {
	e := startEnv(t, 3, func(o *Options) { o.Interceptor = forwardInterceptor{} })
	r := dialRaw(t, e.proxy.Addr())
	for _, v := range []int16{1, 9, 12} {
		md := kmsg.NewPtrMetadataRequest()
		md.Version = v
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("other")
		md.Topics = append(md.Topics, rt)
		resp := r.roundTrip(md).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != testTopic || len(resp.Topics[0].Partitions) != 6 {
			t.Errorf("v%d: forwarded request not the interceptor's: %+v", v, resp.Topics)
		}
		for _, b := range resp.Brokers {
			if want, _ := e.proxy.BrokerAddr(b.NodeID); net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) != want {
				t.Errorf("v%d: broker %d at %s:%d, want %s", v, b.NodeID, b.Host, b.Port, want)
			}
		}
	}
}

// coordinatorInterceptor answers FindCoordinator itself, naming upstream
// node 2 with no address, as the gateway does for managed groups.
type coordinatorInterceptor struct{}

func (coordinatorInterceptor) Intercepts(key int16) bool { return key == int16(kmsg.FindCoordinator) }

func (coordinatorInterceptor) Intercept(_ context.Context, r Request) (Decision, error) {
	req := r.Req.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	resp.NodeID, resp.Port = 2, -1
	for _, k := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Port = k, 2, -1
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return Decision{Respond: resp}, nil
}

// A local answer that names brokers gets the gateway's addresses for them,
// as an upstream answer does.
func TestProxy_LocalAnswersNamingBrokersAreRewritten(t *testing.T) {
	e := startEnv(t, 3, func(o *Options) { o.Interceptor = coordinatorInterceptor{} })
	want, ok := e.proxy.BrokerAddr(2)
	if !ok {
		t.Fatal("no listener for broker 2")
	}
	r := dialRaw(t, e.proxy.Addr())
	for _, v := range []int16{0, 3, 4, 6} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorKey, req.CoordinatorKeys = v, "g", []string{"g", "h"}
		resp := r.roundTrip(req).(*kmsg.FindCoordinatorResponse)
		var got []string
		if v < 4 {
			got = append(got, net.JoinHostPort(resp.Host, strconv.Itoa(int(resp.Port))))
		}
		for _, c := range resp.Coordinators {
			got = append(got, net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))))
		}
		if len(got) == 0 {
			t.Fatalf("v%d: no coordinator in %+v", v, resp)
		}
		for _, a := range got {
			if a != want {
				t.Errorf("v%d: coordinator at %s, want the gateway's %s", v, a, want)
			}
		}
	}
}

func TestProxy_UpstreamClosingAnIdleConnectionClosesTheClients(t *testing.T) {
	ups := make(chan net.Conn, 4)
	e := startEnv(t, 1, func(o *Options) {
		d := &net.Dialer{}
		o.DialUpstream = func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, "tcp", addr)
			if err == nil {
				ups <- c
			}
			return c, err
		}
	})
	r := dialRaw(t, e.proxy.Addr())
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 4
	r.roundTrip(md)
	up := <-ups
	up.Close() // as a broker's connections.max.idle.ms would
	if !r.closedByPeer() {
		t.Fatal("client connection still open after its upstream closed")
	}
	time.Sleep(10 * time.Millisecond)
	if logs := e.logs.String(); !strings.Contains(logs, "upstream closed an idle connection") && !strings.Contains(logs, "closing client connection") {
		t.Errorf("no log line for the closed connection:\n%s", logs)
	}
}

func TestProxy_BrokerFirstSeenInAResponseGetsAListenerAtOnce(t *testing.T) {
	e := startEnv(t, 1, func(o *Options) { o.MetadataRefresh = time.Hour })
	node, _, err := e.cluster.AddNode(-1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.proxy.BrokerAddr(node); ok {
		t.Fatal("listener before any metadata named the broker")
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	resp := dialRaw(t, e.proxy.Addr()).roundTrip(md).(*kmsg.MetadataResponse)
	addr, ok := e.proxy.BrokerAddr(node)
	if !ok {
		t.Fatalf("no listener for broker %d named in %+v", node, resp.Brokers)
	}
	// The new listener reaches the new broker, at the address the
	// response gave.
	got := dialRaw(t, addr).roundTrip(md).(*kmsg.MetadataResponse)
	if len(got.Brokers) != 2 {
		t.Errorf("through the new listener: %d brokers, want 2", len(got.Brokers))
	}
}

// lateInterceptor holds every Metadata request until released, whatever
// its context says, then forwards it (answer false) or answers it.
type lateInterceptor struct {
	held    chan struct{}
	release chan struct{}
	answer  bool
}

func (*lateInterceptor) Intercepts(key int16) bool { return key == int16(kmsg.Metadata) }

func (li *lateInterceptor) Intercept(_ context.Context, r Request) (Decision, error) {
	li.held <- struct{}{}
	<-li.release
	if li.answer {
		return Decision{Respond: r.Req.ResponseKind()}, nil
	}
	return Decision{Forward: r.Req}, nil
}

// A connection's buffers go back to a pool when it ends, while an
// interceptor may still be deciding one of its requests. The decision,
// made after the connection is gone, must touch neither the buffers nor
// the connections now using them: the proxy stays up and other clients'
// answers stay intact.
func TestProxy_InterceptorDecidingAfterTheConnectionEnded(t *testing.T) {
	for _, answer := range []bool{false, true} {
		t.Run(fmt.Sprintf("answer=%v", answer), func(t *testing.T) {
			li := &lateInterceptor{held: make(chan struct{}, 8), release: make(chan struct{})}
			e := startEnv(t, 1, func(o *Options) { o.Interceptor = li })
			node, ok := e.proxy.BrokerAddr(0)
			if !ok {
				t.Fatal("no listener for broker 0")
			}
			for range 4 {
				r := dialRaw(t, node)
				// An ApiVersions first, so that the connection dials.
				r.roundTrip(kmsg.NewPtrApiVersionsRequest())
				md := kmsg.NewPtrMetadataRequest()
				md.Version = 12
				r.send(md, 7)
				<-li.held
				r.nc.Close()
			}
			e.waitNoConns(t, "after the clients left")

			// Fresh connections take the pooled buffers; the held
			// decisions now land.
			others := make([]*rawConn, 4)
			for i := range others {
				others[i] = dialRaw(t, node)
				others[i].roundTrip(kmsg.NewPtrApiVersionsRequest())
			}
			close(li.release)
			for round := range 20 {
				for i, r := range others {
					d := kmsg.NewPtrDescribeClusterRequest()
					resp := r.roundTrip(d).(*kmsg.DescribeClusterResponse)
					if resp.ErrorCode != 0 || len(resp.Brokers) != 1 {
						t.Fatalf("round %d, client %d: DescribeCluster answered %+v", round, i, resp)
					}
				}
			}
		})
	}
}

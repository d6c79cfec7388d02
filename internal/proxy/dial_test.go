package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/internal/proxy/frame"
)

// dialGate holds the proxy's upstream dials while a test looks at what
// happens during them.
type dialGate struct {
	mu   sync.Mutex
	wait chan struct{} // nil: dials go ahead
	fail error         // once released, held dials fail with it
	// dial, when set, opens the connection instead of a plain dial of
	// the broker's address.
	dial func(ctx context.Context, addr string) (net.Conn, error)
}

// install makes the gate the proxy's upstream dialer.
func (g *dialGate) install(o *Options) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	o.DialUpstream = func(ctx context.Context, addr string) (net.Conn, error) {
		g.mu.Lock()
		wait, fail, dial := g.wait, g.fail, g.dial
		g.mu.Unlock()
		if wait != nil {
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if fail != nil {
				return nil, fail
			}
		}
		if dial != nil {
			return dial(ctx, addr)
		}
		return d.DialContext(ctx, "tcp", addr)
	}
}

// hold makes later dials wait until release is called, then fail with
// fail when it is not nil.
func (g *dialGate) hold(fail error) (release func()) {
	wait := make(chan struct{})
	g.mu.Lock()
	g.wait, g.fail = wait, fail
	g.mu.Unlock()
	return sync.OnceFunc(func() { close(wait) })
}

// rememberedApiVersions is a v3 ApiVersions request, sent once on its own
// connection so that the proxy remembers the upstream's answer and
// answers later ones itself while their upstream is dialled.
func rememberedApiVersions(t *testing.T, e *testEnv) *kmsg.ApiVersionsRequest {
	t.Helper()
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1.0"
	r := dialRaw(t, e.proxy.Addr())
	r.roundTrip(av)
	r.nc.Close()
	e.waitNoConns(t, "after the first ApiVersions")
	return av
}

// waitNoConns waits until the proxy serves no client connection.
func (e *testEnv) waitNoConns(t *testing.T, when string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for e.openConns() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d client connections still open %s", e.openConns(), when)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openConns returns how many client connections the proxy still serves.
func (e *testEnv) openConns() int {
	e.proxy.mu.Lock()
	defer e.proxy.mu.Unlock()
	return len(e.proxy.conns)
}

// duringDial starts a proxy (tweak adjusts its options) and a client
// connection whose upstream dial is held until release, after which it
// fails with fail when that is not nil. The client has sent an ApiVersions,
// answered by the proxy, and a Metadata request md, which waits for the
// dial.
func duringDial(t *testing.T, fail error, tweak func(*Options)) (e *testEnv, release func(), r *rawConn, md *kmsg.MetadataRequest) {
	t.Helper()
	var gate dialGate
	e = startEnv(t, 1, func(o *Options) {
		gate.install(o)
		if tweak != nil {
			tweak(o)
		}
	})
	av := rememberedApiVersions(t, e)
	release = gate.hold(fail)
	t.Cleanup(release)
	r = dialRaw(t, e.proxy.Addr())
	r.send(av, 1)
	md = kmsg.NewPtrMetadataRequest()
	md.Version = 9
	r.send(md, 2)
	if corr, resp := r.recv(av); corr != 1 || resp.(*kmsg.ApiVersionsResponse).ErrorCode != 0 {
		t.Fatalf("ApiVersions during the dial: correlation id %d, error %d", corr, resp.(*kmsg.ApiVersionsResponse).ErrorCode)
	}
	// Both requests wait for the dial: the ApiVersions, forwarded for the
	// broker's record, and the Metadata.
	e.waitEarlyFrames(t, 2)
	return e, release, r, md
}

// waitEarlyFrames waits until the proxy's connections hold n requests for
// their upstream dials.
func (e *testEnv) waitEarlyFrames(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for e.earlyFrames() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests held during the dial, want %d", e.earlyFrames(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestProxy_ClientLeavingDuringTheDialEndsItsConnection(t *testing.T) {
	e, _, r, _ := duringDial(t, nil, nil)
	r.nc.Close()
	// The dial is still held: leaving must cancel it, not wait for it.
	e.waitNoConns(t, "after the client left during the dial")
}

func TestProxy_DialFailingAfterALocalAnswerClosesTheConnection(t *testing.T) {
	var told atomic.Int64
	e, release, r, _ := duringDial(t, errors.New("connection refused by the test"), func(o *Options) {
		o.OnUnreachable = func(error) { told.Add(1) }
	})
	release()
	if !r.closedByPeer() {
		t.Fatal("connection left open although its upstream could not be dialled")
	}
	if n := told.Load(); n != 1 {
		t.Errorf("OnUnreachable called %d times, want 1", n)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "their broker is unreachable") {
		t.Errorf("no log line for the failed dial:\n%s", logs)
	}
}

func TestProxy_CloseDuringTheDialAnswersTheRequestsRead(t *testing.T) {
	e, release, r, md := duringDial(t, nil, nil)
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		closed <- e.proxy.Close(ctx)
	}()
	// Release the dial only once Close is draining the connection.
	deadline := time.Now().Add(5 * time.Second)
	for !e.allDraining() {
		if time.Now().After(deadline) {
			t.Fatal("Close did not start draining the connection")
		}
		time.Sleep(time.Millisecond)
	}
	release()
	if corr, resp := r.recv(md); corr != 2 || len(resp.(*kmsg.MetadataResponse).Brokers) != 1 {
		t.Fatalf("Metadata read before Close: correlation id %d, %d brokers", corr, len(resp.(*kmsg.MetadataResponse).Brokers))
	}
	if !r.closedByPeer() {
		t.Fatal("connection still open after Close")
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// allDraining reports whether the proxy is closing and drains every client
// connection it still serves.
func (e *testEnv) allDraining() bool {
	e.proxy.mu.Lock()
	defer e.proxy.mu.Unlock()
	if !e.proxy.closing {
		return false
	}
	for c := range e.proxy.conns {
		if !c.draining.Load() {
			return false
		}
	}
	return true
}

// serialBroker listens like a broker that handles one request at a time
// per connection: it reads a request, writes its whole answer (a frame
// of answerSize bytes after the correlation id, which it copies), and only
// then reads the next. It returns its address.
func serialBroker(t *testing.T, answerSize int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for {
					fr, err := frame.Read(c, nil, 16<<20)
					if err != nil || len(fr) < 8 {
						return
					}
					answer := make([]byte, 8+answerSize)
					binary.BigEndian.PutUint32(answer, uint32(4+answerSize))
					copy(answer[4:8], fr[4:8]) // correlation id
					if _, err := c.Write(answer); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestProxy_RequestsReadDuringTheDialDoNotDeadlockABroker pipelines, while
// the upstream is dialled, requests that together fill small socket
// buffers, to a broker that answers each with 2 MiB and reads nothing more
// until its answer has been read. The proxy must read answers while it
// writes the requests it held, or both ends wait on each other forever.
func TestProxy_RequestsReadDuringTheDialDoNotDeadlockABroker(t *testing.T) {
	broker := serialBroker(t, 2<<20)
	var gate dialGate
	e := startEnv(t, 1, gate.install)
	gate.mu.Lock()
	gate.dial = func(ctx context.Context, _ string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", broker)
		if err != nil {
			return nil, err
		}
		tc := c.(*net.TCPConn)
		tc.SetReadBuffer(64 << 10)
		tc.SetWriteBuffer(64 << 10)
		return c, nil
	}
	gate.mu.Unlock()
	release := gate.hold(nil)
	t.Cleanup(release)

	// ListOffsets for 60 topics of 900-byte names: about 55 KB each, under
	// the size from which requests are streamed, so all are held for the
	// dial (16 of them, under the 1 MiB bound).
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 1
	for i := range 60 {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = fmt.Sprintf("%s-%d", strings.Repeat("t", 900), i)
		lo.Topics = append(lo.Topics, rt)
	}
	const requests = 16
	r := dialRaw(t, e.proxy.Addr())
	for i := range int32(requests) {
		r.send(lo, 100+i)
	}
	e.waitEarlyFrames(t, requests) // all held before the dial ends
	release()
	for i := range int32(requests) {
		fr, err := r.readFrame()
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if corr := int32(binary.BigEndian.Uint32(fr)); corr != 100+i || len(fr) != 4+2<<20 {
			t.Fatalf("answer %d: correlation id %d, %d bytes", i, corr, len(fr))
		}
	}
}

// earlyFrames returns how many requests the proxy's connections hold for
// their upstream dials.
func (e *testEnv) earlyFrames() int {
	e.proxy.mu.Lock()
	conns := make([]*conn, 0, len(e.proxy.conns))
	for c := range e.proxy.conns {
		conns = append(conns, c)
	}
	e.proxy.mu.Unlock()
	n := 0
	for _, c := range conns {
		c.upMu.Lock()
		n += len(c.early)
		c.upMu.Unlock()
	}
	return n
}

// TestProxy_StreamedRequestDuringTheDialKeepsItsPlace sends, while the
// upstream is dialled, a small request (held), a Produce large enough to
// be streamed (which waits for the dial) and another small one: the broker
// must receive them in that order, and the answers leave in it.
func TestProxy_StreamedRequestDuringTheDialKeepsItsPlace(t *testing.T) {
	broker := serialBroker(t, 8)
	var gate dialGate
	e := startEnv(t, 1, gate.install)
	gate.mu.Lock()
	gate.dial = func(ctx context.Context, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", broker)
	}
	gate.mu.Unlock()
	release := gate.hold(nil)
	t.Cleanup(release)

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 1
	lo.Topics = append(lo.Topics, kmsg.NewListOffsetsRequestTopic())
	produce := kmsg.NewPtrProduceRequest()
	produce.Version = 9 // below KIP-951: its answer passes unread
	produce.Acks = -1
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = testTopic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = make([]byte, 2*defaultStreamFrom) // the broker reads no records
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)

	r := dialRaw(t, e.proxy.Addr())
	r.send(lo, 1)
	e.waitEarlyFrames(t, 1)
	r.send(produce, 2)
	r.send(lo, 3)
	release()
	for want := int32(1); want <= 3; want++ {
		fr, err := r.readFrame()
		if err != nil {
			t.Fatalf("answer %d: %v", want, err)
		}
		if corr := int32(binary.BigEndian.Uint32(fr)); corr != want {
			t.Fatalf("answer with correlation id %d, want %d", corr, want)
		}
	}
}

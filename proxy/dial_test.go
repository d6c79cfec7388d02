package proxy

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// dialGate holds the proxy's upstream dials while a test looks at what
// happens during them.
type dialGate struct {
	mu   sync.Mutex
	wait chan struct{} // nil: dials go ahead
	fail error         // once released, held dials fail with it
}

// install makes the gate the proxy's upstream dialer.
func (g *dialGate) install(o *Options) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	o.DialUpstream = func(ctx context.Context, addr string) (net.Conn, error) {
		g.mu.Lock()
		wait, fail := g.wait, g.fail
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
	return e, release, r, md
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
	time.Sleep(50 * time.Millisecond) // Close is waiting for the connection
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

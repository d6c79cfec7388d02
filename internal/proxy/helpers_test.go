package proxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/internal/config"
	"github.com/wasmassign/wasmassign/internal/proxy/frame"
)

const testTopic = "events"

// logBuffer collects the proxy's log so tests can check that a closed
// connection was reported.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if os.Getenv("PROXY_TEST_LOG") != "" {
		os.Stderr.Write(p)
	}
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type testEnv struct {
	cluster *kfake.Cluster
	proxy   *Proxy
	logs    *logBuffer
}

// startEnv starts a kfake cluster of n brokers with testTopic (6
// partitions) and a proxy in front of it on free ports; tweak adjusts the
// proxy's options and kopts the cluster's.
func startEnv(t testing.TB, n int, tweak func(*Options), kopts ...kfake.Opt) *testEnv {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(n), kfake.SeedTopics(6, testTopic)}, kopts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	logs := &logBuffer{}
	opts := Options{
		Server: config.Server{
			Listen:         "127.0.0.1:0",
			AdvertisedHost: "127.0.0.1",
			MaxFrameBytes:  1 << 20,
		},
		BrokerPort:      func(int32) int { return 0 },
		UpstreamBrokers: c.ListenAddrs(),
		Logger:          slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if tweak != nil {
		tweak(&opts)
	}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Close(ctx)
	})
	return &testEnv{cluster: c, proxy: p, logs: logs}
}

// proxyPorts returns every port the proxy listens on.
func (e *testEnv) proxyPorts() map[string]bool {
	ports := map[string]bool{}
	_, bp, _ := net.SplitHostPort(e.proxy.Addr())
	ports[bp] = true
	e.proxy.mu.Lock()
	defer e.proxy.mu.Unlock()
	for _, l := range e.proxy.listeners {
		ports[strconv.Itoa(int(l.port))] = true
	}
	return ports
}

// client returns a kgo client bootstrapped from the proxy whose dialer
// refuses, and reports, any address that is not one of the proxy's.
func (e *testEnv) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host != "127.0.0.1" || !e.proxyPorts()[port] {
			t.Errorf("kgo dialed %s, which is not a proxy address", addr)
			return nil, fmt.Errorf("refusing non-proxy address %s", addr)
		}
		return d.DialContext(ctx, network, addr)
	}
	all := append([]kgo.Opt{kgo.SeedBrokers(e.proxy.Addr()), kgo.Dialer(dial)}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// rawConn speaks the wire protocol by hand, so tests choose versions,
// pipeline, and send bytes no client would.
type rawConn struct {
	t  testing.TB
	nc net.Conn
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// send writes req at its version with correlation id corr.
func (r *rawConn) send(req kmsg.Request, corr int32) {
	r.t.Helper()
	cid := "raw"
	b, at := frame.AppendSize(nil)
	b = frame.AppendRequestHeader(b, frame.RequestHeader{Key: req.Key(), Version: req.GetVersion(), CorrelationID: corr, ClientID: &cid, Flexible: req.IsFlexible()})
	b = req.AppendTo(b)
	frame.FinishSize(b, at)
	r.write(b)
}

func (r *rawConn) write(b []byte) {
	r.t.Helper()
	r.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// recv reads one response for req (at req's version) and returns its
// correlation id and decoded body.
func (r *rawConn) recv(req kmsg.Request) (int32, kmsg.Response) {
	r.t.Helper()
	fr, err := r.readFrame()
	if err != nil {
		r.t.Fatalf("read %s response: %v", kmsg.NameForKey(req.Key()), err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	corr, body, err := frame.ParseResponseHeader(fr, resp.IsFlexible() && req.Key() != int16(kmsg.ApiVersions))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := resp.ReadFrom(body); err != nil {
		r.t.Fatalf("decode %s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return corr, resp
}

func (r *rawConn) readFrame() ([]byte, error) {
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	return frame.Read(r.nc, nil, 64<<20)
}

// roundTrip sends req and returns its decoded response.
func (r *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	r.send(req, 7)
	corr, resp := r.recv(req)
	if corr != 7 {
		r.t.Fatalf("correlation id %d, want 7", corr)
	}
	return resp
}

// closedByPeer reports whether the proxy closed the connection (reads end
// with EOF or reset) within the deadline.
func (r *rawConn) closedByPeer() bool {
	r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	for {
		_, err := r.nc.Read(b[:])
		if err == nil {
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return false
		}
		return true
	}
}

func int32Frame(size int32, rest []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(size))
	return append(b, rest...)
}

// responseModes are the two ways the proxy moves requests and responses:
// read whole then written (small ones), and streamed as they arrive (large
// ones); tests that care run both.
var responseModes = []struct {
	name  string
	tweak func(*Options)
}{
	{"store-and-forward", func(o *Options) { o.streamFrom = 1 << 30 }},
	{"streaming", func(o *Options) { o.streamFrom = -1 }},
}

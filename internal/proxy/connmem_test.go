package proxy

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// answerHeartbeats answers every Heartbeat itself, as the coordinator answers a
// consumer's group connection: such a connection never dials upstream.
type answerHeartbeats struct{}

func (answerHeartbeats) Intercepts(key int16) bool { return key == int16(kmsg.Heartbeat) }

func (answerHeartbeats) Intercept(_ context.Context, r Request) (Decision, error) {
	return Decision{Respond: r.Req.ResponseKind()}, nil
}

// connMemory is what each of a number of idle connections costs the
// process, on average.
type connMemory struct {
	heap, stack, goroutines float64
}

// idleConnMemory opens n connections to addr, makes each send req and read
// its answer, and measures what the process holds for them once they are
// idle: heap in use and goroutine stacks, after collections that empty
// the pools, so that only what the connections keep counts. The clients'
// own sockets are in the figure too, a few hundred bytes each.
func idleConnMemory(tb testing.TB, n int, addr string, req kmsg.Request) connMemory {
	tb.Helper()
	measure := func() (runtime.MemStats, int) {
		// Two collections: a pool's objects survive the first in its
		// victim cache.
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms, runtime.NumGoroutine()
	}
	before, g0 := measure()
	conns := make([]*rawConn, n)
	for i := range conns {
		conns[i] = dialRaw(tb, addr)
		conns[i].send(req, 1)
		if corr, _ := conns[i].recv(req); corr != 1 {
			tb.Fatalf("connection %d: correlation id %d, want 1", i, corr)
		}
	}
	// The goroutines that answered, and a dial's writer, end shortly after
	// the answer is out: measure once their number holds still.
	after, g := measure()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		again, g2 := measure()
		if g2 == g {
			break
		}
		after, g = again, g2
	}
	m := connMemory{
		heap:       (float64(after.HeapInuse) - float64(before.HeapInuse)) / float64(n),
		stack:      (float64(after.StackInuse) - float64(before.StackInuse)) / float64(n),
		goroutines: float64(g-g0) / float64(n),
	}
	for _, c := range conns {
		c.nc.Close()
	}
	return m
}

// heartbeatRequest is a consumer's Heartbeat, of the size kgo sends.
func heartbeatRequest() *kmsg.HeartbeatRequest {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group = "orders"
	req.Generation = 7
	req.MemberID = "kgo-consumer-0123456789-7d0c1f3e-4b52-4c8e-9a8e-1f0b3c5d7e9f"
	return req
}

// listOffsetsRequest is a request the proxy forwards as bytes.
func listOffsetsRequest() *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 4
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = testTopic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	req.Topics = append(req.Topics, lt)
	return req
}

// BenchmarkIdleConnectionMemory reports what an idle client connection
// costs: one whose requests are answered here (a consumer's group
// connection, heartbeating), one that forwarded a request upstream (a
// bootstrap connection: the figure includes kfake's side of the upstream
// connection), and, for reference, a connection straight to kfake.
//
//	go test ./internal/proxy/ -run '^$' -bench IdleConnectionMemory -benchtime 1x
func BenchmarkIdleConnectionMemory(b *testing.B) {
	const n = 2000
	e := startEnv(b, 1, func(o *Options) { o.Interceptor = answerHeartbeats{} })
	for _, side := range []struct {
		name string
		addr string
		req  kmsg.Request
	}{
		{"answered-here", brokerListener(e), heartbeatRequest()},
		{"forwarded", e.proxy.Addr(), listOffsetsRequest()},
		{"kfake-direct", e.cluster.ListenAddrs()[0], listOffsetsRequest()},
	} {
		b.Run(side.name, func(b *testing.B) {
			var sum connMemory
			for range b.N {
				m := idleConnMemory(b, n, side.addr, side.req)
				sum.heap += m.heap
				sum.stack += m.stack
				sum.goroutines += m.goroutines
			}
			b.ReportMetric(sum.heap/float64(b.N), "heap-B/conn")
			b.ReportMetric(sum.stack/float64(b.N), "stack-B/conn")
			b.ReportMetric(sum.goroutines/float64(b.N), "goroutines/conn")
		})
	}
}

// TestIdleConnection_HoldsNoLargeBuffer: a connection waiting for its
// client's next request holds no buffer from the pool, whether its
// requests were answered here or forwarded: ten thousand consumers' idle
// connections must not cost the gateway 16 KiB buffers each way.
func TestIdleConnection_HoldsNoLargeBuffer(t *testing.T) {
	if testing.Short() {
		t.Skip("opens a thousand connections")
	}
	const n = 500
	e := startEnv(t, 1, func(o *Options) { o.Interceptor = answerHeartbeats{} })
	// What the first connections allocate once (pools, maps) is no
	// connection's.
	for _, addr := range []string{e.cluster.ListenAddrs()[0], brokerListener(e), e.proxy.Addr()} {
		idleConnMemory(t, 20, addr, listOffsetsRequest())
	}
	direct := idleConnMemory(t, n, e.cluster.ListenAddrs()[0], listOffsetsRequest())
	for _, side := range []struct {
		name string
		addr string
		req  kmsg.Request
		// kfake's own side of the upstream connection is in the
		// figure of a forwarding connection.
		upstream connMemory
	}{
		{"answered here", brokerListener(e), heartbeatRequest(), connMemory{}},
		{"forwarded", e.proxy.Addr(), listOffsetsRequest(), direct},
	} {
		m := idleConnMemory(t, n, side.addr, side.req)
		const limit = 8 << 10
		if heap := m.heap - side.upstream.heap; heap >= limit {
			t.Errorf("%s: an idle connection holds %.0f bytes of heap, want under %d", side.name, heap, limit)
		}
		t.Logf("%s: %.0f B of heap, %.0f B of stack and %.2f goroutines per idle connection (kfake's side: %.0f B, %.0f B, %.2f)",
			side.name, m.heap, m.stack, m.goroutines, side.upstream.heap, side.upstream.stack, side.upstream.goroutines)
	}
}

// brokerListener returns the address of the proxy's listener for broker 0.
func brokerListener(e *testEnv) string {
	e.proxy.mu.Lock()
	defer e.proxy.mu.Unlock()
	return fmt.Sprintf("127.0.0.1:%d", e.proxy.listeners[0].port)
}

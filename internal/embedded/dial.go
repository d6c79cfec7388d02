package embedded

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmassign/wasmassign/internal/mempipe"
)

// The gateway reaches the embedded brokers in memory. Every byte a client
// produces or consumes through the gateway would otherwise cross loopback
// TCP twice, and the second crossing, between two parts of one process,
// cost the daemon half a millisecond of CPU per megabyte relayed, most of
// it in the kernel (RATIONALE.md, BENCHMARKS.md). Each broker therefore
// accepts connections from two sources: its TCP port, for clients that
// connect directly (kcat, tests, the direct side of the benchmarks), and
// [Cluster.Dial].
//
// The in-memory connection is a [mempipe.Conn]: synchronous, so a write
// returns once the other side has read it, and the proxy can relay a
// response from the broker's buffer straight to the client's socket. What
// keeps that free of deadlocks is that the proxy never makes reading a
// response wait on writing a request: it reads a connection's responses
// and writes its requests from different goroutines. kfake, like a Kafka
// broker, reads one request ahead of the one it is answering; so a request
// the proxy forwards behind a long-polling Fetch waits in the proxy, not in
// a socket buffer, and the proxy reads nothing more from that client until
// the broker takes it, as a broker's muted connection would do. Requests
// the gateway answers itself (group requests) on that connection arrive
// that much later, within the Fetch's maximum wait.

// listener is one broker's listener: the TCP listener kfake asked for, and
// the connections [Cluster.Dial] hands over.
type listener struct {
	counts *acceptCounts // shared by the cluster's listeners
	tcp    net.Listener
	mem    chan net.Conn
	tcpIn  chan accepted
	closed chan struct{}
	once   sync.Once
}

// accepted is one result of the TCP listener's Accept.
type accepted struct {
	c   net.Conn
	err error
}

var _ net.Listener = (*listener)(nil)

func newListener(tcp net.Listener, counts *acceptCounts) *listener {
	l := &listener{counts: counts, tcp: tcp, mem: make(chan net.Conn), tcpIn: make(chan accepted), closed: make(chan struct{})}
	go l.acceptTCP()
	return l
}

// acceptTCP passes the TCP listener's connections to Accept until the
// listener fails, which it does once closed.
func (l *listener) acceptTCP() {
	for {
		c, err := l.tcp.Accept()
		select {
		case l.tcpIn <- accepted{c, err}:
		case <-l.closed:
			if c != nil {
				c.Close()
			}
			return
		}
		if err != nil {
			return
		}
	}
}

// Accept returns the next connection, from TCP or from memory.
func (l *listener) Accept() (net.Conn, error) {
	select {
	case a := <-l.tcpIn:
		if a.err == nil {
			l.counts.tcp.Add(1)
		}
		return a.c, a.err
	case c := <-l.mem:
		l.counts.memory.Add(1)
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close closes the TCP listener and refuses later dials in memory.
func (l *listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.tcp.Close()
}

// Addr is the TCP listener's address, which kfake advertises.
func (l *listener) Addr() net.Addr { return l.tcp.Addr() }

// dial hands the broker one end of a new in-memory connection, once it
// accepts, and returns the other end.
func (l *listener) dial(ctx context.Context) (net.Conn, error) {
	// The broker sees the gateway as a loopback client (DescribeGroups
	// shows it as the client host, ACLs match on it), as over TCP.
	client, server := mempipe.New(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, l.tcp.Addr())
	select {
	case l.mem <- server:
		return client, nil
	case <-l.closed:
		client.Close()
		server.Close()
		return nil, net.ErrClosed
	case <-ctx.Done():
		client.Close()
		server.Close()
		return nil, ctx.Err()
	}
}

// listeners records the brokers' listeners by address as kfake opens them,
// at start and for brokers added later.
type listeners struct {
	counts acceptCounts
	mu     sync.Mutex
	byAddr map[string]*listener
}

// acceptCounts counts the connections the brokers accepted, by transport.
type acceptCounts struct {
	memory, tcp atomic.Int64
}

// Accepted returns how many connections the brokers have accepted in
// memory (from [Cluster.Dial]) and over TCP since the cluster started. The
// daemon exports them: a gateway whose connections show up under TCP is
// paying for loopback it should not.
func (c *Cluster) Accepted() (memory, tcp int64) {
	return c.listeners.counts.memory.Load(), c.listeners.counts.tcp.Load()
}

// listen is kfake's listen function.
func (ls *listeners) listen(network, address string) (net.Listener, error) {
	tcp, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	l := newListener(tcp, &ls.counts)
	ls.mu.Lock()
	ls.byAddr[tcp.Addr().String()] = l
	ls.mu.Unlock()
	return l, nil
}

func (ls *listeners) lookup(addr string) *listener {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.byAddr[addr]
}

// Dial opens a connection to the broker at addr: in memory when addr is
// one of the cluster's listen addresses, over TCP otherwise. It has the
// shape of the proxy's upstream dialer.
func (c *Cluster) Dial(ctx context.Context, addr string) (net.Conn, error) {
	if l := c.listeners.lookup(addr); l != nil {
		conn, err := l.dial(ctx)
		if err != nil {
			return nil, fmt.Errorf("embedded broker %s: %w", addr, err)
		}
		return conn, nil
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	return d.DialContext(ctx, "tcp", addr)
}

// InMemory is the option that makes a kgo client reach the cluster's
// brokers through [Cluster.Dial], in memory: the daemon's own client
// carries every commit the gateway forwards, and over loopback each would
// cost four more system calls and two more wake-ups.
func (c *Cluster) InMemory() kgo.Opt {
	return kgo.Dialer(func(ctx context.Context, _, host string) (net.Conn, error) { return c.Dial(ctx, host) })
}

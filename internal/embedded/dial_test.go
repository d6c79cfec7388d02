package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmassign/wasmassign/internal/config"
)

// connKinds records whether each connection a client dialled was TCP.
type connKinds struct {
	mu       sync.Mutex
	tcp, mem int
}

func (k *connKinds) dialer(c *Cluster) func(ctx context.Context, network, host string) (net.Conn, error) {
	return func(ctx context.Context, _, host string) (net.Conn, error) {
		conn, err := c.Dial(ctx, host)
		if err == nil {
			k.mu.Lock()
			if _, ok := conn.(*net.TCPConn); ok {
				k.tcp++
			} else {
				k.mem++
			}
			k.mu.Unlock()
		}
		return conn, err
	}
}

// start starts a cluster for one test, stopped by its cleanup (Close may be
// called earlier), and returns it with a context bounding the test.
func start(t *testing.T, cfg config.Embedded) (*Cluster, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	c, err := Start(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, ctx
}

func TestDial_ReachesEveryBrokerInMemory(t *testing.T) {
	c, ctx := start(t, config.Embedded{Brokers: 3, Topics: []config.TopicSpec{{Name: "t", Partitions: 6, Replication: 1}}})
	mem0, tcp0 := c.Accepted()
	var kinds connKinds
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.Dialer(kinds.dialer(c)),
		kgo.DefaultProduceTopic("t"), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	// Records big enough that responses take many reads of the pipe.
	const n = 600
	want := make(map[string]bool, n)
	for i := range n {
		v := append([]byte(fmt.Sprintf("%04d-", i)), bytes.Repeat([]byte{'x'}, 4<<10)...)
		want[string(v)] = true
		cl.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !want[string(r.Value)] {
				t.Fatalf("record %.8q... not produced, or consumed twice", r.Value)
			}
			delete(want, string(r.Value))
			got++
		})
	}
	kinds.mu.Lock()
	defer kinds.mu.Unlock()
	// The seed connection and one per broker at least.
	if kinds.tcp != 0 || kinds.mem < 3 {
		t.Errorf("dialled %d TCP and %d in-memory connections, want only in-memory ones, at least 3", kinds.tcp, kinds.mem)
	}
	// The brokers count what they accepted the same way (the accept of
	// the last dial may still be under way).
	mem1, tcp1 := c.Accepted()
	if tcp1 != tcp0 || mem1-mem0 < int64(kinds.mem)-1 || mem1-mem0 > int64(kinds.mem) {
		t.Errorf("the brokers accepted %d in-memory and %d TCP connections, the client dialled %d in memory and none over TCP",
			mem1-mem0, tcp1-tcp0, kinds.mem)
	}
}

func TestDial_OtherAddressesUseTCP(t *testing.T) {
	c, ctx := start(t, config.Embedded{Brokers: 1})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := c.Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, ok := conn.(*net.TCPConn); !ok {
		t.Errorf("dial of a non-broker address gave a %T, want TCP", conn)
	}
}

func TestDial_RefusedOnceClosed(t *testing.T) {
	c, ctx := start(t, config.Embedded{Brokers: 2})
	addr := c.Addrs()[1]
	c.Close()
	conn, err := c.Dial(ctx, addr)
	if !errors.Is(err, net.ErrClosed) {
		if conn != nil {
			conn.Close()
		}
		t.Fatalf("dial after Close: %v, want net.ErrClosed", err)
	}
}

func TestDial_ConnectionEndsWithTheCluster(t *testing.T) {
	c, ctx := start(t, config.Embedded{Brokers: 1})
	conn, err := c.Dial(ctx, c.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A request in flight, half written, when the cluster stops: the
	// reader on our side must see the end rather than wait for ever.
	go conn.Write([]byte{0, 0, 0, 9, 0, 18})
	c.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("read after the cluster closed: %v, want EOF", err)
	}
}

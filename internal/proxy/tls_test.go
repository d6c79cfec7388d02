package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmassign/wasmassign/internal/testutil"
)

func TestProxy_ServesTLSOnEveryListener(t *testing.T) {
	cl := tlsEnvClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 100
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for got < n && ctx.Err() == nil {
		got += cl.PollFetches(ctx).NumRecords()
	}
	if got != n {
		t.Fatalf("consumed %d over TLS, want %d", got, n)
	}
}

// tlsEnvClient starts a proxy serving TLS in front of three brokers and
// returns a kgo client of it that produces to and consumes testTopic from
// the start, failing the test if it dials anything but the proxy.
func tlsEnvClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cert, pool := testutil.SelfSigned(t)
	e := startEnv(t, 3, func(o *Options) {
		o.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	})
	d := &net.Dialer{Timeout: 5 * time.Second}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, _ := net.SplitHostPort(addr)
		if !e.proxyPorts()[port] {
			t.Errorf("kgo dialed %s, which is not a proxy address", addr)
		}
		td := &tls.Dialer{NetDialer: d, Config: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}
		return td.DialContext(ctx, network, addr)
	}
	opts = append([]kgo.Opt{kgo.SeedBrokers(e.proxy.Addr()), kgo.Dialer(dial), kgo.DefaultProduceTopic(testTopic),
		kgo.ConsumeTopics(testTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Requests and responses above the streaming size go straight through
// instead of being read whole; between TLS and TCP that takes the chunk
// buffer, not splice (copyLong). Every byte of large records must arrive
// intact and in order both ways.
func TestProxy_TLSStreamsLargeRequestsAndResponsesIntact(t *testing.T) {
	cl := tlsEnvClient(t, kgo.ProducerBatchMaxBytes(4<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.FetchMaxBytes(8<<20), kgo.FetchMaxPartitionBytes(8<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n, size = 24, 300 << 10 // each record is several streaming sizes
	value := func(i int) []byte {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(i*31 + j*7 + j>>9)
		}
		return b
	}
	for i := range n {
		r := &kgo.Record{Value: value(i), Partition: int32(i % 2), Key: []byte(strconv.Itoa(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	seen := make(map[int]bool)
	for len(seen) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				t.Errorf("fetching %s-%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			i, err := strconv.Atoi(string(r.Key))
			if err != nil || i < 0 || i >= n {
				t.Fatalf("record with key %q", r.Key)
			}
			if !bytes.Equal(r.Value, value(i)) {
				t.Fatalf("record %d: %d bytes arrived changed", i, len(r.Value))
			}
			seen[i] = true
		})
	}
	if len(seen) != n {
		t.Fatalf("consumed %d distinct large records over TLS, want %d", len(seen), n)
	}
}

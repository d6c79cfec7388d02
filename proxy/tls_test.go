package proxy

import (
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.proxy.Addr()), kgo.Dialer(dial), kgo.DefaultProduceTopic(testTopic),
		kgo.ConsumeTopics(testTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
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

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
	"github.com/wasmassign/wasmassign/internal/testutil/matrix"
)

// TestTLS_ConsumersReachTheGatewayOverTLS serves clients over TLS with a
// certificate the test made: kgo clients that trust it produce and consume
// as a group the gateway manages, each record once, each consumer reading
// exactly what the gateway assigned it; a client that does not trust the
// certificate gets nothing.
func TestTLS_ConsumersReachTheGatewayOverTLS(t *testing.T) {
	t.Parallel()
	// kgo's default balancer list is cooperative-sticky alone.
	matrix.Record(t, rkKgoRow(t, "cooperative-sticky", "kfake"))
	ctx := testCtx(t, 60*time.Second)
	dir := t.TempDir()
	cert, pool := testutil.SelfSigned(t)
	certFile, keyFile := testutil.WriteKeyPair(t, dir, cert)
	clientTLS := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	cfg := testutil.GatewayConfig{
		Server:          fmt.Sprintf("tls_cert = %q\ntls_key = %q", certFile, keyFile),
		EmbeddedBrokers: 2,
		EmbeddedTopics:  []string{"secure:4"},
		Groups:          []testutil.GroupRule{{Match: "*"}},
	}.String()
	d := startDaemon(t, dir, cfg)
	seeds := []string{d.bootstrap}

	untrusted := adminClient(t, seeds, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}), kgo.RequestRetries(0))
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	if err := untrusted.Ping(pctx); !errors.As(err, new(x509.UnknownAuthorityError)) {
		t.Errorf("a client that does not trust the certificate got %v; want an unknown-authority error", err)
	}
	cancel()

	const group = "over-tls"
	type read struct {
		mu   sync.Mutex
		recs map[string]map[[2]int64]int // consumer -> (partition, offset) -> times
	}
	got := &read{recs: map[string]map[[2]int64]int{}}
	var wg sync.WaitGroup
	cctx, stop := context.WithCancel(ctx)
	defer func() { stop(); wg.Wait() }()
	clients := map[string]*kgo.Client{}
	for _, name := range []string{"t1", "t2"} {
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(seeds...),
			kgo.DialTLSConfig(clientTLS.Clone()),
			kgo.ClientID("tls-"+name),
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics("secure"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(3*time.Second),
			kgo.HeartbeatInterval(100*time.Millisecond),
			kgo.FetchMaxWait(100*time.Millisecond),
		)
		if err != nil {
			t.Fatal(err)
		}
		clients[name] = cl
		got.recs[name] = map[[2]int64]int{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cctx.Err() == nil {
				fs := cl.PollFetches(cctx)
				fs.EachRecord(func(r *kgo.Record) {
					got.mu.Lock()
					got.recs[name][[2]int64{int64(r.Partition), r.Offset}]++
					got.mu.Unlock()
				})
			}
		}()
	}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	g, err := stableWith(ctx, d, group, 2, "secure", 4)
	if err != nil {
		t.Fatal(err)
	}
	produce(ctx, t, seeds, "secure", 200, kgo.DialTLSConfig(clientTLS.Clone()))
	err = kfakegroup.WaitFor(ctx, func() error {
		got.mu.Lock()
		defer got.mu.Unlock()
		n := 0
		for name, rs := range got.recs {
			for po, k := range rs {
				if k > 1 {
					return fmt.Errorf("%s read %d@%d %d times", name, po[0], po[1], k)
				}
				n++
			}
		}
		if n != 200 {
			return fmt.Errorf("read %d of 200 records", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if g, err = stableWith(ctx, d, group, 2, "secure", 4); err != nil {
		t.Fatal(err)
	}
	got.mu.Lock()
	defer got.mu.Unlock()
	for _, m := range g.Members {
		name := m.ClientID[len("tls-"):]
		seen := map[int32]bool{}
		for po := range got.recs[name] {
			seen[int32(po[0])] = true
		}
		var ps []int32
		for p := range seen {
			ps = append(ps, p)
		}
		slices.Sort(ps)
		if want := slices.Sorted(slices.Values(m.Assignment["secure"])); !slices.Equal(ps, want) {
			t.Errorf("%s read partitions %v; the gateway assigned %v", m.ClientID, ps, want)
		}
	}
}

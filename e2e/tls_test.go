package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmassign/wasmassign/internal/testutil/matrix"
)

// selfSigned writes a fresh self-signed certificate for 127.0.0.1 and its
// key into dir, and returns the files and a client config trusting it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "wasmassign e2e"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

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
	certFile, keyFile, clientTLS := selfSigned(t, dir)
	cfg := fmt.Sprintf(`
[server]
listen = "127.0.0.1:0"
advertised_host = "127.0.0.1"
broker_port_base = 0
admin_listen = "127.0.0.1:0"
tls_cert = %q
tls_key = %q

[upstream]
metadata_refresh = "1s"
[upstream.embedded]
brokers = 2
topics = ["secure:4"]

[[groups]]
match = "*"
initial_rebalance_delay = "0s"
min_session_timeout = "1s"
`, certFile, keyFile)
	d := startDaemon(t, dir, cfg)
	seeds := []string{d.bootstrap}

	untrusted := adminClient(t, seeds, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}), kgo.RequestRetries(0))
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	if err := untrusted.Ping(pctx); err == nil {
		t.Error("a client that does not trust the certificate reached the gateway")
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
	err = kfakeWait(ctx, func() error {
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

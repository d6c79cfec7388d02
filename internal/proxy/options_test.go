package proxy

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmassign/wasmassign/internal/config"
	"github.com/wasmassign/wasmassign/internal/testutil"
)

// TestFromConfig_ReachesATLSAndSASLUpstream runs the proxy, configured from
// TOML, in front of a kfake that speaks only TLS and SASL: the proxy's own
// client authenticates with the configured user, and a plaintext client
// authenticates through the proxy with its own.
func TestFromConfig_ReachesATLSAndSASLUpstream(t *testing.T) {
	cert, _ := testutil.SelfSigned(t)
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(3, testTopic),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}}),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "gw", "gw-pass"), kfake.Superuser("PLAIN", "app", "app-pass"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	toml := fmt.Sprintf(`
[server]
listen = "127.0.0.1:0"
advertised_host = "127.0.0.1"
broker_port_base = 1 # replaced by free ports below
[upstream]
brokers = [%q]
metadata_refresh = "1s"
tls_ca = "ca.pem"
sasl_mechanism = "SCRAM-SHA-512"
sasl_user = "gw"
sasl_password = "gw-pass"
`, c.ListenAddrs()[0])
	cfg, err := config.Parse([]byte(toml), filepath.Join(dir, "gw.toml"), dir)
	if err != nil {
		t.Fatal(err)
	}
	o, err := FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o.BrokerPort = func(int32) int { return 0 }
	o.Logger = slog.New(slog.DiscardHandler)
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)

	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()), kgo.SASL(plainAuth("app", "app-pass")), kgo.DefaultProduceTopic(testTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("over tls")}).FirstErr(); err != nil {
		t.Fatalf("produce through the proxy to a TLS upstream: %v", err)
	}
	if got := len(p.Brokers()); got != 2 {
		t.Errorf("proxy knows %d upstream brokers, want 2", got)
	}
}

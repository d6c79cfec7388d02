package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/wasmassign/wasmassign/internal/config"
)

// FromConfig returns the options a configuration asks for: listeners and
// their TLS from [server], and from [upstream] the brokers, the refresh
// interval, TLS to the upstream (for the proxy's own client and for every
// client connection it opens) and SASL for the proxy's own client only
// (clients authenticate through the proxy themselves). The caller adds the
// interceptor, the rack hook and the logger; for the embedded cluster it
// sets UpstreamBrokers to the cluster's addresses.
func FromConfig(cfg *config.Config) (Options, error) {
	o := Options{
		Server:          cfg.Server,
		UpstreamBrokers: cfg.Upstream.Brokers,
		MetadataRefresh: cfg.Upstream.MetadataRefresh,
	}
	if cfg.Server.TLSCert != "" || cfg.Server.TLSKey != "" {
		cert, err := tls.LoadX509KeyPair(cfg.Server.TLSCert, cfg.Server.TLSKey)
		if err != nil {
			return Options{}, fmt.Errorf("%s: server.tls_cert/tls_key: %w", cfg.Source, err)
		}
		o.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if cfg.Upstream.TLSCA != "" {
		pem, err := os.ReadFile(cfg.Upstream.TLSCA)
		if err != nil {
			return Options{}, fmt.Errorf("%s: upstream.tls_ca: %w", cfg.Source, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return Options{}, fmt.Errorf("%s: upstream.tls_ca: %s holds no PEM certificate", cfg.Source, cfg.Upstream.TLSCA)
		}
		base := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		o.ClientOpts = append(o.ClientOpts, kgo.DialTLSConfig(base.Clone()))
		d := &net.Dialer{Timeout: 10 * time.Second}
		o.DialUpstream = func(ctx context.Context, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			c := base.Clone()
			c.ServerName = host
			return (&tls.Dialer{NetDialer: d, Config: c}).DialContext(ctx, "tcp", addr)
		}
	}
	u := cfg.Upstream
	// An upstream that wants the gateway to authenticate wants every client
	// to: the gateway must not answer for it before they have.
	o.RequireClientSASL = u.SASLMechanism != ""
	switch u.SASLMechanism {
	case "":
	case "PLAIN":
		o.ClientOpts = append(o.ClientOpts, kgo.SASL(plain.Auth{User: u.SASLUser, Pass: u.SASLPassword}.AsMechanism()))
	case "SCRAM-SHA-256":
		o.ClientOpts = append(o.ClientOpts, kgo.SASL(scram.Auth{User: u.SASLUser, Pass: u.SASLPassword}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		o.ClientOpts = append(o.ClientOpts, kgo.SASL(scram.Auth{User: u.SASLUser, Pass: u.SASLPassword}.AsSha512Mechanism()))
	default:
		return Options{}, fmt.Errorf("%s: upstream.sasl_mechanism: %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", cfg.Source, u.SASLMechanism)
	}
	return o, nil
}

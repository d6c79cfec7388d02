package testutil_test

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/wasmassign/wasmassign/internal/testutil"
)

func TestSelfSigned_WrittenKeyPairLoadsAndVerifiesFor127001(t *testing.T) {
	cert, pool := testutil.SelfSigned(t)
	certFile, keyFile := testutil.WriteKeyPair(t, t.TempDir(), cert)
	loaded, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(loaded.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("the written certificate does not verify for 127.0.0.1 against the pool: %v", err)
	}
	other, _ := testutil.SelfSigned(t)
	if _, err := other.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"}); err == nil {
		t.Error("another fresh certificate verifies against the first one's pool: the pool trusts more than the one certificate")
	}
}

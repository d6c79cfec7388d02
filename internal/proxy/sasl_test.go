package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

func TestProxy_ClientSASLPassesThroughUntouched(t *testing.T) {
	e := startEnv(t, 2, func(o *Options) {
		// The proxy's own client authenticates for itself.
		o.ClientOpts = []kgo.Opt{kgo.SASL(plain.Auth{User: "gw", Pass: "gw-secret"}.AsMechanism())}
	}, kfake.EnableSASL(), kfake.Superuser("PLAIN", "gw", "gw-secret"), kfake.Superuser("SCRAM-SHA-256", "alice", "alice-secret"))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	good := e.client(t, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()), kgo.DefaultProduceTopic(testTopic))
	if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("SCRAM client through the proxy: %v", err)
	}

	bad := e.client(t, kgo.SASL(scram.Auth{User: "alice", Pass: "wrong"}.AsSha256Mechanism()), kgo.DefaultProduceTopic(testTopic), kgo.RecordRetries(1))
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	if err := bad.ProduceSync(short, &kgo.Record{Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("a wrong password authenticated through the proxy")
	}
}

func plainAuth(user, pass string) sasl.Mechanism {
	return plain.Auth{User: user, Pass: pass}.AsMechanism()
}

package proxy

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/wasmassign/wasmassign/internal/config"
)

// describeAnswerer answers DescribeGroups itself, as the gateway does for
// a managed group, and counts the requests it was handed.
type describeAnswerer struct{ calls atomic.Int32 }

func (*describeAnswerer) Intercepts(key int16) bool { return key == int16(kmsg.DescribeGroups) }

func (a *describeAnswerer) Intercept(_ context.Context, r Request) (Decision, error) {
	a.calls.Add(1)
	resp := r.Req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, g := range r.Req.(*kmsg.DescribeGroupsRequest).Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.State = g, "Stable"
		resp.Groups = append(resp.Groups, rg)
	}
	return Decision{Respond: resp}, nil
}

// With a SASL upstream, the proxy answers nothing itself before the
// upstream has accepted the client: a client that skipped authentication,
// or stopped halfway through SCRAM, has its connection closed, as the
// broker closes it; PLAIN and SCRAM clients that authenticated are served.
func TestProxy_SASLUpstreamInterceptsOnlyAuthenticatedClients(t *testing.T) {
	ans := &describeAnswerer{}
	var racks atomic.Int32
	e := startEnv(t, 1, func(o *Options) {
		o.ClientOpts = []kgo.Opt{kgo.SASL(plainAuth("gw", "gw-secret"))}
		o.Interceptor = ans
		o.RequireClientSASL = true
		o.OnFetchRack = func(ConnInfo, string, string, []kmsg.FetchRequestTopic) { racks.Add(1) }
	}, kfake.EnableSASL(), kfake.Superuser("PLAIN", "gw", "gw-secret"),
		kfake.Superuser("PLAIN", "bob", "bob-secret"), kfake.Superuser("SCRAM-SHA-256", "alice", "alice-secret"))
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Version = 5
	describe.Groups = []string{"g"}

	refused := []struct {
		name  string
		steps func(r *rawConn)
	}{
		{"no authentication", func(r *rawConn) {}},
		{"SCRAM stopped after the server's nonce", func(r *rawConn) {
			hs := kmsg.NewPtrSASLHandshakeRequest()
			hs.Version, hs.Mechanism = 1, "SCRAM-SHA-256"
			if resp := r.roundTrip(hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
				t.Fatalf("SaslHandshake: error %d", resp.ErrorCode)
			}
			first := kmsg.NewPtrSASLAuthenticateRequest()
			first.Version = 1
			first.SASLAuthBytes = []byte("n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL")
			if resp := r.roundTrip(first).(*kmsg.SASLAuthenticateResponse); resp.ErrorCode != 0 {
				t.Fatalf("SCRAM client-first: error %d", resp.ErrorCode)
			}
		}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			r := dialRaw(t, e.proxy.Addr())
			av := kmsg.NewPtrApiVersionsRequest()
			if resp := r.roundTrip(av).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
				t.Fatalf("ApiVersions before authentication: error %d", resp.ErrorCode)
			}
			tt.steps(r)
			before := ans.calls.Load()
			r.send(describe, 9)
			if !r.closedByPeer() {
				t.Error("an intercepted request before authentication was answered; the connection should close")
			}
			if n := ans.calls.Load() - before; n != 0 {
				t.Errorf("the interceptor was handed %d requests of an unauthenticated client", n)
			}
		})
	}

	t.Run("fetch rack before authentication", func(t *testing.T) {
		r := dialRaw(t, e.proxy.Addr())
		fetch := kmsg.NewPtrFetchRequest()
		fetch.Version, fetch.Rack = 12, "az-intruder"
		r.send(fetch, 11)
		r.closedByPeer()
		if n := racks.Load(); n != 0 {
			t.Errorf("the rack of an unauthenticated client's Fetch was recorded %d times", n)
		}
	})

	for _, tt := range []struct {
		name string
		mech kgo.Opt
	}{
		{"PLAIN", kgo.SASL(plainAuth("bob", "bob-secret"))},
		{"SCRAM-SHA-256", kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism())},
	} {
		t.Run(tt.name+" authenticated", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cl := e.client(t, tt.mech)
			before := ans.calls.Load()
			resp, err := describe.RequestWith(ctx, cl)
			if err != nil {
				t.Fatalf("DescribeGroups after %s: %v", tt.name, err)
			}
			if len(resp.Groups) != 1 || resp.Groups[0].State != "Stable" || ans.calls.Load() == before {
				t.Errorf("DescribeGroups after %s was not answered by the interceptor: %+v", tt.name, resp.Groups)
			}
		})
	}
}

// A configured upstream SASL mechanism (the gateway authenticates) is what
// makes the proxy require clients to authenticate before it answers them.
func TestFromConfig_RequiresClientSASLExactlyWhenTheUpstreamDoes(t *testing.T) {
	for _, tt := range []struct {
		sasl string
		want bool
	}{
		{"", false},
		{"sasl_mechanism = \"PLAIN\"\nsasl_user = \"gw\"\nsasl_password = \"x\"", true},
		{"sasl_mechanism = \"SCRAM-SHA-256\"\nsasl_user = \"gw\"\nsasl_password = \"x\"", true},
	} {
		dir := t.TempDir()
		toml := "[server]\nlisten = \"127.0.0.1:0\"\nadvertised_host = \"127.0.0.1\"\n[upstream]\nbrokers = [\"127.0.0.1:9092\"]\n" + tt.sasl + "\n"
		cfg, err := config.Parse([]byte(toml), filepath.Join(dir, "gw.toml"), dir)
		if err != nil {
			t.Fatal(err)
		}
		o, err := FromConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if o.RequireClientSASL != tt.want {
			t.Errorf("upstream %q: RequireClientSASL = %v, want %v", tt.sasl, o.RequireClientSASL, tt.want)
		}
	}
}

package proxy_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/internal/config"
	"github.com/wasmassign/wasmassign/internal/proxy"
)

// heartbeats answers every Heartbeat itself, as the coordinator answers
// those of the groups it manages; everything else goes upstream.
type heartbeats struct{}

func (heartbeats) Intercepts(key int16) bool { return key == int16(kmsg.Heartbeat) }

func (heartbeats) Intercept(_ context.Context, r proxy.Request) (proxy.Decision, error) {
	req := r.Req.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if req.Group == "rebalancing" {
		resp.ErrorCode = 27 // REBALANCE_IN_PROGRESS: the member rejoins
	}
	return proxy.Decision{Respond: resp}, nil
}

// A proxy in front of a cluster, with an interceptor answering Heartbeat.
func Example() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()

	p, err := proxy.New(proxy.Options{
		Server:          config.Server{Listen: "127.0.0.1:0", AdvertisedHost: "127.0.0.1"},
		BrokerPort:      func(int32) int { return 0 }, // any free port
		UpstreamBrokers: cluster.ListenAddrs(),
		Interceptor:     heartbeats{},
		Logger:          slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		panic(err)
	}
	defer p.Close(ctx)

	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	for _, group := range []string{"steady", "rebalancing"} {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.MemberID, req.Generation = group, "m-1", 1
		resp, err := req.RequestWith(ctx, cl.Broker(0))
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: error code %d\n", group, resp.ErrorCode)
	}
	// Output:
	// steady: error code 0
	// rebalancing: error code 27
}

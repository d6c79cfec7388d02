package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/internal/proxy/frame"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/hostile"
)

// TestBadInput_RandomBytesUnderEveryKeyAndVersionLeaveTheDaemonServing is
// the live bad-input test: a managed group consumes through the daemon binary
// while malformed requests under every API key and version (one past the
// highest, and keys kmsg does not know) arrive on the bootstrap listener and
// on every broker listener. Group requests among them reach the coordinator.
// The daemon must stay up, keep the group consuming, and answer a fresh
// client afterwards.
func TestBadInput_RandomBytesUnderEveryKeyAndVersionLeaveTheDaemonServing(t *testing.T) {
	if testing.Short() {
		t.Skip("sends a few thousand hostile requests")
	}
	d := startDaemon(t, t.TempDir(), testutil.GatewayConfig{
		EmbeddedBrokers: 2,
		EmbeddedTopics:  []string{"survivors:4:1"},
		Groups:          []testutil.GroupRule{{Match: "*"}},
	}.String())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	newClient := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(d.bootstrap)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	prod := newClient(kgo.DefaultProduceTopic("survivors"))
	cons := newClient(kgo.ConsumeTopics("survivors"), kgo.ConsumerGroup("survivors"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))

	// The listeners to attack: bootstrap plus each advertised broker.
	targets := []string{d.bootstrap}
	mdResp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, prod)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range mdResp.Brokers {
		targets = append(targets, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}
	if len(targets) != 3 {
		t.Fatalf("listeners %v, want bootstrap and 2 brokers", targets)
	}

	var consumed atomic.Int64
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		for consumeCtx.Err() == nil {
			consumed.Add(int64(cons.PollFetches(consumeCtx).NumRecords()))
		}
	}()
	produce := func(n int) {
		t.Helper()
		for i := range n {
			prod.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, nil)
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitConsumed := func(n int64) {
		t.Helper()
		for consumed.Load() < n && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		if got := consumed.Load(); got < n {
			t.Fatalf("group consumed %d records, want %d", got, n)
		}
	}
	produce(100)
	waitConsumed(100)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const maxKnownKey = 100 // above every key Kafka defines today
	keys := make(chan int16, maxKnownKey+2)
	for k := int16(-1); k <= maxKnownKey; k++ {
		keys <- k
	}
	close(keys)
	var wg sync.WaitGroup
	var sent atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for key := range keys {
				for v := int16(0); v <= hostile.MaxVersion(key)+1; v++ {
					target := targets[rng.IntN(len(targets))]
					nc, err := net.DialTimeout("tcp", target, 5*time.Second)
					if err != nil {
						t.Errorf("dial %s while under attack: %v", target, err)
						return
					}
					// Half the connections are established first (a
					// valid ApiVersions answered), so that the bad
					// request arrives mid-conversation, not as the first.
					if rng.IntN(2) == 0 {
						nc.SetDeadline(time.Now().Add(10 * time.Second))
						if !apiVersionsExchange(nc) {
							t.Errorf("%s: a valid ApiVersions was not answered while under attack", target)
							nc.Close()
							return
						}
					}
					nc.SetDeadline(time.Now().Add(200 * time.Millisecond))
					nc.Write(hostile.Frame(rng, key, v, "hostile", "hostile-target"))
					var sink [512]byte
					for {
						if _, err := nc.Read(sink[:]); err != nil {
							break
						}
					}
					nc.Close()
					sent.Add(1)
				}
			}
		}()
	}
	// The group keeps consuming during the barrage.
	produce(100)
	wg.Wait()
	t.Logf("sent %d hostile requests", sent.Load())
	produce(100)
	waitConsumed(300)
	stopConsuming()
	<-consumerDone

	select {
	case <-d.exited:
		t.Fatalf("the daemon exited during the barrage: %v", d.exitErr)
	default:
	}
	// Random bodies may happen to decode, and one frame in eight is cut
	// short, so which barrage connections are refused is left to chance.
	// These are not: a whole request under every key no broker accepts,
	// or one version past the highest the gateway speaks, must close its
	// connection with a log line naming the key.
	rng := rand.New(rand.NewPCG(seed, 99))
	var want []string
	for key := int16(-1); key <= maxKnownKey; key++ {
		if key == int16(kmsg.ApiVersions) {
			continue // ApiVersions too new is answered (KIP-511)
		}
		v := hostile.MaxVersion(key) + 1
		cause := fmt.Sprintf("unknown api key %d", key)
		if kmsg.RequestForKey(key) != nil {
			cause = kmsg.NameForKey(key)
		}
		b, at := frame.AppendSize(nil)
		id := "refused"
		b = frame.AppendRequestHeader(b, frame.RequestHeader{Key: key, Version: v, CorrelationID: 7, ClientID: &id, Flexible: hostile.Flexible(key, v)})
		b = append(b, hostile.Body(rng, key, v, "hostile-target")...)
		frame.FinishSize(b, at)
		nc, err := net.DialTimeout("tcp", targets[int(key+1)%len(targets)], 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		nc.Write(b)
		if n, err := nc.Read(make([]byte, 64)); err == nil {
			t.Errorf("key %d v%d was answered (%d bytes), want the connection closed", key, v, n)
		}
		nc.Close()
		want = append(want, cause)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, cause := range want {
		for !loggedRefusal(d.log.String(), cause) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if !loggedRefusal(d.log.String(), cause) {
			t.Errorf("no \"closing client connection\" line names %q", cause)
		}
	}
	// A fresh client joins the same group and is served.
	fresh := newClient(kgo.ConsumeTopics("survivors"), kgo.ConsumerGroup("after-the-barrage"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got int
	for got < 300 && ctx.Err() == nil {
		got += fresh.PollFetches(ctx).NumRecords()
	}
	if got < 300 {
		t.Fatalf("a fresh group read %d of 300 records after the barrage", got)
	}
	g, err := d.group(ctx, "after-the-barrage")
	if err != nil {
		t.Fatal(err)
	}
	if g.State != "Stable" || len(g.Members) != 1 {
		t.Fatalf("fresh group is %s with %d members, want Stable with 1", g.State, len(g.Members))
	}
}

// loggedRefusal reports whether log has a "closing client connection"
// line whose error names cause: for a known key, its name followed by a
// reason a broker refuses it (the version, or the key not being offered).
func loggedRefusal(log, cause string) bool {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "closing client connection") || !strings.Contains(line, cause) {
			continue
		}
		if strings.HasPrefix(cause, "unknown api key") {
			if rest := line[strings.Index(line, cause)+len(cause):]; rest == "" || rest[0] < '0' || rest[0] > '9' {
				return true
			}
			continue
		}
		if strings.Contains(line, "outside the supported range") || strings.Contains(line, "is not offered") {
			return true
		}
	}
	return false
}

// apiVersionsExchange sends a valid ApiVersions on nc and reads its whole
// answer; false if it was not answered.
func apiVersionsExchange(nc net.Conn) bool {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "hostile", "1"
	if _, err := nc.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("hostile")).AppendRequest(nil, req, 0)); err != nil {
		return false
	}
	_, err := frame.Read(bufio.NewReaderSize(nc, 16), nil, 1<<20)
	return err == nil
}

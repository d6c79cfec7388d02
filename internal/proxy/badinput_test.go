package proxy

import (
	"context"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/internal/proxy/frame"
	"github.com/wasmassign/wasmassign/internal/testutil/hostile"
)

func TestProxy_RandomBytesUnderEveryKeyAndVersionLeaveAConsumingGroupServed(t *testing.T) {
	if testing.Short() {
		t.Skip("sends a few thousand requests")
	}
	for _, mode := range responseModes {
		t.Run(mode.name, func(t *testing.T) { testRandomBytes(t, mode.tweak) })
	}
}

func testRandomBytes(t *testing.T, tweak func(*Options)) {
	e := startEnv(t, 3, tweak)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	prod := e.client(t, kgo.DefaultProduceTopic(testTopic))
	cons := e.client(t, kgo.ConsumeTopics(testTopic), kgo.ConsumerGroup("survivors"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var consumed atomic.Int64
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		for consumeCtx.Err() == nil {
			fs := cons.PollFetches(consumeCtx)
			consumed.Add(int64(fs.NumRecords()))
		}
	}()
	produce := func(n int) {
		for i := range n {
			prod.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
				if err != nil && ctx.Err() == nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitConsumed := func(n int64) {
		for consumed.Load() < n && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		if got := consumed.Load(); got < n {
			t.Fatalf("group consumed %d records, want %d", got, n)
		}
	}
	produce(200)
	waitConsumed(200)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	keys := make(chan int16, maxKey+3)
	for k := int16(-1); k <= maxKey+1; k++ {
		keys <- k
	}
	close(keys)
	var wg sync.WaitGroup
	var sent atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for key := range keys {
				hi := int16(3)
				if key >= 0 && key <= maxKey {
					if r := kmsg.RequestForKey(key); r != nil {
						hi = r.MaxVersion() + 1
					}
				}
				for v := int16(0); v <= hi; v++ {
					nc, err := net.DialTimeout("tcp", e.proxy.Addr(), 2*time.Second)
					if err != nil {
						t.Errorf("dial while under attack: %v", err)
						return
					}
					cid := "fuzz"
					flexible := key >= 0 && key <= maxKey && e.proxy.flexFrom[key] >= 0 && v >= e.proxy.flexFrom[key]
					b, at := frame.AppendSize(nil)
					b = frame.AppendRequestHeader(b, frame.RequestHeader{Key: key, Version: v, CorrelationID: 1, ClientID: &cid, Flexible: flexible})
					b = append(b, hostile.Body(rng, key, v, "")...)
					frame.FinishSize(b, at)
					if rng.IntN(8) == 0 {
						b = b[:rng.IntN(len(b))] // and hang up mid-request
					}
					nc.SetDeadline(time.Now().Add(150 * time.Millisecond))
					nc.Write(b)
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
	produce(200)
	wg.Wait()
	t.Logf("sent %d hostile requests", sent.Load())
	produce(200)
	waitConsumed(600)
	stopConsuming()
	<-consumerDone

	// And the proxy still answers a fresh client.
	r := dialRaw(t, e.proxy.Addr())
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	if resp := r.roundTrip(md).(*kmsg.MetadataResponse); len(resp.Brokers) != 3 {
		t.Errorf("after the barrage, metadata names %d brokers", len(resp.Brokers))
	}
}

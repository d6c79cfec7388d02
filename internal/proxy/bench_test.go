package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkProxyThroughput produces then consumes the same records directly
// against kfake and through the proxy in front of it, alternating within
// one run, and reports both steady-state rates and their ratio (goal:
// >= 0.95). Clients are created and warmed up before timing, so
// connection set-up, which the proxy lengthens by one dial, is not
// counted.
//
//	go test ./internal/proxy/ -run '^$' -bench ProxyThroughput -benchtime 10x
func BenchmarkProxyThroughput(b *testing.B) {
	const (
		records = 50_000
		size    = 200
	)
	e := startEnv(b, 3, func(o *Options) { o.Server.MaxFrameBytes = 0 }) // Kafka's default limit
	ctx := context.Background()
	admin, err := kgo.NewClient(kgo.SeedBrokers(e.cluster.ListenAddrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	value := make([]byte, size)

	type side struct{ prod, cons *kgo.Client }
	produce := func(cl *kgo.Client, n int) {
		for range n {
			cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	consume := func(cl *kgo.Client, n int) {
		for got := 0; got < n; {
			fs := cl.PollFetches(ctx)
			if err := fs.Err(); err != nil {
				b.Fatal(err)
			}
			got += fs.NumRecords()
		}
	}
	var sides [2]side // direct, proxy
	for mode := range sides {
		topic := fmt.Sprintf("bench-%d", mode)
		ct := kmsg.NewPtrCreateTopicsRequest()
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = topic, 6, 1
		ct.Topics = append(ct.Topics, t)
		if _, err := ct.RequestWith(ctx, admin); err != nil {
			b.Fatal(err)
		}
		seeds := e.cluster.ListenAddrs()
		if mode == 1 {
			seeds = []string{e.proxy.Addr()}
		}
		prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			b.Fatal(err)
		}
		defer prod.Close()
		cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			b.Fatal(err)
		}
		defer cons.Close()
		produce(prod, 1000) // warm up every connection
		consume(cons, 1000)
		sides[mode] = side{prod, cons}
	}

	var elapsed, producing [2]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Alternate which side goes first so that neither is favoured.
		for _, mode := range []int{i % 2, 1 - i%2} {
			start := time.Now()
			produce(sides[mode].prod, records)
			producing[mode] += time.Since(start)
			consume(sides[mode].cons, records)
			elapsed[mode] += time.Since(start)
		}
	}
	mb := float64(b.N) * records * size / 1e6
	direct, proxied := mb/elapsed[0].Seconds(), mb/elapsed[1].Seconds()
	b.ReportMetric(direct, "direct-MB/s")
	b.ReportMetric(proxied, "proxy-MB/s")
	b.ReportMetric(proxied/direct, "ratio")
	b.ReportMetric(producing[1].Seconds()/producing[0].Seconds(), "produce-time-ratio")
	b.ReportMetric((elapsed[1]-producing[1]).Seconds()/(elapsed[0]-producing[0]).Seconds(), "consume-time-ratio")
}

// BenchmarkProxyRoundTrip measures one request-response round trip that
// the proxy forwards as bytes (ListOffsets), directly against the broker
// and through the proxy: the difference is the latency the proxy adds.
func BenchmarkProxyRoundTrip(b *testing.B) {
	e := startEnv(b, 1, nil)
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 4
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = testTopic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	req.Topics = append(req.Topics, lt)
	for _, side := range []struct{ name, addr string }{
		{"direct", e.cluster.ListenAddrs()[0]},
		{"proxy", e.proxy.Addr()},
	} {
		b.Run(side.name, func(b *testing.B) {
			r := dialRaw(b, side.addr)
			for i := 0; i < b.N; i++ {
				r.send(req, int32(i))
				if corr, _ := r.recv(req); corr != int32(i) {
					b.Fatalf("correlation id %d, want %d", corr, i)
				}
			}
		})
	}
}

// BenchmarkProxyLargeFetch measures fetching about 1 MB of records from one
// partition, directly and through the proxy: the proxy reads a response
// whole before writing it, so its added latency grows with the size.
func BenchmarkProxyLargeFetch(b *testing.B) {
	e := startEnv(b, 1, func(o *Options) { o.Server.MaxFrameBytes = 0 })
	ctx := context.Background()
	prod, err := kgo.NewClient(kgo.SeedBrokers(e.cluster.ListenAddrs()...), kgo.DefaultProduceTopic(testTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	value := make([]byte, 1000)
	for range 1100 {
		prod.Produce(ctx, &kgo.Record{Partition: 0, Value: value}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mresp, err := md.RequestWith(ctx, prod)
	if err != nil {
		b.Fatal(err)
	}
	for _, version := range []int16{12, 16} {
		req := kmsg.NewPtrFetchRequest()
		req.Version = version
		req.MaxBytes = 1 << 20
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = testTopic, mresp.Topics[0].TopicID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		for _, side := range []struct{ name, addr string }{
			{"direct", e.cluster.ListenAddrs()[0]},
			{"proxy", e.proxy.Addr()},
		} {
			b.Run(fmt.Sprintf("v%d/%s", version, side.name), func(b *testing.B) {
				r := dialRaw(b, side.addr)
				for i := 0; i < b.N; i++ {
					r.send(req, int32(i))
					fr, err := r.readFrame()
					if err != nil || len(fr) < 500_000 {
						b.Fatalf("fetch response of %d bytes: %v", len(fr), err)
					}
					b.SetBytes(int64(len(fr)))
				}
			})
		}
	}
}

// BenchmarkRewriteMetadata rewrites a Metadata response (v12, 3 brokers,
// one topic) as the proxy does, its broker list in place, and, as the
// reference, by decoding, rewriting and encoding all of it, taking turns
// within the run; it reports both times and their ratio (in place over
// full).
func BenchmarkRewriteMetadata(b *testing.B) {
	for _, partitions := range []int{100, 10_000} {
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 12
		for n := range int32(3) {
			br := kmsg.NewMetadataResponseBroker()
			br.NodeID, br.Host, br.Port = n, fmt.Sprintf("broker-%d.upstream.example", n), 9092
			resp.Brokers = append(resp.Brokers, br)
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr("events")
		for p := range int32(partitions) {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader = p, p%3
			mp.Replicas, mp.ISR = []int32{p % 3, (p + 1) % 3, (p + 2) % 3}, []int32{p % 3, (p + 1) % 3}
			mt.Partitions = append(mt.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, mt)
		body := resp.AppendTo(nil)
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			var inPlace, full time.Duration
			for range b.N {
				t0 := time.Now()
				if _, err := rewriteMetadataBrokers(12, body, fuzzAdvertise, nil); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				r, err := decodeResponse(int16(kmsg.Metadata), 12, body)
				if err != nil {
					b.Fatal(err)
				}
				rewriteAddresses(r, fuzzAdvertise)
				r.AppendTo(nil)
				inPlace, full = inPlace+t1.Sub(t0), full+time.Since(t1)
			}
			b.ReportMetric(float64(inPlace.Nanoseconds())/float64(b.N), "in-place-ns/op")
			b.ReportMetric(float64(full.Nanoseconds())/float64(b.N), "full-ns/op")
			b.ReportMetric(inPlace.Seconds()/full.Seconds(), "ratio")
		})
	}
}

// BenchmarkProxyConnect measures a client's start-up on one connection:
// dial, ApiVersions, Metadata for one topic, close; directly against the
// broker and through the proxy. Fifty consumers starting at once open
// three such connections each, and on a machine whose cores they already
// fill, the proxy's CPU per connection is what lengthens their start-up.
func BenchmarkProxyConnect(b *testing.B) {
	e := startEnv(b, 1, func(o *Options) { o.Logger = slog.New(slog.DiscardHandler) })
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "bench", "1.0"
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(testTopic)
	md.Topics = append(md.Topics, mt)
	for _, side := range []struct{ name, addr string }{
		{"direct", e.cluster.ListenAddrs()[0]},
		{"proxy", e.proxy.Addr()},
	} {
		b.Run(side.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				r := dialRaw(b, side.addr)
				r.send(av, 1)
				if corr, _ := r.recv(av); corr != 1 {
					b.Fatalf("ApiVersions: correlation id %d, want 1", corr)
				}
				r.send(md, 2)
				if corr, _ := r.recv(md); corr != 2 {
					b.Fatalf("Metadata: correlation id %d, want 2", corr)
				}
				r.nc.Close()
			}
		})
	}
}

package realkafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/wasmassign/wasmassign/internal/testutil"
)

// startTimed starts a cluster and logs how long it took and how much memory
// each JVM holds, the figures the project's docs quote.
func startTimed(t *testing.T, opts Options) *Cluster {
	t.Helper()
	began := time.Now()
	c := Start(context.Background(), t, opts)
	took := time.Since(began)
	var rss []string
	for _, n := range c.Nodes {
		rss = append(rss, fmt.Sprintf("node %d %d MiB", n.ID, n.RSSKiB()/1024))
	}
	t.Logf("Kafka %s, %d broker(s) ready in %v (format + start); RSS: %s; JVM flags %v",
		c.Cache.Version, len(c.Nodes), took.Round(10*time.Millisecond), strings.Join(rss, ", "), c.opts.JVMFlags)
	return c
}

func TestSingleBrokerProducesAndConsumesRecordsInOrder(t *testing.T) {
	t.Parallel()
	c := startTimed(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const topic, n = "roundtrip", 200
	admin := c.Client(t)
	create := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 3, 1
	create.Topics = append(create.Topics, rt)
	create.TimeoutMillis = 30000
	cr, err := create.RequestWith(ctx, admin)
	if err != nil || cr.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topic: %v %+v", err, cr)
	}

	prod := c.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < n; i++ {
		r := &kgo.Record{Partition: int32(i % 3), Value: []byte(fmt.Sprint(i))}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}

	cons := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumerGroup("roundtrip-group"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[int32][]int{}
	total := 0
	for total < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records before %v", total, n, err)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			var v int
			fmt.Sscan(string(r.Value), &v)
			seen[r.Partition] = append(seen[r.Partition], v)
			total++
		})
	}
	if total != n {
		t.Fatalf("consumed %d records, produced %d", total, n)
	}
	for p, vs := range seen {
		if !sort.IntsAreSorted(vs) {
			t.Errorf("partition %d out of order: %v", p, vs)
		}
		for _, v := range vs {
			if int32(v%3) != p {
				t.Errorf("record %d read from partition %d", v, p)
			}
		}
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func TestThreeBrokersReportTheirRacksInMetadata(t *testing.T) {
	t.Parallel()
	racks := []string{"rack-a", "rack-b", "rack-c"}
	c := startTimed(t, Options{Brokers: 3, Racks: racks})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, c.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32]string{}
	for _, b := range resp.Brokers {
		if b.Rack == nil {
			t.Errorf("broker %d has no rack", b.NodeID)
			continue
		}
		got[b.NodeID] = *b.Rack
		if want := c.Node(b.NodeID).Addr; fmt.Sprintf("%s:%d", b.Host, b.Port) != want {
			t.Errorf("broker %d advertises %s:%d, harness chose %s", b.NodeID, b.Host, b.Port, want)
		}
	}
	for i, r := range racks {
		if got[int32(i+1)] != r {
			t.Errorf("broker %d rack = %q, want %q (metadata: %v)", i+1, got[int32(i+1)], r, got)
		}
	}
	if len(got) != len(racks) {
		t.Errorf("metadata lists %d brokers with racks, want %d: %v", len(got), len(racks), got)
	}
}

func TestEnsureCacheAcceptsOnlyACacheStampedWithTheCurrentPoms(t *testing.T) {
	t.Parallel()
	root := testutil.Root(t)
	stamp, err := Stamp(root, DefaultVersion)
	if err != nil {
		t.Fatal(err)
	}
	// The script and the harness must agree on the stamp, or every run
	// would fetch again (or never notice a changed pom).
	out, err := exec.Command("bash", filepath.Join(root, FetchScript), "--stamp").Output()
	if err != nil {
		t.Fatalf("%s --stamp: %v", FetchScript, err)
	}
	if got := strings.TrimSpace(string(out)); got != stamp {
		t.Fatalf("script stamp %q, harness stamp %q", got, stamp)
	}

	tests := []struct {
		name, stamp string // "" writes no STAMP
		ok          bool
	}{
		{"empty directory", "", false},
		{"another Kafka version", "3.9.0" + stamp[len(DefaultVersion):], false},
		{"poms changed since the fetch", DefaultVersion + " 0000", false},
		{"current", stamp, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.stamp != "" {
				if err := os.WriteFile(filepath.Join(dir, "STAMP"), []byte(tc.stamp+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := EnsureCache(context.Background(), root, dir, DefaultVersion, false)
			if tc.ok != (err == nil) {
				t.Fatalf("EnsureCache: %v, want ok=%v", err, tc.ok)
			}
			if err != nil && (!errors.Is(err, ErrNoCache) || !strings.Contains(err.Error(), "make kafka-cache")) {
				t.Errorf("error does not wrap ErrNoCache or name the fix: %v", err)
			}
		})
	}
}

func TestNewClusterIDIsAKafkaUuid(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := newClusterID()
		if len(id) != 22 || strings.HasPrefix(id, "-") || strings.ContainsAny(id, "+/=") {
			t.Fatalf("cluster id %q is not a 22-character base64url Uuid", id)
		}
		if seen[id] {
			t.Fatalf("cluster id %q drawn twice", id)
		}
		seen[id] = true
	}
}

func TestJavaClientFromTheCacheProducesToTheBroker(t *testing.T) {
	t.Parallel()
	c := Start(context.Background(), t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const topic, n = "from-java", 20
	src := filepath.Join(testutil.Root(t), "testdata", "realkafka", "java", "Produce.java")
	began := time.Now()
	out, err := c.JavaCommand(ctx, src, c.Bootstrap(), topic, fmt.Sprint(n)).CombinedOutput()
	if err != nil {
		t.Fatalf("java Produce: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("produced %d", n)) {
		t.Fatalf("java Produce printed %q", out)
	}
	t.Logf("Java producer (compile from source + run) took %v", time.Since(began).Round(10*time.Millisecond))

	cons := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records: %v", len(got), n, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for i, v := range got {
		if want := fmt.Sprintf("java-%d", i); v != want {
			t.Fatalf("record %d = %q, want %q (all: %v)", i, v, want, got)
		}
	}
}

func TestRestartedBrokerKeepsRecordsAndCommittedOffsets(t *testing.T) {
	t.Parallel()
	// A short broker session lets the restart after SIGKILL register without
	// waiting out the default 9 s (see KillNode).
	c := Start(context.Background(), t, Options{ServerProperties: map[string]string{
		"broker.session.timeout.ms":    "3000",
		"broker.heartbeat.interval.ms": "500",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const topic, group = "survives", "survives-group"
	cl := c.Client(t, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// kgo sends OffsetCommit v10 to Kafka 4.4, which names topics by id.
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 {
		t.Fatalf("metadata: %v %+v", err, mresp)
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, mresp.Topics[0].TopicID
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Offset, rp.LeaderEpoch = 1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %v %+v", err, resp)
	}

	// A clean stop, then a crash: after each restart, the record and the
	// commit are still there.
	for _, way := range []struct {
		name string
		stop func(int32) error
	}{{"SIGTERM", c.StopNode}, {"SIGKILL", c.KillNode}} {
		if err := way.stop(1); err != nil {
			t.Fatalf("%s: %v", way.name, err)
		}
		if pid := c.Node(1).PID(); pid != 0 {
			t.Fatalf("after %s the node still has pid %d", way.name, pid)
		}
		down, downCancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = kmsg.NewPtrMetadataRequest().RequestWith(down, c.Client(t))
		downCancel()
		if err == nil {
			t.Fatalf("after %s the cluster still answered Metadata", way.name)
		}

		began := time.Now()
		if err := c.RestartNode(ctx, 1); err != nil {
			t.Fatalf("restart after %s: %v", way.name, err)
		}
		t.Logf("restart after %s took %v", way.name, time.Since(began).Round(10*time.Millisecond))

		fetch := kmsg.NewPtrOffsetFetchRequest()
		fetch.Group = group
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = topic, []int32{0}
		fetch.Topics = append(fetch.Topics, ft)
		// kgo splits OffsetFetch per group and hands back this one-group layout.
		fresp, err := fetch.RequestWith(ctx, c.Client(t))
		if err != nil || len(fresp.Topics) != 1 || len(fresp.Topics[0].Partitions) != 1 || fresp.Topics[0].Partitions[0].Offset != 1 {
			t.Fatalf("committed offset after %s and restart: %v %+v, want 1", way.name, err, fresp)
		}
		cons := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		fs := cons.PollRecords(ctx, 1)
		if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "before" {
			t.Fatalf("record after %s and restart: %v (errors %v)", way.name, recs, fs.Errors())
		}
		cons.Close()
	}
}

func TestSASLPlainListenerAcceptsOnlyKnownUsers(t *testing.T) {
	t.Parallel()
	users := map[string]string{"alice": "alice-secret", "bob": `quote"and\backslash`}
	c := Start(context.Background(), t, Options{SASLPlainUsers: users})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if len(c.SASLAddrs()) != 1 || c.SASLAddrs()[0] == c.Addrs()[0] {
		t.Fatalf("SASL listener %v beside PLAINTEXT %v", c.SASLAddrs(), c.Addrs())
	}

	tests := []struct {
		name, user, pass string
		ok               bool
	}{
		{"known user", "alice", "alice-secret", true},
		{"password with quote and backslash", "bob", `quote"and\backslash`, true},
		{"wrong password", "alice", "nope", false},
		{"unknown user", "mallory", "alice-secret", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.SASLAddrs()...),
				kgo.SASL(plain.Auth{User: tc.user, Pass: tc.pass}.AsMechanism()),
				kgo.RequestRetries(0), kgo.RetryTimeout(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			if tc.ok {
				if err != nil {
					t.Fatalf("authenticated Metadata: %v", err)
				}
				// The SASL listener advertises itself, not the PLAINTEXT one.
				b := resp.Brokers[0]
				if got := fmt.Sprintf("%s:%d", b.Host, b.Port); got != c.SASLAddrs()[0] {
					t.Errorf("SASL listener advertises %s, want %s", got, c.SASLAddrs()[0])
				}
				return
			}
			if err == nil {
				t.Fatal("Metadata succeeded with bad credentials")
			}
			if !strings.Contains(err.Error(), "SASL_AUTHENTICATION_FAILED") {
				t.Errorf("bad credentials gave %v, want SASL_AUTHENTICATION_FAILED", err)
			}
		})
	}
	// PLAINTEXT still works without credentials.
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, c.Client(t)); err != nil {
		t.Errorf("PLAINTEXT listener beside SASL: %v", err)
	}
}

// endTB records how Start ended a test instead of ending the real one.
type endTB struct {
	testing.TB
	how, msg string
}

func (e *endTB) Helper() {}
func (e *endTB) Skip(args ...any) {
	e.how, e.msg = "skip", fmt.Sprint(args...)
	runtime.Goexit()
}
func (e *endTB) Fatalf(format string, args ...any) {
	e.how, e.msg = "fatal", fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// startEnds runs Start on a recorder and reports how it ended.
func startEnds(t *testing.T, opts Options) *endTB {
	rec := &endTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(context.Background(), rec, opts)
		rec.how = "returned"
	}()
	<-done
	return rec
}

func TestStartWithoutCacheOrFetchSkipsNamingTheMakeTarget(t *testing.T) {
	// Not parallel: it sets environment variables.
	t.Setenv(EnvNoFetch, "1")
	t.Setenv(EnvCache, "")
	if testing.Short() {
		t.Skip("Start skips everything under -short")
	}
	opts := Options{CacheDir: t.TempDir()}

	t.Setenv(EnvRequired, "")
	rec := startEnds(t, opts)
	if rec.how != "skip" || !strings.Contains(rec.msg, "make kafka-cache") || !strings.Contains(rec.msg, opts.CacheDir) {
		t.Errorf("without a cache: %s %q; want a skip naming the cache and `make kafka-cache`", rec.how, rec.msg)
	}

	t.Setenv(EnvRequired, "1")
	rec = startEnds(t, opts)
	if rec.how != "fatal" || !strings.Contains(rec.msg, "make kafka-cache") {
		t.Errorf("without a cache and %s=1: %s %q; want a failure", EnvRequired, rec.how, rec.msg)
	}
}

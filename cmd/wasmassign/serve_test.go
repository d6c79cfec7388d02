package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
)

// daemonUnderTest is a `wasmassign serve` running in this process.
type daemonUnderTest struct {
	bootstrap, admin string
	// embedded are the embedded cluster's brokers, when it runs one.
	embedded []string
	stop     func() int
}

// startServe runs serve with the given config text and waits for it to
// announce its addresses.
func startServe(t *testing.T, configText string) *daemonUnderTest {
	t.Helper()
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "gateway.toml")
	if err := os.WriteFile(cfgFile, []byte(configText), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var buf strings.Builder
	stderr := &lockedWriter{w: &buf}
	go func() {
		done <- run(ctx, []string{"serve", "--config", cfgFile}, pw, stderr) // the cache dir defaults to $WASMASSIGN_CACHE_DIR, set by TestMain
		pw.Close()
	}()
	d := &daemonUnderTest{}
	lines := bufio.NewScanner(pr)
	deadline := time.AfterFunc(30*time.Second, func() { pw.CloseWithError(fmt.Errorf("no announcement in 30s")) })
	for lines.Scan() {
		line := lines.Text()
		if a, ok := strings.CutPrefix(line, "wasmassign gateway listening on "); ok {
			d.bootstrap = a
		}
		if a, ok := strings.CutPrefix(line, "embedded cluster brokers (direct, bypassing the gateway): "); ok {
			d.embedded = strings.Split(a, ",")
		}
		if a, ok := strings.CutPrefix(line, "admin API and metrics on http://"); ok {
			d.admin = a
		}
		if d.bootstrap != "" && d.admin != "" {
			break
		}
	}
	deadline.Stop()
	go io.Copy(io.Discard, pr)
	if d.bootstrap == "" {
		cancel()
		t.Fatalf("serve did not announce its address; stderr:\n%s", stderr.String())
	}
	var once sync.Once
	code := -1
	d.stop = func() int {
		once.Do(func() {
			cancel()
			select {
			case code = <-done:
			case <-time.After(20 * time.Second):
				t.Error("serve did not stop within 20s of cancel")
			}
		})
		return code
	}
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("serve's log (%d bytes):\n%s", len(stderr.String()), tail(stderr.String(), 60))
		}
	})
	return d
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// serveConfig fronts an embedded cluster of 2 brokers with a 6-partition
// topic; groups named ranked-* are served by roundrobin whatever their
// members offer.
var serveConfig = testutil.GatewayConfig{
	EmbeddedBrokers: 2,
	EmbeddedTopics:  []string{"events:6"},
	Groups:          []testutil.GroupRule{{Match: "ranked-*", Assignor: "roundrobin"}, {Match: "*"}},
}.String()

// TestServe_AnnouncesTheEmbeddedBrokers checks the addresses announced for
// direct use: they serve the configured topic, and they are not the
// gateway's, which the gateway's own metadata names instead.
func TestServe_AnnouncesTheEmbeddedBrokers(t *testing.T) {
	d := startServe(t, serveConfig)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(d.embedded) != 2 {
		t.Fatalf("announced embedded brokers %q, want 2", d.embedded)
	}
	brokers := func(seeds []string) []string {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("events")
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 6 {
			t.Fatalf("metadata through %v: %+v", seeds, resp.Topics)
		}
		var addrs []string
		for _, b := range resp.Brokers {
			addrs = append(addrs, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
		}
		slices.Sort(addrs)
		return addrs
	}
	// The daemon's own client (metadata, coordinator lookups, forwarded
	// commits) is in memory too: before any direct client, no connection
	// came over TCP.
	if tcp := embeddedConnections(t, d.admin, "tcp"); tcp != 0 {
		t.Errorf("the embedded brokers accepted %v TCP connections before any direct client: the daemon's own client dialled them over loopback", tcp)
	}
	direct := brokers(d.embedded)
	memoryBefore := embeddedConnections(t, d.admin, "memory")
	gateway := brokers([]string{d.bootstrap})
	// The gateway reaches the brokers in memory, not over loopback TCP.
	if after := embeddedConnections(t, d.admin, "memory"); after <= memoryBefore {
		t.Errorf("the embedded brokers accepted %v in-memory connections before a client used the gateway and %v after: the proxy dialled them over TCP", memoryBefore, after)
	}
	want := slices.Sorted(slices.Values(d.embedded))
	if !slices.Equal(direct, want) {
		t.Errorf("the embedded brokers advertise %v, want the announced %v", direct, want)
	}
	if slices.ContainsFunc(gateway, func(a string) bool { return slices.Contains(direct, a) }) {
		t.Errorf("the gateway advertises %v, which include the embedded brokers %v", gateway, direct)
	}
}

// TestServe_GatewayAssignsWithTheConfiguredPlugin runs the daemon on its
// embedded cluster and two kgo consumers that offer range; the group is
// configured for roundrobin, so reading the partitions range would give
// means the gateway did not assign.
func TestServe_GatewayAssignsWithTheConfiguredPlugin(t *testing.T) {
	d := startServe(t, serveConfig)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const group = "ranked-orders"
	rig := kfakegroup.NewRig([]string{d.bootstrap}, group, []string{"events"}, nil)
	defer rig.Close(context.Background())
	l := rig.Ledger()
	if err := rig.Produce(ctx, "events", 240); err != nil {
		t.Fatal(err)
	}
	range_ := []kgo.GroupBalancer{kgo.RangeBalancer()}
	for _, n := range []string{"a", "b"} {
		if _, err := rig.Start(n, kfakegroup.ConsumerOptions{Balancers: range_}); err != nil {
			t.Fatal(err)
		}
	}
	var owned map[string][]kfakegroup.TopicPartition
	err := kfakegroup.WaitFor(ctx, func() error {
		owned = l.Owned()
		if len(owned) != 2 {
			return fmt.Errorf("owners %v", owned)
		}
		if err := kfakegroup.NoSharedOwnership(owned); err != nil {
			return err
		}
		return kfakegroup.Covers(owned, map[string]int32{"events": 6})
	})
	if err != nil {
		t.Fatal(err)
	}
	// Round robin deals alternately: each member holds partitions of one
	// parity, which range never gives two members of six partitions.
	for m, tps := range owned {
		var ps []int32
		for _, tp := range tps {
			ps = append(ps, tp.Partition)
		}
		slices.Sort(ps)
		if len(ps) != 3 || ps[0]%2 != ps[1]%2 || ps[1]%2 != ps[2]%2 {
			t.Errorf("%s holds %v: not a round-robin share", m, ps)
		}
	}
	if err := kfakegroup.WaitFor(ctx, kfakegroup.AllConsumed(l)); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.AllConsumedOnce(l); err != nil {
		t.Error(err)
	}

	var g struct {
		Group, State, Protocol, Assignor string
		Members                          []struct {
			MemberID   string `json:"member_id"`
			Assignment map[string][]int32
		}
	}
	getJSON(t, "http://"+d.admin+"/v1/groups/"+group, &g)
	if g.State != "Stable" || g.Protocol != "range" || g.Assignor != "roundrobin" || len(g.Members) != 2 {
		t.Errorf("admin shows %+v; want Stable, protocol range, assignor roundrobin, 2 members", g)
	}
	resp, err := http.Get("http://" + d.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`wasmassign_rebalances_total{assignor="roundrobin",rebalance_protocol="eager"}`,
		`wasmassign_group_members{group="ranked-orders"} 2`,
		`wasmassign_proxy_requests_total{answered="local",api="JoinGroup"}`,
		`wasmassign_proxy_requests_total{answered="upstream",api="Fetch"}`,
		`wasmassign_plugin_call_duration_seconds_count{assignor="roundrobin"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code := d.stop(); code != 0 {
		t.Errorf("serve exited %d after SIGTERM-like cancel, want 0", code)
	}
}

// A request still in flight when the daemon is told to stop (a Fetch
// long-polling for records that never come) may hold the shutdown for
// server.shutdown_timeout and no longer; the daemon then closes its
// connection and still exits 0: reaching the bound after SIGTERM is no failure.
func TestServe_ShutdownBoundedByTheTimeoutExitsZero(t *testing.T) {
	cfg := testutil.GatewayConfig{
		EmbeddedBrokers: 1,
		EmbeddedTopics:  []string{"quiet:1"},
		Server:          `shutdown_timeout = "1s"`,
	}.String()
	d := startServe(t, cfg)
	nc, err := net.Dial("tcp", d.bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// A Fetch from the end of an empty partition, waiting 30 s for a byte
	// (v12 names its topic; the one broker leads the partition).
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes = 12, 30000, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "quiet"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.LogStartOffset = 0, 0, 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	if _, err := nc.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("parked")).AppendRequest(nil, fetch, 1)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // forwarded and parked at the broker
	start := time.Now()
	code := d.stop()
	took := time.Since(start)
	if code != 0 {
		t.Errorf("serve exited %d, want 0", code)
	}
	if took > 6*time.Second {
		t.Errorf("shutdown took %v with shutdown_timeout 1s", took)
	}
	// The Fetch was in flight, not answered: its connection closes
	// without a byte.
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := nc.Read(make([]byte, 64)); n != 0 || err == nil {
		t.Errorf("the parked Fetch's connection read %d bytes, %v; want it closed unanswered", n, err)
	}
}

func TestServe_BadConfigStopsStartUpNamingTheKey(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "bad.toml")
	os.WriteFile(cfgFile, []byte("[[groups]]\nmatch = \"*\"\nassignor = \"no-such-plugin\"\n[upstream.embedded]\nbrokers = 1\n[server]\nlisten = \"127.0.0.1:0\"\nbroker_port_base = 0\nadmin_listen = \"\"\n"), 0o644)
	code, _, stderr := wasmassign(t, "serve", "--config", cfgFile)
	if code != 2 || !strings.Contains(stderr, "groups[0].assignor") || !strings.Contains(stderr, "no-such-plugin") {
		t.Errorf("exit %d, stderr %q; want 2 naming groups[0].assignor", code, stderr)
	}
}

// lockedWriter serialises writes from the daemon's goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.(fmt.Stringer).String()
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// embeddedConnections reads wasmassign_embedded_connections_total for
// transport from the daemon's /metrics.
func embeddedConnections(t *testing.T, admin, transport string) float64 {
	t.Helper()
	series := `wasmassign_embedded_connections_total{transport="` + transport + `"}`
	v, ok := metricValue(t, admin, series)
	if !ok {
		t.Fatalf("/metrics has no %s", series)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("%s %q: %v", series, v, err)
	}
	return f
}

// metricValue returns the value of one series (name and labels as the
// exposition format prints them) from the daemon's /metrics.
func metricValue(t *testing.T, admin, series string) (string, bool) {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v, true
		}
	}
	return "", false
}

package kit

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/plugins/builtin"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// sdk is one SDK's kit module: where its build puts it, and how to build
// it, for the message when it is missing.
type sdk struct {
	lang  string
	path  string // relative to the repository root
	build string
}

// sdks lists every SDK. A missing kit.wasm fails its SDK's test, naming
// the command that builds it: an SDK that cannot build its kit on this
// machine must say so, never pass by being skipped.
var sdks = []sdk{
	{"go", "sdk/go/kit/kit.wasm", "make go-kit (cd sdk/go && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o kit/kit.wasm ./kit)"},
	{"c", "sdk/c/kit/kit.wasm", "make c-kit (clang-14 --target=wasm32-wasi -mexec-model=reactor, see sdk/c/c.mk)"},
	{"assemblyscript", "sdk/assemblyscript/kit/kit.wasm", "make as-kit (npm install and asc, see sdk/assemblyscript/as.mk)"},
	{"rust", "sdk/rust/kit/kit.wasm", "the Rust SDK's kit build (see sdk/rust: cargo build --release --target wasm32-unknown-unknown, copied to sdk/rust/kit/kit.wasm)"},
}

// kitAssignors are the five assignors of sdk/KIT.md.
var kitAssignors = []string{"kit-error", "kit-log", "kit-roundrobin", "kit-roundtrip", "kit-userdata"}

func TestKit(t *testing.T) {
	builtinRR := loadBuiltinRoundRobin(t)
	for _, s := range sdks {
		t.Run(s.lang, func(t *testing.T) {
			// The SDKs are independent; most of the time goes to the
			// 10,000 calls of point 6, which overlap well across SDKs.
			t.Parallel()
			wasm := readKit(t, s)
			logs := &capture{store: &captureStore{}}
			h := newHost(t, wasmruntime.NewConfig().WithLogger(slog.New(logs)))
			name := "kit-" + s.lang + ".wasm"
			p, err := h.Load(context.Background(), name, wasm)
			if err != nil {
				t.Fatalf("1. the %s kit does not load: %v", s.lang, err)
			}
			t.Run("1 lists the five assignors", func(t *testing.T) { checkDescription(t, p) })
			t.Run("2 codec round trip", func(t *testing.T) { checkRoundTrip(t, p) })
			t.Run("3 error becomes ErrAssignorFailed", func(t *testing.T) { checkError(t, p) })
			t.Run("4 one log line reaches the host", func(t *testing.T) { checkLog(t, p, logs, name) })
			t.Run("5 user data round-trips", func(t *testing.T) { checkUserData(t, p) })
			t.Run("6 memory stays flat", func(t *testing.T) { checkMemoryFlat(t, wasm, name) })
			t.Run("7 roundrobin matches the built-in", func(t *testing.T) { checkRoundRobin(t, p, builtinRR) })
		})
	}
}

func readKit(t *testing.T, s sdk) []byte {
	t.Helper()
	path := filepath.Join(testutil.Root(t), s.path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the %s SDK's kit module %s is missing (%v): build it with %s", s.lang, s.path, err, s.build)
	}
	return b
}

// newHost returns a host whose limits leave room for the 1,000,000-partition
// request: a Go guest takes seconds for it on a loaded machine.
func newHost(t *testing.T, cfg wasmruntime.Config) *wasmruntime.Host {
	t.Helper()
	ctx := context.Background()
	cfg = cfg.WithCompilationCacheDir(os.Getenv("WASMASSIGN_TEST_CACHE")).
		WithLimits(wasmruntime.DefaultLimits().WithTimeout(2 * time.Minute).WithMemoryLimitMB(1024))
	h, err := wasmruntime.NewHost(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	return h
}

// loadBuiltinRoundRobin loads the embedded built-in roundrobin, the
// reference for point 7.
func loadBuiltinRoundRobin(t *testing.T) *wasmruntime.Plugin {
	t.Helper()
	wasm, err := fs.ReadFile(builtin.FS(), "roundrobin.wasm")
	if err != nil {
		t.Fatalf("the built-in roundrobin.wasm is missing (%v): run `make build` first", err)
	}
	p, err := newHost(t, wasmruntime.NewConfig()).Load(context.Background(), "builtin:roundrobin", wasm)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func checkDescription(t *testing.T, p *wasmruntime.Plugin) {
	var names []string
	for _, a := range p.Info().Assignors {
		names = append(names, a.Name)
		if a.Version == "" || !slices.Equal(a.Protocols, []string{"kit"}) || a.Modes != abi.ModeEager|abi.ModeCooperative || a.MayLeaveUnassigned {
			t.Errorf("assignor %s: version %q, protocols %q, modes %v, may leave unassigned %v; want a version, [kit], eager and cooperative, false",
				a.Name, a.Version, a.Protocols, a.Modes.Strings(), a.MayLeaveUnassigned)
		}
	}
	sort.Strings(names)
	if !slices.Equal(names, kitAssignors) {
		t.Fatalf("assignors %q, want %q", names, kitAssignors)
	}
}

// sentHash is the FNV-1a 64 hash of the bytes the host sends for req to
// assignor: the host sets Assignor, and a seed derived from the request
// when req has none.
func sentHash(req *abi.Request, assignor string) uint64 {
	r := *req
	r.Assignor = assignor
	if r.Seed == 0 {
		r.Seed = wasmruntime.Seed(&r)
	}
	h := fnv.New64a()
	h.Write(abi.AppendRequest(nil, &r))
	return h.Sum64()
}

func memberUserData(resp *abi.Response, member int32) ([]byte, bool) {
	for _, ma := range resp.Members {
		if ma.Member == member {
			return ma.UserData, true
		}
	}
	return nil, false
}

// roundTrip runs kit-roundtrip on req and checks member 0's hash. A request
// without members cannot carry it; there the call must still succeed.
func roundTrip(t *testing.T, p *wasmruntime.Plugin, what string, req *abi.Request) {
	t.Helper()
	resp, err := p.Assign(context.Background(), "kit-roundtrip", req)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if len(req.Members) == 0 {
		return
	}
	ud, ok := memberUserData(resp, 0)
	want := sentHash(req, "kit-roundtrip")
	if !ok || len(ud) != 8 || binary.LittleEndian.Uint64(ud) != want {
		t.Fatalf("%s: member 0's user data %x, want the hash %016x of the request the host sent: the SDK's decode and re-encode disagree", what, ud, want)
	}
}

func checkRoundTrip(t *testing.T, p *wasmruntime.Plugin) {
	files, err := filepath.Glob(filepath.Join(testutil.Root(t), "testdata/abi/request-*.bin"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden request vectors: %v", err)
	}
	withMembers := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		req, err := abi.DecodeRequest(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(req.Members) > 0 {
			withMembers++
		}
		roundTrip(t, p, filepath.Base(f), req)
	}
	if withMembers == 0 {
		t.Fatal("no golden request has members: no hash was checked")
	}
	rng := rand.New(rand.NewPCG(11, 13))
	for i := range 200 {
		roundTrip(t, p, fmt.Sprintf("random request %d", i), richRequest(rng))
	}
	start := time.Now()
	roundTrip(t, p, "2,000 members x 1,000,000 partitions", largeRequest())
	t.Logf("2,000 x 1,000,000 round trip: %v", time.Since(start).Round(time.Millisecond))
}

func checkError(t *testing.T, p *wasmruntime.Plugin) {
	for _, group := range []string{"orders", "g-ü-🙂", ""} {
		req := &abi.Request{GroupID: group, Topics: []abi.Topic{{Name: "t", Exists: true, PartitionCount: 2}},
			Members: []abi.Member{{MemberID: "m", Topics: []int32{0}, OwnedGeneration: -1}}}
		_, err := p.Assign(context.Background(), "kit-error", req)
		var e *wasmruntime.Error
		if !errors.Is(err, wasmruntime.ErrAssignorFailed) || !errors.As(err, &e) {
			t.Fatalf("group %q: %v, want ErrAssignorFailed", group, err)
		}
		if want := "kit error: " + group; e.Detail != want || e.Assignor != "kit-error" {
			t.Fatalf("group %q: error %q from assignor %q, want the message %q from kit-error", group, e.Detail, e.Assignor, want)
		}
	}
}

func checkLog(t *testing.T, p *wasmruntime.Plugin, logs *capture, plugin string) {
	group := fmt.Sprintf("log-group-%d", time.Now().UnixNano())
	req := smallRequest(group)
	want := "kit log: " + group
	if _, err := p.Assign(context.Background(), "kit-log", req); err != nil {
		t.Fatal(err)
	}
	var found []record
	for _, r := range logs.records() {
		if strings.Contains(r.msg, group) {
			found = append(found, r)
		}
	}
	if len(found) != 1 || found[0].msg != want || found[0].attrs["plugin"] != plugin {
		t.Fatalf("log records mentioning the group: %+v; want exactly one, %q, attributed to plugin %q", found, want, plugin)
	}
	if found[0].level != slog.LevelInfo {
		t.Errorf("the log line came at level %v, want INFO (0): sdk/ABI.md's info level", found[0].level)
	}
}

func checkUserData(t *testing.T, p *wasmruntime.Plugin) {
	rng := rand.New(rand.NewPCG(5, 8))
	for i := range 50 {
		req := kafkaOrderRequest(rng)
		for m := range req.Members {
			switch rng.IntN(3) {
			case 0: // absent
			case 1:
				req.Members[m].UserData = []byte{byte(m), 0, 0xff}
			case 2:
				req.Members[m].UserData = bytes.Repeat([]byte{byte(rng.IntN(256))}, rng.IntN(300))
			}
		}
		resp, err := p.Assign(context.Background(), "kit-userdata", req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		for m, mem := range req.Members {
			got, ok := memberUserData(resp, int32(m))
			if !bytes.Equal(got, mem.UserData) || (!ok && len(mem.UserData) > 0) {
				t.Fatalf("request %d member %d: user data %x, want %x unchanged", i, m, got, mem.UserData)
			}
		}
	}
}

// checkMemoryFlat runs kit-roundrobin 10,000 times on one instance (a host
// with a pool of one, called sequentially) and compares the instance's
// memory size after call 100 with the size after call 10,000.
func checkMemoryFlat(t *testing.T, wasm []byte, name string) {
	h := newHost(t, wasmruntime.NewConfig().WithMaxInstances(1))
	p, err := h.Load(context.Background(), name, wasm)
	if err != nil {
		t.Fatal(err)
	}
	req := uniformRequest(20, 10, 50) // 20 members, 500 partitions
	var at100 uint64
	start := time.Now()
	for i := 1; i <= 10_000; i++ {
		if _, err := p.Assign(context.Background(), "kit-roundrobin", req); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if i == 100 {
			at100 = p.MaxMemoryBytes()
		}
	}
	at10k := p.MaxMemoryBytes()
	if at100 == 0 || at10k != at100 {
		t.Fatalf("memory after call 100: %d bytes, after call 10,000: %d bytes; want equal and known", at100, at10k)
	}
	t.Logf("memory after calls 100 and 10,000: %d KiB; %v per call", at10k>>10, (time.Since(start) / 10_000).Round(time.Microsecond))
}

func checkRoundRobin(t *testing.T, p, builtinRR *wasmruntime.Plugin) {
	rng := rand.New(rand.NewPCG(21, 34))
	for i := range 300 {
		req := kafkaOrderRequest(rng)
		got, err := p.Assign(context.Background(), "kit-roundrobin", req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		want, err := builtinRR.Assign(context.Background(), "roundrobin", req)
		if err != nil {
			t.Fatalf("request %d, built-in: %v", i, err)
		}
		if g, w := perMember(req, got), perMember(req, want); g != w {
			t.Fatalf("request %d:\nkit:      %s\nbuilt-in: %s", i, g, w)
		}
	}
}

// perMember renders an assignment as member -> sorted topic-partitions, so
// responses that order entries differently compare equal.
func perMember(req *abi.Request, resp *abi.Response) string {
	m := make(map[string][]string)
	for _, ma := range resp.Members {
		id := req.Members[ma.Member].MemberID
		for _, tp := range ma.Partitions {
			for _, p := range tp.Partitions {
				m[id] = append(m[id], fmt.Sprintf("%s-%d", req.Topics[tp.Topic].Name, p))
			}
		}
	}
	for _, v := range m {
		sort.Strings(v)
	}
	b, _ := json.Marshal(m) // map keys come out sorted
	return string(b)
}

// smallRequest is one topic of four partitions and two members.
func smallRequest(group string) *abi.Request {
	return &abi.Request{GroupID: group, Protocol: "kit",
		Topics: []abi.Topic{{Name: "t", Exists: true, PartitionCount: 4}},
		Members: []abi.Member{
			{MemberID: "a", Topics: []int32{0}, OwnedGeneration: -1},
			{MemberID: "b", Topics: []int32{0}, OwnedGeneration: -1},
		}}
}

// uniformRequest is members members all subscribed to topics topics of
// partitions partitions each.
func uniformRequest(members, topics, partitions int) *abi.Request {
	req := &abi.Request{GroupID: "uniform", Generation: 1, Protocol: "kit"}
	subs := make([]int32, topics)
	for i := range topics {
		req.Topics = append(req.Topics, abi.Topic{Name: fmt.Sprintf("topic-%04d", i), Exists: true, PartitionCount: int32(partitions)})
		subs[i] = int32(i)
	}
	for m := range members {
		req.Members = append(req.Members, abi.Member{MemberID: fmt.Sprintf("member-%05d", m), Topics: subs, OwnedGeneration: -1})
	}
	return req
}

// largeRequest is the 2,000-member, 1,000,000-partition target-size group
// (500 topics of 2,000 partitions, every member subscribed to all), with
// placement for every partition so the request carries every part of the
// layout at scale.
func largeRequest() *abi.Request {
	req := uniformRequest(2000, 500, 2000)
	req.GroupID = "large"
	req.Brokers = []abi.Broker{{ID: 1, Rack: "a"}, {ID: 2, Rack: "b"}, {ID: 3, Rack: "c"}}
	req.ReplicaSets = [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}
	for i := range req.Topics {
		ps := make([]abi.Partition, req.Topics[i].PartitionCount)
		for p := range ps {
			ps[p] = abi.Partition{Leader: int32(1 + p%3), Replicas: uint32(p % 3), ISR: uint32((p + i) % 3)}
		}
		req.Topics[i].Partitions = ps
	}
	return req
}

// kafkaOrderRequest is a random group in the order the host sends it:
// topics by name, static members by instance id, then dynamic members by
// member id. Some topics do not exist or have no partitions.
func kafkaOrderRequest(rng *rand.Rand) *abi.Request {
	req := &abi.Request{GroupID: fmt.Sprintf("g%d", rng.IntN(1000)), Generation: rng.Int32N(100), Protocol: "kit"}
	nt := 1 + rng.IntN(8)
	for i := range nt {
		exists := rng.IntN(8) != 0
		pc := int32(0)
		if exists {
			pc = rng.Int32N(40)
		}
		req.Topics = append(req.Topics, abi.Topic{Name: fmt.Sprintf("t%02d", i), Exists: exists, PartitionCount: pc})
	}
	nm := 1 + rng.IntN(12)
	static := rng.IntN(nm + 1)
	for m := range nm {
		mem := abi.Member{MemberID: fmt.Sprintf("m%02d", m), OwnedGeneration: -1}
		if m < static {
			// Instance ids ascending, member ids in another order, so a
			// reader that sorted by member id would differ.
			mem.InstanceID = fmt.Sprintf("i%02d", m)
			mem.MemberID = fmt.Sprintf("z%02d", nm-m)
		}
		for i := range nt {
			if rng.IntN(2) == 0 {
				mem.Topics = append(mem.Topics, int32(i))
			}
		}
		req.Members = append(req.Members, mem)
	}
	return req
}

// richRequest is a random request that sets every field of the layout,
// with multi-byte UTF-8 in strings.
func richRequest(rng *rand.Rand) *abi.Request {
	str := func(prefix string) string {
		switch rng.IntN(4) {
		case 0:
			return ""
		case 1:
			return prefix + "-ü-🙂"
		}
		return fmt.Sprintf("%s-%d", prefix, rng.IntN(1000))
	}
	r := &abi.Request{GroupID: str("group"), Generation: rng.Int32() - rng.Int32(), Protocol: str("p"),
		RebalanceProtocol: abi.RebalanceProtocol(rng.IntN(2)), Seed: rng.Uint64() * uint64(rng.IntN(2))}
	if n := rng.IntN(4); n > 0 {
		r.Config = make(map[string]string, n)
		for range n {
			r.Config[str("key")] = str("value")
		}
	}
	for i := range rng.IntN(4) {
		r.Brokers = append(r.Brokers, abi.Broker{ID: int32(i + 1), Rack: str("rack")})
	}
	for range rng.IntN(4) {
		set := make([]int32, rng.IntN(4))
		for k := range set {
			set[k] = rng.Int32N(5)
		}
		r.ReplicaSets = append(r.ReplicaSets, set)
	}
	nt := rng.IntN(6)
	for i := range nt {
		tp := abi.Topic{Name: fmt.Sprintf("t%d-%s", i, str("x")), Exists: rng.IntN(5) != 0}
		for k := range tp.ID {
			tp.ID[k] = byte(rng.IntN(256) * rng.IntN(2))
		}
		if tp.Exists {
			tp.PartitionCount = rng.Int32N(30)
			if len(r.ReplicaSets) > 0 && rng.IntN(2) == 0 {
				tp.Partitions = make([]abi.Partition, tp.PartitionCount)
				for p := range tp.Partitions {
					tp.Partitions[p] = abi.Partition{Leader: rng.Int32N(5) - 1,
						Replicas: uint32(rng.IntN(len(r.ReplicaSets))), ISR: uint32(rng.IntN(len(r.ReplicaSets)))}
				}
			}
		}
		r.Topics = append(r.Topics, tp)
	}
	tps := func() []abi.TopicPartitions {
		var out []abi.TopicPartitions
		for range rng.IntN(3) {
			if nt == 0 {
				break
			}
			ps := make([]int32, rng.IntN(5))
			for k := range ps {
				ps[k] = rng.Int32N(40) - 2
			}
			out = append(out, abi.TopicPartitions{Topic: int32(rng.IntN(nt)), Partitions: ps})
		}
		return out
	}
	for m := range rng.IntN(8) {
		mem := abi.Member{MemberID: fmt.Sprintf("m%d-%s", m, str("id")), InstanceID: str("inst"), ClientID: str("client"),
			ClientHost: str("/10.0.0.1"), Rack: str("rack"), Cooperative: rng.IntN(2) == 0,
			OwnedGeneration: rng.Int32N(5) - 1, Owned: tps(), Previous: tps()}
		for i := range nt {
			if rng.IntN(2) == 0 {
				mem.Topics = append(mem.Topics, int32(i))
			}
		}
		if rng.IntN(2) == 0 {
			mem.UserData = bytes.Repeat([]byte{byte(m), 0}, rng.IntN(20))
		}
		r.Members = append(r.Members, mem)
	}
	return r
}

// capture is a slog.Handler that keeps every record with its attributes,
// including those added by Logger.With. Make it with a store: handlers
// derived by WithAttrs share it.
type capture struct {
	store *captureStore
	attrs []slog.Attr
}

type captureStore struct {
	mu   sync.Mutex
	recs []record
}

// record is one captured log record.
type record struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }

func (c *capture) Handle(_ context.Context, r slog.Record) error {
	rec := record{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range c.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	c.store.mu.Lock()
	defer c.store.mu.Unlock()
	c.store.recs = append(c.store.recs, rec)
	return nil
}

func (c *capture) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &capture{store: c.store, attrs: append(slices.Clone(c.attrs), attrs...)}
}

func (c *capture) WithGroup(string) slog.Handler { return c }

func (c *capture) records() []record {
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.recs)
}

// BenchmarkKit_MidRoundRobin measures each SDK's kit-roundrobin on the shape
// of the bench's `mid` case (100 members, 25 topics of 1,000 partitions,
// first join), through the host as plugins run, next to the built-in
// roundrobin; module sizes are reported as a metric.
func BenchmarkKit_MidRoundRobin(b *testing.B) {
	req := uniformRequest(100, 25, 1000)
	run := func(b *testing.B, wasm []byte, name, assignor string) {
		ctx := context.Background()
		h, err := wasmruntime.NewHost(ctx, wasmruntime.NewConfig().WithMaxInstances(1).
			WithCompilationCacheDir(os.Getenv("WASMASSIGN_TEST_CACHE")))
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close(ctx)
		p, err := h.Load(ctx, name, wasm)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Assign(ctx, assignor, req); err != nil { // warm the instance
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			if _, err := p.Assign(ctx, assignor, req); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(wasm)), "module-bytes")
		b.ReportMetric(float64(p.MaxMemoryBytes()>>10), "peak-KiB")
	}
	for _, s := range sdks {
		b.Run(s.lang, func(b *testing.B) {
			wasm, err := os.ReadFile(filepath.Join(testutil.Root(b), s.path))
			if err != nil {
				b.Fatalf("the %s SDK's kit module %s is missing: build it with %s", s.lang, s.path, s.build)
			}
			run(b, wasm, "kit-"+s.lang+".wasm", "kit-roundrobin")
		})
	}
	b.Run("builtin-roundrobin", func(b *testing.B) {
		wasm, err := fs.ReadFile(builtin.FS(), "roundrobin.wasm")
		if err != nil {
			b.Fatal("the built-in roundrobin.wasm is missing: run `make build` first")
		}
		run(b, wasm, "builtin:roundrobin", "roundrobin")
	})
}

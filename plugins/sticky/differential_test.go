package sticky

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/coordinator/handover"
	"github.com/wasmassign/wasmassign/internal/scenario"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// The differential test holds the built-in sticky module (Rust, compiled to
// wasm) to this package's answers: the same request, through the sandbox
// and natively, must give the same assignment and the same user data, member
// by member. Guarantees alone would let two ports drift apart on every case
// Kafka leaves open (which member gets an extra partition, which owned
// partition moves), and users would see the assignment change with the
// build.
//
// Environment:
//
//	STICKY_WASM        module to test, absolute or relative to the
//	                   repository root (default plugins/builtin/wasm/sticky.wasm;
//	                   testdata/guests/go/sticky-go.wasm is the Go guest,
//	                   which checks the harness itself)
//	STICKY_DIFF_CHAINS number of random chains (default diffChains); when
//	                   set, diffBudget does not apply
//	STICKY_DIFF_FIRST  seed of the first chain (default 0)
//	STICKY_DIFF_SEED   run only this chain, to reproduce a mismatch or a
//	                   hang: each request is logged (and dumped) before it
//	                   runs, the module before the package
//	STICKY_DIFF_WIDE   set to 1 to add the wide group (9,000 members, 7,000
//	                   topics; about a minute, mostly in the modules)
//	STICKY_DIFF_DUMP   directory to write each mismatching (or hanging)
//	                   request to, in the ABI encoding the module received
//	                   (grouped layout, seed filled in)
const (
	envWasm   = "STICKY_WASM"
	envChains = "STICKY_DIFF_CHAINS"
	envFirst  = "STICKY_DIFF_FIRST"
	envSeed   = "STICKY_DIFF_SEED"
	envDump   = "STICKY_DIFF_DUMP"
	envWide   = "STICKY_DIFF_WIDE"

	// diffChains is the number of random chains `make test` runs; with
	// diffBudget it bounds the test's time whatever -short says.
	diffChains = 2500
	// diffBudget caps the sum over all requests of members × partitions
	// considered, so that an unlucky seed cannot make the test slow.
	diffBudget = 40_000_000
	// maxReported is how many mismatches are printed in full.
	maxReported = 5
	// nativeDeadline is how long package sticky may take on one request
	// before the test calls it a hang (the largest requests here take
	// well under a second).
	nativeDeadline = time.Minute
)

// differ runs requests natively and through the module under test, and
// records where they disagree.
type differ struct {
	t      testing.TB
	plugin *wasmruntime.Plugin
	path   string
	infos  map[kind]abi.AssignorInfo

	// verbose, for a single chain (STICKY_DIFF_SEED), logs and dumps
	// each request before running it, and runs the module first: a hang
	// on either side then shows which request caused it.
	verbose bool

	requests   int
	mismatches int
	cost       int64
	// features counts the requests that reach each path of the assignor,
	// so that a generator change that stops reaching one shows in the log.
	features map[string]int
}

func wasmUnderTest(t testing.TB) string {
	t.Helper()
	p := os.Getenv(envWasm)
	if p == "" {
		return testutil.Artefact(t, "plugins/builtin/wasm/sticky.wasm")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(testutil.Root(t), p)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s=%s: %v", envWasm, os.Getenv(envWasm), err)
	}
	return p
}

// newDiffer loads the module under test in an in-process host: the test
// compares answers, not isolation, and a worker process per call would
// only slow it down.
func newDiffer(t testing.TB) *differ {
	t.Helper()
	ctx := context.Background()
	path := wasmUnderTest(t)
	cfg := wasmruntime.NewConfig().
		WithIsolation(wasmruntime.IsolationInProcess).
		WithLogger(slog.New(slog.DiscardHandler)).
		WithCompilationCacheDir(testutil.SharedCacheDir()).
		WithLimits(wasmruntime.DefaultLimits().WithTimeout(2 * time.Minute))
	h, err := wasmruntime.NewHost(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	p, err := h.LoadFile(ctx, path)
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	d := &differ{t: t, plugin: p, path: path, infos: map[kind]abi.AssignorInfo{}, features: map[string]int{}}
	for _, k := range bothKinds {
		info, ok := p.Assignor(k.String())
		if !ok {
			t.Fatalf("%s does not provide %s", path, k)
		}
		d.infos[k] = info
	}
	return d
}

// outcome is one side's answer, in the plain layout.
type outcome struct {
	resp *abi.Response // nil when err is set
	err  string        // a runtime failure, or a native panic
}

// native runs package sticky as the runtime would run the module: the seed
// filled in, the request grouped when the assignor declares the grouped
// layout, the answer validated and expanded back to the caller's layout.
func (d *differ) native(k kind, req *abi.Request) outcome {
	r := *req
	r.Assignor = k.String()
	if r.Seed == 0 {
		r.Seed = wasmruntime.Seed(&r)
	}
	send := &r
	if d.infos[k].Grouped {
		send = r.Grouped()
	} else {
		send = r.Expanded()
	}
	type answer struct {
		resp  *abi.Response
		err   error
		panic any
	}
	done := make(chan answer, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- answer{panic: p}
			}
		}()
		resp, err := k.assign(send)
		done <- answer{resp: resp, err: err}
	}()
	var a answer
	select {
	case a = <-done:
	case <-time.After(nativeDeadline):
		// The goroutine cannot be stopped; the caller ends the test.
		return outcome{err: fmt.Sprintf("native hang: no answer in %v", nativeDeadline)}
	}
	if a.panic != nil {
		return outcome{err: fmt.Sprintf("native panic: %v", a.panic)}
	}
	resp, err := a.resp, a.err
	if err != nil {
		// The guest SDK answers an error as a response with Error set.
		resp = &abi.Response{Error: err.Error()}
	}
	if err := wasmruntime.Validate(send, resp, d.infos[k]); err != nil {
		return outcome{err: "native answer invalid: " + err.Error()}
	}
	if req.TopicLists == nil {
		resp = resp.Expanded()
	}
	return outcome{resp: resp}
}

func (d *differ) wasm(k kind, req *abi.Request) outcome {
	resp, err := d.plugin.Assign(context.Background(), k.String(), req)
	if err != nil {
		return outcome{err: err.Error()}
	}
	return outcome{resp: resp.Expanded()}
}

// check runs req both ways and reports a mismatch under where (how to
// reproduce it). It returns the native answer, for the next round.
func (d *differ) check(k kind, req *abi.Request, where string) *abi.Response {
	d.t.Helper()
	d.requests++
	d.cost += requestCost(req)
	for _, f := range features(k, req) {
		d.features[f]++
	}
	var want, got outcome
	if d.verbose {
		d.t.Logf("%s: %s%s", where, summarize(k, req), d.dump(k, req, where))
		start := time.Now()
		got = d.wasm(k, req)
		d.t.Logf("module answered in %v: %s", time.Since(start).Round(time.Millisecond), describeOutcome(got))
		start = time.Now()
		want = d.native(k, req)
		d.t.Logf("package answered in %v: %s", time.Since(start).Round(time.Millisecond), describeOutcome(want))
	} else {
		want = d.native(k, req)
		got = d.wasm(k, req)
	}
	if diff := compareOutcomes(req, want, got); diff != "" {
		d.mismatches++
		if d.mismatches <= maxReported {
			d.t.Errorf("%s: %s\nrequest: %s\n%s%s", d.path, where, summarize(k, req), diff, d.dump(k, req, where))
		}
	}
	if strings.HasPrefix(want.err, "native hang") {
		d.t.Fatalf("%s: %s\nrequest: %s%s", where, want.err, summarize(k, req), d.dump(k, req, where))
	}
	if strings.HasPrefix(want.err, "native") {
		d.t.Errorf("%s: %s", where, want.err)
	}
	return want.resp
}

// dump writes the request as the module received it, for reproducing a
// mismatch outside Go, when STICKY_DIFF_DUMP names a directory.
func (d *differ) dump(k kind, req *abi.Request, where string) string {
	dir := os.Getenv(envDump)
	if dir == "" {
		return ""
	}
	r := *req
	r.Assignor = k.String()
	if r.Seed == 0 {
		r.Seed = wasmruntime.Seed(&r)
	}
	name := strings.Map(func(c rune) rune {
		if c == ' ' || c == '/' || c == ',' || c == '=' {
			return '_'
		}
		return c
	}, where) + ".req"
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, abi.AppendRequest(nil, r.Grouped()), 0o644); err != nil {
		return "\n(dump failed: " + err.Error() + ")"
	}
	return "\nrequest as sent: " + path
}

func (d *differ) finish() {
	d.t.Helper()
	d.t.Logf("%s: %d requests (%d member-partitions), %d mismatches", d.path, d.requests, d.cost, d.mismatches)
	d.t.Logf("requests by feature: %v", d.features)
	if d.mismatches > 0 {
		d.t.Errorf("%d of %d requests answered differently by %s than by package sticky (first %d above)",
			d.mismatches, d.requests, d.path, min(d.mismatches, maxReported))
	}
}

// features names what req exercises.
func features(k kind, req *abi.Request) []string {
	out := []string{k.String()}
	uniform, rackMembers, negGen, userData, owned, previous := true, false, false, false, false, false
	for i, m := range req.Members {
		uniform = uniform && (i == 0 || slices.Equal(m.Topics, req.Members[0].Topics))
		rackMembers = rackMembers || m.Rack != ""
		if len(m.Owned) > 0 {
			owned = true
			negGen = negGen || m.OwnedGeneration < 0
		}
		userData = userData || len(m.UserData) > 0
		previous = previous || len(m.Previous) > 0
	}
	if uniform {
		out = append(out, "uniform")
	} else {
		out = append(out, "general")
	}
	rackBrokers := false
	for _, b := range req.Brokers {
		rackBrokers = rackBrokers || b.Rack != ""
	}
	placed, missing := false, false
	for _, t := range req.Topics {
		placed = placed || t.Partitions != nil
		missing = missing || !t.Exists
	}
	if rackMembers && rackBrokers && placed {
		out = append(out, "racks")
	}
	if missing {
		out = append(out, "missing-topics")
	}
	switch {
	case k == coop && owned:
		out = append(out, "owned")
		if negGen {
			out = append(out, "owned-generation-1")
		}
	case k == eager && userData:
		out = append(out, "user-data")
	case previous:
		out = append(out, "previous-only")
	default:
		out = append(out, "no-history")
	}
	g := req.Grouped()
	for _, m := range g.Members {
		if slices.ContainsFunc(m.Owned, func(e abi.TopicPartitions) bool { return e.Topic < 0 }) ||
			slices.ContainsFunc(m.Previous, func(e abi.TopicPartitions) bool { return e.Topic < 0 }) {
			out = append(out, "list-references")
			break
		}
	}
	if len(req.Members) >= 100 {
		out = append(out, "100+members")
	}
	return out
}

// requestCost is members × partitions considered, the measure of the budget.
func requestCost(req *abi.Request) int64 {
	parts := int64(0)
	for _, t := range req.Topics {
		parts += int64(t.PartitionCount)
	}
	return max(1, int64(len(req.Members))) * max(1, parts)
}

// compareOutcomes describes the first difference between the native answer
// want and the module's got, or returns "" when they are identical: the same
// members in the same order, each with the same entries (topic, partitions
// in order) and the same user data bytes, or both an error.
func compareOutcomes(req *abi.Request, want, got outcome) string {
	switch {
	case want.err != "" || got.err != "":
		if want.err != "" && got.err != "" {
			return "" // both failed: the host falls back either way
		}
		return fmt.Sprintf("native: %s\n  wasm: %s", describeOutcome(want), describeOutcome(got))
	case (want.resp.Error != "") != (got.resp.Error != ""):
		return fmt.Sprintf("native: %s\n  wasm: %s", describeOutcome(want), describeOutcome(got))
	case want.resp.Error != "":
		return ""
	}
	w, g := want.resp.Members, got.resp.Members
	for i := range max(len(w), len(g)) {
		if i >= len(w) || i >= len(g) {
			extra := append(w[i:], g[i:]...)[0]
			return fmt.Sprintf("native answers %d members, wasm %d; first extra: %s", len(w), len(g), describeAssignment(req, extra))
		}
		if !sameAssignment(w[i], g[i]) {
			kindOf := "the assignment"
			if sameAsSets(req, w[i], g[i]) {
				kindOf = "only entry order or empty entries"
			} else if samePartitions(req, w[i], g[i]) {
				kindOf = "only the user data"
			}
			return fmt.Sprintf("answer %d differs (%s):\nnative: %s\n  wasm: %s%s",
				i, kindOf, describeAssignment(req, w[i]), describeAssignment(req, g[i]), setsSummary(req, want.resp, got.resp))
		}
	}
	return ""
}

func describeOutcome(o outcome) string {
	if o.err != "" {
		return "failed: " + o.err
	}
	if o.resp.Error != "" {
		return "error response: " + o.resp.Error
	}
	return fmt.Sprintf("%d assignments", len(o.resp.Members))
}

func sameAssignment(a, b abi.MemberAssignment) bool {
	if a.Member != b.Member || len(a.Partitions) != len(b.Partitions) || !bytes.Equal(a.UserData, b.UserData) {
		return false
	}
	for j := range a.Partitions {
		if a.Partitions[j].Topic != b.Partitions[j].Topic || !slices.Equal(a.Partitions[j].Partitions, b.Partitions[j].Partitions) {
			return false
		}
	}
	return true
}

// tpSet is an assignment as a sorted list of "topic-partition".
func tpSet(req *abi.Request, ma abi.MemberAssignment) []string {
	var out []string
	for _, e := range ma.Partitions {
		for _, p := range e.Partitions {
			out = append(out, fmt.Sprintf("%s-%d", topicName(req, e.Topic), p))
		}
	}
	slices.Sort(out)
	return out
}

func samePartitions(req *abi.Request, a, b abi.MemberAssignment) bool {
	return a.Member == b.Member && slices.Equal(tpSet(req, a), tpSet(req, b))
}

func sameAsSets(req *abi.Request, a, b abi.MemberAssignment) bool {
	return samePartitions(req, a, b) && bytes.Equal(a.UserData, b.UserData)
}

// setsSummary counts, over the whole answer, the members whose partitions
// differ, and the partitions that the two sides give to different members.
func setsSummary(req *abi.Request, w, g *abi.Response) string {
	owner := func(r *abi.Response) map[string]int32 {
		m := map[string]int32{}
		for _, ma := range r.Members {
			for _, s := range tpSet(req, ma) {
				m[s] = ma.Member
			}
		}
		return m
	}
	ow, og := owner(w), owner(g)
	moved := 0
	for s, m := range ow {
		if o, ok := og[s]; !ok || o != m {
			moved++
		}
	}
	for s := range og {
		if _, ok := ow[s]; !ok {
			moved++
		}
	}
	differ := 0
	for i := range min(len(w.Members), len(g.Members)) {
		if !samePartitions(req, w.Members[i], g.Members[i]) {
			differ++
		}
	}
	return fmt.Sprintf("\nin all: %d of %d members' partitions differ, %d partitions placed differently", differ, len(req.Members), moved)
}

func topicName(req *abi.Request, t int32) string {
	if t >= 0 && int(t) < len(req.Topics) {
		return req.Topics[t].Name
	}
	return fmt.Sprintf("#%d", t)
}

// describeAssignment prints one answer compactly: member, entries as
// topic[partitions], user data as hex (abbreviated when long).
func describeAssignment(req *abi.Request, ma abi.MemberAssignment) string {
	var b strings.Builder
	id := "?"
	if ma.Member >= 0 && int(ma.Member) < len(req.Members) {
		id = req.Members[ma.Member].MemberID
	}
	fmt.Fprintf(&b, "member %d (%s):", ma.Member, id)
	for i, e := range ma.Partitions {
		if i == 12 {
			fmt.Fprintf(&b, " ... (%d entries)", len(ma.Partitions))
			break
		}
		fmt.Fprintf(&b, " %s%v", topicName(req, e.Topic), abbreviate(e.Partitions))
	}
	ud := fmt.Sprintf("%x", ma.UserData)
	if len(ud) > 64 {
		ud = fmt.Sprintf("%s...(%d bytes)", ud[:64], len(ma.UserData))
	}
	fmt.Fprintf(&b, " user data %s", ud)
	return b.String()
}

func abbreviate(ps []int32) string {
	if len(ps) <= 16 {
		return fmt.Sprint(ps)
	}
	return fmt.Sprintf("%v...(%d)", ps[:16], len(ps))
}

// summarize describes a request in one line: enough to see which path of
// the assignor it takes.
func summarize(k kind, req *abi.Request) string {
	existing, missing, parts, placed := 0, 0, 0, 0
	for _, t := range req.Topics {
		if t.Exists {
			existing++
			parts += int(t.PartitionCount)
			if t.Partitions != nil {
				placed++
			}
		} else {
			missing++
		}
	}
	uniform := true
	racks, owned, negGen, userData, previous, static := 0, 0, 0, 0, 0, 0
	for i, m := range req.Members {
		if i > 0 && !slices.Equal(m.Topics, req.Members[0].Topics) {
			uniform = false
		}
		if m.Rack != "" {
			racks++
		}
		if len(m.Owned) > 0 {
			owned++
			if m.OwnedGeneration < 0 {
				negGen++
			}
		}
		if len(m.UserData) > 0 {
			userData++
		}
		if len(m.Previous) > 0 {
			previous++
		}
		if m.InstanceID != "" {
			static++
		}
	}
	brokerRacks := 0
	for _, b := range req.Brokers {
		if b.Rack != "" {
			brokerRacks++
		}
	}
	g := req.Grouped()
	refs := 0
	for _, m := range g.Members {
		for _, e := range append(slices.Clone(m.Owned), m.Previous...) {
			if e.Topic < 0 {
				refs++
			}
		}
	}
	return fmt.Sprintf("%s generation %d: %d members (%d static, %d with racks), uniform=%v; %d topics (+%d missing), %d partitions, %d placed topics, %d of %d brokers with racks; owned by %d members (%d with generation -1), user data %d, previous %d; grouped: %d lists, %d list references",
		k, req.Generation, len(req.Members), static, racks, uniform, existing, missing, parts, placed, brokerRacks, len(req.Brokers),
		owned, negGen, userData, previous, len(g.TopicLists), refs)
}

// TestDifferential_RustModuleAnswersLikeGoPackage runs seeded random chains
// of rebalances (a group, then up to three more generations built from the
// native answer, with members leaving, joining, resubscribing, topics
// growing and disappearing, and histories reported every way Kafka clients
// report them, some of them wrong) and every conformance scenario of the
// sticky assignors through both the module and this package, and requires
// identical answers.
func TestDifferential_RustModuleAnswersLikeGoPackage(t *testing.T) {
	d := newDiffer(t)
	defer d.finish()
	if s := os.Getenv(envSeed); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", envSeed, s, err)
		}
		d.verbose = true
		runChain(d, rand.New(rand.NewPCG(seed, 0x5717)), fmt.Sprintf("seed %d", seed))
		return
	}
	chains, budget := uint64(diffChains), int64(diffBudget)
	if s := os.Getenv(envChains); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", envChains, s, err)
		}
		chains, budget = n, math.MaxInt64
	}
	first := uint64(0)
	if s := os.Getenv(envFirst); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", envFirst, s, err)
		}
		first = n
	}
	start := time.Now()
	shapes := map[string]int{}
	for seed := first; seed < first+chains; seed++ {
		if d.cost > budget {
			t.Logf("budget of %d member-partitions reached after %d chains", budget, seed-first)
			break
		}
		shapes[runChain(d, rand.New(rand.NewPCG(seed, 0x5717)), fmt.Sprintf("seed %d", seed))]++
	}
	t.Logf("random chains: %d requests in %v, shapes %v", d.requests, time.Since(start).Round(time.Millisecond), shapes)
	start, before := time.Now(), d.requests
	runConformanceScenarios(d)
	t.Logf("conformance scenarios: %d requests in %v", d.requests-before, time.Since(start).Round(time.Millisecond))
	start, before = time.Now(), d.requests
	runLargeGroups(d)
	t.Logf("large groups: %d requests in %v", d.requests-before, time.Since(start).Round(time.Millisecond))
}

// runLargeGroups runs groups at the scale of the benchmarks (bench's mid
// and heterogeneous cases, with and without racks), each followed by the
// benchmarks' rejoin, and, with STICKY_DIFF_WIDE=1, one group wide enough
// (thousands of members with a few of thousands of topics each) that the
// general path keeps no member-by-topic bitmap.
func runLargeGroups(d *differ) {
	rnd := rand.New(rand.NewPCG(1, 2))
	heterogeneous := func(racks bool) *abi.Request {
		req := assignortest.BenchRequest(500, 100, 200, racks)
		firstHalf := req.Members[0].Topics[:50]
		secondHalf := req.Members[0].Topics[50:]
		for i := range req.Members {
			req.Members[i].Topics = secondHalf
			if i < 125 {
				req.Members[i].Topics = firstHalf
			}
		}
		return req
	}
	wide := func() *abi.Request {
		req := &abi.Request{}
		for i := range 7000 {
			req.Topics = append(req.Topics, abi.Topic{Name: fmt.Sprintf("w%05d", i), Exists: true, PartitionCount: int32(1 + rnd.IntN(3))})
		}
		for i := range 9000 {
			m := abi.Member{MemberID: fmt.Sprintf("c%05d", i), OwnedGeneration: -1}
			for range 1 + rnd.IntN(4) {
				m.Topics = append(m.Topics, int32(rnd.IntN(len(req.Topics))))
			}
			slices.Sort(m.Topics)
			m.Topics = slices.Compact(m.Topics)
			req.Members = append(req.Members, m)
		}
		return req
	}
	groups := []struct {
		name string
		make func() *abi.Request
	}{
		{"mid", func() *abi.Request { return assignortest.BenchRequest(100, 25, 1000, false) }},
		{"mid with racks", func() *abi.Request { return assignortest.BenchRequest(100, 25, 1000, true) }},
		{"heterogeneous", func() *abi.Request { return heterogeneous(false) }},
		{"heterogeneous with racks", func() *abi.Request { return heterogeneous(true) }},
	}
	if os.Getenv(envWide) == "1" {
		groups = append(groups, struct {
			name string
			make func() *abi.Request
		}{"wide", wide})
	}
	for _, grp := range groups {
		for _, k := range bothKinds {
			req := grp.make()
			req.GroupID, req.Generation, req.Protocol = "g", 1, k.String()
			if k == coop {
				req.RebalanceProtocol = abi.Cooperative
			}
			start := time.Now()
			resp := d.check(k, req, fmt.Sprintf("large group %s, initial", grp.name))
			d.t.Logf("large group %s, %s, initial: %v", grp.name, k, time.Since(start).Round(time.Millisecond))
			if resp == nil || resp.Error != "" {
				continue
			}
			// The benchmarks' rejoin: every member but the first reports
			// what it got.
			next := cloneRequest(req)
			next.Generation = 2
			got := make([][]abi.TopicPartitions, len(req.Members))
			for _, ma := range resp.Members {
				got[ma.Member] = ma.Partitions
			}
			mode := "v1"
			if k == coop {
				mode = "owned"
			}
			for i := 1; i < len(next.Members); i++ {
				setHistory(rand.New(rand.NewPCG(uint64(i), 3)), next, &next.Members[i], got[i], 1, mode)
			}
			start = time.Now()
			d.check(k, next, fmt.Sprintf("large group %s, rejoin", grp.name))
			d.t.Logf("large group %s, %s, rejoin: %v", grp.name, k, time.Since(start).Round(time.Millisecond))
		}
	}
}

// runChain draws a group from rnd and runs it for up to four generations,
// each built from the one before and its native answer. It returns the
// group's shape.
func runChain(d *differ, rnd *rand.Rand, where string) string {
	k := bothKinds[rnd.IntN(2)]
	shape, req := drawGroup(rnd, k)
	if rnd.IntN(2) == 0 {
		randomPast(rnd, k, req)
	}
	rounds := 1 + rnd.IntN(4)
	for round := range rounds {
		resp := d.check(k, req, fmt.Sprintf("%s round %d (%s)", where, round, shape))
		if resp == nil || resp.Error != "" || round == rounds-1 {
			break
		}
		req = nextGeneration(rnd, k, req, resp)
	}
	return shape
}

// drawGroup draws a group without history, of one of several shapes.
func drawGroup(rnd *rand.Rand, k kind) (string, *abi.Request) {
	var shape string
	var req *abi.Request
	switch x := rnd.IntN(100); {
	case x < 45:
		shape = "random"
		req = assignortest.RandomGroup(rnd, assignortest.Shape{
			Topics: 1 + rnd.IntN(12), SparseOneIn: 8, MissingOneIn: 8,
			PartitionCounts: assignortest.Below(int32(1 + rnd.IntN(30))),
			Racks:           rnd.IntN(2) == 0, Members: 1 + rnd.IntN(30),
			UniformOneIn: 2, UniformSubset: rnd.IntN(3) == 0,
		})
	case x < 55:
		shape = "large"
		req = assignortest.RandomGroup(rnd, assignortest.Shape{
			Topics: 10 + rnd.IntN(50), MissingOneIn: 20,
			PartitionCounts: assignortest.Below(int32(10 + rnd.IntN(40))),
			Racks:           rnd.IntN(2) == 0, Members: 100 + rnd.IntN(200),
			UniformOneIn: 2, UniformSubset: rnd.IntN(3) == 0,
		})
	case x < 80:
		shape = "java-like"
		req = javaLike(rnd)
	default:
		shape = "applications"
		req = applications(rnd)
	}
	req.GroupID, req.Generation, req.Protocol = "g", int32(1+rnd.IntN(5)), k.String()
	if k == coop {
		req.RebalanceProtocol = abi.Cooperative
	}
	for i := range req.Members {
		req.Members[i].Cooperative = k == coop && rnd.IntN(8) > 0
	}
	if rnd.IntN(2) == 0 {
		sortKafkaOrder(req)
	}
	return shape, req
}

// javaLike is the shape of the java-large and mid benchmarks at a small
// scale: equally large topics that every member subscribes to, with
// partition counts that make round-robin shares line up across topics (one
// grouped entry per member) or nearly so.
func javaLike(rnd *rand.Rand) *abi.Request {
	m := 2 + rnd.IntN(60)
	var p int
	switch rnd.IntN(5) {
	case 0:
		p = m
	case 1:
		p = 2 * m
	case 2:
		p = max(1, m/2)
	case 3:
		p = m + 1 - 2*rnd.IntN(2)
	default:
		p = 1 + rnd.IntN(3*m)
	}
	topics := max(3, min(40, 6000/max(1, p)))
	topics = 3 + rnd.IntN(topics-2)
	req := assignortest.BenchRequest(m, topics, max(1, p), rnd.IntN(3) == 0)
	for i := range req.Members {
		req.Members[i].Topics = slices.Clone(req.Members[i].Topics)
	}
	return req
}

// applications is a group shared by applications: each subscribes its
// members to its own topics (some topics shared between two of them), and
// a few members subscribe to something else.
func applications(rnd *rand.Rand) *abi.Request {
	var topics []assignortest.TopicSpec
	var members []assignortest.MemberSpec
	racks := []string{"", "r1", "r2", "r3"}
	apps := 1 + rnd.IntN(4)
	var all []string
	for a := range apps {
		var mine []string
		for i := range 1 + rnd.IntN(6) {
			name := fmt.Sprintf("app%d-t%d", a, i)
			topics = append(topics, assignortest.TopicSpec{Name: name, Partitions: int32(rnd.IntN(25))})
			mine = append(mine, name)
		}
		if a > 0 && rnd.IntN(3) == 0 {
			mine = append(mine, all[rnd.IntN(len(all))])
		}
		all = append(all, mine...)
		for i := range 1 + rnd.IntN(12) {
			members = append(members, assignortest.MemberSpec{
				ID: fmt.Sprintf("app%d-c%02d", a, i), Rack: racks[rnd.IntN(len(racks))], Topics: mine,
			})
		}
	}
	for i := range rnd.IntN(4) {
		members = append(members, assignortest.MemberSpec{ID: fmt.Sprintf("odd-%d", i), Topics: randomSublist(rnd, all)})
	}
	var pl *assignortest.Placement
	if rnd.IntN(2) == 0 {
		pl = &assignortest.Placement{RF: 1 + rnd.IntN(3), BrokerRacks: []string{"r1", "r2", "r3", "r1"}, SameStart: rnd.IntN(2) == 0}
	} else {
		for i := range members {
			members[i].Rack = ""
		}
	}
	for i := range members {
		if rnd.IntN(4) == 0 {
			members[i].Instance = fmt.Sprintf("inst-%03d", rnd.IntN(1000))
		}
	}
	// Instance ids must be unique within a group.
	seen := map[string]bool{}
	for i := range members {
		if seen[members[i].Instance] {
			members[i].Instance = ""
		}
		if members[i].Instance != "" {
			seen[members[i].Instance] = true
		}
	}
	req := assignortest.BuildRequest(topics, members, pl)
	for i := range req.Members {
		// An odd member may draw a shared topic twice; a subscription
		// names it once.
		req.Members[i].Topics = slices.Compact(req.Members[i].Topics)
	}
	return req
}

// sortKafkaOrder puts the members in the order the host sends them: static
// members by instance id, then dynamic members by member id.
func sortKafkaOrder(req *abi.Request) {
	slices.SortStableFunc(req.Members, func(a, b abi.Member) int {
		if (a.InstanceID == "") != (b.InstanceID == "") {
			if a.InstanceID != "" {
				return -1
			}
			return 1
		}
		if a.InstanceID != "" {
			return strings.Compare(a.InstanceID, b.InstanceID)
		}
		return strings.Compare(a.MemberID, b.MemberID)
	})
}

// randomPast gives the members of a first round a history that no earlier
// answer explains: random partitions (also of topics they do not subscribe
// to and partitions that do not exist), random generations, conflicting
// claims, and user data that is valid, old or corrupt.
func randomPast(rnd *rand.Rand, k kind, req *abi.Request) {
	for i := range req.Members {
		m := &req.Members[i]
		if rnd.IntN(4) == 0 {
			continue
		}
		var claims []abi.TopicPartitions
		for t := range req.Topics {
			if rnd.IntN(3) > 0 {
				continue
			}
			top := req.Topics[t].PartitionCount + 2
			for p := range top {
				if rnd.IntN(3) == 0 {
					claims = addClaim(claims, int32(t), p)
				}
			}
		}
		gen := req.Generation - 1 - int32(rnd.IntN(3))
		if rnd.IntN(6) == 0 {
			gen = -1
		}
		setHistory(rnd, req, m, claims, gen, historyModes(k)[rnd.IntN(len(historyModes(k)))])
	}
}

// historyModes are the ways a member of kind k reports its past.
func historyModes(k kind) []string {
	if k == coop {
		return []string{"owned", "owned", "owned", "owned-userdata-generation", "owned-no-generation", "previous", "nothing"}
	}
	return []string{"v1", "v1", "v1", "v0", "corrupt", "truncated", "hostile", "previous", "nothing", "owned-only"}
}

// setHistory makes m report claims, held in generation gen, as mode says.
func setHistory(rnd *rand.Rand, req *abi.Request, m *abi.Member, claims []abi.TopicPartitions, gen int32, mode string) {
	m.Owned, m.UserData, m.Previous, m.OwnedGeneration = nil, nil, nil, -1
	switch mode {
	case "owned":
		m.Owned, m.OwnedGeneration = claims, gen
	case "owned-userdata-generation":
		// CooperativeStickyAssignor before subscription v2: the
		// generation is the user data.
		m.Owned = claims
		m.UserData = binary.BigEndian.AppendUint32(nil, uint32(gen))
	case "owned-no-generation":
		m.Owned = claims
		if rnd.IntN(2) == 0 {
			m.UserData = []byte{0, 1} // too short to hold a generation
		}
	case "previous":
		m.Previous = claims
	case "owned-only":
		// An eager sticky member on subscription v1+ reports owned
		// partitions too; the assignor reads only its user data.
		m.Owned, m.OwnedGeneration = claims, gen
	case "hostile":
		m.UserData = hostileUserData(req, claims, gen, rnd)
	case "v1", "v0", "corrupt", "truncated":
		ud := stickyUserDataOf(req, claims, gen, mode != "v0", rnd)
		switch mode {
		case "corrupt":
			for range 1 + rnd.IntN(3) {
				if len(ud) > 0 {
					ud[rnd.IntN(len(ud))] ^= byte(1 + rnd.IntN(255))
				}
			}
		case "truncated":
			ud = ud[:rnd.IntN(len(ud)+1)]
		}
		m.UserData = ud
	}
	if mode != "previous" && rnd.IntN(4) == 0 {
		m.Previous = claims
	}
}

// hostileUserData encodes claims as well-formed StickyAssignor v1 user
// data that no Kafka client writes but any client could send: a partition
// listed twice, a negative partition, one past the topic's count, and a
// topic's entry repeated. Both ports must read it alike and still answer a
// valid assignment.
func hostileUserData(req *abi.Request, claims []abi.TopicPartitions, gen int32, rnd *rand.Rand) []byte {
	type entry struct {
		name string
		ps   []int32
	}
	var entries []entry
	for _, c := range claims {
		t := req.Topics[c.Topic]
		ps := slices.Clone(c.Partitions)
		switch rnd.IntN(4) {
		case 0:
			if len(ps) > 0 {
				ps = append(ps, ps[rnd.IntN(len(ps))])
			}
		case 1:
			ps = append(ps, -1-rnd.Int32N(3))
		case 2:
			ps = append(ps, t.PartitionCount+rnd.Int32N(3))
		}
		rnd.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		entries = append(entries, entry{t.Name, ps})
	}
	if len(entries) > 0 && rnd.IntN(3) == 0 {
		e := entries[rnd.IntN(len(entries))]
		entries = append(entries, entry{e.name, e.ps[:rnd.IntN(len(e.ps)+1)]})
	}
	b := binary.BigEndian.AppendUint32(nil, uint32(len(entries)))
	for _, e := range entries {
		b = binary.BigEndian.AppendUint16(b, uint16(len(e.name)))
		b = append(b, e.name...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(e.ps)))
		for _, p := range e.ps {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
	}
	return binary.BigEndian.AppendUint32(b, uint32(gen))
}

// stickyUserDataOf encodes claims as StickyAssignor user data by topic
// name, sometimes with a topic the cluster no longer knows at all.
func stickyUserDataOf(req *abi.Request, claims []abi.TopicPartitions, gen int32, withGen bool, rnd *rand.Rand) []byte {
	var owned []string
	for _, e := range claims {
		for _, p := range e.Partitions {
			owned = append(owned, fmt.Sprintf("%s-%d", req.Topics[e.Topic].Name, p))
		}
	}
	if rnd.IntN(8) == 0 {
		owned = append(owned, "long-gone-topic-0", "long-gone-topic-3")
	}
	return stickyUserData(owned, gen, withGen)
}

// addClaim adds partition p of topic t to tps, keeping one entry per topic
// and partitions ascending.
func addClaim(tps []abi.TopicPartitions, t, p int32) []abi.TopicPartitions {
	for i := range tps {
		if tps[i].Topic == t {
			ps := tps[i].Partitions
			j, found := slices.BinarySearch(ps, p)
			if !found {
				tps[i].Partitions = slices.Insert(slices.Clone(ps), j, p)
			}
			return tps
		}
	}
	return append(tps, abi.TopicPartitions{Topic: t, Partitions: []int32{p}})
}

// cloneRequest copies req deeply enough that nextGeneration may change any
// member or topic without touching earlier rounds.
func cloneRequest(req *abi.Request) *abi.Request {
	out := *req
	out.Topics = slices.Clone(req.Topics)
	for i := range out.Topics {
		out.Topics[i].Partitions = slices.Clone(out.Topics[i].Partitions)
	}
	out.Members = slices.Clone(req.Members)
	for i := range out.Members {
		out.Members[i].Topics = slices.Clone(out.Members[i].Topics)
	}
	out.ReplicaSets = slices.Clone(req.ReplicaSets)
	out.Brokers = slices.Clone(req.Brokers)
	out.TopicLists = nil
	return &out
}

// nextGeneration builds the next round of a chain: the members report what
// resp gave them, in one of the ways clients do, some of them wrongly;
// then the group and the cluster change.
func nextGeneration(rnd *rand.Rand, k kind, req *abi.Request, resp *abi.Response) *abi.Request {
	next := cloneRequest(req)
	gen := req.Generation
	next.Generation = gen + 1 + int32(rnd.IntN(2))
	got := make([][]abi.TopicPartitions, len(req.Members))
	for _, ma := range resp.Members {
		for _, e := range ma.Partitions {
			if len(e.Partitions) > 0 {
				got[ma.Member] = append(got[ma.Member], abi.TopicPartitions{Topic: e.Topic, Partitions: slices.Clone(e.Partitions)})
			}
		}
	}
	modes := historyModes(k)
	chainMode := modes[rnd.IntN(len(modes))]
	mixed := rnd.IntN(4) == 0
	for i := range next.Members {
		m := &next.Members[i]
		claims := got[i]
		mode := chainMode
		if mixed {
			mode = modes[rnd.IntN(len(modes))]
		}
		g := gen
		switch x := rnd.IntN(40); {
		case x == 0:
			g -= 1 + int32(rnd.IntN(3)) // a zombie's stale claim
		case x == 1:
			claims = nil // restarted: owns nothing
		case x == 2 && len(req.Members) > 1:
			// Claims a partition another member was given as well.
			other := got[rnd.IntN(len(got))]
			if len(other) > 0 {
				e := other[rnd.IntN(len(other))]
				claims = addClaim(slices.Clone(claims), e.Topic, e.Partitions[rnd.IntN(len(e.Partitions))])
				if rnd.IntN(2) == 0 {
					g -= 1
				}
			}
		case x == 3 && len(next.Topics) > 0:
			// A partition that does not exist (or not any more).
			t := int32(rnd.IntN(len(next.Topics)))
			claims = addClaim(slices.Clone(claims), t, next.Topics[t].PartitionCount+int32(rnd.IntN(3)))
		}
		if rnd.IntN(20) == 0 && len(claims) > 0 {
			// Partitions reported out of order.
			claims = slices.Clone(claims)
			e := &claims[rnd.IntN(len(claims))]
			e.Partitions = slices.Clone(e.Partitions)
			slices.Reverse(e.Partitions)
		}
		setHistory(rnd, next, m, claims, g, mode)
	}
	if rnd.IntN(6) == 0 && len(next.Members) > 0 {
		// The benchmarks' rejoin: the first member comes back empty.
		m := &next.Members[0]
		m.Owned, m.UserData, m.OwnedGeneration = nil, nil, -1
	}
	changeGroup(rnd, next)
	return next
}

// changeGroup applies zero or more changes of membership and metadata.
func changeGroup(rnd *rand.Rand, req *abi.Request) {
	for range rnd.IntN(4) {
		switch rnd.IntN(7) {
		case 0: // members leave
			for range 1 + rnd.IntN(1+len(req.Members)/4) {
				if len(req.Members) > 1 {
					i := rnd.IntN(len(req.Members))
					req.Members = slices.Delete(req.Members, i, i+1)
				}
			}
		case 1: // members join, subscribed like an existing one
			for j := range 1 + rnd.IntN(5) {
				like := req.Members[rnd.IntN(len(req.Members))]
				req.Members = append(req.Members, abi.Member{
					MemberID: fmt.Sprintf("joiner-%d-%d", req.Generation, j), Rack: like.Rack,
					Cooperative: like.Cooperative, Topics: slices.Clone(like.Topics), OwnedGeneration: -1,
				})
			}
		case 2: // a member resubscribes
			m := &req.Members[rnd.IntN(len(req.Members))]
			var ts []int32
			for t := range req.Topics {
				if rnd.IntN(2) == 0 {
					ts = append(ts, int32(t))
				}
			}
			m.Topics = ts
		case 3: // a topic grows
			t := &req.Topics[rnd.IntN(len(req.Topics))]
			if t.Exists {
				grow := int32(1 + rnd.IntN(5))
				if t.Partitions != nil && len(t.Partitions) > 0 {
					for range grow {
						t.Partitions = append(t.Partitions, t.Partitions[rnd.IntN(len(t.Partitions))])
					}
				}
				t.PartitionCount += grow
			}
		case 4: // a topic is deleted; members still subscribe and claim it
			t := &req.Topics[rnd.IntN(len(req.Topics))]
			t.Exists, t.PartitionCount, t.Partitions = false, 0, nil
		case 5: // a member moves racks
			m := &req.Members[rnd.IntN(len(req.Members))]
			m.Rack = []string{"", "a", "b", "r1", "r2"}[rnd.IntN(5)]
		case 6: // nothing changes
		}
	}
	dropDuplicateIDs(req)
}

// dropDuplicateIDs keeps the first member of each member id, since a
// joiner may repeat the id of one that joined in an earlier generation.
func dropDuplicateIDs(req *abi.Request) {
	seen := map[string]bool{}
	req.Members = slices.DeleteFunc(req.Members, func(m abi.Member) bool {
		dup := seen[m.MemberID]
		seen[m.MemberID] = true
		return dup
	})
}

// runConformanceScenarios runs every scenario of the conformance suite that
// a sticky assignor serves, round by round as the suite does (each round
// fed what the members received in the one before), except the
// million-partition ones, whose cost belongs to the benchmarks.
func runConformanceScenarios(d *differ) {
	t := d.t
	root := filepath.Join(testutil.Root(t), "testdata", "conformance")
	var files []string
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && e.Name() == "sticky-large" {
			return filepath.SkipDir
		}
		if !e.IsDir() && strings.HasSuffix(path, ".json") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Scenario json.RawMessage `json:"scenario"`
		}
		if err := json.Unmarshal(data, &c); err != nil || len(c.Scenario) == 0 {
			continue // not a case file
		}
		sc, err := scenario.Parse(c.Scenario)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		name := sc.Assignor
		if name == "" {
			name = sc.Protocol
		}
		var k kind
		switch name {
		case EagerName:
			k = eager
		case CooperativeName:
			k = coop
		default:
			continue
		}
		sc.Assignor = name
		seq, err := sc.Sequence()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ran++
		rel, _ := filepath.Rel(root, path)
		for {
			req, _, err := seq.Scenario().Request()
			if err != nil {
				t.Fatalf("%s round %d: %v", rel, seq.Round(), err)
			}
			resp := d.check(k, req, fmt.Sprintf("conformance %s round %d", rel, seq.Round()))
			if resp == nil || resp.Error != "" {
				break
			}
			withheld, _ := handover.Withhold(req, resp)
			more, err := seq.Next(scenario.NewOutput(req, name, resp, withheld))
			if err != nil {
				t.Fatalf("%s round %d: %v", rel, seq.Round(), err)
			}
			if !more {
				break
			}
		}
	}
	if ran == 0 {
		t.Fatalf("no sticky conformance scenario under %s", root)
	}
	t.Logf("conformance: %d sticky scenarios", ran)
}

// byteSource is a rand.Source that plays back fuzz input, eight bytes a
// value, so that the fuzzer's mutations steer the generator's choices
// directly. Past the input it draws from a fixed generator: zeros forever
// would stall rand's rejection sampling.
type byteSource struct {
	b    []byte
	rest *rand.PCG
}

func (s *byteSource) Uint64() uint64 {
	if len(s.b) == 0 {
		if s.rest == nil {
			s.rest = rand.NewPCG(0x5717, 1)
		}
		return s.rest.Uint64()
	}
	var w [8]byte
	n := copy(w[:], s.b)
	s.b = s.b[n:]
	return binary.LittleEndian.Uint64(w[:])
}

// FuzzDifferential derives a chain of rebalances from the input (each
// choice of the generator takes the next eight bytes) and requires the
// module to answer it as this package does.
func FuzzDifferential(f *testing.F) {
	for _, seed := range []string{"", "\x01", "java-like rejoin \x00\x07", strings.Repeat("\xff\x10\x03", 40)} {
		f.Add([]byte(seed))
	}
	d := newDiffer(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		d.t = t
		d.mismatches = 0
		runChain(d, rand.New(&byteSource{b: b}), fmt.Sprintf("input %x", b))
		if d.mismatches > 0 {
			t.Fatalf("%d mismatches", d.mismatches)
		}
	})
}

// TestDifferential_HarnessSeesADifference checks the harness itself: the
// module's cooperative answer compared with the package's eager one (which
// carries user data) is a mismatch, and the same assignor both ways is not.
func TestDifferential_HarnessSeesADifference(t *testing.T) {
	d := newDiffer(t)
	c := cluster{topics: []topicSpec{{"t", 5}}}
	req := c.request(coop, 1, []memberSpec{sub("a", "t"), sub("b", "t")})
	if diff := compareOutcomes(req, d.native(eager, req), d.wasm(coop, req)); diff == "" {
		t.Fatal("eager and cooperative answers compared equal")
	}
	if diff := compareOutcomes(req, d.native(coop, req), d.wasm(coop, req)); diff != "" {
		t.Fatalf("the same assignor differs: %s", diff)
	}
}

package wasmruntime

// Benchmarks of the host: compiling, instantiating, calling, pooling, and a
// built-in plugin against the same algorithm run natively. BENCHMARKS.md at
// the repository root gives the commands and the measured numbers.
//
// Absolute times on a shared machine are noisy, so the benchmarks that make a
// claim measure their own reference in the same run and report the ratio as
// a custom metric: cold/cached compile, 1 goroutine/2 goroutines, and
// wasm/native.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/testutil"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// rangeWasm is the built-in range plugin that `make plugins` builds.
const rangeWasm = "plugins/builtin/wasm/range.wasm"

// benchGuest is one plugin and the assignor of it that a benchmark runs.
type benchGuest struct {
	name, file, assignor string
}

// The guests the benchmarks run: the Go test guest, the C guest and the
// built-in range plugin.
func goSpread() benchGuest { return benchGuest{"go", testGuest, "test-spread"} }
func cRoundRobin() benchGuest {
	return benchGuest{"c", "testdata/guests/c/roundrobin.wasm", "c-roundrobin"}
}
func rangeBuiltin() benchGuest { return benchGuest{"range", rangeWasm, "range"} }

// benchHost is newTestHost without the log buffer: the C guest logs a line
// per call, and a benchmark of thousands of calls should measure the host's
// log path (rate limiter included), not a growing in-memory buffer.
func benchHost(b *testing.B, cfg Config) *Host {
	b.Helper()
	cfg = cfg.WithLogger(slog.New(slog.DiscardHandler))
	if cfg.cacheDir == "" {
		cfg = cfg.WithCompilationCacheDir(os.Getenv("WASMASSIGN_TEST_CACHE"))
	}
	h, err := NewHost(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(context.Background()) })
	return h
}

// tinyRequest is the smallest useful request: one member subscribed to one
// topic of one partition. Its cost is the fixed cost of a call.
func tinyRequest() *abi.Request {
	return &abi.Request{
		GroupID: "g", Generation: 1, Protocol: "p",
		Topics:  []abi.Topic{{Name: "t", Exists: true, PartitionCount: 1}},
		Members: []abi.Member{{MemberID: "m", Topics: []int32{0}, OwnedGeneration: -1}},
	}
}

// uniformRequest is a group whose members all subscribe to every topic, each
// topic with the same partition count: the shape of the target sizes.
func uniformRequest(members, topics, partitions int) *abi.Request {
	req := &abi.Request{GroupID: "bench", Generation: 1, Protocol: "range"}
	subs := make([]int32, topics)
	for t := range topics {
		req.Topics = append(req.Topics, abi.Topic{Name: fmt.Sprintf("topic-%04d", t), Exists: true, PartitionCount: int32(partitions)})
		subs[t] = int32(t)
	}
	for m := range members {
		req.Members = append(req.Members, abi.Member{MemberID: fmt.Sprintf("consumer-%05d", m), Topics: subs, OwnedGeneration: -1})
	}
	return req
}

// BenchmarkLoad compares loading a module with an empty compilation cache
// (compiling it) against loading it again from a warm cache directory, as a
// restarted process would. Each iteration does both, with a new Host each
// time so that wazero's in-memory cache plays no part. "compile" is
// CompileModule alone (ModuleInfo.CompileTime); "load" is all of Host.Load:
// compile, the first instance (with the guest's start-up code) and describe.
func BenchmarkLoad(b *testing.B) {
	for _, g := range []benchGuest{goSpread(), cRoundRobin()} {
		b.Run(g.name, func(b *testing.B) {
			wasm := testutil.ReadArtefact(b, g.file)
			ctx := context.Background()
			load := func(dir string) (compile, total time.Duration) {
				h, err := NewHost(ctx, NewConfig().WithIsolation(IsolationInProcess).WithLogger(slog.New(slog.DiscardHandler)).WithCompilationCacheDir(dir))
				if err != nil {
					b.Fatal(err)
				}
				defer h.Close(ctx)
				start := time.Now()
				p, err := h.Load(ctx, g.file, wasm)
				if err != nil {
					b.Fatal(err)
				}
				return p.Info().CompileTime, time.Since(start)
			}
			var coldCompile, coldLoad, cachedCompile, cachedLoad time.Duration
			for i := 0; b.Loop(); i++ {
				dir := filepath.Join(b.TempDir(), fmt.Sprint(i))
				c, l := load(dir) // empty directory: compiles and fills it
				coldCompile += c
				coldLoad += l
				c, l = load(dir) // the same directory: reads machine code back
				cachedCompile += c
				cachedLoad += l
			}
			n := float64(b.N)
			b.ReportMetric(ms(coldCompile)/n, "cold-compile-ms")
			b.ReportMetric(ms(cachedCompile)/n, "cached-compile-ms")
			b.ReportMetric(ms(coldLoad)/n, "cold-load-ms")
			b.ReportMetric(ms(cachedLoad)/n, "cached-load-ms")
			b.ReportMetric(float64(coldCompile)/float64(cachedCompile), "compile-cold/cached")
			b.ReportMetric(float64(coldLoad)/float64(cachedLoad), "load-cold/cached")
			b.ReportMetric(float64(len(wasm))/1e6, "module-MB")
		})
	}
}

// BenchmarkInstantiate measures a new instance of a compiled module, start
// functions (the Go runtime's _initialize) included: what a call pays when
// the pool is empty.
func BenchmarkInstantiate(b *testing.B) {
	for _, g := range []benchGuest{goSpread(), cRoundRobin()} {
		b.Run(g.name, func(b *testing.B) {
			h := benchHost(b, NewConfig().WithIsolation(IsolationInProcess))
			p := loadArtefact(b, h, g.file)
			ctx := context.Background()
			for b.Loop() {
				inst, err := p.run.(*inProcess).mod.instantiate(ctx)
				if err != nil {
					b.Fatal(err)
				}
				inst.mod.Close(ctx)
			}
		})
	}
}

// BenchmarkAssign_Tiny is the fixed cost of one call through Plugin.Assign,
// from a warm pooled instance, in each isolation mode: in process mode it
// includes the round trip to the worker. Calls follow each other at once,
// so each waits for the idle call after the previous one (the Go guest's
// collections, every 32nd call here); "go-no-idle" is the same guest under
// a host that never calls idle, which collects inside the call instead.
func BenchmarkAssign_Tiny(b *testing.B) {
	noIdle := goSpread()
	noIdle.name += "-no-idle"
	for _, iso := range isolations() {
		for _, g := range []benchGuest{goSpread(), noIdle, cRoundRobin()} {
			b.Run(iso.String()+"/"+g.name, func(b *testing.B) {
				cfg := NewConfig().WithIsolation(iso).WithMaxInstances(1)
				cfg.skipIdle = strings.HasSuffix(g.name, "-no-idle")
				h := benchHost(b, cfg)
				p := loadArtefact(b, h, g.file)
				req := tinyRequest()
				ctx := context.Background()
				warm(b, p, g.assignor, req, 100)
				for b.Loop() {
					if _, err := p.Assign(ctx, g.assignor, req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkAssign_IdleOffThePath is what moving the guest's housekeeping
// into the idle call saves a caller: a medium request (100 members, 25
// topics of 1,000 partitions, about 1 MiB of garbage per call, so the Go
// SDK collects after every call) to the Go test guest, with the
// host calling idle ("idle") or not ("no-idle", the collection then runs
// inside the call). Between calls the benchmark waits, untimed, until the
// idle call has ended, as between rebalances; ns/op is the caller's time.
func BenchmarkAssign_IdleOffThePath(b *testing.B) {
	req := uniformRequest(100, 25, 1000)
	for _, iso := range isolations() {
		for _, skip := range []bool{false, true} {
			name := iso.String() + "/idle"
			if skip {
				name = iso.String() + "/no-idle"
			}
			b.Run(name, func(b *testing.B) {
				cfg := NewConfig().WithIsolation(iso).WithMaxInstances(1)
				cfg.skipIdle = skip
				h := benchHost(b, cfg)
				g := goSpread()
				p := loadArtefact(b, h, g.file)
				ctx := context.Background()
				warm(b, p, g.assignor, req, 20)
				var calls []time.Duration
				for b.Loop() {
					start := time.Now()
					if _, err := p.Assign(ctx, g.assignor, req); err != nil {
						b.Fatal(err)
					}
					calls = append(calls, time.Since(start))
					b.StopTimer()
					waitIdle(b, p)
					b.StartTimer()
				}
				// On a shared machine the fastest calls say more about
				// the call's own cost than the mean does.
				slices.Sort(calls)
				b.ReportMetric(float64(calls[0].Microseconds()), "min-us")
				b.ReportMetric(float64(calls[len(calls)/4].Microseconds()), "p25-us")
				b.ReportMetric(float64(calls[len(calls)/2].Microseconds()), "p50-us")
			})
		}
	}
}

// waitIdle waits until no instance of p is in its idle call.
func waitIdle(b *testing.B, p *Plugin) {
	deadline := time.Now().Add(10 * time.Second)
	for p.host.PoolStats().Plugins[p.Name()].Idling > 0 {
		if time.Now().After(deadline) {
			b.Fatal("an idle call did not end")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// BenchmarkWorkerSpawn is what process isolation pays to start one worker
// with a module whose machine code is in the cache: exec, the worker's Go
// runtime, loading the code, instantiating (the guest's start-up code) and
// describing. A call pays it when the pool is empty, and a spare worker
// pays it in the background after a kill.
func BenchmarkWorkerSpawn(b *testing.B) {
	if !processIsolationSupported {
		b.Skip("no worker processes on this platform")
	}
	for _, g := range []benchGuest{goSpread(), cRoundRobin(), rangeBuiltin()} {
		b.Run(g.name, func(b *testing.B) {
			h := benchHost(b, NewConfig().WithIsolation(IsolationProcess))
			p := loadArtefact(b, h, g.file) // compiles into the cache
			r := p.run.(*procRunner)
			ctx := context.Background()
			for b.Loop() {
				w, _, err := r.spawnLoaded(ctx)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				w.close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkAssign_TinyPhases splits the tiny call into the steps Assign
// takes, each timed on its own: encoding the request, the three guest calls
// (alloc, assign, free; with the request write and the host's per-call
// context), decoding the response, and validating it. ns/op covers each
// whole iteration, a little more than the phases' sum; what
// BenchmarkAssign_Tiny measures beyond that sum is Assign's own bookkeeping
// (seed, pool, error wrapping).
func BenchmarkAssign_TinyPhases(b *testing.B) {
	for _, g := range []benchGuest{goSpread(), cRoundRobin()} {
		b.Run(g.name, func(b *testing.B) {
			h := benchHost(b, NewConfig().WithIsolation(IsolationInProcess).WithMaxInstances(1))
			p := loadArtefact(b, h, g.file)
			req := tinyRequest()
			warm(b, p, g.assignor, req, 100)
			var sum phaseTimes
			for b.Loop() {
				pt := assignInPhases(b, p, g.assignor, req)
				sum.add(pt)
			}
			sum.report(b, float64(b.N), 1e-3, "us")
		})
	}
}

// BenchmarkPooling checks that a plugin's instance pool lets concurrent
// assignments use both cores. Each iteration does the same fixed work twice:
// a number of assignments of a medium request (100 members, 25 topics of
// 1,000 partitions), chosen so that one goroutine needs about 200ms, once
// from one goroutine and once split between two. "speedup" is the
// one-goroutine time over the two-goroutine time, summed over iterations;
// the goal is at least 1.6 on two cores. The order of the two runs
// alternates between iterations so that neither always runs first.
//
// The cpu case runs, the same way, a loop that neither allocates nor touches
// memory: the ceiling the machine allows, measured in the same run.
// "others-cpu-%" is the share of the machine's CPU that other processes used
// meanwhile (Linux only); a speedup measured while it is high says more
// about the neighbours than about the pool.
func BenchmarkPooling(b *testing.B) {
	req := uniformRequest(100, 25, 1000)
	// Each case returns the call to repeat; setup runs inside its
	// sub-benchmark, so a filter that skips a case skips its loading too.
	type poolCase struct {
		name  string
		setup func(b *testing.B) func() error
	}
	cases := []poolCase{{"cpu", func(*testing.B) func() error {
		return func() error {
			if spin() == 0 {
				return errors.New("spin: the generator reached zero")
			}
			return nil
		}
	}}}
	for _, g := range []benchGuest{cRoundRobin(), goSpread(), rangeBuiltin()} {
		cases = append(cases, poolCase{g.name, func(b *testing.B) func() error {
			h := benchHost(b, NewConfig().WithIsolation(IsolationInProcess).WithMaxInstances(2))
			p := loadArtefact(b, h, g.file)
			return func() error { _, err := p.Assign(context.Background(), g.assignor, req); return err }
		}})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			assign := c.setup(b)
			// Warm up: for a plugin, two instances whose memory has grown to
			// the request.
			if _, err := stream(assign, 2, 4); err != nil {
				b.Fatal(err)
			}
			// Enough calls that a one-goroutine run takes about 200ms (d is
			// two calls), and an even number of them.
			d, err := stream(assign, 1, 2)
			if err != nil {
				b.Fatal(err)
			}
			total := 2 * max(8, int(200*time.Millisecond/d))
			var one, two time.Duration
			others := startOthers()
			for i := 0; b.Loop(); i++ {
				for k := range 2 {
					streams := 1 + (i+k)%2
					runtime.GC() // each run starts without the other's host garbage
					elapsed, err := stream(assign, streams, total)
					if err != nil {
						b.Fatal(err)
					}
					if streams == 1 {
						one += elapsed
					} else {
						two += elapsed
					}
				}
			}
			n := float64(b.N * total)
			b.ReportMetric(ms(one)/n, "ms/assign-1g")
			b.ReportMetric(ms(two)/n, "ms/assign-2g")
			b.ReportMetric(float64(one)/float64(two), "speedup")
			b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "procs")
			if pct, ok := others.percent(); ok {
				b.ReportMetric(pct, "others-cpu-%")
			}
		})
	}
}

// spin is a millisecond or two of arithmetic on registers only. Its result
// is checked so that the compiler keeps the loop.
func spin() uint64 {
	x := uint64(1)
	for range 1 << 20 {
		x = x*6364136223846793005 + 1442695040888963407
		x ^= x >> 17
	}
	return x
}

// stream performs total calls of assign from the given number of
// goroutines, each taking an equal share, and returns the elapsed time.
func stream(assign func() error, goroutines, total int) (time.Duration, error) {
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	start := time.Now()
	for g := range goroutines {
		n := total / goroutines
		if g < total%goroutines {
			n++
		}
		wg.Go(func() {
			for range n {
				if err := assign(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	return elapsed, <-errs
}

// BenchmarkRange_1M runs the range assignor on the largest target size,
// 2,000 members over 1,000,000 partitions (500 topics of 2,000, identical
// subscriptions), through the built-in wasm plugin end to end (encode, guest,
// decode, validate) and natively through package rangeassignor, in the same
// iteration. "wasm/native" is the ratio of the two. It runs in each
// isolation mode; the phases are measured in-process only, where the host
// can time the guest's steps.
//
// The call needs more than the default limits: the timeout is raised to 2
// minutes and memory to 2 GiB, so the benchmark measures speed rather than
// where the limits cut. One untimed call first grows the instance's memory,
// as a pooled instance would have.
func BenchmarkRange_1M(b *testing.B) {
	for _, iso := range isolations() {
		b.Run(iso.String(), func(b *testing.B) {
			lim := DefaultLimits().WithTimeout(2 * time.Minute).WithMemoryLimitMB(2048)
			h := benchHost(b, NewConfig().WithIsolation(iso).WithMaxInstances(1).WithLimits(lim))
			p := loadArtefact(b, h, rangeWasm)
			req := uniformRequest(2000, 500, 2000)
			warm(b, p, "range", req, 1)
			var wasm, native time.Duration
			var phases phaseTimes
			for b.Loop() {
				start := time.Now()
				if _, err := p.Assign(context.Background(), "range", req); err != nil {
					b.Fatal(err)
				}
				wasm += time.Since(start)

				runtime.GC()
				start = time.Now()
				if _, err := rangeassignor.Assign(req); err != nil {
					b.Fatal(err)
				}
				native += time.Since(start)

				runtime.GC()
				if iso == IsolationInProcess {
					phases.add(assignInPhases(b, p, "range", req))
				}
			}
			n := float64(b.N)
			b.ReportMetric(ms(wasm)/n, "wasm-ms")
			b.ReportMetric(ms(native)/n, "native-ms")
			b.ReportMetric(float64(wasm)/float64(native), "wasm/native")
			if iso == IsolationInProcess {
				phases.report(b, n, 1e-6, "ms")
			}
			b.ReportMetric(float64(p.MaxMemoryBytes())/(1<<20), "guest-MiB")
		})
	}
}

// warm makes n calls so that the measured ones find a pooled instance whose
// memory has grown to the request.
func warm(b *testing.B, p *Plugin, assignor string, req *abi.Request, n int) {
	b.Helper()
	for range n {
		if _, err := p.Assign(context.Background(), assignor, req); err != nil {
			b.Fatal(err)
		}
	}
}

// phaseTimes is one assignment split into the steps of Plugin.Assign.
type phaseTimes struct {
	encode   time.Duration // abi.AppendRequest
	call     time.Duration // alloc, write, assign and free in the guest, with the call context
	decode   time.Duration // reading and decoding the response
	validate time.Duration // Validate
}

func (pt *phaseTimes) add(o phaseTimes) {
	pt.encode += o.encode
	pt.call += o.call
	pt.decode += o.decode
	pt.validate += o.validate
}

// report adds the mean of each phase as a metric in the given unit (scale
// converts nanoseconds to it).
func (pt phaseTimes) report(b *testing.B, n, scale float64, unit string) {
	b.ReportMetric(float64(pt.encode)*scale/n, "encode-"+unit)
	b.ReportMetric(float64(pt.call)*scale/n, "guest-"+unit)
	b.ReportMetric(float64(pt.decode)*scale/n, "decode-"+unit)
	b.ReportMetric(float64(pt.validate)*scale/n, "validate-"+unit)
}

// assignInPhases performs one assignment the way Plugin.call and
// Plugin.Assign do, timing each step. It takes an instance from the pool and
// returns it, so it runs on the same warm instance as Assign.
func assignInPhases(b *testing.B, p *Plugin, assignor string, req *abi.Request) phaseTimes {
	b.Helper()
	ctx := context.Background()
	info, ok := p.Assignor(assignor)
	if !ok {
		b.Fatalf("no assignor %q", assignor)
	}
	r := *req
	r.Assignor = assignor
	r.Seed = Seed(&r)
	run, ok := p.run.(*inProcess)
	if !ok {
		b.Fatal("phases are measured in-process only")
	}
	inst, err := run.acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer run.release(ctx, inst)
	lim := p.host.cfg.limits
	var pt phaseTimes

	t0 := time.Now()
	inst.buf = abi.AppendRequest(inst.buf[:0], &r)
	t1 := time.Now()
	pt.encode = t1.Sub(t0)

	cs := &callState{sink: run.mod.sink}
	inst.io.begin(cs, r.Seed)
	cctx, cancel := context.WithTimeout(context.WithValue(ctx, callKey{}, cs), lim.timeout)
	size := uint64(len(inst.buf))
	res, err := inst.alloc.Call(cctx, size)
	if err != nil {
		b.Fatal(err)
	}
	ptr := uint32(res[0])
	mem := inst.mod.Memory()
	if !mem.Write(ptr, inst.buf) {
		b.Fatal("alloc returned a pointer outside memory")
	}
	res, err = inst.assign.Call(cctx, uint64(ptr), size)
	if err != nil {
		b.Fatal(err)
	}
	t2 := time.Now()
	out, err := readPacked(mem, res[0], lim.maxOutputBytes)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := decodeOutput(p.name, out)
	if err != nil {
		b.Fatal(err)
	}
	t3 := time.Now()
	if _, err := inst.free.Call(cctx, uint64(ptr), size); err != nil {
		b.Fatal(err)
	}
	cancel()
	inst.io.end()
	t4 := time.Now()
	pt.call = t2.Sub(t1) + t4.Sub(t3)
	pt.decode = t3.Sub(t2)

	if err := Validate(&r, resp, info); err != nil {
		b.Fatal(err)
	}
	pt.validate = time.Since(t4)
	return pt
}

// othersLoad measures how busy other processes keep the machine, from
// /proc/stat (all CPUs) and /proc/self/stat (this process), both in clock
// ticks.
type othersLoad struct {
	busy, total, self int64
	ok                bool
}

func startOthers() othersLoad {
	var o othersLoad
	o.busy, o.total, o.ok = machineTicks()
	var ok bool
	o.self, ok = selfTicks()
	o.ok = o.ok && ok
	return o
}

// percent returns the share of all CPU time since startOthers that went to
// other processes.
func (o othersLoad) percent() (float64, bool) {
	busy, total, ok1 := machineTicks()
	self, ok2 := selfTicks()
	if !o.ok || !ok1 || !ok2 || total <= o.total {
		return 0, false
	}
	others := (busy - o.busy) - (self - o.self)
	return 100 * max(0, float64(others)) / float64(total-o.total), true
}

// machineTicks reads the "cpu" line of /proc/stat: user nice system idle
// iowait irq softirq steal ...
func machineTicks() (busy, total int64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	var f [8]int64
	if n, _ := fmt.Sscan(string(b[len("cpu"):]), &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7]); n != len(f) {
		return 0, 0, false
	}
	for i, v := range f {
		total += v
		if i != 3 && i != 4 { // idle and iowait
			busy += v
		}
	}
	return busy, total, true
}

// selfTicks reads utime and stime, fields 14 and 15 of /proc/self/stat,
// which come after the parenthesised command name.
func selfTicks() (int64, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(s[i+1:]) // fields[0] is field 3, the state
	if len(fields) < 13 {
		return 0, false
	}
	var u, k int64
	if _, err := fmt.Sscan(fields[11]+" "+fields[12], &u, &k); err != nil {
		return 0, false
	}
	return u + k, true
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

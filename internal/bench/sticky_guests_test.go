package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/plugins/sticky"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// stickyGuests are the sticky modules BenchmarkStickyGuests compares with
// package sticky run natively: the Go guest (the package compiled to wasm,
// `make testdata`) and the built-in (the Rust crate, `make build`), or the
// module STICKY_WASM names.
func stickyGuests(b *testing.B) map[string]string {
	builtin := "plugins/builtin/wasm/sticky.wasm"
	if p := os.Getenv("STICKY_WASM"); p != "" {
		builtin = p
	}
	out := map[string]string{"go-guest": "testdata/guests/go/sticky-go.wasm", "builtin": builtin}
	for name, p := range out {
		if !filepath.IsAbs(p) {
			p = filepath.Join(testutil.Root(b), p)
		}
		if _, err := os.Stat(p); err != nil {
			b.Skipf("%s: %v (make build testdata)", name, err)
		}
		out[name] = p
	}
	return out
}

// BenchmarkStickyGuests times, for each built-in bench case and phase, the
// daemon's path (the coordinator decoding each JoinGroup, building the
// request, validating, withholding and encoding each SyncGroup answer)
// around the sticky assignors three ways: package sticky natively, the Go
// guest and the built-in module through the sandbox. ns/op is one pipeline
// run; native/op and sandbox-x report the native time and the ratio of
// the two, the sandbox's own cost (the target is at most 3x). Each run gets
// fresh member ids, as `wasmassign bench` does.
func BenchmarkStickyGuests(b *testing.B) {
	ctx := context.Background()
	guests := stickyGuests(b)
	cfg := wasmruntime.NewConfig().
		WithLogger(slog.New(slog.DiscardHandler)).
		WithCompilationCacheDir(testutil.SharedCacheDir()).
		WithLimits(wasmruntime.DefaultLimits().WithTimeout(5 * time.Minute).WithMemoryLimitMB(1024))
	h, err := wasmruntime.NewHost(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(ctx) })
	plugins := map[string]*wasmruntime.Plugin{}
	for name, path := range guests {
		if plugins[name], err = h.LoadFile(ctx, path); err != nil {
			b.Fatalf("%s: %v", path, err)
		}
	}
	for _, caseName := range BuiltinNames() {
		c, _ := Builtin(caseName)
		for _, assignor := range []string{sticky.EagerName, sticky.CooperativeName} {
			rebalance := abi.Eager
			if assignor == sticky.CooperativeName {
				rebalance = abi.Cooperative
			}
			native, _ := NativePlugin(assignor)
			info, _ := plugins["builtin"].Assignor(assignor)
			base := Options{Protocol: assignor, Rebalance: rebalance, Plugin: native,
				Assignor: &wasmruntime.Assignor{Info: info, Plugin: plugins["builtin"]}}
			g := Group{ID: "bench-" + c.Name, Generation: 1, Protocol: assignor, Rebalance: rebalance, Partitions: c.Partitions}
			md := metadataOf(c.Partitions)
			// The rejoin starts from the native initial answer; the
			// differential test holds the guests to the same one.
			phases := []struct {
				name    string
				members []Member
				gen     int32
			}{{"initial", c.Initial, 1}}
			if c.Rejoin != nil {
				first, err := base.plugin(md)(ctx, g, EncodeMembers(c.Initial, "-r"))
				if err != nil {
					b.Fatal(err)
				}
				owned, err := ownedByIndex(first, c.Initial, "-r")
				if err != nil {
					b.Fatal(err)
				}
				phases = append(phases, struct {
					name    string
					members []Member
					gen     int32
				}{"rejoin", c.Rejoin(owned), 2})
			}
			for _, ph := range phases {
				g.Generation = ph.gen
				var nativeNS float64
				for _, sideName := range []string{"native", "go-guest", "builtin"} {
					o := base
					mk := func() side { return o.plugin(md) }
					if sideName != "native" {
						gi, _ := plugins[sideName].Assignor(assignor)
						o.Assignor = &wasmruntime.Assignor{Info: gi, Plugin: plugins[sideName]}
						mk = func() side { return o.wasm(ctx, md) }
					}
					b.Run(fmt.Sprintf("case=%s/assignor=%s/phase=%s/side=%s", c.Name, assignor, ph.name, sideName), func(b *testing.B) {
						var total time.Duration
						runs := 0
						for ; b.Loop(); runs++ {
							b.StopTimer()
							suffix := fmt.Sprintf("-r%d", runs)
							run := mk()
							if ph.name == "rejoin" {
								// The group the rejoin finds, as the daemon
								// would hold it.
								g.Generation = 1
								if _, err := run(ctx, g, EncodeMembers(c.Initial, suffix)); err != nil {
									b.Fatal(err)
								}
								g.Generation = ph.gen
							}
							members := EncodeMembers(ph.members, suffix)
							b.StartTimer()
							d, err := timedRun(ctx, run, g, members)
							if err != nil {
								b.Fatal(err)
							}
							total += d
						}
						perOp := float64(total.Nanoseconds()) / float64(runs)
						if sideName == "native" {
							nativeNS = perOp
						} else if nativeNS > 0 {
							b.ReportMetric(perOp/nativeNS, "sandbox-x")
						}
					})
				}
			}
		}
	}
}

// timedRun runs s once and times it; unlike timed it leaves garbage
// collection to the benchmark loop.
func timedRun(ctx context.Context, s side, g Group, members []kmsg.JoinGroupResponseMember) (time.Duration, error) {
	start := time.Now()
	_, err := s(ctx, g, members)
	return time.Since(start), err
}

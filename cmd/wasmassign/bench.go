package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wasmassign/wasmassign/internal/bench"
	"github.com/wasmassign/wasmassign/internal/scenario"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// benchCmd times a wasm assignor against kgo's native balancer for the same
// protocol, both starting from JoinGroup metadata bytes and ending with
// SyncGroup assignment bytes.
func benchCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var (
		file, caseName, assignorName, compare, dir string
		files                                      stringList
		runs                                       int
		asJSON                                     bool
		lim                                        limitFlags
	)
	fs.StringVar(&file, "scenario", "", "benchmark a simulate scenario file as a one-phase case")
	fs.StringVar(&caseName, "case", "", "built-in case: "+strings.Join(bench.BuiltinNames(), ", ")+" (default mid)")
	fs.StringVar(&assignorName, "assignor", "", "assignor to run (default: cooperative-sticky for built-in cases; chosen as simulate does for --scenario)")
	fs.StringVar(&compare, "compare", "kgo", "native comparator: kgo (its balancer for the protocol), or kgo:NAME for kgo's balancer NAME (range, roundrobin, sticky, cooperative-sticky)")
	fs.IntVar(&runs, "runs", 5, "runs per side and phase; medians are reported")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object per phase")
	fs.StringVar(&dir, "plugin-dir", "", "directory of extra *.wasm plugins")
	fs.Var(&files, "plugin", "extra plugin file (repeatable)")
	lim.register(fs)
	// The large cases need more than one plugin call's usual budget; a
	// benchmark measures time, it does not enforce a deadline.
	fs.Lookup("timeout").Value.Set("5m")
	fs.Lookup("timeout").DefValue = "5m0s"
	fs.Lookup("memory-limit-mb").Value.Set("4096")
	fs.Lookup("memory-limit-mb").DefValue = "4096"
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	kgoName, named := strings.CutPrefix(compare, "kgo:")
	if !named {
		kgoName = ""
	}
	if compare != "kgo" && (!named || !validKgoBalancer(kgoName)) {
		return usagef("--compare: %q is not a supported comparator (kgo, or kgo:NAME with NAME one of range, roundrobin, sticky, cooperative-sticky)", compare)
	}
	if runs < 1 {
		return usagef("--runs: must be at least 1, got %d", runs)
	}
	if file != "" && caseName != "" {
		return usagef("--scenario and --case: give one, not both")
	}
	var (
		c  *bench.Case
		sc *scenario.Scenario
	)
	if file == "" {
		if caseName == "" {
			caseName = "mid"
		}
		var ok bool
		if c, ok = bench.Builtin(caseName); !ok {
			return usagef("--case: unknown case %q (have %s)", caseName, strings.Join(bench.BuiltinNames(), ", "))
		}
	} else {
		var err error
		if sc, err = scenario.Load(file); err != nil {
			return usageError{err}
		}
	}

	h, reg, err := lim.loadRegistry(ctx, e, dir, files)
	if err != nil {
		return err
	}
	defer h.Close(ctx)

	var (
		a         *wasmruntime.Assignor
		protocol  string
		rebalance abi.RebalanceProtocol
	)
	if sc != nil {
		var req scenarioReq
		if a, req, err = scenarioRequest(reg, sc, file, assignorName); err != nil {
			return err
		}
		name := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
		c = bench.FromRequest(name, req.Request)
		protocol, rebalance = sc.Protocol, req.RebalanceProtocol
	} else {
		if assignorName == "" {
			assignorName = "cooperative-sticky"
		}
		var ok bool
		if a, ok = reg.Lookup(assignorName); !ok {
			return usagef("--assignor: no loaded plugin provides %q (have %s)", assignorName, assignorNames(reg))
		}
		protocol = a.Info.Protocols[0]
		if protocol == "cooperative-sticky" {
			rebalance = abi.Cooperative
		}
	}
	native, ok := bench.NativeBalancer(a.Info.Name)
	if !ok {
		native, ok = bench.NativeBalancer(protocol)
	}
	if kgoName != "" {
		native, ok = bench.NativeBalancer(kgoName)
	}
	if !ok {
		// A custom assignor has no kgo twin; kgo's range still gives a
		// reference point for the same input.
		native, _ = bench.NativeBalancer("range")
		fmt.Fprintf(e.stderr, "note: kgo has no balancer for %q (protocol %q); comparing with kgo's range\n", a.Info.Name, protocol)
	}

	opts := bench.Options{Assignor: a, Protocol: protocol, Rebalance: rebalance, Native: native, Runs: runs}
	// The sandbox's own cost needs the same code natively, which only the
	// built-ins have.
	if plugin, ok := bench.NativePlugin(a.Info.Name); ok && a.Builtin {
		opts.Plugin = plugin
	}
	results, err := bench.Run(ctx, c, opts)
	if err != nil {
		return err
	}
	peak := float64(a.Plugin.MaxMemoryBytes()) / (1 << 20)
	for i := range results {
		results[i].PeakMemoryMiB = math.Round(peak*10) / 10
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		for _, r := range results {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	fmt.Fprintf(e.stdout, "case %s, assignor %s vs kgo, median of %d runs (the gateway's coordinator: joins, request, assign, validate, syncs; kgo: balance + encode)\n\n", c.Name, a.Info.Name, runs)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := "phase\tmembers\tpartitions\twasm\tkgo\twasm/kgo\tmoved (wasm)\tmoved (kgo)\t"
	if opts.Plugin != nil {
		header += "native plugin\tsandbox\t"
	}
	fmt.Fprintln(tw, header)
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%.2fx\t%d\t%d\t", r.Phase, r.Members, r.Partitions,
			msString(r.WasmMS), msString(r.NativeMS), r.Ratio, r.Moved, r.NativeMoved)
		if opts.Plugin != nil {
			fmt.Fprintf(tw, "%s\t%.1fx\t", msString(r.PluginMS), r.Sandbox)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(e.stdout, "\npeak linear memory of a plugin instance: %.1f MiB\n", peak)
	return err
}

func msString(ms float64) string {
	return time.Duration(ms * float64(time.Millisecond)).Round(10 * time.Microsecond).String()
}

func validKgoBalancer(name string) bool {
	_, ok := bench.NativeBalancer(name)
	return ok
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wasmassign/wasmassign/internal/loadtest"
	"github.com/wasmassign/wasmassign/internal/termtext"
)

// loadtestCmd plays consumer groups against one target or several, one
// after another, and reports how each coordinated them, the first being
// the reference the others are compared with.
func loadtestCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	cfg := loadtest.DefaultConfig()
	var (
		targets, pids stringList
		partitions    int
		asJSON        bool
	)
	fs.Var(&targets, "target", "what to load (repeatable, or comma-separated): host:port, name=host:port, or kfake for a kfake cluster the generator starts in a process of its own (name=kfake names it); the first is the reference")
	fs.Var(&pids, "pid", "name=PID: the target's process, sampled with its children for CPU and memory (repeatable; a bare PID names the only target outside this process)")
	fs.IntVar(&cfg.Groups, "groups", cfg.Groups, "consumer groups")
	fs.IntVar(&cfg.Members, "members", cfg.Members, "members per group")
	fs.IntVar(&cfg.Topics, "topics", cfg.Topics, "topics every member subscribes to, named --topic-prefix and a number")
	fs.IntVar(&partitions, "partitions", int(cfg.Partitions), "partitions per topic, when the topic is created")
	fs.StringVar(&cfg.TopicPrefix, "topic-prefix", cfg.TopicPrefix, "topic name prefix")
	fs.DurationVar(&cfg.Heartbeat, "heartbeat", cfg.Heartbeat, "heartbeat interval")
	fs.DurationVar(&cfg.Commit, "commit", cfg.Commit, "offset commit interval")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "steady phase: how long heartbeats and commits are measured once every group is stable")
	fs.StringVar(&cfg.Protocol, "protocol", cfg.Protocol, "protocol the members offer: range (eager) or cooperative-sticky (KIP-429)")
	fs.DurationVar(&cfg.SessionTimeout, "session-timeout", cfg.SessionTimeout, "session timeout sent in JoinGroup")
	fs.DurationVar(&cfg.RebalanceTimeout, "rebalance-timeout", cfg.RebalanceTimeout, "rebalance timeout sent in JoinGroup")
	fs.DurationVar(&cfg.StableTimeout, "stable-timeout", cfg.StableTimeout, "how long the groups may take to become stable before the target is reported unstable")
	fs.DurationVar(&cfg.DialTimeout, "dial-timeout", cfg.DialTimeout, "bound on each connection's dial and first answer")
	fs.IntVar(&cfg.SharedConnections, "shared-connections", 0, "multiplex every member's heartbeats, commits and lookups over this many pipelined connections per broker address (its JoinGroup and SyncGroup keep a connection of their own for the rebalance, since a JoinGroup waits for the whole group and holds up what follows it); 0: one connection per member, as real clients")
	fs.BoolVar(&cfg.CreateTopics, "create-topics", cfg.CreateTopics, "create missing topics with CreateTopics")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object: the load, each target's result, the ratios")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if partitions > math.MaxInt32 {
		return usagef("--partitions: %d is more than a topic can have", partitions)
	}
	cfg.Partitions = int32(partitions)
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	ts, err := loadtest.ParseTargets(targets)
	if err != nil {
		return usageError{err}
	}
	if err := loadtest.SetPIDs(ts, pids); err != nil {
		return usageError{err}
	}
	// One prefix for the whole invocation: every target sees the same
	// group names, and none that an earlier run left on a gateway.
	cfg.GroupPrefix = fmt.Sprintf("loadtest-%06x-", rand.Uint32()&0xffffff)

	need := uint64(cfg.TotalMembers()) + 64
	if cfg.SharedConnections > 0 {
		need = uint64(cfg.SharedConnections)*8 + 64
	}
	if limit, err := loadtest.RaiseFileLimit(); err != nil {
		e.log.Warn("could not raise the open-file limit", "err", err)
	} else if limit != 0 && limit < need {
		e.log.Warn("the open-file limit is below the sockets this load needs", "limit", limit, "need", need)
	}
	// An unreachable target is reported before any load runs.
	for _, t := range ts {
		if err := loadtest.Probe(ctx, t, cfg.DialTimeout); err != nil {
			return err
		}
	}

	var results []*loadtest.Result
	var runErr error
	for _, t := range ts {
		res, err := loadtest.Run(ctx, cfg, t, e.log)
		if err != nil {
			runErr = err
			break
		}
		results = append(results, res)
		if ctx.Err() != nil {
			// Interrupted: report what was measured, run nothing more.
			runErr = fmt.Errorf("interrupted during target %s: its steady phase was cut short", t.Name)
			break
		}
	}
	if len(results) > 0 {
		var err error
		if asJSON {
			err = writeLoadtestJSON(e.stdout, cfg, results)
		} else {
			err = writeLoadtestTable(e.stdout, cfg, results)
		}
		if err != nil {
			return err
		}
	}
	if runErr != nil {
		return runErr
	}
	var unstable []error
	for _, r := range results {
		if !r.Stable {
			unstable = append(unstable, fmt.Errorf("target %s (%s): %d of %d groups not stable within --stable-timeout %v",
				r.Target, r.Address, r.UnstableGroups, r.Groups, cfg.StableTimeout))
		}
	}
	return errors.Join(unstable...)
}

// writeLoadtestJSON writes the machine-readable report, exact and
// unescaped.
func writeLoadtestJSON(w io.Writer, cfg loadtest.Config, results []*loadtest.Result) error {
	out := struct {
		Load    loadtest.Config    `json:"load"`
		Targets []*loadtest.Result `json:"targets"`
		Ratios  []loadtest.Ratios  `json:"ratios"`
	}{Load: cfg, Targets: results, Ratios: []loadtest.Ratios{}}
	for _, r := range results[1:] {
		out.Ratios = append(out.Ratios, loadtest.Compare(results[0], r))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// writeLoadtestTable writes the report: a column per target, a row per
// figure, and a column per other target with its ratio to the first.
func writeLoadtestTable(w io.Writer, cfg loadtest.Config, results []*loadtest.Result) error {
	conns := "one connection per member"
	if cfg.SharedConnections > 0 {
		conns = fmt.Sprintf("%d shared connections per address", cfg.SharedConnections)
	}
	ref := results[0]
	fmt.Fprintf(w, "load: %d groups x %d members (%d), %d topics, %d partitions per group, %s, heartbeat %v, commit %v, steady %v, session %v, %s\n\n",
		cfg.Groups, cfg.Members, cfg.TotalMembers(), cfg.Topics, ref.Partitions, cfg.Protocol, cfg.Heartbeat, cfg.Commit, cfg.Duration, cfg.SessionTimeout, conns)

	ratios := make([]loadtest.Ratios, len(results)-1)
	for i, r := range results[1:] {
		ratios[i] = loadtest.Compare(ref, r)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name string, cell func(*loadtest.Result) string, ratio func(loadtest.Ratios) *float64) {
		cells := []string{name}
		for _, r := range results {
			cells = append(cells, cell(r))
		}
		for _, rt := range ratios {
			s := ""
			if ratio != nil {
				s = "-"
				if v := ratio(rt); v != nil {
					s = fmt.Sprintf("%.2fx", *v)
				}
			}
			cells = append(cells, s)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	header := []string{"target"}
	for _, r := range results {
		header = append(header, termtext.Escape(r.Target))
	}
	for _, rt := range ratios {
		header = append(header, termtext.Escape(rt.Target)+"/"+termtext.Escape(rt.Reference))
	}
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	steady := func(f func(*loadtest.Result) string) func(*loadtest.Result) string {
		return func(r *loadtest.Result) string {
			if !r.Stable {
				return "-"
			}
			return f(r)
		}
	}
	proc := func(f func(*loadtest.Process) string) func(*loadtest.Result) string {
		return func(r *loadtest.Result) string {
			if r.Process == nil {
				return "-"
			}
			return f(r.Process)
		}
	}
	row("address", func(r *loadtest.Result) string { return termtext.Escape(r.Address) }, nil)
	row("connect", func(r *loadtest.Result) string { return roundDuration(r.Connect) }, nil)
	row("join-to-stable", func(r *loadtest.Result) string {
		if !r.Stable {
			return fmt.Sprintf("NOT STABLE (%d groups)", r.UnstableGroups)
		}
		return roundDuration(r.JoinToStable)
	}, func(rt loadtest.Ratios) *float64 { return rt.JoinToStable })
	latency := func(name string, l func(*loadtest.Result) loadtest.Latency, ratio func(loadtest.Ratios) *float64) {
		row(name+" p50", steady(func(r *loadtest.Result) string { return roundDuration(l(r).P50) }), nil)
		row(name+" p99", steady(func(r *loadtest.Result) string { return roundDuration(l(r).P99) }), ratio)
		row(name+" max", steady(func(r *loadtest.Result) string { return roundDuration(l(r).Max) }), nil)
		row(name+"s measured", steady(func(r *loadtest.Result) string { return fmt.Sprint(l(r).Count) }), nil)
	}
	latency("heartbeat", func(r *loadtest.Result) loadtest.Latency { return r.Heartbeat }, func(rt loadtest.Ratios) *float64 { return rt.HeartbeatP99 })
	latency("commit", func(r *loadtest.Result) loadtest.Latency { return r.Commit }, func(rt loadtest.Ratios) *float64 { return rt.CommitP99 })
	perSec := func(v func(*loadtest.Result) float64) func(*loadtest.Result) string {
		return steady(func(r *loadtest.Result) string { return fmt.Sprintf("%.1f", v(r)) })
	}
	row("heartbeats/s offered", perSec(func(r *loadtest.Result) float64 { return r.HeartbeatsOfferedPerSec }), nil)
	row("heartbeats/s answered", perSec(func(r *loadtest.Result) float64 { return r.HeartbeatsAnsweredPerSec }), nil)
	row("commits/s offered", perSec(func(r *loadtest.Result) float64 { return r.CommitsOfferedPerSec }), nil)
	row("commits/s answered", perSec(func(r *loadtest.Result) float64 { return r.CommitsAnsweredPerSec }), nil)
	row("joins in steady phase", steady(func(r *loadtest.Result) string { return fmt.Sprint(r.SteadyJoins) }), nil)
	row("KIP-429 revocations", func(r *loadtest.Result) string { return fmt.Sprint(r.Revocations) }, nil)
	row("assignment valid", steady(func(r *loadtest.Result) string {
		s := fmt.Sprintf("%d/%d groups", r.Assignment.Valid, r.Assignment.Groups)
		if a := r.AssignmentAtEnd; a != nil && (a.Valid != r.Assignment.Valid || a.Groups != r.Assignment.Groups) {
			s += fmt.Sprintf(", %d/%d at the end", a.Valid, a.Groups)
		}
		return s
	}), nil)
	row("CPU (whole run)", proc(func(p *loadtest.Process) string { return fmt.Sprintf("%.2fs", p.CPUSeconds) }), nil)
	row("CPU (steady phase)", steady(proc(func(p *loadtest.Process) string { return fmt.Sprintf("%.2fs", p.SteadyCPUSeconds) })), nil)
	row("CPU per heartbeat", steady(proc(func(p *loadtest.Process) string { return fmt.Sprintf("%.1fµs", p.CPUPerHeartbeat) })),
		func(rt loadtest.Ratios) *float64 { return rt.CPUPerHeartbeat })
	row("peak RSS", proc(func(p *loadtest.Process) string { return mib(p.PeakRSS) }), nil)
	row("RSS per 1000 members", proc(func(p *loadtest.Process) string { return mib(p.RSSPer1000Members) }),
		func(rt loadtest.Ratios) *float64 { return rt.RSSPer1000Members })
	row("PSS per 1000 members", proc(func(p *loadtest.Process) string {
		if p.PSSPer1000Members == 0 {
			return "n/a" // a kernel without smaps_rollup
		}
		return mib(p.PSSPer1000Members)
	}),
		func(rt loadtest.Ratios) *float64 { return rt.PSSPer1000Members })
	row("processes (peak)", proc(func(p *loadtest.Process) string { return fmt.Sprint(p.PeakProcesses) }), nil)
	row("generator CPU per heartbeat", steady(func(r *loadtest.Result) string {
		return fmt.Sprintf("%.1fµs", r.GeneratorCPUPerHeartbeat)
	}), nil)
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nerror codes answered (until the members stop; MEMBER_ID_REQUIRED and REBALANCE_IN_PROGRESS are groups forming):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range results {
		if len(r.Errors) == 0 {
			fmt.Fprintf(tw, "  %s\tnone\t\t\n", termtext.Escape(r.Target))
		}
		for _, api := range slices.Sorted(maps.Keys(r.Errors)) {
			for _, code := range slices.Sorted(maps.Keys(r.Errors[api])) {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\n", termtext.Escape(r.Target), api, termtext.Escape(code), r.Errors[api][code])
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	var notes []string
	for _, r := range results {
		name := termtext.Escape(r.Target)
		if r.Process == nil {
			notes = append(notes, fmt.Sprintf("%s: no --pid, so no CPU or memory figures", name))
		}
		if p := r.Process; p != nil && p.SampleError != "" {
			notes = append(notes, fmt.Sprintf("%s: sampling: %s", name, termtext.Escape(p.SampleError)))
		}
		for _, u := range r.Unstable {
			notes = append(notes, fmt.Sprintf("%s: not stable: %s", name, termtext.Escape(u)))
		}
		for _, m := range []struct {
			api string
			l   loadtest.Latency
		}{{"heartbeat", r.Heartbeat}, {"commit", r.Commit}} {
			if r.Stable && m.l.Count > 0 && m.l.Count < fewSamples {
				notes = append(notes, fmt.Sprintf("%s: %s p99 rests on %d round trips: it is close to their maximum, and a ratio of it is noisy", name, m.api, m.l.Count))
			}
		}
		for _, a := range []*loadtest.AssignmentCheck{&r.Assignment, r.AssignmentAtEnd} {
			if a != nil {
				for _, p := range a.Problems {
					notes = append(notes, fmt.Sprintf("%s: assignment: %s", name, termtext.Escape(p)))
				}
			}
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "\nnotes:")
		for _, n := range slices.Compact(notes) {
			fmt.Fprintln(w, "  "+n)
		}
	}
	return nil
}

// fewSamples is the count of round trips below which the table warns that
// a p99 is little more than the slowest few.
const fewSamples = 1000

// roundDuration shows a duration to three significant figures or so.
func roundDuration(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

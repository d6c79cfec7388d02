package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/wasmassign/wasmassign/internal/termtext"
)

// inspection is the JSON shape of `inspect --format json`.
type inspection struct {
	ABIVersion int32          `json:"abi_version"`
	Assignors  []assignorJSON `json:"assignors"`
	Imports    []string       `json:"imports"`
	Exports    []string       `json:"exports"`
	SizeBytes  int            `json:"size_bytes"`
	CompileMS  float64        `json:"compile_ms"`
}

type assignorJSON struct {
	Name               string   `json:"name"`
	Version            string   `json:"version"`
	Protocols          []string `json:"protocols"`
	RebalanceProtocols []string `json:"rebalance_protocols"`
	MayLeaveUnassigned bool     `json:"may_leave_unassigned"`
	Description        string   `json:"description"`
}

func inspect(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var (
		format string
		lim    limitFlags
	)
	fs.StringVar(&format, "format", "table", "output format: json or table")
	lim.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if format != "json" && format != "table" {
		return usagef("--format: %q is not json or table", format)
	}
	if fs.NArg() != 1 {
		return usagef("want exactly one FILE.wasm, got %d arguments", fs.NArg())
	}
	h, err := lim.host(ctx, e)
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	p, err := h.LoadFile(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	info := p.Info()
	out := inspection{
		ABIVersion: info.ABIVersion,
		Imports:    nonNil(info.Imports),
		Exports:    nonNil(info.Exports),
		SizeBytes:  info.SizeBytes,
		CompileMS:  float64(info.CompileTime.Microseconds()) / 1000,
	}
	for _, a := range info.Assignors {
		out.Assignors = append(out.Assignors, assignorJSON{
			Name: a.Name, Version: a.Version, Protocols: a.Protocols,
			RebalanceProtocols: a.Modes.Strings(), MayLeaveUnassigned: a.MayLeaveUnassigned,
			Description: a.Description,
		})
	}
	if format == "json" {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	// The table is for a terminal: every text the module supplied (import
	// and export names, and what it describes) is escaped.
	tw := tabwriter.NewWriter(e.stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintf(tw, "file\t%s\n", termtext.Escape(fs.Arg(0)))
	fmt.Fprintf(tw, "abi version\t%d\n", out.ABIVersion)
	fmt.Fprintf(tw, "size\t%d bytes\n", out.SizeBytes)
	fmt.Fprintf(tw, "compile time\t%.1f ms\n", out.CompileMS)
	fmt.Fprintf(tw, "imports\t%s\n", strings.Join(termtext.EscapeAll(out.Imports), ", "))
	fmt.Fprintf(tw, "exports\t%s\n", strings.Join(termtext.EscapeAll(out.Exports), ", "))
	tw.Flush()
	fmt.Fprintln(e.stdout)
	tw = tabwriter.NewWriter(e.stdout, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "ASSIGNOR\tVERSION\tPROTOCOLS\tMODES\tDESCRIPTION")
	for _, a := range out.Assignors {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", termtext.Escape(a.Name), termtext.Escape(a.Version),
			strings.Join(termtext.EscapeAll(a.Protocols), ","), strings.Join(a.RebalanceProtocols, ","), termtext.Escape(a.Description))
	}
	return tw.Flush()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/wasmassign/wasmassign/coordinator/handover"
	"github.com/wasmassign/wasmassign/internal/picture"
	"github.com/wasmassign/wasmassign/internal/scenario"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

func simulate(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var (
		file, assignorName, dir, format string
		files                           stringList
		lim                             limitFlags
	)
	fs.StringVar(&file, "scenario", "", "scenario file (JSON; required)")
	fs.StringVar(&assignorName, "assignor", "", "assignor to run (default: the scenario's, else the one serving its protocol)")
	fs.StringVar(&dir, "plugin-dir", "", "directory of extra *.wasm plugins")
	fs.Var(&files, "plugin", "extra plugin file (repeatable)")
	fs.StringVar(&format, "format", "json", "output format: json, table or svg")
	lim.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if file == "" {
		return usagef("--scenario is required")
	}
	if format != "json" && format != "table" && format != "svg" {
		return usagef("--format: %q is not json, table or svg", format)
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	sc, err := scenario.Load(file)
	if err != nil {
		return usageError{err}
	}

	h, reg, err := lim.loadRegistry(ctx, e, dir, files)
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	a, req, err := scenarioRequest(reg, sc, file, assignorName)
	if err != nil {
		return err
	}
	for _, w := range req.warnings {
		fmt.Fprintf(e.stderr, "warning: %s: %s\n", file, w)
	}
	target, err := a.Assign(ctx, req.Request)
	if err != nil {
		return err
	}
	assignment, _ := handover.Withhold(req.Request, target)
	if format == "svg" {
		if assignment == nil {
			assignment = target
		}
		title := fmt.Sprintf("group %s, generation %d, assignor %s (%s)", req.GroupID, req.Generation, a.Info.Name, req.RebalanceProtocol)
		return picture.WriteSVG(e.stdout, req.Request, assignment, picture.Options{Title: title, Target: target})
	}
	out := scenario.NewOutput(req.Request, a.Info.Name, target, assignment)
	if format == "table" {
		return out.WriteTable(e.stdout)
	}
	return out.WriteJSON(e.stdout)
}

// scenarioReq is a scenario's request, with the warnings building it gave.
type scenarioReq struct {
	*abi.Request
	warnings []string
}

// scenarioRequest chooses the scenario's assignor, settles its protocol and
// rebalance protocol, and builds the request, as simulate and bench both do.
func scenarioRequest(reg *wasmruntime.Registry, sc *scenario.Scenario, file, assignorName string) (*wasmruntime.Assignor, scenarioReq, error) {
	a, err := chooseAssignor(reg, sc, assignorName)
	if err != nil {
		return nil, scenarioReq{}, usageError{err}
	}
	sc.Assignor = a.Info.Name
	if sc.Protocol == "" {
		sc.Protocol = a.Info.Protocols[0]
	}
	req, warnings, err := sc.Request()
	if err != nil {
		return nil, scenarioReq{}, usageError{fmt.Errorf("%s: %w", file, err)}
	}
	req.RebalanceProtocol = sc.ResolvedRebalanceProtocol()
	return a, scenarioReq{Request: req, warnings: warnings}, nil
}

// chooseAssignor applies the precedence: --assignor, the scenario's
// assignor, then the assignor that serves the scenario's protocol.
func chooseAssignor(reg *wasmruntime.Registry, sc *scenario.Scenario, flagName string) (*wasmruntime.Assignor, error) {
	name := flagName
	if name == "" {
		name = sc.Assignor
	}
	if name != "" {
		a, ok := reg.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("assignor %q: no loaded plugin provides it (have %s)", name, assignorNames(reg))
		}
		return a, nil
	}
	if sc.Protocol == "" {
		return nil, fmt.Errorf("the scenario names neither a protocol nor an assignor, and --assignor is not set")
	}
	a, ok := reg.ForProtocol(sc.Protocol)
	if !ok {
		return nil, fmt.Errorf("protocol %q: no loaded assignor serves it (have %s)", sc.Protocol, assignorNames(reg))
	}
	return a, nil
}

func assignorNames(reg *wasmruntime.Registry) string {
	s := ""
	for i, a := range reg.Assignors() {
		if i > 0 {
			s += ", "
		}
		s += a.Info.Name
	}
	return s
}

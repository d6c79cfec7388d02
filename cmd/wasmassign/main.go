// Command wasmassign runs Kafka partition assignors that are sandboxed
// WebAssembly plugins.
//
//	wasmassign serve    [--config FILE]
//	wasmassign groups   [--admin ADDR] [--token T] [GROUP]
//	wasmassign plugins  [--admin ADDR] [--token T]
//	wasmassign simulate --scenario FILE [--assignor NAME] [--plugin-dir DIR] [--plugin FILE] [--format json|table|svg]
//	wasmassign inspect  [--format json|table] FILE.wasm
//	wasmassign new      --lang go|rust|c|assemblyscript DIR
//	wasmassign loadtest --target [NAME=]HOST:PORT|kfake ... [--groups N] [--members N] [--pid NAME=PID] [--json]
//
// Exit status: 0 on success, 1 when a plugin fails (the message names the
// plugin and the typed error), 2 for bad usage or bad input (the message names
// the flag, file or field).
//
// The built-in plugins are embedded in the binary (see plugins/builtin), so no
// plugin directory is needed to use them.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/wasmassign/wasmassign/internal/loadtest"
	"github.com/wasmassign/wasmassign/internal/termtext"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
)

// usageError marks a problem with the command line or its input files, which
// exits 2 rather than 1.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

const usage = `usage: wasmassign <command> [flags]

commands:
  serve      run the gateway: a Kafka proxy whose consumer groups are assigned by wasm plugins
  groups     list a running gateway's groups, or show one: members, racks, assignment
  plugins    list a running gateway's plugins: status, ABI, assignors, checksum
  cluster    show a gateway cluster: its gateways, the shards and groups each owns, when ownership moved
  simulate   run an assignor over a scenario file and print the assignment
  inspect    show what a plugin module provides and imports
  bench      time an assignor against kgo's native balancer on the same input
  new        write a plugin project (go, rust, c or assemblyscript) that builds with make
  loadtest   play thousands of consumer-group members against a gateway or cluster, to size it
  version    print the ABI version this binary speaks

Run 'wasmassign <command> -h' for a command's flags.
`

func main() {
	wasmruntime.RunWorkerIfRequested() // a plugin worker serves its parent here and never returns
	loadtest.ServeKfakeIfRequested()   // the kfake target of a load run serves here and never returns
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: tests call it with their own writers.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	env := &env{stdout: stdout, stderr: stderr,
		log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, env, args[1:])
	case "groups":
		err = groupsCmd(ctx, env, args[1:])
	case "plugins":
		err = pluginsCmd(ctx, env, args[1:])
	case "cluster":
		err = clusterCmd(ctx, env, args[1:])
	case "simulate":
		err = simulate(ctx, env, args[1:])
	case "inspect":
		err = inspect(ctx, env, args[1:])
	case "bench":
		err = benchCmd(ctx, env, args[1:])
	case "new":
		err = newCmd(ctx, env, args[1:])
	case "loadtest":
		err = loadtestCmd(ctx, env, args[1:])
	case "version":
		fmt.Fprintln(stdout, "wasmassign ABI version 1")
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "wasmassign: unknown command %q\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errHelp):
		return 0
	case errors.As(err, new(usageError)):
		printError(stderr, args[0], err)
		return 2
	default:
		printError(stderr, args[0], err)
		return 1
	}
}

// printError writes a command's error to stderr, a line for each line of
// it (errors.Join puts one error a line), each escaped: a plugin's error
// carries its own text, its error message or its last log lines.
func printError(stderr io.Writer, cmd string, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(stderr, "wasmassign %s: %s\n", cmd, termtext.Escape(line))
	}
}

// env is what a command needs from the process.
type env struct {
	stdout, stderr io.Writer
	log            *slog.Logger
}

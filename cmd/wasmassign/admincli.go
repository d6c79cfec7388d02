package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wasmassign/wasmassign/internal/admin"
	"github.com/wasmassign/wasmassign/internal/scenario"
	"github.com/wasmassign/wasmassign/internal/termtext"
)

// adminFlags are the flags of the commands that read a running daemon's
// admin API.
type adminFlags struct {
	addr, token string
}

func (a *adminFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.addr, "admin", "127.0.0.1:9644", "the daemon's admin_listen address")
	fs.StringVar(&a.token, "token", os.Getenv("WASMASSIGN_ADMIN_TOKEN"), "bearer token, when the admin API has one (default $WASMASSIGN_ADMIN_TOKEN)")
}

// get fetches one admin route into v. A refused connection or a non-200
// answer is an error naming the address and the route.
func (a *adminFlags) get(ctx context.Context, route string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := "http://" + a.addr + route
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return usagef("--admin %q: %v", a.addr, err)
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("admin API at %s: %w (is `wasmassign serve` running with admin_listen set?)", a.addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("admin API at %s: GET %s: %s: %s", a.addr, route, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("admin API at %s: GET %s: %w", a.addr, route, err)
	}
	return nil
}

// groupsCmd lists the managed groups, or shows one group's members and
// assignment.
func groupsCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("groups", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var a adminFlags
	a.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	switch fs.NArg() {
	case 0:
		var groups []admin.GroupSummary
		if err := a.get(ctx, "/v1/groups", &groups); err != nil {
			return err
		}
		slices.SortFunc(groups, func(x, y admin.GroupSummary) int { return strings.Compare(x.Group, y.Group) })
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tSTATE\tGENERATION\tMEMBERS\tASSIGNOR")
		for _, g := range groups {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", termtext.Escape(g.Group), g.State, g.Generation, g.Members, termtext.Escape(dash(g.Assignor)))
		}
		return tw.Flush()
	case 1:
		var g admin.Group
		if err := a.get(ctx, "/v1/groups/"+url.PathEscape(fs.Arg(0)), &g); err != nil {
			return err
		}
		// Group, member and client ids and protocol names are the
		// clients' own text.
		fmt.Fprintf(e.stdout, "group %s: %s, generation %d, protocol %s, assignor %s (%s)\n",
			termtext.Escape(g.Group), g.State, g.Generation, termtext.Escape(dash(g.Protocol)), termtext.Escape(dash(g.Assignor)), g.RebalanceProtocol)
		if r := g.LastRebalance; r != nil {
			fmt.Fprintf(e.stdout, "last rebalance %s: %d ms, %d moved, %d withheld, fallback %v\n",
				r.At.Format(time.RFC3339), r.DurationMS, r.Moved, r.Withheld, r.Fallback)
		}
		fmt.Fprintln(e.stdout)
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "MEMBER\tINSTANCE\tCLIENT\tHOST\tRACK\tPARTITIONS\tASSIGNMENT")
		for _, m := range g.Members {
			inst := "-"
			if m.InstanceID != nil {
				inst = *m.InstanceID
			}
			n := 0
			for _, ps := range m.Assignment {
				n += len(ps)
			}
			cells := termtext.EscapeAll([]string{m.MemberID, inst, dash(m.ClientID), dash(m.Host), dash(m.Rack), strconv.Itoa(n), scenario.Compact(m.Assignment)})
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		return tw.Flush()
	}
	return usagef("groups: at most one group id, got %d arguments", fs.NArg())
}

// pluginsCmd lists the loaded plugin modules.
func pluginsCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("plugins", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var a adminFlags
	a.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("plugins: takes no arguments, got %q", fs.Args())
	}
	var plugins []admin.Plugin
	if err := a.get(ctx, "/v1/plugins", &plugins); err != nil {
		return err
	}
	var pool admin.Pool
	if err := a.get(ctx, "/v1/plugins/pool", &pool); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PLUGIN\tSTATUS\tABI\tASSIGNORS\tBUSY\tIDLE\tQUEUED\tSHA256\tFILE\tLAST ERROR")
	for _, p := range plugins {
		sum := p.SHA256
		if len(sum) > 12 {
			sum = sum[:12]
		}
		// Assignor names and errors are the plugins' own text.
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", termtext.Escape(p.Name), p.Status, p.ABIVersion,
			strings.Join(termtext.EscapeAll(p.Assignors), ","), p.Instances.Busy, p.Instances.Idle+p.Instances.Idling, p.Instances.Queued,
			dash(sum), termtext.Escape(p.File), dash(termtext.Escape(p.LastError)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	mean := 0.0
	if pool.Waits > 0 {
		mean = pool.WaitSeconds / float64(pool.Waits)
	}
	_, err := fmt.Fprintf(e.stdout, "\ninstances: %d busy, %d idle, %d starting, of at most %d; %d calls queued\nqueue: %d calls waited, mean %s, longest %s; %d overloads\n",
		pool.Busy, pool.Idle+pool.Idling, pool.Starting, pool.Size, pool.Queued, pool.Waits,
		seconds(mean), seconds(pool.WaitMaxSeconds), pool.Overloads)
	return err
}

// seconds renders a duration given in seconds, to the millisecond.
func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

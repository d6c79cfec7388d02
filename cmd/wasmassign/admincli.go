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
	"github.com/wasmassign/wasmassign/internal/cluster"
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

// noArgAdminCmd parses the flags of an admin command that takes no
// arguments.
func noArgAdminCmd(e *env, name string, args []string) (adminFlags, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var a adminFlags
	a.register(fs)
	if err := parse(fs, args); err != nil {
		return a, err
	}
	if fs.NArg() > 0 {
		return a, usagef("%s: takes no arguments, got %q", name, fs.Args())
	}
	return a, nil
}

// pluginsCmd lists the loaded plugin modules.
func pluginsCmd(ctx context.Context, e *env, args []string) error {
	a, err := noArgAdminCmd(e, "plugins", args)
	if err != nil {
		return err
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
	_, err = fmt.Fprintf(e.stdout, "\ninstances: %d busy, %d idle, %d starting, of at most %d; %d calls queued\nqueue: %d calls waited, mean %s, longest %s; %d overloads\n",
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

// clusterCmd shows a gateway cluster: its gateways and their shards, as
// the gateway at --admin sees them, then each gateway's groups, read from
// its own admin API (the address it published; a gateway that cannot be
// read is named with the reason, and the rest are still shown).
func clusterCmd(ctx context.Context, e *env, args []string) error {
	a, err := noArgAdminCmd(e, "cluster", args)
	if err != nil {
		return err
	}
	var c admin.Cluster
	if err := a.get(ctx, "/v1/cluster", &c); err != nil {
		return err
	}
	when := func(t *time.Time) string {
		if t == nil {
			return "never"
		}
		return t.Format(time.RFC3339)
	}
	fmt.Fprintf(e.stdout, "cluster %s, generation %d, layout changed %s (seen from %s)\n\n",
		termtext.Escape(c.Name), c.Generation, when(c.LayoutChangedAt), termtext.Escape(c.Gateway))
	views := map[string]admin.Cluster{c.Gateway: c}
	var unread []string
	for _, g := range c.Gateways {
		if _, ok := views[g.ID]; ok {
			continue
		}
		if g.Admin == "" {
			unread = append(unread, fmt.Sprintf("%s: publishes no admin API", g.ID))
			continue
		}
		peer := adminFlags{addr: g.Admin, token: a.token}
		var v admin.Cluster
		if err := peer.get(ctx, "/v1/cluster", &v); err != nil {
			unread = append(unread, fmt.Sprintf("%s: %v", g.ID, err))
			continue
		}
		views[g.ID] = v
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GATEWAY\tADDRESS\tADMIN\tSHARDS\tSERVING\tGROUPS\tMOVED")
	for _, g := range c.Gateways {
		serving, groups, moved := "?", "?", "?"
		if v, ok := views[g.ID]; ok {
			n := 0
			for _, s := range v.Shards {
				if s.State == cluster.ShardServing {
					n++
				}
			}
			serving, groups, moved = strconv.Itoa(n), strconv.Itoa(len(v.Groups)), when(v.MovedAt)
			if v.Leaving {
				moved += " (leaving)"
			}
		}
		shards := make([]string, len(g.Shards))
		for i, s := range g.Shards {
			shards[i] = strconv.Itoa(s)
		}
		if g.Refused != "" {
			shards = []string{"refused: " + g.Refused}
		}
		cells := termtext.EscapeAll([]string{g.ID, g.Address, dash(g.Admin), dash(strings.Join(shards, ",")), serving, groups, moved})
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout)
	tw = tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSHARD\tGATEWAY")
	for _, g := range c.Gateways {
		for _, grp := range views[g.ID].Groups {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", termtext.Escape(grp.Group), grp.Shard, termtext.Escape(g.ID))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, u := range unread {
		fmt.Fprintf(e.stderr, "wasmassign cluster: not read: %s\n", termtext.Escape(u))
	}
	return nil
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/loadtest"
	"github.com/wasmassign/wasmassign/internal/testutil"
)

// TestScale_HundredsOfGroupsAtOnceKeepTheirAssignor starts a few hundred
// groups through the daemon at once, a connection per member, for each
// built-in protocol in turn: every group is formed by its configured
// assignor with a valid assignment, with no fallback, no plugin failure or
// timeout, no overload and no assignment timeout, and the daemon never
// runs more plugin workers than configured. It is the burst a restart or a
// failover makes, sized to fit CI; make bench-loadtest runs it at full
// size.
func TestScale_HundredsOfGroupsAtOnceKeepTheirAssignor(t *testing.T) {
	const workers = 2
	cluster := eventsCluster(t, 1, 4)
	cfg := testutil.GatewayConfig{
		Brokers: cluster.ListenAddrs(),
		Groups:  []testutil.GroupRule{{Match: "*"}},
		Extra:   "[plugins]\nworkers = " + strconv.Itoa(workers) + "\n[log]\nlevel = \"warn\"\n",
	}.String()
	d := startDaemon(t, t.TempDir(), cfg)
	for _, protocol := range []string{loadtest.ProtocolRange, loadtest.ProtocolCooperativeSticky} {
		t.Run(protocol, func(t *testing.T) {
			ctx := testCtx(t, 3*time.Minute)
			lc := loadtest.DefaultConfig()
			lc.Groups, lc.Members, lc.Topics, lc.Partitions = 300, 3, 10, 8
			lc.Protocol = protocol
			lc.GroupPrefix = "scale-" + protocol + "-"
			lc.Heartbeat, lc.Commit, lc.Duration = 500*time.Millisecond, 2*time.Second, 3*time.Second
			lc.SessionTimeout = 30 * time.Second
			res, err := loadtest.Run(ctx, lc, loadtest.Target{Name: "gateway", Addr: d.bootstrap, PID: d.cmd.Process.Pid}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Stable || res.Assignment.Valid != lc.Groups {
				t.Fatalf("stable %v, %d of %d groups with a valid assignment: %v %v", res.Stable, res.Assignment.Valid, lc.Groups, res.Unstable, res.Assignment.Problems)
			}
			t.Logf("%s: join-to-stable %v, heartbeat p99 %v, commit p99 %v, peak %d processes", protocol, res.JoinToStable, res.Heartbeat.P99, res.Commit.P99, res.Process.PeakProcesses)
			if p := res.Process; p == nil || p.PeakProcesses > 1+workers {
				t.Errorf("process figures %+v: want at most the daemon and its %d workers", p, workers)
			}
			groups := adminGroups(ctx, t, d)
			seen := 0
			for _, g := range groups {
				if !strings.HasPrefix(g.Group, lc.GroupPrefix) {
					continue
				}
				seen++
				// The run's members have left: the group is Empty and
				// names the assignor of its last assignment.
				if g.Assignor != protocol {
					t.Errorf("group %s (%s) was assigned by %q, want %q", g.Group, g.State, g.Assignor, protocol)
				}
			}
			if seen != lc.Groups {
				t.Errorf("the admin API lists %d of the %d groups", seen, lc.Groups)
			}
			body := d.metrics(t)
			for _, series := range []string{"wasmassign_fallbacks_total", "wasmassign_plugin_failures_total", "wasmassign_plugin_overloads_total", "wasmassign_assignment_timeouts_total"} {
				if n := metricSum(body, series); n != 0 {
					t.Errorf("%s = %v, want 0", series, n)
				}
			}
		})
	}
}

// adminGroups fetches /v1/groups.
func adminGroups(ctx context.Context, t *testing.T, d *daemon) []adminGroupSummary {
	t.Helper()
	groups, err := fetchAdminGroups(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	return groups
}

// adminGroupSummary is one group of /v1/groups.
type adminGroupSummary struct {
	Group      string `json:"group"`
	State      string `json:"state"`
	Generation int32  `json:"generation"`
	Assignor   string `json:"assignor"`
}

// fetchAdminGroups fetches d's /v1/groups.
func fetchAdminGroups(ctx context.Context, d *daemon) ([]adminGroupSummary, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.admin+"/v1/groups", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []adminGroupSummary
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("/v1/groups of %s: %w", d.admin, err)
	}
	return out, nil
}

// metricSum adds up every series of a metric on a metrics page: 0 when it
// has none.
func metricSum(body, name string) float64 {
	sum := 0.0
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		sum += v
	}
	return sum
}

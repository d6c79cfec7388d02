package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/loadtest"
	"github.com/wasmassign/wasmassign/internal/testutil"
)

// smallLoad is a load that settles and measures in a few seconds.
var smallLoad = []string{
	"--groups", "3", "--members", "3", "--topics", "2", "--partitions", "4",
	"--heartbeat", "100ms", "--commit", "250ms", "--duration", "1s",
	"--session-timeout", "2s", "--rebalance-timeout", "5s", "--stable-timeout", "15s",
}

// loadtestReport is the part of the --json report the tests read.
type loadtestReport struct {
	Load struct {
		Groups int `json:"groups"`
	} `json:"load"`
	Targets []struct {
		Target             string `json:"target"`
		Stable             bool   `json:"stable"`
		JoinToStable       int64  `json:"join_to_stable_ns"`
		HeartbeatsOffered  int64  `json:"heartbeats_offered"`
		HeartbeatsAnswered int64  `json:"heartbeats_answered"`
		CommitsAnswered    int64  `json:"commits_answered"`
		Heartbeat          struct {
			P50 int64 `json:"p50_ns"`
			P99 int64 `json:"p99_ns"`
		} `json:"heartbeat"`
		Assignment struct {
			Groups, Valid int
		} `json:"assignment"`
		AssignmentAtEnd *struct {
			Groups, Valid int
		} `json:"assignment_at_end"`
		Errors  map[string]map[string]int64 `json:"errors"`
		Process *struct {
			PID int `json:"pid"`
		} `json:"process"`
	} `json:"targets"`
	Ratios []struct {
		Target       string   `json:"target"`
		Reference    string   `json:"reference"`
		JoinToStable *float64 `json:"join_to_stable"`
		HeartbeatP99 *float64 `json:"heartbeat_p99"`
	} `json:"ratios"`
}

func runLoadtest(t *testing.T, args ...string) loadtestReport {
	t.Helper()
	code, stdout, stderr := wasmassign(t, append(append([]string{"loadtest", "--json"}, smallLoad...), args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, stdout)
	}
	var rep loadtestReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("the report is not JSON: %v\n%s", err, stdout)
	}
	return rep
}

// checkTargets checks what every target of a report must show: stable,
// heartbeats answered, every group's assignment valid, only the error
// codes of groups forming.
func checkTargets(t *testing.T, rep loadtestReport, names ...string) {
	t.Helper()
	if len(rep.Targets) != len(names) {
		t.Fatalf("%d targets reported, want %v", len(rep.Targets), names)
	}
	for i, tr := range rep.Targets {
		if tr.Target != names[i] {
			t.Errorf("target %d is %q, want %q", i, tr.Target, names[i])
		}
		if !tr.Stable || tr.JoinToStable <= 0 {
			t.Errorf("%s: stable %v, join-to-stable %dns", tr.Target, tr.Stable, tr.JoinToStable)
		}
		if tr.HeartbeatsAnswered == 0 || float64(tr.HeartbeatsAnswered) < 0.9*float64(tr.HeartbeatsOffered) || tr.CommitsAnswered == 0 {
			t.Errorf("%s: %d of %d heartbeats answered, %d commits", tr.Target, tr.HeartbeatsAnswered, tr.HeartbeatsOffered, tr.CommitsAnswered)
		}
		if !(tr.Heartbeat.P50 > 0 && tr.Heartbeat.P99 >= tr.Heartbeat.P50) {
			t.Errorf("%s: heartbeat p50 %d, p99 %d", tr.Target, tr.Heartbeat.P50, tr.Heartbeat.P99)
		}
		g := rep.Load.Groups
		if tr.Assignment.Groups != g || tr.Assignment.Valid != g || tr.AssignmentAtEnd == nil || tr.AssignmentAtEnd.Valid != g {
			t.Errorf("%s: assignment checks %+v, at the end %+v; want %d valid groups", tr.Target, tr.Assignment, tr.AssignmentAtEnd, g)
		}
		for api, codes := range tr.Errors {
			for code := range codes {
				if code != "MEMBER_ID_REQUIRED" && code != "REBALANCE_IN_PROGRESS" {
					t.Errorf("%s: %s answered %s %d times", tr.Target, api, code, codes[code])
				}
			}
		}
	}
}

// TestLoadtest_TableShowsEachTargetAndItsRatio renders a report of three
// targets: the reference, an embedded kfake, and one that never became
// stable, whose name holds an escape sequence.
func TestLoadtest_TableShowsEachTargetAndItsRatio(t *testing.T) {
	cfg := loadtest.DefaultConfig()
	lat := func(p50, p99 time.Duration) loadtest.Latency {
		return loadtest.Latency{Count: 100, P50: p50, P99: p99, Max: 2 * p99}
	}
	gw := &loadtest.Result{Target: "gateway", Address: "127.0.0.1:9092", Groups: 100, Members: 1000, Partitions: 48, Stable: true,
		JoinToStable: 2 * time.Second, Heartbeat: lat(200*time.Microsecond, time.Millisecond), Commit: lat(time.Millisecond, 4*time.Millisecond),
		HeartbeatsOfferedPerSec: 1000, HeartbeatsAnsweredPerSec: 999, Assignment: loadtest.AssignmentCheck{Groups: 100, Valid: 100},
		Errors:                   map[string]map[string]int64{"JoinGroup": {"MEMBER_ID_REQUIRED": 1000}},
		Process:                  &loadtest.Process{PID: 42, CPUSeconds: 12, SteadyCPUSeconds: 3, CPUPerHeartbeat: 100, PeakRSS: 200 << 20, RSSPer1000Members: 200 << 20, PeakPSS: 120 << 20, PSSPer1000Members: 120 << 20, PeakProcesses: 5},
		GeneratorCPUPerHeartbeat: 40}
	kf := &loadtest.Result{Target: "kfake", Address: "kfake (own process)", Embedded: true, Groups: 100, Members: 1000, Stable: true,
		JoinToStable: time.Second, Heartbeat: lat(100*time.Microsecond, 3*time.Millisecond), Commit: lat(time.Millisecond, 2*time.Millisecond),
		Assignment: loadtest.AssignmentCheck{Groups: 100, Valid: 100},
		Process:    &loadtest.Process{PID: 43, CPUPerHeartbeat: 150, PeakRSS: 100 << 20, RSSPer1000Members: 100 << 20, PeakPSS: 100 << 20, PSSPer1000Members: 100 << 20, PeakProcesses: 1}}
	bad := &loadtest.Result{Target: "bad\x1b[2J", Address: "h:1", Groups: 100, UnstableGroups: 7, Unstable: []string{"loadtest-x-3: 1 of 10 members synced"}}
	var b strings.Builder
	if err := writeLoadtestTable(&b, cfg, []*loadtest.Result{gw, kf, bad}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"kfake/gateway", "join-to-stable", "0.50x", // kfake joined in half the time
		"heartbeat p99", "3.00x", "commit p99", "CPU per heartbeat", "1.50x", "RSS per 1000 members",
		"PSS per 1000 members", "0.83x", // kfake over the gateway, whose processes share pages
		"NOT STABLE (7 groups)", `bad\x1b[2J`, "100/100 groups", "200.0 MiB",
		"JoinGroup  MEMBER_ID_REQUIRED  1000",
		"not stable: loadtest-x-3: 1 of 10 members synced",
		"no --pid, so no CPU or memory figures",
		"commits measured", "gateway: commit p99 rests on 100 round trips",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("the table carries an escape sequence unescaped:\n%s", out)
	}
}

// gatewayLoadConfig fronts an embedded cluster holding the load's topics;
// every group is managed, joins complete at once.
var gatewayLoadConfig = testutil.GatewayConfig{
	EmbeddedBrokers: 1,
	EmbeddedTopics:  []string{"loadtest-0:4", "loadtest-1:4"},
	Groups:          []testutil.GroupRule{{Match: "*"}},
}.String()

// TestLoadtest_GatewayAgainstKfake runs the same load through the gateway
// and on a kfake process, in one invocation, then through the gateway
// again with every member on two shared connections, cooperatively.
func TestLoadtest_GatewayAgainstKfake(t *testing.T) {
	d := startServe(t, gatewayLoadConfig)
	t.Run("one connection per member", func(t *testing.T) {
		rep := runLoadtest(t, "--target", "gateway="+d.bootstrap, "--target", "kfake")
		checkTargets(t, rep, "gateway", "kfake")
		if rep.Targets[0].Process != nil || rep.Targets[1].Process == nil || rep.Targets[1].Process.PID == os.Getpid() {
			t.Errorf("process figures: the gateway's %+v (no --pid), kfake's %+v (its own process)", rep.Targets[0].Process, rep.Targets[1].Process)
		}
		if len(rep.Ratios) != 1 || rep.Ratios[0].Target != "kfake" || rep.Ratios[0].Reference != "gateway" ||
			rep.Ratios[0].JoinToStable == nil || rep.Ratios[0].HeartbeatP99 == nil {
			t.Errorf("ratios %+v, want kfake against gateway", rep.Ratios)
		}
	})
	t.Run("two shared connections, cooperative", func(t *testing.T) {
		rep := runLoadtest(t, "--target", "gateway="+d.bootstrap, "--shared-connections", "2", "--protocol", "cooperative-sticky")
		checkTargets(t, rep, "gateway")
	})
}

func TestLoadtest_BadFlagsNameTheFlag(t *testing.T) {
	cases := []struct {
		args []string
		flag string
	}{
		{[]string{"--target", "kfake", "--groups", "0"}, "--groups"},
		{[]string{"--target", "kfake", "--members", "-2"}, "--members"},
		{[]string{"--target", "kfake", "--partitions", "0"}, "--partitions"},
		{[]string{"--target", "kfake", "--partitions", "9999999999"}, "--partitions"},
		{[]string{"--target", "kfake", "--topics", "0"}, "--topics"},
		{[]string{"--target", "kfake", "--protocol", "sticky"}, "--protocol"},
		{[]string{"--target", "kfake", "--heartbeat", "45s"}, "--heartbeat"},
		{[]string{"--target", "kfake", "--heartbeat", "2s", "--session-timeout", "1s"}, "--heartbeat"},
		{[]string{"--target", "kfake", "--shared-connections", "-1"}, "--shared-connections"},
		{[]string{"--target", "kfake", "--duration", "0s"}, "--duration"},
		{[]string{}, "--target"},
		{[]string{"--target", "gateway"}, "--target"},
		{[]string{"--target", "gw=localhost"}, "--target"},
		{[]string{"--target", "gw=localhost:http"}, "--target"},
		{[]string{"--target", "a=h:1", "--target", "a=kfake"}, "--target"},
		{[]string{"--target", "kfake", "--pid", "kfake=1"}, "--pid"},
		{[]string{"--target", "gw=h:1", "--pid", "other=1"}, "--pid"},
		{[]string{"--target", "kfake", "--groups", "x"}, "-groups"},
	}
	for _, tc := range cases {
		code, _, stderr := wasmassign(t, append([]string{"loadtest"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.flag) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 naming %s", tc.args, code, stderr, tc.flag)
		}
	}
}

func TestLoadtest_UnreachableTargetFailsFast(t *testing.T) {
	start := time.Now()
	code, _, stderr := wasmassign(t, "loadtest", "--target", "kfake", "--target", "down=127.0.0.1:1", "--dial-timeout", "2s")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(stderr, "target down (127.0.0.1:1)") {
		t.Errorf("stderr does not name the target and its address: %s", stderr)
	}
	// The probe runs before any load, so kfake's run does not delay it.
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %v to fail", took)
	}
}

package loadtest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// smallConfig is a load that runs in a few seconds: 5 groups of 3
// members on 2 topics of 4 partitions, heartbeats every 100 ms, a 1.5 s
// steady phase.
func smallConfig(protocol string) Config {
	cfg := DefaultConfig()
	cfg.Groups, cfg.Members = 5, 3
	cfg.Topics, cfg.Partitions = 2, 4
	cfg.Heartbeat = 100 * time.Millisecond
	cfg.Commit = 250 * time.Millisecond
	cfg.Duration = 1500 * time.Millisecond
	cfg.SessionTimeout = 3 * time.Second
	cfg.RebalanceTimeout = 5 * time.Second
	cfg.StableTimeout = 15 * time.Second
	cfg.Protocol = protocol
	cfg.GroupPrefix = "lt-" + protocol + "-"
	return cfg
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// expectedCodes are the error codes a healthy run sees: the protocol's
// own round trips while groups form.
var expectedCodes = map[string]bool{"MEMBER_ID_REQUIRED": true, "REBALANCE_IN_PROGRESS": true}

// checkCovered checks, from the members' decoded assignments, that every
// group holds each partition exactly once.
func checkCovered(t *testing.T, cfg Config, groups [][][]kmsg.ConsumerMemberAssignmentTopic, members int) {
	t.Helper()
	if len(groups) != cfg.Groups {
		t.Fatalf("assignments of %d groups, want %d", len(groups), cfg.Groups)
	}
	for g, ms := range groups {
		if len(ms) != members {
			t.Errorf("group %d: %d members' assignments, want %d", g, len(ms), members)
		}
		held := map[string]int{}
		for _, a := range ms {
			for _, tp := range a {
				for _, p := range tp.Partitions {
					held[fmt.Sprintf("%s-%d", tp.Topic, p)]++
				}
			}
		}
		for topic := range cfg.Topics {
			for p := range cfg.Partitions {
				tp := fmt.Sprintf("%s%d-%d", cfg.TopicPrefix, topic, p)
				if held[tp] != 1 {
					t.Errorf("group %d: %s held by %d members, want 1", g, tp, held[tp])
				}
				delete(held, tp)
			}
		}
		if len(held) > 0 {
			t.Errorf("group %d: holds partitions that do not exist: %v", g, held)
		}
	}
}

func checkSteady(t *testing.T, cfg Config, res *Result) {
	t.Helper()
	if !res.Stable || res.JoinToStable <= 0 {
		t.Fatalf("stable %v after %v; unstable: %v", res.Stable, res.JoinToStable, res.Unstable)
	}
	// Each member heartbeats once per interval of the steady phase.
	want := float64(cfg.TotalMembers()) * res.Steady.Seconds() / cfg.Heartbeat.Seconds()
	if o := float64(res.HeartbeatsOffered); o < 0.8*want || o > 1.2*want {
		t.Errorf("%d heartbeats offered, want about %.0f", res.HeartbeatsOffered, want)
	}
	if res.HeartbeatsAnswered == 0 || float64(res.HeartbeatsAnswered) < 0.9*float64(res.HeartbeatsOffered) {
		t.Errorf("%d of %d heartbeats answered", res.HeartbeatsAnswered, res.HeartbeatsOffered)
	}
	if res.CommitsAnswered == 0 || float64(res.CommitsAnswered) < 0.8*float64(res.CommitsOffered) {
		t.Errorf("%d of %d commits answered", res.CommitsAnswered, res.CommitsOffered)
	}
	for name, l := range map[string]Latency{"heartbeat": res.Heartbeat, "commit": res.Commit} {
		if !(l.P50 > 0 && l.P99 >= l.P50 && l.Max >= l.P99) {
			t.Errorf("%s latency p50 %v, p99 %v, max %v: want 0 < p50 <= p99 <= max", name, l.P50, l.P99, l.Max)
		}
	}
	for api, codes := range res.Errors {
		for code, n := range codes {
			if !expectedCodes[code] {
				t.Errorf("%s answered %s %d times", api, code, n)
			}
		}
	}
	if n := res.Errors["JoinGroup"]["MEMBER_ID_REQUIRED"]; n < int64(cfg.TotalMembers()) {
		t.Errorf("MEMBER_ID_REQUIRED %d times, want once per member at least (%d): KIP-394's round trip", n, cfg.TotalMembers())
	}
	if res.Assignment.Valid != cfg.Groups || res.AssignmentAtEnd == nil || res.AssignmentAtEnd.Valid != cfg.Groups {
		t.Errorf("assignment checks: at stable %+v, at the end %+v", res.Assignment, res.AssignmentAtEnd)
	}
	if p := res.Process; p == nil || p.PID == os.Getpid() || p.PeakRSS <= 0 || p.PeakPSS <= 0 || p.PeakPSS > p.PeakRSS || p.PeakProcesses != 1 || p.CPUSeconds <= 0 {
		t.Errorf("process figures of the embedded kfake: %+v", p)
	}
}

func TestRun_EmbeddedKfakeFormsEveryGroupAndHeartbeats(t *testing.T) {
	for _, protocol := range []string{ProtocolRange, ProtocolCooperativeSticky} {
		t.Run(protocol, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cfg := smallConfig(protocol)
			res, err := Run(ctx, cfg, Target{Name: "kfake", Embedded: true}, testLogger())
			if err != nil {
				t.Fatal(err)
			}
			checkSteady(t, cfg, res)
			checkCovered(t, cfg, res.assignments, cfg.Members)
			if res.SteadyJoins != 0 {
				t.Errorf("%d JoinGroups in the steady phase, want none", res.SteadyJoins)
			}
			t.Logf("join-to-stable %v, %d revocations, heartbeat %+v, errors %v", res.JoinToStable, res.Revocations, res.Heartbeat, res.Errors)
		})
	}
}

// TestRun_AKilledMemberRebalancesItsGroup kills a member once the groups
// are stable, as a consumer process dies: no LeaveGroup, its connection
// closed. The target notices at the end of its session, and the group
// settles again with the others holding every partition.
func TestRun_AKilledMemberRebalancesItsGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := smallConfig(ProtocolCooperativeSticky)
	cfg.Groups = 2
	cfg.SessionTimeout = time.Second
	cfg.Duration = 500 * time.Millisecond
	var restabilised time.Duration
	h := hooks{steady: func(r *run) {
		killed := time.Now()
		r.members[0].kill()
		for {
			if _, ok := r.tracker.stableFor(time.Now(), cfg.hold()); ok {
				restabilised = time.Since(killed)
				return
			}
			if time.Since(killed) > 10*time.Second {
				t.Errorf("group 0 not stable again 10s after its member was killed")
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}}
	res, err := runWith(ctx, cfg, Target{Name: "kfake", Embedded: true}, testLogger(), h)
	if err != nil {
		t.Fatal(err)
	}
	if restabilised < cfg.SessionTimeout {
		t.Errorf("stable again %v after the kill, before the %v session could expire", restabilised, cfg.SessionTimeout)
	}
	if res.AssignmentAtEnd == nil || res.AssignmentAtEnd.Valid != cfg.Groups {
		t.Fatalf("assignment at the end: %+v", res.AssignmentAtEnd)
	}
	if n := len(res.assignments[0]); n != cfg.Members-1 {
		t.Errorf("group 0 has %d members' assignments, want %d", n, cfg.Members-1)
	}
	if n := len(res.assignments[1]); n != cfg.Members {
		t.Errorf("group 1 has %d members' assignments, want %d", n, cfg.Members)
	}
	for g := range res.assignments {
		if err := checkCoverage(map[string]int32{"loadtest-0": 4, "loadtest-1": 4}, res.assignments[g]); err != nil {
			t.Errorf("group %d: %v", g, err)
		}
	}
}

func TestRun_UnreachableTargetFailsFastNamingIt(t *testing.T) {
	cfg := smallConfig(ProtocolRange)
	cfg.DialTimeout = 2 * time.Second
	start := time.Now()
	_, err := Run(context.Background(), cfg, Target{Name: "nowhere", Addr: "127.0.0.1:1"}, testLogger())
	if err == nil {
		t.Fatal("a run against 127.0.0.1:1 succeeded")
	}
	if time.Since(start) > 3*time.Second {
		t.Errorf("took %v to fail", time.Since(start))
	}
	for _, want := range []string{"nowhere", "127.0.0.1:1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// TestRun_SharedConnectionsCarryTheSteadyLoad multiplexes every member
// over two connections per broker: the groups form as with a connection
// each, and once they are stable no member holds a connection of its own.
func TestRun_SharedConnectionsCarryTheSteadyLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := smallConfig(ProtocolCooperativeSticky)
	cfg.SharedConnections = 2
	cfg.Duration = time.Second
	h := hooks{steady: func(r *run) {
		r.poolsMu.Lock()
		defer r.poolsMu.Unlock()
		if len(r.pools) == 0 {
			t.Error("no shared connections")
		}
		for addr, p := range r.pools {
			if len(p.conns) != 2 {
				t.Errorf("%s: %d shared connections, want 2", addr, len(p.conns))
			}
		}
		r.connsMu.Lock()
		defer r.connsMu.Unlock()
		if n := len(r.conns); n != 0 {
			t.Errorf("%d members' own connections open once stable, want none", n)
		}
	}}
	res, err := runWith(ctx, cfg, Target{Name: "kfake", Embedded: true}, testLogger(), h)
	if err != nil {
		t.Fatal(err)
	}
	checkSteady(t, cfg, res)
	checkCovered(t, cfg, res.assignments, cfg.Members)
}

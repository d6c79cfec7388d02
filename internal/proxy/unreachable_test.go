package proxy

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// While the upstream is down every client reconnects several times a
// second. The first connection is closed when its first request to forward
// finds the broker away (the dial waits for one); once the broker is known
// to be down, later connections dial as they open and are closed at once,
// before they send anything. The log says so once per interval with a
// count, not once per connection.
func TestProxy_UnreachableBrokerClosesConnectionsAndLogsAtAPacedRate(t *testing.T) {
	var told atomic.Int64
	e := startEnv(t, 1, func(o *Options) { o.OnUnreachable = func(error) { told.Add(1) } })
	e.cluster.Close()
	// The broker's own listener, whose connections dial with their first
	// request to forward (the bootstrap listener's dial as they open).
	addr, ok := e.proxy.BrokerAddr(0)
	if !ok {
		t.Fatal("no listener for broker 0")
	}
	const conns = 20
	for i := range conns {
		r := dialRaw(t, addr)
		if i == 0 {
			r.send(kmsg.NewPtrMetadataRequest(), 1)
		}
		if !r.closedByPeer() {
			t.Fatalf("connection %d to an unreachable broker was left open", i)
		}
	}
	// Every refusal is reported, paced or not: the daemon decides.
	if n := told.Load(); n != conns {
		t.Errorf("OnUnreachable called %d times for %d refused connections", n, conns)
	}
	logs := e.logs.String()
	if n := strings.Count(logs, "their broker is unreachable"); n != 1 {
		t.Errorf("%d warnings for %d refused connections within %v; want 1:\n%s", n, conns, unreachableLogEvery, logs)
	}
	if strings.Contains(logs, `level=WARN msg="closing client connection"`) {
		t.Errorf("a connection closed for the unreachable broker was also logged on its own:\n%s", logs)
	}
}

func TestLogPacer_LogsOncePerIntervalWithTheCountSinceTheLastLine(t *testing.T) {
	var p logPacer
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at        time.Duration
		wantLog   bool
		wantCount int
	}{
		{0, true, 1},
		{time.Second, false, 0},
		{2 * time.Second, false, 0},
		{5 * time.Second, true, 3}, // the two paced ones and this one
		{6 * time.Second, false, 0},
		{20 * time.Second, true, 2},
	}
	for _, s := range steps {
		n, ok := p.report(t0.Add(s.at), 5*time.Second)
		if ok != s.wantLog || n != s.wantCount {
			t.Errorf("at +%v: report = %d, %v; want %d, %v", s.at, n, ok, s.wantCount, s.wantLog)
		}
	}
}

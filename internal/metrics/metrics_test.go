package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
)

// exercise touches every metric once, so every family is present.
func exercise(m *Metrics) {
	m.RebalanceDone(Rebalance{Group: "g", Generation: 3, Assignor: "range", Duration: 12 * time.Millisecond, Members: 2, Moved: 4, Withheld: 1, RackLocal: 3, RackKnown: 4})
	m.PluginCall("range", time.Millisecond, "")
	m.PluginCall("sticky", time.Millisecond, "timeout")
	m.Fallback("sticky", "range")
	m.ProxiedRequest("Fetch", false, time.Millisecond)
	m.UpstreamError("dial")
	m.TopicMetadataError("LEADER_NOT_AVAILABLE")
	m.AssignmentTimedOut()
	m.SplitBrain("g")
	m.RebalanceStorm("g", "session timeouts")
	m.PluginReload(true, 5)
	m.PluginOverload("range")
	m.PluginQueueWait("range.wasm", 3*time.Millisecond)
	m.WatchPluginPool(func() PluginPool { return PluginPool{Size: 2, Busy: 2, Queued: 5} })
}

func TestMetrics_NamesFollowPrometheusConventions(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	exercise(New(reg, 0))
	problems, err := promlint.NewWithMetricFamilies(mustGather(t, reg)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	for _, mf := range mustGather(t, reg) {
		if !strings.HasPrefix(mf.GetName(), "wasmassign_") {
			t.Errorf("%s lacks the wasmassign_ prefix", mf.GetName())
		}
	}
}

func mustGather(t *testing.T, reg *prometheus.Registry) []*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

func TestMetrics_GroupLabelsAreCappedAndAggregated(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, 2)
	for i, g := range []string{"a", "b", "c", "d"} {
		m.RebalanceDone(Rebalance{Group: g, Generation: int32(10 + i), Assignor: "range", Members: i + 1, RackLocal: 1, RackKnown: 2})
	}
	if n := testutil.CollectAndCount(m.groupMembers); n != 3 {
		t.Errorf("%d member series, want 2 own + %s", n, OtherGroups)
	}
	if got := testutil.ToFloat64(m.groupMembers.WithLabelValues(OtherGroups)); got != 3+4 {
		t.Errorf("%s members = %v, want the sum of c and d (7)", OtherGroups, got)
	}
	if got := testutil.ToFloat64(m.rackLocality.WithLabelValues(OtherGroups)); got != 0.5 {
		t.Errorf("%s rack locality = %v, want 0.5", OtherGroups, got)
	}
	if n := testutil.CollectAndCount(m.groupGeneration); n != 2 {
		t.Errorf("%d generation series, want only the 2 own groups", n)
	}
	// A group keeps its label across rebalances, and removing one frees
	// nothing for groups already aggregated.
	m.RebalanceDone(Rebalance{Group: "a", Generation: 20, Assignor: "range", Members: 9})
	if got := testutil.ToFloat64(m.groupMembers.WithLabelValues("a")); got != 9 {
		t.Errorf("a members = %v, want 9", got)
	}
	m.GroupRemoved("c")
	if got := testutil.ToFloat64(m.groupMembers.WithLabelValues(OtherGroups)); got != 4 {
		t.Errorf("after removing c, %s members = %v, want 4", OtherGroups, got)
	}
	m.GroupRemoved("a")
	if n := testutil.CollectAndCount(m.groupGeneration); n != 1 {
		t.Errorf("after removing a, %d generation series, want 1", n)
	}
}

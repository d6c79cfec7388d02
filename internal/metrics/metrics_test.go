package metrics

import (
	"maps"
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
	m.RebalanceDone(Rebalance{Assignor: "range", Duration: 12 * time.Millisecond, Moved: 4, Withheld: 1})
	m.GroupChanged(Group{Group: "g", Generation: 3, Members: 2, RackLocal: 3, RackKnown: 4})
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
		m.GroupChanged(Group{Group: g, Generation: int32(10 + i), Members: i + 1, RackLocal: 1, RackKnown: 2})
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
	// A group keeps its label across changes, and removing one frees
	// nothing for groups already aggregated.
	m.GroupChanged(Group{Group: "a", Generation: 20, Members: 9})
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

// TestMetrics_GroupGaugesFollowTheGroupThroughEveryState: the gauges show
// what the last report said, in every state, for an own label and for the
// aggregate alike, and a removed group leaves no series behind.
func TestMetrics_GroupGaugesFollowTheGroupThroughEveryState(t *testing.T) {
	steps := []struct {
		name string
		g    Group
	}{
		{"stable, racks known", Group{Generation: 1, Members: 3, Unassigned: 2, RackLocal: 3, RackKnown: 4}},
		{"a member expired", Group{Generation: 1, Members: 2, Unassigned: 2, RackLocal: 3, RackKnown: 4}},
		{"Empty", Group{Generation: 2}},
	}
	for _, label := range []string{"g", OtherGroups} {
		t.Run(label, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := New(reg, 1)
			if label == OtherGroups {
				// The only own label goes to another group, which stays.
				m.GroupChanged(Group{Group: "first", Generation: 5, Members: 1})
			}
			for _, st := range steps {
				g := st.g
				g.Group = "g"
				m.GroupChanged(g)
				want := map[string]float64{
					"wasmassign_group_members":               float64(g.Members),
					"wasmassign_group_unassigned_partitions": float64(g.Unassigned),
				}
				if label != OtherGroups {
					want["wasmassign_group_generation"] = float64(g.Generation)
				}
				if g.RackKnown > 0 {
					want["wasmassign_group_rack_local_ratio"] = float64(g.RackLocal) / float64(g.RackKnown)
				}
				if got := groupSeries(t, reg, label); !maps.Equal(got, want) {
					t.Errorf("%s: series %v, want %v", st.name, got, want)
				}
			}
			m.SplitBrain("g")
			m.RebalanceStorm("g", "session timeouts")
			m.GroupRemoved("g")
			if got := groupSeries(t, reg, label); len(got) != 0 {
				t.Errorf("series %v outlived the group", got)
			}
			if label == OtherGroups && len(groupSeries(t, reg, "first")) == 0 {
				t.Error("removing an aggregated group removed another group's series")
			}
		})
	}
}

// groupSeries returns the value of every series of reg labelled group, by
// metric name (a counter's value for counters).
func groupSeries(t *testing.T, reg *prometheus.Registry, group string) map[string]float64 {
	t.Helper()
	out := make(map[string]float64)
	for _, mf := range mustGather(t, reg) {
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "group" && l.GetValue() == group {
					out[mf.GetName()] = s.GetGauge().GetValue() + s.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

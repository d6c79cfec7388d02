package metrics

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestDashboard_QueriesOnlyMetricsThatExist reads the example Grafana
// dashboard and checks that every metric its queries name is one this
// package exports, and that every label it groups by is one of that
// metric's labels.
func TestDashboard_QueriesOnlyMetricsThatExist(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "grafana", "wasmassign.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	exercise(New(reg, 0))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]map[string]bool{} // series name to its labels
	for _, mf := range families {
		names := []string{mf.GetName()}
		if mf.GetType().String() == "HISTOGRAM" {
			names = []string{mf.GetName() + "_bucket", mf.GetName() + "_sum", mf.GetName() + "_count"}
		}
		ls := map[string]bool{"le": mf.GetType().String() == "HISTOGRAM"}
		for _, l := range mf.GetMetric()[0].GetLabel() {
			ls[l.GetName()] = true
		}
		for _, n := range names {
			labels[n] = ls
		}
	}
	metricRe := regexp.MustCompile(`wasmassign_[a-z_]+`)
	byRe := regexp.MustCompile(`by \(([^)]*)\)`)
	queried := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			used := metricRe.FindAllString(target.Expr, -1)
			if len(used) == 0 {
				t.Errorf("panel %q: query %q names no wasmassign metric", p.Title, target.Expr)
			}
			for _, m := range used {
				queried++
				ls, ok := labels[m]
				if !ok {
					t.Errorf("panel %q queries %s, which the daemon does not export", p.Title, m)
					continue
				}
				for _, by := range byRe.FindAllStringSubmatch(target.Expr, -1) {
					for _, l := range strings.Split(by[1], ",") {
						if l = strings.TrimSpace(l); !ls[l] {
							t.Errorf("panel %q groups %s by %q, which it does not have", p.Title, m, l)
						}
					}
				}
			}
		}
	}
	if queried < len(families) {
		t.Errorf("the dashboard queries %d metrics, fewer than the %d exported", queried, len(families))
	}
}

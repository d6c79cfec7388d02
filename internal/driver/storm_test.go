package driver

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// storms records HookRebalanceStorm calls.
type storms []string

func (s *storms) OnRebalanceStorm(group, cause string) { *s = append(*s, group+": "+cause) }

func TestCheckStorm_ReportsOncePerWindowWithTheLikelyCause(t *testing.T) {
	tests := []struct {
		name              string
		expiries, joins   int
		wantCause, metric string
	}{
		{"session timeouts", 3, 0, "session timeouts", "session timeouts"},
		{"members joining", 0, 5, "members joining repeatedly", "members joining repeatedly"},
		{"other", 0, 0, "frequent membership changes", "membership changes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			var hooked storms
			d := &Driver{
				cfg:    Config{StormRebalances: 3, StormWindow: time.Minute, Hooks: []Hook{&hooked}},
				log:    slog.New(slog.NewTextHandler(&logs, nil)),
				storms: make(map[string]*stormWatch),
			}
			start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
			for i := range 8 {
				if i == 1 { // causes counted inside the window
					d.storm("g").expiries += tt.expiries
					d.storm("g").joins += tt.joins
				}
				d.checkStorm("g", start.Add(time.Duration(i)*5*time.Second))
			}
			if n := strings.Count(logs.String(), "rebalance storm"); n != 1 {
				t.Fatalf("%d storm reports in one window, want 1:\n%s", n, logs.String())
			}
			if !strings.Contains(logs.String(), tt.wantCause) {
				t.Errorf("report does not name %q:\n%s", tt.wantCause, logs.String())
			}
			if want := "g: " + tt.metric; len(hooked) != 1 || hooked[0] != want {
				t.Errorf("storm hook calls %q, want [%q]", hooked, want)
			}
			// Spread out, the same number of rebalances is no storm.
			logs.Reset()
			for i := range 8 {
				d.checkStorm("h", start.Add(time.Duration(i)*time.Minute))
			}
			if strings.Contains(logs.String(), "rebalance storm") || len(hooked) != 1 {
				t.Errorf("rebalances a minute apart reported as a storm (hook calls %q):\n%s", hooked, logs.String())
			}
		})
	}
}

package e2e

import (
	"math"
	"testing"
	"time"
)

func TestStratifiedMeanRatio(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name         string
		dFast, dSlow []time.Duration
		gFast, gSlow []time.Duration
		want         float64
		ok           bool
	}{
		// Same times in each mode, different shares of slow: the plain
		// means differ (20 vs 50 ms), the stratified ones do not.
		{"shares differ, times equal", ms(20, 20, 20), ms(80), ms(20), ms(80, 80, 80), 1, true},
		// Gateway 10% slower in each mode: 1.1 whatever the weights.
		{"uniformly slower", ms(20, 20), ms(80, 80), ms(22), ms(88, 88, 88), 1.1, true},
		// Only the fast mode on both: the ratio of fast means.
		{"one mode", ms(10, 30), nil, ms(25), nil, 1.25, true},
		// The gateway never formed a group quickly while direct did: no
		// like-for-like comparison is possible.
		{"mode missing on one side", ms(20), ms(80), nil, ms(80), 0, false},
		{"no samples", nil, nil, nil, nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := stratifiedMeanRatio(tt.dFast, tt.dSlow, tt.gFast, tt.gSlow)
			if ok != tt.ok || math.Abs(got-tt.want) > 1e-9 {
				t.Fatalf("got %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestSplitModes(t *testing.T) {
	hb := 50 * time.Millisecond
	v := [3][]time.Duration{{10 * time.Millisecond, 50 * time.Millisecond, 51 * time.Millisecond}, nil, {70 * time.Millisecond}}
	fast, slow := splitModes(v, hb)
	if len(fast[0]) != 2 || len(slow[0]) != 1 || slow[0][0] != 51*time.Millisecond {
		t.Fatalf("direct split into %v and %v", fast[0], slow[0])
	}
	if len(fast[2]) != 0 || len(slow[2]) != 1 || len(fast[1])+len(slow[1]) != 0 {
		t.Fatalf("split into %v and %v", fast, slow)
	}
}

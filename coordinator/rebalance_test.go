package coordinator

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRebalance_StartsANewGenerationOfAStableGroupOnly(t *testing.T) {
	tests := []struct {
		name  string
		group string
		want  bool
	}{
		{"stable group rebalances", "g", true},
		{"unknown group is left alone", "other", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
			h.setMetadata(meta(map[string]int{"t": 4}))
			a := newSim(h, "a", "g", []string{"range"}, []string{"t"})
			settle(h, a)
			before := a.generation
			h.absorb(h.c.Rebalance(h.now, tt.group, "plugin reloaded"))
			code := h.do(a.client, hbReq("g", a.memberID, a.generation)).(*kmsg.HeartbeatResponse).ErrorCode
			if got := code == kerr.RebalanceInProgress.Code; got != tt.want {
				t.Fatalf("heartbeat %v, want rebalance %v", kerr.ErrorForCode(code), tt.want)
			}
			if !tt.want {
				return
			}
			a.phase = idle
			settle(h, a)
			if a.generation != before+1 || count(a.held) != 4 {
				t.Fatalf("after the rebalance: generation %d (was %d), holding %v", a.generation, before, a.held)
			}
			var reason string
			for _, e := range h.events {
				if e.Kind == EventRebalanceStarted && e.Generation == before {
					reason = e.Detail
				}
			}
			if reason != "plugin reloaded" {
				t.Fatalf("rebalance started with reason %q", reason)
			}
		})
	}
}

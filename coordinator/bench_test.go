package coordinator

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkHeartbeat measures one Heartbeat through Handle in a coordinator
// holding many Stable groups: the cost every member pays every few seconds.
func BenchmarkHeartbeat(b *testing.B) {
	for _, groups := range []int{10, 1000} {
		b.Run(fmt.Sprintf("groups=%d,members=10", groups), func(b *testing.B) {
			h := newHarness(b, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
			h.setMetadata(meta(map[string]int{"t": 100}))
			var last *simClient
			for g := range groups {
				var sims []*simClient
				for m := range 10 {
					s := newSim(h, fmt.Sprintf("c%d", m), fmt.Sprintf("g%d", g), []string{"cooperative-sticky"}, []string{"t"})
					s.join()
					sims = append(sims, s)
				}
				settle(h, sims...)
				last = sims[0]
			}
			req := hbReq(last.group, last.memberID, last.generation)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				out := h.c.Handle(h.now, RequestID(i), last.client, req)
				if len(out.Replies) != 1 {
					b.Fatal("no reply")
				}
			}
		})
	}
}

// BenchmarkRebalance measures a full server-side rebalance of one group
// (join phase, request building, withholding, encoding), excluding the
// plugin itself, which runs natively here.
func BenchmarkRebalance(b *testing.B) {
	h := newHarness(b, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 1000}))
	var sims []*simClient
	for m := range 100 {
		s := newSim(h, fmt.Sprintf("c%d", m), "g", []string{"range"}, []string{"t"})
		s.join()
		sims = append(sims, s)
	}
	settle(h, sims...)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.now = h.now.Add(time.Millisecond)
		for _, s := range sims {
			s.phase = idle
			s.join()
		}
		settle(h, sims...)
	}
}

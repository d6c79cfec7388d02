package coordinator

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// stableBenchGroup forms one Stable group "g" of n members on a topic "t"
// of 2n partitions.
func stableBenchGroup(b *testing.B, n int) (*harness, []*simClient) {
	b.Helper()
	h := newHarness(b, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
	h.setMetadata(meta(map[string]int{"t": 2 * n}))
	sims := make([]*simClient, n)
	for m := range sims {
		sims[m] = newSim(h, fmt.Sprintf("c%d", m), "g", []string{"range"}, []string{"t"})
		sims[m].join()
	}
	settle(h, sims...)
	for m, s := range sims {
		if s.phase != stable {
			b.Fatalf("member %d did not settle: phase %v", m, s.phase)
		}
	}
	return h, sims
}

// BenchmarkHeartbeat_GroupSize measures one Heartbeat in a single Stable
// group of n members, the members taking turns as the clock advances, so
// that every heartbeat moves its member's session deadline. The cost per
// request should not depend on n.
func BenchmarkHeartbeat_GroupSize(b *testing.B) {
	for _, n := range []int{10, 100, 2000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			h, sims := stableBenchGroup(b, n)
			reqs := make([]*kmsg.HeartbeatRequest, n)
			for m, s := range sims {
				reqs[m] = hbReq(s.group, s.memberID, s.generation)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m := i % n
				out := h.c.Handle(h.now.Add(time.Duration(i)*time.Microsecond), RequestID(i), sims[m].client, reqs[m])
				if len(out.Replies) != 1 || out.Replies[0].Response.(*kmsg.HeartbeatResponse).ErrorCode != 0 {
					b.Fatal("heartbeat not answered with success")
				}
			}
		})
	}
}

// BenchmarkOffsetCommit_GroupSize measures one OffsetCommit of a member of
// a single Stable group of n members, the members taking turns: the
// coordinator fences it and hands it on to be forwarded. The cost per
// request should not depend on n.
func BenchmarkOffsetCommit_GroupSize(b *testing.B) {
	for _, n := range []int{10, 2000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			h, sims := stableBenchGroup(b, n)
			reqs := make([]*kmsg.OffsetCommitRequest, n)
			for m, s := range sims {
				r := kmsg.NewPtrOffsetCommitRequest()
				r.Version, r.Group, r.MemberID, r.Generation = 8, s.group, s.memberID, s.generation
				rt := kmsg.NewOffsetCommitRequestTopic()
				rt.Topic = "t"
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset = int32(2*m), 100
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
				reqs[m] = r
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m := i % n
				out := h.c.Handle(h.now.Add(time.Duration(i)*time.Microsecond), RequestID(i), sims[m].client, reqs[m])
				if len(out.Forwards) != 1 {
					b.Fatal("commit not forwarded")
				}
			}
		})
	}
}

// BenchmarkJoinStorm measures JoinGroup requests as n new members join a
// Stable group of one, as when a deployment starts them together: each
// member asks for its id and joins with it at once (KIP-394's two
// JoinGroups), and the group waits in PreparingRebalance for its old
// member. ns/op and allocs/op are per request; the cost should not grow
// with n.
func BenchmarkJoinStorm(b *testing.B) {
	for _, n := range []int{100, 2000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			metadata := sub{version: 3, topics: []string{"t"}, gen: -1}.bytes()
			clients := make([]Client, n)
			seconds := make([]*kmsg.JoinGroupRequest, n)
			for m := range clients {
				clients[m] = Client{ID: fmt.Sprintf("c%d", m), Host: "/10.0.0.1"}
			}
			first := joinReq(9, "g", "", "", proto{"range", metadata})
			var c *Coordinator
			var now time.Time
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := i % (2 * n)
				if k == 0 {
					b.StopTimer()
					h := newHarness(b, Config{Default: GroupConfig{InitialRebalanceDelay: -1}})
					h.setMetadata(meta(map[string]int{"t": 2 * n}))
					old := newSim(h, "old", "g", []string{"range"}, []string{"t"})
					settle(h, old)
					c, now = h.c, h.now
					for m := range seconds {
						seconds[m] = joinReq(9, "g", "", "", proto{"range", metadata})
					}
					b.StartTimer()
				}
				now = now.Add(time.Microsecond)
				m := k / 2
				if k%2 == 0 {
					out := c.Handle(now, RequestID(i), clients[m], first)
					r := out.Replies[0].Response.(*kmsg.JoinGroupResponse)
					if r.ErrorCode != kerr.MemberIDRequired.Code {
						b.Fatalf("first join: %v", kerr.ErrorForCode(r.ErrorCode))
					}
					seconds[m].MemberID = r.MemberID
					continue
				}
				if out := c.Handle(now, RequestID(i), clients[m], seconds[m]); len(out.Replies) != 0 {
					b.Fatalf("second join of member %d answered at once", m)
				}
			}
		})
	}
}

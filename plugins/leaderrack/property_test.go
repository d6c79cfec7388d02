package leaderrack

import (
	"math/rand/v2"
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// rangePlan is the range built-in's answer to req.
func rangePlan(t *testing.T, req *abi.Request) assignortest.Plan {
	t.Helper()
	return assignortest.AsPlan(req, assignortest.Run(t, rangeassignor.Assign, req))
}

// exercised fails t when fewer than least of the random scenarios reached
// the case a property is about: the property would then pass for want of
// trying.
func exercised(t *testing.T, n, least int, what string) {
	t.Helper()
	if n < least {
		t.Fatalf("only %d %s, want at least %d: the property is not exercised", n, what, least)
	}
}

// TestLeaderRack_MatchesPlainModel compares the package with
// referenceLeaderRack on random groups with racks and untidy leaders, and
// checks that the comparison reached groups where racks change the answer.
func TestLeaderRack_MatchesPlainModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2023))
	differs := 0
	for i := range 600 {
		req := randomRackGroup(r)
		got := assignortest.AsPlan(req, assignortest.Run(t, Assign, req))
		if want := referenceLeaderRack(req); !got.Equal(want) {
			t.Fatalf("scenario %d:\n got %v\nwant %v\nrequest %+v", i, got, want, req)
		}
		if !got.Equal(rangePlan(t, req)) {
			differs++
		}
	}
	exercised(t, differs, 200, "scenarios that differ from range")
}

// TestLeaderRack_ValidAndBalancedPerTopic checks, on random groups with and
// without racks, that every subscribed partition goes to exactly one
// subscriber, that each topic's subscribers hold counts within one of each
// other (range's quotas), and that members' partition slices, which share a
// backing array, cannot overwrite each other through append.
func TestLeaderRack_ValidAndBalancedPerTopic(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2023))
	for i := range 400 {
		req := assignortest.RandomGroup(r, leaderShape(i%4 != 0))
		moveLeaders(r, req)
		resp := assignortest.Run(t, Assign, req)
		assignortest.CheckTopicBalance(t, req, resp)
		assignortest.CheckAppendSafe(t, req, resp)
	}
}

// TestLeaderRack_LeaderLocalAssignmentsAreAsManyAsQuotasAllow: per topic,
// the number of partitions held by a member on their leader's rack equals
// mostLeaderLocal, the best any assignment within range's quotas can do.
func TestLeaderRack_LeaderLocalAssignmentsAreAsManyAsQuotasAllow(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 2023))
	short := 0 // topics where quotas keep some leader-led partition away from its rack
	for i := range 500 {
		req := randomRackGroup(r)
		w := newWhere(req)
		held := holdings(req, assignortest.Run(t, Assign, req))
		for ti := range req.Topics {
			got, reachable := 0, 0
			subs := subscribersOf(req, int32(ti))
			for m, ps := range held[ti] {
				for _, p := range ps {
					if rk := req.Members[m].Rack; rk != "" && w.leader(int32(ti), p) == rk {
						got++
					}
				}
			}
			for p := range req.Topics[ti].PartitionCount {
				for _, m := range subs {
					if rk := req.Members[m].Rack; rk != "" && w.leader(int32(ti), p) == rk {
						reachable++
						break
					}
				}
			}
			want := mostLeaderLocal(req, int32(ti))
			if got != want {
				t.Fatalf("scenario %d topic %q: %d partitions leader-local, but quotas allow %d", i, req.Topics[ti].Name, got, want)
			}
			if want < reachable {
				short++
			}
		}
	}
	exercised(t, short, 50, "topics where quotas bind")
}

// TestLeaderRack_NonLocalOnlyWhenLocalMembersAreFullOfLocalPartitions: a
// partition held by a member off its leader's rack leaves every subscriber
// on that rack holding only partitions led from it (they were full after
// step 1); and a partition held by a member on none of its replicas' racks
// leaves every subscriber on those racks holding only partitions with a
// replica on its rack (full after step 2). Otherwise one of them had quota
// left and the partition should have gone to it.
func TestLeaderRack_NonLocalOnlyWhenLocalMembersAreFullOfLocalPartitions(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 2023))
	checked := 0
	for i := range 500 {
		req := randomRackGroup(r)
		w := newWhere(req)
		held := holdings(req, assignortest.Run(t, Assign, req))
		for ti := range req.Topics {
			topic := int32(ti)
			subs := subscribersOf(req, topic)
			for o, ps := range held[ti] {
				for _, p := range ps {
					leader, own := w.leader(topic, p), req.Members[o].Rack
					for _, m := range subs {
						rk := req.Members[m].Rack
						if rk == "" {
							continue
						}
						if leader == rk && own != rk {
							checked++
							for _, q := range held[ti][m] {
								if w.leader(topic, q) != rk {
									t.Fatalf("scenario %d: %s-%d went to %q off its leader's rack %q, while %q on that rack holds %d, not led from there", i, req.Topics[ti].Name, p, req.Members[o].MemberID, rk, req.Members[m].MemberID, q)
								}
							}
						}
						if w.local(rk, topic, p) && !w.local(own, topic, p) {
							checked++
							for _, q := range held[ti][m] {
								if !w.local(rk, topic, q) {
									t.Fatalf("scenario %d: %s-%d went to %q, on none of its replicas' racks, while %q on rack %q holds %d, with no replica there", i, req.Topics[ti].Name, p, req.Members[o].MemberID, req.Members[m].MemberID, rk, q)
								}
							}
						}
					}
				}
			}
		}
	}
	exercised(t, checked, 500, "non-local partitions with a subscriber on a local rack")
}

// TestLeaderRack_SameRackMembersShareLeaderLocalPartitionsEvenly: the
// tie-breaking rule (fewest held first, then member order) makes the
// subscribers of one rack take their rack's leaders in turn, so their
// leader-local counts per topic differ by at most one.
func TestLeaderRack_SameRackMembersShareLeaderLocalPartitionsEvenly(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 2023))
	shared := 0 // racks with several subscribers and leader-local partitions
	for i := range 500 {
		req := randomRackGroup(r)
		w := newWhere(req)
		held := holdings(req, assignortest.Run(t, Assign, req))
		for ti := range req.Topics {
			lo, hi := map[string]int{}, map[string]int{}
			members := map[string]int{}
			for _, m := range subscribersOf(req, int32(ti)) {
				rk := req.Members[m].Rack
				if rk == "" {
					continue
				}
				n := 0
				for _, p := range held[ti][m] {
					if w.leader(int32(ti), p) == rk {
						n++
					}
				}
				if members[rk] == 0 || n < lo[rk] {
					lo[rk] = n
				}
				hi[rk] = max(hi[rk], n)
				members[rk]++
			}
			for rk, c := range members {
				if hi[rk]-lo[rk] > 1 {
					t.Fatalf("scenario %d topic %q: members on rack %q hold between %d and %d leader-local partitions", i, req.Topics[ti].Name, rk, lo[rk], hi[rk])
				}
				if c > 1 && hi[rk] > 0 {
					shared++
				}
			}
		}
	}
	exercised(t, shared, 100, "racks with several subscribers and local leaders")
}

// TestLeaderRack_SameResultWhateverTheRequestOrder checks that the
// assignment depends on member and topic identities only, not on where
// they sit in the request's tables.
func TestLeaderRack_SameResultWhateverTheRequestOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 2023))
	for i := range 300 {
		req := randomRackGroup(r)
		want := assignortest.AsPlan(req, assignortest.Run(t, Assign, req))
		for range 3 {
			req2 := assignortest.Shuffled(r, req)
			if got := assignortest.AsPlan(req2, assignortest.Run(t, Assign, req2)); !got.Equal(want) {
				t.Fatalf("scenario %d: shuffling the request changed the assignment:\n got %v\nwant %v", i, got, want)
			}
		}
	}
}

// TestLeaderRack_WithoutRackMatchesIsPlainRange: when nothing can match a
// rack, the answer is Kafka's range, byte for byte as the range built-in
// gives it: in groups without racks, in groups whose members have racks but
// whose brokers have none, and in groups with no placement at all.
func TestLeaderRack_WithoutRackMatchesIsPlainRange(t *testing.T) {
	variants := []struct {
		name   string
		racks  bool
		change func(*abi.Request)
	}{
		{"no racks", false, func(*abi.Request) {}},
		{"brokers without racks", true, func(req *abi.Request) {
			for i := range req.Brokers {
				req.Brokers[i].Rack = ""
			}
		}},
		{"no placement", true, func(req *abi.Request) {
			for i := range req.Topics {
				req.Topics[i].Partitions = nil
			}
		}},
	}
	for vi, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, uint64(vi)))
			for i := range 300 {
				req := assignortest.RandomGroup(r, leaderShape(v.racks))
				v.change(req)
				got := assignortest.AsPlan(req, assignortest.Run(t, Assign, req))
				if want := rangePlan(t, req); !got.Equal(want) {
					t.Fatalf("scenario %d:\n got %v\nwant %v", i, got, want)
				}
			}
		})
	}
}

package leaderrack

import (
	"math/rand/v2"
	"slices"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// leaderShape is what this package's random tests draw: partition counts
// from a short list with small and uneven ones, so that quotas with extras
// and P < C are common; racks on most members and brokers; up to 12
// members over five member racks, so that racks often have several
// subscribers; and one group in five with many topics and sparse
// subscriptions.
func leaderShape(withRacks bool) assignortest.Shape {
	return assignortest.Shape{
		Topics:          8,
		SparseOneIn:     5,
		MissingOneIn:    10,
		PartitionCounts: []int32{0, 1, 2, 3, 5, 6, 7, 12, 25},
		Racks:           withRacks,
		Members:         12,
		UniformOneIn:    2,
		UniformSubset:   true,
	}
}

// moveLeaders makes the leaders of random groups less tidy than
// RandomGroup's, which always puts the leader first among the replicas:
// some partitions get another replica as leader, some no leader (-1), and
// some a leader missing from the broker list.
func moveLeaders(r *rand.Rand, req *abi.Request) {
	for ti := range req.Topics {
		for p := range req.Topics[ti].Partitions {
			pt := &req.Topics[ti].Partitions[p]
			replicas := req.ReplicaSets[pt.Replicas]
			switch r.IntN(20) {
			case 0, 1, 2, 3:
				pt.Leader = replicas[r.IntN(len(replicas))]
			case 4:
				pt.Leader = -1
			case 5:
				pt.Leader = 99
			}
		}
	}
}

// randomRackGroup draws a group with racks and untidy leaders.
func randomRackGroup(r *rand.Rand) *abi.Request {
	req := assignortest.RandomGroup(r, leaderShape(true))
	moveLeaders(r, req)
	return req
}

// where answers, for tests, where partitions live, by rack name: "" is no
// rack, which matches nothing.
type where struct {
	req        *abi.Request
	brokerRack map[int32]string
}

func newWhere(req *abi.Request) where {
	w := where{req: req, brokerRack: map[int32]string{}}
	for _, b := range req.Brokers {
		w.brokerRack[b.ID] = b.Rack
	}
	return w
}

// leader returns the rack of partition p's leader.
func (w where) leader(t, p int32) string {
	parts := w.req.Topics[t].Partitions
	if int(p) >= len(parts) {
		return ""
	}
	return w.brokerRack[parts[p].Leader]
}

// followers returns the racks of partition p's replicas other than its
// leader, "" left out.
func (w where) followers(t, p int32) []string {
	parts := w.req.Topics[t].Partitions
	var out []string
	for _, b := range w.req.Replicas(t, p) {
		if b != parts[p].Leader && w.brokerRack[b] != "" {
			out = append(out, w.brokerRack[b])
		}
	}
	return out
}

// local reports whether a member on rack reads partition p from a broker on
// its own rack, leader or follower.
func (w where) local(rack string, t, p int32) bool {
	return rack != "" && (w.leader(t, p) == rack || slices.Contains(w.followers(t, p), rack))
}

// referenceLeaderRack is a deliberately plain model of the rules the
// package comment states, written with maps and linear scans, against which
// the optimised package is checked.
func referenceLeaderRack(req *abi.Request) assignortest.Plan {
	w := newWhere(req)
	members := assignortest.KafkaSorted(req.Members)
	out := assignortest.Plan{}
	for _, m := range members {
		out[m.MemberID] = map[string][]int32{}
	}
	for ti, topic := range req.Topics {
		t := int32(ti)
		var subs []abi.Member
		for _, m := range members {
			if slices.Contains(m.Topics, t) {
				subs = append(subs, m)
			}
		}
		if !topic.Exists || topic.PartitionCount == 0 || len(subs) == 0 {
			continue
		}
		n := int(topic.PartitionCount)
		base, rem := n/len(subs), n%len(subs)
		count := map[string]int{}
		owner := make([]string, n)
		open := func(id string) bool { return count[id] < base || (count[id] == base && rem > 0) }
		give := func(id string, p int) {
			owner[p] = id
			count[id]++
			if count[id] == base+1 {
				rem--
			}
		}
		// pick returns the subscriber with quota on one of racks that holds
		// the fewest partitions, the first in member order among equals.
		pick := func(racks []string) string {
			best := ""
			for _, m := range subs {
				if m.Rack != "" && slices.Contains(racks, m.Rack) && open(m.MemberID) && (best == "" || count[m.MemberID] < count[best]) {
					best = m.MemberID
				}
			}
			return best
		}
		for p := range n {
			if id := pick([]string{w.leader(t, int32(p))}); id != "" {
				give(id, p)
			}
		}
		for p := range n {
			if owner[p] == "" {
				if id := pick(w.followers(t, int32(p))); id != "" {
					give(id, p)
				}
			}
		}
		for _, m := range subs {
			for p := range n {
				if owner[p] == "" && open(m.MemberID) {
					give(m.MemberID, p)
				}
			}
		}
		for p, id := range owner {
			out[id][topic.Name] = append(out[id][topic.Name], int32(p))
		}
	}
	return out
}

// holdings lists, per topic index, what each member holds: member index ->
// partitions.
func holdings(req *abi.Request, resp *abi.Response) []map[int32][]int32 {
	out := make([]map[int32][]int32, len(req.Topics))
	for i := range out {
		out[i] = map[int32][]int32{}
	}
	for _, ma := range resp.Members {
		for _, tp := range ma.Partitions {
			out[tp.Topic][ma.Member] = append(out[tp.Topic][ma.Member], tp.Partitions...)
		}
	}
	return out
}

// subscribersOf returns the indices of the members subscribed to topic t.
func subscribersOf(req *abi.Request, t int32) []int32 {
	var out []int32
	for m := range req.Members {
		if slices.Contains(req.Members[m].Topics, t) {
			out = append(out, int32(m))
		}
	}
	return out
}

// mostLeaderLocal is the largest number of topic t's partitions that any
// assignment within range's quotas can give to a subscriber on the rack of
// the partition's leader. A rack's subscribers can hold base partitions
// each, plus one for each of the rem extras the rack gets; a rack with n
// subscribers and e extras makes at most min(L, n*base+e) of the L
// partitions it leads local. The extras are shared out over the racks by a
// knapsack.
func mostLeaderLocal(req *abi.Request, t int32) int {
	subs := subscribersOf(req, t)
	n := int(req.Topics[t].PartitionCount)
	if len(subs) == 0 || n == 0 || !req.Topics[t].Exists {
		return 0
	}
	base, rem := n/len(subs), n%len(subs)
	onRack := map[string]int{}
	for _, m := range subs {
		if rk := req.Members[m].Rack; rk != "" {
			onRack[rk]++
		}
	}
	led := map[string]int{}
	w := newWhere(req)
	for p := range n {
		led[w.leader(t, int32(p))]++
	}
	// best[k] is the most local partitions with k extras used so far.
	best := make([]int, rem+1)
	for k := 1; k <= rem; k++ {
		best[k] = -1
	}
	for rk, c := range onRack {
		next := slices.Repeat([]int{-1}, rem+1)
		for k, v := range best {
			if v < 0 {
				continue
			}
			for e := 0; e <= c && k+e <= rem; e++ {
				next[k+e] = max(next[k+e], v+min(led[rk], c*base+e))
			}
		}
		best = next
	}
	return slices.Max(best)
}

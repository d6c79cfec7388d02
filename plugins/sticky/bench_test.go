package sticky_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/wasmassign/wasmassign/plugins/sticky"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// benchCase is one group shape of the benchmarks: the request of the first
// assignment, and a function that turns a first assignment into the request
// of the second phase.
type benchCase struct {
	name string
	// build returns the first request.
	build func() *abi.Request
	// next returns the second request from the first and its answer;
	// cooperative says how members report ownership.
	next      func(first *abi.Request, resp *abi.Response, cooperative bool) *abi.Request
	nextPhase string
}

// benchCases are the target sizes:
//
//   - 2,000 members over 500 topics of 2,000 partitions (a million), all
//     subscribing to everything; then a rejoin where every member but the
//     first reports what it owns and the first owns nothing.
//   - 100 members over 25 topics of 1,000 partitions, likewise.
//   - 500 members over 100 topics of 200 partitions, a quarter subscribing
//     to the first half of the topics and the rest to the second half;
//     likewise (Kafka's testAssignmentAndGroupWithNonEqualSubscriptionNotTimeout).
//   - churn: 200 members over 40 topics of 1-10 partitions with random
//     subscriptions; then 50 random removals, the rest reporting what they
//     own (Kafka's testLargeAssignmentWithMultipleConsumersLeavingAndRandomSubscription).
func benchCases() []benchCase {
	uniform := func(members, topics, partitions int) func() *abi.Request {
		return func() *abi.Request {
			all := make([]int32, topics)
			for i := range all {
				all[i] = int32(i)
			}
			return benchRequest(members, topics, func(int) int32 { return int32(partitions) }, func(int) []int32 { return all })
		}
	}
	return []benchCase{
		{name: "members=2000/partitions=500x2000", build: uniform(2000, 500, 2000), next: rejoin, nextPhase: "rejoin"},
		{name: "members=100/partitions=25x1000", build: uniform(100, 25, 1000), next: rejoin, nextPhase: "rejoin"},
		{name: "hetero/members=500/partitions=100x200", build: func() *abi.Request {
			first, second := make([]int32, 50), make([]int32, 50)
			for i := range 50 {
				first[i], second[i] = int32(i), int32(50+i)
			}
			return benchRequest(500, 100, func(int) int32 { return 200 }, func(m int) []int32 {
				if m%4 == 0 {
					return first
				}
				return second
			})
		}, next: rejoin, nextPhase: "rejoin"},
		{name: "churn/members=200/topics=40", build: func() *abi.Request {
			rnd := rand.New(rand.NewPCG(42, 42))
			counts := make([]int32, 40)
			for i := range counts {
				counts[i] = int32(rnd.IntN(10) + 1)
			}
			return benchRequest(200, 40, func(t int) int32 { return counts[t] }, func(int) []int32 {
				var ts []int32
				for range rnd.IntN(20) {
					ts = append(ts, int32(rnd.IntN(40)))
				}
				slices.Sort(ts)
				return slices.Compact(ts)
			})
		}, next: leave50, nextPhase: "remove50"},
	}
}

// benchRequest builds a group of members over topics; member i is
// "m%05d" and topic i "t%04d".
func benchRequest(members, topics int, partitions func(t int) int32, subs func(m int) []int32) *abi.Request {
	req := &abi.Request{GroupID: "bench", Generation: 1}
	for t := range topics {
		req.Topics = append(req.Topics, abi.Topic{Name: fmt.Sprintf("t%04d", t), Exists: true, PartitionCount: partitions(t)})
	}
	for m := range members {
		req.Members = append(req.Members, abi.Member{MemberID: fmt.Sprintf("m%05d", m), Topics: subs(m), OwnedGeneration: -1})
	}
	return req
}

// report returns member i of first as it rejoins owning what resp gave it:
// as owned partitions with the generation for cooperative members, as the
// sticky user data it was handed otherwise.
func report(first *abi.Request, resp *abi.Response, i int, cooperative bool) abi.Member {
	m := first.Members[i]
	a := resp.Members[i]
	if cooperative {
		m.Owned, m.OwnedGeneration, m.Cooperative = a.Partitions, first.Generation, true
	} else {
		m.UserData = a.UserData
	}
	return m
}

// rejoin is the second phase of the uniform and hetero cases: every member
// but the first reports what it owns; the first owns nothing.
func rejoin(first *abi.Request, resp *abi.Response, cooperative bool) *abi.Request {
	next := *first
	next.Generation++
	next.Members = make([]abi.Member, len(first.Members))
	for i := range first.Members {
		next.Members[i] = report(first, resp, i, cooperative)
	}
	next.Members[0] = first.Members[0]
	return &next
}

// leave50 is the second phase of the churn case: 50 random members leave,
// the others report what they own.
func leave50(first *abi.Request, resp *abi.Response, cooperative bool) *abi.Request {
	rnd := rand.New(rand.NewPCG(7, 7))
	gone := map[int]bool{}
	for range 50 {
		gone[rnd.IntN(len(first.Members))] = true
	}
	next := *first
	next.Generation++
	next.Members = nil
	for i := range first.Members {
		if !gone[i] {
			next.Members = append(next.Members, report(first, resp, i, cooperative))
		}
	}
	return &next
}

type assignFunc func(*abi.Request) (*abi.Response, error)

// BenchmarkCooperative measures AssignCooperative on the target sizes
// (see benchCases), the assignor alone: the request is decoded and the
// response not yet encoded, as after and before the guest's codec.
func BenchmarkCooperative(b *testing.B) {
	benchAssign(b, sticky.AssignCooperative, true, false)
}

// BenchmarkSticky is BenchmarkCooperative for the eager assignor, which
// reads and writes sticky user data.
func BenchmarkSticky(b *testing.B) {
	benchAssign(b, sticky.AssignEager, false, false)
}

// BenchmarkCooperativeWithCodec adds the guest's side of the ABI to
// BenchmarkCooperative: decoding the request bytes and encoding the
// response, as a wasm call does.
func BenchmarkCooperativeWithCodec(b *testing.B) {
	benchAssign(b, sticky.AssignCooperative, true, true)
}

func benchAssign(b *testing.B, fn assignFunc, cooperative, codec bool) {
	for _, bc := range benchCases() {
		first := bc.build()
		resp, err := fn(first)
		if err != nil {
			b.Fatal(err)
		}
		second := bc.next(first, resp, cooperative)
		for _, phase := range []struct {
			name string
			req  *abi.Request
		}{{"initial", first}, {bc.nextPhase, second}} {
			b.Run(bc.name+"/"+phase.name, func(b *testing.B) {
				in := abi.AppendRequest(nil, phase.req)
				var out []byte
				b.ReportAllocs()
				for b.Loop() {
					req := phase.req
					if codec {
						if req, err = abi.DecodeRequest(in); err != nil {
							b.Fatal(err)
						}
					}
					resp, err := fn(req)
					if err != nil {
						b.Fatal(err)
					}
					if codec {
						out = abi.AppendResponse(out[:0], resp)
					}
				}
			})
		}
	}
}

// Package weighted_test checks the Rust `weighted` plugin (weighted.wasm,
// built from this directory by `make rust-wasm`, see sdk/rust/rust.mk)
// through the real wasm host: proportions and stickiness over random rounds,
// and errors for bad config. Its scenarios run with the conformance suite
// (testdata/conformance/weighted/).
package weighted_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// TestMain serves as a plugin worker when a process-isolated host of this
// test binary started it, and runs the tests otherwise.
func TestMain(m *testing.M) {
	wasmruntime.RunWorkerIfRequested()
	os.Exit(m.Run())
}

const wasmFile = "weighted.wasm"

// load loads weighted.wasm into a fresh host. A missing file fails the test,
// naming the build command: the plugin is never skipped silently.
func load(t *testing.T) *wasmruntime.Plugin {
	t.Helper()
	wasm, err := os.ReadFile(wasmFile)
	if err != nil {
		t.Fatalf("%v: build it with `make rust-wasm` (sdk/rust/rust.mk; needs Debian's rustc, cargo and libstd-rust-dev-wasm32)", err)
	}
	ctx := context.Background()
	cfg := wasmruntime.NewConfig().WithLimits(wasmruntime.DefaultLimits().WithTimeout(time.Minute))
	h, err := wasmruntime.NewHost(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	p, err := h.Load(ctx, wasmFile, wasm)
	if err != nil {
		t.Fatalf("loading %s: %v", wasmFile, err)
	}
	return p
}

// TestWeighted_DescribesItselfAndImportsNoWASI checks what an operator sees
// with `wasmassign inspect`: one assignor, both modes, and a module built for
// wasm32-unknown-unknown that needs no WASI and no AssemblyScript runtime.
func TestWeighted_DescribesItselfAndImportsNoWASI(t *testing.T) {
	info := load(t).Info()
	if len(info.Assignors) != 1 || info.Assignors[0].Name != "weighted" ||
		info.Assignors[0].Modes != abi.ModeEager|abi.ModeCooperative || info.Assignors[0].MayLeaveUnassigned {
		t.Errorf("description %+v, want the one assignor weighted, eager and cooperative, assigning everything", info.Assignors)
	}
	for _, imp := range info.Imports {
		if imp != "wasmassign.log" {
			t.Errorf("imports %s; the Rust SDK should need only wasmassign.log", imp)
		}
	}
}

// weightOf is the test's own reading of the weight rules for the configs
// used below: "billing-*=3,analytics=2", then user data "weight=N", else 1.
func weightOf(m *abi.Member) int {
	switch {
	case strings.HasPrefix(m.ClientID, "billing-"):
		return 3
	case m.ClientID == "analytics":
		return 2
	}
	var w int
	if _, err := fmt.Sscanf(string(m.UserData), "weight=%d", &w); err == nil && fmt.Sprintf("weight=%d", w) == string(m.UserData) {
		return w
	}
	return 1
}

const testWeights = "billing-*=3,analytics=2"

// randomMember returns a member with a client id and user data drawn so that
// every weight rule is exercised.
func randomMember(r *rand.Rand, id int, topics int) abi.Member {
	clients := []string{"billing-eu", "billing-us", "analytics", "reporting", "etl"}
	m := abi.Member{
		MemberID:        fmt.Sprintf("member-%03d", id),
		ClientID:        clients[r.IntN(len(clients))],
		OwnedGeneration: -1,
	}
	if r.IntN(3) == 0 {
		m.UserData = []byte(fmt.Sprintf("weight=%d", 1+r.IntN(5)))
	}
	for t := range topics {
		if r.IntN(5) != 0 {
			m.Topics = append(m.Topics, int32(t))
		}
	}
	return m
}

// byMember returns, per member index, topic index -> assigned partitions.
func byMember(resp *abi.Response) map[int32]map[int32][]int32 {
	out := map[int32]map[int32][]int32{}
	for _, ma := range resp.Members {
		for _, tp := range ma.Partitions {
			if out[ma.Member] == nil {
				out[ma.Member] = map[int32][]int32{}
			}
			out[ma.Member][tp.Topic] = append(out[ma.Member][tp.Topic], tp.Partitions...)
		}
	}
	return out
}

// checkShares checks that every member gets, of every topic, within one
// partition of its weighted share among the topic's subscribers.
func checkShares(t *testing.T, where string, req *abi.Request, got map[int32]map[int32][]int32) {
	t.Helper()
	for ti, topic := range req.Topics {
		total := 0
		for i := range req.Members {
			if slices.Contains(req.Members[i].Topics, int32(ti)) {
				total += weightOf(&req.Members[i])
			}
		}
		for i := range req.Members {
			if !slices.Contains(req.Members[i].Topics, int32(ti)) {
				continue
			}
			ideal := float64(topic.PartitionCount) * float64(weightOf(&req.Members[i])) / float64(total)
			n := len(got[int32(i)][int32(ti)])
			if math.Abs(float64(n)-ideal) >= 1 {
				t.Errorf("%s: member %s (weight %d) got %d partitions of %s, ideal %.2f", where, req.Members[i].MemberID, weightOf(&req.Members[i]), n, topic.Name, ideal)
			}
		}
	}
}

// TestWeighted_SharesAndStickinessOverRandomRounds runs random groups through
// rounds where members leave, join and report what they received, and checks
// after every round that each member holds its weighted share of every topic
// within one partition, and that a member keeps as many of its previous
// partitions of a topic as its new share allows (kept = min(had, share)).
// The host's own validation checks that every subscribed partition is
// assigned exactly once, to a subscriber.
func TestWeighted_SharesAndStickinessOverRandomRounds(t *testing.T) {
	p := load(t)
	ctx := context.Background()
	stickyChecks := 0 // member-topic pairs with a previous holding, checked
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 42))
		cooperative := seed%2 == 1
		req := &abi.Request{GroupID: "g", Generation: 1, Protocol: "weighted", Config: map[string]string{"weights": testWeights}}
		if cooperative {
			req.RebalanceProtocol = abi.Cooperative
		}
		nTopics := 1 + r.IntN(4)
		for i := range nTopics {
			req.Topics = append(req.Topics, abi.Topic{Name: fmt.Sprintf("t%d", i), Exists: true, PartitionCount: int32(r.IntN(50))})
		}
		next := 0
		for range 1 + r.IntN(8) {
			req.Members = append(req.Members, randomMember(r, next, nTopics))
			next++
		}
		for round := range 8 {
			where := fmt.Sprintf("seed %d round %d", seed, round)
			resp, err := p.Assign(ctx, "weighted", req)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			got := byMember(resp)
			checkShares(t, where, req, got)
			for i := range req.Members {
				had := map[int32][]int32{}
				for _, tp := range append(slices.Clone(req.Members[i].Owned), req.Members[i].Previous...) {
					had[tp.Topic] = tp.Partitions
				}
				for ti, prev := range had {
					now := got[int32(i)][ti]
					kept := 0
					for _, q := range now {
						if slices.Contains(prev, q) {
							kept++
						}
					}
					stickyChecks++
					if want := min(len(prev), len(now)); kept != want {
						t.Errorf("%s: member %s kept %d of its %d partitions of t%d with a share of %d, want %d", where, req.Members[i].MemberID, kept, len(prev), ti, len(now), want)
					}
				}
			}
			again, err := p.Assign(ctx, "weighted", req)
			if err != nil || !reflect.DeepEqual(again, resp) {
				t.Fatalf("%s: the same request answered differently the second time (err %v)", where, err)
			}

			// Next round: everyone reports what it got, some leave, some join.
			req.Generation++
			for i := range req.Members {
				var tps []abi.TopicPartitions
				for ti, ps := range got[int32(i)] {
					tps = append(tps, abi.TopicPartitions{Topic: ti, Partitions: ps})
				}
				slices.SortFunc(tps, func(a, b abi.TopicPartitions) int { return int(a.Topic - b.Topic) })
				if cooperative {
					req.Members[i].Owned, req.Members[i].OwnedGeneration = tps, req.Generation-1
				} else {
					req.Members[i].Previous = tps
				}
			}
			for range r.IntN(3) {
				if len(req.Members) > 1 {
					k := r.IntN(len(req.Members))
					req.Members = slices.Delete(req.Members, k, k+1)
				}
			}
			for range r.IntN(3) {
				req.Members = append(req.Members, randomMember(r, next, nTopics))
				next++
			}
		}
	}
	if stickyChecks < 200 {
		t.Errorf("only %d member-topic pairs with previous partitions were checked; the rounds do not exercise stickiness", stickyChecks)
	}
}

// TestWeighted_EqualWeightsAndSubscriptionsBalanceTotals checks the overall
// promise: with identical subscriptions every member's total is within one
// partition of its weighted ideal, even when each topic alone splits unevenly.
func TestWeighted_EqualWeightsAndSubscriptionsBalanceTotals(t *testing.T) {
	p := load(t)
	r := rand.New(rand.NewPCG(3, 3))
	for round := range 30 {
		req := &abi.Request{GroupID: "g", Protocol: "weighted", Config: map[string]string{"weights": testWeights}}
		nTopics := 1 + r.IntN(10)
		all := make([]int32, nTopics)
		totalParts := 0
		for i := range nTopics {
			n := r.IntN(7)
			totalParts += n
			req.Topics = append(req.Topics, abi.Topic{Name: fmt.Sprintf("t%02d", i), Exists: true, PartitionCount: int32(n)})
			all[i] = int32(i)
		}
		weightSum := 0
		for i := range 1 + r.IntN(6) {
			m := randomMember(r, i, 0)
			m.Topics = all
			req.Members = append(req.Members, m)
			weightSum += weightOf(&m)
		}
		resp, err := p.Assign(context.Background(), "weighted", req)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		got := byMember(resp)
		for i := range req.Members {
			n := 0
			for _, ps := range got[int32(i)] {
				n += len(ps)
			}
			ideal := float64(totalParts) * float64(weightOf(&req.Members[i])) / float64(weightSum)
			if math.Abs(float64(n)-ideal) >= 1 {
				t.Errorf("round %d: member %d got %d partitions in total, ideal %.2f", round, i, n, ideal)
			}
		}
	}
}

// TestWeighted_MalformedConfigIsAnErrorResponse checks that a config the
// plugin cannot read reaches the host as the assignor's reported error,
// naming the bad setting, so the host falls back.
func TestWeighted_MalformedConfigIsAnErrorResponse(t *testing.T) {
	p := load(t)
	base := abi.Request{
		GroupID: "g", Protocol: "weighted",
		Topics:  []abi.Topic{{Name: "t", Exists: true, PartitionCount: 3}},
		Members: []abi.Member{{MemberID: "m", ClientID: "c", Topics: []int32{0}, OwnedGeneration: -1}},
	}
	for key, value := range map[string]string{
		"weights":           "billing-*",
		"default_weight":    "0",
		"user_data_weights": "maybe",
	} {
		req := base
		req.Config = map[string]string{key: value}
		_, err := p.Assign(context.Background(), "weighted", &req)
		if !errors.Is(err, wasmruntime.ErrAssignorFailed) || !strings.Contains(err.Error(), key) {
			t.Errorf("config %s=%q: got %v, want ErrAssignorFailed naming %s", key, value, err, key)
		}
	}
}

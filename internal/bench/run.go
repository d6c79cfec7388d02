package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// NativeBalancer returns kgo's balancer for a protocol name, the comparator
// of a wasm assignor serving that protocol.
func NativeBalancer(protocol string) (kgo.GroupBalancer, bool) {
	switch protocol {
	case "range":
		return kgo.RangeBalancer(), true
	case "roundrobin":
		return kgo.RoundRobinBalancer(), true
	case "sticky":
		return kgo.StickyBalancer(), true
	case "cooperative-sticky":
		return kgo.CooperativeStickyBalancer(), true
	}
	return nil, false
}

// Options say what to compare and how often.
type Options struct {
	// Assignor is the wasm side.
	Assignor *wasmruntime.Assignor
	// Protocol is the protocol name sent in the request.
	Protocol string
	// Rebalance is the group's rebalance protocol. For Cooperative the wasm
	// side also withholds moving partitions (handover.Withhold), the work
	// kgo's cooperative balancer does in AdjustCooperative.
	Rebalance abi.RebalanceProtocol
	// Native is the kgo side.
	Native kgo.GroupBalancer
	// Plugin, when set, is the same assignor's Go package run natively: a
	// third side with the wasm side's whole path (the daemon's coordinator
	// decoding each JoinGroup, building the request, validating, withholding
	// and encoding) but no sandbox, so that wasm/plugin is the sandbox's own
	// cost.
	Plugin func(*abi.Request) (*abi.Response, error)
	// Runs is how many times each side runs each phase.
	Runs int
}

// Result is one phase of a case: median times of both sides and how many
// partitions changed owner since the previous phase.
type Result struct {
	Case       string  `json:"case"`
	Phase      string  `json:"phase"`
	Assignor   string  `json:"assignor"`
	Members    int     `json:"members"`
	Partitions int     `json:"partitions"`
	WasmMS     float64 `json:"wasm_ms"`
	NativeMS   float64 `json:"native_ms"`
	Native     string  `json:"native"`
	Ratio      float64 `json:"ratio"`
	// Moved counts the partitions whose owner in the wasm side's SyncGroup
	// assignment differs from the previous phase's, including any withheld
	// during a cooperative handover. Zero for the first phase.
	Moved int `json:"moved"`
	// NativeMoved is Moved for the kgo side.
	NativeMoved int `json:"native_moved"`
	// PluginMS is the median time of the Plugin side, and Sandbox the
	// ratio WasmMS/PluginMS; both zero without Options.Plugin.
	PluginMS float64 `json:"plugin_native_ms,omitempty"`
	Sandbox  float64 `json:"sandbox,omitempty"`
	// PeakMemoryMiB is the largest linear memory any instance of the wasm
	// side's plugin has had so far (at java-large, what a sticky instance
	// needs at the largest target size): filled in by the caller, which
	// owns the plugin.
	PeakMemoryMiB float64 `json:"wasm_peak_memory_mib,omitempty"`
}

// side is one way of turning JoinGroup members into SyncGroup assignments.
// A side made for a run serves that run's phases in order, so it may keep
// the group between them, as the daemon does.
type side func(ctx context.Context, g Group, members []kmsg.JoinGroupResponseMember) ([]kmsg.SyncGroupRequestGroupAssignment, error)

// wasm is the daemon's path (groupPath) with the plugin run in the sandbox.
func (o Options) wasm(ctx context.Context, md *coordinator.Metadata) side {
	return o.daemonPath(md, func(req *abi.Request) (*abi.Response, error) { return o.Assignor.Assign(ctx, req) })
}

// plugin is the daemon's path with the assignor's Go package called
// natively, laid out as the runtime would hand it the request: wasm/plugin
// is the sandbox's own cost.
func (o Options) plugin(md *coordinator.Metadata) side {
	return o.daemonPath(md, func(req *abi.Request) (*abi.Response, error) {
		resp, err := o.Plugin(req.For(o.Assignor.Info))
		if err != nil {
			return nil, err
		}
		return resp.LayoutOf(req), nil
	})
}

func (o Options) daemonPath(md *coordinator.Metadata, assign func(*abi.Request) (*abi.Response, error)) side {
	gp := newGroupPath(o.Protocol, o.Assignor.Info.Name, o.Rebalance, md, assign)
	return func(_ context.Context, g Group, members []kmsg.JoinGroupResponseMember) ([]kmsg.SyncGroupRequestGroupAssignment, error) {
		return gp.run(g.ID, members)
	}
}

// native does what a kgo group leader does: sort the members, balance the
// partitions of the topics they subscribe to, and encode the plan.
func (o Options) native(_ context.Context, g Group, members []kmsg.JoinGroupResponseMember) ([]kmsg.SyncGroupRequestGroupAssignment, error) {
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b kmsg.JoinGroupResponseMember) int { return joinLess(&a, &b) })
	mb, topics, err := o.Native.MemberBalancer(ms)
	if err != nil {
		return nil, fmt.Errorf("kgo %s: %w", o.Native.ProtocolName(), err)
	}
	counts := make(map[string]int32, len(topics))
	for t := range topics {
		if n, ok := g.Partitions[t]; ok {
			counts[t] = n
		}
	}
	var plan kgo.IntoSyncAssignment
	if be, ok := mb.(kgo.GroupMemberBalancerOrError); ok {
		plan, err = be.BalanceOrError(counts)
	} else {
		plan = mb.Balance(counts)
	}
	if err != nil {
		return nil, fmt.Errorf("kgo %s: %w", o.Native.ProtocolName(), err)
	}
	return plan.IntoSyncAssignment(), nil
}

// timed runs s after a garbage collection, so neither side pays for the
// other's garbage.
func timed(ctx context.Context, s side, g Group, members []kmsg.JoinGroupResponseMember) ([]kmsg.SyncGroupRequestGroupAssignment, time.Duration, error) {
	runtime.GC()
	start := time.Now()
	out, err := s(ctx, g, members)
	return out, time.Since(start), err
}

// Run benchmarks c: every run, each side (alternating which goes first)
// runs the initial phase and then, for two-phase cases, the rejoin built
// from its own initial result. Member ids carry the run number, so no run
// can reuse an earlier result.
func Run(ctx context.Context, c *Case, o Options) ([]Result, error) {
	if o.Runs < 1 {
		return nil, errors.New("runs must be at least 1")
	}
	phases := 1
	if c.Rejoin != nil {
		phases = 2
	}
	// times[phase][side] holds one duration per run; side 0 is wasm, 1
	// kgo, 2 the native plugin when there is one. Each run gets fresh
	// sides, so no run finds a group an earlier one left.
	md := metadataOf(c.Partitions)
	sides := []func() side{func() side { return o.wasm(ctx, md) }, func() side { return o.native }}
	if o.Plugin != nil {
		sides = append(sides, func() side { return o.plugin(md) })
	}
	n := len(sides)
	times := make([][][]time.Duration, phases)
	for p := range times {
		times[p] = make([][]time.Duration, n)
	}
	moved := make([]int, n)
	var rejoinMembers []Member
	for r := range o.Runs {
		suffix := fmt.Sprintf("-r%d", r)
		initial := EncodeMembers(c.Initial, suffix)
		for k := range n {
			si := (k + r) % n
			g := Group{ID: "bench-" + c.Name, Generation: 1, Protocol: o.Protocol, Rebalance: o.Rebalance, Partitions: c.Partitions}
			s := sides[si]()
			first, d, err := timed(ctx, s, g, initial)
			if err != nil {
				return nil, fmt.Errorf("%s, phase initial, %s side: %w", c.Name, sideName(si), err)
			}
			times[0][si] = append(times[0][si], d)
			if c.Rejoin == nil {
				continue
			}
			owned, err := ownedByIndex(first, c.Initial, suffix)
			if err != nil {
				return nil, fmt.Errorf("%s, %s side: %w", c.Name, sideName(si), err)
			}
			rejoinMembers = c.Rejoin(owned)
			g.Generation = 2
			second, d, err := timed(ctx, s, g, EncodeMembers(rejoinMembers, suffix))
			if err != nil {
				return nil, fmt.Errorf("%s, phase rejoin, %s side: %w", c.Name, sideName(si), err)
			}
			times[1][si] = append(times[1][si], d)
			if moved[si], err = movedBetween(first, second); err != nil {
				return nil, fmt.Errorf("%s, %s side: %w", c.Name, sideName(si), err)
			}
		}
	}
	results := make([]Result, phases)
	for p := range phases {
		members := c.Initial
		name := "initial"
		if p == 1 {
			members, name = rejoinMembers, "rejoin"
		}
		wasm, native := median(times[p][0]), median(times[p][1])
		res := Result{
			Case: c.Name, Phase: name, Assignor: o.Assignor.Info.Name,
			Members: len(members), Partitions: subscribedPartitions(c.Partitions, members),
			WasmMS: ms(wasm), NativeMS: ms(native), Native: "kgo",
		}
		if native > 0 {
			res.Ratio = math.Round(float64(wasm)/float64(native)*1000) / 1000
		}
		if p == 1 {
			res.Moved, res.NativeMoved = moved[0], moved[1]
		}
		if n == 3 {
			plugin := median(times[p][2])
			res.PluginMS = ms(plugin)
			if plugin > 0 {
				res.Sandbox = math.Round(float64(wasm)/float64(plugin)*1000) / 1000
			}
		}
		results[p] = res
	}
	return results, nil
}

func sideName(i int) string {
	switch i {
	case 0:
		return "wasm"
	case 1:
		return "kgo"
	}
	return "native plugin"
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// subscribedPartitions counts the partitions of the topics some member
// subscribes to.
func subscribedPartitions(counts map[string]int32, members []Member) int {
	seen := make(map[string]bool)
	n := 0
	for _, m := range members {
		for _, t := range m.Topics {
			if !seen[t] {
				seen[t] = true
				n += int(counts[t])
			}
		}
	}
	return n
}

// ownedByIndex maps a phase's assignments back to the index of each member
// in members, whose ids carry suffix.
func ownedByIndex(sync []kmsg.SyncGroupRequestGroupAssignment, members []Member, suffix string) ([]map[string][]int32, error) {
	byID, err := DecodeAssignments(sync)
	if err != nil {
		return nil, err
	}
	owned := make([]map[string][]int32, len(members))
	for i, m := range members {
		owned[i] = byID[m.ID+suffix]
	}
	return owned, nil
}

// movedBetween counts the partitions whose owner differs between two
// assignments, a partition nobody holds counting as owned by nobody.
func movedBetween(before, after []kmsg.SyncGroupRequestGroupAssignment) (int, error) {
	a, err := DecodeAssignments(before)
	if err != nil {
		return 0, err
	}
	b, err := DecodeAssignments(after)
	if err != nil {
		return 0, err
	}
	type tp struct {
		topic string
		p     int32
	}
	owners := func(m map[string]map[string][]int32) map[tp]string {
		o := make(map[tp]string)
		for member, topics := range m {
			for t, ps := range topics {
				for _, p := range ps {
					o[tp{t, p}] = member
				}
			}
		}
		return o
	}
	oa, ob := owners(a), owners(b)
	n := 0
	for k, v := range oa {
		if ob[k] != v {
			n++
		}
	}
	for k := range ob {
		if _, ok := oa[k]; !ok {
			n++
		}
	}
	return n, nil
}

package bench

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/plugins/builtin"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// ownedOf rebuilds a member's owned map from a request, by topic name.
func ownedOf(req *abi.Request, m *abi.Member) map[string][]int32 {
	if len(m.Owned) == 0 {
		return nil
	}
	out := make(map[string][]int32)
	for _, tp := range m.Owned {
		name := req.Topics[tp.Topic].Name
		out[name] = append(out[name], tp.Partitions...)
	}
	return out
}

// TestGroupPath_ThePluginSeesWhatMembersOwnAndSubscribe runs the daemon's
// path over two phases: members join, then rejoin reporting owned
// partitions at the generation they got. The request the plugin sees on
// rejoin must carry each member's subscription (sorted), what it reports
// owning and at which generation, members in Kafka's order (static by
// instance id first), and a topic table sorted by name in which a topic the
// cluster lacks is marked absent.
func TestGroupPath_ThePluginSeesWhatMembersOwnAndSubscribe(t *testing.T) {
	tests := []struct {
		name    string
		members []Member
	}{
		{"owned and unowned dynamic members", []Member{
			{ID: "b", Topics: []string{"t1", "t0"}, Owned: map[string][]int32{"t0": {2, 0}, "t1": {1}}, Generation: 1},
			{ID: "a", Topics: []string{"t0"}, Generation: -1},
		}},
		{"static members sort first and keep what they own", []Member{
			{ID: "a", Topics: []string{"t0"}, Owned: map[string][]int32{"t0": {1}}, Generation: 1},
			{ID: "z", InstanceID: "i1", Topics: []string{"t1"}, Owned: map[string][]int32{"t1": {0, 2}}, Generation: 1},
			{ID: "y", InstanceID: "i0", Topics: []string{"t0", "t1"}, Generation: -1},
		}},
		{"owned partitions of a deleted topic", []Member{
			{ID: "a", Topics: []string{"t0"}, Owned: map[string][]int32{"gone": {0}, "t0": {0}}, Generation: 1},
		}},
	}
	partitions := map[string]int32{"t0": 3, "t1": 3}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req *abi.Request
			gp := newGroupPath("range", "range", abi.Eager, metadataOf(partitions), func(r *abi.Request) (*abi.Response, error) {
				req = r
				return rangeassignor.Assign(r)
			})
			first := slices.Clone(tt.members)
			for i := range first {
				first[i].Owned, first[i].Generation = nil, -1
			}
			if _, err := gp.run("g", EncodeMembers(first, "-x")); err != nil {
				t.Fatal(err)
			}
			if _, err := gp.run("g", EncodeMembers(tt.members, "-x")); err != nil {
				t.Fatal(err)
			}
			if len(req.Members) != len(tt.members) {
				t.Fatalf("got %d members, want %d", len(req.Members), len(tt.members))
			}
			if !slices.IsSortedFunc(req.Topics, func(a, b abi.Topic) int { return compareStrings(a.Name, b.Name) }) {
				t.Errorf("topic table not sorted by name: %v", req.Topics)
			}
			for i := 1; i < len(req.Members); i++ {
				a, b := &req.Members[i-1], &req.Members[i]
				aStatic, bStatic := a.InstanceID != "", b.InstanceID != ""
				if (!aStatic && bStatic) || (aStatic == bStatic && aStatic && a.InstanceID > b.InstanceID) {
					t.Errorf("members %q and %q out of Kafka order", a.MemberID, b.MemberID)
				}
			}
			for _, want := range tt.members {
				i := slices.IndexFunc(req.Members, func(m abi.Member) bool { return m.MemberID == gp.ids[want.ID+"-x"] })
				if i < 0 {
					t.Fatalf("member %q missing", want.ID)
				}
				got := &req.Members[i]
				if len(want.Owned) > 0 && got.OwnedGeneration != want.Generation {
					t.Errorf("%s: owned generation %d, want %d", want.ID, got.OwnedGeneration, want.Generation)
				}
				if (want.InstanceID == "") != (got.InstanceID == "") {
					t.Errorf("%s: instance id %q, want one only if %q set", want.ID, got.InstanceID, want.InstanceID)
				}
				if g := ownedOf(req, got); !equalOwned(g, sortedOwned(want.Owned)) {
					t.Errorf("%s: owned %v, want %v", want.ID, g, want.Owned)
				}
				var subs []string
				for _, ti := range got.Topics {
					subs = append(subs, req.Topics[ti].Name)
				}
				if !slices.Equal(subs, slices.Sorted(slices.Values(want.Topics))) {
					t.Errorf("%s: topics %v, want %v", want.ID, subs, want.Topics)
				}
			}
			for _, tp := range req.Topics {
				n, ok := partitions[tp.Name]
				if tp.Exists != ok || tp.PartitionCount != n {
					t.Errorf("topic %s: exists %v count %d, want %v %d", tp.Name, tp.Exists, tp.PartitionCount, ok, n)
				}
			}
		})
	}
}

// sortedOwned is owned with each topic's partitions ascending, as the
// coordinator hands them to a plugin.
func sortedOwned(owned map[string][]int32) map[string][]int32 {
	if owned == nil {
		return nil
	}
	out := make(map[string][]int32, len(owned))
	for t, ps := range owned {
		out[t] = slices.Sorted(slices.Values(ps))
	}
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func equalOwned(a, b map[string][]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// coverage counts how often each partition is assigned.
func coverage(t *testing.T, sync []kmsg.SyncGroupRequestGroupAssignment) map[string]map[int32]int {
	t.Helper()
	byID, err := DecodeAssignments(sync)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]map[int32]int)
	for _, topics := range byID {
		for tname, ps := range topics {
			if out[tname] == nil {
				out[tname] = make(map[int32]int)
			}
			for _, p := range ps {
				out[tname][p]++
			}
		}
	}
	return out
}

// Both sides must produce a complete assignment of the same partitions, to
// every member, or the comparison times different work.
func TestRun_BothSidesAssignEveryPartitionOnce(t *testing.T) {
	ctx := context.Background()
	h, err := wasmruntime.NewHost(ctx, wasmruntime.NewConfig().
		WithLogger(slog.New(slog.DiscardHandler)).
		WithCompilationCacheDir(os.Getenv("WASMASSIGN_TEST_CACHE")))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	reg := wasmruntime.NewRegistry(h)
	if err := reg.LoadBuiltins(ctx, builtin.FS()); err != nil {
		t.Fatal(err)
	}
	c := uniform("small", 7, 3, 10)
	for _, name := range []string{"range", "roundrobin", "sticky", "cooperative-sticky"} {
		t.Run(name, func(t *testing.T) {
			a, ok := reg.Lookup(name)
			if !ok {
				t.Fatalf("no built-in %s", name)
			}
			native, _ := NativeBalancer(name)
			o := Options{Assignor: a, Protocol: name, Native: native, Runs: 1}
			g := Group{ID: "g", Generation: 1, Protocol: name, Partitions: c.Partitions}
			join := EncodeMembers(c.Initial, "-0")
			for side, run := range map[string]side{"wasm": o.wasm(ctx, metadataOf(c.Partitions)), "kgo": o.native} {
				sync, err := run(ctx, g, join)
				if err != nil {
					t.Fatalf("%s: %v", side, err)
				}
				if len(sync) != len(c.Initial) {
					t.Errorf("%s: %d member assignments, want %d", side, len(sync), len(c.Initial))
				}
				cov := coverage(t, sync)
				for tname, n := range c.Partitions {
					for p := range n {
						if cov[tname][p] != 1 {
							t.Errorf("%s: %s-%d assigned %d times", side, tname, p, cov[tname][p])
						}
					}
				}
			}
			res, err := Run(ctx, c, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 2 || res[0].Phase != "initial" || res[1].Phase != "rejoin" || res[0].Partitions != 30 {
				t.Errorf("results %+v", res)
			}
		})
	}
}

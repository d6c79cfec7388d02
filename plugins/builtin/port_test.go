package builtin_test

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	"github.com/wasmassign/wasmassign/plugins/leaderrack"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/plugins/roundrobin"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// TestBuiltins_RustPortsAnswerLikeTheirGoPackages holds the built-in roundrobin modules, which are Rust ports, to packages plugins/range
// and plugins/roundrobin, their references: the same request, through the
// sandbox and natively, must give every member the same partitions of every
// topic. Guarantees
// alone would let the ports drift apart where Kafka's rules leave a choice
// (which subscriber takes the extra partition, which rack a partition
// follows), and users would see assignments change with the build. The
// groups are range's random ones (co-partitioned topics are common), half
// with racks; a group's tables also come shuffled, which the host
// never does but a port must not depend on.
func TestBuiltins_RustPortsAnswerLikeTheirGoPackages(t *testing.T) {
	ctx := context.Background()
	cfg := wasmruntime.NewConfig().
		WithIsolation(wasmruntime.IsolationInProcess).
		WithLogger(slog.New(slog.DiscardHandler)).
		WithCompilationCacheDir(testutil.SharedCacheDir())
	h, err := wasmruntime.NewHost(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	for _, tc := range []struct {
		file, name string
		native     func(*abi.Request) (*abi.Response, error)
	}{
		{"range", "range", rangeassignor.Assign},
		{"roundrobin", "roundrobin", roundrobin.Assign},
		{"leaderrack", leaderrack.Name, leaderrack.Assign},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := h.LoadFile(ctx, testutil.Artefact(t, "plugins/builtin/wasm/"+tc.file+".wasm"))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := p.Assignor(tc.name); !ok {
				t.Fatalf("the module has no assignor %q", tc.name)
			}
			r := rand.New(rand.NewPCG(5, 881))
			const groups = 1500
			racksMattered := 0
			for i := range groups {
				req := assignortest.RandomGroup(r, assignortest.RangeShape(i%2 == 0))
				if i%3 == 2 {
					req = assignortest.Shuffled(r, req)
				}
				want, err := tc.native(req)
				if err != nil {
					t.Fatalf("group %d natively: %v", i, err)
				}
				got, err := p.Assign(ctx, tc.name, req)
				if err != nil {
					t.Fatalf("group %d through the module: %v\nrequest %+v", i, err, req)
				}
				// Entries over topic lists stand for the same partitions
				// of each topic of their list: compared as plans, member
				// by member and topic by topic.
				if g, w := assignortest.AsPlan(req, got.Expanded()), assignortest.AsPlan(req, want); !g.Equal(w) {
					t.Fatalf("group %d: the module assigned\n%v\nthe package\n%v\nrequest %+v", i, g, w, req)
				}

				// Racks mattered where the answer is not the classic range
				// (for roundrobin, which ignores racks, never).
				plain, err := rangeassignor.AssignWithoutRacks(req)
				if err == nil && !bytes.Equal(abi.AppendResponse(nil, plain), abi.AppendResponse(nil, want)) {
					racksMattered++
				}
			}
			// The comparison is worth something only if the rack passes
			// decided a good share of the groups.
			if tc.name != "roundrobin" && racksMattered < groups/10 {
				t.Fatalf("racks changed the answer in only %d of %d groups", racksMattered, groups)
			}
			t.Logf("%d groups alike", groups)
		})
	}
}

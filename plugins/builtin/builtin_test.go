package builtin_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/plugins/builtin"
	"github.com/wasmassign/wasmassign/plugins/leaderrack"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/plugins/roundrobin"
	"github.com/wasmassign/wasmassign/plugins/sticky"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// randomRequest builds a group with racks, placement, static and dynamic
// members and mixed subscriptions, including a topic that does not exist.
// Most members report a history, as the sticky assignors read it: owned
// partitions with a generation, StickyAssignor user data (or bytes that do
// not decode as such), and the host's previous assignment.
func randomRequest(rng *rand.Rand) *abi.Request {
	req := &abi.Request{GroupID: "g", Generation: int32(rng.IntN(10))}
	racks := []string{"", "a", "b", "c"}
	for b := range 1 + rng.IntN(4) {
		req.Brokers = append(req.Brokers, abi.Broker{ID: int32(b), Rack: racks[rng.IntN(len(racks))]})
	}
	nb := len(req.Brokers)
	for rf := 1; rf <= 2; rf++ {
		for first := range nb {
			set := []int32{int32(first)}
			if rf == 2 {
				set = append(set, int32((first+1)%nb))
			}
			req.ReplicaSets = append(req.ReplicaSets, set)
		}
	}
	for ti := range 1 + rng.IntN(5) {
		t := abi.Topic{Name: fmt.Sprintf("t%d", ti), Exists: true, PartitionCount: int32(rng.IntN(12))}
		for range t.PartitionCount {
			set := uint32(rng.IntN(len(req.ReplicaSets)))
			t.Partitions = append(t.Partitions, abi.Partition{Leader: req.ReplicaSets[set][0], Replicas: set, ISR: set})
		}
		req.Topics = append(req.Topics, t)
	}
	req.Topics = append(req.Topics, abi.Topic{Name: "zz-missing"})
	for mi := range 1 + rng.IntN(7) {
		m := abi.Member{MemberID: fmt.Sprintf("m-%02d", rng.IntN(100)*10+mi), Rack: racks[rng.IntN(len(racks))], OwnedGeneration: -1}
		if rng.IntN(3) == 0 {
			m.InstanceID = fmt.Sprintf("i-%02d", mi)
		}
		for ti := range req.Topics {
			if rng.IntN(3) > 0 {
				m.Topics = append(m.Topics, int32(ti))
			}
		}
		randomHistory(rng, req, &m)
		req.Members = append(req.Members, m)
	}
	return req
}

// randomHistory gives m, two times in three, a random past: owned
// partitions of some topics (also ones it no longer subscribes to, and
// partitions that no longer exist), a generation up to the request's,
// user data, and a previous assignment.
func randomHistory(rng *rand.Rand, req *abi.Request, m *abi.Member) {
	if rng.IntN(3) == 0 {
		return
	}
	some := func() []abi.TopicPartitions {
		var out []abi.TopicPartitions
		for ti, t := range req.Topics {
			if rng.IntN(2) == 0 {
				continue
			}
			var ps []int32
			for p := range t.PartitionCount + 1 {
				if rng.IntN(3) == 0 {
					ps = append(ps, p)
				}
			}
			if ps != nil {
				out = append(out, abi.TopicPartitions{Topic: int32(ti), Partitions: ps})
			}
		}
		return out
	}
	m.Cooperative = rng.IntN(2) == 0
	m.OwnedGeneration = int32(rng.IntN(int(req.Generation)+2)) - 1
	m.Owned = some()
	m.Previous = some()
	switch rng.IntN(3) {
	case 0:
		m.UserData = stickyUserData(req, m.Owned, m.OwnedGeneration)
	case 1:
		m.UserData = make([]byte, rng.IntN(12))
		for i := range m.UserData {
			m.UserData[i] = byte(rng.IntN(256))
		}
	}
}

// stickyUserData encodes owned as StickyAssignor's v1 user data, big-endian:
// an array of {topic name, partitions}, then the generation.
func stickyUserData(req *abi.Request, owned []abi.TopicPartitions, generation int32) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(owned)))
	for _, tp := range owned {
		name := req.Topics[tp.Topic].Name
		b = binary.BigEndian.AppendUint16(b, uint16(len(name)))
		b = append(b, name...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(tp.Partitions)))
		for _, p := range tp.Partitions {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
	}
	return binary.BigEndian.AppendUint32(b, uint32(generation))
}

func newHost(t *testing.T) *wasmruntime.Host {
	t.Helper()
	cfg := wasmruntime.NewConfig().WithCompilationCacheDir(filepath.Join(os.TempDir(), "wasmassign-test-cache"))
	h, err := wasmruntime.NewHost(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

// TestCGuest_AnswersLikeBuiltinRoundRobin is the proof that the ABI is
// language-neutral: a round-robin assignor written in C from sdk/ABI.md
// alone assigns exactly like the Go built-in on random groups.
func TestCGuest_AnswersLikeBuiltinRoundRobin(t *testing.T) {
	ctx := context.Background()
	p, err := newHost(t).LoadFile(ctx, testutil.Artefact(t, "testdata/guests/c/roundrobin.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 5))
	for i := 0; i < 300; i++ {
		req := randomRequest(rng)
		want, err := roundrobin.Assign(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.Assign(ctx, "c-roundrobin", req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if g, w := byMember(req, got), byMember(req, want); g != w {
			t.Fatalf("request %d:\nC:  %s\nGo: %s", i, g, w)
		}
	}
}

// byMember renders an assignment as member -> topic -> partitions, leaving
// out empty entries, so responses that list members differently compare.
func byMember(req *abi.Request, resp *abi.Response) string {
	m := map[string]map[string][]int32{}
	for _, ma := range resp.Members {
		for _, tp := range ma.Partitions {
			if len(tp.Partitions) == 0 {
				continue
			}
			id := req.Members[ma.Member].MemberID
			if m[id] == nil {
				m[id] = map[string][]int32{}
			}
			name := req.Topics[tp.Topic].Name
			m[id][name] = append(m[id][name], tp.Partitions...)
		}
	}
	return fmt.Sprint(m)
}

// TestBuiltins_WasmAnswersLikeNative checks that each built-in, compiled to
// wasm and run through the sandbox, gives byte-identical answers to its Go
// package called directly: the sandbox changes nothing but the cost.
func TestBuiltins_WasmAnswersLikeNative(t *testing.T) {
	ctx := context.Background()
	reg := wasmruntime.NewRegistry(newHost(t))
	if err := reg.LoadBuiltins(ctx, builtin.FS()); err != nil {
		t.Fatal(err)
	}
	natives := map[string]func(*abi.Request) (*abi.Response, error){
		"range":                rangeassignor.Assign,
		"roundrobin":           roundrobin.Assign,
		leaderrack.Name:        leaderrack.Assign,
		sticky.EagerName:       sticky.AssignEager,
		sticky.CooperativeName: sticky.AssignCooperative,
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for name, native := range natives {
		a, ok := reg.Lookup(name)
		if !ok {
			t.Fatalf("built-in %s is missing", name)
		}
		for i := 0; i < 150; i++ {
			req := randomRequest(rng)
			want, err := native(req)
			if err != nil {
				t.Fatalf("%s native: %v", name, err)
			}
			got, err := a.Assign(ctx, req)
			if err != nil {
				t.Fatalf("%s wasm, request %d: %v", name, i, err)
			}
			// The built-ins answer grouped requests (the host sends them
			// such) with entries over topic lists, which the host expands.
			if !bytes.Equal(abi.AppendResponse(nil, got.Expanded()), abi.AppendResponse(nil, want)) {
				t.Fatalf("%s request %d: wasm %+v, native %+v", name, i, got, want)
			}
		}
	}
}

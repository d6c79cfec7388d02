package groupview

import (
	"math/rand/v2"
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// checkRacks fails t unless rk numbers req's racks as Racks promises, by
// name: members and brokers on the same rack share an id, different racks
// never do, member racks come first, and brokers without a rack are absent.
func checkRacks(t *testing.T, req *abi.Request, rk *Racks) {
	t.Helper()
	name := map[int32]string{} // id -> rack name
	id := func(who string, r int32, rack string) {
		t.Helper()
		if r < 0 || r >= rk.Total {
			t.Fatalf("%s on rack %q has id %d of %d", who, rack, r, rk.Total)
		}
		if n, ok := name[r]; ok && n != rack {
			t.Fatalf("%s: rack id %d names both %q and %q", who, r, n, rack)
		}
		name[r] = rack
	}
	memberRacks := map[string]bool{}
	for m, mem := range req.Members {
		r := rk.Member[m]
		if mem.Rack == "" {
			if r != -1 {
				t.Fatalf("member %q has no rack but id %d", mem.MemberID, r)
			}
			continue
		}
		if r >= rk.MemberRacks {
			t.Fatalf("member %q: rack id %d is not below MemberRacks %d", mem.MemberID, r, rk.MemberRacks)
		}
		id("member "+mem.MemberID, r, mem.Rack)
		memberRacks[mem.Rack] = true
	}
	if int(rk.MemberRacks) != len(memberRacks) {
		t.Fatalf("MemberRacks %d, members are on %d racks", rk.MemberRacks, len(memberRacks))
	}
	for _, b := range req.Brokers {
		r, ok := rk.Broker[b.ID]
		if b.Rack == "" {
			if ok {
				t.Fatalf("broker %d has no rack but id %d", b.ID, r)
			}
			continue
		}
		if !ok {
			t.Fatalf("broker %d on rack %q is missing", b.ID, b.Rack)
		}
		id("broker", r, b.Rack)
		if memberRacks[b.Rack] != (r < rk.MemberRacks) {
			t.Fatalf("broker %d on rack %q has id %d; members are on %d racks", b.ID, b.Rack, r, rk.MemberRacks)
		}
	}
	if int(rk.Total) != len(name) {
		t.Fatalf("Total %d, but %d racks are named", rk.Total, len(name))
	}
}

func TestNewRacks_NumbersMemberRacksFirst(t *testing.T) {
	req := &abi.Request{
		Brokers: []abi.Broker{{ID: 7, Rack: "z"}, {ID: 1, Rack: "b"}, {ID: 3}, {ID: 2, Rack: "z"}},
		Members: []abi.Member{{MemberID: "m0", Rack: "b"}, {MemberID: "m1"}, {MemberID: "m2", Rack: "a"}, {MemberID: "m3", Rack: "b"}},
	}
	rk := NewRacks(req)
	if rk == nil {
		t.Fatal("NewRacks returned nil with member racks")
	}
	checkRacks(t, req, rk)
	// The members name b, then a; z is only a broker rack.
	want := Racks{Member: []int32{0, -1, 1, 0}, MemberRacks: 2, Total: 3, Broker: map[int32]int32{7: 2, 1: 0, 2: 2}}
	if rk.MemberRacks != want.MemberRacks || rk.Total != want.Total || len(rk.Broker) != len(want.Broker) {
		t.Fatalf("got %+v, want %+v", *rk, want)
	}
	for m, r := range want.Member {
		if rk.Member[m] != r {
			t.Fatalf("member %d: id %d, want %d", m, rk.Member[m], r)
		}
	}
	for b, r := range want.Broker {
		if got, ok := rk.Broker[b]; !ok || got != r {
			t.Fatalf("broker %d: id %d (present %v), want %d", b, got, ok, r)
		}
	}
}

func TestNewRacks_NilWithoutMemberRacks(t *testing.T) {
	req := &abi.Request{
		Brokers: []abi.Broker{{ID: 1, Rack: "a"}},
		Members: []abi.Member{{MemberID: "m0"}, {MemberID: "m1"}},
	}
	if rk := NewRacks(req); rk != nil {
		t.Fatalf("got %+v, want nil: no member has a rack", *rk)
	}
}

// TestNewRacks_RandomGroupsKeepTheNumbering checks the numbering by name on
// random groups with racks, where some members and brokers have none and
// broker racks may or may not be member racks.
func TestNewRacks_RandomGroupsKeepTheNumbering(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 81))
	shape := assignortest.Shape{Topics: 4, MissingOneIn: 6, PartitionCounts: assignortest.Below(6), Racks: true, Members: 10, UniformOneIn: 2}
	withRacks := 0
	for range 300 {
		req := assignortest.RandomGroup(r, shape)
		rk := NewRacks(req)
		anyRack := false
		for _, m := range req.Members {
			anyRack = anyRack || m.Rack != ""
		}
		if (rk != nil) != anyRack {
			t.Fatalf("NewRacks returned %v for a group where some member has a rack: %v", rk, anyRack)
		}
		if rk != nil {
			withRacks++
			checkRacks(t, req, rk)
		}
	}
	if withRacks < 100 {
		t.Fatalf("only %d of 300 groups had member racks", withRacks)
	}
}

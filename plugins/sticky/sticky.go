package sticky

import (
	"fmt"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Assignor names, which are also the Kafka client protocol names they answer
// for.
const (
	EagerName       = "sticky"
	CooperativeName = "cooperative-sticky"
)

// EagerInfo describes the eager sticky assignor to the host.
func EagerInfo() abi.AssignorInfo {
	return info(EagerName, "Kafka's StickyAssignor: balanced, keeps what members owned (from sticky user data), rack-aware per KIP-881")
}

// CooperativeInfo describes the cooperative sticky assignor to the host. It
// returns target assignments; the host withholds partitions that change
// owner for one generation.
func CooperativeInfo() abi.AssignorInfo {
	return info(CooperativeName, "Kafka's CooperativeStickyAssignor: balanced, keeps owned partitions, rack-aware per KIP-881")
}

// info is what both assignors declare: the protocol of their name, and both
// modes, because the host does the KIP-429 withholding for cooperative
// groups.
func info(name, description string) abi.AssignorInfo {
	return abi.AssignorInfo{
		Name:        name,
		Version:     "1.0.0",
		Protocols:   []string{name},
		Modes:       abi.ModeEager | abi.ModeCooperative,
		Grouped:     true,
		Description: description,
	}
}

// AssignEager computes Kafka's StickyAssignor assignment for req, with
// previous ownership read from each member's sticky user data (or, when no
// member sends any, from the host's previous assignment). Every member gets
// one MemberAssignment, in request order, carrying v1 sticky user data for
// req.Generation.
func AssignEager(req *abi.Request) (*abi.Response, error) {
	return assign(req, false)
}

// AssignCooperative computes Kafka's CooperativeStickyAssignor target
// assignment for req, with previous ownership taken from each member's owned
// partitions (or, when no member reports any, from the host's previous
// assignment). Every member gets one MemberAssignment, in request order.
func AssignCooperative(req *abi.Request) (*abi.Response, error) {
	return assign(req, true)
}

func assign(req *abi.Request, cooperative bool) (*abi.Response, error) {
	name := EagerName
	if cooperative {
		name = CooperativeName
	}
	g, err := newGroup(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	g.cooperative = cooperative
	kept := g.settle(g.claims(cooperative))
	rk := newRacks(g)
	if rk != nil && !allContiguous(kept) {
		// Rack mode looks at every partition's replicas anyway.
		kept = g.unstride(kept)
	}
	var runs []claim
	if g.uniform {
		runs = g.assignUniform(g.order, g.allRanks(), kept, rk)
	} else {
		runs = g.assignGeneral(kept, rk)
	}
	return g.response(runs, !cooperative, req.Generation), nil
}

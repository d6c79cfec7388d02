package leaderrack

import "github.com/wasmassign/wasmassign/sdk/go/abi"

// racks numbers the racks that some member is on, 0 to n-1, and says which
// of them each member and each broker is on. A rack no member is on can
// never match, so it gets no number: its brokers count as having no rack.
type racks struct {
	n      int32
	member []int32 // per member index; -1 when the member has no rack
	// anyBroker is true when some broker is on a member's rack; without one
	// no partition can match and every topic is plain range.
	anyBroker bool

	// A broker's rack is dense[id] when every broker id is in
	// [0, denseLimit), otherwise sparse[id]; -1 or absent for none.
	dense  []int32
	sparse map[int32]int32
}

// denseLimit bounds the broker ids that racks keeps in a table rather than
// a map: 256 KiB at most, and one array index per lookup, which matters at a
// million lookups per assignment.
const denseLimit = 1 << 16

// newRacks reads the members' and the brokers' racks.
func newRacks(req *abi.Request) *racks {
	id := make(map[string]int32)
	rk := &racks{member: make([]int32, len(req.Members))}
	for m := range req.Members {
		name := req.Members[m].Rack
		if name == "" {
			rk.member[m] = -1
			continue
		}
		r, ok := id[name]
		if !ok {
			r = int32(len(id))
			id[name] = r
		}
		rk.member[m] = r
	}
	rk.n = int32(len(id))
	if rk.n == 0 {
		return rk
	}

	top := int32(-1)
	for _, b := range req.Brokers {
		if b.ID < 0 || b.ID >= denseLimit {
			top = denseLimit
			break
		}
		top = max(top, b.ID)
	}
	if top < denseLimit {
		rk.dense = make([]int32, top+1)
		for i := range rk.dense {
			rk.dense[i] = -1
		}
	} else {
		rk.sparse = make(map[int32]int32, len(req.Brokers))
	}
	for _, b := range req.Brokers {
		r, ok := id[b.Rack]
		if !ok {
			r = -1
		}
		rk.anyBroker = rk.anyBroker || ok
		if rk.sparse != nil {
			rk.sparse[b.ID] = r
		} else {
			rk.dense[b.ID] = r
		}
	}
	return rk
}

// broker returns the rack of broker id, or -1 when it has none that a
// member is on, or is not in the broker list (an offline broker, or -1 for
// an unknown leader).
func (rk *racks) broker(id int32) int32 {
	if rk.sparse != nil {
		if r, ok := rk.sparse[id]; ok {
			return r
		}
		return -1
	}
	if id < 0 || int(id) >= len(rk.dense) {
		return -1
	}
	return rk.dense[id]
}

package groupview

import "github.com/wasmassign/wasmassign/sdk/go/abi"

// Racks numbers the racks of a request the way the rack-aware assignors
// (KIP-881) compare them: as small integers rather than names. Racks that
// some member is on have ids 0 to MemberRacks-1, in the order the members
// first name them; racks that only brokers are on have the ids after those.
// A partition matches a member when one of its replicas' brokers has the
// member's rack id, so a rack id at or above MemberRacks can never match,
// yet it still tells partitions on different racks apart.
type Racks struct {
	// Member[m] is the rack id of member m, or -1 when it has no rack.
	Member []int32
	// MemberRacks is the number of racks some member is on.
	MemberRacks int32
	// Total is the number of distinct racks of members and brokers.
	Total int32
	// Broker maps the id of every broker that has a rack to its rack id. A
	// broker without a rack is absent: it adds nothing to a partition's
	// racks, like a replica whose Node has a null rack in Kafka.
	Broker map[int32]int32
}

// NewRacks reads the racks of req's members and brokers. It returns nil
// when no member has a rack: Kafka then never uses rack-aware assignment,
// so the brokers are not read at all.
func NewRacks(req *abi.Request) *Racks {
	ids := make(map[string]int32)
	member := make([]int32, len(req.Members))
	for m := range req.Members {
		name := req.Members[m].Rack
		if name == "" {
			member[m] = -1
			continue
		}
		id, ok := ids[name]
		if !ok {
			id = int32(len(ids))
			ids[name] = id
		}
		member[m] = id
	}
	if len(ids) == 0 {
		return nil
	}
	rk := &Racks{Member: member, MemberRacks: int32(len(ids)), Broker: make(map[int32]int32, len(req.Brokers))}
	for _, b := range req.Brokers {
		if b.Rack == "" {
			continue
		}
		id, ok := ids[b.Rack]
		if !ok {
			id = int32(len(ids))
			ids[b.Rack] = id
		}
		rk.Broker[b.ID] = id
	}
	rk.Total = int32(len(ids))
	return rk
}

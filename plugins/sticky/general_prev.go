package sticky

import "encoding/binary"

// previousGeneration returns Kafka's prevAssignment for the general
// builder, per global partition: of the members that claim it in a
// generation below the newest any member reports, the one with the highest
// such generation (the first in member order on ties), or -1. It returns
// nil when no partition has one, which is the usual case: every member
// reports the same generation.
//
// Which claims count depends on the assignor (group.cooperative): owned
// partitions for cooperative-sticky, user data for sticky.
func (g *group) previousGeneration(holder []int32) []int32 {
	req := g.req
	cooperative := g.cooperative
	// Kafka's maxGeneration counts members that own nothing too.
	newest := int32(defaultGeneration)
	for m := range req.Members {
		mem := &req.Members[m]
		gen := stickyUserDataGeneration(mem.UserData)
		if cooperative {
			if gen = mem.OwnedGeneration; gen < 0 {
				gen = cooperativeUserDataGeneration(mem.UserData)
			}
		}
		newest = max(newest, gen)
	}
	claims := g.claims(cooperative)
	for i := range claims {
		newest = max(newest, claims[i].gen)
	}
	var prev []int32
	var gen []int32
	for i := range claims {
		c := &claims[i]
		if c.gen >= newest {
			continue
		}
		if prev == nil {
			prev = make([]int32, len(holder))
			gen = make([]int32, len(holder))
			for x := range prev {
				prev[x] = -1
			}
		}
		for k := range c.n {
			x := c.start + k*c.stride()
			if prev[x] < 0 || c.gen > gen[x] || (c.gen == gen[x] && g.rank[c.member] < g.rank[prev[x]]) {
				prev[x], gen[x] = c.member, c.gen
			}
		}
	}
	return prev
}

// stickyUserDataGeneration returns the generation of StickyAssignor user
// data: the int32 after the assignment array in v1, and -1 for v0, for
// user data that does not decode, or for none (see appendStickyUserData
// for the layout).
func stickyUserDataGeneration(ud []byte) int32 {
	r := beReader{b: ud, ok: true}
	topics := r.count()
	for i := 0; i < topics && r.ok; i++ {
		r.str()
		if k := r.count(); r.need(4 * k) {
			r.off += 4 * k
		}
	}
	if !r.ok || len(ud)-r.off < 4 {
		return defaultGeneration
	}
	return int32(binary.BigEndian.Uint32(ud[r.off:]))
}

package guest

import "runtime/metrics"

// The collections forced between calls (exports_wasip1.go explains why) come
// after collectEvery calls, or sooner once collectAfterBytes have been
// allocated since the last one.
//
// A forced collection costs half a millisecond to two milliseconds under
// wazero, so collectEvery trades per-call cost against how soon the heap
// settles into its cycle; at 32, repeated requests stopped growing memory
// within 60 calls in every case measured.
const (
	collectEvery      = 32
	collectAfterBytes = 1 << 20
)

// collector paces the forced collections: it counts calls and bytes
// allocated since the last one, and decides when the next one runs. Its
// decisions depend only on the sequence of calls and idle calls, and on
// what they allocate, never on time, so a repeated request drives the heap
// through the same cycle on every instance.
type collector struct {
	calls        int               // calls since the last collection
	allocs       [1]metrics.Sample // read buffer for the cumulative heap allocations
	allocsAtLast uint64            // cumulative heap allocations after the last collection
	collected    bool              // whether a collection has run yet
	// owed says that a call made a collection due and it waits for the
	// host's next idle call.
	owed bool
	// hostIdles says that the host has called wasmassign_idle, so it runs
	// housekeeping between calls and collections can wait for it.
	hostIdles bool
}

// due says whether the policy asks for a collection, given the cumulative
// heap allocations now.
func (c *collector) due(allocs uint64) bool {
	return c.calls >= collectEvery || allocs-c.allocsAtLast >= collectAfterBytes
}

// afterCall counts a finished call and says whether to collect now, inside
// the call. A due collection waits for idle when the host calls it, unless
// the host has let a whole collectEvery further calls pass without one: a
// host that stopped calling idle must not stop the collections.
func (c *collector) afterCall(allocs uint64) bool {
	c.calls++
	if !c.owed && c.due(allocs) {
		c.owed = true
	}
	if !c.owed {
		return false
	}
	return !c.hostIdles || c.calls >= 2*collectEvery
}

// idle notes that the host calls idle, and says whether to collect now:
// when a call made a collection due, or, before any call since the last
// collection, when the policy asks for one already (as it does after the
// start-up's allocations). After a call, afterCall has judged the same
// allocations, so allocs, which reads the runtime's metrics, is called only
// when no call came since the last collection.
func (c *collector) idle(allocs func() uint64) bool {
	c.hostIdles = true
	if c.owed {
		return true
	}
	return c.calls == 0 && c.due(allocs())
}

// didCollect records a collection that has just run.
func (c *collector) didCollect(allocs uint64) {
	c.calls, c.allocsAtLast = 0, allocs
	c.collected, c.owed = true, false
}

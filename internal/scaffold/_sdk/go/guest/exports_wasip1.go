//go:build wasip1

package guest

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"unsafe"
)

//go:wasmimport wasmassign log
func wasmLog(level int32, ptr unsafe.Pointer, size int32)

func hostLog(level Level, msg string) {
	if msg == "" {
		return
	}
	wasmLog(int32(level), unsafe.Pointer(unsafe.StringData(msg)), int32(len(msg)))
}

//go:wasmexport wasmassign_abi_version
func exportABIVersion() int32 { return 1 }

//go:wasmexport wasmassign_alloc
func exportAlloc(size int32) uint32 {
	if size <= 0 {
		return 0
	}
	b := mod.alloc(int(size))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	mod.live[p] = b
	return uint32(p)
}

//go:wasmexport wasmassign_free
func exportFree(ptr uint32, size int32) {
	b, ok := mod.live[uintptr(ptr)]
	if !ok {
		return
	}
	delete(mod.live, uintptr(ptr))
	mod.release(b)
}

//go:wasmexport wasmassign_describe
func exportDescribe() uint64 { return pack(mod.describe()) }

//go:wasmexport wasmassign_assign
func exportAssign(ptr uint32, size int32) uint64 {
	in, ok := mod.live[uintptr(ptr)]
	if !ok || size < 0 || int(size) > len(in) {
		return pack(mod.fail("wasmassign_assign: the request buffer was not returned by wasmassign_alloc with at least that size"))
	}
	out := mod.assign(in[:size])
	if mod.gc.afterCall(heapAllocs(&mod.gc)) {
		collect(&mod.gc)
	}
	return pack(out)
}

// exportIdle is the ABI's optional wasmassign_idle: the host calls it
// between calls, off its caller's path, and the collection a call made due
// runs here instead of inside wasmassign_assign.
//
//go:wasmexport wasmassign_idle
func exportIdle() {
	if mod.gc.idle(func() uint64 { return heapAllocs(&mod.gc) }) {
		collect(&mod.gc)
	}
}

func pack(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))<<32 | uint64(len(b))
}

// A plugin's linear memory must stay flat: on one instance, memory.size
// after call 100 equals memory.size after call 10,000 of the same request.
// Linear memory never shrinks, so memory.size is the high-water mark of all
// the Go runtime ever took from it: heap arenas, and runtime metadata (span
// structures, mark bits, span-list blocks, the collector's queues) that it
// maps the first time some count of spans or of queued work passes its
// previous maximum. Flat memory needs every one of those maxima reached early.
//
// A wasm guest is one thread that runs only inside an export call, so the
// collector's background workers never get time of their own: a cycle that
// the pacer starts in the middle of a call stays in its mark phase, with a
// write barrier on every pointer store, until some later call yields. So the
// pacer is off, and full collections are forced between calls, at points
// that depend only on the sequence of calls: after collectEvery calls, or
// sooner once collectAfterBytes have been allocated since the last one. The
// same request, repeated, then allocates the same objects between the same
// two collections each time, and the heap, with every span and metadata
// count that follows from it, soon repeats one cycle exactly. A byte
// threshold alone would keep the cycle but reach it late: a small request
// would go hundreds of calls between collections.
//
// Sweeping files spans in two sets of lists that swap roles at every
// collection, and each list maps its memory when it is first used. The first
// forced collection therefore runs twice, so that both sets are in use
// before the cycle starts rather than one collection into it.
//
// The cycle does not fix the order in which the collector marks, which
// follows the runtime's clocks, and that order decides how deep the span
// queue of Go 1.26's collector gets. The first time that queue spills, the
// runtime maps a ring of one wasm page for it and keeps it for the life of
// the instance; left alone, that happened after hundreds or thousands of
// identical calls. warmUp makes it spill during start-up instead. Doing that
// at the first forced collection, which would keep instantiation faster, was
// tried: memory then still grew after call 100 for some request sizes.
//
// The collector also runs during a call if the heap reaches softMemoryLimit,
// so that one huge request cannot exhaust memory before its call ends.
//
// Where the host calls wasmassign_idle, the collection that a call makes due
// runs in the idle call after it instead of at the end of the call: the
// same point in the sequence of calls, so the same heap, but after the host
// has the response and off its caller's path. Hosts that never call idle
// get the collection inline as before. The pacing itself (collectEvery,
// collectAfterBytes) is in collect.go.
const softMemoryLimit = 256 << 20

func init() {
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(softMemoryLimit)
	mod.gc.allocs[0].Name = "/gc/heap/allocs:bytes"
	warmUp()
}

// warmSpans is how many distinct spans warmUp's array points into. Go 1.26
// checks its span queue at every 64th span queued, and spills it if at least
// ten are waiting. Scanning one array queues each span it points into and
// takes none off in between, so 128 spans make a spill certain whatever state
// the queue starts in.
const warmSpans = 128

// warmObject holds a pointer and fills the largest size class (512 bytes)
// that the collector scans span by span; at most 16 fit in a span, so
// 16*warmSpans of them occupy at least warmSpans spans.
type warmObject struct {
	next *warmObject
	_    [63]uintptr
}

// warmUp runs a collection while one array points into warmSpans spans of
// small pointer-holding objects, which makes the collector's span queue spill
// and map its ring now, then a second collection that returns those spans to
// the heap, where the first calls reuse them.
func warmUp() {
	objs := make([]*warmObject, 16*warmSpans)
	for i := range objs {
		objs[i] = new(warmObject)
	}
	runtime.GC()
	runtime.KeepAlive(objs)
	objs = nil
	runtime.GC()
}

// heapAllocs returns the cumulative bytes allocated on the heap.
func heapAllocs(c *collector) uint64 {
	metrics.Read(c.allocs[:])
	return c.allocs[0].Value.Uint64()
}

// collect forces the collection the policy asked for. The call's garbage is
// dead by then, so it marks only what the module keeps between calls. The
// first one runs twice (see above).
func collect(c *collector) {
	runtime.GC()
	if !c.collected {
		runtime.GC()
	}
	c.didCollect(heapAllocs(c))
}

//go:build wasip1

package guest

import (
	"runtime"
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
	collect()
	return pack(out)
}

func pack(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))<<32 | uint64(len(b))
}

// forceGCAfter is how many bytes the guest may allocate between forced
// collections.
const forceGCAfter = 4 << 20

// gcState remembers the allocation counter at the last forced collection.
type gcState struct {
	sample        [1]metrics.Sample
	allocsAtForce uint64
}

var gc = gcState{sample: [1]metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}}

// collect gives the garbage collector its chance to run. A wasm guest is one
// thread that runs only inside an export, so the collector's background
// workers get no time unless an export yields to them, and linear memory,
// which never shrinks, would ratchet up with every call. Yielding each call is
// cheap; a full collection (about a millisecond or two) is forced only once
// the guest has allocated forceGCAfter bytes since the last one, so small
// requests do not pay for it every time.
func collect() {
	runtime.Gosched()
	metrics.Read(gc.sample[:])
	allocs := gc.sample[0].Value.Uint64()
	if allocs-gc.allocsAtForce >= forceGCAfter {
		runtime.GC()
		metrics.Read(gc.sample[:])
		gc.allocsAtForce = gc.sample[0].Value.Uint64()
	}
}

package wasmruntime

import (
	"fmt"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// The host's memory limit is enforced by the allocator of each instance's
// linear memory, not by wazero's WithMemoryLimitPages, so that the host
// knows when it refused memory. sdk/ABI.md promises that a guest that traps
// after the host refused its memory.grow is out of memory, not trapped.
// wazero refuses a grow past its own limit without a trace, and a guest's
// allocator usually asks for far more than the pages left below the limit,
// so such a trap came with memory well below the limit and read as a plain
// trap. wazero hands every grow within its own limit to the allocator, so
// with wazero at wasm32's 4 GiB the allocator sees each grow the host
// refuses and marks the call. That costs one comparison per grow and
// nothing per call; a function listener would cost every call and still
// not see memory.grow, an instruction. A grow that would pass 4 GiB is
// refused by wazero unseen, but no limit the host can set is above it.

// limitedAllocator allocates the linear memory of one instance under the
// host's limit, noting in the instance's current call a grow it refuses.
type limitedAllocator struct {
	base  experimental.MemoryAllocator
	limit uint64 // bytes
	io    *instanceIO
}

// Allocate allocates a memory of at most the limit, whatever the module
// declares.
func (a limitedAllocator) Allocate(capacity, max uint64) experimental.LinearMemory {
	return &limitedMemory{mem: a.base.Allocate(capacity, min(max, a.limit)), limit: a.limit, io: a.io}
}

// limitedMemory is one linear memory under the host's limit.
type limitedMemory struct {
	mem   experimental.LinearMemory
	limit uint64
	io    *instanceIO
}

// Reallocate grows the memory to size bytes, or refuses, returning nil,
// past the limit; memory.grow then returns -1 to the guest.
func (m *limitedMemory) Reallocate(size uint64) []byte {
	if size > m.limit {
		if m.io.call != nil {
			m.io.call.growRefused = true
		}
		return nil
	}
	return m.mem.Reallocate(size)
}

// Free frees the memory underneath.
func (m *limitedMemory) Free() { m.mem.Free() }

// memoryLimitBytes is the limit on one instance's linear memory.
func (l Limits) memoryLimitBytes() uint64 { return uint64(l.memoryPages()) * 65536 }

// workerOverheadBytes is what a worker may have beside its guest's linear
// memory: its Go runtime and wazero (about 120 MiB of private writable
// mappings, measured on Linux/amd64 with Go 1.26), the compiler's working
// memory (about 50 MiB more for a Go guest of 3 MiB), the compiled code,
// and the guest's tables, globals and stacks. Compiling comes before the
// linear memory is mapped, so a compilation may also use the guest's
// share.
const workerOverheadBytes = 256 << 20

// workerMemoryBytes bounds a worker process's private writable memory: the
// guest's linear memory at its limit, and the overhead.
func (l Limits) workerMemoryBytes() uint64 { return l.memoryLimitBytes() + workerOverheadBytes }

// checkMemory rejects a module whose memory starts above the limit, as
// wazero did at compile time when it held the limit: the allocator could
// only refuse the memory's first allocation, which wazero does not survive.
func checkMemory(name string, mem api.MemoryDefinition, l Limits) error {
	if limit := l.memoryPages(); mem.Min() > limit {
		return &Error{Plugin: name, Kind: ErrNotWasm, Detail: "compile",
			Err: fmt.Errorf("memory min %d pages over the limit of %d pages (%d MiB)", mem.Min(), limit, limit/16)}
	}
	return nil
}

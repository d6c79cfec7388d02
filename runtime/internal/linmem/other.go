//go:build !(linux || darwin || freebsd)

package linmem

import "github.com/tetratelabs/wazero/experimental"

func allocator() experimental.MemoryAllocator {
	return experimental.MemoryAllocatorFunc(func(capacity, max uint64) experimental.LinearMemory {
		return newSliceMemory(capacity, max)
	})
}

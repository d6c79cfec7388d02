//go:build linux || darwin || freebsd

package linmem

import (
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

func allocator() experimental.MemoryAllocator {
	return experimental.MemoryAllocatorFunc(allocate)
}

// allocate reserves max bytes. When the reservation fails (the address
// space is exhausted), the memory is a slice instead: wazero has no way to
// fail an instantiation for it, and panics on a nil memory.
func allocate(capacity, max uint64) experimental.LinearMemory {
	if max == 0 {
		max = 1 << 16
	}
	b, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|mapNoReserve)
	if err != nil {
		return newSliceMemory(capacity, max)
	}
	return &mapping{buf: b}
}

// mapping is one reserved region. Its length grows; its address never moves.
type mapping struct {
	buf []byte
}

// Reallocate returns the first size bytes of the region, or nil beyond it.
func (m *mapping) Reallocate(size uint64) []byte {
	if m.buf == nil || size > uint64(len(m.buf)) {
		return nil
	}
	return m.buf[:size:size]
}

// Free unmaps the region.
func (m *mapping) Free() {
	if m.buf != nil {
		_ = syscall.Munmap(m.buf)
		m.buf = nil
	}
}

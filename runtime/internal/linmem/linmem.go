// Package linmem backs wasm linear memories with anonymous memory mappings.
//
// wazero's default linear memory is a Go slice that is copied to a larger
// one each time the guest grows its memory. A plugin that grows to hundreds of
// megabytes while assigning a million partitions then spends much of its call
// copying, and the Go collector scans and accounts for buffers that the guest
// will never shrink. A mapping of the memory's maximum size is reserved once
// instead: the kernel commits pages only when the guest touches them, growing
// never moves the buffer, and closing the instance gives every page back.
//
// Where the platform has no mappings, or a reservation fails, a memory is
// a Go slice that grows by copying, as wazero's default is: the host
// wraps every memory to enforce its limit, so there is always an
// allocator.
//
// It imports only wazero's experimental API and the standard library.
package linmem

import "github.com/tetratelabs/wazero/experimental"

// Allocator returns a memory allocator backed by mappings, or by Go slices
// where the platform has none. A memory never grows beyond the max it was
// allocated with.
func Allocator() experimental.MemoryAllocator {
	return allocator()
}

// sliceMemory is a linear memory in a Go slice.
type sliceMemory struct {
	buf []byte
	max uint64
}

func newSliceMemory(capacity, max uint64) *sliceMemory {
	return &sliceMemory{buf: make([]byte, 0, min(capacity, max)), max: max}
}

// Reallocate returns the first size bytes, copying them to a larger slice
// when size is past the capacity, or nil beyond max. Bytes past the old
// length are zero: a memory never shrinks, so nothing wrote them.
func (m *sliceMemory) Reallocate(size uint64) []byte {
	if m.buf == nil || size > m.max {
		return nil
	}
	if size > uint64(cap(m.buf)) {
		grown := make([]byte, size, min(max(size, 2*uint64(cap(m.buf))), m.max))
		copy(grown, m.buf)
		m.buf = grown
	}
	m.buf = m.buf[:size]
	return m.buf
}

// Free drops the slice for the collector.
func (m *sliceMemory) Free() { m.buf = nil }

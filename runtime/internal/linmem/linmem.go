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
// It imports only wazero's experimental API and the standard library.
package linmem

import "github.com/tetratelabs/wazero/experimental"

// Allocator returns a memory allocator backed by mappings, or nil where the
// platform has none; wazero then uses its default.
func Allocator() experimental.MemoryAllocator {
	return allocator()
}

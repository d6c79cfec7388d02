package linmem

import (
	"testing"
	"unsafe"
)

func TestAllocator_GrowsInPlaceUpToMax(t *testing.T) {
	a := Allocator()
	if a == nil {
		t.Skip("no mappings on this platform")
	}
	const page = 1 << 16
	mem := a.Allocate(page, 64*page)
	first := mem.Reallocate(page)
	if len(first) != page {
		t.Fatalf("len %d, want %d", len(first), page)
	}
	first[0] = 42
	grown := mem.Reallocate(48 * page)
	if len(grown) != 48*page || unsafe.SliceData(grown) != unsafe.SliceData(first) {
		t.Fatal("growing moved or mis-sized the buffer")
	}
	if grown[0] != 42 || grown[len(grown)-1] != 0 {
		t.Fatal("contents not preserved, or new pages not zero")
	}
	if mem.Reallocate(65*page) != nil {
		t.Fatal("grew beyond the maximum")
	}
	mem.Free()
	if mem.Reallocate(page) != nil {
		t.Fatal("a freed memory still hands out its buffer")
	}
}

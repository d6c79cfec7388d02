package linmem

import (
	"testing"
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"
)

func TestAllocator_GrowsInPlaceUpToMax(t *testing.T) {
	mem := Allocator().Allocate(page, 64*page)
	if _, ok := mem.(*sliceMemory); ok {
		t.Skip("no mappings on this platform")
	}
	checkGrowsUpToMax(t, mem, true)
}

func TestSliceMemory_GrowsUpToMax(t *testing.T) {
	checkGrowsUpToMax(t, newSliceMemory(page, 64*page), false)
}

const page = 1 << 16

// checkGrowsUpToMax grows mem, allocated with a max of 64 pages, and
// checks what wazero relies on: the length asked for, contents kept, new
// bytes zero, nothing past max and nothing after Free. inPlace: the buffer
// must not move either.
func checkGrowsUpToMax(t *testing.T, mem experimental.LinearMemory, inPlace bool) {
	t.Helper()
	first := mem.Reallocate(page)
	if len(first) != page {
		t.Fatalf("len %d, want %d", len(first), page)
	}
	first[0] = 42
	grown := mem.Reallocate(48 * page)
	if len(grown) != 48*page || inPlace && unsafe.SliceData(grown) != unsafe.SliceData(first) {
		t.Fatal("growing moved or mis-sized the buffer")
	}
	if grown[0] != 42 || grown[len(grown)-1] != 0 {
		t.Fatal("contents not preserved, or new pages not zero")
	}
	grown[len(grown)-1] = 7
	if again := mem.Reallocate(64 * page); len(again) != 64*page || again[48*page-1] != 7 || again[len(again)-1] != 0 {
		t.Fatal("growing to the maximum lost contents or left new bytes dirty")
	}
	if mem.Reallocate(65*page) != nil {
		t.Fatal("grew beyond the maximum")
	}
	mem.Free()
	if mem.Reallocate(page) != nil {
		t.Fatal("a freed memory still hands out its buffer")
	}
}

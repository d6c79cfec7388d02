package abi

import (
	"encoding/binary"
	"unsafe"
)

// The wire format is little-endian, and so are wasm and the hosts this
// project runs on. On such machines a list of int32 is copied as bytes: one
// memory.copy in a wasm guest instead of a loop. That matters because wazero
// checks for a deadline at every loop header, and Go's wasm output passes a
// loop header on every iteration, so a million-element loop costs a million
// exits to the host. Big-endian machines take the element-by-element path.

// nativeLittleEndian reports whether int32 values in memory have the wire
// layout.
func nativeLittleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// maxView bounds the lists int32Bytes views through a fixed-size array type.
const maxView = 1 << 30

// int32Bytes views vs as its bytes. Lists up to maxView bytes are sliced
// from an array pointer rather than made with unsafe.Slice: in a wasm guest
// that costs about half as much per call (measured on wazero: 160 against
// 300 ns per 40-byte list), and a large group's request or response holds
// thousands of such lists.
func int32Bytes(vs []int32) []byte {
	if len(vs) == 0 {
		return nil
	}
	if n := 4 * len(vs); n <= maxView {
		return (*[maxView]byte)(unsafe.Pointer(unsafe.SliceData(vs)))[:n:n]
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vs))), 4*len(vs))
}

// putInt32s writes vs into out, which has 4*len(vs) bytes.
func putInt32s(out []byte, vs []int32) {
	if nativeLittleEndian() {
		copy(out, int32Bytes(vs))
		return
	}
	for i, v := range vs {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(v))
	}
}

// getInt32s reads len(out) values from src, which has 4*len(out) bytes.
func getInt32s(out []int32, src []byte) {
	if nativeLittleEndian() {
		copy(int32Bytes(out), src)
		return
	}
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

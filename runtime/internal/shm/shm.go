// Package shm is the shared memory region between a wasmassign host and one
// plugin worker: a sealed memfd that both map, so that modules, requests and
// responses cross the process boundary without pipe copies.
//
// The parent creates the region, seals it against shrinking (a worker that
// truncated it could otherwise make the parent fault on its next read) and
// grows it as needed; the worker maps what the parent hands it. Both map a
// fixed reservation once, so growing never moves the mapping. Only bytes
// below the current file size may be touched: the rest of the reservation
// faults.
//
// It imports golang.org/x/sys/unix and the standard library only.
package shm

import "errors"

// ErrUnsupported is returned where the platform has no memfd and seals.
var ErrUnsupported = errors.New("shm: shared regions are not supported on this platform")

// PageSize is the alignment that offsets into a region should keep, so that
// hole punching frees whole pages.
const PageSize = 4096

// AlignUp rounds n up to a multiple of PageSize.
func AlignUp(n int64) int64 { return (n + PageSize - 1) &^ (PageSize - 1) }

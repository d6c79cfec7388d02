//go:build !linux

package shm

import "os"

// Region is one mapped shared file; this platform has none.
type Region struct{}

// Create returns ErrUnsupported.
func Create(name string, size, reserve int64) (*Region, error) { return nil, ErrUnsupported }

// Open returns ErrUnsupported.
func Open(f *os.File, size, reserve int64) (*Region, error) { return nil, ErrUnsupported }

// File returns nil.
func (r *Region) File() *os.File { return nil }

// Size returns 0.
func (r *Region) Size() int64 { return 0 }

// Reserve returns 0.
func (r *Region) Reserve() int64 { return 0 }

// Bytes returns nil.
func (r *Region) Bytes() []byte { return nil }

// Grow returns ErrUnsupported.
func (r *Region) Grow(size int64) error { return ErrUnsupported }

// Extend returns ErrUnsupported.
func (r *Region) Extend(size int64) error { return ErrUnsupported }

// PunchHole returns ErrUnsupported.
func (r *Region) PunchHole(off, n int64) error { return ErrUnsupported }

// Close does nothing.
func (r *Region) Close() error { return nil }

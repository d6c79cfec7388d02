package shm

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Region is one mapped shared file. It is not safe for concurrent use.
type Region struct {
	f    *os.File
	mem  []byte // the whole reservation
	size int64  // bytes of the file known to exist
}

// Create makes a sealed region of size bytes, mapped with room to grow to
// reserve bytes.
func Create(name string, size, reserve int64) (*Region, error) {
	if size > reserve {
		return nil, fmt.Errorf("shm: size %d exceeds the reservation %d", size, reserve)
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if err := unix.Ftruncate(fd, size); err != nil {
		f.Close()
		return nil, fmt.Errorf("shm: ftruncate: %w", err)
	}
	// Shrink is what could fault the parent; sealing the seals keeps a
	// worker from adding a grow seal that would stall the parent's Grow.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, fmt.Errorf("shm: seal: %w", err)
	}
	r, err := mapFile(f, size, reserve)
	if err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

// Open maps a region that another process created and passed as f. size is
// what that process says exists; it is checked against the file.
func Open(f *os.File, size, reserve int64) (*Region, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("shm: fstat: %w", err)
	}
	if st.Size < size {
		return nil, fmt.Errorf("shm: the region has %d bytes, %d were announced", st.Size, size)
	}
	return mapFile(f, size, reserve)
}

func mapFile(f *os.File, size, reserve int64) (*Region, error) {
	if reserve <= 0 {
		return nil, fmt.Errorf("shm: reservation of %d bytes", reserve)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(reserve), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: mmap %d bytes: %w", reserve, err)
	}
	return &Region{f: f, mem: mem, size: size}, nil
}

// File returns the region's file, to pass to another process.
func (r *Region) File() *os.File { return r.f }

// Size returns how many bytes of the region may be touched.
func (r *Region) Size() int64 { return r.size }

// Reserve returns the most the region can grow to.
func (r *Region) Reserve() int64 { return int64(len(r.mem)) }

// Bytes returns the usable part of the region. Its capacity equals its
// length, so appending never writes past the file.
func (r *Region) Bytes() []byte { return r.mem[:r.size:r.size] }

// Grow makes the file at least size bytes long. It never shrinks it.
func (r *Region) Grow(size int64) error {
	if size <= r.size {
		return nil
	}
	if size > int64(len(r.mem)) {
		return fmt.Errorf("shm: %d bytes exceed the %d-byte reservation", size, len(r.mem))
	}
	if err := unix.Ftruncate(int(r.f.Fd()), size); err != nil {
		return fmt.Errorf("shm: grow to %d bytes: %w", size, err)
	}
	r.size = size
	return nil
}

// Extend accepts that another process grew the file to size bytes, after
// checking that it did.
func (r *Region) Extend(size int64) error {
	if size <= r.size {
		return nil
	}
	if size > int64(len(r.mem)) {
		return fmt.Errorf("shm: %d bytes exceed the %d-byte reservation", size, len(r.mem))
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(r.f.Fd()), &st); err != nil {
		return fmt.Errorf("shm: fstat: %w", err)
	}
	if st.Size < size {
		return fmt.Errorf("shm: the region has %d bytes, %d were announced", st.Size, size)
	}
	r.size = size
	return nil
}

// PunchHole gives the pages of [off, off+n) back to the system; they read as
// zeros afterwards. tmpfs keeps a page resident until then, so a region that
// once carried a large response would otherwise hold on to it.
func (r *Region) PunchHole(off, n int64) error {
	if n <= 0 {
		return nil
	}
	err := unix.Fallocate(int(r.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	if err != nil {
		return fmt.Errorf("shm: punch hole: %w", err)
	}
	return nil
}

// Close unmaps the region and closes its file.
func (r *Region) Close() error {
	var err error
	if r.mem != nil {
		err = unix.Munmap(r.mem)
		r.mem = nil
	}
	if cerr := r.f.Close(); err == nil {
		err = cerr
	}
	return err
}

//go:build unix

package loadtest

import (
	"fmt"
	"syscall"
)

// RaiseFileLimit raises the process's soft limit on open files to its
// hard limit, since every member holds a socket and ten thousand of them
// exceed the usual soft limit of 1024. It returns the limit in force.
func RaiseFileLimit() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("getrlimit RLIMIT_NOFILE: %w", err)
	}
	if l.Cur >= l.Max {
		return uint64(l.Cur), nil
	}
	soft := l.Cur
	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return uint64(soft), fmt.Errorf("setrlimit RLIMIT_NOFILE to %d: %w", l.Max, err)
	}
	return uint64(l.Cur), nil
}

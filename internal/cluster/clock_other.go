//go:build !linux

package cluster

import "time"

// BootClock is Go's monotonic clock where CLOCK_BOOTTIME is not to be had.
func BootClock() Clock {
	start := time.Now()
	return func() time.Duration { return time.Since(start) }
}

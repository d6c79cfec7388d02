package cluster

import (
	"time"

	"golang.org/x/sys/unix"
)

// BootClock is CLOCK_BOOTTIME: Go's monotonic clock (CLOCK_MONOTONIC on
// Linux) stops while the machine is suspended, which would let a
// suspended gateway's lease outlast its session in Kafka.
// Kernels before 2.6.39, which lack it, get Go's monotonic clock.
func BootClock() Clock {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		start := time.Now()
		return func() time.Duration { return time.Since(start) }
	}
	return func() time.Duration {
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) // it worked once: it always will
		return time.Duration(ts.Nano())
	}
}

//go:build !linux

package realkafka

import "syscall"

// sysProcAttr has nothing to add off Linux: there is no parent-death signal,
// so a crashed test binary can leave a broker running.
func sysProcAttr() *syscall.SysProcAttr { return nil }

package realkafka

import "syscall"

// sysProcAttr makes the kernel kill a broker JVM when the test binary dies
// (a panic, a timeout, ^C), so no broker outlives its test run holding ports
// and memory.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

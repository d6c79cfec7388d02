package wasmruntime

import "syscall"

// limitWorkerMemory bounds this process's private writable memory at bytes
// (RLIMIT_DATA), or keeps the limit it inherited where that is lower: a
// limit can be lowered, never raised. Past it the kernel refuses the
// mapping, the Go runtime dies with "fatal error: ... out of memory", and
// the parent reports out of memory (proc.go). RLIMIT_DATA counts every
// private writable mapping, the Go heap, wazero's tables and compiler and
// the linear memory's reservation among them, and not the address space a
// PROT_NONE reservation takes nor the region shared with the parent.
func limitWorkerMemory(bytes uint64) error {
	var cur syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_DATA, &cur); err != nil {
		return err
	}
	return syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: min(bytes, cur.Cur), Max: min(bytes, cur.Max)})
}

// defaultIsolation is where plugins run when the Config does not say.
func defaultIsolation() Isolation { return IsolationProcess }

// workerSysProcAttr puts a worker in its own process group, so that the
// terminal's Ctrl-C reaches only the parent, which then closes its workers
// in order; and has the kernel kill the worker if the thread that started
// it dies, so that a crashed parent leaves no orphans.
func workerSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// processIsolationSupported says whether this platform can run workers.
const processIsolationSupported = true

// defaultWorkerCommand is this program. /proc/self/exe still runs it after
// the file has been replaced on disk (an upgrade under a running daemon),
// where the path os.Executable returns would start the new binary, or none.
func defaultWorkerCommand() (string, error) { return "/proc/self/exe", nil }

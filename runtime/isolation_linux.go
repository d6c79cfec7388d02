package wasmruntime

import "syscall"

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

//go:build !linux

package wasmruntime

import (
	"os"
	"syscall"
)

// defaultIsolation is where plugins run when the Config does not say.
// Worker processes need memfd seals and a parent-death signal, which are
// Linux only so far.
func defaultIsolation() Isolation { return IsolationInProcess }

func workerSysProcAttr() *syscall.SysProcAttr { return nil }

// processIsolationSupported says whether this platform can run workers.
const processIsolationSupported = false

// limitWorkerMemory has nothing to do where no worker runs.
func limitWorkerMemory(uint64) error { return nil }

// defaultWorkerCommand is this program.
func defaultWorkerCommand() (string, error) { return os.Executable() }

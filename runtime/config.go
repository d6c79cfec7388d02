package wasmruntime

import (
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"time"
)

// Limits bounds what one plugin may consume. A Limits value is immutable:
// each With method returns a changed copy, so one value can be shared.
type Limits struct {
	timeout           time.Duration
	compileTimeout    time.Duration
	memoryLimitMB     uint32
	maxModuleBytes    int
	maxOutputBytes    int
	logBytesPerCall   int
	logLinesPerSecond int
}

// DefaultLimits returns the limits described on each With method.
func DefaultLimits() Limits {
	return Limits{
		timeout:           2 * time.Second,
		compileTimeout:    20 * time.Second,
		memoryLimitMB:     512,
		maxModuleBytes:    64 << 20,
		maxOutputBytes:    64 << 20,
		logBytesPerCall:   64 << 10,
		logLinesPerSecond: 100,
	}
}

// WithTimeout bounds each call into a plugin, including instantiating a new
// instance (its start section and _initialize). A guest past it is stopped
// and discarded. Defaults to 2s.
//
// With IsolationProcess the deadline runs from the moment the request is
// handed to the worker until its answer is back, so it also covers the
// transfer (milliseconds at tens of MiB) and, after a call that trapped,
// the worker's new instance of the module. Starting a worker is not
// counted, as instantiating is not when the in-process pool is empty.
//
// The same deadline bounds the idle call a host makes after a call, off the
// caller's path, to guests that export wasmassign_idle; a guest past it is
// discarded (its worker killed) and no caller sees an error.
func (l Limits) WithTimeout(d time.Duration) Limits { l.timeout = d; return l }

// WithCompileTimeout bounds compiling a module into machine code, each
// time a plugin is loaded or a worker loads it again. A module past it is
// rejected with ErrTimeout. Compiling a Go guest of a few MiB takes one to
// two seconds on one core, and milliseconds from the compilation cache, so
// the default of 20s leaves room for a loaded machine and still rejects a
// module built to keep the compiler busy for minutes (a br_table with
// millions of targets, thousands of nested loops) long before an operator
// would give up on the start-up.
//
// With IsolationProcess the worker compiles and the host kills it at the
// deadline. With IsolationInProcess nothing can stop the compiler: Load
// returns at the deadline, and the compilation goes on in the background
// until it ends, holding a core and its memory (see Isolation).
func (l Limits) WithCompileTimeout(d time.Duration) Limits { l.compileTimeout = d; return l }

// WithMemoryLimitMB caps each instance's linear memory; memory.grow beyond it
// fails. It is rounded down to whole 64 KiB pages. Defaults to 512.
//
// With IsolationProcess it also bounds each worker process as a whole, at
// the limit and 256 MiB more for its runtime, the compiler and the guest's
// tables: a module whose compilation takes more, or a guest that grows its
// tables past it, fails with ErrOutOfMemory. In process only linear memory
// is bounded (see IsolationInProcess).
func (l Limits) WithMemoryLimitMB(mb uint32) Limits { l.memoryLimitMB = mb; return l }

// WithMaxModuleBytes rejects larger modules before compiling them. Defaults
// to 64 MiB.
func (l Limits) WithMaxModuleBytes(n int) Limits { l.maxModuleBytes = n; return l }

// WithMaxOutputBytes rejects larger responses as invalid output. Defaults to
// 64 MiB, room for a million partitions many times over.
func (l Limits) WithMaxOutputBytes(n int) Limits { l.maxOutputBytes = n; return l }

// WithLogBytesPerCall caps what one call may write to the log (stdout,
// stderr and the log import together); the rest is dropped and counted.
// Defaults to 64 KiB.
func (l Limits) WithLogBytesPerCall(n int) Limits { l.logBytesPerCall = n; return l }

// WithLogLinesPerSecond rate-limits each plugin's log lines across all its
// instances, so a chatty guest cannot flood the host log. Defaults to 100.
func (l Limits) WithLogLinesPerSecond(n int) Limits { l.logLinesPerSecond = n; return l }

// Timeout returns the per-call deadline.
func (l Limits) Timeout() time.Duration { return l.timeout }

// CompileTimeout returns the deadline for compiling a module.
func (l Limits) CompileTimeout() time.Duration { return l.compileTimeout }

// MemoryLimitMB returns the memory cap per instance.
func (l Limits) MemoryLimitMB() uint32 { return l.memoryLimitMB }

// MaxModuleBytes returns the module size cap.
func (l Limits) MaxModuleBytes() int { return l.maxModuleBytes }

// MaxOutputBytes returns the response size cap.
func (l Limits) MaxOutputBytes() int { return l.maxOutputBytes }

func (l Limits) memoryPages() uint32 {
	p := l.memoryLimitMB * 16 // 16 pages of 64 KiB per MiB
	if p == 0 || p > 65536 {
		p = 65536
	}
	return p
}

// Config configures a Host. It is immutable like Limits.
type Config struct {
	limits        Limits
	cacheDir      string
	logger        *slog.Logger
	maxInstances  int
	queueTimeout  time.Duration
	idleTimeout   time.Duration
	hooks         []Hook
	isolation     Isolation
	workerCommand string
	// skipIdle makes the host never call a guest's idle export, as hosts
	// older than it do. Only tests set it, to check that guests still keep
	// their memory flat for such hosts.
	skipIdle bool
}

// Isolation says where a host runs plugin code.
type Isolation int

const (
	// IsolationProcess runs each plugin instance in a worker process: this
	// program re-executed, which must call RunWorkerIfRequested first thing
	// in main (and in TestMain). Guest code runs without wazero's deadline
	// checks, 2-5x faster for Go guests, and the host kills the worker when
	// a call runs past its deadline. It is the default on Linux.
	IsolationProcess Isolation = iota + 1
	// IsolationInProcess runs plugins in this process, with a context check
	// compiled into every loop so that a deadline can stop them. It is the
	// default where worker processes are not supported.
	//
	// Nothing in a process can stop wazero's compiler, so a load past the
	// compile timeout returns ErrTimeout while the compilation runs on in
	// the background to its end, holding a core and its memory. Nor can a
	// process bound its own memory without bounding the host: in process
	// the memory limit holds linear memory only, and neither the
	// compiler's memory nor a guest's tables (table.grow) are bounded. Only
	// IsolationProcess bounds those; run only trusted modules in process.
	IsolationInProcess
)

// String returns "process" or "in-process".
func (i Isolation) String() string {
	switch i {
	case IsolationProcess:
		return "process"
	case IsolationInProcess:
		return "in-process"
	}
	return fmt.Sprintf("Isolation(%d)", int(i))
}

// NewConfig returns the defaults described on each With method.
func NewConfig() Config {
	return Config{limits: DefaultLimits(), logger: slog.Default(), maxInstances: max(runtime.GOMAXPROCS(0), 2), queueTimeout: 10 * time.Second, idleTimeout: 30 * time.Second}
}

// WithLimits sets the limits every plugin of the host runs under. Defaults
// to DefaultLimits().
func (c Config) WithLimits(l Limits) Config { c.limits = l; return c }

// WithCompilationCacheDir keeps compiled machine code in dir, so the next
// process loads the same modules in milliseconds instead of compiling them
// again. Empty, the default, caches in memory only; with IsolationProcess,
// in a temporary directory that the host's workers share and Host.Close
// removes.
func (c Config) WithCompilationCacheDir(dir string) Config { c.cacheDir = dir; return c }

// WithLogger sets where plugin output and host warnings go. Defaults to
// slog.Default().
func (c Config) WithLogger(l *slog.Logger) Config { c.logger = l; return c }

// WithMaxInstances bounds the instances the host runs at once, across all
// its plugins: with IsolationProcess, its worker processes. A call that
// finds every instance busy waits its turn in one first-come, first-served
// queue (see WithQueueTimeout) rather than start another; instances stay
// warm between calls, and a plugin with none to spare takes the place of
// the one idle the longest, of any plugin. Each plugin loaded takes one
// while loading.
//
// Assignments are CPU-bound, so instances beyond the cores add memory (a
// worker of a Go guest holds tens of megabytes) and no throughput; more
// than the cores helps only when several plugins serve at once and should
// stay warm together. Defaults to GOMAXPROCS, and at least 2.
func (c Config) WithMaxInstances(n int) Config { c.maxInstances = n; return c }

// WithQueueTimeout bounds how long a call waits for an instance when all
// are busy. A call past it fails with ErrOverloaded without running; the
// call timeout (Limits.WithTimeout) starts only once the call has its
// instance, so time in the queue never counts against the plugin.
// Defaults to 10s.
func (c Config) WithQueueTimeout(d time.Duration) Config { c.queueTimeout = d; return c }

// WithIdleTimeout ends instances idle longer than d, whichever plugin they
// belong to: a worker of a Go guest holds tens of megabytes, and those of
// plugins no group uses (every plugin's first instance is started to load
// it) would hold them for good. The next call of such a plugin starts an
// instance again, from the compilation cache (about 100 ms for a worker).
// Zero keeps idle instances until the bound needs their place. Defaults
// to 30s.
func (c Config) WithIdleTimeout(d time.Duration) Config { c.idleTimeout = d; return c }

// WithHooks adds hooks the host calls as it works: each may implement any
// of the Hook interfaces (HookQueueWait). Hooks run on the caller's
// goroutine and must not block.
func (c Config) WithHooks(hooks ...Hook) Config {
	c.hooks = append(slices.Clip(c.hooks), hooks...)
	return c
}

// Hook is any value implementing one or more of the Hook interfaces below,
// in the manner of franz-go's kgo hooks: a host calls each interface a hook
// implements and ignores the rest.
type Hook any

// HookQueueWait is told, for every call, how long it waited for an
// instance, and whether it gave up waiting (ErrOverloaded).
type HookQueueWait interface {
	OnQueueWait(plugin string, wait time.Duration, overloaded bool)
}

// MaxInstances returns the bound on the host's instances.
func (c Config) MaxInstances() int { return max(c.maxInstances, 1) }

// QueueTimeout returns how long a call may wait for an instance.
func (c Config) QueueTimeout() time.Duration { return c.queueTimeout }

// Limits returns the configured limits.
func (c Config) Limits() Limits { return c.limits }

// WithIsolation chooses where plugin code runs; see Isolation. Defaults to
// IsolationProcess on Linux and IsolationInProcess elsewhere.
func (c Config) WithIsolation(i Isolation) Config { c.isolation = i; return c }

// WithWorkerCommand sets the executable that IsolationProcess starts as a
// worker. It must call RunWorkerIfRequested first thing in main. Defaults to
// this program (os.Executable).
func (c Config) WithWorkerCommand(path string) Config { c.workerCommand = path; return c }

// Isolation returns where plugin code runs.
func (c Config) Isolation() Isolation {
	if c.isolation == 0 {
		return defaultIsolation()
	}
	return c.isolation
}

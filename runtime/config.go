package wasmruntime

import (
	"log/slog"
	"runtime"
	"time"
)

// Limits bounds what one plugin may consume. A Limits value is immutable:
// each With method returns a changed copy, so one value can be shared.
type Limits struct {
	timeout           time.Duration
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
func (l Limits) WithTimeout(d time.Duration) Limits { l.timeout = d; return l }

// WithMemoryLimitMB caps each instance's linear memory; memory.grow beyond it
// fails. It is rounded down to whole 64 KiB pages. Defaults to 512.
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
	limits   Limits
	cacheDir string
	logger   *slog.Logger
	poolSize int
}

// NewConfig returns the defaults described on each With method.
func NewConfig() Config {
	return Config{limits: DefaultLimits(), logger: slog.Default(), poolSize: runtime.GOMAXPROCS(0)}
}

// WithLimits sets the limits every plugin of the host runs under. Defaults
// to DefaultLimits().
func (c Config) WithLimits(l Limits) Config { c.limits = l; return c }

// WithCompilationCacheDir keeps compiled machine code in dir, so the next
// process loads the same modules in milliseconds instead of compiling them
// again. Empty, the default, caches in memory only.
func (c Config) WithCompilationCacheDir(dir string) Config { c.cacheDir = dir; return c }

// WithLogger sets where plugin output and host warnings go. Defaults to
// slog.Default().
func (c Config) WithLogger(l *slog.Logger) Config { c.logger = l; return c }

// WithPoolSize sets how many idle instances each plugin keeps warm. More
// concurrent calls still get instances; the extra ones are closed after use.
// Defaults to GOMAXPROCS.
func (c Config) WithPoolSize(n int) Config { c.poolSize = n; return c }

// Limits returns the configured limits.
func (c Config) Limits() Limits { return c.limits }

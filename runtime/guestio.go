package wasmruntime

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// callState is what the host knows about the call in progress on one
// instance: its log budget, the guest's last words, which a trap error
// quotes, and whether the host refused it memory, which makes a trap an
// out-of-memory error.
type callState struct {
	sink        *logSink
	logBytes    int
	dropped     int
	lastLines   []string
	growRefused bool
}

const (
	maxLineBytes  = 1024 // a longer line is cut, and marked so
	lastLinesKept = 3
)

// cutLine cuts guest text longer than maxLineBytes, at the start of a
// character, and marks the cut. It is the one rule for guest text that
// reaches the log or an error: log lines, what a worker process writes,
// and an error response's message, which would otherwise put megabytes
// into one log record on every failing rebalance.
func cutLine(s string) string {
	if len(s) <= maxLineBytes {
		return s
	}
	i := maxLineBytes
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…(truncated)"
}

// note records one line of guest output.
func (c *callState) note(level slog.Level, line string) {
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return
	}
	line = cutLine(line)
	if len(c.lastLines) == lastLinesKept {
		copy(c.lastLines, c.lastLines[1:])
		c.lastLines = c.lastLines[:lastLinesKept-1]
	}
	c.lastLines = append(c.lastLines, line)
	// A line the logger would discard (a debug line under an info logger)
	// costs nothing from the budgets: otherwise a plugin that writes one
	// debug line per call empties the bucket at 100 calls a second and
	// turns every later call into a drop warning.
	if !c.sink.enabled(level) {
		return
	}
	c.logBytes += len(line)
	if c.logBytes > c.sink.bytesPerCall {
		c.dropped++
		return
	}
	if c.sink.forward != nil {
		c.sink.forward(level, line)
		return
	}
	if !c.sink.take() {
		c.dropped++
		return
	}
	c.sink.logger.Log(context.Background(), level, line)
}

// finish hands the call's dropped lines to the sink, which warns about them
// at most once per dropWarningEvery for the plugin.
//
// In a worker the parent owns the rate limit and the warnings: the count
// stays in dropped, for the worker to report with the call's result.
func (c *callState) finish() {
	if c.sink.forward != nil {
		return
	}
	if c.dropped > 0 {
		if n, ok := c.sink.dropped(c.dropped); ok {
			c.sink.logger.Warn("plugin log lines dropped", "dropped", n, "reason", "log volume limit")
		}
		c.dropped = 0
	}
}

// lastWords returns what the guest printed last, for error messages.
func (c *callState) lastWords() string {
	return strings.Join(c.lastLines, " | ")
}

// logSink rate-limits one plugin's log lines across all its instances with a
// token bucket.
//
// In a worker process, forward is set instead of logger: lines within the
// per-call byte budget go to the parent, whose own logSink rate-limits them
// across all of the plugin's workers, and minLevel stands in for the
// parent's logger level.
type logSink struct {
	logger       *slog.Logger
	bytesPerCall int
	perSecond    float64
	forward      func(level slog.Level, line string)
	minLevel     slog.Level

	mu          sync.Mutex
	tokens      float64
	last        time.Time
	undeclared  int       // dropped lines not yet warned about
	lastWarning time.Time // when the last drop warning went out
}

// dropWarningEvery spaces a plugin's drop warnings: one per call would flood
// the log with warnings instead of lines.
const dropWarningEvery = time.Second

// dropped adds n dropped lines and says whether to warn now, and about how
// many lines.
func (s *logSink) dropped(n int) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.undeclared += n
	now := time.Now()
	if !s.lastWarning.IsZero() && now.Sub(s.lastWarning) < dropWarningEvery {
		return 0, false
	}
	n, s.undeclared, s.lastWarning = s.undeclared, 0, now
	return n, true
}

func newLogSink(logger *slog.Logger, l Limits) *logSink {
	return &logSink{
		logger:       logger,
		bytesPerCall: l.logBytesPerCall,
		perSecond:    float64(l.logLinesPerSecond),
		tokens:       float64(l.logLinesPerSecond),
	}
}

// enabled says whether a line at level would be logged at all.
func (s *logSink) enabled(level slog.Level) bool {
	if s.forward != nil {
		return level >= s.minLevel
	}
	return s.logger.Enabled(context.Background(), level)
}

// minEnabledLevel returns the lowest level from Debug-4 to Error+4 that the
// sink's logger records, for a worker to filter by: handlers filter by a
// threshold, so one number stands for the logger.
func (s *logSink) minEnabledLevel() slog.Level {
	for l := slog.LevelDebug - 4; l <= slog.LevelError+4; l++ {
		if s.logger.Enabled(context.Background(), l) {
			return l
		}
	}
	return slog.LevelError + 5
}

func (s *logSink) take() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if !s.last.IsZero() {
		s.tokens += now.Sub(s.last).Seconds() * s.perSecond
		if s.tokens > s.perSecond {
			s.tokens = s.perSecond
		}
	}
	s.last = now
	if s.tokens < 1 {
		return false
	}
	s.tokens--
	return true
}

// instanceIO is the per-instance side of WASI: the stdout and stderr writers,
// the random source and the clocks. Each is reset before every call so that a
// reused instance sees exactly what a fresh one would.
type instanceIO struct {
	call *callState

	stdout, stderr lineWriter
	rand           seededReader
	clock          int64 // guest nanotime; monotonic for the instance's life
	callStart      int64 // clock at the start of the current call
}

func newInstanceIO() *instanceIO {
	io := &instanceIO{}
	io.stdout = lineWriter{io: io, level: slog.LevelInfo}
	io.stderr = lineWriter{io: io, level: slog.LevelWarn}
	return io
}

// begin starts a call with the given seed.
func (io *instanceIO) begin(cs *callState, seed uint64) {
	io.call = cs
	io.rand.state = seed
	io.callStart = io.clock
}

// end flushes partial lines of the call.
func (io *instanceIO) end() {
	io.stdout.flush()
	io.stderr.flush()
	io.call.finish()
}

// clockStep is how far the guest's clocks move on each reading. Guests see
// time pass, so loops that wait for it end, but never the host's real time.
const clockStep = int64(time.Millisecond)

// wallEpoch is what the guest's wall clock reads at the start of every call:
// 2000-01-01T00:00:00Z.
const wallEpoch = int64(946684800) * 1e9

// nanotime is the guest's monotonic clock. It is never reset: language
// runtimes (Go's scheduler and timers among them) misbehave when monotonic
// time goes backwards. A plugin that measures elapsed time still sees the
// same durations on every call, since each reading advances by clockStep.
func (io *instanceIO) nanotime() int64 {
	io.clock += clockStep
	return io.clock
}

// walltime starts at wallEpoch on every call and advances with nanotime, so
// what a plugin reads from it depends only on the call.
func (io *instanceIO) walltime() (int64, int32) {
	t := wallEpoch + io.nanotime() - io.callStart
	return t / 1e9, int32(t % 1e9)
}

// lineWriter turns a guest's fd_write stream into log lines.
type lineWriter struct {
	io      *instanceIO
	level   slog.Level
	partial []byte
}

// partialKept is the most of one line a lineWriter keeps: note cuts a line
// at maxLineBytes anyway, and keeping more than that tells it the line was
// longer, so it marks the cut.
const partialKept = 2 * maxLineBytes

// Write splits p at newlines, looking at each byte once. A guest's libc
// flushes its whole buffer in one write, so p may hold thousands of short
// lines: a split that copied the rest of p for every line made such a write
// quadratic, and 200 KB of them outlasted the call deadline.
func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.keep(p)
			break
		}
		w.keep(p[:i])
		w.flush()
		p = p[i+1:]
	}
	return n, nil
}

// keep appends b to the partial line, up to partialKept bytes.
func (w *lineWriter) keep(b []byte) {
	if room := partialKept - len(w.partial); room > 0 {
		w.partial = append(w.partial, b[:min(len(b), room)]...)
	}
}

func (w *lineWriter) flush() {
	if len(w.partial) > 0 && w.io.call != nil {
		w.io.call.note(w.level, string(w.partial))
	}
	w.partial = w.partial[:0]
}

// seededReader is a splitmix64 stream: cheap, and fully determined by its
// seed, which is all WASI random_get needs here.
type seededReader struct{ state uint64 }

func (r *seededReader) Read(p []byte) (int, error) {
	for i := 0; i < len(p); i += 8 {
		r.state += 0x9e3779b97f4a7c15
		z := r.state
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		for j := 0; j < 8 && i+j < len(p); j++ {
			p[i+j] = byte(z >> (8 * j))
		}
	}
	return len(p), nil
}

package wire

import "fmt"

// Magic opens every HELLO, so a parent that started the wrong binary fails
// clearly instead of misreading its output.
const Magic = "wasmassign-worker"

// Version is the protocol version. Parent and worker are the same binary, so
// a mismatch means a stale or foreign worker command.
const Version = 1

// Hello is the worker's first frame.
type Hello struct {
	Magic   string
	Version uint64
	Pid     int64
}

// Encode returns the message body.
func (m *Hello) Encode() []byte {
	var e Encoder
	e.String(m.Magic)
	e.Uint(m.Version)
	e.Int(m.Pid)
	return e.B
}

// DecodeHello parses a HELLO body.
func DecodeHello(b []byte) (Hello, error) {
	d := NewDecoder(b)
	m := Hello{Magic: d.String(), Version: d.Uint(), Pid: d.Int()}
	return m, d.Finish()
}

// Load asks the worker to compile the module at region[0:WasmLen],
// instantiate it under the given limits, and describe it.
type Load struct {
	Name            string
	MemoryLimitMB   uint64
	MaxOutputBytes  uint64
	LogBytesPerCall uint64
	// MinLogLevel is the lowest slog level the parent's logger records;
	// lines below it cost no log budget, as in-process.
	MinLogLevel int64
	CacheDir    string
	WasmLen     uint64
	// RegionSize is the region's size now; RegionReserve how large it may
	// grow, which the worker maps once.
	RegionSize    uint64
	RegionReserve uint64
	// SkipIdle tells the worker never to call the guest's idle export, as a
	// host that predates it would not; tests use it to check that guests
	// still work for such hosts.
	SkipIdle bool
}

// Encode returns the message body.
func (m *Load) Encode() []byte {
	var e Encoder
	e.String(m.Name)
	e.Uint(m.MemoryLimitMB)
	e.Uint(m.MaxOutputBytes)
	e.Uint(m.LogBytesPerCall)
	e.Int(m.MinLogLevel)
	e.String(m.CacheDir)
	e.Uint(m.WasmLen)
	e.Uint(m.RegionSize)
	e.Uint(m.RegionReserve)
	e.Bool(m.SkipIdle)
	return e.B
}

// DecodeLoad parses a LOAD body.
func DecodeLoad(b []byte) (Load, error) {
	d := NewDecoder(b)
	m := Load{Name: d.String(), MemoryLimitMB: d.Uint(), MaxOutputBytes: d.Uint(), LogBytesPerCall: d.Uint(),
		MinLogLevel: d.Int(), CacheDir: d.String(), WasmLen: d.Uint(), RegionSize: d.Uint(), RegionReserve: d.Uint(),
		SkipIdle: d.Bool()}
	return m, d.Finish()
}

// Loaded is what the worker learnt about a module it loaded.
type Loaded struct {
	ABIVersion    int32
	Description   []byte // abi-encoded, as the guest returned it
	Imports       []string
	Exports       []string
	CompileNanos  int64
	InstanceNanos int64
}

// Encode returns the message body.
func (m *Loaded) Encode() []byte {
	var e Encoder
	e.Int(int64(m.ABIVersion))
	e.Bytes(m.Description)
	e.Strings(m.Imports)
	e.Strings(m.Exports)
	e.Int(m.CompileNanos)
	e.Int(m.InstanceNanos)
	return e.B
}

// DecodeLoaded parses a LOADED body. Description is copied.
func DecodeLoaded(b []byte) (Loaded, error) {
	d := NewDecoder(b)
	m := Loaded{ABIVersion: d.Int32(), Description: append([]byte(nil), d.Bytes()...),
		Imports: d.Strings(), Exports: d.Strings(), CompileNanos: d.Int(), InstanceNanos: d.Int()}
	return m, d.Finish()
}

// Kind codes of Failure, one per error kind of package wasmruntime that a
// worker can report. KindOK means no failure.
const (
	KindOK             = 0
	KindTimeout        = 1
	KindTrap           = 2
	KindOutOfMemory    = 3
	KindInvalidOutput  = 4
	KindABIMismatch    = 5
	KindNotWasm        = 6
	KindModuleTooLarge = 7
	KindAssignorFailed = 8
	maxKind            = KindAssignorFailed
)

// Failure describes an error in the worker; it is the body of FAILED and
// part of RESULT.
type Failure struct {
	Kind   uint64
	Rule   string
	Detail string
	Err    string // the underlying error's text, if any
}

func (f *Failure) encode(e *Encoder) {
	e.Uint(f.Kind)
	e.String(f.Rule)
	e.String(f.Detail)
	e.String(f.Err)
}

func decodeFailure(d *Decoder) Failure {
	f := Failure{Kind: d.Uint(), Rule: d.String(), Detail: d.String(), Err: d.String()}
	if f.Kind > maxKind {
		d.fail(fmt.Sprintf("unknown error kind %d", f.Kind))
	}
	return f
}

// Encode returns the body of a FAILED message.
func (f *Failure) Encode() []byte {
	var e Encoder
	f.encode(&e)
	return e.B
}

// DecodeFailure parses a FAILED body.
func DecodeFailure(b []byte) (Failure, error) {
	d := NewDecoder(b)
	f := decodeFailure(d)
	return f, d.Finish()
}

// Assign asks for one assignment of the request at region[0:RequestLen]; the
// response goes to region[ResponseOffset:]. RegionSize is how many bytes of
// the region exist now; the worker must touch none beyond it.
type Assign struct {
	Seed           uint64
	RequestLen     uint64
	ResponseOffset uint64
	RegionSize     uint64
}

// Encode returns the message body.
func (m *Assign) Encode() []byte {
	var e Encoder
	e.Uint(m.Seed)
	e.Uint(m.RequestLen)
	e.Uint(m.ResponseOffset)
	e.Uint(m.RegionSize)
	return e.B
}

// DecodeAssign parses an ASSIGN body.
func DecodeAssign(b []byte) (Assign, error) {
	d := NewDecoder(b)
	m := Assign{Seed: d.Uint(), RequestLen: d.Uint(), ResponseOffset: d.Uint(), RegionSize: d.Uint()}
	return m, d.Finish()
}

// Log is one line the guest wrote.
type Log struct {
	Level int64
	Line  string
}

// Encode returns the message body.
func (m *Log) Encode() []byte {
	var e Encoder
	e.Int(m.Level)
	e.String(m.Line)
	return e.B
}

// DecodeLog parses a LOG body.
func DecodeLog(b []byte) (Log, error) {
	d := NewDecoder(b)
	m := Log{Level: d.Int(), Line: d.String()}
	return m, d.Finish()
}

// Result is the outcome of an ASSIGN: a failure, or the length of the
// response the worker wrote at the response offset.
type Result struct {
	Failure     Failure
	ResponseLen uint64
	MemoryBytes uint64 // the guest's linear memory after the call
	Dropped     uint64 // log lines the worker dropped under the per-call budget
	// Idle says that the worker is now calling the guest's idle export and
	// will send IDLE_DONE when it ends; until then it takes no ASSIGN.
	Idle bool
}

// Encode returns the message body.
func (m *Result) Encode() []byte {
	var e Encoder
	m.Failure.encode(&e)
	e.Uint(m.ResponseLen)
	e.Uint(m.MemoryBytes)
	e.Uint(m.Dropped)
	e.Bool(m.Idle)
	return e.B
}

// DecodeResult parses a RESULT body.
func DecodeResult(b []byte) (Result, error) {
	d := NewDecoder(b)
	m := Result{Failure: decodeFailure(d), ResponseLen: d.Uint(), MemoryBytes: d.Uint(), Dropped: d.Uint(), Idle: d.Bool()}
	return m, d.Finish()
}

// IdleDone ends the idle call that a RESULT announced. A failure means the
// idle call trapped and the worker discarded the instance; the next ASSIGN
// starts a new one.
type IdleDone struct {
	Failure Failure
	Dropped uint64 // log lines the worker dropped under the per-call budget
}

// Encode returns the message body.
func (m *IdleDone) Encode() []byte {
	var e Encoder
	m.Failure.encode(&e)
	e.Uint(m.Dropped)
	return e.B
}

// DecodeIdleDone parses an IDLE_DONE body.
func DecodeIdleDone(b []byte) (IdleDone, error) {
	d := NewDecoder(b)
	m := IdleDone{Failure: decodeFailure(d), Dropped: d.Uint()}
	return m, d.Finish()
}

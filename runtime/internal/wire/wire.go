// Package wire is the framing and message codec between a wasmassign host
// process and its plugin worker processes (RATIONALE.md, "How a worker is isolated").
//
// A frame is a little-endian u32 body length, a one-byte message type and the
// body. Bodies are short control messages: bulk bytes (modules, requests,
// responses) travel through a shared memory region instead. The host reads
// frames from a worker that may be compromised, so every decoder here treats
// its input as hostile: lengths are capped, and a short or malformed body is
// an error, never a panic.
//
// The package is pure Go and imports only the standard library.
package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// MaxFrame caps a frame's body. Anything larger is a protocol error: no
// control message needs more, and a reader must never allocate what a
// hostile length asks for.
const MaxFrame = 1 << 20

// Type identifies a message.
type Type uint8

// Message types; W->P is worker to parent, P->W parent to worker.
const (
	TypeHello    Type = 1 // W->P: the worker is up
	TypeLoad     Type = 2 // P->W: compile and instantiate a module
	TypeCompiled Type = 3 // W->P: compiled; the instantiation deadline starts
	TypeLoaded   Type = 4 // W->P: the module is ready, with its description
	TypeFailed   Type = 5 // W->P: loading failed
	TypeAssign   Type = 6 // P->W: run one assignment
	TypeLog      Type = 7 // W->P: one line of guest output
	TypeResult   Type = 8 // W->P: the outcome of an assignment
	TypeShutdown Type = 9 // P->W: exit now
	// TypeIdleDone follows a RESULT whose Idle is set: the worker ran the
	// guest's idle export and may take the next ASSIGN.
	TypeIdleDone Type = 10 // W->P: the idle call after a RESULT ended
)

// ErrTooLarge is returned for a frame whose declared body exceeds MaxFrame.
var ErrTooLarge = errors.New("wire: frame exceeds the size cap")

// ErrMalformed is wrapped by every body decoding error.
var ErrMalformed = errors.New("wire: malformed message")

// WriteFrame writes one frame in a single Write call, so that frames from one
// writer never interleave.
func WriteFrame(w io.Writer, t Type, body []byte) error {
	if len(body) > MaxFrame {
		return ErrTooLarge
	}
	buf := make([]byte, 5, 5+len(body))
	binary.LittleEndian.PutUint32(buf, uint32(len(body)))
	buf[4] = byte(t)
	buf = append(buf, body...)
	_, err := w.Write(buf)
	return err
}

// ReadFrame reads one frame. The body is read into buf when it fits, so the
// returned slice may alias buf and is valid until the next call with it. A
// stream that ends inside a frame gives io.ErrUnexpectedEOF; one that ends
// between frames gives io.EOF.
func ReadFrame(r io.Reader, buf []byte) (Type, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[:4])
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("%w: %d bytes, the cap is %d", ErrTooLarge, n, MaxFrame)
	}
	if int(n) > cap(buf) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return Type(hdr[4]), buf, nil
}

// PeekFrame returns the frame at the front of br when all of it is buffered
// already, without reading from br's source and without consuming it:
// Discard(n) does that. ok is false when the frame is not complete in the
// buffer, or could never fit in it; ReadFrame then reads it as usual.
func PeekFrame(br *bufio.Reader) (t Type, body []byte, n int, ok bool) {
	if br.Buffered() < 5 {
		return 0, nil, 0, false
	}
	hdr, err := br.Peek(5)
	if err != nil {
		return 0, nil, 0, false
	}
	size := binary.LittleEndian.Uint32(hdr)
	if size > MaxFrame || int64(size) > int64(br.Buffered()-5) {
		return 0, nil, 0, false
	}
	frame, err := br.Peek(5 + int(size))
	if err != nil {
		return 0, nil, 0, false
	}
	return Type(frame[4]), frame[5:], len(frame), true
}

// Encoder appends the fields of a message body.
type Encoder struct{ B []byte }

// Uint appends an unsigned varint.
func (e *Encoder) Uint(v uint64) { e.B = binary.AppendUvarint(e.B, v) }

// Int appends a signed (zig-zag) varint.
func (e *Encoder) Int(v int64) { e.B = binary.AppendVarint(e.B, v) }

// Bool appends a flag as a varint 0 or 1.
func (e *Encoder) Bool(v bool) {
	if v {
		e.Uint(1)
	} else {
		e.Uint(0)
	}
}

// Bytes appends a length-prefixed byte string.
func (e *Encoder) Bytes(b []byte) {
	e.Uint(uint64(len(b)))
	e.B = append(e.B, b...)
}

// String appends a length-prefixed string.
func (e *Encoder) String(s string) {
	e.Uint(uint64(len(s)))
	e.B = append(e.B, s...)
}

// Strings appends a counted list of strings.
func (e *Encoder) Strings(ss []string) {
	e.Uint(uint64(len(ss)))
	for _, s := range ss {
		e.String(s)
	}
}

// Decoder reads the fields of a message body. The first error sticks: later
// reads return zero values, and Finish reports it.
type Decoder struct {
	b   []byte
	err error
}

// NewDecoder returns a decoder over body.
func NewDecoder(body []byte) *Decoder { return &Decoder{b: body} }

func (d *Decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrMalformed, what)
	}
	d.b = nil
}

// Uint reads an unsigned varint.
func (d *Decoder) Uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad unsigned varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Int reads a signed varint.
func (d *Decoder) Int() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad signed varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Bool reads a flag; any value but 0 or 1 is malformed, so that one state
// has one encoding.
func (d *Decoder) Bool() bool {
	v := d.Uint()
	if v > 1 {
		d.fail(fmt.Sprintf("flag %d is neither 0 nor 1", v))
		return false
	}
	return v == 1
}

// Int32 reads a signed varint that must fit in 32 bits.
func (d *Decoder) Int32() int32 {
	v := d.Int()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("integer out of 32-bit range")
		return 0
	}
	return int32(v)
}

// Bytes reads a length-prefixed byte string. The result aliases the body.
func (d *Decoder) Bytes() []byte {
	n := d.Uint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("length beyond the body")
		return nil
	}
	b := d.b[:n:n]
	d.b = d.b[n:]
	return b
}

// String reads a length-prefixed string.
func (d *Decoder) String() string { return string(d.Bytes()) }

// Strings reads a counted list of strings.
func (d *Decoder) Strings() []string {
	n := d.Uint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) { // every string takes at least one byte
		d.fail("count beyond the body")
		return nil
	}
	out := make([]string, 0, n)
	for range n {
		s := d.String()
		if d.err != nil {
			return nil
		}
		out = append(out, s)
	}
	return out
}

// Finish returns the first decoding error, or an error when bytes are left.
func (d *Decoder) Finish() error {
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.b))
	}
	return d.err
}

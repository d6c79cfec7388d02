package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"testing"
)

func TestMessages_RoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		msg    any
		encode func() []byte
		decode func([]byte) (any, error)
	}{
		{"hello", Hello{Magic, Version, 4242}, func() []byte { m := Hello{Magic, Version, 4242}; return m.Encode() },
			func(b []byte) (any, error) { return DecodeHello(b) }},
		{"load", Load{"builtin:range", 512, 64 << 20, 65536, -4, "/tmp/c", 123456, 1 << 20, 1 << 30, true},
			func() []byte {
				m := Load{"builtin:range", 512, 64 << 20, 65536, -4, "/tmp/c", 123456, 1 << 20, 1 << 30, true}
				return m.Encode()
			},
			func(b []byte) (any, error) { return DecodeLoad(b) }},
		{"loaded", Loaded{1, []byte{1, 2, 3}, []string{"wasi.fd_write", "wasmassign.log"}, []string{"memory"}, 1e9, 5e6},
			func() []byte {
				m := Loaded{1, []byte{1, 2, 3}, []string{"wasi.fd_write", "wasmassign.log"}, []string{"memory"}, 1e9, 5e6}
				return m.Encode()
			},
			func(b []byte) (any, error) { return DecodeLoaded(b) }},
		{"failed", Failure{KindInvalidOutput, "response too large", "d", "e"},
			func() []byte { m := Failure{KindInvalidOutput, "response too large", "d", "e"}; return m.Encode() },
			func(b []byte) (any, error) { return DecodeFailure(b) }},
		{"assign", Assign{^uint64(0), 10, 4096, 1 << 30},
			func() []byte { m := Assign{^uint64(0), 10, 4096, 1 << 30}; return m.Encode() },
			func(b []byte) (any, error) { return DecodeAssign(b) }},
		{"log", Log{-4, "héllo"}, func() []byte { m := Log{-4, "héllo"}; return m.Encode() },
			func(b []byte) (any, error) { return DecodeLog(b) }},
		{"result", Result{Failure{KindTrap, "", "boom", "wasm error"}, 77, 1 << 20, 3, true},
			func() []byte {
				m := Result{Failure{KindTrap, "", "boom", "wasm error"}, 77, 1 << 20, 3, true}
				return m.Encode()
			},
			func(b []byte) (any, error) { return DecodeResult(b) }},
		{"idle done", IdleDone{Failure{KindTimeout, "", "in idle", ""}, 9},
			func() []byte { m := IdleDone{Failure{KindTimeout, "", "in idle", ""}, 9}; return m.Encode() },
			func(b []byte) (any, error) { return DecodeIdleDone(b) }},
		{"idle done ok", IdleDone{},
			func() []byte { m := IdleDone{}; return m.Encode() },
			func(b []byte) (any, error) { return DecodeIdleDone(b) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.encode()
			var stream bytes.Buffer
			if err := WriteFrame(&stream, TypeAssign, body); err != nil {
				t.Fatal(err)
			}
			typ, got, err := ReadFrame(&stream, nil)
			if err != nil || typ != TypeAssign || !bytes.Equal(got, body) {
				t.Fatalf("frame round trip: type %d, err %v", typ, err)
			}
			msg, err := tt.decode(got)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(msg, tt.msg) {
				t.Fatalf("decoded %+v, want %+v", msg, tt.msg)
			}
			// Every strict prefix is an error, never a panic or a silent zero.
			for n := range len(body) {
				if _, err := tt.decode(body[:n]); err == nil {
					t.Fatalf("a %d-byte prefix of %d decoded without error", n, len(body))
				}
			}
			if _, err := tt.decode(append(body[:len(body):len(body)], 0)); err == nil {
				t.Fatal("a trailing byte decoded without error")
			}
		})
	}
}

func TestReadFrame_Errors(t *testing.T) {
	frame := func(n uint32, typ byte, body []byte) []byte {
		b := binary.LittleEndian.AppendUint32(nil, n)
		return append(append(b, typ), body...)
	}
	tests := []struct {
		name  string
		input []byte
		want  error
	}{
		{"empty stream", nil, io.EOF},
		{"short header", []byte{1, 0}, io.ErrUnexpectedEOF},
		{"truncated body", frame(10, 1, []byte("abc")), io.ErrUnexpectedEOF},
		{"over the cap", frame(MaxFrame+1, 1, nil), ErrTooLarge},
		{"huge length", frame(^uint32(0), 1, nil), ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ReadFrame(bytes.NewReader(tt.input), nil)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	if err := WriteFrame(io.Discard, TypeLog, make([]byte, MaxFrame+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("writing an oversized frame: %v", err)
	}
}

func TestDecode_RejectsUnknownKind(t *testing.T) {
	f := Failure{Kind: maxKind + 1}
	if _, err := DecodeFailure(f.Encode()); !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
	d := IdleDone{Failure: f}
	if _, err := DecodeIdleDone(d.Encode()); !errors.Is(err, ErrMalformed) {
		t.Fatalf("IDLE_DONE: err = %v, want ErrMalformed", err)
	}
}

// TestDecode_FlagsAreZeroOrOne checks that a flag has one encoding per
// state: a worker cannot smuggle a value past the parent in a flag's bits.
func TestDecode_FlagsAreZeroOrOne(t *testing.T) {
	for _, v := range []uint64{0, 1, 2, 127, 1 << 40} {
		var e Encoder
		e.Uint(v)
		d := NewDecoder(e.B)
		got := d.Bool()
		err := d.Finish()
		switch {
		case v <= 1 && (err != nil || got != (v == 1)):
			t.Errorf("flag %d: got %v, err %v", v, got, err)
		case v > 1 && !errors.Is(err, ErrMalformed):
			t.Errorf("flag %d: err = %v, want ErrMalformed", v, err)
		}
	}
	r := Result{Idle: true}
	body := r.Encode()
	body[len(body)-1] = 2
	if _, err := DecodeResult(body); !errors.Is(err, ErrMalformed) {
		t.Fatalf("RESULT with idle flag 2: err = %v, want ErrMalformed", err)
	}
}

func TestPeekFrame_OnlyCompleteBufferedFramesWithoutConsuming(t *testing.T) {
	var stream bytes.Buffer
	WriteFrame(&stream, TypeLog, []byte("first"))
	WriteFrame(&stream, TypeIdleDone, []byte{0, 0, 0, 0, 0})
	all := stream.Bytes()
	for cut := 0; cut <= len(all); cut++ {
		br := bufio.NewReader(bytes.NewReader(all[:cut]))
		br.Peek(cut) // buffer everything the source has
		typ, body, n, ok := PeekFrame(br)
		if want := cut >= 10; ok != want {
			t.Fatalf("%d bytes buffered: ok = %v, want %v", cut, ok, want)
		}
		if !ok {
			if br.Buffered() != cut {
				t.Fatalf("%d bytes buffered: a failed peek consumed bytes", cut)
			}
			continue
		}
		if typ != TypeLog || string(body) != "first" || n != 10 {
			t.Fatalf("peeked type %d, body %q, size %d", typ, body, n)
		}
		// Peeking consumes nothing: ReadFrame still reads the same frame.
		if rt, rb, err := ReadFrame(br, nil); err != nil || rt != typ || string(rb) != "first" {
			t.Fatalf("after a peek, ReadFrame gave %d %q %v", rt, rb, err)
		}
	}
	// A frame whose header claims more than the buffer could ever hold is
	// left to ReadFrame, which rejects it.
	huge := []byte{0xff, 0xff, 0xff, 0x7f, byte(TypeLog)}
	br := bufio.NewReader(bytes.NewReader(huge))
	br.Peek(len(huge))
	if _, _, _, ok := PeekFrame(br); ok {
		t.Fatal("peeked a frame over the cap")
	}
}

// FuzzReadFrame feeds arbitrary streams to the frame reader and every body
// decoder: none may panic, no frame may exceed the cap, and a frame that
// reads must match its header.
func FuzzReadFrame(f *testing.F) {
	var seed bytes.Buffer
	r := Result{Failure{KindTrap, "", "x", "y"}, 1, 2, 3, true}
	WriteFrame(&seed, TypeResult, r.Encode())
	f.Add(seed.Bytes())
	seed.Reset()
	idle := IdleDone{Failure{KindTimeout, "", "z", ""}, 4}
	WriteFrame(&seed, TypeIdleDone, idle.Encode())
	f.Add(seed.Bytes())
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Add([]byte{3, 0, 0, 0, 7, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		typ, body, err := ReadFrame(bytes.NewReader(data), nil)
		if err != nil {
			if len(data) >= 5 && binary.LittleEndian.Uint32(data) <= MaxFrame && int(binary.LittleEndian.Uint32(data))+5 <= len(data) {
				t.Fatalf("a complete frame failed: %v", err)
			}
			return
		}
		if len(body) > MaxFrame || int(binary.LittleEndian.Uint32(data)) != len(body) || Type(data[4]) != typ {
			t.Fatalf("frame does not match its header: %d bytes, type %d", len(body), typ)
		}
		DecodeHello(body)
		DecodeLoad(body)
		DecodeLoaded(body)
		DecodeFailure(body)
		DecodeAssign(body)
		DecodeLog(body)
		DecodeResult(body)
		DecodeIdleDone(body)
		// PeekFrame agrees with ReadFrame on every complete frame.
		br := bufio.NewReaderSize(bytes.NewReader(data), len(data)+16)
		br.Peek(len(data))
		if pt, pb, n, ok := PeekFrame(br); ok && (pt != typ || !bytes.Equal(pb, body) || n != len(body)+5) {
			t.Fatalf("PeekFrame gave type %d, %d bytes; ReadFrame type %d, %d bytes", pt, len(pb), typ, len(body))
		}
	})
}

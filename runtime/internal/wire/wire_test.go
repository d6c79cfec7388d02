package wire

import (
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
		{"load", Load{"builtin:range", 512, 64 << 20, 65536, -4, "/tmp/c", 123456, 1 << 20, 1 << 30},
			func() []byte {
				m := Load{"builtin:range", 512, 64 << 20, 65536, -4, "/tmp/c", 123456, 1 << 20, 1 << 30}
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
		{"result", Result{Failure{KindTrap, "", "boom", "wasm error"}, 77, 1 << 20, 3},
			func() []byte {
				m := Result{Failure{KindTrap, "", "boom", "wasm error"}, 77, 1 << 20, 3}
				return m.Encode()
			},
			func(b []byte) (any, error) { return DecodeResult(b) }},
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
}

// FuzzReadFrame feeds arbitrary streams to the frame reader and every body
// decoder: none may panic, no frame may exceed the cap, and a frame that
// reads must match its header.
func FuzzReadFrame(f *testing.F) {
	var seed bytes.Buffer
	r := Result{Failure{KindTrap, "", "x", "y"}, 1, 2, 3}
	WriteFrame(&seed, TypeResult, r.Encode())
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
	})
}

package mempipe

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/nettest"
)

// TestConn_IsANetConn holds Conn to the conformance suite of x/net for
// net.Conn implementations: concurrent use, deadlines, close semantics.
func TestConn_IsANetConn(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		a, b := New(nil, nil)
		return a, b, func() { a.Close(); b.Close() }, nil
	})
}

// limitedWriter takes at most max bytes, then fails.
type limitedWriter struct {
	buf bytes.Buffer
	max int
}

var errFull = errors.New("full")

func (w *limitedWriter) Write(p []byte) (int, error) {
	if room := w.max - w.buf.Len(); len(p) > room {
		w.buf.Write(p[:room])
		return room, errFull
	}
	return w.buf.Write(p)
}

func TestConn_WriteSpanTo(t *testing.T) {
	data := make([]byte, 3000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, tc := range []struct {
		name       string
		writes     []int // sizes of the peer's writes, in order, covering data
		n          int64 // the span
		max        int   // what the destination takes before failing
		closeAfter bool  // the peer closes after its writes
		wantN      int64
		wantErr    error
	}{
		{name: "one write, all of it", writes: []int{3000}, n: 3000, max: 1 << 20, wantN: 3000},
		{name: "a span across writes", writes: []int{100, 1000, 1900}, n: 2500, max: 1 << 20, wantN: 2500},
		{name: "a span inside a write", writes: []int{3000}, n: 10, max: 1 << 20, wantN: 10},
		{name: "the peer closes early", writes: []int{1000}, n: 2000, max: 1 << 20, closeAfter: true, wantN: 1000, wantErr: io.ErrUnexpectedEOF},
		{name: "the destination fails", writes: []int{3000}, n: 3000, max: 1234, wantN: 1234, wantErr: errFull},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := New(nil, nil)
			defer a.Close()
			defer b.Close()
			written := make(chan int, 1)
			go func() {
				off, total := 0, 0
				for _, size := range tc.writes {
					n, _ := b.Write(data[off : off+size])
					total += n
					off += size
					if n < size {
						break
					}
				}
				if tc.closeAfter {
					b.Close()
				}
				written <- total
			}()
			var w limitedWriter
			w.max = tc.max
			n, err := a.WriteSpanTo(&w, tc.n)
			if n != tc.wantN || !errors.Is(err, tc.wantErr) {
				t.Fatalf("WriteSpanTo = %d, %v; want %d, %v", n, err, tc.wantN, tc.wantErr)
			}
			if !bytes.Equal(w.buf.Bytes(), data[:n]) {
				t.Fatalf("the destination got %d bytes that are not the first %d written", w.buf.Len(), n)
			}
			// What the span did not take is still there to read, in order.
			if !tc.closeAfter {
				rest := make([]byte, sum(tc.writes)-int(n))
				if _, err := io.ReadFull(a, rest); err != nil {
					t.Fatalf("reading the rest: %v", err)
				}
				if !bytes.Equal(rest, data[n:sum(tc.writes)]) {
					t.Fatal("the bytes after the span differ from those written")
				}
			}
			// Every write returns once all of it is read; with the peer
			// closing early, what it wrote before.
			if got, want := <-written, sum(tc.writes); got != want {
				t.Fatalf("the peer's writes returned %d bytes, want %d", got, want)
			}
		})
	}
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

func TestConn_CloseEndsThePeersReads(t *testing.T) {
	a, b := New(nil, nil)
	defer a.Close()
	b.Close()
	if _, err := a.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read after the peer closed: %v, want EOF", err)
	}
	if _, err := a.Write([]byte{1}); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("write after the peer closed: %v, want io.ErrClosedPipe", err)
	}
	if _, err := b.Read(make([]byte, 1)); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("read after closing: %v, want io.ErrClosedPipe", err)
	}
}

// panicWriter panics on every write, as a bug in a destination might.
type panicWriter struct{}

func (panicWriter) Write([]byte) (int, error) { panic("destination bug") }

func TestConn_WriterIsReleasedWhenTheReaderPanics(t *testing.T) {
	a, b := New(nil, nil)
	done := make(chan error, 1)
	go func() {
		_, err := b.Write([]byte("response"))
		done <- err
	}()
	func() {
		defer func() { recover() }()
		a.WriteSpanTo(panicWriter{}, 8)
	}()
	// The proxy recovers such a panic and closes the connection; the
	// broker's write must then end rather than wait for an answer.
	a.Close()
	select {
	case err := <-done:
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("the write ended with %v, want io.ErrClosedPipe", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the write still waits 5 s after the reader panicked and closed")
	}
}

func TestConn_Addresses(t *testing.T) {
	ga := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
	gb := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2}
	a, b := New(ga, gb)
	if a.LocalAddr() != ga || a.RemoteAddr() != gb || b.LocalAddr() != gb || b.RemoteAddr() != ga {
		t.Errorf("addresses: a %v->%v, b %v->%v; want a %v->%v", a.LocalAddr(), a.RemoteAddr(), b.LocalAddr(), b.RemoteAddr(), ga, gb)
	}
	c, _ := New(nil, nil)
	if got := c.LocalAddr().String(); got != "memory" {
		t.Errorf("an address not given reads %q, want memory", got)
	}
}

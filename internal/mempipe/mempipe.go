// Package mempipe connects two parts of one process with a [net.Conn]
// pair that moves bytes in memory: the daemon's proxy and its embedded
// cluster, which would otherwise talk over loopback TCP.
//
// Like [net.Pipe], the connection is synchronous: a Write returns once the
// other end has read every byte of it, and each byte is copied once, from
// the writer's buffer into the reader's. Unlike it, a reader can hand the
// bytes being written straight to an [io.Writer] with [Conn.WriteSpanTo],
// so that a proxy relaying a large response from a broker in the same
// process to a client socket copies nothing itself: the bytes go from the
// broker's buffer to the kernel, as they would if the client had connected
// to the broker directly.
package mempipe

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// New returns the two ends of a new connection; each end's LocalAddr is
// the given address and its RemoteAddr the other's. A nil address reads
// as "memory".
func New(addrA, addrB net.Addr) (*Conn, *Conn) {
	if addrA == nil {
		addrA = addr{}
	}
	if addrB == nil {
		addrB = addr{}
	}
	aToB, bToA := make(chan []byte), make(chan []byte)
	aAck, bAck := make(chan int), make(chan int)
	aDone, bDone := make(chan struct{}), make(chan struct{})
	a := &Conn{
		in: bToA, inAck: bAck, out: aToB, outAck: aAck,
		done: aDone, peerDone: bDone, local: addrA, remote: addrB,
	}
	b := &Conn{
		in: aToB, inAck: aAck, out: bToA, outAck: bAck,
		done: bDone, peerDone: aDone, local: addrB, remote: addrA,
	}
	a.readDeadline.init()
	a.writeDeadline.init()
	b.readDeadline.init()
	b.writeDeadline.init()
	return a, b
}

// Conn is one end of a connection made by [New]. It is safe for
// concurrent use: reads and writes may run at the same time, and writes
// are serialised so that their bytes never interleave.
type Conn struct {
	// A write offers what is left of its buffer on out until the peer's
	// reads, which receive it on in, have taken all of it; each read
	// answers how much it took on the ack channel.
	in     <-chan []byte
	inAck  chan<- int
	out    chan<- []byte
	outAck <-chan int

	writeMu sync.Mutex

	done      chan struct{} // closed by Close
	peerDone  <-chan struct{}
	closeOnce sync.Once

	readDeadline, writeDeadline deadline

	local, remote net.Addr
}

var _ net.Conn = (*Conn)(nil)

// Read reads what the peer is writing, up to len(b) bytes. It returns
// io.EOF once the peer has closed and io.ErrClosedPipe once this end has.
func (c *Conn) Read(b []byte) (int, error) {
	return c.take(func(p []byte) (int, error) { return copy(b, p), nil })
}

// WriteSpanTo writes the next n bytes the peer writes to w, straight from
// the peer's buffer, and returns how many it wrote. It stops early with an
// error from w, with io.ErrUnexpectedEOF if the peer closes first, and
// with Read's errors (io.ErrClosedPipe, os.ErrDeadlineExceeded) otherwise.
// The peer's Write waits while w.Write runs.
func (c *Conn) WriteSpanTo(w io.Writer, n int64) (int64, error) {
	var total int64
	for total < n {
		k, err := c.take(func(p []byte) (int, error) {
			return w.Write(p[:min(int64(len(p)), n-total)])
		})
		total += int64(k)
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// take receives the peer's pending write, lets use consume a prefix of it,
// and tells the peer how much was consumed.
func (c *Conn) take(use func(p []byte) (int, error)) (int, error) {
	switch {
	case isClosed(c.done):
		return 0, io.ErrClosedPipe
	case isClosed(c.peerDone):
		return 0, io.EOF
	case isClosed(c.readDeadline.expired()):
		return 0, os.ErrDeadlineExceeded
	}
	select {
	case p := <-c.in:
		// The writer waits for this answer whatever happens, even if use
		// panics.
		var n int
		defer func() { c.inAck <- n }()
		n, err := use(p)
		return n, err
	case <-c.done:
		return 0, io.ErrClosedPipe
	case <-c.peerDone:
		return 0, io.EOF
	case <-c.readDeadline.expired():
		return 0, os.ErrDeadlineExceeded
	}
}

// Write writes b, returning once the peer has read all of it, or with an
// error once either end closes or the write deadline passes. A part of b
// the peer has already taken is finished first: the peer may still be
// using b (in WriteSpanTo, writing it to a socket), so Write cannot return
// before it is done, and Close and deadlines wait for that. A proxy
// relaying with WriteSpanTo closes its destination before the pipe.
func (c *Conn) Write(b []byte) (int, error) {
	switch {
	case isClosed(c.done), isClosed(c.peerDone):
		return 0, io.ErrClosedPipe
	case isClosed(c.writeDeadline.expired()):
		return 0, os.ErrDeadlineExceeded
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	var n int
	// An empty write still waits for a read, as net.Pipe's does.
	for first := true; first || len(b) > 0; first = false {
		select {
		case c.out <- b:
			k := <-c.outAck
			b = b[k:]
			n += k
		case <-c.done:
			return n, io.ErrClosedPipe
		case <-c.peerDone:
			return n, io.ErrClosedPipe
		case <-c.writeDeadline.expired():
			return n, os.ErrDeadlineExceeded
		}
	}
	return n, nil
}

// Close closes this end: its reads and writes fail, and the peer's reads
// return io.EOF.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { close(c.done) })
	return nil
}

// LocalAddr returns this end's address, as given to New.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the other end's address, as given to New.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if isClosed(c.done) {
		return io.ErrClosedPipe
	}
	c.readDeadline.set(t)
	c.writeDeadline.set(t)
	return nil
}

// SetReadDeadline sets the time after which reads fail with
// os.ErrDeadlineExceeded; the zero time means none.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if isClosed(c.done) {
		return io.ErrClosedPipe
	}
	c.readDeadline.set(t)
	return nil
}

// SetWriteDeadline sets the time after which writes fail with
// os.ErrDeadlineExceeded; the zero time means none.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if isClosed(c.done) {
		return io.ErrClosedPipe
	}
	c.writeDeadline.set(t)
	return nil
}

// addr is the address of an end New was given none for.
type addr struct{}

func (addr) Network() string { return "memory" }
func (addr) String() string  { return "memory" }

// deadline is a settable point in time, seen as a channel that is closed
// once it has passed.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	passed chan struct{}
}

func (d *deadline) init() { d.passed = make(chan struct{}) }

// set moves the deadline to t; the zero time removes it.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		// The timer fired: wait until its function has closed passed, so
		// that the channel is not closed twice below.
		<-d.passed
	}
	d.timer = nil
	if isClosed(d.passed) {
		d.passed = make(chan struct{})
	}
	if t.IsZero() {
		return
	}
	if wait := time.Until(t); wait > 0 {
		passed := d.passed
		d.timer = time.AfterFunc(wait, func() { close(passed) })
		return
	}
	close(d.passed)
}

// expired returns the channel closed when the current deadline passes.
func (d *deadline) expired() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.passed
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

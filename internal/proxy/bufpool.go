package proxy

import (
	"bufio"
	"errors"
	"io"
	"sync"
)

// Buffers are sized to the traffic, not to the connection. Ten thousand
// consumers keep ten thousand group connections open that carry a
// heartbeat a second; with 16 KiB buffered readers and writers each way
// for the life of every connection, the gateway held about 330 MB for
// them, most of it idle. So a connection owns only a small read buffer,
// enough for a heartbeat or a metadata request, and borrows a large
// buffer from bufPool while more than that is pending: a reader's for the
// rest of a frame, a writer's for a burst of frames. A reader gives its
// large buffer back when it has handed out every byte it read and waits at
// a frame boundary (connReader.shrink); a writer when it has flushed. A
// connection blocked waiting for its next request holds none.
//
// Pooling them matters too: fifty consumers starting at once open 150
// connections, and allocating and clearing 64 KiB for each, then
// collecting it, was a tenth of the daemon's CPU during their start-up,
// on cores the consumers themselves were waiting for.

const (
	// bufSize is the size of a pooled buffer, a reader's or a writer's;
	// frames larger than it bypass the buffers.
	bufSize = 16 << 10
	// smallReadBuf is a connection's own read buffer: a consumer's
	// Heartbeat (about 150 bytes), a Metadata request for a few topics, or
	// their answers fit in it.
	smallReadBuf = 512
	// frameBufSize is the size of the pooled buffers that requests larger
	// than bufSize, and not streamed, are read into whole.
	frameBufSize = 64 << 10
)

// bufPool lends connections their large buffers. A buffer goes back only
// once no goroutine can touch it again: see conn.releaseBuffers.
type bufPool struct {
	reads   sync.Pool // *[bufSize]byte, for connReaders
	writers sync.Pool // *bufio.Writer of bufSize
	frames  sync.Pool // *[frameBufSize]byte, for whole requests
}

func (b *bufPool) readBuf() *[bufSize]byte {
	if p, ok := b.reads.Get().(*[bufSize]byte); ok {
		return p
	}
	return new([bufSize]byte)
}

func (b *bufPool) putReadBuf(p *[bufSize]byte) {
	if p != nil {
		b.reads.Put(p)
	}
}

// frameBuf lends a buffer of at least n bytes for one request; n above
// frameBufSize gets a buffer of its own, which putFrameBuf lets go.
func (b *bufPool) frameBuf(n int) []byte {
	if n > frameBufSize {
		return make([]byte, n)
	}
	if p, ok := b.frames.Get().(*[frameBufSize]byte); ok {
		return p[:n]
	}
	return new([frameBufSize]byte)[:n]
}

func (b *bufPool) putFrameBuf(buf []byte) {
	if cap(buf) == frameBufSize {
		b.frames.Put((*[frameBufSize]byte)(buf[:frameBufSize]))
	}
}

func (b *bufPool) writer(w io.Writer) *bufio.Writer {
	if bw, ok := b.writers.Get().(*bufio.Writer); ok {
		bw.Reset(w)
		return bw
	}
	return bufio.NewWriterSize(w, bufSize)
}

// putWriter takes bw back; unflushed bytes are dropped.
func (b *bufPool) putWriter(bw *bufio.Writer) {
	if bw == nil || bw.Size() != bufSize {
		return
	}
	bw.Reset(nil)
	b.writers.Put(bw)
}

// bufferedReader is what reading a frame through a buffer needs: the
// connections' connReader, or a bufio.Reader in tests.
type bufferedReader interface {
	io.Reader
	io.ByteReader
	Buffered() int
	Peek(n int) ([]byte, error)
	Discard(n int) (int, error)
}

// errBufferFull is Peek's answer for more bytes than a reader can hold.
var errBufferFull = errors.New("proxy: read buffer full")

// connReader buffers one connection's reads in its small buffer, and in a
// large one borrowed from the pool while more than the small one holds is
// pending (see bufPool). It is used by one goroutine at a time.
type connReader struct {
	src   io.Reader
	pool  *bufPool
	small [smallReadBuf]byte
	large *[bufSize]byte // borrowed; nil when not
	buf   []byte         // small[:] or large[:]
	r, w  int            // buf[r:w] is read and not yet handed out
	// full records that the last read filled the small buffer: the
	// peer is sending more than it holds, so the next read goes to a
	// large buffer (until shrink).
	full bool
	err  error // from src, returned once the buffer is drained
}

func newConnReader(src io.Reader, pool *bufPool) *connReader {
	r := &connReader{}
	r.reset(src, pool)
	return r
}

// reset makes r read from src, with nothing buffered.
func (r *connReader) reset(src io.Reader, pool *bufPool) {
	r.src, r.pool = src, pool
	r.buf = r.small[:]
}

// Size is the most Peek can return.
func (r *connReader) Size() int { return bufSize }

// Buffered returns how many bytes can be read without reading from src.
func (r *connReader) Buffered() int { return r.w - r.r }

// shrink gives the large buffer back when nothing is buffered. Callers
// call it at frame boundaries, before a read that may wait for the peer
// indefinitely; within a frame the large buffer stays, so that a frame
// that streams through is read in large reads.
func (r *connReader) shrink() {
	if r.r == r.w {
		r.r, r.w, r.full = 0, 0, false
		if r.large != nil {
			r.pool.putReadBuf(r.large)
			r.large, r.buf = nil, r.small[:]
		}
	}
}

// release gives the large buffer back for good: r must not be used after.
func (r *connReader) release() {
	if r.large != nil {
		r.pool.putReadBuf(r.large)
		r.large = nil
	}
	r.buf, r.src = nil, nil
}

// fill reads from src once, making room for need bytes (need <= bufSize)
// from r.r first.
func (r *connReader) fill(need int) {
	if r.r == r.w {
		r.r, r.w = 0, 0
	}
	if r.large == nil && (need > len(r.small) || r.full) {
		// More than the small buffer holds is pending: a frame larger
		// than it, or a peer sending faster than it holds.
		r.large = r.pool.readBuf()
		r.w = copy(r.large[:], r.buf[r.r:r.w])
		r.r, r.buf = 0, r.large[:]
	}
	if need > len(r.buf)-r.r {
		r.w = copy(r.buf, r.buf[r.r:r.w])
		r.r = 0
	}
	for range 100 {
		n, err := r.src.Read(r.buf[r.w:])
		if n < 0 || n > len(r.buf)-r.w {
			panic("proxy: reader returned an impossible count")
		}
		r.full = r.large == nil && r.w+n == len(r.buf)
		r.w += n
		if err != nil {
			r.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.err = io.ErrNoProgress
}

// readErr returns and clears the pending read error.
func (r *connReader) readErr() error {
	err := r.err
	r.err = nil
	return err
}

// Peek returns the next n bytes without consuming them; with fewer
// buffered when src fails, it returns those and the error.
func (r *connReader) Peek(n int) ([]byte, error) {
	if n < 0 {
		return nil, bufio.ErrNegativeCount
	}
	if n > bufSize {
		return r.buf[r.r:r.w], errBufferFull
	}
	for r.w-r.r < n && r.err == nil {
		r.fill(n)
	}
	if avail := r.w - r.r; avail < n {
		err := r.readErr()
		if err == nil {
			err = errBufferFull
		}
		return r.buf[r.r:r.w], err
	}
	return r.buf[r.r : r.r+n], nil
}

// Discard skips the next n bytes.
func (r *connReader) Discard(n int) (int, error) {
	if n < 0 {
		return 0, bufio.ErrNegativeCount
	}
	done := 0
	for {
		k := min(n-done, r.w-r.r)
		r.r += k
		done += k
		if done == n {
			return done, nil
		}
		if r.err != nil {
			return done, r.readErr()
		}
		r.fill(1)
	}
}

// Read reads into p: what is buffered, or, with nothing buffered, from
// src, straight into p when p is at least as large as the buffer.
func (r *connReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		if r.Buffered() > 0 {
			return 0, nil
		}
		return 0, r.readErr()
	}
	if r.r == r.w {
		if r.err != nil {
			return 0, r.readErr()
		}
		if len(p) >= len(r.buf) {
			// Nothing to copy through the buffer.
			n, err := r.src.Read(p)
			if n < 0 {
				panic("proxy: reader returned a negative count")
			}
			return n, err
		}
		r.fill(1)
		if r.r == r.w {
			return 0, r.readErr()
		}
	}
	n := copy(p, r.buf[r.r:r.w])
	r.r += n
	return n, nil
}

// ReadByte reads one byte.
func (r *connReader) ReadByte() (byte, error) {
	for r.r == r.w {
		if r.err != nil {
			return 0, r.readErr()
		}
		r.fill(1)
	}
	c := r.buf[r.r]
	r.r++
	return c, nil
}

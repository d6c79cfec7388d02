package proxy

import (
	"bufio"
	"io"
	"sync"
)

// bufPool lends the buffered readers and writers of connections. Each
// connection uses four of bufSize bytes (client and upstream, each way),
// and most live for a few requests: fifty consumers starting at once open
// 150 connections, and allocating and clearing 64 KiB for each, then
// collecting it, was a tenth of the daemon's CPU during their start-up,
// on cores the consumers themselves were waiting for.
//
// A buffer goes back only once no goroutine can touch it again: see
// conn.releaseBuffers.
type bufPool struct {
	readers, writers sync.Pool
}

func (b *bufPool) reader(r io.Reader) *bufio.Reader {
	if br, ok := b.readers.Get().(*bufio.Reader); ok {
		br.Reset(r)
		return br
	}
	return bufio.NewReaderSize(r, bufSize)
}

func (b *bufPool) writer(w io.Writer) *bufio.Writer {
	if bw, ok := b.writers.Get().(*bufio.Writer); ok {
		bw.Reset(w)
		return bw
	}
	return bufio.NewWriterSize(w, bufSize)
}

// putReader takes br back; it drops what br holds and its source.
func (b *bufPool) putReader(br *bufio.Reader) {
	if br == nil || br.Size() != bufSize {
		return
	}
	br.Reset(nil)
	b.readers.Put(br)
}

// putWriter takes bw back; unflushed bytes are dropped.
func (b *bufPool) putWriter(bw *bufio.Writer) {
	if bw == nil || bw.Size() != bufSize {
		return
	}
	bw.Reset(nil)
	b.writers.Put(bw)
}

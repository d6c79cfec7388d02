package proxy

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
)

// respQueue keeps one connection's responses in request order and writes
// them to the client.
//
// There is no writer goroutine: whichever goroutine completes a slot (the
// upstream reader, an interceptor, the request reader for local answers)
// writes out every response that is ready at the head of the queue, unless
// another goroutine is already doing so, in which case that one picks the
// new response up before it stops. That saves a goroutine hand-off per
// response, which is most of a proxy's added latency on a busy machine.
//
// The writing goroutine borrows a buffered writer for what it writes and
// gives it back once that is flushed, so a connection with no response
// under way holds none.
type respQueue struct {
	mu      sync.Mutex
	space   sync.Cond // signalled when slots leave the queue or it dies
	slots   []*slot
	head    int
	batch   []*slot // reused by the writing goroutine
	writing bool    // a goroutine is writing; only it touches bw
	closed  bool    // no more pushes
	dead    bool    // the connection is closed
	dst     io.Writer
	bufs    *bufPool
	bw      *bufio.Writer // borrowed by the writing goroutine; nil otherwise

	finished chan struct{} // closed once closed and every slot written
	finOnce  sync.Once
}

func newRespQueue(dst io.Writer, bufs *bufPool) *respQueue {
	q := &respQueue{dst: dst, bufs: bufs, finished: make(chan struct{})}
	q.space.L = &q.mu
	return q
}

// push appends s, waiting while clientQueueDepth responses are pending
// (which stops the connection's reading, pushing back on the client).
func (q *respQueue) push(s *slot) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.slots)-q.head >= clientQueueDepth && !q.dead {
		q.space.Wait()
	}
	if q.dead {
		return errShutdown
	}
	q.slots = append(q.slots, s)
	return nil
}

// complete records s's answer and writes whatever is ready. A write error,
// or a slot whose answer is an error, is returned to be turned into
// closing the connection.
func (q *respQueue) complete(s *slot, resp []byte, err error) error {
	q.mu.Lock()
	s.resp, s.err, s.ready = resp, err, true
	if q.writing || q.dead {
		q.mu.Unlock()
		return nil
	}
	q.writing = true
	werr := q.writeReady()
	q.writing = false
	if werr != nil {
		q.dead = true
	}
	if q.dead {
		q.space.Broadcast() // for release
	}
	q.maybeFinish()
	q.mu.Unlock()
	return werr
}

// writeReady writes the ready slots at the head, repeatedly, until the head
// is not ready. It is called and returns with mu held, and releases it
// while writing.
func (q *respQueue) writeReady() error {
	for {
		batch := q.batch[:0]
		for q.head < len(q.slots) && q.slots[q.head].ready {
			batch = append(batch, q.slots[q.head])
			q.slots[q.head] = nil
			q.head++
		}
		switch {
		case q.head == len(q.slots):
			q.slots, q.head = q.slots[:0], 0
		case q.head > 64 && q.head > len(q.slots)/2:
			n := copy(q.slots, q.slots[q.head:])
			clear(q.slots[n:])
			q.slots, q.head = q.slots[:n], 0
		}
		q.batch = batch
		if len(batch) == 0 {
			return nil
		}
		q.space.Broadcast()
		q.mu.Unlock()
		err := q.write(batch)
		clear(batch)
		q.mu.Lock()
		if err != nil {
			return err
		}
	}
}

func (q *respQueue) write(batch []*slot) error {
	bw := q.borrowWriter()
	defer q.returnWriter()
	var prefix [4]byte
	for _, s := range batch {
		if s.err != nil {
			bw.Flush() // the answers before it still go out
			return s.err
		}
		binary.BigEndian.PutUint32(prefix[:], uint32(len(s.resp)))
		bw.Write(prefix[:])
		if _, err := bw.Write(s.resp); err != nil {
			return fmt.Errorf("writing response: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing response: %w", err)
	}
	return nil
}

// borrowWriter returns the writer for the writing goroutine, borrowing
// one from the pool when it has none.
func (q *respQueue) borrowWriter() *bufio.Writer {
	if q.bw == nil {
		q.bw = q.bufs.writer(q.dst)
	}
	return q.bw
}

// returnWriter gives the writing goroutine's writer back; what it did not
// flush is dropped.
func (q *respQueue) returnWriter() {
	q.bufs.putWriter(q.bw)
	q.bw = nil
}

// acquireHead takes the right to write for a response streamed straight
// to the client: it succeeds only when s is next in order and nobody is
// writing, and removes s from the queue. The caller writes with q.bw, and
// must call releaseHead.
func (q *respQueue) acquireHead(s *slot) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.writing || q.dead || q.head >= len(q.slots) || q.slots[q.head] != s {
		return false
	}
	q.writing = true
	q.borrowWriter()
	q.slots[q.head] = nil
	q.head++
	q.space.Broadcast()
	return true
}

// releaseHead ends a streamed write (failed says whether it broke
// off), then writes the responses that became ready meanwhile.
func (q *respQueue) releaseHead(failed error) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.returnWriter() // flushed by the streaming goroutine, unless it failed
	var err error
	if failed == nil {
		err = q.writeReady()
	}
	q.writing = false
	if failed != nil || err != nil {
		q.dead = true
	}
	if q.dead {
		q.space.Broadcast() // for release
	}
	q.maybeFinish()
	return err
}

// release kills the queue, waits for a write under way to end, and returns
// the writer it may still hold (nil when none), which nothing touches after
// that: every later complete finds the queue dead.
func (q *respQueue) release() *bufio.Writer {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dead = true
	q.space.Broadcast()
	for q.writing {
		q.space.Wait()
	}
	bw := q.bw
	q.bw = nil
	return bw
}

// close says no more slots will be pushed; finished is closed once the
// pending ones are written.
func (q *respQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.maybeFinish()
	q.mu.Unlock()
}

// kill wakes a push waiting for space on a connection that is closing.
func (q *respQueue) kill() {
	q.mu.Lock()
	q.dead = true
	q.space.Broadcast()
	q.mu.Unlock()
}

func (q *respQueue) maybeFinish() {
	if q.closed && !q.writing && q.head == len(q.slots) {
		q.finOnce.Do(func() { close(q.finished) })
	}
}

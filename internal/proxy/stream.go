package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Large responses are streamed from the upstream to the client as they
// arrive instead of being read whole first, when the response is next in
// the client's order; large requests that need no decoding (Produce,
// typically) are streamed to the upstream the same way. A proxy that
// stores and forwards adds the transfer time of every Fetch response to the
// consumer's latency: against kfake that was most of its cost (measured:
// +1.1 ms per MiB fetched, and consuming 1.4-1.7x slower than directly).
//
// Streaming needs the final size up front, so it applies to responses the
// proxy sends unchanged, and to Fetch from v16: there the only part that
// can need rewriting (the KIP-951 node endpoints) is the top-level tagged
// field section at the very end, which is replaced by a section of exactly
// the same length, see [fetchTagSection].

// defaultStreamFrom is the frame size from which streaming pays.
const defaultStreamFrom = 64 << 10

// fillerTag is the tagged field used to pad a rewritten tag section to
// its original length. Readers skip tags they do not know (KIP-482), and
// Kafka numbers its tags from 0 upwards, far from this one.
const fillerTag = 10000

// streamable reports whether the response for s can be streamed.
func streamable(s *slot) bool {
	if s.onResponse != nil || s.key == int16(kmsg.ApiVersions) {
		return false
	}
	return !namesBrokers(s.key, s.version) || (s.key == int16(kmsg.Fetch) && s.version >= 16)
}

// streamer copies one response frame from r to w while walking it.
type streamer struct {
	r    bufferedReader
	w    *bufio.Writer
	raw  io.Writer // w's destination, for long runs of bytes; nil: use w
	src  io.Reader // r's source, for long runs of bytes
	bufs *sync.Pool
	left int64 // bytes of the frame not yet read
	err  error
}

// copyChunk is the buffer for long runs (record batches): big enough that
// a megabyte moves in a few system calls instead of the bufio's sixty.
const copyChunk = 256 << 10

// copyLong copies n bytes from r to raw (after flushing w, when not nil):
// what r has buffered first, then the rest straight from src, the
// connection r reads.
// Between two TCP connections the rest moves with splice(2), inside the
// kernel: the bytes are not copied into the proxy and out again, and one
// call moves up to a megabyte (a 1 MB Fetch response through the proxy took
// 18 reads and 10 writes before, 11 reads, 6 writes and 2 splices after).
// From an upstream that can hand its bytes over itself (a broker of the
// embedded cluster, in memory) they go straight to raw. Otherwise (TLS) it
// goes through a pooled chunk buffer.
func copyLong(w *bufio.Writer, raw io.Writer, r bufferedReader, src io.Reader, n int64, bufs *sync.Pool) error {
	if w != nil {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if k := int64(r.Buffered()); k > 0 {
		b, _ := r.Peek(int(min(k, n)))
		if _, err := raw.Write(b); err != nil {
			return err
		}
		r.Discard(len(b))
		n -= int64(len(b))
	}
	if n == 0 {
		return nil
	}
	if sw, ok := src.(spanWriter); ok {
		_, err := sw.WriteSpanTo(raw, n)
		return err
	}
	dst, okDst := raw.(*net.TCPConn)
	from, okSrc := src.(*net.TCPConn)
	if okDst && okSrc {
		// r's buffer is empty now, so reading past it keeps the order.
		lr := &io.LimitedReader{R: from, N: n}
		_, err := dst.ReadFrom(lr)
		if err == nil && lr.N > 0 {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	buf := *bp
	for n > 0 {
		k, err := r.Read(buf[:min(n, int64(len(buf)))])
		if k > 0 {
			if _, werr := raw.Write(buf[:k]); werr != nil {
				return werr
			}
			n -= int64(k)
		}
		if err != nil {
			if err == io.EOF && n > 0 {
				err = io.ErrUnexpectedEOF
			}
			if n > 0 {
				return err
			}
		}
	}
	return nil
}

// spanWriter is an upstream connection that can write the next n bytes
// it would read straight to w, without a buffer between: the embedded
// cluster's in-memory connections (package mempipe).
type spanWriter interface {
	WriteSpanTo(w io.Writer, n int64) (int64, error)
}

var errStreamMalformed = errors.New("malformed response while streaming")

func (st *streamer) copy(n int64) {
	if st.err != nil {
		return
	}
	if n < 0 || n > st.left {
		st.err = fmt.Errorf("%w: %d bytes wanted, %d left", errStreamMalformed, n, st.left)
		return
	}
	var err error
	if st.raw != nil && n >= copyChunk/4 {
		err = copyLong(st.w, st.raw, st.r, st.src, n, st.bufs)
	} else {
		_, err = io.CopyN(st.w, st.r, n)
	}
	if err != nil {
		st.err = err
		return
	}
	st.left -= n
}

// uvarint reads an unsigned varint, copying its bytes through.
func (st *streamer) uvarint() uint64 {
	var v uint64
	for i := 0; i < 5; i++ {
		if st.err != nil {
			return 0
		}
		if st.left == 0 {
			st.err = fmt.Errorf("%w: truncated varint", errStreamMalformed)
			return 0
		}
		c, err := st.r.ReadByte()
		if err != nil {
			st.err = err
			return 0
		}
		st.left--
		if err := st.w.WriteByte(c); err != nil {
			st.err = err
			return 0
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v
		}
	}
	st.err = fmt.Errorf("%w: varint longer than 5 bytes", errStreamMalformed)
	return 0
}

// compactLen reads a compact array or bytes length; null reads as 0.
func (st *streamer) compactLen() int64 {
	n := st.uvarint()
	if n == 0 || st.err != nil {
		return 0
	}
	if int64(n-1) > st.left {
		st.err = fmt.Errorf("%w: length %d, %d bytes left", errStreamMalformed, n-1, st.left)
		return 0
	}
	return int64(n - 1)
}

func (st *streamer) tags() {
	for n := st.uvarint(); n > 0 && st.err == nil; n-- {
		st.uvarint()
		st.copy(int64(st.uvarint()))
	}
}

// fetch streams a Fetch response (v16 or later) after its size prefix,
// rewriting its final tagged field section in place.
func (st *streamer) fetch(version int16, adv advertiser) error {
	st.copy(4) // correlation id
	st.tags()  // response header
	st.copy(4 + 2 + 4)
	for range st.compactLen() {
		st.copy(16) // topic id
		for range st.compactLen() {
			st.copy(4 + 2 + 8 + 8 + 8)
			for range st.compactLen() {
				st.copy(8 + 8)
				st.tags()
			}
			st.copy(4)
			st.copy(st.compactLen()) // record batches
			st.tags()
		}
		st.tags()
	}
	if st.err != nil {
		return st.err
	}
	section := make([]byte, st.left)
	if _, err := io.ReadFull(st.r, section); err != nil {
		return err
	}
	st.left = 0
	out, err := fetchTagSection(version, section, adv)
	if err != nil {
		return err
	}
	_, err = st.w.Write(out)
	return err
}

// fetchTagsPrefix is an empty Fetch response body (v12+) up to its
// top-level tags: throttle, error code, session id, no topics.
var fetchTagsPrefix = [11]byte{10: 1}

// fetchTagSection returns a top-level tagged field section for a Fetch
// response of the given version with the same length as section: the
// node endpoints rewritten and the rest padded with a filler tag, or, when
// the rewritten endpoints do not fit, dropped (they only save the client a
// metadata refresh) and padded. Other tags are kept when they fit.
func fetchTagSection(version int16, section []byte, adv advertiser) ([]byte, error) {
	if len(section) == 1 && section[0] == 0 {
		return section, nil
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = version
	body := append(fetchTagsPrefix[:], section...)
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("fetch response tagged fields: %w", err)
	}
	rewriteAddresses(resp, adv)
	if out, ok := padTags(resp, len(section)); ok {
		return out, nil
	}
	resp.Brokers = nil
	if out, ok := padTags(resp, len(section)); ok {
		return out, nil
	}
	resp.UnknownTags = kmsg.Tags{}
	if out, ok := padTags(resp, len(section)); ok {
		return out, nil
	}
	return nil, fmt.Errorf("fetch response tagged fields: cannot rewrite %d bytes in place", len(section))
}

// padTags encodes resp's tag section, with a filler tag if needed, to
// exactly size bytes.
func padTags(resp *kmsg.FetchResponse, size int) ([]byte, bool) {
	enc := func() []byte { return resp.AppendTo(nil)[len(fetchTagsPrefix):] }
	base := enc()
	if len(base) == size {
		return base, true
	}
	orig := resp.UnknownTags
	need := size - len(base) // the filler's bytes, with its tag and size
	for n := need - 3; n >= 0 && n >= need-8; n-- {
		var t kmsg.Tags
		orig.Each(func(k uint32, v []byte) { t.Set(k, v) })
		t.Set(fillerTag, make([]byte, n))
		resp.UnknownTags = t
		if out := enc(); len(out) == size {
			return out, true
		}
	}
	resp.UnknownTags = orig
	return nil, false
}

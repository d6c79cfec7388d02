package loadtest

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/internal/proxy/frame"
)

// numKeys bounds the API keys the generator speaks (CreateTopics, 19, is
// the highest).
const numKeys = int(kmsg.CreateTopics) + 1

const (
	// maxResponseBytes bounds a response frame: a leader's JoinGroup
	// answer for a large group is the biggest the generator reads.
	maxResponseBytes = 64 << 20
	// keepBuf is the largest read or write buffer a connection keeps
	// between frames.
	keepBuf = 64 << 10
	// sharedReadBuf is a shared connection's read buffer: thousands of
	// members' answers arrive on it back to back. A member's own
	// connection gets a small one, enough for a heartbeat's or commit's
	// answer to take one read rather than two (size, then body).
	sharedReadBuf = 64 << 10
	ownReadBuf    = 512
)

// errClosed fails the requests of a connection the generator closed.
var errClosed = errors.New("connection closed")

// maxVersion caps each request at a version whose fields the generator
// fills; the target's ApiVersions may lower it.
func maxVersion(key int16) int16 {
	switch kmsg.Key(key) {
	case kmsg.ApiVersions:
		return 3
	case kmsg.OffsetCommit:
		return 9 // v10 names topics by id
	}
	if r := kmsg.RequestForKey(key); r != nil {
		return r.MaxVersion()
	}
	return -1
}

// conn is one TCP connection to a broker, or to the gateway. Requests are
// pipelined: any goroutine may send, a reader goroutine matches each
// answer to its request by correlation id and hands it back on the
// request's done channel. Brokers answer a connection's requests in
// order, one at a time, and the generator relies on neither.
type conn struct {
	nc       net.Conn
	addr     string
	clientID *string
	// versions is, per key, the version to send, -1 when the target does
	// not take the key; written before the first request is shared.
	versions [numKeys]int16

	wmu  sync.Mutex // serialises writes, and orders correlation ids with them
	wbuf []byte
	corr int32

	mu      sync.Mutex
	pending map[int32]*call
	err     error // why the connection failed; nil while it is up
}

// call is one request in flight and, once it is back on done, its answer.
// A member keeps one per recurring request and sends it again and
// again, so a heartbeat costs no allocation.
type call struct {
	req  kmsg.Request
	resp kmsg.Response
	// key and flexible are fixed when the request is sent: the reader
	// needs them, and the sender may change req meanwhile.
	key      int16
	flexible bool
	// steady marks a request sent during the steady phase, the only
	// ones measured.
	steady bool
	sent   time.Time
	rtt    time.Duration
	err    error
	done   chan<- *call
	// onDone, when set, takes the answer instead of done, on the
	// connection's reader goroutine: a heartbeat's answer is handled
	// there, without waking its member.
	onDone func(*call)
}

// deliver hands a finished call back.
func (cl *call) deliver() {
	if cl.onDone != nil {
		cl.onDone(cl)
		return
	}
	cl.done <- cl
}

func newCall(req kmsg.Request, done chan<- *call) *call {
	return &call{req: req, resp: req.ResponseKind(), done: done}
}

// dial connects to addr and learns its API versions.
func dial(ctx context.Context, addr string, clientID *string, timeout time.Duration, shared bool) (*conn, error) {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &conn{nc: nc, addr: addr, clientID: clientID, pending: make(map[int32]*call, 4)}
	for i := range c.versions {
		c.versions[i] = -1
	}
	c.versions[kmsg.ApiVersions] = maxVersion(int16(kmsg.ApiVersions))
	size := ownReadBuf
	if shared {
		size = sharedReadBuf
	}
	go c.read(bufio.NewReaderSize(nc, size))
	if err := c.negotiate(ctx, timeout); err != nil {
		c.close()
		return nil, fmt.Errorf("ApiVersions: %w", err)
	}
	return c, nil
}

// negotiate sends ApiVersions, as every client does first, and keeps for
// each key the highest version both sides speak.
func (c *conn) negotiate(ctx context.Context, timeout time.Duration) error {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName = "wasmassign-loadtest"
	req.ClientSoftwareVersion = "1"
	resp, err := c.roundTrip(ctx, req, timeout)
	var ar *kmsg.ApiVersionsResponse
	if err == nil {
		ar = resp.(*kmsg.ApiVersionsResponse)
	}
	// A broker older than ApiVersions v3 answers in v0 (KIP-511): ask
	// again in it.
	if err != nil && !errors.As(err, new(decodeError)) {
		return err
	}
	if err != nil || ar.ErrorCode == kerr.UnsupportedVersion.Code {
		c.versions[kmsg.ApiVersions] = 0
		if resp, err = c.roundTrip(ctx, kmsg.NewPtrApiVersionsRequest(), timeout); err != nil {
			return err
		}
		ar = resp.(*kmsg.ApiVersionsResponse)
	}
	if ar.ErrorCode != 0 {
		return fmt.Errorf("%s", codeName(ar.ErrorCode))
	}
	for _, k := range ar.ApiKeys {
		if k.ApiKey < 0 || int(k.ApiKey) >= numKeys {
			continue
		}
		if ours := maxVersion(k.ApiKey); ours >= k.MinVersion {
			c.versions[k.ApiKey] = min(ours, k.MaxVersion)
		}
	}
	return nil
}

// decodeError is a response that arrived but could not be decoded.
type decodeError struct{ err error }

func (e decodeError) Error() string { return e.err.Error() }
func (e decodeError) Unwrap() error { return e.err }

// roundTrip sends req and waits for its answer, for the requests the
// generator makes once per run or connection.
func (c *conn) roundTrip(ctx context.Context, req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	done := make(chan *call, 1)
	cl := newCall(req, done)
	c.send(cl)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return cl.resp, cl.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		c.fail(fmt.Errorf("%s unanswered after %v", kmsg.NameForKey(cl.key), timeout))
		<-done
		return nil, cl.err
	}
}

// send writes cl's request. Every outcome comes back on cl.done: the
// answer, or the error that failed the connection or the request.
func (c *conn) send(cl *call) {
	cl.key = cl.req.Key()
	v := c.versions[cl.key]
	if v < 0 {
		cl.err = fmt.Errorf("%s does not take %s", c.addr, kmsg.NameForKey(cl.key))
		cl.deliver()
		return
	}
	cl.req.SetVersion(v)
	cl.resp.SetVersion(v)
	cl.flexible = cl.req.IsFlexible()

	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.corr++
	b, at := frame.AppendSize(c.wbuf[:0])
	b = frame.AppendRequestHeader(b, frame.RequestHeader{
		Key: cl.key, Version: v, CorrelationID: c.corr, ClientID: c.clientID, Flexible: cl.flexible,
	})
	b = cl.req.AppendTo(b)
	frame.FinishSize(b, at)
	if cap(b) <= keepBuf {
		c.wbuf = b
	}
	c.mu.Lock()
	if err := c.err; err != nil {
		c.mu.Unlock()
		cl.err = err
		cl.deliver()
		return
	}
	cl.sent = time.Now()
	c.pending[c.corr] = cl
	c.mu.Unlock()
	if _, err := c.nc.Write(b); err != nil {
		c.fail(fmt.Errorf("write: %w", err))
	}
}

// read delivers answers until the connection fails.
func (c *conn) read(r io.Reader) {
	buf := make([]byte, 0, 256)
	for {
		fr, err := frame.Read(r, buf, maxResponseBytes)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("closed by %s", c.addr)
			}
			c.fail(fmt.Errorf("read: %w", err))
			return
		}
		now := time.Now()
		if len(fr) < 4 {
			c.fail(fmt.Errorf("read: a %d-byte response", len(fr)))
			return
		}
		corr := int32(binary.BigEndian.Uint32(fr))
		c.mu.Lock()
		cl := c.pending[corr]
		delete(c.pending, corr)
		c.mu.Unlock()
		if cl == nil {
			c.fail(fmt.Errorf("read: an answer with correlation id %d, which no request had", corr))
			return
		}
		// ApiVersions answers with response header v0 whatever its
		// version, so that a client that guessed too high can read it.
		_, body, err := frame.ParseResponseHeader(fr, cl.flexible && cl.key != int16(kmsg.ApiVersions))
		if err == nil {
			err = cl.resp.ReadFrom(body)
		}
		if err != nil {
			err = decodeError{fmt.Errorf("%s answer: %w", kmsg.NameForKey(cl.key), err)}
		}
		cl.rtt, cl.err = now.Sub(cl.sent), err
		// kmsg decodes bytes fields (member metadata, assignments) as
		// slices of the frame, so a frame that held one is left to them.
		switch kmsg.Key(cl.key) {
		case kmsg.Heartbeat, kmsg.OffsetCommit:
			if cap(fr) <= keepBuf {
				buf = fr[:0]
			}
		default:
			buf = make([]byte, 0, 256)
		}
		cl.deliver()
	}
}

// fail marks the connection failed with err, closes it, and hands every
// request in flight back with err. Only the first failure counts.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	c.nc.Close()
	for _, cl := range pending {
		cl.err = err
		cl.deliver()
	}
}

func (c *conn) close() { c.fail(errClosed) }

// failed reports whether the connection is down.
func (c *conn) failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

// pool is the shared connections to one address: the member in slot s
// uses connection s % len(conns), redialled when it fails.
type pool struct {
	addr  string
	mu    sync.Mutex
	conns []*conn
}

func (p *pool) get(ctx context.Context, slot int, clientID *string, timeout time.Duration) (*conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.conns[slot]; c != nil && !c.failed() {
		return c, nil
	}
	c, err := dial(ctx, p.addr, clientID, timeout, true)
	if err != nil {
		return nil, err
	}
	p.conns[slot] = c
	return c, nil
}

func (p *pool) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if c != nil {
			c.close()
		}
	}
}

// codeName is a Kafka error code's name, as kerr spells it.
func codeName(code int16) string {
	if e := kerr.TypedErrorForCode(code); e != nil {
		if e == kerr.UnknownServerError && code != kerr.UnknownServerError.Code {
			return fmt.Sprintf("error code %d", code)
		}
		return e.Message
	}
	return "NONE"
}

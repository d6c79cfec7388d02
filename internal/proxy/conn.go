package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/internal/proxy/frame"
)

// Depths of a connection's pipelines: requests read but not yet answered
// to the client, and requests sent upstream but not yet answered. Beyond
// them the proxy stops reading, which pushes back on the client.
const (
	clientQueueDepth = 256
	upstreamDepth    = 256
)

// earlyFrame is a request read while the upstream was still being dialled,
// waiting to be written to it; s is nil for a request with no response.
type earlyFrame struct {
	s  *slot
	fr []byte
}

// Bounds on the requests a connection holds while its upstream is dialled;
// beyond them reading waits for the dial, as it would for a slow upstream.
const (
	maxEarlyFrames = 32
	maxEarlyBytes  = 1 << 20
)

// writeEarly's slots must fit in inflight without a reader: this fails to
// compile otherwise.
const _ = uint(upstreamDepth - maxEarlyFrames)

// slot is one request's place in its connection's response order.
type slot struct {
	key, version int16
	corr         int32
	// start is when the request was read, for the latency OnRequest
	// reports; local is set when the interceptor answered it.
	start time.Time
	local bool
	// discard marks a request forwarded only for the upstream's sake: the
	// client was answered already, and the upstream's answer is read and
	// dropped (see apiversions.go).
	discard bool
	// onResponse is the interceptor's transformation of the upstream
	// response; set before the slot is sent upstream.
	onResponse func(kmsg.Response) kmsg.Response
	// saslRounds is, for a SaslAuthenticate, how many successful rounds
	// complete the mechanism the client chose (0: unknown, see
	// saslRoundsFor).
	saslRounds int

	// Set under the response queue's lock.
	ready bool
	resp  []byte // response header and body, without the size prefix
	err   error  // closes the connection instead of answering
}

// conn is one client connection and its upstream connection.
//
// Two goroutines serve it: readClient parses requests and sends them
// upstream (or to the interceptor), and the other dials the upstream once
// there is a request to forward (startDial), then runs readUpstream, which
// matches upstream responses to requests in the order they were sent. q
// keeps the order requests arrived in and writes responses in it; inflight
// carries the upstream's order. A connection whose requests are all
// answered here (a consumer's group connection) has only the first.
//
// Buffers are borrowed while there is traffic and given back when it
// stops (see bufPool): a connection waiting for its client's next request
// holds none but br's small one.
type conn struct {
	p    *Proxy
	info ConnInfo
	nc   net.Conn
	br   connReader // readClient only
	// log is made on first use: most connections log nothing, and a
	// logger with attributes formats them as it is made.
	logOnce sync.Once
	log     *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc

	q *respQueue // client order; only readClient pushes and closes
	// inflight carries the upstream's order; it is made when the dial
	// starts (startDial), so a connection that never dials has none.
	inflight chan *slot

	upMu sync.Mutex // serialises writes upstream with their inflight entries
	// upDst is nil until the upstream is dialled; until then requests to
	// forward wait in early, in the order they were read (see send).
	upDst net.Conn
	// upW buffers writes to upDst; it is borrowed for a burst of requests
	// and given back when they are flushed (flushUpLocked).
	upW        *bufio.Writer
	early      []earlyFrame
	earlyBytes int
	upSet      sync.Mutex // guards up
	up         net.Conn
	// upReady is closed once up and upDst are set and the early frames
	// are written: requests are read while the upstream is dialled (see
	// run).
	upReady chan struct{}
	// upAddr is the upstream broker's address; the dial starts with the
	// first request to forward (startDial), and upDone is closed once the
	// dialling goroutine has finished, or at the end of run if none began.
	upAddr   string
	dialOnce sync.Once
	upDone   chan struct{}

	closeOnce sync.Once
	draining  atomic.Bool
	rackSeen  bool // readClient only

	// SASL progress, for Options.RequireClientSASL: the mechanism of the
	// last SaslHandshake (readClient only), the successful
	// SaslAuthenticate rounds since it (readUpstream only), and whether the
	// upstream has accepted the client.
	saslMech     string
	saslOK       int
	saslAccepted atomic.Bool
}

func newConn(p *Proxy, nc net.Conn, node int32, id uint64) *conn {
	c := &conn{
		p:       p,
		nc:      nc,
		q:       newRespQueue(nc, &p.bufs),
		upReady: make(chan struct{}),
		upDone:  make(chan struct{}),
	}
	c.br.reset(nc, &p.bufs)
	c.info = ConnInfo{ID: id, Node: node}
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		c.info.Remote = ta.AddrPort()
	} else if ap, err := netip.ParseAddrPort(nc.RemoteAddr().String()); err == nil {
		c.info.Remote = ap
	}
	c.info.ClientHost = KafkaHost(c.info.Remote)
	c.ctx, c.cancel = context.WithCancel(p.ctx)
	return c
}

func (c *conn) run() {
	defer c.p.forget(c)
	addr, upNode, err := c.p.upstreamAddr(c.info.Node)
	if err != nil {
		c.close(fmt.Errorf("upstream: %w", err))
		c.releaseBuffers()
		return
	}
	c.info.Upstream = upNode // before anything reads info
	c.upAddr = addr
	if c.p.log.Enabled(c.ctx, slog.LevelDebug) {
		c.logger().Debug("client connection opened", "upstream", addr)
	}
	if c.info.Node == NodeBootstrap || c.p.down.has(upNode) {
		c.startDial()
	}
	c.readClient()
	select {
	case <-c.q.finished:
	case <-c.ctx.Done():
	}
	c.close(nil)
	// A connection that never forwarded anything never dialled: closing
	// upDone here keeps a dial from starting now, and otherwise waits for
	// the dialling goroutine.
	c.dialOnce.Do(func() { close(c.upDone) })
	<-c.upDone
	c.releaseBuffers()
}

// logger returns the connection's logger, which names it.
func (c *conn) logger() *slog.Logger {
	c.logOnce.Do(func() {
		c.log = c.p.log.With("conn", c.info.ID, "client", c.info.Remote.String(), "node", c.info.Node)
	})
	return c.log
}

// releaseBuffers gives the connection's buffers back to the pool once the
// connection is closed and its reading goroutines have ended. Only an
// interceptor's goroutine can still be running: its answer is dropped by
// the dead response queue (which waits for a write under way first), and
// a request it forwards finds no upstream on a closed connection (send).
func (c *conn) releaseBuffers() {
	c.br.release()
	c.p.bufs.putWriter(c.q.release())
	c.upMu.Lock()
	c.p.bufs.putWriter(c.upW)
	c.upW, c.upDst = nil, nil
	c.upMu.Unlock()
}

// startDial dials the upstream in the background, once, when the
// connection first has a request to forward.
//
// On a broker's own listener the dial waits for that request instead of
// starting with the connection: a connection whose requests are all
// answered here (a consumer's group connection: ApiVersions from the
// remembered answer, then JoinGroup, SyncGroup and Heartbeat for the
// coordinator) then never opens one, which spares the broker a connection
// per consumer and the gateway a dial per group connection; fifty
// consumers starting at once open 150 connections through the gateway.
// The ApiVersions request that was answered here waits in c.early and
// still reaches the broker first if the connection later forwards
// anything (apiversions.go says why it is forwarded at all).
//
// run starts the dial as the connection opens on the bootstrap listener,
// whose connections always forward (a client opens one to ask for
// metadata), so that the dial overlaps the ApiVersions exchange instead
// of lengthening the first Metadata request; and to a broker known to be
// down, so that the client learns at once that it is away.
//
// The client's requests are read while the upstream is dialled: a request
// answered here does not wait for the dial. Requests to forward wait in
// c.early until the dial ends (send); only beyond maxEarlyFrames or
// maxEarlyBytes, or for a request streamed as it arrives, does reading
// wait for the dial. The dialling goroutine goes on to read the
// upstream's responses.
func (c *conn) startDial() {
	c.dialOnce.Do(func() {
		c.inflight = make(chan *slot, upstreamDepth)
		go func() {
			defer close(c.upDone)
			up, ok := c.dial(c.upAddr)
			if !ok {
				return
			}
			// The early requests are written while responses are read: a
			// broker answers one request at a time and stops reading while
			// its answer waits to be read, so a writer that waited for the
			// reader to start could wait forever once the socket buffers
			// fill.
			wrote := make(chan struct{})
			go func() {
				defer close(wrote)
				if err := c.writeEarly(up); err != nil {
					c.close(fmt.Errorf("upstream write: %w", err))
				}
			}()
			r := newConnReader(up, &c.p.bufs)
			c.readUpstream(r)
			<-wrote
			r.release()
		}()
	})
}

// dial opens the upstream connection (writeEarly then makes it available
// to writers); on failure it closes the client connection and returns
// false.
func (c *conn) dial(addr string) (net.Conn, bool) {
	up, err := c.p.opts.DialUpstream(c.ctx, addr)
	if err != nil {
		if c.ctx.Err() != nil { // the client left while dialling
			return nil, false
		}
		c.p.down.set(c.info.Upstream, true)
		err = fmt.Errorf("upstream %s: %w", addr, err)
		if closed, ok := c.p.unreachable.report(time.Now(), unreachableLogEvery); ok {
			c.logger().Warn("closing client connections: their broker is unreachable", "err", err, "connections_closed", closed)
		}
		if c.p.opts.OnUnreachable != nil {
			c.p.opts.OnUnreachable(err)
		}
		c.close(fmt.Errorf("%w: %w", errUnreachable, err))
		return nil, false
	}
	c.p.down.set(c.info.Upstream, false)
	c.upSet.Lock()
	c.up = up
	c.upSet.Unlock()
	if c.ctx.Err() != nil { // closed while dialling, perhaps before up was set
		up.Close()
		return nil, false
	}
	return up, true
}

// writeEarly makes up the upstream destination, first writing to it the
// requests read during the dial, in order, and registering their slots for
// the upstream's answers; then it opens the way for writers waiting in
// awaitUpstream.
func (c *conn) writeEarly(up net.Conn) error {
	c.upMu.Lock()
	defer c.upMu.Unlock()
	defer close(c.upReady)
	c.upDst = up
	early := c.early
	c.early, c.earlyBytes = nil, 0
	for _, e := range early {
		if e.s != nil {
			// Cannot block: inflight is empty before the dial, and early
			// holds at most upstreamDepth frames (checked below).
			c.inflight <- e.s
		}
		writeFrame(c.upWriter(), e.fr)
	}
	return c.flushUpLocked()
}

// upWriter returns the upstream writer, borrowing one for the burst of
// requests under way; upMu is held and the upstream is open.
func (c *conn) upWriter() *bufio.Writer {
	if c.upW == nil {
		c.upW = c.p.bufs.writer(c.upDst)
	}
	return c.upW
}

// flushUpLocked flushes what was written upstream and gives the writer
// back: between bursts the connection holds none. upMu is held.
func (c *conn) flushUpLocked() error {
	if c.upW == nil {
		return nil
	}
	err := c.upW.Flush()
	c.p.bufs.putWriter(c.upW)
	c.upW = nil
	return err
}

// writeFrame writes one request frame, its size prefix first; errors stick
// to w and surface at its next flush.
func writeFrame(w *bufio.Writer, fr []byte) error {
	var prefix [4]byte
	binary.BigEndian.PutUint32(prefix[:], uint32(len(fr)))
	w.Write(prefix[:])
	_, err := w.Write(fr)
	return err
}

// awaitUpstream waits until the upstream connection is open; it fails
// once the connection is closing.
func (c *conn) awaitUpstream() error {
	select {
	case <-c.upReady:
		return nil
	default:
	}
	c.startDial()
	select {
	case <-c.upReady:
		return nil
	case <-c.ctx.Done():
		return errShutdown
	}
}

// downNodes is a set of upstream node ids, safe for concurrent use.
type downNodes struct {
	mu    sync.Mutex
	nodes map[int32]struct{}
}

func (d *downNodes) has(node int32) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.nodes[node]
	return ok
}

func (d *downNodes) set(node int32, down bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !down {
		delete(d.nodes, node)
		return
	}
	if d.nodes == nil {
		d.nodes = make(map[int32]struct{})
	}
	d.nodes[node] = struct{}{}
}

// errUnreachable marks a connection closed because its broker could not
// be dialled; run reports those at a paced rate.
var errUnreachable = errors.New("broker unreachable")

// unreachableLogEvery is the least time between two log lines about
// connections closed for an unreachable broker.
const unreachableLogEvery = 5 * time.Second

// logPacer lets an event that can repeat thousands of times a second be
// logged at most once per interval, with how many happened since the last
// line. It is safe for concurrent use.
type logPacer struct {
	mu     sync.Mutex
	next   time.Time
	missed int
}

// report counts one event at now and says whether to log it, with the
// number of events (this one included) since the last logged one.
func (l *logPacer) report(now time.Time, every time.Duration) (count int, log bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.missed++
	if now.Before(l.next) {
		return 0, false
	}
	count, l.missed, l.next = l.missed, 0, now.Add(every)
	return count, true
}

// close ends the connection at once; err, when not nil, is logged as the
// reason.
func (c *conn) close(err error) {
	c.closeOnce.Do(func() {
		c.cancel()
		c.q.kill()
		c.nc.Close()
		c.upSet.Lock()
		if c.up != nil {
			c.up.Close()
		}
		c.upSet.Unlock()
		switch {
		case err == nil || errors.Is(err, errShutdown):
			c.logger().Debug("client connection closed")
		case errors.Is(err, errUnreachable): // reported by run, paced
			c.logger().Debug("client connection closed", "err", err)
		default:
			c.logger().Warn("closing client connection", "err", err)
		}
	})
}

// drain stops reading requests; the ones read are still answered.
func (c *conn) drain() {
	c.draining.Store(true)
	c.nc.SetReadDeadline(time.Now())
}

func (c *conn) recoverPanic(where string) {
	if r := recover(); r != nil {
		c.close(fmt.Errorf("internal error in %s: %v", where, r))
	}
}

func (c *conn) readClient() {
	defer c.q.close()
	defer c.recoverPanic("request reader")
	for {
		// The next request may be long in coming: wait for it without a
		// large buffer.
		c.br.shrink()
		if streamed, err := c.maybeStreamRequest(); err != nil {
			c.close(err)
			return
		} else if streamed {
			c.p.sawRequest()
			if !c.nextFrameBuffered() {
				if err := c.flushUpstream(); err != nil {
					c.close(fmt.Errorf("upstream write: %w", err))
					return
				}
			}
			continue
		}
		fr, lent, err := c.readRequest()
		if err != nil {
			switch {
			case c.draining.Load() && errors.Is(err, os.ErrDeadlineExceeded):
			case errors.Is(err, io.EOF):
				c.close(nil)
			case c.ctx.Err() != nil:
			default:
				c.close(fmt.Errorf("reading request: %w", err))
			}
			return
		}
		c.p.sawRequest()
		err = c.handle(fr)
		if lent != nil {
			c.p.bufs.putFrameBuf(lent)
		} else {
			c.br.Discard(4 + len(fr))
		}
		if err != nil {
			c.close(err)
			return
		}
		if !c.nextFrameBuffered() {
			if err := c.flushUpstream(); err != nil {
				c.close(fmt.Errorf("upstream write: %w", err))
				return
			}
		}
	}
}

// readRequest returns the next request frame, without its size prefix. A
// frame that fits in the read buffer is returned in place, and the caller
// discards it from c.br once it is handled; a larger one is read into lent,
// a buffer from the pool that the caller gives back. Either way the frame
// is only valid until then: whatever outlives handle copies it.
//
// A stream that ends inside a frame is io.ErrUnexpectedEOF, and one that
// ends between frames io.EOF.
func (c *conn) readRequest() (fr, lent []byte, err error) {
	unexpected := func(got int, err error) error {
		if got > 0 && errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	head, err := c.br.Peek(4)
	if err != nil {
		return nil, nil, unexpected(len(head), err)
	}
	size, err := frame.Size([4]byte(head), c.p.maxFrame)
	if err != nil {
		return nil, nil, err
	}
	if n := 4 + int(size); n <= c.br.Size() {
		b, err := c.br.Peek(n)
		if err != nil {
			return nil, nil, unexpected(len(b), err)
		}
		return b[4:], nil, nil
	}
	c.br.Discard(4)
	lent = c.p.bufs.frameBuf(int(size))
	if _, err := io.ReadFull(&c.br, lent); err != nil {
		c.p.bufs.putFrameBuf(lent)
		return nil, nil, unexpected(1, err)
	}
	return lent, lent, nil
}

// maybeStreamRequest copies a large request that needs nothing but
// forwarding (a Produce, typically) to the upstream as it arrives, instead
// of reading it whole first. It looks only at what fits in the read buffer;
// whenever anything is unusual it declines, and the caller reads the frame
// the normal way, which applies every check.
func (c *conn) maybeStreamRequest() (bool, error) {
	b, err := c.br.Peek(4)
	if err != nil {
		return false, nil
	}
	size := int64(int32(binary.BigEndian.Uint32(b)))
	if size < c.p.streamAt || size > int64(c.p.maxFrame) || size < 8 {
		return false, nil
	}
	b, err = c.br.Peek(int(min(size+4, int64(c.br.Size()))))
	if err != nil {
		return false, nil
	}
	fr := b[4:]
	key := int16(binary.BigEndian.Uint16(fr))
	version := int16(binary.BigEndian.Uint16(fr[2:]))
	if key < 0 || key > maxKey || c.p.flexFrom[key] < 0 || !c.p.state.load().table.allows(key, version) {
		return false, nil
	}
	if ic := c.p.opts.Interceptor; (ic != nil && ic.Intercepts(key)) || (key == int16(kmsg.Fetch) && !c.rackSeen && c.p.opts.OnFetchRack != nil) {
		return false, nil
	}
	flexible := version >= c.p.flexFrom[key]
	hdr, body, err := frame.ParseRequestHeader(fr, flexible)
	if err != nil {
		return false, nil
	}
	var s *slot
	acks := int16(-1)
	if key == int16(kmsg.Produce) {
		if acks, err = produceAcks(body, version, flexible); err != nil {
			return false, nil
		}
	}
	if key != int16(kmsg.Produce) || acks != 0 {
		s = &slot{key: key, version: version, corr: hdr.CorrelationID, start: time.Now()}
		if err := c.enqueue(s); err != nil {
			return false, err
		}
	}
	if err := c.awaitUpstream(); err != nil {
		return false, err
	}
	c.upMu.Lock()
	defer c.upMu.Unlock()
	if s != nil {
		select {
		case c.inflight <- s:
		case <-c.ctx.Done():
			return false, errShutdown
		}
	}
	// A client that stops mid-request leaves the upstream with half a
	// frame: the error closes both connections.
	if err := c.flushUpLocked(); err != nil {
		return false, fmt.Errorf("upstream write: %w", err)
	}
	if err := copyLong(nil, c.upDst, &c.br, c.nc, size+4, &c.p.chunks); err != nil {
		return false, fmt.Errorf("streaming %s request: %w", kmsg.NameForKey(key), err)
	}
	return true, nil
}

// nextFrameBuffered reports whether a whole next request is already
// buffered, so that flushing upstream can wait for it.
func (c *conn) nextFrameBuffered() bool {
	n := c.br.Buffered()
	if n < 4 {
		return false
	}
	b, _ := c.br.Peek(4)
	return int64(n-4) >= int64(int32(binary.BigEndian.Uint32(b)))
}

// handle routes one request frame (without its size prefix). An error
// closes the connection: the client sent something no broker would
// accept.
func (c *conn) handle(fr []byte) error {
	if len(fr) < 4 {
		return fmt.Errorf("request of %d bytes: %w", len(fr), frame.ErrMalformed)
	}
	key := int16(binary.BigEndian.Uint16(fr))
	version := int16(binary.BigEndian.Uint16(fr[2:]))
	// Kafka closes the connection on a key it does not know (its request
	// header parser throws InvalidRequestException); kfake would panic.
	if key < 0 || key > maxKey || c.p.flexFrom[key] < 0 {
		return fmt.Errorf("unknown api key %d", key)
	}
	flexible := version >= c.p.flexFrom[key]
	hdr, body, err := frame.ParseRequestHeader(fr, flexible)
	if err != nil {
		return err
	}
	st := c.p.state.load()
	t := st.table
	if !t.allows(key, version) {
		if key == int16(kmsg.ApiVersions) && t.has[kmsg.ApiVersions] && version > t.max[kmsg.ApiVersions] {
			// KIP-511: a newer client's ApiVersions is answered at v0 with
			// the range the proxy speaks, not dropped.
			s := &slot{key: key, version: 0, corr: hdr.CorrelationID}
			if err := c.enqueue(s); err != nil {
				return err
			}
			return c.q.complete(s, encodeResponse(nil, hdr.CorrelationID, unsupportedApiVersions(t)), nil)
		}
		if !t.has[key] {
			return fmt.Errorf("api key %d (%s) is not offered by the gateway", key, kmsg.NameForKey(key))
		}
		// Kafka closes the connection on a version it does not support.
		return fmt.Errorf("%s v%d is outside the supported range v%d-v%d", kmsg.NameForKey(key), version, t.min[key], t.max[key])
	}

	var avReq *kmsg.ApiVersionsRequest
	if key == int16(kmsg.ApiVersions) {
		avReq = decodeApiVersions(version, body)
		fr, body = c.retargetApiVersions(hdr, fr, body, avReq)
	}
	if ic := c.p.opts.Interceptor; key == int16(kmsg.ApiVersions) && (ic == nil || !ic.Intercepts(int16(kmsg.ApiVersions))) {
		if cached, ok := c.p.avs.get(c.info.Upstream, version, t); ok && answerableLocally(version, avReq, c.info.Upstream, st.clusterID) {
			return c.answerApiVersions(hdr.CorrelationID, version, fr, cached)
		}
	}
	if key == int16(kmsg.Produce) {
		acks, err := produceAcks(body, version, flexible)
		if err != nil {
			return err
		}
		if acks == 0 { // no response, so no slot and no upstream wait
			return c.send(nil, fr, false)
		}
	}
	// A client that must authenticate first is heard only once it has:
	// otherwise anyone could fill the rack book, or set another client's
	// rack, without credentials.
	authenticated := !c.p.opts.RequireClientSASL || c.saslAccepted.Load()
	if key == int16(kmsg.Fetch) && version >= 11 && !c.rackSeen && c.p.opts.OnFetchRack != nil && authenticated {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(version)
		if err := req.ReadFrom(body); err != nil {
			return fmt.Errorf("decode Fetch v%d request: %w", version, err)
		}
		// The first Fetch that names partitions: they tell which member
		// of a shared client id and address sent the rack. An incremental
		// fetch session's follow-ups may name none.
		if req.Rack == "" || len(req.Topics) > 0 {
			c.rackSeen = true
			var clientID string
			if hdr.ClientID != nil {
				clientID = *hdr.ClientID
			}
			c.p.opts.OnFetchRack(c.info, clientID, req.Rack, req.Topics)
		}
	}
	s := &slot{key: key, version: version, corr: hdr.CorrelationID, start: time.Now()}
	if c.p.opts.RequireClientSASL {
		switch kmsg.Key(key) {
		case kmsg.SASLHandshake: // remember the mechanism
			req := kmsg.NewPtrSASLHandshakeRequest()
			req.SetVersion(version)
			if err := req.ReadFrom(body); err != nil {
				return fmt.Errorf("decode SaslHandshake v%d request: %w", version, err)
			}
			c.saslMech = req.Mechanism
		case kmsg.SASLAuthenticate:
			s.saslRounds = saslRoundsFor(c.saslMech)
		}
	}
	if ic := c.p.opts.Interceptor; ic != nil && ic.Intercepts(key) {
		if c.p.opts.RequireClientSASL && !c.saslAccepted.Load() {
			return fmt.Errorf("%s before the client authenticated: the upstream requires SASL", kmsg.NameForKey(key))
		}
		owned := bytes.Clone(fr)
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if err := decodeRequest(req, owned[len(fr)-len(body):]); err != nil {
			return fmt.Errorf("decode %s v%d request: %w", kmsg.NameForKey(key), version, err)
		}
		if err := c.enqueue(s); err != nil {
			return err
		}
		go c.intercept(s, hdr, req, owned)
		return nil
	}
	if err := c.enqueue(s); err != nil {
		return err
	}
	return c.send(s, fr, false)
}

func (c *conn) enqueue(s *slot) error { return c.q.push(s) }

// answerApiVersions answers an ApiVersions request from the remembered
// answer body and forwards the request fr all the same, its answer to be
// dropped (see apiversions.go).
func (c *conn) answerApiVersions(corr int32, version int16, fr, body []byte) error {
	s := &slot{key: int16(kmsg.ApiVersions), version: version, corr: corr, start: time.Now(), local: true}
	if err := c.enqueue(s); err != nil {
		return err
	}
	// Answered before forwarding, which may wait for the upstream dial.
	resp := append(frame.AppendResponseHeader(make([]byte, 0, 4+len(body)), corr, false), body...)
	c.complete(s, resp, nil)
	return c.send(&slot{key: int16(kmsg.ApiVersions), version: version, corr: corr, discard: true}, fr, false)
}

// complete hands s's answer to the response queue, closing the connection
// when the answer is an error or cannot be written.
func (c *conn) complete(s *slot, resp []byte, err error) {
	if on := c.p.opts.OnRequest; on != nil && err == nil {
		on(s.key, s.local, time.Since(s.start))
	}
	if err := c.q.complete(s, resp, err); err != nil {
		c.close(err)
	}
}

// send writes a request frame upstream, registering s (nil for a request
// with no response) for the upstream's answer. While the upstream is
// dialled, it keeps a copy of fr for writeEarly instead, up to the early
// bounds, and past them waits for the dial.
func (c *conn) send(s *slot, fr []byte, flush bool) error {
	for {
		c.upMu.Lock()
		if c.upDst != nil {
			break // still locked
		}
		if c.ctx.Err() != nil {
			// Closed, perhaps with its buffers already back in the pool
			// (releaseBuffers): nothing more goes upstream.
			c.upMu.Unlock()
			return errShutdown
		}
		if len(c.early) < maxEarlyFrames && c.earlyBytes+len(fr) <= maxEarlyBytes {
			c.early = append(c.early, earlyFrame{s: s, fr: bytes.Clone(fr)})
			c.earlyBytes += len(fr)
			c.upMu.Unlock()
			if s == nil || !s.discard {
				// A request forwarded only for the broker's sake does
				// not open the connection by itself (startDial).
				c.startDial()
			}
			return nil
		}
		c.upMu.Unlock()
		if err := c.awaitUpstream(); err != nil {
			return err
		}
	}
	defer c.upMu.Unlock()
	if s != nil {
		select {
		case c.inflight <- s:
		case <-c.ctx.Done():
			return errShutdown
		}
	}
	if err := writeFrame(c.upWriter(), fr); err != nil {
		return fmt.Errorf("upstream write: %w", err)
	}
	if flush {
		return c.flushUpLocked()
	}
	return nil
}

func (c *conn) flushUpstream() error {
	select {
	case <-c.upReady:
	default:
		return nil // nothing was written: writers wait for the dial
	}
	c.upMu.Lock()
	defer c.upMu.Unlock()
	return c.flushUpLocked()
}

func (c *conn) intercept(s *slot, hdr frame.RequestHeader, req kmsg.Request, fr []byte) {
	defer c.recoverPanic("interceptor")
	// At debug level each decision is logged as it starts and ends: a
	// request that is never answered shows as a start with no end.
	if debug := c.p.log.Enabled(c.ctx, slog.LevelDebug); debug {
		c.logger().Debug("request intercepted", "api", kmsg.NameForKey(s.key), "version", s.version, "corr", s.corr, "client_id", clientIDOf(hdr))
		defer func(start time.Time) {
			c.logger().Debug("request decided", "api", kmsg.NameForKey(s.key), "corr", s.corr, "answered_here", s.local, "took", time.Since(start))
		}(time.Now())
	}
	d, err := c.p.opts.Interceptor.Intercept(c.ctx, Request{Conn: c.info, ClientID: hdr.ClientID, CorrelationID: hdr.CorrelationID, Req: req})
	if err != nil {
		c.complete(s, nil, fmt.Errorf("interceptor: %s: %w", kmsg.NameForKey(s.key), err))
		return
	}
	switch {
	case d.Respond != nil:
		if d.Respond.Key() != s.key {
			c.complete(s, nil, fmt.Errorf("interceptor answered %s with a %s response", kmsg.NameForKey(s.key), kmsg.NameForKey(d.Respond.Key())))
			return
		}
		d.Respond.SetVersion(s.version)
		if namesBrokers(s.key, s.version) {
			// An answer made here names upstream nodes, as the
			// upstream's would: clients must be given the gateway's
			// address for each.
			rewriteAddresses(d.Respond, c.p.advertise)
		}
		s.local = true
		c.complete(s, encodeResponse(nil, s.corr, d.Respond), nil)
		return
	case d.Forward != nil:
		if d.Forward.Key() != s.key {
			c.complete(s, nil, fmt.Errorf("interceptor forwarded %s as %s", kmsg.NameForKey(s.key), kmsg.NameForKey(d.Forward.Key())))
			return
		}
		d.Forward.SetVersion(s.version)
		fr = d.Forward.AppendTo(frame.AppendRequestHeader(nil, hdr))
	}
	s.onResponse = d.OnResponse
	if err := c.send(s, fr, true); err != nil {
		c.close(err)
	}
}

// clientIDOf is the request's client id, "" when it has none.
func clientIDOf(hdr frame.RequestHeader) string {
	if hdr.ClientID == nil {
		return ""
	}
	return *hdr.ClientID
}

func (c *conn) readUpstream(r *connReader) {
	defer c.recoverPanic("response reader")
	for {
		// Read before anything is in flight, so that an upstream closing
		// an idle connection (connections.max.idle.ms) closes the client's
		// at once, as the broker itself would have; and without a large
		// buffer, since the next answer may be long in coming.
		r.shrink()
		head, err := r.Peek(8) // size and correlation id
		if err != nil {
			if c.ctx.Err() == nil {
				if len(c.inflight) == 0 && errors.Is(err, io.EOF) {
					c.logger().Info("upstream closed an idle connection")
					c.close(nil)
				} else {
					c.close(fmt.Errorf("upstream connection: %w", err))
				}
			}
			return
		}
		var s *slot
		select {
		case s = <-c.inflight:
		case <-c.ctx.Done():
			return
		}
		size := int64(int32(binary.BigEndian.Uint32(head)))
		if size < 4 || int32(binary.BigEndian.Uint32(head[4:])) != s.corr {
			c.close(fmt.Errorf("upstream answered out of order: %s correlation id %d expected", kmsg.NameForKey(s.key), s.corr))
			return
		}
		if size >= c.p.streamAt && streamable(s) && c.q.acquireHead(s) {
			err := c.streamHeld(s, r, size)
			if werr := c.q.releaseHead(err); werr != nil || err != nil {
				c.close(fmt.Errorf("streaming %s response: %w", kmsg.NameForKey(s.key), errors.Join(err, werr)))
				return
			}
			continue
		}
		fr, err := frame.Read(r, nil, math.MaxInt32)
		if err != nil {
			if c.ctx.Err() == nil {
				c.close(fmt.Errorf("upstream connection: %w", err))
			}
			return
		}
		if c.p.opts.RequireClientSASL {
			c.noteSASL(s, fr)
		}
		resp, err := c.transform(s, fr)
		if s.discard {
			if err != nil {
				c.logger().Debug("upstream answer to a request already answered", "api", kmsg.NameForKey(s.key), "err", err)
			}
			continue
		}
		c.complete(s, resp, err)
	}
}

// saslRoundsFor is how many successful SaslAuthenticate rounds complete
// a mechanism: PLAIN has one; SCRAM two, the first of which only sends the
// server's nonce, so it proves nothing. Others (GSSAPI, OAUTHBEARER, which
// answers a bad token with a challenge and no error) are 0: unknown.
func saslRoundsFor(mechanism string) int {
	switch mechanism {
	case "PLAIN":
		return 1
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		return 2
	}
	return 0
}

// noteSASL follows the client's authentication in the upstream's answers:
// the upstream accepted the client once the mechanism's rounds all
// succeeded, or once it answered anything but ApiVersions and the SASL
// requests themselves, which a SASL listener refuses to an unauthenticated
// client by closing the connection. It runs before the answer reaches the
// client, so the client's next request sees the outcome.
func (c *conn) noteSASL(s *slot, fr []byte) {
	switch kmsg.Key(s.key) {
	case kmsg.SASLHandshake:
		c.saslOK = 0
	case kmsg.SASLAuthenticate:
		flexible := s.version >= c.p.flexFrom[s.key]
		_, body, err := frame.ParseResponseHeader(fr, flexible)
		if err != nil || len(body) < 2 || binary.BigEndian.Uint16(body) != 0 {
			return
		}
		c.saslOK++
		if s.saslRounds > 0 && c.saslOK >= s.saslRounds {
			c.saslAccepted.Store(true)
		}
	case kmsg.ApiVersions:
	default:
		c.saslAccepted.Store(true)
	}
}

// streamHeld is stream turning a panic into an error, so that the caller
// always gives the right to write back (releaseHead): the connection's end
// waits for it before its buffers go back to the pool (releaseBuffers).
func (c *conn) streamHeld(s *slot, r *connReader, size int64) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("internal error: %v", v)
		}
	}()
	return c.stream(s, r, size)
}

// stream copies the response for s, size bytes after its prefix, from the
// upstream to the client, which the caller holds the right to write to.
func (c *conn) stream(s *slot, r *connReader, size int64) error {
	w := c.q.bw
	if _, err := r.Discard(4); err != nil {
		return err
	}
	var prefix [4]byte
	binary.BigEndian.PutUint32(prefix[:], uint32(size))
	w.Write(prefix[:])
	c.upSet.Lock()
	up := c.up
	c.upSet.Unlock()
	st := &streamer{r: r, w: w, raw: c.nc, src: up, bufs: &c.p.chunks, left: size}
	if s.key == int16(kmsg.Fetch) && s.version >= 16 {
		if err := st.fetch(s.version, c.p.advertise); err != nil {
			return err
		}
	} else if st.copy(size); st.err != nil {
		return st.err
	}
	return w.Flush()
}

// transform returns the response frame for the client: the upstream's
// bytes, or a rewrite when the response names brokers, is ApiVersions, or
// the interceptor asked to see it.
func (c *conn) transform(s *slot, fr []byte) ([]byte, error) {
	if s.key != int16(kmsg.ApiVersions) && s.onResponse == nil && !namesBrokers(s.key, s.version) {
		return fr, nil
	}
	flexible := s.key != int16(kmsg.ApiVersions) && s.version >= c.p.flexFrom[s.key]
	corr, body, err := frame.ParseResponseHeader(fr, flexible)
	if err != nil {
		return nil, fmt.Errorf("upstream %s response: %w", kmsg.NameForKey(s.key), err)
	}
	var out []byte
	switch {
	case s.onResponse != nil:
		resp, err := decodeResponse(s.key, s.version, body)
		if err != nil {
			return nil, fmt.Errorf("upstream: %w", err)
		}
		resp = s.onResponse(resp)
		resp.SetVersion(s.version)
		if r, ok := resp.(*kmsg.ApiVersionsResponse); ok {
			limitApiVersions(r, c.p.state.load().table)
		} else {
			rewriteAddresses(resp, c.p.advertise)
		}
		out = resp.AppendTo(nil)
	case s.key == int16(kmsg.ApiVersions):
		t := c.p.state.load().table
		if s.discard && c.p.avs.unchanged(c.info.Upstream, s.version, t, body) {
			return nil, nil // the client had this answer already
		}
		var r *kmsg.ApiVersionsResponse
		if r, err = limitedApiVersions(s.version, body, t); err == nil {
			c.p.avs.learn(c.info.Upstream, s.version, t, r, body)
			out = r.AppendTo(nil)
		}
	default:
		out, err = rewriteResponseBody(s.key, s.version, body, c.p.advertise, c.p.peers())
	}
	switch {
	case errors.Is(err, errNotRewritten):
		return fr, nil
	case err != nil:
		return nil, fmt.Errorf("upstream: %w", err)
	}
	return append(frame.AppendResponseHeader(make([]byte, 0, 5+len(out)), corr, flexible), out...), nil
}

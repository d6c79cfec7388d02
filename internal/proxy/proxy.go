// Package proxy is the gateway's Kafka wire layer: it listens for clients on
// a bootstrap port and one port per upstream broker, gives every client
// connection its own connection to the broker its port stands for, forwards
// requests byte for byte (so SASL passes through untouched), and rewrites
// the few responses that name brokers so that clients only ever learn the
// gateway's own addresses.
//
// Responses leave every client connection in the order its requests arrived,
// whether the upstream or an [Interceptor] answered them; requests are
// pipelined upstream, never serialised into round trips. Only the responses
// that carry broker addresses (Metadata, FindCoordinator, DescribeCluster,
// the KIP-951 endpoints of Produce and Fetch) and ApiVersions are decoded;
// everything else passes through as bytes, and large responses are streamed
// rather than stored and forwarded (see stream.go).
//
// What a broker would refuse, the proxy refuses the same way, before it
// reaches the upstream (an in-process kfake panics on unknown keys):
//   - an API key the gateway does not offer (unknown to kmsg, not
//     advertised by every upstream broker, or hidden, see
//     [DefaultHiddenKeys]), a version outside the offered range, a
//     malformed header or a frame above the size limit close that one
//     connection with a log line, as Kafka's SocketServer closes the channel
//     on InvalidRequestException;
//   - ApiVersions at a version above the proxy's gets the KIP-511 answer (v0,
//     UNSUPPORTED_VERSION, the supported range) on a connection that stays
//     open;
//   - requests sent before ApiVersions are served normally.
//
// # Notes
//
// SASL with SaslHandshake v0, where the client then sends raw, unframed SASL
// tokens, is not supported (the tokens are not Kafka requests); clients since
// Kafka 1.0 use v1 and SaslAuthenticate, which pass through.
//
// The package knows nothing of consumer groups: the coordinator plugs in
// through [Interceptor] and [Options.OnFetchRack], and makes its own upstream
// requests with [Proxy.Client]. It must not import the coordinator, runtime
// or cmd packages.
package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/internal/config"
)

// NodeBootstrap is the node of the bootstrap listener in [ConnInfo.Node]:
// its connections go to any upstream broker.
const NodeBootstrap int32 = -1

// DefaultMaxFrameBytes bounds a client request when [config.Server]
// leaves MaxFrameBytes at 0; it is Kafka's socket.request.max.bytes default.
const DefaultMaxFrameBytes = 100 << 20

// DefaultHiddenKeys returns the API keys the gateway removes from
// ApiVersions and refuses, because it does not implement them:
// ConsumerGroupHeartbeat and ConsumerGroupDescribe, the KIP-848 group
// protocol. A client that saw them would bypass the gateway's
// coordinator.
func DefaultHiddenKeys() []int16 {
	return []int16{int16(kmsg.ConsumerGroupHeartbeat), int16(kmsg.ConsumerGroupDescribe)}
}

// Options configure a [Proxy]. Server and one of Client or UpstreamBrokers
// are required.
type Options struct {
	// Server gives the bootstrap address (Listen), the host put in
	// rewritten addresses (AdvertisedHost), the broker ports and the
	// request size limit (MaxFrameBytes, defaulting to
	// [DefaultMaxFrameBytes]). Broker listeners bind to the host of Listen.
	Server config.Server

	// BrokerPort, when set, replaces Server.BrokerPort to choose the port
	// of node N's listener. A port of 0 binds any free port, which is then
	// the one advertised (tests use this).
	BrokerPort func(node int32) int

	// TLS, when set, makes every listener serve TLS.
	TLS *tls.Config

	// Client is the gateway's own client of the upstream cluster, used to
	// poll metadata and ApiVersions. When nil, the proxy builds one from
	// UpstreamBrokers and ClientOpts and closes it on Close.
	Client *kgo.Client
	// UpstreamBrokers are the seed addresses for the client the proxy
	// builds when Client is nil.
	UpstreamBrokers []string
	// ClientOpts are added to that client's options (TLS, SASL).
	ClientOpts []kgo.Opt

	// DialUpstream opens the connection to an upstream broker for one client
	// connection (wrap it in TLS here for a TLS upstream). SASL is not
	// the dialer's business: clients authenticate through the proxy
	// themselves. Defaults to a net.Dialer with a 10s timeout.
	DialUpstream func(ctx context.Context, addr string) (net.Conn, error)

	// MetadataRefresh is how often upstream metadata is polled for new
	// brokers. Defaults to 10s.
	MetadataRefresh time.Duration

	// HiddenKeys are API keys removed from ApiVersions and refused like
	// unknown keys. Nil means [DefaultHiddenKeys]; use an empty non-nil
	// slice to hide nothing.
	HiddenKeys []int16

	// Interceptor, when set, sees the requests whose keys it asks for and
	// may answer them itself.
	Interceptor Interceptor

	// RequireClientSASL says the upstream authenticates its clients with
	// SASL (the gateway's own connections do). A client connection's
	// requests then reach the interceptor only once the client has
	// authenticated upstream through it; before that an intercepted request
	// closes the connection, as a broker's SASL listener closes a
	// connection on any request but ApiVersions, SaslHandshake and
	// SaslAuthenticate. Without it, a client that never authenticates could
	// join, commit for or delete a managed group, which the gateway answers
	// itself and forwards with its own credentials.
	RequireClientSASL bool

	// MaxVersions, when set, caps the versions offered in ApiVersions for
	// the keys it reports (ok true): the keys the interceptor answers
	// itself at fewer versions than the upstream speaks. Without the cap a
	// client picks the upstream's newest version, which the interceptor
	// then refuses with UNSUPPORTED_VERSION (Kafka 4.4 offers
	// DescribeGroups v6 and DeleteGroups v3).
	MaxVersions func(key int16) (max int16, ok bool)

	// OnRequest, when set, is called once per answered client request
	// with its API key, whether it was answered locally (by the interceptor,
	// or ApiVersions from a remembered upstream answer, see apiversions.go), and
	// the time from reading it to queueing its answer (responses streamed
	// straight through are not reported). It must not block.
	OnRequest func(key int16, local bool, d time.Duration)

	// Listen, when set, opens the TCP listener for an address (before TLS
	// is layered on). The daemon uses it to hand over listeners it bound
	// at the very start, so that clients reconnecting during a restart
	// wait in the accept queue instead of being refused.
	Listen func(addr string) (net.Listener, error)

	// OnFetchRack, when set, is called with the client id (empty when
	// null), the rack (KIP-392 RackID, empty when the client sent none)
	// and the topics of the first Fetch request of version 11 or later on
	// each client connection that sends no rack or names some partitions.
	// It must not block, nor keep topics.
	OnFetchRack func(c ConnInfo, clientID, rack string, topics []kmsg.FetchRequestTopic)
	// Peers, when set, are the gateways of this gateway's cluster, this
	// one included, each a node of its own beside the upstream's: every
	// Metadata answer lists them, so that a client can reach the gateway a
	// FindCoordinator answer names (some clients, kgo among them, take a
	// coordinator's address from Metadata by its node id), and the
	// addresses given for their nodes are passed through as they are. It
	// is called for every such answer and must not block.
	Peers func() []Peer
	// Route, when set, says for an upstream node which other gateway of
	// the cluster clients are told to reach it through: the gateway's
	// listener for the node as Host and Port (Node is unused), or false
	// for this gateway's own. Spreading the nodes over the live gateways
	// makes a client's connections span the cluster, so that losing the
	// gateway it bootstrapped from does not leave it with no broker to
	// ask. It is called for every broker address a response names and
	// must not block.
	Route func(node int32) (Peer, bool)
	// OnUnreachable, when set, is called (from the connection's goroutine;
	// it must not block) each time a client connection is closed because
	// its broker could not be dialled. The daemon checks the upstream at
	// once rather than at its next metadata refresh.
	OnUnreachable func(err error)

	// Logger defaults to slog.Default().
	Logger *slog.Logger

	// streamFrom overrides defaultStreamFrom; negative streams every
	// response (tests).
	streamFrom int64
}

// Peer is a gateway of a gateway cluster as clients reach it: a node id
// that no upstream broker has, and the gateway's address.
type Peer struct {
	Node int32
	Host string
	Port int32
}

// peers is the cluster's gateways now; nil outside a cluster.
func (p *Proxy) peers() []Peer {
	if p.opts.Peers == nil {
		return nil
	}
	return p.opts.Peers()
}

// isPeerNode reports whether node is a gateway of the cluster as
// Options.Peers names it.
func (p *Proxy) isPeerNode(node int32) bool {
	for _, peer := range p.peers() {
		if peer.Node == node {
			return true
		}
	}
	return false
}

// Proxy is a running Kafka protocol proxy. Create it with [New], start it
// with [Proxy.Start] and stop it with [Proxy.Close].
type Proxy struct {
	opts     Options
	log      *slog.Logger
	client   *kgo.Client
	ownsCl   bool
	maxFrame int32
	streamAt int64     // responses this big or bigger are streamed
	chunks   sync.Pool // *[]byte of copyChunk bytes, for streaming
	bufs     bufPool   // connections' buffered readers and writers
	listHost string    // host the listeners bind to
	flexFrom [maxKey + 1]int16

	state atomicState // upstream brokers and API versions
	// avs remembers the upstream's ApiVersions answers (apiversions.go).
	avs apiVersionsCache
	// unreachable paces the log of client connections closed because
	// their broker could not be dialled: during an outage every client
	// reconnects several times a second.
	unreachable logPacer
	// down holds the upstream nodes whose last dial failed. While a node
	// is down, a new connection to it dials at once, as the connection
	// opens, instead of with its first request to forward (startDial):
	// the client then learns straight away that the broker is away and
	// tries another, rather than have its requests answered here until one
	// needs the broker.
	down   downNodes
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	closing   bool
	bootstrap net.Listener
	listeners map[int32]*nodeListener
	conns     map[*conn]struct{}
	nextConn  uint64
	bootNext  int            // round robin over brokers for bootstrap connections
	wg        sync.WaitGroup // accept loops, refresher
	connWG    sync.WaitGroup // connections

	// While Drain watches, lastRead is when a client request was last
	// read (unix nanoseconds).
	watchReads atomic.Bool
	lastRead   atomic.Int64
}

// nodeListener is the listener standing for one upstream node.
type nodeListener struct {
	ln   net.Listener
	port int32 // the advertised port, which is the bound one
}

// ErrClosed is returned by [Proxy.Start] after [Proxy.Close].
var ErrClosed = errors.New("proxy closed")

// New checks opts and returns a proxy that is not yet listening.
func New(opts Options) (*Proxy, error) {
	if opts.Server.Listen == "" {
		return nil, fmt.Errorf("proxy: server listen address is empty")
	}
	if opts.Server.AdvertisedHost == "" {
		return nil, fmt.Errorf("proxy: server advertised host is empty")
	}
	host, _, err := net.SplitHostPort(opts.Server.Listen)
	if err != nil {
		return nil, fmt.Errorf("proxy: server listen address %q: %w", opts.Server.Listen, err)
	}
	if opts.Client == nil && len(opts.UpstreamBrokers) == 0 {
		return nil, fmt.Errorf("proxy: no upstream: set a client or upstream brokers")
	}
	if opts.BrokerPort == nil {
		opts.BrokerPort = opts.Server.BrokerPort
	}
	if opts.DialUpstream == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		opts.DialUpstream = func(ctx context.Context, addr string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	if opts.MetadataRefresh <= 0 {
		opts.MetadataRefresh = 10 * time.Second
	}
	if opts.HiddenKeys == nil {
		opts.HiddenKeys = DefaultHiddenKeys()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	p := &Proxy{
		opts:      opts,
		log:       opts.Logger.With("component", "proxy"),
		client:    opts.Client,
		maxFrame:  opts.Server.MaxFrameBytes,
		listHost:  host,
		listeners: make(map[int32]*nodeListener),
		conns:     make(map[*conn]struct{}),
	}
	if p.maxFrame <= 0 {
		p.maxFrame = DefaultMaxFrameBytes
	}
	p.flexFrom = flexibleFrom()
	p.chunks.New = func() any { b := make([]byte, copyChunk); return &b }
	switch {
	case opts.streamFrom == 0:
		p.streamAt = defaultStreamFrom
	case opts.streamFrom > 0:
		p.streamAt = opts.streamFrom
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// Start reads the upstream's metadata and API versions, opens the bootstrap
// listener and one listener per upstream broker, and starts serving. It
// returns once the listeners are open; an unreachable upstream or a port in
// use is an error. Call Close even when Start fails, to release what it
// opened.
func (p *Proxy) Start(ctx context.Context) error {
	if p.client == nil {
		opts := append([]kgo.Opt{kgo.SeedBrokers(p.opts.UpstreamBrokers...)}, p.opts.ClientOpts...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return fmt.Errorf("proxy: upstream client: %w", err)
		}
		p.client, p.ownsCl = cl, true
	}
	if err := p.refresh(ctx); err != nil {
		return err
	}
	ln, err := p.listen(p.opts.Server.Listen)
	if err != nil {
		return fmt.Errorf("proxy: bootstrap listener: %w", err)
	}
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		ln.Close()
		return ErrClosed
	}
	p.bootstrap = ln
	p.wg.Add(2)
	p.mu.Unlock()
	go p.accept(ln, NodeBootstrap)
	go p.refreshLoop()
	for _, b := range p.state.load().brokers {
		if _, err := p.ensureListener(b.node); err != nil {
			return err
		}
	}
	p.log.Info("proxy listening", "bootstrap", ln.Addr().String(), "brokers", len(p.state.load().brokers))
	return nil
}

// Addr returns the bootstrap listener's address, or "" before Start.
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bootstrap == nil {
		return ""
	}
	return p.bootstrap.Addr().String()
}

// BrokerAddr returns the advertised address of node's listener, and false
// when node has no listener.
func (p *Proxy) BrokerAddr(node int32) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.listeners[node]
	if !ok {
		return "", false
	}
	return net.JoinHostPort(p.opts.Server.AdvertisedHost, strconv.Itoa(int(l.port))), true
}

// Broker is an upstream broker as the proxy last saw it.
type Broker struct {
	// Node is the broker's node id.
	Node int32
	// Upstream is the broker's own address.
	Upstream string
	// Rack is the rack the upstream reports, nil when none.
	Rack *string
}

// Brokers returns the upstream brokers from the latest metadata.
func (p *Proxy) Brokers() []Broker {
	st := p.state.load()
	out := make([]Broker, 0, len(st.brokers))
	for _, b := range st.brokers {
		out = append(out, Broker{Node: b.node, Upstream: b.addr, Rack: b.rack})
	}
	return out
}

// Client returns the proxy's own client of the upstream cluster.
func (p *Proxy) Client() *kgo.Client { return p.client }

func (p *Proxy) listen(addr string) (net.Listener, error) {
	listen := p.opts.Listen
	if listen == nil {
		listen = func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
	}
	ln, err := listen(addr)
	if err != nil {
		return nil, err
	}
	if p.opts.TLS != nil {
		ln = tls.NewListener(ln, p.opts.TLS)
	}
	return ln, nil
}

// ensureListener returns node's advertised port, opening its listener first
// if it has none.
func (p *Proxy) ensureListener(node int32) (int32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l, ok := p.listeners[node]; ok {
		return l.port, nil
	}
	if p.closing {
		return 0, ErrClosed
	}
	if node < 0 {
		return 0, fmt.Errorf("proxy: no listener for negative node id %d", node)
	}
	want := p.opts.BrokerPort(node)
	ln, err := p.listen(net.JoinHostPort(p.listHost, strconv.Itoa(want)))
	if err != nil {
		return 0, fmt.Errorf("proxy: listener for broker %d: %w", node, err)
	}
	port := int32(want)
	if ta, ok := ln.Addr().(*net.TCPAddr); ok {
		port = int32(ta.Port)
	}
	p.listeners[node] = &nodeListener{ln: ln, port: port}
	p.wg.Add(1)
	go p.accept(ln, node)
	p.log.Info("broker listener", "node", node, "addr", ln.Addr().String())
	return port, nil
}

// ListenFor opens this gateway's listeners for the upstream nodes that
// have none yet, and returns the port of every listener it has, by node:
// what a gateway of a cluster publishes for the others to route clients
// to (Options.Route).
func (p *Proxy) ListenFor(nodes []int32) (map[int32]int32, error) {
	var errs []error
	for _, n := range nodes {
		if _, err := p.ensureListener(n); err != nil {
			errs = append(errs, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ports := make(map[int32]int32, len(p.listeners))
	for n, l := range p.listeners {
		ports[n] = l.port
	}
	return ports, errors.Join(errs...)
}

// Drain closes every client connection once its requests in flight are
// answered, keeps the listeners open, and returns once no client request
// has been read for quiet, or when ctx ends. A gateway leaving its cluster
// drains after it has pointed its answers at the others (Options.Route,
// Options.Peers): clients that come back learn from their next Metadata
// where to go, and stop coming.
func (p *Proxy) Drain(ctx context.Context, quiet time.Duration) {
	p.lastRead.Store(time.Now().UnixNano())
	p.watchReads.Store(true)
	defer p.watchReads.Store(false)
	p.mu.Lock()
	for c := range p.conns {
		c.drain()
	}
	p.mu.Unlock()
	tick := time.NewTicker(min(quiet/4, 100*time.Millisecond))
	defer tick.Stop()
	for {
		if time.Since(time.Unix(0, p.lastRead.Load())) >= quiet {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sawRequest notes, while Drain watches, that a client request was read.
func (p *Proxy) sawRequest() {
	if p.watchReads.Load() {
		p.lastRead.Store(time.Now().UnixNano())
	}
}

// advertise maps an upstream node to the address clients must use. The
// host and port the upstream gave are remembered as that node's address
// when the proxy has none yet, so a broker first seen in a response can be
// reached at once.
func (p *Proxy) advertise(node int32, upHost string, upPort int32) (string, int32, bool) {
	if node < 0 {
		return "", -1, false
	}
	for _, pr := range p.peers() {
		if pr.Node == node {
			return pr.Host, pr.Port, true
		}
	}
	if upHost != "" {
		p.state.learn(node, net.JoinHostPort(upHost, strconv.Itoa(int(upPort))))
	}
	if p.opts.Route != nil {
		if pr, ok := p.opts.Route(node); ok {
			return pr.Host, pr.Port, true
		}
	}
	port, err := p.ensureListener(node)
	if err != nil {
		p.log.Error("cannot advertise broker", "node", node, "err", err)
		return "", -1, false
	}
	return p.opts.Server.AdvertisedHost, port, true
}

func (p *Proxy) accept(ln net.Listener, node int32) {
	defer p.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			p.mu.Lock()
			closing := p.closing
			p.mu.Unlock()
			if !closing {
				p.log.Error("accept failed; listener stops", "node", node, "err", err)
			}
			return
		}
		p.mu.Lock()
		if p.closing {
			p.mu.Unlock()
			nc.Close()
			return
		}
		p.nextConn++
		c := newConn(p, nc, node, p.nextConn)
		p.conns[c] = struct{}{}
		p.connWG.Add(1)
		p.mu.Unlock()
		go c.run()
	}
}

func (p *Proxy) forget(c *conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	p.connWG.Done()
}

// upstreamAddr picks the upstream broker for a new connection on node's
// listener; bootstrap connections go round robin over the known brokers.
func (p *Proxy) upstreamAddr(node int32) (string, int32, error) {
	st := p.state.load()
	if node != NodeBootstrap {
		if a, ok := st.addr(node); ok {
			return a, node, nil
		}
		return "", 0, fmt.Errorf("no upstream address known for broker %d", node)
	}
	if len(st.brokers) == 0 {
		return "", 0, fmt.Errorf("no upstream broker known")
	}
	p.mu.Lock()
	i := p.bootNext % len(st.brokers)
	p.bootNext++
	p.mu.Unlock()
	return st.brokers[i].addr, st.brokers[i].node, nil
}

// Close stops accepting connections and stops reading new requests, lets
// the requests already read finish until ctx is done, then closes every
// connection. It closes the upstream client if the proxy made it. It
// returns ctx's error when it had to cut requests short.
func (p *Proxy) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		return nil
	}
	p.closing = true
	if p.bootstrap != nil {
		p.bootstrap.Close()
	}
	for _, l := range p.listeners {
		l.ln.Close()
	}
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()

	for _, c := range conns {
		c.drain()
	}
	done := make(chan struct{})
	go func() { p.connWG.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		p.mu.Lock()
		for c := range p.conns {
			c.close(errShutdown)
		}
		p.mu.Unlock()
		<-done
	}
	p.cancel()
	p.wg.Wait()
	if p.ownsCl && p.client != nil {
		p.client.Close()
	}
	return err
}

var errShutdown = errors.New("proxy shutting down")

package daemon

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/config"
)

// preboundListeners are listeners bound before the proxy exists. A nil
// *preboundListeners binds on demand.
type preboundListeners struct {
	mu  sync.Mutex
	lns map[string]net.Listener
}

// prebind binds the bootstrap address and the listener of every broker the
// upstream names now (those with a fixed port). Failures are left for the
// proxy to report when it binds itself.
func prebind(ctx context.Context, s config.Server, cl *kgo.Client, log *slog.Logger) *preboundListeners {
	p := &preboundListeners{lns: make(map[string]net.Listener)}
	bind := func(addr string) {
		if ln, err := net.Listen("tcp", addr); err == nil {
			p.lns[addr] = ln
		}
	}
	host, _, err := net.SplitHostPort(s.Listen)
	if err != nil {
		return p
	}
	bind(s.Listen)
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(mctx, cl)
	if err != nil {
		log.Debug("prebinding: no upstream metadata yet", "err", err)
		return p
	}
	for _, b := range resp.Brokers {
		if port := s.BrokerPort(b.NodeID); port != 0 {
			bind(net.JoinHostPort(host, strconv.Itoa(port)))
		}
	}
	return p
}

// port is the port of the listener bound for addr: the one the system
// chose when addr's is 0. It is addr's own when nothing was bound.
func (p *preboundListeners) port(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	if p == nil {
		return port
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ln, ok := p.lns[addr]; ok {
		if _, bound, err := net.SplitHostPort(ln.Addr().String()); err == nil {
			return bound
		}
	}
	return port
}

// take hands the proxy the listener bound for addr, or binds one.
func (p *preboundListeners) take(addr string) (net.Listener, error) {
	if p != nil {
		p.mu.Lock()
		ln, ok := p.lns[addr]
		delete(p.lns, addr)
		p.mu.Unlock()
		if ok {
			return ln, nil
		}
	}
	return net.Listen("tcp", addr)
}

// closeRest closes listeners the proxy never took.
func (p *preboundListeners) closeRest() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, ln := range p.lns {
		ln.Close()
		delete(p.lns, addr)
	}
}

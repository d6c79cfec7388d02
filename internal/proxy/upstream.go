package proxy

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const maxKey = kmsg.MaxKey

// upstreamBroker is one broker of the upstream's metadata.
type upstreamBroker struct {
	node int32
	addr string
	rack *string
}

// apiTable is what the proxy accepts per API key: the intersection of every
// upstream broker's range with kmsg's, without the hidden keys.
type apiTable struct {
	has      [maxKey + 1]bool
	min, max [maxKey + 1]int16
}

// allows reports whether key at version may be forwarded.
func (t *apiTable) allows(key, version int16) bool {
	return key >= 0 && key <= maxKey && t.has[key] && version >= t.min[key] && version <= t.max[key]
}

// upstreamState is an immutable snapshot of what the proxy knows of the
// upstream; it is replaced whole.
type upstreamState struct {
	brokers  []upstreamBroker        // sorted by node
	extra    map[int32]string        // addresses learnt from responses, not yet in metadata
	versions map[int32][]apiVersions // per node, from its ApiVersions
	table    *apiTable
	// clusterID is the upstream's cluster id, "" before it named one:
	// the cluster a client means in a v5 ApiVersions (retargetApiVersions).
	clusterID string
}

type apiVersions struct{ key, min, max int16 }

func (s *upstreamState) addr(node int32) (string, bool) {
	for _, b := range s.brokers {
		if b.node == node {
			return b.addr, true
		}
	}
	a, ok := s.extra[node]
	return a, ok
}

// atomicState holds the current snapshot; writers serialise on mu, readers
// never lock.
type atomicState struct {
	mu sync.Mutex
	p  atomic.Pointer[upstreamState]
}

func (a *atomicState) load() *upstreamState {
	if s := a.p.Load(); s != nil {
		return s
	}
	return &upstreamState{table: &apiTable{}}
}

// learn records an upstream address for node seen in a response, when the
// proxy has none yet.
func (a *atomicState) learn(node int32, addr string) {
	if _, ok := a.load().addr(node); ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.load()
	if _, ok := cur.addr(node); ok {
		return
	}
	next := *cur
	next.extra = make(map[int32]string, len(cur.extra)+1)
	for k, v := range cur.extra {
		next.extra[k] = v
	}
	next.extra[node] = addr
	a.p.Store(&next)
}

// flexibleFrom returns, per API key, the first version whose request header
// is flexible (v2), math.MaxInt16 when none is, and -1 for keys kmsg does
// not know.
func flexibleFrom() [maxKey + 1]int16 {
	var out [maxKey + 1]int16
	for k := range out {
		r := kmsg.RequestForKey(int16(k))
		if r == nil {
			out[k] = -1
			continue
		}
		out[k] = math.MaxInt16
		for v := int16(0); v <= r.MaxVersion(); v++ {
			r.SetVersion(v)
			if r.IsFlexible() {
				out[k] = v
				break
			}
		}
	}
	return out
}

// kmsgMax returns kmsg's highest version of key, or -1 when it does not
// know the key.
func kmsgMax(key int16) int16 {
	r := kmsg.RequestForKey(key)
	if r == nil {
		return -1
	}
	return r.MaxVersion()
}

// buildTable intersects the brokers' ranges with kmsg's and with
// Options.MaxVersions.
func (p *Proxy) buildTable(versions map[int32][]apiVersions) *apiTable {
	t := &apiTable{}
	first := true
	for _, vs := range versions {
		var seen [maxKey + 1]bool
		for _, v := range vs {
			if v.key < 0 || v.key > maxKey {
				continue
			}
			km := kmsgMax(v.key)
			if km < 0 || slices.Contains(p.opts.HiddenKeys, v.key) {
				continue
			}
			lo, hi := v.min, min(v.max, km)
			if p.opts.MaxVersions != nil {
				if capped, ok := p.opts.MaxVersions(v.key); ok {
					hi = min(hi, capped)
				}
			}
			if lo > hi {
				continue
			}
			seen[v.key] = true
			if first {
				t.has[v.key], t.min[v.key], t.max[v.key] = true, lo, hi
			} else if t.has[v.key] {
				t.min[v.key], t.max[v.key] = max(t.min[v.key], lo), min(t.max[v.key], hi)
				if t.min[v.key] > t.max[v.key] {
					t.has[v.key] = false
				}
			}
		}
		if !first {
			for k := range seen {
				if !seen[k] {
					t.has[k] = false
				}
			}
		}
		first = false
	}
	return t
}

// refresh polls the upstream's brokers and, for brokers not seen before,
// their API versions, then opens listeners for new brokers.
func (p *Proxy) refresh(ctx context.Context) error {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // brokers only
	resp, err := req.RequestWith(ctx, p.client)
	if err != nil {
		return fmt.Errorf("proxy: upstream metadata: %w", err)
	}
	brokers := make([]upstreamBroker, 0, len(resp.Brokers))
	for _, b := range resp.Brokers {
		brokers = append(brokers, upstreamBroker{node: b.NodeID, addr: net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), rack: b.Rack})
	}
	slices.SortFunc(brokers, func(a, b upstreamBroker) int { return int(a.node) - int(b.node) })

	old := p.state.load()
	versions := make(map[int32][]apiVersions, len(brokers))
	for _, b := range brokers {
		if vs, ok := old.versions[b.node]; ok {
			versions[b.node] = vs
			continue
		}
		avReq := kmsg.NewPtrApiVersionsRequest()
		avReq.ClientSoftwareName, avReq.ClientSoftwareVersion = "wasmassign", "0"
		avResp, err := avReq.RequestWith(ctx, p.client.Broker(int(b.node)))
		if err == nil {
			err = kerr.ErrorForCode(avResp.ErrorCode)
		}
		if err != nil {
			if old.table == nil || len(old.versions) == 0 {
				return fmt.Errorf("proxy: upstream broker %d api versions: %w", b.node, err)
			}
			p.log.Warn("upstream broker api versions", "node", b.node, "err", err)
			continue
		}
		vs := make([]apiVersions, 0, len(avResp.ApiKeys))
		for _, k := range avResp.ApiKeys {
			vs = append(vs, apiVersions{k.ApiKey, k.MinVersion, k.MaxVersion})
		}
		versions[b.node] = vs
	}
	if len(versions) == 0 {
		return fmt.Errorf("proxy: upstream reported no brokers")
	}

	p.state.mu.Lock()
	cur := p.state.load()
	next := &upstreamState{brokers: brokers, versions: versions, table: p.buildTable(versions)}
	if resp.ClusterID != nil {
		next.clusterID = *resp.ClusterID
	}
	for n, a := range cur.extra {
		if _, ok := next.addr(n); !ok {
			if next.extra == nil {
				next.extra = make(map[int32]string)
			}
			next.extra[n] = a
		}
	}
	p.state.p.Store(next)
	p.state.mu.Unlock()

	p.mu.Lock()
	started := p.bootstrap != nil
	p.mu.Unlock()
	if started {
		for _, b := range brokers {
			if _, err := p.ensureListener(b.node); err != nil && err != ErrClosed {
				p.log.Error("new upstream broker has no listener", "node", b.node, "err", err)
			}
		}
	}
	return nil
}

func (p *Proxy) refreshLoop() {
	defer p.wg.Done()
	t := time.NewTicker(p.opts.MetadataRefresh)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(p.ctx, p.opts.MetadataRefresh)
		if err := p.refresh(ctx); err != nil && p.ctx.Err() == nil {
			p.log.Warn("upstream metadata refresh failed", "err", err)
		}
		cancel()
	}
}

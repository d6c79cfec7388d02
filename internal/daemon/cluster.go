package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/internal/cluster"
	"github.com/wasmassign/wasmassign/internal/config"
	"github.com/wasmassign/wasmassign/internal/driver"
	"github.com/wasmassign/wasmassign/internal/gateway"
	"github.com/wasmassign/wasmassign/internal/metrics"
	"github.com/wasmassign/wasmassign/internal/proxy"
)

// clusterGroups hands the Manager the coordinator's driver, which is
// started after the Manager is made (it saves through it).
type clusterGroups struct{ d *Daemon }

func (g clusterGroups) Load(states []coordinator.GroupState) error { return g.d.driver.Load(states) }
func (g clusterGroups) Unload(groups []string) error               { return g.d.driver.Unload(groups) }
func (g clusterGroups) Groups() []string                           { return g.d.driver.Groups() }

// clusterView is the gateway cluster as the gateway and the proxy see it:
// who owns a group (gateway.Ownership), and the gateways as nodes of their
// own (proxy.Options.Peers).
type clusterView struct {
	m *cluster.Manager
	// alone is set for a gateway in a cluster of its own: it is no node
	// of its own, and clients find its groups at their upstream
	// coordinators' listeners, as they would without a cluster.
	alone bool
	// leaving is set once this gateway hands its groups over at shutdown:
	// clients are routed to the others only.
	leaving atomic.Bool

	mu    sync.Mutex
	peers map[gatewayKey]proxy.Peer
}

// gatewayKey is a gateway as its peer is made from it.
type gatewayKey struct{ id, address string }

// peer is o as clients reach it, parsed once per gateway: every managed
// group's request asks.
func (v *clusterView) peer(o cluster.Owner) (proxy.Peer, bool) {
	key := gatewayKey{o.ID, o.Address}
	v.mu.Lock()
	defer v.mu.Unlock()
	if p, ok := v.peers[key]; ok {
		return p, true
	}
	p, ok := peerOf(o)
	if ok {
		if v.peers == nil {
			v.peers = map[gatewayKey]proxy.Peer{}
		}
		v.peers[key] = p
	}
	return p, ok
}

// OwnerOf implements gateway.Ownership.
func (v *clusterView) OwnerOf(group string) gateway.Owner {
	own, o := v.m.Owner(group)
	out := gateway.Owner{State: ownerState(own), Node: -1}
	if v.alone {
		return out
	}
	if p, ok := v.peer(o); ok {
		out.Node, out.Host, out.Port = p.Node, p.Host, p.Port
	}
	return out
}

// Refusal is driver.Config.Refuse: what a request of group is answered
// with when this gateway does not serve the group now.
func (v *clusterView) Refusal(group string) int16 {
	own, _ := v.m.Owner(group)
	return ownerState(own).Refusal()
}

func ownerState(own cluster.Ownership) gateway.OwnerState {
	switch own {
	case cluster.Serving:
		return gateway.OwnedHere
	case cluster.Loading:
		return gateway.OwnedLoading
	}
	return gateway.OwnedElsewhere
}

// Peers lists every gateway of the latest layout, but this one while it
// leaves.
func (v *clusterView) Peers() []proxy.Peer {
	if v.alone {
		return nil
	}
	var out []proxy.Peer
	leaving := v.leaving.Load()
	for _, o := range v.m.Layout() {
		if leaving && o.ID == v.m.ID() {
			continue
		}
		if p, ok := v.peer(o); ok {
			out = append(out, p)
		}
	}
	return out
}

// Route implements proxy.Options.Route: clients reach upstream node n
// through gateway n mod k of the k gateways of the latest layout that
// listen for it, in id order (this one left out while it leaves). Every
// gateway gives the same answer for one layout, and a client's
// connections span the cluster.
func (v *clusterView) Route(node int32) (proxy.Peer, bool) {
	if v.alone {
		return proxy.Peer{}, false
	}
	return routeNode(v.m.Layout(), v.m.ID(), v.leaving.Load(), node)
}

// routeNode is Route over layout, for the gateway self: the listener
// clients use for node, or false for self's own.
func routeNode(layout []cluster.Owner, self string, leaving bool, node int32) (proxy.Peer, bool) {
	if node < 0 {
		return proxy.Peer{}, false
	}
	var via []cluster.Owner
	for _, o := range layout {
		if _, ok := o.Brokers[node]; ok && !(leaving && o.ID == self) {
			via = append(via, o)
		}
	}
	if len(via) == 0 {
		return proxy.Peer{}, false
	}
	o := via[int(node)%len(via)]
	if o.ID == self {
		return proxy.Peer{}, false
	}
	host, _, err := net.SplitHostPort(o.Address)
	if err != nil {
		return proxy.Peer{}, false
	}
	return proxy.Peer{Node: node, Host: host, Port: o.Brokers[node]}, true
}

// peerOf is the gateway o as clients reach it; false for no gateway, or an
// address that is not host:port.
func peerOf(o cluster.Owner) (proxy.Peer, bool) {
	if o.ID == "" {
		return proxy.Peer{}, false
	}
	host, port, err := net.SplitHostPort(o.Address)
	if err != nil {
		return proxy.Peer{}, false
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return proxy.Peer{}, false
	}
	return proxy.Peer{Node: cluster.PeerNode(o.ID), Host: host, Port: int32(p)}, true
}

// ownedForwarder sends a group's requests upstream only while this gateway
// serves the group, and bounds each by what is left of its lease: a
// gateway that lost a group (paused past its lease, or cut off from the
// upstream) must not commit for it after another gateway took it over.
// Everything it forwards, the offset keeper's re-commits included, goes
// through it. Offset commits go in the group's shard's transactions
// (cluster.Manager.Commit), which the next owner's claim fences, so that
// not even a commit still in flight when the lease ran out can land.
type ownedForwarder struct {
	next driver.Forwarder
	m    *cluster.Manager
}

// Forward implements driver.Forwarder.
func (f ownedForwarder) Forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	if commit, ok := req.(*kmsg.OffsetCommitRequest); ok {
		resp, err := f.m.Commit(ctx, commit)
		if errors.Is(err, cluster.ErrNotOwner) {
			return coordinator.ErrorResponse(req, kerr.NotCoordinator.Code), nil
		}
		return resp, err
	}
	var until time.Duration // the shortest lease left of the request's groups
	for i, g := range coordinator.GroupsOf(req) {
		left, ok := f.m.ServingFor(g)
		if !ok {
			if resp := coordinator.ErrorResponse(req, kerr.NotCoordinator.Code); resp != nil {
				return resp, nil
			}
			return nil, fmt.Errorf("group %s: %w", g, cluster.ErrNotOwner)
		}
		if i == 0 || left < until {
			until = left
		}
	}
	if until > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, until)
		defer cancel()
	}
	return f.next.Forward(ctx, req)
}

// clusterMaxVersion is coordinator.MaxVersion for a gateway of a
// cluster: OffsetCommit stops below v10, which names topics by id alone,
// because the commits go upstream as TxnOffsetCommit, which names them.
func clusterMaxVersion(key int16) (int16, bool) {
	v, ok := coordinator.MaxVersion(key)
	if key == int16(kmsg.OffsetCommit) {
		v = min(v, 9)
	}
	return v, ok
}

// publishBrokers opens this gateway's listeners for the upstream's
// brokers (nodes, or those the upstream names when nil) and publishes
// them to the other gateways, which route clients to them. A failure is
// logged: the gateway still serves, and the others route nothing here
// until a later refresh publishes.
func (d *Daemon) publishBrokers(ctx context.Context, nodes []int32) {
	if nodes == nil {
		var err error
		if nodes, err = upstreamNodes(ctx, d.client); err != nil {
			d.log.Warn("gateway cluster: listing the upstream's brokers failed; the other gateways route no client here until the next metadata refresh", "err", err)
			return
		}
	}
	ports, err := d.proxy.ListenFor(nodes)
	if err != nil {
		d.log.Warn("gateway cluster: a listener for an upstream broker failed", "err", err)
	}
	d.manager.SetBrokers(ports)
}

// upstreamNodes lists the upstream's brokers: a Metadata request for no
// topic.
func upstreamNodes(ctx context.Context, cl *kgo.Client) ([]int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none, where nil is all
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("upstream metadata: %w", err)
	}
	nodes := make([]int32, 0, len(resp.Brokers))
	for _, b := range resp.Brokers {
		nodes = append(nodes, b.NodeID)
	}
	return nodes, nil
}

// drainClients, once this gateway has handed its groups over, lets its
// clients move to the others before it closes: Metadata answers name the
// others only, every client connection is closed once its requests in
// flight are answered, and clients that come back are served until none
// has sent a request for a second. It takes at most half of what is left
// of ctx: the rest is for the requests in flight at the close.
func (d *Daemon) drainClients(ctx context.Context) {
	if d.proxy == nil {
		return
	}
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Until(deadline)/2)
		defer cancel()
	}
	started := time.Now()
	d.proxy.Drain(ctx, time.Second)
	d.log.Info("shutdown: clients moved to the other gateways", "took", time.Since(started).Round(time.Millisecond), "all_quiet", ctx.Err() == nil)
}

// startCluster makes sure the state topic exists and makes this gateway's
// Manager; Start runs it once the gateway serves.
func (d *Daemon) startCluster(ctx context.Context, clientOpts []kgo.Opt) (*cluster.Manager, error) {
	// Clients reach this gateway at the port it bound, which a listen
	// port of 0 leaves to the system.
	port := d.prebound.port(d.cfg.Server.Listen)
	cc := d.cfg.Cluster.Resolve(config.DefaultID(d.cfg.Server.AdvertisedHost, port))
	if d.cfg.Cluster.ID == "" && d.cfg.Alone() {
		d.log.Warn("this gateway listens on a port the system picks and has no [cluster] id: each start is a new gateway with a state topic of its own, and the groups' state is not found again; set [cluster] id to keep it",
			"id", cc.ID, "state_topic", cc.StateTopic)
	}
	shards, err := cluster.EnsureStateTopic(ctx, d.client, cc.StateTopic, cc.Partitions)
	if err != nil {
		return nil, fmt.Errorf("gateway cluster %s: %w", cc.Name, err)
	}
	var m *cluster.Manager
	cm := d.metrics.Cluster(func() metrics.ClusterView {
		var v metrics.ClusterView
		for _, s := range m.Status().Shards {
			if s.State == cluster.ShardServing {
				v.ServingShards++
			} else {
				v.LoadingShards++
			}
		}
		if d.started.Load() {
			v.Groups = len(d.driver.Groups())
		}
		return v
	})
	m = cluster.NewManager(cluster.ManagerConfig{
		Name: cc.Name, Topic: cc.StateTopic, Shards: shards,
		ID: cc.ID, Address: net.JoinHostPort(d.cfg.Server.AdvertisedHost, port), Admin: advertisedAdmin(d.cfg.Server),
		SessionTimeout: cc.SessionTimeout, RebalanceTimeout: cc.RebalanceTimeout,
		HeartbeatInterval: cc.HeartbeatInterval, Lease: cc.Lease,
		Opts: clientOpts, Groups: clusterGroups{d}, Logger: d.log, Hooks: []cluster.Hook{clusterHooks{cm}},
	})
	return m, nil
}

// advertisedAdmin is where the other gateways' operators reach this
// gateway's admin API: admin_listen, at the advertised host when it
// listens on every address; empty without an admin API.
func advertisedAdmin(s config.Server) string {
	host, port, err := net.SplitHostPort(s.AdminListen)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = s.AdvertisedHost
	}
	return net.JoinHostPort(host, port)
}

// clusterHooks feeds the Manager's hooks into the cluster's metrics.
type clusterHooks struct{ m *metrics.ClusterMetrics }

func (h clusterHooks) OnShardServing(_, _ int, took time.Duration, how string) {
	h.m.ShardServing(took, how)
}
func (h clusterHooks) OnShardGivenUp(_ int, reason string) { h.m.ShardGivenUp(reason) }
func (h clusterHooks) OnRecordsSkipped(_ int, reason string, n int) {
	h.m.RecordsSkipped(reason, n)
}

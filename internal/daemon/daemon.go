// Package daemon wires the gateway together: it starts the embedded cluster
// or the upstream client, the plugin host and its registry, the coordinator's
// driver, the gateway and the proxy, the metadata watch and the split-brain
// check, the state store and the admin API, and stops them in reverse.
//
// It is the only package that knows every layer; each adapter between two
// layers lives here, so that the layers themselves never import each other
// sideways or upwards. cmd/wasmassign parses flags and calls Start.
package daemon

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/internal/admin"
	"github.com/wasmassign/wasmassign/internal/cluster"
	"github.com/wasmassign/wasmassign/internal/config"
	"github.com/wasmassign/wasmassign/internal/driver"
	"github.com/wasmassign/wasmassign/internal/embedded"
	"github.com/wasmassign/wasmassign/internal/gateway"
	"github.com/wasmassign/wasmassign/internal/metrics"
	"github.com/wasmassign/wasmassign/internal/pluginreload"
	"github.com/wasmassign/wasmassign/internal/proxy"
	"github.com/wasmassign/wasmassign/internal/upstream"
	"github.com/wasmassign/wasmassign/plugins/builtin"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
)

// NewLogger is the daemon's logger as [log] configures it: its level and
// its format (text or json), writing to w.
func NewLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(c.Level)) // checked by config
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Daemon is a running gateway: everything Start starts, in start order.
type Daemon struct {
	cfg      *config.Config
	log      *slog.Logger
	cluster  *embedded.Cluster
	host     *wasmruntime.Host
	registry *wasmruntime.Registry
	client   *kgo.Client
	// forwarders are the further clients forwarded requests are spread
	// over ([upstream] forward_connections).
	forwarders []*kgo.Client
	driver     *driver.Driver
	proxy      *proxy.Proxy
	adminLn    net.Listener
	cancel     context.CancelFunc
	done       chan struct{}
	// refresh asks the metadata watcher for an update now.
	refresh chan struct{}
	// reloader keeps [plugins] dir in service; nil without a directory.
	reloader *pluginreload.Manager
	// reloadDone is closed when the reloader stopped watching.
	reloadDone chan struct{}
	// prebound holds listeners bound at the start, by address, until the
	// proxy takes them.
	prebound *preboundListeners
	metrics  *metrics.Metrics
	// started is set once the driver runs: reload events reach it only
	// from then on.
	started atomic.Bool
	// offsets keeps live groups' offsets from expiring upstream.
	offsets     *offsetKeeper
	offsetsDone chan struct{}
	// manager is this gateway's part in its cluster (named, or of its own
	// with an external upstream); clusterDone has what its Run returned,
	// and is nil once that was taken (and with the embedded cluster).
	manager     *cluster.Manager
	clusterDone chan error
	// view is the cluster as the gateway and the proxy see it; nil
	// outside a cluster.
	view *clusterView
}

// Options are what Start needs beyond the configuration.
type Options struct {
	// CacheDir is the directory for compiled plugin code; empty keeps it
	// in memory.
	CacheDir string
	// Logger receives the daemon's log. Defaults to slog.Default().
	Logger *slog.Logger
}

// ConfigError marks a start-up failure caused by the configuration (a bad
// key, a listener that cannot bind, an assignor no plugin provides), as
// opposed to a failure of a running part. The command exits 2 on it.
type ConfigError struct{ Err error }

// Error is the configuration problem's message, naming the key.
func (e *ConfigError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error, for errors.Is and errors.As.
func (e *ConfigError) Unwrap() error { return e.Err }

// Start starts every part; on failure it stops what it started. The
// daemon runs until Close.
func Start(ctx context.Context, cfg *config.Config, opt Options) (_ *Daemon, err error) {
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	cacheDir := opt.CacheDir
	d := &Daemon{cfg: cfg, log: log, done: make(chan struct{}), refresh: make(chan struct{}, 1)}
	defer func() {
		if err != nil {
			d.Close(context.Background())
		}
	}()
	brokers := cfg.Upstream.Brokers
	if cfg.Upstream.IsEmbedded() {
		if d.cluster, err = embedded.Start(ctx, cfg.Upstream.Embedded, log); err != nil {
			return d, err
		}
		brokers = d.cluster.Addrs()
		log.Info("embedded cluster started", "brokers", brokers)
	}

	// TLS toward clients and the upstream, and SASL for the gateway's own
	// connections, as the configuration says.
	popts, err := proxy.FromConfig(cfg)
	if err != nil {
		return d, &ConfigError{err}
	}
	clientOpts := append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, popts.ClientOpts...)
	if d.cluster != nil {
		clientOpts = append(clientOpts, d.cluster.InMemory())
	}
	if d.client, err = kgo.NewClient(clientOpts...); err != nil {
		return d, fmt.Errorf("upstream client: %w", err)
	}
	// Bind the listeners before the slow part of start-up (loading
	// plugins): a client that reconnects while the daemon restarts then
	// waits in the accept queue rather than being refused, and keeps its
	// session.
	d.prebound = prebind(ctx, cfg.Server, d.client, log)

	lim := wasmruntime.DefaultLimits().
		WithTimeout(cfg.Plugins.Timeout).
		WithCompileTimeout(cfg.Plugins.CompileTimeout).
		WithMemoryLimitMB(uint32(cfg.Plugins.MemoryLimitMB))
	promReg := prometheus.NewRegistry()
	promReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(promReg, cfg.Server.MetricsGroupCap)
	d.metrics = m
	hostCfg := wasmruntime.NewConfig().WithLimits(lim).WithLogger(log).WithCompilationCacheDir(cacheDir).
		WithQueueTimeout(cfg.Plugins.QueueTimeout).WithIdleTimeout(cfg.Plugins.IdleTimeout).WithHooks(hostHooks{m})
	if cfg.Plugins.Workers > 0 {
		hostCfg = hostCfg.WithMaxInstances(cfg.Plugins.Workers)
	}
	if d.host, err = wasmruntime.NewHost(ctx, hostCfg); err != nil {
		return d, fmt.Errorf("plugin host: %w", err)
	}
	m.WatchPluginPool(func() metrics.PluginPool {
		s := d.host.PoolStats()
		return metrics.PluginPool{Size: s.Size, Busy: s.Busy, Idle: s.Idle, Idling: s.Idling, Starting: s.Starting, Queued: s.Queued}
	})
	d.registry = wasmruntime.NewRegistry(d.host)
	if err := d.registry.LoadBuiltins(ctx, builtin.FS()); err != nil {
		return d, err
	}
	if d.cluster != nil {
		registerEmbeddedConnections(promReg, d.cluster)
	}
	if cfg.Plugins.Dir != "" {
		d.reloader = pluginreload.New(pluginreload.Options{
			Dir: cfg.Plugins.Dir, Host: d.host, Registry: d.registry,
			InUse: d.assignorInUse, Changed: d.servedProtocolsChanged, Reloaded: d.rebalanceOnReload,
			Metrics: m, Logger: log,
		})
		if err := d.reloader.LoadAll(ctx); err != nil {
			return d, err
		}
	}
	if err := cfg.CheckAssignors(func(name string) bool { _, ok := d.registry.Lookup(name); return ok }); err != nil {
		return d, &ConfigError{err}
	}

	plugins := pluginSet{d.registry}
	up := upstream.New(d.client, 0)
	if d.cluster == nil {
		// The embedded cluster serves all its connections on one loop:
		// more of them would only cost.
		for range cfg.Upstream.ForwardConnections - 1 {
			cl, err := kgo.NewClient(clientOpts...)
			if err != nil {
				return d, fmt.Errorf("upstream client: %w", err)
			}
			d.forwarders = append(d.forwarders, cl)
		}
		up.WithForwarders(d.forwarders...)
	}
	var forward driver.Forwarder = up
	var saver driver.Saver
	var refuse func(group string) int16
	if cfg.InUpstream() {
		if d.manager, err = d.startCluster(ctx, clientOpts); err != nil {
			return d, err
		}
		d.view = &clusterView{m: d.manager, alone: cfg.Alone()}
		// The gateway checks ownership before it hands a request to the
		// driver; the driver checks again where the shard's unload is
		// ordered, so that no request of a group given up in between
		// meets a coordinator that no longer holds it.
		refuse = d.view.Refusal
		// What the gateway sends upstream for a group, the offset
		// keeper's re-commits too, goes only while it owns the group.
		forward = ownedForwarder{next: up, m: d.manager}
		saver = d.manager
	}
	d.offsets = newOffsetKeeper(forward, cfg.Upstream.OffsetsRetention, log)
	var seed [8]byte
	rand.Read(seed[:])
	// With an external upstream the state topic holds the state, not
	// state_dir.
	var saved []coordinator.GroupState
	var persist func([]coordinator.GroupState)
	if !cfg.InUpstream() {
		if saved, err = loadState(cfg.Server.StateDir); err != nil {
			return d, err
		}
		persist = stateSaver(cfg.Server.StateDir, log)
	} else if cfg.Server.StateDir != "" {
		log.Warn("server.state_dir is not used with an external upstream: the state topic holds the groups' state", "state_dir", cfg.Server.StateDir)
	}
	ccfg := coordinator.Config{Served: d.registry.ServedProtocols(), AssignmentTimeout: cfg.Plugins.AssignmentTimeout, EmptyGroupRetention: cfg.Server.EmptyGroupRetention, MetadataWait: cfg.Upstream.MetadataWait}
	for i := range cfg.Groups {
		g := &cfg.Groups[i]
		ccfg.Rules = append(ccfg.Rules, coordinator.GroupRule{Match: g.Matches, Config: groupConfig(g, cfg.Racks)})
	}
	if d.driver, err = driver.Start(driver.Config{
		Coordinator:   ccfg,
		Plugins:       plugins,
		Forwarder:     d.offsets,
		PluginTimeout: cfg.Plugins.QueueTimeout + cfg.Plugins.Timeout + time.Second,
		IDSeed:        binary.LittleEndian.Uint64(seed[:]),
		Restore:       saved,
		Persist:       persist,
		Saver:         saver,
		Refuse:        refuse,
		Logger:        log,
		Hooks:         []driver.Hook{driverHooks{m}},
		NeedMetadata: func([]string) {
			select {
			case d.refresh <- struct{}{}:
			default:
			}
		},
	}); err != nil {
		return d, err
	}
	d.started.Store(true)
	gopts := gateway.Options{
		Manages:      func(group string) bool { _, ok := cfg.GroupFor(group); return ok },
		Driver:       d.driver,
		Coordinators: up,
		Logger:       log,
	}
	if d.view != nil {
		gopts.Ownership, gopts.Upstream, gopts.Alone = d.view, up, d.view.alone
		popts.Peers, popts.Route = d.view.Peers, d.view.Route
	}
	gw := gateway.New(gopts)

	popts.Client = d.client
	popts.Interceptor = gw
	// Offer clients no version of a group API that the coordinator would
	// refuse for a managed group.
	popts.MaxVersions = coordinator.MaxVersion
	if d.view != nil {
		popts.MaxVersions = clusterMaxVersion
	}
	// Clients that send their rack only in Fetch requests (KIP-392) learn
	// it after their first assignment: a new rack rebalances the member's
	// group now, not at the next metadata refresh.
	popts.OnFetchRack = gw.FetchRack
	popts.OnRequest = func(key int16, local bool, d time.Duration) {
		m.ProxiedRequest(kmsg.NameForKey(key), local, d)
	}
	popts.OnUnreachable = func(error) {
		// Check the upstream now: if it is down, member sessions pause
		// before they can expire.
		select {
		case d.refresh <- struct{}{}:
		default:
		}
	}
	// The embedded brokers are in this process: reach them in memory, not
	// over loopback TCP (package embedded says what that saves).
	if d.cluster != nil && popts.DialUpstream == nil {
		popts.DialUpstream = d.cluster.Dial
	}
	popts.Listen = d.prebound.take
	popts.Logger = log
	if d.proxy, err = proxy.New(popts); err != nil {
		return d, err
	}
	if err := d.proxy.Start(ctx); err != nil {
		return d, err
	}

	if cfg.Server.AdminListen != "" {
		if d.adminLn, err = net.Listen("tcp", cfg.Server.AdminListen); err != nil {
			return d, &ConfigError{fmt.Errorf("%s: server.admin_listen: %w", cfg.Source, err)}
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go func() {
		defer close(d.done)
		d.watchMetadata(runCtx)
	}()
	if d.reloader != nil {
		d.reloadDone = make(chan struct{})
		go func() {
			defer close(d.reloadDone)
			d.reloader.Run(runCtx)
		}()
	}
	if d.manager != nil {
		// Published before the first join, so that the others route
		// clients here from the first layout on.
		d.publishBrokers(ctx, nil)
		d.clusterDone = make(chan error, 1)
		go func() { d.clusterDone <- d.manager.Run(runCtx) }()
	}
	d.offsetsDone = make(chan struct{})
	go func() {
		defer close(d.offsetsDone)
		d.offsets.run(runCtx, d.driver.Overviews)
	}()
	if d.adminLn != nil {
		src := &adminSource{d: d}
		if cfg.Server.AdminToken == "" && !admin.IsLoopback(cfg.Server.AdminListen) {
			log.Warn("the admin API listens beyond loopback without a token; set [server] admin_token", "admin_listen", cfg.Server.AdminListen)
		}
		h := admin.NewHandler(src, admin.Options{Token: cfg.Server.AdminToken, Pprof: cfg.Server.Pprof, Metrics: promhttp.HandlerFor(promReg, promhttp.HandlerOpts{}), Logger: log})
		go admin.Serve(runCtx, d.adminLn, h, log)
	}
	return d, nil
}

// Announce prints where to connect, with a command to try.
func (d *Daemon) Announce(w io.Writer) {
	addr := d.proxy.Addr()
	fmt.Fprintf(w, "wasmassign gateway listening on %s\n", addr)
	if d.cluster != nil {
		fmt.Fprintf(w, "embedded cluster brokers (direct, bypassing the gateway): %s\n", strings.Join(d.cluster.Addrs(), ","))
	}
	if d.adminLn != nil {
		fmt.Fprintf(w, "admin API and metrics on http://%s\n", d.adminLn.Addr())
	}
	if d.cluster != nil {
		topic := "demo"
		if t := d.cfg.Upstream.Embedded.Topics; len(t) > 0 {
			topic = t[0].Name
		}
		fmt.Fprintf(w, "try: kcat -b %s -G demo-group -X auto.offset.reset=earliest %s\n", addr, topic)
	}
}

// Wait returns when ctx ends (nil), or when the gateway can no longer
// serve: the cluster fenced or refused it, with the error that says why.
func (d *Daemon) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-d.clusterDone: // nil outside a cluster: never ready
		d.clusterDone = nil
		if err == nil {
			err = errors.New("gateway cluster: the membership ended")
		}
		return err
	}
}

// Close stops the parts: the coordinator, then the proxy (in-flight requests
// finish, bounded by ctx), the plugins and the embedded cluster. Reaching
// ctx's bound is the shutdown working as configured, not a failure: the
// proxy closes the connections still busy, and the rest stops after it.
func (d *Daemon) Close(ctx context.Context) error {
	var errs []error
	if d.clusterDone != nil {
		// Hand the groups over first, while the coordinator still
		// answers: the other gateways take them from the release at once.
		// Clients are sent elsewhere from now on (clusterView.Route).
		d.view.leaving.Store(true)
		d.manager.Leave()
		select {
		case err := <-d.clusterDone:
			if err != nil {
				errs = append(errs, err)
			}
		case <-ctx.Done():
			d.log.Warn("shutdown: the hand-over of the cluster's groups did not finish in time; the others take them after this gateway's lease")
		}
		d.clusterDone = nil
		if !d.cfg.Alone() {
			// A gateway alone has nobody to send its clients to.
			d.drainClients(ctx)
		}
	}
	if d.cancel != nil {
		d.cancel()
		<-d.done
		if d.reloadDone != nil {
			<-d.reloadDone
		}
		if d.offsetsDone != nil {
			<-d.offsetsDone
		}
	}
	// The coordinator goes first: a JoinGroup parked in it would otherwise
	// keep the proxy waiting for its answer. Its clients get their
	// connections closed and find the coordinator again after a restart.
	if d.driver != nil {
		d.driver.Close()
	}
	if d.proxy != nil {
		if err := d.proxy.Close(ctx); ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			d.log.Warn("shutdown: closed connections whose requests were still in flight", "shutdown_timeout", d.cfg.Server.ShutdownTimeout)
		} else if err != nil {
			errs = append(errs, err)
		}
		// The plugins and the cluster get a moment of their own.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
	}
	if d.client != nil {
		d.client.Close()
	}
	for _, cl := range d.forwarders {
		cl.Close()
	}
	if d.host != nil {
		errs = append(errs, d.host.Close(ctx))
	}
	if d.cluster != nil {
		d.cluster.Close()
	}
	d.prebound.closeRest()
	return errors.Join(errs...)
}

// assignorInUse reports whether a configured group names the assignor, as
// its assignor or fallback, or a group's latest assignment came from it:
// hot reload never takes such an assignor away.
func (d *Daemon) assignorInUse(name string) bool {
	for _, g := range d.cfg.Groups {
		if g.Assignor == name || g.Fallback == name {
			return true
		}
	}
	if !d.started.Load() {
		return false // start-up: no group has been assigned yet
	}
	return d.driver.AssignorInUse(name)
}

// servedProtocolsChanged hands the coordinator the protocols the registry
// serves after a reload changed it.
func (d *Daemon) servedProtocolsChanged() {
	if !d.started.Load() {
		return // start-up: Start passes the registry's set in the driver's config
	}
	if err := d.driver.SetServedProtocols(d.registry.ServedProtocols()); err != nil {
		d.log.Debug("served protocols not handed to the coordinator", "err", err)
	}
}

// rebalanceOnReload rebalances the groups configured with
// rebalance_on_reload whose latest assignment came from a reloaded assignor.
func (d *Daemon) rebalanceOnReload(assignors []string) {
	if !d.started.Load() {
		return
	}
	reloaded := make(map[string]bool, len(assignors))
	for _, a := range assignors {
		reloaded[a] = true
	}
	groups := d.driver.RebalanceGroups(func(group, assignor string) bool {
		g, ok := d.cfg.GroupFor(group)
		return ok && g.RebalanceOnReload && reloaded[assignor]
	}, "assignor plugin reloaded")
	if len(groups) > 0 {
		d.log.Info("rebalancing groups after a plugin reload", "groups", groups, "assignors", assignors)
	}
}

// registerEmbeddedConnections exports the connections the embedded brokers
// accepted, by transport: the gateway's, its proxy's and its own client's,
// should all be in memory, and a count under tcp beyond direct clients
// means one of them fell back to loopback.
func registerEmbeddedConnections(reg prometheus.Registerer, c *embedded.Cluster) {
	for _, transport := range []string{"memory", "tcp"} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace:   "wasmassign",
			Name:        "embedded_connections_total",
			Help:        "Connections the embedded brokers accepted, by transport: memory (the gateway's) or tcp (direct clients).",
			ConstLabels: prometheus.Labels{"transport": transport},
		}, func() float64 {
			memory, tcp := c.Accepted()
			if transport == "memory" {
				return float64(memory)
			}
			return float64(tcp)
		}))
	}
}

package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/internal/admin"
	"github.com/wasmassign/wasmassign/internal/config"
	"github.com/wasmassign/wasmassign/internal/driver"
	"github.com/wasmassign/wasmassign/internal/embedded"
	"github.com/wasmassign/wasmassign/internal/gateway"
	"github.com/wasmassign/wasmassign/internal/metrics"
	"github.com/wasmassign/wasmassign/internal/pluginreload"
	"github.com/wasmassign/wasmassign/internal/proxy"
	wasmruntime "github.com/wasmassign/wasmassign/runtime"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// serve runs the gateway daemon until ctx ends (SIGINT or SIGTERM).
func serve(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var file, cacheDir string
	fs.StringVar(&file, "config", "", "TOML configuration file (default: the built-in defaults: embedded cluster, every group managed)")
	fs.StringVar(&cacheDir, "cache-dir", defaultCacheDir(), "directory for compiled plugin code")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg := config.Default()
	if file != "" {
		var err error
		if cfg, err = config.Load(file); err != nil {
			return usageError{err}
		}
	}
	log := newLogger(cfg.Log, e.stderr)
	d, err := startDaemon(ctx, cfg, cacheDir, log)
	if err != nil {
		return err
	}
	d.announce(e.stdout)
	<-ctx.Done()
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout)
	defer cancel()
	return d.close(sctx)
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(c.Level)) // checked by config
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// daemon is a running gateway: everything serve starts, in start order.
type daemon struct {
	cfg      *config.Config
	log      *slog.Logger
	cluster  *embedded.Cluster
	host     *wasmruntime.Host
	registry *wasmruntime.Registry
	client   *kgo.Client
	driver   *driver.Driver
	proxy    *proxy.Proxy
	adminLn  net.Listener
	cancel   context.CancelFunc
	done     chan struct{}
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
}

// startDaemon starts every part; on failure it stops what it started.
func startDaemon(ctx context.Context, cfg *config.Config, cacheDir string, log *slog.Logger) (_ *daemon, err error) {
	d := &daemon{cfg: cfg, log: log, done: make(chan struct{}), refresh: make(chan struct{}, 1)}
	defer func() {
		if err != nil {
			d.close(context.Background())
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
		return d, usageError{err}
	}
	if d.client, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, popts.ClientOpts...)...); err != nil {
		return d, fmt.Errorf("upstream client: %w", err)
	}
	// Bind the listeners before the slow part of start-up (loading
	// plugins): a client that reconnects while the daemon restarts then
	// waits in the accept queue rather than being refused, and keeps its
	// session.
	d.prebound = prebind(ctx, cfg.Server, d.client, log)

	lim := wasmruntime.DefaultLimits().
		WithTimeout(cfg.Plugins.Timeout).
		WithMemoryLimitMB(uint32(cfg.Plugins.MemoryLimitMB))
	if d.host, err = wasmruntime.NewHost(ctx, wasmruntime.NewConfig().WithLimits(lim).WithLogger(log).WithCompilationCacheDir(cacheDir)); err != nil {
		return d, fmt.Errorf("plugin host: %w", err)
	}
	if d.registry, err = registry(ctx, d.host, "", nil); err != nil {
		return d, err
	}
	promReg := prometheus.NewRegistry()
	promReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(promReg, cfg.Server.MetricsGroupCap)
	d.metrics = m
	if d.cluster != nil {
		registerEmbeddedConnections(promReg, d.cluster)
	}
	if cfg.Plugins.Dir != "" {
		d.reloader = pluginreload.New(pluginreload.Options{
			Dir: cfg.Plugins.Dir, Host: d.host, Registry: d.registry,
			InUse: d.assignorInUse, Reloaded: d.rebalanceOnReload,
			Metrics: m, Logger: log,
		})
		if err := d.reloader.LoadAll(ctx); err != nil {
			return d, err
		}
	}
	if err := cfg.CheckAssignors(func(name string) bool { _, ok := d.registry.Lookup(name); return ok }); err != nil {
		return d, usageError{err}
	}

	plugins := pluginSet{d.registry}
	up := gateway.NewKgoUpstream(d.client, 0)
	var seed [8]byte
	rand.Read(seed[:])
	saved, err := loadState(cfg.Server.StateDir)
	if err != nil {
		return d, err
	}
	racks := gateway.NewFetchRacks()
	ccfg := coordinator.Config{Assignors: plugins, Racks: racks, EmptyGroupRetention: cfg.Server.EmptyGroupRetention, MetadataWait: cfg.Upstream.MetadataWait}
	for i := range cfg.Groups {
		g := &cfg.Groups[i]
		ccfg.Rules = append(ccfg.Rules, coordinator.GroupRule{Match: g.Matches, Config: groupConfig(g, cfg.Racks)})
	}
	if d.driver, err = driver.Start(driver.Config{
		Coordinator:   ccfg,
		Assigner:      plugins,
		Upstream:      up,
		PluginTimeout: cfg.Plugins.Timeout + time.Second,
		IDSeed:        binary.LittleEndian.Uint64(seed[:]),
		Restore:       saved,
		Persist:       stateSaver(cfg.Server.StateDir, log),
		Logger:        log,
		Metrics:       m,
		NeedMetadata: func([]string) {
			select {
			case d.refresh <- struct{}{}:
			default:
			}
		},
	}); err != nil {
		return d, err
	}
	gw := gateway.New(gateway.Options{
		Manages:     func(group string) bool { _, ok := cfg.GroupFor(group); return ok },
		Coordinator: d.driver,
		Upstream:    up,
		Logger:      log,
	})

	popts.Client = d.client
	popts.Interceptor = gw
	// Offer clients no version of a group API that the coordinator would
	// refuse for a managed group.
	popts.MaxVersions = coordinator.MaxVersion
	popts.OnFetchRack = func(c proxy.ConnInfo, clientID, rack string) {
		// Clients that send their rack only in Fetch requests (KIP-392)
		// learn it after their first assignment: a new rack rebalances the
		// member's group now, not at the next metadata refresh.
		if racks.Record(c, clientID, rack) {
			d.driver.RefreshRacks()
		}
	}
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
			return d, usageError{fmt.Errorf("%s: server.admin_listen: %w", cfg.Source, err)}
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
	if d.adminLn != nil {
		src := &adminSource{d: d}
		if cfg.Server.AdminToken == "" && !admin.IsLoopback(cfg.Server.AdminListen) {
			log.Warn("the admin API listens beyond loopback without a token; set [server] admin_token", "admin_listen", cfg.Server.AdminListen)
		}
		h := admin.NewHandler(src, admin.Options{Token: cfg.Server.AdminToken, Metrics: promhttp.HandlerFor(promReg, promhttp.HandlerOpts{}), Logger: log})
		go admin.Serve(runCtx, d.adminLn, h, log)
	}
	return d, nil
}

// announce prints where to connect, with a command to try.
func (d *daemon) announce(w io.Writer) {
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

// close stops the parts: the coordinator, then the proxy (in-flight requests
// finish, bounded by ctx), the plugins and the embedded cluster. Reaching
// ctx's bound is the shutdown working as configured, not a failure: the
// proxy closes the connections still busy, and the rest stops after it.
func (d *daemon) close(ctx context.Context) error {
	var errs []error
	if d.cancel != nil {
		d.cancel()
		<-d.done
		if d.reloadDone != nil {
			<-d.reloadDone
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
func (d *daemon) assignorInUse(name string) bool {
	for _, g := range d.cfg.Groups {
		if g.Assignor == name || g.Fallback == name {
			return true
		}
	}
	if d.driver == nil {
		return false // start-up: no group has been assigned yet
	}
	return d.driver.AssignorInUse(name)
}

// rebalanceOnReload rebalances the groups configured with
// rebalance_on_reload whose latest assignment came from a reloaded assignor.
func (d *daemon) rebalanceOnReload(assignors []string) {
	if d.driver == nil {
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

// watchMetadata keeps the coordinator's view of the subscribed topics
// current, polling at the configured interval.
func (d *daemon) watchMetadata(ctx context.Context) {
	t := time.NewTicker(d.cfg.Upstream.MetadataRefresh)
	defer t.Stop()
	// A metadata request that takes longer than this counts as the upstream
	// not answering; kgo would otherwise keep retrying for a long while.
	timeout := min(d.cfg.Upstream.MetadataRefresh, 5*time.Second)
	down, periodic := false, true
	for {
		topics := d.driver.SubscribedTopics()
		if len(topics) > 0 {
			fctx, cancel := context.WithTimeout(ctx, timeout)
			md, err := fetchMetadata(fctx, d.client, topics, d.cfg.Upstream.BrokerRacks)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				d.log.Warn("metadata refresh failed", "err", err)
				d.metrics.UpstreamError("metadata")
			} else {
				d.driver.SetMetadata(md, topics)
			}
			// Members cannot reach the gateway while the upstream is down;
			// their sessions wait for it to come back.
			down = err != nil
			d.driver.SetUpstreamReachable(!down)
		}
		if periodic && !down {
			// On the refresh interval only: a JoinGroup's nudge or the
			// outage retry must not send DescribeGroups for every group.
			d.checkSplitBrain(ctx)
		}
		var retry <-chan time.Time
		if down {
			retry = time.After(time.Second) // notice the return quickly
		}
		periodic = false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			periodic = true
		case <-retry:
		case <-d.refresh:
		}
	}
}

// checkSplitBrain asks the upstream about the groups the gateway manages.
// The upstream should never see their members: members it does see are
// clients bypassing the gateway, or a second gateway, and two coordinators
// then hand out the same partitions.
func (d *daemon) checkSplitBrain(ctx context.Context) {
	groups := d.driver.Groups()
	if len(groups) == 0 {
		return
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = groups
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(dctx, d.client)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Debug("split-brain check: DescribeGroups failed", "err", err)
		}
		return
	}
	for _, g := range resp.Groups {
		if g.ErrorCode == 0 && len(g.Members) > 0 {
			d.log.Error("split brain: the upstream also runs this managed group with members (clients bypassing the gateway, or a second gateway)",
				"group", g.Group, "upstream_state", g.State, "upstream_members", len(g.Members), "upstream_protocol", g.Protocol)
			d.metrics.SplitBrain(g.Group)
		}
	}
}

// fetchMetadata asks the upstream for topics and converts the answer,
// applying the operator's broker rack overrides.
func fetchMetadata(ctx context.Context, cl *kgo.Client, topics []string, racks map[int32]string) (*coordinator.Metadata, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false // the gateway only looks
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	md := &coordinator.Metadata{Topics: make(map[string]coordinator.TopicMetadata, len(resp.Topics))}
	for _, b := range resp.Brokers {
		rack := ""
		if b.Rack != nil {
			rack = *b.Rack
		}
		if r, ok := racks[b.NodeID]; ok {
			rack = r
		}
		md.Brokers = append(md.Brokers, coordinator.Broker{ID: b.NodeID, Rack: rack})
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue // unknown topics are simply absent
		}
		tm := coordinator.TopicMetadata{ID: t.TopicID, Partitions: make([]coordinator.PartitionMetadata, len(t.Partitions))}
		for _, p := range t.Partitions {
			if p.Partition < 0 || int(p.Partition) >= len(t.Partitions) {
				continue
			}
			tm.Partitions[p.Partition] = coordinator.PartitionMetadata{Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR}
		}
		md.Topics[*t.Topic] = tm
	}
	return md, nil
}

// groupConfig turns one [[groups]] rule into the coordinator's terms.
func groupConfig(g *config.Group, racks []config.RackRule) coordinator.GroupConfig {
	gc := coordinator.GroupConfig{
		Priority:              slices.Clone(g.Priority),
		Assignor:              g.Assignor,
		Fallback:              g.Fallback,
		PluginConfig:          g.Config,
		InitialRebalanceDelay: g.InitialRebalanceDelay,
		MinSessionTimeout:     g.MinSessionTimeout,
		MaxSessionTimeout:     g.MaxSessionTimeout,
		MaxSize:               g.MaxSize,
	}
	if gc.InitialRebalanceDelay == 0 {
		gc.InitialRebalanceDelay = -1 // zero in the file means none
	}
	for _, r := range racks {
		rule := coordinator.RackRule{Rack: r.Rack}
		if r.ClientID != nil {
			rule.ClientID = r.ClientID.String()
		} else {
			rule.CIDR = r.CIDR.String()
		}
		gc.RackRules = append(gc.RackRules, rule)
	}
	return gc
}

// pluginSet adapts the registry to the coordinator and its driver.
type pluginSet struct{ reg *wasmruntime.Registry }

func (p pluginSet) ForProtocol(protocol string) (string, bool) {
	a, ok := p.reg.ForProtocol(protocol)
	if !ok {
		return "", false
	}
	return a.Info.Name, true
}

func (p pluginSet) Assign(ctx context.Context, name string, req *abi.Request) (*abi.Response, error) {
	a, ok := p.reg.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("no loaded plugin provides assignor %q", name)
	}
	return a.Assign(ctx, req)
}

const stateFile = "groups.json"

// loadState reads the group state a previous run saved; none is no error.
func loadState(dir string) ([]coordinator.GroupState, error) {
	if dir == "" {
		return nil, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	var states []coordinator.GroupState
	if err := json.Unmarshal(b, &states); err != nil {
		return nil, fmt.Errorf("state: %s: %w", filepath.Join(dir, stateFile), err)
	}
	return states, nil
}

// stateSaver writes the group state atomically (temp file and rename), so a
// crash mid-write leaves the previous state.
func stateSaver(dir string, log *slog.Logger) func([]coordinator.GroupState) {
	if dir == "" {
		return nil
	}
	return func(states []coordinator.GroupState) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			log.Error("state: cannot create the state directory", "dir", dir, "err", err)
			return
		}
		b, err := json.Marshal(states)
		if err != nil {
			log.Error("state: encoding", "err", err)
			return
		}
		tmp, err := os.CreateTemp(dir, stateFile+".*")
		if err != nil {
			log.Error("state: writing", "err", err)
			return
		}
		_, werr := tmp.Write(b)
		serr := tmp.Sync()
		cerr := tmp.Close()
		if err := errors.Join(werr, serr, cerr); err != nil {
			os.Remove(tmp.Name())
			log.Error("state: writing", "err", err)
			return
		}
		if err := os.Rename(tmp.Name(), filepath.Join(dir, stateFile)); err != nil {
			log.Error("state: writing", "err", err)
		}
	}
}

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

// registerEmbeddedConnections exports the connections the embedded brokers
// accepted, by transport: the gateway's should all be in memory, and a
// count under tcp beyond the daemon's own client and direct clients means
// the proxy fell back to loopback.
func registerEmbeddedConnections(reg prometheus.Registerer, c *embedded.Cluster) {
	for _, transport := range []string{"memory", "tcp"} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace:   "wasmassign",
			Name:        "embedded_connections_total",
			Help:        "Connections the embedded brokers accepted, by transport: memory (the gateway's) or tcp (direct clients and the daemon's own).",
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

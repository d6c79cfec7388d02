// Package metrics defines every Prometheus metric the daemon exports, in one
// place, so that names, labels and help texts are consistent and documented
// together (README, "Metrics"). Callers report what happened through typed
// methods; nothing outside this package touches a collector.
//
// Per-group series are bounded: the first GroupLabelCap groups seen get their
// own label value, and later groups are aggregated under "_other", so a
// cluster with a million short-lived groups cannot exhaust the Prometheus
// server.
//
// The package depends only on the Prometheus client; it must not import the
// coordinator, proxy or runtime packages, which call it.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// OtherGroups is the group label value that aggregates groups beyond the
// cap.
const OtherGroups = "_other"

// DefaultGroupLabelCap is the number of groups that get their own label
// value when the configuration does not say.
const DefaultGroupLabelCap = 500

// Metrics holds the daemon's collectors. Its methods are safe for
// concurrent use.
type Metrics struct {
	rebalances         *prometheus.CounterVec
	rebalanceDuration  *prometheus.HistogramVec
	movedPartitions    *prometheus.HistogramVec
	withheldPartitions *prometheus.HistogramVec
	groupMembers       *prometheus.GaugeVec
	groupGeneration    *prometheus.GaugeVec
	unassigned         *prometheus.GaugeVec
	rackLocality       *prometheus.GaugeVec
	pluginCalls        *prometheus.HistogramVec
	pluginFailures     *prometheus.CounterVec
	fallbacks          *prometheus.CounterVec
	proxyRequests      *prometheus.CounterVec
	proxyLatency       *prometheus.HistogramVec
	proxied            sync.Map // proxiedKey -> *proxiedSeries
	upstreamErrors     *prometheus.CounterVec
	topicErrors        *prometheus.CounterVec
	assignTimeouts     prometheus.Counter
	splitBrain         *prometheus.CounterVec
	storms             *prometheus.CounterVec
	pluginReloads      *prometheus.CounterVec
	pluginsLoaded      prometheus.Gauge
	pluginOverloads    *prometheus.CounterVec
	pluginQueueWait    *prometheus.HistogramVec

	reg    prometheus.Registerer
	groups *groupLabels
}

// New creates the collectors and registers them with reg. groupCap bounds
// the number of distinct group label values (0 means
// DefaultGroupLabelCap).
func New(reg prometheus.Registerer, groupCap int) *Metrics {
	if groupCap <= 0 {
		groupCap = DefaultGroupLabelCap
	}
	durations := prometheus.ExponentialBuckets(0.0005, 2, 16) // 0.5 ms to ~16 s
	partitions := prometheus.ExponentialBuckets(1, 4, 11)     // 1 to ~1M
	m := &Metrics{
		rebalances: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmassign_rebalances_total",
			Help: "Completed rebalances of managed groups, by assignor that ran and rebalance protocol (eager or cooperative).",
		}, []string{"assignor", "rebalance_protocol"}),
		rebalanceDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wasmassign_rebalance_duration_seconds",
			Help:    "Time from the start of a rebalance to the group becoming Stable.",
			Buckets: durations,
		}, []string{"assignor", "rebalance_protocol"}),
		movedPartitions: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wasmassign_rebalance_moved_partitions",
			Help:    "Partitions whose owner changed in one rebalance.",
			Buckets: partitions,
		}, []string{"rebalance_protocol"}),
		withheldPartitions: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wasmassign_rebalance_withheld_partitions",
			Help:    "Partitions withheld for a cooperative handover in one rebalance.",
			Buckets: partitions,
		}, []string{"rebalance_protocol"}),
		groupMembers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wasmassign_group_members",
			Help: "Members of a managed group.",
		}, []string{"group"}),
		groupGeneration: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wasmassign_group_generation",
			Help: "Current generation of a managed group (not reported for groups aggregated under _other).",
		}, []string{"group"}),
		unassigned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wasmassign_group_unassigned_partitions",
			Help: "Subscribed partitions that no member of the group holds.",
		}, []string{"group"}),
		rackLocality: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wasmassign_group_rack_local_ratio",
			Help: "Share of assigned partitions with a replica in the member's rack, among those whose racks are known; estimates cross-rack fetch traffic.",
		}, []string{"group"}),
		pluginCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wasmassign_plugin_call_duration_seconds",
			Help:    "Duration of plugin assignment calls, including encoding, the sandboxed call, decoding and validation.",
			Buckets: durations,
		}, []string{"assignor"}),
		pluginFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmassign_plugin_failures_total",
			Help: "Failed plugin calls by assignor and reason (timeout, trap, oom, invalid, abi, assignor, ...).",
		}, []string{"assignor", "reason"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmassign_fallbacks_total",
			Help: "Rebalances that fell back from a failed assignor to another.",
		}, []string{"from", "to"}),
		proxyRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmassign_proxy_requests_total",
			Help: "Client requests handled by the gateway, by Kafka API and where they were answered (local or upstream).",
		}, []string{"api", "answered"}),
		proxyLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wasmassign_proxy_request_duration_seconds",
			Help:    "Time from reading a client request to writing its response, by Kafka API.",
			Buckets: durations,
		}, []string{"api"}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmassign_upstream_errors_total",
			Help: "Failures talking to the upstream cluster, by kind (dial, io, metadata, protocol).",
		}, []string{"kind"}),
		topicErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmassign_topic_metadata_errors_total",
			Help: "Metadata refreshes in which the upstream answered a subscribed topic with an error other than an unknown topic (an election, an authorization failure of the gateway's principal), by Kafka error; the topic's last known metadata stands.",
		}, []string{"error"}),
		assignTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wasmassign_assignment_timeouts_total",
			Help: "Rebalances in which no assignor answered within [plugins] assignment_timeout, so the coordinator's own range assignment was handed out.",
		}),
		splitBrain: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmassign_split_brain_total",
			Help: "Times a managed group was also seen with members on the upstream: clients bypassing the gateway, or a second gateway.",
		}, []string{"group"}),
		storms: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmassign_rebalance_storms_total",
			Help: "Times a group rebalanced more often than the storm threshold within the window, by likely cause.",
		}, []string{"group", "cause"}),
		pluginReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmassign_plugin_reloads_total",
			Help: "Plugin files loaded from the plugin directory, by result (ok or failed).",
		}, []string{"result"}),
		pluginsLoaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "wasmassign_plugins_loaded",
			Help: "Plugin modules in service, built-ins included.",
		}),
		pluginOverloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmassign_plugin_overloads_total",
			Help: "Assignor calls that waited past plugins.queue_timeout for a plugin instance and never ran; the assignor is asked again.",
		}, []string{"assignor"}),
		pluginQueueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wasmassign_plugin_queue_wait_seconds",
			Help:    "Time plugin calls waited for an instance of the plugin host's pool before running.",
			Buckets: durations,
		}, []string{"plugin"}),
		reg:    reg,
		groups: newGroupLabels(groupCap),
	}
	reg.MustRegister(m.pluginOverloads, m.pluginQueueWait, m.rebalances, m.rebalanceDuration, m.movedPartitions, m.withheldPartitions,
		m.groupMembers, m.groupGeneration, m.unassigned, m.rackLocality,
		m.pluginCalls, m.pluginFailures, m.fallbacks, m.proxyRequests, m.proxyLatency,
		m.upstreamErrors, m.topicErrors, m.assignTimeouts, m.splitBrain, m.storms, m.pluginReloads, m.pluginsLoaded)
	return m
}

// Rebalance describes one completed rebalance.
type Rebalance struct {
	Assignor string
	// Cooperative is true for a cooperative (KIP-429) rebalance.
	Cooperative bool
	Duration    time.Duration
	Moved       int
	Withheld    int
}

// RebalanceDone records a completed rebalance. The group's gauges are not
// its business: GroupChanged follows the group through every state, not
// only the ones a rebalance ends in.
func (m *Metrics) RebalanceDone(r Rebalance) {
	proto := "eager"
	if r.Cooperative {
		proto = "cooperative"
	}
	m.rebalances.WithLabelValues(r.Assignor, proto).Inc()
	m.rebalanceDuration.WithLabelValues(r.Assignor, proto).Observe(r.Duration.Seconds())
	m.movedPartitions.WithLabelValues(proto).Observe(float64(r.Moved))
	m.withheldPartitions.WithLabelValues(proto).Observe(float64(r.Withheld))
}

// Group is where one group stands, as its coordinator has it, for the
// per-group gauges.
type Group struct {
	Group      string
	Generation int32
	Members    int
	// Unassigned counts subscribed partitions no member holds.
	Unassigned int
	// RackLocal and RackKnown count the held partitions with a replica in
	// their member's rack, and those whose racks are known at all; with
	// none known the group has no rack-local ratio.
	RackLocal, RackKnown int
}

// GroupChanged sets the gauges of g's group to what g says. Callers report
// every change, so the gauges show the group as it is in every state: an
// Empty group with 0 members, at its generation.
func (m *Metrics) GroupChanged(g Group) {
	m.groups.update(g.Group, groupState{members: g.Members, generation: g.Generation, unassigned: g.Unassigned, rackLocal: g.RackLocal, rackKnown: g.RackKnown},
		m.setGroup)
}

// GroupRemoved drops a group's series, gauges and counters alike, when the
// group is deleted or expires: a group of that name created later starts
// afresh, and groups that come and go do not pile up series. A group
// aggregated under OtherGroups leaves the aggregate, which goes with the
// last of them.
func (m *Metrics) GroupRemoved(group string) {
	m.groups.remove(group, m.setGroup, func(label string) {
		m.dropGroup(label)
		m.splitBrain.DeleteLabelValues(label)
		m.storms.DeletePartialMatch(prometheus.Labels{"group": label})
	})
}

// setGroup writes one label's gauges. The aggregate has no generation (a
// sum of generations means nothing), and a label whose racks are unknown
// no rack-local ratio.
func (m *Metrics) setGroup(label string, s groupState) {
	m.groupMembers.WithLabelValues(label).Set(float64(s.members))
	if label != OtherGroups {
		m.groupGeneration.WithLabelValues(label).Set(float64(s.generation))
	}
	m.unassigned.WithLabelValues(label).Set(float64(s.unassigned))
	if s.rackKnown > 0 {
		m.rackLocality.WithLabelValues(label).Set(float64(s.rackLocal) / float64(s.rackKnown))
	} else {
		m.rackLocality.DeleteLabelValues(label)
	}
}

// dropGroup deletes one label's gauges.
func (m *Metrics) dropGroup(label string) {
	m.groupMembers.DeleteLabelValues(label)
	m.groupGeneration.DeleteLabelValues(label)
	m.unassigned.DeleteLabelValues(label)
	m.rackLocality.DeleteLabelValues(label)
}

// PluginCall records one plugin call; reason is "" for success, otherwise
// the runtime's failure reason label.
func (m *Metrics) PluginCall(assignor string, d time.Duration, reason string) {
	m.pluginCalls.WithLabelValues(assignor).Observe(d.Seconds())
	if reason != "" {
		m.pluginFailures.WithLabelValues(assignor, reason).Inc()
	}
}

// PluginOverload records an assignor call that never ran because the
// plugin host's queue held it past its bound.
func (m *Metrics) PluginOverload(assignor string) { m.pluginOverloads.WithLabelValues(assignor).Inc() }

// PluginQueueWait records how long one call of plugin waited for an
// instance.
func (m *Metrics) PluginQueueWait(plugin string, d time.Duration) {
	m.pluginQueueWait.WithLabelValues(plugin).Observe(d.Seconds())
}

// PluginPool is a snapshot of the plugin host's pool of instances.
type PluginPool struct {
	Size                         int
	Busy, Idle, Idling, Starting int
	Queued                       int
}

// WatchPluginPool exports the pool that read reports, read at every scrape:
// instances by state, the bound, and the calls queued.
func (m *Metrics) WatchPluginPool(read func() PluginPool) {
	states := prometheus.NewDesc("wasmassign_plugin_instances", "Plugin instances (worker processes, in process isolation) by state: busy in a call, idle and warm, idling in the guest's idle call, starting as a spare.", []string{"state"}, nil)
	size := prometheus.NewDesc("wasmassign_plugin_instances_max", "The most plugin instances the host runs at once (plugins.workers).", nil, nil)
	queued := prometheus.NewDesc("wasmassign_plugin_queued_calls", "Plugin calls waiting for an instance.", nil, nil)
	m.reg.MustRegister(collectorFunc{descs: []*prometheus.Desc{states, size, queued}, collect: func(ch chan<- prometheus.Metric) {
		p := read()
		for _, s := range []struct {
			state string
			n     int
		}{{"busy", p.Busy}, {"idle", p.Idle}, {"idling", p.Idling}, {"starting", p.Starting}} {
			ch <- prometheus.MustNewConstMetric(states, prometheus.GaugeValue, float64(s.n), s.state)
		}
		ch <- prometheus.MustNewConstMetric(size, prometheus.GaugeValue, float64(p.Size))
		ch <- prometheus.MustNewConstMetric(queued, prometheus.GaugeValue, float64(p.Queued))
	}})
}

// collectorFunc is a collector whose values are read at each scrape.
type collectorFunc struct {
	descs   []*prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// Fallback records that a rebalance fell back from one assignor to another.
func (m *Metrics) Fallback(from, to string) { m.fallbacks.WithLabelValues(from, to).Inc() }

// ProxiedRequest records one client request by API key name, whether it was
// answered locally, and its latency.
func (m *Metrics) ProxiedRequest(api string, local bool, d time.Duration) {
	answered := "upstream"
	if local {
		answered = "local"
	}
	k := proxiedKey{api, local}
	v, ok := m.proxied.Load(k)
	if !ok {
		v, _ = m.proxied.LoadOrStore(k, &proxiedSeries{
			requests: m.proxyRequests.WithLabelValues(api, answered),
			latency:  m.proxyLatency.WithLabelValues(api),
		})
	}
	ps := v.(*proxiedSeries)
	ps.requests.Inc()
	ps.latency.Observe(d.Seconds())
}

// proxiedKey and proxiedSeries keep ProxiedRequest's series once looked
// up: it runs for every client request, and a label lookup validates and
// hashes its values each time.
type proxiedKey struct {
	api   string
	local bool
}

type proxiedSeries struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// UpstreamError records a failure talking to the upstream.
func (m *Metrics) UpstreamError(kind string) { m.upstreamErrors.WithLabelValues(kind).Inc() }

// TopicMetadataError records a subscribed topic's metadata error (a Kafka
// error name) in one refresh.
func (m *Metrics) TopicMetadataError(kafkaError string) {
	m.topicErrors.WithLabelValues(kafkaError).Inc()
}

// AssignmentTimedOut records a rebalance whose assignors all outlasted the
// assignment timeout.
func (m *Metrics) AssignmentTimedOut() { m.assignTimeouts.Inc() }

// SplitBrain records that a managed group also has members upstream.
func (m *Metrics) SplitBrain(group string) {
	m.splitBrain.WithLabelValues(m.groups.label(group)).Inc()
}

// RebalanceStorm records a storm in group with its likely cause.
func (m *Metrics) RebalanceStorm(group, cause string) {
	m.storms.WithLabelValues(m.groups.label(group), cause).Inc()
}

// StormCounter returns the storm counter of a group and cause, for tests
// and for callers that want to read it back.
func (m *Metrics) StormCounter(cause, group string) prometheus.Counter {
	return m.storms.WithLabelValues(m.groups.label(group), cause)
}

// PluginReload records one load of a plugin file and the number of modules
// now in service.
func (m *Metrics) PluginReload(ok bool, loaded int) {
	result := "failed"
	if ok {
		result = "ok"
	}
	m.pluginReloads.WithLabelValues(result).Inc()
	m.pluginsLoaded.Set(float64(loaded))
}

// groupState is what the per-group gauges show for one group.
type groupState struct {
	members              int
	generation           int32
	unassigned           int
	rackLocal, rackKnown int
}

// groupLabels hands out group label values up to a cap and keeps the
// states of the groups aggregated under OtherGroups, so their sum can be
// shown.
type groupLabels struct {
	mu     sync.Mutex
	cap    int
	own    map[string]bool
	others map[string]groupState
}

func newGroupLabels(cap int) *groupLabels {
	return &groupLabels{cap: cap, own: make(map[string]bool), others: make(map[string]groupState)}
}

// label returns group's label value, giving it its own while there is room.
func (g *groupLabels) label(group string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.labelLocked(group)
}

func (g *groupLabels) labelLocked(group string) string {
	if g.own[group] {
		return group
	}
	if _, other := g.others[group]; !other && len(g.own) < g.cap {
		g.own[group] = true
		return group
	}
	return OtherGroups
}

// update stores s for group and calls set with the label and the state to
// show: the group's own, or the sum over the aggregated groups.
func (g *groupLabels) update(group string, s groupState, set func(string, groupState)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if l := g.labelLocked(group); l != OtherGroups {
		set(l, s)
		return
	}
	g.others[group] = s
	g.showOthersLocked(set)
}

// remove forgets group: drop deletes an own label's series, and the
// aggregate is shown again without the group.
func (g *groupLabels) remove(group string, set func(string, groupState), drop func(string)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.own[group] {
		delete(g.own, group)
		drop(group)
		return
	}
	if _, ok := g.others[group]; ok {
		delete(g.others, group)
		if len(g.others) == 0 {
			drop(OtherGroups)
			return
		}
		g.showOthersLocked(set)
	}
}

// showOthersLocked shows the sum over the aggregated groups.
func (g *groupLabels) showOthersLocked(set func(string, groupState)) {
	var sum groupState
	for _, s := range g.others {
		sum.members += s.members
		sum.unassigned += s.unassigned
		sum.rackLocal += s.rackLocal
		sum.rackKnown += s.rackKnown
	}
	set(OtherGroups, sum)
}

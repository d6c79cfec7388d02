package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ClusterMetrics are a gateway cluster member's collectors: how its shards
// come and go. They are registered by [Metrics.Cluster], only in a
// cluster.
type ClusterMetrics struct {
	taken     *prometheus.CounterVec
	failovers prometheus.Counter
	loadTime  prometheus.Histogram
	givenUp   *prometheus.CounterVec
	leases    prometheus.Counter
	fenced    prometheus.Counter
	skipped   *prometheus.CounterVec
}

// ClusterView is what a gateway holds of its cluster now, read at every
// scrape.
type ClusterView struct {
	// LoadingShards and ServingShards are the state topic's partitions
	// this gateway was given, by state; Groups the managed groups it
	// serves.
	LoadingShards, ServingShards, Groups int
}

// Cluster registers the cluster's collectors, with read giving the
// gauges' values at each scrape.
func (m *Metrics) Cluster(read func() ClusterView) *ClusterMetrics {
	c := &ClusterMetrics{
		taken: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmassign_cluster_shards_taken_total",
			Help: "Shards of the state topic this gateway began to serve, by how: handover (the last owner released it), failover (this gateway waited out the last owner's lease) or first (no gateway had claimed it).",
		}, []string{"how"}),
		failovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wasmassign_cluster_failovers_total",
			Help: "Shards this gateway took over from an owner that did not release them (died, paused or cut off), after waiting out its lease.",
		}),
		loadTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "wasmassign_cluster_shard_load_seconds",
			Help:    "Time from being given a shard to serving it: claiming it, reading it to the end, and waiting out the last owner's lease when it did not release it.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14), // 10 ms to ~80 s
		}),
		givenUp: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmassign_cluster_shards_given_up_total",
			Help: "Shards this gateway stopped serving, by reason: moved, leaving, lost, lease, fenced or stopping.",
		}, []string{"reason"}),
		leases: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wasmassign_cluster_lease_losses_total",
			Help: "Shards given up because this gateway's lease ran out before Kafka confirmed its membership (paused, or cut off from the upstream).",
		}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wasmassign_cluster_fenced_writes_total",
			Help: "Writes to the state topic refused because a later owner had claimed the shard.",
		}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wasmassign_cluster_state_records_skipped_total",
			Help: "State topic records left out when loading a shard, by reason (corrupt or unknown records, records of another shard, states a later claim fenced).",
		}, []string{"reason"}),
	}
	shards := prometheus.NewDesc("wasmassign_cluster_owned_shards", "Shards of the state topic this gateway holds, by state: loading or serving.", []string{"state"}, nil)
	groups := prometheus.NewDesc("wasmassign_cluster_owned_groups", "Managed groups this gateway serves.", nil, nil)
	m.reg.MustRegister(c.taken, c.failovers, c.loadTime, c.givenUp, c.leases, c.fenced, c.skipped,
		collectorFunc{descs: []*prometheus.Desc{shards, groups}, collect: func(ch chan<- prometheus.Metric) {
			v := read()
			ch <- prometheus.MustNewConstMetric(shards, prometheus.GaugeValue, float64(v.LoadingShards), "loading")
			ch <- prometheus.MustNewConstMetric(shards, prometheus.GaugeValue, float64(v.ServingShards), "serving")
			ch <- prometheus.MustNewConstMetric(groups, prometheus.GaugeValue, float64(v.Groups))
		}})
	return c
}

// ShardServing records a shard this gateway began to serve, took after it
// was given it, and how it came (cluster.Hook's OnShardServing).
func (c *ClusterMetrics) ShardServing(took time.Duration, how string) {
	if how == "failover" {
		c.failovers.Inc()
	}
	c.taken.WithLabelValues(how).Inc()
	c.loadTime.Observe(took.Seconds())
}

// ShardGivenUp records a shard this gateway stopped serving, and why.
func (c *ClusterMetrics) ShardGivenUp(reason string) {
	c.givenUp.WithLabelValues(reason).Inc()
	switch reason {
	case "lease":
		c.leases.Inc()
	case "fenced":
		c.fenced.Inc()
	}
}

// RecordsSkipped records n state records left out of a shard's load.
func (c *ClusterMetrics) RecordsSkipped(reason string, n int) {
	c.skipped.WithLabelValues(reason).Add(float64(n))
}

// Package embedded runs the in-process Kafka cluster that `wasmassign serve`
// fronts when no upstream is configured, so the gateway runs anywhere. It is
// franz-go's kfake, with topics created at start and their replicas placed by
// a fixed rule rather than kfake's random leaders, so that rack-aware
// assignments come out the same on every run.
//
// The placement rule is the one scenario files use (see package scenario):
// brokers are taken in node-id order b[0..n-1]; a running offset starts at 0
// and grows by each topic's partition count, in configuration order;
// partition p of a topic at offset o has the replicas b[(p+j+o) % n] for
// j < replication, and the first replica leads.
//
// The gateway talks to the cluster like any other upstream, by the Kafka
// protocol, except that [Cluster.Dial] connects to a broker in memory
// rather than over loopback TCP; clients can still reach the brokers'
// TCP listeners directly.
package embedded

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/config"
)

// Cluster is a running embedded cluster.
type Cluster struct {
	kc        *kfake.Cluster
	addrs     []string
	listeners *listeners
}

// Start starts a cluster with cfg.Brokers brokers on loopback ports and
// creates cfg.Topics, placed by the package's rule. Start returns once the
// topics exist.
func Start(ctx context.Context, cfg config.Embedded, logger *slog.Logger) (*Cluster, error) {
	ports := make([]int, cfg.Brokers)
	ls := &listeners{byAddr: make(map[string]*listener)}
	kc, err := kfake.NewCluster(
		kfake.Ports(ports...),
		kfake.ListenFn(ls.listen),
		kfake.WithLogger(kfakeLogger{logger}),
		kfake.ClusterID("wasmassign-embedded"),
	)
	if err != nil {
		return nil, fmt.Errorf("embedded cluster: %w", err)
	}
	c := &Cluster{kc: kc, addrs: kc.ListenAddrs(), listeners: ls}
	if err := c.createTopics(ctx, cfg.Topics); err != nil {
		kc.Close()
		return nil, err
	}
	return c, nil
}

// Addrs returns the brokers' listen addresses, in node-id order.
func (c *Cluster) Addrs() []string { return c.addrs }

// Kfake returns the underlying kfake cluster, for tests that need to drive
// it (move partitions, add brokers).
func (c *Cluster) Kfake() *kfake.Cluster { return c.kc }

// Close stops the cluster and its listeners.
func (c *Cluster) Close() { c.kc.Close() }

func (c *Cluster) createTopics(ctx context.Context, topics []config.TopicSpec) error {
	if len(topics) == 0 {
		return nil
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10_000
	for _, t := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = t.Name
		rt.NumPartitions = t.Partitions
		rt.ReplicationFactor = t.Replication
		req.Topics = append(req.Topics, rt)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...), c.InMemory())
	if err != nil {
		return fmt.Errorf("embedded cluster: %w", err)
	}
	defer cl.Close()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("embedded cluster: create topics: %w", err)
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 {
			msg := ""
			if rt.ErrorMessage != nil {
				msg = ": " + *rt.ErrorMessage
			}
			return fmt.Errorf("embedded cluster: create topic %s: error code %d%s", rt.Topic, rt.ErrorCode, msg)
		}
	}
	n := int32(len(c.addrs))
	offset := int32(0)
	for _, t := range topics {
		for p := range t.Partitions {
			leader := (p + offset) % n
			if err := c.kc.MoveTopicPartition(t.Name, p, leader); err != nil {
				return fmt.Errorf("embedded cluster: place %s-%d on node %d: %w", t.Name, p, leader, err)
			}
			followers := make([]int32, 0, t.Replication-1)
			for j := int32(1); j < int32(t.Replication); j++ {
				followers = append(followers, (p+j+offset)%n)
			}
			c.kc.SetFollowers(t.Name, p, followers)
		}
		offset += t.Partitions
	}
	return nil
}

// kfakeLogger adapts slog to kfake's logger. kfake's info and debug lines
// describe single requests; they go to slog's debug level, which costs
// nothing when disabled.
type kfakeLogger struct{ l *slog.Logger }

func (k kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	var l slog.Level
	switch level {
	case kfake.LogLevelError:
		l = slog.LevelError
	case kfake.LogLevelWarn:
		l = slog.LevelWarn
	default:
		l = slog.LevelDebug
	}
	ctx := context.Background()
	if k.l == nil || !k.l.Enabled(ctx, l) {
		return
	}
	k.l.Log(ctx, l, "embedded cluster: "+fmt.Sprintf(format, args...))
}

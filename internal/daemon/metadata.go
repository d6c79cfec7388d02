package daemon

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
)

// watchMetadata keeps the coordinator's view of the subscribed topics
// current, polling at the configured interval.
func (d *Daemon) watchMetadata(ctx context.Context) {
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
func (d *Daemon) checkSplitBrain(ctx context.Context) {
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

package daemon

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
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
	view := newTopicView()
	for {
		topics := d.driver.SubscribedTopics()
		if len(topics) > 0 {
			fctx, cancel := context.WithTimeout(ctx, timeout)
			md, failed, err := fetchMetadata(fctx, d.client, topics, d.cfg.Upstream.BrokerRacks)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				d.log.Warn("metadata refresh failed", "err", err)
				d.metrics.UpstreamError("metadata")
			} else {
				covered, newErrors := view.apply(md, failed, topics)
				for _, code := range failed {
					if code != kerr.UnknownTopicOrPartition.Code {
						d.metrics.TopicMetadataError(errorName(code))
					}
				}
				for t, code := range newErrors {
					d.log.Warn("metadata of a subscribed topic failed; its last known metadata stands", "topic", t, "err", kerr.ErrorForCode(code))
				}
				d.driver.SetMetadata(md, covered)
				if d.manager != nil {
					nodes := make([]int32, 0, len(md.Brokers))
					for _, b := range md.Brokers {
						nodes = append(nodes, b.ID)
					}
					d.publishBrokers(ctx, nodes) // a new upstream broker gets a listener the others learn of
				}
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
// applying the operator's broker rack overrides. Topics answered with an
// error are left out of the metadata; failed holds their error codes.
func fetchMetadata(ctx context.Context, cl *kgo.Client, topics []string, racks map[int32]string) (md *coordinator.Metadata, failed map[string]int16, err error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false // the gateway only looks
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, nil, err
	}
	md = &coordinator.Metadata{Topics: make(map[string]coordinator.TopicMetadata, len(resp.Topics))}
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
	failed = make(map[string]int16)
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		if t.ErrorCode != 0 {
			failed[*t.Topic] = t.ErrorCode
			continue
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
	return md, failed, nil
}

// topicView remembers each subscribed topic's last good metadata, so that
// only a confirmed absence (UNKNOWN_TOPIC_OR_PARTITION) reads as a
// deletion. Any other topic error (LEADER_NOT_AVAILABLE during an election
// or right after creation, an authorization failure of the gateway's own
// principal) would otherwise drop the topic from its groups' assignments
// and add it back at the next good answer: two rebalances for nothing.
type topicView struct {
	known map[string]coordinator.TopicMetadata
	// failing holds each topic's error in the latest refresh, so that a
	// failing topic is logged when its error changes, not every refresh.
	failing map[string]int16
}

func newTopicView() *topicView {
	return &topicView{known: make(map[string]coordinator.TopicMetadata), failing: make(map[string]int16)}
}

// apply completes md, the answer for asked, in place: a topic that failed
// keeps its last known metadata. It returns the topics the answer covers
// (present, confirmed absent, or failing with metadata known), and the
// topics whose error is new since the last refresh. A failing topic never
// known stays uncovered: the coordinator treats it as not looked up.
func (v *topicView) apply(md *coordinator.Metadata, failed map[string]int16, asked []string) (covered []string, newErrors map[string]int16) {
	newErrors = make(map[string]int16)
	for _, t := range asked {
		code, bad := failed[t]
		switch {
		case !bad:
			if tm, ok := md.Topics[t]; ok {
				v.known[t] = tm
			} else {
				delete(v.known, t) // not in the answer at all: absent
			}
			covered = append(covered, t)
		case code == kerr.UnknownTopicOrPartition.Code:
			delete(v.known, t)
			covered = append(covered, t)
		default:
			if tm, ok := v.known[t]; ok {
				md.Topics[t] = tm
				covered = append(covered, t)
			}
			if v.failing[t] != code {
				newErrors[t] = code
			}
		}
		if bad && code != kerr.UnknownTopicOrPartition.Code {
			v.failing[t] = code
		} else {
			delete(v.failing, t)
		}
	}
	// Forget topics no group subscribes to any more.
	askedSet := make(map[string]bool, len(asked))
	for _, t := range asked {
		askedSet[t] = true
	}
	for t := range v.known {
		if !askedSet[t] {
			delete(v.known, t)
		}
	}
	for t := range v.failing {
		if !askedSet[t] {
			delete(v.failing, t)
		}
	}
	return covered, newErrors
}

// errorName is a Kafka error code's name, for a metric label.
func errorName(code int16) string {
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke.Message
	}
	return strconv.Itoa(int(code))
}

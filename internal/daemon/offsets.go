package daemon

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/driver"
)

// offsetKeeper keeps a live managed group's committed offsets from
// expiring upstream. The gateway forwards every accepted commit with
// generation -1 and no member, so the upstream keeps the group as one
// without members and, under KIP-211, expires each offset
// offsets.retention.minutes after its commit. Kafka expires a live
// group's offsets never, and an Empty group's a retention after it became
// Empty. So the keeper commits again, unchanged, the offsets of a live group
// that nobody committed for a part of the retention, and once more when the
// group turns Empty, and then lets them go.
//
// It wraps the driver's Forwarder to learn, from the commits it forwards,
// what each partition's offset is and when it was last committed: it only
// ever re-commits the value the gateway itself last forwarded (or read
// upstream before the first), never one it guessed, and it leaves a group
// alone while one of its commits is in flight, so it cannot reorder a
// member's commit behind an older value.
type offsetKeeper struct {
	up        driver.Forwarder
	retention time.Duration
	now       func() time.Time
	log       *slog.Logger

	mu     sync.Mutex
	groups map[string]*keptGroup
}

// keptGroup is what the keeper holds of one group. It holds an offset for
// every partition each of its members commits, a thousand groups of a
// thousand partitions a million of them, so they are kept compact: a
// slice per topic indexed by partition, which the upstream's acceptance
// (or its OffsetFetch answer) bounds to the topic's partitions.
type keptGroup struct {
	topics   map[string][]keptOffset
	inFlight int       // commits of the group being forwarded
	last     time.Time // the group's latest commit, of anyone's
	seeded   bool      // read upstream once, for what was committed before
	live     bool      // at the latest pass, not Empty
}

type keptPartition struct {
	topic     string
	partition int32
}

// keptOffset is one partition's last committed offset; at is when it was
// committed, in Unix nanoseconds, and zero for a partition with none.
type keptOffset struct {
	offset      int64
	at          int64
	leaderEpoch int32
	metadata    *string
}

// set keeps o as the offset of topic's partition p.
func (g *keptGroup) set(topic string, p int32, o keptOffset) {
	if p < 0 {
		return
	}
	offs := g.topics[topic]
	if int(p) >= len(offs) {
		offs = slices.Grow(offs, int(p)+1-len(offs))[:p+1]
	}
	offs[p] = o
	g.topics[topic] = offs
}

// has says whether an offset is kept for topic's partition p.
func (g *keptGroup) has(topic string, p int32) bool {
	offs := g.topics[topic]
	return p >= 0 && int(p) < len(offs) && offs[p].at != 0
}

func newOffsetKeeper(up driver.Forwarder, retention time.Duration, log *slog.Logger) *offsetKeeper {
	return &offsetKeeper{up: up, retention: retention, now: time.Now, log: log, groups: make(map[string]*keptGroup)}
}

// interval is how often the keeper looks, and how old an offset may grow
// before it is committed again: a quarter of the retention leaves three
// chances before it would expire.
func (k *offsetKeeper) interval() time.Duration { return k.retention / 4 }

func (k *offsetKeeper) group(id string) *keptGroup {
	g := k.groups[id]
	if g == nil {
		g = &keptGroup{topics: make(map[string][]keptOffset)}
		k.groups[id] = g
	}
	return g
}

// Forward implements driver.Forwarder: it forwards req and notes the
// offsets of an accepted commit.
func (k *offsetKeeper) Forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	commit, ok := req.(*kmsg.OffsetCommitRequest)
	if !ok {
		return k.up.Forward(ctx, req)
	}
	k.mu.Lock()
	k.group(commit.Group).inFlight++
	k.mu.Unlock()
	resp, err := k.up.Forward(ctx, req)
	k.mu.Lock()
	defer k.mu.Unlock()
	g := k.group(commit.Group)
	g.inFlight--
	now := k.now()
	g.last = now
	if r, ok := resp.(*kmsg.OffsetCommitResponse); ok && err == nil {
		k.noteLocked(g, commit, r, now)
	}
	return resp, err
}

// noteLocked records the partitions of commit that resp accepted. Brokers
// answer a commit's partitions in the order they were asked, so the two
// are walked side by side, and only an answer in another order costs an
// index of it: this runs for every commit of every managed group.
func (k *offsetKeeper) noteLocked(g *keptGroup, commit *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, now time.Time) {
	keep := func(topic string, p *kmsg.OffsetCommitRequestTopicPartition) {
		g.set(topic, p.Partition, keptOffset{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: p.Metadata, at: now.UnixNano()})
	}
	if sameOrder(commit, resp) {
		for i, t := range commit.Topics {
			for j := range t.Partitions {
				if resp.Topics[i].Partitions[j].ErrorCode == 0 {
					keep(t.Topic, &t.Partitions[j])
				}
			}
		}
		return
	}
	accepted := make(map[keptPartition]bool)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 {
				accepted[keptPartition{t.Topic, p.Partition}] = true
			}
		}
	}
	for _, t := range commit.Topics {
		for j, p := range t.Partitions {
			if accepted[keptPartition{t.Topic, p.Partition}] {
				keep(t.Topic, &t.Partitions[j])
			}
		}
	}
}

// sameOrder says whether resp answers commit's topics and partitions in
// the order commit asked them.
func sameOrder(commit *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) bool {
	if len(commit.Topics) != len(resp.Topics) {
		return false
	}
	for i, t := range commit.Topics {
		rt := &resp.Topics[i]
		if rt.Topic != t.Topic || len(rt.Partitions) != len(t.Partitions) {
			return false
		}
		for j := range t.Partitions {
			if rt.Partitions[j].Partition != t.Partitions[j].Partition {
				return false
			}
		}
	}
	return true
}

// run keeps the offsets until ctx ends, looking every interval at the
// groups the driver holds.
func (k *offsetKeeper) run(ctx context.Context, groups func() []driver.Overview) {
	t := time.NewTicker(k.interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			k.pass(ctx, groups())
		}
	}
}

// pass commits again what a live group has not committed for an interval,
// and everything of a group that turned Empty since the last pass (its
// offsets then expire a retention from now, as Kafka's expire a retention
// after the group became Empty). Groups the driver no longer holds are
// forgotten.
func (k *offsetKeeper) pass(ctx context.Context, overviews []driver.Overview) {
	held := make(map[string]bool, len(overviews))
	for _, o := range overviews {
		held[o.Group] = true
		live := o.State != "Empty" && o.State != "Dead"
		k.mu.Lock()
		g := k.group(o.Group)
		emptied := g.live && !live
		g.live = live
		seed := live && !g.seeded
		k.mu.Unlock()
		if !live && !emptied {
			continue
		}
		if seed {
			k.seed(ctx, o.Group)
		}
		k.refresh(ctx, o.Group, emptied)
	}
	k.mu.Lock()
	for id := range k.groups {
		if !held[id] {
			delete(k.groups, id)
		}
	}
	k.mu.Unlock()
}

// seed reads a group's committed offsets upstream once, so that what was
// committed before this daemon started (or before the gateway took the
// group over from Kafka's coordinator) is kept too. An offset the gateway
// has forwarded since wins over what was read.
func (k *offsetKeeper) seed(ctx context.Context, group string) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(7) // one group; the upstream client keeps this version
	req.Group = group // no topics: all of them
	raw, err := k.up.Forward(ctx, req)
	if err != nil {
		k.log.Debug("offset keeper: reading a group's offsets failed; trying again at the next pass", "group", group, "err", err)
		return
	}
	resp, ok := raw.(*kmsg.OffsetFetchResponse)
	if !ok || resp.ErrorCode != 0 {
		return
	}
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	g := k.group(group)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if !g.has(t.Topic, p.Partition) && p.ErrorCode == 0 && p.Offset >= 0 {
				g.set(t.Topic, p.Partition, keptOffset{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: p.Metadata, at: now.UnixNano()})
			}
		}
	}
	g.seeded = true
}

// refresh commits again the group's offsets not committed for an interval
// (all of them with everything set), unless a commit of the group is in
// flight or was made a moment ago: then the next pass does it.
func (k *offsetKeeper) refresh(ctx context.Context, group string, everything bool) {
	now := k.now()
	k.mu.Lock()
	g := k.group(group)
	if g.inFlight > 0 || now.Sub(g.last) < time.Second {
		k.mu.Unlock()
		return
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.SetVersion(7) // topics by name; the upstream client keeps this version
	commit.Group, commit.Generation = group, -1
	stale := now.Add(-k.interval()).UnixNano()
	for topic, offs := range g.topics {
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic = topic
		for i, o := range offs {
			if o.at == 0 || !everything && o.at > stale {
				continue
			}
			p := kmsg.NewOffsetCommitRequestTopicPartition()
			p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = int32(i), o.offset, o.leaderEpoch, o.metadata
			t.Partitions = append(t.Partitions, p)
		}
		if len(t.Partitions) > 0 {
			commit.Topics = append(commit.Topics, t)
		}
	}
	k.mu.Unlock()
	if len(commit.Topics) == 0 {
		return
	}
	resp, err := k.Forward(ctx, commit)
	if err != nil {
		k.log.Warn("offset keeper: committing a live group's offsets again failed; they may expire upstream", "group", group, "err", err)
		return
	}
	if r, ok := resp.(*kmsg.OffsetCommitResponse); ok {
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					k.log.Warn("offset keeper: the upstream refused an offset committed again", "group", group, "topic", t.Topic, "partition", p.Partition, "err", kerr.ErrorForCode(p.ErrorCode))
				}
			}
		}
	}
}

package daemon

import (
	"context"
	"fmt"
	"log/slog"
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
// Empty. So every quarter of the retention the keeper reads a live group's
// offsets upstream and commits them again, unchanged, and does so once more
// when the group turns Empty, and then lets them go.
//
// It holds nothing per partition: the upstream has the offsets, and a
// thousand groups of a thousand partitions would otherwise be a million
// copies of them in the gateway. What makes re-committing what was read
// safe is a gate per group: while the keeper reads and commits a group's
// offsets, the members' commits of that group wait (the gate prefers the
// keeper over new commits, so a busy group cannot starve it), and the
// keeper starts only once the commits already on their way are answered.
// So it never puts an older offset behind a newer one.
type offsetKeeper struct {
	up        driver.Forwarder
	retention time.Duration
	now       func() time.Time
	log       *slog.Logger

	mu     sync.Mutex
	groups map[string]*keptGroup
}

// keptGroup is what the keeper holds of one group.
type keptGroup struct {
	// gate is held shared by every commit of the group on its way
	// upstream, and alone by the keeper while it reads and re-commits.
	gate     sync.RWMutex
	inFlight int  // commits of the group being forwarded; guarded by the keeper's mu
	live     bool // at the latest pass, not Empty; guarded by the keeper's mu
}

func newOffsetKeeper(up driver.Forwarder, retention time.Duration, log *slog.Logger) *offsetKeeper {
	return &offsetKeeper{up: up, retention: retention, now: time.Now, log: log, groups: make(map[string]*keptGroup)}
}

// interval is how often the keeper commits a live group's offsets again: a
// quarter of the retention leaves three chances before one would expire.
func (k *offsetKeeper) interval() time.Duration { return k.retention / 4 }

// refreshTimeout bounds one group's read and re-commit, and so how long the
// group's own commits can wait behind it.
const refreshTimeout = 10 * time.Second

func (k *offsetKeeper) group(id string) *keptGroup {
	g := k.groups[id]
	if g == nil {
		g = &keptGroup{}
		k.groups[id] = g
	}
	return g
}

// Forward implements driver.Forwarder: it forwards req, a commit through
// its group's gate.
func (k *offsetKeeper) Forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	commit, ok := req.(*kmsg.OffsetCommitRequest)
	if !ok {
		return k.up.Forward(ctx, req)
	}
	k.mu.Lock()
	g := k.group(commit.Group)
	g.inFlight++
	k.mu.Unlock()
	g.gate.RLock()
	resp, err := k.up.Forward(ctx, req)
	g.gate.RUnlock()
	k.mu.Lock()
	g.inFlight--
	k.mu.Unlock()
	return resp, err
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

// pass commits again the offsets of every live group, and of every group
// that turned Empty since the last pass (its offsets then expire a
// retention from now, as Kafka's expire a retention after the group became
// Empty). Groups the driver no longer holds, with no commit on its way, are
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
		k.mu.Unlock()
		if live || emptied {
			k.refresh(ctx, o.Group, g)
		}
	}
	k.mu.Lock()
	for id, g := range k.groups {
		if !held[id] && g.inFlight == 0 {
			delete(k.groups, id)
		}
	}
	k.mu.Unlock()
}

// refresh reads the group's committed offsets upstream and commits them
// again, unchanged, with the group's own commits held at the gate.
func (k *offsetKeeper) refresh(ctx context.Context, group string, g *keptGroup) {
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	g.gate.Lock()
	defer g.gate.Unlock()

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.SetVersion(7) // one group; the upstream client keeps this version
	fetch.Group = group // no topics: all of them
	// An offset still pending in a transaction (a cluster's commits, or a
	// client's TxnOffsetCommit) must not be read as the one before it and
	// committed again over it: those partitions are answered
	// UNSTABLE_OFFSET_COMMIT (KIP-447) and left out.
	fetch.RequireStable = true
	raw, err := k.up.Forward(ctx, fetch)
	fetched, ok := raw.(*kmsg.OffsetFetchResponse)
	switch {
	case err != nil:
	case !ok:
		err = fmt.Errorf("the upstream answered OffsetFetch with %T", raw)
	case fetched.ErrorCode != 0:
		err = kerr.ErrorForCode(fetched.ErrorCode)
	}
	if err != nil {
		k.log.Warn("offset keeper: reading a group's offsets failed; trying again at the next pass", "group", group, "err", err)
		return
	}
	commit := recommitOf(group, fetched)
	if len(commit.Topics) == 0 {
		return
	}
	resp, err := k.up.Forward(ctx, commit)
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

// recommitOf is the commit, as a group without members, of every offset
// fetched names, with its leader epoch and metadata.
func recommitOf(group string, fetched *kmsg.OffsetFetchResponse) *kmsg.OffsetCommitRequest {
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.SetVersion(7) // topics by name; the upstream client keeps this version
	commit.Group, commit.Generation = group, -1
	for _, ft := range fetched.Topics {
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic = ft.Topic
		for _, fp := range ft.Partitions {
			if fp.ErrorCode != 0 || fp.Offset < 0 {
				continue
			}
			p := kmsg.NewOffsetCommitRequestTopicPartition()
			p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = fp.Partition, fp.Offset, fp.LeaderEpoch, fp.Metadata
			t.Partitions = append(t.Partitions, p)
		}
		if len(t.Partitions) > 0 {
			commit.Topics = append(commit.Topics, t)
		}
	}
	return commit
}

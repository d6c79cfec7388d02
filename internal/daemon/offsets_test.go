package daemon

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/internal/driver"
)

// fakeUpstream accepts every commit, records what it was sent, and answers
// OffsetFetch with upstream's offsets.
type fakeUpstream struct {
	commits  []*kmsg.OffsetCommitRequest
	upstream map[int32]int64 // partition of "t" to committed offset
}

func (f *fakeUpstream) Forward(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		f.commits = append(f.commits, r)
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	case *kmsg.OffsetFetchRequest:
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = "t"
		for p, o := range f.upstream {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset = p, o
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
		return resp, nil
	}
	return nil, nil
}

func commitOf(group string, offsets map[int32]int64) *kmsg.OffsetCommitRequest {
	c := kmsg.NewPtrOffsetCommitRequest()
	c.Group, c.Generation = group, -1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = "t"
	for p, o := range offsets {
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset = p, o
		t.Partitions = append(t.Partitions, cp)
	}
	c.Topics = append(c.Topics, t)
	return c
}

// committed is what the commits after from say, partition to offset.
func committed(f *fakeUpstream, from int) map[int32]int64 {
	out := map[int32]int64{}
	for _, c := range f.commits[from:] {
		if c.Generation != -1 || c.MemberID != "" {
			panic("a kept offset is committed as a member")
		}
		for _, t := range c.Topics {
			for _, p := range t.Partitions {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out
}

func overview(group, state string) []driver.Overview {
	return []driver.Overview{{Summary: coordinator.Summary{Group: group, State: state}}}
}

// TestOffsetKeeper_KeepsALiveGroupsOffsetsAndLetsAnEmptyOnesGo follows one
// group: the offsets a live group's members stopped committing are
// committed again, unchanged and the newest of them, before a quarter of
// the retention passes; what was committed before the daemon started is
// read upstream and kept too; a group that turns Empty has everything
// committed once more, then nothing.
func TestOffsetKeeper_KeepsALiveGroupsOffsetsAndLetsAnEmptyOnesGo(t *testing.T) {
	ctx := context.Background()
	up := &fakeUpstream{upstream: map[int32]int64{0: 3, 2: 11}}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	k := newOffsetKeeper(up, 4*time.Hour, slog.New(slog.DiscardHandler))
	k.now = func() time.Time { return now }

	// A member commits partition 0 twice; the second is the one to keep.
	k.Forward(ctx, commitOf("g", map[int32]int64{0: 5, 1: 8}))
	now = now.Add(time.Minute)
	k.Forward(ctx, commitOf("g", map[int32]int64{0: 7}))
	n := len(up.commits)
	now = now.Add(time.Minute)
	k.pass(ctx, overview("g", "Stable"))
	if got := committed(up, n); len(got) != 0 {
		t.Fatalf("recent offsets committed again: %v", got)
	}
	now = now.Add(k.interval())
	n = len(up.commits)
	k.pass(ctx, overview("g", "Stable"))
	want := map[int32]int64{0: 7, 1: 8, 2: 11} // 2 was read upstream; 0 as upstream had it is older
	if got := committed(up, n); len(got) != len(want) || got[0] != 7 || got[1] != 8 || got[2] != 11 {
		t.Fatalf("after an interval: committed again %v, want %v", got, want)
	}

	// The group turns Empty: everything once more, then nothing.
	now = now.Add(time.Minute)
	n = len(up.commits)
	k.pass(ctx, overview("g", "Empty"))
	if got := committed(up, n); len(got) != 3 {
		t.Fatalf("a group that just turned Empty: committed again %v, want all three once", got)
	}
	for range 3 {
		now = now.Add(k.interval())
		n = len(up.commits)
		k.pass(ctx, overview("g", "Empty"))
		if got := committed(up, n); len(got) != 0 {
			t.Fatalf("an Empty group's offsets are still kept: %v", got)
		}
	}
	k.pass(ctx, nil)
	if len(k.groups) != 0 {
		t.Errorf("a group the driver no longer holds is remembered")
	}
}

// TestOffsetKeeper_LeavesAGroupAloneWhileItCommits: with a member's commit
// in flight, the keeper commits nothing for the group, so it can never put
// an older offset behind a newer one.
func TestOffsetKeeper_LeavesAGroupAloneWhileItCommits(t *testing.T) {
	ctx := context.Background()
	up := &fakeUpstream{}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	k := newOffsetKeeper(up, 4*time.Hour, slog.New(slog.DiscardHandler))
	k.now = func() time.Time { return now }
	k.Forward(ctx, commitOf("g", map[int32]int64{0: 5}))
	k.pass(ctx, overview("g", "Stable")) // seeds
	now = now.Add(k.interval())
	k.mu.Lock()
	k.groups["g"].inFlight++ // a member's commit on its way
	k.mu.Unlock()
	n := len(up.commits)
	k.pass(ctx, overview("g", "Stable"))
	if got := committed(up, n); len(got) != 0 {
		t.Fatalf("committed %v while a member's commit was in flight", got)
	}
}

// TestOffsetKeeper_NotesWhatTheBrokerAccepted holds the keeper to the
// partitions an answer accepted, whether the broker answers in the order
// it was asked (the walk side by side) or in another (the index).
func TestOffsetKeeper_NotesWhatTheBrokerAccepted(t *testing.T) {
	commit := kmsg.NewPtrOffsetCommitRequest()
	for _, name := range []string{"a", "b"} {
		ct := kmsg.NewOffsetCommitRequestTopic()
		ct.Topic = name
		for p := range int32(3) {
			cp := kmsg.NewOffsetCommitRequestTopicPartition()
			cp.Partition, cp.Offset = p, int64(100+p)
			ct.Partitions = append(ct.Partitions, cp)
		}
		commit.Topics = append(commit.Topics, ct)
	}
	answer := func(reversed bool, refused keptPartition) *kmsg.OffsetCommitResponse {
		resp := commit.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, ct := range commit.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = ct.Topic
			for _, cp := range ct.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition = cp.Partition
				if (keptPartition{ct.Topic, cp.Partition}) == refused {
					rp.ErrorCode = 22 // ILLEGAL_GENERATION
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		if reversed {
			slices.Reverse(resp.Topics)
			for i := range resp.Topics {
				slices.Reverse(resp.Topics[i].Partitions)
			}
		}
		return resp
	}
	refused := keptPartition{"b", 1}
	for _, reversed := range []bool{false, true} {
		k := &offsetKeeper{}
		g := &keptGroup{topics: map[string][]keptOffset{}}
		k.noteLocked(g, commit, answer(reversed, refused), time.Now())
		if n := g.kept(); n != 5 {
			t.Errorf("reversed %v: kept %d partitions, want the 5 accepted", reversed, n)
		}
		if g.has(refused.topic, refused.partition) {
			t.Errorf("reversed %v: kept the refused partition %v", reversed, refused)
		}
		if o := g.topics["a"][2]; o.offset != 102 {
			t.Errorf("reversed %v: a/2 kept at %d, want 102", reversed, o.offset)
		}
	}
}

// kept counts the partitions with an offset kept.
func (g *keptGroup) kept() int {
	n := 0
	for _, offs := range g.topics {
		for _, o := range offs {
			if o.at != 0 {
				n++
			}
		}
	}
	return n
}

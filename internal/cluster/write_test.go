package cluster

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestOpenShard_TheNextOwnersClaimFencesThePreviousOwner: A claims a shard
// and writes a state; B claims it; A's next write fails as fenced and is
// never read; B's read up to its claim shows A's first state, and B's
// release makes the shard clean.
func TestOpenShard_TheNextOwnersClaimFencesThePreviousOwner(t *testing.T) {
	ctx, opts := kfakeStateTopic(t)
	const topic = testTopic
	a, b := Writer{ID: "gw-a", Incarnation: 1}, Writer{ID: "gw-b", Incarnation: 1}
	wa, err := OpenShard(ctx, opts, "t", topic, 0, a)
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Close()
	if err := wa.Write(ctx, []Record{{Kind: KindState, Group: "g2", State: stateOf("g2", 1)}}); err != nil {
		t.Fatal(err)
	}
	wb, err := OpenShard(ctx, opts, "t", topic, 0, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := wa.Write(ctx, []Record{{Kind: KindState, Group: "g2", State: stateOf("g2", 7)}}); !errors.Is(err, ErrFencedWrite) {
		t.Fatalf("the replaced owner's write: %v, want ErrFencedWrite", err)
	}
	k, v, _ := Encode(Record{Kind: KindClaim, Writer: b})
	recs, err := ReadShard(ctx, opts, topic, 0, func(r RawRecord) bool { return bytes.Equal(r.Key, k) && bytes.Equal(r.Value, v) })
	if err != nil {
		t.Fatal(err)
	}
	sh, err := LoadShard(0, 2, recs)
	if err != nil || sh.States["g2"].Generation != 1 || sh.Owner != b || sh.Clean {
		t.Fatalf("B loaded %+v (%v): want A's first state under B's claim", sh, err)
	}
	if err := wb.Write(ctx, []Record{{Kind: KindState, Group: "g2", State: stateOf("g2", 2)}}); err != nil {
		t.Fatal(err)
	}
	if err := wb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rk, rv, _ := Encode(Record{Kind: KindRelease, Writer: b})
	recs, err = ReadShard(ctx, opts, topic, 0, func(r RawRecord) bool { return bytes.Equal(r.Key, rk) && bytes.Equal(r.Value, rv) })
	if err != nil {
		t.Fatal(err)
	}
	if sh, err = LoadShard(0, 2, recs); err != nil || sh.States["g2"].Generation != 2 || !sh.Clean {
		t.Fatalf("after B's release: %+v (%v)", sh, err)
	}
}

// TestShardWriter_OffsetsCommitInTheShardsTransactionsAndAFencedOwnersNever:
// an owner's commits land, alone in a transaction or with states; once a
// later owner has claimed the shard, the replaced owner's commit is
// refused by the upstream and the group's offset stays where it was, as a
// commit still in flight at a takeover must.
func TestShardWriter_OffsetsCommitInTheShardsTransactionsAndAFencedOwnersNever(t *testing.T) {
	ctx, opts := kfakeStateTopic(t)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	committed := func() int64 { t.Helper(); return committedOffset(ctx, t, cl, "g2", 1) }
	commit := func(w *ShardWriter, offset int64, recs []Record) error {
		t.Helper()
		resps, err := w.WriteWithOffsets(ctx, recs, []*kmsg.OffsetCommitRequest{offsetCommit(testTopic, "g2", 1, offset)})
		if err != nil {
			return err
		}
		if len(resps) != 1 || resps[0].GetVersion() != 8 || len(resps[0].Topics) != 1 || len(resps[0].Topics[0].Partitions) != 1 {
			t.Fatalf("commit of %d answered %+v", offset, resps)
		}
		if code := resps[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("commit of %d: %v", offset, kerr.ErrorForCode(code))
		}
		return nil
	}
	a, b := Writer{ID: "gw-a", Incarnation: 1}, Writer{ID: "gw-b", Incarnation: 1}
	wa, err := OpenShard(ctx, opts, "t", testTopic, 0, a)
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Close()
	if err := commit(wa, 5, nil); err != nil {
		t.Fatal(err)
	}
	if got := committed(); got != 5 {
		t.Fatalf("after a commit alone in its transaction: offset %d, want 5", got)
	}
	if err := commit(wa, 7, []Record{{Kind: KindState, Group: "g2", State: stateOf("g2", 1)}}); err != nil {
		t.Fatal(err)
	}
	if got := committed(); got != 7 {
		t.Fatalf("after a commit with a state: offset %d, want 7", got)
	}
	wb, err := OpenShard(ctx, opts, "t", testTopic, 0, b)
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Close()
	if err := commit(wa, 99, nil); !errors.Is(err, ErrFencedWrite) {
		t.Fatalf("the replaced owner's commit alone: %v, want ErrFencedWrite", err)
	}
	if err := commit(wa, 98, []Record{{Kind: KindState, Group: "g2", State: stateOf("g2", 9)}}); !errors.Is(err, ErrFencedWrite) {
		t.Fatalf("the replaced owner's commit with a state: %v, want ErrFencedWrite", err)
	}
	if got := committed(); got != 7 {
		t.Fatalf("after the replaced owner's commits: offset %d, want 7", got)
	}
	if err := commit(wb, 8, nil); err != nil {
		t.Fatal(err)
	}
	if got := committed(); got != 8 {
		t.Fatalf("after the new owner's commit: offset %d, want 8", got)
	}
}

// TestShardWriter_AGroupsCommitsInOneBatchLandInTheirOrder: commits of
// one partition in one batch land in the order they came (the last one
// stays), while another group's commit goes beside them.
func TestShardWriter_AGroupsCommitsInOneBatchLandInTheirOrder(t *testing.T) {
	ctx, opts := kfakeStateTopic(t)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	w, err := OpenShard(ctx, opts, "t", testTopic, 0, Writer{ID: "gw-a", Incarnation: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var batch []*kmsg.OffsetCommitRequest
	for o := int64(1); o <= 20; o++ {
		batch = append(batch, offsetCommit(testTopic, "g2", 0, o), offsetCommit(testTopic, "g4", 0, 100+o))
	}
	resps, err := w.WriteWithOffsets(ctx, nil, batch)
	if err != nil || len(resps) != len(batch) {
		t.Fatalf("the batch: %d answers, %v", len(resps), err)
	}
	for group, want := range map[string]int64{"g2": 20, "g4": 120} {
		if got := committedOffset(ctx, t, cl, group, 0); got != want {
			t.Errorf("%s's offset after the batch: %d, want its last commit's %d", group, got, want)
		}
	}
}

// offsetCommit is a v8 commit of offset for partition of topic, as a
// group without members (generation -1) commits it.
func offsetCommit(topic, group string, partition int32, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.SetVersion(8)
	req.Group, req.Generation = group, -1
	req.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: partition, Offset: offset, LeaderEpoch: -1}}}}
	return req
}

// committedOffset is group's stable committed offset of partition of the
// test topic, -1 for none.
func committedOffset(ctx context.Context, t *testing.T, cl *kgo.Client, group string, partition int32) int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.SetVersion(7)
	req.Group, req.RequireStable = group, true
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("OffsetFetch of %s: %v, %+v", group, err, resp)
	}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if rt.Topic == testTopic && p.Partition == partition {
				return p.Offset
			}
		}
	}
	return -1
}

// TestShardWriter_AFailedCommitOnlyTransactionIsNotLeftOpen: the end of
// a transaction that only committed offsets fails as its deadline passes
// (the lease ran out mid-write). The writer must abort it all the same:
// left open, the next batch would join it and commit the offsets its
// member was told had failed.
func TestShardWriter_AFailedCommitOnlyTransactionIsNotLeftOpen(t *testing.T) {
	ctx, cancelAll := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelAll()
	c, cl := kfakeClient(t)
	if _, err := EnsureStateTopic(ctx, cl, testTopic, 2); err != nil {
		t.Fatal(err)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	w, err := OpenShard(ctx, opts, "t", testTopic, 0, Writer{ID: "gw-a", Incarnation: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	wctx, expire := context.WithCancel(ctx)
	c.ControlKey(int16(kmsg.EndTxn), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if !kreq.(*kmsg.EndTxnRequest).Commit {
			return nil, nil, false
		}
		expire() // the lease runs out as the commit is on its way
		return nil, errors.New("dropped"), true
	})
	if _, err := w.WriteWithOffsets(wctx, nil, []*kmsg.OffsetCommitRequest{offsetCommit(testTopic, "g2", 0, 1)}); err == nil {
		t.Fatal("a batch whose EndTxn failed past its deadline succeeded")
	}
	if _, err := w.WriteWithOffsets(ctx, nil, []*kmsg.OffsetCommitRequest{offsetCommit(testTopic, "g2", 1, 5)}); err != nil {
		t.Fatal(err)
	}
	if got := committedOffset(ctx, t, cl, "g2", 1); got != 5 {
		t.Fatalf("the next batch's offset: %d, want 5", got)
	}
	if got := committedOffset(ctx, t, cl, "g2", 0); got != -1 {
		t.Fatalf("the failed batch's offset landed: %d, want none (-1)", got)
	}
}

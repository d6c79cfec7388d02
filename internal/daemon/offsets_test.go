package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/internal/cluster"
	"github.com/wasmassign/wasmassign/internal/driver"
	"github.com/wasmassign/wasmassign/internal/upstream"
)

// storedOffset is what fakeUpstream holds of one partition of topic "t".
type storedOffset struct {
	offset   int64
	epoch    int32
	metadata string
}

// fakeUpstream keeps the offsets of topic "t" the way a broker does:
// every accepted commit overwrites, OffsetFetch reads. before and after,
// when set, run ahead of every request and once it is carried out but not
// yet answered, outside the lock, so a test can hold one there.
type fakeUpstream struct {
	before, after func(req kmsg.Request)

	mu       sync.Mutex
	seq      int       // counts the requests' starts and ends
	spans    []reqSpan // the requests answered, in order
	stored   map[int32]storedOffset
	commits  []*kmsg.OffsetCommitRequest
	fetchErr error // answers OffsetFetch with it when set
	fetchTop int16 // answers OffsetFetch with this group error when set
}

// reqSpan is when a request started and ended, on fakeUpstream's count.
type reqSpan struct {
	req        kmsg.Request
	start, end int
}

func (f *fakeUpstream) Forward(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	f.mu.Lock()
	f.seq++
	start := f.seq
	f.mu.Unlock()
	if f.before != nil {
		f.before(req)
	}
	resp, err := f.carryOut(req)
	if f.after != nil {
		f.after(req)
	}
	f.mu.Lock()
	f.seq++
	f.spans = append(f.spans, reqSpan{req, start, f.seq})
	f.mu.Unlock()
	return resp, err
}

func (f *fakeUpstream) carryOut(req kmsg.Request) (kmsg.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		f.commits = append(f.commits, r)
		if f.stored == nil {
			f.stored = map[int32]storedOffset{}
		}
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				md := ""
				if p.Metadata != nil {
					md = *p.Metadata
				}
				f.stored[p.Partition] = storedOffset{p.Offset, p.LeaderEpoch, md}
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	case *kmsg.OffsetFetchRequest:
		if f.fetchErr != nil {
			return nil, f.fetchErr
		}
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = f.fetchTop
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = "t"
		for p, o := range f.stored {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, o.offset, o.epoch, kmsg.StringPtr(o.metadata)
			rt.Partitions = append(rt.Partitions, rp)
		}
		// A partition the broker has no offset for answers -1; it is no
		// offset to commit again.
		none := kmsg.NewOffsetFetchResponseTopicPartition()
		none.Partition, none.Offset = 99, -1
		rt.Partitions = append(rt.Partitions, none)
		resp.Topics = append(resp.Topics, rt)
		return resp, nil
	}
	return nil, errors.New("fakeUpstream: unexpected request")
}

// commitsSince is how many commits the upstream was sent after the first n.
func (f *fakeUpstream) commitsSince(n int) []*kmsg.OffsetCommitRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*kmsg.OffsetCommitRequest(nil), f.commits[n:]...)
}

func (f *fakeUpstream) offsetOf(p int32) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stored[p].offset
}

func commitOf(group string, offsets map[int32]int64) *kmsg.OffsetCommitRequest {
	c := kmsg.NewPtrOffsetCommitRequest()
	c.Group, c.Generation = group, -1
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = "t"
	for p, o := range offsets {
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset, cp.LeaderEpoch, cp.Metadata = p, o, int32(p+1), kmsg.StringPtr("m")
		t.Partitions = append(t.Partitions, cp)
	}
	c.Topics = append(c.Topics, t)
	return c
}

func overview(group, state string) []driver.Overview {
	return []driver.Overview{{Summary: coordinator.Summary{Group: group, State: state}}}
}

func testKeeper(up driver.Forwarder) *offsetKeeper {
	return newOffsetKeeper(up, 4*time.Hour, slog.New(slog.DiscardHandler))
}

// TestOffsetKeeper_KeepsALiveGroupsOffsetsAndLetsAnEmptyOnesGo follows one
// group: at every pass while it is live, each offset the upstream holds is
// committed again exactly as it is held (offset, leader epoch, metadata)
// and as a group without members; a group that turns Empty has them
// committed once more, then never; a group the driver no longer holds is
// forgotten.
func TestOffsetKeeper_KeepsALiveGroupsOffsetsAndLetsAnEmptyOnesGo(t *testing.T) {
	ctx := context.Background()
	up := &fakeUpstream{}
	k := testKeeper(up)
	k.Forward(ctx, commitOf("g", map[int32]int64{0: 5, 1: 8}))
	k.Forward(ctx, commitOf("g", map[int32]int64{0: 7}))
	up.mu.Lock()
	up.stored[2] = storedOffset{11, -1, ""} // committed before the gateway
	want := map[int32]storedOffset{}
	for p, o := range up.stored {
		want[p] = o
	}
	up.mu.Unlock()

	recommitted := func(from int) map[int32]storedOffset {
		got := map[int32]storedOffset{}
		for _, c := range up.commitsSince(from) {
			if c.Generation != -1 || c.MemberID != "" || c.Group != "g" {
				t.Fatalf("committed again as group %q generation %d member %q", c.Group, c.Generation, c.MemberID)
			}
			for _, ct := range c.Topics {
				for _, p := range ct.Partitions {
					md := ""
					if p.Metadata != nil {
						md = *p.Metadata
					}
					if _, dup := got[p.Partition]; dup {
						t.Fatalf("partition %d committed again twice in one pass", p.Partition)
					}
					got[p.Partition] = storedOffset{p.Offset, p.LeaderEpoch, md}
				}
			}
		}
		return got
	}
	same := func(got map[int32]storedOffset) bool {
		if len(got) != len(want) {
			return false
		}
		for p, o := range want {
			if got[p] != o {
				return false
			}
		}
		return true
	}
	for _, state := range []string{"Stable", "PreparingRebalance", "Stable", "Empty"} {
		n := len(up.commitsSince(0))
		k.pass(ctx, overview("g", state))
		if got := recommitted(n); !same(got) {
			t.Fatalf("a pass with the group %s committed again %v, want what the upstream holds, %v", state, got, want)
		}
	}
	for range 3 {
		n := len(up.commitsSince(0))
		k.pass(ctx, overview("g", "Empty"))
		if got := recommitted(n); len(got) != 0 {
			t.Fatalf("an Empty group's offsets are still kept: %v", got)
		}
	}
	k.pass(ctx, nil)
	if len(k.groups) != 0 {
		t.Errorf("a group the driver no longer holds is remembered")
	}
}

// TestOffsetKeeper_AMembersCommitIsNeverPutBehindAnOlderOffset holds the
// keeper to its gate from both sides: a member's commit made while the
// keeper has read the group's offsets waits until the keeper's commit is
// answered, so the member's offset is the one the upstream ends with; and
// a refresh reads nothing while a member's commit is on its way, since
// what it read could be older than what it then commits over.
func TestOffsetKeeper_AMembersCommitIsNeverPutBehindAnOlderOffset(t *testing.T) {
	for _, memberFirst := range []bool{false, true} {
		name := "the keeper first"
		if memberFirst {
			name = "the member first"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			up := &fakeUpstream{}
			k := testKeeper(up)
			k.Forward(ctx, commitOf("g", map[int32]int64{0: 5}))
			k.pass(ctx, overview("g", "Stable"))
			setUp := len(up.spans)
			member := commitOf("g", map[int32]int64{0: 6})

			held := make(chan struct{})    // closed when the first request is held
			release := make(chan struct{}) // closed to let it go
			var once sync.Once
			hold := func() { once.Do(func() { close(held); <-release }) }
			if memberFirst { // on its way, not yet carried out
				up.before = func(req kmsg.Request) {
					if req == member {
						hold()
					}
				}
			} else { // the keeper has read the offsets
				up.after = func(req kmsg.Request) {
					if _, ok := req.(*kmsg.OffsetFetchRequest); ok {
						hold()
					}
				}
			}
			var wg sync.WaitGroup
			first, second := func() { k.pass(ctx, overview("g", "Stable")) }, func() { k.Forward(ctx, member) }
			if memberFirst {
				first, second = second, first
			}
			wg.Add(2)
			go func() { defer wg.Done(); first() }()
			<-held
			go func() { defer wg.Done(); second() }()
			time.Sleep(50 * time.Millisecond) // the second is at the gate, or, without one, already done
			close(release)
			wg.Wait()
			if got := up.offsetOf(0); got != 6 {
				t.Fatalf("the upstream ends with offset %d, want the member's 6: an older offset was committed behind it", got)
			}
			var commitEnd int
			for _, sp := range up.spans[setUp:] {
				switch {
				case sp.req == member:
					commitEnd = sp.end
				default:
					if _, ok := sp.req.(*kmsg.OffsetFetchRequest); ok && memberFirst && (commitEnd == 0 || sp.start < commitEnd) {
						t.Fatalf("the keeper read the group's offsets (at %d) while a member's commit was on its way", sp.start)
					}
				}
			}
		})
	}
}

// TestOffsetKeeper_ABusyGroupIsStillKept: a group some member commits for
// all the time still has the offsets nobody commits any more committed
// again at every pass. A keeper that waited for a quiet moment would let
// them expire.
func TestOffsetKeeper_ABusyGroupIsStillKept(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	up := &fakeUpstream{before: func(kmsg.Request) { time.Sleep(time.Millisecond) }}
	k := testKeeper(up)
	k.Forward(ctx, commitOf("g", map[int32]int64{1: 40})) // partition 1's owner then goes quiet
	var wg sync.WaitGroup
	for m := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := int64(0); ctx.Err() == nil; o++ {
				k.Forward(ctx, commitOf("g", map[int32]int64{0: o*4 + int64(m)}))
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()
	for pass := range 5 {
		n := len(up.commitsSince(0))
		done := make(chan struct{})
		go func() { k.pass(ctx, overview("g", "Stable")); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("pass %d: still waiting after 5s beside a busy group", pass)
		}
		kept := false
		for _, c := range up.commitsSince(n) {
			for _, ct := range c.Topics {
				for _, p := range ct.Partitions {
					kept = kept || p.Partition == 1 && p.Offset == 40
				}
			}
		}
		if !kept {
			t.Fatalf("pass %d: partition 1 was not committed again beside a busy group", pass)
		}
	}
}

// TestOffsetKeeper_AFailedReadCommitsNothing: when the upstream cannot
// tell the group's offsets, the keeper commits nothing for it, and tries
// again at the next pass.
func TestOffsetKeeper_AFailedReadCommitsNothing(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		set  func(*fakeUpstream)
	}{
		{"the request fails", func(f *fakeUpstream) { f.fetchErr = errors.New("connection refused") }},
		{"the group's error code", func(f *fakeUpstream) { f.fetchTop = kerr.CoordinatorLoadInProgress.Code }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &fakeUpstream{}
			k := testKeeper(up)
			k.Forward(ctx, commitOf("g", map[int32]int64{0: 5}))
			up.mu.Lock()
			tc.set(up)
			up.mu.Unlock()
			n := len(up.commitsSince(0))
			k.pass(ctx, overview("g", "Stable"))
			if got := up.commitsSince(n); len(got) != 0 {
				t.Fatalf("committed %d times after a failed read", len(got))
			}
			up.mu.Lock()
			up.fetchErr, up.fetchTop = nil, 0
			up.mu.Unlock()
			k.pass(ctx, overview("g", "Stable"))
			if got := up.commitsSince(n); len(got) != 1 {
				t.Fatalf("the next pass committed %d times, want 1", len(got))
			}
		})
	}
}

// forwardFunc is a driver.Forwarder of a function.
type forwardFunc func(context.Context, kmsg.Request) (kmsg.Response, error)

func (f forwardFunc) Forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return f(ctx, req)
}

// TestOffsetKeeper_AnOffsetPendingInATransactionIsNotCommittedAgainOverIt:
// a kfake upstream holds offset 5 of a group and a transaction commits 10
// for it (a cluster's commit, or a client's TxnOffsetCommit), committed
// between the keeper's read and its re-commit. The keeper must not read
// the 5 and put it back over the 10.
func TestOffsetKeeper_AnOffsetPendingInATransactionIsNotCommittedAgainOverIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The raw transaction calls below, as a cluster's writer makes them.
	txn, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("keeper-test"), kgo.MaxVersions(cluster.WriterVersions()))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	up := upstream.New(cl, 0)

	if resp, err := up.Forward(ctx, recommitOf("g", fetchedOffset(5))); err != nil || resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("committing 5: %+v, %v", resp, err)
	}
	id, epoch, err := txn.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "keeper-test", id, epoch, "g"
	if resp, err := add.RequestWith(ctx, txn); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %+v, %v", resp, err)
	}
	tc := kmsg.NewPtrTxnOffsetCommitRequest()
	tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch, tc.Generation = "keeper-test", "g", id, epoch, -1
	tc.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 10, LeaderEpoch: -1}}}}
	if resp, err := tc.RequestWith(ctx, txn); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %+v, %v", resp, err)
	}

	// The transaction commits right after the keeper's read is answered.
	keeper := newOffsetKeeper(forwardFunc(func(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
		resp, err := up.Forward(ctx, req)
		if _, ok := req.(*kmsg.OffsetFetchRequest); ok {
			end := kmsg.NewPtrEndTxnRequest()
			end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "keeper-test", id, epoch, true
			if eresp, err := end.RequestWith(ctx, txn); err != nil || eresp.ErrorCode != 0 {
				t.Errorf("EndTxn: %+v, %v", eresp, err)
			}
		}
		return resp, err
	}), time.Hour, slog.New(slog.DiscardHandler))
	keeper.refresh(ctx, "g", keeper.group("g"))

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.SetVersion(7)
	fetch.Group, fetch.RequireStable = "g", true
	resp, err := up.Forward(ctx, fetch)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0].Offset; got != 10 {
		t.Fatalf("the group's offset after the keeper's pass: %d, want the transaction's 10", got)
	}
}

// fetchedOffset is an OffsetFetch answer of offset for partition 0 of "t".
func fetchedOffset(offset int64) *kmsg.OffsetFetchResponse {
	resp := kmsg.NewPtrOffsetFetchResponse()
	resp.Topics = []kmsg.OffsetFetchResponseTopic{{Topic: "t", Partitions: []kmsg.OffsetFetchResponseTopicPartition{{Partition: 0, Offset: offset, LeaderEpoch: -1}}}}
	return resp
}

package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/wasmassign/wasmassign/coordinator"
)

// ErrFencedWrite is the error of a write to a shard that a later owner has
// claimed since: the transactional id's epoch moved on, so this gateway
// must stop answering for the shard's groups.
var ErrFencedWrite = errors.New("a later owner claimed the shard")

// ShardWriter writes one shard's records, and commits its groups' offsets,
// as its owner, each batch in a transaction of the shard's own
// transactional id (TransactionalID), so that the next owner's claim
// fences every write and every commit of this one (KIP-98's producer
// epoch, which KIP-447 extends to offset commits): a zombie's state or
// commit can never land after a takeover.
type ShardWriter struct {
	cl     *kgo.Client
	opts   []kgo.Opt // cl's, for renew
	name   string    // the cluster's
	topic  string
	shard  int32
	writer Writer
}

// TransactionalID is the transactional id of shard of cluster name.
func TransactionalID(name string, shard int32) string {
	return fmt.Sprintf("wasmassign/%s/%d", name, shard)
}

// OpenShard claims shard of topic for writer: it commits a claim record in
// a transaction of the shard's transactional id, which fences the previous
// owner's producer, with a client of its own made from opts. The caller
// then reads the shard to this claim (ReadShard) before it serves.
func OpenShard(ctx context.Context, opts []kgo.Opt, name, topic string, shard int32, writer Writer) (*ShardWriter, error) {
	opts = append(slices.Clone(opts),
		kgo.TransactionalID(TransactionalID(name, shard)),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DefaultProduceTopic(topic),
		kgo.MaxVersions(WriterVersions()),
		// A member's answer waits on each write: nothing is gained by
		// lingering for more records (the batch is all there is), and a
		// transaction begun right after the last one ended is refused
		// (CONCURRENT_TRANSACTIONS) only until that one's markers are
		// written, a few milliseconds.
		kgo.ProducerLinger(0),
		kgo.ConcurrentTransactionsBackoff(5*time.Millisecond),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("state topic %q, shard %d: %w", topic, shard, err)
	}
	w := &ShardWriter{cl: cl, opts: opts, name: name, topic: topic, shard: shard, writer: writer}
	if err := w.Write(ctx, []Record{{Kind: KindClaim, Writer: writer}}); err != nil {
		cl.Close()
		return nil, err
	}
	return w, nil
}

// Write commits recs to the shard in one transaction, each record's Writer
// set to the owner's. It fails with ErrFencedWrite once a later
// owner has claimed the shard; nothing of recs is then visible to a
// read_committed reader.
func (w *ShardWriter) Write(ctx context.Context, recs []Record) error {
	_, err := w.WriteWithOffsets(ctx, recs, nil)
	return err
}

// WriteWithOffsets commits recs and the offsets of commits (OffsetCommit
// requests of the shard's groups, as a group without members commits
// them) in one transaction, and answers each commit as OffsetCommit
// would. Offsets committed so become visible once the transaction is
// (KIP-447: an OffsetFetch that requires stable offsets waits for them).
// It fails with ErrFencedWrite once a later owner has claimed the shard:
// then neither the records nor the offsets land.
func (w *ShardWriter) WriteWithOffsets(ctx context.Context, recs []Record, commits []*kmsg.OffsetCommitRequest) ([]*kmsg.OffsetCommitResponse, error) {
	krs := make([]*kgo.Record, 0, len(recs))
	for _, r := range recs {
		r.Writer = w.writer
		k, v, err := Encode(r)
		if err != nil {
			return nil, fmt.Errorf("state topic %q, shard %d: %w", w.topic, w.shard, err)
		}
		krs = append(krs, &kgo.Record{Partition: w.shard, Key: k, Value: v})
	}
	// kgo ends only a transaction that produced: one that only commits
	// offsets is ended here.
	produced := len(krs) > 0
	if produced {
		if err := w.cl.BeginTransaction(); err != nil {
			return nil, w.failed(ctx, err)
		}
		if err := w.cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
			return nil, w.failed(ctx, err)
		}
	}
	var resps []*kmsg.OffsetCommitResponse
	if len(commits) > 0 {
		id, epoch, err := w.cl.ProducerID(ctx)
		if err != nil {
			return nil, w.failed(ctx, err)
		}
		if resps, err = w.commitOffsets(ctx, id, epoch, commits); err == nil && !produced {
			err = w.endTxn(ctx, id, epoch, true)
		}
		if err != nil {
			if !produced {
				w.abortUnproduced(ctx, id, epoch)
			}
			return nil, w.failed(ctx, err)
		}
	}
	if produced {
		if err := w.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return nil, w.failed(ctx, err)
		}
	}
	return resps, nil
}

// WriterVersions are the versions a shard writer speaks: below KIP-890's second part,
// under which every EndTxn moves the producer epoch: the offsets are
// committed with the writer's producer id and epoch outside kgo's own
// transaction calls, which must not move under them. Brokers of 4.x still
// serve these versions.
func WriterVersions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	v.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
	return v
}

// commitOffsets adds each commit's group to the transaction, one after
// another (the transaction coordinator takes one change of a transaction
// at a time), then commits the offsets in it, the groups' at once (each
// goes to its group's coordinator).
func (w *ShardWriter) commitOffsets(ctx context.Context, id int64, epoch int16, commits []*kmsg.OffsetCommitRequest) ([]*kmsg.OffsetCommitResponse, error) {
	added := map[string]bool{}
	for _, c := range commits {
		if added[c.Group] {
			continue
		}
		err := w.retryTxn(ctx, func() (int16, error) {
			req := kmsg.NewPtrAddOffsetsToTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = w.txnID(), id, epoch, c.Group
			resp, err := req.RequestWith(ctx, w.cl)
			if err != nil {
				return 0, err
			}
			return resp.ErrorCode, nil
		})
		if err != nil {
			return nil, fmt.Errorf("adding the offsets of group %s to the transaction: %w", c.Group, err)
		}
		added[c.Group] = true
	}
	// A group's commits go in their order (a later one of a partition
	// must land last); the groups' side by side.
	byGroup := map[string][]int{}
	for i, c := range commits {
		byGroup[c.Group] = append(byGroup[c.Group], i)
	}
	resps := make([]*kmsg.OffsetCommitResponse, len(commits))
	errs := make([]error, len(commits))
	var wg sync.WaitGroup
	for _, idx := range byGroup {
		wg.Go(func() {
			for _, i := range idx {
				c := commits[i]
				resp, err := txnOffsetCommitOf(c, w.txnID(), id, epoch).RequestWith(ctx, w.cl)
				switch {
				case err != nil && ctx.Err() == nil:
					// This group's coordinator is out of reach: its member
					// is told so, and the batch's other writes go on (had
					// the offsets reached it, they land unasked-for but
					// harmless: the member's own).
					resps[i] = coordinator.ErrorResponse(c, kerr.CoordinatorNotAvailable.Code).(*kmsg.OffsetCommitResponse)
				case err != nil:
					errs[i] = fmt.Errorf("committing the offsets of group %s: %w", c.Group, err)
				case fencedCode(resp) != 0:
					errs[i] = kerr.ErrorForCode(fencedCode(resp))
				default:
					resps[i] = offsetCommitResponseOf(c, resp)
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return resps, nil
}

// endTxn ends a transaction that produced nothing.
func (w *ShardWriter) endTxn(ctx context.Context, id int64, epoch int16, commit bool) error {
	return w.retryTxn(ctx, func() (int16, error) {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = w.txnID(), id, epoch, commit
		resp, err := req.RequestWith(ctx, w.cl)
		if err != nil {
			return 0, err
		}
		return resp.ErrorCode, nil
	})
}

// retryTxn sends a transaction coordinator's request until it is answered
// with no retriable error: CONCURRENT_TRANSACTIONS says the last
// transaction's markers are still being written.
func (w *ShardWriter) retryTxn(ctx context.Context, send func() (int16, error)) error {
	for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, 200*time.Millisecond) {
		code, err := send()
		if err == nil {
			err = kerr.ErrorForCode(code)
		}
		if err == nil || !kerr.IsRetriable(err) && !errors.Is(err, kerr.ConcurrentTransactions) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(backoff):
		}
	}
}

func (w *ShardWriter) txnID() string { return TransactionalID(w.name, w.shard) }

// txnOffsetCommitOf is c committed in the transaction of id and epoch.
func txnOffsetCommitOf(c *kmsg.OffsetCommitRequest, txnID string, id int64, epoch int16) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, c.Group, id, epoch
	req.Generation, req.MemberID = -1, ""
	for _, t := range c.Topics {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// offsetCommitResponseOf is resp as the answer to c, in c's version.
func offsetCommitResponseOf(c *kmsg.OffsetCommitRequest, resp *kmsg.TxnOffsetCommitResponse) *kmsg.OffsetCommitResponse {
	out := kmsg.NewPtrOffsetCommitResponse()
	out.SetVersion(c.GetVersion())
	out.ThrottleMillis = resp.ThrottleMillis
	for _, t := range resp.Topics {
		ot := kmsg.NewOffsetCommitResponseTopic()
		ot.Topic = t.Topic
		for _, p := range t.Partitions {
			op := kmsg.NewOffsetCommitResponseTopicPartition()
			op.Partition, op.ErrorCode = p.Partition, p.ErrorCode
			ot.Partitions = append(ot.Partitions, op)
		}
		out.Topics = append(out.Topics, ot)
	}
	return out
}

// fencedCode is the first error of resp that says a later producer of the
// transactional id exists, or 0.
func fencedCode(resp *kmsg.TxnOffsetCommitResponse) int16 {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil && isFenced(err) {
				return p.ErrorCode
			}
		}
	}
	return 0
}

// abortUnproduced aborts a transaction that only committed offsets, which
// kgo does not know of, even when ctx (the lease's deadline) has passed:
// left open, the next transaction would join it and commit offsets its
// members were told had failed. When the abort is not confirmed, renew
// makes the next transaction begin with InitProducerId, which aborts it.
func (w *ShardWriter) abortUnproduced(ctx context.Context, id int64, epoch int16) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := w.endTxn(actx, id, epoch, false); err != nil && !isFenced(err) {
		w.renew()
	}
}

// renew replaces the writer's client with a new one of the same
// transactional id, whose first transaction starts with InitProducerId.
func (w *ShardWriter) renew() {
	if cl, err := kgo.NewClient(w.opts...); err == nil {
		w.cl.Close()
		w.cl = cl
	}
}

// failed aborts what is left of the transaction and names the cause.
func (w *ShardWriter) failed(ctx context.Context, err error) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = w.cl.EndTransaction(actx, kgo.TryAbort)
	if isFenced(err) {
		err = ErrFencedWrite
	}
	return fmt.Errorf("state topic %q, shard %d: %w", w.topic, w.shard, err)
}

// Release commits the owner's release record and closes the writer: the
// next owner may start at once. Only an owner that was answering up to the
// release may call it (Lease.ServableFrom).
func (w *ShardWriter) Release(ctx context.Context) error {
	defer w.Close()
	return w.Write(ctx, []Record{{Kind: KindRelease, Writer: w.writer}})
}

// Close ends the writer without a release.
func (w *ShardWriter) Close() { w.cl.Close() }

// isFenced reports whether err says a newer producer of the same
// transactional id exists.
func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

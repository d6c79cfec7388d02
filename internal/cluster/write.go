package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrFencedWrite is the error of a write to a shard that a later owner has
// claimed since: the transactional id's epoch moved on, so this gateway
// must stop answering for the shard's groups.
var ErrFencedWrite = errors.New("a later owner claimed the shard")

// ShardWriter writes one shard's records as its owner, each batch in a
// transaction of the shard's own transactional id (TransactionalID), so
// that the next owner's first write fences every write of this one: a
// zombie's state can never land after a takeover.
type ShardWriter struct {
	cl     *kgo.Client
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
	cl, err := kgo.NewClient(append(slices.Clone(opts),
		kgo.TransactionalID(TransactionalID(name, shard)),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DefaultProduceTopic(topic),
	)...)
	if err != nil {
		return nil, fmt.Errorf("state topic %q, shard %d: %w", topic, shard, err)
	}
	w := &ShardWriter{cl: cl, topic: topic, shard: shard, writer: writer}
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
	krs := make([]*kgo.Record, 0, len(recs))
	for _, r := range recs {
		r.Writer = w.writer
		k, v, err := Encode(r)
		if err != nil {
			return fmt.Errorf("state topic %q, shard %d: %w", w.topic, w.shard, err)
		}
		krs = append(krs, &kgo.Record{Partition: w.shard, Key: k, Value: v})
	}
	if err := w.cl.BeginTransaction(); err != nil {
		return w.failed(ctx, err)
	}
	if err := w.cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		return w.failed(ctx, err)
	}
	if err := w.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return w.failed(ctx, err)
	}
	return nil
}

// failed aborts what is left of the transaction and names the cause.
func (w *ShardWriter) failed(ctx context.Context, err error) error {
	_ = w.cl.EndTransaction(ctx, kgo.TryAbort)
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

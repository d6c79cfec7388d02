package cluster

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadShard reads partition shard of topic from its start, read_committed,
// and returns its records up to and including the first one that stop
// accepts, with a client of its own made from opts (the upstream's
// connection options). A new owner first commits its claim to the shard,
// then reads until it meets that claim: everything committed before it
// has been read, and nothing an aborted or fenced transaction wrote is.
// Only ctx bounds the wait.
func ReadShard(ctx context.Context, opts []kgo.Opt, topic string, shard int32, stop func(RawRecord) bool) ([]RawRecord, error) {
	cl, err := kgo.NewClient(append(slices.Clone(opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {shard: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		return nil, fmt.Errorf("state topic %q, shard %d: %w", topic, shard, err)
	}
	defer cl.Close()
	var out []RawRecord
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("state topic %q, shard %d: reading to its end: %w", topic, shard, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return nil, fmt.Errorf("state topic %q, shard %d: %w", topic, shard, ferr)
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if done {
				return
			}
			rr := RawRecord{Offset: r.Offset, Key: r.Key, Value: r.Value}
			out = append(out, rr)
			done = stop(rr)
		})
		if done {
			return out, nil
		}
	}
}

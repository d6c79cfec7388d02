package cluster

import (
	"errors"
	"fmt"

	"github.com/wasmassign/wasmassign/coordinator"
)

// RawRecord is one record of a shard as the state topic holds it: a nil
// Value is a tombstone.
type RawRecord struct {
	Offset     int64
	Key, Value []byte
}

// Shard is what a new owner rebuilds from one shard's records, read in
// offset order to the end: what it restores, and whether it may start at
// once.
type Shard struct {
	// States holds each group's latest state, without the groups whose
	// latest record is a tombstone.
	States map[string]coordinator.GroupState
	// Clean is set when the shard's last control record is a release (its
	// last owner stopped answering before it wrote it), or when it has
	// none: no gateway ever claimed the shard, and none serves a shard
	// before its claim is committed, so none can be answering for it
	// (Lease.ServableFrom).
	Clean bool
	// Owner wrote the last control record (claim or release).
	Owner Writer
	// Skipped counts the records left out, by reason: a CorruptError's,
	// "shard" for a group that hashes to another shard, and "fenced" for a
	// state written by another gateway than the one whose claim came last.
	Skipped map[string]int
}

// LoadShard rebuilds shard (of partitions) from its records. A record of a
// newer format, or a layout of another partition count, refuses the whole
// shard: serving it would misread or misplace groups. Everything else that
// is wrong is skipped and counted, and never stops the load.
func LoadShard(shard, partitions int, records []RawRecord) (Shard, error) {
	sh := Shard{States: map[string]coordinator.GroupState{}, Skipped: map[string]int{}, Clean: true}
	claimed := false
	for _, raw := range records {
		r, err := Decode(raw.Key, raw.Value)
		var newer *NewerFormatError
		var bad *CorruptError
		switch {
		case errors.As(err, &newer):
			return Shard{}, fmt.Errorf("shard %d, offset %d: %w", shard, raw.Offset, err)
		case errors.As(err, &bad):
			sh.Skipped[bad.Reason]++
			continue
		case err != nil:
			return Shard{}, fmt.Errorf("shard %d, offset %d: %w", shard, raw.Offset, err)
		}
		switch r.Kind {
		case KindLayout:
			if r.Layout.Partitions != partitions {
				return Shard{}, fmt.Errorf("shard %d, offset %d: the state topic was laid out for %d partitions, and this gateway for %d",
					shard, raw.Offset, r.Layout.Partitions, partitions)
			}
		case KindClaim:
			sh.Owner, sh.Clean, claimed = r.Writer, false, true
		case KindRelease:
			sh.Owner, sh.Clean = r.Writer, true
		case KindState:
			if ShardOf(r.Group, partitions) != shard {
				sh.Skipped["shard"]++
				continue
			}
			if r.State == nil {
				delete(sh.States, r.Group)
				continue
			}
			// Transactions fence a replaced owner's producer; this holds
			// even so: after a claim, only the claimer writes states.
			if claimed && (r.Writer.ID != sh.Owner.ID || r.Writer.Incarnation != sh.Owner.Incarnation) {
				sh.Skipped["fenced"]++
				continue
			}
			sh.States[r.Group] = *r.State
		}
	}
	return sh, nil
}

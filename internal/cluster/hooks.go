package cluster

import "time"

// Hook observes a Manager, in the manner of kgo's hooks: the daemon turns
// the calls into metrics, and the cluster package knows nothing of
// Prometheus. Every method is called from the Manager's goroutines and
// must be quick and not block.
type Hook interface {
	// OnShardServing: this gateway serves shard from now on, with groups
	// read from it, took after it was given the shard. How is "handover"
	// (the last owner released it), "failover" (this gateway waited out
	// the last owner's lease) or "first" (no gateway had claimed it).
	OnShardServing(shard, groups int, took time.Duration, how string)
	// OnShardGivenUp: this gateway stopped answering for shard, for
	// reason: "moved" or "leaving" (handed over), "lost" (Kafka says this
	// gateway is no longer the member it was), "lease" (no confirmation
	// in time), "fenced" (a later owner claimed the shard) or "stopping".
	OnShardGivenUp(shard int, reason string)
	// OnRecordsSkipped: reading shard left records out, n for reason (a
	// corrupt or unknown record, one of another shard, one a later claim
	// fenced).
	OnRecordsSkipped(shard int, reason string, n int)
}

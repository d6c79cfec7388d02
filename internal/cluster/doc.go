// Package cluster is what gateways of one cluster share through the Kafka
// cluster they front: which shard of the state topic each managed group
// belongs to (ShardOf), the records that topic holds (Encode, Decode), the
// topic itself (EnsureStateTopic), how the gateways' leader hands the
// shards out (Balance), a gateway's member of the gateways' own consumer
// group as a pure state machine (Membership), how a new owner reads a
// shard to its own claim (ReadShard) and rebuilds it from the records
// (LoadShard), the fenced writes of a shard's owner (OpenShard), the lease
// that keeps a gateway from answering for shards it may have lost (Lease),
// and the Manager that runs all of it for one gateway: its membership, the
// loads and releases of its shards, and the saves of their groups.
//
// The state topic is compacted and keyed by record: a group's state under
// its id, and the shard's control records (who claimed or released it, and
// the layout it was made with) under keys no group id can take. A record's
// value is versioned, so that a gateway never misreads what a newer one
// wrote: it refuses the shard instead.
//
// The package must never import the runtime, the proxy, the gateway, the
// driver, the daemon or metrics: it serves the daemon, which wires it to
// them.
package cluster

// Package loadtest is the engine of `wasmassign loadtest`: a load
// generator that plays thousands of classic consumer-group members against
// a target (the gateway, a Kafka cluster, or a kfake cluster it starts in a process of its own) and
// measures how the target coordinates them.
//
// It speaks the protocol itself, with kmsg requests over raw TCP, rather
// than through kgo: a member here is a connection and a few request
// structs, so ten thousand of them fit in one process without the
// generator becoming what is measured. Each member does what a Java or kgo
// consumer does with its group coordinator: FindCoordinator, JoinGroup
// (with KIP-394's MEMBER_ID_REQUIRED round trip), SyncGroup (computing a
// range assignment when it is the leader, as a broker-side group needs),
// Heartbeat at the heartbeat interval and OffsetCommit at the commit
// interval, and a rejoin on REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID and
// ILLEGAL_GENERATION. Under cooperative-sticky a member honours KIP-429:
// it reports what it owns, and when an assignment drops partitions it
// owned it revokes them and rejoins at once.
//
// A run has three phases: connect (every member dials and finds its
// coordinator), join (from the first JoinGroup until every group is
// stable, see [Result.JoinToStable]) and steady (heartbeats and commits
// for [Config.Duration], the phase latencies and rates are measured in).
//
// The package must not import the daemon, the gateway, the driver or the
// coordinator: it knows the target only by the wire.
package loadtest

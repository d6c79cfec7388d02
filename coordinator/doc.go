// Package coordinator is the classic Kafka consumer-group coordinator of
// wasmassign, with server-side assignment: group membership, the five group
// states, protocol choice, KIP-345 static members, KIP-394 member ids,
// KIP-429 two-phase cooperative hand-over, offset-commit fencing, and the
// metadata watching a leader would do. Apache Kafka's GroupMetadataManager
// and ClassicGroup (group-coordinator module) are the behavioural reference.
//
// It is a deterministic state machine: no goroutines, sockets, wall clock or
// randomness, and it never asks anything of the world outside it. Everything
// it knows arrives as an input: decoded kmsg requests with their client
// (including the KIP-392 rack the driver knows for it), the current time,
// plugin results, cluster metadata, sightings of Fetch racks, and the set of
// protocols plugins serve. Replies and effects come out. So a recorded run
// replays byte for byte. It must never import the runtime (plugins are
// reached through Job values), the proxy, wazero or anything that does
// I/O. It imports kmsg/kerr, the abi model, handover and the range
// plugin's pure algorithm (plugins/range), its last resort.
//
// # Server-side assignment
//
// When the group's protocol type is "consumer" and some plugin serves the
// chosen protocol name (Config.Served, then SetServedProtocols), the
// coordinator assigns: every
// JoinGroup answer names ServerLeaderID as the leader, an id no member has,
// so every member sends an empty SyncGroup. At the end of the join phase the
// coordinator issues a Job; when AssignmentDone brings the plugin's answer,
// the group turns Stable at once and every parked SyncGroup is answered. Any
// other group (Kafka Streams' "stream", Connect, a name no plugin serves)
// runs Kafka's leader-side assignment unchanged.
//
// A partition is never added to a member while another current member still
// holds it (package handover): holders are the members that report it owned
// at the newest generation, and static members that did not rejoin, which
// hold what they last received. Withheld partitions go out in the next
// generation, which the coordinator starts itself once every member has
// synced.
//
// # How a driver runs it
//
// A driver owns one Coordinator per process (or per shard of groups) and
// serialises every call to it, for example from one goroutine reading a
// channel. Each call returns an Output; the driver must act on all of it:
//
//  1. For each request from a client, decode it (kmsg.RequestForKey,
//     SetVersion, ReadFrom), allocate a RequestID, and call
//     Handle(time.Now(), id, Client{ID: header client id, Host: "/ip"}, req).
//     Advertise MaxVersion in ApiVersions.
//  2. Output.Replies: write each Response to the connection that sent
//     request ID, keeping the connection's request order (a parked JoinGroup
//     holds back later responses on that connection, as on a broker).
//     A reply may arrive in the Output of a later call.
//  3. Output.Forwards: send Forward.Request upstream and answer the client
//     with Forward.Complete(upstream response).
//  4. Output.Jobs: run each job off the loop, for example
//     registry.Lookup(job.Assignor).Assign(ctx, job.Request) with the
//     plugin deadline, then feed the answer back with AssignmentDone(now,
//     job.ID, resp, err). Failures need no special handling: the coordinator
//     issues the next assignor of the chain (Fallback, then
//     LastResortAssignor) and, if all fail, assigns with its own range.
//     Unknown Assignor names should be reported as errors, not dropped.
//     Job.Request.Seed is left zero for the runtime to derive.
//  5. Output.NextDeadline: arm one timer; when it fires, call Tick(now).
//     Calling Tick early or late is harmless (late only delays timeouts).
//  6. Metadata: call SetMetadata whenever cluster metadata changes, covering
//     at least SubscribedTopics(); the coordinator answers with a rebalance
//     where a subscription is affected. Call FetchRacksSeen with each
//     client's Fetch rack the driver had not seen, and pass the rack known
//     for a JoinGroup's client in Client.FetchRack. Call SetServedProtocols
//     after every change to the plugins loaded.
//  7. Output.Events: count them, log them; nothing depends on them.
//  8. Persistence: Export at shutdown (or periodically) and Restore at start.
//
// If the driver loses a connection with a parked request, it does nothing:
// the reply, when it comes, is dropped, just as a broker drops it.
package coordinator

// Package leaderrack is NAVER's RackAwareRangeAssignor (DEVIEW 2023) over
// the wasmassign ABI model: Kafka's range quotas, with each partition
// preferably given to a consumer in the rack of its leader replica, so that
// consumers read locally even when brokers do not serve fetches from
// followers. The same code runs natively in tests and benchmarks and,
// wrapped by the main package in wasm/, as the "leader-rack-range" plugin.
//
// It must import only the standard library, sdk/go/abi and
// plugins/internal/groupview: no os, no net, no wazero, no franz-go, and no
// other assignor, so that it compiles for GOOS=wasip1 and stays a pure
// function of its request. groupview reads the group the way Kafka's
// assignors do (member order, subscribers, assignable topics) and writes
// the response; this package decides who takes what.
//
// # What it does
//
// Members are taken in Kafka's order: static members by instance id, then
// dynamic members by member id. Topics that do not exist or have no
// partitions are skipped. Each topic is solved on its own; unlike KIP-881's
// range there is no co-partitioning across topics.
//
// Per topic, with P partitions and C subscribers, every subscriber may take
// P/C partitions and P%C of them one more. As in KIP-881's range, the extra
// partition goes to whichever subscriber first goes above P/C. Then:
//
//  1. Leader. In ascending order, each partition goes to a subscriber on the
//     rack of its leader broker (Partition.Leader) that still has quota.
//  2. Follower. In ascending order, each partition still left goes to a
//     subscriber with quota on the rack of one of its other replicas
//     (Request.ReplicaSets, offline replicas included). With no known
//     leader (-1), every replica counts as a follower.
//  3. The rest. Each subscriber in member order takes the lowest partitions
//     still left, up to its quota: Kafka's plain range pass.
//
// A member without a rack, a broker without a rack and a partition without
// placement (Topic.Partitions nil) match nothing, so a group without racks
// gets exactly Kafka's plain range assignment.
//
// # Who takes a partition when several could
//
// In steps 1 and 2 the candidate that holds the fewest partitions of the
// topic so far takes it, the first in member order among equals; in step 2
// the candidates are the subscribers of all the partition's follower racks
// together. Within a rack that is a round robin in member order, which
// gives two guarantees the tests check:
//
//   - The subscribers of one rack end with leader-local counts within one of
//     each other.
//   - A rack claims one of the P%C extra partitions only once each of its
//     subscribers holds P/C. Every extra that step 1 hands out therefore
//     makes one more partition leader-local, and step 1 makes as many
//     partitions leader-local as any assignment within the quotas can.
//
// Steps 2 and 3 never add a leader-local partition: a partition left after
// step 1 has no subscriber with quota on its leader's rack. Likewise a
// partition left for step 3 has no subscriber with quota on any of its
// replicas' racks, so a member that ends with a partition local to none of
// its racks' replicas is never one that could have taken it locally.
//
// # How it stays fast
//
// Each rack's subscribers of a topic form a ring in member order with a
// cursor on the next one to serve, so a candidate is found in constant time
// and nothing scans the members per partition. Broker racks are looked up in
// a table indexed by broker id. A topic that no subscriber with a rack reads,
// or that has no placement, is laid out as an even split with no work per
// partition beyond writing its id.
//
// # Output
//
// Every member of the request gets one abi.MemberAssignment, in request
// order, with topics ordered by name and partitions ascending; see
// groupview.Layout.Response for how the slices share one buffer.
package leaderrack

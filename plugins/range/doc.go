// Package rangeassignor is Apache Kafka's RangeAssignor, including its
// KIP-881 rack-aware mode, over the wasmassign ABI model. The same code runs
// natively in tests and benchmarks and, wrapped by the main package in wasm/,
// as a wasm plugin. It must import only the standard library, sdk/go/abi
// and plugins/internal/groupview: no os, no net, no wazero, no franz-go, so
// that it compiles for GOOS=wasip1 and stays a pure function of its
// request. groupview, shared with the roundrobin assignor, reads the group
// the way Kafka's assignors do and writes the response; this package
// decides who takes what.
//
// # What it reproduces
//
// Members are taken in Kafka's order: static members (those with a
// group.instance.id) by instance id, then dynamic members by member id. The
// package sorts them itself and does not trust the request's order. Topics
// that do not exist or have no partitions are skipped.
//
// Per topic, with P partitions and C subscribers, each subscriber's quota is
// P/C and the first P%C subscribers to go above it get one more. Without rack
// awareness that is Kafka's classic layout: subscriber i takes the next run of
// consecutive partitions, and the first P%C subscribers take one extra.
// Two consumers and two topics of three partitions each give
//
//	c0: t0-0 t0-1 t1-0 t1-1
//	c1: t0-2 t1-2
//
// # Rack mode (KIP-881)
//
// A member's rack is abi.Member.Rack; a partition's racks are the racks of
// all of its replicas, in sync or not. Rack-aware assignment is used when,
// for at least one topic, some subscriber's rack appears among the topic's
// replica racks and not every partition of the topic has the same set of
// replica racks. Otherwise every partition would match every consumer and
// the plain algorithm runs. A member without a rack matches every partition.
//
// In rack mode, as in Kafka:
//
//   - Topics with the same subscribers and the same partition count are
//     co-partitioned. For each partition index in turn, the first subscriber
//     that matches that index's racks in every such topic, and has quota
//     left, takes that index in all of them.
//   - Any other topic that itself qualifies for rack awareness gives each
//     subscriber, in member order, the first rack-matching partitions up to
//     its quota.
//   - Whatever is left then goes through the ordinary range pass, which gives
//     each subscriber the lowest unassigned partitions up to its quota.
//
// The extra partition of the quota goes to whichever subscriber first goes
// above the base quota, so per-topic balance always holds. Priorities,
// highest first: per-topic balance, co-partitioning, rack alignment.
//
// # How it stays fast
//
// Without racks no work is done per partition beyond writing its id: each
// topic's ids are written once in ascending order, and each member's share
// is a window of them, found by arithmetic from its position among the
// topic's subscribers. The response is then written member by member into
// one preallocated table. Rack mode solves each co-partitioned group once
// for all its topics, and finds rack-matching members through per-rack
// queues rather than by scanning every member for every partition.
//
// # Output
//
// Every member of the request gets one abi.MemberAssignment, in request
// order, with topics ordered by name and partitions ascending. Partition
// slices of different members never share elements, but they do share
// backing arrays; their capacity is capped at their length, so appending to
// one copies it rather than overwriting a neighbour.
package rangeassignor

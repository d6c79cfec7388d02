// Package roundrobin is Apache Kafka's RoundRobinAssignor over the wasmassign
// ABI model. The same code runs natively in tests and benchmarks and, wrapped
// by the main package in wasm/, as a wasm plugin. It must import only the
// standard library, sdk/go/abi and plugins/internal/groupview: no os, no
// net, no wazero, no franz-go, so that it compiles for GOOS=wasip1 and stays
// a pure function of its request. groupview, shared with the range
// assignor, reads the group the way Kafka's assignors do and writes the
// response; this package decides who takes what.
//
// # What it reproduces
//
// Members are taken in Kafka's order: static members (those with a
// group.instance.id) by instance id, then dynamic members by member id. The
// package sorts them itself and does not trust the request's order.
//
// All partitions of all subscribed topics are laid out by topic name, then
// partition. A circular iterator over the sorted members hands them out: for
// each partition it skips members that do not subscribe to its topic, gives
// the partition to the next member and moves one step on. The iterator
// carries over from one topic to the next. Topics that do not exist or have
// no partitions are skipped. With identical subscriptions this balances
// members to within one partition; with different subscriptions it may not.
// Two consumers and two topics of three partitions each give
//
//	c0: t0-0 t0-2 t1-1
//	c1: t0-1 t1-0 t1-2
//
// Kafka's RoundRobinAssignor has no rack-aware mode, so member and replica
// racks are ignored.
//
// # How it stays fast
//
// Within one topic the iterator visits the topic's subscribers in a fixed
// cycle, so subscriber k of the topic gets partitions j, j+S, j+2S, ... for
// S subscribers. The package finds the first subscriber with a binary search
// and writes those progressions directly, with no per-partition search.
//
// # Output
//
// Every member of the request gets one abi.MemberAssignment, in request
// order, with topics ordered by name and partitions ascending. Partition
// slices of different members never share elements, but they do share
// backing arrays; their capacity is capped at their length, so appending to
// one copies it rather than overwriting a neighbour.
package roundrobin

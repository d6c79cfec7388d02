// Package sticky is Apache Kafka's StickyAssignor (protocol "sticky", eager)
// and CooperativeStickyAssignor (protocol "cooperative-sticky"), including
// their KIP-881 rack awareness, over the wasmassign ABI model. It is the
// readable reference: the built-in wasm module is its Rust port
// (plugins/sticky/rust; RATIONALE.md says why), which a differential test
// holds to this package's answers: the same assignment, member for
// member, and the same user data, byte for byte. This package runs natively
// in tests and in the native side of `wasmassign bench`, and the main
// package in wasm/ compiles it to a Go guest for comparison. It must import only
// the standard library, sdk/go/abi and plugins/internal/groupview (Kafka's
// member order, the assignable topics, rack numbering): no os, no net, no
// wazero, no franz-go, so that it compiles for GOOS=wasip1 and stays a pure
// function of its request.
//
// # What it reproduces
//
// Kafka's answer, exactly, wherever it does not hang on Java HashMap
// iteration order:
//
//   - With identical subscriptions (Kafka's ConstrainedAssignmentBuilder),
//     including rack mode: members keep their owned partitions up to the
//     quota, first by partition id then topic name; the rest is dealt one
//     partition at a time in (topic, partition) order, round robin over the
//     members below the minimum quota, then one each to the members at the
//     minimum (those that kept it first, then the others in the order they
//     reached it). Where Kafka walks a HashMap (which of several members
//     owning more than the minimum keeps one more), member order decides.
//   - With differing subscriptions (GeneralAssignmentBuilder), including
//     rack mode: the same partition for partition (see general.go for the
//     rules), except where Kafka's own answer is invalid: Kafka hands a
//     partition back to its previous-generation owner without checking
//     that it still subscribes to the topic, and this package then gives
//     the partition to the least-loaded subscriber instead; and where
//     Kafka never answers: its reassignment walk can hand one partition
//     back and forth between two members for ever (Kafka 4.4 included;
//     testdata/general-cycle-seed11042.req is such a group). Once a pass
//     of the walk starts in a state an earlier pass started in, this
//     package takes Kafka's reversal of an earlier movement only when the
//     partition it moves back is held by the member giving one up, so
//     every move lowers the imbalance and the walk ends (see walk in
//     general.go).
//
// Which builder applies follows Kafka's allSubscriptionsEqual: the
// constrained one only when every member sent the same subscription,
// topics that do not exist included. (Kafka compares against the first
// member its HashMap yields, so a first member with an empty subscription
// makes it skip that member; this package takes any difference as a
// difference.)
//
// Members are ordered by member id, as the consumer leader keys the
// subscriptions it hands the sticky assignors (static members included:
// only range and round robin put them first). Whatever the path, these
// guarantees hold:
//
//   - Validity: a member only receives partitions of topics it subscribes
//     to, no partition goes to two members, and every partition of a topic
//     with at least one subscriber is assigned.
//   - Balance, as Kafka's isBalanced defines it: no member holds two or more
//     partitions more than another member that subscribes to the topic of one
//     of them. With identical subscriptions that means counts differ by at
//     most one.
//   - Balance before stickiness, and stickiness: a partition stays with the
//     member that owned it unless balance (or, in rack mode, rack alignment)
//     needs it elsewhere. With identical subscriptions no more partitions move
//     than balance requires.
//   - No two-cycles: no partition of a topic moves from A to B while another
//     partition of the same topic moves from B to A (outside rack mode, where
//     realigning racks may swap partitions on purpose).
//
// # Where previous ownership comes from
//
// "sticky" reads StickyAssignor's user data (Kafka protocol encoding,
// big-endian): an array of {topic string, partitions []int32}, followed in v1
// by an int32 generation. User data that does not decode counts as no
// ownership. It writes the same v1 structure, with the request's generation,
// into every member's assignment user data.
//
// "cooperative-sticky" uses each member's owned partitions and owned
// generation; when a member reports no generation (-1), the generation comes
// from CooperativeStickyAssignor's user data, one big-endian int32.
//
// When no member reports anything (no user data for "sticky", no owned
// partitions for "cooperative-sticky"), both fall back to what the host
// assigned in the previous generation, so a group of clients that report
// nothing still stays sticky.
//
// Claims that conflict are settled per partition: the claim with the highest
// generation wins; when two members claim it in that same generation, neither
// keeps it. Claims on partitions that do not exist, on topics without
// subscribers, or on topics the claiming member no longer subscribes to, are
// dropped (after conflicts are settled, as in Kafka).
//
// "cooperative-sticky" returns the target assignment: the host withholds,
// for one generation, every partition that changes owner (KIP-429), so this
// package never removes them itself.
//
// # Rack awareness (KIP-881)
//
// Rack mode is decided for the whole group as Kafka does: some member has a
// rack that appears among the replica racks of the subscribed partitions,
// and not every partition has the same set of replica racks. A member without
// a rack matches every partition when its owned partitions are checked, and
// none when partitions are matched to racks. In rack mode an owned partition
// whose replicas are not on its owner's rack may move, and partitions
// without an owner go first to rack-matching members with spare quota, as
// Kafka's assignRackAwareRoundRobin deals them (partitions with the fewest
// rack-matching members first); with differing subscriptions, Kafka's
// general builder instead hands each to the least-loaded subscriber that
// is on one of its racks or has none, before dealing the rest without
// racks. Balance always wins over rack alignment.
//
// # How it stays fast
//
// Partitions are numbered globally, topic after topic in name order, and
// ownership is handled as runs rather than partition by partition: a run is
// an arithmetic progression of global numbers (start, stride, count), a
// contiguous range being stride 1. Kafka's round robin gives member i of M
// the numbers i, i+M, i+2M, ...: one run however many topics it spans.
// Claims are cut into runs (a member's partitions that continue one
// progression, topic after topic, stay one run), conflicts are settled per
// residue class of the common stride or, failing that, with one bit per
// partition, and the dealing works on runs too: while the set of members
// below the minimum does not change, member i of c takes every c-th free
// partition, which over a run of free partitions is again one run. A group
// whose members own such progressions therefore costs O(runs log runs +
// members log members) to decide, beyond one pass over the owned
// partitions.
//
// What it cannot shrink is the answer: Kafka's layout gives a member of a
// group with many topics one partition of each, and the response lists one
// entry per (member, topic). At 2,000 members over 500 topics that is a
// million entries, against 2,000 for contiguous ranges; writing them
// dominates the cost of such a group (see BENCHMARKS.md in this directory).
//
// A group whose members subscribe differently goes through Kafka's general
// builder partition by partition, which costs O(P log M) and more for
// every partition that has to move; its one sorted member set (by count,
// then member id) is a treap, and isBalanced and the least-loaded
// subscriber of a topic are cached until the next move, where Kafka
// rescans every member's partitions.
//
// # Output
//
// Every member of the request gets one abi.MemberAssignment, in request
// order, with topics in name order and partitions ascending. Partition slices
// (of different members, and of different topics of one member) share
// backing arrays with their capacity capped at their length, so appending to
// one copies it rather than overwriting a neighbour; callers must not write
// into them.
//
// # The grouped layout
//
// Both assignors declare the grouped layout (sdk/ABI.md section 7). Owned
// and previous entries over a topic list are read as runs: the usual one,
// Kafka's round-robin share of equally large topics (the same progression
// in each), is one claim whatever the number of topics. When the request
// carries topic lists, the cooperative assignor answers with them too: a
// member whose assignment is the same progression in each of consecutive
// equally large topics gets one entry over a list of those topics, and
// other neighbouring entries with equal partitions are grouped after the
// fact. Sticky user data names every topic, so the eager assignor answers
// with plain entries (the Rust port groups its eager answer as well, to
// spare a million allocations at java-large; the user data is the same).
// Expanded, either answer is the plain layout's.
package sticky

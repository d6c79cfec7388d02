// Package groupview is a consumer group as Kafka's client-side assignors see
// it: the members in Kafka's order, who subscribes to which topic, which
// topics have partitions to hand out and in what order, which racks members
// and brokers are on, and, once an assignor has decided who takes what, the
// abi.Response that says so. The built-in assignors (plugins/range,
// plugins/roundrobin, plugins/leaderrack) are written on top of it, so that
// each of these rules is stated once; plugins/sticky, which numbers
// partitions its own way (and orders members by member id, as Kafka's
// sticky assignors do), takes the assignable topics and the rack numbering
// from it.
//
// The built-in modules are its Rust port (plugins/internal/groupview/rust)
// under the Rust ports of those packages, which differential tests hold to
// the Go answers. It still compiles for GOOS=wasip1, so that a Go guest may
// link it, and imports only sdk/go/abi and the standard library: no os, no net, no
// wazero, no franz-go, and nothing else of this repository. It never imports
// plugins/internal/assignortest, which is for tests.
//
// # Slots
//
// A member's slot in a topic is its position among that topic's
// subscribers, in Kafka's member order. Assignors decide per slot, never per
// member id: View records the slot of every (member, subscribed topic) pair
// as it reads the request, so neither deciding nor writing the response
// looks anything up by name.
//
// # How it stays fast
//
// The target size is 2,000 members over 1,000,000 partitions. Nothing here
// allocates per partition beyond one int32, and nothing walks the partitions
// of a topic per member: a Layout keeps every partition id in one flat
// buffer, each slot's share is a window of it, and the response points into
// that buffer rather than copying it.
package groupview

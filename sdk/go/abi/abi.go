// Package abi is the assignment model of wasmassign and its binary codec,
// version 1. It is the one package shared by the host and by Go guests, so it
// must compile for GOOS=wasip1 and import nothing beyond encoding/binary,
// errors, fmt, math, slices, sort, unicode/utf8 and unsafe (to copy
// int32 lists as bytes; see native.go): no os, no net, no wazero.
//
// The byte layout is specified in sdk/ABI.md. This package is one
// implementation of it; guests in other languages implement the same layout
// from that file alone, and the golden vectors in testdata/abi/ hold every
// implementation to the same bytes.
//
// # Why indices, not names
//
// Members refer to topics by their index in Request.Topics, and responses refer
// to members by their index in Request.Members. A request for 2,000 members
// that each own partitions of 500 topics would otherwise carry a million topic
// names, and a guest would spend most of its time decoding and hashing them.
package abi

// Version is the ABI version this package speaks. A module's
// wasmassign_abi_version export must return it, and every request, response
// and description buffer starts with it.
const Version = 1

// RebalanceProtocol says how the members of a group hand partitions over.
type RebalanceProtocol uint8

const (
	// Eager members revoke everything before each rebalance (Kafka's classic
	// protocol). A plugin may move any partition.
	Eager RebalanceProtocol = 0
	// Cooperative members keep what they own across a rebalance (KIP-429).
	// The host withholds partitions that change owner for one generation, so
	// a plugin returns its target assignment either way.
	Cooperative RebalanceProtocol = 1
)

// String returns "eager" or "cooperative".
func (p RebalanceProtocol) String() string {
	switch p {
	case Eager:
		return "eager"
	case Cooperative:
		return "cooperative"
	}
	return "unknown"
}

// Request is what the host asks an assignor to solve.
type Request struct {
	// GroupID is the consumer group being rebalanced.
	GroupID string
	// Generation is the generation this assignment is for.
	Generation int32
	// Protocol is the client protocol name the members agreed on, such as
	// "range" or "cooperative-sticky".
	Protocol string
	// Assignor names the assignor to run, for modules that provide several.
	Assignor string
	// RebalanceProtocol is Cooperative when the group rebalances
	// incrementally.
	RebalanceProtocol RebalanceProtocol
	// Seed is the only source of randomness a deterministic assignor may use.
	// The host derives it from the request, so equal requests carry equal
	// seeds; the host also reseeds WASI random_get from it before each call.
	Seed uint64
	// Config is the operator's per-group plugin configuration.
	Config map[string]string
	// Brokers lists the cluster's brokers.
	Brokers []Broker
	// ReplicaSets holds the distinct broker-id lists that Partition.Replicas
	// and Partition.ISR refer to. Sharing them keeps a million-partition
	// request small.
	ReplicaSets [][]int32
	// Topics is the topic table. It holds every topic in the cluster metadata
	// that any member subscribes to, and every other topic name a member
	// mentions (a subscription to a topic that does not exist, or owned
	// partitions of a deleted topic), with Exists false.
	Topics []Topic
	// Members are the group's members, in the order Kafka's assignors sort
	// them: static members by instance id, then dynamic members by member id.
	Members []Member
	// TopicLists is the topic-list table of the grouped layout (sdk/ABI.md
	// section 7): an entry of a member's Owned or Previous whose Topic is
	// negative stands for the same partitions of every topic of
	// TopicLists[^Topic]. Each list is ascending, without repeats, and not
	// empty. It is nil in the plain layout; a request that carries it (even
	// empty) tells the assignor that its response may use topic lists too.
	TopicLists [][]int32
}

// Broker is one broker of the cluster.
type Broker struct {
	ID   int32
	Rack string // empty when the broker has no rack
}

// Topic is one entry of the request's topic table.
type Topic struct {
	Name string
	// ID is the topic's UUID, all zero when unknown.
	ID [16]byte
	// Exists is false for a name that members mention but the cluster
	// metadata does not have. Such a topic has no partitions.
	Exists bool
	// PartitionCount is the number of partitions; their ids are 0 to
	// PartitionCount-1.
	PartitionCount int32
	// Partitions is nil when the host has no placement for this topic, or
	// holds exactly PartitionCount entries, entry i describing partition i.
	Partitions []Partition
}

// Partition is the placement of one partition. Replicas and ISR are indices
// into Request.ReplicaSets.
type Partition struct {
	Leader   int32 // broker id, -1 when unknown
	Replicas uint32
	ISR      uint32
}

// Member is one member of the group.
type Member struct {
	MemberID   string
	InstanceID string // empty for a dynamic member
	ClientID   string
	ClientHost string
	// Rack is the member's rack: the one the client sent (KIP-881) or the one
	// the host inferred for it. Empty when unknown.
	Rack string
	// Cooperative is true when every protocol the member offered is
	// cooperative, so it keeps its partitions across a rebalance.
	Cooperative bool
	// Topics are the member's subscribed topics, as indices into
	// Request.Topics, ascending.
	Topics []int32
	// OwnedGeneration is the generation in which the member last held Owned,
	// or -1 when the member did not say.
	OwnedGeneration int32
	// Owned is what the member reports it owns (subscription v1+).
	Owned []TopicPartitions
	// UserData is the raw user data of the member's subscription.
	UserData []byte
	// Previous is what the host assigned this member in the previous
	// generation. Eager clients report nothing owned, so this is how sticky
	// assignors see the past.
	Previous []TopicPartitions
}

// TopicPartitions is a set of partitions of one topic or, in the grouped
// layout, the same set of partitions of each topic of a topic list.
type TopicPartitions struct {
	// Topic is an index into Request.Topics when it is not negative. A
	// negative Topic, only in the grouped layout, refers to the topic list
	// ^Topic of the request's or response's TopicLists (see ListRef).
	Topic      int32
	Partitions []int32 // partition ids
}

// Response is an assignor's answer: an assignment per member, or an error.
type Response struct {
	// Error, when not empty, reports that the assignor could not assign. The
	// host then falls back to another assignor.
	Error string
	// Members holds the assignment of each member that receives something.
	// A member left out receives nothing.
	Members []MemberAssignment
	// TopicLists is the response's own topic-list table in the grouped
	// layout, which entries with a negative Topic refer to (see
	// Request.TopicLists); nil in the plain layout. An assignor may use it
	// only when its request carried TopicLists.
	TopicLists [][]int32
}

// MemberAssignment is what one member receives.
type MemberAssignment struct {
	Member     int32 // index into Request.Members
	Partitions []TopicPartitions
	// UserData is passed to the member in its ConsumerProtocolAssignment.
	UserData []byte
}

// Modes is a set of rebalance protocols an assignor supports.
type Modes uint8

const (
	// ModeEager means the assignor can serve eager groups.
	ModeEager Modes = 1 << 0
	// ModeCooperative means the assignor can serve cooperative groups.
	ModeCooperative Modes = 1 << 1
)

// Has reports whether m includes p.
func (m Modes) Has(p RebalanceProtocol) bool {
	switch p {
	case Eager:
		return m&ModeEager != 0
	case Cooperative:
		return m&ModeCooperative != 0
	}
	return false
}

// Strings returns the mode names, eager before cooperative.
func (m Modes) Strings() []string {
	var s []string
	if m&ModeEager != 0 {
		s = append(s, "eager")
	}
	if m&ModeCooperative != 0 {
		s = append(s, "cooperative")
	}
	return s
}

// Description is what a module says about itself.
type Description struct {
	Assignors []AssignorInfo
}

// AssignorInfo describes one assignor of a module.
type AssignorInfo struct {
	Name    string
	Version string
	// Protocols are the client protocol names this assignor can answer for.
	Protocols []string
	// Modes are the rebalance protocols it supports.
	Modes Modes
	// MayLeaveUnassigned declares that the assignor may leave subscribed
	// partitions unassigned on purpose. Without it the host treats an
	// unassigned subscribed partition as invalid output.
	MayLeaveUnassigned bool
	// Grouped declares that the assignor reads and writes the grouped
	// layout (sdk/ABI.md section 7): the host then sends it requests with
	// topic lists and accepts responses with topic lists from it, and from
	// no other assignor.
	Grouped bool
	// Description is one line for operators.
	Description string
}

// TopicIndex maps each topic name of r to its index in r.Topics.
func (r *Request) TopicIndex() map[string]int32 {
	m := make(map[string]int32, len(r.Topics))
	for i, t := range r.Topics {
		m[t.Name] = int32(i)
	}
	return m
}

// Replicas returns the replica broker ids of partition p of topic t, or nil
// when the host sent no placement for it.
func (r *Request) Replicas(t, p int32) []int32 {
	parts := r.Topics[t].Partitions
	if p < 0 || int(p) >= len(parts) {
		return nil
	}
	return r.ReplicaSets[parts[p].Replicas]
}

// Package scenario reads the JSON scenario files that `wasmassign simulate`,
// `inspect` and `bench` run assignor plugins over, turns them into an
// abi.Request, and formats what the plugin answered.
//
// A scenario describes one rebalance without a cluster: the brokers and their
// racks, the topics and where their partitions live, and the group's members
// with their subscriptions, owned partitions and the assignment the
// coordinator gave them last time. The format is documented field by field on
// Scenario, Broker, Topic, Partition and Member; other tools write it, so its
// key names are fixed.
//
// A scenario may instead generate its topics and members from a seed, and
// describe a sequence of rebalances in which each round's result is fed
// back as the next round's owned partitions (Generate, Sequence). That keeps
// a group of a million partitions, or a hundred randomized rounds, to a few
// lines, and every tool that runs a single rebalance runs its first round.
//
// Every error names the JSON field at fault on one line, such as
// `members[2].owned["t0"]: partition 3 listed twice`, because the person
// reading it is editing the file by hand.
//
// This package is pure data handling. It must never import the runtime, the
// coordinator, wazero or anything that touches the network; it imports only
// the abi package and the standard library.
package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// MaxPartitions caps the partitions of all topics of one scenario together.
// A typo such as an extra zero in partition_count would otherwise make the
// host allocate gigabytes before the plugin even runs.
const MaxPartitions = 1 << 26

// Scenario is one scenario file. Fields mirror the JSON keys; the comments
// give each key's default. Parse fills the defaults that do not depend on the
// caller (generation, member generation, protocol from assignor); the others
// are resolved when the request is built, so a Scenario written back with
// encoding/json reads the same.
type Scenario struct {
	// Group is the consumer group id. Optional; it is passed to the plugin
	// as is, and may be empty.
	Group string `json:"group,omitempty"`
	// Generation is the generation the assignment is for. Defaults to 1, the
	// generation of a group's first completed rebalance in Kafka's classic
	// protocol. Must be >= 0.
	Generation int32 `json:"generation"`
	// Protocol is the client protocol name the members agreed on, such as
	// "range" or "cooperative-sticky". When absent it defaults to Assignor.
	// When both are absent it stays empty and the caller chooses (the
	// simulate command takes the default assignor's first protocol).
	Protocol string `json:"protocol,omitempty"`
	// Assignor names the assignor to run. When absent it stays empty: the
	// caller resolves it from Protocol with its plugin registry.
	Assignor string `json:"assignor,omitempty"`
	// RebalanceProtocol is "eager" or "cooperative". When absent it is
	// cooperative if Protocol starts with "cooperative", otherwise eager; see
	// ResolvedRebalanceProtocol.
	RebalanceProtocol string `json:"rebalance_protocol,omitempty"`
	// Config is the per-group plugin configuration, passed through.
	Config map[string]string `json:"config,omitempty"`
	// Brokers lists the cluster's brokers in the order that partition_count
	// placement uses. Optional: without brokers, partitions have no
	// placement.
	Brokers []Broker `json:"brokers,omitempty"`
	// Topics lists the cluster's topics. Required (it may be empty).
	Topics []Topic `json:"topics"`
	// Members lists the group's members in any order. Required (it may be
	// empty).
	Members []Member `json:"members"`
	// Generate generates the topics and members by rule, and may make the
	// scenario a sequence of rebalances; see Generate. With it, topics and
	// members must be absent (or null). Request builds the first
	// rebalance; Sequence steps through all of them.
	Generate *Generate `json:"generate,omitempty"`
}

// Broker is one broker of the scenario's cluster.
type Broker struct {
	// ID is the broker id, >= 0 and unique.
	ID int32 `json:"id"`
	// Rack is the broker's rack; empty when it has none.
	Rack string `json:"rack,omitempty"`
}

// Topic is one topic of the scenario's cluster. It gives its partitions in
// exactly one of two ways: Partitions lists each partition's placement, or
// PartitionCount asks for that many partitions placed round the brokers.
//
// # Generated placement
//
// Brokers are taken in file order b[0..n-1]. A running offset starts at 0 and
// grows by each topic's partition count, over all topics in file order,
// including those with explicit partitions. Partition p of a topic at offset o
// has the replicas b[(p+j+o) % n] for j < ReplicationFactor, and its first
// replica leads. A replication factor above the broker count wraps round, so
// brokers repeat, as in Kafka's own test fixtures. With no brokers, partitions
// have no placement.
type Topic struct {
	// Name is the topic name, non-empty and unique.
	Name string `json:"name"`
	// Partitions lists every partition; their ids must be exactly
	// 0..len-1, in any order. Null means absent; an empty list is a topic
	// with no partitions, so it is kept when written back.
	Partitions []Partition `json:"partitions"`
	// PartitionCount is the number of partitions to generate, >= 0.
	PartitionCount *int32 `json:"partition_count,omitempty"`
	// ReplicationFactor is the number of replicas of each generated
	// partition, >= 1. Defaults to 1. Only valid with PartitionCount.
	ReplicationFactor *int32 `json:"replication_factor,omitempty"`
}

// Partition is the placement of one partition of a topic with explicit
// partitions.
type Partition struct {
	// ID is the partition id.
	ID int32 `json:"id"`
	// Leader is the leader's broker id, or -1 for none. Defaults to the
	// first replica, or -1 without replicas. It must be -1 or a replica.
	Leader *int32 `json:"leader,omitempty"`
	// Replicas are the replica broker ids. When the scenario lists brokers,
	// each must be one of them.
	Replicas []int32 `json:"replicas"`
	// ISR is the in-sync replica set, a subset of Replicas. Nil (absent or
	// null) means all replicas are in sync; an empty list means none is, so
	// the key is written back even when empty.
	ISR []int32 `json:"isr"`
}

// Member is one member of the group.
type Member struct {
	// ID is the member id. Required, unique.
	ID string `json:"id"`
	// InstanceID is the group.instance.id of a static member (KIP-345);
	// empty for a dynamic member. Unique when set.
	InstanceID string `json:"instance_id,omitempty"`
	// ClientID is the client.id the member connected with.
	ClientID string `json:"client_id,omitempty"`
	// Host is the client's address.
	Host string `json:"host,omitempty"`
	// Rack is the member's rack (KIP-881); empty when unknown.
	Rack string `json:"rack,omitempty"`
	// Topics is the subscription. Required (it may be empty). Duplicates are
	// ignored; a topic missing from Scenario.Topics is legal, and assignors
	// skip it as Kafka's do.
	Topics []string `json:"topics"`
	// Owned maps topic names to the partitions the member reports it owns
	// (subscription v1+). A topic missing from Scenario.Topics is legal: a
	// member may still claim a deleted topic.
	Owned map[string][]int32 `json:"owned,omitempty"`
	// Generation is the generation of the Owned claim (subscription v2+).
	// Defaults to -1, "not reported"; must be >= -1.
	Generation int32 `json:"generation"`
	// UserData is the subscription's user data, standard base64 with
	// padding.
	UserData string `json:"user_data,omitempty"`
	// Previous maps topic names to what the coordinator assigned this member
	// in the previous generation. No partition may appear in the Previous of
	// two members.
	Previous map[string][]int32 `json:"previous,omitempty"`
}

// file is the top level of a scenario file as first decoded. Brokers, topics
// and members stay raw so that each element is decoded on its own and an
// error can say which element it is in.
type file struct {
	Group             string            `json:"group"`
	Generation        *int32            `json:"generation"`
	Protocol          string            `json:"protocol"`
	Assignor          string            `json:"assignor"`
	RebalanceProtocol string            `json:"rebalance_protocol"`
	Config            map[string]string `json:"config"`
	Brokers           []json.RawMessage `json:"brokers"`
	Topics            []json.RawMessage `json:"topics"`
	Members           []json.RawMessage `json:"members"`
	Generate          json.RawMessage   `json:"generate"`
}

// Parse decodes and validates a scenario. Unknown keys are errors, so that a
// misspelt key names itself instead of being ignored. The error, if any, is
// one line naming the field at fault.
func Parse(data []byte) (*Scenario, error) {
	var f file
	if err := decodeStrict(data, &f); err != nil {
		return nil, jsonError("", data, err)
	}
	s := &Scenario{
		Group:             f.Group,
		Generation:        1,
		Protocol:          f.Protocol,
		Assignor:          f.Assignor,
		RebalanceProtocol: f.RebalanceProtocol,
		Config:            f.Config,
	}
	if f.Generation != nil {
		s.Generation = *f.Generation
	}
	if s.Protocol == "" {
		s.Protocol = s.Assignor
	}
	if len(f.Generate) > 0 && string(f.Generate) != "null" {
		s.Generate = &Generate{}
		if err := decodeStrict(f.Generate, s.Generate); err != nil {
			return nil, jsonError("generate", f.Generate, err)
		}
	}
	if s.Generate == nil && f.Topics == nil {
		return nil, errors.New("topics: required")
	}
	if s.Generate == nil && f.Members == nil {
		return nil, errors.New("members: required")
	}
	if f.Brokers != nil {
		s.Brokers = make([]Broker, len(f.Brokers))
		for i, raw := range f.Brokers {
			if err := decodeStrict(raw, &s.Brokers[i]); err != nil {
				return nil, jsonError(fmt.Sprintf("brokers[%d]", i), raw, err)
			}
		}
	}
	if f.Topics != nil {
		s.Topics = make([]Topic, len(f.Topics))
	}
	for i, raw := range f.Topics {
		if err := decodeStrict(raw, &s.Topics[i]); err != nil {
			return nil, jsonError(fmt.Sprintf("topics[%d]", i), raw, err)
		}
	}
	if f.Members != nil {
		s.Members = make([]Member, len(f.Members))
	}
	for i, raw := range f.Members {
		m := &s.Members[i]
		m.Generation = -1
		if err := decodeStrict(raw, m); err != nil {
			return nil, jsonError(fmt.Sprintf("members[%d]", i), raw, err)
		}
	}
	if _, err := s.check(); err != nil {
		return nil, err
	}
	return s, nil
}

// Load reads and parses the scenario file at path. Parse errors are prefixed
// with the path.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // *PathError already names the file
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// decodeStrict decodes exactly one JSON value into v, refusing unknown keys
// and anything after the value.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if err == io.EOF {
			return errors.New("empty input")
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// jsonError rewrites an encoding/json error as a one-line error that names
// the field, prefixed with path (the element being decoded, or "" for the
// top level).
func jsonError(path string, data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := position(data, syn.Offset)
		return fmt.Errorf("%sline %d, column %d: %s", prefix(path), line, col, syn.Error())
	case errors.As(err, &typ):
		field := joinPath(path, typ.Field)
		if field == "" {
			field = "scenario"
		}
		return fmt.Errorf("%s: expected %s, got %s", field, typeName(typ.Type.String()), typ.Value)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if path == "" {
		return errors.New(msg)
	}
	return fmt.Errorf("%s: %s", path, msg)
}

func prefix(path string) string {
	if path == "" {
		return ""
	}
	return path + ": "
}

// joinPath joins an element path such as "topics[1]" and the dotted key path
// encoding/json reports inside it, such as "partitions.id".
func joinPath(path, field string) string {
	switch {
	case path == "":
		return field
	case field == "":
		return path
	}
	return path + "." + field
}

// typeName turns Go type names into the words a scenario author knows.
func typeName(goType string) string {
	goType = strings.TrimPrefix(goType, "*")
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "scenario."):
		return "an object"
	case goType == "string":
		return "a string"
	case goType == "int32":
		return "a 32-bit integer"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	}
	return goType
}

// position converts a byte offset into a 1-based line and column.
func position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - (bytes.LastIndexByte(before, '\n') + 1)
	if col < 1 {
		col = 1
	}
	return line, col
}

package abi_test

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// This file is the JSON twin of the ABI model: the language-neutral form of
// the golden vectors in testdata/abi, documented in testdata/abi/README.md.
// Field names are the snake_case names of sdk/ABI.md. Every list is an array,
// never null, and every field is present, so a reader in C or AssemblyScript
// needs no defaults. Three encodings avoid JSON's weak spots: u64 as a
// decimal string (JavaScript numbers stop at 2^53), byte strings as base64,
// topic ids as 32 lowercase hex digits.

// vectorFile is one <name>.json file. A valid vector has Value; an invalid
// one has Error, a substring of the Go decoder's message.
type vectorFile struct {
	Kind    string `json:"kind"` // "request", "response" or "description"
	Comment string `json:"comment"`
	Value   any    `json:"value,omitempty"`
	Error   string `json:"error,omitempty"`
}

type jsonRequest struct {
	GroupID           string       `json:"group_id"`
	Generation        int32        `json:"generation"`
	Protocol          string       `json:"protocol"`
	Assignor          string       `json:"assignor"`
	RebalanceProtocol string       `json:"rebalance_protocol"` // "eager" or "cooperative"
	Seed              string       `json:"seed"`               // u64, decimal
	Config            []jsonConfig `json:"config"`             // in wire order: keys ascending by bytes
	Brokers           []jsonBroker `json:"brokers"`
	ReplicaSets       [][]int32    `json:"replica_sets"`
	Topics            []jsonTopic  `json:"topics"`
	Members           []jsonMember `json:"members"`
}

type jsonConfig struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type jsonBroker struct {
	ID   int32  `json:"id"`
	Rack string `json:"rack"`
}

type jsonTopic struct {
	Name           string `json:"name"`
	TopicID        string `json:"topic_id"` // 32 hex digits, byte 0 first
	Exists         bool   `json:"exists"`   // flags bit 0
	PartitionCount int32  `json:"partition_count"`
	// Placement is null when flags bit 1 is clear, else partition_count
	// entries.
	Placement *[]jsonPartition `json:"placement"`
}

type jsonPartition struct {
	Leader   int32  `json:"leader"`
	Replicas uint32 `json:"replicas"`
	ISR      uint32 `json:"isr"`
}

type jsonMember struct {
	MemberID         string   `json:"member_id"`
	InstanceID       string   `json:"instance_id"`
	ClientID         string   `json:"client_id"`
	ClientHost       string   `json:"client_host"`
	Rack             string   `json:"rack"`
	Cooperative      bool     `json:"cooperative"` // flags bit 0
	SubscribedTopics []int32  `json:"subscribed_topics"`
	OwnedGeneration  int32    `json:"owned_generation"`
	Owned            []jsonTP `json:"owned"`
	UserData         string   `json:"user_data"` // base64, standard alphabet, padded
	Previous         []jsonTP `json:"previous"`
}

type jsonTP struct {
	Topic      uint32  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// jsonResponse has Message when Status is "error" and Assignments when it is
// "ok", never both.
type jsonResponse struct {
	Status      string            `json:"status"`
	Message     *string           `json:"message,omitempty"`
	Assignments *[]jsonAssignment `json:"assignments,omitempty"`
}

type jsonAssignment struct {
	Member     uint32   `json:"member"`
	Partitions []jsonTP `json:"partitions"`
	UserData   string   `json:"user_data"`
}

type jsonDescription struct {
	Assignors []jsonAssignor `json:"assignors"`
}

type jsonAssignor struct {
	Name               string   `json:"name"`
	Version            string   `json:"version"`
	Protocols          []string `json:"protocols"`
	Modes              []string `json:"modes"`                // subset of ["eager", "cooperative"], in that order
	MayLeaveUnassigned bool     `json:"may_leave_unassigned"` // flags bit 0
	Description        string   `json:"description"`
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func tpsToJSON(tps []abi.TopicPartitions) []jsonTP {
	out := []jsonTP{}
	for _, tp := range tps {
		out = append(out, jsonTP{Topic: uint32(tp.Topic), Partitions: orEmpty(tp.Partitions)})
	}
	return out
}

func tpsFromJSON(tps []jsonTP) []abi.TopicPartitions {
	var out []abi.TopicPartitions
	for _, tp := range tps {
		out = append(out, abi.TopicPartitions{Topic: int32(tp.Topic), Partitions: nilIfEmpty(tp.Partitions)})
	}
	return out
}

func requestToJSON(r *abi.Request) jsonRequest {
	j := jsonRequest{
		GroupID:           r.GroupID,
		Generation:        r.Generation,
		Protocol:          r.Protocol,
		Assignor:          r.Assignor,
		RebalanceProtocol: r.RebalanceProtocol.String(),
		Seed:              strconv.FormatUint(r.Seed, 10),
		Config:            []jsonConfig{},
		Brokers:           []jsonBroker{},
		ReplicaSets:       [][]int32{},
		Topics:            []jsonTopic{},
		Members:           []jsonMember{},
	}
	// Wire order, which the decoder enforces: ascending by bytes.
	for _, k := range slices.Sorted(maps.Keys(r.Config)) {
		j.Config = append(j.Config, jsonConfig{Key: k, Value: r.Config[k]})
	}
	for _, b := range r.Brokers {
		j.Brokers = append(j.Brokers, jsonBroker(b))
	}
	for _, rs := range r.ReplicaSets {
		j.ReplicaSets = append(j.ReplicaSets, orEmpty(rs))
	}
	for _, t := range r.Topics {
		jt := jsonTopic{Name: t.Name, TopicID: hex.EncodeToString(t.ID[:]), Exists: t.Exists, PartitionCount: t.PartitionCount}
		if t.Partitions != nil {
			ps := []jsonPartition{}
			for _, p := range t.Partitions {
				ps = append(ps, jsonPartition(p))
			}
			jt.Placement = &ps
		}
		j.Topics = append(j.Topics, jt)
	}
	for _, m := range r.Members {
		j.Members = append(j.Members, jsonMember{
			MemberID:         m.MemberID,
			InstanceID:       m.InstanceID,
			ClientID:         m.ClientID,
			ClientHost:       m.ClientHost,
			Rack:             m.Rack,
			Cooperative:      m.Cooperative,
			SubscribedTopics: orEmpty(m.Topics),
			OwnedGeneration:  m.OwnedGeneration,
			Owned:            tpsToJSON(m.Owned),
			UserData:         base64.StdEncoding.EncodeToString(m.UserData),
			Previous:         tpsToJSON(m.Previous),
		})
	}
	return j
}

// requestFromJSON returns the request in the form DecodeRequest gives it, so
// that the two compare with reflect.DeepEqual.
func requestFromJSON(j jsonRequest) (*abi.Request, error) {
	r := &abi.Request{
		GroupID:    j.GroupID,
		Generation: j.Generation,
		Protocol:   j.Protocol,
		Assignor:   j.Assignor,
	}
	switch j.RebalanceProtocol {
	case "eager":
		r.RebalanceProtocol = abi.Eager
	case "cooperative":
		r.RebalanceProtocol = abi.Cooperative
	default:
		return nil, fmt.Errorf("rebalance_protocol %q is neither eager nor cooperative", j.RebalanceProtocol)
	}
	seed, err := strconv.ParseUint(j.Seed, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	r.Seed = seed
	for i, c := range j.Config {
		if i > 0 && c.Key <= j.Config[i-1].Key {
			return nil, fmt.Errorf("config key %q is not in ascending byte order", c.Key)
		}
		if r.Config == nil {
			r.Config = map[string]string{}
		}
		r.Config[c.Key] = c.Value
	}
	for _, b := range j.Brokers {
		r.Brokers = append(r.Brokers, abi.Broker(b))
	}
	for _, rs := range j.ReplicaSets {
		r.ReplicaSets = append(r.ReplicaSets, nilIfEmpty(rs))
	}
	for _, jt := range j.Topics {
		t := abi.Topic{Name: jt.Name, Exists: jt.Exists, PartitionCount: jt.PartitionCount}
		id, err := hex.DecodeString(jt.TopicID)
		if err != nil || len(id) != len(t.ID) {
			return nil, fmt.Errorf("topic %q: topic_id %q is not 32 hex digits", jt.Name, jt.TopicID)
		}
		copy(t.ID[:], id)
		if jt.Placement != nil {
			t.Partitions = []abi.Partition{}
			for _, p := range *jt.Placement {
				t.Partitions = append(t.Partitions, abi.Partition(p))
			}
		}
		r.Topics = append(r.Topics, t)
	}
	for _, jm := range j.Members {
		ud, err := base64.StdEncoding.DecodeString(jm.UserData)
		if err != nil {
			return nil, fmt.Errorf("member %q: user_data: %w", jm.MemberID, err)
		}
		r.Members = append(r.Members, abi.Member{
			MemberID:        jm.MemberID,
			InstanceID:      jm.InstanceID,
			ClientID:        jm.ClientID,
			ClientHost:      jm.ClientHost,
			Rack:            jm.Rack,
			Cooperative:     jm.Cooperative,
			Topics:          nilIfEmpty(jm.SubscribedTopics),
			OwnedGeneration: jm.OwnedGeneration,
			Owned:           tpsFromJSON(jm.Owned),
			UserData:        nilIfEmpty(ud),
			Previous:        tpsFromJSON(jm.Previous),
		})
	}
	return r, nil
}

func responseToJSON(r *abi.Response) jsonResponse {
	if r.Error != "" {
		msg := r.Error
		return jsonResponse{Status: "error", Message: &msg}
	}
	as := []jsonAssignment{}
	for _, m := range r.Members {
		as = append(as, jsonAssignment{
			Member:     uint32(m.Member),
			Partitions: tpsToJSON(m.Partitions),
			UserData:   base64.StdEncoding.EncodeToString(m.UserData),
		})
	}
	return jsonResponse{Status: "ok", Assignments: &as}
}

func responseFromJSON(j jsonResponse) (*abi.Response, error) {
	switch {
	case j.Status == "error" && j.Message != nil && j.Assignments == nil:
		return &abi.Response{Error: *j.Message}, nil
	case j.Status == "ok" && j.Message == nil && j.Assignments != nil:
		r := &abi.Response{}
		for _, a := range *j.Assignments {
			ud, err := base64.StdEncoding.DecodeString(a.UserData)
			if err != nil {
				return nil, fmt.Errorf("assignment for member %d: user_data: %w", a.Member, err)
			}
			r.Members = append(r.Members, abi.MemberAssignment{
				Member:     int32(a.Member),
				Partitions: tpsFromJSON(a.Partitions),
				UserData:   nilIfEmpty(ud),
			})
		}
		return r, nil
	}
	return nil, fmt.Errorf("status %q needs exactly one of message (error) or assignments (ok)", j.Status)
}

func descriptionToJSON(d *abi.Description) jsonDescription {
	j := jsonDescription{Assignors: []jsonAssignor{}}
	for _, a := range d.Assignors {
		j.Assignors = append(j.Assignors, jsonAssignor{
			Name:               a.Name,
			Version:            a.Version,
			Protocols:          orEmpty(a.Protocols),
			Modes:              orEmpty(a.Modes.Strings()),
			MayLeaveUnassigned: a.MayLeaveUnassigned,
			Description:        a.Description,
		})
	}
	return j
}

func descriptionFromJSON(j jsonDescription) (*abi.Description, error) {
	d := &abi.Description{}
	for _, ja := range j.Assignors {
		a := abi.AssignorInfo{
			Name:               ja.Name,
			Version:            ja.Version,
			Protocols:          nilIfEmpty(ja.Protocols),
			MayLeaveUnassigned: ja.MayLeaveUnassigned,
			Description:        ja.Description,
		}
		for _, m := range ja.Modes {
			switch m {
			case "eager":
				a.Modes |= abi.ModeEager
			case "cooperative":
				a.Modes |= abi.ModeCooperative
			default:
				return nil, fmt.Errorf("assignor %q: unknown mode %q", ja.Name, m)
			}
		}
		d.Assignors = append(d.Assignors, a)
	}
	return d, nil
}

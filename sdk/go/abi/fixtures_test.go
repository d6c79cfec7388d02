package abi_test

import "github.com/wasmassign/wasmassign/sdk/go/abi"

// The fixtures below are hand-written values shared by the round-trip tables
// and the golden vectors. Each is built fresh on every call, so a test that
// modifies one cannot leak into another.

// minimalRequest is the smallest request that asks for real work: one topic
// without placement and one dynamic member subscribed to it.
func minimalRequest() *abi.Request {
	return &abi.Request{
		GroupID:    "g",
		Generation: 1,
		Protocol:   "range",
		Assignor:   "range",
		Topics:     []abi.Topic{{Name: "t", Exists: true, PartitionCount: 2}},
		Members: []abi.Member{{
			MemberID:        "m-1",
			ClientID:        "c",
			ClientHost:      "/127.0.0.1",
			Topics:          []int32{0},
			OwnedGeneration: -1,
		}},
	}
}

// fullRequest sets every field of the layout: config with several keys,
// brokers with and without racks, shared replica sets, topics with and
// without placement, a deleted topic that a member still owns, a static and a
// dynamic member, owned partitions, user data and a previous assignment.
func fullRequest() *abi.Request {
	return &abi.Request{
		GroupID:           "orders-consumers",
		Generation:        42,
		Protocol:          "cooperative-sticky",
		Assignor:          "rack-sticky",
		RebalanceProtocol: abi.Cooperative,
		Seed:              0xdecafbad12345678,
		Config: map[string]string{
			"sticky":      "on",
			"max.skew":    "1",
			"prefer.rack": "true",
		},
		Brokers: []abi.Broker{
			{ID: 1, Rack: "eu-west-1a"},
			{ID: 2, Rack: "eu-west-1b"},
			{ID: 3},
		},
		ReplicaSets: [][]int32{{1, 2}, {2, 3}, {2}},
		Topics: []abi.Topic{
			{
				Name:           "orders",
				ID:             [16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10},
				Exists:         true,
				PartitionCount: 3,
				Partitions: []abi.Partition{
					{Leader: 1, Replicas: 0, ISR: 0},
					{Leader: 2, Replicas: 1, ISR: 2},
					{Leader: -1, Replicas: 1, ISR: 2},
				},
			},
			{Name: "payments", Exists: true, PartitionCount: 2},
			{Name: "legacy"},
		},
		Members: []abi.Member{
			{
				MemberID:        "consumer-b-5d1e",
				InstanceID:      "host-a",
				ClientID:        "billing",
				ClientHost:      "/10.0.0.1",
				Rack:            "eu-west-1a",
				Cooperative:     true,
				Topics:          []int32{0, 1},
				OwnedGeneration: 41,
				Owned:           []abi.TopicPartitions{{Topic: 0, Partitions: []int32{0, 2}}, {Topic: 2, Partitions: []int32{7}}},
				UserData:        []byte{0x00, 0x01, 0xfe, 0xff},
				Previous:        []abi.TopicPartitions{{Topic: 0, Partitions: []int32{0, 2}}},
			},
			{
				MemberID:        "consumer-a-91f0",
				ClientID:        "billing",
				ClientHost:      "/10.0.0.2",
				Topics:          []int32{0},
				OwnedGeneration: -1,
				Previous:        []abi.TopicPartitions{{Topic: 0, Partitions: []int32{1}}, {Topic: 1, Partitions: []int32{0, 1}}},
			},
		},
	}
}

// missingTopicRequest has a member subscribed to a topic the cluster does not
// have, next to one that exists.
func missingTopicRequest() *abi.Request {
	return &abi.Request{
		GroupID:    "g",
		Generation: 3,
		Protocol:   "roundrobin",
		Assignor:   "roundrobin",
		Seed:       7,
		Topics: []abi.Topic{
			{Name: "present", Exists: true, PartitionCount: 1},
			{Name: "absent"},
		},
		Members: []abi.Member{{
			MemberID:        "m-1",
			ClientID:        "c",
			Topics:          []int32{0, 1},
			OwnedGeneration: 2,
			Owned:           []abi.TopicPartitions{{Topic: 1, Partitions: []int32{0}}},
		}},
	}
}

// okResponse assigns to two of three members, one with user data.
func okResponse() *abi.Response {
	return &abi.Response{Members: []abi.MemberAssignment{
		{Member: 0, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{0, 2}}, {Topic: 1, Partitions: []int32{1}}}},
		{Member: 2, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{1}}}, UserData: []byte("v1")},
	}}
}

// errorResponse is an assignor giving up.
func errorResponse() *abi.Response {
	return &abi.Response{Error: "rack-sticky: no broker racks in the request"}
}

// twoAssignors is a module offering an eager-only and a two-mode assignor.
func twoAssignors() *abi.Description {
	return &abi.Description{Assignors: []abi.AssignorInfo{
		{
			Name:        "range",
			Version:     "1.0.0",
			Protocols:   []string{"range"},
			Modes:       abi.ModeEager,
			Description: "Kafka's RangeAssignor, per topic",
		},
		{
			Name:               "rack-sticky",
			Version:            "0.3.1",
			Protocols:          []string{"cooperative-sticky", "sticky"},
			Modes:              abi.ModeEager | abi.ModeCooperative,
			MayLeaveUnassigned: true,
			Description:        "sticky, keeps replicas rack-local",
		},
	}}
}

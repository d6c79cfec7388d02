//go:build wasip1

// Command kit is the Go SDK's conformance kit module (sdk/KIT.md): the five
// kit assignors, written with the Go SDK's public API only (guest.Register,
// guest.Logf, the abi models and codec). internal/conformance/kit loads the built
// kit.wasm next to the other SDKs' and checks that they behave identically.
// Build it from sdk/go with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o kit/kit.wasm ./kit
package main

import (
	"encoding/binary"
	"hash/fnv"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
	"github.com/wasmassign/wasmassign/sdk/go/guest"
)

// sdkVersion is the version every kit assignor reports. The Go SDK has no
// version constant of its own yet; this one follows the other SDKs' 0.1.0.
const sdkVersion = "0.1.0"

func info(name, what string) abi.AssignorInfo {
	return abi.AssignorInfo{
		Name:        name,
		Version:     sdkVersion,
		Protocols:   []string{"kit"},
		Modes:       abi.ModeEager | abi.ModeCooperative,
		Description: "conformance kit: " + what + " (Go SDK)",
	}
}

func init() {
	guest.Register(info("kit-roundrobin", "Kafka round robin"), func(req *abi.Request) (*abi.Response, error) {
		return roundRobin(req), nil
	})
	guest.Register(info("kit-roundtrip", "round robin plus the re-encoded request's hash"), roundTrip)
	guest.Register(info("kit-error", "always reports an error"), func(req *abi.Request) (*abi.Response, error) {
		// An error response, not a Go error: the guest package prefixes Go
		// errors with the assignor's name, and the kit's message is exact.
		return &abi.Response{Error: "kit error: " + req.GroupID}, nil
	})
	guest.Register(info("kit-log", "logs one line, then round robin"), func(req *abi.Request) (*abi.Response, error) {
		guest.Logf(guest.LevelInfo, "kit log: %s", req.GroupID)
		return roundRobin(req), nil
	})
	guest.Register(info("kit-userdata", "round robin echoing user data"), func(req *abi.Request) (*abi.Response, error) {
		resp := roundRobin(req)
		for i := range resp.Members {
			resp.Members[i].UserData = req.Members[i].UserData
		}
		return resp, nil
	})
}

// roundTrip answers as roundRobin, with member 0's user data the FNV-1a 64
// hash of the request as this SDK re-encodes it.
func roundTrip(req *abi.Request) (*abi.Response, error) {
	resp := roundRobin(req)
	if len(resp.Members) > 0 {
		h := fnv.New64a()
		h.Write(abi.AppendRequest(nil, req))
		resp.Members[0].UserData = binary.LittleEndian.AppendUint64(nil, h.Sum64())
	}
	return resp, nil
}

// roundRobin is Kafka's round robin over the request's member order and
// topic-table order (sdk/KIT.md). Every member gets an entry, possibly
// empty. Within one topic the iterator visits the topic's subscribers in a
// fixed cycle, so subscriber k after the start takes partitions k, k+S, ...
func roundRobin(req *abi.Request) *abi.Response {
	resp := &abi.Response{Members: make([]abi.MemberAssignment, len(req.Members))}
	subs := make([][]int32, len(req.Topics))
	for m, mem := range req.Members {
		resp.Members[m].Member = int32(m)
		for _, t := range mem.Topics {
			subs[t] = append(subs[t], int32(m))
		}
	}
	cursor := int32(0)
	for t, topic := range req.Topics {
		s := subs[t]
		n := int(topic.PartitionCount)
		if !topic.Exists || n == 0 || len(s) == 0 {
			continue
		}
		j := 0
		for j < len(s) && s[j] < cursor {
			j++
		}
		if j == len(s) {
			j = 0
		}
		for k := 0; k < min(n, len(s)); k++ {
			m := s[(j+k)%len(s)]
			var parts []int32
			for p := k; p < n; p += len(s) {
				parts = append(parts, int32(p))
			}
			resp.Members[m].Partitions = append(resp.Members[m].Partitions, abi.TopicPartitions{Topic: int32(t), Partitions: parts})
		}
		cursor = s[(j+n-1)%len(s)] + 1
		if int(cursor) == len(req.Members) {
			cursor = 0
		}
	}
	return resp
}

// main is never run: the module is a WASI reactor, initialised by
// _initialize, which runs init.
func main() {}

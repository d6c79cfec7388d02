//go:build wasip1

// Command testguest is a Go plugin with one assignor per behaviour the
// runtime's tests need from a well-formed guest: valid output, seeded and
// WASI randomness, reported errors, panics, chatter and garbage.
package main

import (
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
	"github.com/wasmassign/wasmassign/sdk/go/guest"
)

func info(name, desc string) abi.AssignorInfo {
	return abi.AssignorInfo{
		Name: name, Version: "0.0.1", Protocols: []string{name},
		Modes: abi.ModeEager | abi.ModeCooperative, Description: desc,
	}
}

func init() {
	guest.Register(info("test-spread", "deals each topic's partitions to its subscribers in turn"), spread)
	guest.Register(info("test-random", "spread, rotated by WASI randomness, with random user data"), random)
	guest.Register(info("test-fail", "always reports an error"), func(*abi.Request) (*abi.Response, error) {
		return nil, errors.New("no capacity for group")
	})
	guest.Register(info("test-panic", "always panics"), func(*abi.Request) (*abi.Response, error) {
		panic("invariant broken")
	})
	guest.Register(info("test-chatty", "spread, after printing thousands of lines"), func(r *abi.Request) (*abi.Response, error) {
		for i := 0; i < 5000; i++ {
			fmt.Println("stdout line", i)
			guest.Logf(guest.LevelInfo, "log line %d", i)
		}
		return spread(r)
	})
	guest.Register(info("test-garbage", "spread, after allocating garbage the size of the request"), garbage)
}

// spread deals each topic's partitions to the members subscribed to it, in
// member order.
func spread(r *abi.Request) (*abi.Response, error) {
	return deal(r, 0), nil
}

func deal(r *abi.Request, rotate int) *abi.Response {
	resp := &abi.Response{Members: make([]abi.MemberAssignment, len(r.Members))}
	subs := make([][]int32, len(r.Topics))
	for mi := range r.Members {
		resp.Members[mi].Member = int32(mi)
		for _, t := range r.Members[mi].Topics {
			subs[t] = append(subs[t], int32(mi))
		}
	}
	for ti, ms := range subs {
		t := r.Topics[ti]
		if !t.Exists || len(ms) == 0 {
			continue
		}
		per := make([][]int32, len(ms))
		for p := int32(0); p < t.PartitionCount; p++ {
			k := (int(p) + rotate) % len(ms)
			per[k] = append(per[k], p)
		}
		for k, mi := range ms {
			if len(per[k]) > 0 {
				a := &resp.Members[mi]
				a.Partitions = append(a.Partitions, abi.TopicPartitions{Topic: int32(ti), Partitions: per[k]})
			}
		}
	}
	return resp
}

func random(r *abi.Request) (*abi.Response, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	resp := deal(r, int(b[0]))
	if len(resp.Members) > 0 {
		resp.Members[0].UserData = b[:]
	}
	return resp, nil
}

func main() {}

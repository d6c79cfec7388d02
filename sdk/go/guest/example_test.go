package guest_test

import (
	"github.com/wasmassign/wasmassign/sdk/go/abi"
	"github.com/wasmassign/wasmassign/sdk/go/guest"
)

// A plugin registers its assignors from an init function of its main
// package, then builds with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o everything-to-one.wasm .
//
// This assignor gives every partition to the first member that subscribes to
// its topic.
func ExampleRegister() {
	guest.Register(abi.AssignorInfo{
		Name:        "everything-to-one",
		Version:     "1.0.0",
		Protocols:   []string{"everything-to-one"},
		Modes:       abi.ModeEager | abi.ModeCooperative,
		Description: "gives each topic to its first subscriber",
	}, func(req *abi.Request) (*abi.Response, error) {
		resp := &abi.Response{}
		taken := make([]bool, len(req.Topics))
		for mi, m := range req.Members {
			ma := abi.MemberAssignment{Member: int32(mi)}
			for _, t := range m.Topics {
				topic := req.Topics[t]
				if taken[t] || !topic.Exists {
					continue
				}
				taken[t] = true
				parts := make([]int32, topic.PartitionCount)
				for p := range parts {
					parts[p] = int32(p)
				}
				ma.Partitions = append(ma.Partitions, abi.TopicPartitions{Topic: t, Partitions: parts})
			}
			resp.Members = append(resp.Members, ma)
		}
		guest.Logf(guest.LevelDebug, "assigned %d members", len(resp.Members))
		return resp, nil
	})
}

package roundrobin

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/wasmassign/wasmassign/plugins/internal/groupview"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Info describes the roundrobin assignor to the host. "RoundRobinAssigner"
// is the protocol name kafkajs uses for the same strategy. Both modes are
// declared because the host does the KIP-429 withholding for cooperative
// groups.
func Info() abi.AssignorInfo {
	return abi.AssignorInfo{
		Name:        "roundrobin",
		Version:     "1.0.0",
		Protocols:   []string{"roundrobin", "RoundRobinAssigner"},
		Modes:       abi.ModeEager | abi.ModeCooperative,
		Description: "Kafka's RoundRobinAssignor: partitions dealt to members in turn, by topic name",
	}
}

// Assign computes Kafka's round-robin assignment for req. It returns one
// MemberAssignment per member, in request order.
func Assign(req *abi.Request) (*abi.Response, error) {
	v, err := groupview.New(req)
	if err != nil {
		return nil, fmt.Errorf("roundrobin: %w", err)
	}
	n := len(req.Members)
	rank := make([]int32, n) // position of each member in Kafka's order
	for i, m := range v.Order {
		rank[m] = int32(i)
	}
	subs := v.Subscribers()
	lay := v.NewLayout()

	// Kafka's iterator stands on some member when a topic starts. The
	// topic's first partition goes to the first subscriber at or after it
	// (wrapping), and each following partition to the next subscriber in
	// the cycle, since every member in between is skipped. After the topic
	// the iterator stands just past the subscriber that took the last one.
	pos := int32(0)
	for _, t := range v.ByName {
		list := subs.Of(t)
		s, p := int32(len(list)), req.Topics[t].PartitionCount
		k, _ := slices.BinarySearchFunc(list, pos, func(m, pos int32) int {
			return cmp.Compare(rank[m], pos)
		})
		first := int32(k) % s
		last := list[(int64(first)+int64(p)-1)%int64(s)]
		pos = (rank[last] + 1) % int32(n)

		// The subscriber j turns after the first one takes partitions j,
		// j+s, j+2s, ...: an even split in turn order, each window holding
		// one such progression.
		ids, even := lay.Split(t, first)
		for j := range min(s, p) {
			start, cnt := even.Turn(j)
			stride(ids[start:start+cnt], j, s)
		}
	}
	return lay.Response(), nil
}

// stride writes from, from+step, from+2*step, ... into seg.
//
//go:noinline
func stride(seg []int32, from, step int32) {
	for i := range seg {
		seg[i] = from
		from += step
	}
}

//go:build !wasip1

package sticky_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// BenchmarkKgoCooperativeSticky runs franz-go's cooperative-sticky balancer
// on the same groups, the way a kgo group leader does: parse every member's
// JoinGroup metadata, balance, and encode the SyncGroup assignments. It is
// the native reference the assignor is compared with.
func BenchmarkKgoCooperativeSticky(b *testing.B) {
	for _, bc := range benchCases() {
		first := bc.build()
		members := kgoMembers(first, nil)
		plan := kgoBalance(b, first, members)
		resp := kgoResponse(first, plan)
		second := bc.next(first, resp, true)
		for _, phase := range []struct {
			name    string
			req     *abi.Request
			members []kmsg.JoinGroupResponseMember
		}{{"initial", first, members}, {bc.nextPhase, second, kgoMembers(second, second)}} {
			b.Run(bc.name+"/"+phase.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					kgoBalance(b, phase.req, phase.members)
				}
			})
		}
	}
}

// kgoMembers encodes req's members as JoinGroup members of a kgo
// cooperative-sticky group: subscription metadata v3 with owned partitions
// and generation, in Kafka's member order.
func kgoMembers(req *abi.Request, owned *abi.Request) []kmsg.JoinGroupResponseMember {
	out := make([]kmsg.JoinGroupResponseMember, len(req.Members))
	for i, m := range req.Members {
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Version = 3
		meta.Generation = -1
		for _, t := range m.Topics {
			meta.Topics = append(meta.Topics, req.Topics[t].Name)
		}
		if owned != nil && m.OwnedGeneration >= 0 {
			meta.Generation = m.OwnedGeneration
			for _, tp := range m.Owned {
				op := kmsg.NewConsumerMemberMetadataOwnedPartition()
				op.Topic = req.Topics[tp.Topic].Name
				op.Partitions = tp.Partitions
				meta.OwnedPartitions = append(meta.OwnedPartitions, op)
			}
		}
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.MemberID
		jm.ProtocolMetadata = meta.AppendTo(nil)
		out[i] = jm
	}
	return out
}

// kgoBalance is one balance of a kgo group leader: MemberBalancer parses
// the metadata, BalanceOrError balances, and the sync assignments are
// encoded.
func kgoBalance(b *testing.B, req *abi.Request, members []kmsg.JoinGroupResponseMember) []kmsg.SyncGroupRequestGroupAssignment {
	mb, _, err := kgo.CooperativeStickyBalancer().MemberBalancer(members)
	if err != nil {
		b.Fatal(err)
	}
	counts := make(map[string]int32, len(req.Topics))
	for _, t := range req.Topics {
		counts[t.Name] = t.PartitionCount
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(counts)
	if err != nil {
		b.Fatal(err)
	}
	return into.IntoSyncAssignment()
}

// kgoResponse turns kgo's sync assignments into an abi.Response of req, so
// that the second phase can be built the same way for both.
func kgoResponse(req *abi.Request, sync []kmsg.SyncGroupRequestGroupAssignment) *abi.Response {
	index := req.TopicIndex()
	member := map[string]int32{}
	for i, m := range req.Members {
		member[m.MemberID] = int32(i)
	}
	resp := &abi.Response{Members: make([]abi.MemberAssignment, len(req.Members))}
	for i := range resp.Members {
		resp.Members[i].Member = int32(i)
	}
	for _, a := range sync {
		var ma kmsg.ConsumerMemberAssignment
		if err := ma.ReadFrom(a.MemberAssignment); err != nil {
			panic(err)
		}
		m := member[a.MemberID]
		for _, t := range ma.Topics {
			resp.Members[m].Partitions = append(resp.Members[m].Partitions, abi.TopicPartitions{Topic: index[t.Topic], Partitions: t.Partitions})
		}
	}
	return resp
}

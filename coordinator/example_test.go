package coordinator_test

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/coordinator"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
)

// A driver with a fake clock: one consumer joins, the coordinator assigns
// with a (native) range plugin, and SyncGroup carries the assignment.
func Example() {
	c, err := coordinator.New(coordinator.Config{Served: coordinator.ServedProtocols{"range": "range"}}, 1)
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.SetMetadata(now, &coordinator.Metadata{Topics: map[string]coordinator.TopicMetadata{
		"orders": {Partitions: make([]coordinator.PartitionMetadata, 3)},
	}})
	replies := map[coordinator.RequestID]kmsg.Response{}
	var deadline time.Time
	// act is the driver loop's body: collect replies, run jobs, keep the
	// next deadline.
	var act func(coordinator.Output)
	act = func(out coordinator.Output) {
		for _, r := range out.Replies {
			replies[r.ID] = r.Response
		}
		deadline = out.NextDeadline
		for _, j := range out.Jobs {
			resp, err := rangeassignor.Assign(j.Request)
			act(c.AssignmentDone(now, j.ID, resp, err))
		}
	}
	client := coordinator.Client{ID: "app", Host: "/10.0.0.7"}
	sub := kmsg.ConsumerMemberMetadata{Version: 3, Topics: []string{"orders"}, Generation: -1}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType = 9, "shop", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 10000, 30000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: sub.AppendTo(nil)}}

	act(c.Handle(now, 1, client, join)) // KIP-394: MEMBER_ID_REQUIRED
	join.MemberID = replies[1].(*kmsg.JoinGroupResponse).MemberID
	act(c.Handle(now, 2, client, join)) // parked for the initial delay
	now = deadline
	act(c.Tick(now))
	jr := replies[2].(*kmsg.JoinGroupResponse)
	fmt.Println("generation", jr.Generation, "leader", jr.LeaderID)

	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.MemberID, sync.Generation = 5, "shop", jr.MemberID, jr.Generation
	act(c.Handle(now, 3, client, sync))
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(replies[3].(*kmsg.SyncGroupResponse).MemberAssignment); err != nil {
		panic(err)
	}
	fmt.Println(a.Topics[0].Topic, a.Topics[0].Partitions)
	// Output:
	// generation 1 leader wasmassign.coordinator
	// orders [0 1 2]
}

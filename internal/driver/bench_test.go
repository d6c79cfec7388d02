package driver_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/internal/driver"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// nativeRange runs the range plugin natively: the driver's own cost is
// what its benchmarks measure.
type nativeRange struct{}

func (nativeRange) Assign(_ context.Context, _ string, req *abi.Request) (*abi.Response, error) {
	return rangeassignor.Assign(req)
}

// rawMember is a member that speaks to the driver with raw requests.
type rawMember struct {
	client     coordinator.Client
	id         string
	generation int32
}

// metadataOf is a cluster of one broker with a topic of partitions.
func metadataOf(partitions int) *coordinator.Metadata {
	md := &coordinator.Metadata{Brokers: []coordinator.Broker{{ID: 1}}, Topics: map[string]coordinator.TopicMetadata{}}
	tm := coordinator.TopicMetadata{}
	for range partitions {
		tm.Partitions = append(tm.Partitions, coordinator.PartitionMetadata{Leader: 1, Replicas: []int32{1}, ISR: []int32{1}})
	}
	md.Topics[topic] = tm
	return md
}

// nativeRangeDriver is a driver over nativeRange that accepts every
// forward, holding metadata of one topic of partitions; the test's
// cleanup closes it. Its initial rebalance delay lets members started
// together join one generation.
func nativeRangeDriver(tb testing.TB, partitions int) *driver.Driver {
	tb.Helper()
	d, err := driver.Start(driver.Config{
		Coordinator: coordinator.Config{Default: coordinator.GroupConfig{InitialRebalanceDelay: 200 * time.Millisecond}, Served: coordinator.ServedProtocols{"range": "range"}},
		Plugins:     nativeRange{},
		Forwarder:   acceptAll{},
		Logger:      testLogger(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(d.Close)
	if err := d.SetMetadata(metadataOf(partitions), nil); err != nil {
		tb.Fatal(err)
	}
	return d
}

// join runs a member's JoinGroup and SyncGroup until it holds an
// assignment of one generation, and returns its assignment.
func (m *rawMember) join(ctx context.Context, d *driver.Driver, group string) (kmsg.ConsumerMemberAssignment, error) {
	var a kmsg.ConsumerMemberAssignment
	meta := kmsg.ConsumerMemberMetadata{Topics: []string{topic}}
	for ctx.Err() == nil {
		join := kmsg.NewPtrJoinGroupRequest()
		join.SetVersion(5)
		join.Group, join.MemberID, join.ProtocolType = group, m.id, "consumer"
		join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 30000, 30000
		join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: meta.AppendTo(nil)}}
		resp, err := d.Handle(ctx, m.client, join)
		if err != nil {
			return a, err
		}
		jr := resp.(*kmsg.JoinGroupResponse)
		m.id = jr.MemberID
		switch jr.ErrorCode {
		case kerr.MemberIDRequired.Code, kerr.RebalanceInProgress.Code:
			continue
		case 0:
		default:
			return a, fmt.Errorf("join: %w", kerr.ErrorForCode(jr.ErrorCode))
		}
		sync := kmsg.NewPtrSyncGroupRequest()
		sync.SetVersion(3)
		sync.Group, sync.MemberID, sync.Generation = group, m.id, jr.Generation
		if resp, err = d.Handle(ctx, m.client, sync); err != nil {
			return a, err
		}
		sr := resp.(*kmsg.SyncGroupResponse)
		switch sr.ErrorCode {
		case kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code:
			continue
		case 0:
		default:
			return a, fmt.Errorf("sync: %w", kerr.ErrorForCode(sr.ErrorCode))
		}
		m.generation = jr.Generation
		return a, a.ReadFrom(sr.MemberAssignment)
	}
	return a, ctx.Err()
}

// heartbeat sends one Heartbeat and returns its error code.
func (m *rawMember) heartbeat(ctx context.Context, d *driver.Driver, group string) (int16, error) {
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.SetVersion(4)
	hb.Group, hb.MemberID, hb.Generation = group, m.id, m.generation
	resp, err := d.Handle(ctx, m.client, hb)
	if err != nil {
		return 0, err
	}
	return resp.(*kmsg.HeartbeatResponse).ErrorCode, nil
}

// stableGroup joins n members to group at once and returns them once they
// all hold an assignment of the same generation and heartbeat without
// error.
func stableGroup(tb testing.TB, d *driver.Driver, group string, n int) []*rawMember {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ms := make([]*rawMember, n)
	for i := range ms {
		ms[i] = &rawMember{client: coordinator.Client{ID: fmt.Sprintf("c%d", i), Host: "/127.0.0.1"}}
	}
	for ctx.Err() == nil {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for _, m := range ms {
			wg.Go(func() {
				if _, err := m.join(ctx, d, group); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			tb.Fatal(err)
		}
		settled := true
		for _, m := range ms {
			if code, err := m.heartbeat(ctx, d, group); err != nil || code != 0 {
				settled = false
			}
		}
		if settled {
			return ms
		}
	}
	tb.Fatal("the group never settled")
	return nil
}

// commit sends one OffsetCommit of the member's assignment and returns
// the first error code in its answer.
func (m *rawMember) commit(ctx context.Context, d *driver.Driver, group string, a kmsg.ConsumerMemberAssignment) (int16, error) {
	c := kmsg.NewPtrOffsetCommitRequest()
	c.SetVersion(7)
	c.Group, c.MemberID, c.Generation = group, m.id, m.generation
	for _, t := range a.Topics {
		ct := kmsg.NewOffsetCommitRequestTopic()
		ct.Topic = t.Topic
		for _, p := range t.Partitions {
			cp := kmsg.NewOffsetCommitRequestTopicPartition()
			cp.Partition, cp.Offset = p, 42
			ct.Partitions = append(ct.Partitions, cp)
		}
		c.Topics = append(c.Topics, ct)
	}
	resp, err := d.Handle(ctx, m.client, c)
	if err != nil {
		return 0, err
	}
	for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return p.ErrorCode, nil
			}
		}
	}
	return 0, nil
}

// BenchmarkDriver_Request is one Heartbeat, or one OffsetCommit forwarded
// upstream, of a stable group through the driver's loop and the
// coordinator, from many goroutines at once, as connections send them.
func BenchmarkDriver_Request(b *testing.B) {
	for _, api := range []string{"Heartbeat", "OffsetCommit"} {
		for _, size := range []int{10, 1000} {
			b.Run(fmt.Sprintf("%s/members=%d", api, size), func(b *testing.B) {
				d := nativeRangeDriver(b, 64)
				ms := stableGroup(b, d, group, size)
				ctx := context.Background()
				assigned := kmsg.ConsumerMemberAssignment{Topics: []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: []int32{0}}}}
				var next sync.Mutex
				i := 0
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						next.Lock()
						m := ms[i%len(ms)]
						i++
						next.Unlock()
						var code int16
						var err error
						if api == "Heartbeat" {
							code, err = m.heartbeat(ctx, d, group)
						} else {
							code, err = m.commit(ctx, d, group, assigned)
						}
						if err != nil || code != 0 {
							b.Errorf("%s: %v, code %d", api, err, code)
							return
						}
					}
				})
			})
		}
	}
}

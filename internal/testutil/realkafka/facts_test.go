package realkafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// These tests pin down the real broker's behaviour that the gateway's design
// relies on (docs/FACTS.md lists them). kfake differs
// on some of them, so they are checked against Apache Kafka itself and stay
// checked on every upgrade of the cached version.

// versionRange is the broker's supported [min, max] for key, capped at what
// kmsg can encode.
func versionRange(t *testing.T, ctx context.Context, cl *kgo.Client, key int16) (lo, hi int16) {
	t.Helper()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == key {
			hi = k.MaxVersion
			if ours := kmsg.RequestForKey(key).MaxVersion(); ours < hi {
				hi = ours
			}
			return k.MinVersion, hi
		}
	}
	t.Fatalf("broker does not advertise key %d", key)
	return 0, 0
}

// factsTopic creates a one-partition topic and returns its id, which
// OffsetCommit v10+ and OffsetFetch v10+ address topics by.
func factsTopic(t *testing.T, ctx context.Context, cl *kgo.Client, name string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return resp.Topics[0].TopicID
}

// commit sends one OffsetCommit at version v for topic/partition 0 and
// returns the partition's error (nil when accepted). A request that fails
// on the wire wraps errRequest.
func commit(ctx context.Context, rc *rawConn, v int16, group, topic string, topicID [16]byte, gen int32, member string, instance *string, offset int64) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID, req.InstanceID = group, gen, member, instance
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.LeaderEpoch = 0, offset, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	raw, err := rc.do(ctx, req, v)
	if err != nil {
		return fmt.Errorf("%w: %v", errRequest, err)
	}
	resp := raw.(*kmsg.OffsetCommitResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("%w: malformed response %+v", errRequest, resp)
	}
	return kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
}

// errRequest marks a request that failed on the wire rather than being
// answered with an error code; a refusal test must not count it.
var errRequest = errors.New("request failed")

// fetchResult is what OffsetFetch says about one group and partition.
type fetchResult struct {
	groupErr, partErr error
	offset            int64
	partitions        int // how many partitions the response lists
}

func (r fetchResult) String() string {
	return fmt.Sprintf("group error %v, partition error %v, offset %d, %d partition(s) listed", r.groupErr, r.partErr, r.offset, r.partitions)
}

// fetch reads group's committed offset of topic/partition 0 at version v,
// or all its offsets when all is set. It speaks both layouts: one group per request
// (v0-v7) and a group list (v8+).
func fetch(ctx context.Context, rc *rawConn, v int16, group, topic string, topicID [16]byte, all bool) (fetchResult, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	if !all {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic, gt.TopicID, gt.Partitions = topic, topicID, []int32{0}
		rg.Topics = append(rg.Topics, gt)
	}
	req.Groups = append(req.Groups, rg)
	raw, err := rc.do(ctx, req, v)
	if err != nil {
		return fetchResult{}, err
	}
	resp := raw.(*kmsg.OffsetFetchResponse)
	var r fetchResult
	r.offset = -2 // "no partition in the response"
	if v >= 8 {
		if len(resp.Groups) != 1 {
			return r, fmt.Errorf("%d groups in response", len(resp.Groups))
		}
		g := resp.Groups[0]
		r.groupErr = kerr.ErrorForCode(g.ErrorCode)
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				r.partitions++
				r.partErr, r.offset = kerr.ErrorForCode(p.ErrorCode), p.Offset
			}
		}
		return r, nil
	}
	r.groupErr = kerr.ErrorForCode(resp.ErrorCode)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			r.partitions++
			r.partErr, r.offset = kerr.ErrorForCode(p.ErrorCode), p.Offset
		}
	}
	return r, nil
}

// joinedMember is a classic group member the test drives by hand.
type joinedMember struct {
	id  string
	gen int32
}

// joinClassic joins group as a classic consumer at JoinGroup version v,
// going through KIP-394's MEMBER_ID_REQUIRED round trip. With sync it
// completes the rebalance with a SyncGroup, leaving the group Stable with one
// member; without, the group stays in CompletingRebalance.
func joinClassic(t *testing.T, ctx context.Context, c *Cluster, group string, v int16, sync bool) joinedMember {
	t.Helper()
	rc := dialRaw(t, c.Nodes[0].Addr) // one node: it is every group's coordinator
	join := func(member string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = group, member, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 30000, 10000
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = "range"
		p.Metadata = (&kmsg.ConsumerMemberMetadata{Topics: []string{"facts"}}).AppendTo(nil)
		req.Protocols = append(req.Protocols, p)
		// The group's __consumer_offsets partition may still be loading
		// on a fresh broker; clients retry COORDINATOR_LOAD_IN_PROGRESS,
		// and so does this check (a CI failure on a busy machine).
		for {
			resp, err := rc.do(ctx, req, v)
			if err != nil {
				t.Fatalf("JoinGroup v%d: %v", v, err)
			}
			jr := resp.(*kmsg.JoinGroupResponse)
			if jr.ErrorCode != kerr.CoordinatorLoadInProgress.Code || ctx.Err() != nil {
				return jr
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	first := join("")
	if first.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("JoinGroup v%d with no member id: error %v, want MEMBER_ID_REQUIRED (KIP-394)", v, kerr.ErrorForCode(first.ErrorCode))
	}
	resp := join(first.MemberID)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("JoinGroup v%d rejoin: %v", v, err)
	}
	if resp.LeaderID != first.MemberID || resp.Protocol == nil || *resp.Protocol != "range" {
		t.Fatalf("JoinGroup v%d: leader %q protocol %v, want leader %q and range", v, resp.LeaderID, resp.Protocol, first.MemberID)
	}
	if !sync {
		return joinedMember{id: first.MemberID, gen: resp.Generation}
	}
	sreq := kmsg.NewPtrSyncGroupRequest()
	sreq.Group, sreq.MemberID, sreq.Generation = group, first.MemberID, resp.Generation
	sreq.ProtocolType, sreq.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID = first.MemberID
	a.MemberAssignment = (&kmsg.ConsumerMemberAssignment{}).AppendTo(nil)
	sreq.GroupAssignment = append(sreq.GroupAssignment, a)
	sr, err := sreq.RequestWith(ctx, c.Client(t))
	if err != nil {
		t.Fatalf("SyncGroup: %v", err)
	}
	if err := kerr.ErrorForCode(sr.ErrorCode); err != nil {
		t.Fatalf("SyncGroup: %v", err)
	}
	return joinedMember{id: first.MemberID, gen: resp.Generation}
}

// groupState is DescribeGroups' state of group.
func groupState(t *testing.T, ctx context.Context, cl *kgo.Client, group string) string {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 {
		t.Fatalf("DescribeGroups %s: %v %+v", group, err, resp)
	}
	return resp.Groups[0].State
}

func TestRealKafkaFactsTheGatewayReliesOn(t *testing.T) {
	t.Parallel()
	c := Start(context.Background(), t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl := c.Client(t)
	const topic = "facts"
	topicID := factsTopic(t, ctx, cl, topic)
	// One node is every group's coordinator. reader stands for a client
	// that bypasses the gateway: its own connection, the newest OffsetFetch.
	rc, reader := dialRaw(t, c.Nodes[0].Addr), dialRaw(t, c.Nodes[0].Addr)
	_, fetchMax := versionRange(t, ctx, cl, kmsg.OffsetFetch.Int16())
	_, commitMax := versionRange(t, ctx, cl, kmsg.OffsetCommit.Int16())

	t.Run("classic protocol and JoinGroup v9 are enabled by default", func(t *testing.T) {
		req := kmsg.NewPtrDescribeConfigsRequest()
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
		rr.ConfigNames = []string{"group.coordinator.rebalance.protocols"}
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 1 {
			t.Fatalf("DescribeConfigs: %v %+v", err, resp)
		}
		val := resp.Resources[0].Configs[0].Value
		if val == nil || !strings.Contains(*val, "classic") {
			t.Fatalf("group.coordinator.rebalance.protocols = %v, want it to include classic", val)
		}
		t.Logf("group.coordinator.rebalance.protocols = %s (source %v)", *val, resp.Resources[0].Configs[0].Source)
		for _, key := range []kmsg.Key{kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.OffsetCommit, kmsg.OffsetFetch, kmsg.ConsumerGroupHeartbeat} {
			lo, hi := versionRange(t, ctx, cl, key.Int16())
			t.Logf("%s: v%d-v%d", key.Name(), lo, hi)
		}
		if _, hi := versionRange(t, ctx, cl, kmsg.JoinGroup.Int16()); hi < 9 {
			t.Fatalf("JoinGroup max v%d < 9", hi)
		}
		m := joinClassic(t, ctx, c, "facts-join-v9", 9, true)
		if m.gen != 1 {
			t.Errorf("first generation = %d, want 1", m.gen)
		}
		if st := groupState(t, ctx, cl, "facts-join-v9"); st != "Stable" {
			t.Errorf("state after join and sync = %q, want Stable", st)
		}
	})

	t.Run("OffsetFetch of an unknown group answers offset -1 without error", func(t *testing.T) {
		lo, hi := versionRange(t, ctx, cl, kmsg.OffsetFetch.Int16())
		for v := lo; v <= hi; v++ {
			group := fmt.Sprintf("facts-unknown-v%d", v)
			r, err := fetch(ctx, rc, v, group, topic, topicID, false)
			if err != nil {
				t.Fatalf("OffsetFetch v%d: %v", v, err)
			}
			t.Logf("OffsetFetch v%d, unknown group, one partition: %v", v, r)
			if r.groupErr != nil || r.partErr != nil || r.offset != -1 || r.partitions != 1 {
				t.Errorf("OffsetFetch v%d for an unknown group: %v; want no error and offset -1", v, r)
			}
			all, err := fetch(ctx, rc, v, group, topic, topicID, true)
			if err != nil {
				t.Fatalf("OffsetFetch v%d all: %v", v, err)
			}
			t.Logf("OffsetFetch v%d, unknown group, all topics: %v", v, all)
			if all.groupErr != nil || all.partitions != 0 {
				t.Errorf("OffsetFetch v%d (all topics) for an unknown group: %v; want no error and no partitions", v, all)
			}
			if st := groupState(t, ctx, cl, group); st != "Dead" {
				t.Errorf("after OffsetFetch, unknown group state = %q, want Dead (fetch must not create it)", st)
			}
		}
	})

	t.Run("generation -1 commits are accepted for unknown and Empty groups at every version", func(t *testing.T) {
		lo, hi := versionRange(t, ctx, cl, kmsg.OffsetCommit.Int16())
		for v := lo; v <= hi; v++ {
			group := fmt.Sprintf("facts-commit-v%d", v)
			offset := int64(100 + v)
			if err := commit(ctx, rc, v, group, topic, topicID, -1, "", nil, offset); err != nil {
				t.Errorf("OffsetCommit v%d gen -1 on an unknown group: %v, want accepted", v, err)
				continue
			}
			// Read back by a client that has nothing to do with the commit.
			r, err := fetch(ctx, reader, fetchMax, group, topic, topicID, false)
			if err != nil || r.groupErr != nil || r.partErr != nil || r.offset != offset {
				t.Errorf("OffsetCommit v%d: read back %v (err %v), want offset %d", v, r, err, offset)
			}
			if st := groupState(t, ctx, cl, group); st != "Empty" {
				t.Errorf("OffsetCommit v%d: group state after commit %q, want Empty", v, st)
			}
			// A second commit to the now-known Empty group is accepted too.
			if err := commit(ctx, rc, v, group, topic, topicID, -1, "", nil, offset+1); err != nil {
				t.Errorf("OffsetCommit v%d gen -1 on an Empty group: %v", v, err)
			}
		}
	})

	t.Run("a group that only has commits is listed and described as Empty", func(t *testing.T) {
		const group = "facts-listed"
		if err := commit(ctx, rc, commitMax, group, topic, topicID, -1, "", nil, 5); err != nil {
			t.Fatalf("commit: %v", err)
		}
		resp, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("ListGroups: %v", err)
		}
		var found *kmsg.ListGroupsResponseGroup
		for i, g := range resp.Groups {
			if g.Group == group {
				found = &resp.Groups[i]
			}
		}
		if found == nil {
			t.Fatalf("ListGroups v%d does not list %s: %+v", resp.Version, group, resp.Groups)
		}
		t.Logf("ListGroups v%d lists a commit-only group as state %q, protocol type %q, group type %q",
			resp.Version, found.GroupState, found.ProtocolType, found.GroupType)
		if found.GroupState != "Empty" || found.ProtocolType != "" {
			t.Errorf("commit-only group listed as state %q protocol type %q, want Empty and none", found.GroupState, found.ProtocolType)
		}
		if st := groupState(t, ctx, cl, group); st != "Empty" {
			t.Errorf("DescribeGroups state %q, want Empty", st)
		}
	})

	t.Run("generation -1 commits are refused while the group has members", func(t *testing.T) {
		const group = "facts-active"
		m := joinClassic(t, ctx, c, group, 9, true)
		lo, hi := versionRange(t, ctx, cl, kmsg.OffsetCommit.Int16())
		for v := lo; v <= hi; v++ {
			err := commit(ctx, rc, v, group, topic, topicID, -1, "", nil, 7)
			t.Logf("OffsetCommit v%d gen -1 on a Stable group: %v", v, err)
			if err == nil || errors.Is(err, errRequest) {
				t.Errorf("OffsetCommit v%d gen -1 on a group with a member: %v, want refused", v, err)
			}
			// The member's own commit is accepted, so the refusal above is
			// about the missing generation, not about the request.
			if err := commit(ctx, rc, v, group, topic, topicID, m.gen, m.id, nil, 8); err != nil {
				t.Errorf("OffsetCommit v%d by the member itself: %v", v, err)
			}
		}
		// Mid-rebalance (joined, not yet synced) is not Empty either.
		const midGroup = "facts-completing"
		joinClassic(t, ctx, c, midGroup, 9, false)
		if st := groupState(t, ctx, cl, midGroup); st != "CompletingRebalance" {
			t.Fatalf("state after join without sync = %q, want CompletingRebalance", st)
		}
		err := commit(ctx, rc, commitMax, midGroup, topic, topicID, -1, "", nil, 7)
		t.Logf("OffsetCommit gen -1 on a CompletingRebalance group: %v", err)
		if err == nil || errors.Is(err, errRequest) {
			t.Errorf("gen -1 commit during CompletingRebalance: %v, want refused", err)
		}

		// A commit with a generation and member the broker never handed out
		// (the gateway's own) is refused too.
		err = commit(ctx, rc, hi, group, topic, topicID, m.gen+5, "gateway-member", nil, 9)
		t.Logf("OffsetCommit with a foreign member and generation on a Stable group: %v", err)
		if err == nil || errors.Is(err, errRequest) {
			t.Errorf("a foreign generation and member on a Stable group: %v, want refused", err)
		}
		err = commit(ctx, rc, hi, "facts-unknown-foreign", topic, topicID, 3, "gateway-member", nil, 9)
		t.Logf("OffsetCommit with a foreign member and generation on an unknown group: %v", err)
		if err == nil || errors.Is(err, errRequest) {
			t.Errorf("a foreign generation and member on an unknown group: %v, want refused", err)
		}

		// Once the member leaves, the group is Empty and gen -1 works again.
		leave := kmsg.NewPtrLeaveGroupRequest()
		leave.Group, leave.MemberID = group, m.id
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = m.id
		leave.Members = append(leave.Members, lm)
		if resp, err := leave.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
			t.Fatalf("LeaveGroup: %v %+v", err, resp)
		}
		if st := groupState(t, ctx, cl, group); st != "Empty" {
			t.Fatalf("state after the only member left = %q, want Empty", st)
		}
		if err := commit(ctx, rc, hi, group, topic, topicID, -1, "", nil, 11); err != nil {
			t.Errorf("gen -1 commit after the group emptied: %v", err)
		}
		r, err := fetch(ctx, reader, fetchMax, group, topic, topicID, false)
		if err != nil || r.offset != 11 {
			t.Errorf("read back after the group emptied: %v (err %v), want 11", r, err)
		}
	})
}

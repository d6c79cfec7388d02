package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// adminClient is a plain kgo client for the requests a test sends itself.
func adminClient(t *testing.T, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("e2e-admin")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// placement is the leader and replicas of every partition of a topic.
type placement struct {
	leaders  []int32
	replicas [][]int32
}

// topicPlacement asks for metadata of topics.
func topicPlacement(ctx context.Context, cl *kgo.Client, topics ...string) (map[string]placement, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	out := make(map[string]placement)
	for _, rt := range resp.Topics {
		if rt.Topic == nil || rt.ErrorCode != 0 {
			return nil, fmt.Errorf("metadata for %v: error code %d", rt.Topic, rt.ErrorCode)
		}
		pl := placement{leaders: make([]int32, len(rt.Partitions)), replicas: make([][]int32, len(rt.Partitions))}
		for _, p := range rt.Partitions {
			pl.leaders[p.Partition] = p.Leader
			pl.replicas[p.Partition] = p.Replicas
		}
		out[*rt.Topic] = pl
	}
	return out, nil
}

// createTopic creates topic on the real broker, bypassing the gateway.
func createTopic(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partitions int32) {
	t.Helper()
	createTopics(ctx, t, cl, partitions, topic)
}

// createTopics creates topics of partitions partitions each (one replica)
// on the real broker, bypassing the gateway.
func createTopics(ctx context.Context, t *testing.T, cl *kgo.Client, partitions int32, topics ...string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	for _, topic := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create topics %v: %v", topics, err)
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 {
			t.Fatalf("create topic %s: error code %d", rt.Topic, rt.ErrorCode)
		}
	}
}

// describeGroup describes one group with DescribeGroups through cl; the
// group's error code is the caller's to judge.
func describeGroup(ctx context.Context, cl *kgo.Client, group string) (kmsg.DescribeGroupsResponseGroup, error) {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return kmsg.DescribeGroupsResponseGroup{}, fmt.Errorf("DescribeGroups %s: %w", group, err)
	}
	if len(resp.Groups) != 1 || resp.Groups[0].Group != group {
		return kmsg.DescribeGroupsResponseGroup{}, fmt.Errorf("DescribeGroups %s: answered %+v", group, resp.Groups)
	}
	return resp.Groups[0], nil
}

// endOffsets returns the high watermark of every partition of topic.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string, partitions int32) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	out := make(map[int32]int64)
	for _, sh := range cl.RequestSharded(ctx, req) {
		if sh.Err != nil {
			return nil, fmt.Errorf("list offsets: %w", sh.Err)
		}
		for _, t := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					return nil, fmt.Errorf("list offsets %s/%d: error code %d", topic, p.Partition, p.ErrorCode)
				}
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, nil
}

// committedOffsets asks the group's coordinator (through whatever cl
// points at) for the group's committed offsets of topic.
func committedOffsets(ctx context.Context, cl *kgo.Client, group, topic string, partitions int32) (map[int32]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("offset fetch: %w", err)
	}
	if resp.ErrorCode == kerr.GroupIDNotFound.Code {
		return map[int32]int64{}, nil // kfake's answer for a group with no commits; Kafka's is -1 for each
	}
	if resp.ErrorCode != 0 {
		return nil, fmt.Errorf("offset fetch %s: error code %d", group, resp.ErrorCode)
	}
	out := make(map[int32]int64)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return nil, fmt.Errorf("offset fetch %s/%d: error code %d", topic, p.Partition, p.ErrorCode)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out, nil
}

// checkCommittedAtEnd checks that group committed, for every partition of
// topic, exactly the end offset: everything read, and the commits reached
// the upstream through the gateway.
func checkCommittedAtEnd(ctx context.Context, cl *kgo.Client, group, topic string, partitions int32) error {
	end, err := endOffsets(ctx, cl, topic, partitions)
	if err != nil {
		return err
	}
	got, err := committedOffsets(ctx, cl, group, topic, partitions)
	if err != nil {
		return err
	}
	if !maps.Equal(end, got) {
		return fmt.Errorf("group %s committed %v for %s; the end offsets are %v", group, got, topic, end)
	}
	return nil
}

// produce writes n records of plain (uncompressed, so kafkajs can read
// them) values to topic, spread round-robin over its partitions.
func produce(ctx context.Context, t *testing.T, seeds []string, topic string, n int, opts ...kgo.Opt) {
	t.Helper()
	produced(ctx, t, seeds, topic, n, opts...)
}

// produced is produce, returning every record as the broker acknowledged
// it.
func produced(ctx context.Context, t *testing.T, seeds []string, topic string, n int, opts ...kgo.Opt) kgo.ProduceResults {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "r%d", i)}
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce %d records to %s: %v", n, topic, err)
	}
	return res
}

// expected runs assign (a built-in assignor's native code) on the group the
// admin API shows, with the same topics, placement and broker racks, and
// returns what it gives each member id. Every member is taken to
// subscribe to all of topics, as in these tests. owned, keyed by client id,
// is what cooperative members report they hold (from generation ownedGen);
// with it the request is a cooperative one.
func expected(g adminGroup, assign func(*abi.Request) (*abi.Response, error), pl map[string]placement, brokerRacks map[int32]string, owned map[string][]kfakegroup.TopicPartition, ownedGen int32) (map[string]map[string][]int32, error) {
	req, names := assignRequest(g, pl, brokerRacks)
	if owned != nil {
		req.RebalanceProtocol = abi.Cooperative
		for i := range req.Members {
			am := &req.Members[i]
			am.Cooperative, am.OwnedGeneration = true, ownedGen
			for _, tp := range owned[am.ClientID] {
				ti := int32(slices.Index(names, tp.Topic))
				k := slices.IndexFunc(am.Owned, func(x abi.TopicPartitions) bool { return x.Topic == ti })
				if k < 0 {
					am.Owned = append(am.Owned, abi.TopicPartitions{Topic: ti})
					k = len(am.Owned) - 1
				}
				am.Owned[k].Partitions = append(am.Owned[k].Partitions, tp.Partition)
			}
		}
	}
	return assignByMember(req, names, assign)
}

// assignRequest is the request a plugin would get for the group the admin
// API shows, with topics placed as pl and the brokers in brokerRacks: every
// member subscribes to every topic and reports nothing owned. names are
// the topics in the request's order.
func assignRequest(g adminGroup, pl map[string]placement, brokerRacks map[int32]string) (req *abi.Request, names []string) {
	req = &abi.Request{GroupID: g.Group, Generation: g.Generation, Protocol: g.Protocol, Assignor: g.Assignor}
	for _, id := range slices.Sorted(maps.Keys(brokerRacks)) {
		req.Brokers = append(req.Brokers, abi.Broker{ID: id, Rack: brokerRacks[id]})
	}
	names = slices.Sorted(maps.Keys(pl))
	sets := map[string]uint32{}
	set := func(rs []int32) uint32 {
		k := fmt.Sprint(rs)
		if i, ok := sets[k]; ok {
			return i
		}
		sets[k] = uint32(len(req.ReplicaSets))
		req.ReplicaSets = append(req.ReplicaSets, slices.Clone(rs))
		return sets[k]
	}
	var all []int32
	for i, n := range names {
		p := pl[n]
		topic := abi.Topic{Name: n, Exists: true, PartitionCount: int32(len(p.leaders))}
		for j := range p.leaders {
			s := set(p.replicas[j])
			topic.Partitions = append(topic.Partitions, abi.Partition{Leader: p.leaders[j], Replicas: s, ISR: s})
		}
		req.Topics = append(req.Topics, topic)
		all = append(all, int32(i))
	}
	for _, m := range g.Members {
		am := abi.Member{MemberID: m.MemberID, ClientID: m.ClientID, Rack: m.Rack, Topics: all, OwnedGeneration: -1}
		if m.InstanceID != nil {
			am.InstanceID = *m.InstanceID
		}
		req.Members = append(req.Members, am)
	}
	return req, names
}

// assignByMember runs assign on req, whose topics are names, and returns
// what it gives each member id, by topic.
func assignByMember(req *abi.Request, names []string, assign func(*abi.Request) (*abi.Response, error)) (map[string]map[string][]int32, error) {
	resp, err := assign(req)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string][]int32)
	for _, m := range req.Members {
		out[m.MemberID] = map[string][]int32{}
	}
	for _, ma := range resp.Members {
		id := req.Members[ma.Member].MemberID
		for _, tp := range ma.Partitions {
			ps := slices.Sorted(slices.Values(tp.Partitions))
			out[id][names[tp.Topic]] = append(out[id][names[tp.Topic]], ps...)
		}
	}
	return out, nil
}

// sameAssignment compares two member -> topic -> partitions maps, ignoring
// order and empty entries.
func sameAssignment(a, b map[string]map[string][]int32) bool {
	norm := func(m map[string]map[string][]int32) string {
		var s []string
		for _, id := range slices.Sorted(maps.Keys(m)) {
			for _, t := range slices.Sorted(maps.Keys(m[id])) {
				ps := slices.Sorted(slices.Values(m[id][t]))
				if len(ps) > 0 {
					s = append(s, fmt.Sprintf("%s:%s:%v", id, t, ps))
				}
			}
		}
		return fmt.Sprint(s)
	}
	return norm(a) == norm(b)
}

// adminAssignment is the assignment the admin API shows, by member id.
func adminAssignment(g adminGroup) map[string]map[string][]int32 {
	out := make(map[string]map[string][]int32)
	for _, m := range g.Members {
		out[m.MemberID] = m.Assignment
	}
	return out
}

// testCtx is a context that ends with the test or after d.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

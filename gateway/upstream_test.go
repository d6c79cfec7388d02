package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKgoUpstream_ForwardKeepsTheClientsVersion forwards commits at the
// versions older clients send (librdkafka 2.0.2 and kafkajs use v7 and
// below, naming topics): each must land upstream. Raised to v10, a commit
// names its topic by an id the client never filled in, and is lost.
func TestKgoUpstream_ForwardKeepsTheClientsVersion(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	up := NewKgoUpstream(cl, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, version := range []int16{2, 5, 7, 8, 9} {
		group := "g" + string(rune('a'+version))
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = version, group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 1, 42+int64(version)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := up.Forward(ctx, req)
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		cr := resp.(*kmsg.OffsetCommitResponse)
		if cr.GetVersion() != version || len(cr.Topics) != 1 || cr.Topics[0].Topic != "t" || cr.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Errorf("v%d: response %+v; want v%d, topic t, no error", version, cr, version)
		}
		fetch := kmsg.NewPtrOffsetFetchRequest()
		fetch.Group = group
		ft := kmsg.NewOffsetFetchRequestTopic()
		ft.Topic, ft.Partitions = "t", []int32{1}
		fetch.Topics = append(fetch.Topics, ft)
		fr, err := fetch.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		var got int64 = -2
		for _, g := range fr.Groups {
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					got = p.Offset
				}
			}
		}
		for _, t := range fr.Topics {
			for _, p := range t.Partitions {
				got = p.Offset
			}
		}
		if want := 42 + int64(version); got != want {
			t.Errorf("v%d: upstream holds offset %d for %s, want %d", version, got, group, want)
		}
	}
}

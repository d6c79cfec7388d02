package embedded

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/config"
)

func TestStart_PlacesReplicasByTheScenarioRule(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topics := []config.TopicSpec{{Name: "demo", Partitions: 6, Replication: 2}, {Name: "other", Partitions: 4, Replication: 3}, {Name: "single", Partitions: 2, Replication: 1}}
	c, err := Start(ctx, config.Embedded{Brokers: 3, Topics: topics}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Addrs()) != 3 {
		t.Fatalf("addrs %v", c.Addrs())
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]kmsg.MetadataResponseTopic{}
	for _, rt := range resp.Topics {
		got[*rt.Topic] = rt
	}
	const n = 3
	offset := int32(0)
	for _, spec := range topics {
		rt, ok := got[spec.Name]
		if !ok || len(rt.Partitions) != int(spec.Partitions) {
			t.Fatalf("topic %s: %+v", spec.Name, rt)
		}
		for _, p := range rt.Partitions {
			var want []int32
			for j := range int32(spec.Replication) {
				want = append(want, (p.Partition+j+offset)%n)
			}
			if p.Leader != want[0] || !slices.Equal(p.Replicas, want) {
				t.Errorf("%s-%d: leader %d replicas %v, want leader %d replicas %v", spec.Name, p.Partition, p.Leader, p.Replicas, want[0], want)
			}
		}
		offset += spec.Partitions
	}

	// The cluster serves records.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "demo", Partition: 4, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func TestStart_SurfacesCreateErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Config validation refuses this; Start must still report it, not
	// place partitions on brokers that do not exist.
	_, err := Start(ctx, config.Embedded{Brokers: 1, Topics: []config.TopicSpec{{Name: "t", Partitions: 1, Replication: 3}}}, nil)
	if err == nil {
		t.Fatal("replication above the broker count was accepted")
	}
}

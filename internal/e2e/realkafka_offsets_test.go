package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
	"github.com/wasmassign/wasmassign/internal/testutil/realkafka"
)

// TestRealKafkaOffsets_ALiveGroupsOffsetsNeverExpire runs a kgo member
// through the gateway on a Kafka 4.4 broker whose offsets.retention.minutes
// is 1. The member commits once and then never again. The gateway forwards
// commits as a group without members, whose offsets the broker expires a
// retention after each commit (KIP-211); a live consumer group's never
// expire. So while the member lives, its offset must stay past the
// retention, and once the group has been Empty for the retention it must
// go, as Kafka's would.
func TestRealKafkaOffsets_ALiveGroupsOffsetsNeverExpire(t *testing.T) {
	ctx := testCtx(t, 360*time.Second)
	startCtx, cancel := context.WithTimeout(ctx, 100*time.Second)
	c := realkafka.Start(startCtx, t, realkafka.Options{ServerProperties: map[string]string{
		"offsets.retention.minutes":           "1",
		"offsets.retention.check.interval.ms": "2000",
		"group.initial.rebalance.delay.ms":    "0",
	}})
	cancel()
	direct := c.Client(t)
	const group, topic = "kept-offsets", "kept"
	createTopic(ctx, t, direct, topic, 2)
	cfg := testutil.GatewayConfig{
		Brokers:  []string{c.Nodes[0].Addr},
		Upstream: `offsets_retention = "1m"`,
		Groups:   []testutil.GroupRule{{Match: "*"}},
	}.String()
	d := startDaemon(t, t.TempDir(), cfg)
	rig := kfakegroup.NewRig([]string{d.bootstrap}, group, []string{topic}, nil)
	defer rig.Close(context.Background())
	m, err := rig.Start("a", kfakegroup.ConsumerOptions{Extra: []kgo.Opt{kgo.DisableAutoCommit()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := settled(ctx, d, group, rig.Ledger(), []string{"a"}); err != nil {
		t.Fatal(err)
	}
	var commitErr error
	m.Client().CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: 42}}},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			commitErr = err
			if err == nil && resp.Topics[0].Partitions[0].ErrorCode != 0 {
				commitErr = fmt.Errorf("commit refused: error code %d", resp.Topics[0].Partitions[0].ErrorCode)
			}
		})
	if commitErr != nil {
		t.Fatal(commitErr)
	}
	committedOffset := func() (int64, error) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = group
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, direct)
		if err != nil {
			return 0, err
		}
		if resp.ErrorCode != 0 || len(resp.Topics) == 0 || len(resp.Topics[0].Partitions) == 0 {
			return -1, nil // the group is gone with its offsets
		}
		return resp.Topics[0].Partitions[0].Offset, nil
	}
	if o, err := committedOffset(); err != nil || o != 42 {
		t.Fatalf("after the commit: offset %d (err %v), want 42", o, err)
	}

	// Well past one retention with the member alive and silent.
	time.Sleep(100 * time.Second)
	if o, err := committedOffset(); err != nil || o != 42 {
		t.Fatalf("a live group's offset after 100 s of 1 m retention: %d (err %v), want 42 kept", o, err)
	}

	if err := m.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.WaitFor(ctx, func() error {
		g, err := d.group(ctx, group)
		if err != nil || g.State != "Empty" {
			return fmt.Errorf("group %+v (err %v), want Empty", g.State, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	emptied := time.Now()
	// An Empty group's offsets go a retention after it emptied (and one
	// keeper interval, at most, later).
	err = kfakegroup.WaitFor(ctx, func() error {
		o, err := committedOffset()
		if err != nil {
			return err
		}
		if o >= 0 {
			return fmt.Errorf("offset %d still there %v after the group emptied", o, time.Since(emptied).Round(time.Second))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if since := time.Since(emptied); since < 55*time.Second {
		t.Errorf("the offset went %v after the group emptied, before the retention", since.Round(time.Second))
	}
}

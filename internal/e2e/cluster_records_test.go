package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/cluster"
	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
)

// stateRecord is a record of the state topic as no gateway writes it: a
// group's key (0x01 and the id) or key as given, and value.
func stateRecord(topic string, shard int32, key []byte, value string) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: shard, Key: key, Value: []byte(value)}
}

func groupKey(group string) []byte { return append([]byte{1}, group...) }

// TestCluster_CorruptRecordsInTheStateTopicAreSkippedAndCounted: records
// no gateway wrote land in the shard of a live group: a value without the
// format's magic, a state whose payload is not JSON, a kind the format
// does not have, a state under a key no group has. Its owner then hands
// the group over (SIGTERM), and the gateway taking it over reads past
// them: it stays up, serves the group with the generation and the members
// it had, counts each record it skipped by reason and names them in its
// log, and the group goes on with no partition given up or owned twice.
func TestCluster_CorruptRecordsInTheStateTopicAreSkippedAndCounted(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 120*time.Second)
	f := startFailoverRig(ctx, t, rigSpec{gateways: 2})
	l := f.rig.Ledger()
	mark := l.Mark()
	const topic = "wasmassign-e2e-state" // the cluster's, of 4 shards
	shard := int32(cluster.ShardOf(f.group, 4))
	producer := adminClient(t, f.upstream, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := producer.ProduceSync(ctx,
		stateRecord(topic, shard, groupKey(f.group), "not a state record"),
		stateRecord(topic, shard, groupKey(f.group), "WA\x01\x01{not json"),
		stateRecord(topic, shard, groupKey(f.group), "WA\x01\x09{}"),
		stateRecord(topic, shard, []byte("junk"), "WA\x01\x01{}"),
	).FirstErr(); err != nil {
		t.Fatal(err)
	}

	if err := f.owner.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	held, err := settled(ctx, f.survivor, f.group, l, f.members)
	if err != nil {
		t.Fatal(err)
	}
	if held.Generation != f.settled.Generation || fmt.Sprint(memberIDs(held)) != fmt.Sprint(memberIDs(f.settled)) {
		t.Errorf("after the hand-over past corrupt records: generation %d, members %v; before: generation %d, members %v",
			held.Generation, memberIDs(held), f.settled.Generation, memberIDs(f.settled))
	}
	metrics := f.survivor.metrics(t)
	for _, reason := range []string{"magic", "payload", "kind", "key"} {
		if want := fmt.Sprintf(`wasmassign_cluster_state_records_skipped_total{reason=%q} 1`, reason); !strings.Contains(metrics, want) {
			t.Errorf("the survivor's metrics lack %s", want)
		}
	}
	named := false
	for _, line := range strings.Split(f.survivor.log.String(), "\n") {
		if strings.Contains(line, `msg="serving shard"`) && strings.Contains(line, fmt.Sprintf("shard=%d ", shard)) &&
			strings.Contains(line, "magic:1") && strings.Contains(line, "payload:1") && strings.Contains(line, "kind:1") && strings.Contains(line, "key:1") {
			named = true
		}
	}
	if !named {
		t.Errorf("the survivor's log does not name the records it skipped when it served shard %d:\n%s", shard, tail(f.survivor.log.String(), 20))
	}
	consumeAll(ctx, t, f.rig, f.topic, 150)
	if given := givenUp(l, mark); len(given) > 0 {
		t.Errorf("members gave partitions up across the hand-over: %v", given)
	}
	f.finish(ctx, t, true)
}

// TestCluster_AStateOfANewerFormatIsRefusedWithAClearError: a gateway
// finds, in the shard it is given, a record of a format newer than its
// own (a newer gateway wrote it). It must not serve the shard from what it
// cannot read: it logs why, naming the format and what to do, stays up
// and not ready, and answers the shard's groups
// COORDINATOR_LOAD_IN_PROGRESS rather than restarting them.
func TestCluster_AStateOfANewerFormatIsRefusedWithAClearError(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	upstream := eventsCluster(t, 1, 4).ListenAddrs()
	const id = "newer-format"
	topic := "wasmassign-" + "solo." + id + "-state"
	admin := adminClient(t, upstream, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, 1, 1
	ct.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "cleanup.policy", Value: kmsg.StringPtr("compact")}}
	create.Topics = append(create.Topics, ct)
	if resp, err := create.RequestWith(ctx, admin); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("creating the state topic: %v %+v", err, resp)
	}
	if err := admin.ProduceSync(ctx, stateRecord(topic, 0, groupKey("g"), "WA\x02\x01{}")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(t.TempDir(), "gateway.toml")
	if err := os.WriteFile(cfgFile, []byte(testutil.GatewayConfig{
		Brokers: upstream,
		Groups:  []testutil.GroupRule{{Match: "*"}},
		Extra:   fmt.Sprintf("[cluster]\nid = %q\n", id),
	}.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemonUnready(t, cfgFile) // it never becomes ready
	if err := kfakegroup.WaitFor(ctx, func() error {
		if !strings.Contains(d.log.String(), "newer than this gateway's 1: upgrade this gateway") {
			return fmt.Errorf("no error naming the newer format yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("%v; log:\n%s", err, tail(d.log.String(), 20))
	}
	select {
	case <-d.exited:
		t.Fatalf("the gateway exited on a newer record: %v", d.exitErr)
	default:
	}
	if code := readyz(t, d); code != 503 {
		t.Errorf("/readyz of a gateway that serves no shard: %d, want 503", code)
	}
	// Straight to one of the gateway's listeners: a client's retries of
	// COORDINATOR_LOAD_IN_PROGRESS would hide the answer.
	cl := adminClient(t, []string{d.bootstrap})
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil || len(meta.Brokers) == 0 {
		t.Fatalf("metadata through the gateway: %v %+v", err, meta)
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0}}}
	raw, err := cl.Broker(int(meta.Brokers[0].NodeID)).Request(ctx, join)
	if err != nil {
		t.Fatal(err)
	}
	if code := raw.(*kmsg.JoinGroupResponse).ErrorCode; code != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("JoinGroup of a group in the refused shard: %v, want COORDINATOR_LOAD_IN_PROGRESS", kerr.ErrorForCode(code))
	}
}

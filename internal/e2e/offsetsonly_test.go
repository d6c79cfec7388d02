package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/internal/testutil"
)

// TestGroups_OffsetsAloneAreListedAndDescribedEmpty commits offsets for a
// managed group that never had members, as a Flink or Spark job using
// assign() does, through the gateway. Kafka lists such a group and
// describes it as Empty with no protocol type, and lag exporters rely on
// it: the gateway must too, rather than hide it or call it Dead.
func TestGroups_OffsetsAloneAreListedAndDescribedEmpty(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	cluster := eventsCluster(t, 1, 2)
	cfg := testutil.GatewayConfig{Brokers: cluster.ListenAddrs(), Groups: []testutil.GroupRule{{Match: "*"}}}.String()
	d := startDaemon(t, t.TempDir(), cfg)
	cl := adminClient(t, []string{d.bootstrap})

	const group = "offsets-only"
	commit := testutil.SimpleCommit(7, group, "events", 0, 7) // topics by name, as librdkafka and kafkajs commit
	raw, err := cl.Request(ctx, upPinned{commit})
	if err != nil {
		t.Fatal(err)
	}
	if cresp := raw.(*kmsg.OffsetCommitResponse); cresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit: %+v", cresp)
	}

	list := kmsg.NewPtrListGroupsRequest()
	lresp, err := list.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, g := range lresp.Groups {
		if g.Group == group {
			listed = true
			if g.ProtocolType != "" {
				t.Errorf("listed with protocol type %q, want none", g.ProtocolType)
			}
		}
	}
	if !listed {
		t.Errorf("ListGroups through the gateway lists %+v, without the group that has only offsets", lresp.Groups)
	}

	desc := kmsg.NewPtrDescribeGroupsRequest()
	desc.Groups = []string{group}
	dresp, err := desc.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(dresp.Groups) != 1 || dresp.Groups[0].ErrorCode != 0 || dresp.Groups[0].State != "Empty" || dresp.Groups[0].ProtocolType != "" {
		t.Errorf("DescribeGroups: %+v, want Empty with no protocol type", dresp.Groups)
	}
}

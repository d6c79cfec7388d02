package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/testutil/realkafka"
)

// TestRealKafkaCluster_AKilledOwnersGroupMovesForJavaLibrdkafkaAndKgo runs
// three gateway processes of one cluster, with the default cluster timing,
// in front of a real Apache Kafka broker, and a cooperative-sticky group of
// two Java kafka-clients consumers, one confluent-kafka (librdkafka)
// consumer and one kgo consumer, each a process, that bootstrap from all
// three. The gateway that owns the group is killed (SIGKILL) mid-traffic.
// With the defaults no partition is ever assigned to a member while
// another holds it (the listeners' timelines); every record is read,
// exactly once when no member gave a partition up (the goal: the failover
// moves no partition; kgo gives its partitions up when its lookup of the
// new coordinator dials the dead gateway, see
// TestCluster_AKilledGatewaysGroupsMoveWithTheirState); and the commits
// the consumers make as they close are the end offsets.
//
// A Java consumer names the gateway FindCoordinator gave it in each new
// connection's ApiVersions (KIP-1242): the member joins only if the
// gateways answer that as the gateway it means would.
func TestRealKafkaCluster_AKilledOwnersGroupMovesForJavaLibrdkafkaAndKgo(t *testing.T) {
	python := pyInterpreter(t)
	ctx := testCtx(t, 240*time.Second)
	confluent := pyVersion(ctx, t, python, "consume_confluent.py")
	startCtx, cancel := context.WithTimeout(ctx, 100*time.Second)
	c := realkafka.Start(startCtx, t, realkafka.Options{})
	cancel()
	ds := clusterGateways(t, []string{c.Nodes[0].Addr}, 3, "")
	var seeds []string
	for _, d := range ds {
		seeds = append(seeds, d.bootstrap)
	}
	bootstrap := strings.Join(seeds, ",")
	// As behind a load balancer's health check: the consumers start once
	// every gateway serves its shards.
	waitAllReady(ctx, t, ds)
	direct := c.Client(t)
	const group, topic, parts = "cluster-mixed", "cluster-mixed", 8
	createTopicPlaced(ctx, t, direct, topic, parts)

	// The test scripts' 6 s sessions are for groups on one gateway. A
	// failover with the default cluster timing takes a gateway session and
	// a lease (16 s), and librdkafka gives its assignment up once its own
	// session passes without an answer: the members keep 30 s, below
	// Kafka's 45 s default.
	const session = "session.timeout.ms=30000"
	run := javaBuild(ctx, t, c)
	start := func(id string) *procMember {
		return startProcMember(t, id, topic, run.command(ctx, "Consume", bootstrap, group, topic, "CooperativeStickyAssignor", id, "-", "-", "0", session))
	}
	members := []*procMember{
		start("java-1"),
		start("java-2"),
		pyStart(ctx, t, python, confluent, bootstrap, group, topic, "cooperative-sticky", "ck-1", "-", "-", session),
		startKgoMember(t, bootstrap, group, topic, "kgo-1", 30*time.Second),
	}
	owner, _, err := ownerOf(ctx, ds, group)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := settledMembers(ctx, owner, group, topic, parts, members, nil); err != nil {
		t.Fatal(err)
	}
	produce(ctx, t, c.Addrs(), topic, 300)
	end, err := endOffsets(ctx, direct, topic, parts)
	if err != nil {
		t.Fatal(err)
	}
	mustReadAllOnce(ctx, t, members, end)

	marks := make([]int, len(members))
	for i, m := range members {
		marks[i] = m.mark()
	}
	killed := time.Now()
	if err := owner.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-owner.exited
	produce(ctx, t, c.Addrs(), topic, 150)
	if end, err = endOffsets(ctx, direct, topic, parts); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := readAll(rctx, members, end); err != nil {
		t.Fatal(err)
	}
	read := time.Since(killed)
	// The group is served again once a survivor holds it: until then
	// nothing can commit.
	var survivors []*daemon
	for _, d := range ds {
		if d != owner {
			survivors = append(survivors, d)
		}
	}
	next, _, err := ownerOf(rctx, survivors, group)
	if err != nil {
		t.Fatal(err)
	}
	resumed := time.Since(killed)
	// A member that gave its partitions up rejoins, and the group settles
	// a rebalance later.
	if _, err := settledMembers(rctx, next, group, topic, parts, members, nil); err != nil {
		t.Fatal(err)
	}
	settledAgain := time.Since(killed)
	var given []string
	for i, m := range members {
		if ps := m.revokedSince(marks[i]); len(ps) > 0 {
			given = append(given, fmt.Sprintf("%s %v", m.clientID, ps))
		}
	}
	t.Logf("every record read %v after the kill, the group served again after %v and settled after %v; partitions given up across the failover: %v",
		read.Round(time.Millisecond), resumed.Round(time.Millisecond), settledAgain.Round(time.Millisecond), given)
	if resumed > 30*time.Second {
		t.Errorf("the group was served again %v after the kill, want within 30s", resumed)
	}
	if len(given) == 0 {
		if err := readAllOnce(rctx, members, end); err != nil {
			t.Error(err)
		}
	}
	if err := javaNoDoubleOwnership(members); err != nil {
		t.Error(err)
	}
	for _, m := range members {
		m.stop()
	}
	if err := checkCommittedAtEnd(ctx, direct, group, topic, parts); err != nil {
		t.Error(err)
	}
}

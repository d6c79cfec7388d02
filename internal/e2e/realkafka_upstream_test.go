package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
	"github.com/wasmassign/wasmassign/internal/testutil/matrix"
	"github.com/wasmassign/wasmassign/internal/testutil/realkafka"
)

// Users of the broker's SASL/PLAIN listener: the gateway's own client
// authenticates as upGatewayUser, the test's clients as upClientUser.
const (
	upGatewayUser, upGatewayPass = "gateway", "gateway-secret"
	upClientUser, upClientPass   = "alice", "alice-secret"
)

// upConfig fronts one real broker at addr; groups named up-* are managed,
// everything else (the direct-* comparison groups) passes through. sasl,
// when set, is the [upstream] lines of the gateway's own authentication.
func upConfig(addr, sasl string) string {
	return testutil.GatewayConfig{
		Brokers:  []string{addr},
		Upstream: sasl,
		Groups:   []testutil.GroupRule{{Match: "up-*"}},
	}.String()
}

// upPinned sends a request at exactly the version it carries: kgo would
// otherwise raise it to the highest version both sides know, and
// OffsetCommit v10 names topics by an id these hand-made requests do not
// fill in. v9 and below name topics, as kafka-consumer-groups.sh's admin
// client does.
type upPinned struct{ kmsg.Request }

func (p upPinned) MaxVersion() int16 { return p.GetVersion() }

// upAdminCommit commits offsets for group as an admin tool does (reset
// offsets): generation -1, no member id, no instance id. It returns each
// partition's error code.
func upAdminCommit(ctx context.Context, cl *kgo.Client, group, topic string, offsets map[int32]int64) (map[int32]int16, error) {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = 8
	req.Group, req.Generation, req.MemberID = group, -1, ""
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for _, p := range slices.Sorted(maps.Keys(offsets)) {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, offsets[p], -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Request(ctx, upPinned{req})
	if err != nil {
		return nil, fmt.Errorf("OffsetCommit %s as an admin: %w", group, err)
	}
	out := make(map[int32]int16)
	for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.ErrorCode
		}
	}
	if len(out) != len(offsets) {
		return nil, fmt.Errorf("OffsetCommit %s answered %d partitions of %d", group, len(out), len(offsets))
	}
	return out, nil
}

// upCodes is the one error code every partition got, or an error naming
// the mixture.
func upCodes(codes map[int32]int16) (int16, error) {
	var first int16
	for i, p := range slices.Sorted(maps.Keys(codes)) {
		if i == 0 {
			first = codes[p]
		} else if codes[p] != first {
			return 0, fmt.Errorf("partitions answered differently: %v", codes)
		}
	}
	return first, nil
}

// upListed asks every broker cl knows for its groups, as
// kafka-consumer-groups.sh --list does, and returns every entry, duplicates
// included.
func upListed(ctx context.Context, cl *kgo.Client) ([]kmsg.ListGroupsResponseGroup, error) {
	var out []kmsg.ListGroupsResponseGroup
	for _, sh := range cl.RequestSharded(ctx, kmsg.NewPtrListGroupsRequest()) {
		if sh.Err != nil {
			return nil, fmt.Errorf("ListGroups on broker %d: %w", sh.Meta.NodeID, sh.Err)
		}
		resp := sh.Resp.(*kmsg.ListGroupsResponse)
		if resp.ErrorCode != 0 {
			return nil, fmt.Errorf("ListGroups on broker %d: %w", sh.Meta.NodeID, kerr.ErrorForCode(resp.ErrorCode))
		}
		out = append(out, resp.Groups...)
	}
	return out, nil
}

// upDeleteGroup deletes one group and returns its error code.
func upDeleteGroup(ctx context.Context, cl *kgo.Client, group string) (int16, error) {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("DeleteGroups %s: %w", group, err)
	}
	if len(resp.Groups) != 1 {
		return 0, fmt.Errorf("DeleteGroups %s: answered %+v", group, resp.Groups)
	}
	return resp.Groups[0].ErrorCode, nil
}

// upOffsetDelete deletes group's offsets of the given partitions and
// returns the request's error code and each partition's.
func upOffsetDelete(ctx context.Context, cl *kgo.Client, group, topic string, partitions ...int32) (int16, map[int32]int16, error) {
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = group
	rt := kmsg.NewOffsetDeleteRequestTopic()
	rt.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewOffsetDeleteRequestTopicPartition()
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, nil, fmt.Errorf("OffsetDelete %s: %w", group, err)
	}
	out := make(map[int32]int16)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.ErrorCode
		}
	}
	return resp.ErrorCode, out, nil
}

// upWaitCommitted polls the broker (through direct, bypassing the gateway)
// until group's committed offsets of topic are want.
func upWaitCommitted(ctx context.Context, direct *kgo.Client, group, topic string, want map[int32]int64) error {
	return kfakegroup.WaitFor(ctx, func() error {
		got, err := committedOffsets(ctx, direct, group, topic, int32(len(want)))
		if err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("the broker holds commits %v of %s for %s, want %v", got, group, topic, want)
		}
		return nil
	})
}

// upCloseReadOnce closes rig's members (each commits and leaves) and
// checks that they consumed every record produced exactly once.
func upCloseReadOnce(ctx context.Context, t *testing.T, rig *kfakegroup.Rig) {
	t.Helper()
	if err := rig.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kfakegroup.AllConsumedOnce(rig.Ledger()); err != nil {
		t.Error(err)
	}
}

// upMustCommitEnd fails the test unless group's commits of topic on the
// broker (read through direct) reach the topic's current end offsets,
// which it returns.
func upMustCommitEnd(ctx context.Context, t *testing.T, direct *kgo.Client, group, topic string, parts int32) map[int32]int64 {
	t.Helper()
	end, err := endOffsets(ctx, direct, topic, parts)
	if err != nil {
		t.Fatal(err)
	}
	if err := upWaitCommitted(ctx, direct, group, topic, end); err != nil {
		t.Fatal(err)
	}
	return end
}

// upProduce writes n records to topic through seeds with opts (SASL, for
// one) and enters each acknowledged record in l.
func upProduce(ctx context.Context, t *testing.T, seeds []string, topic string, n int, l *kfakegroup.Ledger, opts ...kgo.Opt) {
	t.Helper()
	for _, r := range produced(ctx, t, seeds, topic, n, opts...) {
		l.AddProduced(kfakegroup.RecordID{Topic: r.Record.Topic, Partition: r.Record.Partition, Offset: r.Record.Offset})
	}
}

// upDirectMember configures a rig member straight on the broker, whose
// group.min.session.timeout.ms (6 s) refuses the rig's default 3 s.
func upDirectMember() kfakegroup.ConsumerOptions {
	return kfakegroup.ConsumerOptions{SessionTimeout: 10 * time.Second, HeartbeatInterval: time.Second}
}

// upGroupAdmin runs testdata/realkafka/java/GroupAdmin.java, the Java
// Admin client making kafka-consumer-groups.sh's calls, against bootstrap
// and returns each call's printed outcome ("ok ...", "error E") by name.
func upGroupAdmin(ctx context.Context, c *realkafka.Cluster, bootstrap, group, topic string, partitions int, calls ...string) (map[string]string, error) {
	src := filepath.Join(env.root, "testdata", "realkafka", "java", "GroupAdmin.java")
	cmd := c.JavaCommand(ctx, src, bootstrap, group, topic, strconv.Itoa(partitions), strings.Join(calls, ","))
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("GroupAdmin %s on %s: %v\n%s", group, bootstrap, err, tail(stderr.String(), 20))
	}
	got := make(map[string]string)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if name, rest, ok := strings.Cut(line, " "); ok {
			got[name] = rest
		}
	}
	for _, call := range calls {
		if _, ok := got[call]; !ok {
			return got, fmt.Errorf("GroupAdmin %s on %s printed no %q line: %q", group, bootstrap, call, out)
		}
	}
	return got, nil
}

// upGet fetches an admin route of d and returns its status and body.
func upGet(ctx context.Context, d *daemon, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.admin+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// upAlive checks that d still runs and that its admin listener answers
// /healthz.
func upAlive(ctx context.Context, d *daemon) error {
	select {
	case <-d.exited:
		return fmt.Errorf("the daemon exited: %v", d.exitErr)
	default:
	}
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	code, body, err := upGet(hctx, d, "/healthz")
	if err != nil || code != http.StatusOK {
		return fmt.Errorf("/healthz: %d %q %v", code, body, err)
	}
	return nil
}

// upStartMembers starts kgo members of the rig's group named names and
// waits until the gateway shows them Stable, each holding what the
// gateway assigned it.
func upStartMembers(ctx context.Context, t *testing.T, d *daemon, rig *kfakegroup.Rig, group string, names []string, extra ...kgo.Opt) adminGroup {
	t.Helper()
	for _, n := range names {
		if _, err := rig.Start(n, kfakegroup.ConsumerOptions{Extra: extra}); err != nil {
			t.Fatal(err)
		}
	}
	all := slices.Collect(maps.Keys(rig.Consumers()))
	g, err := settled(ctx, d, group, rig.Ledger(), all)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// upConsumingGroup creates topic with parts partitions on the broker
// (through direct), starts kgo members a and b of group through d (with
// opts, SASL for one), and has them consume n records produced through
// seeds. The test's cleanup closes the rig.
func upConsumingGroup(ctx context.Context, t *testing.T, d *daemon, direct *kgo.Client, group, topic string, parts int32, seeds []string, n int, opts ...kgo.Opt) (*kfakegroup.Rig, adminGroup) {
	t.Helper()
	createTopic(ctx, t, direct, topic, parts)
	rig := kfakegroup.NewRig([]string{d.bootstrap}, group, []string{topic}, nil)
	t.Cleanup(func() { rig.Close(context.Background()) })
	g := upStartMembers(ctx, t, d, rig, group, []string{"a", "b"}, opts...)
	upProduceConsumed(ctx, t, seeds, topic, n, rig, opts...)
	return rig, g
}

// upProduceConsumed produces n records to topic through seeds (with opts)
// and waits until rig's members have consumed everything produced.
func upProduceConsumed(ctx context.Context, t *testing.T, seeds []string, topic string, n int, rig *kfakegroup.Rig, opts ...kgo.Opt) {
	t.Helper()
	upProduce(ctx, t, seeds, topic, n, rig.Ledger(), opts...)
	if err := kfakegroup.WaitFor(ctx, kfakegroup.AllConsumed(rig.Ledger())); err != nil {
		t.Fatal(err)
	}
}

// TestRealKafkaUpstream_WhatOnlyARealBrokerShows runs kgo consumer groups
// through `wasmassign serve` in front of a real Apache Kafka broker and
// checks what kfake cannot show:
//   - the broker accepts the commits the gateway forwards with generation
//     -1 for a group it sees without members, and a consumer that bypasses
//     the gateway starts from them;
//   - kafka-consumer-groups.sh's calls (kmsg, and the Java Admin client that
//     the tool uses) through the gateway describe and list the managed group
//     as its members see it, once; on an active group they get exactly the
//     refusals the broker gives its own active group; on an Empty group
//     offsets are reset, deleted and the group deleted, on the broker;
//   - SASL/PLAIN passes through to the broker's SASL listener, a wrong
//     password is the broker's SASL_AUTHENTICATION_FAILED, and a client
//     that never authenticates cannot touch the managed group;
//   - when the broker crashes, requests through the gateway fail at once
//     rather than hang, /readyz says the upstream is unreachable and the
//     daemon keeps running; when it returns, the group consumes new records
//     without a daemon restart, reading nothing twice, and the offsets
//     committed before the crash are intact.
//
// One broker serves every subtest; the crash comes last.
func TestRealKafkaUpstream_WhatOnlyARealBrokerShows(t *testing.T) {
	ctx := testCtx(t, 240*time.Second)
	startCtx, cancel := context.WithTimeout(ctx, 100*time.Second)
	c := realkafka.Start(startCtx, t, realkafka.Options{
		SASLPlainUsers: map[string]string{upGatewayUser: upGatewayPass, upClientUser: upClientPass},
	})
	cancel()
	direct := c.Client(t)
	d := startDaemon(t, t.TempDir(), upConfig(c.Nodes[0].Addr, ""))
	upstream := "Apache Kafka " + c.Cache.Version

	t.Run("forwarded commits are read back by a client bypassing the gateway", func(t *testing.T) {
		matrix.Record(t, rkKgoRow(t, "range", upstream))
		const group, topic, parts = "up-commits", "up-commits", 4
		rig, g := upConsumingGroup(ctx, t, d, direct, group, topic, parts, c.Addrs(), 200)
		// The members auto-commit while they run; the broker takes the
		// forwarded commits for a group in which it has no member.
		upMustCommitEnd(ctx, t, direct, group, topic, parts)
		dg, err := describeGroup(ctx, direct, group)
		if err != nil {
			t.Fatal(err)
		}
		if dg.State != "Empty" || len(dg.Members) != 0 {
			t.Errorf("the broker sees group %s as %s with %d members while the gateway runs it (%s, generation %d): "+
				"commits must reach it without membership", group, dg.State, len(dg.Members), g.State, g.Generation)
		}
		upCloseReadOnce(ctx, t, rig)

		// A consumer of the same group straight on the broker starts where
		// the gateway's members committed: it reads only what comes after.
		more := kfakegroup.NewRig(c.Addrs(), group, []string{topic}, nil)
		defer more.Close(context.Background())
		if _, err := more.Start("direct", upDirectMember()); err != nil {
			t.Fatal(err)
		}
		upProduceConsumed(ctx, t, c.Addrs(), topic, 40, more)
		if err := more.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if p, n := more.Ledger().Counts(); p != n || n != 40 {
			t.Errorf("the direct consumer read %d records, want exactly the %d produced after the gateway's commits", n, p)
		}
	})

	t.Run("kafka-consumer-groups admin calls through the gateway", func(t *testing.T) {
		matrix.Record(t, rkKgoRow(t, "range", upstream))
		matrix.Record(t, matrix.Row{Client: "Java kafka-clients Admin (kafka-consumer-groups.sh calls)", Version: c.Cache.Version,
			Strategy: "range", Upstream: upstream})
		const group, topic, parts = "up-admin", "up-admin", 3
		rig, g := upConsumingGroup(ctx, t, d, direct, group, topic, parts, c.Addrs(), 30)
		gw := adminClient(t, []string{d.bootstrap})

		// The same group run by the broker itself, to compare refusals.
		const cmpGroup = "direct-admin"
		cmp := kfakegroup.NewRig(c.Addrs(), cmpGroup, []string{topic}, nil)
		defer cmp.Close(context.Background())
		if _, err := cmp.Start("cmp", upDirectMember()); err != nil {
			t.Fatal(err)
		}
		if err := kfakegroup.WaitFor(ctx, func() error {
			dg, err := describeGroup(ctx, direct, cmpGroup)
			if err != nil {
				return err
			}
			if dg.State != "Stable" || len(dg.Members) != 1 {
				return fmt.Errorf("%s is %s with %d members on the broker", cmpGroup, dg.State, len(dg.Members))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}

		// --describe: the gateway's view, members and protocol included.
		dg, err := describeGroup(ctx, gw, group)
		if err != nil {
			t.Fatal(err)
		}
		if dg.ErrorCode != 0 || dg.State != "Stable" || dg.ProtocolType != "consumer" || dg.Protocol != "range" {
			t.Errorf("described as error %d, %s, type %q, protocol %q; want Stable consumer range", dg.ErrorCode, dg.State, dg.ProtocolType, dg.Protocol)
		}
		var described []string
		for _, m := range dg.Members {
			described = append(described, m.MemberID)
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(m.MemberAssignment); err != nil {
				t.Errorf("member %s's assignment does not decode: %v", m.MemberID, err)
				continue
			}
			var got []int32
			for _, at := range a.Topics {
				got = append(got, at.Partitions...)
			}
			for _, am := range g.Members {
				if am.MemberID == m.MemberID && !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(am.Assignment[topic]))) {
					t.Errorf("DescribeGroups gives %s %v; the gateway assigned %v", m.MemberID, got, am.Assignment[topic])
				}
			}
		}
		if want := memberIDs(g); !slices.Equal(slices.Sorted(slices.Values(described)), slices.Sorted(slices.Values(want))) {
			t.Errorf("DescribeGroups lists members %v; the gateway has %v", described, want)
		}

		// --list: the managed group once, as its members see it, although
		// the broker lists it too (it holds the group's commits).
		listed, err := upListed(ctx, gw)
		if err != nil {
			t.Fatal(err)
		}
		var mine []kmsg.ListGroupsResponseGroup
		for _, lg := range listed {
			if lg.Group == group {
				mine = append(mine, lg)
			}
		}
		if len(mine) != 1 || mine[0].GroupState != "Stable" || mine[0].ProtocolType != "consumer" {
			t.Errorf("ListGroups through the gateway lists %s as %+v; want once, Stable, consumer", group, mine)
		}
		if !slices.ContainsFunc(listed, func(lg kmsg.ListGroupsResponseGroup) bool { return lg.Group == cmpGroup }) {
			t.Errorf("ListGroups through the gateway lost the broker's own group %s: %+v", cmpGroup, listed)
		}
		// The broker's entry is the gateway's own commits, not clients
		// bypassing it: no split-brain alarm.
		if strings.Contains(d.log.String(), "also listed upstream") {
			t.Errorf("the daemon raised a split-brain alarm for the group its own commits created upstream:\n%s", tail(d.log.String(), 10))
		}

		// Refusals on an active group are the broker's own.
		all := map[int32]int64{0: 0, 1: 0, 2: 0}
		refusals := []struct {
			name string
			call func(cl *kgo.Client, group string) (int16, error)
			want int16
		}{
			{"reset offsets", func(cl *kgo.Client, group string) (int16, error) {
				codes, err := upAdminCommit(ctx, cl, group, topic, all)
				if err != nil {
					return 0, err
				}
				return upCodes(codes)
			}, kerr.UnknownMemberID.Code},
			{"delete group", func(cl *kgo.Client, group string) (int16, error) {
				return upDeleteGroup(ctx, cl, group)
			}, kerr.NonEmptyGroup.Code},
			{"delete offsets of a subscribed topic", func(cl *kgo.Client, group string) (int16, error) {
				code, codes, err := upOffsetDelete(ctx, cl, group, topic, 0, 1)
				if err != nil || code != 0 {
					return code, err
				}
				return upCodes(codes)
			}, kerr.GroupSubscribedToTopic.Code},
		}
		for _, r := range refusals {
			got, err := r.call(gw, group)
			if err != nil {
				t.Errorf("%s on active %s through the gateway: %v", r.name, group, err)
				continue
			}
			broker, err := r.call(direct, cmpGroup)
			if err != nil {
				t.Errorf("%s on active %s on the broker: %v", r.name, cmpGroup, err)
				continue
			}
			if got != broker || got != r.want {
				t.Errorf("%s on an active group: the gateway answers %v, the broker %v; want %v",
					r.name, kerr.ErrorForCode(got), kerr.ErrorForCode(broker), kerr.ErrorForCode(r.want))
			}
		}
		// The Java Admin client, as kafka-consumer-groups.sh uses it, through
		// the gateway and on the broker's own group: it picks its request
		// versions from what the gateway offers.
		var viaGateway, onBroker map[string]string
		var gwErr, brErr error
		javaBegan := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			onBroker, brErr = upGroupAdmin(ctx, c, c.Bootstrap(), cmpGroup, topic, parts, "reset", "delete-offsets", "delete")
		}()
		viaGateway, gwErr = upGroupAdmin(ctx, c, d.bootstrap, group, topic, parts, "describe", "list", "reset", "delete-offsets", "delete")
		<-done
		if gwErr != nil || brErr != nil {
			t.Fatal(errors.Join(gwErr, brErr))
		}
		t.Logf("Java Admin through the gateway: %v; on the broker: %v (%v)", viaGateway, onBroker, time.Since(javaBegan).Round(time.Millisecond))
		if want := "ok state=Stable assignor=range members=2 partitions=0,1,2"; viaGateway["describe"] != want {
			t.Errorf("Java describeConsumerGroups through the gateway: %q, want %q", viaGateway["describe"], want)
		}
		if want := "ok state=Stable count=1"; viaGateway["list"] != want {
			t.Errorf("Java listGroups through the gateway: %q, want %q", viaGateway["list"], want)
		}
		for _, call := range []string{"reset", "delete-offsets", "delete"} {
			if !strings.HasPrefix(onBroker[call], "error ") || viaGateway[call] != onBroker[call] {
				t.Errorf("Java %s on an active group: through the gateway %q, on the broker %q", call, viaGateway[call], onBroker[call])
			}
		}
		if err := cmp.Close(ctx); err != nil {
			t.Fatal(err)
		}

		// Once the members have left, the same calls succeed, and the
		// broker holds what the admin set.
		if err := rig.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := kfakegroup.WaitFor(ctx, func() error {
			g, err := d.group(ctx, group)
			if err != nil {
				return err
			}
			if g.State != "Empty" {
				return fmt.Errorf("%s is %s in the gateway", group, g.State)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// The Java Admin client resets every partition to partition+1.
		javaBegan = time.Now()
		empty, err := upGroupAdmin(ctx, c, d.bootstrap, group, topic, parts, "reset", "offsets")
		t.Logf("Java Admin on the Empty group: %v (%v)", empty, time.Since(javaBegan).Round(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if empty["reset"] != "ok" || empty["offsets"] != "ok 0=1,1=2,2=3" {
			t.Errorf("Java reset of Empty %s through the gateway: %v", group, empty)
		}
		if err := upWaitCommitted(ctx, direct, group, topic, map[int32]int64{0: 1, 1: 2, 2: 3}); err != nil {
			t.Error(err)
		}
		// And kmsg, at OffsetCommit v8, to other offsets.
		reset := map[int32]int64{0: 4, 1: 5, 2: 6}
		codes, err := upAdminCommit(ctx, gw, group, topic, reset)
		if err != nil {
			t.Fatal(err)
		}
		if code, err := upCodes(codes); err != nil || code != 0 {
			t.Fatalf("reset offsets of Empty %s through the gateway: %v %v", group, kerr.ErrorForCode(code), err)
		}
		if err := upWaitCommitted(ctx, direct, group, topic, reset); err != nil {
			t.Error(err)
		}
		code, pcodes, err := upOffsetDelete(ctx, gw, group, topic, 0)
		if err != nil || code != 0 || pcodes[0] != 0 {
			t.Errorf("delete offsets of Empty %s partition 0 through the gateway: %v %v %v", group, kerr.ErrorForCode(code), pcodes, err)
		}
		if err := upWaitCommitted(ctx, direct, group, topic, map[int32]int64{0: -1, 1: 5, 2: 6}); err != nil {
			t.Error(err)
		}
		if code, err := upDeleteGroup(ctx, gw, group); err != nil || code != 0 {
			t.Errorf("delete Empty %s through the gateway: %v %v", group, kerr.ErrorForCode(code), err)
		}
		if dg, err := describeGroup(ctx, direct, group); err != nil || dg.State != "Dead" {
			t.Errorf("after DeleteGroups through the gateway the broker describes %s as %q (%v), want Dead", group, dg.State, err)
		}
		if _, err := d.group(ctx, group); err == nil {
			t.Errorf("after DeleteGroups the gateway still shows %s", group)
		}
	})

	t.Run("SASL/PLAIN passes through to the broker's SASL listener", func(t *testing.T) {
		matrix.Record(t, rkKgoRow(t, "range", upstream+" (SASL/PLAIN)"))
		sd := startDaemon(t, t.TempDir(), upConfig(c.Nodes[0].SASLAddr, fmt.Sprintf(
			"sasl_mechanism = \"PLAIN\"\nsasl_user = %q\nsasl_password = %q", upGatewayUser, upGatewayPass)))
		const group, topic, parts = "up-sasl", "up-sasl", 3
		auth := kgo.SASL(plain.Auth{User: upClientUser, Pass: upClientPass}.AsMechanism())
		rig, _ := upConsumingGroup(ctx, t, sd, direct, group, topic, parts, []string{sd.bootstrap}, 90, auth)
		upCloseReadOnce(ctx, t, rig)
		if err := checkCommittedAtEnd(ctx, direct, group, topic, parts); err != nil {
			t.Error(err)
		}

		// A wrong password is the broker's refusal, passed through.
		bad := adminClient(t, []string{sd.bootstrap}, kgo.SASL(plain.Auth{User: upClientUser, Pass: "wrong"}.AsMechanism()))
		bctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		began := time.Now()
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(bctx, bad)
		t.Logf("wrong password: %v after %v", err, time.Since(began))
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("a wrong password through the gateway got %v, want SASL_AUTHENTICATION_FAILED", err)
		}

		// A client that does not authenticate gets nothing: not the
		// broker's data (the broker closes its connection), and not the
		// managed group, which the gateway answers for itself and whose
		// commits it forwards with its own credentials.
		none := adminClient(t, []string{sd.bootstrap}, kgo.RequestRetries(1))
		nctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(nctx, none); err == nil {
			t.Error("Metadata without SASL through the gateway was answered")
		}
		zero := map[int32]int64{0: 0, 1: 0, 2: 0}
		if codes, err := upAdminCommit(nctx, none, group, topic, zero); err == nil {
			t.Errorf("an unauthenticated client reset the offsets of %s through the gateway: %v", group, codes)
		}
		if err := checkCommittedAtEnd(ctx, direct, group, topic, parts); err != nil {
			t.Errorf("after an unauthenticated reset: %v", err)
		}
		if err := upAlive(ctx, sd); err != nil {
			t.Error(err)
		}
	})

	t.Run("the broker crashes and comes back", func(t *testing.T) {
		matrix.Record(t, rkKgoRow(t, "range", upstream+" (crashed and restarted mid-test)"))
		const group, topic, parts = "up-outage", "up-outage", 3
		rig, _ := upConsumingGroup(ctx, t, d, direct, group, topic, parts, c.Addrs(), 90)
		before := upMustCommitEnd(ctx, t, direct, group, topic, parts)

		g, err := d.group(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		genBefore := g.Generation

		logBeforeKill := len(d.log.String())
		// SIGKILL, as a crash: no controlled shutdown, no goodbye to clients.
		if err := c.KillNode(1); err != nil {
			t.Fatal(err)
		}
		// While the broker is away, a request through the gateway fails
		// fast: the gateway accepts the connection, cannot reach the
		// broker, and closes it, so kgo reports the connection closed
		// rather than waiting out its deadline. An admin commit, which the
		// gateway checks and then forwards, fails the same way.
		probe := adminClient(t, []string{d.bootstrap}, kgo.RequestRetries(2))
		for _, call := range []struct {
			name string
			do   func(context.Context) error
		}{
			{"Metadata", func(ctx context.Context) error {
				_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, probe)
				return err
			}},
			{"reset offsets", func(ctx context.Context) error {
				_, err := upAdminCommit(ctx, probe, group+"-reset", topic, map[int32]int64{0: 1})
				return err
			}},
		} {
			pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			began := time.Now()
			err := call.do(pctx)
			cancel()
			took := time.Since(began)
			t.Logf("%s through the gateway while the broker is away: %v, after %v", call.name, err, took.Round(time.Millisecond))
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s through the gateway while the broker is away: %v after %v; want a prompt error", call.name, err, took)
			}
		}
		// The operator sees why; the process stays up.
		// Readiness follows the metadata refresh, so it may lag a moment.
		if err := kfakegroup.WaitFor(ctx, func() error {
			if code, body, err := upGet(ctx, d, "/readyz"); err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "upstream") {
				return fmt.Errorf("/readyz while the broker is away: %d %q %v; want 503 naming the upstream", code, body, err)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
		if !strings.Contains(d.log.String()[logBeforeKill:], "connection refused") {
			t.Error("the daemon did not log that the upstream refuses connections")
		}
		if err := upAlive(ctx, d); err != nil {
			t.Fatal(err)
		}

		began := time.Now()
		if err := c.RestartNode(ctx, 1); err != nil {
			t.Fatal(err)
		}
		t.Logf("broker back after %v", time.Since(began).Round(time.Millisecond))
		// Read before anything new is produced: the members may commit
		// again, but only what they had already committed.
		after, err := committedOffsets(ctx, direct, group, topic, parts)
		if err != nil || !maps.Equal(after, before) {
			t.Errorf("after the outage the broker holds commits %v (%v); before it %v", after, err, before)
		}
		began = time.Now()
		upProduceConsumed(ctx, t, c.Addrs(), topic, 60, rig)
		if g, err = d.group(ctx, group); err != nil {
			t.Fatal(err)
		}
		t.Logf("the group consumed new records %v after the broker's return; generation %d before the outage, %d after",
			time.Since(began).Round(time.Millisecond), genBefore, g.Generation)
		// Member sessions wait while the upstream is down, as a Kafka
		// coordinator's do across a failover: the gateway expires no one
		// until it answers again. (kgo itself rejoins after failed
		// heartbeats, with new metadata, so the generation may still move;
		// and a 3 s session may run out after the return on a loaded
		// machine, which is the client's timing, not the outage's.)
		// The daemon notices the return at its next metadata check, which
		// can come after the members have already consumed through it.
		restartCtx, cancelRestart := context.WithTimeout(ctx, 15*time.Second)
		kfakegroup.WaitFor(restartCtx, func() error {
			if !strings.Contains(d.log.String()[logBeforeKill:], "member sessions restart") {
				return errors.New("no restart logged")
			}
			return nil
		})
		cancelRestart()
		during := d.log.String()[logBeforeKill:]
		paused := strings.Index(during, "member sessions paused")
		resumed := strings.Index(during, "member sessions restart")
		if paused < 0 || resumed < paused {
			t.Errorf("across the outage the daemon did not pause member sessions and restart them:\n%s", tail(during, 30))
		} else if strings.Contains(during[:resumed], "session timeout") {
			t.Errorf("a member's session expired while the upstream was down:\n%s", tail(during[:resumed], 30))
		}
		if err := kfakegroup.WaitFor(ctx, func() error {
			code, body, err := upGet(ctx, d, "/readyz")
			if err != nil || code != http.StatusOK {
				return fmt.Errorf("/readyz: %d %q %v", code, body, err)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
		// Nothing was read twice: the members resumed from their commits.
		upCloseReadOnce(ctx, t, rig)
		if err := checkCommittedAtEnd(ctx, direct, group, topic, parts); err != nil {
			t.Error(err)
		}
	})
}

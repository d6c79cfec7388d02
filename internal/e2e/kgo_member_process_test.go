package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// envKgoMember, when set, makes the e2e test binary a kgo consumer process
// (TestMain runs it instead of the tests): "bootstrap group topic
// client-id session-timeout", separated by spaces. It prints the member
// protocol procMember reads, so that kgo members stand in one group, and
// one ownership timeline, with the Java and librdkafka processes.
const envKgoMember = "WASMASSIGN_E2E_KGO_MEMBER"

// serveKgoMemberIfRequested runs the kgo member process and exits, when
// envKgoMember asks for one.
func serveKgoMemberIfRequested() {
	if spec := os.Getenv(envKgoMember); spec != "" {
		os.Exit(runKgoMember(strings.Fields(spec)))
	}
}

// startKgoMember runs a kgo cooperative-sticky member of group on topic, as
// clientID, in a process of its own, until the test ends.
func startKgoMember(t *testing.T, bootstrap, group, topic, clientID string, session time.Duration) *procMember {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s %s %s", envKgoMember, bootstrap, group, topic, clientID, session))
	return startProcMember(t, clientID, topic, cmd)
}

// runKgoMember consumes until SIGTERM, printing each callback with the
// member's generation and its clock, and each record once polled; it then
// prints "closing" and closes the client, which commits what was polled
// (autocommit) and leaves the group.
func runKgoMember(args []string) int {
	if len(args) != 5 {
		fmt.Fprintf(os.Stderr, "%s: want bootstrap, group, topic, client id and session timeout, got %q\n", envKgoMember, args)
		return 2
	}
	bootstrap, group, topic, clientID := args[0], args[1], args[2], args[3]
	session, err := time.ParseDuration(args[4])
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: session timeout: %v\n", envKgoMember, err)
		return 2
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	emit := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		out.WriteString(s + "\n")
		out.Flush()
	}
	callback := func(kind string) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
			_, gen := cl.GroupMetadata()
			line := fmt.Sprintf("%s gen=%d t=%d", kind, gen, time.Now().UnixMicro())
			for _, p := range slices.Sorted(slices.Values(assigned[topic])) {
				line += fmt.Sprintf(" %s/%d", topic, p)
			}
			emit(line)
		}
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.ClientID(clientID),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.SessionTimeout(session),
		kgo.RetryTimeout(30*time.Second),
		kgo.OnPartitionsAssigned(callback("assigned")),
		kgo.OnPartitionsRevoked(callback("revoked")),
		kgo.OnPartitionsLost(callback("lost")),
	)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kgo member: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		fetches.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "kgo member: fetch %s/%d: %v\n", t, p, err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) { emit(fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset)) })
	}
	emit("closing")
	cl.Close()
	return 0
}

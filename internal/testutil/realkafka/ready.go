package realkafka

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readyGroup is the group whose coordinator lookup makes the broker create
// __consumer_offsets during startup, so tests never meet the
// COORDINATOR_NOT_AVAILABLE window of a fresh cluster.
const readyGroup = "realkafka-ready"

// waitReady polls until the metadata lists every running node and the group
// coordinator answers, failing early when a node exits.
func (c *Cluster) waitReady(ctx context.Context) error {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.Addrs()...),
		kgo.DialTimeout(2*time.Second),
		kgo.RetryTimeout(2*time.Second),
	)
	if err != nil {
		return fmt.Errorf("realkafka: readiness client: %w", err)
	}
	defer cl.Close()

	var last error
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := c.checkAlive(); err != nil {
			return err
		}
		last = c.probe(ctx, cl)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("realkafka: not ready before %v: %w (last probe: %v)", c.opts.StartTimeout, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// probe returns nil once the cluster serves metadata and groups.
func (c *Cluster) probe(ctx context.Context, cl *kgo.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	want := map[int32]bool{}
	for _, n := range c.Nodes {
		if pid := n.PID(); pid != 0 {
			want[n.ID] = true
		}
	}
	meta := kmsg.NewPtrMetadataRequest()
	resp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	got := map[int32]bool{}
	for _, b := range resp.Brokers {
		got[b.NodeID] = true
	}
	for id := range want {
		if !got[id] {
			return fmt.Errorf("metadata lists brokers %v, not yet node %d", keys(got), id)
		}
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = readyGroup
	fc.CoordinatorKeys = []string{readyGroup}
	fr, err := fc.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("find coordinator: %w", err)
	}
	code := fr.ErrorCode
	if len(fr.Coordinators) > 0 {
		code = fr.Coordinators[0].ErrorCode
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return fmt.Errorf("find coordinator: %w", err)
	}
	return nil
}

// checkAlive fails when a node that should run has exited, naming the port
// clash that Start retries, or quoting the node's log.
func (c *Cluster) checkAlive() error {
	for _, n := range c.Nodes {
		done, p := n.exited()
		if p == nil {
			continue
		}
		select {
		case <-done:
		default:
			continue
		}
		b, _ := readTail(n.LogPath, 64<<10)
		if bytes.Contains(b, []byte("Address already in use")) {
			return fmt.Errorf("%w (node %d)", errPortTaken, n.ID)
		}
		return fmt.Errorf("realkafka: node %d exited during startup (%v); log %s ends:\n%s", n.ID, p.err, n.LogPath, tail(b, 40))
	}
	return nil
}

func keys(m map[int32]bool) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// RSSKiB returns the node's resident set size in KiB from /proc, for the
// memory figures tests and benchmarks report; 0 when the node is stopped or
// /proc cannot be read.
func (n *Node) RSSKiB() int64 {
	pid := n.PID()
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var v int64
		if n, _ := fmt.Sscanf(string(line), "VmRSS: %d kB", &v); n == 1 {
			return v
		}
	}
	return 0
}

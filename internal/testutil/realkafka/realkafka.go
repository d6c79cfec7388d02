// Package realkafka starts real Apache Kafka brokers for tests: the JVM
// broker from Maven Central's kafka_2.13 jars, in KRaft mode, on loopback
// ports, with storage formatted by the harness in the test's temporary
// directory. It is the upstream for tests of the gateway's production path,
// where the embedded kfake cluster would hide the real broker's rules.
//
// The jars live in the cache that the Makefile owns (`make kafka-cache`,
// which runs internal/testutil/realkafka/fetch-kafka.sh); Start fetches them itself when they are
// missing and skips the test with that advice when it cannot.
//
// This package is for tests only. It must never be imported by production
// code, and it imports nothing of the gateway: it depends only on the
// standard library, franz-go and package testutil.
package realkafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmassign/wasmassign/internal/testutil"
)

// Options configures a cluster. The zero value is a one-node cluster of
// DefaultVersion with test-friendly settings.
type Options struct {
	// Brokers is the number of broker processes; 0 means 1. Node 1 runs in
	// combined mode (broker and the single KRaft controller); nodes 2..n are
	// brokers only. One controller keeps startup fast and election-free,
	// which several combined nodes on two cores were not.
	Brokers int
	// Racks sets broker.rack per node, in node order (Racks[0] is node 1).
	// Empty means no rack; otherwise it must have one entry per broker.
	Racks []string
	// ServerProperties are added to (and override) every node's
	// server.properties, e.g. {"auto.create.topics.enable": "false"}.
	ServerProperties map[string]string
	// SASLPlainUsers, when set, gives every node a second client listener,
	// SASL_PLAINTEXT with the PLAIN mechanism, that accepts these user names
	// and passwords (Node.SASLAddr). No ACLs are configured, so any
	// authenticated user may do anything. Brokers talk to each other over
	// PLAINTEXT.
	SASLPlainUsers map[string]string
	// JVMFlags replace DefaultJVMFlags() for the broker JVMs. Benchmarks
	// should drop -XX:TieredStopAtLevel=1, which trades peak speed for a
	// faster start.
	JVMFlags []string
	// Version is the Kafka version to run; empty means DefaultVersion.
	Version string
	// CacheDir holds the jars; empty means DefaultCacheDir.
	CacheDir string
	// StartTimeout bounds formatting and startup; 0 means 3 minutes, which a
	// loaded two-core machine needs for three JVMs.
	StartTimeout time.Duration
	// StopTimeout is how long a node gets to shut down after SIGTERM before
	// it is killed; 0 means 20 seconds.
	StopTimeout time.Duration
}

// DefaultJVMFlags are the broker JVM's flags unless Options.JVMFlags is set:
// a small heap, the serial collector and the C1 compiler only, which start
// fastest and use least memory on a small shared machine. Measured on two
// loaded cores: C1-only starts in about half the time of the default tiered
// compiler with G1. With the harness's 16 MiB log-cleaner buffer a broker
// starts and serves with -Xmx96m; 256m leaves room for throughput tests.
func DefaultJVMFlags() []string {
	return []string{
		"-Xms64m", "-Xmx256m",
		"-XX:+UseSerialGC",
		"-XX:TieredStopAtLevel=1",
		"-XX:+ExitOnOutOfMemoryError",
		"-Djava.awt.headless=true",
	}
}

// Cluster is a running set of broker processes. Its methods are safe for
// concurrent use.
type Cluster struct {
	// ClusterID is the random id the storage was formatted with.
	ClusterID string
	// Cache is where the jars came from.
	Cache Cache
	// Nodes are the processes, in node id order (Nodes[0] is node 1, the
	// controller).
	Nodes []*Node

	tb   testing.TB
	opts Options
	java string
}

// Node is one broker process.
type Node struct {
	// ID is the node.id (1-based).
	ID int32
	// Addr is the host:port of the PLAINTEXT listener that clients use.
	Addr string
	// SASLAddr is the SASL_PLAINTEXT listener's host:port when
	// Options.SASLPlainUsers is set, else empty.
	SASLAddr string
	// ControllerAddr is the controller listener's host:port; empty on
	// broker-only nodes.
	ControllerAddr string
	// Rack is broker.rack, or empty.
	Rack string
	// Dir holds server.properties, the data directory and the log.
	Dir string
	// LogPath is the broker's captured stdout and stderr.
	LogPath string

	mu   sync.Mutex
	proc *process // nil while stopped
}

// Start runs a cluster for the test and stops it when the test ends,
// printing each node's log tail if the test failed. It returns once every
// broker is in the cluster's metadata and the group coordinator answers, so
// callers can produce, consume and commit at once.
//
// ctx bounds fetching and startup only: the cluster lives until the test
// ends, or until StopNode. Start skips the test when the cache is missing
// and cannot be fetched, when no java is installed, or under -short, unless
// REALKAFKA_REQUIRED=1.
func Start(ctx context.Context, tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	if opts.Brokers == 0 {
		opts.Brokers = 1
	}
	if opts.Brokers < 1 {
		tb.Fatalf("realkafka: Brokers = %d", opts.Brokers)
	}
	if len(opts.Racks) != 0 && len(opts.Racks) != opts.Brokers {
		tb.Fatalf("realkafka: %d racks for %d brokers", len(opts.Racks), opts.Brokers)
	}
	if opts.Version == "" {
		opts.Version = DefaultVersion
	}
	if opts.JVMFlags == nil {
		opts.JVMFlags = DefaultJVMFlags()
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	if opts.StopTimeout == 0 {
		opts.StopTimeout = 20 * time.Second
	}
	if testing.Short() {
		skip(tb, "realkafka: a real broker takes seconds to start; skipped under -short")
	}
	java, err := javaPath()
	if err != nil {
		skip(tb, err.Error())
	}
	root := testutil.Root(tb)
	if opts.CacheDir == "" {
		opts.CacheDir = DefaultCacheDir(root, opts.Version)
	}

	// A first fetch downloads about 55 MB through Maven; it gets its own
	// bound so that it does not eat into the broker's start timeout.
	fetchCtx, cancelFetch := context.WithTimeout(ctx, 10*time.Minute)
	began := time.Now()
	cache, err := EnsureCache(fetchCtx, root, opts.CacheDir, opts.Version, os.Getenv(EnvNoFetch) != "1")
	cancelFetch()
	if err != nil {
		skip(tb, err.Error())
	}
	if took := time.Since(began); took > time.Second {
		tb.Logf("realkafka: fetched Kafka %s into %s in %v", opts.Version, opts.CacheDir, took.Round(time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	c := &Cluster{ClusterID: newClusterID(), Cache: cache, tb: tb, opts: opts, java: java}
	base := tb.TempDir() // before Cleanup(stop): cleanups run last-in first-out
	for i := 0; i < opts.Brokers; i++ {
		n := &Node{ID: int32(i + 1), Dir: filepath.Join(base, fmt.Sprintf("node%d", i+1))}
		n.LogPath = filepath.Join(n.Dir, "broker.log")
		if len(opts.Racks) > 0 {
			n.Rack = opts.Racks[i]
		}
		c.Nodes = append(c.Nodes, n)
	}
	tb.Cleanup(func() {
		// The tail before shutdown: what the broker did while the test ran,
		// not its shutdown chatter.
		if tb.Failed() {
			c.logTails(80)
		}
		began := time.Now()
		if err := c.stopAll(); err != nil {
			tb.Errorf("realkafka: stopping the cluster: %v", err)
		}
		tb.Logf("realkafka: cluster stopped in %v", time.Since(began).Round(time.Millisecond))
	})

	if err := c.start(ctx); err != nil {
		// The cleanup above prints the nodes' logs, the test having failed.
		tb.Fatalf("realkafka: starting Kafka %s (%d brokers): %v", opts.Version, opts.Brokers, err)
	}
	return c
}

// skip skips the test, or fails it when EnvRequired is set.
func skip(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv(EnvRequired) == "1" {
		tb.Fatalf("%s (%s=1 forbids skipping)", msg, EnvRequired)
	}
	tb.Skip(msg)
}

// javaPath finds the JDK's java: $JAVA_HOME/bin/java, else java on PATH.
func javaPath() (string, error) {
	if h := os.Getenv("JAVA_HOME"); h != "" {
		p := filepath.Join(h, "bin", "java")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("realkafka: no java in $JAVA_HOME/bin or on PATH; Kafka %s's broker needs a JDK 17 or newer", DefaultVersion)
	}
	return p, nil
}

// start picks ports, formats storage and starts every node, retrying with
// new ports when one was taken between choosing and binding it.
func (c *Cluster) start(ctx context.Context) error {
	const attempts = 3
	var err error
	for a := 0; a < attempts; a++ {
		if err = c.assignPorts(); err != nil {
			return err
		}
		if a == 0 {
			began := time.Now()
			if err = c.formatAll(ctx); err != nil {
				return err
			}
			c.tb.Logf("realkafka: formatted %d node(s) in %v", len(c.Nodes), time.Since(began).Round(time.Millisecond))
		} else if err = c.writeProperties(); err != nil {
			return err
		}
		began := time.Now()
		err = c.launchAll(ctx)
		if err == nil {
			c.tb.Logf("realkafka: Kafka %s ready in %v: %s", c.Cache.Version, time.Since(began).Round(time.Millisecond), c.Bootstrap())
			return nil
		}
		if !errors.Is(err, errPortTaken) {
			return err
		}
		c.tb.Logf("realkafka: %v; retrying with new ports", err)
		_ = c.stopAll()
	}
	return err
}

// Addrs are the brokers' client addresses, in node order.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// SASLAddrs are the brokers' SASL_PLAINTEXT addresses, in node order; nil
// unless Options.SASLPlainUsers was set.
func (c *Cluster) SASLAddrs() []string {
	if len(c.opts.SASLPlainUsers) == 0 {
		return nil
	}
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.SASLAddr
	}
	return out
}

// Bootstrap is Addrs joined with commas, as bootstrap.servers or the
// gateway's upstream.brokers take it.
func (c *Cluster) Bootstrap() string { return strings.Join(c.Addrs(), ",") }

// Client returns a franz-go client seeded with every broker, closed when the
// test ends. opts are appended after the seeds.
func (c *Cluster) Client(tb testing.TB, opts ...kgo.Opt) *kgo.Client {
	tb.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...)}, opts...)...)
	if err != nil {
		tb.Fatalf("realkafka: client: %v", err)
	}
	tb.Cleanup(cl.Close)
	return cl
}

// Node returns the node with the given id, or nil.
func (c *Cluster) Node(id int32) *Node {
	if id < 1 || int(id) > len(c.Nodes) {
		return nil
	}
	return c.Nodes[id-1]
}

// StopNode shuts one node down (SIGTERM, then SIGKILL after StopTimeout),
// for tests of an upstream that goes away. Its storage is kept, so
// RestartNode brings it back with its data.
func (c *Cluster) StopNode(id int32) error {
	n := c.Node(id)
	if n == nil {
		return fmt.Errorf("realkafka: no node %d", id)
	}
	return n.stop(c.opts.StopTimeout)
}

// KillNode ends one node with SIGKILL at once, as a crash would. A restart
// after a kill takes about ten seconds longer than after StopNode: the
// controller refuses the new incarnation until the old one's session
// (broker.session.timeout.ms, 9 s by default) has expired. The harness keeps
// that default, since a shorter session fences brokers starved of CPU on a
// loaded machine; set it in ServerProperties for crash-heavy tests.
func (c *Cluster) KillNode(id int32) error {
	n := c.Node(id)
	if n == nil {
		return fmt.Errorf("realkafka: no node %d", id)
	}
	return n.stop(0)
}

// RestartNode starts a stopped node again on the same ports and storage and
// waits until the cluster's metadata lists every broker again.
func (c *Cluster) RestartNode(ctx context.Context, id int32) error {
	n := c.Node(id)
	if n == nil {
		return fmt.Errorf("realkafka: no node %d", id)
	}
	if err := n.launch(c.java, c.Cache, c.opts.JVMFlags); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	return c.waitReady(ctx)
}

// PID returns the node's process id, or 0 while it is stopped; tests read
// its memory use from /proc with it.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return 0
	}
	return n.proc.cmd.Process.Pid
}

// logTails prints the end of every node's log to the test log.
func (c *Cluster) logTails(lines int) {
	for _, n := range c.Nodes {
		b, err := readTail(n.LogPath, 256<<10)
		if err != nil {
			c.tb.Logf("realkafka: node %d log: %v", n.ID, err)
			continue
		}
		c.tb.Logf("realkafka: last lines of node %d's log (%s):\n%s", n.ID, n.LogPath, tail(b, lines))
	}
}

// readTail reads at most max bytes from the end of a file.
func readTail(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := st.Size() - max
	if off < 0 {
		off = 0
	}
	b := make([]byte, st.Size()-off)
	_, err = f.ReadAt(b, off)
	return b, err
}

// JavaCommand returns a command that runs a single-file Java program from
// source (the JDK's source launcher) on the cached Java client's classpath,
// for the reference-client programs of interop tests. The program's
// environment is scrubbed of JAVA_TOOL_OPTIONS and KAFKA_OPTS like the
// broker's.
func (c *Cluster) JavaCommand(ctx context.Context, source string, args ...string) *exec.Cmd {
	full := append([]string{"-cp", c.Cache.ClientClasspath(),
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", source}, args...)
	cmd := exec.CommandContext(ctx, c.java, full...)
	cmd.Env = javaEnv()
	return cmd
}

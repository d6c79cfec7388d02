package realkafka

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Main classes of Kafka 4.x's core jar: the server and the storage tool
// (what bin/kafka-server-start.sh and bin/kafka-storage.sh run).
const (
	serverMain  = "kafka.Kafka"
	storageMain = "kafka.tools.StorageTool"
)

// errPortTaken reports a node that could not bind a port the harness chose:
// another process took it in between. Start retries with new ports.
var errPortTaken = errors.New("realkafka: a chosen port was taken before the broker bound it")

// newClusterID returns a random Kafka Uuid in its string form: 16 random
// bytes, base64url without padding. Kafka rejects ids whose text starts with
// '-' (they read as command-line flags), so those are drawn again.
func newClusterID() string {
	for {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			panic(fmt.Sprintf("realkafka: crypto/rand: %v", err)) // never fails on Linux
		}
		s := base64.RawURLEncoding.EncodeToString(b[:])
		if s[0] != '-' {
			return s
		}
	}
}

// assignPorts chooses free loopback ports for every listener. All listeners
// stay open until all are chosen, so no two nodes get the same port.
func (c *Cluster) assignPorts() error {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	pick := func() (string, error) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("realkafka: choosing a loopback port: %w", err)
		}
		ls = append(ls, l)
		return l.Addr().String(), nil
	}
	for i, n := range c.Nodes {
		var err error
		if n.Addr, err = pick(); err != nil {
			return err
		}
		n.ControllerAddr, n.SASLAddr = "", ""
		if len(c.opts.SASLPlainUsers) > 0 {
			if n.SASLAddr, err = pick(); err != nil {
				return err
			}
		}
		if i == 0 {
			if n.ControllerAddr, err = pick(); err != nil {
				return err
			}
		}
	}
	return nil
}

// properties renders a node's server.properties. Later sources win: the
// harness's layout, then test-friendly defaults, then Options.ServerProperties.
func (c *Cluster) properties(n *Node) map[string]string {
	controller := c.Nodes[0]
	// Internal topics replicate to every node once there are three, so they
	// survive one node stopping; one offsets partition on a single node
	// keeps startup quick, while with several nodes groups spread over
	// coordinators on different nodes, as a gateway forwarding commits must
	// handle.
	rf, minISR, offsetsParts := "1", "1", "1"
	if len(c.Nodes) >= 3 {
		rf, minISR = "3", "2"
	}
	if len(c.Nodes) > 1 {
		offsetsParts = "6"
	}
	p := map[string]string{
		"node.id":                                  strconv.Itoa(int(n.ID)),
		"controller.quorum.voters":                 fmt.Sprintf("%d@%s", controller.ID, controller.ControllerAddr),
		"controller.listener.names":                "CONTROLLER",
		"inter.broker.listener.name":               "PLAINTEXT",
		"listener.security.protocol.map":           "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"advertised.listeners":                     "PLAINTEXT://" + n.Addr,
		"log.dirs":                                 filepath.Join(n.Dir, "data"),
		"offsets.topic.replication.factor":         rf,
		"offsets.topic.num.partitions":             offsetsParts,
		"transaction.state.log.replication.factor": rf,
		"transaction.state.log.min.isr":            minISR,
		"transaction.state.log.num.partitions":     "1",
		"group.initial.rebalance.delay.ms":         "0",
		"auto.create.topics.enable":                "true",
		// The log cleaner's dedupe buffer defaults to 128 MiB of heap, which
		// alone makes a broker with -Xmx128m fail with OutOfMemoryError
		// while starting its LogManager.
		"log.cleaner.dedupe.buffer.size": "16777216",
	}
	listeners := "PLAINTEXT://" + n.Addr
	if n.SASLAddr != "" {
		listeners += ",SASL://" + n.SASLAddr
		p["advertised.listeners"] += ",SASL://" + n.SASLAddr
		p["listener.security.protocol.map"] += ",SASL:SASL_PLAINTEXT"
		p["listener.name.sasl.sasl.enabled.mechanisms"] = "PLAIN"
		p["listener.name.sasl.plain.sasl.jaas.config"] = plainJAAS(c.opts.SASLPlainUsers)
	}
	if n == controller {
		p["process.roles"] = "broker,controller"
		p["listeners"] = listeners + ",CONTROLLER://" + n.ControllerAddr
	} else {
		p["process.roles"] = "broker"
		p["listeners"] = listeners
	}
	if n.Rack != "" {
		p["broker.rack"] = n.Rack
	}
	for k, v := range c.opts.ServerProperties {
		p[k] = v
	}
	return p
}

// plainJAAS is the broker-side JAAS entry of the PLAIN mechanism: Kafka's
// PlainLoginModule checks clients against its user_<name>="<password>"
// options.
func plainJAAS(users map[string]string) string {
	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("org.apache.kafka.common.security.plain.PlainLoginModule required")
	for _, u := range names {
		fmt.Fprintf(&b, " user_%s=%s", u, strconv.Quote(users[u]))
	}
	b.WriteString(";")
	return b.String()
}

// writeProperties writes every node's server.properties.
func (c *Cluster) writeProperties() error {
	for _, n := range c.Nodes {
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			return err
		}
		p := c.properties(n)
		keys := make([]string, 0, len(p))
		for k := range p {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		b.WriteString("# written by internal/testutil/realkafka\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%s\n", k, escapeProperty(p[k]))
		}
		if err := os.WriteFile(n.propertiesPath(), []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("realkafka: writing node %d's server.properties: %w", n.ID, err)
		}
	}
	return nil
}

// escapeProperty escapes the characters a Java properties value treats
// specially. Backslashes matter for paths on no platform we run on, but a
// rack or an extra property may carry one.
func escapeProperty(v string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(v)
}

func (n *Node) propertiesPath() string { return filepath.Join(n.Dir, "server.properties") }

// formatAll writes the properties and formats every node's storage with the
// cluster id, in parallel: each format is a JVM start of its own.
func (c *Cluster) formatAll(ctx context.Context) error {
	if err := c.writeProperties(); err != nil {
		return err
	}
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.format(ctx, n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// format runs Kafka's storage tool for one node. With a static voter set
// (controller.quorum.voters) no --standalone or --initial-controllers flag is
// needed.
func (c *Cluster) format(ctx context.Context, n *Node) error {
	args := append(append([]string{}, c.opts.JVMFlags...),
		"-cp", c.Cache.BrokerClasspath(), storageMain,
		"format", "--cluster-id", c.ClusterID, "--config", n.propertiesPath(), "--ignore-formatted")
	cmd := exec.CommandContext(ctx, c.java, args...)
	cmd.Env = javaEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("realkafka: formatting node %d's storage: %v\n%s", n.ID, err, tail(out.Bytes(), 30))
	}
	return nil
}

// javaEnv is the environment for Kafka's JVMs. slf4j-simple writes to stderr,
// which the harness captures; the flags in logFlags tune it.
func javaEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		// A developer's KAFKA_OPTS or JAVA_TOOL_OPTIONS must not change what
		// the tests run; JAVA_TOOL_OPTIONS also prints a banner per JVM.
		if strings.HasPrefix(kv, "JAVA_TOOL_OPTIONS=") || strings.HasPrefix(kv, "KAFKA_OPTS=") || strings.HasPrefix(kv, "_JAVA_OPTIONS=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// logFlags configure slf4j-simple: timestamps, and the config dumps (about
// two thousand lines per start) silenced; server.properties is beside the
// log for that.
func logFlags() []string {
	return []string{
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
		"-Dorg.slf4j.simpleLogger.log.org.apache.kafka.common.config.AbstractConfig=warn",
	}
}

// launchAll starts every node and waits until the cluster is ready.
func (c *Cluster) launchAll(ctx context.Context) error {
	for _, n := range c.Nodes {
		if err := n.launch(c.java, c.Cache, c.opts.JVMFlags); err != nil {
			return err
		}
	}
	return c.waitReady(ctx)
}

// process is one running JVM and what the harness learns when it exits.
type process struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed after Wait returned
	err  error         // Wait's result, valid after done
}

// launch starts the node's JVM, appending its output to LogPath.
func (n *Node) launch(java string, cache Cache, jvmFlags []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		return fmt.Errorf("realkafka: node %d is already running", n.ID)
	}
	lf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("realkafka: node %d log: %w", n.ID, err)
	}
	fmt.Fprintf(lf, "==== realkafka: starting node %d at %s ====\n", n.ID, time.Now().UTC().Format(time.RFC3339Nano))
	args := append(append(append([]string{}, jvmFlags...), logFlags()...),
		"-cp", cache.BrokerClasspath(), serverMain, n.propertiesPath())
	// Not CommandContext: the node outlives the start context and is ended
	// by stop, with SIGTERM first.
	cmd := exec.Command(java, args...)
	cmd.Env = javaEnv()
	cmd.Dir = n.Dir
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("realkafka: starting node %d: %w", n.ID, err)
	}
	p := &process{cmd: cmd, log: lf, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		lf.Close()
		close(p.done)
	}()
	n.proc = p
	return nil
}

// exited returns the node's exit channel and whether it has a process.
func (n *Node) exited() (<-chan struct{}, *process) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return nil, nil
	}
	return n.proc.done, n.proc
}

// stop sends SIGTERM and waits up to timeout for a clean exit, then kills the
// JVM. A zero timeout kills at once. Stopping a stopped node does nothing.
func (n *Node) stop(timeout time.Duration) error {
	n.mu.Lock()
	p := n.proc
	n.proc = nil
	n.mu.Unlock()
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil // it had already exited; waitReady reported why
	default:
	}
	if timeout == 0 {
		_ = p.cmd.Process.Kill()
		<-p.done
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return fmt.Errorf("realkafka: node %d ignored SIGTERM for %v and was killed", n.ID, timeout)
}

// stopAll stops broker-only nodes first, in parallel, then the controller:
// a broker's controlled shutdown needs the controller, and waits for it.
func (c *Cluster) stopAll() error {
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range c.Nodes[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.stop(c.opts.StopTimeout); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := c.Nodes[0].stop(c.opts.StopTimeout); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

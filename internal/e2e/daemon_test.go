package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/wasmassign/wasmassign/internal/loadtest"
	"github.com/wasmassign/wasmassign/internal/testutil/kfakegroup"
)

// suite is what TestMain prepares for every test: the wasmassign
// executable under test and the root module's directory. Daemons use the
// default plugin compilation cache, so only the first run on a machine
// pays for compiling the built-in plugins.
type suite struct {
	binary string
	root   string
}

// env is set once by TestMain before any test runs and only read after.
var env suite

func TestMain(m *testing.M) {
	loadtest.ServeKfakeIfRequested() // the kfake target of a load run serves here
	serveKgoMemberIfRequested()      // a kgo member process of a test
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "wasmassign-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	env = suite{binary: os.Getenv("WASMASSIGN_BIN"), root: root}
	if env.binary == "" {
		// Built fresh from this tree, as `make build` builds bin/wasmassign
		// (the Go build cache makes this cheap after `make build`), so a
		// stale bin/ can never be what gets tested.
		env.binary = filepath.Join(tmp, "wasmassign")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", env.binary, "./cmd/wasmassign")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: building wasmassign (run `make build` first if the built-in plugins are missing): %v\n%s", err, out)
			return 1
		}
	}
	return m.Run()
}

// daemon is one `wasmassign serve` subprocess.
type daemon struct {
	t                testing.TB
	cfgFile          string
	bootstrap, admin string
	// embedded are the embedded cluster's broker addresses, when the
	// daemon runs one.
	embedded []string
	cmd      *exec.Cmd
	log      *syncBuffer
	exited   chan struct{}
	exitErr  error
}

// eventsCluster starts a kfake cluster of brokers brokers, with kfake's
// fast group timings and a topic "events" of partitions partitions, which
// the test's cleanup closes.
func eventsCluster(t *testing.T, brokers int, partitions int32) *kfake.Cluster {
	t.Helper()
	cluster, err := kfake.NewCluster(append(kfakegroup.FastKfakeOpts(), kfake.NumBrokers(brokers), kfake.SeedTopics(partitions, "events"))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	return cluster
}

// settledRig starts one rig consumer of "events" in group through d per
// name, with opts, and waits until the group is settled with them
// (settled). The test's cleanup closes the rig.
func settledRig(ctx context.Context, t *testing.T, d *daemon, group string, opts kfakegroup.ConsumerOptions, names ...string) (*kfakegroup.Rig, adminGroup) {
	t.Helper()
	rig := kfakegroup.NewRig([]string{d.bootstrap}, group, []string{"events"}, nil)
	t.Cleanup(func() { rig.Close(context.Background()) })
	for _, n := range names {
		if _, err := rig.Start(n, opts); err != nil {
			t.Fatal(err)
		}
	}
	g, err := settled(ctx, d, group, rig.Ledger(), names)
	if err != nil {
		t.Fatal(err)
	}
	return rig, g
}

// metrics returns the daemon's /metrics page.
func (d *daemon) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + d.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// clusterWithPlugins starts a kfake cluster of one broker with a topic
// "events" of 4 partitions, which the test's cleanup closes, and writes
// files into dir/plugins, a plugin directory. It returns the brokers, a
// fresh dir for the daemon, and the plugin directory.
func clusterWithPlugins(t *testing.T, files map[string][]byte) (brokers []string, dir, plugins string) {
	t.Helper()
	cluster := eventsCluster(t, 1, 4)
	dir = t.TempDir()
	plugins = filepath.Join(dir, "plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(plugins, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return cluster.ListenAddrs(), dir, plugins
}

// startDaemon writes configText to a file in dir and runs the binary on
// it, returning once the daemon has announced its addresses. The test's
// (or benchmark's) cleanup stops it.
func startDaemon(t testing.TB, dir, configText string) *daemon {
	t.Helper()
	cfgFile := filepath.Join(dir, "gateway.toml")
	if err := os.WriteFile(cfgFile, []byte(configText), 0o644); err != nil {
		t.Fatal(err)
	}
	return startDaemonFile(t, cfgFile)
}

// startDaemonFile runs the binary on cfgFile, returning once the daemon
// has announced its addresses and is ready (/readyz 200: in front of an
// external upstream, once it serves its state topic's shards), or has not
// become ready within 20 s, which the test then sees for itself.
func startDaemonFile(t testing.TB, cfgFile string) *daemon {
	t.Helper()
	d := startDaemonUnready(t, cfgFile)
	for until := time.Now().Add(20 * time.Second); time.Now().Before(until); time.Sleep(20 * time.Millisecond) {
		select {
		case <-d.exited:
			return d // the test sees the exit for itself
		default:
		}
		resp, err := http.Get("http://" + d.admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
	}
	return d
}

// startDaemonUnready is startDaemonFile returning as soon as the daemon
// has announced its addresses.
func startDaemonUnready(t testing.TB, cfgFile string) *daemon {
	t.Helper()
	d := &daemon{t: t, cfgFile: cfgFile, log: &syncBuffer{}, exited: make(chan struct{})}
	d.cmd = exec.Command(env.binary, "serve", "--config", cfgFile)
	d.cmd.Stderr = d.log
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.exitErr = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			kept := keepLog(t, "gateway-"+filepath.Base(filepath.Dir(cfgFile)), d.log.String())
			t.Logf("daemon log (%s)%s:\n%s", cfgFile, keptNote(kept), tail(d.log.String(), 80))
		}
	})

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(60 * time.Second)
	for d.bootstrap == "" || d.admin == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				<-d.exited
				t.Fatalf("daemon exited before announcing its addresses (%v); log:\n%s", d.exitErr, tail(d.log.String(), 40))
			}
			if a, ok := strings.CutPrefix(line, "wasmassign gateway listening on "); ok {
				d.bootstrap = a
			}
			if a, ok := strings.CutPrefix(line, "embedded cluster brokers (direct, bypassing the gateway): "); ok {
				d.embedded = strings.Split(a, ",")
			}
			if a, ok := strings.CutPrefix(line, "admin API and metrics on http://"); ok {
				d.admin = a
			}
		case <-timeout:
			t.Fatalf("daemon did not announce its addresses in 60s; log:\n%s", tail(d.log.String(), 40))
		}
	}
	go func() {
		for range lines {
		}
	}()
	return d
}

// stop sends SIGTERM and waits for the exit (killing after 20 s); it
// returns the exit error, nil for exit status 0.
func (d *daemon) stop() error {
	select {
	case <-d.exited:
		return d.exitErr
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		d.t.Errorf("daemon did not exit within 20s of SIGTERM; killing it")
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	return d.exitErr
}

// adminGroup is the admin API's view of one group.
type adminGroup struct {
	Group      string        `json:"group"`
	State      string        `json:"state"`
	Generation int32         `json:"generation"`
	Protocol   string        `json:"protocol"`
	Assignor   string        `json:"assignor"`
	Members    []adminMember `json:"members"`
	// LastRebalance is nil before the first assignment.
	LastRebalance *struct {
		// Withheld counts partitions a cooperative round held back for
		// its KIP-429 follow-up round.
		Withheld int `json:"withheld"`
	} `json:"last_rebalance"`
}

// adminMember is the admin API's view of one member of a group.
type adminMember struct {
	MemberID   string             `json:"member_id"`
	InstanceID *string            `json:"instance_id"`
	ClientID   string             `json:"client_id"`
	Host       string             `json:"host"`
	Rack       string             `json:"rack"`
	Assignment map[string][]int32 `json:"assignment"`
}

// group fetches /v1/groups/{id}; a missing group is an error.
func (d *daemon) group(ctx context.Context, id string) (adminGroup, error) {
	var g adminGroup
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.admin+"/v1/groups/"+id, nil)
	if err != nil {
		return g, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return g, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return g, fmt.Errorf("GET /v1/groups/%s: %d %s", id, resp.StatusCode, b)
	}
	return g, json.NewDecoder(resp.Body).Decode(&g)
}

// freePorts finds n distinct free loopback ports for listeners that must
// keep their port across a restart. They come from below the kernel's
// ephemeral range (ip_local_port_range), so that between the check and the
// daemon's bind no outgoing connection of another process, or another
// test, can be given one of them.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 11000 {
				lo = v
			}
		}
	}
	var ports []int
	seen := map[int]bool{}
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			t.Fatalf("no %d free ports below %d", n, lo)
		}
		p := 10000 + rand.IntN(lo-10000)
		if seen[p] {
			continue
		}
		seen[p] = true
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		ports = append(ports, p)
	}
	return ports
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// syncBuffer collects a subprocess's output for the failure log.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

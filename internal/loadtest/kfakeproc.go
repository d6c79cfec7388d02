package loadtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// kfakeEnv carries the cluster a kfake process is to serve. Its presence
// makes this program that process: see ServeKfakeIfRequested.
const kfakeEnv = "WASMASSIGN_LOADTEST_KFAKE"

// kfakeSpec is the cluster a kfake process serves.
type kfakeSpec struct {
	Topics     []string `json:"topics"`
	Partitions int32    `json:"partitions"`
}

// ServeKfakeIfRequested turns this process into the kfake cluster that a
// load run of the "kfake" target started, when it was started as one, and
// never returns then. Programs (and test binaries) that run the kfake
// target must call it first thing in main (and in TestMain).
//
// The reference runs in a process of its own so that its CPU and memory
// are its own: measured inside the generator, they would carry the
// generator's, several times kfake's own at a heartbeat each second.
func ServeKfakeIfRequested() {
	spec, ok := os.LookupEnv(kfakeEnv)
	if !ok {
		return
	}
	if err := serveKfake(spec, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest kfake:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveKfake runs the cluster spec describes, writes its first broker's
// address as a line to out, and serves until in ends: its parent closes
// it, or dies.
func serveKfake(spec string, in io.Reader, out io.Writer) error {
	var s kfakeSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return fmt.Errorf("%s: %w", kfakeEnv, err)
	}
	kc, err := kfake.NewCluster(
		kfake.NumBrokers(3),
		kfake.SeedTopics(s.Partitions, s.Topics...),
		// The generator's flags bound the session timeout already;
		// Kafka's 6 s minimum would refuse short test runs.
		kfake.GroupMinSessionTimeout(time.Millisecond),
	)
	if err != nil {
		return fmt.Errorf("start kfake: %w", err)
	}
	defer kc.Close()
	if _, err := fmt.Fprintln(out, kc.ListenAddrs()[0]); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, in)
	return err
}

// KfakeProcess is a kfake cluster of three brokers in a child process of
// this program, which must call ServeKfakeIfRequested first thing in main
// (and in TestMain). The load run's reference target is one; end-to-end
// tests use it to kill and pause gateways without touching the cluster.
type KfakeProcess struct {
	addr  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// StartKfake starts this program again as a kfake cluster serving topics
// of partitions each, and returns once it listens.
func StartKfake(ctx context.Context, topics []string, partitions int32) (*KfakeProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	spec, err := json.Marshal(kfakeSpec{Topics: topics, Partitions: partitions})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), kfakeEnv+"="+string(spec))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	p := &KfakeProcess{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
		io.Copy(io.Discard, stdout)
	}()
	select {
	case addr, ok := <-line:
		if ok && addr != "" {
			p.addr = addr
			return p, nil
		}
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	p.Stop()
	msg := strings.TrimSpace(stderr.String())
	if msg == "" {
		msg = "it did not announce its address: the binary must call loadtest.ServeKfakeIfRequested first in main"
	}
	return nil, errors.New("start kfake: " + msg)
}

// Addr is the address of the cluster's first broker.
func (p *KfakeProcess) Addr() string { return p.addr }

// Pid is the process's id, for sampling.
func (p *KfakeProcess) Pid() int { return p.cmd.Process.Pid }

// Stop ends the process: closing its stdin asks it to, and a kill follows
// when it does not.
func (p *KfakeProcess) Stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() {
		p.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/internal/testutil/realkafka"
)

// javaRunner runs the programs of testdata/realkafka/java on the cached
// kafka-clients jars. They are compiled once and cached: the JDK's source
// launcher compiles on every start, which costs seconds of CPU per process
// on a loaded machine and would eat into a static member's session
// timeout.
type javaRunner struct {
	java, classpath string
	// version is kafka-clients' version, from the jar's name in the cache.
	version string
	// source, when set, is the directory to run programs from source in
	// (no javac found); c then builds the commands.
	source string
	c      *realkafka.Cluster
}

// javaBuild compiles Consume.java, or finds it compiled in the repository's
// gitignored cache (.cache/java-classes), keyed by the source, the client
// version and the compiler, so that only a change recompiles.
func javaBuild(ctx context.Context, t *testing.T, c *realkafka.Cluster) *javaRunner {
	t.Helper()
	root := testutil.Root(t)
	dir := filepath.Join(root, "testdata", "realkafka", "java")
	jars, _ := filepath.Glob(filepath.Join(c.Cache.Dir, "clients", "kafka-clients-*.jar"))
	if len(jars) != 1 {
		t.Fatalf("want one kafka-clients jar in %s/clients, found %v", c.Cache.Dir, jars)
	}
	r := &javaRunner{c: c, version: strings.TrimSuffix(strings.TrimPrefix(filepath.Base(jars[0]), "kafka-clients-"), ".jar")}
	java, javac := javaBinary(), ""
	if java != "" {
		// The compiler of the same JDK, so that its classes run on java.
		if real, err := filepath.EvalSymlinks(java); err == nil && javaFileExists(filepath.Join(filepath.Dir(real), "javac")) {
			javac = filepath.Join(filepath.Dir(real), "javac")
		}
	}
	if javac == "" {
		t.Logf("no javac next to java (%q): running the Java programs from source", java)
		r.source = dir
		return r
	}
	src, err := os.ReadFile(filepath.Join(dir, "Consume.java"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s", src, r.version, javac))
	out := filepath.Join(root, ".cache", "java-classes", hex.EncodeToString(sum[:8]))
	if !javaFileExists(filepath.Join(out, "Consume.class")) {
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		// Compile beside the final place and rename, so that a concurrent
		// or interrupted run never sees half a directory.
		tmp, err := os.MkdirTemp(filepath.Dir(out), "build-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		began := time.Now()
		cmd := exec.CommandContext(ctx, javac, "-nowarn", "-cp", c.Cache.ClientClasspath(), "-d", tmp, filepath.Join(dir, "Consume.java"))
		cmd.Env = javaScrubbedEnv()
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("javac Consume.java: %v\n%s", err, b)
		}
		if err := os.Rename(tmp, out); err != nil && !javaFileExists(filepath.Join(out, "Consume.class")) {
			t.Fatal(err)
		}
		t.Logf("compiled Consume.java into %s in %v", out, time.Since(began).Round(time.Millisecond))
	}
	r.java, r.classpath = java, c.Cache.ClientClasspath()+string(os.PathListSeparator)+out
	return r
}

// javaBinary finds java as the harness does: in $JAVA_HOME/bin, else on
// PATH; "" when missing.
func javaBinary() string {
	if h := os.Getenv("JAVA_HOME"); h != "" {
		if p := filepath.Join(h, "bin", "java"); javaFileExists(p) {
			return p
		}
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return ""
	}
	return p
}

func javaFileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// javaScrubbedEnv is the environment without the variables through which
// a developer's JVM options would reach the test's JVMs.
func javaScrubbedEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "KAFKA_OPTS":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// command runs program main (e.g. "Consume") with args.
func (r *javaRunner) command(ctx context.Context, main string, args ...string) *exec.Cmd {
	if r.source != "" {
		return r.c.JavaCommand(ctx, filepath.Join(r.source, main+".java"), args...)
	}
	// A small heap, the serial collector and C1 only: these clients live
	// for seconds, several at once, on a machine shared with brokers.
	full := append([]string{"-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"}, javaClientLogFlags()...)
	full = append(append(full, "-cp", r.classpath, main), args...)
	cmd := exec.CommandContext(ctx, r.java, full...)
	cmd.Env = javaScrubbedEnv()
	return cmd
}

// javaClientLogFlags raises the Java consumer's group coordination
// loggers (AbstractCoordinator, ConsumerCoordinator) and its NetworkClient
// to debug level under WASMASSIGN_E2E_DEBUG: what a member asked which
// gateway, on which connection, and what it was told.
func javaClientLogFlags() []string {
	if debugDir() == "" {
		return nil
	}
	return []string{"-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.consumer.internals=debug",
		"-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient=debug",
		"-Dorg.slf4j.simpleLogger.showDateTime=true", "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS"}
}

// javaSpec is one Consume.java member.
type javaSpec struct {
	group, topic string
	// assignors is ASSIGNORS: comma-separated class names, in the member's
	// order of preference.
	assignors string
	clientID  string
	// rack and instance are client.rack and group.instance.id; "" for none.
	rack, instance string
	// props are extra consumer properties, KEY=VALUE.
	props []string
}

// startJava runs Consume.java for s and stops it (SIGTERM) when the test
// ends.
func (r *javaRig) startJava(t *testing.T, s javaSpec) *procMember {
	t.Helper()
	orDash := func(v string) string {
		if v == "" {
			return "-"
		}
		return v
	}
	args := append([]string{r.d.bootstrap, s.group, s.topic, s.assignors, s.clientID, orDash(s.rack), orDash(s.instance), "0"}, s.props...)
	return startProcMember(t, s.clientID, s.topic, r.run.command(r.ctx, "Consume", args...))
}

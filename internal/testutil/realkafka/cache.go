package realkafka

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// DefaultVersion is the Apache Kafka release the harness runs unless
// Options.Version says otherwise.
const DefaultVersion = "4.4.0"

// FetchScript is the repository-relative path of the script that resolves
// Kafka's jars with Maven into the cache. The Makefile's kafka-cache target
// and the harness both call it, so there is one way to fill the cache.
const FetchScript = "internal/testutil/realkafka/fetch-kafka.sh"

// Environment variables the harness reads. They exist so CI and developers
// can steer the harness without code changes.
const (
	// EnvCache names a cache directory to use instead of
	// <repo>/.cache/kafka/<version>.
	EnvCache = "KAFKA_CACHE"
	// EnvNoFetch, when "1", stops the harness from running FetchScript on a
	// missing cache; the tests then skip.
	EnvNoFetch = "REALKAFKA_NOFETCH"
	// EnvRequired, when "1", turns every skip (no cache, no java, -short)
	// into a test failure, so CI cannot pass by silently skipping.
	EnvRequired = "REALKAFKA_REQUIRED"
)

// ErrNoCache reports that the Kafka jars are not in the cache and could not
// be fetched. Callers skip on it: the machine cannot run a real broker.
var ErrNoCache = errors.New("realkafka: Kafka jars are not cached")

// Cache is a filled Kafka cache directory: the layout internal/testutil/realkafka/fetch-kafka.sh
// writes.
type Cache struct {
	// Dir is the cache directory, e.g. <repo>/.cache/kafka/4.4.0.
	Dir string
	// Version is the Kafka version the jars are of.
	Version string
}

// BrokerClasspath is the java -cp value that runs the broker and its tools.
func (c Cache) BrokerClasspath() string { return filepath.Join(c.Dir, "libs", "*") }

// ClientClasspath is the java -cp value for Java client programs: exactly
// kafka-clients, its runtime dependencies and an slf4j binding.
func (c Cache) ClientClasspath() string { return filepath.Join(c.Dir, "clients", "*") }

// Stamp is what FetchScript writes to <cache>/STAMP once both jar
// directories are in place: the version and the SHA-256 of the two poms
// under root, so that a cache goes stale when a pom changes.
func Stamp(root, version string) (string, error) {
	h := sha256.New()
	for _, pom := range []string{"broker", "clients"} {
		b, err := os.ReadFile(filepath.Join(root, "testdata", "realkafka", pom, "pom.xml"))
		if err != nil {
			return "", fmt.Errorf("realkafka: reading the %s pom: %w", pom, err)
		}
		h.Write(b)
	}
	return version + " " + hex.EncodeToString(h.Sum(nil)), nil
}

// complete reports whether the fetch script finished with these poms.
func (c Cache) complete(stamp string) bool {
	b, err := os.ReadFile(filepath.Join(c.Dir, "STAMP"))
	return err == nil && strings.TrimSpace(string(b)) == stamp
}

// DefaultCacheDir is where the Makefile keeps Kafka's jars for a version:
// $KAFKA_CACHE when set (relative to root when relative, since tests run in
// their package's directory), else <root>/.cache/kafka/<version>, which is
// gitignored.
func DefaultCacheDir(root, version string) string {
	if d := os.Getenv(EnvCache); d != "" {
		if !filepath.IsAbs(d) {
			d = filepath.Join(root, d)
		}
		return d
	}
	return filepath.Join(root, ".cache", "kafka", version)
}

// EnsureCache returns the cache for version under dir, running the fetch
// script from the repository at root when it is incomplete or stale (see
// Stamp) and fetch is true. Concurrent callers are safe: the script serialises on a lock file
// and a finished cache is never fetched again. The error wraps ErrNoCache
// when the jars are still missing, with the script's output.
func EnsureCache(ctx context.Context, root, dir, version string, fetch bool) (Cache, error) {
	c := Cache{Dir: dir, Version: version}
	stamp, err := Stamp(root, version)
	if err != nil {
		return c, err
	}
	if c.complete(stamp) {
		return c, nil
	}
	if !fetch {
		return c, fmt.Errorf("%w: %s has no complete, current Kafka %s (fetching disabled by %s=1); run `make kafka-cache`",
			ErrNoCache, dir, version, EnvNoFetch)
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, FetchScript), dir)
	cmd.Env = append(os.Environ(), "KAFKA_VERSION="+version)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return c, fmt.Errorf("%w: %s %s failed (%v); run `make kafka-cache` on a machine that reaches Maven Central:\n%s",
			ErrNoCache, FetchScript, dir, err, tail(out.Bytes(), 20))
	}
	if !c.complete(stamp) {
		return c, fmt.Errorf("%w: %s ran but %s/STAMP is not %q", ErrNoCache, FetchScript, dir, stamp)
	}
	return c, nil
}

// tail returns the last n lines of b, for error messages and failing tests.
func tail(b []byte, n int) string {
	s := strings.TrimRight(string(b), "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

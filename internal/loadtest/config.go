package loadtest

import (
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// The protocols a member can offer, by their Kafka names.
const (
	// ProtocolRange is Kafka's range assignor under the eager rebalance
	// protocol: a member gives up everything it holds before it rejoins.
	ProtocolRange = "range"
	// ProtocolCooperativeSticky is the KIP-429 cooperative protocol: a
	// member keeps what it holds across a rebalance, reports it, and
	// revokes only what an assignment drops.
	ProtocolCooperativeSticky = "cooperative-sticky"
)

// Config is the load: the same for every target of a run. Each field is
// set by the loadtest command's flag of the same name, and
// [Config.Validate] names that flag for a bad value.
type Config struct {
	// Groups is how many consumer groups to form (--groups).
	Groups int `json:"groups"`
	// Members is how many members each group has (--members).
	Members int `json:"members"`
	// Topics is how many topics every member subscribes to (--topics).
	Topics int `json:"topics"`
	// Partitions is each topic's partition count when it is created
	// (--partitions); a topic that already exists keeps its own.
	Partitions int32 `json:"partitions"`
	// TopicPrefix names the topics: TopicPrefix + "0", "1", ...
	// (--topic-prefix).
	TopicPrefix string `json:"topic_prefix"`
	// GroupPrefix names the groups the same way. The command makes one
	// per invocation, so that runs against a long-lived gateway never
	// meet the groups of an earlier run.
	GroupPrefix string `json:"group_prefix"`

	// Heartbeat is each member's heartbeat interval (--heartbeat).
	Heartbeat time.Duration `json:"heartbeat_ns"`
	// Commit is each member's offset-commit interval (--commit).
	Commit time.Duration `json:"commit_ns"`
	// Duration is how long the steady phase lasts (--duration).
	Duration time.Duration `json:"duration_ns"`
	// SessionTimeout and RebalanceTimeout are sent in JoinGroup
	// (--session-timeout, --rebalance-timeout).
	SessionTimeout   time.Duration `json:"session_timeout_ns"`
	RebalanceTimeout time.Duration `json:"rebalance_timeout_ns"`
	// StableTimeout bounds the join phase (--stable-timeout): a target
	// whose groups are not stable by then is reported as such.
	StableTimeout time.Duration `json:"stable_timeout_ns"`
	// DialTimeout bounds each TCP dial (--dial-timeout).
	DialTimeout time.Duration `json:"dial_timeout_ns"`

	// Protocol is ProtocolRange or ProtocolCooperativeSticky (--protocol).
	Protocol string `json:"protocol"`
	// SharedConnections, when above zero, multiplexes every member's
	// heartbeats, commits and coordinator lookups over that many
	// connections per broker address (--shared-connections); its
	// JoinGroup and SyncGroup keep a connection of its own, open while it
	// rebalances (see member.joinConn). Zero gives each member one
	// connection for everything, as real clients have.
	SharedConnections int `json:"shared_connections"`
	// CreateTopics creates missing topics with CreateTopics
	// (--create-topics).
	CreateTopics bool `json:"create_topics"`
}

// DefaultConfig returns the defaults of every field: 100 groups of 10
// members on 4 topics of 12 partitions, range, heartbeats every second,
// commits every 30 s, a 30 s steady phase, a 45 s session and a 60 s
// rebalance timeout, 2 minutes to become stable, 5 s per dial, one
// connection per member, topics created when missing.
func DefaultConfig() Config {
	return Config{
		Groups:           100,
		Members:          10,
		Topics:           4,
		Partitions:       12,
		TopicPrefix:      "loadtest-",
		GroupPrefix:      "loadtest-",
		Heartbeat:        time.Second,
		Commit:           30 * time.Second,
		Duration:         30 * time.Second,
		SessionTimeout:   45 * time.Second,
		RebalanceTimeout: 60 * time.Second,
		StableTimeout:    2 * time.Minute,
		DialTimeout:      5 * time.Second,
		Protocol:         ProtocolRange,
		CreateTopics:     true,
	}
}

// FlagError is a bad value, named by the flag that sets it.
type FlagError struct {
	// Flag is the flag's name, without dashes.
	Flag string
	// Problem says what is wrong with the value.
	Problem string
}

func (e *FlagError) Error() string { return "--" + e.Flag + ": " + e.Problem }

func flagErrorf(flag, format string, args ...any) *FlagError {
	return &FlagError{Flag: flag, Problem: fmt.Sprintf(format, args...)}
}

// Validate returns a *FlagError for the first field out of range.
func (c Config) Validate() error {
	positive := []struct {
		flag string
		v    int64
	}{
		{"groups", int64(c.Groups)},
		{"members", int64(c.Members)},
		{"topics", int64(c.Topics)},
		{"partitions", int64(c.Partitions)},
	}
	for _, p := range positive {
		if p.v < 1 {
			return flagErrorf(p.flag, "must be at least 1, got %d", p.v)
		}
	}
	durations := []struct {
		flag string
		v    time.Duration
	}{
		{"heartbeat", c.Heartbeat},
		{"commit", c.Commit},
		{"duration", c.Duration},
		{"session-timeout", c.SessionTimeout},
		{"rebalance-timeout", c.RebalanceTimeout},
		{"stable-timeout", c.StableTimeout},
		{"dial-timeout", c.DialTimeout},
	}
	for _, d := range durations {
		if d.v <= 0 {
			return flagErrorf(d.flag, "must be positive, got %v", d.v)
		}
	}
	// JoinGroup carries both timeouts as int32 milliseconds.
	for _, d := range durations[3:5] {
		if d.v.Milliseconds() > math.MaxInt32 || d.v < time.Millisecond {
			return flagErrorf(d.flag, "%v does not fit JoinGroup's milliseconds (1ms to %v)", d.v, time.Duration(math.MaxInt32)*time.Millisecond)
		}
	}
	if c.Heartbeat >= c.SessionTimeout {
		// A member that heartbeats no more often than its session lasts
		// is expired between two heartbeats.
		return flagErrorf("heartbeat", "%v must be below --session-timeout %v", c.Heartbeat, c.SessionTimeout)
	}
	switch c.Protocol {
	case ProtocolRange, ProtocolCooperativeSticky:
	default:
		return flagErrorf("protocol", "unknown protocol %q (have %s, %s)", c.Protocol, ProtocolRange, ProtocolCooperativeSticky)
	}
	if c.SharedConnections < 0 {
		return flagErrorf("shared-connections", "must be 0 (one connection per member) or more, got %d", c.SharedConnections)
	}
	if c.TopicPrefix == "" {
		return flagErrorf("topic-prefix", "must not be empty")
	}
	return nil
}

// TotalMembers is the number of members across all groups.
func (c Config) TotalMembers() int { return c.Groups * c.Members }

// hold is how long every group must stay stable before the join phase
// counts as over: three heartbeats, so that a rebalance the target has
// started but not yet announced shows up, and at least a second.
func (c Config) hold() time.Duration { return max(3*c.Heartbeat, time.Second) }

// EmbeddedKfake is the target address that runs a kfake cluster, which the
// generator starts in a process of its own (ServeKfakeIfRequested);
// "embedded-kfake" is accepted too.
const EmbeddedKfake = "kfake"

// Target is one system to measure.
type Target struct {
	// Name labels the target in the report.
	Name string
	// Addr is the bootstrap address, host:port; empty for Embedded.
	Addr string
	// Embedded runs a kfake cluster as the target, in a process the
	// generator starts and samples.
	Embedded bool
	// PID, when set, is the target's process, sampled with its
	// descendants for CPU and memory.
	PID int
}

// Where is the target's address as the report shows it.
func (t Target) Where() string {
	if t.Embedded {
		return "kfake (own process)"
	}
	return t.Addr
}

// ParseTargets parses --target values: each is a comma-separated list of
// "name=host:port", "host:port" (named by its address), "kfake" or
// "name=kfake" ("embedded-kfake" for kfake). Names must be unique.
func ParseTargets(values []string) ([]Target, error) {
	var ts []Target
	seen := map[string]bool{}
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			t, err := parseTarget(strings.TrimSpace(s))
			if err != nil {
				return nil, err
			}
			if seen[t.Name] {
				return nil, flagErrorf("target", "%q: the name %q is used twice", s, t.Name)
			}
			seen[t.Name] = true
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return nil, flagErrorf("target", "required: give host:port, name=host:port or kfake")
	}
	return ts, nil
}

func parseTarget(s string) (Target, error) {
	if s == "" {
		return Target{}, flagErrorf("target", "empty value")
	}
	name, addr, named := strings.Cut(s, "=")
	if !named {
		name, addr = s, s
	}
	if name == "" || strings.ContainsAny(name, " \t") {
		return Target{}, flagErrorf("target", "%q: a name must be non-empty and without spaces", s)
	}
	if addr == EmbeddedKfake || addr == "embedded-kfake" {
		if !named {
			name = EmbeddedKfake
		}
		return Target{Name: name, Embedded: true}, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return Target{}, flagErrorf("target", "%q: want host:port, name=host:port or kfake: %v", s, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return Target{}, flagErrorf("target", "%q: port %q is not a number from 1 to 65535", s, port)
	}
	if host == "" {
		return Target{}, flagErrorf("target", "%q: the host is missing", s)
	}
	return Target{Name: name, Addr: addr}, nil
}

// SetPIDs applies --pid values to targets: each is a comma-separated list
// of "name=PID", or a bare PID when exactly one target is not embedded.
// The process must exist, and an embedded target takes none: its process
// is this one.
func SetPIDs(targets []Target, values []string) error {
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			name, pidText, named := strings.Cut(s, "=")
			if !named {
				pidText, name = s, ""
			}
			pid, err := strconv.Atoi(pidText)
			if err != nil || pid < 1 {
				return flagErrorf("pid", "%q: want name=PID with PID a positive number", s)
			}
			i, err := pidTarget(targets, name, s)
			if err != nil {
				return err
			}
			if _, err := os.Stat(fmt.Sprintf("/proc/%d/stat", pid)); err != nil {
				return flagErrorf("pid", "%q: no process %d to sample", s, pid)
			}
			targets[i].PID = pid
		}
	}
	return nil
}

// pidTarget finds the target a --pid value names; an unnamed value names
// the only target that is not embedded.
func pidTarget(targets []Target, name, value string) (int, error) {
	if name == "" {
		found := -1
		for i, t := range targets {
			if !t.Embedded {
				if found >= 0 {
					return 0, flagErrorf("pid", "%q: several targets; write name=PID", value)
				}
				found = i
			}
		}
		if found < 0 {
			return 0, flagErrorf("pid", "%q: no target runs outside this process", value)
		}
		return found, nil
	}
	for i, t := range targets {
		if t.Name == name {
			if t.Embedded {
				return 0, flagErrorf("pid", "%q: target %s is a process the generator starts and samples itself", value, name)
			}
			return i, nil
		}
	}
	return 0, flagErrorf("pid", "%q: no target is named %q", value, name)
}

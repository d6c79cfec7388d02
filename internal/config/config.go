// Package config reads the TOML configuration of `wasmassign serve` and
// checks it completely before anything starts: every error names the file,
// the key and the problem, on one line, so an operator can fix it without
// reading code.
//
// A Config is immutable once loaded: durations are parsed, globs, CIDRs and
// regular expressions compiled, and relative paths resolved against the
// directory of the file they came from. The package knows nothing of plugins
// or sockets; callers check plugin names with [Config.CheckAssignors]. It
// imports the coordinator only for the type its rack rules parse into, and
// must never import the runtime, the proxy, the gateway or the driver.
package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/wasmassign/wasmassign/coordinator"
)

// ErrInvalid is wrapped by every error about the content of a configuration,
// as opposed to failing to read the file at all.
var ErrInvalid = errors.New("invalid configuration")

// Config is a loaded, checked configuration.
type Config struct {
	// Source is the file the configuration came from, or "<defaults>".
	Source   string
	Server   Server
	Upstream Upstream
	Plugins  Plugins
	Log      Log
	// Groups are the rules for managed groups; the first whose glob matches
	// a group id applies. Groups no rule matches pass through the gateway.
	Groups []Group
	// Racks are the ordered rules that give a rack to clients that send
	// none.
	Racks []coordinator.RackRule
	// Cluster names the gateway cluster this gateway belongs to.
	Cluster Cluster
}

// Cluster configures a gateway as one of several that share the managed
// groups of one upstream.
type Cluster struct {
	// Name is the cluster's: gateways with the same name in front of the
	// same upstream share its managed groups. Empty runs this gateway
	// alone; with an external upstream it is then a cluster of its own
	// (Alone), so that its state is kept in the upstream all the same.
	Name string
	// ID is this gateway's stable identity in the cluster; it defaults to
	// the advertised host and the listen port. It is empty when that port
	// is 0 and no id is set: the daemon completes it with the port it
	// bound (Resolve).
	ID string
	// StateTopic is the compacted topic that holds the groups' state and
	// whose partitions are the shards the gateways own; it defaults to
	// wasmassign-<name>-state, and for a gateway alone to
	// wasmassign-<AloneName(id)>-state.
	StateTopic string
	// Partitions is the state topic's partition count when the gateway
	// creates it: how many shards the groups are spread over (by default
	// 16, and 1 for a gateway alone).
	Partitions int
	// SessionTimeout, HeartbeatInterval and RebalanceTimeout are the
	// gateways' own group's: a gateway that dies loses its shards a
	// session after its last heartbeat.
	SessionTimeout, HeartbeatInterval, RebalanceTimeout time.Duration
	// Lease is how long after the last heartbeat Kafka confirmed a gateway
	// answers for its shards; it must end before the session does.
	Lease time.Duration
}

// Server configures the gateway's own listeners.
type Server struct {
	// Listen is the bootstrap listener's address.
	Listen string
	// AdvertisedHost is the host clients are told to connect to, in
	// rewritten broker addresses.
	AdvertisedHost string
	// BrokerPortBase is the port of the listener for node 0; node N listens
	// on BrokerPortBase+N unless BrokerPorts maps it. 0 gives every broker
	// listener a free port (for tests; clients learn the ports from
	// metadata).
	BrokerPortBase int
	// BrokerPorts maps node ids to listener ports, overriding the base.
	BrokerPorts map[int32]int
	// AdminListen is the address of the admin and metrics HTTP server;
	// empty disables it.
	AdminListen string
	// MetricsGroupCap bounds the distinct group label values of per-group
	// metrics; later groups are summed under "_other".
	MetricsGroupCap int
	// AdminToken, when set, is the bearer token the admin API requires on
	// every route but /healthz.
	AdminToken string
	// Pprof serves the Go runtime's profiles on the admin API, under
	// /debug/pprof/.
	Pprof bool
	// StateDir is where group state is kept across restarts; empty keeps it
	// in memory only.
	StateDir string
	// TLSCert and TLSKey, both set, make the listeners serve TLS.
	TLSCert, TLSKey string
	// EmptyGroupRetention is how long a managed group with no members stays
	// listed (Kafka keeps offsets 7 days by default).
	EmptyGroupRetention time.Duration
	// MaxFrameBytes bounds the size of one client request; bigger frames
	// close the connection. Kafka's socket.request.max.bytes defaults to
	// 100 MiB.
	MaxFrameBytes int32
	// ShutdownTimeout bounds how long SIGTERM or SIGINT lets in-flight
	// requests finish (a long-polling Fetch holds its connection up to its
	// maximum wait); connections still busy then are closed, and the
	// daemon still exits 0.
	ShutdownTimeout time.Duration
}

// BrokerPort returns the listener port for node.
func (s Server) BrokerPort(node int32) int {
	if p, ok := s.BrokerPorts[node]; ok {
		return p
	}
	if s.BrokerPortBase == 0 {
		return 0
	}
	return s.BrokerPortBase + int(node)
}

// Upstream configures the Kafka cluster behind the gateway.
type Upstream struct {
	// Brokers are the bootstrap addresses; empty starts the embedded
	// cluster.
	Brokers []string
	// MetadataRefresh is how often cluster metadata is refreshed.
	MetadataRefresh time.Duration
	// MetadataWait bounds how long a group's assignment waits for metadata
	// of a topic its members subscribe to that the gateway has not looked
	// up yet; it is looked up at once. 0 assigns at once, and a second
	// rebalance follows when the metadata arrives.
	MetadataWait time.Duration
	// ForwardConnections is how many connections to each upstream broker
	// carry the requests the gateway forwards for managed groups (offset
	// commits above all). A Kafka broker handles one request of a
	// connection at a time, so with one, every group's commits queue
	// behind each other's; a group's requests keep to one of them, in
	// order. The embedded cluster always uses one.
	ForwardConnections int
	// OffsetsRetention is the upstream's offsets.retention.minutes. The
	// gateway commits a managed group's offsets upstream as a group without
	// members, whose offsets the broker expires that long after each
	// commit; it commits them again before then while the group lives.
	OffsetsRetention time.Duration
	// TLSCA, when set, is the PEM file of the CA that signs the upstream's
	// certificates, and makes the gateway's connections use TLS.
	TLSCA string
	// SASLMechanism is "", "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512", for
	// the gateway's own connections.
	SASLMechanism, SASLUser, SASLPassword string
	// Embedded configures the cluster started when Brokers is empty.
	Embedded Embedded
	// BrokerRacks overrides the upstream's broker racks, node id to rack.
	BrokerRacks map[int32]string
}

// IsEmbedded reports whether the gateway starts its own cluster.
func (u Upstream) IsEmbedded() bool { return len(u.Brokers) == 0 }

// Embedded configures the in-process cluster.
type Embedded struct {
	Brokers int
	Topics  []TopicSpec
}

// TopicSpec is a topic the embedded cluster creates at start.
type TopicSpec struct {
	Name        string
	Partitions  int32
	Replication int16
}

// Plugins configures the wasm plugins.
type Plugins struct {
	// Dir holds extra *.wasm plugins, as an absolute path; empty loads only
	// the built-ins.
	Dir string
	// Timeout bounds one plugin call.
	Timeout time.Duration
	// AssignmentTimeout bounds a rebalance's wait for its assignment, the
	// metadata wait and every assignor of the fallback chain included;
	// past it the coordinator hands out the range assignment itself.
	AssignmentTimeout time.Duration
	// CompileTimeout bounds compiling one plugin module, at start-up, on
	// hot reload and whenever a worker loads it again; a module past it
	// is rejected and the rest of the start-up or reload goes on.
	CompileTimeout time.Duration
	// MemoryLimitMB bounds one plugin instance's linear memory, and each
	// worker process at it and 256 MiB more for its runtime, the compiler
	// and the guest's tables.
	MemoryLimitMB int
	// Workers bounds the plugin instances (worker processes, on Linux)
	// running at once across every plugin; assignments beyond them wait
	// in a first-come, first-served queue. Zero takes the machine's
	// default: its cores, and at least 2.
	Workers int
	// QueueTimeout bounds an assignment's wait in that queue; past it the
	// call is an overload (counted, logged, and tried again while the
	// rebalance's assignment_timeout allows), never a plugin failure.
	QueueTimeout time.Duration
	// IdleTimeout ends plugin instances idle longer than it; zero keeps
	// them until their place is needed.
	IdleTimeout time.Duration
}

// Log configures the daemon's log.
type Log struct {
	Level  string // debug, info, warn or error
	Format string // text or json
}

// Group is the rule for the managed groups whose id matches Match.
type Group struct {
	// Match is a glob on the group id: '*' matches any run of characters,
	// '?' any one character, and '\' escapes the next character.
	Match string
	// Assignor names the assignor to run; empty runs the plugin serving the
	// protocol the members chose.
	Assignor string
	// Priority lists protocols in the operator's order of preference; the
	// first that every member offers wins over the members' vote.
	Priority []string
	// Fallback is the assignor used when the chosen one fails.
	Fallback string
	// InitialRebalanceDelay delays the first rebalance of an empty group so
	// that members starting together join one generation.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the session timeouts
	// members may ask for, as Kafka's group.min.session.timeout.ms and
	// group.max.session.timeout.ms (6s and 30m by default).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// MaxSize bounds the number of members; 0 means no bound.
	MaxSize int
	// RebalanceOnReload makes the group rebalance when its plugin is
	// reloaded.
	RebalanceOnReload bool
	// Config is handed to the plugin with every request.
	Config map[string]string
}

// Matches reports whether the rule applies to groupID.
func (g *Group) Matches(groupID string) bool { return globMatch(g.Match, groupID) }

// GroupFor returns the rule for groupID: the first whose glob matches. The
// second result is false for a group the gateway does not manage.
func (c *Config) GroupFor(groupID string) (*Group, bool) {
	for i := range c.Groups {
		if c.Groups[i].Matches(groupID) {
			return &c.Groups[i], true
		}
	}
	return nil, false
}

// CheckAssignors reports the first group whose assignor or fallback known
// does not accept, naming the file and key.
func (c *Config) CheckAssignors(known func(name string) bool) error {
	for i, g := range c.Groups {
		if g.Assignor != "" && !known(g.Assignor) {
			return c.errorf("groups[%d].assignor", "no plugin provides assignor %q", i, g.Assignor)
		}
		if !known(g.Fallback) {
			return c.errorf("groups[%d].fallback", "no plugin provides assignor %q", i, g.Fallback)
		}
	}
	return nil
}

func (c *Config) errorf(key, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w: %s", c.Source, keyName(key, args), ErrInvalid, fmt.Sprintf(format, args[strings.Count(key, "%"):]...))
}

// keyName formats a key pattern such as "groups[%d].assignor" with the
// leading args it uses.
func keyName(key string, args []any) string {
	return fmt.Sprintf(key, args[:strings.Count(key, "%")]...)
}

// DefaultText is the configuration `wasmassign serve` runs with when given
// no file: the embedded cluster, every group managed.
const DefaultText = `[server]
listen = "127.0.0.1:9092"
advertised_host = "127.0.0.1"
broker_port_base = 9093
admin_listen = "127.0.0.1:9644"

[upstream.embedded]
brokers = 3
topics = ["demo:6"]

[[groups]]
match = "*"
`

// Default returns the configuration used when no file is given.
func Default() *Config {
	c, err := Parse([]byte(DefaultText), "<defaults>", "")
	if err != nil {
		panic("config: the built-in defaults do not parse: " + err.Error())
	}
	return c
}

// Load reads and checks the configuration file at path. Relative paths in it
// are resolved against the file's directory; the plugin directory and TLS
// files must exist and be readable.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data, path, filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	if err := c.checkFiles(); err != nil {
		return nil, err
	}
	return c, nil
}

// checkFiles makes sure the files and directories the configuration names
// can be read, so a typo stops start-up rather than the first rebalance.
func (c *Config) checkFiles() error {
	if c.Plugins.Dir != "" {
		if _, err := os.ReadDir(c.Plugins.Dir); err != nil {
			return c.errorf("plugins.dir", "%v", err)
		}
	}
	for key, file := range map[string]string{"server.tls_cert": c.Server.TLSCert, "server.tls_key": c.Server.TLSKey, "upstream.tls_ca": c.Upstream.TLSCA} {
		if file == "" {
			continue
		}
		if _, err := os.ReadFile(file); err != nil {
			return c.errorf(key, "%v", err)
		}
	}
	return nil
}

// file mirrors the TOML layout. Pointers tell an absent key from a zero
// value where the default is not zero.
type file struct {
	Server struct {
		Listen         *string        `toml:"listen"`
		AdvertisedHost *string        `toml:"advertised_host"`
		BrokerPortBase *int           `toml:"broker_port_base"`
		BrokerPorts    map[string]int `toml:"broker_ports"`
		AdminListen    *string        `toml:"admin_listen"`
		StateDir       string         `toml:"state_dir"`
		TLSCert        string         `toml:"tls_cert"`
		TLSKey         string         `toml:"tls_key"`
		MaxFrameBytes  *int64         `toml:"max_frame_bytes"`
		GroupRetention *string        `toml:"empty_group_retention"`
		AdminToken     string         `toml:"admin_token"`
		Pprof          bool           `toml:"pprof"`
		MetricsCap     *int           `toml:"metrics_group_cap"`
		Shutdown       *string        `toml:"shutdown_timeout"`
	} `toml:"server"`
	Cluster struct {
		Name              string  `toml:"name"`
		ID                string  `toml:"id"`
		StateTopic        string  `toml:"state_topic"`
		Partitions        *int    `toml:"partitions"`
		SessionTimeout    *string `toml:"session_timeout"`
		HeartbeatInterval *string `toml:"heartbeat_interval"`
		RebalanceTimeout  *string `toml:"rebalance_timeout"`
		Lease             *string `toml:"lease"`
	} `toml:"cluster"`
	Upstream struct {
		Brokers         []string `toml:"brokers"`
		MetadataRefresh *string  `toml:"metadata_refresh"`
		MetadataWait    *string  `toml:"metadata_wait"`
		Retention       *string  `toml:"offsets_retention"`
		ForwardConns    *int     `toml:"forward_connections"`
		TLSCA           string   `toml:"tls_ca"`
		SASLMechanism   string   `toml:"sasl_mechanism"`
		SASLUser        string   `toml:"sasl_user"`
		SASLPassword    string   `toml:"sasl_password"`
		Embedded        struct {
			Brokers *int     `toml:"brokers"`
			Topics  []string `toml:"topics"`
		} `toml:"embedded"`
		BrokerRacks map[string]string `toml:"broker_racks"`
	} `toml:"upstream"`
	Plugins struct {
		Dir               string  `toml:"dir"`
		Timeout           *string `toml:"timeout"`
		AssignmentTimeout *string `toml:"assignment_timeout"`
		CompileTimeout    *string `toml:"compile_timeout"`
		MemoryLimitMB     *int    `toml:"memory_limit_mb"`
		Workers           *int    `toml:"workers"`
		QueueTimeout      *string `toml:"queue_timeout"`
		IdleTimeout       *string `toml:"idle_timeout"`
	} `toml:"plugins"`
	Log struct {
		Level  string `toml:"level"`
		Format string `toml:"format"`
	} `toml:"log"`
	Groups []struct {
		Match                 *string           `toml:"match"`
		Assignor              string            `toml:"assignor"`
		Priority              []string          `toml:"priority"`
		Fallback              *string           `toml:"fallback"`
		InitialRebalanceDelay *string           `toml:"initial_rebalance_delay"`
		MinSessionTimeout     *string           `toml:"min_session_timeout"`
		MaxSessionTimeout     *string           `toml:"max_session_timeout"`
		MaxSize               int               `toml:"max_size"`
		RebalanceOnReload     bool              `toml:"rebalance_on_reload"`
		Config                map[string]string `toml:"config"`
	} `toml:"groups"`
	Racks []struct {
		CIDR     string `toml:"cidr"`
		ClientID string `toml:"client_id"`
		Rack     string `toml:"rack"`
	} `toml:"racks"`
}

// Parse checks a configuration given as TOML text. source names it in
// errors; dir is the directory relative paths are resolved against. Parse
// does not touch the filesystem: [Load] also checks that named files exist.
func Parse(data []byte, source, dir string) (*Config, error) {
	c := &Config{Source: source}
	var f file
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&f)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s:%d: %w: %s", source, pe.Position.Line, ErrInvalid, pe.Message)
		}
		return nil, fmt.Errorf("%s: %w: %v", source, ErrInvalid, err)
	}
	if keys := md.Undecoded(); len(keys) > 0 {
		return nil, fmt.Errorf("%s: %s: %w: unknown key (a typo, or a key this version does not have)", source, keys[0], ErrInvalid)
	}
	steps := []func(*file, string) error{c.server, c.upstream, c.cluster, c.plugins, c.log, c.groups, c.racks}
	for _, step := range steps {
		if err := step(&f, dir); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Config) server(f *file, dir string) error {
	s := &c.Server
	s.Listen = orDefault(f.Server.Listen, "127.0.0.1:9092")
	s.AdvertisedHost = orDefault(f.Server.AdvertisedHost, "127.0.0.1")
	s.AdminListen = orDefault(f.Server.AdminListen, "")
	s.BrokerPortBase = 9093
	if f.Server.BrokerPortBase != nil {
		s.BrokerPortBase = *f.Server.BrokerPortBase
	}
	if err := c.checkAddr("server.listen", s.Listen, false); err != nil {
		return err
	}
	if err := c.checkAddr("server.admin_listen", s.AdminListen, true); err != nil {
		return err
	}
	if s.AdvertisedHost == "" {
		return c.errorf("server.advertised_host", "must not be empty")
	}
	if s.BrokerPortBase < 0 || s.BrokerPortBase > 65535 {
		return c.errorf("server.broker_port_base", "port %d out of range 0-65535", s.BrokerPortBase)
	}
	if len(f.Server.BrokerPorts) > 0 {
		s.BrokerPorts = make(map[int32]int, len(f.Server.BrokerPorts))
		for k, port := range f.Server.BrokerPorts {
			node, err := nodeID(k)
			if err != nil {
				return c.errorf("server.broker_ports.%q", "%v", k, err)
			}
			if port < 1 || port > 65535 {
				return c.errorf("server.broker_ports.%q", "port %d out of range 1-65535", k, port)
			}
			s.BrokerPorts[node] = port
		}
	}
	s.AdminToken = f.Server.AdminToken
	s.Pprof = f.Server.Pprof
	s.MetricsGroupCap = 500
	if f.Server.MetricsCap != nil {
		s.MetricsGroupCap = *f.Server.MetricsCap
	}
	if s.MetricsGroupCap < 1 {
		return c.errorf("server.metrics_group_cap", "%d must be at least 1", s.MetricsGroupCap)
	}
	s.StateDir = resolve(dir, f.Server.StateDir)
	s.TLSCert = resolve(dir, f.Server.TLSCert)
	s.TLSKey = resolve(dir, f.Server.TLSKey)
	if (s.TLSCert == "") != (s.TLSKey == "") {
		return c.errorf("server.tls_cert", "tls_cert and tls_key must be set together")
	}
	var err error
	if s.EmptyGroupRetention, err = c.duration("server.empty_group_retention", f.Server.GroupRetention, 7*24*time.Hour); err != nil {
		return err
	}
	if s.EmptyGroupRetention <= 0 {
		return c.errorf("server.empty_group_retention", "must be positive")
	}
	if s.ShutdownTimeout, err = c.duration("server.shutdown_timeout", f.Server.Shutdown, 10*time.Second); err != nil {
		return err
	}
	if s.ShutdownTimeout <= 0 {
		return c.errorf("server.shutdown_timeout", "must be positive")
	}
	s.MaxFrameBytes = 100 << 20
	if f.Server.MaxFrameBytes != nil {
		v := *f.Server.MaxFrameBytes
		if v < 1<<10 || v > 1<<30 {
			return c.errorf("server.max_frame_bytes", "%d out of range 1 KiB to 1 GiB", v)
		}
		s.MaxFrameBytes = int32(v)
	}
	return nil
}

func (c *Config) upstream(f *file, dir string) error {
	u := &c.Upstream
	u.Brokers = slices.Clone(f.Upstream.Brokers)
	for i, b := range u.Brokers {
		if err := c.checkAddr(fmt.Sprintf("upstream.brokers[%d]", i), b, false); err != nil {
			return err
		}
	}
	var err error
	if u.MetadataRefresh, err = c.duration("upstream.metadata_refresh", f.Upstream.MetadataRefresh, 10*time.Second); err != nil {
		return err
	}
	if u.MetadataRefresh < 100*time.Millisecond {
		return c.errorf("upstream.metadata_refresh", "%v is below the minimum of 100ms", u.MetadataRefresh)
	}
	if u.MetadataWait, err = c.duration("upstream.metadata_wait", f.Upstream.MetadataWait, 5*time.Second); err != nil {
		return err
	}
	if u.MetadataWait < 0 {
		return c.errorf("upstream.metadata_wait", "%v is negative", u.MetadataWait)
	}
	if u.ForwardConnections, err = c.intIn("upstream.forward_connections", f.Upstream.ForwardConns, 4, 1, 64); err != nil {
		return err
	}
	// Kafka's offsets.retention.minutes defaults to 7 days.
	if u.OffsetsRetention, err = c.duration("upstream.offsets_retention", f.Upstream.Retention, 7*24*time.Hour); err != nil {
		return err
	}
	if u.OffsetsRetention < time.Minute {
		return c.errorf("upstream.offsets_retention", "%v is below Kafka's minimum of 1m", u.OffsetsRetention)
	}
	u.TLSCA = resolve(dir, f.Upstream.TLSCA)
	u.SASLMechanism, u.SASLUser, u.SASLPassword = f.Upstream.SASLMechanism, f.Upstream.SASLUser, f.Upstream.SASLPassword
	switch u.SASLMechanism {
	case "":
		if u.SASLUser != "" || u.SASLPassword != "" {
			return c.errorf("upstream.sasl_user", "set without upstream.sasl_mechanism")
		}
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if u.SASLUser == "" {
			return c.errorf("upstream.sasl_user", "required with sasl_mechanism %s", u.SASLMechanism)
		}
	default:
		return c.errorf("upstream.sasl_mechanism", "%q is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", u.SASLMechanism)
	}
	e := &u.Embedded
	e.Brokers = 3
	if f.Upstream.Embedded.Brokers != nil {
		e.Brokers = *f.Upstream.Embedded.Brokers
	}
	if e.Brokers < 1 || e.Brokers > 64 {
		return c.errorf("upstream.embedded.brokers", "%d out of range 1-64", e.Brokers)
	}
	seen := map[string]bool{}
	for i, spec := range f.Upstream.Embedded.Topics {
		t, err := parseTopic(spec)
		if err == nil && int(t.Replication) > e.Brokers {
			err = fmt.Errorf("replication %d is more than the %d brokers", t.Replication, e.Brokers)
		}
		if err == nil && seen[t.Name] {
			err = fmt.Errorf("topic %s listed twice", t.Name)
		}
		if err != nil {
			return c.errorf("upstream.embedded.topics[%d]", "%q: %v", i, spec, err)
		}
		seen[t.Name] = true
		e.Topics = append(e.Topics, t)
	}
	if len(f.Upstream.BrokerRacks) > 0 {
		u.BrokerRacks = make(map[int32]string, len(f.Upstream.BrokerRacks))
		for k, rack := range f.Upstream.BrokerRacks {
			node, err := nodeID(k)
			if err != nil {
				return c.errorf("upstream.broker_racks.%q", "%v", k, err)
			}
			u.BrokerRacks[node] = rack
		}
	}
	return nil
}

// cluster checks [cluster]. A name shares the upstream's managed groups
// with the gateways of the same name, which an embedded cluster, living
// inside one gateway, cannot be.
func (c *Config) cluster(f *file, _ string) error {
	cl := &c.Cluster
	cl.Name, cl.ID = f.Cluster.Name, f.Cluster.ID
	if cl.ID == "" {
		if _, port, _ := net.SplitHostPort(c.Server.Listen); port != "0" {
			cl.ID = DefaultID(c.Server.AdvertisedHost, port)
		}
	}
	if len(cl.ID) > 200 {
		return c.errorf("cluster.id", "%d characters: use at most 200 (it names the gateway's state topic when it runs alone)", len(cl.ID))
	}
	if !validClusterName(cl.Name) {
		return c.errorf("cluster.name", "%q: use at most 200 of the letters, digits, '.', '_' and '-' (it names Kafka topics and groups)", cl.Name)
	}
	cl.StateTopic = f.Cluster.StateTopic
	if !validClusterName(cl.StateTopic) {
		return c.errorf("cluster.state_topic", "%q: use at most 200 of the letters, digits, '.', '_' and '-'", cl.StateTopic)
	}
	var err error
	partitions := 16
	if cl.Name == "" {
		partitions = 1 // one gateway: more shards would only cost
	}
	if cl.Partitions, err = c.intIn("cluster.partitions", f.Cluster.Partitions, partitions, 1, 1000); err != nil {
		return err
	}
	for _, d := range []struct {
		key string
		v   *string
		def time.Duration
		to  *time.Duration
	}{
		{"cluster.session_timeout", f.Cluster.SessionTimeout, 10 * time.Second, &cl.SessionTimeout},
		{"cluster.heartbeat_interval", f.Cluster.HeartbeatInterval, time.Second, &cl.HeartbeatInterval},
		{"cluster.rebalance_timeout", f.Cluster.RebalanceTimeout, 10 * time.Second, &cl.RebalanceTimeout},
		{"cluster.lease", f.Cluster.Lease, 6 * time.Second, &cl.Lease},
	} {
		if *d.to, err = c.duration(d.key, d.v, d.def); err != nil {
			return err
		}
		if *d.to < 100*time.Millisecond {
			return c.errorf(d.key, "%v is below the minimum of 100ms", *d.to)
		}
	}
	if cl.Lease < 3*cl.HeartbeatInterval {
		return c.errorf("cluster.lease", "%v is shorter than three heartbeat intervals (%v): one lost heartbeat would end it", cl.Lease, 3*cl.HeartbeatInterval)
	}
	if cl.Lease >= cl.SessionTimeout {
		return c.errorf("cluster.lease", "%v must end before the session timeout (%v), when another gateway may be given the shards", cl.Lease, cl.SessionTimeout)
	}
	if cl.Name == "" {
		return nil
	}
	if c.Upstream.IsEmbedded() {
		return c.errorf("cluster.name", "the embedded cluster lives inside one gateway and cannot be shared; set [upstream] brokers to share a Kafka cluster")
	}
	if _, port, _ := net.SplitHostPort(c.Server.Listen); port == "0" {
		return c.errorf("cluster.name", "a cluster's gateways send clients to each other's listen address: set [server] listen to a fixed port, not %s", c.Server.Listen)
	}
	return nil
}

// Alone reports whether the gateway, with no [cluster] name, runs in a
// cluster of its own: with an external upstream it keeps its groups' state
// in a state topic there, through the same path as a cluster of several,
// so that a gateway restarted (or replaced) under the same id finds it.
func (c *Config) Alone() bool { return c.Cluster.Name == "" && !c.Upstream.IsEmbedded() }

// InUpstream reports whether the gateway keeps its groups' state in the
// upstream (a state topic) rather than in state_dir: whenever the upstream
// is external.
func (c *Config) InUpstream() bool { return !c.Upstream.IsEmbedded() }

// DefaultID is a gateway's id when [cluster] id is not set: its
// advertised host and port, with the machine's host name in place of a
// loopback host, so that gateways on different machines left at the
// defaults never take each other's id (and, alone, each other's state
// topic).
func DefaultID(advertisedHost, port string) string {
	host := advertisedHost
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
		}
	}
	return net.JoinHostPort(host, port)
}

// AloneName is the cluster name of a gateway alone whose id is id: "solo."
// and the id in the characters a topic name allows, each other byte (and
// '_' itself) written as '_' and two hex digits, so that two ids never
// share a name.
func AloneName(id string) string {
	var b strings.Builder
	b.WriteString("solo.")
	for _, ch := range []byte(id) {
		if ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '-' {
			b.WriteByte(ch)
		} else {
			fmt.Fprintf(&b, "_%02x", ch)
		}
	}
	return b.String()
}

// Resolve completes the cluster once the gateway's id is known: id fills
// an empty ID (the advertised host and the port the gateway bound), a
// gateway alone is named AloneName(ID), and the state topic defaults to
// wasmassign-<name>-state.
func (cl Cluster) Resolve(id string) Cluster {
	if cl.ID == "" {
		cl.ID = id
	}
	if cl.Name == "" {
		cl.Name = AloneName(cl.ID)
	}
	if cl.StateTopic == "" {
		cl.StateTopic = "wasmassign-" + cl.Name + "-state"
	}
	return cl
}

// validClusterName reports whether name may name the cluster's Kafka topic
// and group: Kafka's topic characters, with room for a prefix and suffix.
func validClusterName(name string) bool {
	if len(name) > 200 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

func (c *Config) plugins(f *file, dir string) error {
	p := &c.Plugins
	p.Dir = resolve(dir, f.Plugins.Dir)
	var err error
	if p.Timeout, err = c.duration("plugins.timeout", f.Plugins.Timeout, 2*time.Second); err != nil {
		return err
	}
	if p.Timeout <= 0 {
		return c.errorf("plugins.timeout", "must be positive")
	}
	// Under Java's default request.timeout.ms (30 s): a SyncGroup parked
	// longer makes the client give up and rejoin.
	if p.AssignmentTimeout, err = c.duration("plugins.assignment_timeout", f.Plugins.AssignmentTimeout, 20*time.Second); err != nil {
		return err
	}
	if p.AssignmentTimeout < p.Timeout {
		return c.errorf("plugins.assignment_timeout", "%v is shorter than plugins.timeout (%v): no assignor could finish", p.AssignmentTimeout, p.Timeout)
	}
	// The runtime's default: a Go guest compiles in one to two seconds,
	// and a module built to keep the compiler busy for minutes is cut off
	// well before an operator gives up on the start-up.
	if p.CompileTimeout, err = c.duration("plugins.compile_timeout", f.Plugins.CompileTimeout, 20*time.Second); err != nil {
		return err
	}
	if p.CompileTimeout <= 0 {
		return c.errorf("plugins.compile_timeout", "must be positive")
	}
	p.MemoryLimitMB = 512
	if f.Plugins.MemoryLimitMB != nil {
		p.MemoryLimitMB = *f.Plugins.MemoryLimitMB
	}
	// A wasm32 memory cannot exceed 4 GiB; below a few MiB no Go guest
	// starts.
	if p.MemoryLimitMB < 16 || p.MemoryLimitMB > 4096 {
		return c.errorf("plugins.memory_limit_mb", "%d out of range 16-4096", p.MemoryLimitMB)
	}
	if f.Plugins.Workers != nil {
		p.Workers = *f.Plugins.Workers
		// Each worker is a process of tens of MiB: past a thousand the
		// machine, not the bound, is the limit.
		if p.Workers < 1 || p.Workers > 1024 {
			return c.errorf("plugins.workers", "%d out of range 1-1024", p.Workers)
		}
	}
	// By default a queued call still has its own timeout's worth of the
	// rebalance's bound left when it gives up waiting.
	queueDefault := min(10*time.Second, max(p.AssignmentTimeout-p.Timeout, p.AssignmentTimeout/2))
	if p.QueueTimeout, err = c.duration("plugins.queue_timeout", f.Plugins.QueueTimeout, queueDefault); err != nil {
		return err
	}
	if p.QueueTimeout <= 0 {
		return c.errorf("plugins.queue_timeout", "must be positive")
	}
	if p.IdleTimeout, err = c.duration("plugins.idle_timeout", f.Plugins.IdleTimeout, 30*time.Second); err != nil {
		return err
	}
	if p.IdleTimeout < 0 {
		return c.errorf("plugins.idle_timeout", "must not be negative")
	}
	if f.Plugins.QueueTimeout != nil && p.QueueTimeout+p.Timeout > p.AssignmentTimeout {
		return c.errorf("plugins.queue_timeout", "%v and plugins.timeout (%v) exceed plugins.assignment_timeout (%v): a queued call could not finish in time", p.QueueTimeout, p.Timeout, p.AssignmentTimeout)
	}
	return nil
}

func (c *Config) log(f *file, _ string) error {
	c.Log.Level = cmp.Or(f.Log.Level, "info")
	c.Log.Format = cmp.Or(f.Log.Format, "text")
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		return c.errorf("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	if !slices.Contains([]string{"text", "json"}, c.Log.Format) {
		return c.errorf("log.format", "%q is not one of text, json", c.Log.Format)
	}
	return nil
}

func (c *Config) groups(f *file, _ string) error {
	for i, fg := range f.Groups {
		if fg.Match == nil || *fg.Match == "" {
			return c.errorf("groups[%d].match", "required: a glob on the group id, such as \"*\"", i)
		}
		g := Group{
			Match:             *fg.Match,
			Assignor:          fg.Assignor,
			Priority:          slices.Clone(fg.Priority),
			Fallback:          orDefault(fg.Fallback, "range"),
			MaxSize:           fg.MaxSize,
			RebalanceOnReload: fg.RebalanceOnReload,
		}
		if len(fg.Config) > 0 {
			g.Config = make(map[string]string, len(fg.Config))
			for k, v := range fg.Config {
				g.Config[k] = v
			}
		}
		if err := checkGlob(g.Match); err != nil {
			return c.errorf("groups[%d].match", "%q: %v", i, g.Match, err)
		}
		if g.Fallback == "" {
			return c.errorf("groups[%d].fallback", "must not be empty", i)
		}
		for j, p := range g.Priority {
			if p == "" || slices.Index(g.Priority, p) != j {
				return c.errorf("groups[%d].priority", "entry %d (%q) is empty or repeated", i, j, p)
			}
		}
		var err error
		if g.InitialRebalanceDelay, err = c.duration(fmt.Sprintf("groups[%d].initial_rebalance_delay", i), fg.InitialRebalanceDelay, 3*time.Second); err != nil {
			return err
		}
		if g.InitialRebalanceDelay < 0 {
			return c.errorf("groups[%d].initial_rebalance_delay", "must not be negative", i)
		}
		if g.MinSessionTimeout, err = c.duration(fmt.Sprintf("groups[%d].min_session_timeout", i), fg.MinSessionTimeout, 6*time.Second); err != nil {
			return err
		}
		if g.MaxSessionTimeout, err = c.duration(fmt.Sprintf("groups[%d].max_session_timeout", i), fg.MaxSessionTimeout, 30*time.Minute); err != nil {
			return err
		}
		if g.MinSessionTimeout <= 0 || g.MinSessionTimeout > g.MaxSessionTimeout {
			return c.errorf("groups[%d].min_session_timeout", "%v must be positive and at most max_session_timeout (%v)", i, g.MinSessionTimeout, g.MaxSessionTimeout)
		}
		if g.MaxSize < 0 {
			return c.errorf("groups[%d].max_size", "must not be negative", i)
		}
		c.Groups = append(c.Groups, g)
	}
	return nil
}

func (c *Config) racks(f *file, _ string) error {
	for i, fr := range f.Racks {
		if fr.Rack == "" {
			return c.errorf("racks[%d].rack", "required", i)
		}
		r := coordinator.RackRule{Rack: fr.Rack}
		switch {
		case fr.CIDR != "" && fr.ClientID != "":
			return c.errorf("racks[%d]", "set cidr or client_id, not both", i)
		case fr.CIDR != "":
			p, err := netip.ParsePrefix(fr.CIDR)
			if err != nil {
				return c.errorf("racks[%d].cidr", "%v", i, err)
			}
			r.CIDR = p.Masked()
		case fr.ClientID != "":
			re, err := regexp.Compile(fr.ClientID)
			if err != nil {
				return c.errorf("racks[%d].client_id", "%v", i, err)
			}
			r.ClientID = re
		default:
			return c.errorf("racks[%d]", "needs cidr or client_id", i)
		}
		c.Racks = append(c.Racks, r)
	}
	return nil
}

// intIn is the integer at key, def when it is not set, refused outside
// lo-hi.
func (c *Config) intIn(key string, v *int, def, lo, hi int) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v < lo || *v > hi {
		return 0, c.errorf(key, "%d is outside %d-%d", *v, lo, hi)
	}
	return *v, nil
}

func (c *Config) duration(key string, v *string, def time.Duration) (time.Duration, error) {
	if v == nil {
		return def, nil
	}
	d, err := time.ParseDuration(*v)
	if err != nil {
		return 0, c.errorf(key, "%q is not a duration such as \"2s\" or \"500ms\"", *v)
	}
	return d, nil
}

func (c *Config) checkAddr(key, addr string, mayBeEmpty bool) error {
	if addr == "" && mayBeEmpty {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		var n int
		n, err = strconv.Atoi(port)
		if err == nil && (n < 0 || n > 65535) {
			err = fmt.Errorf("port %d out of range", n)
		}
	}
	if err != nil {
		return c.errorf(key, "%q is not host:port: %v", addr, err)
	}
	return nil
}

func parseTopic(spec string) (TopicSpec, error) {
	parts := strings.Split(spec, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
		return TopicSpec{}, errors.New("want name:partitions[:replication]")
	}
	t := TopicSpec{Name: parts[0], Replication: 1}
	n, err := strconv.ParseInt(parts[1], 10, 32)
	if err != nil || n < 1 {
		return TopicSpec{}, fmt.Errorf("partitions %q is not a positive number", parts[1])
	}
	t.Partitions = int32(n)
	if len(parts) == 3 {
		r, err := strconv.ParseInt(parts[2], 10, 16)
		if err != nil || r < 1 {
			return TopicSpec{}, fmt.Errorf("replication %q is not a positive number", parts[2])
		}
		t.Replication = int16(r)
	}
	return t, nil
}

func nodeID(s string) (int32, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a broker node id", s)
	}
	return int32(n), nil
}

func resolve(dir, p string) string {
	if p == "" || filepath.IsAbs(p) || dir == "" {
		return p
	}
	return filepath.Join(dir, p)
}

func orDefault(v *string, def string) string {
	if v == nil {
		return def
	}
	return *v
}

package config

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// documentedExample is the configuration shown to operators: every key the
// gateway documents, with the values from the documentation.
const documentedExample = `
[server]
listen = "127.0.0.1:9092"
advertised_host = "127.0.0.1"
broker_port_base = 9093
admin_listen = "127.0.0.1:9644"
state_dir = "state"
tls_cert = ""
tls_key = ""

[upstream]
brokers = []
metadata_refresh = "10s"
metadata_wait = "2s"
tls_ca = ""
sasl_mechanism = ""
sasl_user = ""
sasl_password = ""
[upstream.embedded]
brokers = 3
topics = ["demo:6"]
[upstream.broker_racks]
"0" = "az-a"

[plugins]
dir = "plugins.d"
timeout = "2s"
compile_timeout = "20s"
memory_limit_mb = 512
workers = 3
queue_timeout = "5s"

[[groups]]
match = "*"
assignor = ""
priority = []
fallback = "range"
initial_rebalance_delay = "3s"
[groups.config]
key = "value"

[[racks]]
cidr = "10.1.0.0/16"
rack = "az-a"
[[racks]]
client_id = "^billing-"
rack = "az-b"
`

func TestParse_DocumentedExample(t *testing.T) {
	c, err := Parse([]byte(documentedExample), "gateway.toml", "/etc/wasmassign")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Upstream.IsEmbedded() || c.Upstream.Embedded.Brokers != 3 {
		t.Errorf("upstream %+v", c.Upstream)
	}
	if got := c.Upstream.Embedded.Topics; len(got) != 1 || got[0] != (TopicSpec{"demo", 6, 1}) {
		t.Errorf("topics %+v", got)
	}
	if c.Upstream.BrokerRacks[0] != "az-a" || c.Upstream.MetadataRefresh != 10*time.Second || c.Upstream.MetadataWait != 2*time.Second {
		t.Errorf("upstream %+v", c.Upstream)
	}
	if c.Plugins.Workers != 3 || c.Plugins.QueueTimeout != 5*time.Second {
		t.Errorf("plugin pool %d workers, queue timeout %v; want 3 and 5s", c.Plugins.Workers, c.Plugins.QueueTimeout)
	}
	if c.Plugins.Dir != "/etc/wasmassign/plugins.d" || c.Server.StateDir != "/etc/wasmassign/state" {
		t.Errorf("paths not resolved against the file's directory: %q %q", c.Plugins.Dir, c.Server.StateDir)
	}
	g, ok := c.GroupFor("anything")
	if !ok || g.Fallback != "range" || g.InitialRebalanceDelay != 3*time.Second || g.Config["key"] != "value" {
		t.Errorf("group %+v", g)
	}
	// The rules arrive parsed, in the coordinator's type, in file order.
	if len(c.Racks) != 2 {
		t.Fatalf("racks %+v", c.Racks)
	}
	if r := c.Racks[0]; r.Rack != "az-a" || r.ClientID != nil || !r.CIDR.IsValid() || !r.Matches(netip.MustParseAddr("::ffff:10.1.2.3"), "x") {
		t.Errorf("first rule %+v, want az-a by cidr matching 10.1.2.3", r)
	}
	if r := c.Racks[1]; r.Rack != "az-b" || r.ClientID == nil || r.CIDR.IsValid() || !r.Matches(netip.Addr{}, "billing-7") || r.Matches(netip.Addr{}, "other") {
		t.Errorf("second rule %+v, want az-b by client id matching billing-7 only", r)
	}
	if c.Server.BrokerPort(2) != 9095 {
		t.Errorf("broker port %d", c.Server.BrokerPort(2))
	}
}

func TestDefault_ManagesEveryGroupOnTheEmbeddedCluster(t *testing.T) {
	c := Default()
	if !c.Upstream.IsEmbedded() || c.Plugins.Dir != "" || c.Plugins.Timeout != 2*time.Second || c.Plugins.CompileTimeout != 20*time.Second || c.Plugins.MemoryLimitMB != 512 ||
		c.Plugins.Workers != 0 || c.Plugins.QueueTimeout != 10*time.Second || c.Plugins.IdleTimeout != 30*time.Second {
		t.Errorf("defaults %+v", c)
	}
	if _, ok := c.GroupFor("any-group"); !ok {
		t.Error("the defaults do not manage groups")
	}
}

// TestParse_BadInputNamesFileAndKey: every rejected configuration names
// the source, the key and the problem on one line.
func TestParse_BadInputNamesFileAndKey(t *testing.T) {
	tests := []struct {
		name, toml, key, problem string
	}{
		{"syntax error", "[server\nlisten=1", "bad.toml:2", "table name"},
		{"unknown key", "[server]\nlisen = \"x:1\"", "server.lisen", "unknown key"},
		{"wrong type", "[plugins]\ntimeout = 5", "bad.toml", "timeout"},
		{"listen without port", "[server]\nlisten = \"localhost\"", "server.listen", "host:port"},
		{"bad duration", "[plugins]\ntimeout = \"2 seconds\"", "plugins.timeout", "duration"},
		{"zero timeout", "[plugins]\ntimeout = \"0s\"", "plugins.timeout", "positive"},
		{"assignment timeout under the plugin timeout", "[plugins]\ntimeout = \"5s\"\nassignment_timeout = \"3s\"", "plugins.assignment_timeout", "shorter than plugins.timeout"},
		{"offsets retention too short", "[upstream]\noffsets_retention = \"30s\"", "upstream.offsets_retention", "minimum"},
		{"a cluster on the embedded cluster", "[cluster]\nname = \"prod\"", "cluster.name", "embedded cluster lives inside one gateway"},
		{"a cluster gateway on a random port", "[server]\nlisten = \"127.0.0.1:0\"\n[upstream]\nbrokers = [\"k:9092\"]\n[cluster]\nname = \"prod\"", "cluster.name", "fixed port"},
		{"a cluster name no topic can carry", "[upstream]\nbrokers = [\"k:9092\"]\n[cluster]\nname = \"prod/eu\"", "cluster.name", "letters, digits"},
		{"a state topic no broker takes", "[cluster]\nstate_topic = \"a b\"", "cluster.state_topic", "letters"},
		{"no shards", "[cluster]\npartitions = 0", "cluster.partitions", "outside 1-1000"},
		{"a lease of one heartbeat", "[cluster]\nheartbeat_interval = \"2s\"\nlease = \"3s\"", "cluster.lease", "three heartbeat intervals"},
		{"a lease past the session", "[cluster]\nsession_timeout = \"6s\"\nlease = \"6s\"", "cluster.lease", "before the session timeout"},
		{"a heartbeat too fast", "[cluster]\nheartbeat_interval = \"10ms\"", "cluster.heartbeat_interval", "minimum"},
		{"an id no topic can carry", "[cluster]\nid = \"" + strings.Repeat("g", 201) + "\"", "cluster.id", "at most 200"},
		{"no forward connections", "[upstream]\nforward_connections = 0", "upstream.forward_connections", "outside 1-64"},
		{"too many forward connections", "[upstream]\nforward_connections = 65", "upstream.forward_connections", "outside 1-64"},
		{"memory too big", "[plugins]\nmemory_limit_mb = 8192", "plugins.memory_limit_mb", "out of range"},
		{"bad compile timeout", "[plugins]\ncompile_timeout = \"soon\"", "plugins.compile_timeout", "duration"},
		{"zero compile timeout", "[plugins]\ncompile_timeout = \"0s\"", "plugins.compile_timeout", "positive"},
		{"no workers", "[plugins]\nworkers = 0", "plugins.workers", "out of range"},
		{"too many workers", "[plugins]\nworkers = 100000", "plugins.workers", "out of range"},
		{"bad queue timeout", "[plugins]\nqueue_timeout = \"later\"", "plugins.queue_timeout", "duration"},
		{"zero queue timeout", "[plugins]\nqueue_timeout = \"0s\"", "plugins.queue_timeout", "positive"},
		{"negative idle timeout", "[plugins]\nidle_timeout = \"-1s\"", "plugins.idle_timeout", "negative"},
		{"queue timeout past the assignment timeout", "[plugins]\nqueue_timeout = \"19s\"", "plugins.queue_timeout", "exceed plugins.assignment_timeout"},
		{"tls cert alone", "[server]\ntls_cert = \"c.pem\"", "server.tls_cert", "together"},
		{"negative metadata wait", "[upstream]\nmetadata_wait = \"-1s\"", "upstream.metadata_wait", "negative"},
		{"bad sasl", "[upstream]\nsasl_mechanism = \"GSSAPI\"", "upstream.sasl_mechanism", "GSSAPI"},
		{"sasl without user", "[upstream]\nsasl_mechanism = \"PLAIN\"", "upstream.sasl_user", "required"},
		{"bad topic spec", "[upstream.embedded]\ntopics = [\"demo\"]", "upstream.embedded.topics[0]", "name:partitions"},
		{"replication above brokers", "[upstream.embedded]\nbrokers = 1\ntopics = [\"demo:3:2\"]", "upstream.embedded.topics[0]", "replication"},
		{"bad node id", "[upstream.broker_racks]\nx = \"a\"", "upstream.broker_racks.\"x\"", "node id"},
		{"group without match", "[[groups]]\nassignor = \"range\"", "groups[0].match", "required"},
		{"glob with lone escape", "[[groups]]\nmatch = \"a\\\\\"", "groups[0].match", "lone"},
		{"repeated priority", "[[groups]]\nmatch = \"*\"\npriority = [\"range\", \"range\"]", "groups[0].priority", "repeated"},
		{"session bounds reversed", "[[groups]]\nmatch = \"*\"\nmin_session_timeout = \"1m\"\nmax_session_timeout = \"10s\"", "groups[0].min_session_timeout", "at most"},
		{"metrics cap zero", "[server]\nmetrics_group_cap = 0", "server.metrics_group_cap", "at least 1"},
		{"zero shutdown timeout", "[server]\nshutdown_timeout = \"0s\"", "server.shutdown_timeout", "positive"},
		{"bad shutdown timeout", "[server]\nshutdown_timeout = \"soon\"", "server.shutdown_timeout", "soon"},
		{"negative delay", "[[groups]]\nmatch = \"*\"\ninitial_rebalance_delay = \"-1s\"", "groups[0].initial_rebalance_delay", "negative"},
		{"rack rule with both", "[[racks]]\ncidr = \"10.0.0.0/8\"\nclient_id = \"x\"\nrack = \"a\"", "racks[0]", "not both"},
		{"rack rule with bad cidr", "[[racks]]\ncidr = \"10.0.0.0/99\"\nrack = \"a\"", "racks[0].cidr", "10.0.0.0/99"},
		{"rack rule with bad regexp", "[[racks]]\nclient_id = \"(\"\nrack = \"a\"", "racks[0].client_id", "missing"},
		{"rack rule without rack", "[[racks]]\ncidr = \"10.0.0.0/8\"", "racks[0].rack", "required"},
		{"bad log level", "[log]\nlevel = \"loud\"", "log.level", "loud"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.toml), "bad.toml", "")
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "bad.toml") || !strings.Contains(msg, tt.key) || !strings.Contains(msg, tt.problem) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line starting with the file, naming %q and %q", msg, tt.key, tt.problem)
			}
		})
	}
}

func TestLoad_MissingFilesStopStartUp(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct{ name, toml, key string }{
		{"plugin dir missing", "[plugins]\ndir = \"nope\"", "plugins.dir"},
		{"tls files missing", "[server]\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"", "server.tls_"},
		{"ca missing", "[upstream]\ntls_ca = \"ca.pem\"", "upstream.tls_ca"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(write("g.toml", tt.toml))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.key) || !strings.Contains(err.Error(), "g.toml") {
				t.Errorf("err = %v, want ErrInvalid naming g.toml and %s", err, tt.key)
			}
		})
	}
	if err := os.Mkdir(filepath.Join(dir, "plugins.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := Load(write("ok.toml", "[plugins]\ndir = \"plugins.d\""))
	if err != nil || c.Plugins.Dir != filepath.Join(dir, "plugins.d") {
		t.Errorf("Load = %+v, %v", c, err)
	}
	if _, err := Load(filepath.Join(dir, "absent.toml")); err == nil || !strings.Contains(err.Error(), "absent.toml") {
		t.Errorf("missing file: %v", err)
	}
}

func TestCheckAssignors_NamesTheGroupAndKey(t *testing.T) {
	c, err := Parse([]byte("[[groups]]\nmatch = \"a*\"\n[[groups]]\nmatch = \"*\"\nassignor = \"weighted\"\n"), "g.toml", "")
	if err != nil {
		t.Fatal(err)
	}
	known := func(n string) bool { return n == "range" }
	err = c.CheckAssignors(known)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "groups[1].assignor") || !strings.Contains(err.Error(), "weighted") {
		t.Errorf("err = %v", err)
	}
	if g, _ := c.GroupFor("abc"); g.Match != "a*" {
		t.Errorf("first match must win, got %q", g.Match)
	}
}

// globToRegexp is an independent reading of the glob rules, to check
// globMatch against.
func globToRegexp(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	rs := []rune(p)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; {
		case c == '*':
			b.WriteString("(?s:.*)")
		case c == '?':
			b.WriteString("(?s:.)")
		case c == '\\' && i+1 < len(rs):
			i++
			b.WriteString(regexp.QuoteMeta(string(rs[i])))
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

func TestGlobMatch_AgreesWithRegexpTranslation(t *testing.T) {
	alphabet := []rune{'a', 'b', '/', '.', '*', '?', '\\', 'é'}
	rng := rand.New(rand.NewPCG(11, 12))
	word := func(n int) string {
		rs := make([]rune, rng.IntN(n))
		for i := range rs {
			rs[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(rs)
	}
	for range 20000 {
		p, s := word(7), word(9)
		if checkGlob(p) != nil {
			continue
		}
		if got, want := globMatch(p, s), globToRegexp(p).MatchString(s); got != want {
			t.Fatalf("globMatch(%q, %q) = %v, want %v", p, s, got, want)
		}
	}
}

// TestCluster_IDDefaultsToTheAdvertisedAddress: a gateway alone needs no
// [cluster]; its id is the host clients reach it at and its listen port,
// unless set, and left for the daemon to complete when that port is 0. A
// gateway alone has one shard by default, a named cluster sixteen.
func TestCluster_IDDefaultsToTheAdvertisedAddress(t *testing.T) {
	for _, tc := range []struct {
		toml, want string
		shards     int
	}{
		{"[server]\nlisten = \"0.0.0.0:19092\"\nadvertised_host = \"gw1.example\"", "gw1.example:19092", 1},
		{"[cluster]\nid = \"gw-1\"", "gw-1", 1},
		{"[server]\nlisten = \"127.0.0.1:0\"", "", 1},
		{"[server]\nlisten = \"0.0.0.0:19092\"\nadvertised_host = \"gw1.example\"\n[upstream]\nbrokers = [\"k:9092\"]\n[cluster]\nname = \"prod\"", "gw1.example:19092", 16},
	} {
		c, err := Parse([]byte(tc.toml), "t.toml", "")
		if err != nil {
			t.Fatalf("%q: %v", tc.toml, err)
		}
		if c.Cluster.ID != tc.want {
			t.Errorf("%q: cluster %+v, want id %q", tc.toml, c.Cluster, tc.want)
		}
		if cl := c.Cluster; cl.Partitions != tc.shards || cl.SessionTimeout != 10*time.Second || cl.HeartbeatInterval != time.Second || cl.Lease != 6*time.Second || cl.RebalanceTimeout != 10*time.Second {
			t.Errorf("%q: cluster defaults %+v", tc.toml, cl)
		}
	}
}

// TestCluster_AloneNamesAreDistinctAndDefaultIDsNameTheMachine: no two ids
// share a name alone ('_' and ':' are escaped, not folded together), and a
// loopback advertised host gives the machine's host name to the default id.
func TestCluster_AloneNamesAreDistinctAndDefaultIDsNameTheMachine(t *testing.T) {
	ids := []string{"a:1", "a_1", "a_3a1", "a.1", "a-1", "gw-1", "[::1]:9092", "_3a"}
	seen := map[string]string{}
	for _, id := range ids {
		name := AloneName(id)
		if other, ok := seen[name]; ok {
			t.Errorf("ids %q and %q share the name %q", other, id, name)
		}
		seen[name] = id
		if !validClusterName(name) {
			t.Errorf("%q: %q is no topic name", id, name)
		}
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Skip("no host name")
	}
	for _, adv := range []string{"127.0.0.1", "localhost", "::1"} {
		if got, want := DefaultID(adv, "9092"), net.JoinHostPort(host, "9092"); got != want {
			t.Errorf("DefaultID(%q) = %q, want %q", adv, got, want)
		}
	}
	if got := DefaultID("gw1.example", "9092"); got != "gw1.example:9092" {
		t.Errorf("DefaultID of a reachable host: %q", got)
	}
}

// TestCluster_AGatewayAloneWithAnExternalUpstreamKeepsItsStateThere: with
// an external upstream a gateway alone is a cluster of its own, named
// after its id in a topic's characters, so that two gateways alone never
// share a state topic; with the embedded cluster it keeps state_dir.
func TestCluster_AGatewayAloneWithAnExternalUpstreamKeepsItsStateThere(t *testing.T) {
	for _, tc := range []struct {
		name, toml, id      string
		alone, inUpstream   bool
		wantName, wantTopic string
	}{
		{"embedded", "[server]\nlisten = \"0.0.0.0:19092\"", "", false, false, "", ""},
		{"alone", "[server]\nlisten = \"0.0.0.0:19092\"\nadvertised_host = \"gw1.example\"\n[upstream]\nbrokers = [\"k:9092\"]", "",
			true, true, "solo.gw1.example_3a19092", "wasmassign-solo.gw1.example_3a19092-state"},
		{"alone on a port the system chose", "[server]\nlisten = \"[::1]:0\"\n[upstream]\nbrokers = [\"k:9092\"]", "[::1]:41234",
			true, true, "solo._5b_3a_3a1_5d_3a41234", "wasmassign-solo._5b_3a_3a1_5d_3a41234-state"},
		{"alone, its topic set", "[upstream]\nbrokers = [\"k:9092\"]\n[cluster]\nid = \"gw-1\"\nstate_topic = \"gw-state\"", "",
			true, true, "solo.gw-1", "gw-state"},
		{"named", "[server]\nlisten = \"0.0.0.0:19092\"\n[upstream]\nbrokers = [\"k:9092\"]\n[cluster]\nname = \"prod\"", "",
			false, true, "prod", "wasmassign-prod-state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.toml), "t.toml", "")
			if err != nil {
				t.Fatal(err)
			}
			if c.Alone() != tc.alone || c.InUpstream() != tc.inUpstream {
				t.Fatalf("alone %v, state in the upstream %v; want %v, %v", c.Alone(), c.InUpstream(), tc.alone, tc.inUpstream)
			}
			if !tc.inUpstream {
				return
			}
			cl := c.Cluster.Resolve(tc.id)
			if cl.Name != tc.wantName || cl.StateTopic != tc.wantTopic || cl.ID == "" {
				t.Errorf("resolved %+v, want name %q and topic %q", cl, tc.wantName, tc.wantTopic)
			}
			if !validClusterName(cl.Name) || !validClusterName(cl.StateTopic) {
				t.Errorf("%q or %q is no topic name", cl.Name, cl.StateTopic)
			}
		})
	}
}

package testutil

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// GatewayConfig builds the TOML configuration a test hands to
// `wasmassign serve`: loopback listeners on ephemeral ports, a one-second
// metadata refresh, and group rules with no initial rebalance delay and
// one-second sessions allowed, so that tests state only what they are
// about. The zero value is a gateway in front of an embedded cluster with
// default settings and no group rules.
type GatewayConfig struct {
	// Listen and AdminListen are the bootstrap and admin listeners;
	// "127.0.0.1:0" when empty.
	Listen, AdminListen string
	// BrokerPorts, when set, fixes each broker listener's port by node id
	// (for a restart on the same ports); otherwise every broker listener
	// takes an ephemeral port.
	BrokerPorts map[int32]int
	// Server is extra [server] lines, verbatim (TLS files, state_dir).
	Server string

	// Brokers are the upstream's bootstrap addresses. With none, the
	// upstream is the embedded cluster of EmbeddedBrokers brokers holding
	// EmbeddedTopics ("name:partitions[:replicas]").
	Brokers         []string
	EmbeddedBrokers int
	EmbeddedTopics  []string
	// Upstream is extra [upstream] lines, verbatim (SASL, for one).
	Upstream string
	// BrokerRacks are the [upstream.broker_racks], by node id.
	BrokerRacks map[int32]string

	// Groups are the [[groups]] rules, first match first.
	Groups []GroupRule
	// Extra is appended verbatim: [[racks]] rules, [log], ...
	Extra string
}

// GroupRule is one [[groups]] rule of a GatewayConfig.
type GroupRule struct {
	// Match is the group-id glob.
	Match string
	// Assignor, when set, serves the groups with this plugin whatever
	// their members offer.
	Assignor string
	// InitialRebalanceDelay is the rule's initial_rebalance_delay; empty
	// for none ("0s"), so that tests' groups form at once.
	InitialRebalanceDelay string
}

// String is the configuration file's text.
func (c GatewayConfig) String() string {
	var b strings.Builder
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	fmt.Fprintf(&b, "[server]\nlisten = %q\nadvertised_host = \"127.0.0.1\"\n", or(c.Listen, "127.0.0.1:0"))
	if len(c.BrokerPorts) == 0 {
		b.WriteString("broker_port_base = 0\n")
	}
	fmt.Fprintf(&b, "admin_listen = %q\n", or(c.AdminListen, "127.0.0.1:0"))
	line(&b, c.Server)
	if len(c.BrokerPorts) > 0 {
		b.WriteString("[server.broker_ports]\n")
		for _, id := range slices.Sorted(maps.Keys(c.BrokerPorts)) {
			fmt.Fprintf(&b, "\"%d\" = %d\n", id, c.BrokerPorts[id])
		}
	}

	b.WriteString("\n[upstream]\n")
	if len(c.Brokers) > 0 {
		fmt.Fprintf(&b, "brokers = %s\n", tomlList(c.Brokers))
	}
	b.WriteString("metadata_refresh = \"1s\"\n")
	line(&b, c.Upstream)
	if len(c.Brokers) == 0 && (c.EmbeddedBrokers > 0 || len(c.EmbeddedTopics) > 0) {
		b.WriteString("[upstream.embedded]\n")
		if c.EmbeddedBrokers > 0 {
			fmt.Fprintf(&b, "brokers = %d\n", c.EmbeddedBrokers)
		}
		if len(c.EmbeddedTopics) > 0 {
			fmt.Fprintf(&b, "topics = %s\n", tomlList(c.EmbeddedTopics))
		}
	}
	if len(c.BrokerRacks) > 0 {
		b.WriteString("[upstream.broker_racks]\n")
		for _, id := range slices.Sorted(maps.Keys(c.BrokerRacks)) {
			fmt.Fprintf(&b, "\"%d\" = %q\n", id, c.BrokerRacks[id])
		}
	}

	for _, g := range c.Groups {
		fmt.Fprintf(&b, "\n[[groups]]\nmatch = %q\n", g.Match)
		if g.Assignor != "" {
			fmt.Fprintf(&b, "assignor = %q\n", g.Assignor)
		}
		fmt.Fprintf(&b, "initial_rebalance_delay = %q\nmin_session_timeout = \"1s\"\n", cmp.Or(g.InitialRebalanceDelay, "0s"))
	}
	if c.Extra != "" {
		b.WriteString("\n")
		line(&b, c.Extra)
	}
	return b.String()
}

// line writes s as whole lines: nothing when empty, a newline added when
// missing.
func line(b *strings.Builder, s string) {
	s = strings.Trim(s, "\n")
	if s != "" {
		b.WriteString(s + "\n")
	}
}

// tomlList is ss as a TOML array of strings.
func tomlList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

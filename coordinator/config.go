package coordinator

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Kafka's defaults for the classic group coordinator.
const (
	// DefaultInitialRebalanceDelay is group.initial.rebalance.delay.ms.
	DefaultInitialRebalanceDelay = 3 * time.Second
	// DefaultMinSessionTimeout is group.min.session.timeout.ms.
	DefaultMinSessionTimeout = 6 * time.Second
	// DefaultMaxSessionTimeout is group.max.session.timeout.ms.
	DefaultMaxSessionTimeout = 30 * time.Minute
	// DefaultNewMemberJoinTimeout bounds how long a new member may wait in its
	// first JoinGroup (Kafka's group.new.member.join.timeout, 5 minutes).
	DefaultNewMemberJoinTimeout = 5 * time.Minute
	// DefaultMaxProtocolMetadataBytes caps one protocol's metadata in a
	// JoinGroup. Kafka has only its request size cap (100 MiB); a
	// subscription to 10,000 topics is well under 1 MiB.
	DefaultMaxProtocolMetadataBytes = 4 << 20
	// DefaultEmptyGroupRetention is how long an Empty group stays listed:
	// 7 days, Kafka's offsets.retention.minutes.
	DefaultEmptyGroupRetention = 7 * 24 * time.Hour
	// DefaultAssignmentTimeout bounds the time from the end of a join phase
	// to the assignment, metadata wait and the whole assignor chain
	// included. It stays under Java's default request.timeout.ms (30 s),
	// so no member's parked SyncGroup outwaits its client.
	DefaultAssignmentTimeout = 20 * time.Second
	// LastResortAssignor is the assignor the coordinator falls back to after
	// the group's own assignor and its fallback have failed.
	LastResortAssignor = "range"
	// ServerLeaderID is the leader id of every JoinGroup answer in a group
	// with server-side assignment. It is no member's id (those end in a
	// UUID), and it contains no '-': kgo on JoinGroup v8 and below treats a
	// leader id of the form "<its instance id>-..." as itself.
	ServerLeaderID = "wasmassign.coordinator"
)

// ServedProtocols maps each client protocol name that a loaded plugin serves
// (a JoinGroup protocol such as "range" or "cooperative-sticky") to the
// assignor that serves it. The daemon builds it from the runtime's registry
// and the driver hands it in: first in Config, then with SetServedProtocols after every
// change hot reload makes. The coordinator never imports the runtime and
// never asks it anything, so a recorded run replays byte for byte.
type ServedProtocols map[string]string

// FetchRack is one sighting of a client's KIP-392 RackID, which clients send
// only in Fetch requests: the proxy sees it, the driver keeps the book of
// them, and the coordinator learns each new one as an event (FetchRacksSeen)
// and the one known for a request's client with the request (Client).
type FetchRack struct {
	// ClientID and Host identify the client as in Client.
	ClientID, Host string
	// Rack is the RackID the client sent.
	Rack string
	// Fetched are the partitions the Fetch read. A Fetch carries no member
	// id, but the member that owns them is the one that sent it: several
	// members behind one client id and host (two consumers in one process
	// or pod) each get their own rack.
	Fetched []FetchedTopic
}

// FetchedTopic is one topic of a Fetch request: by name, or from Fetch v13
// by topic id.
type FetchedTopic struct {
	Topic      string
	TopicID    [16]byte
	Partitions []int32
}

// RackRule gives a rack to clients that send none, by host address or by
// client id. Exactly one of CIDR and ClientID is set. The daemon's
// configuration parses its [[racks]] into these once; the coordinator only
// checks them.
type RackRule struct {
	// CIDR matches the client's host address, for example 10.1.0.0/16.
	CIDR netip.Prefix
	// ClientID matches the client id.
	ClientID *regexp.Regexp
	// Rack is the rack the rule assigns.
	Rack string
}

// Matches reports whether the rule applies to a client at host with
// clientID. An IPv4-mapped IPv6 host matches as its IPv4 address.
func (r *RackRule) Matches(host netip.Addr, clientID string) bool {
	if r.ClientID != nil {
		return r.ClientID.MatchString(clientID)
	}
	return host.IsValid() && r.CIDR.Contains(host.Unmap())
}

// GroupConfig is an operator's configuration of one group (or of every group,
// as a default). It is read once; the coordinator never changes it.
type GroupConfig struct {
	// Priority lists protocol names in the operator's order of preference.
	// The first one that every member offers is chosen; when it names none of
	// them, Kafka's vote decides.
	Priority []string
	// Assignor, when set, is the assignor that runs for server-side groups,
	// instead of the one that serves the chosen protocol name.
	Assignor string
	// Fallback is the assignor to run when the group's assignor fails. The
	// coordinator then falls back to LastResortAssignor, and after that to its
	// own range assignment, so members always receive a valid assignment.
	Fallback string
	// PluginConfig is passed to the plugin as abi.Request.Config.
	PluginConfig map[string]string
	// InitialRebalanceDelay delays the first rebalance of an empty group so
	// that members starting together join one generation. Defaults to
	// DefaultInitialRebalanceDelay; a negative value means no delay.
	InitialRebalanceDelay time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the session timeouts
	// members may ask for. Default to 6s and 30min.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// MaxSize is the group's member limit (group.max.size); 0 means no limit.
	MaxSize int
	// RackRules infer a member's rack when neither its subscription nor its
	// Fetch requests carry one; the first matching rule wins.
	RackRules []RackRule
	// CooperativeProtocols are the protocol names clients run cooperatively
	// (KIP-429). A member is cooperative when every protocol it offers is
	// listed. Defaults to ["cooperative-sticky"].
	CooperativeProtocols []string
}

// Config configures a Coordinator.
type Config struct {
	// Default is the configuration of every group not named in Groups.
	Default GroupConfig
	// Groups holds per-group configurations by group id.
	Groups map[string]GroupConfig
	// Rules are tried in order for a group not named in Groups: the first
	// whose Match accepts the group id gives its configuration. The gateway
	// builds them from its [[groups]] globs.
	Rules []GroupRule
	// Served says which protocol names plugins serve at start; later
	// changes arrive with SetServedProtocols. Nil means none: every group
	// then runs classic leader-side assignment.
	Served ServedProtocols
	// NewMemberJoinTimeout defaults to DefaultNewMemberJoinTimeout.
	NewMemberJoinTimeout time.Duration
	// MaxProtocolMetadataBytes defaults to DefaultMaxProtocolMetadataBytes.
	MaxProtocolMetadataBytes int
	// EmptyGroupRetention is how long a group with no members stays
	// listed (state Empty) before the coordinator forgets it; 0 means
	// DefaultEmptyGroupRetention. Committed offsets live upstream and are
	// not affected.
	EmptyGroupRetention time.Duration
	// AssignmentTimeout bounds the time from the end of a server-side
	// group's join phase to its assignment: the metadata wait and every
	// assignor of the chain. Past it the coordinator hands out the range
	// plugin's assignment itself (EventAssignmentTimedOut). Defaults to
	// DefaultAssignmentTimeout.
	AssignmentTimeout time.Duration
	// MetadataWait is how long a server-side group's assignment may wait
	// for metadata of subscribed topics that no SetMetadata has covered yet
	// (see Metadata.Covered). Without it, a new group's first assignment
	// would see those topics as absent and a second rebalance would follow
	// as soon as their metadata arrived. Zero means no waiting.
	MetadataWait time.Duration

	defaultGroup *GroupConfig
	groups       map[string]*GroupConfig
	rules        []*GroupConfig

	// disableWithholding switches KIP-429 withholding off. Only tests set
	// it, to prove that the randomized test notices double ownership.
	disableWithholding bool
}

// groupConfigFor returns the validated configuration of a group.
func (c *Config) groupConfigFor(group string) *GroupConfig {
	if gc, ok := c.groups[group]; ok {
		return gc
	}
	for i, r := range c.Rules {
		if r.Match(group) {
			return c.rules[i]
		}
	}
	return c.defaultGroup
}

// prepare validates c and fills in defaults, naming the offending key.
func (c *Config) prepare() error {
	if c.NewMemberJoinTimeout <= 0 {
		c.NewMemberJoinTimeout = DefaultNewMemberJoinTimeout
	}
	if c.MaxProtocolMetadataBytes <= 0 {
		c.MaxProtocolMetadataBytes = DefaultMaxProtocolMetadataBytes
	}
	if c.EmptyGroupRetention <= 0 {
		c.EmptyGroupRetention = DefaultEmptyGroupRetention
	}
	if c.AssignmentTimeout <= 0 {
		c.AssignmentTimeout = DefaultAssignmentTimeout
	}
	d, err := prepareGroup("default", c.Default)
	if err != nil {
		return err
	}
	c.defaultGroup = d
	c.groups = make(map[string]*GroupConfig, len(c.Groups))
	for id, gc := range c.Groups {
		p, err := prepareGroup("groups."+id, gc)
		if err != nil {
			return err
		}
		c.groups[id] = p
	}
	c.rules = make([]*GroupConfig, len(c.Rules))
	for i, r := range c.Rules {
		if r.Match == nil {
			return fmt.Errorf("coordinator config rules[%d]: no Match function", i)
		}
		p, err := prepareGroup(fmt.Sprintf("rules[%d]", i), r.Config)
		if err != nil {
			return err
		}
		c.rules[i] = p
	}
	return nil
}

// GroupRule gives the groups whose id Match accepts their configuration.
type GroupRule struct {
	Match  func(group string) bool
	Config GroupConfig
}

func prepareGroup(key string, gc GroupConfig) (*GroupConfig, error) {
	if gc.InitialRebalanceDelay == 0 {
		gc.InitialRebalanceDelay = DefaultInitialRebalanceDelay
	} else if gc.InitialRebalanceDelay < 0 {
		gc.InitialRebalanceDelay = 0
	}
	if gc.MinSessionTimeout <= 0 {
		gc.MinSessionTimeout = DefaultMinSessionTimeout
	}
	if gc.MaxSessionTimeout <= 0 {
		gc.MaxSessionTimeout = DefaultMaxSessionTimeout
	}
	if gc.MinSessionTimeout > gc.MaxSessionTimeout {
		return nil, fmt.Errorf("coordinator config %s: min_session_timeout %v above max_session_timeout %v", key, gc.MinSessionTimeout, gc.MaxSessionTimeout)
	}
	if gc.MaxSize < 0 {
		return nil, fmt.Errorf("coordinator config %s: max_size %d is negative", key, gc.MaxSize)
	}
	if gc.CooperativeProtocols == nil {
		gc.CooperativeProtocols = []string{"cooperative-sticky"}
	}
	for i, r := range gc.RackRules {
		switch {
		case r.Rack == "":
			return nil, fmt.Errorf("coordinator config %s.rack_rules[%d]: rack is empty", key, i)
		case r.CIDR.IsValid() == (r.ClientID != nil):
			return nil, fmt.Errorf("coordinator config %s.rack_rules[%d]: set exactly one of cidr and client_id", key, i)
		}
	}
	gc.RackRules = slices.Clone(gc.RackRules)
	return &gc, nil
}

// ruleRack returns the rack of the first rule matching the client.
func (gc *GroupConfig) ruleRack(clientID, clientHost string) string {
	addr, _ := netip.ParseAddr(strings.TrimPrefix(clientHost, "/")) // invalid when it is no address
	for i := range gc.RackRules {
		if r := &gc.RackRules[i]; r.Matches(addr, clientID) {
			return r.Rack
		}
	}
	return ""
}

func (gc *GroupConfig) isCooperative(protocol string) bool {
	for _, p := range gc.CooperativeProtocols {
		if p == protocol {
			return true
		}
	}
	return false
}

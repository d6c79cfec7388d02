package coordinator

import (
	"encoding/binary"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"time"
)

// Metadata is the cluster metadata the coordinator assigns from. The driver
// replaces it whole with SetMetadata whenever it changes; it must cover at
// least every topic that SubscribedTopics names.
type Metadata struct {
	Brokers []Broker
	Topics  map[string]TopicMetadata
	// Covered names topics this update looked up besides those in Topics:
	// asked about and found absent. Together with Topics it tells a topic
	// known to be absent from one never looked up, for which an assignment
	// may wait (Config.MetadataWait).
	Covered []string
}

// Broker is one broker and its rack ("" when none).
type Broker struct {
	ID   int32
	Rack string
}

// TopicMetadata describes one topic; partition i is Partitions[i].
type TopicMetadata struct {
	ID         [16]byte
	Partitions []PartitionMetadata
}

// PartitionMetadata is one partition's placement.
type PartitionMetadata struct {
	Leader   int32
	Replicas []int32
	ISR      []int32
}

// SetMetadata replaces the cluster metadata. With server-side assignment no
// member leads, so the coordinator does a leader's watching: a group whose
// subscribed topics changed partition count, appeared or disappeared (and,
// for a rack-aware group, whose replica placement or broker racks changed)
// rebalances; its members learn it from Heartbeat REBALANCE_IN_PROGRESS.
func (c *Coordinator) SetMetadata(now time.Time, md *Metadata) Output {
	c.begin(now)
	c.meta = md
	c.place = nil
	if md != nil {
		// Each update covers every subscribed topic (see Metadata), so the
		// set is rebuilt rather than added to: topics no group subscribes
		// to any more drop out of it.
		covered := make(map[string]bool, len(md.Topics)+len(md.Covered))
		for t := range md.Topics {
			covered[t] = true
		}
		for _, t := range md.Covered {
			covered[t] = true
		}
		c.covered = covered
	}
	for _, id := range c.sortedGroupIDs() {
		g := c.groups[id]
		c.touch(g)
		if !g.metadataDeadline.IsZero() {
			if g.state == CompletingRebalance && g.job == 0 && len(c.uncovered(g)) == 0 {
				g.metadataDeadline = time.Time{}
				c.startAssignment(g)
			}
			continue
		}
		if !g.serverSide || (g.state != Stable && g.state != CompletingRebalance) {
			continue
		}
		if fp := c.fingerprint(g, g.fingerprintRacks); fp != g.fingerprint {
			c.event(Event{Kind: EventMetadataChanged, Group: g.id, Generation: g.generation})
			c.prepareRebalance(g, "subscribed topic metadata changed")
		}
	}
	return c.finish()
}

// PauseSessions stops (paused true) or restarts the expiry of member
// sessions. The driver pauses them while the upstream cluster is
// unreachable: the proxy cannot pair client connections with brokers then,
// so members cannot heartbeat, and expiring them would rebalance every
// group after a broker outage. Restarting gives every member a fresh
// session, as a Kafka coordinator does when it loads a group after a
// failover.
func (c *Coordinator) PauseSessions(now time.Time, paused bool) Output {
	c.begin(now)
	if paused != c.sessionsPaused {
		c.sessionsPaused = paused
		if !paused {
			for _, id := range c.sortedGroupIDs() {
				g := c.groups[id]
				c.touch(g)
				for _, m := range g.members {
					if !m.heartbeatDeadline.at.IsZero() {
						g.setHeartbeatDeadline(m, now.Add(m.session))
					}
				}
			}
		}
	}
	return c.finish()
}

// FetchRacksSeen tells the coordinator of clients' KIP-392 racks it may
// not know yet: clients send their RackID only in Fetch requests, so often
// after their first assignment. A sighting belongs to the members of its
// client (id and host) that own a partition the Fetch read, or, when none
// does, to its client's only member; a client with several members and no
// owner among them tells nothing. The member takes the rack as its fetch
// rack for its group's next assignment. Kafka never rebalances because of
// a rack, and neither does this: a rack changes nothing until the group
// rebalances for a reason of its own.
func (c *Coordinator) FetchRacksSeen(now time.Time, seen []FetchRack) Output {
	c.begin(now)
	if len(seen) == 0 {
		return c.finish()
	}
	var names map[[16]byte]string // topic ids, built when a Fetch needs them
	nameOf := func(ft FetchedTopic) string {
		if ft.Topic != "" || ft.TopicID == ([16]byte{}) {
			return ft.Topic
		}
		if names == nil {
			names = make(map[[16]byte]string)
			if c.meta != nil {
				for name, tm := range c.meta.Topics {
					names[tm.ID] = name
				}
			}
		}
		return names[ft.TopicID]
	}
	var owners []clientMember
	for _, s := range seen {
		if s.Rack == "" {
			continue
		}
		// Each member's rack is its own, so the order in which the
		// client's members are looked at changes nothing.
		candidates := c.clients.members(s.ClientID, s.Host)
		owners = owners[:0]
		for _, e := range candidates {
			if e.m.ownsAnyOf(s.Fetched, nameOf) {
				owners = append(owners, e)
			}
		}
		if len(owners) == 0 && len(candidates) == 1 {
			owners = append(owners, candidates[0])
		}
		for _, o := range owners {
			was := o.m.rack
			o.m.fetchRack = s.Rack
			if o.m.rack = c.resolveRack(o.g, o.m); o.m.rack != was {
				// The next assignment places it by its rack: the group's
				// record must say so.
				c.event(Event{Kind: EventMemberRack, Group: o.g.id, Generation: o.g.generation, Member: o.m.id, Detail: o.m.rack})
			}
		}
	}
	return c.finish()
}

// clientKey names a client as a Fetch rack sighting does.
type clientKey struct{ id, host string }

// clientIndex holds the members of every group by client (client id and
// host), so that a Fetch rack sighting costs the members of its client,
// not every member the coordinator holds. Groups keep it current: a
// member is in it from group.insert to group.remove, under its clientID
// and host (clientIndex.move changes them). Most clients have one
// member, so each holds a slice, and a member records its place in it
// (member.clientPos) to leave in O(1).
type clientIndex struct {
	byClient map[clientKey][]clientMember
}

// clientMember is a member in the index, with its group.
type clientMember struct {
	g *group
	m *member
}

func newClientIndex() clientIndex {
	return clientIndex{byClient: make(map[clientKey][]clientMember)}
}

func (x *clientIndex) add(g *group, m *member) {
	k := clientKey{m.clientID, m.host}
	ms := x.byClient[k]
	m.clientPos = len(ms)
	x.byClient[k] = append(ms, clientMember{g, m})
}

func (x *clientIndex) remove(m *member) {
	k := clientKey{m.clientID, m.host}
	ms := x.byClient[k]
	i := m.clientPos
	if i >= len(ms) || ms[i].m != m {
		return // not indexed
	}
	last := len(ms) - 1
	ms[i] = ms[last]
	ms[i].m.clientPos = i
	ms[last] = clientMember{}
	if last == 0 {
		delete(x.byClient, k)
		return
	}
	x.byClient[k] = ms[:last]
}

// move records that m, a member of g, is now the member of another client.
func (x *clientIndex) move(g *group, m *member, clientID, host string) {
	x.remove(m)
	m.clientID, m.host = clientID, host
	x.add(g, m)
}

// members returns the members of a client with the group of each, in no
// particular order; the caller must not modify the slice.
func (x *clientIndex) members(clientID, host string) []clientMember {
	return x.byClient[clientKey{clientID, host}]
}

// ownsAnyOf reports whether m was assigned a partition of fetched.
func (m *member) ownsAnyOf(fetched []FetchedTopic, nameOf func(FetchedTopic) string) bool {
	for _, ft := range fetched {
		held := m.assignedByName.partitionsOf(nameOf(ft))
		for _, p := range ft.Partitions {
			if _, ok := slices.BinarySearch(held, p); ok {
				return true
			}
		}
	}
	return false
}

// SetServedProtocols replaces the set of protocols plugins serve, after hot
// reload changed the registry. It changes how later JoinGroups are treated
// (server-side or leader-side assignment, which assignor a protocol name
// runs); a group assigned already keeps its assignment until it next
// rebalances, which the driver asks for separately where the operator
// configured it.
func (c *Coordinator) SetServedProtocols(now time.Time, served ServedProtocols) Output {
	c.begin(now)
	c.protocols = maps.Clone(served)
	return c.finish()
}

// uncovered returns g's subscribed topics that no metadata update has
// covered, sorted.
func (c *Coordinator) uncovered(g *group) []string {
	set := make(map[string]bool)
	for _, m := range g.members {
		for _, t := range subscribedTopics(m, g.protocol) {
			if !c.covered[t] {
				set[t] = true
			}
		}
	}
	return sortedKeys(set)
}

// SubscribedTopics returns every topic a server-side group subscribes to,
// sorted: the topics whose metadata the driver must keep current.
func (c *Coordinator) SubscribedTopics() []string {
	set := make(map[string]bool)
	for _, g := range c.groups {
		for _, m := range g.members {
			for p := range m.subs {
				for _, t := range m.subs[p].Topics {
					set[t] = true
				}
			}
		}
	}
	return sortedKeys(set)
}

func (c *Coordinator) topic(name string) (TopicMetadata, bool) {
	if c.meta == nil {
		return TopicMetadata{}, false
	}
	t, ok := c.meta.Topics[name]
	return t, ok
}

// rackAware reports whether replica placement can matter to g's
// assignment: some member's rack is the rack of some broker (Kafka's first
// condition for rack-aware assignment).
func (c *Coordinator) rackAware(g *group) bool {
	if c.meta == nil {
		return false
	}
	racks := make(map[string]bool, len(c.meta.Brokers))
	for _, b := range c.meta.Brokers {
		if b.Rack != "" {
			racks[b.Rack] = true
		}
	}
	for _, m := range g.members {
		if m.rack != "" && racks[m.rack] {
			return true
		}
	}
	return false
}

// takeFingerprint records what g's assignment, starting now, depends on in
// the metadata.
func (c *Coordinator) takeFingerprint(g *group) {
	g.fingerprintRacks = c.rackAware(g)
	g.fingerprint = c.fingerprint(g, g.fingerprintRacks)
}

// fingerprint hashes what g's assignment depends on in the metadata: each
// subscribed topic's existence and partition count and, for rack-aware
// groups, the set of each partition's replica racks.
func (c *Coordinator) fingerprint(g *group, withRacks bool) uint64 {
	topics := make(map[string]bool)
	for _, m := range g.members {
		for _, t := range subscribedTopics(m, g.protocol) {
			topics[t] = true
		}
	}
	racks := make(map[int32]string)
	if c.meta != nil {
		for _, b := range c.meta.Brokers {
			racks[b.ID] = b.Rack
		}
	}
	h := fnv.New64a()
	var buf [4]byte
	putInt := func(v int32) {
		binary.BigEndian.PutUint32(buf[:], uint32(v))
		h.Write(buf[:])
	}
	for _, name := range sortedKeys(topics) {
		h.Write([]byte(name))
		h.Write([]byte{0})
		t, ok := c.topic(name)
		if !ok {
			putInt(-1)
			continue
		}
		putInt(int32(len(t.Partitions)))
		if !withRacks {
			continue
		}
		// Kafka's ConsumerCoordinator compares each partition's set of
		// replica racks, not its replicas: moving a replica within its
		// rack, or listing replicas in another order, changes no
		// rack-aware assignment and must cost no rebalance.
		var set []string
		for _, p := range t.Partitions {
			set = set[:0]
			for _, r := range p.Replicas {
				set = append(set, racks[r])
			}
			slices.Sort(set)
			set = slices.Compact(set)
			putInt(int32(len(set)))
			for _, rack := range set {
				h.Write([]byte(rack))
				h.Write([]byte{0})
			}
		}
	}
	return h.Sum64()
}

// resolveRack finds a member's rack; the first source that knows wins: the
// rack in its subscription (v3), the rack its client sent in Fetch requests
// (KIP-392), then the operator's rules on host and client id.
func (c *Coordinator) resolveRack(g *group, m *member) string {
	names := make([]string, 0, len(m.subs))
	for name := range m.subs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if r := m.subs[name].Rack; r != nil && *r != "" {
			return *r
		}
	}
	if m.fetchRack != "" {
		return m.fetchRack
	}
	return g.cfg.ruleRack(m.clientID, m.host)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

package coordinator

import (
	"bytes"
	"cmp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is a classic group's state.
type State uint8

// The five states of Kafka's ClassicGroup.
const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

// String returns the state's name as DescribeGroups and ListGroups spell it.
func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}

// validPrevious lists, per state, the states it may be entered from
// (ClassicGroup's state table).
func validPrevious(s State) []State {
	switch s {
	case Empty:
		return []State{PreparingRebalance}
	case PreparingRebalance:
		return []State{Stable, CompletingRebalance, Empty}
	case CompletingRebalance:
		return []State{PreparingRebalance}
	case Stable:
		return []State{CompletingRebalance}
	}
	return []State{Empty, PreparingRebalance, CompletingRebalance, Stable}
}

// waiter is a parked JoinGroup or SyncGroup.
type waiter struct {
	id      RequestID
	version int16
}

// member is one member of a classic group.
type member struct {
	id, instanceID     string
	clientID, host     string
	session, rebalance time.Duration
	protocolType       string
	protocols          []kmsg.JoinGroupRequestProtocol
	// subs holds the decoded subscription of each protocol a plugin serves.
	subs map[string]*subscription
	rack string
	// fetchRack is the KIP-392 rack its client last sent in a Fetch
	// request, as far as the coordinator has been told (Client.FetchRack,
	// FetchRacksSeen).
	fetchRack string
	// clientPos is the member's place among its client's members in the
	// coordinator's clientIndex.
	clientPos int

	joinWait *waiter
	syncWait *waiter
	isNew    bool
	// rejoined is true when the member was awaiting join as the current
	// generation's join phase completed.
	rejoined bool
	// heartbeatDeadline is when the session ends unless the member is heard
	// from; the group's sessions queue holds it (group.setHeartbeatDeadline).
	heartbeatDeadline timer

	// assignment is what SyncGroup answers in the current generation.
	assignment []byte
	// assignedByName is the server-side assignment of the current
	// generation, ordered by topic name, each topic's partitions
	// ascending: it becomes abi.Member.Previous in the next one, listed
	// without sorting.
	assignedByName byName
	// held is what the member last received in a SyncGroup answer, and
	// heldGen that answer's generation: what it may still own. It shares
	// assignedByName's arrays, which are never modified.
	held    byName
	heldGen int32
}

func (m *member) timer() *timer { return &m.heartbeatDeadline }

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// matches reports whether a rejoin carries the same protocols and metadata,
// in which case Kafka needs no rebalance.
func (m *member) matches(ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(ps) != len(m.protocols) {
		return false
	}
	for i := range ps {
		if ps[i].Name != m.protocols[i].Name || !bytes.Equal(ps[i].Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// offersProtocol reports whether ps names protocol.
func offersProtocol(ps []kmsg.JoinGroupRequestProtocol, protocol string) bool {
	return slices.ContainsFunc(ps, func(p kmsg.JoinGroupRequestProtocol) bool { return p.Name == protocol })
}

// group is one classic group.
type group struct {
	id        string
	cfg       *GroupConfig
	state     State
	prevState State
	// emptySince is when the group last became Empty; it is forgotten
	// EmptyGroupRetention later unless someone joins.
	emptySince time.Time

	generation   int32
	protocolType string
	protocol     string
	// lastMetadata is, per protocol, the metadata a member last joined
	// with, for keepMetadata to share.
	lastMetadata map[string][]byte
	leader       string
	serverSide   bool

	members map[string]*member
	static  map[string]string // instance id -> member id
	pending pendingMembers    // KIP-394 member ids handed out, not joined with yet
	// joining counts the members awaiting join (joinWait set), so that the
	// join phase's end is found without a look at every member.
	joining int
	// sessions queues the members' heartbeat deadlines, so that the
	// group's next deadline and the sessions that expire cost what they
	// touch, not the group's size.
	sessions timerQueue[*member]
	// clients is the coordinator's index of members by client, which the
	// group keeps current as members come, go and change clients.
	clients *clientIndex

	pendingSync map[string]bool
	// assignDeadline bounds a server-side generation's wait for its
	// assignment (Config.AssignmentTimeout); zero once it has one.
	assignDeadline time.Time
	// offered counts, for each protocol name, the members that offer it
	// (countOffered).
	offered map[string]int
	// votes counts, for each candidate protocol, the members whose first
	// choice among the candidates it is: Kafka's vote (selectProtocol).
	// It is kept while only members' protocols change, as a static
	// member's restart changes them, and counted again after members come
	// or go (votesValid false).
	votes          map[string]int
	votesValid     bool
	newMemberAdded bool

	joinDeadline     time.Time
	initialJoin      bool
	initialDelay     time.Duration
	initialRemaining time.Duration
	syncDeadline     time.Time
	// next is the earliest of the group's deadlines, as queued in the
	// coordinator's timers.
	next timer
	// touched is set while the group is on the coordinator's list of
	// groups whose deadlines the current call may have changed.
	touched bool

	// metadataDeadline is when an assignment that waits for metadata
	// (Config.MetadataWait) starts anyway; zero when none waits.
	metadataDeadline time.Time
	// job is the outstanding assignment job, 0 when none.
	job uint64
	// assigned is set when a server-side generation's assignment is
	// computed while the group waits, in CompletingRebalance, for its
	// leader's SyncGroup (see becomeStableIfSynced).
	assigned bool
	// followUp is set when this generation withheld partitions: once every
	// member has synced, the coordinator starts the next round (KIP-429).
	followUp bool
	// followUpStreak counts consecutive generations that withheld.
	followUpStreak int
	// held measures the assignment the members hold, for Summary: set
	// when the coordinator computes one, cleared when the group's own
	// leader assigns (the coordinator cannot measure that one) and when
	// the group empties (no one holds anything).
	held assignmentStats
	// fingerprint is the subscribed metadata the assignment was computed on,
	// and fingerprintRacks whether it covers racks: set when the
	// assignment starts, so a rack learned later (from a Fetch) cannot make
	// the next metadata refresh look like a change.
	fingerprint      uint64
	fingerprintRacks bool
	// sharedAsSent is the topic list of the latest subscription whose
	// list differed from the one before, as its member sent it, and
	// sharedTopics the same sorted and distinct; members with an equal
	// list share them (newSubscription). Never modified.
	sharedAsSent, sharedTopics []string
}

// assignmentStats measures one assignment; Summary has the meaning of each
// count.
type assignmentStats struct {
	unassigned, rackLocal, rackKnown int
}

func newGroup(id string, cfg *GroupConfig, clients *clientIndex) *group {
	return &group{
		id:          id,
		cfg:         cfg,
		state:       Empty,
		members:     make(map[string]*member),
		static:      make(map[string]string),
		pending:     newPendingMembers(),
		pendingSync: make(map[string]bool),
		offered:     make(map[string]int),
		votes:       make(map[string]int),
		clients:     clients,
	}
}

func (g *group) timer() *timer { return &g.next }

func (c *Coordinator) transition(g *group, to State) {
	if !slices.Contains(validPrevious(to), g.state) {
		// A bug, not bad input: the state machine only asks for legal moves.
		panic("coordinator: group " + g.id + ": illegal transition " + g.state.String() + " -> " + to.String())
	}
	g.prevState, g.state = g.state, to
	if to == Empty {
		g.emptySince = c.now
		g.held = assignmentStats{}
	}
	c.event(Event{Kind: EventStateChanged, Group: g.id, Generation: g.generation, State: to})
}

// sortedMembers returns the members by member id, so that every loop over
// them is deterministic.
func (g *group) sortedMembers() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, byMemberID)
	return ms
}

// byMemberID orders members by id, the order every loop over a group's
// members takes so that the coordinator stays deterministic.
func byMemberID(a, b *member) int { return cmp.Compare(a.id, b.id) }

// kafkaOrder returns the members the way Kafka's assignors sort them: static
// members by instance id, then dynamic members by member id.
func (g *group) kafkaOrder() []*member {
	ms := g.sortedMembers()
	sort.SliceStable(ms, func(i, j int) bool {
		a, b := ms[i], ms[j]
		if (a.instanceID != "") != (b.instanceID != "") {
			return a.instanceID != ""
		}
		if a.instanceID != "" {
			return a.instanceID < b.instanceID
		}
		return false
	})
	return ms
}

func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalance)
	}
	return d
}

// awaitingJoin counts the members whose JoinGroup is parked.
func (g *group) awaitingJoin() int { return g.joining }

// allJoined reports whether every known member is awaiting join and no
// KIP-394 pending member remains: the join phase may complete.
func (g *group) allJoined() bool {
	return g.pending.len() == 0 && g.joining == len(g.members)
}

// setJoinWait parks (w set) or unparks (w nil) the JoinGroup of m, a
// member of g. Every change to a member's joinWait goes through it (or
// through insert and remove), so that joining stays the count of members
// awaiting join.
func (g *group) setJoinWait(m *member, w *waiter) {
	if m.joinWait != nil {
		g.joining--
	}
	if w != nil {
		g.joining++
	}
	m.joinWait = w
}

// setHeartbeatDeadline moves the session deadline of m, a member of g, to
// at (zero for none). Every change to a member's deadline goes through it
// (a member not yet inserted sets its own), so that the sessions queue
// holds the deadline of every member of the group.
func (g *group) setHeartbeatDeadline(m *member, at time.Time) { g.sessions.set(m, at) }

// validateMember is ClassicGroup.validateMember: the instance id, when
// given, must map to this member id. It returns the member when the code
// is 0.
func (g *group) validateMember(memberID, instanceID string) (*member, int16) {
	if instanceID != "" {
		existing, ok := g.static[instanceID]
		if !ok {
			return nil, kerr.UnknownMemberID.Code
		}
		if existing != memberID {
			// KIP-345: a known instance id with another member id is fenced.
			return nil, kerr.FencedInstanceID.Code
		}
	}
	m, ok := g.members[memberID]
	if !ok {
		return nil, kerr.UnknownMemberID.Code
	}
	return m, 0
}

// candidates returns the protocols every member supports; offers reports
// whether one protocol is among them without building the set.
func (g *group) candidates() map[string]bool {
	out := make(map[string]bool)
	for name, n := range g.offered {
		if n == len(g.members) {
			out[name] = true
		}
	}
	return out
}

func (g *group) offers(protocol string) bool {
	n, ok := g.offered[protocol]
	return ok && n == len(g.members)
}

// countOffered adds delta to the count of members offering each protocol m
// offers, counting a name once per member. Every change to the members or
// their protocols goes through it (insert, remove, setMemberProtocols), so
// candidates costs the protocols, not the members: a JoinGroup storm of
// thousands of members would otherwise be quadratic.
func (g *group) countOffered(m *member, delta int) {
	for i, p := range m.protocols {
		if slices.ContainsFunc(m.protocols[:i], func(q kmsg.JoinGroupRequestProtocol) bool { return q.Name == p.Name }) {
			continue
		}
		if g.offered[p.Name] += delta; g.offered[p.Name] == 0 {
			delete(g.offered, p.Name)
		}
	}
}

// supportsProtocols is ClassicGroup.supportsProtocols: an empty group takes
// any non-empty type and list; otherwise the type must match and the member
// must offer a protocol every current member supports.
func (g *group) supportsProtocols(protocolType string, ps []kmsg.JoinGroupRequestProtocol) bool {
	if protocolType == "" || len(ps) == 0 {
		return false
	}
	if g.state == Empty || len(g.members) == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range ps {
		if g.offers(p.Name) {
			return true
		}
	}
	return false
}

// selectProtocol chooses the group's protocol among the candidates: the
// first one the operator's priority list names, otherwise Kafka's vote, each
// member voting for its first-preferred candidate. Kafka breaks a tied vote
// by hash map order; here the smallest name wins, so the choice is
// deterministic.
func (g *group) selectProtocol() string {
	for _, p := range g.cfg.Priority {
		if g.offers(p) {
			return p
		}
	}
	if !g.votesValid {
		clear(g.votes)
		for _, m := range g.members {
			g.tally(m, 1)
		}
		g.votesValid = true
	}
	best, bestN := "", 0
	for name, n := range g.votes {
		if n > bestN || (n == bestN && name < best) {
			best, bestN = name, n
		}
	}
	return best
}

// voteOf returns m's first-preferred protocol among the candidates; ""
// when it offers none of them.
func (g *group) voteOf(m *member) string {
	for _, p := range m.protocols {
		if g.offers(p.Name) {
			return p.Name
		}
	}
	return ""
}

// tally adds delta to the votes of m's choice.
func (g *group) tally(m *member, delta int) {
	if v := g.voteOf(m); v != "" {
		if g.votes[v] += delta; g.votes[v] == 0 {
			delete(g.votes, v)
		}
	}
}

// keepMetadata returns what a member keeps of a protocol's metadata: a copy
// that holds none of the rest of its request, which the member would
// otherwise keep alive whole, and the same copy as the last member that
// sent the same bytes. The members of a group mostly join with the same
// subscription, so a group of thousands keeps it a few times, not once
// per member; the bytes are never written to.
func (g *group) keepMetadata(protocol string, b []byte) []byte {
	if last, ok := g.lastMetadata[protocol]; ok && bytes.Equal(last, b) {
		return last
	}
	kept := bytes.Clone(b)
	if g.lastMetadata == nil {
		g.lastMetadata = make(map[string][]byte)
	}
	g.lastMetadata[protocol] = kept
	return kept
}

// setMemberProtocols replaces the protocols of m, keeping the counts of
// offers and, when the candidates stay the same, the votes. The
// candidates change only with the counts of the names m stops or starts
// offering: one every member offered loses m's offer, or one becomes
// offered by every member.
func (g *group) setMemberProtocols(m *member, ps []kmsg.JoinGroupRequestProtocol) {
	if g.members[m.id] != m {
		m.protocols = ps
		return
	}
	old := m.protocols
	keep := g.votesValid
	if keep {
		g.tally(m, -1)
		for _, p := range old {
			if !offersProtocol(ps, p.Name) && g.offers(p.Name) {
				keep = false
			}
		}
	}
	g.countOffered(m, -1)
	m.protocols = ps
	g.countOffered(m, 1)
	if keep {
		for _, p := range ps {
			if !offersProtocol(old, p.Name) && g.offers(p.Name) {
				keep = false
			}
		}
	}
	if keep {
		g.tally(m, 1)
	} else {
		g.votesValid = false
	}
}

// topicPartitions is a topic's partitions, by topic name.
type topicPartitions struct {
	topic      string
	partitions []int32
}

// byName is an assignment by topic name: sorted by name, each topic's
// partitions ascending, no topic without partitions. A member keeps its
// assignments so rather than in maps, which at a hundred topics cost a
// member several kilobytes more.
type byName []topicPartitions

// partitionsOf returns topic's partitions, nil when it has none.
func (a byName) partitionsOf(topic string) []int32 {
	i, ok := slices.BinarySearchFunc(a, topic, func(tp topicPartitions, t string) int { return strings.Compare(tp.topic, t) })
	if !ok {
		return nil
	}
	return a[i].partitions
}

// asMap returns a copy of a by topic, for export.
func (a byName) asMap() map[string][]int32 {
	out := make(map[string][]int32, len(a))
	for _, tp := range a {
		out[tp.topic] = slices.Clone(tp.partitions)
	}
	return out
}

// byNameOf builds an assignment from one by topic, as exported: each
// topic's partitions sorted and distinct, topics without any left out.
func byNameOf(m map[string][]int32) byName {
	if m == nil {
		return nil
	}
	out := byName{}
	for _, t := range sortedKeys(m) {
		if ps := normalizedPartitions(m[t]); len(ps) > 0 {
			out = append(out, topicPartitions{t, slices.Clone(ps)})
		}
	}
	return out
}

// setAssigned records the member's assignment, ordered by topic name with
// ascending partitions.
func (m *member) setAssigned(a []topicPartitions) { m.assignedByName = a }

// add puts m into the group; the first member sets the protocol type and,
// for leader-side groups, becomes the leader.
func (g *group) add(m *member) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	g.insert(m)
	if g.leader == "" {
		g.leader = m.id
	}
}

// insert files m under its id with everything the group keeps about its
// members: the protocol counts, the static ids, the count of members
// awaiting join, the sessions queue and the index by client.
func (g *group) insert(m *member) {
	g.members[m.id] = m
	g.countOffered(m, 1)
	g.votesValid = false
	if m.instanceID != "" {
		g.static[m.instanceID] = m.id
	}
	if m.joinWait != nil {
		g.joining++
	}
	g.sessions.set(m, m.heartbeatDeadline.at)
	g.clients.add(g, m)
}

// remove drops a member, or a pending member id, electing another leader
// if the member led.
func (g *group) remove(id string) {
	m, ok := g.members[id]
	if !ok {
		g.pending.remove(id)
		return
	}
	delete(g.members, id)
	g.countOffered(m, -1)
	g.votesValid = false
	if m.instanceID != "" && g.static[m.instanceID] == id {
		delete(g.static, m.instanceID)
	}
	if m.joinWait != nil {
		g.joining--
	}
	g.sessions.remove(m)
	g.clients.remove(m)
	delete(g.pendingSync, id)
	if g.leader == id {
		// The member with the smallest id leads, as sortedMembers would
		// order them; one pass finds it without sorting.
		g.leader = ""
		for mid := range g.members {
			if g.leader == "" || mid < g.leader {
				g.leader = mid
			}
		}
	}
}

// rename moves m, a member of the group, to member id to, keeping the
// group's records of it (a static member's restart, KIP-345).
func (g *group) rename(m *member, to string) {
	delete(g.members, m.id)
	m.id = to
	g.members[to] = m
	if m.instanceID != "" {
		g.static[m.instanceID] = to
	}
}

// electJoinedLeader is maybeElectNewJoinedLeader: keep a leader that
// rejoined, else pick a member that did. It reports false when no member
// has rejoined.
func (g *group) electJoinedLeader() bool {
	if l, ok := g.members[g.leader]; ok && l.joinWait != nil {
		return true
	}
	for _, m := range g.sortedMembers() {
		if m.joinWait != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

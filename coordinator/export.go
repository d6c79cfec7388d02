package coordinator

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupState is the durable state of one group: what a restarted daemon
// needs to continue where it stopped. It holds only exported plain fields,
// so the gateway may persist it as JSON.
type GroupState struct {
	Group        string
	State        string
	Generation   int32
	ProtocolType string
	Protocol     string
	Leader       string
	ServerSide   bool
	// FollowUp is set when the generation withheld partitions and its
	// second KIP-429 round has not started yet.
	FollowUp bool
	// Fingerprint identifies the metadata the assignment was computed on;
	// FingerprintRacks says whether it covers replica racks.
	Fingerprint      uint64
	FingerprintRacks bool `json:",omitempty"`
	Members          []MemberState
}

// MemberState is the durable state of one member.
type MemberState struct {
	MemberID, InstanceID, ClientID, ClientHost string
	SessionTimeout, RebalanceTimeout           time.Duration
	ProtocolType                               string
	Protocols                                  []ProtocolState
	// Assignment is what SyncGroup answers in the current generation.
	Assignment []byte
	// Assigned is the server-side assignment of the current generation.
	Assigned map[string][]int32
	// Held and HeldGeneration are what the member last received.
	Held           map[string][]int32
	HeldGeneration int32
	// Synced is false while the member of a Stable group has yet to send
	// its SyncGroup. A group restored mid-rebalance starts its join phase
	// over, whoever had synced, so there it is always true.
	Synced bool
	// Rack is the member's resolved rack, for display; Restore resolves it
	// again from the subscription and the current rules.
	Rack string `json:",omitempty"`
}

// ProtocolState is one protocol a member offered.
type ProtocolState struct {
	Name     string
	Metadata []byte
}

// Export returns the state of every group, sorted by group id. Parked
// requests are not state: after a restart their clients retry.
func (c *Coordinator) Export() []GroupState {
	var out []GroupState
	for _, id := range c.sortedGroupIDs() {
		out = append(out, exportGroup(c.groups[id]))
	}
	return out
}

// ExportGroup returns one group's state, as Export would; false when the
// coordinator does not hold the group. It spares callers that want one
// group the copy of every other group's members.
func (c *Coordinator) ExportGroup(id string) (GroupState, bool) {
	g, ok := c.groups[id]
	if !ok {
		return GroupState{}, false
	}
	return exportGroup(g), true
}

// Summary is a group's identity and size, and what the coordinator knows of
// the assignment its members hold, without its members.
type Summary struct {
	Group      string
	State      string
	Generation int32
	Members    int
	// Unassigned, RackLocal and RackKnown measure the assignment the
	// members hold, as EventAssignmentCompleted reported it; all are zero
	// when the group holds none the coordinator computed (it is Empty, has
	// not been assigned since it was restored, or its own leader assigned).
	Unassigned, RackLocal, RackKnown int
}

// Summaries lists every group, sorted by id, without copying members.
func (c *Coordinator) Summaries() []Summary {
	out := make([]Summary, 0, len(c.groups))
	for _, id := range c.sortedGroupIDs() {
		out = append(out, summarize(c.groups[id]))
	}
	return out
}

// Summary returns one group's summary, as Summaries would; false when the
// coordinator does not hold the group (it never existed, or turned Dead).
func (c *Coordinator) Summary(id string) (Summary, bool) {
	g, ok := c.groups[id]
	if !ok {
		return Summary{}, false
	}
	return summarize(g), true
}

func summarize(g *group) Summary {
	return Summary{Group: g.id, State: g.state.String(), Generation: g.generation, Members: len(g.members),
		Unassigned: g.held.unassigned, RackLocal: g.held.rackLocal, RackKnown: g.held.rackKnown}
}

func exportGroup(g *group) GroupState {
	gs := GroupState{
		Group: g.id, State: g.state.String(), Generation: g.generation,
		ProtocolType: g.protocolType, Protocol: g.protocol, Leader: g.leader,
		ServerSide: g.serverSide, FollowUp: g.followUp, Fingerprint: g.fingerprint, FingerprintRacks: g.fingerprintRacks,
	}
	for _, m := range g.sortedMembers() {
		ms := MemberState{
			MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.host,
			SessionTimeout: m.session, RebalanceTimeout: m.rebalance, ProtocolType: m.protocolType,
			Assignment: slices.Clone(m.assignment), Assigned: m.assignedByName.asMap(),
			Held: heldMap(m.held), HeldGeneration: m.heldGen, Synced: g.state != Stable || !g.pendingSync[m.id], Rack: m.rack,
		}
		for _, p := range m.protocols {
			ms.Protocols = append(ms.Protocols, ProtocolState{Name: p.Name, Metadata: slices.Clone(p.Metadata)})
		}
		gs.Members = append(gs.Members, ms)
	}
	return gs
}

// heldMap is m.held as exported: nil before the member's first SyncGroup
// answer.
func heldMap(held byName) map[string][]int32 {
	if held == nil {
		return nil
	}
	return held.asMap()
}

// Restore loads groups exported by Export, at time now. Stable and Empty
// groups continue as they were; every session restarts at now. A group that
// was rebalancing restarts its join phase at its current generation: the
// parked requests are gone, and members learn to rejoin from their next
// heartbeat. Restore refuses a group id it already holds.
func (c *Coordinator) Restore(now time.Time, states []GroupState) (Output, error) {
	c.begin(now)
	for _, gs := range states {
		if gs.Group == "" {
			return c.finish(), fmt.Errorf("restore: group with empty id")
		}
		if _, ok := c.groups[gs.Group]; ok {
			return c.finish(), fmt.Errorf("restore group %q: already present", gs.Group)
		}
		g := newGroup(gs.Group, c.cfg.groupConfigFor(gs.Group), &c.clients)
		g.generation, g.protocolType, g.protocol, g.leader = gs.Generation, gs.ProtocolType, gs.Protocol, gs.Leader
		g.serverSide, g.followUp, g.fingerprint, g.fingerprintRacks = gs.ServerSide, gs.FollowUp, gs.Fingerprint, gs.FingerprintRacks
		refuse := func(format string, args ...any) (Output, error) {
			// The members restored so far are in the coordinator's index
			// of clients; the group goes with them.
			c.dropGroup(g)
			return c.finish(), fmt.Errorf(format, args...)
		}
		for _, ms := range gs.Members {
			if ms.MemberID == "" || g.members[ms.MemberID] != nil {
				return refuse("restore group %q: member id %q empty or repeated", gs.Group, ms.MemberID)
			}
			if ms.InstanceID != "" && g.static[ms.InstanceID] != "" {
				return refuse("restore group %q: instance id %q repeated", gs.Group, ms.InstanceID)
			}
			if ms.SessionTimeout <= 0 {
				return refuse("restore group %q member %q: session timeout %v", gs.Group, ms.MemberID, ms.SessionTimeout)
			}
			m := &member{
				id: ms.MemberID, instanceID: ms.InstanceID, clientID: ms.ClientID, host: ms.ClientHost,
				session: ms.SessionTimeout, rebalance: ms.RebalanceTimeout, protocolType: ms.ProtocolType,
				assignment: slices.Clone(ms.Assignment),
				held:       byNameOf(ms.Held), heldGen: ms.HeldGeneration,
				subs: make(map[string]*subscription),
			}
			for _, p := range ms.Protocols {
				m.protocols = append(m.protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: slices.Clone(p.Metadata)})
				if c.served(ms.ProtocolType, p.Name) {
					if s, err := decodeSubscription(p.Metadata); err == nil {
						m.subs[p.Name] = newSubscription(g, s)
					}
				}
			}
			m.setAssigned(byNameOf(ms.Assigned))
			m.rack = c.resolveRack(g, m)
			m.heartbeatDeadline.at = now.Add(m.session)
			g.insert(m)
			if !ms.Synced {
				g.pendingSync[m.id] = true
			}
		}
		if g.members[g.leader] == nil && len(g.members) > 0 {
			g.leader = slices.Sorted(maps.Keys(g.members))[0]
		}
		c.groups[g.id] = g
		c.touch(g)
		switch {
		case len(g.members) == 0:
			g.state, g.emptySince = Empty, now
			g.protocol, g.serverSide = "", false
		case gs.State == Stable.String():
			g.state, g.prevState = Stable, CompletingRebalance
			if len(g.pendingSync) > 0 {
				g.syncDeadline = now.Add(g.rebalanceTimeout())
			}
			c.maybeFollowUp(g)
		default:
			// Mid-rebalance: the assignment in flight, if any, is lost.
			g.state, g.prevState = PreparingRebalance, Stable
			clear(g.pendingSync)
			g.joinDeadline = now.Add(g.rebalanceTimeout())
		}
	}
	return c.finish(), nil
}

// Unload gives up groups without ending them, for a coordinator elsewhere
// that restores them from their last exported state: the gateway that held
// them no longer owns them. Their parked JoinGroup and SyncGroup requests
// are answered NOT_COORDINATOR, as a Kafka broker answers the requests of a
// group whose coordinator moved, so that their clients look it up again
// and carry on there with the generation and assignment they have. Nothing
// else is said of the groups (no state change, so no saving and no
// Dead); an assignment still running for one of them is stale when it
// completes. Ids it does not hold are ignored.
func (c *Coordinator) Unload(now time.Time, groups []string) Output {
	c.begin(now)
	for _, id := range slices.Sorted(slices.Values(groups)) {
		g := c.groups[id]
		if g == nil {
			continue
		}
		for _, mid := range sortedKeys(g.members) {
			m := g.members[mid]
			if w := m.joinWait; w != nil {
				c.reply(w.id, joinError(w.version, kerr.NotCoordinator.Code, m.id))
				g.setJoinWait(m, nil)
			}
			if w := m.syncWait; w != nil {
				c.reply(w.id, syncError(w.version, kerr.NotCoordinator.Code))
				m.syncWait = nil
			}
		}
		c.dropGroup(g)
		c.event(Event{Kind: EventUnloaded, Group: id, Generation: g.generation})
	}
	return c.finish()
}

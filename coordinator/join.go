package coordinator

import (
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func joinError(version int16, code int16, memberID string) *kmsg.JoinGroupResponse {
	r := kmsg.NewPtrJoinGroupResponse()
	r.Version = version
	r.ErrorCode = code
	r.MemberID = memberID
	r.Generation = -1
	return r
}

// joinGroup is GroupMetadataManager.classicGroupJoin.
func (c *Coordinator) joinGroup(id RequestID, r *kmsg.JoinGroupRequest) {
	fail := func(code int16, memberID string) { c.reply(id, joinError(r.Version, code, memberID)) }
	if r.Group == "" {
		fail(kerr.InvalidGroupID.Code, r.MemberID)
		return
	}
	gc := c.cfg.groupConfigFor(r.Group)
	session := ms(r.SessionTimeoutMillis)
	if session < gc.MinSessionTimeout || session > gc.MaxSessionTimeout {
		fail(kerr.InvalidSessionTimeout.Code, r.MemberID)
		return
	}
	instance := ""
	if r.Version >= 5 && r.InstanceID != nil {
		if *r.InstanceID == "" {
			// Kafka clients refuse an empty group.instance.id
			// (JoinGroupRequest.validateGroupInstanceId); here it would be
			// indistinguishable from a dynamic member.
			fail(kerr.InvalidRequest.Code, r.MemberID)
			return
		}
		instance = *r.InstanceID
	}
	g := c.groups[r.Group]
	created := g == nil
	if created {
		if r.MemberID != "" {
			// A member id for a group that does not exist.
			fail(kerr.UnknownMemberID.Code, r.MemberID)
			return
		}
		g = newGroup(r.Group, gc, &c.clients)
		c.groups[r.Group] = g
	}
	c.touch(g)
	if code := c.checkProtocols(g, r); code != 0 {
		fail(code, r.MemberID)
		c.dropIfUnused(g)
		return
	}
	if !c.acceptJoiningMember(g, r.MemberID) {
		// Kafka removes the member it turns away, so that the last ones to
		// rejoin a shrunk group are the ones kicked out.
		if m := g.members[r.MemberID]; m != nil {
			c.removeMemberAndUpdate(g, m, "group max size reached")
		} else {
			g.remove(r.MemberID)
		}
		fail(kerr.GroupMaxSizeReached.Code, "")
		c.dropIfUnused(g)
		return
	}
	if created {
		c.event(Event{Kind: EventGroupCreated, Group: g.id})
	}
	w := &waiter{id: id, version: r.Version}
	if r.MemberID == "" {
		c.joinNewMember(g, r, instance, w)
	} else {
		c.joinExistingMember(g, r, instance, w)
	}
}

// dropIfUnused forgets a group that a refused first join created.
func (c *Coordinator) dropIfUnused(g *group) {
	if g.state == Empty && len(g.members) == 0 && g.pending.len() == 0 && g.generation == 0 {
		c.dropGroup(g)
	}
}

// checkProtocols refuses protocols the group cannot take. Beyond Kafka's
// supportsProtocols, it refuses oversized metadata, and metadata that does
// not decode as a consumer subscription when a plugin serves that protocol
// name: the coordinator must read it to assign. Kafka itself never reads
// classic protocol metadata; INCONSISTENT_GROUP_PROTOCOL is its error for a
// member whose protocols the group cannot use.
func (c *Coordinator) checkProtocols(g *group, r *kmsg.JoinGroupRequest) int16 {
	if !g.supportsProtocols(r.ProtocolType, r.Protocols) {
		return kerr.InconsistentGroupProtocol.Code
	}
	decoded := make(map[string]*kmsg.ConsumerMemberMetadata)
	for _, p := range r.Protocols {
		if len(p.Metadata) > c.cfg.MaxProtocolMetadataBytes {
			return kerr.InconsistentGroupProtocol.Code
		}
		if c.served(r.ProtocolType, p.Name) {
			s, err := decodeSubscription(p.Metadata)
			if err != nil {
				return kerr.InconsistentGroupProtocol.Code
			}
			decoded[p.Name] = s // a repeated name: the last one counts, as below
		}
	}
	// setProtocols takes these rather than decoding the same bytes again.
	c.joinSubs, c.joinSubsFor = decoded, r
	return 0
}

// served reports whether server-side assignment applies to a protocol.
func (c *Coordinator) served(protocolType, name string) bool {
	if protocolType != "consumer" {
		return false
	}
	_, ok := c.protocols[name]
	return ok
}

// acceptJoiningMember is Kafka's group size check.
func (c *Coordinator) acceptJoiningMember(g *group, memberID string) bool {
	maxSize := g.cfg.MaxSize
	if maxSize <= 0 {
		return true
	}
	switch g.state {
	case Empty, Dead:
		return true
	case PreparingRebalance:
		// Count members awaiting join, not members: the group may be above a
		// lowered limit, and this kicks out the last ones to rejoin.
		if m := g.members[memberID]; m != nil && m.joinWait != nil {
			return true
		}
		return g.awaitingJoin() < maxSize
	default:
		if _, ok := g.members[memberID]; ok {
			return true
		}
		return len(g.members) < maxSize
	}
}

func (c *Coordinator) joinNewMember(g *group, r *kmsg.JoinGroupRequest, instance string, w *waiter) {
	if g.state == Dead {
		c.reply(w.id, joinError(r.Version, kerr.CoordinatorNotAvailable.Code, ""))
		return
	}
	prefix := c.client.ID
	if instance != "" {
		prefix = instance
	}
	newID := c.newMemberID(prefix)
	if instance != "" {
		// KIP-345: a static member is admitted directly, with no
		// MEMBER_ID_REQUIRED round trip; a known instance id replaces the old
		// member.
		if old, ok := g.static[instance]; ok {
			c.replaceStaticMember(g, r, old, newID, w)
			return
		}
		c.addMember(g, r, newID, instance, w)
		return
	}
	if r.Version >= 4 {
		// KIP-394: the member must come back with this id before its session
		// timeout.
		g.pending.add(newID, c.now.Add(ms(r.SessionTimeoutMillis)))
		c.reply(w.id, joinError(r.Version, kerr.MemberIDRequired.Code, newID))
		return
	}
	c.addMember(g, r, newID, "", w)
}

func (c *Coordinator) joinExistingMember(g *group, r *kmsg.JoinGroupRequest, instance string, w *waiter) {
	id := r.MemberID
	if g.state == Dead {
		c.reply(w.id, joinError(r.Version, kerr.CoordinatorNotAvailable.Code, id))
		return
	}
	if g.pending.has(id) {
		if instance != "" {
			// Kafka raises an IllegalStateException here: pending ids are only
			// handed to dynamic members.
			c.reply(w.id, joinError(r.Version, kerr.UnknownServerError.Code, id))
			return
		}
		g.pending.remove(id)
		c.addMember(g, r, id, "", w)
		return
	}
	m, code := g.validateMember(id, instance)
	if code != 0 {
		c.reply(w.id, joinError(r.Version, code, id))
		return
	}
	switch g.state {
	case PreparingRebalance:
		c.updateMember(g, m, r, w)
		c.maybePrepareOrComplete(g, "member "+id+" rejoined")
	case CompletingRebalance:
		if m.matches(r.Protocols) {
			// The member lost its JoinGroup answer: send it again.
			c.completeJoinFor(g, m, w)
			return
		}
		c.updateMember(g, m, r, w)
		c.maybePrepareOrComplete(g, "member "+id+" changed its metadata")
	case Stable:
		if (!g.serverSide && g.leader == id) || !m.matches(r.Protocols) {
			// A rejoining leader forces a rebalance: that is how a client-side
			// leader reacts to metadata changes.
			c.updateMember(g, m, r, w)
			c.maybePrepareOrComplete(g, "member "+id+" rejoined with new metadata")
			return
		}
		c.completeJoinFor(g, m, w)
	default:
		c.reply(w.id, joinError(r.Version, kerr.UnknownMemberID.Code, id))
	}
}

// newMember builds a member from a JoinGroup.
func (c *Coordinator) newMember(g *group, r *kmsg.JoinGroupRequest, id, instance string) *member {
	m := &member{id: id, instanceID: instance, heldGen: -1}
	m.clientID, m.host, m.fetchRack = c.client.ID, c.client.Host, c.client.FetchRack
	c.setProtocols(g, m, r)
	return m
}

// setProtocols records what a JoinGroup says about its member.
func (c *Coordinator) setProtocols(g *group, m *member, r *kmsg.JoinGroupRequest) {
	m.session = ms(r.SessionTimeoutMillis)
	m.rebalance = m.session
	if r.Version >= 1 {
		m.rebalance = ms(r.RebalanceTimeoutMillis)
	}
	m.protocolType = r.ProtocolType
	ps := make([]kmsg.JoinGroupRequestProtocol, len(r.Protocols))
	for i, p := range r.Protocols {
		ps[i] = kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: g.keepMetadata(p.Name, p.Metadata)}
	}
	g.setMemberProtocols(m, ps)
	m.subs = make(map[string]*subscription)
	for _, p := range m.protocols {
		if !c.served(r.ProtocolType, p.Name) {
			continue
		}
		s, ok := c.joinSubs[p.Name]
		if c.joinSubsFor != r || !ok {
			var err error
			if s, err = decodeSubscription(p.Metadata); err != nil {
				continue
			}
		}
		m.subs[p.Name] = newSubscription(g, s)
		c.needMetadata(s.Topics)
	}
	// A rejoin from the member's own client brings the driver's latest
	// sighting of its Fetch rack, if it has one.
	if c.client.FetchRack != "" && c.client.ID == m.clientID && c.client.Host == m.host {
		m.fetchRack = c.client.FetchRack
	}
	m.rack = c.resolveRack(g, m)
}

// needMetadata asks the driver (Output.NeedMetadata) for the topics of ts
// that no metadata update has covered, once per call, so that their
// metadata is on its way while the join phase runs.
func (c *Coordinator) needMetadata(ts []string) {
	for _, t := range ts {
		if !c.covered[t] && !slices.Contains(c.out.NeedMetadata, t) {
			c.out.NeedMetadata = append(c.out.NeedMetadata, t)
		}
	}
}

func (c *Coordinator) addMember(g *group, r *kmsg.JoinGroupRequest, id, instance string, w *waiter) {
	m := c.newMember(g, r, id, instance)
	m.isNew = true
	m.joinWait = w
	// New members cannot heartbeat while their JoinGroup is parked; bound
	// the wait so that abandoned joins do not pile up.
	m.heartbeatDeadline.at = c.now.Add(c.cfg.NewMemberJoinTimeout)
	if g.state == PreparingRebalance && g.prevState == Empty {
		g.newMemberAdded = true
	}
	g.add(m)
	c.event(Event{Kind: EventMemberAdded, Group: g.id, Generation: g.generation, Member: id})
	c.maybePrepareOrComplete(g, "member "+id+" joined")
}

func (c *Coordinator) updateMember(g *group, m *member, r *kmsg.JoinGroupRequest, w *waiter) {
	if m.joinWait != nil && m.joinWait.id != w.id {
		// A second JoinGroup from the same member supersedes the first.
		c.reply(m.joinWait.id, joinError(m.joinWait.version, kerr.UnknownMemberID.Code, m.id))
	}
	c.setProtocols(g, m, r)
	g.setJoinWait(m, w)
}

// replaceStaticMember is KIP-345's restart: the instance id moves to a new
// member id, the old one's parked requests are fenced, and in Stable, when
// neither the selected protocol nor the subscribed topics change, the member
// gets its previous assignment back with no rebalance.
func (c *Coordinator) replaceStaticMember(g *group, r *kmsg.JoinGroupRequest, oldID, newID string, w *waiter) {
	old := g.members[oldID]
	if old.joinWait != nil {
		c.reply(old.joinWait.id, joinError(old.joinWait.version, kerr.FencedInstanceID.Code, oldID))
		g.setJoinWait(old, nil)
	}
	if old.syncWait != nil {
		c.reply(old.syncWait.id, syncError(old.syncWait.version, kerr.FencedInstanceID.Code))
		old.syncWait = nil
	}
	oldTopics := subscribedTopics(old, g.protocol)
	wasLeader := g.leader == oldID
	pendingSync := g.pendingSync[oldID]
	delete(g.pendingSync, oldID)
	m := old
	g.rename(m, newID)
	g.clients.move(g, m, c.client.ID, c.client.Host)
	if c.client.FetchRack != "" {
		// A static member that restarts on a new address keeps the rack
		// it had until its new client is heard from.
		m.fetchRack = c.client.FetchRack
	}
	if pendingSync {
		g.pendingSync[newID] = true
	}
	if wasLeader {
		g.leader = newID
	}
	c.setProtocols(g, m, r)
	g.setJoinWait(m, w)
	g.setHeartbeatDeadline(m, c.now.Add(m.session))
	c.event(Event{Kind: EventMemberRemoved, Group: g.id, Generation: g.generation, Member: oldID, Detail: "replaced by static member " + newID})
	c.event(Event{Kind: EventMemberAdded, Group: g.id, Generation: g.generation, Member: newID})

	switch g.state {
	case Stable:
		sameTopics := true
		if g.serverSide {
			sameTopics = equalStrings(oldTopics, subscribedTopics(m, g.protocol))
		}
		if g.selectProtocol() == g.protocol && sameTopics {
			// No rebalance: answer with the current generation; SyncGroup
			// returns the previous member's assignment.
			resp := c.joinSuccess(g, m, w.version)
			if !g.serverSide && wasLeader {
				// A restarted leader must not assign again: v9+ says so with
				// SkipAssignment; older versions are told the old leader id,
				// so the member does not think it leads (as Kafka does).
				if w.version >= 9 {
					resp.SkipAssignment = true
				} else {
					resp.LeaderID, resp.Members = oldID, nil
				}
			}
			c.reply(w.id, resp)
			g.setJoinWait(m, nil)
			return
		}
		c.prepareRebalance(g, "static member "+m.instanceID+" rejoined with a different protocol or subscription")
	case CompletingRebalance:
		// The assignment in flight names the old member id: start over.
		c.prepareRebalance(g, "static member "+m.instanceID+" rejoined during CompletingRebalance")
	default:
		c.maybeCompleteJoin(g)
	}
}

// completeJoinFor answers one member's JoinGroup with the current
// generation.
func (c *Coordinator) completeJoinFor(g *group, m *member, w *waiter) {
	c.reply(w.id, c.joinSuccess(g, m, w.version))
	if m.joinWait == w {
		g.setJoinWait(m, nil)
	}
}

func (c *Coordinator) joinSuccess(g *group, m *member, version int16) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Version = version
	resp.MemberID = m.id
	resp.Generation = g.generation
	pt, pn := g.protocolType, g.protocol
	resp.ProtocolType = &pt
	resp.Protocol = &pn
	if g.serverSide {
		// No member leads: the coordinator assigns, and every member sends
		// an empty SyncGroup.
		resp.LeaderID = ServerLeaderID
		return resp
	}
	resp.LeaderID = g.leader
	if g.leader == m.id {
		for _, o := range g.sortedMembers() {
			rm := kmsg.NewJoinGroupResponseMember()
			rm.MemberID = o.id
			if o.instanceID != "" {
				inst := o.instanceID
				rm.InstanceID = &inst
			}
			rm.ProtocolMetadata = o.metadataFor(g.protocol)
			resp.Members = append(resp.Members, rm)
		}
	}
	return resp
}

func (c *Coordinator) maybePrepareOrComplete(g *group, reason string) {
	switch g.state {
	case Stable, CompletingRebalance, Empty:
		c.prepareRebalance(g, reason)
	default:
		c.maybeCompleteJoin(g)
	}
}

// prepareRebalance moves the group to PreparingRebalance. Pending syncs fail
// with REBALANCE_IN_PROGRESS and any assignment in flight is abandoned.
func (c *Coordinator) prepareRebalance(g *group, reason string) {
	if g.state == CompletingRebalance {
		c.failSyncs(g, kerr.RebalanceInProgress.Code)
	}
	g.job = 0
	g.assigned = false
	g.metadataDeadline = time.Time{}
	g.assignDeadline = time.Time{}
	g.followUp = false
	clear(g.pendingSync)
	g.syncDeadline = time.Time{}
	initial := g.state == Empty
	c.transition(g, PreparingRebalance)
	c.event(Event{Kind: EventRebalanceStarted, Group: g.id, Generation: g.generation, Detail: reason})
	if initial {
		// Give members starting together time to join one generation; each
		// arrival extends the delay, up to the rebalance timeout.
		delay := g.cfg.InitialRebalanceDelay
		g.initialJoin = true
		g.initialDelay = delay
		g.initialRemaining = max(g.rebalanceTimeout()-delay, 0)
		g.newMemberAdded = false
		g.joinDeadline = c.now.Add(delay)
		return
	}
	g.initialJoin = false
	if g.allJoined() {
		c.completeJoin(g)
		return
	}
	g.joinDeadline = c.now.Add(g.rebalanceTimeout())
}

// maybeCompleteJoin completes the join phase once every known member has
// rejoined, except in an initial rebalance, which waits out its delay.
func (c *Coordinator) maybeCompleteJoin(g *group) {
	if g.state != PreparingRebalance || g.initialJoin {
		return
	}
	if g.allJoined() {
		c.completeJoin(g)
	}
}

// failSyncs answers every parked SyncGroup with code and forgets the
// assignment (resetAndPropagateAssignmentWithError).
func (c *Coordinator) failSyncs(g *group, code int16) {
	for _, m := range g.sortedMembers() {
		m.assignment = nil
		if m.syncWait != nil {
			c.reply(m.syncWait.id, syncError(m.syncWait.version, code))
			m.syncWait = nil
		}
	}
}

// completeJoin ends the join phase: dynamic members that did not rejoin are
// removed, the generation is bumped, the protocol chosen, and every waiting
// member answered.
func (c *Coordinator) completeJoin(g *group) {
	g.joinDeadline = time.Time{}
	g.initialJoin = false
	for _, m := range g.sortedMembers() {
		if m.joinWait == nil && m.instanceID == "" {
			// Static members that miss a join phase stay; they leave only by
			// session timeout or LeaveGroup.
			g.remove(m.id)
			c.event(Event{Kind: EventMemberRemoved, Group: g.id, Generation: g.generation, Member: m.id, Detail: "did not rejoin"})
		}
	}
	if !g.electJoinedLeader() && len(g.members) > 0 {
		// Nobody rejoined, only static members remain: wait for them or for
		// their sessions to expire.
		g.joinDeadline = c.now.Add(g.rebalanceTimeout())
		return
	}
	g.generation++
	g.serverSide = false
	if len(g.members) == 0 {
		g.protocol = ""
		c.transition(g, Empty)
		return
	}
	g.protocol = g.selectProtocol()
	g.serverSide = c.served(g.protocolType, g.protocol)
	g.assigned = false
	c.transition(g, CompletingRebalance)
	for _, m := range g.sortedMembers() {
		m.rejoined = m.joinWait != nil
		m.assignment = nil
		if m.joinWait != nil {
			c.reply(m.joinWait.id, c.joinSuccess(g, m, m.joinWait.version))
			g.setJoinWait(m, nil)
		}
		m.isNew = false
		g.setHeartbeatDeadline(m, c.now.Add(m.session))
		g.pendingSync[m.id] = true
	}
	g.syncDeadline = c.now.Add(g.rebalanceTimeout())
	if !g.serverSide {
		return
	}
	// Members sync as soon as they have the join answer, and their
	// SyncGroup waits for the assignment: bound that wait below their
	// request timeout, whatever the metadata and the plugins do.
	g.assignDeadline = c.now.Add(c.cfg.AssignmentTimeout)
	if missing := c.uncovered(g); len(missing) > 0 && c.cfg.MetadataWait > 0 {
		g.metadataDeadline = c.now.Add(c.cfg.MetadataWait)
		c.needMetadata(missing)
		c.event(Event{Kind: EventMetadataAwaited, Group: g.id, Generation: g.generation, Detail: strings.Join(missing, ",")})
		return
	}
	c.startAssignment(g)
}

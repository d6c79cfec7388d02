package coordinator

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func syncError(version, code int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = version
	r.ErrorCode = code
	return r
}

func (c *Coordinator) syncSuccess(g *group, m *member, version int16) *kmsg.SyncGroupResponse {
	r := kmsg.NewPtrSyncGroupResponse()
	r.Version = version
	pt, pn := g.protocolType, g.protocol
	r.ProtocolType, r.Protocol = &pt, &pn
	r.MemberAssignment = m.assignment
	if len(r.MemberAssignment) == 0 && g.serverSide {
		// Clients fail to decode a zero-length assignment.
		r.MemberAssignment = encodeAssignmentOf(nil, nil, nil, m.subs[g.protocol])
	} else if r.MemberAssignment == nil {
		r.MemberAssignment = []byte{}
	}
	return r
}

// memberInGeneration finds the group and member of a SyncGroup or
// Heartbeat and checks its member and generation, which Kafka does alike
// and in this order for both. code is the error to answer; 0 lets the
// request on.
func (c *Coordinator) memberInGeneration(groupID, memberID, instance string, generation int32) (*group, *member, int16) {
	if groupID == "" {
		return nil, nil, kerr.InvalidGroupID.Code
	}
	g := c.groups[groupID]
	if g == nil {
		return nil, nil, kerr.UnknownMemberID.Code
	}
	c.touch(g)
	if g.state == Dead {
		return nil, nil, kerr.CoordinatorNotAvailable.Code
	}
	m, code := g.validateMember(memberID, instance)
	if code != 0 {
		return nil, nil, code
	}
	if generation != g.generation {
		return nil, nil, kerr.IllegalGeneration.Code
	}
	return g, m, 0
}

// instanceID returns the group instance id a request carries: "" for a
// dynamic member, or below from, the first version with the field.
func instanceID(version, from int16, id *string) string {
	if version < from || id == nil {
		return ""
	}
	return *id
}

// syncGroup is classicGroupSyncToClassicGroup.
func (c *Coordinator) syncGroup(id RequestID, r *kmsg.SyncGroupRequest) {
	fail := func(code int16) { c.reply(id, syncError(r.Version, code)) }
	g, m, code := c.memberInGeneration(r.Group, r.MemberID, instanceID(r.Version, 3, r.InstanceID), r.Generation)
	if code != 0 {
		fail(code)
		return
	}
	if r.Version >= 5 && (inconsistent(r.ProtocolType, g.protocolType) || inconsistent(r.Protocol, g.protocol)) {
		fail(kerr.InconsistentGroupProtocol.Code)
		return
	}
	switch g.state {
	case PreparingRebalance:
		fail(kerr.RebalanceInProgress.Code)
	case CompletingRebalance:
		m.syncWait = &waiter{id: id, version: r.Version}
		delete(g.pendingSync, m.id)
		g.setHeartbeatDeadline(m, c.now.Add(m.session))
		if !g.serverSide && g.leader == m.id {
			// The leader's SyncGroup carries everyone's assignment; members it
			// left out get an empty one, as in Kafka.
			byID := make(map[string][]byte, len(r.GroupAssignment))
			for _, a := range r.GroupAssignment {
				byID[a.MemberID] = a.MemberAssignment
			}
			moved := 0
			for _, o := range g.sortedMembers() {
				o.assignment = byID[o.id]
				if o.assignment == nil {
					o.assignment = []byte{}
				}
				moved += c.recordLeaderAssignment(g, o)
			}
			// The leader assigned: its answer is the group's assignment,
			// for the admin API, the pictures and the per-group metrics.
			c.event(Event{Kind: EventAssignmentCompleted, Group: g.id, Generation: g.generation, Detail: g.protocol,
				Moved: moved, Members: len(g.members), Cooperative: g.cfg.isCooperative(g.protocol)})
			g.held = assignmentStats{}
			c.becomeStable(g)
		}
		// Server-side: the SyncGroup waits for the assignment job and the
		// leader's SyncGroup; it is answered the moment the group turns
		// Stable.
		if g.serverSide && m.id == g.leader {
			c.becomeStableIfSynced(g)
		}
	case Stable:
		delete(g.pendingSync, m.id)
		g.setHeartbeatDeadline(m, c.now.Add(m.session))
		c.answerSync(g, m, id, r.Version)
		c.maybeFollowUp(g)
	}
}

// recordLeaderAssignment keeps what a group's own leader assigned m, read
// from the ConsumerProtocolAssignment bytes of a "consumer" group (other
// protocol types' bytes mean nothing here), and returns how many of its
// partitions m did not have in the generation before.
func (c *Coordinator) recordLeaderAssignment(g *group, m *member) int {
	var byName []topicPartitions
	if g.protocolType == "consumer" {
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(m.assignment); err == nil {
			merged := make(map[string][]int32, len(a.Topics))
			for _, t := range a.Topics {
				merged[t.Topic] = append(merged[t.Topic], t.Partitions...)
			}
			for _, t := range sortedKeys(merged) {
				if ps := normalizedPartitions(merged[t]); len(ps) > 0 {
					byName = append(byName, topicPartitions{t, slices.Clone(ps)})
				}
			}
		}
	}
	moved := 0
	for _, tp := range byName {
		had := m.assignedByName.partitionsOf(tp.topic)
		for _, p := range tp.partitions {
			if _, ok := slices.BinarySearch(had, p); !ok {
				moved++
			}
		}
	}
	m.setAssigned(byName)
	return moved
}

func inconsistent(requested *string, current string) bool {
	return requested != nil && *requested != current
}

// answerSync sends a member its assignment and records what it now holds.
func (c *Coordinator) answerSync(g *group, m *member, id RequestID, version int16) {
	c.reply(id, c.syncSuccess(g, m, version))
	m.held = m.assignedByName
	m.heldGen = g.generation
	c.event(Event{Kind: EventMemberSynced, Group: g.id, Generation: g.generation, Member: m.id})
}

// becomeStableIfSynced turns a server-side group Stable once its
// assignment is computed and its leader has sent SyncGroup. The leader
// learns nothing from its JoinGroup answer here (no member leads, see
// joinSuccess), but waiting for its SyncGroup keeps Kafka's timing: a
// group stays in CompletingRebalance until the leader syncs, and a member
// joining in that window fails the parked SyncGroups at once, so their
// members rejoin without waiting for a heartbeat. Were the group Stable
// the moment the plugin answered, members starting together (a deploy)
// would each find a group just turned Stable, and every generation's
// members would wait up to a heartbeat interval to learn of the next. A
// leader that never syncs is removed at the sync deadline, as in Kafka.
func (c *Coordinator) becomeStableIfSynced(g *group) {
	if g.state == CompletingRebalance && g.assigned && !g.pendingSync[g.leader] {
		c.becomeStable(g)
	}
}

// becomeStable turns the group Stable and answers every parked SyncGroup.
func (c *Coordinator) becomeStable(g *group) {
	c.transition(g, Stable)
	for _, m := range g.sortedMembers() {
		if m.syncWait != nil {
			w := m.syncWait
			m.syncWait = nil
			c.answerSync(g, m, w.id, w.version)
		}
	}
	c.maybeFollowUp(g)
}

// maybeFollowUp starts the second round of a KIP-429 rebalance once every
// member has received the generation that withheld partitions. Waiting for
// all SyncGroups matters: a rebalance that aborted them would leave the old
// owners holding what they should release, and the round would withhold the
// same partitions again.
func (c *Coordinator) maybeFollowUp(g *group) {
	if g.state != Stable || !g.followUp || len(g.pendingSync) > 0 {
		return
	}
	g.followUp = false
	c.prepareRebalance(g, "KIP-429: hand over withheld partitions")
}

func heartbeatResponse(version, code int16) *kmsg.HeartbeatResponse {
	r := kmsg.NewPtrHeartbeatResponse()
	r.Version = version
	r.ErrorCode = code
	return r
}

// heartbeat is classicGroupHeartbeatToClassicGroup.
func (c *Coordinator) heartbeat(id RequestID, r *kmsg.HeartbeatRequest) {
	answer := func(code int16) { c.reply(id, heartbeatResponse(r.Version, code)) }
	g, m, code := c.memberInGeneration(r.Group, r.MemberID, instanceID(r.Version, 3, r.InstanceID), r.Generation)
	if code != 0 {
		answer(code)
		return
	}
	switch g.state {
	case Empty:
		answer(kerr.UnknownMemberID.Code)
	case PreparingRebalance:
		// The heartbeat keeps the session alive and tells the member to rejoin.
		g.setHeartbeatDeadline(m, c.now.Add(m.session))
		answer(kerr.RebalanceInProgress.Code)
	default:
		g.setHeartbeatDeadline(m, c.now.Add(m.session))
		answer(0)
	}
}

// leaveGroup is classicGroupLeaveToClassicGroup; v0-2 name one member and
// carry its error at the top level.
func (c *Coordinator) leaveGroup(id RequestID, r *kmsg.LeaveGroupRequest) {
	resp := kmsg.NewPtrLeaveGroupResponse()
	resp.Version = r.Version
	type ident struct{ member, instance string }
	var who []ident
	if r.Version < 3 {
		who = []ident{{member: r.MemberID}}
	} else {
		for _, lm := range r.Members {
			i := ident{member: lm.MemberID}
			if lm.InstanceID != nil {
				i.instance = *lm.InstanceID
			}
			who = append(who, i)
		}
	}
	codes := make([]int16, len(who))
	g := c.groups[r.Group]
	if g != nil {
		c.touch(g)
	}
	switch {
	case r.Group == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
	case g == nil:
		// Kafka answers an unknown group with UNKNOWN_MEMBER_ID per member.
		for i := range codes {
			codes[i] = kerr.UnknownMemberID.Code
		}
	case g.state == Dead:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		removed := 0
		for i, w := range who {
			switch {
			case w.member == "":
				// An unknown member id with an instance id is an admin removal
				// of that static member.
				mid, ok := g.static[w.instance]
				if w.instance == "" || !ok {
					codes[i] = kerr.UnknownMemberID.Code
					continue
				}
				c.removeLeaving(g, g.members[mid])
				removed++
			default:
				if g.pending.remove(w.member) {
					removed++
					continue
				}
				m, code := g.validateMember(w.member, w.instance)
				if code != 0 {
					codes[i] = code
					continue
				}
				c.removeLeaving(g, m)
				removed++
			}
		}
		if removed > 0 {
			switch g.state {
			case Stable, CompletingRebalance:
				c.maybePrepareOrComplete(g, "members left")
			case PreparingRebalance:
				c.maybeCompleteJoin(g)
			}
		}
	}
	if r.Version < 3 {
		if resp.ErrorCode == 0 {
			resp.ErrorCode = codes[0]
		}
	} else if resp.ErrorCode == 0 {
		for i, w := range who {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID = w.member
			if r.Members[i].InstanceID != nil {
				inst := *r.Members[i].InstanceID
				rm.InstanceID = &inst
			}
			rm.ErrorCode = codes[i]
			resp.Members = append(resp.Members, rm)
		}
	}
	c.reply(id, resp)
}

// removeLeaving removes a member that left, failing whatever it has parked.
func (c *Coordinator) removeLeaving(g *group, m *member) {
	c.failParked(g, m, kerr.UnknownMemberID.Code)
	g.remove(m.id)
	c.event(Event{Kind: EventMemberRemoved, Group: g.id, Generation: g.generation, Member: m.id, Detail: "left the group"})
}

func (c *Coordinator) failParked(g *group, m *member, code int16) {
	if m.joinWait != nil {
		c.reply(m.joinWait.id, joinError(m.joinWait.version, code, ""))
		g.setJoinWait(m, nil)
	}
	if m.syncWait != nil {
		c.reply(m.syncWait.id, syncError(m.syncWait.version, code))
		m.syncWait = nil
	}
}

// removeMemberAndUpdate removes a failed member (session expiry) and lets the
// group react: a rebalance, or the end of a join phase it was blocking.
func (c *Coordinator) removeMemberAndUpdate(g *group, m *member, reason string) {
	c.failParked(g, m, kerr.UnknownMemberID.Code)
	g.remove(m.id)
	c.event(Event{Kind: EventMemberRemoved, Group: g.id, Generation: g.generation, Member: m.id, Detail: reason})
	switch g.state {
	case Stable, CompletingRebalance:
		c.maybePrepareOrComplete(g, reason)
	case PreparingRebalance:
		if g.allJoined() {
			c.completeJoin(g)
		}
	}
}

// tickGroup fires the group's due timers.
func (c *Coordinator) tickGroup(g *group) {
	now := c.now
	if end := g.retentionEnd(c.cfg.EmptyGroupRetention); !end.IsZero() && !end.After(now) {
		// Retention ended: forget the group, as Kafka does when its
		// offsets expire.
		c.dropGroup(g)
		c.event(Event{Kind: EventStateChanged, Group: g.id, Generation: g.generation, State: Dead, Detail: "retention ended"})
		return
	}
	for _, id := range g.pending.due(now) {
		// KIP-394: the member never came back with its id.
		g.pending.remove(id)
		if g.state == PreparingRebalance && g.allJoined() {
			c.completeJoin(g)
		}
	}
	// Only sessions due now can expire in this pass: every deadline it
	// sets lies after now. They go in member id order, as everything else.
	expired := g.sessions.appendDue(nil, now)
	slices.SortFunc(expired, byMemberID)
	for _, m := range expired {
		if g.members[m.id] != m || m.heartbeatDeadline.at.IsZero() || m.heartbeatDeadline.at.After(now) {
			continue
		}
		if !m.isNew && (m.joinWait != nil || m.syncWait != nil) {
			// A member waiting for a join or sync answer cannot heartbeat.
			g.setHeartbeatDeadline(m, now.Add(m.session))
			continue
		}
		if c.sessionsPaused {
			g.setHeartbeatDeadline(m, now.Add(m.session))
			continue
		}
		c.removeMemberAndUpdate(g, m, "session timeout")
	}
	if !g.joinDeadline.IsZero() && !g.joinDeadline.After(now) && g.state == PreparingRebalance {
		if g.initialJoin && g.newMemberAdded && g.initialRemaining > 0 {
			// A member arrived during the delay: wait once more.
			g.newMemberAdded = false
			next := min(g.initialDelay, g.initialRemaining)
			g.initialRemaining = max(g.initialRemaining-g.initialDelay, 0)
			g.initialDelay = next
			g.joinDeadline = now.Add(next)
		} else {
			c.completeJoin(g)
		}
	}
	if !g.metadataDeadline.IsZero() && !g.metadataDeadline.After(now) {
		// The metadata did not come in time: assign from what is known, and
		// let the metadata watch rebalance when it arrives.
		g.metadataDeadline = time.Time{}
		if g.state == CompletingRebalance && g.job == 0 {
			c.startAssignment(g)
		}
	}
	if !g.assignDeadline.IsZero() && !g.assignDeadline.After(now) {
		g.assignDeadline = time.Time{}
		if g.state == CompletingRebalance && !g.assigned {
			c.assignmentTimedOut(g)
		}
	}
	if !g.syncDeadline.IsZero() && !g.syncDeadline.After(now) {
		g.syncDeadline = time.Time{}
		if (g.state == CompletingRebalance || g.state == Stable) && len(g.pendingSync) > 0 {
			// Members that never sent SyncGroup are removed, and the group
			// starts over.
			for _, id := range sortedKeys(g.pendingSync) {
				if m := g.members[id]; m != nil {
					c.failParked(g, m, kerr.UnknownMemberID.Code)
					g.remove(id)
					c.event(Event{Kind: EventMemberRemoved, Group: g.id, Generation: g.generation, Member: id, Detail: "no SyncGroup within the rebalance timeout"})
				}
			}
			c.prepareRebalance(g, "members did not sync")
		}
	}
}

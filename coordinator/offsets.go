package coordinator

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// validateOffsetCommit is ClassicGroup.validateOffsetCommit, on a group that
// exists.
func (g *group) validateOffsetCommit(memberID, instance string, generation int32, txn bool) int16 {
	if g.state == Dead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if generation < 0 && g.state == Empty {
		// Admin tools and consumers without group management commit with
		// generation -1 while nobody is a member.
		return 0
	}
	if generation >= 0 || memberID != "" || instance != "" {
		if _, code := g.validateMember(memberID, instance); code != 0 {
			return code
		}
		if generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
	} else if !txn && g.state != Empty {
		return kerr.UnknownMemberID.Code
	}
	if !txn && g.state == CompletingRebalance {
		// The member has the new generation from its JoinGroup but no
		// assignment yet. In PreparingRebalance the pre-bump generation is
		// still current, so eager members commit in their revoke callback.
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// offsetCommit fences a commit; an accepted one is forwarded upstream with
// generation -1 and no member, which the upstream accepts for a group it
// sees as empty.
func (c *Coordinator) offsetCommit(id RequestID, r *kmsg.OffsetCommitRequest) {
	instance := instanceID(r.Version, 7, r.InstanceID)
	generation := r.Generation
	if r.Version == 0 {
		generation = -1
	}
	// OffsetCommit v9+ says GROUP_ID_NOT_FOUND for a group it does not
	// know; older versions keep ILLEGAL_GENERATION for compatibility.
	unknown := kerr.IllegalGeneration.Code
	if r.Version >= 9 {
		unknown = kerr.GroupIDNotFound.Code
	}
	if code := c.fenceCommit(r.Group, r.MemberID, instance, generation, false, unknown); code != 0 {
		c.reply(id, ErrorResponse(r, code))
		return
	}
	fwd := *r
	fwd.Generation, fwd.MemberID, fwd.InstanceID = -1, "", nil
	c.out.Forwards = append(c.out.Forwards, Forward{ID: id, Request: &fwd})
}

// fenceCommit checks a commit's membership against the group, as Kafka's
// coordinator does before it writes offsets: 0 lets it through. A commit
// with a generation for a group the coordinator does not hold gets
// unknown; one without (an admin's, generation -1) passes.
func (c *Coordinator) fenceCommit(group, member, instance string, generation int32, txn bool, unknown int16) int16 {
	if g := c.groups[group]; g != nil {
		return g.validateOffsetCommit(member, instance, generation, txn)
	}
	if generation >= 0 {
		return unknown
	}
	return 0
}

// txnOffsetCommit fences a transactional commit the same way, without the
// state rules Kafka skips for transactions.
func (c *Coordinator) txnOffsetCommit(id RequestID, r *kmsg.TxnOffsetCommitRequest) {
	instance := instanceID(r.Version, 3, r.InstanceID)
	generation := int32(-1)
	member := ""
	if r.Version >= 3 {
		generation, member = r.Generation, r.MemberID
	}
	if code := c.fenceCommit(r.Group, member, instance, generation, true, kerr.IllegalGeneration.Code); code != 0 {
		c.reply(id, ErrorResponse(r, code))
		return
	}
	fwd := *r
	fwd.Generation, fwd.MemberID, fwd.InstanceID = -1, "", nil
	c.out.Forwards = append(c.out.Forwards, Forward{ID: id, Request: &fwd})
}

// deleteGroups deletes Empty groups here and forwards them, so that their
// offsets go too; a group with members gets NON_EMPTY_GROUP.
func (c *Coordinator) deleteGroups(id RequestID, r *kmsg.DeleteGroupsRequest) {
	refused := make(map[string]int16)
	var forward []string
	for _, name := range r.Groups {
		g := c.groups[name]
		switch {
		case g == nil:
			forward = append(forward, name)
		case g.state == Dead:
			refused[name] = kerr.GroupIDNotFound.Code
		case g.state != Empty:
			refused[name] = kerr.NonEmptyGroup.Code
		default:
			// Through the state table, so the driver hears of it: it
			// saves the state and drops the group's metrics.
			c.dropGroup(g)
			c.transition(g, Dead)
			forward = append(forward, name)
		}
	}
	fill := func(resp *kmsg.DeleteGroupsResponse) *kmsg.DeleteGroupsResponse {
		for _, name := range r.Groups {
			if code, ok := refused[name]; ok {
				rg := kmsg.NewDeleteGroupsResponseGroup()
				rg.Group, rg.ErrorCode = name, code
				resp.Groups = append(resp.Groups, rg)
			}
		}
		return resp
	}
	var fwd kmsg.Request
	if len(forward) > 0 {
		f := *r
		f.Groups = forward
		fwd = &f
	}
	resp := kmsg.NewPtrDeleteGroupsResponse()
	resp.Version = r.Version
	answerOrForward(c, id, fwd, resp, fill)
}

// answerOrForward replies with the coordinator's own refusals (fill applied
// to empty) when nothing is left to forward, and otherwise forwards fwd and
// merges the refusals into the upstream answer.
func answerOrForward[Resp kmsg.Response](c *Coordinator, id RequestID, fwd kmsg.Request, empty Resp, fill func(Resp) Resp) {
	if fwd == nil {
		c.reply(id, fill(empty))
		return
	}
	c.out.Forwards = append(c.out.Forwards, Forward{ID: id, Request: fwd, merge: func(up kmsg.Response) kmsg.Response {
		if resp, ok := up.(Resp); ok {
			return fill(resp)
		}
		return up
	}})
}

// offsetDelete refuses the partitions of topics the group's members
// subscribe to (GROUP_SUBSCRIBED_TO_TOPIC) and forwards the rest. A
// non-empty group of another protocol type gets NON_EMPTY_GROUP.
func (c *Coordinator) offsetDelete(id RequestID, r *kmsg.OffsetDeleteRequest) {
	g := c.groups[r.Group]
	if g == nil || g.state == Empty {
		c.out.Forwards = append(c.out.Forwards, Forward{ID: id, Request: r})
		return
	}
	if g.protocolType != "consumer" {
		resp := kmsg.NewPtrOffsetDeleteResponse()
		resp.Version = r.Version
		resp.ErrorCode = kerr.NonEmptyGroup.Code
		c.reply(id, resp)
		return
	}
	subscribed, known := c.groupTopics(g)
	var refused, forward []kmsg.OffsetDeleteRequestTopic
	for _, t := range r.Topics {
		if !known || subscribed[t.Topic] {
			refused = append(refused, t)
		} else {
			forward = append(forward, t)
		}
	}
	fill := func(resp *kmsg.OffsetDeleteResponse) *kmsg.OffsetDeleteResponse {
		for _, t := range refused {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetDeleteResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.GroupSubscribedToTopic.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	var fwd kmsg.Request
	if len(forward) > 0 {
		f := *r
		f.Topics = forward
		fwd = &f
	}
	resp := kmsg.NewPtrOffsetDeleteResponse()
	resp.Version = r.Version
	answerOrForward(c, id, fwd, resp, fill)
}

// groupTopics returns the topics g's members subscribe to with the group's
// protocol. known is false when some member's metadata does not decode:
// Kafka then treats every topic as subscribed.
func (c *Coordinator) groupTopics(g *group) (topics map[string]bool, known bool) {
	topics = make(map[string]bool)
	for _, m := range g.members {
		var s *kmsg.ConsumerMemberMetadata
		if sub := m.subs[g.protocol]; sub != nil {
			s = sub.ConsumerMemberMetadata
		} else {
			var err error
			if s, err = decodeSubscription(m.metadataFor(g.protocol)); err != nil {
				return nil, false
			}
		}
		for _, t := range s.Topics {
			topics[t] = true
		}
	}
	return topics, true
}

// GroupsOf names the groups a group request is about, in its order; none
// for a request of another kind.
func GroupsOf(req kmsg.Request) []string {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		return []string{r.Group}
	case *kmsg.SyncGroupRequest:
		return []string{r.Group}
	case *kmsg.HeartbeatRequest:
		return []string{r.Group}
	case *kmsg.LeaveGroupRequest:
		return []string{r.Group}
	case *kmsg.OffsetCommitRequest:
		return []string{r.Group}
	case *kmsg.TxnOffsetCommitRequest:
		return []string{r.Group}
	case *kmsg.OffsetDeleteRequest:
		return []string{r.Group}
	case *kmsg.DescribeGroupsRequest:
		return r.Groups
	case *kmsg.DeleteGroupsRequest:
		return r.Groups
	case *kmsg.OffsetFetchRequest:
		if r.Version < 8 { // from v8 a request may name several groups
			return []string{r.Group}
		}
		gs := make([]string, 0, len(r.Groups))
		for _, g := range r.Groups {
			gs = append(gs, g.Group)
		}
		return gs
	}
	return nil
}

// ErrorResponse answers req, a group request, with code wherever its
// response carries one, at the highest version the coordinator answers
// below req's; nil for a request of another kind. A gateway answers with
// it what it must refuse outside the coordinator (NOT_COORDINATOR for a
// group whose state it could not save).
func ErrorResponse(req kmsg.Request, code int16) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		return joinError(min(r.Version, 9), code, r.MemberID)
	case *kmsg.SyncGroupRequest:
		return syncError(min(r.Version, 5), code)
	case *kmsg.HeartbeatRequest:
		return heartbeatResponse(min(r.Version, 4), code)
	case *kmsg.LeaveGroupRequest:
		resp := kmsg.NewPtrLeaveGroupResponse()
		resp.Version, resp.ErrorCode = min(r.Version, 5), code
		return resp
	case *kmsg.DescribeGroupsRequest:
		resp := kmsg.NewPtrDescribeGroupsResponse()
		resp.Version = min(r.Version, 5)
		for _, name := range r.Groups {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = name, code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	case *kmsg.ListGroupsRequest:
		resp := kmsg.NewPtrListGroupsResponse()
		resp.Version, resp.ErrorCode = min(r.Version, 5), code
		return resp
	case *kmsg.OffsetCommitRequest:
		resp := kmsg.NewPtrOffsetCommitResponse()
		resp.Version = min(r.Version, 10)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID // v10 names topics by id
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.TxnOffsetCommitRequest:
		resp := kmsg.NewPtrTxnOffsetCommitResponse()
		resp.Version = min(r.Version, 4)
		for _, t := range r.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.DeleteGroupsRequest:
		resp := kmsg.NewPtrDeleteGroupsResponse()
		resp.Version = min(r.Version, 2)
		for _, name := range r.Groups {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = name, code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	case *kmsg.OffsetDeleteRequest:
		resp := kmsg.NewPtrOffsetDeleteResponse()
		resp.ErrorCode = code
		return resp
	}
	return nil
}

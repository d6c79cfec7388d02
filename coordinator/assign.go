package coordinator

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/coordinator/handover"
	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// maxFollowUps bounds consecutive coordinator-started KIP-429 rounds that
// still withhold something.
const maxFollowUps = 8

// jobState is what the coordinator remembers of an outstanding Job.
type jobState struct {
	group      string
	generation int32
	attempt    int
	chain      []string
	req        *abi.Request
}

// ErrInvalidAssignment reports a plugin answer that the coordinator refuses
// to hand out; the next assignor then runs.
var ErrInvalidAssignment = errors.New("invalid assignment")

// ErrRunnerBusy, wrapped by an AssignmentDone error, says that the Job never
// ran because the runner had no room for it in time: the same assignor is
// asked again (EventAssignmentDeferred) rather than the next of the chain,
// until Config.AssignmentTimeout.
var ErrRunnerBusy = errors.New("assignor runner busy")

// decodeSubscription reads a ConsumerProtocolSubscription.
func decodeSubscription(b []byte) (*kmsg.ConsumerMemberMetadata, error) {
	if len(b) < 2 {
		return nil, errors.New("subscription metadata: too short")
	}
	s := new(kmsg.ConsumerMemberMetadata)
	s.Default()
	if err := s.ReadFrom(b); err != nil {
		return nil, fmt.Errorf("subscription metadata: %w", err)
	}
	if s.Version < 0 {
		return nil, fmt.Errorf("subscription metadata: version %d", s.Version)
	}
	for _, o := range s.OwnedPartitions {
		for _, p := range o.Partitions {
			if p < 0 {
				return nil, fmt.Errorf("subscription metadata: owned partition %s-%d", o.Topic, p)
			}
		}
	}
	return s, nil
}

// subscription is a member's decoded subscription for one protocol, with
// its topics sorted and distinct, as assignments and fingerprints need them.
type subscription struct {
	*kmsg.ConsumerMemberMetadata
	// topics is Topics sorted, without repeats; shared, never modified.
	topics []string
}

// newSubscription returns s with its topics sorted and distinct. The
// members of a group mostly subscribe to the same topics, so g keeps the
// latest topic list and a member whose list is equal shares it, its names
// included, rather than keeping a copy: at a hundred topics, a copy per
// member was the largest part of a member's state.
func newSubscription(g *group, s *kmsg.ConsumerMemberMetadata) *subscription {
	if slices.Equal(s.Topics, g.sharedAsSent) {
		s.Topics = g.sharedAsSent
		return &subscription{ConsumerMemberMetadata: s, topics: g.sharedTopics}
	}
	ts := slices.Clone(s.Topics)
	sort.Strings(ts)
	ts = slices.Compact(ts)
	if slices.Equal(ts, g.sharedTopics) {
		ts = g.sharedTopics
	} else {
		g.sharedTopics = slices.Clip(ts)
	}
	// Later members share the list as this one sent it, in its order.
	g.sharedAsSent = slices.Clip(s.Topics)
	return &subscription{ConsumerMemberMetadata: s, topics: ts}
}

// subscribedTopics returns the sorted, distinct topics of m's subscription
// for protocol, or nil when the coordinator did not decode one. The slice
// is shared: callers must not modify it.
func subscribedTopics(m *member, protocol string) []string {
	if s := m.subs[protocol]; s != nil {
		return s.topics
	}
	return nil
}

func equalStrings(a, b []string) bool { return slices.Equal(a, b) }

// assignorChain lists the assignors to try, in order: the group's configured
// assignor or the one serving the protocol, its fallback, then the last
// resort.
func (c *Coordinator) assignorChain(g *group) []string {
	var chain []string
	add := func(name string) {
		if name != "" && !slices.Contains(chain, name) {
			chain = append(chain, name)
		}
	}
	if g.cfg.Assignor != "" {
		add(g.cfg.Assignor)
	} else {
		add(c.protocols[g.protocol])
	}
	add(g.cfg.Fallback)
	add(LastResortAssignor)
	return chain
}

// startAssignment issues the first Job of a new generation.
func (c *Coordinator) startAssignment(g *group) {
	c.takeFingerprint(g)
	js := &jobState{group: g.id, generation: g.generation, chain: c.assignorChain(g), req: c.buildRequest(g)}
	c.issueJob(g, js)
}

func (c *Coordinator) issueJob(g *group, js *jobState) {
	if js.attempt >= len(js.chain) {
		// Every assignor failed: the coordinator's own range assignment keeps
		// the group valid.
		c.finishAssignment(g, js, c.lastResortRange(g, js.req))
		return
	}
	c.nextJob++
	id := c.nextJob
	c.jobs[id] = js
	g.job = id
	req := *js.req
	req.Assignor = js.chain[js.attempt]
	c.out.Jobs = append(c.out.Jobs, Job{ID: id, Group: g.id, Generation: g.generation, Assignor: req.Assignor, Attempt: js.attempt, Request: &req})
	c.event(Event{Kind: EventAssignmentStarted, Group: g.id, Generation: g.generation, Detail: req.Assignor, N: js.attempt})
}

// AssignmentDone reports the result of a Job: the plugin's response, or the
// error that kept it from answering. A failure, an error response or an
// answer the coordinator finds invalid runs the next assignor of the chain;
// an error wrapping ErrRunnerBusy runs the same one again.
func (c *Coordinator) AssignmentDone(now time.Time, jobID uint64, resp *abi.Response, err error) Output {
	c.begin(now)
	js := c.jobs[jobID]
	delete(c.jobs, jobID)
	if js == nil {
		return c.finish()
	}
	g := c.groups[js.group]
	if g != nil {
		c.touch(g)
	}
	if g == nil || g.job != jobID || g.state != CompletingRebalance || g.generation != js.generation {
		c.event(Event{Kind: EventStaleAssignment, Group: js.group, Generation: js.generation})
		return c.finish()
	}
	if err == nil {
		switch {
		case resp == nil:
			err = fmt.Errorf("%w: no response", ErrInvalidAssignment)
		case resp.Error != "":
			err = fmt.Errorf("assignor reported: %s", resp.Error)
		default:
			err = validateResponse(js.req, resp)
		}
	}
	if errors.Is(err, ErrRunnerBusy) {
		// Load is no fault of the assignor: falling back would lose the
		// operator's choice exactly when every group rebalances at once.
		c.event(Event{Kind: EventAssignmentDeferred, Group: g.id, Generation: g.generation, Detail: fmt.Sprintf("assignor %q: %v", js.chain[js.attempt], err), N: js.attempt})
		c.issueJob(g, js)
		return c.finish()
	}
	if err != nil {
		c.event(Event{Kind: EventAssignmentFailed, Group: g.id, Generation: g.generation, Detail: fmt.Sprintf("assignor %q: %v", js.chain[js.attempt], err), N: js.attempt})
		next := *js
		next.attempt++
		c.issueJob(g, &next)
		return c.finish()
	}
	c.finishAssignment(g, js, resp)
	return c.finish()
}

// assignmentTimedOut ends a wait for an assignment that outlasted
// Config.AssignmentTimeout: the job under way is abandoned (its answer, if
// it comes, is stale) and the coordinator hands out the range plugin's
// assignment, as after a chain in which every assignor failed.
func (c *Coordinator) assignmentTimedOut(g *group) {
	waiting := "metadata"
	js := c.jobs[g.job]
	if js != nil {
		waiting = "assignor " + strconv.Quote(js.chain[min(js.attempt, len(js.chain)-1)])
		delete(c.jobs, g.job)
	} else {
		c.takeFingerprint(g)
		js = &jobState{group: g.id, generation: g.generation, chain: c.assignorChain(g), req: c.buildRequest(g)}
	}
	g.job = 0
	g.metadataDeadline = time.Time{}
	c.event(Event{Kind: EventAssignmentTimedOut, Group: g.id, Generation: g.generation,
		Detail: fmt.Sprintf("waiting for %s after %v", waiting, c.cfg.AssignmentTimeout)})
	last := *js
	last.attempt = len(last.chain)
	c.finishAssignment(g, &last, c.lastResortRange(g, last.req))
}

// finishAssignment withholds what must wait for KIP-429's second round, hands
// the rest out and makes the group Stable.
func (c *Coordinator) finishAssignment(g *group, js *jobState, target *abi.Response) {
	g.assignDeadline = time.Time{}
	final, withheld := target, 0
	moved := countMoved(js.req, target)
	if !c.cfg.disableWithholding {
		final, withheld = handover.Withhold(js.req, target)
	}
	local, known := rackLocality(js.req, final)
	unassigned := countUnassigned(js.req, final)
	byMember := make(map[int32]*abi.MemberAssignment, len(final.Members))
	for i := range final.Members {
		byMember[final.Members[i].Member] = &final.Members[i]
	}
	for i := range js.req.Members {
		am := &js.req.Members[i]
		m := g.members[am.MemberID]
		if m == nil {
			continue
		}
		var tps []abi.TopicPartitions
		var userData []byte
		if ma := byMember[int32(i)]; ma != nil {
			tps, userData = mergedByTopic(ma.Partitions), ma.UserData
		}
		// The member's state gets its own copy, one array per member: the
		// driver owns the response it handed in.
		n := 0
		for _, tp := range tps {
			n += len(tp.Partitions)
		}
		own := make([]int32, 0, n)
		byName := make([]topicPartitions, len(tps))
		for k, tp := range tps {
			from := len(own)
			own = append(own, tp.Partitions...)
			byName[k] = topicPartitions{js.req.Topics[tp.Topic].Name, own[from:len(own):len(own)]}
			tps[k].Partitions = byName[k].partitions
		}
		m.setAssigned(byName)
		m.assignment = encodeAssignmentOf(js.req, tps, userData, m.subs[g.protocol])
	}
	g.job = 0
	if withheld > 0 {
		g.followUpStreak++
	} else {
		g.followUpStreak = 0
	}
	// A client that never lets go of what it reports would otherwise make
	// every follow-up withhold again, a rebalance storm; after a few rounds
	// the coordinator leaves the next one to the clients.
	g.followUp = withheld > 0 && g.followUpStreak <= maxFollowUps
	c.event(Event{Kind: EventAssignmentCompleted, Group: g.id, Generation: g.generation, Detail: js.chain[min(js.attempt, len(js.chain)-1)], N: withheld, Moved: moved, Attempt: js.attempt, Members: len(g.members), Cooperative: js.req.RebalanceProtocol == abi.Cooperative, RackLocal: local, RackKnown: known, Unassigned: unassigned})
	g.held = assignmentStats{unassigned: unassigned, rackLocal: local, rackKnown: known}
	g.assigned = true
	c.becomeStableIfSynced(g)
}

// encodeAssignmentOf writes a ConsumerProtocolAssignment of partitions of
// req's topic table, ordered by topic index: the table is sorted by name,
// so topics are written by name without sorting names. Even an empty one is
// written in full: clients fail to decode a zero-length assignment.
func encodeAssignmentOf(req *abi.Request, tps []abi.TopicPartitions, userData []byte, sub *subscription) []byte {
	a := newAssignment(sub, len(tps))
	for _, tp := range tps {
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic = req.Topics[tp.Topic].Name
		at.Partitions = tp.Partitions
		a.Topics = append(a.Topics, at)
	}
	a.UserData = userData
	return a.AppendTo(nil)
}

func newAssignment(sub *subscription, topics int) kmsg.ConsumerMemberAssignment {
	a := kmsg.NewConsumerMemberAssignment()
	if sub != nil {
		// Kafka answers in the version the member subscribed with.
		a.Version = min(max(sub.Version, 0), 3)
	}
	a.Topics = make([]kmsg.ConsumerMemberAssignmentTopic, 0, topics)
	return a
}

// mergedByTopic returns tps ordered by topic index with one entry per topic,
// its partitions ascending and distinct, and no empty entries. A plugin
// answers in topic order, so the common case copies nothing but the list.
func mergedByTopic(tps []abi.TopicPartitions) []abi.TopicPartitions {
	out := make([]abi.TopicPartitions, 0, len(tps))
	for _, tp := range tps {
		if len(tp.Partitions) > 0 {
			out = append(out, tp)
		}
	}
	slices.SortStableFunc(out, byTopicIndex)
	merged := out[:0]
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && out[j].Topic == out[i].Topic {
			j++
		}
		ps := out[i].Partitions
		if j > i+1 {
			ps = nil
			for _, tp := range out[i:j] {
				ps = append(ps, tp.Partitions...)
			}
		}
		ps = normalizedPartitions(ps)
		merged = append(merged, abi.TopicPartitions{Topic: out[i].Topic, Partitions: ps})
		i = j
	}
	if len(merged) == 0 {
		return nil
	}
	return merged
}

func byTopicIndex(a, b abi.TopicPartitions) int { return cmp.Compare(a.Topic, b.Topic) }

// buildRequest describes the group to the plugin. Owned partitions say who
// still holds what: the member's own report when it rejoined, or, for a
// static member that did not rejoin, what the coordinator last gave it, at
// the newest generation.
func (c *Coordinator) buildRequest(g *group) *abi.Request {
	members := g.kafkaOrder()
	prev := g.generation - 1
	req := &abi.Request{
		GroupID:    g.id,
		Generation: g.generation,
		Protocol:   g.protocol,
		Config:     g.cfg.PluginConfig,
	}
	// A member claims what it reported owning when it rejoined, or, for a
	// static member that did not rejoin, what it was last given.
	type claims struct {
		reported []kmsg.ConsumerMemberMetadataOwnedPartition
		held     byName
		gen      int32
	}
	own := make([]claims, len(members))
	names := make(map[string]bool)
	note := func(t string) { names[t] = true }
	var lastTopics []string // members mostly subscribe alike
	for i, m := range members {
		sub := m.subs[g.protocol]
		if sub != nil && !slices.Equal(sub.topics, lastTopics) {
			for _, t := range sub.topics {
				note(t)
			}
			lastTopics = sub.topics
		}
		for _, tp := range m.assignedByName {
			note(tp.topic)
		}
		cl := claims{gen: -1}
		if m.rejoined {
			if sub != nil && len(sub.OwnedPartitions) > 0 {
				cl.reported = sub.OwnedPartitions
				cl.gen = sub.Generation
				if sub.Version < 2 || cl.gen < 0 {
					// No generation (subscription v1, as librdkafka sends). A
					// member that has synced under this id and rejoined holds
					// what it reports now; a member new under this id lost
					// whatever it had when its old membership ended.
					cl.gen = -1
					if m.heldGen >= 0 {
						cl.gen = prev
					}
				}
				if cl.gen > prev {
					// A generation this group never had: not a claim to trust.
					cl = claims{gen: -1}
				}
			}
		} else if len(m.held) > 0 {
			cl = claims{held: m.held, gen: prev}
		}
		for _, o := range cl.reported {
			note(o.Topic)
		}
		for _, tp := range cl.held {
			note(tp.topic)
		}
		own[i] = cl
	}
	if c.meta != nil {
		for _, b := range c.meta.Brokers {
			req.Brokers = append(req.Brokers, abi.Broker{ID: b.ID, Rack: b.Rack})
		}
	}
	pl := c.placementView()
	index := make(map[string]int32)
	for _, name := range sortedKeys(names) {
		t := abi.Topic{Name: name}
		if md, ok := c.topic(name); ok {
			t.Exists, t.ID, t.PartitionCount = true, md.ID, int32(len(md.Partitions))
			t.Partitions = pl.partitions(name, md)
		}
		index[name] = int32(len(req.Topics))
		req.Topics = append(req.Topics, t)
	}
	req.ReplicaSets = pl.sets
	// The topic table is sorted by name, so ordering by index orders by
	// name without comparing strings.
	toTPs := func(a byName) []abi.TopicPartitions {
		if len(a) == 0 {
			return nil
		}
		out := make([]abi.TopicPartitions, len(a))
		for k, tp := range a {
			out[k] = abi.TopicPartitions{Topic: index[tp.topic], Partitions: tp.partitions}
		}
		return out
	}
	// reported is a member's report of what it owns, by topic index: a
	// topic named twice has its partitions joined.
	var scratch []abi.TopicPartitions
	reported := func(os []kmsg.ConsumerMemberMetadataOwnedPartition) []abi.TopicPartitions {
		scratch = scratch[:0]
		for _, o := range os {
			scratch = append(scratch, abi.TopicPartitions{Topic: index[o.Topic], Partitions: o.Partitions})
		}
		return mergedByTopic(scratch)
	}
	// previous is what the member was given in the generation before, in
	// name order, which is index order.
	previous := func(m *member) []abi.TopicPartitions {
		if len(m.assignedByName) == 0 {
			return nil
		}
		out := make([]abi.TopicPartitions, len(m.assignedByName))
		for k, tp := range m.assignedByName {
			out[k] = abi.TopicPartitions{Topic: index[tp.topic], Partitions: tp.partitions}
		}
		return out
	}
	allCoop := len(members) > 0
	for i, m := range members {
		owned := toTPs(own[i].held)
		if own[i].reported != nil {
			owned = reported(own[i].reported)
		}
		am := abi.Member{
			MemberID:        m.id,
			InstanceID:      m.instanceID,
			ClientID:        m.clientID,
			ClientHost:      m.host,
			Rack:            m.rack,
			Cooperative:     len(m.protocols) > 0,
			OwnedGeneration: own[i].gen,
			Owned:           owned,
			Previous:        previous(m),
		}
		for _, p := range m.protocols {
			if !g.cfg.isCooperative(p.Name) {
				am.Cooperative = false
			}
		}
		allCoop = allCoop && am.Cooperative
		for _, t := range subscribedTopics(m, g.protocol) {
			am.Topics = append(am.Topics, index[t])
		}
		if sub := m.subs[g.protocol]; sub != nil {
			am.UserData = sub.UserData
		}
		req.Members = append(req.Members, am)
	}
	if allCoop {
		req.RebalanceProtocol = abi.Cooperative
	}
	return req
}

// normalizedPartitions returns ps ascending and without repeats: ps itself
// when it already is, a sorted copy otherwise.
func normalizedPartitions(ps []int32) []int32 {
	if strictlyAscending(ps) {
		return ps
	}
	ps = slices.Clone(ps)
	slices.Sort(ps)
	return slices.Compact(ps)
}

func strictlyAscending(ps []int32) bool {
	for i := 1; i < len(ps); i++ {
		if ps[i] <= ps[i-1] {
			return false
		}
	}
	return true
}

// placement is the ABI form of the current metadata's replica placement. It
// is built lazily, topic by topic, once per SetMetadata, and shared
// read-only by every request: a million partitions cost their conversion
// once, not at every rebalance.
type placement struct {
	sets  [][]int32
	index map[string]uint32
	parts map[string][]abi.Partition
}

func (c *Coordinator) placementView() *placement {
	if c.place == nil {
		c.place = &placement{index: make(map[string]uint32), parts: make(map[string][]abi.Partition)}
	}
	return c.place
}

func (pl *placement) partitions(name string, md TopicMetadata) []abi.Partition {
	if len(md.Partitions) == 0 {
		return nil
	}
	if ps, ok := pl.parts[name]; ok {
		return ps
	}
	ps := make([]abi.Partition, len(md.Partitions))
	for p, pm := range md.Partitions {
		ps[p] = abi.Partition{Leader: pm.Leader, Replicas: pl.set(pm.Replicas), ISR: pl.set(pm.ISR)}
	}
	pl.parts[name] = ps
	return ps
}

// set returns the index of a replica list, adding it when new.
func (pl *placement) set(ids []int32) uint32 {
	var buf [64]byte
	key := buf[:0]
	for _, id := range ids {
		key = binary.LittleEndian.AppendUint32(key, uint32(id))
	}
	if i, ok := pl.index[string(key)]; ok {
		return i
	}
	i := uint32(len(pl.sets))
	pl.sets = append(pl.sets, slices.Clone(ids))
	pl.index[string(key)] = i
	return i
}

// validateResponse checks a plugin's answer against its request before any
// member sees it, by the ABI's response rules (abi.ValidateResponse). An
// assignor may leave partitions unassigned here: the runtime has held it
// to its own declaration, which the coordinator does not know. The request
// is plain and finishAssignment reads every entry as a topic index, so a
// reference to a topic list is out of range whatever lists the response
// carries.
func validateResponse(req *abi.Request, resp *abi.Response) error {
	plain := *resp
	plain.TopicLists = nil
	if err := abi.ValidateResponse(req, &plain, abi.AssignorInfo{MayLeaveUnassigned: true}); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidAssignment, err)
	}
	return nil
}

// lastResortRange is Kafka's range assignment without racks, computed by the
// coordinator itself when every plugin has failed: the range plugin's own
// algorithm, run in process, so that it cannot fail the way the plugin did.
// It errs only on a subscription to a topic the request lacks, which
// buildRequest never writes; should it ever, nobody gets anything, which
// still keeps the group valid.
func (c *Coordinator) lastResortRange(g *group, req *abi.Request) *abi.Response {
	resp, err := rangeassignor.AssignWithoutRacks(req)
	if err != nil {
		// Nothing is left to try: members get nothing, and the event says
		// why.
		c.event(Event{Kind: EventAssignmentFailed, Group: g.id, Generation: g.generation, Detail: fmt.Sprintf("last resort %q: %v", LastResortAssignor, err)})
		return &abi.Response{}
	}
	return resp
}

// countMoved counts the partitions target gives a member that did not hold
// them in the previous generation (its Previous): the partitions that change
// owner, including those of members that left and new partitions.
func countMoved(req *abi.Request, target *abi.Response) int {
	moved := 0
	// had[t] is the member's previous partitions of topic t, ascending;
	// a slice by topic index, reset after each member, costs no map.
	had := make([][]int32, len(req.Topics))
	for _, ma := range target.Members {
		if ma.Member < 0 || int(ma.Member) >= len(req.Members) {
			continue
		}
		prev := slices.DeleteFunc(slices.Clone(req.Members[ma.Member].Previous), func(tp abi.TopicPartitions) bool {
			return tp.Topic < 0 || int(tp.Topic) >= len(had)
		})
		for _, tp := range prev {
			if had[tp.Topic] == nil {
				had[tp.Topic] = tp.Partitions
			} else {
				had[tp.Topic] = append(slices.Clone(had[tp.Topic]), tp.Partitions...)
			}
		}
		for _, tp := range prev {
			if ps := had[tp.Topic]; !slices.IsSorted(ps) {
				had[tp.Topic] = slices.Sorted(slices.Values(ps))
			}
		}
		for _, tp := range ma.Partitions {
			if tp.Topic < 0 || int(tp.Topic) >= len(had) {
				moved += len(tp.Partitions)
				continue
			}
			for _, p := range tp.Partitions {
				if _, ok := slices.BinarySearch(had[tp.Topic], p); !ok {
					moved++
				}
			}
		}
		for _, tp := range prev {
			had[tp.Topic] = nil
		}
	}
	return moved
}

// rackLocality counts the partitions of resp given to a member with a rack
// whose replicas' racks are known (known), and among them those with a
// replica in the member's rack (local): the share of fetches that can stay
// in the member's rack.
func rackLocality(req *abi.Request, resp *abi.Response) (local, known int) {
	brokerRack := make(map[int32]string, len(req.Brokers))
	for _, b := range req.Brokers {
		if b.Rack != "" {
			brokerRack[b.ID] = b.Rack
		}
	}
	if len(brokerRack) == 0 {
		return 0, 0
	}
	// setRacks[i] holds the racks of replica set i's brokers.
	setRacks := make([][]string, len(req.ReplicaSets))
	for i, set := range req.ReplicaSets {
		for _, id := range set {
			if r, ok := brokerRack[id]; ok {
				setRacks[i] = append(setRacks[i], r)
			}
		}
	}
	for _, ma := range resp.Members {
		if ma.Member < 0 || int(ma.Member) >= len(req.Members) {
			continue
		}
		rack := req.Members[ma.Member].Rack
		if rack == "" {
			continue
		}
		for _, tp := range ma.Partitions {
			if tp.Topic < 0 || int(tp.Topic) >= len(req.Topics) {
				continue
			}
			parts := req.Topics[tp.Topic].Partitions
			for _, p := range tp.Partitions {
				if p < 0 || int(p) >= len(parts) || int(parts[p].Replicas) >= len(setRacks) {
					continue
				}
				racks := setRacks[parts[p].Replicas]
				if len(racks) == 0 {
					continue
				}
				known++
				if slices.Contains(racks, rack) {
					local++
				}
			}
		}
	}
	return local, known
}

// countUnassigned counts the partitions of subscribed, existing topics that
// resp gives nobody: partitions withheld for a KIP-429 handover, and any an
// assignor that may leave partitions unassigned left out. resp has been
// validated, so no partition is counted twice.
func countUnassigned(req *abi.Request, resp *abi.Response) int {
	subscribed := make([]bool, len(req.Topics))
	total := 0
	for _, m := range req.Members {
		for _, t := range m.Topics {
			if t >= 0 && int(t) < len(subscribed) && !subscribed[t] && req.Topics[t].Exists {
				subscribed[t] = true
				total += int(req.Topics[t].PartitionCount)
			}
		}
	}
	for _, ma := range resp.Members {
		for _, tp := range ma.Partitions {
			if tp.Topic >= 0 && int(tp.Topic) < len(subscribed) && subscribed[tp.Topic] {
				total -= len(tp.Partitions)
			}
		}
	}
	return max(total, 0)
}

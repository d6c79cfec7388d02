package loadtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestTimeout bounds the requests that the target should answer at
// once (Java's request.timeout.ms); JoinGroup and SyncGroup may wait for
// the rebalance, and get the rebalance timeout and this more.
const requestTimeout = 30 * time.Second

// retryBackoff is the pause before looking for the coordinator again.
const retryBackoff = 100 * time.Millisecond

// Control flow of a member, as errors its steps return.
var (
	// errRejoin: the group is rebalancing, or forgot the member; join
	// again.
	errRejoin = errors.New("rejoin")
	// errCoordinatorMoved: NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE;
	// find the coordinator, then join again.
	errCoordinatorMoved = errors.New("coordinator moved")
	// errStopped: the run asked members to stop.
	errStopped = errors.New("stopped")
)

// transportError is a request that got no answer: its connection failed.
type transportError struct {
	key int16
	err error
}

func (e transportError) Error() string {
	return fmt.Sprintf("%s: %v", kmsg.NameForKey(e.key), e.err)
}
func (e transportError) Unwrap() error { return e.err }

// ProtocolError is an error code a member cannot carry on after, such as
// INVALID_SESSION_TIMEOUT or GROUP_AUTHORIZATION_FAILED: the run stops
// with it.
type ProtocolError struct {
	// Group and Member say who got it; API is the request.
	Group, API string
	Member     int
	// Code is the Kafka error code, and Message any text the target sent
	// with it (the target's own bytes: escape it for a terminal).
	Code    int16
	Message string
}

func (e *ProtocolError) Error() string {
	s := fmt.Sprintf("group %s member %d: %s: %s", e.Group, e.Member, e.API, codeName(e.Code))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// member is one simulated consumer. Its goroutine owns every field but
// done, on which its connections' readers hand answers back, and the
// heartbeat's, which it shares with the scheduler by hbState
// (heartbeat.go). At most three of its requests are in flight (one that
// blocks, a heartbeat and a commit), within done's capacity, so a reader
// never waits for it.
type member struct {
	r        *run
	g, i     int // group and index in it
	slot     int // index among all members, which picks a shared connection
	group    string
	clientID *string
	done     chan *call
	ctx      context.Context
	cancel   context.CancelFunc
	exited   chan struct{}

	// cn carries the member's requests to its coordinator, and jcn its
	// JoinGroup and SyncGroup: the same connection unless connections
	// are shared (see joinConn).
	cn, jcn *conn
	coord   string // the coordinator's address, once found

	id       string
	gen      int32
	protocol string
	owned    []kmsg.ConsumerMemberAssignmentTopic
	ownedGen int32

	// hb is sent by the scheduler on hbConn while hbState is armed (see
	// heartbeat.go); hbOutstanding is set while one sent before a
	// disarm is still to come back.
	hb            *call
	hbReq         *kmsg.HeartbeatRequest
	hbState       atomic.Int32
	hbConn        *conn
	hbOutstanding bool

	commit         *call
	commitReq      *kmsg.OffsetCommitRequest
	commitInFlight bool
	offset         int64
}

func newMember(r *run, g, i int) *member {
	m := &member{
		r: r, g: g, i: i, slot: g*r.cfg.Members + i,
		group:    r.groups[g],
		clientID: kmsg.StringPtr("loadtest-" + strconv.Itoa(g) + "-" + strconv.Itoa(i)),
		done:     make(chan *call, 4),
		exited:   make(chan struct{}),
		gen:      -1, ownedGen: -1,
	}
	m.ctx, m.cancel = context.WithCancel(r.ctx)
	m.hbReq = kmsg.NewPtrHeartbeatRequest()
	m.hb = newCall(m.hbReq, m.done)
	m.hb.onDone = m.heartbeatDone
	m.commitReq = kmsg.NewPtrOffsetCommitRequest()
	m.commit = newCall(m.commitReq, m.done)
	return m
}

func (m *member) cooperative() bool { return m.r.cfg.Protocol == ProtocolCooperativeSticky }

// loop is the member's life after it connected: join, sync, heartbeat
// and commit, and join again whenever the group or the connection asks
// for it, until the run stops it. Only an error the member cannot carry
// on after is returned.
func (m *member) loop() error {
	defer close(m.exited)
	for {
		err := m.joinAndSync()
		if err == nil {
			err = m.steady()
		}
		switch {
		case err == nil, errors.Is(err, errStopped), m.ctx.Err() != nil:
			return nil
		case errors.Is(err, errRejoin):
		case errors.As(err, new(transportError)), errors.Is(err, errCoordinatorMoved):
			if te := (transportError{}); errors.As(err, &te) {
				m.r.countTransport(te.key)
			}
			m.r.tracker.joining(m.g, m.i, time.Now())
			if err := m.reconnect(errors.Is(err, errCoordinatorMoved)); err != nil {
				if errors.Is(err, errStopped) || m.ctx.Err() != nil {
					return nil
				}
				return err
			}
		default:
			return err
		}
	}
}

// connect opens the member's connection to its coordinator: a
// connection to the bootstrap address, FindCoordinator on it, and one to
// the address it names when that is another.
func (m *member) connect(refind bool) error {
	if refind || m.coord == "" {
		boot, err := m.r.connTo(m.ctx, m.r.addr, m.slot, m.clientID)
		if err != nil {
			return err
		}
		coord, err := m.findCoordinator(boot)
		if err != nil {
			m.r.release(boot)
			return err
		}
		m.coord = coord
		if coord == boot.addr {
			m.cn = boot
		} else {
			m.r.release(boot)
		}
	}
	if m.cn == nil {
		cn, err := m.r.connTo(m.ctx, m.coord, m.slot, m.clientID)
		if err != nil {
			return err
		}
		m.cn = cn
	}
	// The first join's connection is opened here, with the others, so
	// that join-to-stable does not count ten thousand dials.
	_, err := m.joinConn()
	return err
}

// joinConn returns the connection for JoinGroup and SyncGroup. It is cn,
// unless connections are shared: then it is one of the member's own,
// opened for the rebalance and closed once the member is stable
// (releaseJoinConn). A JoinGroup waits for the whole group's rebalance,
// and a target answers a connection's requests in order: on a shared
// connection it would hold up the heartbeat answers that tell other
// members to rejoin, and their groups, and so itself, would wait for
// ever. A client has its own connection for the same reason.
func (m *member) joinConn() (*conn, error) {
	if m.r.cfg.SharedConnections == 0 {
		return m.cn, nil
	}
	if m.jcn != nil && !m.jcn.failed() {
		return m.jcn, nil
	}
	m.releaseJoinConn()
	c, err := m.r.dialOwn(m.ctx, m.coord, m.clientID)
	if err != nil {
		return nil, transportError{int16(kmsg.JoinGroup), err}
	}
	m.jcn = c
	return c, nil
}

// releaseJoinConn closes a shared-mode member's join connection.
func (m *member) releaseJoinConn() {
	if m.r.cfg.SharedConnections > 0 && m.jcn != nil {
		m.r.closeOwn(m.jcn)
	}
	if m.r.cfg.SharedConnections > 0 {
		m.jcn = nil
	}
}

// reconnect replaces a failed connection, or follows the coordinator,
// retrying until it succeeds or the run stops the member.
func (m *member) reconnect(refind bool) error {
	if m.cn != nil {
		m.r.release(m.cn)
	}
	m.releaseJoinConn()
	m.cn, m.jcn = nil, nil
	for backoff := retryBackoff; ; backoff = min(2*backoff, time.Second) {
		if err := m.sleep(backoff); err != nil {
			return err
		}
		err := m.connect(refind)
		if err == nil {
			return nil
		}
		var pe *ProtocolError
		if errors.As(err, &pe) {
			return err
		}
		m.r.countTransport(int16(kmsg.FindCoordinator))
		refind = true
	}
}

func (m *member) sleep(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-m.ctx.Done():
		return m.ctx.Err()
	case <-m.r.stop:
		return errStopped
	}
}

// findCoordinator asks cn which broker coordinates the group.
func (m *member) findCoordinator(cn *conn) (string, error) {
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = m.group            // v0-v3
		req.CoordinatorKeys = []string{m.group} // v4+, KIP-699
		c := newCall(req, m.done)
		if err := m.await(cn, c, requestTimeout, true); err != nil {
			return "", err
		}
		resp := c.resp.(*kmsg.FindCoordinatorResponse)
		code, msg, host, port := resp.ErrorCode, resp.ErrorMessage, resp.Host, resp.Port
		if resp.Version >= 4 {
			if len(resp.Coordinators) != 1 {
				return "", fmt.Errorf("group %s: FindCoordinator: %d coordinators in the answer for one group", m.group, len(resp.Coordinators))
			}
			co := resp.Coordinators[0]
			code, msg, host, port = co.ErrorCode, co.ErrorMessage, co.Host, co.Port
		}
		m.r.count(int16(kmsg.FindCoordinator), code)
		switch kerr.ErrorForCode(code) {
		case nil:
			return net.JoinHostPort(host, strconv.Itoa(int(port))), nil
		case kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress, kerr.NotCoordinator:
			if err := m.sleep(retryBackoff); err != nil {
				return "", err
			}
		default:
			return "", m.protocolError(int16(kmsg.FindCoordinator), code, msg)
		}
	}
}

// await sends c on cn and waits for its answer. Meanwhile it takes in the
// answers of a heartbeat or commit sent before the group began to
// rebalance. A request unanswered after timeout fails its connection, as
// a client's request timeout does; stoppable lets the run's stop end the
// wait.
func (m *member) await(cn *conn, c *call, timeout time.Duration, stoppable bool) error {
	cn.send(c)
	t := time.NewTimer(timeout)
	defer t.Stop()
	stop := m.r.stop
	if !stoppable {
		stop = nil
	}
	for {
		select {
		case got := <-m.done:
			if got != c {
				m.absorb(got)
				continue
			}
			if c.err != nil {
				var de decodeError
				if errors.As(c.err, &de) {
					return fmt.Errorf("group %s member %d: %w", m.group, m.i, c.err)
				}
				return transportError{c.key, c.err}
			}
			return nil
		case <-t.C:
			cn.fail(fmt.Errorf("%s unanswered after %v", kmsg.NameForKey(c.key), timeout))
		case <-m.ctx.Done():
			return m.ctx.Err()
		case <-stop:
			return errStopped
		}
	}
}

// absorb takes the answer of a heartbeat or commit that arrives while the
// member waits for another request: it is counted, and what it says
// about the group no longer matters, since the member is joining.
func (m *member) absorb(c *call) {
	switch c {
	case m.hb: // measured on arrival, by heartbeatDone
		m.hbOutstanding = false
		if c.err == nil {
			m.r.count(c.key, m.hbResp().ErrorCode)
		}
	case m.commit:
		m.commitInFlight = false
		if c.err == nil {
			code := commitCode(m.commitResp())
			m.measured(c, m.r.commitLat, &m.r.commitAnswered, code)
			m.r.count(c.key, code)
		}
	}
}

func (m *member) hbResp() *kmsg.HeartbeatResponse { return m.hb.resp.(*kmsg.HeartbeatResponse) }
func (m *member) commitResp() *kmsg.OffsetCommitResponse {
	return m.commit.resp.(*kmsg.OffsetCommitResponse)
}

// joinAndSync joins the group and syncs, until the member has an
// assignment it can keep.
func (m *member) joinAndSync() error {
	for {
		m.r.noteJoin()
		m.r.tracker.joining(m.g, m.i, time.Now())
		if !m.cooperative() {
			m.lose() // eager: everything is revoked before a join
		}
		ownedGen := int32(-1)
		if len(m.owned) > 0 {
			ownedGen = m.ownedGen
		}
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group = m.group
		req.SessionTimeoutMillis = int32(m.r.cfg.SessionTimeout.Milliseconds())
		req.RebalanceTimeoutMillis = int32(m.r.cfg.RebalanceTimeout.Milliseconds())
		req.MemberID = m.id
		req.ProtocolType = "consumer"
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name = m.r.cfg.Protocol
		p.Metadata = subscription(m.r.topics, m.owned, ownedGen)
		req.Protocols = append(req.Protocols, p)
		jcn, err := m.joinConn()
		if err != nil {
			return err
		}
		jc := newCall(req, m.done)
		if err := m.await(jcn, jc, m.r.cfg.RebalanceTimeout+5*time.Second, true); err != nil {
			return err
		}
		join := jc.resp.(*kmsg.JoinGroupResponse)
		m.r.count(jc.key, join.ErrorCode)
		switch err := kerr.ErrorForCode(join.ErrorCode); err {
		case nil:
		case kerr.MemberIDRequired:
			m.id = join.MemberID // KIP-394: join again under the id the coordinator chose
			continue
		case kerr.UnknownMemberID:
			m.reset() // the session is gone: join as a new member
			continue
		case kerr.RebalanceInProgress, kerr.IllegalGeneration:
			continue
		case kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress:
			return errCoordinatorMoved
		default:
			return m.protocolError(jc.key, join.ErrorCode, nil)
		}
		m.id, m.gen, m.protocol = join.MemberID, join.Generation, m.r.cfg.Protocol
		if join.Protocol != nil {
			m.protocol = *join.Protocol
		}

		sreq := kmsg.NewPtrSyncGroupRequest()
		sreq.Group, sreq.Generation, sreq.MemberID = m.group, m.gen, m.id
		sreq.ProtocolType, sreq.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr(m.protocol) // v5+, KIP-559
		if join.LeaderID == m.id && len(join.Members) > 0 && !join.SkipAssignment {
			ga, err := leaderAssign(join.Members, m.r.partitions, m.cooperative())
			if err != nil {
				return fmt.Errorf("group %s member %d: as the leader: %w", m.group, m.i, err)
			}
			sreq.GroupAssignment = ga
		}
		sc := newCall(sreq, m.done)
		if err := m.await(jcn, sc, m.r.cfg.RebalanceTimeout+5*time.Second, true); err != nil {
			return err
		}
		sync := sc.resp.(*kmsg.SyncGroupResponse)
		m.r.count(sc.key, sync.ErrorCode)
		switch err := kerr.ErrorForCode(sync.ErrorCode); err {
		case nil:
		case kerr.RebalanceInProgress:
			continue // a member joined meanwhile
		case kerr.UnknownMemberID:
			m.reset()
			continue
		case kerr.IllegalGeneration:
			m.lose()
			continue
		case kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress:
			return errCoordinatorMoved
		default:
			return m.protocolError(sc.key, sync.ErrorCode, nil)
		}
		next, err := decodeAssignment(sync.MemberAssignment)
		if err != nil {
			return fmt.Errorf("group %s member %d: SyncGroup: the assignment: %w", m.group, m.i, err)
		}
		// KIP-429: a member whose assignment drops partitions it owned
		// revokes them and rejoins at once, so that the next round can
		// give them to their new owner.
		revoking := m.cooperative() && revoked(m.owned, next)
		m.owned, m.ownedGen = next, m.gen
		m.r.tracker.synced(m.g, m.i, m.gen, next, revoking, time.Now())
		if revoking {
			m.r.revocations.Add(1)
			continue
		}
		m.releaseJoinConn()
		m.prepareSteady()
		return nil
	}
}

// lose forgets the owned partitions: revoked before an eager join, or
// lost with the generation.
func (m *member) lose() { m.owned, m.ownedGen = nil, -1 }

// reset makes the member a new one, after the coordinator forgot it.
func (m *member) reset() {
	m.id, m.gen = "", -1
	m.lose()
}

// prepareSteady fills the heartbeat and commit requests for the
// generation, once, so that sending them allocates nothing.
func (m *member) prepareSteady() {
	m.hbReq.Group, m.hbReq.Generation, m.hbReq.MemberID = m.group, m.gen, m.id
	cr := m.commitReq
	cr.Group, cr.Generation, cr.MemberID = m.group, m.gen, m.id
	cr.Topics = cr.Topics[:0]
	for _, t := range m.owned {
		ct := kmsg.NewOffsetCommitRequestTopic()
		ct.Topic = t.Topic
		for _, p := range t.Partitions {
			cp := kmsg.NewOffsetCommitRequestTopicPartition()
			cp.Partition = p
			ct.Partitions = append(ct.Partitions, cp)
		}
		cr.Topics = append(cr.Topics, ct)
	}
}

// steady heartbeats and commits until the group rebalances, the
// connection fails or the run stops; it returns why.
func (m *member) steady() error {
	if err := m.arm(); err != nil {
		return err
	}
	defer m.disarm()
	cfg := &m.r.cfg
	// The first commit is at a random point of the interval, as the
	// heartbeats' phases are (heartbeat.go); the rest keep to the
	// schedule: a member that fell behind counts the slots it missed as
	// offered, so a slow generator shows as commits not answered.
	nextCommit := time.Now().Add(time.Duration(rand.Int64N(int64(cfg.Commit))) + 1)
	commitT := time.NewTimer(time.Until(nextCommit))
	defer commitT.Stop()
	for {
		select {
		case now := <-commitT.C:
			slots := due(&nextCommit, now, cfg.Commit)
			commitT.Reset(nextCommit.Sub(now))
			if len(m.commitReq.Topics) == 0 {
				continue // a member with no partitions has nothing to commit
			}
			steady := m.r.inSteady()
			if steady {
				m.r.commitOffered.Add(slots)
			}
			if m.commitInFlight {
				m.checkStale(m.commit, now)
				continue
			}
			m.offset++
			for i := range m.commitReq.Topics {
				for j := range m.commitReq.Topics[i].Partitions {
					m.commitReq.Topics[i].Partitions[j].Offset = m.offset
				}
			}
			m.commitInFlight, m.commit.steady = true, steady
			m.cn.send(m.commit)
		case c := <-m.done:
			if err := m.answered(c); err != nil {
				return err
			}
		case <-m.ctx.Done():
			return m.ctx.Err()
		case <-m.r.stop:
			m.disarm()
			m.leave()
			return errStopped
		}
	}
}

// due advances *next past now by whole intervals and returns how many
// scheduled slots that passed.
func due(next *time.Time, now time.Time, interval time.Duration) int64 {
	n := int64(now.Sub(*next)/interval) + 1
	*next = next.Add(time.Duration(n) * interval)
	return n
}

// checkStale fails the connection of a request unanswered past the
// request timeout, as a client gives up on a broker that went quiet.
func (m *member) checkStale(c *call, now time.Time) {
	if now.Sub(c.sent) > requestTimeout {
		m.cn.fail(fmt.Errorf("%s unanswered after %v", kmsg.NameForKey(c.key), requestTimeout))
	}
}

// answered handles a heartbeat's or a commit's answer in the steady
// phase.
func (m *member) answered(c *call) error {
	var code int16
	switch c {
	case m.hb: // an error, or an answer after a disarm (heartbeatDone)
		if c.err != nil {
			return transportError{c.key, c.err}
		}
		code = m.hbResp().ErrorCode
	case m.commit:
		m.commitInFlight = false
		if c.err != nil {
			return transportError{c.key, c.err}
		}
		code = commitCode(m.commitResp())
		m.measured(c, m.r.commitLat, &m.r.commitAnswered, code)
	default:
		return nil // a request abandoned earlier
	}
	if code == 0 {
		return nil
	}
	m.r.count(c.key, code)
	switch err := kerr.ErrorForCode(code); err {
	case kerr.RebalanceInProgress:
		m.r.tracker.joining(m.g, m.i, time.Now())
		return errRejoin
	case kerr.UnknownMemberID:
		m.reset()
		return errRejoin
	case kerr.IllegalGeneration:
		m.lose()
		return errRejoin
	case kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress:
		return errCoordinatorMoved
	}
	if c == m.commit {
		return nil // counted; a failed commit leaves the member in its group
	}
	return m.protocolError(c.key, code, nil)
}

// measured records a steady-phase answer's round trip, and counts it
// answered when it carries no error.
func (m *member) measured(c *call, h *histogram, answered *atomic.Int64, code int16) {
	if !c.steady {
		return
	}
	h.record(c.rtt)
	if code == 0 {
		answered.Add(1)
	}
}

// commitCode is an OffsetCommit answer's first error code.
func commitCode(resp *kmsg.OffsetCommitResponse) int16 {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return p.ErrorCode
			}
		}
	}
	return 0
}

// leave sends LeaveGroup, so that the target need not wait for the
// session to expire, and waits briefly for the answer.
func (m *member) leave() {
	if m.id == "" || m.cn == nil {
		return
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = m.group, m.id // v0-v2
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = m.id
	req.Members = append(req.Members, lm) // v3+, KIP-345
	_ = m.await(m.cn, newCall(req, m.done), 2*time.Second, false)
}

// kill stops the member as a consumer process dies: no LeaveGroup, its
// connection closed, so the target learns of it when the session
// expires.
func (m *member) kill() {
	m.cancel()
	<-m.exited
	if m.cn != nil {
		m.r.release(m.cn)
	}
	m.releaseJoinConn()
	m.r.tracker.left(m.g, m.i, time.Now())
}

func (m *member) protocolError(key, code int16, msg *string) error {
	pe := &ProtocolError{Group: m.group, Member: m.i, API: kmsg.NameForKey(key), Code: code}
	if msg != nil {
		pe.Message = *msg
	}
	return pe
}

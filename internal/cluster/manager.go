package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
)

// Groups is what a Manager needs of the coordinator's driver
// (*driver.Driver is one): it loads the groups of a shard the gateway
// takes, and unloads those of a shard it gives up.
type Groups interface {
	Load(states []coordinator.GroupState) error
	Unload(groups []string) error
	Groups() []string
}

// ManagerConfig is what a Manager needs.
type ManagerConfig struct {
	// Name is the cluster's name: the gateways' group is
	// "wasmassign-<name>", and the shards' transactional ids derive from it.
	Name string
	// Topic is the state topic, of Shards partitions (EnsureStateTopic).
	Topic  string
	Shards int
	// ID and Address are this gateway's identity and where clients reach
	// it; the timeouts are its membership's (MembershipConfig).
	ID, Address                                                string
	SessionTimeout, RebalanceTimeout, HeartbeatInterval, Lease time.Duration
	// Opts connect a client to the upstream cluster.
	Opts []kgo.Opt
	// Groups is the coordinator's driver the shards' groups are loaded
	// into.
	Groups Groups
	Logger *slog.Logger
	// Clock is the monotonic clock leases run on; nil is BootClock.
	Clock Clock
	// Admin is where operators reach this gateway's admin API, published
	// to the others for `wasmassign cluster`; empty for none.
	Admin string
	// Hooks observe the Manager (see Hook).
	Hooks []Hook
}

// GroupName is the gateways' own consumer group of cluster name.
func GroupName(name string) string { return "wasmassign-" + name }

// Ownership is what a gateway may do with a group's requests now.
type Ownership int

const (
	// Elsewhere: another gateway owns the group, or none does yet; its
	// requests get NOT_COORDINATOR.
	Elsewhere Ownership = iota
	// Loading: this gateway was given the group's shard and has not
	// finished reading it, or waits out the last owner's lease; its
	// requests get COORDINATOR_LOAD_IN_PROGRESS.
	Loading
	// Serving: this gateway answers for the group.
	Serving
)

// ErrNotOwner is the error of a save of a group whose shard this gateway
// does not serve now: what waited for the save is answered
// NOT_COORDINATOR.
var ErrNotOwner = errors.New("this gateway does not own the group's shard")

// Manager is a gateway's part in its cluster: it runs its Membership of
// the gateways' group against the upstream, takes the shards it is given
// (claims each, reads it to the claim, loads its groups into the driver
// once the last owner can no longer answer), gives up the shards it loses
// (unloads their groups, and releases those it hands over cleanly), and
// saves the groups' state to their shards (Save implements driver.Saver).
// It is safe for concurrent use.
type Manager struct {
	cfg         ManagerConfig
	clock       Clock
	log         *slog.Logger
	incarnation uint64
	membership  *Membership
	leave       chan struct{}
	leaveOnce   sync.Once
	// brokersSet tells Run that SetBrokers changed brokers.
	brokersSet chan struct{}

	mu         sync.Mutex
	shards     map[int]*ownedShard
	leaseUntil time.Duration // the membership's lease, as last seen by Run
	layout     []Owner
	generation int32
	brokers    map[int32]int32 // SetBrokers', for Run to publish
	layoutAt   time.Time       // when the layout last changed
	movedAt    time.Time       // when this gateway last took or gave up a shard
	wg         sync.WaitGroup
}

// ShardState is where a shard this gateway holds is in its life; its
// value is what the admin API and `wasmassign cluster` show.
type ShardState string

const (
	// ShardLoading: claimed, and being read, or waiting out the last
	// owner's lease; its groups are answered COORDINATOR_LOAD_IN_PROGRESS.
	ShardLoading ShardState = "loading"
	// ShardServing: its groups are answered here.
	ShardServing ShardState = "serving"
)

// ownedShard is one shard this gateway was given.
type ownedShard struct {
	shard      int
	generation int32
	receivedAt time.Duration
	status     ShardState
	since      time.Time          // when it took its status
	cancel     context.CancelFunc // ends the load and the writes
	writer     *ShardWriter       // set once claimed
	// saves and commits waiting for the shard's writer, in order; wake
	// tells the writer there are some.
	saves   []pendingSave
	commits []pendingCommit
	wake    chan struct{}
	done    chan struct{} // closed when the shard's goroutine ends
	// stopped is set once that goroutine has answered the last saves and
	// commits: later ones would wait for a writer that is gone.
	stopped bool
}

type pendingSave struct {
	rec  Record
	done func(error)
}

type pendingCommit struct {
	req  *kmsg.OffsetCommitRequest
	done chan commitResult // buffered: the writer never waits on it
}

type commitResult struct {
	resp *kmsg.OffsetCommitResponse
	err  error
}

// NewManager returns a Manager that has not joined yet: Run joins.
func NewManager(cfg ManagerConfig) *Manager {
	clock := cfg.Clock
	if clock == nil {
		clock = BootClock()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mc := MembershipConfig{
		Group: GroupName(cfg.Name), Topic: cfg.Topic, Shards: cfg.Shards, ID: cfg.ID, Address: cfg.Address, Admin: cfg.Admin,
		SessionTimeout: cfg.SessionTimeout, RebalanceTimeout: cfg.RebalanceTimeout,
		HeartbeatInterval: cfg.HeartbeatInterval, Lease: cfg.Lease,
	}
	return &Manager{
		cfg: cfg, clock: clock, log: log.With("cluster", cfg.Name, "gateway", cfg.ID),
		incarnation: rand.Uint64(), membership: NewMembership(mc, clock),
		leave: make(chan struct{}), brokersSet: make(chan struct{}, 1), shards: map[int]*ownedShard{}, generation: -1,
	}
}

// Owner says what this gateway may do with group's requests now, and
// which gateway owns the group: this one, another, or (a zero Owner) none
// that this gateway knows of.
func (m *Manager) Owner(group string) (Ownership, Owner) {
	shard := ShardOf(group, m.cfg.Shards)
	m.mu.Lock()
	defer m.mu.Unlock()
	me := Owner{ID: m.cfg.ID, Address: m.cfg.Address}
	if s := m.shards[shard]; s != nil {
		switch {
		case m.clock() >= m.leaseUntil:
			// The lease ran out, and Run has not heard yet: another
			// gateway may be given the shard from now on.
			return Elsewhere, Owner{}
		case s.stopped:
			// Its writer is gone (fenced, or being given up).
			return Elsewhere, Owner{}
		case s.status == ShardServing:
			return Serving, me
		default:
			return Loading, me
		}
	}
	for _, o := range m.layout {
		if o.ID != m.cfg.ID && slices.Contains(o.Shards, shard) {
			return Elsewhere, Owner{ID: o.ID, Address: o.Address}
		}
	}
	return Elsewhere, Owner{}
}

// ServingFor is how much longer this gateway may answer for group's
// requests, and whether it serves the group now: what it sends upstream
// for the group must arrive before then, when another gateway may take the
// group over.
func (m *Manager) ServingFor(group string) (time.Duration, bool) {
	shard := ShardOf(group, m.cfg.Shards)
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.shards[shard]
	left := m.leaseUntil - m.clock()
	if s == nil || s.stopped || s.status != ShardServing || left <= 0 {
		return 0, false
	}
	return left, true
}

// Layout is every gateway of the cluster, as the latest generation of the
// gateways' group placed the shards; nil before the first.
func (m *Manager) Layout() []Owner {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.layout)
}

// PeerNode is the node id by which clients know the gateway id: a node of
// its own, so that a client's connection to it is never taken for one to
// an upstream broker. The ids run from 1<<30 up, far above the ids Kafka
// clusters give their brokers.
func PeerNode(id string) int32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int32(1<<30 | h.Sum32()&(1<<30-1))
}

// Save implements driver.Saver: it writes group's state (a tombstone when
// state is nil) to its shard, in the shard's order, and calls done once
// the write is committed, or failed.
func (m *Manager) Save(group string, state *coordinator.GroupState, done func(error)) {
	s, err := m.servingShard(group)
	if err != nil {
		done(err)
		return
	}
	s.saves = append(s.saves, pendingSave{rec: Record{Kind: KindState, Group: group, State: state}, done: done})
	m.mu.Unlock()
	m.wakeWriter(s)
}

// Commit commits req's offsets (an OffsetCommit of a group this gateway
// serves, as a group without members commits them) in the next
// transaction of the group's shard, and answers as OffsetCommit would. A
// commit that a gateway sends once another may have taken the group over
// is refused by the upstream, however late it arrives: the next owner's
// claim fenced the transactional id. It fails with ErrNotOwner when this
// gateway does not serve the group, or was fenced meanwhile.
func (m *Manager) Commit(ctx context.Context, req *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitResponse, error) {
	if req.Version >= 10 {
		// Topics by id alone; TxnOffsetCommit names them.
		return coordinator.ErrorResponse(req, kerr.UnsupportedVersion.Code).(*kmsg.OffsetCommitResponse), nil
	}
	s, err := m.servingShard(req.Group)
	if err != nil {
		return nil, err
	}
	done := make(chan commitResult, 1)
	s.commits = append(s.commits, pendingCommit{req: req, done: done})
	m.mu.Unlock()
	m.wakeWriter(s)
	select {
	case r := <-done:
		return r.resp, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("committing the offsets of group %s: %w", req.Group, ctx.Err())
	}
}

// servingShard is group's shard, with m.mu held, if this gateway serves it
// now; otherwise ErrNotOwner, with m.mu released.
func (m *Manager) servingShard(group string) (*ownedShard, error) {
	shard := ShardOf(group, m.cfg.Shards)
	m.mu.Lock()
	s := m.shards[shard]
	if s == nil || s.stopped || s.status != ShardServing || m.clock() >= m.leaseUntil {
		m.mu.Unlock()
		return nil, fmt.Errorf("group %s, shard %d: %w", group, shard, ErrNotOwner)
	}
	return s, nil
}

func (m *Manager) wakeWriter(s *ownedShard) {
	select {
	case s.wake <- struct{}{}:
	default: // the writer has been told already
	}
}

// Status is a gateway's view of its cluster, for operators: the layout of
// the latest generation of the gateways' group and when it came, and the
// shards this gateway holds.
type Status struct {
	Name, ID   string
	Generation int32
	// LayoutAt is when the layout last changed, MovedAt when this gateway
	// last took or gave up a shard (zero: never).
	LayoutAt, MovedAt time.Time
	Gateways          []Owner
	Shards            []ShardStatus
}

// ShardStatus is one shard this gateway holds, where it is in its life,
// and since when.
type ShardStatus struct {
	Shard int
	State ShardState
	Since time.Time
}

// Status reports the cluster as this gateway sees it now.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := Status{Name: m.cfg.Name, ID: m.cfg.ID, Generation: m.generation, LayoutAt: m.layoutAt, MovedAt: m.movedAt,
		Gateways: slices.Clone(m.layout)}
	for _, s := range m.shards {
		st.Shards = append(st.Shards, ShardStatus{Shard: s.shard, State: s.status, Since: s.since})
	}
	slices.SortFunc(st.Shards, func(a, b ShardStatus) int { return cmp.Compare(a.Shard, b.Shard) })
	return st
}

// ShardOf is the shard of the state topic group belongs to.
func (m *Manager) ShardOf(group string) int { return ShardOf(group, m.cfg.Shards) }

// ID is this gateway's id in the cluster.
func (m *Manager) ID() string { return m.cfg.ID }

// SetBrokers publishes this gateway's listeners for the upstream's
// brokers (node id to port, at its address's host) to the other gateways,
// which route clients to them (Owner.Brokers). A change rejoins the
// gateways' group; the shards stay where they are.
func (m *Manager) SetBrokers(ports map[int32]int32) {
	m.mu.Lock()
	m.brokers = maps.Clone(ports)
	m.mu.Unlock()
	select {
	case m.brokersSet <- struct{}{}:
	default: // Run has yet to take the last one
	}
}

// Leave hands this gateway's shards over: it stops answering for them,
// releases them, and leaves the gateways' group, so that the others take
// them at once. Run returns once it has left.
func (m *Manager) Leave() { m.leaveOnce.Do(func() { close(m.leave) }) }

// Run is the gateway's membership until ctx ends, Leave has run its
// course, or the cluster ends it (ErrFenced, ErrRefused). Every shard is
// given up when it returns.
func (m *Manager) Run(ctx context.Context) error {
	cl, err := kgo.NewClient(m.cfg.Opts...)
	if err != nil {
		return fmt.Errorf("gateways' group %s: %w", GroupName(m.cfg.Name), err)
	}
	defer cl.Close()
	defer m.giveUpAll("stopping")
	leave := m.leave
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		m.mu.Lock()
		m.membership.SetBrokers(m.brokers)
		m.mu.Unlock()
		req, wake := m.membership.Next()
		if req != nil {
			sentAt := m.clock()
			resp, err := cl.Request(ctx, req)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			m.membership.Answered(sentAt, resp, err)
			if err != nil {
				m.log.Warn("gateways' group: request failed", "api", kmsg.NameForKey(req.Key()), "err", err)
			}
		}
		m.apply(ctx, m.membership.Changes())
		if err := m.membership.Err(); err != nil {
			return err
		}
		if m.membership.Left() {
			return nil
		}
		if req != nil {
			continue
		}
		timer.Reset(max(wake-m.clock(), 0))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-leave:
			leave = nil
			m.membership.Leave()
		case <-m.brokersSet:
		case <-timer.C:
		}
	}
}

// apply acts on the membership's changes: shards stop being answered for
// before anything else happens to them.
func (m *Manager) apply(ctx context.Context, changes []Change) {
	m.mu.Lock()
	m.leaseUntil = m.membership.Lease().Until()
	m.mu.Unlock()
	for _, c := range changes {
		if len(c.Revoked) > 0 {
			m.giveUp(c.Revoked, c.Reason)
		}
		m.mu.Lock()
		now := time.Now()
		if c.Layout != nil {
			m.layout, m.generation, m.layoutAt = c.Layout, c.Generation, now
		}
		if len(c.Assigned) > 0 {
			m.movedAt = now
		}
		for _, shard := range c.Assigned {
			sctx, cancel := context.WithCancel(ctx)
			s := &ownedShard{shard: shard, generation: c.Generation, receivedAt: c.ReceivedAt, status: ShardLoading, since: now, cancel: cancel,
				wake: make(chan struct{}, 1), done: make(chan struct{})}
			m.shards[shard] = s
			m.wg.Add(1)
			go m.own(sctx, s)
		}
		m.mu.Unlock()
	}
}

// giveUp stops answering for shards, unloads their groups, and, when they
// move to another gateway in an orderly way ("moved", "leaving"), releases
// those this gateway was serving, so that the next owner starts at once.
func (m *Manager) giveUp(shards []int, reason string) {
	m.mu.Lock()
	var gone []*ownedShard
	for _, shard := range shards {
		if s := m.shards[shard]; s != nil {
			delete(m.shards, shard)
			gone = append(gone, s)
		}
	}
	if len(gone) > 0 {
		m.movedAt = time.Now()
	}
	m.mu.Unlock()
	if len(gone) == 0 {
		return
	}
	for _, s := range gone {
		for _, h := range m.cfg.Hooks {
			h.OnShardGivenUp(s.shard, reason)
		}
	}
	var unload []string
	for _, g := range m.cfg.Groups.Groups() {
		if slices.Contains(shards, ShardOf(g, m.cfg.Shards)) {
			unload = append(unload, g)
		}
	}
	if err := m.cfg.Groups.Unload(unload); err != nil {
		m.log.Warn("unloading given-up shards' groups", "shards", shards, "err", err)
	}
	clean := reason == "moved" || reason == "leaving"
	var wg sync.WaitGroup
	for _, s := range gone {
		s.cancel()
		<-s.done // its writer is done with every save
		w := s.writer
		if w == nil {
			continue
		}
		if !clean || s.status != ShardServing {
			w.Close()
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), m.cfg.SessionTimeout)
			defer cancel()
			if err := w.Release(ctx); err != nil {
				m.log.Warn("releasing a shard failed: its next owner waits out this gateway's lease", "shard", s.shard, "err", err)
			}
		})
	}
	wg.Wait()
	m.log.Info("gave shards up", "shards", shards, "reason", reason, "groups", len(unload))
}

// giveUpAll gives up every shard held.
func (m *Manager) giveUpAll(reason string) {
	m.mu.Lock()
	var all []int
	for shard := range m.shards {
		all = append(all, shard)
	}
	m.mu.Unlock()
	m.giveUp(all, reason)
	m.wg.Wait()
}

// own is one shard's goroutine: it claims and loads the shard, waits until
// the last owner can no longer answer, serves it, and writes its saves
// until ctx ends.
func (m *Manager) own(ctx context.Context, s *ownedShard) {
	defer m.wg.Done()
	defer close(s.done)
	defer m.failSaves(s)
	started := time.Now()
	var sh Shard
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		var err error
		if sh, err = m.load(ctx, s); err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		m.log.Warn("loading a shard failed; trying again", "shard", s.shard, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
	// The last owner may still be answering for the shard until its lease
	// runs out, unless it released the shard once it had stopped.
	// (ServableFrom reads only the lease's length, fixed at the start.)
	if wait := m.membership.Lease().ServableFrom(s.receivedAt, sh.Clean) - m.clock(); wait > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
	states := make([]coordinator.GroupState, 0, len(sh.States))
	for _, gs := range sh.States {
		states = append(states, gs)
	}
	slices.SortFunc(states, func(a, b coordinator.GroupState) int { return cmp.Compare(a.Group, b.Group) })
	if err := m.cfg.Groups.Load(states); err != nil {
		m.log.Error("loading a shard's groups into the coordinator failed", "shard", s.shard, "err", err)
	}
	m.mu.Lock()
	s.status, s.since = ShardServing, time.Now()
	m.mu.Unlock()
	took := time.Since(started)
	how := "failover"
	switch {
	case sh.Owner == Writer{}:
		how = "first"
	case sh.Clean:
		how = "handover"
	}
	for _, h := range m.cfg.Hooks {
		for reason, n := range sh.Skipped {
			h.OnRecordsSkipped(s.shard, reason, n)
		}
		h.OnShardServing(s.shard, len(states), took, how)
	}
	m.log.Info("serving shard", "shard", s.shard, "generation", s.generation, "groups", len(states),
		"clean", sh.Clean, "skipped", sh.Skipped, "took", took.Round(time.Millisecond))
	m.write(ctx, s)
}

// load claims the shard and reads it to the claim.
func (m *Manager) load(ctx context.Context, s *ownedShard) (Shard, error) {
	me := Writer{ID: m.cfg.ID, Incarnation: m.incarnation, Generation: s.generation}
	if s.writer == nil {
		w, err := OpenShard(ctx, m.cfg.Opts, m.cfg.Name, m.cfg.Topic, int32(s.shard), me)
		if err != nil {
			return Shard{}, err
		}
		m.mu.Lock()
		s.writer = w
		m.mu.Unlock()
	}
	records, err := ReadShard(ctx, m.cfg.Opts, m.cfg.Topic, int32(s.shard), func(r RawRecord) bool {
		rec, err := Decode(r.Key, r.Value)
		return err == nil && rec.Kind == KindClaim && rec.Writer == me
	})
	if err != nil {
		return Shard{}, err
	}
	// Whether the shard was released cleanly is what came before the claim.
	return LoadShard(s.shard, m.cfg.Shards, records[:len(records)-1])
}

// write commits the shard's saves and offset commits, each batch that
// gathered while the last was written in one transaction, until ctx ends
// or a later owner fences the writer.
func (m *Manager) write(ctx context.Context, s *ownedShard) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		m.mu.Lock()
		saves, commits := s.saves, s.commits
		s.saves, s.commits = nil, nil
		until := m.leaseUntil
		m.mu.Unlock()
		if len(saves) == 0 && len(commits) == 0 {
			continue
		}
		// A group saved twice in a batch needs only its later state: the
		// loader keeps each group's last one.
		last := make(map[string]int, len(saves))
		for i, p := range saves {
			last[p.rec.Group] = i
		}
		recs := make([]Record, 0, len(last))
		for i, p := range saves {
			if last[p.rec.Group] == i {
				recs = append(recs, p.rec)
			}
		}
		reqs := make([]*kmsg.OffsetCommitRequest, len(commits))
		for i, c := range commits {
			reqs[i] = c.req
		}
		// A write that would land after the lease could land after a
		// takeover: the deadline keeps it from being sent that late (and
		// the next owner's claim fences it if it is in flight then).
		wctx, cancel := context.WithTimeout(ctx, until-m.clock())
		resps, err := s.writer.WriteWithOffsets(wctx, recs, reqs)
		cancel()
		for _, p := range saves {
			p.done(err)
		}
		for i, c := range commits {
			r := commitResult{err: err}
			switch {
			case errors.Is(err, ErrFencedWrite):
				r.err = fmt.Errorf("group %s, shard %d: %w", c.req.Group, s.shard, ErrNotOwner)
			case err != nil:
				// The transaction was aborted (or its abort left to the
				// next InitProducerId): the member commits again.
				r = commitResult{resp: coordinator.ErrorResponse(c.req, kerr.CoordinatorNotAvailable.Code).(*kmsg.OffsetCommitResponse)}
			default:
				r.resp = resps[i]
			}
			c.done <- r
		}
		if errors.Is(err, ErrFencedWrite) {
			m.log.Error("a later owner claimed the shard: no longer serving it", "shard", s.shard, "err", err)
			go m.giveUp([]int{s.shard}, "fenced")
			return
		}
		if err != nil {
			m.log.Warn("writing to the state topic failed", "shard", s.shard, "states", len(saves), "commits", len(commits), "err", err)
		}
	}
}

// failSaves answers the saves and commits left when the shard's goroutine
// ends.
func (m *Manager) failSaves(s *ownedShard) {
	m.mu.Lock()
	left, commits := s.saves, s.commits
	s.saves, s.commits, s.stopped = nil, nil, true
	m.mu.Unlock()
	for _, p := range left {
		p.done(fmt.Errorf("group %s, shard %d: %w", p.rec.Group, s.shard, ErrNotOwner))
	}
	for _, c := range commits {
		c.done <- commitResult{err: fmt.Errorf("group %s, shard %d: %w", c.req.Group, s.shard, ErrNotOwner)}
	}
}

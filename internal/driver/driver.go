// Package driver runs a coordinator.Coordinator for real: one goroutine owns
// the state machine and feeds it requests, the clock and assignment results;
// plugin calls and upstream forwards run on goroutines of their own, so a
// slow rebalance never delays a heartbeat or another group.
//
// Callers see a blocking API: Handle returns a request's response when the
// coordinator produces it, which for JoinGroup and SyncGroup may be seconds
// later. The driver reaches plugins through [PluginRunner] and the upstream
// cluster through [Forwarder], and reports to metrics through [Hook]s. It
// must never import the runtime, the proxy, the gateway, the daemon, the
// metrics or Prometheus, so it can be tested with fakes and wired by the
// daemon.
package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// ErrClosed is returned by calls on a closed driver.
var ErrClosed = errors.New("group coordinator closed")

// PluginRunner runs the coordinator's assignment jobs: one assignor, by
// name, on one request. The daemon implements it over the runtime's
// registry, whose errors carry a Reason() label.
type PluginRunner interface {
	Assign(ctx context.Context, assignor string, req *abi.Request) (*abi.Response, error)
}

// Forwarder sends a request the coordinator has checked (an offset commit
// rewritten to generation -1, a group deletion) to the upstream cluster's
// group coordinator and returns its answer (*upstream.Client is one).
type Forwarder interface {
	Forward(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// Config configures a Driver. Plugins and Forwarder are required.
type Config struct {
	Coordinator coordinator.Config
	Plugins     PluginRunner
	Forwarder   Forwarder
	// PluginTimeout bounds one assignor call, on top of the runtime's own
	// limits: its wait for an instance and its run; default 10s.
	PluginTimeout time.Duration
	// ForwardTimeout bounds one upstream forward; default 30s.
	ForwardTimeout time.Duration
	// IDSeed makes generated member ids unique across restarts.
	IDSeed uint64
	// Restore, when set, is loaded at start (state saved by Persist).
	Restore []coordinator.GroupState
	// Persist, when set, is called with every group's state each time a
	// group becomes Stable, Empty or Dead (once per step of the
	// coordinator, however many groups it moved) and at Close, from the
	// driver's goroutine: it must be quick (write a file, not call the
	// network).
	Persist func([]coordinator.GroupState)
	Logger  *slog.Logger
	// Hooks observe the driver (see Hook); nil for none.
	Hooks []Hook
	// Now is the clock; nil means time.Now. Tests pass a fake.
	Now func() time.Time
	// StormRebalances and StormWindow define a rebalance storm: more than
	// StormRebalances completed rebalances of one group within StormWindow
	// (defaults 10 and 5 minutes). A storm is counted and logged once per
	// window, with its likely cause.
	StormRebalances int
	StormWindow     time.Duration
	// NeedMetadata, when set, is called (from the driver's goroutine; it
	// must not block) with the subscribed topics the last metadata update
	// did not cover, as soon as a JoinGroup subscribes to one. The daemon
	// refreshes metadata at once, so that a new group's first assignment
	// sees its topics rather than waiting for the next periodic refresh.
	NeedMetadata func(topics []string)
	// Saver, when set, keeps each group's state where another gateway can
	// load it, and the driver answers nothing of a group until what the
	// coordinator last did to it is saved (see Saver).
	Saver Saver
	// Refuse, when set, is asked on the driver's goroutine, just before
	// the coordinator would see a request of one group, whether this
	// gateway answers for the group now: 0 when it does, or the error code
	// (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) the request is
	// answered with instead. It must not block. A gateway cluster checks
	// ownership before it hands a request over, but the group's shard can
	// be given up, and the group unloaded, before the request reaches the
	// loop; the coordinator would then answer a member it no longer holds
	// UNKNOWN_MEMBER_ID, and the member would rejoin. Asked here, the
	// answer is ordered with Unload and Load.
	Refuse func(group string) int16
}

// Driver runs one Coordinator.
type Driver struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	coord  *coordinator.Coordinator
	calls  chan func()
	closed chan struct{}
	done   chan struct{}
	bg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
	// racks is the book of clients' Fetch racks (KIP-392).
	racks *rackBook
	// rackMu orders the book's writes with rackNews, the sightings not yet
	// handed to the coordinator; a pass is queued while rackNews is
	// non-empty, so a burst of sightings costs one pass.
	rackMu   sync.Mutex
	rackNews []coordinator.FetchRack

	// Owned by the loop goroutine.
	upstreamDown bool
	// persistDue is set when an event of the Output being applied calls
	// for saving the state.
	persistDue bool
	nextID     atomic.Uint64 // the last RequestID handed out
	waiting    map[coordinator.RequestID]waiter
	// saves are the groups with saves in flight (Config.Saver).
	saves    map[string]*saving
	timer    *time.Timer
	deadline time.Time
	started  map[string]time.Time // rebalance start per group
	assignor map[string]string    // assignor of each group's latest job
	last     map[string]Rebalance // each group's latest completed rebalance
	storms   map[string]*stormWatch
	// named and namedSet collect, in order, the groups the events of the
	// Output being applied name; they are reused from one Output to the
	// next.
	named    []string
	namedSet map[string]bool
}

// stormWatch remembers a group's recent rebalances and what caused them.
type stormWatch struct {
	rebalances []time.Time
	expiries   int // members removed for a session timeout, in the window
	joins      int // members added, in the window
	reported   time.Time
}

// Rebalance summarises a group's latest completed rebalance.
type Rebalance struct {
	At       time.Time
	Duration time.Duration
	// Assignor is the assignor whose answer the group received.
	Assignor string
	// Fallback is true when the group's own assignor failed first.
	Fallback bool
	Moved    int
	Withheld int
	// Cooperative is true for a KIP-429 rebalance.
	Cooperative bool
	// Members is the group's size.
	Members int
	// Unassigned counts subscribed partitions no member received
	// (withheld ones included).
	Unassigned int
	// RackLocal and RackKnown count the assigned partitions with a replica
	// in their member's rack, among those whose racks are known at all.
	RackLocal, RackKnown int
}

type result struct {
	resp kmsg.Response
	err  error
}

// Start creates the coordinator, restores saved state and starts the loop.
func Start(cfg Config) (*Driver, error) {
	if cfg.Plugins == nil || cfg.Forwarder == nil {
		return nil, errors.New("driver: Plugins and Forwarder are required")
	}
	if cfg.PluginTimeout <= 0 {
		cfg.PluginTimeout = 10 * time.Second
	}
	if cfg.ForwardTimeout <= 0 {
		cfg.ForwardTimeout = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.StormRebalances <= 0 {
		cfg.StormRebalances = 10
	}
	if cfg.StormWindow <= 0 {
		cfg.StormWindow = 5 * time.Minute
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	coord, err := coordinator.New(cfg.Coordinator, cfg.IDSeed)
	if err != nil {
		return nil, fmt.Errorf("group coordinator: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Driver{
		cfg: cfg, log: log, now: cfg.Now, coord: coord, racks: newRackBook(cfg.Now),
		calls:  make(chan func()),
		closed: make(chan struct{}),
		done:   make(chan struct{}),
		ctx:    ctx, cancel: cancel,
		waiting:  make(map[coordinator.RequestID]waiter),
		saves:    make(map[string]*saving),
		timer:    time.NewTimer(time.Hour),
		started:  make(map[string]time.Time),
		assignor: make(map[string]string),
		last:     make(map[string]Rebalance),
		storms:   make(map[string]*stormWatch),
		namedSet: make(map[string]bool),
	}
	d.timer.Stop()
	if len(cfg.Restore) > 0 {
		if err := d.restore(cfg.Restore); err != nil {
			cancel()
			return nil, fmt.Errorf("group coordinator: restoring saved state: %w", err)
		}
	}
	go d.loop()
	return d, nil
}

// loop owns the coordinator: every call into it runs here, in order.
func (d *Driver) loop() {
	defer close(d.done)
	for {
		select {
		case fn := <-d.calls:
			fn()
		case <-d.timer.C:
			d.deadline = time.Time{}
			d.apply(d.coord.Tick(d.now()))
		case <-d.closed:
			d.timer.Stop()
			for id, w := range d.waiting {
				w.ch <- result{err: ErrClosed}
				delete(d.waiting, id)
			}
			return
		}
	}
}

// post hands fn to the loop without waiting for it to run, and reports
// false once the driver is closed. The loop runs what it receives before it
// looks at closed again: calls is unbuffered, so a fn posted runs, and a
// waiter it registers is answered, ErrClosed at the latest.
func (d *Driver) post(fn func()) bool {
	select {
	case d.calls <- fn:
		return true
	case <-d.closed:
		return false
	}
}

// do runs fn on the loop and waits for it.
func (d *Driver) do(fn func()) error {
	finished := make(chan struct{})
	if !d.post(func() { fn(); close(finished) }) {
		return ErrClosed
	}
	<-finished
	return nil
}

// Handle passes one request of a managed group to the coordinator and waits
// for its response. When ctx ends first (the client disconnected), Handle
// returns ctx's error and the response, when it comes, is dropped, as a
// broker drops it.
func (d *Driver) Handle(ctx context.Context, client coordinator.Client, req kmsg.Request) (kmsg.Response, error) {
	ch := make(chan result, 1)
	// The id is taken here, not on the loop, so that the request needs no
	// second hand-over: its answer arrives on ch, and a caller that gives
	// up can still name it.
	id := coordinator.RequestID(d.nextID.Add(1))
	ok := d.post(func() {
		if req.Key() == kmsg.JoinGroup.Int16() {
			// The rack its client sent in Fetch requests travels with the
			// request: the coordinator learns it as an input, never by
			// asking. Looked up on the loop, so a sighting recorded before
			// this JoinGroup is either here or in a pass that runs after
			// it, once the member exists.
			client.FetchRack, _ = d.racks.lookup(client.ID, client.Host)
		}
		if code := d.refusal(req); code != 0 {
			ch <- result{resp: coordinator.ErrorResponse(req, code)}
			return
		}
		d.waiting[id] = waiter{ch: ch, req: req}
		d.apply(d.coord.Handle(d.now(), id, client, req))
	})
	if !ok {
		return nil, ErrClosed
	}
	select {
	case r := <-ch:
		return r.resp, r.err
	case <-ctx.Done():
		d.post(func() { delete(d.waiting, id) })
		return nil, ctx.Err()
	}
}

// refusal is Config.Refuse's answer for req when it names one group; 0
// otherwise. A request of several groups (DescribeGroups, DeleteGroups) is
// split by ownership before it is handed over, and what the coordinator
// answers of a group it does not hold moves no member.
func (d *Driver) refusal(req kmsg.Request) int16 {
	if d.cfg.Refuse == nil {
		return 0
	}
	groups := coordinator.GroupsOf(req)
	if len(groups) != 1 {
		return 0
	}
	return d.cfg.Refuse(groups[0])
}

// SetMetadata replaces the cluster metadata the coordinator assigns from.
// Topics it does not hold are taken to be asked about and absent.
func (d *Driver) SetMetadata(md *coordinator.Metadata, asked []string) error {
	return d.do(func() {
		if md != nil {
			// The coordinator also needs to know which topics were looked
			// up and found absent: an assignment waits only for the others.
			cp := *md
			cp.Covered = append(slices.Clone(md.Covered), asked...)
			md = &cp
		}
		d.apply(d.coord.SetMetadata(d.now(), md))
	})
}

// Load takes over groups from the state another gateway saved of them
// (see coordinator.Coordinator.Restore): their members carry on with the
// generation and assignment they have. Loading a group the coordinator
// already holds fails, and loads none of states from that one on.
func (d *Driver) Load(states []coordinator.GroupState) error {
	var err error
	if cerr := d.do(func() { err = d.restore(states) }); cerr != nil {
		return cerr
	}
	return err
}

// restore loads states into the coordinator and reports them. It runs on
// the loop, or before it starts.
func (d *Driver) restore(states []coordinator.GroupState) error {
	out, err := d.coord.Restore(d.now(), states)
	d.apply(out)
	// Restoring moves no group through a transition, so no event names
	// them: report them all.
	for _, gs := range states {
		d.name(gs.Group)
	}
	d.report()
	return err
}

// Unload gives groups up to another gateway without ending them (see
// coordinator.Coordinator.Unload): their parked requests are answered
// NOT_COORDINATOR, and nothing is saved of them.
func (d *Driver) Unload(groups []string) error {
	return d.do(func() { d.apply(d.coord.Unload(d.now(), groups)) })
}

// RebalanceGroups rebalances each group for which match, given the group
// and the assignor of its latest assignment, is true, and returns those
// groups, sorted. The daemon calls it when a plugin was reloaded. match runs
// on the driver's loop: it must not block or call the driver.
func (d *Driver) RebalanceGroups(match func(group, assignor string) bool, reason string) []string {
	var groups []string
	d.do(func() {
		for _, g := range d.coord.Groups() {
			if assignor, ok := d.latestAssignor(g); ok && match(g, assignor) {
				groups = append(groups, g)
				d.apply(d.coord.Rebalance(d.now(), g, reason))
			}
		}
	})
	return groups
}

// AssignorInUse reports whether some group's latest assignment came, or is
// coming, from the named assignor: hot reload must not take it away.
func (d *Driver) AssignorInUse(name string) bool {
	used := false
	d.do(func() {
		for _, g := range d.coord.Groups() {
			if a, ok := d.latestAssignor(g); ok && a == name {
				used = true
				return
			}
		}
	})
	return used
}

// latestAssignor is the assignor of a group's latest completed rebalance,
// or of the one under way; false before its first.
func (d *Driver) latestAssignor(group string) (string, bool) {
	if r, done := d.last[group]; done {
		return r.Assignor, true
	}
	a, ok := d.assignor[group]
	return a, ok
}

// SetUpstreamReachable tells the coordinator whether the upstream cluster
// answers. While it does not, member sessions do not expire
// (coordinator.Coordinator.PauseSessions): clients cannot reach the gateway
// through a proxy that has no broker to pair them with, and expiring them
// would rebalance every group after an outage. When it answers again every
// member gets a fresh session. Only changes are logged.
func (d *Driver) SetUpstreamReachable(reachable bool) {
	d.do(func() {
		if d.upstreamDown == !reachable {
			return
		}
		d.upstreamDown = !reachable
		if reachable {
			d.log.Info("upstream reachable again: member sessions restart")
		} else {
			d.log.Warn("upstream unreachable: member sessions paused until it answers")
		}
		d.apply(d.coord.PauseSessions(d.now(), !reachable))
	})
}

// RecordFetchRack notes the rack a client sent in a Fetch request (KIP-392
// RackID), with the partitions it fetched. Clients that send their rack
// only there fetch only once they have partitions, so their groups' first
// assignment is made without it: a rack the book did not hold reaches the
// coordinator as an event (coordinator.Coordinator.FetchRacksSeen), which
// gives it to the member owning those partitions for the group's next
// assignment, and rebalances nothing. It does not wait, so the proxy calls
// it from its request path; sightings made while a pass is queued join
// that pass.
func (d *Driver) RecordFetchRack(seen coordinator.FetchRack) {
	// One lock over the book and the queue, so sightings of one client
	// reach the coordinator in the order the book took them.
	d.rackMu.Lock()
	if !d.racks.record(seen.ClientID, seen.Host, seen.Rack) {
		d.rackMu.Unlock()
		return
	}
	queued := len(d.rackNews) > 0
	d.rackNews = append(d.rackNews, seen)
	d.rackMu.Unlock()
	if queued {
		return
	}
	// Not counted in bg: it may start after Close, and do returns at once
	// on a closed driver (the only error, and nothing is left to tell).
	go func() {
		_ = d.do(func() {
			d.rackMu.Lock()
			news := d.rackNews
			d.rackNews = nil
			d.rackMu.Unlock()
			d.apply(d.coord.FetchRacksSeen(d.now(), news))
		})
	}()
}

// SetServedProtocols hands the coordinator the protocols plugins serve now.
// The daemon calls it after every change hot reload makes to the registry,
// before it asks for the rebalances the reload calls for.
func (d *Driver) SetServedProtocols(served coordinator.ServedProtocols) error {
	return d.do(func() { d.apply(d.coord.SetServedProtocols(d.now(), served)) })
}

// SubscribedTopics returns the topics whose metadata the caller must keep
// current.
func (d *Driver) SubscribedTopics() []string {
	var topics []string
	d.do(func() { topics = d.coord.SubscribedTopics() })
	return topics
}

// Groups returns the ids of the groups the coordinator holds.
func (d *Driver) Groups() []string {
	var ids []string
	d.do(func() { ids = d.coord.Groups() })
	return ids
}

// Export returns every group's state.
func (d *Driver) Export() []coordinator.GroupState {
	var states []coordinator.GroupState
	d.do(func() { states = d.coord.Export() })
	return states
}

// ExportGroup returns one group's state; false when there is no such group.
func (d *Driver) ExportGroup(id string) (coordinator.GroupState, bool) {
	var g coordinator.GroupState
	var ok bool
	d.do(func() { g, ok = d.coord.ExportGroup(id) })
	return g, ok
}

// Overview is one group's summary with its latest completed rebalance.
type Overview struct {
	coordinator.Summary
	// Last is the latest completed rebalance; valid when HasLast.
	Last    Rebalance
	HasLast bool
}

// Overviews lists every group without its members, each with its latest
// completed rebalance, in one call to the loop so that the two agree.
func (d *Driver) Overviews() []Overview {
	var out []Overview
	d.do(func() {
		for _, s := range d.coord.Summaries() {
			r, ok := d.last[s.Group]
			out = append(out, Overview{Summary: s, Last: r, HasLast: ok})
		}
	})
	return out
}

// LastRebalance returns a group's latest completed rebalance.
func (d *Driver) LastRebalance(group string) (Rebalance, bool) {
	var r Rebalance
	var ok bool
	d.do(func() { r, ok = d.last[group] })
	return r, ok
}

// Close stops the loop, answers waiting requests with ErrClosed, and waits
// for running plugin calls and forwards to notice.
func (d *Driver) Close() {
	select {
	case <-d.closed:
		return
	default:
	}
	close(d.closed)
	<-d.done
	// The loop has ended, so nothing else touches the coordinator: save
	// its last state (sessions and generations moved since the last
	// transition).
	if d.cfg.Persist != nil {
		d.cfg.Persist(d.coord.Export())
	}
	d.cancel()
	d.bg.Wait()
}

// apply acts on one Output. It runs on the loop.
func (d *Driver) apply(out coordinator.Output) {
	// The hooks hear of the groups first: a client that has its answer
	// (a LeaveGroup's, say) finds the gauges already moved.
	for _, e := range out.Events {
		d.name(e.Group)
	}
	if d.cfg.Saver != nil {
		d.save(d.named)
	}
	d.report()
	for _, r := range out.Replies {
		if !d.hold(r.ID, held{reply: r}) {
			d.reply(r.ID, result{resp: r.Response})
		}
	}
	for _, f := range out.Forwards {
		if !d.hold(f.ID, held{forward: f, isForward: true}) {
			d.forward(f)
		}
	}
	for _, j := range out.Jobs {
		d.run(j)
	}
	for _, e := range out.Events {
		d.observe(e)
	}
	if len(out.NeedMetadata) > 0 && d.cfg.NeedMetadata != nil {
		d.cfg.NeedMetadata(out.NeedMetadata)
	}
	if d.persistDue && d.cfg.Persist != nil {
		// Once per Output, however many groups it moved.
		d.persistDue = false
		d.cfg.Persist(d.coord.Export())
	}
	d.arm(out.NextDeadline)
}

func (d *Driver) reply(id coordinator.RequestID, r result) {
	if w, ok := d.waiting[id]; ok {
		w.ch <- r
		delete(d.waiting, id)
	}
}

// arm sets the timer for the coordinator's next deadline. Every Output
// carries the current earliest deadline, so the latest one wins.
func (d *Driver) arm(at time.Time) {
	if at.Equal(d.deadline) {
		return
	}
	d.deadline = at
	d.timer.Stop()
	if at.IsZero() {
		return
	}
	d.timer.Reset(max(at.Sub(d.now()), 0))
}

// forward sends a checked request upstream off the loop and answers the
// client with the merged response. The answer goes straight to the waiting
// caller, not back through the loop: the loop has nothing more to do for a
// forwarded request, and under load a pass through it is a wait behind
// every request queued there.
func (d *Driver) forward(f coordinator.Forward) {
	w, waited := d.waiting[f.ID]
	delete(d.waiting, f.ID)
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		ctx, cancel := context.WithTimeout(d.ctx, d.cfg.ForwardTimeout)
		defer cancel()
		resp, err := d.cfg.Forwarder.Forward(ctx, f.Request)
		r := result{err: err}
		if err == nil {
			r.resp = f.Complete(resp)
		} else {
			err = fmt.Errorf("forwarding %s upstream: %w", kmsg.NameForKey(f.Request.Key()), err)
			r.err = err
			each(d.cfg.Hooks, func(h HookUpstreamError) { h.OnUpstreamError("forward") })
			d.log.Warn("upstream forward failed", "api", kmsg.NameForKey(f.Request.Key()), "err", err)
		}
		if waited {
			w.ch <- r // buffered, and sent to once
		}
	}()
}

// reasoned is implemented by the runtime's errors.
type reasoned interface{ Reason() string }

// overloaded is the reason of a runtime error for a call that waited past
// the host's queue timeout and never ran.
const overloaded = "overloaded"

// run calls the assignor off the loop and feeds the answer back.
func (d *Driver) run(j coordinator.Job) {
	if prev := d.assignor[j.Group]; j.Attempt > 0 {
		each(d.cfg.Hooks, func(h HookFallback) { h.OnFallback(prev, j.Assignor) })
	}
	d.assignor[j.Group] = j.Assignor
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		ctx, cancel := context.WithTimeout(d.ctx, d.cfg.PluginTimeout)
		defer cancel()
		start := time.Now()
		resp, err := d.cfg.Plugins.Assign(ctx, j.Assignor, j.Request)
		took := time.Since(start)
		reason := ""
		if err != nil {
			reason = "error"
			var r reasoned
			if errors.As(err, &r) {
				reason = r.Reason()
			}
		}
		if reason == overloaded {
			// The call never ran: the host's queue was full of others.
			each(d.cfg.Hooks, func(h HookPluginOverload) { h.OnPluginOverload(j.Assignor) })
			d.log.Warn("plugin host overloaded: the assignment waits its turn again", "group", j.Group, "generation", j.Generation, "assignor", j.Assignor, "err", err)
			err = fmt.Errorf("%w: %w", coordinator.ErrRunnerBusy, err)
		} else {
			each(d.cfg.Hooks, func(h HookPluginCall) { h.OnPluginCall(j.Assignor, took, reason) })
			if err != nil {
				d.log.Warn("assignor failed", "group", j.Group, "generation", j.Generation, "assignor", j.Assignor, "attempt", j.Attempt, "err", err)
			}
		}
		d.do(func() { d.apply(d.coord.AssignmentDone(d.now(), j.ID, resp, err)) })
	}()
}

// observe turns coordinator events into logs, metrics and persistence.
func (d *Driver) observe(e coordinator.Event) {
	switch e.Kind {
	case coordinator.EventRebalanceStarted:
		if _, ok := d.started[e.Group]; !ok {
			d.started[e.Group] = d.now()
		}
		d.log.Info("rebalance started", "group", e.Group, "generation", e.Generation, "reason", e.Detail)
	case coordinator.EventAssignmentCompleted:
		began, ok := d.started[e.Group]
		delete(d.started, e.Group)
		r := Rebalance{At: d.now(), Assignor: e.Detail, Fallback: e.Attempt > 0, Moved: e.Moved, Withheld: e.N, Cooperative: e.Cooperative,
			Members: e.Members, Unassigned: e.Unassigned, RackLocal: e.RackLocal, RackKnown: e.RackKnown}
		if ok {
			r.Duration = r.At.Sub(began)
		}
		d.last[e.Group] = r
		d.checkStorm(e.Group, r.At)
		d.log.Info("rebalance", "group", e.Group, "generation", e.Generation, "members", e.Members,
			"assignor", r.Assignor, "duration", r.Duration, "moved", r.Moved, "withheld", r.Withheld, "fallback", r.Fallback)
		each(d.cfg.Hooks, func(h HookRebalance) { h.OnRebalance(e.Group, e.Generation, r) })
	case coordinator.EventAssignmentTimedOut:
		d.log.Warn("no assignment in time: the range assignment stands in", "group", e.Group, "generation", e.Generation, "waiting", e.Detail)
		each(d.cfg.Hooks, func(h HookAssignmentTimedOut) { h.OnAssignmentTimedOut(e.Group) })
	case coordinator.EventMemberAdded:
		d.storm(e.Group).joins++
	case coordinator.EventMemberRemoved:
		if e.Detail == "session timeout" {
			d.storm(e.Group).expiries++
		}
	case coordinator.EventUnloaded:
		delete(d.started, e.Group)
		d.forget(e.Group)
	case coordinator.EventStateChanged:
		if e.State == coordinator.Empty || e.State == coordinator.Dead {
			// A rebalance that ended without an assignment must not lend
			// its start time to the next one.
			delete(d.started, e.Group)
		}
		if e.State == coordinator.Dead {
			d.forget(e.Group)
		}
		// A group that settles, empties or goes is saved as it is now:
		// saving only at Stable brought emptied groups back with ghosts.
		if e.State == coordinator.Stable || e.State == coordinator.Empty || e.State == coordinator.Dead {
			d.persistDue = true
		}
	case coordinator.EventMemberSynced, coordinator.EventMemberRack:
		// What a member holds, or where it is, changed in a Stable group:
		// a restart that restored the group without it would drop a
		// member that synced as one that never did.
		d.persistDue = true
	}
}

// forget drops what the driver keeps of a group the coordinator no longer
// holds.
func (d *Driver) forget(group string) {
	delete(d.last, group)
	delete(d.storms, group)
	delete(d.assignor, group)
}

// name notes a group that an event of the Output being applied names, or
// a restored group, for report.
func (d *Driver) name(group string) {
	if group == "" || d.namedSet[group] {
		return
	}
	d.namedSet[group] = true
	d.named = append(d.named, group)
}

// report tells the hooks where each group named since the last report
// stands now, once per group however many events named it: the group's
// summary, or its removal when the coordinator no longer holds it. Every
// change to what a summary shows comes with an event naming the group, so
// the hooks see every state a group settles in between two steps, and
// nothing is reported for a step that changed no group (a heartbeat).
func (d *Driver) report() {
	for _, group := range d.named {
		if s, ok := d.coord.Summary(group); ok {
			each(d.cfg.Hooks, func(h HookGroupState) { h.OnGroupState(s) })
		} else {
			each(d.cfg.Hooks, func(h HookGroupRemoved) { h.OnGroupRemoved(group) })
		}
	}
	clear(d.namedSet)
	d.named = d.named[:0]
}

func (d *Driver) storm(group string) *stormWatch {
	w := d.storms[group]
	if w == nil {
		w = &stormWatch{}
		d.storms[group] = w
	}
	return w
}

// checkStorm records a completed rebalance and reports a storm when the
// group rebalanced more than StormRebalances times within StormWindow.
func (d *Driver) checkStorm(group string, at time.Time) {
	w := d.storm(group)
	cutoff := at.Add(-d.cfg.StormWindow)
	kept := w.rebalances[:0]
	for _, t := range w.rebalances {
		if t.After(cutoff) {
			kept = append(kept, t)
		}
	}
	w.rebalances = append(kept, at)
	if len(w.rebalances) <= d.cfg.StormRebalances {
		if len(w.rebalances) == 1 {
			w.expiries, w.joins = 0, 0 // a quiet window starts afresh
		}
		return
	}
	if !w.reported.IsZero() && at.Sub(w.reported) < d.cfg.StormWindow {
		return
	}
	w.reported = at
	// label is the cause for the metric: short and from a fixed set.
	cause, label := "frequent membership changes", "membership changes"
	switch {
	case w.expiries*2 >= len(w.rebalances):
		cause = "session timeouts (members miss heartbeats: check session.timeout.ms, GC pauses, or slow processing)"
		label = "session timeouts"
	case w.joins >= len(w.rebalances):
		cause = "members joining repeatedly (restarts, or max.poll.interval.ms exceeded)"
		label = "members joining repeatedly"
	}
	d.log.Warn("rebalance storm", "group", group, "rebalances", len(w.rebalances), "window", d.cfg.StormWindow,
		"session_timeouts", w.expiries, "joins", w.joins, "likely_cause", cause)
	each(d.cfg.Hooks, func(h HookRebalanceStorm) { h.OnRebalanceStorm(group, label) })
	w.expiries, w.joins = 0, 0
}

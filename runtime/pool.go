package wasmruntime

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// A host bounds the instances of all its plugins together: in
// IsolationProcess an instance is a worker process, tens of megabytes and
// a start-up of a hundred milliseconds or more, so a burst of concurrent
// assignments that started one for each call (a gateway's restart makes
// every group rebalance at once) would spend the machine on starting
// processes and miss every deadline. Calls beyond the bound wait in one
// first-come, first-served queue instead, bounded in time on their own:
// the call timeout starts only once the call has its instance.
//
// Instances stay warm between calls, whichever plugin they belong to, until
// the bound is reached; a call of a plugin with no instance to spare then
// ends the instance idle the longest, of any plugin, and starts its own in
// its place. Two exceptions to strict arrival order keep that eviction
// rare without starving anyone:
//
//   - a waiter whose plugin has an instance in its idle call waits for it
//     (the idle call is short and bounded) rather than start one;
//   - a waiter that would have to end another plugin's instance lets later
//     waiters of plugins with an instance to spare go first, until it has
//     waited evictAfter.

// evictAfter is how long a waiter that needs another plugin's idle instance
// lets later waiters with instances to spare go before it. It is about what
// starting a worker costs, so that reordering never delays a call by more
// than the eviction would have.
const evictAfter = 100 * time.Millisecond

// instancePool is a host's bound on instances and its queue of calls. Its
// owners are the plugins' lifecycles; instances are typed only there.
type instancePool struct {
	size         int
	queueTimeout time.Duration
	hooks        []Hook
	now          func() time.Time

	mu       sync.Mutex
	live     int // instances that exist or are starting, in every state
	busy     int // of live: taken by a call, or starting for one
	idling   int // of live: in their idle call
	spares   int // of live: starting in the background, for no call
	queue    []*waiter
	late     []*waiter // dispatchLocked's scratch, kept to spare an allocation per call
	owners   []*poolOwner
	waits    uint64        // calls that had to queue
	waitSum  time.Duration // their time in the queue
	waitMax  time.Duration
	overload uint64 // calls that queued past queueTimeout
}

func newInstancePool(size int, queueTimeout time.Duration, hooks []Hook) *instancePool {
	return &instancePool{size: max(size, 1), queueTimeout: queueTimeout, hooks: hooks, now: time.Now}
}

// poolOwner is one plugin's share of the pool: its idle instances and its
// counts. Its fields are guarded by the pool's mutex.
type poolOwner struct {
	pool   *instancePool
	plugin string
	// end ends one of the owner's idle instances: evicted for another
	// plugin or drained at close. It runs outside the pool's lock.
	end    func(v any)
	idle   []idleInstance // oldest first
	busy   int
	idling int
	queued int
	closed bool
	seen   int // waiters of this owner met so far in the current dispatch
}

// forgetLocked drops a closed owner once nothing of it is left.
func (o *poolOwner) forgetLocked() {
	if o.closed && o.busy == 0 && o.idling == 0 && o.queued == 0 && len(o.idle) == 0 {
		p := o.pool
		p.owners = slices.DeleteFunc(p.owners, func(c *poolOwner) bool { return c == o })
	}
}

type idleInstance struct {
	v     any
	since time.Time
}

// waiter is a call in the queue.
type waiter struct {
	owner *poolOwner
	since time.Time
	ready chan slot // buffered; a grant is sent once
	done  bool      // granted or withdrawn
}

// slot is what a call is granted: an idle instance of its own plugin, or
// the right to start one, after ending evicted (another plugin's idle
// instance) when that is set.
type slot struct {
	v       any
	evicted *idleInstance
	from    *poolOwner // evicted's owner
}

// join registers an owner; its instances count from now on.
func (p *instancePool) join(plugin string, end func(v any)) *poolOwner {
	o := &poolOwner{pool: p, plugin: plugin, end: end}
	p.mu.Lock()
	p.owners = append(p.owners, o)
	p.mu.Unlock()
	return o
}

// take returns a slot for one call of o, waiting in the queue when every
// instance is busy. It fails with ErrOverloaded once the call has waited
// queueTimeout, and with ErrTimeout when ctx ends first.
func (o *poolOwner) take(ctx context.Context) (slot, error) {
	p := o.pool
	p.mu.Lock()
	if o.closed {
		p.mu.Unlock()
		return slot{}, &Error{Plugin: o.plugin, Kind: ErrClosed}
	}
	if len(p.queue) == 0 {
		if s, ok := p.grantLocked(o, 1, false); ok {
			p.mu.Unlock()
			p.observe(o.plugin, 0, false)
			return s, nil
		}
	}
	w := &waiter{owner: o, since: p.now(), ready: make(chan slot, 1)}
	p.queue = append(p.queue, w)
	o.queued++
	p.waits++
	p.dispatchLocked() // an idling instance may wait for it, or a slot be free behind an old waiter
	p.mu.Unlock()

	timer := time.NewTimer(p.queueTimeout)
	defer timer.Stop()
	select {
	case s := <-w.ready:
		p.waited(o.plugin, w.since, false)
		return s, nil
	case <-timer.C:
	case <-ctx.Done():
	}
	p.mu.Lock()
	if w.done { // granted as the wait ended: the call goes on
		p.mu.Unlock()
		p.waited(o.plugin, w.since, false)
		return <-w.ready, nil
	}
	p.withdrawLocked(w)
	overloaded := ctx.Err() == nil
	if overloaded {
		p.overload++
	}
	queued, busy := len(p.queue), p.busy
	p.mu.Unlock()
	p.waited(o.plugin, w.since, overloaded)
	if !overloaded {
		e := deadlineError(o.plugin, 0, ctx.Err())
		if e.Err == nil {
			e.Detail = fmt.Sprintf("the caller's deadline passed after %s in the queue for an instance", p.now().Sub(w.since).Round(time.Millisecond))
		}
		return slot{}, e
	}
	return slot{}, &Error{Plugin: o.plugin, Kind: ErrOverloaded,
		Detail: fmt.Sprintf("waited %s for one of the host's %d instances (%d busy, %d calls still queued)", p.queueTimeout, p.size, busy, queued)}
}

// grantLocked gives o a slot if one is to be had without waiting: an idle
// instance of its own, a free place, or, when evict allows it, the place of
// another plugin's instance idle the longest. pos is the call's place among
// o's waiters, from 1: a call whose plugin has an instance in its idle call
// that nobody ahead of it waits for waits for that one instead.
func (p *instancePool) grantLocked(o *poolOwner, pos int, evict bool) (slot, bool) {
	if n := len(o.idle); n > 0 {
		v := o.idle[n-1].v // the warmest
		o.idle = o.idle[:n-1]
		p.busy++
		o.busy++
		return slot{v: v}, true
	}
	if o.idling >= pos {
		return slot{}, false
	}
	if p.live < p.size {
		p.live++
		p.busy++
		o.busy++
		return slot{}, true
	}
	if !evict {
		return slot{}, false
	}
	var from *poolOwner
	for _, c := range p.owners {
		if len(c.idle) > 0 && (from == nil || c.idle[0].since.Before(from.idle[0].since)) {
			from = c
		}
	}
	if from == nil {
		return slot{}, false
	}
	victim := from.idle[0]
	from.idle = slices.Delete(from.idle, 0, 1)
	p.busy++
	o.busy++
	return slot{evicted: &victim, from: from}, true
}

// dispatchLocked grants what can be granted to the queue, in order, with
// the two exceptions described above.
func (p *instancePool) dispatchLocked() {
	if len(p.queue) == 0 {
		return
	}
	for _, o := range p.owners {
		o.seen = 0
	}
	now := p.now()
	kept := p.queue[:0]
	// late are the waiters that need an eviction and have not waited
	// evictAfter; a waiter's place among its plugin's waiters is counted
	// as the queue is walked.
	late := p.late[:0]
	for _, w := range p.queue {
		o := w.owner
		o.seen++
		s, ok := p.grantLocked(o, o.seen, now.Sub(w.since) >= evictAfter)
		if !ok {
			if o.idling < o.seen && p.live >= p.size {
				late = append(late, w)
			}
			kept = append(kept, w)
			continue
		}
		p.grantTo(w, s)
	}
	clear(p.queue[len(kept):])
	p.queue = kept
	// Idle instances nobody in the queue wanted go to those that waited
	// for an eviction, in order.
	for _, w := range late {
		s, ok := p.grantLocked(w.owner, len(p.queue)+1, true)
		if !ok {
			break
		}
		p.grantTo(w, s)
		p.removeLocked(w)
	}
	clear(late)
	p.late = late[:0]
}

func (p *instancePool) grantTo(w *waiter, s slot) {
	w.done = true
	w.owner.queued--
	w.ready <- s
}

func (p *instancePool) removeLocked(w *waiter) {
	if i := slices.Index(p.queue, w); i >= 0 {
		p.queue = slices.Delete(p.queue, i, i+1)
	}
}

// withdrawLocked takes a waiter out of the queue after its wait ended.
func (p *instancePool) withdrawLocked(w *waiter) {
	w.done = true
	w.owner.queued--
	p.removeLocked(w)
	w.owner.forgetLocked()
	p.dispatchLocked() // an idling instance it waited for may serve the next
}

func (p *instancePool) waited(plugin string, since time.Time, overloaded bool) {
	d := p.now().Sub(since)
	p.mu.Lock()
	p.waitSum += d
	p.waitMax = max(p.waitMax, d)
	p.mu.Unlock()
	p.observe(plugin, d, overloaded)
}

func (p *instancePool) observe(plugin string, d time.Duration, overloaded bool) {
	for _, h := range p.hooks {
		if h, ok := h.(HookQueueWait); ok {
			h.OnQueueWait(plugin, d, overloaded)
		}
	}
}

// endEvicted ends the instance whose place s took, if any. It runs outside
// the lock, before the caller starts its own instance.
func (o *poolOwner) endEvicted(s slot) {
	if s.evicted != nil {
		s.from.end(s.evicted.v)
	}
}

// put returns a call's instance to the owner's idle instances, or ends it
// when the owner has closed.
func (o *poolOwner) put(v any) {
	o.settle(v, true, func(p *instancePool) { p.busy--; o.busy-- })
}

// lost frees the slot of a call whose instance is gone: discarded after a
// failure, or never started.
func (o *poolOwner) lost() {
	p := o.pool
	p.mu.Lock()
	p.busy--
	o.busy--
	p.live--
	o.forgetLocked()
	p.dispatchLocked()
	p.mu.Unlock()
}

// toIdleCall moves a call's instance into its idle call, where it holds
// its place but serves nobody.
func (o *poolOwner) toIdleCall() {
	p := o.pool
	p.mu.Lock()
	p.busy--
	o.busy--
	p.idling++
	o.idling++
	p.mu.Unlock()
}

// idleEnded ends an idle call: v serves again when ok, and is gone
// otherwise.
func (o *poolOwner) idleEnded(v any, ok bool) {
	o.settle(v, ok, func(p *instancePool) { p.idling--; o.idling-- })
}

// settle moves v out of the state leave counts it in (a call, its idle
// call, a spare's start): v joins the owner's idle instances when ok,
// unless the owner has closed, when it is ended; when not ok it is gone
// already.
func (o *poolOwner) settle(v any, ok bool, leave func(*instancePool)) {
	p := o.pool
	p.mu.Lock()
	leave(p)
	keep := ok && !o.closed
	if keep {
		o.idle = append(o.idle, idleInstance{v: v, since: p.now()})
	} else {
		p.live--
	}
	o.forgetLocked()
	p.dispatchLocked()
	p.mu.Unlock()
	if ok && !keep {
		o.end(v)
	}
}

// reserveSpare takes a place for an instance started in the background,
// ready for a later call, if one is free and no call waits for it (a
// waiting call starts its own). The owner then calls spareStarted.
func (o *poolOwner) reserveSpare() bool {
	p := o.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if o.closed || p.live >= p.size || len(p.queue) > 0 || len(o.idle) > 0 {
		return false
	}
	p.live++
	p.spares++
	return true
}

// spareStarted ends what reserveSpare began: ok is false when starting
// failed.
func (o *poolOwner) spareStarted(v any, ok bool) {
	o.settle(v, ok, func(p *instancePool) { p.spares-- })
}

// close marks the owner closed and returns its idle instances, for the
// caller to end; instances in calls end when their calls do.
func (o *poolOwner) close() []any {
	p := o.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	o.closed = true
	vs := make([]any, len(o.idle))
	for i, in := range o.idle {
		vs[i] = in.v
	}
	p.live -= len(o.idle)
	o.idle = nil
	o.forgetLocked()
	p.dispatchLocked()
	return vs
}

// reap ends the instances idle since before cutoff, of every plugin, and
// returns how many it ended. Instances in their idle call or in calls are
// left alone.
func (p *instancePool) reap(cutoff time.Time) int {
	type victim struct {
		o *poolOwner
		v any
	}
	var victims []victim
	p.mu.Lock()
	for _, o := range p.owners {
		n := 0 // o.idle is oldest first
		for n < len(o.idle) && o.idle[n].since.Before(cutoff) {
			victims = append(victims, victim{o, o.idle[n].v})
			n++
		}
		if n > 0 {
			o.idle = slices.Delete(o.idle, 0, n)
			p.live -= n
		}
	}
	p.dispatchLocked()
	p.mu.Unlock()
	for _, v := range victims {
		v.o.end(v.v)
	}
	return len(victims)
}

// reapEvery runs reap each idle/2 for instances idle longer than idle,
// until stop closes.
func (p *instancePool) reapEvery(idle time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(max(idle/2, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			p.reap(p.now().Add(-idle))
		case <-stop:
			return
		}
	}
}

// PoolStats is a snapshot of a host's instances and its queue of calls,
// for operators sizing the pool (Config.WithMaxInstances).
type PoolStats struct {
	// Size is the most instances the host runs at once.
	Size int
	// Busy instances are in a call (or starting for one); Idle ones are
	// ready for the next; Idling ones are in the guest's idle call after
	// a call; Starting ones are spares starting in the background.
	Busy, Idle, Idling, Starting int
	// Queued is the number of calls waiting for an instance now.
	Queued int
	// Waits counts the calls that had to queue, WaitTotal is their time
	// in the queue together and WaitMax the longest.
	Waits     uint64
	WaitTotal time.Duration
	WaitMax   time.Duration
	// Overloads counts the calls that queued past the queue timeout and
	// failed with ErrOverloaded.
	Overloads uint64
	// Plugins has each plugin's share, by plugin name.
	Plugins map[string]PluginPoolStats
}

// PluginPoolStats is one plugin's share of a host's pool.
type PluginPoolStats struct {
	Busy, Idle, Idling, Queued int
}

func (p *instancePool) stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := PoolStats{Size: p.size, Busy: p.busy, Idling: p.idling, Starting: p.spares, Queued: len(p.queue),
		Waits: p.waits, WaitTotal: p.waitSum, WaitMax: p.waitMax, Overloads: p.overload,
		Plugins: make(map[string]PluginPoolStats, len(p.owners))}
	for _, o := range p.owners {
		s.Idle += len(o.idle)
		ps := s.Plugins[o.plugin]
		ps.Busy += o.busy
		ps.Idle += len(o.idle)
		ps.Idling += o.idling
		ps.Queued += o.queued
		s.Plugins[o.plugin] = ps
	}
	return s
}

package coordinator

import (
	"slices"
	"time"
)

// timer is a deadline that can sit in a timerQueue. The queue records its
// position in the timer itself, so that moving or dropping one costs
// O(log n) with no lookup.
type timer struct {
	// at is the deadline; zero when none is armed.
	at time.Time
	// pos is 1 + the timer's index in its queue, 0 while it is not queued,
	// so that a zero timer is a valid, unqueued one.
	pos int
}

// timed is what a timerQueue holds: a pointer to a value that carries its
// own timer.
type timed interface {
	timer() *timer
}

// timerQueue is a min-heap of deadlines. Only entries with an armed timer
// are queued. It is written out rather than built on container/heap,
// whose interface would box every entry pushed or popped, and it keeps a
// copy of each deadline beside its entry, so that sifting compares
// without visiting the entries: the queue moves on every heartbeat.
type timerQueue[T timed] struct {
	slots []timerSlot[T]
	// tie orders entries due at the same instant; nil leaves their order
	// unspecified, for queues whose users sort what comes due themselves.
	tie func(a, b T) bool
}

type timerSlot[T timed] struct {
	at time.Time // the entry's deadline, as in its timer
	x  T
}

func (q *timerQueue[T]) len() int { return len(q.slots) }

// first returns the entry due first; false when the queue is empty.
func (q *timerQueue[T]) first() (T, bool) {
	if len(q.slots) == 0 {
		var zero T
		return zero, false
	}
	return q.slots[0].x, true
}

// set arms x's timer at at, queueing x or moving it; a zero at disarms it
// and drops x from the queue. Setting the deadline x already has changes
// nothing, not even the time value it holds.
func (q *timerQueue[T]) set(x T, at time.Time) {
	t := x.timer()
	if at.IsZero() {
		t.at = time.Time{}
		q.remove(x)
		return
	}
	if t.pos != 0 {
		if t.at.Equal(at) {
			return
		}
		i := t.pos - 1
		later := at.After(t.at)
		t.at = at
		q.slots[i].at = at
		if later {
			q.down(i)
		} else {
			q.up(i)
		}
		return
	}
	t.at = at
	q.slots = append(q.slots, timerSlot[T]{at: at, x: x})
	q.up(len(q.slots) - 1)
}

// remove drops x from the queue, leaving its deadline as it was; nothing
// happens when x is not queued.
func (q *timerQueue[T]) remove(x T) {
	t := x.timer()
	if t.pos == 0 {
		return
	}
	i, last := t.pos-1, len(q.slots)-1
	t.pos = 0
	moved := q.slots[last]
	q.slots[last] = timerSlot[T]{} // no stale pointer past the end
	q.slots = q.slots[:last]
	if i == last {
		return
	}
	q.slots[i] = moved
	moved.x.timer().pos = i + 1
	if !q.down(i) {
		q.up(i)
	}
}

// appendDue appends to dst every queued entry due at or before now, in no
// particular order, without removing them. It visits only those entries
// and their direct successors in the heap, so it costs what comes due, not
// what is queued.
func (q *timerQueue[T]) appendDue(dst []T, now time.Time) []T {
	return q.appendDueFrom(dst, 0, now)
}

func (q *timerQueue[T]) appendDueFrom(dst []T, i int, now time.Time) []T {
	if i >= len(q.slots) || q.slots[i].at.After(now) {
		// Every entry below a later one is later still.
		return dst
	}
	dst = append(dst, q.slots[i].x)
	dst = q.appendDueFrom(dst, 2*i+1, now)
	return q.appendDueFrom(dst, 2*i+2, now)
}

// before reports whether slot a is due before slot b.
func (q *timerQueue[T]) before(a, b *timerSlot[T]) bool {
	if c := a.at.Compare(b.at); c != 0 {
		return c < 0
	}
	return q.tie != nil && q.tie(a.x, b.x)
}

// up moves the entry at i towards the root as far as it belongs, shifting
// the entries it passes down, and records the positions that changed.
func (q *timerQueue[T]) up(i int) {
	s := q.slots[i]
	for i > 0 {
		parent := (i - 1) / 2
		if !q.before(&s, &q.slots[parent]) {
			break
		}
		q.place(i, q.slots[parent])
		i = parent
	}
	q.place(i, s)
}

// down moves the entry at i towards the leaves as far as it belongs and
// reports whether it moved.
func (q *timerQueue[T]) down(i int) bool {
	start, n := i, len(q.slots)
	s := q.slots[i]
	for {
		j := 2*i + 1
		if j >= n {
			break
		}
		if r := j + 1; r < n && q.before(&q.slots[r], &q.slots[j]) {
			j = r
		}
		if !q.before(&q.slots[j], &s) {
			break
		}
		q.place(i, q.slots[j])
		i = j
	}
	q.place(i, s)
	return i > start
}

func (q *timerQueue[T]) place(i int, s timerSlot[T]) {
	q.slots[i] = s
	s.x.timer().pos = i + 1
}

// pendingMember is a KIP-394 member id handed out with MEMBER_ID_REQUIRED
// whose member has not joined with it yet.
type pendingMember struct {
	id string
	// deadline is when the id is forgotten unless its member joins.
	deadline timer
}

func (p *pendingMember) timer() *timer { return &p.deadline }

// pendingMembers is a group's pending member ids, queued by deadline so
// that the group's next deadline and the ids that expire are found without
// looking at the others.
type pendingMembers struct {
	byID  map[string]*pendingMember
	queue timerQueue[*pendingMember]
}

func newPendingMembers() pendingMembers {
	return pendingMembers{byID: make(map[string]*pendingMember)}
}

func (p *pendingMembers) len() int { return len(p.byID) }

func (p *pendingMembers) has(id string) bool {
	_, ok := p.byID[id]
	return ok
}

// add records id as pending until at.
func (p *pendingMembers) add(id string, at time.Time) {
	pm := p.byID[id]
	if pm == nil {
		pm = &pendingMember{id: id}
		p.byID[id] = pm
	}
	p.queue.set(pm, at)
}

// remove forgets id and reports whether it was pending.
func (p *pendingMembers) remove(id string) bool {
	pm := p.byID[id]
	if pm == nil {
		return false
	}
	delete(p.byID, id)
	p.queue.remove(pm)
	return true
}

// next returns the earliest deadline of a pending id; zero when none is
// pending.
func (p *pendingMembers) next() time.Time {
	if pm, ok := p.queue.first(); ok {
		return pm.deadline.at
	}
	return time.Time{}
}

// due returns the ids whose deadline is at or before now, sorted.
func (p *pendingMembers) due(now time.Time) []string {
	var ids []string
	for _, pm := range p.queue.appendDue(nil, now) {
		ids = append(ids, pm.id)
	}
	slices.Sort(ids)
	return ids
}

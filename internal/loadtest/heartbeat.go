package loadtest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeats are the bulk of the load: every member, every interval. They
// are sent by one scheduler for all members and their answers handled on
// the connection's reader, so that a heartbeat wakes no member goroutine;
// the generator then costs a fraction of what it measures. A member's
// goroutine only hears of a heartbeat whose answer changes something (an
// error code, a failed connection).
//
// A member's heartbeat state, hbState, moves:
//
//	idle --arm (member)--> armed --send (scheduler)--> inFlight
//	inFlight --answered, no error (reader)--> armed
//	inFlight --answered with an error (reader)--> idle, and the member is told
//	armed --disarm (member)--> idle
//	inFlight --disarm (member)--> draining --answered (reader)--> idle, the member is told
const (
	hbIdle int32 = iota
	hbArmed
	hbInFlight
	hbDraining
)

// phaseGrid is the step of the members' heartbeat phases and the
// scheduler's tick: each tick sends the heartbeats of the members whose
// phase it is.
const phaseGrid = 5 * time.Millisecond

// scheduler sends every member's heartbeat at its phase of the interval.
// Its wheel has a slot per phaseGrid of the interval; a member stays in
// the slot of its random phase all run, so members that synced together
// do not heartbeat together, as a fleet of real consumers started apart
// does not.
type scheduler struct {
	r     *run
	slots [][]*member
}

func newScheduler(r *run) *scheduler {
	n := max(int(r.cfg.Heartbeat/phaseGrid), 1)
	s := &scheduler{r: r, slots: make([][]*member, n)}
	for _, m := range r.members {
		i := rand.IntN(n)
		s.slots[i] = append(s.slots[i], m)
	}
	return s
}

// loop ticks until the run stops. A tick that comes late serves every
// slot it passed, so the schedule, and the heartbeats it offers, are kept
// whatever the generator's own delays.
func (s *scheduler) loop() {
	grid := min(phaseGrid, s.r.cfg.Heartbeat)
	t := time.NewTicker(grid)
	defer t.Stop()
	start := time.Now()
	next := 0 // the next slot to serve, counted from start
	for {
		select {
		case now := <-t.C:
			due := int(now.Sub(start) / grid)
			for ; next <= due; next++ {
				s.serve(s.slots[next%len(s.slots)], now)
			}
		case <-s.r.stop:
			return
		case <-s.r.ctx.Done():
			return
		}
	}
}

// serve sends the heartbeats of one slot's members.
func (s *scheduler) serve(members []*member, now time.Time) {
	steady := s.r.inSteady()
	var offered int64
	for _, m := range members {
		switch m.hbState.Load() {
		case hbArmed:
			offered++
			if !m.hbState.CompareAndSwap(hbArmed, hbInFlight) {
				continue // disarmed meanwhile
			}
			// The member wrote hb and its connection before arming; the
			// state's atomics order those writes before these reads.
			m.hb.steady = steady
			m.hbConn.send(m.hb)
		case hbInFlight:
			// The previous one is still unanswered: this slot's is
			// offered, not sent, as a client heartbeats one at a time.
			offered++
			if now.Sub(m.hb.sent) > requestTimeout {
				m.hbConn.fail(fmt.Errorf("%s unanswered after %v", kmsg.NameForKey(m.hb.key), requestTimeout))
			}
		}
	}
	if steady && offered > 0 {
		s.r.hbOffered.Add(offered)
	}
}

// heartbeatDone takes a heartbeat's answer on the connection's reader. A
// clean answer only counts; anything else goes to the member.
func (m *member) heartbeatDone(c *call) {
	if c.err == nil {
		code := m.hbResp().ErrorCode
		m.measured(c, m.r.hbLat, &m.r.hbAnswered, code)
		if code == 0 && m.hbState.CompareAndSwap(hbInFlight, hbArmed) {
			return
		}
	}
	m.hbState.Store(hbIdle)
	m.done <- c
}

// arm starts the member's heartbeats on cn. A heartbeat of an earlier
// generation still unanswered is waited for first, since the request is
// one struct, sent again and again.
func (m *member) arm() error {
	for m.hbOutstanding {
		select {
		case c := <-m.done:
			m.absorb(c)
		case <-m.ctx.Done():
			return m.ctx.Err()
		case <-m.r.stop:
			return errStopped
		}
	}
	m.hbConn = m.cn
	m.hbState.Store(hbArmed)
	return nil
}

// disarm stops the member's heartbeats; one in flight is answered later,
// to the member.
func (m *member) disarm() {
	for {
		switch st := m.hbState.Load(); st {
		case hbArmed:
			if m.hbState.CompareAndSwap(hbArmed, hbIdle) {
				return
			}
		case hbInFlight:
			if m.hbState.CompareAndSwap(hbInFlight, hbDraining) {
				m.hbOutstanding = true
				return
			}
		default:
			return
		}
	}
}

package driver

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/coordinator"
)

// Saver keeps groups' state where the gateway that takes a group over
// reads it (the gateway cluster's state topic). As Kafka's coordinator
// appends a group's record before it answers the SyncGroup that completes
// a rebalance, the driver answers nothing of a group, and forwards nothing
// of it, until what the coordinator last did to the group is saved: a
// member is never told of a generation or an assignment that a failover
// would forget.
//
// Save is called on the driver's loop and must not block; it keeps one
// group's saves in the order it was given them and calls done once, from
// any goroutine. state is nil for a group the coordinator no longer holds
// (a tombstone). A failed save (the gateway lost the group to another)
// answers what waited for it NOT_COORDINATOR and forwards none of it.
type Saver interface {
	Save(group string, state *coordinator.GroupState, done func(error))
}

// waiter is a request the driver has handed to the coordinator and not yet
// answered.
type waiter struct {
	ch  chan result
	req kmsg.Request
}

// held is a reply or a forward waiting for its group's saves.
type held struct {
	reply     coordinator.Reply
	forward   coordinator.Forward
	isForward bool
	// waits counts the saves of its groups still to come; it is released
	// at zero.
	waits int
	err   error // the first failed save it waited for
}

// saving is one group's saves in flight and what waits for them, in order.
type saving struct {
	pending int
	queue   []*held
}

// save saves every group in groups as the coordinator has it now.
func (d *Driver) save(groups []string) {
	for _, g := range groups {
		if g == "" {
			continue
		}
		var state *coordinator.GroupState
		if gs, ok := d.coord.ExportGroup(g); ok {
			state = &gs
		}
		s := d.saves[g]
		if s == nil {
			s = &saving{}
			d.saves[g] = s
		}
		s.pending++
		d.cfg.Saver.Save(g, state, func(err error) {
			// Not on the caller's goroutine: a saver may call done from
			// Save, on the loop, which post would wait for.
			go d.post(func() { d.saved(g, err) })
		})
	}
}

// hold keeps what answers or forwards request id while a group it names has
// saves in flight, and reports whether it did.
func (d *Driver) hold(id coordinator.RequestID, h held) bool {
	if d.cfg.Saver == nil || len(d.saves) == 0 {
		return false
	}
	w, ok := d.waiting[id]
	if !ok {
		return false
	}
	for _, g := range coordinator.GroupsOf(w.req) {
		if s := d.saves[g]; s != nil && s.pending > 0 {
			h.waits++
			s.queue = append(s.queue, &h)
		}
	}
	return h.waits > 0
}

// saved takes the answer to one save of group: once the group has none in
// flight, what waited for it goes on, in order.
func (d *Driver) saved(group string, err error) {
	s := d.saves[group]
	if s == nil {
		return
	}
	s.pending--
	if err != nil {
		d.log.Warn("saving a group's state failed: its answers are NOT_COORDINATOR", "group", group, "err", err)
		for _, h := range s.queue {
			h.err = err
		}
	}
	if s.pending > 0 {
		return
	}
	queue := s.queue
	delete(d.saves, group)
	for _, h := range queue {
		if h.waits--; h.waits > 0 {
			continue
		}
		d.release(h)
	}
}

// release answers or forwards what waited for saves.
func (d *Driver) release(h *held) {
	id := h.reply.ID
	if h.isForward {
		id = h.forward.ID
	}
	if h.err == nil {
		if h.isForward {
			d.forward(h.forward)
		} else {
			d.reply(id, result{resp: h.reply.Response})
		}
		return
	}
	w, ok := d.waiting[id]
	if !ok {
		return
	}
	resp := coordinator.ErrorResponse(w.req, kerr.NotCoordinator.Code)
	if resp == nil {
		d.reply(id, result{err: h.err})
		return
	}
	d.reply(id, result{resp: resp})
}

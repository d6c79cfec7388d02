package cluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmassign/wasmassign/coordinator"
)

// The ownership test plays Kafka with the project's own coordinator, which
// runs a classic group of client-side (leader) assignment as Kafka's does,
// and drives gateways' Memberships against it on one fake clock through
// joins, kill -9, SIGSTOP and SIGCONT, restarts under the same id (also
// while the old process lives on, stopped or cut off), network cuts and
// graceful leaves. After every step no shard may be answerable by
// two gateways. A gateway can answer for a shard when its lease holds (read
// on the shared clock, which keeps running while a process is stopped, as
// CLOCK_BOOTTIME does) and the shard's ServableFrom has come; the clean
// start (the last holder released the shard) is granted only when the last
// control record of the shard would be that release.

const (
	ownGateways = 4
	ownShards   = 6
	reqTimeout  = 3 * time.Second // a request's client-side timeout
)

type ownReq struct {
	id       coordinator.RequestID
	sentAt   time.Duration
	deadline time.Duration
}

type ownGateway struct {
	id, name string // name tells the processes of an id apart
	m        *Membership
	inFlight *ownReq
	inbox    []kmsg.Response // answers that arrived while stopped
	paused   time.Duration   // stopped until then
	cut      time.Duration   // the network drops everything until then
	servable map[int]time.Duration
}

type ownWorld struct {
	t     *testing.T
	rng   *rand.Rand
	now   time.Duration
	coord *coordinator.Coordinator
	slots [ownGateways]*ownGateway // nil: no process for that id
	// zombies are older processes of an id that a new one replaced while
	// they were stopped or cut off: alive, and sure of their lease.
	zombies []*ownGateway
	reqs    map[coordinator.RequestID]*ownGateway
	next    coordinator.RequestID
	clean   [ownShards]bool // the shard's last control record is a release
	claimed [ownShards]bool // a claim of the shard was ever written
	started int
	log     []string
}

func (w *ownWorld) clock() time.Duration { return w.now }

func (w *ownWorld) at() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(w.now) }

func (w *ownWorld) logf(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf("%8v ", w.now)+fmt.Sprintf(format, args...))
}

func (w *ownWorld) start(slot int) {
	id := fmt.Sprintf("gw-%d", slot)
	m := NewMembership(MembershipConfig{
		Group: "wasmassign-t", Topic: "wasmassign-t-state", Shards: ownShards, ID: id, Address: id + ":9092",
		SessionTimeout: 10 * time.Second, RebalanceTimeout: 10 * time.Second, HeartbeatInterval: time.Second, Lease: 6 * time.Second,
	}, w.clock)
	w.started++
	g := &ownGateway{id: id, name: fmt.Sprintf("%s#%d", id, w.started), m: m, servable: map[int]time.Duration{}}
	w.slots[slot] = g
	w.logf("%s starts", g.name)
}

// apply routes the coordinator's replies to the gateways waiting for them.
func (w *ownWorld) apply(out coordinator.Output) {
	for _, r := range out.Replies {
		g := w.reqs[r.ID]
		delete(w.reqs, r.ID)
		if g == nil || g.inFlight == nil || g.inFlight.id != r.ID || w.now < g.cut || !w.alive(g) {
			continue // a dead process, a lost answer, or one too late
		}
		g.inbox = append(g.inbox, r.Response)
	}
}

func (w *ownWorld) alive(g *ownGateway) bool {
	return w.slots[slotOf(g.id)] == g || slices.Contains(w.zombies, g)
}

// exit ends g's process.
func (w *ownWorld) exit(g *ownGateway) {
	if w.slots[slotOf(g.id)] == g {
		w.slots[slotOf(g.id)] = nil
	}
	w.zombies = slices.DeleteFunc(w.zombies, func(z *ownGateway) bool { return z == g })
}

// processes is every live process, zombies included.
func (w *ownWorld) processes() []*ownGateway {
	var ps []*ownGateway
	for _, g := range w.slots {
		if g != nil {
			ps = append(ps, g)
		}
	}
	return append(ps, w.zombies...)
}

func slotOf(id string) int {
	var s int
	fmt.Sscanf(id, "gw-%d", &s)
	return s
}

// run lets gateway g work: answers first, then every request it wants.
func (w *ownWorld) run(g *ownGateway) {
	if w.now < g.paused {
		return
	}
	for range 20 {
		if len(g.inbox) > 0 {
			resp := g.inbox[0]
			g.inbox = g.inbox[1:]
			sentAt := g.inFlight.sentAt
			g.inFlight = nil
			g.m.Answered(sentAt, resp, nil)
		} else if g.inFlight != nil && w.now >= g.inFlight.deadline {
			g.inFlight = nil
			g.m.Answered(0, nil, errors.New("request timed out"))
		}
		w.changes(g)
		if g.m.Err() != nil || g.m.state == left {
			w.logf("%s exits (%v)", g.name, g.m.Err())
			w.exit(g)
			return
		}
		if g.inFlight != nil {
			return
		}
		req, _ := g.m.Next()
		w.changes(g)
		if req == nil {
			return
		}
		w.send(g, req)
	}
}

func (w *ownWorld) send(g *ownGateway, req kmsg.Request) {
	w.next++
	id := w.next
	timeout := reqTimeout
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		r.Version = 9
		timeout += 10 * time.Second // parked for the rebalance
	case *kmsg.SyncGroupRequest:
		r.Version = 5
		timeout += 10 * time.Second
	case *kmsg.HeartbeatRequest:
		r.Version = 4
	case *kmsg.LeaveGroupRequest:
		r.Version = 5
	}
	g.inFlight = &ownReq{id: id, sentAt: w.now, deadline: w.now + timeout}
	if w.now < g.cut {
		return // lost on the way: the client times out
	}
	w.reqs[id] = g
	w.apply(w.coord.Handle(w.at(), id, coordinator.Client{ID: g.id, Host: "/" + g.id}, req))
}

// changes keeps the harness's view of what g may answer for.
func (w *ownWorld) changes(g *ownGateway) {
	for _, c := range g.m.Changes() {
		for _, s := range c.Revoked {
			// It writes its release, clean if it was answering.
			from, ok := g.servable[s]
			w.clean[s] = (c.Reason == "moved" || c.Reason == "leaving") && ok && w.now >= from
			delete(g.servable, s)
		}
		for _, s := range c.Assigned {
			// A shard nobody ever claimed is clean (LoadShard).
			g.servable[s] = g.m.Lease().ServableFrom(c.ReceivedAt, w.clean[s] || !w.claimed[s])
			w.clean[s], w.claimed[s] = false, true // it writes its claim
		}
		if len(c.Assigned)+len(c.Revoked) > 0 {
			w.logf("%s gen %d: +%v -%v (%s)", g.name, c.Generation, c.Assigned, c.Revoked, c.Reason)
		}
	}
}

// answering lists the gateways that could answer for shard s now.
func (w *ownWorld) answering(s int) []string {
	var ids []string
	for _, g := range w.processes() {
		owned, _ := g.m.Owned()
		if from, ok := g.servable[s]; ok && slices.Contains(owned, s) && w.now >= from {
			ids = append(ids, g.name)
		}
	}
	return ids
}

func (w *ownWorld) check(step int) {
	for s := range ownShards {
		if ids := w.answering(s); len(ids) > 1 {
			w.t.Fatalf("step %d: shard %d answerable by %v\n%s", step, s, ids, w.tail())
		}
	}
}

func (w *ownWorld) tail() string {
	from := max(0, len(w.log)-60)
	out := ""
	for _, l := range w.log[from:] {
		out += l + "\n"
	}
	return out
}

func (w *ownWorld) live() []int {
	var s []int
	for i, g := range w.slots {
		if g != nil {
			s = append(s, i)
		}
	}
	return s
}

func (w *ownWorld) step() {
	live := w.live()
	pick := func() *ownGateway { return w.slots[live[w.rng.IntN(len(live))]] }
	switch r := w.rng.IntN(100); {
	case r < 6 && len(live) > 0:
		g := pick()
		g.paused = w.now + time.Duration(1+w.rng.IntN(25))*time.Second
		w.logf("%s stopped until %v", g.name, g.paused)
	case r < 9 && len(live) > 1:
		g := pick()
		w.exit(g)
		w.logf("%s killed", g.name)
	case r < 15 && len(live) < ownGateways:
		for i, g := range w.slots {
			if g == nil {
				w.start(i)
				break
			}
		}
	case r < 19 && len(live) > 0:
		g := pick()
		g.cut = w.now + time.Duration(1+w.rng.IntN(15))*time.Second
		w.logf("%s cut off until %v", g.name, g.cut)
	case r < 21 && len(live) > 1:
		g := pick()
		g.m.Leave()
		w.changes(g)
		w.logf("%s leaves", g.name)
	case r < 24 && len(live) > 0:
		// A supervisor restarts a gateway it thinks dead (stopped, or cut
		// off) on another machine: the old process lives on.
		g := pick()
		if w.now < g.paused || w.now < g.cut {
			w.zombies = append(w.zombies, g)
			w.start(slotOf(g.id))
			w.logf("%s restarted beside its old process", g.name)
		}
	default:
		w.now += time.Duration(10+w.rng.IntN(800)) * time.Millisecond
		w.apply(w.coord.Tick(w.at()))
	}
	for _, g := range w.processes() {
		w.run(g)
	}
}

func newOwnWorld(t *testing.T, seed uint64) *ownWorld {
	c, err := coordinator.New(coordinator.Config{Default: coordinator.GroupConfig{InitialRebalanceDelay: -1}}, seed)
	if err != nil {
		t.Fatal(err)
	}
	return &ownWorld{t: t, rng: rand.New(rand.NewPCG(seed, 20)), coord: c, reqs: map[coordinator.RequestID]*ownGateway{}, now: time.Minute}
}

// TestOwnership_NoShardIsEverAnswerableByTwoGateways runs random histories
// of faults and checks single ownership after every step; each history
// then runs fault-free until every shard has one answering gateway again.
func TestOwnership_NoShardIsEverAnswerableByTwoGateways(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	for seed := range uint64(seeds) {
		w := newOwnWorld(t, seed)
		w.start(0)
		w.start(1)
		for step := range 1500 {
			w.step()
			w.check(step)
		}
		// Quiet: every process resumes, the network heals, nobody fails.
		for _, g := range w.processes() {
			g.paused, g.cut = 0, 0
		}
		if len(w.live()) == 0 {
			w.start(0)
		}
		for step := 0; step < 2000; step++ {
			w.now += 100 * time.Millisecond
			w.apply(w.coord.Tick(w.at()))
			for _, g := range w.processes() {
				w.run(g)
			}
			w.check(1500 + step)
		}
		for s := range ownShards {
			if ids := w.answering(s); len(ids) != 1 {
				t.Fatalf("seed %d: after a quiet minute shard %d is answerable by %v\n%s", seed, s, ids, w.tail())
			}
		}
	}
}

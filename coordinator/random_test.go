package coordinator

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// world is one randomized run: a group, simulated clients and a schedule of
// random events drawn from a seeded source.
type world struct {
	h       *harness
	rng     *rand.Rand
	sims    []*simClient
	topics  map[string]int
	mode    int
	nextSim int
	lastGen int32
	slow    map[*simClient]bool
	log     []string
	// extraInputs adds the inputs a live daemon also feeds: Fetch rack
	// sightings, served-protocol changes from hot reload, upstream
	// outages.
	extraInputs bool
}

const (
	modeCooperative = iota // every member offers only cooperative-sticky
	modeEager              // every member offers range
	modeMixed              // cooperative-sticky only, or cooperative-sticky then range (eager)
	modeCount
)

func newWorld(t testing.TB, seed uint64, withhold bool) *world {
	return newWorldRecorded(t, seed, withhold, false)
}

// newWorldRecorded is newWorld; with record set, the harness records every
// input from the first on, and the world adds the extra inputs.
func newWorldRecorded(t testing.TB, seed uint64, withhold, record bool) *world {
	cfg := Config{Default: GroupConfig{InitialRebalanceDelay: -1}}
	cfg.disableWithholding = !withhold
	h := newHarness(t, cfg)
	h.autoJobs = false
	if record {
		h.rec = &recording{}
	}
	w := &world{h: h, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), topics: map[string]int{"t0": 6, "t1": 3}, slow: map[*simClient]bool{}}
	w.mode = w.rng.IntN(modeCount)
	w.extraInputs = record
	h.setMetadata(meta(w.topics))
	return w
}

func (w *world) logf(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf("%v ", w.h.now.Sub(t0))+fmt.Sprintf(format, args...))
}

func (w *world) addSim(instance string) *simClient {
	w.nextSim++
	var protos []string
	switch w.mode {
	case modeCooperative:
		protos = []string{"cooperative-sticky"}
	case modeEager:
		protos = []string{"range"}
	default:
		protos = []string{"cooperative-sticky"}
		if w.rng.IntN(2) == 0 {
			protos = []string{"cooperative-sticky", "range"}
		}
	}
	topics := []string{"t0", "t1"}
	if w.rng.IntN(3) == 0 {
		topics = []string{"t0"}
	}
	s := newSim(w.h, fmt.Sprintf("c%d", w.nextSim), "g", protos, topics)
	if w.rng.IntN(4) == 0 {
		// Subscription v1, as librdkafka sends: owned partitions without a
		// generation.
		s.subVersion = 1
	}
	s.instance = instance
	if instance == "" && w.rng.IntN(3) == 0 {
		s.instance = fmt.Sprintf("i%d", w.nextSim)
	}
	w.sims = append(w.sims, s)
	return s
}

func (w *world) live() []*simClient {
	var out []*simClient
	for _, s := range w.sims {
		if s.phase != dead {
			out = append(out, s)
		}
	}
	return out
}

func (w *world) pick() *simClient {
	l := w.live()
	if len(l) == 0 {
		return nil
	}
	return l[w.rng.IntN(len(l))]
}

// step performs one random event.
func (w *world) step() {
	if w.extraInputs && w.rng.IntN(100) < 10 {
		w.extraStep()
		return
	}
	r := w.rng.IntN(100)
	switch {
	case r < 35:
		s := w.pick()
		if s == nil {
			return
		}
		s.poll()
		switch s.phase {
		case idle:
			w.logf("%s joins (member %q)", s.name, s.memberID)
			s.join()
		case joined:
			if w.slow[s] && w.rng.IntN(3) != 0 {
				return // a slow SyncGroup
			}
			w.logf("%s syncs gen %d", s.name, s.generation)
			s.sync()
		case stable:
			s.heartbeat()
		}
		s.poll()
	case r < 50:
		d := time.Duration(w.rng.IntN(3000)) * time.Millisecond
		w.h.advance(d)
	case r < 70:
		if len(w.h.jobs) == 0 {
			return
		}
		j := w.h.jobs[0]
		w.h.jobs = w.h.jobs[1:]
		switch x := w.rng.IntN(10); {
		case x == 0:
			w.logf("job %d (%s) fails", j.ID, j.Assignor)
			w.h.assignmentDone(j.ID, nil, errors.New("trap"))
		case x == 2:
			w.logf("job %d (%s) finds the runner busy", j.ID, j.Assignor)
			w.h.assignmentDone(j.ID, nil, fmt.Errorf("%w: overloaded", ErrRunnerBusy))
		case x == 1:
			w.logf("job %d (%s) answers garbage", j.ID, j.Assignor)
			bad := &abi.Response{Members: []abi.MemberAssignment{{Member: 0, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{0, 0}}}}}}
			w.h.assignmentDone(j.ID, bad, nil)
		default:
			w.logf("job %d (%s) completes", j.ID, j.Assignor)
			w.h.finishJob(j)
		}
	case r < 76:
		if len(w.live()) < 6 {
			s := w.addSim("")
			w.slow[s] = w.rng.IntN(3) == 0
			w.logf("%s starts (instance %q, protocols %v, topics %v)", s.name, s.instance, s.protocols, s.topics)
			s.join()
		}
	case r < 79:
		if s := w.pick(); s != nil {
			w.logf("%s leaves", s.name)
			s.leave()
		}
	case r < 82:
		if s := w.pick(); s != nil {
			w.logf("%s crashes", s.name)
			s.crash()
		}
	case r < 86:
		// A static member restarts with a new process and no member id.
		s := w.pick()
		if s == nil || s.instance == "" {
			return
		}
		s.crash()
		n := w.addSim(s.instance)
		n.protocols, n.topics, n.cooperative = s.protocols, s.topics, s.cooperative
		w.logf("%s restarts as %s", s.name, n.name)
		n.join()
	case r < 90:
		switch w.rng.IntN(3) {
		case 0:
			w.topics["t0"]++
		case 1:
			if _, ok := w.topics["t2"]; ok {
				delete(w.topics, "t2")
			} else {
				w.topics["t2"] = 2
			}
		default:
			if w.topics["t1"] > 0 {
				delete(w.topics, "t1")
			} else {
				w.topics["t1"] = 3
			}
		}
		w.logf("metadata %v", w.topics)
		w.h.setMetadata(meta(w.topics))
	case r < 94:
		// A zombie: a client restarted from old state reports ownership it
		// no longer has, from an old generation.
		s := w.pick()
		if s == nil || s.phase != idle {
			return
		}
		claim := map[string][]int32{"t0": {0, 1, 2}}
		clear(s.held)
		s.staleClaim = claim
		w.logf("%s will claim %v at generation 1", s.name, claim)
	case r < 95:
		// The daemon restarts from exported state. Parked requests are lost
		// with their connections, and their clients retry.
		w.logf("coordinator restarts")
		restart(w.h.t, w.h)
		w.h.jobs = nil
		for _, s := range w.live() {
			if _, answered := w.h.replies[s.req]; !answered && (s.phase == joining || s.phase == syncing) {
				s.phase = idle
			}
		}
	case r < 97:
		s := w.pick()
		if s == nil {
			return
		}
		if len(s.topics) == 2 {
			s.topics = []string{"t0", "t2"}
		} else {
			s.topics = []string{"t0", "t1"}
		}
		w.logf("%s changes subscription to %v", s.name, s.topics)
		if s.phase == stable {
			s.phase = idle
		}
	default:
		// Everyone catches up.
		for _, s := range w.live() {
			s.poll()
			if s.phase == stable {
				s.heartbeat()
			}
			s.poll()
		}
	}
}

// extraStep feeds one of the inputs only a live daemon has besides
// requests, time, plugin results and metadata.
func (w *world) extraStep() {
	h := w.h
	switch w.rng.IntN(6) {
	case 5:
		// The group's shard moves to another gateway and back: parked
		// requests are answered NOT_COORDINATOR and their clients retry.
		w.logf("handover")
		h.absorb(h.call(handoverInput{now: h.now, group: "g"}))
		h.jobs = nil
	case 4:
		// A reloaded assignor rebalances the group.
		w.logf("rebalance asked for")
		h.absorb(h.call(rebalanceInput{now: h.now, group: "g", reason: "assignor plugin reloaded"}))
	case 0:
		// The proxy saw Fetch racks: of a member's client, or of a client
		// that is no member.
		var seen []FetchRack
		for range 1 + w.rng.IntN(2) {
			rack := fmt.Sprintf("r%d", w.rng.IntN(3))
			if s := w.pick(); s != nil && w.rng.IntN(4) != 0 {
				var fetched []FetchedTopic
				for t, ps := range s.held {
					fetched = append(fetched, FetchedTopic{Topic: t, Partitions: slices.Clone(ps)})
				}
				slices.SortFunc(fetched, func(a, b FetchedTopic) int { return strings.Compare(a.Topic, b.Topic) })
				seen = append(seen, FetchRack{ClientID: s.client.ID, Host: s.client.Host, Rack: rack, Fetched: fetched})
			} else {
				seen = append(seen, FetchRack{ClientID: "stranger", Host: "/10.9.9.9", Rack: rack})
			}
		}
		w.logf("fetch racks seen %+v", seen)
		h.absorb(h.call(racksInput{now: h.now, seen: seen}))
	case 1:
		// The driver's book knows a client's rack for its next JoinGroup.
		if s := w.pick(); s != nil {
			s.client.FetchRack = fmt.Sprintf("r%d", w.rng.IntN(3))
			w.logf("%s's fetch rack is known as %s", s.name, s.client.FetchRack)
		}
	case 2:
		// Hot reload: range is served by a round-robin plugin now, or by
		// range again.
		served := builtinNames()
		if h.c.protocols["range"] == "range" {
			served["range"] = "roundrobin"
		}
		w.logf("served protocols %v", served)
		h.absorb(h.call(servedInput{now: h.now, served: served}))
	default:
		paused := !h.c.sessionsPaused
		w.logf("sessions paused %v", paused)
		h.absorb(h.call(pauseInput{now: h.now, paused: paused}))
	}
}

// check verifies the invariants after a step.
func (w *world) check() error {
	g := w.h.c.groups["g"]
	if g == nil {
		return nil
	}
	// The counts behind candidates agree with the members' protocols.
	want := map[string]int{}
	for _, m := range g.members {
		seen := map[string]bool{}
		for _, p := range m.protocols {
			if !seen[p.Name] {
				seen[p.Name] = true
				want[p.Name]++
			}
		}
	}
	if !maps.Equal(want, g.offered) {
		return fmt.Errorf("offered protocol counts %v, members offer %v", g.offered, want)
	}
	if g.generation < w.lastGen {
		return fmt.Errorf("generation went back from %d to %d", w.lastGen, g.generation)
	}
	w.lastGen = g.generation
	// Nothing is left waiting without a way forward.
	for _, m := range g.members {
		if m.joinWait != nil && g.state != PreparingRebalance {
			return fmt.Errorf("member %s has a parked JoinGroup in %v", m.id, g.state)
		}
		if m.syncWait != nil && g.state != CompletingRebalance {
			return fmt.Errorf("member %s has a parked SyncGroup in %v", m.id, g.state)
		}
	}
	if g.state == PreparingRebalance && g.joinDeadline.IsZero() {
		return fmt.Errorf("PreparingRebalance with no join deadline")
	}
	if g.state == CompletingRebalance && g.serverSide && g.job == 0 {
		// With the assignment computed, only the leader's SyncGroup may be
		// missing, and the sync deadline bounds the wait for it.
		switch {
		case !g.assigned:
			return fmt.Errorf("CompletingRebalance with no assignment job")
		case !g.pendingSync[g.leader]:
			return fmt.Errorf("CompletingRebalance with the assignment computed and the leader synced")
		case g.syncDeadline.IsZero():
			return fmt.Errorf("CompletingRebalance waiting for the leader with no sync deadline")
		}
	}
	// Single ownership, in reality: no two current members hold a partition.
	owner := map[string]string{}
	for _, s := range w.sims {
		if s.phase == dead || g.members[s.memberID] == nil {
			continue
		}
		for t, ps := range s.held {
			for _, p := range ps {
				k := fmt.Sprintf("%s-%d", t, p)
				if o, ok := owner[k]; ok {
					return fmt.Errorf("partition %s held by %s and %s at generation %d", k, o, s.name, g.generation)
				}
				owner[k] = s.name
			}
		}
	}
	if g.state != Stable {
		return nil
	}
	// Every member of a Stable group holds a valid assignment.
	given := map[string]string{}
	for _, m := range g.sortedMembers() {
		a := decodeAssignmentErr(m.assignment)
		if a == nil {
			return fmt.Errorf("member %s has no decodable assignment in Stable", m.id)
		}
		topics := subscribedTopics(m, g.protocol)
		for t, ps := range a {
			if !slices.Contains(topics, t) {
				return fmt.Errorf("member %s got %s outside its subscription %v", m.id, t, topics)
			}
			for _, p := range ps {
				if p < 0 || int(p) >= w.topics[t] {
					return fmt.Errorf("member %s got %s-%d, which does not exist", m.id, t, p)
				}
				k := fmt.Sprintf("%s-%d", t, p)
				if o, ok := given[k]; ok {
					return fmt.Errorf("%s assigned to %s and %s", k, o, m.id)
				}
				given[k] = m.id
			}
		}
	}
	return nil
}

func runWorld(t testing.TB, seed uint64, steps int, withhold bool) (*world, error) {
	w := newWorld(t, seed, withhold)
	for i := 0; i < steps; i++ {
		w.step()
		if err := w.check(); err != nil {
			return w, fmt.Errorf("seed %d step %d: %w", seed, i, err)
		}
	}
	return w, nil
}

func TestRandomized_InvariantsHoldOverThousandsOfEventSequences(t *testing.T) {
	runs, steps := 2000, 200
	if testing.Short() {
		runs = 200
	}
	rebalanced, assignments, withheldRounds, fallbacks, restarts := 0, 0, 0, 0, 0
	for seed := uint64(1); seed <= uint64(runs); seed++ {
		w, err := runWorld(t, seed, steps, true)
		if err != nil {
			for _, l := range w.log[max(0, len(w.log)-40):] {
				t.Log(l)
			}
			t.Fatal(err)
		}
		if w.lastGen > 1 {
			rebalanced++
		}
		for _, l := range w.log {
			if strings.HasSuffix(l, "coordinator restarts") {
				restarts++
			}
		}
		for _, e := range w.h.events {
			switch {
			case e.Kind == EventAssignmentCompleted:
				assignments++
				if e.N > 0 {
					withheldRounds++
				}
			case e.Kind == EventAssignmentFailed:
				fallbacks++
			}
		}
	}
	t.Logf("%d runs: %d rebalanced, %d assignments handed out, %d rounds that withheld, %d plugin failures, %d coordinator restarts", runs, rebalanced, assignments, withheldRounds, fallbacks, restarts)
	// The runs must exercise what they check, or the invariants prove
	// nothing.
	if rebalanced < runs/2 || withheldRounds == 0 || fallbacks == 0 || restarts == 0 {
		t.Fatal("the random schedule does not exercise rebalances, withholding and fallbacks")
	}
}

func TestRandomized_HasTeethWithoutWithholding(t *testing.T) {
	found := 0
	var first error
	for seed := uint64(1); seed <= 300; seed++ {
		if _, err := runWorld(t, seed, 200, false); err != nil {
			found++
			if first == nil {
				first = err
			}
		}
	}
	if found == 0 {
		t.Fatal("with withholding switched off, no run found double ownership")
	}
	t.Logf("without withholding, %d of 300 runs broke an invariant; first: %v", found, first)
}

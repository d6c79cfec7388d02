package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/plugins/roundrobin"
	"github.com/wasmassign/wasmassign/plugins/sticky"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// javaRound is what a member brought to one generation's rebalance, as
// the group coordinator saw it: what it reported owning when it joined
// (and in which generation it had been given that), and what it was
// assigned in the generation before.
type javaRound struct {
	owned    []int32
	ownedGen int32
	previous []int32
}

// round reconstructs, from the member's callbacks, its input to the
// rebalance that made generation gen: what it held when its first callback
// of gen began. A cooperative member reports what it holds when it rejoins,
// and its callbacks of gen (revoking what moves, then the assignment) come
// after gen's SyncGroup; an eager one revoked everything under the
// generation before, so reports nothing. ok is false until the member has
// printed its assignment for gen.
func (m *procMember) round(gen int32) (r javaRound, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	held := map[int32]bool{}
	lastGen := int32(-1)
	var previous []int32
	started := false
	for _, ev := range m.events {
		if ev.gen == gen && ev.kind != "exit" && !started {
			started = true
			r = javaRound{owned: slices.Sorted(maps.Keys(held)), ownedGen: -1, previous: previous}
			if len(r.owned) > 0 {
				r.ownedGen = lastGen
			}
		}
		if ev.kind == "assigned" && ev.gen == gen {
			return r, true
		}
		for _, p := range ev.partitions {
			if ev.kind == "assigned" {
				held[p] = true
			} else {
				delete(held, p)
			}
		}
		if ev.kind == "assigned" {
			previous, lastGen = slices.Sorted(maps.Keys(held)), ev.gen
		}
	}
	return javaRound{}, false
}

// settledJava waits until the gateway shows group Stable with exactly
// members, holding all partitions of topic, and each member has seen the
// gateway's generation and holds by its own callbacks exactly what the
// gateway assigned it.
func settledJava(ctx context.Context, d *daemon, group, topic string, partitions int, members []*procMember) (adminGroup, error) {
	return settledMembers(ctx, d, group, topic, partitions, members, func(g adminGroup, _ adminMember, m *procMember) error {
		if _, ok := m.round(g.Generation); !ok {
			return fmt.Errorf("%s has not been assigned generation %d yet", m.clientID, g.Generation)
		}
		return nil
	})
}

// javaPlugins are the built-in assignors' native code by name, to compute
// what the gateway should hand out.
func javaPlugins() map[string]func(*abi.Request) (*abi.Response, error) {
	return map[string]func(*abi.Request) (*abi.Response, error){
		"range":              rangeassignor.Assign,
		"roundrobin":         roundrobin.Assign,
		"sticky":             sticky.AssignEager,
		"cooperative-sticky": sticky.AssignCooperative,
	}
}

// javaExpected runs assign on the group the admin API shows, with topic's
// placement pl, the broker racks and each member's input to the round (by
// client id), and returns what it gives each member id. It is expected's
// counterpart for rounds where members bring different things: eager
// members that report nothing next to cooperative ones that report what
// they hold, and the previous assignment the host falls back on. The
// request's rebalance protocol and members' Cooperative flags stay unset:
// the built-in plugins compute from reported ownership alone, and the
// host's withholding, which does read ownership, has nothing left to
// withhold in the stable states this is used on.
//
// A member's Previous is what the host assigned it in the generation
// before, delivered or not, while the callbacks show only what arrived: a
// generation computed for a member whose SyncGroup then met a new join
// (REBALANCE_IN_PROGRESS) is in the host's input and in no callback. The
// tests therefore change a group's membership only once it has settled,
// so that every generation reaches all its members.
func javaExpected(g adminGroup, assign func(*abi.Request) (*abi.Response, error), topic string, pl placement, brokerRacks map[int32]string, rounds map[string]javaRound) (map[string]map[string][]int32, error) {
	req, names := assignRequest(g, map[string]placement{topic: pl}, brokerRacks)
	tps := func(ps []int32) []abi.TopicPartitions {
		if len(ps) == 0 {
			return nil
		}
		return []abi.TopicPartitions{{Topic: 0, Partitions: slices.Clone(ps)}}
	}
	for i := range req.Members {
		am := &req.Members[i]
		r, ok := rounds[am.ClientID]
		if !ok {
			return nil, fmt.Errorf("no round input for member %s", am.ClientID)
		}
		am.OwnedGeneration, am.Owned, am.Previous = r.ownedGen, tps(r.owned), tps(r.previous)
	}
	return assignByMember(req, names, assign)
}

// checkAssignment checks that the stable group g holds what its serving
// plugin computes from the members' inputs to the round that made g's
// generation, as the members' own callbacks show them.
func (r *javaRig) checkAssignment(t *testing.T, g adminGroup, topic string, pl placement, members []*procMember) {
	t.Helper()
	assign := javaPlugins()[g.Assignor]
	if assign == nil {
		t.Fatalf("group %s is served by %q, which this test cannot compute", g.Group, g.Assignor)
	}
	rounds := map[string]javaRound{}
	for _, m := range members {
		rd, ok := m.round(g.Generation)
		if !ok {
			t.Fatalf("%s has no assignment for generation %d", m.clientID, g.Generation)
		}
		rounds[m.clientID] = rd
	}
	want, err := javaExpected(g, assign, topic, pl, r.brokers, rounds)
	if err != nil {
		t.Fatal(err)
	}
	if got := adminAssignment(g); !sameAssignment(got, want) {
		t.Errorf("generation %d: the gateway assigned %v; %s computes %v from the members' input %v", g.Generation, got, g.Assignor, want, rounds)
	} else {
		t.Logf("generation %d: from the members' input %+v", g.Generation, rounds)
	}
}

// javaNoDoubleOwnership replays every member's callbacks in the order of
// their clocks and checks that no partition was assigned to a member while
// another still held it: the guarantee a mix of eager and cooperative
// members must keep. A member's exit releases what it held.
func javaNoDoubleOwnership(ms []*procMember) error {
	type stamped struct {
		procEvent
		m *procMember
	}
	var all []stamped
	for _, m := range ms {
		for _, ev := range m.eventsSince(0) {
			all = append(all, stamped{ev, m})
		}
	}
	slices.SortStableFunc(all, func(a, b stamped) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		// Equal clocks: a release cannot be proven to follow the
		// assignment, so let it go first, which forgives only a tie.
		return javaBoolCmp(a.kind == "assigned", b.kind == "assigned")
	})
	owner := map[int32]*procMember{}
	since := map[int32]time.Time{}
	for _, ev := range all {
		switch ev.kind {
		case "assigned":
			for _, p := range ev.partitions {
				if o := owner[p]; o != nil && o != ev.m {
					return fmt.Errorf("partition %d assigned to %s at %s (generation %d) while %s held it since %s",
						p, ev.m.clientID, ev.at.Format("15:04:05.000000"), ev.gen, o.clientID, since[p].Format("15:04:05.000000"))
				}
				owner[p], since[p] = ev.m, ev.at
			}
		case "exit":
			for p, o := range owner {
				if o == ev.m {
					delete(owner, p)
				}
			}
		default:
			for _, p := range ev.partitions {
				if owner[p] == ev.m {
					delete(owner, p)
				}
			}
		}
	}
	return nil
}

func javaBoolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}

// javaTopic creates topic with partitions on the cluster and returns its
// placement.
func (r *javaRig) javaTopic(t *testing.T, topic string, partitions int32) placement {
	t.Helper()
	return createTopicPlaced(r.ctx, t, r.direct, topic, partitions)[topic]
}

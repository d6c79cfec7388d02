package coordinator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// input is one recorded input of a coordinator: everything it learns comes
// as one of these, so applying the same inputs to a fresh coordinator must
// give the same outputs. Each holds its data as bytes or copies, never as
// values the recording side may change later.
type input interface {
	apply(t testing.TB, c **Coordinator) Output
}

type handleInput struct {
	now          time.Time
	id           RequestID
	client       Client
	key, version int16
	body         []byte
}

func (in handleInput) apply(t testing.TB, c **Coordinator) Output {
	req := kmsg.RequestForKey(in.key)
	req.SetVersion(in.version)
	if err := req.ReadFrom(in.body); err != nil {
		t.Fatalf("replay: decoding a recorded %s v%d: %v", kmsg.NameForKey(in.key), in.version, err)
	}
	return (*c).Handle(in.now, in.id, in.client, req)
}

type tickInput struct{ now time.Time }

func (in tickInput) apply(_ testing.TB, c **Coordinator) Output { return (*c).Tick(in.now) }

type metadataInput struct {
	now time.Time
	md  []byte // JSON; "null" for none
}

func (in metadataInput) apply(t testing.TB, c **Coordinator) Output {
	var md *Metadata
	if err := json.Unmarshal(in.md, &md); err != nil {
		t.Fatal(err)
	}
	return (*c).SetMetadata(in.now, md)
}

// assignmentInput is a plugin's result: its response in the ABI's bytes, or
// the text of its error, and whether it wraps ErrRunnerBusy.
type assignmentInput struct {
	now  time.Time
	job  uint64
	resp []byte
	err  string
	busy bool
}

func (in assignmentInput) apply(t testing.TB, c **Coordinator) Output {
	var resp *abi.Response
	if in.resp != nil {
		var err error
		if resp, err = abi.DecodeResponse(in.resp); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if in.err != "" {
		err = errors.New(in.err)
	}
	if in.busy {
		err = fmt.Errorf("%w: %s", ErrRunnerBusy, in.err)
	}
	return (*c).AssignmentDone(in.now, in.job, resp, err)
}

type servedInput struct {
	now    time.Time
	served ServedProtocols
}

func (in servedInput) apply(_ testing.TB, c **Coordinator) Output {
	return (*c).SetServedProtocols(in.now, maps.Clone(in.served))
}

type racksInput struct {
	now  time.Time
	seen []FetchRack
}

func (in racksInput) apply(_ testing.TB, c **Coordinator) Output {
	seen := slices.Clone(in.seen)
	for i := range seen {
		seen[i].Fetched = slices.Clone(seen[i].Fetched)
	}
	return (*c).FetchRacksSeen(in.now, seen)
}

// rebalanceInput is the driver asking for a rebalance (after a plugin
// reload, for groups configured to rebalance on it).
type rebalanceInput struct {
	now    time.Time
	group  string
	reason string
}

func (in rebalanceInput) apply(_ testing.TB, c **Coordinator) Output {
	return (*c).Rebalance(in.now, in.group, in.reason)
}

type pauseInput struct {
	now    time.Time
	paused bool
}

func (in pauseInput) apply(_ testing.TB, c **Coordinator) Output {
	return (*c).PauseSessions(in.now, in.paused)
}

// restartInput is the daemon restarting from its saved state: a new
// coordinator (with a new id seed and the plugins loaded now) restores what
// the old one exported, after the first metadata fetch.
type restartInput struct {
	now  time.Time
	seed uint64
}

func (in restartInput) apply(t testing.TB, c **Coordinator) Output {
	old := *c
	b, err := json.Marshal(old.Export())
	if err != nil {
		t.Fatal(err)
	}
	var states []GroupState
	if err := json.Unmarshal(b, &states); err != nil {
		t.Fatal(err)
	}
	cfg := old.cfg
	cfg.Served = maps.Clone(old.protocols)
	n, err := New(cfg, in.seed)
	if err != nil {
		t.Fatal(err)
	}
	*c = n
	out := n.SetMetadata(in.now, old.meta)
	restored, err := n.Restore(in.now, states)
	if err != nil {
		t.Fatal(err)
	}
	return mergeOutputs(out, restored)
}

// handoverInput is the group moving to another gateway and, later, back:
// the coordinator gives it up with Unload, and restores what it had
// exported of it, as the next owner restores what the last one saved.
type handoverInput struct {
	now   time.Time
	group string
}

func (in handoverInput) apply(t testing.TB, c **Coordinator) Output {
	gs, ok := (*c).ExportGroup(in.group)
	out := (*c).Unload(in.now, []string{in.group})
	if !ok {
		return out
	}
	b, err := json.Marshal([]GroupState{gs})
	if err != nil {
		t.Fatal(err)
	}
	var states []GroupState
	if err := json.Unmarshal(b, &states); err != nil {
		t.Fatal(err)
	}
	restored, err := (*c).Restore(in.now, states)
	if err != nil {
		t.Fatal(err)
	}
	return mergeOutputs(out, restored)
}

func mergeOutputs(a, b Output) Output {
	a.Replies = append(a.Replies, b.Replies...)
	a.Forwards = append(a.Forwards, b.Forwards...)
	a.Jobs = append(a.Jobs, b.Jobs...)
	a.Events = append(a.Events, b.Events...)
	a.NeedMetadata = append(a.NeedMetadata, b.NeedMetadata...)
	a.NextDeadline = b.NextDeadline
	return a
}

// recording holds a run's inputs and the bytes of the output of each.
type recording struct {
	inputs  []input
	outputs [][]byte
}

// outputBytes encodes everything an Output tells the driver: responses and
// forwarded requests in Kafka's wire form, jobs with their plugin request in
// the ABI's, events, topics to look up and the next deadline.
func outputBytes(out Output) []byte {
	var b bytes.Buffer
	for _, r := range out.Replies {
		fmt.Fprintf(&b, "reply %d %s v%d ", r.ID, kmsg.NameForKey(r.Response.Key()), r.Response.GetVersion())
		b.Write(r.Response.AppendTo(nil))
		b.WriteByte('\n')
	}
	for _, f := range out.Forwards {
		fmt.Fprintf(&b, "forward %d %s v%d ", f.ID, kmsg.NameForKey(f.Request.Key()), f.Request.GetVersion())
		b.Write(f.Request.AppendTo(nil))
		b.WriteByte('\n')
	}
	for _, j := range out.Jobs {
		fmt.Fprintf(&b, "job %d %s %d %s %d ", j.ID, j.Group, j.Generation, j.Assignor, j.Attempt)
		b.Write(abi.AppendRequest(nil, j.Request))
		b.WriteByte('\n')
	}
	for _, e := range out.Events {
		fmt.Fprintf(&b, "event %+v\n", e)
	}
	fmt.Fprintf(&b, "need %q\ndeadline %d\n", out.NeedMetadata, out.NextDeadline.UnixNano())
	return b.Bytes()
}

// call applies one input to the harness's coordinator, recording it and the
// bytes of its output when the harness records, and checking its
// bookkeeping when the harness checks.
func (h *harness) call(in input) Output {
	out := in.apply(h.t, &h.c)
	if h.checkEach {
		if err := checkBookkeeping(h.c, out.NextDeadline); err != nil {
			h.t.Fatalf("after %T: %v", in, err)
		}
	}
	if h.rec != nil {
		h.rec.inputs = append(h.rec.inputs, in)
		h.rec.outputs = append(h.rec.outputs, outputBytes(out))
	}
	return out
}

// exportedByGroup is every group's exported state, as JSON, by group, as
// far as a restore keeps it: a group restored mid-rebalance starts its
// join phase over, and its members' next JoinGroups bring their protocols
// and racks again.
func exportedByGroup(c *Coordinator) map[string]string {
	out := map[string]string{}
	for _, gs := range c.Export() {
		if gs.State != Stable.String() && gs.State != Empty.String() {
			for i := range gs.Members {
				gs.Members[i].Protocols, gs.Members[i].Rack = nil, ""
			}
		}
		b, _ := json.Marshal(gs)
		out[gs.Group] = string(b)
	}
	return out
}

// checkAnsweredSaved keeps the groups' state as a driver with a Saver
// would have saved it (a group is saved after each output whose events
// name it; a new coordinator, restored, starts from what it holds) and
// checks that no answer or forward of out leaves with its group's state
// unsaved. A member told of what no save holds would find it forgotten
// after a failover: a gateway that takes the group over restores the last
// save.
func (h *harness) checkAnsweredSaved(out Output) error {
	now := exportedByGroup(h.c)
	if h.savedOf != h.c {
		h.saved, h.savedOf = now, h.c
		return nil
	}
	for _, e := range out.Events {
		if s, ok := now[e.Group]; ok {
			h.saved[e.Group] = s
		} else {
			delete(h.saved, e.Group)
		}
	}
	ids := make([]RequestID, 0, len(out.Replies)+len(out.Forwards))
	for _, r := range out.Replies {
		ids = append(ids, r.ID)
	}
	for _, f := range out.Forwards {
		ids = append(ids, f.ID)
	}
	for _, id := range ids {
		for _, g := range h.requestGroups[id] {
			if now[g] != h.saved[g] {
				return fmt.Errorf("request %d of group %s answered before its state was saved:\n saved %s\n now   %s", id, g, h.saved[g], now[g])
			}
		}
	}
	return nil
}

// replay applies rec's inputs to a fresh coordinator made with cfg and
// seed, and returns the index of the first input whose output differs from
// the recorded bytes, or -1 when every one is identical.
func replay(t testing.TB, rec *recording, cfg Config, seed uint64) (int, []byte) {
	c, err := New(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range rec.inputs {
		if got := outputBytes(in.apply(t, &c)); !bytes.Equal(got, rec.outputs[i]) {
			return i, got
		}
	}
	return -1, nil
}

// TestReplay_RecordedRunsReplayByteForByte records every input of
// randomized runs (requests, time, plugin results and failures, metadata,
// Fetch rack sightings, served-protocol changes as hot reload makes them,
// rebalances asked for after a reload, upstream outages, restarts from saved
// state) and replays them into a
// fresh coordinator: every output must be byte-identical. A coordinator
// that read anything but its inputs (a live registry, a rack book, a
// clock, a map's iteration order) would diverge.
func TestReplay_RecordedRunsReplayByteForByte(t *testing.T) {
	seeds, steps := 150, 400
	if testing.Short() {
		seeds = 30
	}
	var inputs, jobs int
	kinds := map[string]int{}
	for seed := range uint64(seeds) {
		w := newWorldRecorded(t, seed, true, true)
		cfg := w.h.c.cfg
		for i := range steps {
			w.step()
			if err := w.check(); err != nil {
				t.Fatalf("seed %d step %d: %v\n%s", seed, i, err, lastLines(w.log, 30))
			}
		}
		for _, in := range w.h.rec.inputs {
			kinds[fmt.Sprintf("%T", in)]++
			if a, ok := in.(assignmentInput); ok && a.err == "" {
				jobs++
			}
		}
		inputs += len(w.h.rec.inputs)
		if i, got := replay(t, w.h.rec, cfg, 42); i >= 0 {
			t.Fatalf("seed %d: input %d (%T) gave other output on replay:\nrecorded:\n%q\nreplayed:\n%q\nrun:\n%s",
				seed, i, w.h.rec.inputs[i], w.h.rec.outputs[i], got, lastLines(w.log, 30))
		}
	}
	// The runs must have exercised every kind of input, or the replay
	// proves less than it claims.
	for _, k := range []string{"coordinator.handleInput", "coordinator.tickInput", "coordinator.metadataInput",
		"coordinator.assignmentInput", "coordinator.servedInput", "coordinator.racksInput",
		"coordinator.pauseInput", "coordinator.restartInput", "coordinator.rebalanceInput", "coordinator.handoverInput"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in %d runs: %v", k, seeds, kinds)
		}
	}
	if jobs == 0 {
		t.Error("no plugin answered in any run")
	}
	t.Logf("%d runs, %d inputs replayed: %v", seeds, inputs, kinds)
}

// TestReplay_HasTeeth: the byte comparison notices a difference in the
// inputs, so a replay that passes means something. A replay with another id
// seed (member ids differ) and one with a rack sighting dropped must both
// diverge.
func TestReplay_HasTeeth(t *testing.T) {
	var seedDiverged, rackDiverged bool
	for seed := range uint64(40) {
		w := newWorldRecorded(t, seed, true, true)
		cfg := w.h.c.cfg
		for range 400 {
			w.step()
		}
		if i, _ := replay(t, w.h.rec, cfg, 43); i >= 0 {
			seedDiverged = true
		}
		for j, in := range w.h.rec.inputs {
			if r, ok := in.(racksInput); ok && len(r.seen) > 0 {
				cut := &recording{inputs: slices.Clone(w.h.rec.inputs), outputs: w.h.rec.outputs}
				cut.inputs[j] = racksInput{now: r.now}
				if i, _ := replay(t, cut, cfg, 42); i >= 0 {
					rackDiverged = true
				}
			}
		}
		if seedDiverged && rackDiverged {
			return
		}
	}
	t.Fatalf("replays with changed inputs never diverged: id seed %v, rack sighting %v", seedDiverged, rackDiverged)
}

func lastLines(log []string, n int) string {
	if len(log) > n {
		log = log[len(log)-n:]
	}
	var b bytes.Buffer
	for _, l := range log {
		b.WriteString(l + "\n")
	}
	return b.String()
}

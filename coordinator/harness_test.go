package coordinator

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	rangeassignor "github.com/wasmassign/wasmassign/plugins/range"
	"github.com/wasmassign/wasmassign/plugins/roundrobin"
	"github.com/wasmassign/wasmassign/plugins/sticky"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// builtinNames serves the built-in protocol names, as the runtime's registry
// does with the built-in plugins.
func builtinNames() ServedProtocols {
	return ServedProtocols{
		"range":              "range",
		"roundrobin":         "roundrobin",
		"RoundRobinAssigner": "roundrobin",
		"sticky":             "sticky",
		"cooperative-sticky": "cooperative-sticky",
	}
}

type assignFunc func(*abi.Request) (*abi.Response, error)

// nativeAssignors runs the built-in algorithms natively, standing in for the
// runtime.
func nativeAssignors() map[string]assignFunc {
	return map[string]assignFunc{
		"range":              rangeassignor.Assign,
		"roundrobin":         roundrobin.Assign,
		"sticky":             sticky.AssignEager,
		"cooperative-sticky": sticky.AssignCooperative,
	}
}

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// harness is a driver with a fake clock: it collects replies, runs jobs on
// request and fires timers as time advances.
type harness struct {
	t        testing.TB
	c        *Coordinator
	now      time.Time
	nextID   RequestID
	replies  map[RequestID]kmsg.Response
	forwards map[RequestID]Forward
	jobs     []Job
	events   []Event
	// needMetadata collects every Output.NeedMetadata.
	needMetadata []string
	deadline     time.Time
	assignors    map[string]assignFunc
	// autoJobs runs every job as soon as it is issued.
	autoJobs bool
	// rec, when set, records every input and its output (harness.call).
	rec *recording
	// checkEach checks the coordinator's bookkeeping against a scan of
	// its groups after every input (checkBookkeeping); benchmarks leave
	// it off.
	checkEach bool
	// requestGroups are the groups each request sent names, and saved each
	// group's state as a driver with a Saver would have saved it
	// (checkAnsweredSaved).
	requestGroups map[RequestID][]string
	saved         map[string]string
	savedOf       *Coordinator
}

func newHarness(t testing.TB, cfg Config) *harness {
	t.Helper()
	if cfg.Served == nil {
		cfg.Served = builtinNames()
	}
	c, err := New(cfg, 42)
	if err != nil {
		t.Fatal(err)
	}
	_, bench := t.(*testing.B)
	return &harness{t: t, c: c, now: t0, replies: map[RequestID]kmsg.Response{}, forwards: map[RequestID]Forward{}, assignors: nativeAssignors(), autoJobs: true, checkEach: !bench}
}

func (h *harness) absorb(out Output) {
	if h.checkEach {
		if err := h.checkAnsweredSaved(out); err != nil {
			h.t.Fatal(err)
		}
	}
	for _, r := range out.Replies {
		if _, dup := h.replies[r.ID]; dup {
			h.t.Fatalf("request %d answered twice", r.ID)
		}
		h.replies[r.ID] = r.Response
	}
	for _, f := range out.Forwards {
		h.forwards[f.ID] = f
	}
	h.events = append(h.events, out.Events...)
	h.needMetadata = append(h.needMetadata, out.NeedMetadata...)
	h.deadline = out.NextDeadline
	h.jobs = append(h.jobs, out.Jobs...)
	if h.autoJobs {
		h.runJobs()
	}
}

// runJobs completes every pending job with its assignor.
func (h *harness) runJobs() {
	for len(h.jobs) > 0 {
		j := h.jobs[0]
		h.jobs = h.jobs[1:]
		h.finishJob(j)
	}
}

func (h *harness) finishJob(j Job) {
	fn := h.assignors[j.Assignor]
	var resp *abi.Response
	err := fmt.Errorf("no assignor %q", j.Assignor)
	if fn != nil {
		resp, err = fn(j.Request)
	}
	h.assignmentDone(j.ID, resp, err)
}

// assignmentDone hands the coordinator a plugin's result, as the bytes the
// runtime would decode it from.
func (h *harness) assignmentDone(job uint64, resp *abi.Response, err error) {
	in := assignmentInput{now: h.now, job: job}
	if resp != nil {
		in.resp = abi.AppendResponse(nil, resp)
	}
	if err != nil {
		in.err = err.Error()
		in.busy = errors.Is(err, ErrRunnerBusy)
	}
	h.absorb(h.call(in))
}

func (h *harness) send(client Client, req kmsg.Request) RequestID {
	h.nextID++
	id := h.nextID
	if h.requestGroups == nil {
		h.requestGroups = map[RequestID][]string{}
	}
	h.requestGroups[id] = GroupsOf(req)
	h.absorb(h.call(handleInput{now: h.now, id: id, client: client, key: req.Key(), version: req.GetVersion(), body: req.AppendTo(nil)}))
	return id
}

// do sends req and returns its immediate reply, failing if it waits.
func (h *harness) do(client Client, req kmsg.Request) kmsg.Response {
	h.t.Helper()
	id := h.send(client, req)
	r, ok := h.take(id)
	if !ok {
		h.t.Fatalf("%T got no immediate reply", req)
	}
	return r
}

func (h *harness) take(id RequestID) (kmsg.Response, bool) {
	r, ok := h.replies[id]
	delete(h.replies, id)
	return r, ok
}

// advance moves the clock by d, firing each timer at its deadline.
func (h *harness) advance(d time.Duration) {
	end := h.now.Add(d)
	for !h.deadline.IsZero() && !h.deadline.After(end) {
		h.now = maxTime(h.now, h.deadline)
		h.absorb(h.call(tickInput{now: h.now}))
	}
	h.now = end
}

func (h *harness) setMetadata(md *Metadata) {
	b, err := json.Marshal(md)
	if err != nil {
		h.t.Fatal(err)
	}
	h.absorb(h.call(metadataInput{now: h.now, md: b}))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// meta builds cluster metadata from topic -> partition count, with three
// brokers on racks a, b, c and replicas rotating over them.
func meta(topics map[string]int) *Metadata {
	md := &Metadata{Brokers: []Broker{{1, "a"}, {2, "b"}, {3, "c"}}, Topics: map[string]TopicMetadata{}}
	for name, n := range topics {
		tm := TopicMetadata{}
		for p := 0; p < n; p++ {
			l := int32(p%3 + 1)
			tm.Partitions = append(tm.Partitions, PartitionMetadata{Leader: l, Replicas: []int32{l}, ISR: []int32{l}})
		}
		md.Topics[name] = tm
	}
	return md
}

// sub encodes a ConsumerProtocolSubscription.
type sub struct {
	version int16
	topics  []string
	owned   map[string][]int32
	gen     int32
	rack    string
	user    []byte
}

func (s sub) bytes() []byte {
	m := kmsg.ConsumerMemberMetadata{Version: s.version, Topics: s.topics, UserData: s.user, Generation: s.gen}
	for _, t := range sortedKeys(s.owned) {
		m.OwnedPartitions = append(m.OwnedPartitions, kmsg.ConsumerMemberMetadataOwnedPartition{Topic: t, Partitions: slices.Clone(s.owned[t])})
	}
	if s.rack != "" {
		r := s.rack
		m.Rack = &r
	}
	return m.AppendTo(nil)
}

type proto struct {
	name string
	meta []byte
}

func joinReq(version int16, group, memberID, instance string, protos ...proto) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = version
	r.Group = group
	r.SessionTimeoutMillis = 10_000
	r.RebalanceTimeoutMillis = 60_000
	r.MemberID = memberID
	if instance != "" {
		r.InstanceID = &instance
	}
	r.ProtocolType = "consumer"
	for _, p := range protos {
		r.Protocols = append(r.Protocols, kmsg.JoinGroupRequestProtocol{Name: p.name, Metadata: p.meta})
	}
	return r
}

func syncReq(version int16, group, memberID string, gen int32) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version, r.Group, r.MemberID, r.Generation = version, group, memberID, gen
	return r
}

func hbReq(group, memberID string, gen int32) *kmsg.HeartbeatRequest {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.Generation = 4, group, memberID, gen
	return r
}

func decodeAssignment(t testing.TB, b []byte) map[string][]int32 {
	t.Helper()
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		t.Fatalf("assignment does not decode: %v (%d bytes)", err, len(b))
	}
	out := map[string][]int32{}
	for _, tp := range a.Topics {
		out[tp.Topic] = append(out[tp.Topic], tp.Partitions...)
	}
	return out
}

func decodeAssignmentErr(b []byte) map[string][]int32 {
	var a kmsg.ConsumerMemberAssignment
	if len(b) == 0 || a.ReadFrom(b) != nil {
		return nil
	}
	out := map[string][]int32{}
	for _, tp := range a.Topics {
		out[tp.Topic] = append(out[tp.Topic], tp.Partitions...)
	}
	return out
}

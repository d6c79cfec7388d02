package sticky

import (
	"encoding/binary"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/plugins/internal/assignortest"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// kind is which of the two assignors a test runs.
type kind int

const (
	eager kind = iota
	coop
)

func (k kind) String() string { return [...]string{"sticky", "cooperative-sticky"}[k] }

func (k kind) assign(req *abi.Request) (*abi.Response, error) {
	if k == coop {
		return AssignCooperative(req)
	}
	return AssignEager(req)
}

// run runs the assignor of kind k on req, fails t on an error, and reads
// the response back with planOf.
func (k kind) run(t testing.TB, req *abi.Request) (*abi.Response, plan) {
	t.Helper()
	resp, err := k.assign(req)
	if err != nil {
		t.Fatalf("%s: %v", k, err)
	}
	checkGroupedAgrees(t, k, req, resp)
	return resp, planOf(t, req, resp)
}

// checkGroupedAgrees runs k on req in the grouped layout (sdk/ABI.md
// section 7) and fails t unless the answer, expanded, is resp: every test
// that runs an assignor holds the two layouts to the same result.
func checkGroupedAgrees(t testing.TB, k kind, req *abi.Request, resp *abi.Response) {
	t.Helper()
	grouped := req.Grouped()
	if grouped == req {
		return
	}
	got, err := k.assign(grouped)
	if err != nil {
		t.Fatalf("%s, grouped layout: %v", k, err)
	}
	if k == coop && got.TopicLists == nil {
		// Sticky user data names every topic, so only the cooperative
		// assignor answers in the grouped layout.
		t.Fatalf("%s: a grouped request got a plain response", k)
	}
	if x := got.Expanded(); !reflect.DeepEqual(x, resp) {
		t.Fatalf("%s: the grouped layout's answer differs from the plain one\ngrouped: %+v\n  plain: %+v", k, x, resp)
	}
}

var bothKinds = []kind{eager, coop}

// topicSpec is a topic of a test cluster: assignortest.TopicSpec, in a
// form that Kafka's long test cases can write as {"topic", 3}.
type topicSpec struct {
	name       string
	partitions int32
}

// memberSpec is a member of a test group. Owned partitions are written
// "topic-partition". How they reach the assignor depends on the kind: as
// sticky user data (when owned is not nil or gen >= 0) for eager, and as
// owned partitions with the v2+ generation for cooperative. userData, when
// set, replaces the generated user data.
type memberSpec struct {
	id, instance, rack string
	topics             []string
	owned              []string
	gen                int32
	userData           []byte
	previous           []string
}

// sub is a member with no history: Kafka tests' subscription(topics, i).
func sub(id string, topics ...string) memberSpec {
	return memberSpec{id: id, topics: topics, gen: -1}
}

// owns is Kafka tests' buildSubscriptionV2Above(topics, owned, gen, i).
func owns(id string, topics []string, gen int32, owned ...string) memberSpec {
	if owned == nil {
		owned = []string{}
	}
	return memberSpec{id: id, topics: topics, owned: owned, gen: gen}
}

// cluster is a test's topics and, when placement is not nil, where their
// replicas are (see assignortest.Placement).
type cluster struct {
	topics    []topicSpec
	placement *assignortest.Placement
}

// tp names one partition.
type tp struct {
	topic string
	p     int32
}

func parseTP(s string) tp {
	i := strings.LastIndexByte(s, '-')
	p, err := strconv.Atoi(s[i+1:])
	if err != nil {
		panic(fmt.Sprintf("bad partition %q", s))
	}
	return tp{s[:i], int32(p)}
}

// request builds the request for ms with assignortest.BuildRequest (topic
// and member tables in reverse order, so that no test passes by relying on
// the request's order), then adds what a sticky member reports as k sends
// it. Topics that members only claim or were previously given are in the
// table as topics that do not exist.
func (c cluster) request(k kind, generation int32, ms []memberSpec) *abi.Request {
	topics := make([]assignortest.TopicSpec, len(c.topics))
	for i, ts := range c.topics {
		topics[i] = assignortest.TopicSpec{Name: ts.name, Partitions: ts.partitions}
	}
	specs := make([]assignortest.MemberSpec, len(ms))
	for i, m := range ms {
		specs[i] = assignortest.MemberSpec{ID: m.id, Instance: m.instance, Rack: m.rack, Topics: m.topics}
	}
	req := assignortest.BuildRequest(topics, specs, c.placement)
	req.GroupID, req.Generation, req.Protocol, req.Assignor = "g", generation, k.String(), k.String()
	if k == coop {
		req.RebalanceProtocol = abi.Cooperative
	}
	index := req.TopicIndex()
	tps := func(list []string) []abi.TopicPartitions {
		by := map[int32][]int32{}
		for _, s := range list {
			x := parseTP(s)
			t, ok := index[x.topic]
			if !ok {
				t = int32(len(req.Topics))
				index[x.topic] = t
				req.Topics = append(req.Topics, abi.Topic{Name: x.topic})
			}
			by[t] = append(by[t], x.p)
		}
		var out []abi.TopicPartitions
		for _, t := range slices.Sorted(maps.Keys(by)) {
			out = append(out, abi.TopicPartitions{Topic: t, Partitions: by[t]})
		}
		return out
	}
	byID := map[string]memberSpec{}
	for _, m := range ms {
		byID[m.id] = m
	}
	for i := range req.Members {
		am := &req.Members[i]
		m := byID[am.MemberID]
		// A test may list a topic twice; the subscription names it once.
		am.Topics = slices.Compact(am.Topics)
		am.Cooperative = k == coop
		switch k {
		case coop:
			am.Owned = tps(m.owned)
			am.OwnedGeneration = m.gen
		case eager:
			if m.owned != nil || m.gen >= 0 {
				am.UserData = stickyUserData(m.owned, m.gen, true)
			}
		}
		if m.userData != nil {
			am.UserData = m.userData
		}
		am.Previous = tps(m.previous)
	}
	return req
}

// stickyUserData encodes StickyAssignor user data, v1 when withGen, v0
// otherwise, independently of the package's own encoder.
func stickyUserData(owned []string, gen int32, withGen bool) []byte {
	by := map[string][]int32{}
	var names []string
	for _, s := range owned {
		x := parseTP(s)
		if _, ok := by[x.topic]; !ok {
			names = append(names, x.topic)
		}
		by[x.topic] = append(by[x.topic], x.p)
	}
	b := binary.BigEndian.AppendUint32(nil, uint32(len(names)))
	for _, n := range names {
		b = binary.BigEndian.AppendUint16(b, uint16(len(n)))
		b = append(b, n...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(by[n])))
		for _, p := range by[n] {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
	}
	if withGen {
		b = binary.BigEndian.AppendUint32(b, uint32(gen))
	}
	return b
}

// plan is an assignment by name: member id -> sorted "topic-partition".
type plan map[string][]string

// planOf reads resp back by name, after checking it with
// assignortest.CheckValid: every request member answered exactly once, in
// request order, topics by name and partitions ascending, only subscribed
// partitions and each assigned partition exactly once.
func planOf(t testing.TB, req *abi.Request, resp *abi.Response) plan {
	t.Helper()
	if resp.Error != "" {
		t.Fatalf("error response: %s", resp.Error)
	}
	assignortest.CheckValid(t, req, resp)
	out := plan{}
	for _, ma := range resp.Members {
		list := []string{}
		for _, e := range ma.Partitions {
			for _, p := range e.Partitions {
				list = append(list, fmt.Sprintf("%s-%d", req.Topics[e.Topic].Name, p))
			}
		}
		out[req.Members[ma.Member].MemberID] = sortTPs(list)
	}
	return out
}

func sortTPs(list []string) []string {
	sort.Slice(list, func(i, j int) bool {
		a, b := parseTP(list[i]), parseTP(list[j])
		if a.topic != b.topic {
			return a.topic < b.topic
		}
		return a.p < b.p
	})
	return list
}

// tps parses Kafka tests' "t1-0, t1-3" lists.
func tps(s string) []string {
	if strings.TrimSpace(s) == "" {
		return []string{}
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		out = append(out, strings.TrimSpace(f))
	}
	return sortTPs(out)
}

// harness runs one assignor over a cluster and checks every result.
type harness struct {
	t          *testing.T
	kind       kind
	cluster    cluster
	generation int32
	// rackMode says that rack alignment may move owned partitions, so the
	// stickiness count is not checked.
	rackMode bool
	// consumerRacks is how many racks Kafka-style consumers are spread
	// over, 0 for none.
	consumerRacks int
}

// assign runs the assignor on ms and checks validity, balance, no
// two-cycles and, with identical subscriptions outside rack mode,
// stickiness.
func (h *harness) assign(ms []memberSpec) plan {
	h.t.Helper()
	req := h.cluster.request(h.kind, h.generation, ms)
	resp, p := h.kind.run(h.t, req)
	checkAll(h.t, h.cluster, ms, p, h.rackMode)
	if h.kind == eager {
		checkUserData(h.t, req, resp, p)
	}
	return p
}

// feedBack returns ms with every member owning what p gave it, in
// generation gen, as the next JoinGroup would report.
func feedBack(ms []memberSpec, p plan, gen int32) []memberSpec {
	out := make([]memberSpec, len(ms))
	for i, m := range ms {
		m.owned = slices.Clone(p[m.id])
		if m.owned == nil {
			m.owned = []string{}
		}
		m.gen = gen
		m.userData = nil
		out[i] = m
	}
	return out
}

// checkAll checks a plan against the rules that hold for every sticky
// assignment. It restates each rule on its own, without the package's code.
// In rack mode, where realigning racks may move and swap owned partitions,
// only validity and balance are checked.
func checkAll(t testing.TB, c cluster, ms []memberSpec, p plan, rackMode bool) {
	t.Helper()
	parts := map[string]int32{}
	for _, ts := range c.topics {
		parts[ts.name] = ts.partitions
	}
	subs := map[string]map[string]bool{}
	subscribers := map[string][]string{}
	for _, m := range ms {
		subs[m.id] = map[string]bool{}
		for _, n := range m.topics {
			if !subs[m.id][n] {
				subs[m.id][n] = true
				subscribers[n] = append(subscribers[n], m.id)
			}
		}
	}
	// Validity.
	owner := map[string]string{}
	for id, list := range p {
		for _, s := range list {
			x := parseTP(s)
			if !subs[id][x.topic] {
				t.Fatalf("%s got %s of a topic it does not subscribe to", id, s)
			}
			if x.p < 0 || x.p >= parts[x.topic] {
				t.Fatalf("%s got %s, which does not exist", id, s)
			}
			if o, dup := owner[s]; dup {
				t.Fatalf("%s went to both %s and %s", s, o, id)
			}
			owner[s] = id
		}
	}
	for n, ids := range subscribers {
		for q := range parts[n] {
			if s := fmt.Sprintf("%s-%d", n, q); owner[s] == "" && len(ids) > 0 {
				t.Fatalf("%s is unassigned", s)
			}
		}
	}
	// Balance, as Kafka's isBalanced: nobody holds a partition of a topic
	// that a member with two or more fewer partitions subscribes to.
	for n, ids := range subscribers {
		minID, maxID := ids[0], ""
		for _, id := range ids {
			if len(p[id]) < len(p[minID]) {
				minID = id
			}
		}
		for q := range parts[n] {
			if o := owner[fmt.Sprintf("%s-%d", n, q)]; o != "" && (maxID == "" || len(p[o]) > len(p[maxID])) {
				maxID = o
			}
		}
		if maxID != "" && len(p[maxID]) > len(p[minID])+1 {
			t.Fatalf("unbalanced: %s holds %d partitions, including some of %s, while %s, a subscriber of %s, holds %d\n%v",
				maxID, len(p[maxID]), n, minID, n, len(p[minID]), p)
		}
	}
	if rackMode {
		return
	}
	prior := priorOwners(ms, parts, subs)
	// No two-cycles.
	moves := map[[3]string]bool{}
	for s, from := range prior {
		if to := owner[s]; to != "" && to != from {
			moves[[3]string{parseTP(s).topic, from, to}] = true
		}
	}
	for m := range moves {
		if moves[[3]string{m[0], m[2], m[1]}] {
			t.Fatalf("two-cycle in %s between %s and %s", m[0], m[1], m[2])
		}
	}
	// Stickiness: in every part of the group whose members all subscribe
	// alike (and nobody else to those topics), exactly as many owned
	// partitions stay as the quotas allow.
	for _, comp := range uniformParts(ms, parts) {
		checkStickyPart(t, comp, parts, prior, owner, p)
	}
}

// uniformParts splits the members into groups linked by common existing
// topics, and returns those whose members all subscribe to the same ones.
func uniformParts(ms []memberSpec, parts map[string]int32) [][]memberSpec {
	key := func(m memberSpec) string {
		var ns []string
		for _, n := range m.topics {
			if parts[n] > 0 {
				ns = append(ns, n)
			}
		}
		slices.Sort(ns)
		return strings.Join(slices.Compact(ns), ",")
	}
	// Merge members into parts as long as two parts share a topic.
	var groups [][]memberSpec
	var topicSets []map[string]bool
	for _, m := range ms {
		if key(m) == "" {
			continue
		}
		mine := map[string]bool{}
		for _, n := range strings.Split(key(m), ",") {
			mine[n] = true
		}
		merged := []memberSpec{m}
		var keepG [][]memberSpec
		var keepS []map[string]bool
		for i, set := range topicSets {
			shared := false
			for n := range set {
				shared = shared || mine[n]
			}
			if shared {
				merged = append(merged, groups[i]...)
				for n := range set {
					mine[n] = true
				}
			} else {
				keepG, keepS = append(keepG, groups[i]), append(keepS, set)
			}
		}
		groups, topicSets = append(keepG, merged), append(keepS, mine)
	}
	var out [][]memberSpec
	for _, grp := range groups {
		same := true
		for _, m := range grp {
			same = same && key(m) == key(grp[0])
		}
		if same {
			out = append(out, grp)
		}
	}
	return out
}

func checkStickyPart(t testing.TB, ms []memberSpec, parts map[string]int32, prior, owner map[string]string, p plan) {
	t.Helper()
	total := int32(0)
	for _, n := range ms[0].topics {
		total += parts[n]
	}
	n := int32(len(ms))
	in := map[string]bool{}
	for _, m := range ms {
		in[m.id] = true
	}
	validOf := map[string]int{}
	stayed := 0
	for s, o := range prior {
		if in[o] {
			validOf[o]++
			if owner[s] == o {
				stayed++
			}
		}
	}
	var valid []int
	for _, m := range ms {
		valid = append(valid, validOf[m.id])
	}
	slices.Sort(valid)
	slices.Reverse(valid)
	best := 0
	for i, v := range valid {
		q := int(total / n)
		if int32(i) < total%n {
			q++
		}
		best += min(v, q)
	}
	if stayed != best {
		t.Fatalf("stickiness: %d owned partitions stayed among %d members, %d could have\n%v", stayed, n, best, p)
	}
}

// priorOwners is who owned each partition before, as Kafka settles claims:
// the highest generation wins, two members of that generation cancel out,
// and a claim on a partition that does not exist or of a topic its member
// does not subscribe to is dropped after that. Without any claim at all, the
// previous assignment is the prior one.
func priorOwners(ms []memberSpec, parts map[string]int32, subs map[string]map[string]bool) map[string]string {
	type claimant struct {
		id  string
		gen int32
	}
	claims := map[string][]claimant{}
	for _, m := range ms {
		for _, s := range m.owned {
			claims[s] = append(claims[s], claimant{m.id, m.gen})
		}
	}
	if len(claims) == 0 {
		for _, m := range ms {
			for _, s := range m.previous {
				claims[s] = append(claims[s], claimant{m.id, 0})
			}
		}
	}
	out := map[string]string{}
	for s, cs := range claims {
		x := parseTP(s)
		if x.p < 0 || x.p >= parts[x.topic] {
			continue
		}
		best := cs[0]
		for _, c := range cs {
			if c.gen > best.gen {
				best = c
			}
		}
		unique := true
		for _, c := range cs {
			if c.gen == best.gen && c.id != best.id {
				unique = false
			}
		}
		if unique && subs[best.id][x.topic] {
			out[s] = best.id
		}
	}
	return out
}

// checkUserData decodes the sticky user data of every assignment and checks
// that it lists exactly the member's partitions, with the request's
// generation.
func checkUserData(t testing.TB, req *abi.Request, resp *abi.Response, p plan) {
	t.Helper()
	for _, ma := range resp.Members {
		id := req.Members[ma.Member].MemberID
		owned, gen, ok := decodeStickyForTest(ma.UserData)
		if !ok || !gen.ok || gen.v != req.Generation {
			t.Fatalf("%s: user data %x does not decode as v1 for generation %d", id, ma.UserData, req.Generation)
		}
		if got, want := sortTPs(owned), p[id]; !slices.Equal(got, want) {
			t.Fatalf("%s: user data lists %v, assignment is %v", id, got, want)
		}
	}
}

type optGen struct {
	v  int32
	ok bool
}

// decodeStickyForTest is an independent reader of StickyAssignor user data,
// which requires the v1 generation.
func decodeStickyForTest(b []byte) ([]string, optGen, bool) {
	var out []string
	off := 0
	u32 := func() (int32, bool) {
		if len(b)-off < 4 {
			return 0, false
		}
		v := int32(binary.BigEndian.Uint32(b[off:]))
		off += 4
		return v, true
	}
	n, ok := u32()
	if !ok || n < 0 {
		return nil, optGen{}, false
	}
	for range n {
		if len(b)-off < 2 {
			return nil, optGen{}, false
		}
		l := int(binary.BigEndian.Uint16(b[off:]))
		off += 2
		if len(b)-off < l {
			return nil, optGen{}, false
		}
		name := string(b[off : off+l])
		off += l
		k, ok := u32()
		if !ok || k < 0 {
			return nil, optGen{}, false
		}
		for range k {
			p, ok := u32()
			if !ok {
				return nil, optGen{}, false
			}
			out = append(out, fmt.Sprintf("%s-%d", name, p))
		}
	}
	g, ok := u32()
	return out, optGen{g, ok}, off == len(b)
}

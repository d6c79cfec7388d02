package assignortest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Plan is an assignment by name: member id -> topic name -> partitions.
// Responses, reference models and franz-go's balancers can all be put in
// this form and compared whatever the order of their requests' tables.
type Plan map[string]map[string][]int32

// AsPlan turns a response into a Plan. Every member of the response is in
// it, with an empty map when it gets nothing.
func AsPlan(req *abi.Request, resp *abi.Response) Plan {
	out := Plan{}
	for _, ma := range resp.Members {
		m := map[string][]int32{}
		for _, tp := range ma.Partitions {
			m[req.Topics[tp.Topic].Name] = tp.Partitions
		}
		out[req.Members[ma.Member].MemberID] = m
	}
	return out
}

// Equal reports whether p and o have the same members, each with the same
// topics and the same partitions in the same order.
func (p Plan) Equal(o Plan) bool {
	return maps.EqualFunc(p, o, func(x, y map[string][]int32) bool {
		return maps.EqualFunc(x, y, slices.Equal[[]int32])
	})
}

// Render gives each member's assignment the way Kafka's tests write it,
// "t1-0, t1-1, t2-0", in the order the response lists it.
func Render(req *abi.Request, resp *abi.Response) map[string]string {
	out := map[string]string{}
	for _, ma := range resp.Members {
		var parts []string
		for _, tp := range ma.Partitions {
			for _, p := range tp.Partitions {
				parts = append(parts, fmt.Sprintf("%s-%d", req.Topics[tp.Topic].Name, p))
			}
		}
		out[req.Members[ma.Member].MemberID] = strings.Join(parts, ", ")
	}
	return out
}

// Run runs fn on req and returns its response, failing t if fn returns an
// error or a response that CheckValid rejects.
func Run(t testing.TB, fn AssignFunc, req *abi.Request) *abi.Response {
	t.Helper()
	resp, err := fn(req)
	if err != nil {
		t.Fatal(err)
	}
	CheckValid(t, req, resp)
	return resp
}

// Expect runs fn on req with Run and fails t unless every member's
// assignment renders as want says (see Render). It returns the response
// for further checks.
func Expect(t testing.TB, fn AssignFunc, req *abi.Request, want map[string]string) *abi.Response {
	t.Helper()
	resp := Run(t, fn, req)
	if got := Render(req, resp); !maps.Equal(got, want) {
		t.Errorf("\n got %q\nwant %q", got, want)
	}
	return resp
}

// CheckValid fails t unless resp is a valid answer to req as the built-in
// assignors promise it: one entry per member in request order, topics by
// name, partitions ascending, only subscribed existing partitions, and
// every one of them exactly once.
func CheckValid(t testing.TB, req *abi.Request, resp *abi.Response) {
	t.Helper()
	if len(resp.Members) != len(req.Members) {
		t.Fatalf("response has %d members, request %d", len(resp.Members), len(req.Members))
	}
	owner := make([][]int32, len(req.Topics))
	for i, tp := range req.Topics {
		owner[i] = make([]int32, tp.PartitionCount)
		for p := range owner[i] {
			owner[i][p] = -1
		}
	}
	for i, ma := range resp.Members {
		if ma.Member != int32(i) {
			t.Fatalf("response entry %d is for member %d", i, ma.Member)
		}
		m := &req.Members[i]
		for j, tp := range ma.Partitions {
			topic := &req.Topics[tp.Topic]
			if j > 0 && req.Topics[ma.Partitions[j-1].Topic].Name >= topic.Name {
				t.Fatalf("member %q: topic %q follows %q", m.MemberID, topic.Name, req.Topics[ma.Partitions[j-1].Topic].Name)
			}
			if !slices.Contains(m.Topics, tp.Topic) {
				t.Fatalf("member %q got unsubscribed topic %q", m.MemberID, topic.Name)
			}
			if len(tp.Partitions) == 0 {
				t.Fatalf("member %q has an empty entry for topic %q", m.MemberID, topic.Name)
			}
			for k, p := range tp.Partitions {
				if k > 0 && tp.Partitions[k-1] >= p {
					t.Fatalf("member %q topic %q: partitions not ascending: %v", m.MemberID, topic.Name, tp.Partitions)
				}
				if !topic.Exists || p < 0 || p >= topic.PartitionCount {
					t.Fatalf("member %q got nonexistent partition %s-%d", m.MemberID, topic.Name, p)
				}
				if o := owner[tp.Topic][p]; o >= 0 {
					t.Fatalf("partition %s-%d given to %q and %q", topic.Name, p, req.Members[o].MemberID, m.MemberID)
				}
				owner[tp.Topic][p] = int32(i)
			}
		}
	}
	for _, m := range req.Members {
		for _, ti := range m.Topics {
			for p, o := range owner[ti] {
				if o < 0 {
					t.Fatalf("partition %s-%d, subscribed by %q, is unassigned", req.Topics[ti].Name, p, m.MemberID)
				}
			}
		}
	}
}

// CheckTopicBalance fails t unless, for every topic, the partition counts
// of its subscribers differ by at most one: range's guarantee, rack mode or
// not.
func CheckTopicBalance(t testing.TB, req *abi.Request, resp *abi.Response) {
	t.Helper()
	count := make([]map[int32]int, len(req.Topics))
	for i := range count {
		count[i] = map[int32]int{}
	}
	for _, ma := range resp.Members {
		for _, tp := range ma.Partitions {
			count[tp.Topic][ma.Member] += len(tp.Partitions)
		}
	}
	for ti, topic := range req.Topics {
		lo, hi := -1, -1
		for mi, m := range req.Members {
			if !slices.Contains(m.Topics, int32(ti)) {
				continue
			}
			c := count[ti][int32(mi)]
			if lo < 0 || c < lo {
				lo = c
			}
			if c > hi {
				hi = c
			}
		}
		if hi-lo > 1 {
			t.Fatalf("topic %q: subscribers hold between %d and %d partitions", topic.Name, lo, hi)
		}
	}
}

// CheckMemberBalance fails t unless the members' partition counts, over
// all topics, differ by at most one: round robin's guarantee for identical
// subscriptions.
func CheckMemberBalance(t testing.TB, resp *abi.Response) {
	t.Helper()
	lo, hi := -1, 0
	for _, ma := range resp.Members {
		n := 0
		for _, tp := range ma.Partitions {
			n += len(tp.Partitions)
		}
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	if hi-lo > 1 {
		t.Fatalf("members hold between %d and %d partitions", lo, hi)
	}
}

// CheckAppendSafe fails t if appending to one member's partition slice
// changes what another entry holds. The built-in assignors hand out
// windows of one shared buffer, so only capacities capped at length keep
// their callers from overwriting each other. It appends to every slice of
// resp, which leaves resp as it was when the check passes.
func CheckAppendSafe(t testing.TB, req *abi.Request, resp *abi.Response) {
	t.Helper()
	before := Render(req, resp)
	for i := range resp.Members {
		for j := range resp.Members[i].Partitions {
			tp := &resp.Members[i].Partitions[j]
			_ = append(tp.Partitions, -1)
		}
	}
	if after := Render(req, resp); !maps.Equal(before, after) {
		t.Fatalf("appending to one member's partitions changed another's: %q -> %q", before, after)
	}
}

// CheckInfo fails t unless info describes a built-in assignor named name
// that answers for exactly protocols, serves both eager and cooperative
// groups (the host withholds for cooperative ones), has a version and a
// one-line description, and never leaves a subscribed partition
// unassigned.
func CheckInfo(t testing.TB, info abi.AssignorInfo, name string, protocols []string) {
	t.Helper()
	if info.Name != name || !slices.Equal(info.Protocols, protocols) {
		t.Errorf("name %q protocols %q, want %s %q", info.Name, info.Protocols, name, protocols)
	}
	if !info.Modes.Has(abi.Eager) || !info.Modes.Has(abi.Cooperative) {
		t.Errorf("modes %v, want eager and cooperative", info.Modes.Strings())
	}
	if info.MayLeaveUnassigned || info.Version == "" || info.Description == "" || strings.Contains(info.Description, "\n") {
		t.Errorf("info %+v: want a version, a one-line description and no unassigned partitions", info)
	}
}

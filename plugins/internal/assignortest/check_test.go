package assignortest

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// recorder is a testing.TB that records a failure instead of failing the
// test, so that the checkers can be shown to fail when they should.
// Fatal and Fatalf end the goroutine, as they do for a real test.
type recorder struct {
	testing.TB
	msgs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) {
	r.msgs = append(r.msgs, fmt.Sprint(args...))
	runtime.Goexit()
}

// failures runs check against a recorder, on a goroutine of its own so that
// a Fatal ends only the check, and returns what it reported.
func failures(t *testing.T, check func(tb testing.TB)) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	return r.msgs
}

// twoMembers is a group of topics a and b of two partitions each; m0
// subscribes to both and m1 to a.
func twoMembers() *abi.Request {
	return &abi.Request{
		Topics: []abi.Topic{{Name: "b", Exists: true, PartitionCount: 2}, {Name: "a", Exists: true, PartitionCount: 2}},
		Members: []abi.Member{
			{MemberID: "m0", Topics: []int32{0, 1}},
			{MemberID: "m1", Topics: []int32{1}},
		},
	}
}

// answer builds a response: parts[m] lists member m's entries as topic
// index followed by partitions.
func answer(parts ...[][]int32) *abi.Response {
	resp := &abi.Response{}
	for m, entries := range parts {
		ma := abi.MemberAssignment{Member: int32(m)}
		for _, e := range entries {
			ma.Partitions = append(ma.Partitions, abi.TopicPartitions{Topic: e[0], Partitions: e[1:]})
		}
		resp.Members = append(resp.Members, ma)
	}
	return resp
}

func TestCheckValid_RejectsEveryBrokenPromise(t *testing.T) {
	cases := []struct {
		name string
		resp *abi.Response
		want string // "" for a valid response
	}{
		{"valid", answer([][]int32{{1, 0}, {0, 0, 1}}, [][]int32{{1, 1}}), ""},
		{"member missing", answer([][]int32{{1, 0, 1}, {0, 0, 1}}), "response has 1 members"},
		{"entries out of member order", &abi.Response{Members: []abi.MemberAssignment{{Member: 1}, {Member: 0}}}, "response entry 0 is for member 1"},
		{"topics out of name order", answer([][]int32{{0, 0, 1}, {1, 0}}, [][]int32{{1, 1}}), `topic "a" follows "b"`},
		{"unsubscribed topic", answer([][]int32{{1, 0}}, [][]int32{{0, 0, 1}, {1, 1}}), `got unsubscribed topic "b"`},
		{"empty entry", answer([][]int32{{1, 0}, {0}}, [][]int32{{1, 1}}), `empty entry for topic "b"`},
		{"partitions not ascending", answer([][]int32{{1, 0}, {0, 1, 0}}, [][]int32{{1, 1}}), "partitions not ascending"},
		{"nonexistent partition", answer([][]int32{{1, 0}, {0, 0, 1, 2}}, [][]int32{{1, 1}}), "nonexistent partition b-2"},
		{"partition given twice", answer([][]int32{{1, 0, 1}, {0, 0, 1}}, [][]int32{{1, 1}}), `partition a-1 given to "m0" and "m1"`},
		{"partition unassigned", answer([][]int32{{0, 0, 1}}, [][]int32{{1, 1}}), "partition a-0, subscribed by"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := failures(t, func(tb testing.TB) { CheckValid(tb, twoMembers(), tc.resp) })
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("valid response rejected: %q", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("reported %q, want one failure containing %q", got, tc.want)
			}
		})
	}
}

func TestCheckBalance_RejectsSpreadsAboveOne(t *testing.T) {
	req := twoMembers()
	// m0 holds a-0 and a-1, m1 nothing of a: 2 against 0 in topic a, and 4
	// against 0 over all topics.
	skewed := answer([][]int32{{1, 0, 1}, {0, 0, 1}}, nil)
	for _, tc := range []struct {
		name     string
		check    func(testing.TB, *abi.Response)
		balanced *abi.Response
		want     string
	}{
		{
			name:     "topic",
			check:    func(tb testing.TB, resp *abi.Response) { CheckTopicBalance(tb, req, resp) },
			balanced: answer([][]int32{{1, 0}, {0, 0, 1}}, [][]int32{{1, 1}}), // m0 holds all of b, its only subscriber
			want:     `topic "a": subscribers hold between 0 and 2`,
		},
		{
			name:     "member",
			check:    func(tb testing.TB, resp *abi.Response) { CheckMemberBalance(tb, resp) },
			balanced: answer([][]int32{{1, 0}, {0, 0}}, [][]int32{{1, 1}}),
			want:     "members hold between 0 and 4",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := failures(t, func(tb testing.TB) { tc.check(tb, tc.balanced) }); len(got) > 0 {
				t.Errorf("balanced response rejected: %q", got)
			}
			if got := failures(t, func(tb testing.TB) { tc.check(tb, skewed) }); len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Errorf("reported %q, want one failure containing %q", got, tc.want)
			}
		})
	}
}

func TestCheckAppendSafe_RejectsWindowsWithSpareCapacity(t *testing.T) {
	req := twoMembers()
	for _, capped := range []bool{true, false} {
		buf := []int32{0, 1, 0, 1}
		first := buf[0:2]
		if capped {
			first = buf[0:2:2]
		}
		resp := &abi.Response{Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{{Topic: 1, Partitions: first}}},
			{Member: 1, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: buf[2:4:4]}}},
		}}
		got := failures(t, func(tb testing.TB) { CheckAppendSafe(tb, req, resp) })
		if capped != (len(got) == 0) {
			t.Errorf("capped=%v: reported %q", capped, got)
		}
	}
}

func TestExpect_ReportsTheRenderedDifference(t *testing.T) {
	req := twoMembers()
	resp := answer([][]int32{{1, 0}, {0, 0, 1}}, [][]int32{{1, 1}})
	fn := func(*abi.Request) (*abi.Response, error) { return resp, nil }
	if got := failures(t, func(tb testing.TB) { Expect(tb, fn, req, map[string]string{"m0": "a-0, b-0, b-1", "m1": "a-1"}) }); len(got) > 0 {
		t.Errorf("matching answer rejected: %q", got)
	}
	if got := failures(t, func(tb testing.TB) { Expect(tb, fn, req, map[string]string{"m0": "a-0, b-0", "m1": "a-1, b-1"}) }); len(got) != 1 {
		t.Errorf("reported %q, want one failure", got)
	}
	failing := func(*abi.Request) (*abi.Response, error) { return nil, fmt.Errorf("assign: broken") }
	if got := failures(t, func(tb testing.TB) { Run(tb, failing, req) }); len(got) != 1 || got[0] != "assign: broken" {
		t.Errorf("reported %q, want the assignor's error", got)
	}
}

func TestPlan_EqualNeedsSameMembersTopicsAndPartitionOrder(t *testing.T) {
	base := Plan{"m0": {"a": {0, 1}}, "m1": {}}
	cases := []struct {
		name  string
		other Plan
		equal bool
	}{
		{"same", Plan{"m1": {}, "m0": {"a": {0, 1}}}, true},
		{"member without partitions missing", Plan{"m0": {"a": {0, 1}}}, false},
		{"partitions in another order", Plan{"m0": {"a": {1, 0}}, "m1": {}}, false},
		{"other topic", Plan{"m0": {"b": {0, 1}}, "m1": {}}, false},
	}
	for _, tc := range cases {
		if got := base.Equal(tc.other); got != tc.equal {
			t.Errorf("%s: Equal %v, want %v", tc.name, got, tc.equal)
		}
	}
}

func TestCheckInfo_RejectsWhatABuiltInMustNotDeclare(t *testing.T) {
	good := abi.AssignorInfo{Name: "x", Version: "1", Protocols: []string{"x", "y"}, Modes: abi.ModeEager | abi.ModeCooperative, Description: "one line"}
	cases := []struct {
		name   string
		change func(*abi.AssignorInfo)
		fails  bool
	}{
		{"as declared", func(*abi.AssignorInfo) {}, false},
		{"other name", func(i *abi.AssignorInfo) { i.Name = "z" }, true},
		{"protocol missing", func(i *abi.AssignorInfo) { i.Protocols = []string{"x"} }, true},
		{"eager only", func(i *abi.AssignorInfo) { i.Modes = abi.ModeEager }, true},
		{"no version", func(i *abi.AssignorInfo) { i.Version = "" }, true},
		{"two-line description", func(i *abi.AssignorInfo) { i.Description = "one\ntwo" }, true},
		{"may leave unassigned", func(i *abi.AssignorInfo) { i.MayLeaveUnassigned = true }, true},
	}
	for _, tc := range cases {
		info := good
		tc.change(&info)
		got := failures(t, func(tb testing.TB) { CheckInfo(tb, info, "x", []string{"x", "y"}) })
		if tc.fails != (len(got) > 0) {
			t.Errorf("%s: reported %q", tc.name, got)
		}
	}
}

// firstSubscriberTakesAll is a valid assignor that is not Kafka's: every
// partition of a topic goes to the topic's first subscriber in the request.
func firstSubscriberTakesAll(req *abi.Request) (*abi.Response, error) {
	resp := &abi.Response{Members: make([]abi.MemberAssignment, len(req.Members))}
	taken := make([]bool, len(req.Topics))
	for m := range req.Members {
		resp.Members[m].Member = int32(m)
		for _, ti := range req.Members[m].Topics {
			if tp := req.Topics[ti]; !taken[ti] && tp.PartitionCount > 0 {
				taken[ti] = true
				resp.Members[m].Partitions = append(resp.Members[m].Partitions, abi.TopicPartitions{Topic: ti, Partitions: Below(tp.PartitionCount)})
			}
		}
		slices.SortFunc(resp.Members[m].Partitions, func(a, b abi.TopicPartitions) int {
			return strings.Compare(req.Topics[a.Topic].Name, req.Topics[b.Topic].Name)
		})
	}
	return resp, nil
}

func TestCheckMatchesKgo_RejectsAnAssignorThatIsNotKafkas(t *testing.T) {
	got := failures(t, func(tb testing.TB) {
		CheckMatchesKgo(tb, firstSubscriberTakesAll, kgo.RangeBalancer(), rand.New(rand.NewPCG(1, 1)), 50, KafkaSorted)
	})
	if len(got) != 1 || !strings.Contains(got[0], "kgo and the assignor disagree") {
		t.Errorf("reported %q, want one disagreement", got)
	}
}

package scenario

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// outputCase is a cooperative group of three members where c1 moves t1-3 to
// c0, so the host withholds it, and c2 receives nothing.
func outputCase(t *testing.T) (*abi.Request, *abi.Response, *abi.Response) {
	t.Helper()
	req, _ := request(t, parse(t, `{
		"protocol": "cooperative-sticky",
		"topics": [{"name": "t0", "partition_count": 6}, {"name": "t1", "partition_count": 4}],
		"members": [
			{"id": "c1", "rack": "b", "topics": ["t0", "t1"], "owned": {"t1": [2, 3]}, "generation": 2},
			{"id": "c0", "rack": "a", "topics": ["t0", "t1"], "owned": {"t0": [0, 1, 2, 5]}, "generation": 2},
			{"id": "c2", "topics": ["t0"]}
		]
	}`))
	// Members are sorted: c0, c1, c2. Partition lists deliberately unsorted.
	target := &abi.Response{Members: []abi.MemberAssignment{
		{Member: 0, Partitions: []abi.TopicPartitions{{Topic: 1, Partitions: []int32{3, 0}}, {Topic: 0, Partitions: []int32{5, 2, 1, 0}}}, UserData: []byte("target")},
		{Member: 1, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{3, 4}}, {Topic: 1, Partitions: []int32{1, 2}}}},
	}}
	assignment := &abi.Response{Members: []abi.MemberAssignment{
		{Member: 0, Partitions: []abi.TopicPartitions{{Topic: 1, Partitions: []int32{0}}, {Topic: 0, Partitions: []int32{5, 2, 1, 0}}}, UserData: []byte{0xff, 1}},
		{Member: 1, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{3, 4}}, {Topic: 1, Partitions: []int32{1, 2}}}},
	}}
	return req, target, assignment
}

func TestNewOutput_EveryMemberAppearsWithAscendingPartitions(t *testing.T) {
	req, target, assignment := outputCase(t)
	o := NewOutput(req, "sticky", target, assignment)
	if o.Assignor != "sticky" || o.RebalanceProtocol != "cooperative" {
		t.Errorf("assignor %q rebalance %q", o.Assignor, o.RebalanceProtocol)
	}
	wantTarget := map[string]map[string][]int32{
		"c0": {"t0": {0, 1, 2, 5}, "t1": {0, 3}},
		"c1": {"t0": {3, 4}, "t1": {1, 2}},
		"c2": {},
	}
	if !reflect.DeepEqual(o.Target, wantTarget) {
		t.Errorf("target = %v, want %v", o.Target, wantTarget)
	}
	if got := o.Assignment["c0"]["t1"]; !slices.Equal(got, []int32{0}) {
		t.Errorf("c0 receives t1 %v, want [0]", got)
	}
	if o.Assignment["c2"] == nil || len(o.Assignment["c2"]) != 0 {
		t.Errorf("c2 assignment = %#v, want an empty, non-nil map", o.Assignment["c2"])
	}
	if want := map[string]string{"c0": "/wE="}; !reflect.DeepEqual(o.UserData, want) {
		t.Errorf("user data = %v, want %v (from the assignment, members with data only)", o.UserData, want)
	}
}

func TestNewOutput_NilAssignmentMeansTarget(t *testing.T) {
	req, target, _ := outputCase(t)
	o := NewOutput(req, "x", target, nil)
	if !reflect.DeepEqual(o.Target, o.Assignment) {
		t.Errorf("assignment %v differs from target %v", o.Assignment, o.Target)
	}
}

func TestNewOutput_SkipsIndicesOutOfRange(t *testing.T) {
	req, _, _ := outputCase(t)
	bad := &abi.Response{Members: []abi.MemberAssignment{
		{Member: 7, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{1}}}},
		{Member: -1},
		{Member: 2, Partitions: []abi.TopicPartitions{{Topic: 9, Partitions: []int32{1}}, {Topic: 0, Partitions: []int32{4}}}},
	}}
	o := NewOutput(req, "x", bad, bad)
	if len(o.Target) != 3 || !reflect.DeepEqual(o.Target["c2"], map[string][]int32{"t0": {4}}) {
		t.Errorf("target = %v, want only c2's valid t0-4 among the three members", o.Target)
	}
}

func TestOutput_WriteJSONRoundTripsAndNeverWritesNull(t *testing.T) {
	req, target, assignment := outputCase(t)
	o := NewOutput(req, "sticky", target, assignment)
	var buf bytes.Buffer
	if err := o.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "null") {
		t.Errorf("output contains null:\n%s", buf.String())
	}
	var back Output
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, buf.String())
	}
	if back.Assignor != o.Assignor || back.RebalanceProtocol != o.RebalanceProtocol ||
		!reflect.DeepEqual(back.Target, o.Target) || !reflect.DeepEqual(back.Assignment, o.Assignment) ||
		!reflect.DeepEqual(back.UserData, o.UserData) {
		t.Errorf("decoded output %+v differs from %+v", back, *o)
	}
	var keys map[string]json.RawMessage
	json.Unmarshal(buf.Bytes(), &keys)
	for _, k := range []string{"assignor", "rebalance_protocol", "target", "assignment", "user_data"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("output lacks key %q", k)
		}
	}
	// The same data written by encoding/json must decode identically.
	std, _ := json.Marshal(o)
	var viaStd Output
	json.Unmarshal(std, &viaStd)
	if !reflect.DeepEqual(viaStd, back) {
		t.Errorf("WriteJSON and json.Marshal disagree:\n%s\n%s", buf.String(), std)
	}
}

func TestOutput_WriteJSONOmitsEmptyUserData(t *testing.T) {
	req, target, _ := outputCase(t)
	target.Members[0].UserData = nil
	var buf bytes.Buffer
	if err := NewOutput(req, "x", target, nil).WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "user_data") {
		t.Errorf("output has user_data with no member data:\n%s", buf.String())
	}
}

func TestOutput_WriteTableShowsRacksCountsAndWithheld(t *testing.T) {
	req, target, assignment := outputCase(t)
	var buf bytes.Buffer
	if err := NewOutput(req, "sticky", target, assignment).WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("got %d lines, want header, column names, 3 members, summary:\n%s", len(lines), buf.String())
	}
	fields := func(i int) []string { return strings.Fields(lines[i]) }
	wantRows := [][]string{
		{"MEMBER", "RACK", "PARTITIONS", "ASSIGNMENT", "WITHHELD"},
		{"c0", "a", "5", "t0[0-2,5]", "t1[0]", "t1[3]"},
		{"c1", "b", "4", "t0[3-4]", "t1[1-2]", "-"},
		{"c2", "-", "0", "-", "-"},
	}
	for i, want := range wantRows {
		if got := fields(i + 1); !slices.Equal(got, want) {
			t.Errorf("line %d = %q, want fields %q", i+1, lines[i+1], want)
		}
	}
	// Columns line up: every row's ASSIGNMENT starts where the heading does.
	col := strings.Index(lines[1], "ASSIGNMENT")
	for _, l := range lines[2:5] {
		if len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("row %q is not aligned at column %d", l, col)
		}
	}
	if !strings.Contains(lines[5], "3 members, 9 partitions assigned, 1 withheld") {
		t.Errorf("summary = %q", lines[5])
	}
}

func TestOutput_WriteTableWithoutRacksOrWithheldDropsThoseColumns(t *testing.T) {
	req, _, _ := outputCase(t)
	target := &abi.Response{Members: []abi.MemberAssignment{{Member: 2, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{0, 1}}}}}}
	o := NewOutput(req, "x", target, nil)
	// As decoded from JSON: no member order or racks, so members go by id.
	var decoded Output
	var buf bytes.Buffer
	o.WriteJSON(&buf)
	json.Unmarshal(buf.Bytes(), &decoded)
	buf.Reset()
	if err := decoded.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Contains(out, "RACK") || strings.Contains(out, "WITHHELD") {
		t.Errorf("table has a RACK or WITHHELD column it does not need:\n%s", out)
	}
	if i0, i2 := strings.Index(out, "\nc0 "), strings.Index(out, "\nc2 "); i0 < 0 || i2 < i0 {
		t.Errorf("rows not sorted by member id:\n%s", out)
	}
	if !strings.Contains(out, "t0[0-1]") {
		t.Errorf("table lacks c2's t0[0-1]:\n%s", out)
	}
}

func TestCompact(t *testing.T) {
	tests := []struct {
		in   map[string][]int32
		want string
	}{
		{nil, ""},
		{map[string][]int32{"t": {}}, ""},
		{map[string][]int32{"t": {4}}, "t[4]"},
		{map[string][]int32{"t1": {0}, "t0": {0, 1, 2, 5}}, "t0[0-2,5] t1[0]"},
		{map[string][]int32{"a": {1, 3, 5, 6, 7, 9, 10}}, "a[1,3,5-7,9-10]"},
	}
	for _, tt := range tests {
		if got := Compact(tt.in); got != tt.want {
			t.Errorf("Compact(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

package abi_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// groupedGoldenDir holds the vectors of the grouped layout (sdk/ABI.md
// section 7). They live apart from testdata/abi's plain vectors because an
// SDK need not implement the layout, and the plain vectors' readers (every
// SDK's golden test) take only the top directory.
const groupedGoldenDir = goldenDir + "/grouped"

// The JSON form of a grouped vector is the plain twin (twin_test.go) with
// the section 7 fields added, described in testdata/abi/grouped/README.md.
type groupedRequestJSON struct {
	jsonRequest
	TopicLists [][]int32           `json:"topic_lists"`
	Members    []groupedMemberJSON `json:"members"`
}

type groupedMemberJSON struct {
	jsonMember
	// Subscription is the index into topic_lists, null for no topics.
	Subscription *int32          `json:"subscription"`
	Owned        []groupedTPJSON `json:"owned"`
	Previous     []groupedTPJSON `json:"previous"`
}

// groupedTPJSON names a topic index, or with List a topic-list index (the
// wire's negative -1 - topic).
type groupedTPJSON struct {
	Topic      uint32  `json:"topic"`
	List       bool    `json:"list"`
	Partitions []int32 `json:"partitions"`
}

type groupedResponseJSON struct {
	jsonResponse
	TopicLists  *[][]int32               `json:"topic_lists,omitempty"`
	Assignments *[]groupedAssignmentJSON `json:"assignments,omitempty"`
}

type groupedAssignmentJSON struct {
	jsonAssignment
	Partitions []groupedTPJSON `json:"partitions"`
}

type groupedDescriptionJSON struct {
	Assignors []groupedAssignorJSON `json:"assignors"`
}

type groupedAssignorJSON struct {
	jsonAssignor
	Grouped bool `json:"grouped"` // flags bit 1
}

func groupedTPs(tps []abi.TopicPartitions) []groupedTPJSON {
	out := []groupedTPJSON{}
	for _, tp := range tps {
		j := groupedTPJSON{Topic: uint32(tp.Topic), Partitions: orEmpty(tp.Partitions)}
		if tp.Topic < 0 {
			j.Topic, j.List = uint32(^tp.Topic), true
		}
		out = append(out, j)
	}
	return out
}

func listsOrEmpty(ls [][]int32) [][]int32 {
	out := [][]int32{}
	for _, l := range ls {
		out = append(out, orEmpty(l))
	}
	return out
}

// groupedJSON renders a decoded grouped value in the vectors' JSON form.
// A member's subscription is the list its Topics is (the decoder shares
// the table's slice), else the first equal one, as the encoder picks.
func groupedJSON(v any) any {
	switch v := v.(type) {
	case *abi.Request:
		j := groupedRequestJSON{jsonRequest: requestToJSON(v), TopicLists: listsOrEmpty(v.TopicLists), Members: []groupedMemberJSON{}}
		for i, m := range v.Members {
			gm := groupedMemberJSON{jsonMember: j.jsonRequest.Members[i], Owned: groupedTPs(m.Owned), Previous: groupedTPs(m.Previous)}
			if len(m.Topics) > 0 {
				k := slices.IndexFunc(v.TopicLists, func(l []int32) bool { return abi.SameSlice(l, m.Topics) })
				if k < 0 {
					k = slices.IndexFunc(v.TopicLists, func(l []int32) bool { return slices.Equal(l, m.Topics) })
				}
				k32 := int32(k)
				gm.Subscription = &k32
			}
			j.Members = append(j.Members, gm)
		}
		return j
	case *abi.Response:
		j := groupedResponseJSON{jsonResponse: responseToJSON(v)}
		if v.Error == "" {
			ls := listsOrEmpty(v.TopicLists)
			j.TopicLists = &ls
			as := []groupedAssignmentJSON{}
			for i, a := range v.Members {
				as = append(as, groupedAssignmentJSON{jsonAssignment: (*j.jsonResponse.Assignments)[i], Partitions: groupedTPs(a.Partitions)})
			}
			j.Assignments = &as
		}
		return j
	case *abi.Description:
		d := descriptionToJSON(v)
		j := groupedDescriptionJSON{Assignors: []groupedAssignorJSON{}}
		for i, a := range v.Assignors {
			j.Assignors = append(j.Assignors, groupedAssignorJSON{jsonAssignor: d.Assignors[i], Grouped: a.Grouped})
		}
		return j
	}
	panic("groupedJSON: unknown kind")
}

// groupedRequest has every section 7 feature: a table of three lists, one
// of them no member subscribes to; members subscribed to a list, to none,
// and two sharing one; owned and previous entries over lists and plain.
func groupedRequest() *abi.Request {
	r := fullRequest()
	r.Topics = append(r.Topics, abi.Topic{Name: "extra", Exists: true, PartitionCount: 2})
	n := int32(len(r.Topics))
	r.TopicLists = [][]int32{{0, 1}, {0, 1, n - 1}, {1}}
	ms := r.Members
	ms[0].Topics = r.TopicLists[1]
	ms[0].Owned = []abi.TopicPartitions{{Topic: abi.ListRef(1), Partitions: []int32{0}}, {Topic: 1, Partitions: []int32{1, 2}}}
	ms[0].Previous = []abi.TopicPartitions{{Topic: abi.ListRef(0), Partitions: []int32{1}}, {Topic: abi.ListRef(2)}}
	ms[1].Topics = nil
	ms[1].Owned = nil
	ms[1].Previous = []abi.TopicPartitions{{Topic: abi.ListRef(1), Partitions: []int32{1, 0}}}
	third := ms[0]
	third.MemberID, third.InstanceID = "m-third", ""
	third.Owned, third.Previous = nil, nil
	r.Members = append(ms, third)
	return r
}

func groupedResponse() *abi.Response {
	return &abi.Response{
		TopicLists: [][]int32{{0, 1, 2}, {5}},
		Members: []abi.MemberAssignment{
			{Member: 0, Partitions: []abi.TopicPartitions{{Topic: abi.ListRef(0), Partitions: []int32{0, 3}}, {Topic: 4, Partitions: []int32{1}}}, UserData: []byte{7}},
			{Member: 2, Partitions: []abi.TopicPartitions{{Topic: abi.ListRef(1), Partitions: []int32{2}}}},
			{Member: 1},
		},
	}
}

func groupedDescription() *abi.Description {
	d := twoAssignors()
	d.Assignors[1].Grouped = true
	return d
}

func groupedGoldenCases() []goldenCase {
	enc := func(r *abi.Request) []byte { return abi.AppendRequest(nil, r) }
	valid := enc(groupedRequest())
	// A request of one topic and a table of one list, whose one member's
	// tail after the flags byte is member.
	withMember := func(member le) []byte {
		return append(le{}.u32(1|abi.GroupedLayout).str("g").i32(1).str("p").str("a").u8(0).u64(0).
			u32(0).u32(0).u32(0).u32(1).str("t").raw(make([]byte, 16)...).u8(1).u32(2).
			u32(1).i32s(0).
			u32(1).str("m").str("").str("").str("").str("").u8(0), member...)
	}
	withLists := func(lists ...[]int32) []byte {
		b := le{}.u32(1 | abi.GroupedLayout).str("g").i32(1).str("p").str("a").u8(0).u64(0).
			u32(0).u32(0).u32(0).u32(2).
			str("t").raw(make([]byte, 16)...).u8(1).u32(2).
			str("u").raw(make([]byte, 16)...).u8(1).u32(2).
			u32(uint32(len(lists)))
		for _, l := range lists {
			b = b.i32s(l...)
		}
		return b.u32(0)
	}
	badVersion := bytes.Clone(valid)
	badVersion[3] = 0x80
	descVersion := abi.AppendDescription(nil, groupedDescription())
	descVersion[2] = 1 // the grouped version word 0x00010001
	return []goldenCase{
		{name: "grouped-request", kind: "request", value: groupedRequest(),
			comment: "request-full in the grouped layout plus a topic: three lists (one unreferenced), members subscribed to a list, to none, and two to the same one; owned and previous entries over lists and plain, one over a list with no partitions"},
		{name: "grouped-request-empty-table", kind: "request", value: &abi.Request{TopicLists: [][]int32{}, Members: []abi.Member{{MemberID: "m"}}},
			comment: "the grouped layout with an empty topic-list table and a member with subscription -1"},
		{name: "grouped-response-ok", kind: "response", value: groupedResponse(),
			comment: "a grouped response: its own table of two lists, entries over lists and plain, a member assigned nothing"},
		{name: "grouped-response-ok-empty", kind: "response", value: &abi.Response{TopicLists: [][]int32{}},
			comment: "a grouped ok response with an empty table that assigns nothing"},
		{name: "grouped-response-error", kind: "response", value: &abi.Response{TopicLists: [][]int32{}, Error: "no luck"},
			comment: "an error response in the grouped layout (no table: errors carry none)"},
		{name: "grouped-description", kind: "description", value: groupedDescription(),
			comment: "description-two-assignors with the second declaring the grouped layout (flags bit 1)"},

		{name: "invalid-grouped-request-bad-version", kind: "request", bin: badVersion, err: "unsupported encoding version",
			comment: "grouped-request with bit 31 of the version word set as well"},
		{name: "invalid-grouped-request-empty-list", kind: "request", bin: withLists([]int32{0}, nil), err: "topic list 1 is empty",
			comment: "a topic list without topics"},
		{name: "invalid-grouped-request-list-unsorted", kind: "request", bin: withLists([]int32{1, 0}), err: "not strictly ascending",
			comment: "a topic list [1, 0]"},
		{name: "invalid-grouped-request-list-repeat", kind: "request", bin: withLists([]int32{1, 1}), err: "not strictly ascending",
			comment: "a topic list [1, 1]"},
		{name: "invalid-grouped-request-list-out-of-range", kind: "request", bin: withLists([]int32{0, 2}), err: "topic list 0 refers to topic index",
			comment: "a topic list naming topic 2 of a two-topic table"},
		{name: "invalid-grouped-request-list-negative", kind: "request", bin: withLists([]int32{-1, 0}), err: "topic list 0 refers to topic index",
			comment: "a topic list starting with -1"},
		{name: "invalid-grouped-request-subscription-out-of-range", kind: "request",
			bin: withMember(le{}.i32(1).i32(-1).u32(0).u32(0).u32(0)), err: "subscribes to topic list 1 of 1",
			comment: "a subscription naming list 1 of a one-list table"},
		{name: "invalid-grouped-request-subscription-negative", kind: "request",
			bin: withMember(le{}.i32(-2).i32(-1).u32(0).u32(0).u32(0)), err: "subscribes to topic list -2 of 1",
			comment: "subscription -2: only -1 (no topics) may be negative"},
		{name: "invalid-grouped-request-owned-list-out-of-range", kind: "request",
			bin: withMember(le{}.i32(0).i32(-1).u32(1).i32(-2).i32s(0).u32(0).u32(0)), err: "owned partitions refers to topic list 1 of 1",
			comment: "an owned entry with topic -2, list 1 of a one-list table"},
		{name: "invalid-grouped-request-previous-topic-out-of-range", kind: "request",
			bin: withMember(le{}.i32(0).i32(-1).u32(0).u32(0).u32(1).i32(1).i32s(0)), err: "previous assignment refers to topic index 1 of 1",
			comment: "a previous entry with topic 1 of a one-topic table"},
		{name: "invalid-grouped-response-list-ref-out-of-range", kind: "response",
			bin: le{}.u32(1 | abi.GroupedLayout).u8(0).u32(1).i32s(0).u32(1).u32(0).u32(1).i32(-2).i32s(0).u32(0),
			err: "assigned partitions refers to topic list 1 of 1", comment: "an assignment entry naming list 1 of the response's one-list table"},
		{name: "invalid-grouped-response-negative-topic-without-lists", kind: "response",
			bin: le{}.u32(1 | abi.GroupedLayout).u8(0).u32(0).u32(1).u32(0).u32(1).i32(-1).i32s(0).u32(0),
			err: "refers to topic index 4294967295", comment: "topic -1 in a grouped response whose table is empty"},
		{name: "invalid-grouped-response-list-unsorted", kind: "response",
			bin: le{}.u32(1|abi.GroupedLayout).u8(0).u32(1).i32s(3, -1).u32(0),
			err: "not strictly ascending", comment: "a response list [3, -1]: ascending as unsigned, not as i32"},
		{name: "invalid-grouped-description-version", kind: "description",
			bin: descVersion, err: "unsupported encoding version",
			comment: "a description with the grouped version word: descriptions have one layout"},
		{name: "invalid-grouped-description-unknown-flag", kind: "description",
			bin: le{}.u32(1).u32(1).str("n").str("v").u32(1).str("p").u8(3).u8(4).str("d"), err: "unknown mode or flag bits",
			comment: "assignor flags 0x04: bit 2 is not defined"},
	}
}

// marshalGroupedVector is marshalVector with the grouped JSON form.
func marshalGroupedVector(c goldenCase) ([]byte, error) {
	f := vectorFile{Kind: c.kind, Comment: c.comment, Error: c.err}
	if c.value != nil {
		got, err := decodeKind(c.kind, encodeValue(c.value))
		if err != nil {
			return nil, err
		}
		f.Value = groupedJSON(got)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	b = numberList.ReplaceAllFunc(b, func(m []byte) []byte {
		return append(append([]byte("["), bytes.Join(bytes.Fields(m[1:len(m)-1]), []byte(" "))...), ']')
	})
	return append(b, '\n'), err
}

// TestGroupedGolden checks the vectors of testdata/abi/grouped: each valid
// one's bytes are what the encoder writes and decode to its JSON, and
// re-encode byte for byte; each invalid one is rejected with its error.
// Run with -update to rewrite them.
func TestGroupedGolden(t *testing.T) {
	cases := groupedGoldenCases()
	if *update {
		if err := os.MkdirAll(groupedGoldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(groupedGoldenDir, "*.bin"))
		oldJSON, _ := filepath.Glob(filepath.Join(groupedGoldenDir, "*.json"))
		for _, p := range slices.Concat(old, oldJSON) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range cases {
			js, err := marshalGroupedVector(c)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if err := os.WriteFile(filepath.Join(groupedGoldenDir, c.name+".bin"), c.bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(groupedGoldenDir, c.name+".json"), js, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string]bool{}
	for _, c := range cases {
		want[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			bin, err := os.ReadFile(filepath.Join(groupedGoldenDir, c.name+".bin"))
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if !bytes.Equal(bin, c.bytes()) {
				t.Errorf("%s.bin differs from what the codec encodes now (run with -update if deliberate)", c.name)
			}
			js, _ := os.ReadFile(filepath.Join(groupedGoldenDir, c.name+".json"))
			if gen, err := marshalGroupedVector(c); err != nil || !bytes.Equal(js, gen) {
				t.Errorf("%s.json is stale (run with -update): %v", c.name, err)
			}
			got, err := decodeKind(c.kind, bin)
			if c.err != "" {
				if !strings.HasPrefix(c.name, "invalid-") {
					t.Errorf("invalid vector %s is not named invalid-*", c.name)
				}
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("decoding: %v, want an error containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(c.name, "grouped-") {
				t.Errorf("valid vector %s is not named grouped-*", c.name)
			}
			if again := encodeValue(got); !bytes.Equal(again, bin) {
				t.Errorf("re-encoding the decoded value differs\n got: %x\nwant: %x", again, bin)
			}
			if c.kind != "description" && !bytes.HasPrefix(bin, le{}.u32(1|abi.GroupedLayout)) {
				t.Errorf("%s is not in the grouped layout", c.name)
			}
		})
	}
	onDisk, _ := filepath.Glob(filepath.Join(groupedGoldenDir, "*.json"))
	for _, p := range onDisk {
		if name := strings.TrimSuffix(filepath.Base(p), ".json"); !want[name] {
			t.Errorf("vector %s is on disk but not in groupedGoldenCases", name)
		}
	}
}

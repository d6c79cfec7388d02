package abi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

var update = flag.Bool("update", false, "rewrite the golden vectors in testdata/abi and the seed corpus in testdata/fuzz")

// goldenDir holds the vectors every SDK tests against; it sits at the root of
// the repository, three levels above this package (sdk/go/abi).
const goldenDir = "../../../testdata/abi"

// goldenCase is one vector. A valid vector has value and gets its bytes from
// the encoder; an invalid one has its bytes given and err set.
type goldenCase struct {
	name    string
	kind    string
	comment string
	value   any // *abi.Request, *abi.Response or *abi.Description
	bin     []byte
	err     string
}

func goldenCases() []goldenCase {
	minimal := abi.AppendRequest(nil, minimalRequest())
	badVersion := bytes.Clone(minimal)
	badVersion[0] = 2
	outOfRange := minimalRequest()
	outOfRange.Members[0].Topics = []int32{1}
	badReplicaSet := minimalRequest()
	badReplicaSet.ReplicaSets = [][]int32{{1}}
	badReplicaSet.Topics[0].Partitions = []abi.Partition{{Leader: 1, Replicas: 0, ISR: 0}, {Leader: 1, Replicas: 1, ISR: 0}}

	unsorted := fullRequest()
	unsorted.Members[0].Topics = []int32{1, 0}
	dupTopic := minimalRequest()
	dupTopic.Topics = append(dupTopic.Topics, dupTopic.Topics[0])
	badUTF8 := minimalRequest()
	badUTF8.GroupID = "g\xff"

	return []goldenCase{
		{name: "request-empty", kind: "request", value: &abi.Request{},
			comment: "the zero request: version, empty strings, generation 0, eager, seed 0, every count 0"},
		{name: "request-minimal", kind: "request", value: minimalRequest(),
			comment: "one existing topic without placement and one dynamic member subscribed to it"},
		{name: "request-full", kind: "request", value: fullRequest(),
			comment: "every field set: config, brokers with and without racks, replica sets, placement, a topic without placement, a deleted topic still owned, a static and a dynamic member, owned, user data, previous"},
		{name: "request-missing-topic", kind: "request", value: missingTopicRequest(),
			comment: "a member subscribed to a topic the cluster does not have (exists false, no partitions) and reporting a partition of it as owned"},
		{name: "response-ok", kind: "response", value: okResponse(),
			comment: "assignments for members 0 and 2; member 1 receives nothing"},
		{name: "response-ok-empty", kind: "response", value: &abi.Response{},
			comment: "an ok response that assigns nothing"},
		{name: "response-error", kind: "response", value: errorResponse(),
			comment: "an assignor that could not assign; the host falls back"},
		{name: "description-two-assignors", kind: "description", value: twoAssignors(),
			comment: "a module with an eager-only assignor and one for both modes that may leave partitions unassigned"},

		{name: "invalid-request-truncated", kind: "request", bin: minimal[:len(minimal)-1], err: "truncated",
			comment: "request-minimal without its last byte"},
		{name: "invalid-request-trailing-bytes", kind: "request", bin: append(bytes.Clone(minimal), 0), err: "trailing bytes",
			comment: "request-minimal followed by one zero byte"},
		{name: "invalid-request-bad-version", kind: "request", bin: badVersion, err: "version 2",
			comment: "request-minimal with version 2"},
		{name: "invalid-request-topic-out-of-range", kind: "request", bin: abi.AppendRequest(nil, outOfRange), err: "topic index 1 of 1",
			comment: "a member subscribed to topic index 1 of a one-topic table"},
		{name: "invalid-request-subscribed-unsorted", kind: "request", bin: abi.AppendRequest(nil, unsorted), err: "not strictly ascending",
			comment: "member 0 lists subscribed topic indices [1, 0]: they must be strictly ascending"},
		{name: "invalid-request-duplicate-topic", kind: "request", bin: abi.AppendRequest(nil, dupTopic), err: "appears twice",
			comment: "the topic table lists topic \"t\" twice: names must be unique"},
		{name: "invalid-request-bad-utf8", kind: "request", bin: abi.AppendRequest(nil, badUTF8), err: "not valid UTF-8",
			comment: "the group id ends with byte 0xff, which is not UTF-8"},
		{name: "invalid-request-replica-set-out-of-range", kind: "request", bin: abi.AppendRequest(nil, badReplicaSet), err: "replica set",
			comment: "partition 1's replicas refer to replica set 1 when only set 0 was sent"},
		{name: "invalid-request-huge-count", kind: "request", bin: reqHead().u32(0).u32(0).u32(0).u32(0).u32(0xffffffff), err: "exceeds",
			comment: "member_count forged to 4294967295 with no bytes left: reject before allocating"},
		{name: "invalid-request-placement-size-overflow", kind: "request",
			bin: reqWithTopics(le{}.str("t").raw(make([]byte, 16)...).u8(3).u32(0x15555556).i32(1).i32(0), 1), err: "partition placement",
			comment: "partition_count 0x15555556 with placement: 12 × count is 2^32 + 8, so a decoder computing sizes in 32 bits sees 8 bytes needed; compute in 64 bits"},
		{name: "invalid-request-unknown-topic-flag", kind: "request",
			bin: reqWithTopics(le{}.str("t").raw(make([]byte, 16)...).u8(5).u32(0), 1), err: "unknown flags",
			comment: "topic flags 0x05: bit 2 is not defined and must be zero"},
		{name: "invalid-request-config-unsorted", kind: "request",
			bin: reqHead().u32(2).str("b").str("").str("a").str("").u32(0).u32(0).u32(0).u32(0), err: "out of order",
			comment: "config keys \"b\" then \"a\": keys must be ascending and unique"},
		{name: "invalid-response-empty-error", kind: "response", bin: le{}.u32(1).u8(1).str(""), err: "empty error message",
			comment: "status 1 with an empty message"},
		{name: "invalid-response-bad-status", kind: "response", bin: le{}.u32(1).u8(2).u32(0), err: "status 2",
			comment: "status 2 is neither ok nor error"},
		{name: "invalid-description-unknown-mode", kind: "description",
			bin: le{}.u32(1).u32(1).str("n").str("v").u32(1).str("p").u8(4).u8(0).str("d"), err: "unknown mode or flag bits",
			comment: "modes 0x04: bit 2 is not defined and must be zero"},
	}
}

// encodeValue encodes a Go model value of any of the three kinds.
func encodeValue(v any) []byte {
	switch v := v.(type) {
	case *abi.Request:
		return abi.AppendRequest(nil, v)
	case *abi.Response:
		return abi.AppendResponse(nil, v)
	case *abi.Description:
		return abi.AppendDescription(nil, v)
	}
	panic(fmt.Sprintf("encodeValue: %T", v))
}

// decodeKind decodes b as kind and returns the model value.
func decodeKind(kind string, b []byte) (any, error) {
	switch kind {
	case "request":
		return abi.DecodeRequest(b)
	case "response":
		return abi.DecodeResponse(b)
	case "description":
		return abi.DecodeDescription(b)
	}
	return nil, fmt.Errorf("unknown kind %q", kind)
}

// toJSONTwin returns the twin of a model value.
func toJSONTwin(v any) any {
	switch v := v.(type) {
	case *abi.Request:
		return requestToJSON(v)
	case *abi.Response:
		return responseToJSON(v)
	case *abi.Description:
		return descriptionToJSON(v)
	}
	panic(fmt.Sprintf("toJSONTwin: %T", v))
}

// parseTwin parses a vector's value strictly, rejecting unknown fields, and
// returns both the twin and the model value it stands for.
func parseTwin(kind string, raw json.RawMessage) (twin, value any, err error) {
	strict := func(dst any) error {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		return dec.Decode(dst)
	}
	switch kind {
	case "request":
		var j jsonRequest
		if err := strict(&j); err != nil {
			return nil, nil, err
		}
		v, err := requestFromJSON(j)
		return j, v, err
	case "response":
		var j jsonResponse
		if err := strict(&j); err != nil {
			return nil, nil, err
		}
		v, err := responseFromJSON(j)
		return j, v, err
	case "description":
		var j jsonDescription
		if err := strict(&j); err != nil {
			return nil, nil, err
		}
		v, err := descriptionFromJSON(j)
		return j, v, err
	}
	return nil, nil, fmt.Errorf("unknown kind %q", kind)
}

// numberList matches an indented JSON array of integers.
var numberList = regexp.MustCompile(`\[\s+(-?\d+(?:,\s+-?\d+)*)\s+\]`)

// marshalVector renders the .json file of a case: indented, with integer
// arrays kept on one line so that partition lists stay readable.
func marshalVector(c goldenCase) ([]byte, error) {
	f := vectorFile{Kind: c.kind, Comment: c.comment, Error: c.err}
	if c.value != nil {
		f.Value = toJSONTwin(c.value)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	b = numberList.ReplaceAllFunc(b, func(m []byte) []byte {
		return append(append([]byte("["), bytes.Join(bytes.Fields(m[1:len(m)-1]), []byte(" "))...), ']')
	})
	return append(b, '\n'), err
}

func (c goldenCase) bytes() []byte {
	if c.value != nil {
		return encodeValue(c.value)
	}
	return c.bin
}

// TestGolden checks every vector in testdata/abi in both directions, and
// that the checked-in files are exactly what goldenCases describes. Run with
// -update to rewrite them after a deliberate change.
func TestGolden(t *testing.T) {
	cases := goldenCases()
	if *update {
		writeGolden(t, cases)
	}

	onDisk, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(onDisk) == 0 {
		t.Fatalf("no vectors in %s; run go test ./abi -run TestGolden -update", goldenDir)
	}
	for _, path := range onDisk {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) { checkVector(t, name) })
	}

	// The files must also be what the cases generate, so an edit to a
	// fixture or to the codec cannot pass by leaving stale files behind.
	want := map[string]bool{}
	for _, c := range cases {
		want[c.name] = true
		bin, err := os.ReadFile(filepath.Join(goldenDir, c.name+".bin"))
		if err != nil {
			t.Errorf("vector %s: %v (run with -update)", c.name, err)
			continue
		}
		if !bytes.Equal(bin, c.bytes()) {
			t.Errorf("vector %s: %s.bin differs from what the codec encodes now; if the change is deliberate, run with -update and tell every SDK", c.name, c.name)
		}
		js, _ := os.ReadFile(filepath.Join(goldenDir, c.name+".json"))
		if gen, err := marshalVector(c); err != nil || !bytes.Equal(js, gen) {
			t.Errorf("vector %s: %s.json is stale (run with -update)", c.name, c.name)
		}
	}
	for _, path := range onDisk {
		if name := strings.TrimSuffix(filepath.Base(path), ".json"); !want[name] {
			t.Errorf("vector %s is on disk but not in goldenCases", name)
		}
	}
}

// checkVector is what an SDK in any language does with a vector: a valid one
// decodes to the JSON value and the JSON value encodes to the bytes; an
// invalid one is rejected.
func checkVector(t *testing.T, name string) {
	js, err := os.ReadFile(filepath.Join(goldenDir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(filepath.Join(goldenDir, name+".bin"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Kind    string          `json:"kind"`
		Comment string          `json:"comment"`
		Value   json.RawMessage `json:"value"`
		Error   string          `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s.json: %v", name, err)
	}
	if f.Comment == "" {
		t.Errorf("%s.json has no comment saying what it tests", name)
	}
	got, decodeErr := decodeKind(f.Kind, bin)

	if (f.Value == nil) == (f.Error == "") {
		t.Fatalf("%s.json must have exactly one of value and error", name)
	}
	if f.Error != "" {
		if !strings.HasPrefix(name, "invalid-") {
			t.Errorf("invalid vector %s is not named invalid-*", name)
		}
		if decodeErr == nil {
			t.Fatalf("decoding %s.bin succeeded; want an error containing %q", name, f.Error)
		}
		if !errors.Is(decodeErr, abi.ErrMalformed) && !errors.Is(decodeErr, abi.ErrVersion) {
			t.Errorf("error %v wraps neither ErrMalformed nor ErrVersion", decodeErr)
		}
		if !strings.Contains(decodeErr.Error(), f.Error) {
			t.Errorf("decoding %s.bin: got %q, want it to contain %q", name, decodeErr, f.Error)
		}
		return
	}

	if decodeErr != nil {
		t.Fatalf("decoding %s.bin: %v", name, decodeErr)
	}
	twin, want, err := parseTwin(f.Kind, f.Value)
	if err != nil {
		t.Fatalf("%s.json value: %v", name, err)
	}
	sameValue := reflect.DeepEqual(got, want)
	if !sameValue {
		t.Errorf("decode(%s.bin) differs from the JSON value\n got: %+v\nwant: %+v", name, got, want)
	}
	if enc := encodeValue(want); !bytes.Equal(enc, bin) {
		t.Errorf("encoding the JSON value of %s differs from %s.bin\n got: %x\nwant: %x", name, name, enc, bin)
	}
	// The JSON must be in the one form other SDKs may rely on: arrays, not
	// nulls; every field present.
	if sameValue && !reflect.DeepEqual(toJSONTwin(got), twin) {
		t.Errorf("%s.json is not in canonical twin form (a null list or missing field?)", name)
	}
}

func writeGolden(t *testing.T, cases []goldenCase) {
	t.Helper()
	if err := os.MkdirAll(goldenDir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := filepath.Glob(filepath.Join(goldenDir, "*.bin"))
	oldJSON, _ := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	for _, path := range slices.Concat(old, oldJSON) {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cases {
		js, err := marshalVector(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(goldenDir, c.name+".bin"), c.bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(goldenDir, c.name+".json"), js, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

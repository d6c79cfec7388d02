// Package codeccheck holds another SDK's codec to the golden vectors of
// testdata/abi and to the Go codec (sdk/go/abi), the reference. An SDK's
// test supplies a Checker that runs its own decoder and encoder over
// buffers (natively, or in wasm); Golden and Differential do the rest, so
// every SDK is held to the same checks. It is imported only by tests.
package codeccheck

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/internal/testutil"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// Record is one buffer for a checker: Kind is 'q' (request), 'r'
// (response) or 'd' (description).
type Record struct {
	Kind byte
	B    []byte
}

// Result is a checker's verdict on one Record.
type Result struct {
	// Verdict is "ok" (decoded, and re-encoding gave back exactly the
	// input), "reject" (the decoder refused the buffer) or "mismatch"
	// (decoded, but re-encoded to different bytes).
	Verdict string
	// Rest is, for "ok", the decoded value in testdata/abi's JSON form;
	// for "reject", the decoder's reason.
	Rest string
}

// Process returns a Checker that runs a native program over all records in
// one process: each record as its kind byte, a little-endian u32 length and
// its bytes on stdin, and one line back per record on stdout, "verdict
// rest". A crash, a sanitizer report or a missing answer fails the test
// with the program's stderr.
func Process(bin string) Checker {
	return func(t *testing.T, recs []Record) []Result {
		t.Helper()
		var in bytes.Buffer
		for _, r := range recs {
			in.WriteByte(r.Kind)
			in.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(r.B))))
			in.Write(r.B)
		}
		cmd := exec.Command(bin)
		cmd.Stdin = &in
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", filepath.Base(bin), err, stderr.Bytes())
		}
		var res []Result
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			verdict, rest, _ := strings.Cut(sc.Text(), " ")
			res = append(res, Result{Verdict: verdict, Rest: rest})
		}
		if len(res) != len(recs) {
			t.Fatalf("%s answered %d of %d records\n%s", filepath.Base(bin), len(res), len(recs), stderr.Bytes())
		}
		return res
	}
}

// Checker runs an SDK's codec over recs and returns one Result per
// Record. It fails the test itself when the SDK crashes or traps.
type Checker func(t *testing.T, recs []Record) []Result

var kindByte = map[string]byte{"request": 'q', "response": 'r', "description": 'd'}

type vector struct {
	name  string
	kind  string
	bin   []byte
	value json.RawMessage
	err   string
}

func vectors(t *testing.T) []vector {
	t.Helper()
	return vectorsIn(t, "testdata/abi")
}

// vectorsIn reads the vectors of dir, relative to the repository root.
func vectorsIn(t *testing.T, dir string) []vector {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testutil.Root(t), dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden vectors in %s: %v", dir, err)
	}
	var vs []vector
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Kind  string          `json:"kind"`
			Value json.RawMessage `json:"value"`
			Error string          `json:"error"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		bin, err := os.ReadFile(strings.TrimSuffix(f, ".json") + ".bin")
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, vector{strings.TrimSuffix(filepath.Base(f), ".json"), v.Kind, bin, v.Value, v.Error})
	}
	return vs
}

// Golden runs every vector of testdata/abi through check: valid vectors
// must decode to the value in their JSON and re-encode byte for byte, and
// every invalid-* vector must be rejected. sdk names the SDK in messages.
func Golden(t *testing.T, sdk string, check Checker) {
	t.Helper()
	vs := vectors(t)
	recs := make([]Record, len(vs))
	for i, v := range vs {
		recs[i] = Record{kindByte[v.kind], v.bin}
	}
	res := check(t, recs)
	valid := 0
	for i, v := range vs {
		r := res[i]
		if v.err != "" {
			if r.Verdict != "reject" {
				t.Errorf("%s: the %s decoder accepted a buffer the ABI forbids (%s), want rejection like %q", v.name, sdk, r.Verdict, v.err)
			}
			continue
		}
		valid++
		if r.Verdict != "ok" {
			t.Errorf("%s: %s %s", v.name, r.Verdict, r.Rest)
			continue
		}
		var got, want any
		if err := json.Unmarshal([]byte(r.Rest), &got); err != nil {
			t.Fatalf("%s: the checker printed invalid JSON: %v\n%s", v.name, err, r.Rest)
		}
		if err := json.Unmarshal(v.value, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded value differs from the vector's JSON\n%s: %s\nwant: %s", v.name, sdk, r.Rest, v.value)
		}
	}
	if valid == 0 {
		t.Fatal("no valid vectors checked")
	}
}

// goDecode says whether the Go codec, the reference, accepts b, for an SDK
// that implements the grouped layout when grouped is true.
func goDecode(kind byte, b []byte, grouped bool) error {
	if grouped {
		return goDecodeAll(kind, b)
	}
	return goDecodePlain(kind, b)
}

// goDecodeAll is the Go codec's own verdict on b.
func goDecodeAll(kind byte, b []byte) error {
	var err error
	switch kind {
	case 'q':
		_, err = abi.DecodeRequest(b)
	case 'r':
		_, err = abi.DecodeResponse(b)
	case 'd':
		_, err = abi.DecodeDescription(b)
	}
	return err
}

// goDecodePlain is the Go codec's verdict on b for an SDK without the
// grouped layout.
func goDecodePlain(kind byte, b []byte) error {
	var err error
	grouped := false
	switch kind {
	case 'q':
		var r *abi.Request
		if r, err = abi.DecodeRequest(b); err == nil {
			grouped = r.TopicLists != nil
		}
	case 'r':
		var r *abi.Response
		if r, err = abi.DecodeResponse(b); err == nil {
			grouped = r.TopicLists != nil
		}
	case 'd':
		var d *abi.Description
		if d, err = abi.DecodeDescription(b); err == nil {
			for _, a := range d.Assignors {
				grouped = grouped || a.Grouped
			}
		}
	}
	if grouped {
		// The grouped layout (sdk/ABI.md section 7) is an extension the Go
		// SDK offers and others need not: the host uses it only with
		// assignors that declare it, so an SDK without it must refuse it.
		return errGroupedLayout
	}
	return err
}

// errGroupedLayout is goDecode's verdict on a buffer only the grouped
// layout accepts.
var errGroupedLayout = errors.New("grouped layout, which this SDK does not implement")

// fuzzSeeds reads the Go codec's seed corpora: hostile and random buffers
// for each decoder.
func fuzzSeeds(t *testing.T) []Record {
	t.Helper()
	dirs := []struct {
		name string
		kind byte
	}{{"FuzzDecodeRequest", 'q'}, {"FuzzDecodeResponse", 'r'}, {"FuzzDecodeDescription", 'd'}}
	var recs []Record
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(testutil.Root(t), "sdk/go/abi/testdata/fuzz", dir.name, "*"))
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, body, ok := strings.Cut(string(raw), "\n")
			body = strings.TrimSpace(body)
			if !ok || !strings.HasPrefix(body, "[]byte(") || !strings.HasSuffix(body, ")") {
				t.Fatalf("%s: not a go fuzz v1 []byte corpus entry", f)
			}
			s, err := strconv.Unquote(body[len("[]byte(") : len(body)-1])
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			recs = append(recs, Record{dir.kind, []byte(s)})
		}
	}
	if len(recs) == 0 {
		t.Fatal("no fuzz seeds found in sdk/go/abi/testdata/fuzz")
	}
	return recs
}

// randomRequest builds a request that exercises every field.
func randomRequest(rng *rand.Rand) *abi.Request {
	r := &abi.Request{GroupID: fmt.Sprintf("g-%d-ü", rng.IntN(100)), Generation: rng.Int32() - rng.Int32(),
		Protocol: "p", Assignor: "a", RebalanceProtocol: abi.RebalanceProtocol(rng.IntN(2)), Seed: rng.Uint64()}
	if rng.IntN(2) == 0 {
		r.Config = map[string]string{}
		for i := range rng.IntN(4) {
			r.Config[fmt.Sprintf("k%d", i)] = strings.Repeat("v", rng.IntN(3))
		}
	}
	for i := range rng.IntN(4) {
		r.Brokers = append(r.Brokers, abi.Broker{ID: int32(i), Rack: strings.Repeat("r", rng.IntN(2))})
	}
	for range rng.IntN(3) {
		r.ReplicaSets = append(r.ReplicaSets, []int32{rng.Int32N(5), rng.Int32N(5)})
	}
	nt := rng.IntN(5)
	for i := range nt {
		tp := abi.Topic{Name: fmt.Sprintf("t%d", i), Exists: rng.IntN(5) != 0}
		tp.ID[0] = byte(i)
		if tp.Exists {
			tp.PartitionCount = rng.Int32N(6)
			if len(r.ReplicaSets) > 0 && rng.IntN(2) == 0 {
				tp.Partitions = make([]abi.Partition, tp.PartitionCount)
				for p := range tp.Partitions {
					tp.Partitions[p] = abi.Partition{Leader: rng.Int32N(3) - 1, Replicas: uint32(rng.IntN(len(r.ReplicaSets))), ISR: uint32(rng.IntN(len(r.ReplicaSets)))}
				}
			}
		}
		r.Topics = append(r.Topics, tp)
	}
	for m := range rng.IntN(5) {
		mem := abi.Member{MemberID: fmt.Sprintf("m%d", m), OwnedGeneration: rng.Int32N(3) - 1, Cooperative: rng.IntN(2) == 0}
		if rng.IntN(2) == 0 {
			mem.InstanceID, mem.ClientID, mem.ClientHost, mem.Rack = "i", "c", "/h", "r"
		}
		for i := range nt {
			if rng.IntN(2) == 0 {
				mem.Topics = append(mem.Topics, int32(i))
				mem.Owned = append(mem.Owned, abi.TopicPartitions{Topic: int32(i), Partitions: []int32{rng.Int32N(4)}})
			}
		}
		if nt > 0 {
			mem.Previous = []abi.TopicPartitions{{Topic: int32(rng.IntN(nt))}}
		}
		if rng.IntN(2) == 0 {
			mem.UserData = []byte{byte(m), 0xff, 0}
		}
		r.Members = append(r.Members, mem)
	}
	return r
}

// Differential feeds check every truncation and many byte changes of the
// valid vectors, the Go codec's fuzz seeds and random requests. The SDK must
// accept exactly what the Go decoder accepts and re-encode what it accepts
// byte for byte; that it never reads out of bounds is the Checker's part.
// It is for an SDK without the grouped layout (sdk/ABI.md section 7), which
// must refuse every buffer only that layout accepts.
func Differential(t *testing.T, sdk string, check Checker) {
	t.Helper()
	differential(t, sdk, check, false)
}

// DifferentialGrouped is Differential for an SDK that implements the
// grouped layout: the corpus adds the vectors of testdata/abi/grouped with
// their truncations and byte changes, and random grouped requests and
// responses, and the SDK must give the Go codec's verdict on every buffer,
// grouped or not. A grouped error response may be re-encoded in either
// layout by the ABI; the Checker re-encodes it in the layout it came in.
func DifferentialGrouped(t *testing.T, sdk string, check Checker) {
	t.Helper()
	differential(t, sdk, check, true)
}

// mutations returns v's bytes, every truncation and many byte changes.
func mutations(rng *rand.Rand, v vector) []Record {
	k := kindByte[v.kind]
	recs := []Record{{k, v.bin}}
	for n := 0; n < len(v.bin); n++ {
		recs = append(recs, Record{k, v.bin[:n]})
	}
	for i := range v.bin {
		for _, d := range []byte{1, 0x80, 0xff} {
			b := bytes.Clone(v.bin)
			b[i] ^= d
			recs = append(recs, Record{k, b})
		}
		b := bytes.Clone(v.bin)
		b[i] = byte(rng.IntN(256))
		recs = append(recs, Record{k, b})
	}
	return recs
}

// randomGroupedRequest is a random request in the grouped layout: the
// plain one grouped, plus entries over its lists and, sometimes, an extra
// list no member names.
func randomGroupedRequest(rng *rand.Rand) *abi.Request {
	r := randomRequest(rng).Grouped()
	lists := r.TopicLists
	if len(r.Topics) > 0 && rng.IntN(3) == 0 {
		lists = append(lists, []int32{int32(rng.IntN(len(r.Topics)))})
	}
	r.TopicLists = lists
	for i := range r.Members {
		m := &r.Members[i]
		if len(lists) > 0 && rng.IntN(2) == 0 {
			m.Owned = append(slices.Clone(m.Owned), abi.TopicPartitions{Topic: abi.ListRef(rng.IntN(len(lists))), Partitions: []int32{rng.Int32N(4)}})
		}
		if len(lists) > 0 && rng.IntN(2) == 0 {
			m.Previous = append(slices.Clone(m.Previous), abi.TopicPartitions{Topic: abi.ListRef(rng.IntN(len(lists)))})
		}
	}
	return r
}

// randomGroupedResponse is a random ok response in the grouped layout, or
// now and then an error response in it.
func randomGroupedResponse(rng *rand.Rand) *abi.Response {
	if rng.IntN(10) == 0 {
		return &abi.Response{TopicLists: [][]int32{}, Error: fmt.Sprintf("error %d", rng.IntN(100))}
	}
	r := &abi.Response{TopicLists: [][]int32{}}
	for range rng.IntN(4) {
		var l []int32
		for t := range 6 {
			if rng.IntN(2) == 0 {
				l = append(l, int32(t))
			}
		}
		if len(l) == 0 {
			l = []int32{int32(rng.IntN(6))}
		}
		r.TopicLists = append(r.TopicLists, l)
	}
	for m := range rng.IntN(4) {
		ma := abi.MemberAssignment{Member: int32(m)}
		for range rng.IntN(4) {
			tp := abi.TopicPartitions{Topic: rng.Int32N(6), Partitions: []int32{rng.Int32N(5)}}
			if len(r.TopicLists) > 0 && rng.IntN(2) == 0 {
				tp.Topic = abi.ListRef(rng.IntN(len(r.TopicLists)))
			}
			ma.Partitions = append(ma.Partitions, tp)
		}
		if rng.IntN(3) == 0 {
			ma.UserData = []byte{byte(m)}
		}
		r.Members = append(r.Members, ma)
	}
	return r
}

func differential(t *testing.T, sdk string, check Checker, grouped bool) {
	t.Helper()
	var recs []Record
	rng := rand.New(rand.NewPCG(1, 2))
	for _, v := range vectors(t) {
		recs = append(recs, mutations(rng, v)...)
	}
	recs = append(recs, fuzzSeeds(t)...)
	for range 300 {
		recs = append(recs, Record{'q', abi.AppendRequest(nil, randomRequest(rng))})
	}
	plain := len(recs)
	if grouped {
		// Its own generator, so that the plain corpus above stays the
		// same buffers whichever SDK runs.
		grng := rand.New(rand.NewPCG(3, 4))
		for _, v := range vectorsIn(t, "testdata/abi/grouped") {
			recs = append(recs, mutations(grng, v)...)
		}
		for range 300 {
			recs = append(recs, Record{'q', abi.AppendRequest(nil, randomGroupedRequest(grng))})
			recs = append(recs, Record{'r', abi.AppendResponse(nil, randomGroupedResponse(grng))})
		}
	}
	res := check(t, recs)
	accepted, failed, groupedOK := 0, 0, 0
	for i, r := range recs {
		if failed == 20 {
			t.Fatalf("stopping after %d disagreements", failed)
		}
		goErr := goDecode(r.Kind, r.B, grouped)
		switch got := res[i].Verdict; {
		case got == "mismatch":
			t.Errorf("record %d (%c, %x): decoded but re-encoded to different bytes", i, r.Kind, r.B)
			failed++
		case goErr == nil && got != "ok":
			t.Errorf("record %d (%c, %x): Go accepts, %s says %s %s", i, r.Kind, r.B, sdk, got, res[i].Rest)
			failed++
		case goErr != nil && got != "reject":
			t.Errorf("record %d (%c, %x): Go rejects (%v), %s accepts", i, r.Kind, r.B, goErr, sdk)
			failed++
		case got == "ok":
			accepted++
			if i >= plain {
				groupedOK++
			}
		}
	}
	if accepted == 0 || accepted == len(recs) {
		t.Fatalf("%d of %d buffers accepted: the mix must hold both valid and invalid ones", accepted, len(recs))
	}
	if grouped && (groupedOK == 0 || groupedOK == len(recs)-plain) {
		t.Fatalf("%d of %d grouped-corpus buffers accepted: the mix must hold both valid and invalid ones", groupedOK, len(recs)-plain)
	}
	t.Logf("%d buffers (%d of the grouped corpus), %d accepted by both codecs (%d grouped-corpus)", len(recs), len(recs)-plain, accepted, groupedOK)
}

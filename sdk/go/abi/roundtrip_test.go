package abi_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// checkRequestRoundTrip asserts the codec's two promises for one value:
// decode(encode(r)) is r up to nil-versus-empty, and encode(decode(b)) is b
// byte for byte. It also checks the properties every valid buffer has: each
// strict prefix and any extension is rejected, and the decoded value does not
// alias the buffer.
func checkRequestRoundTrip(t *testing.T, r *abi.Request) {
	t.Helper()
	b := abi.AppendRequest(nil, r)
	if again := abi.AppendRequest(nil, r); !bytes.Equal(b, again) {
		t.Fatalf("encoding the same request twice gave different bytes")
	}
	got, err := abi.DecodeRequest(b)
	if err != nil {
		t.Fatalf("DecodeRequest(AppendRequest(r)): %v", err)
	}
	if want := canonicalRequest(r); !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip changed the request\n got: %+v\nwant: %+v", got, want)
	}
	if re := abi.AppendRequest(nil, got); !bytes.Equal(re, b) {
		t.Fatalf("re-encoding the decoded request changed the bytes\n got: %x\nwant: %x", re, b)
	}
	checkStrictFraming(t, b, func(b []byte) error { _, err := abi.DecodeRequest(b); return err })
	checkNoAlias(t, b, got, func(b []byte) (any, error) { return abi.DecodeRequest(b) })
	checkAppendKeepsPrefix(t, b, func(dst []byte) []byte { return abi.AppendRequest(dst, r) })
}

func checkResponseRoundTrip(t *testing.T, r *abi.Response) {
	t.Helper()
	b := abi.AppendResponse(nil, r)
	got, err := abi.DecodeResponse(b)
	if err != nil {
		t.Fatalf("DecodeResponse(AppendResponse(r)): %v", err)
	}
	if want := canonicalResponse(r); !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip changed the response\n got: %+v\nwant: %+v", got, want)
	}
	if re := abi.AppendResponse(nil, got); !bytes.Equal(re, b) {
		t.Fatalf("re-encoding the decoded response changed the bytes\n got: %x\nwant: %x", re, b)
	}
	checkStrictFraming(t, b, func(b []byte) error { _, err := abi.DecodeResponse(b); return err })
	checkNoAlias(t, b, got, func(b []byte) (any, error) { return abi.DecodeResponse(b) })
	checkAppendKeepsPrefix(t, b, func(dst []byte) []byte { return abi.AppendResponse(dst, r) })
}

func checkDescriptionRoundTrip(t *testing.T, d *abi.Description) {
	t.Helper()
	b := abi.AppendDescription(nil, d)
	got, err := abi.DecodeDescription(b)
	if err != nil {
		t.Fatalf("DecodeDescription(AppendDescription(d)): %v", err)
	}
	if want := canonicalDescription(d); !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip changed the description\n got: %+v\nwant: %+v", got, want)
	}
	if re := abi.AppendDescription(nil, got); !bytes.Equal(re, b) {
		t.Fatalf("re-encoding the decoded description changed the bytes\n got: %x\nwant: %x", re, b)
	}
	checkStrictFraming(t, b, func(b []byte) error { _, err := abi.DecodeDescription(b); return err })
	checkNoAlias(t, b, got, func(b []byte) (any, error) { return abi.DecodeDescription(b) })
	checkAppendKeepsPrefix(t, b, func(dst []byte) []byte { return abi.AppendDescription(dst, d) })
}

// checkStrictFraming relies on every count being exact (ABI.md section 2): no
// strict prefix of a valid buffer is itself valid, and neither is the buffer
// with a byte added. Buffers past 128 bytes are cut at a spread of about 64
// points to keep the property tests fast.
func checkStrictFraming(t *testing.T, b []byte, decode func([]byte) error) {
	t.Helper()
	step := 1
	if len(b) > 128 {
		step = len(b)/64 + 1
	}
	for n := 0; n < len(b); n += step {
		err := decode(b[:n:n])
		if !errors.Is(err, abi.ErrMalformed) {
			t.Fatalf("decoding the first %d of %d bytes: got %v, want ErrMalformed", n, len(b), err)
		}
	}
	if n := len(b) - 1; n >= 0 {
		if err := decode(b[:n:n]); !errors.Is(err, abi.ErrMalformed) {
			t.Fatalf("decoding all but the last byte: got %v, want ErrMalformed", err)
		}
	}
	for _, extra := range []byte{0, 1, 0xff} {
		if err := decode(append(bytes.Clone(b), extra)); !errors.Is(err, abi.ErrMalformed) {
			t.Fatalf("decoding with trailing byte %#x: got %v, want ErrMalformed", extra, err)
		}
	}
}

// checkNoAlias overwrites a copy of the buffer after decoding it and checks
// the decoded value did not change: a guest reuses its request buffer, and
// the host reuses guest memory, so a decoded value must own its bytes.
func checkNoAlias(t *testing.T, b []byte, want any, decode func([]byte) (any, error)) {
	t.Helper()
	buf := bytes.Clone(b)
	got, err := decode(buf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] = 0xa5
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the decoded value changed when its buffer was overwritten")
	}
}

// checkAppendKeepsPrefix checks the Append contract: the encoding goes after
// dst's contents, which stay as they were, with or without spare capacity.
func checkAppendKeepsPrefix(t *testing.T, want []byte, appendTo func([]byte) []byte) {
	t.Helper()
	prefix := []byte("prefix")
	for _, dst := range [][]byte{bytes.Clone(prefix), append(make([]byte, 0, 1<<16), prefix...)} {
		out := appendTo(dst)
		if !bytes.Equal(out[:len(prefix)], prefix) || !bytes.Equal(out[len(prefix):], want) {
			t.Fatalf("appending to a %d-byte dst with capacity %d did not give dst followed by the encoding", len(dst), cap(dst))
		}
	}
}

func TestRequest_RoundTripsHandWrittenCases(t *testing.T) {
	tests := []struct {
		name string
		req  *abi.Request
	}{
		{"zero value", &abi.Request{}},
		{"empty lists given as empty slices", &abi.Request{
			Config: map[string]string{}, Brokers: []abi.Broker{}, ReplicaSets: [][]int32{}, Topics: []abi.Topic{}, Members: []abi.Member{},
		}},
		{"header fields at their extremes", &abi.Request{
			GroupID: "g", Generation: -2147483648, Protocol: "range", Assignor: "a",
			RebalanceProtocol: abi.Cooperative, Seed: 0xffffffffffffffff,
		}},
		{"config keys out of order, empty key and empty value", &abi.Request{Config: map[string]string{
			"z": "last", "a": "first", "": "empty key", "m": "", "é": "non-ascii sorts by bytes", "Z": "upper before lower",
		}}},
		{"brokers with and without racks and negative ids", &abi.Request{Brokers: []abi.Broker{
			{ID: 0}, {ID: 1, Rack: "r1"}, {ID: -1, Rack: "r-unknown"}, {ID: 2147483647, Rack: "🙂"},
		}}},
		{"replica sets including an empty one", &abi.Request{ReplicaSets: [][]int32{{1, 2, 3}, {}, {3}, nil, {-1}}}},
		{"topic without placement", &abi.Request{Topics: []abi.Topic{{Name: "t", Exists: true, PartitionCount: 100}}}},
		{"topic without placement claiming the largest count", &abi.Request{Topics: []abi.Topic{{Name: "t", Exists: true, PartitionCount: 2147483647}}}},
		{"topic with placement", &abi.Request{
			ReplicaSets: [][]int32{{1, 2}, {2}},
			Topics: []abi.Topic{{
				Name: "t", ID: [16]byte{15: 1}, Exists: true, PartitionCount: 2,
				Partitions: []abi.Partition{{Leader: 1, Replicas: 0, ISR: 1}, {Leader: -1, Replicas: 1, ISR: 1}},
			}},
		}},
		{"existing topic with placement of zero partitions", &abi.Request{Topics: []abi.Topic{{Name: "t", Exists: true, Partitions: []abi.Partition{}}}}},
		{"non-existent topics", &abi.Request{Topics: []abi.Topic{{Name: "gone"}, {Name: "", ID: [16]byte{1}}}}},
		{"member with every field", &abi.Request{
			Topics: []abi.Topic{{Name: "a", Exists: true, PartitionCount: 3}, {Name: "b"}},
			Members: []abi.Member{{
				MemberID: "m", InstanceID: "i", ClientID: "c", ClientHost: "h", Rack: "r", Cooperative: true,
				Topics: []int32{0, 1}, OwnedGeneration: 9,
				Owned:    []abi.TopicPartitions{{Topic: 0, Partitions: []int32{2, 0}}, {Topic: 1, Partitions: []int32{5}}},
				UserData: []byte{0, 0xff},
				Previous: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{}}, {Topic: 1}},
			}},
		}},
		{"member with every field empty", &abi.Request{Members: []abi.Member{{
			Topics: []int32{}, Owned: []abi.TopicPartitions{}, UserData: []byte{}, Previous: []abi.TopicPartitions{},
		}}}},
		{"minimal", minimalRequest()},
		{"full", fullRequest()},
		{"non-existent topic mentioned by a member", missingTopicRequest()},
		{"lists larger than the decoder's arena", largeListsRequest()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkRequestRoundTrip(t, tt.req) })
	}
}

// largeListsRequest has int32 lists that straddle and exceed the decoder's
// 16Ki-entry arena, where one list ending and the next starting share a
// backing array.
func largeListsRequest() *abi.Request {
	seq := func(n int, base int32) []int32 {
		s := make([]int32, n)
		for i := range s {
			s[i] = base + int32(i)
		}
		return s
	}
	return &abi.Request{
		Topics: []abi.Topic{{Name: "t", Exists: true, PartitionCount: 40000}},
		Members: []abi.Member{{
			Topics: []int32{0},
			Owned: []abi.TopicPartitions{
				{Topic: 0, Partitions: seq(10000, 0)},
				{Topic: 0, Partitions: seq(10000, 10000)},
				{Topic: 0, Partitions: seq(20000, 20000)},
			},
		}},
	}
}

// TestRequest_DecodedListsCannotOverwriteEachOther guards the arena: the
// decoder carves many lists out of one array, so each must have capacity equal
// to its length, or an assignor appending to one list would silently rewrite
// the next.
func TestRequest_DecodedListsCannotOverwriteEachOther(t *testing.T) {
	got, err := abi.DecodeRequest(abi.AppendRequest(nil, largeListsRequest()))
	if err != nil {
		t.Fatal(err)
	}
	want := canonicalRequest(largeListsRequest())
	m := &got.Members[0]
	lists := [][]int32{m.Topics}
	for _, tp := range m.Owned {
		lists = append(lists, tp.Partitions)
	}
	for i, l := range lists {
		if cap(l) != len(l) {
			t.Errorf("list %d has capacity %d beyond its length %d", i, cap(l), len(l))
		}
		// The result is dropped: only a write past the list's end into a
		// shared array could show up in got.
		_ = append(l, -7, -7, -7)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("appending to one decoded list changed another")
	}
}

func TestResponse_RoundTripsHandWrittenCases(t *testing.T) {
	tests := []struct {
		name string
		resp *abi.Response
	}{
		{"zero value is an ok response assigning nothing", &abi.Response{}},
		{"empty members slice", &abi.Response{Members: []abi.MemberAssignment{}}},
		{"member receiving nothing", &abi.Response{Members: []abi.MemberAssignment{{Member: 3, Partitions: []abi.TopicPartitions{}, UserData: []byte{}}}}},
		{"assignments", okResponse()},
		{"topic and member indices the host must reject still survive", &abi.Response{Members: []abi.MemberAssignment{
			{Member: -1, Partitions: []abi.TopicPartitions{{Topic: -1, Partitions: []int32{-1}}, {Topic: 2147483647}}},
		}}},
		{"error", errorResponse()},
		{"error with assignments drops the assignments", &abi.Response{Error: "boom", Members: okResponse().Members}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkResponseRoundTrip(t, tt.resp) })
	}
}

func TestDescription_RoundTripsHandWrittenCases(t *testing.T) {
	tests := []struct {
		name string
		desc *abi.Description
	}{
		{"no assignors", &abi.Description{}},
		{"one assignor", &abi.Description{Assignors: []abi.AssignorInfo{{Name: "range", Version: "1", Protocols: []string{"range"}, Modes: abi.ModeEager}}}},
		{"several assignors", twoAssignors()},
		{"assignor with empty protocols and every flag", &abi.Description{Assignors: []abi.AssignorInfo{
			{Protocols: []string{}, Modes: abi.ModeEager | abi.ModeCooperative, MayLeaveUnassigned: true},
			{Protocols: []string{"", "x"}, Modes: abi.ModeCooperative},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkDescriptionRoundTrip(t, tt.desc) })
	}
}

// The property tests draw a few hundred random valid values from fixed seeds,
// so a failure names the iteration that reproduces it.
const propertyIterations = 300

func TestRequest_RoundTripsRandomValues(t *testing.T) {
	g := newGen(1)
	for i := range propertyIterations {
		r := g.request()
		if !t.Run("", func(t *testing.T) { checkRequestRoundTrip(t, r) }) {
			t.Fatalf("iteration %d of seed 1 failed", i)
		}
	}
}

func TestResponse_RoundTripsRandomValues(t *testing.T) {
	g := newGen(2)
	for i := range propertyIterations {
		r := g.response()
		if !t.Run("", func(t *testing.T) { checkResponseRoundTrip(t, r) }) {
			t.Fatalf("iteration %d of seed 2 failed", i)
		}
	}
}

func TestDescription_RoundTripsRandomValues(t *testing.T) {
	g := newGen(3)
	for i := range propertyIterations {
		d := g.description()
		if !t.Run("", func(t *testing.T) { checkDescriptionRoundTrip(t, d) }) {
			t.Fatalf("iteration %d of seed 3 failed", i)
		}
	}
}

// TestDecode_EntryListsCannotOverwriteEachOther guards the entry arena: the
// {topic, partitions} lists of every member of a request or response are
// carved from shared arrays, as are their one-partition lists, so appending
// to any of them must never change another.
func TestDecode_EntryListsCannotOverwriteEachOther(t *testing.T) {
	singles := func(m int) []abi.TopicPartitions {
		tps := make([]abi.TopicPartitions, 3)
		for i := range tps {
			tps[i] = abi.TopicPartitions{Topic: int32(i), Partitions: []int32{int32(m)}}
		}
		return tps
	}
	req := &abi.Request{Topics: []abi.Topic{
		{Name: "a", Exists: true, PartitionCount: 4},
		{Name: "b", Exists: true, PartitionCount: 4},
		{Name: "c", Exists: true, PartitionCount: 4},
	}}
	resp := &abi.Response{}
	for m := range 3 {
		req.Members = append(req.Members, abi.Member{
			MemberID: fmt.Sprint(m), Topics: []int32{0, 1, 2}, OwnedGeneration: 1,
			Owned: singles(m), Previous: singles(m + 1),
		})
		resp.Members = append(resp.Members, abi.MemberAssignment{Member: int32(m), Partitions: singles(m)})
	}
	gotReq, err := abi.DecodeRequest(abi.AppendRequest(nil, req))
	if err != nil {
		t.Fatal(err)
	}
	gotResp, err := abi.DecodeResponse(abi.AppendResponse(nil, resp))
	if err != nil {
		t.Fatal(err)
	}
	var entries [][]abi.TopicPartitions
	for i := range gotReq.Members {
		entries = append(entries, gotReq.Members[i].Owned, gotReq.Members[i].Previous)
	}
	for i := range gotResp.Members {
		entries = append(entries, gotResp.Members[i].Partitions)
	}
	for i, tps := range entries {
		if cap(tps) != len(tps) {
			t.Errorf("entry list %d has capacity %d beyond its length %d", i, cap(tps), len(tps))
		}
		_ = append(tps, abi.TopicPartitions{Topic: 9, Partitions: []int32{-7}})
		for k, tp := range tps {
			if cap(tp.Partitions) != len(tp.Partitions) {
				t.Errorf("entry list %d, entry %d: partitions have capacity %d beyond length %d", i, k, cap(tp.Partitions), len(tp.Partitions))
			}
			_ = append(tp.Partitions, -7)
		}
	}
	if want := canonicalRequest(req); !reflect.DeepEqual(gotReq, want) {
		t.Errorf("appending to decoded request lists changed others:\n got %+v\nwant %+v", gotReq.Members, want.Members)
	}
	if !reflect.DeepEqual(gotResp, resp) {
		t.Errorf("appending to decoded response lists changed others:\n got %+v\nwant %+v", gotResp.Members, resp.Members)
	}
}

// TestDecode_EveryTruncationIsRejected cuts a request and a response made of
// one-partition entries (the decoder's fast path) and of longer lists at
// every byte: each cut must fail with ErrMalformed, never decode or panic.
func TestDecode_EveryTruncationIsRejected(t *testing.T) {
	req := &abi.Request{Topics: []abi.Topic{{Name: "a", Exists: true, PartitionCount: 4}, {Name: "b", Exists: true, PartitionCount: 4}}}
	resp := &abi.Response{}
	for m := range 2 {
		tps := []abi.TopicPartitions{{Topic: 0, Partitions: []int32{int32(m)}}, {Topic: 1, Partitions: []int32{1, 2, 3}}, {Topic: 1}}
		req.Members = append(req.Members, abi.Member{MemberID: "m", Topics: []int32{0, 1}, Owned: tps, Previous: tps})
		resp.Members = append(resp.Members, abi.MemberAssignment{Member: int32(m), Partitions: tps})
	}
	for _, c := range []struct {
		name   string
		b      []byte
		decode func([]byte) error
	}{
		{"request", abi.AppendRequest(nil, req), func(b []byte) error { _, err := abi.DecodeRequest(b); return err }},
		{"response", abi.AppendResponse(nil, resp), func(b []byte) error { _, err := abi.DecodeResponse(b); return err }},
	} {
		if err := c.decode(c.b); err != nil {
			t.Fatalf("%s: the whole buffer: %v", c.name, err)
		}
		for n := range len(c.b) {
			if err := c.decode(c.b[:n:n]); !errors.Is(err, abi.ErrMalformed) {
				t.Errorf("%s cut to %d of %d bytes: got %v, want ErrMalformed", c.name, n, len(c.b), err)
			}
		}
	}
}

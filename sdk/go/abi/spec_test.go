package abi_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// These tests hold the codec to sdk/ABI.md. Expected bytes are written from
// the spec, either as literal hex or with the le builder, never with the
// encoder, so a change to encode.go that the spec does not describe fails
// here even when encoder and decoder change together.

// mustHex decodes hex written one field per line, each followed by a
// "# comment" naming the field in ABI.md.
func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	var digits strings.Builder
	for _, line := range strings.Split(s, "\n") {
		line, _, _ = strings.Cut(line, "#")
		digits.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(digits.String())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// specRequest is a tiny request touching every part of section 3.
func specRequest() *abi.Request {
	return &abi.Request{
		GroupID: "g", Generation: 7, Protocol: "range", Assignor: "rack",
		RebalanceProtocol: abi.Cooperative, Seed: 0x0102030405060708,
		Config:      map[string]string{"b": "2", "a": "1"},
		Brokers:     []abi.Broker{{ID: 1, Rack: "r1"}},
		ReplicaSets: [][]int32{{1}},
		Topics: []abi.Topic{
			{
				Name: "t", ID: [16]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, Exists: true, PartitionCount: 2,
				Partitions: []abi.Partition{{Leader: 1}, {Leader: -1}},
			},
			{Name: "gone"},
		},
		Members: []abi.Member{{
			MemberID: "m", ClientID: "c", ClientHost: "h", Rack: "r1", Cooperative: true,
			Topics: []int32{0, 1}, OwnedGeneration: 6,
			Owned:    []abi.TopicPartitions{{Topic: 0, Partitions: []int32{1}}},
			UserData: []byte{0xaa},
			Previous: []abi.TopicPartitions{{Topic: 1, Partitions: []int32{0}}},
		}},
	}
}

func TestSpec_RequestHeaderBytes(t *testing.T) {
	got := abi.AppendRequest(nil, specRequest())
	want := mustHex(t, `
		01000000           # version u32 = 1
		01000000 67        # group_id "g": u32 length then UTF-8
		07000000           # generation i32
		05000000 72616e6765 # protocol "range"
		04000000 7261636b  # assignor "rack"
		01                 # rebalance_protocol u8: 1 cooperative
		0807060504030201   # seed u64 little-endian
		02000000           # config_count
		01000000 61 01000000 31   # "a" = "1": keys ascending, whatever the map order
		01000000 62 01000000 32   # "b" = "2"
		01000000           # broker_count
		01000000 02000000 7231    # broker 1, rack "r1"
		01000000           # replica_set_count
		01000000 01000000  # replica set 0 = i32s [1]
		02000000           # topic_count
	`)
	if !bytes.HasPrefix(got, want) {
		t.Fatalf("request header differs from ABI.md section 3\n got: %x\nwant: %x…", got[:min(len(got), len(want))], want)
	}
}

func TestSpec_TopicFlagsAndPackedPlacement(t *testing.T) {
	got := abi.AppendRequest(nil, specRequest())
	topic := mustHex(t, `
		01000000 74                        # name "t"
		000102030405060708090a0b0c0d0e0f   # topic_id u8×16, as stored
		03                                 # flags: bit 0 exists, bit 1 placement follows
		02000000                           # partition_count
		01000000 00000000 00000000         # partition 0: leader 1, replicas set 0, isr set 0
		ffffffff 00000000 00000000         # partition 1: leader -1 (unknown)
		04000000 676f6e65                  # name "gone"
		00000000000000000000000000000000   # topic_id unknown: all zero
		00                                 # flags: neither exists nor placement
		00000000                           # partition_count 0, and nothing follows
		01000000                           # member_count
	`)
	// Contiguous hex proves 12 bytes per partition with no padding: the
	// next topic's name length follows partition 1's isr directly.
	if !bytes.Contains(got, topic) {
		t.Fatalf("the topic table is not laid out as ABI.md section 3 says\n got: %x\nwant it to contain: %x", got, topic)
	}
}

func TestSpec_MemberBytes(t *testing.T) {
	got := abi.AppendRequest(nil, specRequest())
	member := mustHex(t, `
		01000000 6d        # member_id "m"
		00000000           # instance_id "": dynamic member
		01000000 63        # client_id "c"
		01000000 68        # client_host "h"
		02000000 7231      # rack "r1"
		01                 # flags: bit 0 cooperative
		02000000 00000000 01000000   # subscribed topics i32s [0 1]
		06000000           # owned_generation
		01000000 00000000 01000000 01000000   # owned tps: 1 × (topic 0, i32s [1])
		01000000 aa        # user_data bytes
		01000000 01000000 01000000 00000000   # previous tps: 1 × (topic 1, i32s [0])
	`)
	if !bytes.HasSuffix(got, member) {
		t.Fatalf("member entry differs from ABI.md section 3\n got: %x\nwant suffix: %x", got, member)
	}
}

// TestSpec_RequestMatchesBuilder checks the whole buffer, field by field from
// the spec's grammar, in both directions.
func TestSpec_RequestMatchesBuilder(t *testing.T) {
	want := le{}.u32(1).str("g").i32(7).str("range").str("rack").u8(1).u64(0x0102030405060708).
		u32(2).str("a").str("1").str("b").str("2").
		u32(1).i32(1).str("r1").
		u32(1).i32s(1).
		u32(2).
		str("t").raw(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15).u8(3).u32(2).
		i32(1).u32(0).u32(0).i32(-1).u32(0).u32(0).
		str("gone").raw(make([]byte, 16)...).u8(0).u32(0).
		u32(1).
		str("m").str("").str("c").str("h").str("r1").u8(1).i32s(0, 1).i32(6).
		u32(1).u32(0).i32s(1).
		bytes([]byte{0xaa}).
		u32(1).u32(1).i32s(0)
	if got := abi.AppendRequest(nil, specRequest()); !bytes.Equal(got, want) {
		t.Fatalf("AppendRequest differs from ABI.md section 3\n got: %x\nwant: %x", got, want)
	}
	got, err := abi.DecodeRequest(want)
	if err != nil {
		t.Fatalf("DecodeRequest of a buffer built from ABI.md: %v", err)
	}
	if !reflect.DeepEqual(got, canonicalRequest(specRequest())) {
		t.Fatalf("DecodeRequest of a buffer built from ABI.md\n got: %+v\nwant: %+v", got, specRequest())
	}
}

func TestSpec_ResponseBytes(t *testing.T) {
	tests := []struct {
		name string
		resp *abi.Response
		hex  string
	}{
		{"ok", &abi.Response{Members: []abi.MemberAssignment{
			{Member: 2, Partitions: []abi.TopicPartitions{{Topic: 0, Partitions: []int32{1, 3}}}, UserData: []byte("v")},
		}}, `
			01000000    # version
			00          # status 0 ok
			01000000    # count
			02000000    # member index
			01000000 00000000 02000000 01000000 03000000   # tps: 1 × (topic 0, i32s [1 3])
			01000000 76 # user_data "v"
		`},
		{"ok assigning nothing", &abi.Response{}, `01000000 00 00000000`},
		{"error", &abi.Response{Error: "oops"}, `
			01000000    # version
			01          # status 1 error
			04000000 6f6f7073  # message "oops"
		`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := mustHex(t, tt.hex)
			if got := abi.AppendResponse(nil, tt.resp); !bytes.Equal(got, want) {
				t.Fatalf("AppendResponse differs from ABI.md section 5\n got: %x\nwant: %x", got, want)
			}
			got, err := abi.DecodeResponse(want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, canonicalResponse(tt.resp)) {
				t.Fatalf("DecodeResponse: got %+v, want %+v", got, tt.resp)
			}
		})
	}
}

func TestSpec_DescriptionBytes(t *testing.T) {
	d := &abi.Description{Assignors: []abi.AssignorInfo{{
		Name: "r", Version: "1", Protocols: []string{"range", "x"},
		Modes: abi.ModeEager | abi.ModeCooperative, MayLeaveUnassigned: true, Description: "d",
	}}}
	want := mustHex(t, `
		01000000     # version
		01000000     # assignor_count
		01000000 72  # name "r"
		01000000 31  # version "1"
		02000000 05000000 72616e6765 01000000 78   # protocols ["range" "x"]
		03           # modes: bit 0 eager, bit 1 cooperative
		01           # flags: bit 0 may leave unassigned
		01000000 64  # description "d"
	`)
	if got := abi.AppendDescription(nil, d); !bytes.Equal(got, want) {
		t.Fatalf("AppendDescription differs from ABI.md section 4\n got: %x\nwant: %x", got, want)
	}
	got, err := abi.DecodeDescription(want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, d) {
		t.Fatalf("DecodeDescription: got %+v, want %+v", got, d)
	}
}

func TestSpec_ModeBitsMatchSection4(t *testing.T) {
	if abi.ModeEager != 1 || abi.ModeCooperative != 2 {
		t.Fatalf("ModeEager = %d, ModeCooperative = %d; ABI.md section 4 says bit 0 and bit 1", abi.ModeEager, abi.ModeCooperative)
	}
	if abi.Eager != 0 || abi.Cooperative != 1 {
		t.Fatalf("Eager = %d, Cooperative = %d; ABI.md section 3 says 0 and 1", abi.Eager, abi.Cooperative)
	}
	if abi.Version != 1 {
		t.Fatalf("Version = %d; ABI.md describes version 1", abi.Version)
	}
}

// reqHead is a valid request header with empty config, the point where the
// rejection cases below start to differ.
func reqHead() le {
	return le{}.u32(1).str("g").i32(1).str("p").str("a").u8(0).u64(0)
}

// reqWithTopics ends a request after a topic table built by topics, with one
// replica set and no members.
func reqWithTopics(topics le, n uint32) []byte {
	return append(reqHead().u32(0).u32(0).u32(1).i32s(1).u32(n), append(topics, 0, 0, 0, 0)...)
}

// reqWithMember ends a request with one topic "t" of 2 partitions and one
// member whose tail after the flags byte is member.
func reqWithMember(flags byte, member le) []byte {
	return append(reqHead().u32(0).u32(0).u32(0).u32(1).str("t").raw(make([]byte, 16)...).u8(1).u32(2).
		u32(1).str("m").str("").str("").str("").str("").u8(flags), member...)
}

type rejection struct {
	name    string
	buf     []byte
	wantErr error
	wantMsg string // a substring of the error
}

// requestRejections are the buffers ABI.md sections 2 and 3 say a decoder
// rejects.
func requestRejections() []rejection {
	placed := func(leader int32, replicas, isr uint32) []byte {
		return reqWithTopics(le{}.str("t").raw(make([]byte, 16)...).u8(3).u32(1).i32(leader).u32(replicas).u32(isr), 1)
	}
	return []rejection{
		{"empty buffer", nil, abi.ErrMalformed, "truncated version"},
		{"version 0", le{}.u32(0), abi.ErrVersion, "version 0"},
		{"version 2", append(le{}.u32(2), reqHead()[4:].u32(0).u32(0).u32(0).u32(0).u32(0)...), abi.ErrVersion, "version 2"},
		{"truncated in a string", reqHead()[:7], abi.ErrMalformed, "truncated"},
		{"trailing byte", reqHead().u32(0).u32(0).u32(0).u32(0).u32(0).u8(0), abi.ErrMalformed, "1 trailing bytes"},
		{"rebalance protocol 2", le{}.u32(1).str("").i32(0).str("").str("").u8(2).u64(0).u32(0).u32(0).u32(0).u32(0).u32(0), abi.ErrMalformed, "rebalance protocol 2"},
		{"config keys descending", reqHead().u32(2).str("b").str("").str("a").str("").u32(0).u32(0).u32(0).u32(0), abi.ErrMalformed, "out of order"},
		{"config key repeated", reqHead().u32(2).str("a").str("1").str("a").str("2").u32(0).u32(0).u32(0).u32(0), abi.ErrMalformed, "out of order"},
		{"unknown topic flag bit", reqWithTopics(le{}.str("t").raw(make([]byte, 16)...).u8(5).u32(0), 1), abi.ErrMalformed, "unknown flags"},
		{"missing topic with partitions", reqWithTopics(le{}.str("t").raw(make([]byte, 16)...).u8(0).u32(1), 1), abi.ErrMalformed, "does not exist"},
		{"missing topic with placement", reqWithTopics(le{}.str("t").raw(make([]byte, 16)...).u8(2).u32(0), 1), abi.ErrMalformed, "does not exist"},
		{"partition count beyond int32", reqWithTopics(le{}.str("t").raw(make([]byte, 16)...).u8(1).u32(0x80000000), 1), abi.ErrMalformed, "partition count"},
		{"placement shorter than partition count", reqWithTopics(le{}.str("t").raw(make([]byte, 16)...).u8(3).u32(2).i32(1).u32(0).u32(0), 1), abi.ErrMalformed, "truncated partition placement"},
		// 0x15555556 partitions × 12 bytes is 2^32 + 8: a decoder that
		// multiplies in 32 bits would see 8 bytes and index past them.
		{"placement count forged to wrap 32-bit size", reqWithTopics(le{}.str("t").raw(make([]byte, 16)...).u8(3).u32(0x15555556).i32(1).i32(0), 1), abi.ErrMalformed, "partition placement"},
		{"replicas beyond the replica sets", placed(1, 1, 0), abi.ErrMalformed, "replica set"},
		{"isr beyond the replica sets", placed(1, 0, 1), abi.ErrMalformed, "replica set"},
		{"unknown member flag bit", reqWithMember(2, le{}.i32s().i32(-1).u32(0).u32(0).u32(0)), abi.ErrMalformed, "unknown flags"},
		{"subscribed topic index equal to topic count", reqWithMember(0, le{}.i32s(1).i32(-1).u32(0).u32(0).u32(0)), abi.ErrMalformed, "topic index 1 of 1"},
		{"negative subscribed topic index", reqWithMember(0, le{}.i32s(-1).i32(-1).u32(0).u32(0).u32(0)), abi.ErrMalformed, "topic index -1 of 1"},
		{"owned topic index out of range", reqWithMember(0, le{}.i32s(0).i32(1).u32(1).u32(1).i32s(0).u32(0).u32(0)), abi.ErrMalformed, "topic index 1 of 1"},
		{"owned topic index with the top bit set", reqWithMember(0, le{}.i32s(0).i32(1).u32(1).u32(0xffffffff).i32s(0).u32(0).u32(0)), abi.ErrMalformed, "topic index 4294967295 of 1"},
		{"previous topic index out of range", reqWithMember(0, le{}.i32s(0).i32(1).u32(0).u32(0).u32(1).u32(7).i32s(0)), abi.ErrMalformed, "topic index 7 of 1"},
		{"forged config count", reqHead().u32(0xffffffff).u32(0).u32(0).u32(0).u32(0), abi.ErrMalformed, "exceeds"},
		{"forged broker count", reqHead().u32(0).u32(0x10000000).u32(0).u32(0).u32(0), abi.ErrMalformed, "exceeds"},
		{"forged replica set count", reqHead().u32(0).u32(0).u32(0xffffffff).u32(0).u32(0), abi.ErrMalformed, "exceeds"},
		{"forged replica set length", reqHead().u32(0).u32(0).u32(1).u32(0x40000000).u32(0).u32(0), abi.ErrMalformed, "exceeds"},
		{"forged topic count", reqHead().u32(0).u32(0).u32(0).u32(0xffffffff).u32(0), abi.ErrMalformed, "exceeds"},
		{"forged member count", reqHead().u32(0).u32(0).u32(0).u32(0).u32(0xffffffff), abi.ErrMalformed, "exceeds"},
		{"forged string length", le{}.u32(1).u32(0xffffffff).raw(make([]byte, 64)...), abi.ErrMalformed, "exceeds"},
		{"forged owned count", reqWithMember(0, le{}.i32s(0).i32(1).u32(0x7fffffff).u32(0).u32(0)), abi.ErrMalformed, "exceeds"},
		{"forged user data length", reqWithMember(0, le{}.i32s(0).i32(1).u32(0).u32(0xfffffff0).u32(0)), abi.ErrMalformed, "exceeds"},
		{"unknown layout bit", append(le{}.u32(1|1<<17), reqHead()[4:].u32(0).u32(0).u32(0).u32(0).u32(0)...), abi.ErrVersion, "version"},
		{"grouped: empty topic list", groupedReq(le{}.i32s(), 1, nil), abi.ErrMalformed, "topic list 0 is empty"},
		{"grouped: topic list beyond the topic table", groupedReq(le{}.i32s(0, 2), 1, nil), abi.ErrMalformed, "refers to topic index"},
		{"grouped: negative topic in a list", groupedReq(le{}.i32s(-1), 1, nil), abi.ErrMalformed, "refers to topic index"},
		{"grouped: topic list not ascending", groupedReq(le{}.i32s(1, 0), 1, nil), abi.ErrMalformed, "not strictly ascending"},
		{"grouped: topic list with a repeat", groupedReq(le{}.i32s(1, 1), 1, nil), abi.ErrMalformed, "not strictly ascending"},
		{"grouped: forged topic list count", groupedReq(nil, 0x7fffffff, nil), abi.ErrMalformed, "exceeds"},
		{"grouped: owned reference past the lists", groupedReq(le{}.i32s(0, 1), 1, le{}.u32(1).i32(abi.ListRef(1)).i32s(0)), abi.ErrMalformed, "topic list 1 of 1"},
		{"grouped: owned reference with no lists", groupedReq(nil, 0, le{}.u32(1).i32(abi.ListRef(0)).i32s(0)), abi.ErrMalformed, "topic index 4294967295 of 2"},
		{"grouped: subscription past the lists", append(groupedReq(le{}.i32s(0, 1), 1, nil)[:len(groupedReq(le{}.i32s(0, 1), 1, nil))-20], le{}.i32(1).i32(1).u32(0).u32(0).u32(0)...), abi.ErrMalformed, "subscribes to topic list 1 of 1"},
		{"grouped: negative subscription other than -1", append(groupedReq(le{}.i32s(0, 1), 1, nil)[:len(groupedReq(le{}.i32s(0, 1), 1, nil))-20], le{}.i32(-2).i32(1).u32(0).u32(0).u32(0)...), abi.ErrMalformed, "subscribes to topic list -2 of 1"},
	}
}

// groupedReq is a request in the grouped layout with topics "a" and "b" of
// two partitions each, the topic-list table lists (n entries), and one
// member subscribed to nothing whose owned entries are owned (none when
// nil).
func groupedReq(lists le, n uint32, owned le) []byte {
	if owned == nil {
		owned = le{}.u32(0)
	}
	b := le{}.u32(1 | abi.GroupedLayout).str("g").i32(1).str("p").str("a").u8(0).u64(0).u32(0).u32(0).u32(0).
		u32(2).str("a").raw(make([]byte, 16)...).u8(1).u32(2).str("b").raw(make([]byte, 16)...).u8(1).u32(2).
		u32(n)
	b = append(b, lists...)
	b = b.u32(1).str("m").str("").str("").str("").str("").u8(0).i32(-1).i32(1)
	b = append(b, owned...)
	return b.u32(0).u32(0)
}

func responseRejections() []rejection {
	return []rejection{
		{"empty buffer", nil, abi.ErrMalformed, "truncated"},
		{"version 2", le{}.u32(2).u8(0).u32(0), abi.ErrVersion, "version 2"},
		{"no status", le{}.u32(1), abi.ErrMalformed, "truncated status"},
		{"status 2", le{}.u32(1).u8(2).u32(0), abi.ErrMalformed, "status 2"},
		{"empty error message", le{}.u32(1).u8(1).str(""), abi.ErrMalformed, "empty error message"},
		{"error message with trailing assignments", le{}.u32(1).u8(1).str("x").u32(0), abi.ErrMalformed, "trailing"},
		{"forged assignment count", le{}.u32(1).u8(0).u32(0xffffffff), abi.ErrMalformed, "exceeds"},
		{"forged partition list", le{}.u32(1).u8(0).u32(1).u32(0).u32(1).u32(0).u32(0x3fffffff).u32(0), abi.ErrMalformed, "exceeds"},
		{"user data shorter than its length", le{}.u32(1).u8(0).u32(1).u32(0).u32(0).u32(5).raw('a', 'b'), abi.ErrMalformed, "user data count 5 exceeds the remaining 2 bytes"},
		{"unknown layout bit", le{}.u32(1 | 1<<17).u8(0).u32(0), abi.ErrVersion, "version"},
		{"grouped: empty topic list", le{}.u32(1 | abi.GroupedLayout).u8(0).u32(1).i32s().u32(0), abi.ErrMalformed, "topic list 0 is empty"},
		{"grouped: topic list not ascending", le{}.u32(1|abi.GroupedLayout).u8(0).u32(1).i32s(3, 2).u32(0), abi.ErrMalformed, "not strictly ascending"},
		{"grouped: reference past the lists", le{}.u32(1 | abi.GroupedLayout).u8(0).u32(1).i32s(0).u32(1).u32(0).u32(1).i32(abi.ListRef(1)).i32s(0).u32(0), abi.ErrMalformed, "topic list 1 of 1"},
		{"grouped: reference with no lists", le{}.u32(1 | abi.GroupedLayout).u8(0).u32(0).u32(1).u32(0).u32(1).i32(abi.ListRef(0)).i32s(0).u32(0), abi.ErrMalformed, "refers to topic index"},
	}
}

func descriptionRejections() []rejection {
	one := func(modes, flags byte) []byte {
		return le{}.u32(1).u32(1).str("n").str("v").u32(1).str("p").u8(modes).u8(flags).str("d")
	}
	return []rejection{
		{"empty buffer", nil, abi.ErrMalformed, "truncated"},
		{"version 2", le{}.u32(2).u32(0), abi.ErrVersion, "version 2"},
		{"unknown mode bit", one(4, 0), abi.ErrMalformed, "unknown mode or flag bits"},
		{"unknown flag bit", one(1, 4), abi.ErrMalformed, "unknown mode or flag bits"},
		{"forged assignor count", le{}.u32(1).u32(0x10000000), abi.ErrMalformed, "exceeds"},
		{"forged protocol count", le{}.u32(1).u32(1).str("n").str("v").u32(0xffffffff).u8(1).u8(0).str(""), abi.ErrMalformed, "exceeds"},
		{"trailing byte", append(one(1, 0), 0), abi.ErrMalformed, "trailing"},
	}
}

func TestSpec_DecodersRejectWhatTheSpecForbids(t *testing.T) {
	kinds := []struct {
		kind   string
		cases  []rejection
		decode func([]byte) error
	}{
		{"request", requestRejections(), func(b []byte) error { _, err := abi.DecodeRequest(b); return err }},
		{"response", responseRejections(), func(b []byte) error { _, err := abi.DecodeResponse(b); return err }},
		{"description", descriptionRejections(), func(b []byte) error { _, err := abi.DecodeDescription(b); return err }},
	}
	for _, k := range kinds {
		for _, tt := range k.cases {
			t.Run(k.kind+"/"+tt.name, func(t *testing.T) {
				err := k.decode(tt.buf)
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Fatalf("got error %v, want one wrapping %q and containing %q", err, tt.wantErr, tt.wantMsg)
				}
				if !strings.HasPrefix(err.Error(), "abi: "+k.kind+": ") {
					t.Fatalf("error %q does not say what was being decoded", err)
				}
			})
		}
	}
}

// TestSpec_ForgedCountsAllocateLittle checks why the "count could not fit"
// rule exists: a few bytes claiming four billion entries must not make the
// host or a guest allocate for them.
func TestSpec_ForgedCountsAllocateLittle(t *testing.T) {
	var forged [][]byte
	for _, set := range [][]rejection{requestRejections(), responseRejections(), descriptionRejections()} {
		for _, r := range set {
			if strings.Contains(r.name, "forged") {
				forged = append(forged, r.buf)
			}
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, b := range forged {
		_, _ = abi.DecodeRequest(b)
		_, _ = abi.DecodeResponse(b)
		_, _ = abi.DecodeDescription(b)
	}
	runtime.ReadMemStats(&after)
	// Each failed decode may allocate an error and a small arena; 1 MiB
	// leaves room for that and none for a forged count.
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("decoding %d forged buffers allocated %d bytes", len(forged), n)
	}
}

// TestSpec_GroupedLayoutMatchesBuilder checks a request and a response in the
// grouped layout (ABI.md section 7), field by field, in both directions.
func TestSpec_GroupedLayoutMatchesBuilder(t *testing.T) {
	both := []int32{0, 1}
	req := &abi.Request{
		GroupID: "g", Generation: 2, Protocol: "p", Assignor: "a",
		Topics: []abi.Topic{
			{Name: "a", Exists: true, PartitionCount: 2},
			{Name: "b", Exists: true, PartitionCount: 2},
		},
		TopicLists: [][]int32{both},
		Members: []abi.Member{
			{MemberID: "m", Topics: both, OwnedGeneration: 1,
				Owned: []abi.TopicPartitions{{Topic: abi.ListRef(0), Partitions: []int32{1}}}},
			{MemberID: "n", OwnedGeneration: -1,
				Previous: []abi.TopicPartitions{{Topic: 1, Partitions: []int32{0}}}},
		},
	}
	want := le{}.u32(0x00010001).str("g").i32(2).str("p").str("a").u8(0).u64(0).
		u32(0).u32(0).u32(0).
		u32(2).
		str("a").raw(make([]byte, 16)...).u8(1).u32(2).
		str("b").raw(make([]byte, 16)...).u8(1).u32(2).
		u32(1).i32s(0, 1). // topic-list table
		u32(2).
		str("m").str("").str("").str("").str("").u8(0).i32(0).i32(1). // subscription: list 0
		u32(1).i32(-1).i32s(1).                                       // owned: list 0 × [1]
		u32(0).u32(0).
		str("n").str("").str("").str("").str("").u8(0).i32(-1).i32(-1). // no subscription
		u32(0).u32(0).
		u32(1).i32(1).i32s(0) // previous: plain entry
	if got := abi.AppendRequest(nil, req); !bytes.Equal(got, want) {
		t.Fatalf("AppendRequest differs from ABI.md section 7\n got: %x\nwant: %x", got, want)
	}
	got, err := abi.DecodeRequest(want)
	if err != nil {
		t.Fatalf("DecodeRequest of a grouped buffer built from ABI.md: %v", err)
	}
	if !reflect.DeepEqual(got, canonicalRequest(req)) {
		t.Fatalf("DecodeRequest of a grouped buffer\n got: %+v\nwant: %+v", got, req)
	}

	resp := &abi.Response{
		TopicLists: [][]int32{both},
		Members:    []abi.MemberAssignment{{Member: 0, Partitions: []abi.TopicPartitions{{Topic: abi.ListRef(0), Partitions: []int32{0, 1}}}}},
	}
	wantResp := le{}.u32(0x00010001).u8(0).
		u32(1).i32s(0, 1).
		u32(1).u32(0).u32(1).i32(-1).i32s(0, 1).u32(0)
	if gotResp := abi.AppendResponse(nil, resp); !bytes.Equal(gotResp, wantResp) {
		t.Fatalf("AppendResponse differs from ABI.md section 7\n got: %x\nwant: %x", gotResp, wantResp)
	}
	dec, err := abi.DecodeResponse(wantResp)
	if err != nil || !reflect.DeepEqual(dec, canonicalResponse(resp)) {
		t.Fatalf("DecodeResponse of a grouped buffer: %+v, %v", dec, err)
	}
}

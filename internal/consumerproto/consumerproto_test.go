package consumerproto

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmassign/wasmassign/sdk/go/abi"
)

// randomMetadata builds a subscription with kmsg, the reference encoder.
func randomMetadata(rng *rand.Rand, version int16, topicPool []string) kmsg.ConsumerMemberMetadata {
	m := kmsg.NewConsumerMemberMetadata()
	m.Version = version
	for _, t := range topicPool {
		if rng.IntN(3) > 0 {
			m.Topics = append(m.Topics, t)
		}
	}
	if rng.IntN(4) == 0 && len(m.Topics) > 0 { // clients may repeat a name
		m.Topics = append(m.Topics, m.Topics[0])
	}
	if rng.IntN(2) == 0 {
		m.UserData = []byte(fmt.Sprintf("ud-%d", rng.IntN(100)))
	}
	for _, t := range topicPool {
		if rng.IntN(3) == 0 {
			op := kmsg.NewConsumerMemberMetadataOwnedPartition()
			op.Topic = t
			for range rng.IntN(5) {
				op.Partitions = append(op.Partitions, rng.Int32N(50))
			}
			m.OwnedPartitions = append(m.OwnedPartitions, op)
		}
	}
	m.Generation = rng.Int32N(10) - 1
	if rng.IntN(2) == 0 {
		rack := fmt.Sprintf("rack-%d", rng.IntN(3))
		m.Rack = &rack
	}
	return m
}

// checkAgainstKmsg decodes b with kmsg and compares every field the
// version carries.
func checkAgainstKmsg(t *testing.T, names *Names, got Subscription, b []byte) {
	t.Helper()
	want := kmsg.NewConsumerMemberMetadata()
	if err := want.ReadFrom(b); err != nil {
		t.Fatalf("kmsg rejects what we accepted: %v", err)
	}
	if got.Version != want.Version {
		t.Errorf("version %d, want %d", got.Version, want.Version)
	}
	wantTopics := slices.Clone(want.Topics)
	slices.Sort(wantTopics)
	wantTopics = slices.Compact(wantTopics)
	var gotTopics []string
	for _, id := range got.Topics {
		gotTopics = append(gotTopics, names.Name(id))
	}
	slices.Sort(gotTopics)
	if !slices.Equal(gotTopics, wantTopics) {
		t.Errorf("topics %v, want %v", gotTopics, wantTopics)
	}
	if !slices.IsSorted(got.Topics) || len(slices.Compact(slices.Clone(got.Topics))) != len(got.Topics) {
		t.Errorf("topic ids %v not strictly ascending", got.Topics)
	}
	if string(got.UserData) != string(want.UserData) || (got.UserData == nil) != (want.UserData == nil) {
		t.Errorf("user data %q, want %q", got.UserData, want.UserData)
	}
	if want.Version < 1 {
		want.OwnedPartitions = nil
	}
	if len(got.Owned) != len(want.OwnedPartitions) {
		t.Fatalf("%d owned entries, want %d", len(got.Owned), len(want.OwnedPartitions))
	}
	for i, o := range got.Owned {
		w := want.OwnedPartitions[i]
		if names.Name(o.Topic) != w.Topic || !slices.Equal(o.Partitions, w.Partitions) && (len(o.Partitions) > 0 || len(w.Partitions) > 0) {
			t.Errorf("owned[%d] = %s %v, want %s %v", i, names.Name(o.Topic), o.Partitions, w.Topic, w.Partitions)
		}
	}
	wantGen := int32(-1)
	if want.Version >= 2 {
		wantGen = want.Generation
	}
	if got.Generation != wantGen {
		t.Errorf("generation %d, want %d", got.Generation, wantGen)
	}
	wantRack := want.Version >= 3 && want.Rack != nil
	if got.HasRack != wantRack || (wantRack && got.Rack != *want.Rack) {
		t.Errorf("rack %q/%v, want %v", got.Rack, got.HasRack, want.Rack)
	}
}

func TestDecode_MatchesKmsgOnRandomSubscriptions(t *testing.T) {
	pool := []string{"orders", "payments", "a", "zz", "topic-with-a-long-name-0001", "ünïcode"}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, version := range []int16{0, 1, 2, 3, 4, 7} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			names := NewNames()
			d := NewDecoder(names)
			for range 300 {
				m := randomMetadata(rng, version, pool)
				b := m.AppendTo(nil)
				got, err := d.Decode(b)
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				checkAgainstKmsg(t, names, got, b)
			}
		})
	}
}

func TestDecode_SharedTopicListsSurviveBufferReuse(t *testing.T) {
	names := NewNames()
	d := NewDecoder(names)
	buf := make([]byte, 0, 256)
	for i, topics := range [][]string{{"a", "b"}, {"a", "c"}, {"a", "b"}, {"b", "a"}} {
		m := kmsg.NewConsumerMemberMetadata()
		m.Topics = topics
		buf = m.AppendTo(buf[:0])
		s, err := d.Decode(buf)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, id := range s.Topics {
			got = append(got, names.Name(id))
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(topics))
		if !slices.Equal(got, want) {
			t.Errorf("member %d: topics %v, want %v", i, got, want)
		}
	}
	if names.Len() != 3 {
		t.Errorf("names holds %d entries, want 3", names.Len())
	}
}

func TestDecode_RejectsMalformedInputNamingTheField(t *testing.T) {
	valid := kmsg.NewConsumerMemberMetadata()
	valid.Version = 3
	valid.Topics = []string{"t"}
	rack := "r"
	valid.Rack = &rack
	full := valid.AppendTo(nil)
	tests := []struct {
		name  string
		b     []byte
		field string
	}{
		{"empty", nil, "version"},
		{"negative version", []byte{0xFF, 0xFF, 0, 0, 0, 0}, "version"},
		{"null topic array", []byte{0, 0, 0xFF, 0xFF, 0xFF, 0xFF}, "topics"},
		{"topic count beyond the input", []byte{0, 0, 0x7F, 0, 0, 0, 0, 1, 'a'}, "topics"},
		{"null topic name", []byte{0, 0, 0, 0, 0, 1, 0xFF, 0xFF}, "topic name"},
		{"truncated topic name", []byte{0, 0, 0, 0, 0, 1, 0, 9, 'a'}, "topic name"},
		{"missing user data", []byte{0, 0, 0, 0, 0, 0}, "user data"},
		{"v3 truncated before the rack", full[:len(full)-3], "rack"},
		{"owned topic name truncated", v1Owned(0, 9, 'a', 'b', 'c', 'd'), "owned topic name"},
		{"owned topic name null", v1Owned(0xFF, 0xFF, 0, 0, 0, 0), "owned topic name"},
		{"owned partition count beyond the input", v1Owned(0, 1, 'a', 0, 0, 0, 2, 0, 0, 0, 1), "owned partitions"},
		{"owned partition array null", v1Owned(0, 1, 'a', 0xFF, 0xFF, 0xFF, 0xFF), "owned partitions"},
		{"owned entry cut before its partitions", v1Owned(0, 1, 'a', 0, 0, 0), "owned partitions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewDecoder(NewNames()).Decode(tt.b)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %q", err, tt.field)
			}
		})
	}
}

// v1Owned is a version 1 subscription to no topics, without user data,
// whose one owned entry is entry.
func v1Owned(entry ...byte) []byte {
	return append([]byte{0, 1, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 1}, entry...)
}

// TestDecode_OwnedListsCannotOverwriteEachOther guards the decoder's arena:
// owned partition lists of all members are carved from shared storage, so
// appending to one must not change another, within a member or across
// members.
func TestDecode_OwnedListsCannotOverwriteEachOther(t *testing.T) {
	d := NewDecoder(NewNames())
	var subs []Subscription
	for m := range 3 {
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Version = 1
		meta.Topics = []string{"a", "b"}
		for _, topic := range []string{"a", "b"} {
			op := kmsg.NewConsumerMemberMetadataOwnedPartition()
			op.Topic, op.Partitions = topic, []int32{int32(m), int32(m + 10)}
			meta.OwnedPartitions = append(meta.OwnedPartitions, op)
		}
		s, err := d.Decode(meta.AppendTo(nil))
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	for _, s := range subs {
		for _, o := range s.Owned {
			if cap(o.Partitions) != len(o.Partitions) {
				t.Errorf("owned list has capacity %d beyond its length %d", cap(o.Partitions), len(o.Partitions))
			}
			_ = append(o.Partitions, -7)
		}
	}
	for m, s := range subs {
		for _, o := range s.Owned {
			if want := []int32{int32(m), int32(m + 10)}; !slices.Equal(o.Partitions, want) {
				t.Errorf("member %d owns %v, want %v", m, o.Partitions, want)
			}
		}
	}
}

// FuzzDecode checks that no input panics and that whatever we accept, kmsg
// accepts with the same meaning.
func FuzzDecode(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for v := range int16(4) {
		m := randomMetadata(rng, v, []string{"a", "b", "c"})
		f.Add(m.AppendTo(nil))
	}
	f.Add([]byte{0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		names := NewNames()
		s, err := NewDecoder(names).Decode(b)
		if err != nil {
			return
		}
		checkAgainstKmsg(t, names, s, b)
	})
}

func TestAssignmentEncoder_RoundTripsThroughKmsg(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	e := NewAssignmentEncoder(names)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 500 {
		var parts []abi.TopicPartitions
		want := map[string][]int32{}
		for range rng.IntN(6) {
			topic := rng.Int32N(int32(len(names)))
			var ps []int32
			for range rng.IntN(4) {
				p := rng.Int32N(1000)
				if !slices.Contains(want[names[topic]], p) && !slices.Contains(ps, p) {
					ps = append(ps, p)
				}
			}
			want[names[topic]] = append(want[names[topic]], ps...)
			parts = append(parts, abi.TopicPartitions{Topic: topic, Partitions: ps})
		}
		before := fmt.Sprint(parts)
		var ud []byte
		if i%2 == 0 {
			ud = []byte{byte(i)}
		}
		b := e.Append(nil, parts, ud)
		if fmt.Sprint(parts) != before {
			t.Fatal("Append modified its input")
		}
		var ka kmsg.ConsumerMemberAssignment
		if err := ka.ReadFrom(b); err != nil {
			t.Fatalf("kmsg cannot read our assignment: %v", err)
		}
		ours, err := DecodeAssignment(b)
		if err != nil {
			t.Fatalf("DecodeAssignment: %v", err)
		}
		if len(ours.Topics) != len(ka.Topics) || string(ours.UserData) != string(ka.UserData) || (ud == nil) != (ka.UserData == nil) {
			t.Fatalf("DecodeAssignment disagrees with kmsg: %+v vs %+v", ours, ka)
		}
		if !slices.IsSortedFunc(ka.Topics, func(x, y kmsg.ConsumerMemberAssignmentTopic) int { return strings.Compare(x.Topic, y.Topic) }) {
			t.Errorf("topics not in table order: %+v", ka.Topics)
		}
		got := map[string][]int32{}
		for _, tp := range ka.Topics {
			if _, dup := got[tp.Topic]; dup {
				t.Errorf("topic %s written twice", tp.Topic)
			}
			if len(tp.Partitions) == 0 {
				t.Errorf("topic %s written with no partitions", tp.Topic)
			}
			if !slices.IsSorted(tp.Partitions) {
				t.Errorf("partitions of %s not ascending: %v", tp.Topic, tp.Partitions)
			}
			got[tp.Topic] = tp.Partitions
		}
		for topic, ps := range want {
			if len(ps) == 0 {
				continue
			}
			if !slices.Equal(got[topic], slices.Sorted(slices.Values(ps))) {
				t.Errorf("topic %s: got %v, want %v", topic, got[topic], ps)
			}
		}
	}
}

func FuzzDecodeAssignment(f *testing.F) {
	e := NewAssignmentEncoder([]string{"a", "b"})
	f.Add(e.Append(nil, []abi.TopicPartitions{{Topic: 1, Partitions: []int32{3, 1}}}, []byte("u")))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF})
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeAssignment(b)
		if err != nil {
			return
		}
		var ka kmsg.ConsumerMemberAssignment
		if err := ka.ReadFrom(b); err != nil {
			t.Fatalf("kmsg rejects what we accepted: %v", err)
		}
		if len(ka.Topics) != len(a.Topics) {
			t.Fatalf("%d topics, kmsg reads %d", len(a.Topics), len(ka.Topics))
		}
	})
}

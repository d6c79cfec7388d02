package cluster

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/wasmassign/wasmassign/coordinator"
)

func sampleState(group string) *coordinator.GroupState {
	return &coordinator.GroupState{
		Group: group, State: "Stable", Generation: 7, ProtocolType: "consumer", Protocol: "cooperative-sticky",
		ServerSide: true, FollowUp: true, Fingerprint: 42,
		Members: []coordinator.MemberState{{
			MemberID: "m-1", InstanceID: "i-1", ClientID: "c", ClientHost: "/10.0.0.1",
			SessionTimeout: 10 * time.Second, RebalanceTimeout: time.Minute, ProtocolType: "consumer",
			Protocols:  []coordinator.ProtocolState{{Name: "cooperative-sticky", Metadata: []byte{0, 3, 0, 0}}},
			Assignment: []byte{0, 1}, Assigned: map[string][]int32{"t": {0, 2}},
			Held: map[string][]int32{"t": {0, 1, 2}}, HeldGeneration: 6, Synced: true,
		}},
	}
}

func sampleRecords() []Record {
	w := Writer{ID: "gw-1", Incarnation: 9, Generation: 3}
	return []Record{
		{Kind: KindState, Group: "orders", State: sampleState("orders"), Writer: w},
		{Kind: KindState, Group: "orders"}, // a tombstone
		{Kind: KindClaim, Writer: w},
		{Kind: KindRelease, Writer: w},
		{Kind: KindLayout, Layout: Layout{Partitions: 16, Hash: HashName}},
	}
}

// TestRecord_RoundTripsEveryKind: what Encode writes, Decode reads back
// the same, under a key of its kind, in format FormatVersion.
func TestRecord_RoundTripsEveryKind(t *testing.T) {
	for _, r := range sampleRecords() {
		key, value, err := Encode(r)
		if err != nil {
			t.Fatalf("%v: %v", r.Kind, err)
		}
		if r.Kind == KindState && !bytes.Equal(key, append([]byte{keyGroup}, r.Group...)) {
			t.Errorf("%v: key %q", r.Kind, key)
		}
		if r.State == nil && r.Kind == KindState {
			if value != nil {
				t.Errorf("a tombstone's value is %q, want nil", value)
			}
		} else if want := []byte{'W', 'A', FormatVersion, byte(r.Kind)}; !bytes.HasPrefix(value, want) {
			t.Errorf("%v: value begins %q, want %q", r.Kind, value[:min(len(value), 4)], want)
		}
		got, err := Decode(key, value)
		if err != nil {
			t.Fatalf("%v: decode: %v", r.Kind, err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("%v: decoded\n%+v\nwant\n%+v", r.Kind, got, r)
		}
	}
	if _, _, err := Encode(Record{Kind: KindState, Group: "a", State: sampleState("b")}); err == nil {
		t.Error("a state record of one group under another's key was encoded")
	}
	if _, _, err := Encode(Record{Kind: 9}); err == nil {
		t.Error("a record of an unknown kind was encoded")
	}
}

// TestRecord_BadRecordsNameTheirCause: every way a record can be wrong is
// refused as corrupt with its reason, and a newer format as such, never
// read as something else.
func TestRecord_BadRecordsNameTheirCause(t *testing.T) {
	stateKey, stateValue, _ := Encode(sampleRecords()[0])
	claimKey, claimValue, _ := Encode(sampleRecords()[2])
	layoutKey, _, _ := Encode(sampleRecords()[4])
	value := func(kind Kind, body string) []byte {
		return append([]byte{'W', 'A', FormatVersion, byte(kind)}, body...)
	}
	for _, tc := range []struct {
		name       string
		key, value []byte
		reason     string // "" for a newer format
	}{
		{"no key", nil, stateValue, "key"},
		{"no magic", stateKey, []byte("{}"), "magic"},
		{"a short value", stateKey, []byte("WA"), "magic"},
		{"format 0", stateKey, []byte{'W', 'A', 0, 1, '{', '}'}, "magic"},
		{"a newer format", stateKey, []byte{'W', 'A', FormatVersion + 1, 1, 0xff}, ""},
		{"a newer format of an unknown kind", claimKey, []byte{'W', 'A', 200, 77}, ""},
		{"an unknown kind", stateKey, value(77, "{}"), "kind"},
		{"a state under the control key", claimKey, stateValue, "key"},
		{"a claim under a group's key", stateKey, claimValue, "key"},
		{"a layout under a group's key", stateKey, value(KindLayout, `{"partitions":16,"hash":"fnv1a64"}`), "key"},
		{"a tombstone of the control key", claimKey, nil, "magic"},
		{"not JSON", stateKey, value(KindState, "{"), "payload"},
		{"a field this format lacks", claimKey, value(KindClaim, `{"writer":{"id":"a"},"lease":5}`), "payload"},
		{"data after the payload", claimKey, value(KindClaim, `{"writer":{}} {}`), "payload"},
		{"another group's state", append([]byte{keyGroup}, "payments"...), stateValue, "payload"},
		{"a layout of no partitions", layoutKey, value(KindLayout, `{"partitions":0,"hash":"fnv1a64"}`), "payload"},
		{"a layout without its hash", layoutKey, value(KindLayout, `{"partitions":16}`), "payload"},
	} {
		_, err := Decode(tc.key, tc.value)
		var ce *CorruptError
		var ne *NewerFormatError
		switch {
		case tc.reason == "":
			if !errors.As(err, &ne) {
				t.Errorf("%s: %v, want a newer format", tc.name, err)
			}
		case !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt):
			t.Errorf("%s: %v, want corrupt (%s)", tc.name, err, tc.reason)
		case ce.Reason != tc.reason:
			t.Errorf("%s: corrupt for %q (%v), want %q", tc.name, ce.Reason, err, tc.reason)
		}
	}
}

// FuzzDecode: no bytes crash the loader, and whatever decodes is encoded
// back to what decodes the same, so a record is never half understood.
func FuzzDecode(f *testing.F) {
	for _, r := range sampleRecords() {
		key, value, err := Encode(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(key, value)
	}
	f.Add([]byte{keyControl}, []byte{'W', 'A', 1, 2, '{', '}'})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		r, err := Decode(key, value)
		if err != nil {
			var ce *CorruptError
			var ne *NewerFormatError
			if !errors.As(err, &ce) && !errors.As(err, &ne) {
				t.Fatalf("an error neither corrupt nor newer: %v", err)
			}
			return
		}
		k2, v2, err := Encode(r)
		if err != nil {
			t.Fatalf("decoded %+v, which does not encode: %v", r, err)
		}
		again, err := Decode(k2, v2)
		if err != nil {
			t.Fatalf("re-encoded %+v does not decode: %v", r, err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("decoded %+v, then %+v", r, again)
		}
	})
}

package kfakegroup

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func tp(p int32) TopicPartition     { return TopicPartition{"t", p} }
func rid(p int32, o int64) RecordID { return RecordID{"t", p, o} }

func TestDeliveryChecksReportMissingDuplicateAndUnknownRecords(t *testing.T) {
	type consume struct {
		member string
		id     RecordID
	}
	tests := []struct {
		name        string
		produced    []RecordID
		consumed    []consume
		wantOnce    string // substring of AllConsumedOnce's error; "" means nil
		wantAtLeast string
	}{
		{
			name:     "each record consumed once",
			produced: []RecordID{rid(0, 0), rid(0, 1), rid(1, 0)},
			consumed: []consume{{"a", rid(0, 0)}, {"a", rid(0, 1)}, {"b", rid(1, 0)}},
		},
		{
			name:        "a record never consumed",
			produced:    []RecordID{rid(0, 0), rid(0, 1)},
			consumed:    []consume{{"a", rid(0, 0)}},
			wantOnce:    "1 of 2 produced records never consumed: t/0@1",
			wantAtLeast: "never consumed",
		},
		{
			name:     "a record consumed by two members",
			produced: []RecordID{rid(0, 0)},
			consumed: []consume{{"a", rid(0, 0)}, {"b", rid(0, 0)}},
			wantOnce: "t/0@0 by [a b]",
		},
		{
			name:        "a record consumed that was never produced",
			produced:    []RecordID{rid(0, 0)},
			consumed:    []consume{{"a", rid(0, 0)}, {"a", rid(0, 7)}},
			wantOnce:    "never produced: t/0@7",
			wantAtLeast: "never produced: t/0@7",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLedger()
			for _, id := range tt.produced {
				l.AddProduced(id)
			}
			for _, c := range tt.consumed {
				l.AddConsumed(c.member, c.id)
			}
			checkErr(t, "AllConsumedOnce", AllConsumedOnce(l), tt.wantOnce)
			checkErr(t, "AllConsumedAtLeastOnce", AllConsumedAtLeastOnce(l), tt.wantAtLeast)
		})
	}
}

func TestNoRevocationOfLooksOnlyAtRevokesAndLossesAfterTheMark(t *testing.T) {
	tests := []struct {
		name   string
		events []Event // the mark is taken after the first event
		watch  []TopicPartition
		want   string
	}{
		{"revoke before the mark", []Event{{Member: "a", Kind: Revoked, Partitions: []TopicPartition{tp(0)}}}, []TopicPartition{tp(0)}, ""},
		{"assignment after the mark", []Event{{}, {Member: "a", Kind: Assigned, Partitions: []TopicPartition{tp(0)}}}, []TopicPartition{tp(0)}, ""},
		{"revoke of another partition", []Event{{}, {Member: "a", Kind: Revoked, Partitions: []TopicPartition{tp(1)}}}, []TopicPartition{tp(0)}, ""},
		{"revoke after the mark", []Event{{}, {Member: "a", Generation: 3, Kind: Revoked, Partitions: []TopicPartition{tp(1), tp(0)}}}, []TopicPartition{tp(0)}, "t/0 revoked from a (gen 3)"},
		{"loss after the mark", []Event{{}, {Member: "b", Kind: Lost, Partitions: []TopicPartition{tp(2)}}}, []TopicPartition{tp(0), tp(2)}, "t/2 lost from b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLedger()
			l.AddEvent(tt.events[0])
			mark := l.Mark()
			for _, e := range tt.events[1:] {
				l.AddEvent(e)
			}
			checkErr(t, "NoRevocationOf", NoRevocationOf(l, mark, tt.watch), tt.want)
		})
	}
}

func TestOwnedFollowsEachMembersCallbacks(t *testing.T) {
	l := NewLedger()
	l.AddEvent(Event{Member: "a", Kind: Assigned, Partitions: []TopicPartition{tp(2), tp(0), tp(1)}})
	l.AddEvent(Event{Member: "b", Kind: Assigned, Partitions: []TopicPartition{tp(3)}})
	l.AddEvent(Event{Member: "a", Kind: Revoked, Partitions: []TopicPartition{tp(2)}})
	l.AddEvent(Event{Member: "b", Kind: Assigned, Partitions: []TopicPartition{tp(2)}})
	l.AddEvent(Event{Member: "c", Kind: Assigned, Partitions: []TopicPartition{tp(4)}})
	l.AddEvent(Event{Member: "c", Kind: Lost, Partitions: []TopicPartition{tp(4)}})
	got := fmt.Sprint(l.Owned())
	if want := "map[a:[t/0 t/1] b:[t/2 t/3]]"; got != want {
		t.Errorf("Owned() = %s, want %s", got, want)
	}
	if events := l.Events(4); len(events) != 2 || events[0].Seq != 5 {
		t.Errorf("Events(4) = %+v, want events 5 and 6", events)
	}
}

func TestOwnershipChecks(t *testing.T) {
	owned := map[string][]TopicPartition{"a": {tp(0), tp(1)}, "b": {tp(2)}}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"disjoint owners", NoSharedOwnership(owned), ""},
		{"shared partition", NoSharedOwnership(map[string][]TopicPartition{"a": {tp(0)}, "b": {tp(0)}}), "t/0 held by a and b"},
		{"exact cover", Covers(owned, map[string]int32{"t": 3}), ""},
		{"unowned partition", Covers(owned, map[string]int32{"t": 4}), "unowned [t/3]"},
		{"unexpected partition", Covers(owned, map[string]int32{"t": 2}), "unexpected [t/2]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkErr(t, tt.name, tt.err, tt.want) })
	}

	after := map[string][]TopicPartition{"a": {tp(1)}, "b": {tp(0), tp(2)}, "c": {tp(3)}}
	if got, want := Unmoved(owned, after), []TopicPartition{tp(1), tp(2)}; !slices.Equal(got, want) {
		t.Errorf("Unmoved = %v, want %v", got, want)
	}
}

func checkErr(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: unexpected error %v", what, err)
	case want != "" && err == nil:
		t.Errorf("%s: no error, want one containing %q", what, want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Errorf("%s: error %q does not contain %q", what, err, want)
	}
}

func TestNeverSharedFollowsTheTimeline(t *testing.T) {
	handover := NewLedger() // a revokes before b is assigned
	handover.AddEvent(Event{Member: "a", Kind: Assigned, Partitions: []TopicPartition{tp(0), tp(1)}})
	handover.AddEvent(Event{Member: "a", Kind: Revoked, Partitions: []TopicPartition{tp(1)}})
	handover.AddEvent(Event{Member: "b", Kind: Assigned, Partitions: []TopicPartition{tp(1)}})
	handover.AddEvent(Event{Member: "b", Kind: Lost, Partitions: []TopicPartition{tp(1)}})
	handover.AddEvent(Event{Member: "a", Kind: Assigned, Partitions: []TopicPartition{tp(1)}})
	checkErr(t, "a hand-over in order", NeverShared(handover), "")

	overlap := NewLedger() // b is assigned t/1 before a revokes it; the end looks fine
	overlap.AddEvent(Event{Member: "a", Kind: Assigned, Partitions: []TopicPartition{tp(0), tp(1)}})
	overlap.AddEvent(Event{Member: "b", Kind: Assigned, Partitions: []TopicPartition{tp(1)}})
	overlap.AddEvent(Event{Member: "a", Kind: Revoked, Partitions: []TopicPartition{tp(1)}})
	checkErr(t, "the end of an overlap", NoSharedOwnership(overlap.Owned()), "")
	checkErr(t, "an overlap", NeverShared(overlap), "event 2 at 00:00:00.000: b was assigned t/1 while a still held it")
}

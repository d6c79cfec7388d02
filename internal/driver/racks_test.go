package driver

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestRackBook_RecordsNewsAndTheLatestRack(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	book := newRackBook(func() time.Time { return now })
	later := func() { now = now.Add(fetchRacksConflict + time.Second) } // a move, not two consumers
	news := []bool{
		book.record("app", "/10.1.2.3", "az-b"),
		book.record("app", "/10.1.2.3", "az-b"),
		book.record("other", "/10.1.2.3", ""),
	}
	later()
	news = append(news,
		book.record("app", "/10.1.2.3", "az-c"),
		book.record("app", "/10.1.2.9", "az-c"), // the same id on another host is another client
	)
	if !slices.Equal(news, []bool{true, false, false, true, true}) {
		t.Errorf("record reported news %v, want only first and changed racks", news)
	}
	if r, ok := book.lookup("app", "/10.1.2.3"); !ok || r != "az-c" {
		t.Errorf("rack %q %v after a change, want az-c", r, ok)
	}
	later()
	book.record("app", "/10.1.2.3", "az-b")
	if r, ok := book.lookup("app", "/10.1.2.3"); !ok || r != "az-b" {
		t.Errorf("rack %q %v", r, ok)
	}
	if _, ok := book.lookup("other", "/10.1.2.3"); ok {
		t.Error("an empty fetch rack was recorded")
	}
}

// TestRackBook_ForgetsIdleClientsOnlyWhenLarge keeps a small book whole
// however old it is, and drops from a large one only the clients neither
// recorded nor looked up for fetchRacksIdle.
func TestRackBook_ForgetsIdleClientsOnlyWhenLarge(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	book := newRackBook(func() time.Time { return now })
	const host = "/10.1.2.3"
	book.record("old", host, "az-a")
	book.record("looked-up", host, "az-b")
	now = now.Add(2 * fetchRacksIdle)
	book.record("fresh", host, "az-b")
	if _, ok := book.lookup("looked-up", host); !ok {
		t.Fatal("a small book forgot an idle client")
	}
	now = now.Add(fetchRacksIdle / 2)
	for i := len(book.racks); i < fetchRacksPruneAt; i++ {
		book.record(fmt.Sprintf("filler-%d", i), host, "az-c")
	}
	book.record("newcomer", host, "az-d")
	if _, ok := book.lookup("old", host); ok {
		t.Error("a full book kept a client neither recorded nor looked up for 2.5 idle periods")
	}
	for _, id := range []string{"looked-up", "fresh", "filler-5", "newcomer"} {
		if _, ok := book.lookup(id, host); !ok {
			t.Errorf("a full book forgot %s, heard from within the idle period", id)
		}
	}
}

// TestRackBook_TwoRacksForOneClientAnswerNoLookup: two consumers behind one
// client id and host sending az1 and az2 make the key ambiguous, so a new
// member's JoinGroup gets neither; a client that moved racks for good is
// believed once the conflict window has passed.
func TestRackBook_TwoRacksForOneClientAnswerNoLookup(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	book := newRackBook(func() time.Time { return now })
	const host = "/10.1.2.3"
	book.record("rdkafka", host, "az1")
	if r, ok := book.lookup("rdkafka", host); !ok || r != "az1" {
		t.Fatalf("one rack: %q %v", r, ok)
	}
	book.record("rdkafka", host, "az2")
	if r, ok := book.lookup("rdkafka", host); ok {
		t.Fatalf("two racks for one client id and host: lookup gave %q", r)
	}
	now = now.Add(fetchRacksConflict + time.Second)
	book.record("rdkafka", host, "az2")
	if r, ok := book.lookup("rdkafka", host); !ok || r != "az2" {
		t.Errorf("after the conflict window, one rack again: %q %v, want az2", r, ok)
	}
}

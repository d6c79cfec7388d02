package kfakegroup

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String formats tp as topic/partition.
func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// RecordID names one record by its position in the log.
type RecordID struct {
	Topic     string
	Partition int32
	Offset    int64
}

// EventKind says what happened to a member's partitions.
type EventKind int

// The kinds of partition events, one per kgo callback.
const (
	Assigned EventKind = iota + 1 // OnPartitionsAssigned
	Revoked                       // OnPartitionsRevoked
	Lost                          // OnPartitionsLost
)

// String names the kind as the kgo callback does.
func (k EventKind) String() string {
	switch k {
	case Assigned:
		return "assigned"
	case Revoked:
		return "revoked"
	case Lost:
		return "lost"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one kgo partition callback, as one member saw it.
type Event struct {
	Seq        int       // position in the ledger, from 1
	At         time.Time // when the callback ran
	Member     string    // the rig's name for the consumer
	MemberID   string    // the group member id at the time
	Generation int32     // the generation at the time
	Kind       EventKind
	Partitions []TopicPartition // sorted
}

// Ledger records, across all consumers of a rig, which records were produced
// and consumed and every partition callback, so tests can check delivery
// and ownership invariants afterwards or while waiting.
type Ledger struct {
	mu       sync.Mutex
	produced map[RecordID]struct{}
	consumed map[RecordID][]string // consuming members, in order
	events   []Event
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{
		produced: make(map[RecordID]struct{}),
		consumed: make(map[RecordID][]string),
	}
}

// AddProduced records that a record was acknowledged by the cluster.
func (l *Ledger) AddProduced(id RecordID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.produced[id] = struct{}{}
}

// AddConsumed records that member received the record.
func (l *Ledger) AddConsumed(member string, id RecordID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.consumed[id] = append(l.consumed[id], member)
}

// AddEvent appends a partition event and returns its sequence number.
func (l *Ledger) AddEvent(e Event) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.Seq = len(l.events) + 1
	slices.SortFunc(e.Partitions, compareTP)
	l.events = append(l.events, e)
	return e.Seq
}

// Mark returns the sequence number of the latest event, so that checks can
// look only at what happens after it.
func (l *Ledger) Mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// Events returns a copy of the events after sequence number since.
func (l *Ledger) Events(since int) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	since = min(max(since, 0), len(l.events))
	return slices.Clone(l.events[since:])
}

// Counts returns how many distinct records were produced and consumed.
func (l *Ledger) Counts() (produced, consumed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.produced), len(l.consumed)
}

// Owned returns, per member, the partitions the member holds according to
// its own callbacks: assigned and not since revoked or lost. Members that
// hold nothing are left out.
func (l *Ledger) Owned() map[string][]TopicPartition {
	l.mu.Lock()
	defer l.mu.Unlock()
	held := make(map[string]map[TopicPartition]bool)
	for _, e := range l.events {
		h := held[e.Member]
		if h == nil {
			h = make(map[TopicPartition]bool)
			held[e.Member] = h
		}
		for _, tp := range e.Partitions {
			if e.Kind == Assigned {
				h[tp] = true
			} else {
				delete(h, tp)
			}
		}
	}
	out := make(map[string][]TopicPartition)
	for m, h := range held {
		if len(h) > 0 {
			out[m] = slices.SortedFunc(maps.Keys(h), compareTP)
		}
	}
	return out
}

// AllConsumedOnce checks that every produced record was consumed exactly
// once and that nothing unproduced was consumed.
func AllConsumedOnce(l *Ledger) error { return l.checkDelivery(true) }

// AllConsumedAtLeastOnce checks that every produced record was consumed at
// least once and that nothing unproduced was consumed. Use it where the
// protocol allows redelivery, such as after a member crash.
func AllConsumedAtLeastOnce(l *Ledger) error { return l.checkDelivery(false) }

func (l *Ledger) checkDelivery(once bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var missing, twice, unknown []string
	for id := range l.produced {
		ms := l.consumed[id]
		switch {
		case len(ms) == 0:
			missing = append(missing, fmtID(id))
		case once && len(ms) > 1:
			twice = append(twice, fmt.Sprintf("%s by %v", fmtID(id), ms))
		}
	}
	for id := range l.consumed {
		if _, ok := l.produced[id]; !ok {
			unknown = append(unknown, fmtID(id))
		}
	}
	var errs []error
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("%d of %d produced records never consumed: %s", len(missing), len(l.produced), sample(missing)))
	}
	if len(twice) > 0 {
		errs = append(errs, fmt.Errorf("%d records consumed more than once: %s", len(twice), sample(twice)))
	}
	if len(unknown) > 0 {
		errs = append(errs, fmt.Errorf("%d consumed records were never produced: %s", len(unknown), sample(unknown)))
	}
	return errors.Join(errs...)
}

// NoRevocationOf checks that no member had any of tps revoked or lost after
// event sequence number since. In a cooperative rebalance, partitions that
// stay with their owner must never be revoked.
func NoRevocationOf(l *Ledger, since int, tps []TopicPartition) error {
	watch := make(map[TopicPartition]bool, len(tps))
	for _, tp := range tps {
		watch[tp] = true
	}
	var bad []string
	for _, e := range l.Events(since) {
		if e.Kind == Assigned {
			continue
		}
		for _, tp := range e.Partitions {
			if watch[tp] {
				bad = append(bad, fmt.Sprintf("%s %s from %s (gen %d)", tp, e.Kind, e.Member, e.Generation))
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("partitions that should not move were taken away: %s", sample(bad))
	}
	return nil
}

// Unmoved returns the partitions that the same member holds in both
// snapshots of Ledger.Owned, sorted.
func Unmoved(before, after map[string][]TopicPartition) []TopicPartition {
	var out []TopicPartition
	for m, tps := range before {
		for _, tp := range tps {
			if slices.Contains(after[m], tp) {
				out = append(out, tp)
			}
		}
	}
	slices.SortFunc(out, compareTP)
	return out
}

// NoSharedOwnership checks that no partition appears under two members of
// an Owned snapshot.
func NoSharedOwnership(owned map[string][]TopicPartition) error {
	owner := make(map[TopicPartition]string)
	var bad []string
	for _, m := range slices.Sorted(maps.Keys(owned)) {
		for _, tp := range owned[m] {
			if o, ok := owner[tp]; ok {
				bad = append(bad, fmt.Sprintf("%s held by %s and %s", tp, o, m))
				continue
			}
			owner[tp] = m
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("partitions with two owners: %s", sample(bad))
	}
	return nil
}

// Covers checks that the members of an Owned snapshot together hold exactly
// the partitions 0..n-1 of each topic in partitions.
func Covers(owned map[string][]TopicPartition, partitions map[string]int32) error {
	want := make(map[TopicPartition]bool)
	for t, n := range partitions {
		for p := range n {
			want[TopicPartition{t, p}] = true
		}
	}
	got := make(map[TopicPartition]bool)
	var extra []string
	for _, tps := range owned {
		for _, tp := range tps {
			got[tp] = true
			if !want[tp] {
				extra = append(extra, tp.String())
			}
		}
	}
	var missing []string
	for tp := range want {
		if !got[tp] {
			missing = append(missing, tp.String())
		}
	}
	if len(missing)+len(extra) > 0 {
		slices.Sort(missing)
		slices.Sort(extra)
		return fmt.Errorf("assignment does not cover the topics: unowned %v, unexpected %v", missing, extra)
	}
	return nil
}

func compareTP(a, b TopicPartition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

func fmtID(id RecordID) string { return fmt.Sprintf("%s/%d@%d", id.Topic, id.Partition, id.Offset) }

// sample keeps error messages short when thousands of records go wrong.
func sample(items []string) string {
	slices.Sort(items)
	const keep = 10
	if len(items) > keep {
		return strings.Join(items[:keep], ", ") + fmt.Sprintf(", ... (%d more)", len(items)-keep)
	}
	return strings.Join(items, ", ")
}

// NeverShared checks the partition callbacks' timeline, event by event:
// no partition was ever held by two members at once (assigned to one
// before the other's revoke or loss of it ran). Owned and
// NoSharedOwnership check only the end.
func NeverShared(l *Ledger) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	holder := make(map[TopicPartition]string)
	for _, e := range l.events {
		for _, tp := range e.Partitions {
			switch {
			case e.Kind != Assigned:
				if holder[tp] == e.Member {
					delete(holder, tp)
				}
			case holder[tp] != "" && holder[tp] != e.Member:
				return fmt.Errorf("event %d at %s: %s was assigned %s while %s still held it",
					e.Seq, e.At.Format("15:04:05.000"), e.Member, tp, holder[tp])
			default:
				holder[tp] = e.Member
			}
		}
	}
	return nil
}

// Package consumerproto reads and writes the bytes of Kafka's classic
// consumer protocol that travel inside JoinGroup and SyncGroup: a member's
// subscription (ConsumerProtocolSubscription, versions 0 to 3, the JoinGroup
// protocol metadata) and a member's assignment (ConsumerProtocolAssignment,
// the SyncGroup member assignment).
//
// Whoever assigns on the server side decodes every member's subscription on
// every rebalance. In a group of 2,000 members subscribed to 500 topics that
// is a million topic names, and decoding each into its own string costs more
// than the assignment itself. So decoding here interns topic names in a
// [Names] table: a name seen before costs a byte comparison, and a topic list
// that repeats an earlier member's list byte for byte is shared, not decoded
// again.
//
// The package knows nothing of groups, plugins or sockets. It must never
// import the runtime, coordinator or proxy packages.
package consumerproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
)

// ErrMalformed is the error, wrapped with what was being read, for bytes that
// are not a valid subscription or assignment. A broker answers such a
// JoinGroup with INCONSISTENT_GROUP_PROTOCOL.
var ErrMalformed = errors.New("malformed consumer protocol bytes")

// Names interns topic names. Each distinct name gets a dense id, counting
// from zero in the order names are first seen, and keeps it for the life of
// the table. A Names is not safe for concurrent use.
type Names struct {
	ids   map[string]int32
	names []string
}

// NewNames returns an empty table.
func NewNames() *Names { return &Names{ids: make(map[string]int32)} }

// ID returns the id of name, adding it when it is new.
func (n *Names) ID(name string) int32 {
	if id, ok := n.ids[name]; ok {
		return id
	}
	return n.add(name)
}

// lookup is ID for a name still in a byte slice: the map lookup with a
// converted key does not allocate, so only a new name costs a string.
func (n *Names) lookup(b []byte) int32 {
	if id, ok := n.ids[string(b)]; ok {
		return id
	}
	return n.add(string(b))
}

func (n *Names) add(name string) int32 {
	id := int32(len(n.names))
	n.ids[name] = id
	n.names = append(n.names, name)
	return id
}

// Name returns the name with the given id. It panics on an id the table
// never gave out.
func (n *Names) Name(id int32) string { return n.names[id] }

// Len returns how many names the table holds.
func (n *Names) Len() int { return len(n.names) }

// Lookup returns the id of name without adding it.
func (n *Names) Lookup(name string) (int32, bool) {
	id, ok := n.ids[name]
	return id, ok
}

// Subscription is one member's decoded ConsumerProtocolSubscription. Topic
// ids refer to the [Names] table of the [Decoder] that produced it.
type Subscription struct {
	// Version is the version the client wrote. Versions above 3 are read as
	// version 3, as Kafka reads them; later fields are ignored.
	Version int16
	// Topics are the subscribed topics' ids, ascending and without
	// duplicates. Subscriptions with equal topic lists may share this slice,
	// so it must not be modified.
	Topics []int32
	// UserData is the assignor-specific user data, nil when absent. It
	// aliases the decoded bytes.
	UserData []byte
	// Owned is what the member reports owning (version 1 and up), in the
	// order the client wrote it. A topic may appear more than once.
	Owned []Owned
	// OwnedRuns is Owned read as runs of entries with equal partitions,
	// in the same order, set by DecodeRuns instead of Owned.
	OwnedRuns []OwnedRun
	// Generation is the generation the member held Owned in (version 2 and
	// up), -1 when the client did not say.
	Generation int32
	// Rack is the client's rack (version 3 and up, KIP-881). HasRack is
	// false when the client sent none.
	Rack    string
	HasRack bool
}

// Owned is a run of owned partitions of one topic.
type Owned struct {
	Topic      int32 // id in the decoder's Names
	Partitions []int32
}

// Decoder decodes subscriptions against one [Names] table. It remembers the
// topic lists it has seen, so a group whose members subscribe alike decodes
// each distinct list once. A Decoder is not safe for concurrent use.
type Decoder struct {
	names *Names
	seed  maphash.Seed
	// lists maps the hash of a topic array's raw bytes to the decoded
	// lists with that hash; raw holds the bytes each was decoded from.
	lists map[uint64][]decodedList
	// last is the list decoded or found most recently. Members of a group
	// mostly subscribe alike, so the next member's array usually starts
	// with the same bytes; an array's extent follows from its bytes, so a
	// match needs neither the walk nor the hash.
	last *decodedList
	// next[k] is the id that followed id k the last time a run of owned
	// topics was decoded: clients write owned partitions topic by topic in
	// a stable order, so guessing it first mostly avoids the map.
	next []int32
	// arena is where owned partition lists are carved from: a member of a
	// large group owns one partition of each of hundreds of topics, and an
	// allocation per list would cost more than the rest of decoding.
	arena []int32
	// runIDs is DecodeRuns' scratch for the topic ids of a run; lastRuns
	// are the previous subscription's runs, whose topic ids the next
	// subscription shares where they are equal.
	runIDs   []int32
	lastRuns []OwnedRun
}

type decodedList struct {
	raw []byte
	ids []int32
}

// NewDecoder returns a Decoder that interns names into names.
func NewDecoder(names *Names) *Decoder {
	return &Decoder{names: names, seed: maphash.MakeSeed(), lists: make(map[uint64][]decodedList)}
}

// Names returns the table the decoder interns into.
func (d *Decoder) Names() *Names { return d.names }

// Decode decodes one member's protocol metadata. The result aliases b for
// UserData; the owned Partitions are fresh copies, carved from storage the
// decoder shares between the lists it decodes (each list's capacity ends at
// its length, so appending to one never writes into another). b must not
// change while the result is in use.
func (d *Decoder) Decode(b []byte) (Subscription, error) { return d.decode(b, false) }

// decode reads one member's protocol metadata, its owned partitions as
// lists (Owned) or, with runs, as runs (OwnedRuns).
func (d *Decoder) decode(b []byte, runs bool) (Subscription, error) {
	r := reader{b: b}
	s := Subscription{Generation: -1}
	s.Version = r.int16("version")
	if r.err == nil && s.Version < 0 {
		r.fail("version", errNegativeVersion(s.Version))
	}
	s.Topics = d.topicList(&r)
	s.UserData = r.nullableBytes("user data")
	if s.Version >= 1 {
		if runs {
			s.OwnedRuns = d.ownedRuns(&r)
		} else {
			s.Owned = d.owned(&r)
		}
	}
	if s.Version >= 2 {
		s.Generation = r.int32("generation")
	}
	if s.Version >= 3 {
		s.Rack, s.HasRack = r.nullableString("rack")
	}
	if r.err != nil {
		return Subscription{}, r.err
	}
	return s, nil
}

// topicList reads the subscribed topic array. The raw bytes of the array
// are hashed first: a list seen before is returned shared.
func (d *Decoder) topicList(r *reader) []int32 {
	start := r.off
	if l := d.last; l != nil && bytes.HasPrefix(r.b[start:], l.raw) {
		r.off += len(l.raw)
		return l.ids
	}
	n := r.arrayLen("topics", 2)
	if r.err != nil {
		return nil
	}
	// Walk the array once to find its end, so its raw bytes can be looked
	// up before any name is decoded. This loop runs once per subscribed
	// topic per member, so it is kept free of the reader's bookkeeping.
	end := r.off
	for range n {
		if len(r.b)-end < 2 {
			end = -1
			break
		}
		l := int(int16(binary.BigEndian.Uint16(r.b[end:])))
		end += 2 + l
		if l < 0 || end > len(r.b) {
			end = -1
			break
		}
	}
	if end < 0 {
		// Let the careful reader find and name the problem.
		for range n {
			r.stringBytes("topic name")
		}
		// Both walks apply the same rules, so the reader has failed; this
		// guards the decoder against ever accepting what the walk refused.
		r.fail("topics", errShort)
		return nil
	}
	r.off = end
	raw := r.b[start:r.off]
	h := maphash.Bytes(d.seed, raw)
	for i, l := range d.lists[h] {
		if string(l.raw) == string(raw) {
			d.last = &d.lists[h][i]
			return l.ids
		}
	}
	ids := make([]int32, 0, n)
	rr := reader{b: raw, off: 4}
	for range n {
		ids = append(ids, d.names.lookup(rr.stringBytes("topic name")))
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	// Keep a copy: the caller may reuse its buffer for the next member.
	d.lists[h] = append(d.lists[h], decodedList{raw: slices.Clone(raw), ids: ids})
	d.last = &d.lists[h][len(d.lists[h])-1]
	return ids
}

// owned reads the owned-partitions array. Every entry is a topic name and a
// partition list; an entry whose lengths are in bounds is read inline, the
// rest by the careful reader, which names what is wrong.
func (d *Decoder) owned(r *reader) []Owned {
	n := r.arrayLen("owned partitions", 6)
	if r.err != nil || n == 0 {
		return nil
	}
	out := make([]Owned, n)
	prev := int32(-1)
	for i := range out {
		var ps []int32
		name, raw, ok := inlineEntry(r)
		switch {
		case !ok:
			name = r.stringBytes("owned topic name")
			ps = r.int32s("owned partitions")
			if r.err != nil {
				return nil
			}
		case len(raw) == 4 && len(d.arena) > 0:
			// The usual entry of a large group, without a call.
			ps, d.arena = d.arena[:1:1], d.arena[1:]
			ps[0] = int32(binary.BigEndian.Uint32(raw))
		default:
			ps = d.partitions(raw)
		}
		prev = d.topicAfter(prev, name)
		out[i] = Owned{Topic: prev, Partitions: ps}
	}
	return out
}

// OwnedRun is a run of consecutive owned entries of a subscription that
// list equal partitions, one entry per topic of Topics. Kafka's round robin
// gives each member of a large group one partition of each of hundreds of
// topics, the same partition id in every topic when the topics are equally
// large: such a member's hundreds of entries are one run.
type OwnedRun struct {
	// Topics are the entries' topic ids, in the order the client wrote
	// them. Runs of different subscriptions that name the same ids in the
	// same order share one slice, so it must not be modified.
	Topics []int32
	// Partitions are the partitions every entry of the run lists.
	Partitions []int32
}

// DecodeRuns is Decode with the owned partitions read as runs: the result
// has OwnedRuns instead of Owned. It allocates nothing per owned entry that
// continues a run, and shares the topic ids of a run with the previous
// subscription's run in the same position when they are equal.
func (d *Decoder) DecodeRuns(b []byte) (Subscription, error) { return d.decode(b, true) }

// ownedRuns reads the owned-partitions array as runs. Entries are read as
// owned reads them; an entry whose partitions equal those of the run in
// progress only adds its topic id to the run.
func (d *Decoder) ownedRuns(r *reader) []OwnedRun {
	n := r.arrayLen("owned partitions", 6)
	if r.err != nil || n == 0 {
		return nil
	}
	var runs []OwnedRun
	ids := d.runIDs[:0]
	var cur []int32 // the partitions of the run in progress
	prev := int32(-1)
	flush := func() {
		if len(ids) > 0 {
			runs = append(runs, OwnedRun{Topics: d.sharedRun(len(runs), ids), Partitions: cur})
		}
		ids = ids[:0]
	}
	for range n {
		same := false
		var ps []int32
		name, raw, ok := inlineEntry(r)
		if ok {
			c := len(raw) / 4
			if len(ids) > 0 && c == len(cur) && (c != 1 || int32(binary.BigEndian.Uint32(raw)) == cur[0]) && (c == 1 || equalBE(raw, cur)) {
				same = true
			} else {
				ps = d.partitions(raw)
			}
		} else {
			name = r.stringBytes("owned topic name")
			ps = r.int32s("owned partitions")
			if r.err != nil {
				return nil
			}
		}
		prev = d.topicAfter(prev, name)
		if !same {
			flush()
			cur = ps
		}
		ids = append(ids, prev)
	}
	flush()
	d.runIDs = ids
	d.lastRuns = runs
	return runs
}

// sharedRun returns the topic ids of run k of the subscription being
// decoded: the previous subscription's run k when it has the same ids,
// otherwise a copy of ids.
func (d *Decoder) sharedRun(k int, ids []int32) []int32 {
	if k < len(d.lastRuns) && slices.Equal(d.lastRuns[k].Topics, ids) {
		return d.lastRuns[k].Topics
	}
	return slices.Clone(ids)
}

// equalBE reports whether raw holds the big-endian int32s of ps, which has
// len(raw)/4 elements.
func equalBE(raw []byte, ps []int32) bool {
	for i, p := range ps {
		if int32(binary.BigEndian.Uint32(raw[4*i:])) != p {
			return false
		}
	}
	return true
}

// inlineEntry reads the owned entry at r's offset when its lengths are in
// bounds: its topic name and its partitions' raw big-endian bytes. ok is
// false, and r unchanged, otherwise; the careful reader then names what is
// wrong.
func inlineEntry(r *reader) (name, raw []byte, ok bool) {
	b, off := r.b, r.off
	if len(b)-off < 2 {
		return nil, nil, false
	}
	l := int(int16(binary.BigEndian.Uint16(b[off:])))
	at := off + 2 + l
	if l < 0 || len(b)-at < 4 {
		return nil, nil, false
	}
	c := int(int32(binary.BigEndian.Uint32(b[at:])))
	if c < 0 || (len(b)-at-4)/4 < c {
		return nil, nil, false
	}
	r.off = at + 4 + 4*c
	return b[off+2 : at], b[at+4 : r.off], true
}

// topicAfter returns the id of the owned topic name, which clients usually
// write in the order of the subscription: first it tries the topic that
// follows prev.
func (d *Decoder) topicAfter(prev int32, name []byte) int32 {
	if g := d.guess(prev); g >= 0 && d.names.names[g] == string(name) {
		return g
	}
	return d.nameAfter(prev, name)
}

// partitions decodes big-endian int32s from b into the decoder's arena.
func (d *Decoder) partitions(b []byte) []int32 {
	n := len(b) / 4
	if n == 0 {
		return []int32{} // as the careful reader returns an empty array
	}
	if n > len(d.arena) {
		d.arena = make([]int32, max(n, 4<<10))
	}
	out := d.arena[:n:n]
	d.arena = d.arena[n:]
	for i := range out {
		out[i] = int32(binary.BigEndian.Uint32(b[4*i:]))
	}
	return out
}

// guess returns the id that followed prev the last time, or -1.
func (d *Decoder) guess(prev int32) int32 {
	if prev >= 0 && int(prev) < len(d.next) {
		return d.next[prev]
	}
	return -1
}

// nameAfter interns name when it is not guess(prev), the name that followed
// prev the last time (the caller tries that first: for lists written in a
// stable order it avoids the map), and remembers it as prev's successor.
func (d *Decoder) nameAfter(prev int32, name []byte) int32 {
	id := d.names.lookup(name)
	if prev >= 0 {
		for len(d.next) < d.names.Len() {
			d.next = append(d.next, -1)
		}
		d.next[prev] = id
	}
	return id
}

// reader reads big-endian Kafka primitives from b, remembering the first
// error, which names the field being read.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(field string, err error) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at byte %d: %v", ErrMalformed, field, r.off, err)
	}
}

var errShort = errors.New("truncated")

func errNegativeVersion(v int16) error { return fmt.Errorf("negative version %d", v) }

func (r *reader) take(field string, n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b)-r.off < n {
		r.fail(field, errShort)
		return nil
	}
	s := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return s
}

func (r *reader) int16(field string) int16 {
	b := r.take(field, 2)
	if b == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(b))
}

func (r *reader) int32(field string) int32 {
	b := r.take(field, 4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}

// arrayLen reads a non-nullable array length and checks that the rest of
// the input could hold that many elements of at least minElem bytes, so a
// hostile length cannot make the decoder allocate.
func (r *reader) arrayLen(field string, minElem int) int {
	n := r.int32(field)
	if r.err != nil {
		return 0
	}
	if n < 0 {
		r.fail(field, fmt.Errorf("count %d: the array is not nullable", n))
		return 0
	}
	if int64(n)*int64(minElem) > int64(len(r.b)-r.off) {
		r.fail(field, fmt.Errorf("count %d: %w", n, errShort))
		return 0
	}
	return int(n)
}

func (r *reader) stringBytes(field string) []byte {
	n := r.int16(field)
	if r.err != nil {
		return nil
	}
	if n < 0 {
		r.fail(field, fmt.Errorf("length %d: the string is not nullable", n))
		return nil
	}
	return r.take(field, int(n))
}

func (r *reader) nullableString(field string) (string, bool) {
	n := r.int16(field)
	if r.err != nil || n < 0 {
		return "", false
	}
	b := r.take(field, int(n))
	if b == nil {
		return "", false
	}
	return string(b), true
}

func (r *reader) nullableBytes(field string) []byte {
	n := r.int32(field)
	if r.err != nil || n < 0 {
		return nil
	}
	return r.take(field, int(n))
}

func (r *reader) int32s(field string) []int32 {
	n := r.arrayLen(field, 4)
	if r.err != nil {
		return nil
	}
	b := r.take(field, 4*n)
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(binary.BigEndian.Uint32(b[4*i:]))
	}
	return out
}

package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrMalformed is wrapped by every decoding error: the buffer is truncated,
// has trailing bytes, or holds a value the layout forbids.
var ErrMalformed = errors.New("malformed buffer")

// ErrVersion is wrapped when a buffer starts with a version other than
// Version.
var ErrVersion = errors.New("unsupported encoding version")

// reader walks a buffer. The first failure sticks, so decoders read on without
// checking after every field and look at err once per entry.
type reader struct {
	b    []byte
	off  int
	err  error
	what string // what is being decoded, for the error message

	// arena and entries are shared backing arrays that partition lists and
	// topic entries are carved from: a request or response of a large group
	// holds a million one-partition entries, and an allocation per entry
	// (or even per member) would cost more than decoding them, above all in
	// a wasm guest.
	arena   []int32
	entries []TopicPartitions
	// lists is the size of the topic-list table that entries may refer to:
	// zero in the plain layout.
	lists int
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("abi: %s: %s at byte %d: %w", r.what, fmt.Sprintf(format, args...), r.off, ErrMalformed)
	}
	r.off = len(r.b)
}

func (r *reader) need(n int, field string) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || len(r.b)-r.off < n {
		r.fail("truncated %s (need %d bytes, have %d)", field, n, len(r.b)-r.off)
		return false
	}
	return true
}

func (r *reader) u8(field string) byte {
	if !r.need(1, field) {
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) u32(field string) uint32 {
	if !r.need(4, field) {
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *reader) u64(field string) uint64 {
	if !r.need(8, field) {
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

// count reads a u32 element count and checks that the rest of the buffer can
// hold that many elements of at least minSize bytes, so that a forged count
// never makes the decoder allocate more than the buffer could describe.
func (r *reader) count(field string, minSize int) int {
	n := r.u32(field)
	if r.err != nil {
		return 0
	}
	if uint64(n)*uint64(minSize) > uint64(len(r.b)-r.off) {
		r.fail("%s count %d exceeds the remaining %d bytes", field, n, len(r.b)-r.off)
		return 0
	}
	return int(n)
}

func (r *reader) bytes(field string) []byte {
	n := r.count(field, 1)
	if r.err != nil {
		return nil
	}
	v := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return v
}

func (r *reader) str(field string) string {
	b := r.bytes(field)
	if !utf8.Valid(b) {
		r.fail("%s is not valid UTF-8", field)
		return ""
	}
	return string(b)
}

// ownedBytes is bytes copied out of the buffer, so the result does not pin or
// alias the caller's buffer. Empty decodes to nil.
func (r *reader) ownedBytes(field string) []byte {
	b := r.bytes(field)
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// int32s reads a counted list of int32 into a slice carved from a shared
// arena: one allocation per many lists instead of one per list.
func (r *reader) int32s(field string) []int32 {
	n := r.count(field, 4)
	if r.err != nil || n == 0 {
		return nil
	}
	return r.int32Values(n)
}

// int32Values reads n values whose 4*n bytes the caller has checked are in
// the buffer.
func (r *reader) int32Values(n int) []int32 {
	if n > len(r.arena) {
		// No list still in the buffer can hold more than remaining/4
		// values, so a small buffer never pays for a full arena.
		size := min(16<<10, (len(r.b)-r.off)/4)
		if n > size {
			size = n
		}
		r.arena = make([]int32, size)
	}
	out := r.arena[:n:n]
	r.arena = r.arena[n:]
	getInt32s(out, r.b[r.off:r.off+4*n])
	r.off += 4 * n
	return out
}

// topicEntries returns n zeroed entries carved from a shared array, sized
// like the int32 arena from what the buffer can still describe.
func (r *reader) topicEntries(n int) []TopicPartitions {
	if n > len(r.entries) {
		size := max(n, min(4<<10, (len(r.b)-r.off)/8))
		r.entries = make([]TopicPartitions, size)
	}
	out := r.entries[:n:n]
	r.entries = r.entries[n:]
	return out
}

func (r *reader) version() {
	v := r.u32("version")
	if r.err == nil && v != Version {
		r.err = fmt.Errorf("abi: %s: version %d, want %d: %w", r.what, v, Version, ErrVersion)
	}
}

// layout reads the version word of a request or response, which may also
// say the grouped layout, and reports whether it does.
func (r *reader) layout() bool {
	v := r.u32("version")
	if r.err == nil && v != Version && v != Version|GroupedLayout {
		r.err = fmt.Errorf("abi: %s: version %d, want %d (or %d for the grouped layout): %w", r.what, v, Version, Version|GroupedLayout, ErrVersion)
	}
	return v == Version|GroupedLayout
}

// topicLists reads a topic-list table: lists that are not empty, of topic
// indices that are strictly ascending and below nTopics (when nTopics is
// not negative; a response's table is checked against its request by the
// host). The result is never nil.
func (r *reader) topicLists(nTopics int) [][]int32 {
	n := r.count("topic lists", 8)
	lists := make([][]int32, n)
	for i := 0; i < n && r.err == nil; i++ {
		l := r.int32s("topic list")
		if r.err != nil {
			break
		}
		switch at := firstNotAscending(l); {
		case len(l) == 0:
			r.fail("topic list %d is empty", i)
		case l[0] < 0 || (nTopics >= 0 && int(l[len(l)-1]) >= nTopics):
			r.fail("topic list %d refers to topic index %d or %d of %d", i, l[0], l[len(l)-1], nTopics)
		case at >= 0:
			r.fail("topic list %d: topic indices are not strictly ascending (%d after %d)", i, l[at], l[at-1])
		}
		lists[i] = l
	}
	r.lists = n
	return lists
}

func (r *reader) end() error {
	if r.err == nil && r.off != len(r.b) {
		r.fail("%d trailing bytes", len(r.b)-r.off)
	}
	return r.err
}

// DecodeRequest decodes a request. Every topic, replica-set and partition
// reference is checked against the tables it points into, so a guest can index
// with the decoded values without further checks. The result does not alias b.
func DecodeRequest(b []byte) (*Request, error) {
	r := &reader{b: b, what: "request"}
	req := &Request{}
	grouped := r.layout()
	req.GroupID = r.str("group id")
	req.Generation = int32(r.u32("generation"))
	req.Protocol = r.str("protocol")
	req.Assignor = r.str("assignor")
	rp := r.u8("rebalance protocol")
	if r.err == nil && rp > byte(Cooperative) {
		r.fail("rebalance protocol %d", rp)
	}
	req.RebalanceProtocol = RebalanceProtocol(rp)
	req.Seed = r.u64("seed")

	if n := r.count("config", 8); n > 0 {
		req.Config = make(map[string]string, n)
		prev := ""
		for i := 0; i < n && r.err == nil; i++ {
			k := r.str("config key")
			v := r.str("config value")
			if r.err == nil && i > 0 && k <= prev {
				r.fail("config key %q out of order", k)
			}
			req.Config[k] = v
			prev = k
		}
	}

	if n := r.count("brokers", 8); n > 0 {
		req.Brokers = make([]Broker, n)
		for i := 0; i < n && r.err == nil; i++ {
			req.Brokers[i] = Broker{ID: int32(r.u32("broker id")), Rack: r.str("broker rack")}
		}
	}

	if n := r.count("replica sets", 4); n > 0 {
		req.ReplicaSets = make([][]int32, n)
		for i := 0; i < n && r.err == nil; i++ {
			req.ReplicaSets[i] = r.int32s("replica set")
		}
	}

	nTopics := r.count("topics", 25)
	var names map[string]struct{}
	if nTopics > 0 {
		req.Topics = make([]Topic, nTopics)
		names = make(map[string]struct{}, nTopics)
	}
	for i := 0; i < nTopics && r.err == nil; i++ {
		t := &req.Topics[i]
		t.Name = r.str("topic name")
		if _, dup := names[t.Name]; dup && r.err == nil {
			r.fail("topic %q appears twice in the topic table", t.Name)
			break
		}
		names[t.Name] = struct{}{}
		if r.need(16, "topic id") {
			copy(t.ID[:], r.b[r.off:])
			r.off += 16
		}
		flags := r.u8("topic flags")
		pc := int32(r.u32("partition count"))
		if r.err != nil {
			break
		}
		if flags&^(topicExists|topicPlacement) != 0 {
			r.fail("topic %q has unknown flags %#x", t.Name, flags)
			break
		}
		if pc < 0 {
			r.fail("topic %q has partition count %d", t.Name, pc)
			break
		}
		if flags&topicExists == 0 && (pc != 0 || flags&topicPlacement != 0) {
			r.fail("topic %q does not exist but has partitions", t.Name)
			break
		}
		t.Exists = flags&topicExists != 0
		t.PartitionCount = pc
		if flags&topicPlacement != 0 {
			t.Partitions = r.placement(int(pc), len(req.ReplicaSets))
		}
	}
	if grouped && r.err == nil {
		req.TopicLists = r.topicLists(nTopics)
	}

	nMembers := r.count("members", 41)
	if nMembers > 0 {
		req.Members = make([]Member, nMembers)
	}
	for i := 0; i < nMembers && r.err == nil; i++ {
		m := &req.Members[i]
		if !r.memberStrings(m) {
			m.MemberID = r.str("member id")
			m.InstanceID = r.str("instance id")
			m.ClientID = r.str("client id")
			m.ClientHost = r.str("client host")
			m.Rack = r.str("member rack")
		}
		flags := r.u8("member flags")
		if r.err == nil && flags&^memberCooperative != 0 {
			r.fail("member %q has unknown flags %#x", m.MemberID, flags)
		}
		m.Cooperative = flags&memberCooperative != 0
		if grouped {
			// One reference into the topic-list table, checked once
			// when the table was read: members of a large group share
			// one list of hundreds of topics.
			k := int32(r.u32("subscription"))
			switch {
			case r.err != nil || k == -1:
			case k < 0 || int(k) >= len(req.TopicLists):
				r.fail("member %q subscribes to topic list %d of %d", m.MemberID, k, len(req.TopicLists))
			default:
				m.Topics = req.TopicLists[k]
			}
			m.OwnedGeneration = int32(r.u32("owned generation"))
			m.Owned = r.topicPartitions("owned partitions", nTopics)
			m.UserData = r.ownedBytes("user data")
			m.Previous = r.topicPartitions("previous assignment", nTopics)
			continue
		}
		subs := r.int32s("subscribed topics")
		if r.err == nil && len(subs) > 0 {
			switch at := firstNotAscending(subs); {
			case subs[0] < 0:
				r.fail("member %q subscribes to topic index %d of %d", m.MemberID, subs[0], nTopics)
			case int(subs[len(subs)-1]) >= nTopics:
				r.fail("member %q subscribes to topic index %d of %d", m.MemberID, subs[len(subs)-1], nTopics)
			case at >= 0:
				r.fail("member %q: subscribed topic indices are not strictly ascending (%d after %d)", m.MemberID, subs[at], subs[at-1])
			}
		}
		m.Topics = subs
		m.OwnedGeneration = int32(r.u32("owned generation"))
		m.Owned = r.topicPartitions("owned partitions", nTopics)
		m.UserData = r.ownedBytes("user data")
		m.Previous = r.topicPartitions("previous assignment", nTopics)
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return req, nil
}

// memberStrings reads a member's five strings in one go when they are in
// bounds and ASCII, the usual case, and reports whether it did; otherwise it
// reads nothing and the careful per-field reads take over. In a wasm guest
// each of the reader's nested calls per field costs more than the field.
func (r *reader) memberStrings(m *Member) bool {
	if r.err != nil {
		return false
	}
	b := r.b
	off := r.off
	var ends [5]int
	for k := range ends {
		if len(b)-off < 4 {
			return false
		}
		n := binary.LittleEndian.Uint32(b[off:])
		if uint64(n) > uint64(len(b)-off-4) {
			return false
		}
		off += 4 + int(n)
		ends[k] = off
	}
	if !ascii(b[r.off:off]) {
		return false
	}
	at := r.off
	field := func(k int) string {
		start := at + 4
		at = ends[k]
		if start == at {
			return ""
		}
		return string(b[start:at])
	}
	m.MemberID, m.InstanceID, m.ClientID, m.ClientHost, m.Rack = field(0), field(1), field(2), field(3), field(4)
	r.off = off
	return true
}

// ascii reports whether b holds only bytes below 0x80, eight at a time. The
// length words between the strings are small, so their bytes pass too.
func ascii(b []byte) bool {
	var acc uint64
	i := 0
	for ; i+8 <= len(b); i += 8 {
		acc |= binary.LittleEndian.Uint64(b[i:])
	}
	for ; i < len(b); i++ {
		acc |= uint64(b[i])
	}
	return acc&0x8080808080808080 == 0
}

func (r *reader) placement(n, sets int) []Partition {
	// 12*n overflows int where int is 32 bits; compare in 64 bits.
	if r.err == nil && uint64(n)*12 > uint64(len(r.b)-r.off) {
		r.fail("truncated partition placement (need %d bytes, have %d)", uint64(n)*12, len(r.b)-r.off)
	}
	if r.err != nil {
		return nil
	}
	out := make([]Partition, n)
	src := r.b[r.off : r.off+12*n]
	for i := range out {
		o := src[12*i : 12*i+12]
		p := Partition{
			Leader:   int32(binary.LittleEndian.Uint32(o[0:])),
			Replicas: binary.LittleEndian.Uint32(o[4:]),
			ISR:      binary.LittleEndian.Uint32(o[8:]),
		}
		if int64(p.Replicas) >= int64(sets) || int64(p.ISR) >= int64(sets) {
			r.off += 12 * i
			r.fail("partition %d refers to a replica set beyond the %d sent", i, sets)
			return nil
		}
		out[i] = p
	}
	r.off += 12 * n
	return out
}

// topicPartitions reads a counted list of {topic, partitions} entries; a
// topic index must be below nTopics unless nTopics is negative.
//
// Large groups make this the decoder's hot loop: Kafka's round-robin layout
// gives each of 2,000 members one partition of each of 500 topics, a million
// entries of one partition. So an entry that is in bounds is read inline,
// with no call per field, and a one-partition list is stored without a
// copy call, four at a time when they come in a row: in a wasm guest every
// call and loop iteration is an exit to the host's deadline check. Anything
// unusual goes through the careful per-field reads, which name the problem.
func (r *reader) topicPartitions(field string, nTopics int) []TopicPartitions {
	n := r.count(field, 8)
	if r.err != nil || n == 0 {
		return nil
	}
	out := r.topicEntries(n)
	b := r.b
	for i := 0; i < len(out); {
		off := r.off
		if i+4 <= len(out) && len(b)-off >= 48 && len(r.arena) >= 4 {
			// Four one-partition entries in a row, read in one iteration.
			e := b[off : off+48 : off+48]
			le := binary.LittleEndian
			t0, t1, t2, t3 := le.Uint32(e[0:]), le.Uint32(e[12:]), le.Uint32(e[24:]), le.Uint32(e[36:])
			if le.Uint32(e[4:]) == 1 && le.Uint32(e[16:]) == 1 && le.Uint32(e[28:]) == 1 && le.Uint32(e[40:]) == 1 &&
				(nTopics < 0 || uint64(max(t0, t1, t2, t3)) < uint64(nTopics)) {
				ps := r.arena[:4:4]
				r.arena = r.arena[4:]
				ps[0], ps[1], ps[2], ps[3] = int32(le.Uint32(e[8:])), int32(le.Uint32(e[20:])), int32(le.Uint32(e[32:])), int32(le.Uint32(e[44:]))
				q := out[i : i+4 : i+4]
				q[0] = TopicPartitions{Topic: int32(t0), Partitions: ps[0:1:1]}
				q[1] = TopicPartitions{Topic: int32(t1), Partitions: ps[1:2:2]}
				q[2] = TopicPartitions{Topic: int32(t2), Partitions: ps[2:3:3]}
				q[3] = TopicPartitions{Topic: int32(t3), Partitions: ps[3:4:4]}
				r.off = off + 48
				i += 4
				continue
			}
		}
		i++
		if len(b)-off >= 8 {
			t := binary.LittleEndian.Uint32(b[off:])
			c := binary.LittleEndian.Uint32(b[off+4:])
			// A topic index in range, or a reference to a topic list of
			// the grouped layout.
			inRange := nTopics < 0 || uint64(t) < uint64(nTopics) || (int32(t) < 0 && int64(^int32(t)) < int64(r.lists))
			if inRange && uint64(c)*4 <= uint64(len(b)-off-8) {
				off += 8
				var ps []int32
				switch {
				case c == 1 && len(r.arena) > 0:
					ps = r.arena[:1:1]
					r.arena = r.arena[1:]
					ps[0] = int32(binary.LittleEndian.Uint32(b[off:]))
					r.off = off + 4
				case c > 0:
					r.off = off
					ps = r.int32Values(int(c))
				default:
					r.off = off
				}
				out[i-1] = TopicPartitions{Topic: int32(t), Partitions: ps}
				continue
			}
		}
		if !r.topicPartitionsSlow(&out[i-1], field, nTopics) {
			return nil
		}
	}
	return out
}

// topicPartitionsSlow reads one entry field by field, failing with a
// message that names what is wrong. It reports whether the entry was read.
//
//go:noinline
func (r *reader) topicPartitionsSlow(tp *TopicPartitions, field string, nTopics int) bool {
	t := r.u32("entry topic")
	switch ref := int32(t); {
	case r.err != nil:
	case ref < 0 && int64(^ref) < int64(r.lists):
		// A topic list of the grouped layout.
	case ref < 0 && r.lists > 0:
		r.fail("%s refers to topic list %d of %d", field, ^ref, r.lists)
	case int64(t) >= int64(nTopics) && nTopics >= 0:
		r.fail("%s refers to topic index %d of %d", field, t, nTopics)
	}
	*tp = TopicPartitions{Topic: int32(t), Partitions: r.int32s(field)}
	return r.err == nil
}

// DecodeResponse decodes a response. It checks the layout only; whether the
// assignment makes sense for its request is the host's validation.
func DecodeResponse(b []byte) (*Response, error) {
	r := &reader{b: b, what: "response"}
	resp := &Response{}
	grouped := r.layout()
	// The topic table size is unknown here; any index passes and the
	// host's validation checks it against the request. In the grouped
	// layout the sign bit marks topic-list references, which the decoder
	// checks against the response's own table.
	nTopics := -1
	switch status := r.u8("status"); {
	case r.err != nil:
	case status == statusError:
		resp.Error = r.str("error message")
		if r.err == nil && resp.Error == "" {
			r.fail("empty error message")
		}
		if grouped {
			resp.TopicLists = [][]int32{}
		}
	case status == statusOK:
		if grouped {
			resp.TopicLists = r.topicLists(-1)
			nTopics = 1 << 31
		}
		n := r.count("members", 12)
		if n > 0 {
			resp.Members = make([]MemberAssignment, n)
		}
		for i := 0; i < n && r.err == nil; i++ {
			m := &resp.Members[i]
			m.Member = int32(r.u32("member index"))
			m.Partitions = r.topicPartitions("assigned partitions", nTopics)
			m.UserData = r.ownedBytes("user data")
		}
	default:
		r.fail("status %d", status)
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return resp, nil
}

// DecodeDescription decodes a module's description.
func DecodeDescription(b []byte) (*Description, error) {
	r := &reader{b: b, what: "description"}
	d := &Description{}
	r.version()
	n := r.count("assignors", 18)
	if n > 0 {
		d.Assignors = make([]AssignorInfo, n)
	}
	for i := 0; i < n && r.err == nil; i++ {
		a := &d.Assignors[i]
		a.Name = r.str("assignor name")
		a.Version = r.str("assignor version")
		np := r.count("protocols", 4)
		for j := 0; j < np && r.err == nil; j++ {
			a.Protocols = append(a.Protocols, r.str("protocol"))
		}
		modes := r.u8("modes")
		flags := r.u8("assignor flags")
		if r.err == nil && (modes&^byte(ModeEager|ModeCooperative) != 0 || flags&^(assignorMayLeaveUnassigned|assignorGrouped) != 0) {
			r.fail("assignor %q has unknown mode or flag bits", a.Name)
		}
		a.Modes = Modes(modes)
		a.MayLeaveUnassigned = flags&assignorMayLeaveUnassigned != 0
		a.Grouped = flags&assignorGrouped != 0
		a.Description = r.str("assignor description")
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return d, nil
}

// firstNotAscending returns the first index i with s[i] <= s[i-1], or -1.
// With strict ascent, checking the first and last elements bounds them all.
// It looks at eight elements per iteration: in a wasm guest every loop
// iteration costs a deadline check, and subscriptions reach a million
// entries in large groups.
func firstNotAscending(s []int32) int {
	i := 1
	for ; i+8 <= len(s); i += 8 {
		w := s[i-1 : i+8]
		if w[1] <= w[0] || w[2] <= w[1] || w[3] <= w[2] || w[4] <= w[3] ||
			w[5] <= w[4] || w[6] <= w[5] || w[7] <= w[6] || w[8] <= w[7] {
			break
		}
	}
	for ; i < len(s); i++ {
		if s[i] <= s[i-1] {
			return i
		}
	}
	return -1
}

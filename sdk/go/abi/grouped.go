package abi

import "slices"

// The grouped layout (sdk/ABI.md section 7) lets one entry stand for the
// same partitions of many topics. Kafka's round robin gives each member of
// a large group one partition of each of hundreds of topics, the same
// partition id in every topic when the topics are equally large: 2,000
// members of a group subscribed to 500 topics own a million one-partition
// entries, which the grouped layout writes as 2,000 entries over one topic
// list. Every per-entry stage, in the host and in the guest, shrinks with
// it.

// GroupedLayout is the bit of a request's or response's version word that
// says the buffer is in the grouped layout.
const GroupedLayout = 1 << 16

// ListRef returns the Topic value of an entry that refers to topic list k.
func ListRef(k int) int32 { return ^int32(k) }

// EntryTopics returns the topics an entry covers: its topic list for a
// list reference, otherwise one[:1] holding its topic. lists is the
// request's or response's TopicLists.
func EntryTopics(lists [][]int32, tp *TopicPartitions, one *[1]int32) []int32 {
	if tp.Topic < 0 {
		return lists[^tp.Topic]
	}
	one[0] = tp.Topic
	return one[:]
}

// hasListRefs reports whether some entry of tps refers to a topic list.
func hasListRefs(tps []TopicPartitions) bool {
	for i := range tps {
		if tps[i].Topic < 0 {
			return true
		}
	}
	return false
}

// expandedLen is how many plain entries tps stands for.
func expandedLen(lists [][]int32, tps []TopicPartitions) int {
	n := 0
	for i := range tps {
		if t := tps[i].Topic; t < 0 {
			n += len(lists[^t])
		} else {
			n++
		}
	}
	return n
}

// appendExpanded appends the plain entries tps stands for, in order, each
// topic of a list in the list's order. Entries of one list share its
// partition slice.
func appendExpanded(dst []TopicPartitions, lists [][]int32, tps []TopicPartitions) []TopicPartitions {
	for _, tp := range tps {
		if tp.Topic >= 0 {
			dst = append(dst, tp)
			continue
		}
		// One slice extension per list, then plain stores: a large
		// group's lists expand to a million entries.
		l := lists[^tp.Topic]
		at := len(dst)
		dst = slices.Grow(dst, len(l))[:at+len(l)]
		out := dst[at:]
		for i, t := range l {
			out[i] = TopicPartitions{Topic: t, Partitions: tp.Partitions}
		}
	}
	return dst
}

// AppendExpanded appends the plain entries that tps stands for to dst, each
// topic of a list in the list's order, and returns the result: a caller
// that handles one member at a time reuses dst rather than expanding a
// whole response.
func AppendExpanded(dst []TopicPartitions, lists [][]int32, tps []TopicPartitions) []TopicPartitions {
	return appendExpanded(dst, lists, tps)
}

// Expanded returns r in the plain layout: r itself when TopicLists is nil,
// otherwise a copy whose members' Owned and Previous list every topic in an
// entry of its own, carved from one shared array, and whose TopicLists is
// nil. Partition lists and everything else are shared with r.
func (r *Request) Expanded() *Request {
	if r.TopicLists == nil {
		return r
	}
	out := *r
	out.TopicLists = nil
	out.Members = make([]Member, len(r.Members))
	copy(out.Members, r.Members)
	total := 0
	for i := range r.Members {
		m := &r.Members[i]
		if hasListRefs(m.Owned) {
			total += expandedLen(r.TopicLists, m.Owned)
		}
		if hasListRefs(m.Previous) {
			total += expandedLen(r.TopicLists, m.Previous)
		}
	}
	all := make([]TopicPartitions, 0, total)
	expand := func(tps []TopicPartitions) []TopicPartitions {
		if !hasListRefs(tps) {
			return tps
		}
		from := len(all)
		all = appendExpanded(all, r.TopicLists, tps)
		return all[from:len(all):len(all)]
	}
	for i := range out.Members {
		m := &out.Members[i]
		m.Owned = expand(m.Owned)
		m.Previous = expand(m.Previous)
	}
	return &out
}

// Expanded returns r in the plain layout: r itself when TopicLists is nil,
// otherwise a copy whose assignments list every topic in an entry of its
// own, carved from one shared array, and whose TopicLists is nil.
func (r *Response) Expanded() *Response {
	if r.TopicLists == nil {
		return r
	}
	out := &Response{Error: r.Error, Members: make([]MemberAssignment, len(r.Members))}
	total := 0
	for i := range r.Members {
		total += expandedLen(r.TopicLists, r.Members[i].Partitions)
	}
	all := make([]TopicPartitions, 0, total)
	for i := range r.Members {
		ma := &r.Members[i]
		from := len(all)
		all = appendExpanded(all, r.TopicLists, ma.Partitions)
		out.Members[i] = MemberAssignment{Member: ma.Member, UserData: ma.UserData}
		if len(all) > from || ma.Partitions != nil {
			out.Members[i].Partitions = all[from:len(all):len(all)]
		}
	}
	return out
}

// Grouper builds grouped entries: it turns runs of plain entries that name
// ascending topics with equal partition lists into one entry over a topic
// list, and keeps the table of the lists it made, each made once. The zero
// value is ready to use.
type Grouper struct {
	lists [][]int32
	// byKey finds a list by its first topic, last topic and length; equal
	// keys are then compared in full.
	byKey map[[3]int32][]int32
	// topics is the shared storage lists are carved from.
	topics []int32
}

// Lists returns the table of lists made so far, never nil. Entries that
// Group returned refer to it.
func (g *Grouper) Lists() [][]int32 {
	if g.lists == nil {
		return [][]int32{}
	}
	return g.lists
}

// MinRun is the shortest run of entries that Group turns into one list
// entry: a list of two topics costs more than it saves.
const MinRun = 3

// Group appends to dst the entries of tps with every run of at least
// MinRun consecutive plain entries whose topics ascend and whose
// partition lists are equal replaced by one entry over a topic list.
// Entries that already refer to lists must refer to g's table.
func (g *Grouper) Group(dst, tps []TopicPartitions) []TopicPartitions {
	for i := 0; i < len(tps); {
		j := i + 1
		if tps[i].Topic >= 0 {
			for j < len(tps) && tps[j].Topic > tps[j-1].Topic && equalInt32s(tps[j].Partitions, tps[i].Partitions) {
				j++
			}
		}
		if j-i < MinRun {
			dst = append(dst, tps[i:j]...)
			i = j
			continue
		}
		dst = append(dst, TopicPartitions{Topic: g.list(tps[i:j]), Partitions: tps[i].Partitions})
		i = j
	}
	return dst
}

// List returns the reference to the list of topics ts (ascending, not
// empty), adding it to the table when it is new. ts is copied.
func (g *Grouper) List(ts []int32) int32 {
	key := [3]int32{ts[0], ts[len(ts)-1], int32(len(ts))}
	if g.byKey == nil {
		g.byKey = make(map[[3]int32][]int32)
	}
	for _, k := range g.byKey[key] {
		if equalInt32s(g.lists[k], ts) {
			return ListRef(int(k))
		}
	}
	if len(g.topics) < len(ts) {
		// Most tables hold a list or two (every member of a group
		// shares one), so the chunk is sized for a few of this one.
		g.topics = make([]int32, max(4*len(ts), 256))
	}
	l := g.topics[:len(ts):len(ts)]
	g.topics = g.topics[len(ts):]
	copy(l, ts)
	k := int32(len(g.lists))
	g.lists = append(g.lists, l)
	g.byKey[key] = append(g.byKey[key], k)
	return ListRef(int(k))
}

// list is List for the topics of a run of entries.
func (g *Grouper) list(run []TopicPartitions) int32 {
	key := [3]int32{run[0].Topic, run[len(run)-1].Topic, int32(len(run))}
	for _, k := range g.byKey[key] {
		if sameTopics(g.lists[k], run) {
			return ListRef(int(k))
		}
	}
	ts := make([]int32, len(run))
	for i := range run {
		ts[i] = run[i].Topic
	}
	return g.List(ts)
}

// sameTopics reports whether run names exactly the topics of l, in order.
func sameTopics(l []int32, run []TopicPartitions) bool {
	if len(l) != len(run) {
		return false
	}
	for i := range run {
		if run[i].Topic != l[i] {
			return false
		}
	}
	return true
}

// equalInt32s reports whether a and b hold the same values; slices that
// share their first element and length are equal without a look.
func equalInt32s(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	if len(a) == 1 {
		return a[0] == b[0]
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Grouped returns r in the grouped layout: r itself when it has
// TopicLists already, otherwise a copy whose members' Owned and Previous
// are grouped by one Grouper (see Grouper.Group) and whose TopicLists is
// its table. Partition lists and everything else are shared with r.
func (r *Request) Grouped() *Request {
	if r.TopicLists != nil {
		return r
	}
	out := *r
	out.Members = make([]Member, len(r.Members))
	copy(out.Members, r.Members)
	var g Grouper
	var all []TopicPartitions
	group := func(tps []TopicPartitions) []TopicPartitions {
		if len(tps) < MinRun {
			return tps
		}
		from := len(all)
		all = g.Group(all, tps)
		if len(all)-from == len(tps) {
			all = all[:from]
			return tps
		}
		return all[from:len(all):len(all)]
	}
	var last []int32 // the previous member's subscription, and its list
	var lastList []int32
	for i := range out.Members {
		m := &out.Members[i]
		m.Owned = group(m.Owned)
		m.Previous = group(m.Previous)
		// Subscriptions travel as references to the table too; members
		// usually share one slice, so a repeat costs a comparison of
		// slice headers.
		if len(m.Topics) > 0 && slices.IsSorted(m.Topics) && !hasRepeat(m.Topics) {
			if !sameSlice(m.Topics, last) {
				ref := g.List(m.Topics)
				last, lastList = m.Topics, g.Lists()[^ref]
			}
			m.Topics = lastList
		}
	}
	out.TopicLists = g.Lists()
	return &out
}

// sameSlice reports whether a and b are the same slice of the same array.
func sameSlice(a, b []int32) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// hasRepeat reports whether the ascending s holds a value twice.
func hasRepeat(s []int32) bool {
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			return true
		}
	}
	return false
}

// For returns r in the layout an assignor with info reads: grouped when
// it declares the grouped layout (AssignorInfo.Grouped), plain otherwise.
// A host sends every assignor its own layout, whatever the caller built.
func (r *Request) For(info AssignorInfo) *Request {
	if info.Grouped {
		return r.Grouped()
	}
	return r.Expanded()
}

// LayoutOf returns r in the layout a caller who sent req expects back:
// plain when req is plain, as the assignor answered otherwise.
func (r *Response) LayoutOf(req *Request) *Response {
	if req.TopicLists == nil {
		return r.Expanded()
	}
	return r
}

package sticky

import "unicode/utf16"

// This file holds the two orders Kafka's GeneralAssignmentBuilder depends
// on besides sorted lists: its TreeSet of members by (assignment size,
// member id), and the iteration order of the Java HashSet from which it
// picks a partition to send back along a reversed movement.

// memberSet is the general builder's ordered member set: members sorted by
// how many partitions they hold, then by member id (Kafka's
// SubscriptionComparator over a TreeSet). It is a treap whose nodes are the
// member indices themselves, so it allocates nothing per operation. A
// member's key must not change while it is in the set: callers remove it,
// change its count, and add it again, as Kafka does.
type memberSet struct {
	size, rank  []int32 // shared with the builder: the key of member m
	left, right []int32 // children, -1 for none
	pri         []uint32
	root        int32
	len         int
	stack       []int32 // scratch for the walks, nil while one runs
}

// newMemberSet returns an empty set over members 0..n-1 keyed by size and
// rank, which the caller keeps updating.
func newMemberSet(size, rank []int32) *memberSet {
	n := len(size)
	s := &memberSet{size: size, rank: rank, left: make([]int32, n), right: make([]int32, n), pri: make([]uint32, n), root: -1}
	for m := range n {
		// Fixed pseudo-random priorities keep the tree balanced and the
		// result a pure function of the request.
		z := uint64(m+1) * 0x9e3779b97f4a7c15
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		s.pri[m] = uint32(z ^ z>>31)
		s.left[m], s.right[m] = -1, -1
	}
	return s
}

func (s *memberSet) key(m int32) uint64 {
	return uint64(uint32(s.size[m]))<<32 | uint64(uint32(s.rank[m]))
}

// insert adds member m below tree t and returns the new root of t.
func (s *memberSet) insert(t, m int32, k uint64) int32 {
	if t < 0 {
		return m
	}
	if k < s.key(t) {
		l := s.insert(s.left[t], m, k)
		s.left[t] = l
		if s.pri[l] > s.pri[t] { // rotate l up
			s.left[t] = s.right[l]
			s.right[l] = t
			return l
		}
		return t
	}
	r := s.insert(s.right[t], m, k)
	s.right[t] = r
	if s.pri[r] > s.pri[t] {
		s.right[t] = s.left[r]
		s.left[r] = t
		return r
	}
	return t
}

// merge joins a and b, every key of a being below every key of b.
func (s *memberSet) merge(a, b int32) int32 {
	if a < 0 {
		return b
	}
	if b < 0 {
		return a
	}
	if s.pri[a] > s.pri[b] {
		s.right[a] = s.merge(s.right[a], b)
		return a
	}
	s.left[b] = s.merge(a, s.left[b])
	return b
}

// add inserts member m, which must not be in the set.
func (s *memberSet) add(m int32) {
	s.left[m], s.right[m] = -1, -1
	s.root = s.insert(s.root, m, s.key(m))
	s.len++
}

// remove takes member m, which must be in the set under its current key,
// out of it.
func (s *memberSet) remove(m int32) {
	k := s.key(m)
	link := &s.root
	for *link != m {
		t := *link
		if t < 0 {
			panic("sticky: member set out of order")
		}
		if k < s.key(t) {
			link = &s.left[t]
		} else {
			link = &s.right[t]
		}
	}
	*link = s.merge(s.left[m], s.right[m])
	s.len--
}

// first returns the member with the smallest key, or -1.
func (s *memberSet) first() int32 {
	t := s.root
	for t >= 0 && s.left[t] >= 0 {
		t = s.left[t]
	}
	return t
}

// last returns the member with the largest key, or -1.
func (s *memberSet) last() int32 {
	t := s.root
	for t >= 0 && s.right[t] >= 0 {
		t = s.right[t]
	}
	return t
}

// ascend calls fn with the members in ascending key order until fn
// returns true, and returns that member, or -1.
func (s *memberSet) ascend(fn func(m int32) bool) int32 {
	return s.inOrder(s.left, s.right, fn)
}

// descend is ascend in descending key order.
func (s *memberSet) descend(fn func(m int32) bool) int32 {
	return s.inOrder(s.right, s.left, fn)
}

// inOrder walks the treap in order, first the near subtree (near[t]) of
// each node, then the node, then its far subtree, calling fn as ascend
// does.
func (s *memberSet) inOrder(near, far []int32, fn func(m int32) bool) int32 {
	// A walk may start another from its callback: the inner one finds
	// no scratch and allocates its own.
	st := s.stack[:0]
	s.stack = nil
	t := s.root
	for t >= 0 || len(st) > 0 {
		for t >= 0 {
			st = append(st, t)
			t = near[t]
		}
		t = st[len(st)-1]
		st = st[:len(st)-1]
		if fn(t) {
			s.stack = st
			return t
		}
		t = far[t]
	}
	s.stack = st
	return -1
}

// javaStringHash is Java's String.hashCode: over UTF-16 code units, h*31+c
// with int overflow.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			a, b := utf16.EncodeRune(r)
			h = 31*h + int32(a)
			h = 31*h + int32(b)
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// tpHash is the bucket hash Java's HashMap uses for a TopicPartition:
// TopicPartition.hashCode, 31*(31+partition) + topic.hashCode(), spread by
// HashMap.hash (h ^ h>>>16).
func tpHash(topicHash, partition int32) uint32 {
	h := uint32(31*(31+partition) + topicHash)
	return h ^ h>>16
}

// javaHashSet reproduces the iteration order of a java.util.HashSet of
// TopicPartitions that Kafka fills and empties one element at a time:
// elements iterate by bucket (hash modulo the table size), and within a
// bucket in insertion order. The table starts at 16 buckets on the first
// insertion and doubles when the size exceeds three quarters of it, or
// when a bucket that already chains 8 elements grows while the table has
// fewer than 64 buckets; it never shrinks. (Buckets of 8 or more in a
// table of 64 or more become trees in Java; their order is then not
// reproduced, which needs 8 partitions of one topic whose hashes agree in
// their low 6 or more bits to move between the same two members.)
type javaHashSet struct {
	elems   []hashElem
	buckets uint32
	seq     uint64
}

type hashElem struct {
	x    int32 // global partition number
	hash uint32
	seq  uint64
}

// add inserts x, which must not be in the set, with its spread hash.
func (s *javaHashSet) add(x int32, hash uint32) {
	if s.buckets == 0 {
		s.buckets = 16
	}
	chain := 0
	for i := range s.elems {
		if s.elems[i].hash&(s.buckets-1) == hash&(s.buckets-1) {
			chain++
		}
	}
	if chain >= 8 && s.buckets < 64 {
		s.buckets *= 2
	}
	s.seq++
	s.elems = append(s.elems, hashElem{x: x, hash: hash, seq: s.seq})
	if uint32(len(s.elems)) > s.buckets/4*3 {
		s.buckets *= 2
	}
}

// remove deletes x when present.
func (s *javaHashSet) remove(x int32) {
	for i := range s.elems {
		if s.elems[i].x == x {
			s.elems = append(s.elems[:i], s.elems[i+1:]...)
			return
		}
	}
}

// order returns the elements in insertion order, which with the table
// size decides every later iteration order.
func (s *javaHashSet) order() []int32 {
	xs := make([]int32, len(s.elems))
	for i := range s.elems {
		xs[i] = s.elems[i].x
	}
	return xs
}

// inOrder reports whether the set holds exactly xs, inserted in that
// order.
func (s *javaHashSet) inOrder(xs []int32) bool {
	if len(xs) != len(s.elems) {
		return false
	}
	for i := range xs {
		if s.elems[i].x != xs[i] {
			return false
		}
	}
	return true
}

// first returns the element a Java iterator yields first; the set must not
// be empty.
func (s *javaHashSet) first() int32 {
	best := 0
	for i := 1; i < len(s.elems); i++ {
		a, b := &s.elems[i], &s.elems[best]
		ba, bb := a.hash&(s.buckets-1), b.hash&(s.buckets-1)
		if ba < bb || (ba == bb && a.seq < b.seq) {
			best = i
		}
	}
	return s.elems[best].x
}

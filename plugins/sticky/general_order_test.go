package sticky

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMemberSet_KeepsKafkasOrderThroughUpdates drives the treap through
// random count changes, as the general builder does (take a member out,
// change its count, put it back), and compares every walk with the members
// sorted by (count, member id) from scratch.
func TestMemberSet_KeepsKafkasOrderThroughUpdates(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 2, 7, 64, 300} {
		size := make([]int32, n)
		rank := make([]int32, n)
		for i, r := range rnd.Perm(n) {
			rank[i] = int32(r)
		}
		s := newMemberSet(size, rank)
		in := make([]bool, n)
		for m := range n {
			s.add(int32(m))
			in[m] = true
		}
		want := func() []int32 {
			var ms []int32
			for m := range n {
				if in[m] {
					ms = append(ms, int32(m))
				}
			}
			slices.SortFunc(ms, func(a, b int32) int {
				if size[a] != size[b] {
					return int(size[a] - size[b])
				}
				return int(rank[a] - rank[b])
			})
			return ms
		}
		for step := range 2000 {
			m := int32(rnd.IntN(n))
			switch {
			case !in[m]:
				s.add(m)
				in[m] = true
			case rnd.IntN(10) == 0:
				s.remove(m)
				in[m] = false
			default:
				s.remove(m)
				size[m] = max(0, size[m]+int32(rnd.IntN(3))-1) // counts are never negative
				s.add(m)
			}
			var up, down []int32
			s.ascend(func(m int32) bool { up = append(up, m); return false })
			s.descend(func(m int32) bool { down = append(down, m); return false })
			w := want()
			slices.Reverse(down)
			if !slices.Equal(up, w) || !slices.Equal(down, w) || s.len != len(w) {
				t.Fatalf("n=%d step %d: ascend %v, descend reversed %v, len %d; want %v", n, step, up, down, s.len, w)
			}
			first, last := int32(-1), int32(-1)
			if len(w) > 0 {
				first, last = w[0], w[len(w)-1]
			}
			if s.first() != first || s.last() != last {
				t.Fatalf("n=%d step %d: first %d last %d, want %d %d", n, step, s.first(), s.last(), first, last)
			}
		}
	}
}

// TestMemberSet_WalksMayNest checks that a walk started from another
// walk's callback (isBalanced looks for a topic's largest holder while it
// walks the lightest members) leaves the outer walk intact.
func TestMemberSet_WalksMayNest(t *testing.T) {
	size := []int32{3, 1, 2, 5, 4}
	s := newMemberSet(size, []int32{0, 1, 2, 3, 4})
	for m := range int32(5) {
		s.add(m)
	}
	var outer []int32
	s.ascend(func(m int32) bool {
		outer = append(outer, m)
		s.descend(func(int32) bool { return false })
		return false
	})
	if want := []int32{1, 2, 0, 4, 3}; !slices.Equal(outer, want) {
		t.Fatalf("outer walk %v, want %v", outer, want)
	}
}

// TestJavaStringHash_MatchesJava pins String.hashCode values computed by
// Java, including a character outside the BMP (two UTF-16 units).
func TestJavaStringHash_MatchesJava(t *testing.T) {
	tests := []struct {
		s    string
		want int32
	}{
		{"", 0},
		{"t1", 3645},
		{"hello", 99162322},
		{"topic-with-a-long-name", -49133785},
		{"\U0001F600", 1772899},
	}
	for _, tt := range tests {
		if got := javaStringHash(tt.s); got != tt.want {
			t.Errorf("javaStringHash(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
}

// TestJavaHashSet_IteratesByBucketThenInsertion checks the iteration
// order rules the general builder relies on: the lowest bucket first,
// insertion order within a bucket, and buckets recomputed as the table
// grows past three quarters full.
func TestJavaHashSet_IteratesByBucketThenInsertion(t *testing.T) {
	var s javaHashSet
	// Hashes chosen by bucket: 17 and 1 share bucket 1 of 16, 2 is bucket 2.
	s.add(100, 17)
	s.add(101, 2)
	s.add(102, 1)
	if got := s.first(); got != 100 {
		t.Fatalf("first = %d, want 100 (bucket 1, inserted before 102)", got)
	}
	s.remove(100)
	if got := s.first(); got != 102 {
		t.Fatalf("after removing 100, first = %d, want 102", got)
	}
	// Thirteen elements exceed 12 = 3/4 of 16: the table doubles to 32,
	// and hash 33 (bucket 1 of 32) now comes before 17 (bucket 17).
	var g javaHashSet
	g.add(1, 17)
	for i := range int32(11) {
		g.add(10+i, uint32(40+i)) // hashes 40..50: none in bucket 1 of 16 or of 32
	}
	if g.buckets != 16 {
		t.Fatalf("%d buckets after 12 elements, want 16", g.buckets)
	}
	if got := g.first(); got != 18 {
		t.Fatalf("first of 16 buckets = %d, want 18 (hash 48, bucket 0)", got)
	}
	g.add(2, 33)
	if g.buckets != 32 {
		t.Fatalf("%d buckets after 13 elements, want 32", g.buckets)
	}
	if got := g.first(); got != 2 {
		t.Fatalf("first = %d, want 2 (bucket 1 of 32)", got)
	}
}

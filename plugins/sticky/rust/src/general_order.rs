//! The two orders Kafka's GeneralAssignmentBuilder depends on besides
//! sorted lists: its TreeSet of members by (assignment size, member id),
//! and the iteration order of the Java HashSet from which it picks a
//! partition to send back along a reversed movement. Port of
//! general_order.go.

/// The general builder's ordered member set: members sorted by how many
/// partitions they hold, then by member id (Kafka's SubscriptionComparator
/// over a TreeSet). It is a treap whose nodes are the member indices
/// themselves, so it allocates nothing per operation. A member's key is
/// fixed while it is in the set: callers remove it, change its count, and
/// add it again, as Kafka does. (Go reads the key from the builder's
/// arrays; here `add` records it, which is the same while callers keep
/// that rule, and lets the builder mutate its counts freely.)
pub(crate) struct MemberSet {
    key: Vec<u64>,
    left: Vec<i32>,
    right: Vec<i32>,
    pri: Vec<u32>,
    root: i32,
    pub(crate) len: usize,
    /// Scratch for the walks, empty while one runs.
    stack: Vec<i32>,
}

/// An in-progress walk over a `MemberSet`, in ascending or descending key
/// order. It holds no borrow of the set, so that the caller may start
/// other walks, or change its own state, between steps; it must not
/// change the set itself until the walk is finished.
pub(crate) struct SetWalk {
    st: Vec<i32>,
    t: i32,
    desc: bool,
}

impl MemberSet {
    /// Returns an empty set over members 0..n-1.
    pub(crate) fn new(n: usize) -> MemberSet {
        let mut pri = Vec::with_capacity(n);
        for m in 0..n {
            // Fixed pseudo-random priorities keep the tree balanced and
            // the result a pure function of the request.
            let mut z = (m as u64 + 1).wrapping_mul(0x9e3779b97f4a7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
            pri.push((z ^ (z >> 31)) as u32);
        }
        MemberSet {
            key: vec![0; n],
            left: vec![-1; n],
            right: vec![-1; n],
            pri,
            root: -1,
            len: 0,
            stack: Vec::new(),
        }
    }

    /// The key of a member with count `size` and member-order rank `rank`.
    #[inline]
    pub(crate) fn key_of(size: i32, rank: i32) -> u64 {
        ((size as u32 as u64) << 32) | (rank as u32 as u64)
    }

    /// Inserts member m with key k below tree t and returns the new root
    /// of t.
    fn insert(&mut self, t: i32, m: i32, k: u64) -> i32 {
        if t < 0 {
            return m;
        }
        let tu = t as usize;
        if k < self.key[tu] {
            let l = self.insert(self.left[tu], m, k);
            self.left[tu] = l;
            if self.pri[l as usize] > self.pri[tu] {
                // rotate l up
                self.left[tu] = self.right[l as usize];
                self.right[l as usize] = t;
                return l;
            }
            return t;
        }
        let r = self.insert(self.right[tu], m, k);
        self.right[tu] = r;
        if self.pri[r as usize] > self.pri[tu] {
            self.right[tu] = self.left[r as usize];
            self.left[r as usize] = t;
            return r;
        }
        t
    }

    /// Joins a and b, every key of a being below every key of b.
    fn merge(&mut self, a: i32, b: i32) -> i32 {
        if a < 0 {
            return b;
        }
        if b < 0 {
            return a;
        }
        if self.pri[a as usize] > self.pri[b as usize] {
            let r = self.merge(self.right[a as usize], b);
            self.right[a as usize] = r;
            return a;
        }
        let l = self.merge(a, self.left[b as usize]);
        self.left[b as usize] = l;
        b
    }

    /// Inserts member m, which must not be in the set, under the key of
    /// (size, rank).
    pub(crate) fn add(&mut self, m: i32, size: i32, rank: i32) {
        let mu = m as usize;
        let k = MemberSet::key_of(size, rank);
        self.key[mu] = k;
        self.left[mu] = -1;
        self.right[mu] = -1;
        self.root = self.insert(self.root, m, k);
        self.len += 1;
    }

    /// Takes member m out of the set. Go panics when m is not in it,
    /// which the builder never asks; here that leaves the set unchanged
    /// (a panic would trap the plugin).
    pub(crate) fn remove(&mut self, m: i32) {
        let k = self.key[m as usize];
        // parent of the node being examined: -1 for the root link, and
        // whether the link is its left one.
        let mut parent = -1i32;
        let mut is_left = false;
        let mut t = self.root;
        while t != m {
            if t < 0 {
                return;
            }
            parent = t;
            if k < self.key[t as usize] {
                is_left = true;
                t = self.left[t as usize];
            } else {
                is_left = false;
                t = self.right[t as usize];
            }
        }
        let joined = self.merge(self.left[m as usize], self.right[m as usize]);
        if parent < 0 {
            self.root = joined;
        } else if is_left {
            self.left[parent as usize] = joined;
        } else {
            self.right[parent as usize] = joined;
        }
        self.len -= 1;
    }

    /// Returns the member with the smallest key, or -1.
    pub(crate) fn first(&self) -> i32 {
        let mut t = self.root;
        while t >= 0 && self.left[t as usize] >= 0 {
            t = self.left[t as usize];
        }
        t
    }

    /// Returns the member with the largest key, or -1.
    pub(crate) fn last(&self) -> i32 {
        let mut t = self.root;
        while t >= 0 && self.right[t as usize] >= 0 {
            t = self.right[t as usize];
        }
        t
    }

    /// Starts a walk in ascending (or, with desc, descending) key order.
    /// A walk may start while another runs: the inner one finds no
    /// scratch and allocates its own.
    pub(crate) fn walk(&mut self, desc: bool) -> SetWalk {
        let mut st = std::mem::take(&mut self.stack);
        st.clear();
        SetWalk { st, t: self.root, desc }
    }

    /// Returns the walk's next member, or -1 at its end.
    pub(crate) fn next(&self, w: &mut SetWalk) -> i32 {
        let (down, up) = if w.desc {
            (&self.right, &self.left)
        } else {
            (&self.left, &self.right)
        };
        while w.t >= 0 {
            w.st.push(w.t);
            w.t = down[w.t as usize];
        }
        match w.st.pop() {
            Some(t) => {
                w.t = up[t as usize];
                t
            }
            None => -1,
        }
    }

    /// Ends a walk, keeping its scratch for the next one.
    pub(crate) fn finish(&mut self, w: SetWalk) {
        self.stack = w.st;
    }

    /// Calls f with the members in ascending key order until f returns
    /// true, and returns that member, or -1.
    #[allow(dead_code)]
    pub(crate) fn ascend<F: FnMut(i32) -> bool>(&mut self, f: F) -> i32 {
        self.find(false, f)
    }

    /// Is ascend in descending key order.
    #[allow(dead_code)]
    pub(crate) fn descend<F: FnMut(i32) -> bool>(&mut self, f: F) -> i32 {
        self.find(true, f)
    }

    fn find<F: FnMut(i32) -> bool>(&mut self, desc: bool, mut f: F) -> i32 {
        let mut w = self.walk(desc);
        let mut found = -1;
        loop {
            let m = self.next(&mut w);
            if m < 0 {
                break;
            }
            if f(m) {
                found = m;
                break;
            }
        }
        self.finish(w);
        found
    }
}

/// Java's String.hashCode: over UTF-16 code units, h*31+c with int
/// overflow.
pub(crate) fn java_string_hash(s: &str) -> i32 {
    let mut h: i32 = 0;
    let mut buf = [0u16; 2];
    for c in s.chars() {
        for u in c.encode_utf16(&mut buf).iter() {
            h = h.wrapping_mul(31).wrapping_add(*u as i32);
        }
    }
    h
}

/// The bucket hash Java's HashMap uses for a TopicPartition:
/// TopicPartition.hashCode, 31*(31+partition) + topic.hashCode(), spread
/// by HashMap.hash (h ^ h>>>16).
pub(crate) fn tp_hash(topic_hash: i32, partition: i32) -> u32 {
    let h = 31i32
        .wrapping_mul(31i32.wrapping_add(partition))
        .wrapping_add(topic_hash) as u32;
    h ^ (h >> 16)
}

/// Reproduces the iteration order of a java.util.HashSet of
/// TopicPartitions that Kafka fills and empties one element at a time:
/// elements iterate by bucket (hash modulo the table size), and within a
/// bucket in insertion order. The table starts at 16 buckets on the first
/// insertion and doubles when the size exceeds three quarters of it, or
/// when a bucket that already chains 8 elements grows while the table has
/// fewer than 64 buckets; it never shrinks. (Buckets of 8 or more in a
/// table of 64 or more become trees in Java; their order is then not
/// reproduced, which needs 8 partitions of one topic whose hashes agree in
/// their low 6 or more bits to move between the same two members.)
#[derive(Default)]
pub(crate) struct JavaHashSet {
    pub(crate) elems: Vec<HashElem>,
    pub(crate) buckets: u32,
    seq: u64,
}

#[derive(Clone, Copy)]
pub(crate) struct HashElem {
    /// global partition number
    x: i32,
    hash: u32,
    seq: u64,
}

impl JavaHashSet {
    /// Inserts x, which must not be in the set, with its spread hash.
    pub(crate) fn add(&mut self, x: i32, hash: u32) {
        if self.buckets == 0 {
            self.buckets = 16;
        }
        let mask = self.buckets - 1;
        let chain = self
            .elems
            .iter()
            .filter(|e| e.hash & mask == hash & mask)
            .count();
        if chain >= 8 && self.buckets < 64 {
            self.buckets *= 2;
        }
        self.seq += 1;
        self.elems.push(HashElem {
            x,
            hash,
            seq: self.seq,
        });
        if self.elems.len() as u64 > (self.buckets / 4 * 3) as u64 {
            self.buckets *= 2;
        }
    }

    /// Deletes x when present.
    pub(crate) fn remove(&mut self, x: i32) {
        if let Some(i) = self.elems.iter().position(|e| e.x == x) {
            self.elems.remove(i);
        }
    }

    /// Returns the elements in insertion order, which with the table size
    /// decides every later iteration order.
    pub(crate) fn order(&self) -> Vec<i32> {
        self.elems.iter().map(|e| e.x).collect()
    }

    /// Reports whether the set holds exactly xs, inserted in that order.
    pub(crate) fn in_order(&self, xs: &[i32]) -> bool {
        xs.len() == self.elems.len() && self.elems.iter().zip(xs).all(|(e, &x)| e.x == x)
    }

    /// Returns the element a Java iterator yields first, or -1 for an
    /// empty set (Go requires it not to be empty).
    pub(crate) fn first(&self) -> i32 {
        if self.elems.is_empty() {
            return -1;
        }
        let mask = self.buckets.wrapping_sub(1);
        let mut best = 0;
        for i in 1..self.elems.len() {
            let (a, b) = (&self.elems[i], &self.elems[best]);
            let (ba, bb) = (a.hash & mask, b.hash & mask);
            if ba < bb || (ba == bb && a.seq < b.seq) {
                best = i;
            }
        }
        self.elems[best].x
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small deterministic generator for the tests (splitmix64), shared
    /// with general.rs.
    pub(crate) struct Rng(pub(crate) u64);
    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
            z ^ (z >> 31)
        }
        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    fn walk_all(s: &mut MemberSet, desc: bool) -> Vec<i32> {
        let mut out = Vec::new();
        let r = if desc {
            s.descend(|m| {
                out.push(m);
                false
            })
        } else {
            s.ascend(|m| {
                out.push(m);
                false
            })
        };
        assert_eq!(r, -1);
        out
    }

    /// Drives the treap through random count changes, as the general
    /// builder does (take a member out, change its count, put it back),
    /// and compares every walk with the members sorted by (count, member
    /// id) from scratch.
    #[test]
    fn member_set_keeps_kafkas_order_through_updates() {
        let mut rnd = Rng(34);
        for &n in &[1usize, 2, 7, 64, 300] {
            let mut size = vec![0i32; n];
            let mut rank: Vec<i32> = (0..n as i32).collect();
            for i in (1..n).rev() {
                let j = rnd.below(i + 1);
                rank.swap(i, j);
            }
            let mut s = MemberSet::new(n);
            let mut inside = vec![true; n];
            for m in 0..n {
                s.add(m as i32, size[m], rank[m]);
            }
            for step in 0..2000 {
                let m = rnd.below(n);
                if !inside[m] {
                    s.add(m as i32, size[m], rank[m]);
                    inside[m] = true;
                } else if rnd.below(10) == 0 {
                    s.remove(m as i32);
                    inside[m] = false;
                } else {
                    s.remove(m as i32);
                    size[m] = (size[m] + rnd.below(3) as i32 - 1).max(0);
                    s.add(m as i32, size[m], rank[m]);
                }
                let mut want: Vec<i32> = (0..n as i32).filter(|&m| inside[m as usize]).collect();
                want.sort_by_key(|&m| (size[m as usize], rank[m as usize]));
                let up = walk_all(&mut s, false);
                let mut down = walk_all(&mut s, true);
                down.reverse();
                assert!(
                    up == want && down == want && s.len == want.len(),
                    "n={} step {}: ascend {:?}, descend reversed {:?}, len {}; want {:?}",
                    n,
                    step,
                    up,
                    down,
                    s.len,
                    want
                );
                let first = want.first().copied().unwrap_or(-1);
                let last = want.last().copied().unwrap_or(-1);
                assert_eq!((s.first(), s.last()), (first, last), "n={} step {}", n, step);
            }
        }
    }

    /// A walk started while another runs (isBalanced looks for a topic's
    /// largest holder while it walks the lightest members) leaves the
    /// outer walk intact.
    #[test]
    fn member_set_walks_may_nest() {
        let size = [3, 1, 2, 5, 4];
        let mut s = MemberSet::new(5);
        for m in 0..5 {
            s.add(m, size[m as usize], m);
        }
        let mut outer = Vec::new();
        let mut w = s.walk(false);
        loop {
            let m = s.next(&mut w);
            if m < 0 {
                break;
            }
            outer.push(m);
            let inner = walk_all(&mut s, true);
            assert_eq!(inner, vec![3, 4, 0, 2, 1]);
        }
        s.finish(w);
        assert_eq!(outer, vec![1, 2, 0, 4, 3]);
    }

    /// Removing a member that is not in the set leaves it as it was
    /// instead of trapping.
    #[test]
    fn member_set_remove_of_an_absent_member_changes_nothing() {
        let mut s = MemberSet::new(3);
        s.add(0, 1, 0);
        s.add(2, 0, 2);
        s.remove(1);
        assert_eq!(walk_all(&mut s, false), vec![2, 0]);
        assert_eq!(s.len, 2);
    }

    /// String.hashCode values computed by Java, including a character
    /// outside the BMP (two UTF-16 units).
    #[test]
    fn java_string_hash_matches_java() {
        let tests: &[(&str, i32)] = &[
            ("", 0),
            ("t1", 3645),
            ("hello", 99162322),
            ("topic-with-a-long-name", -49133785),
            ("\u{1F600}", 1772899),
        ];
        for &(s, want) in tests {
            assert_eq!(java_string_hash(s), want, "java_string_hash({:?})", s);
        }
    }

    /// TopicPartition("t1", 5).hashCode() is 31*(31+5)+3645 = 4761,
    /// spread by h ^ h>>>16; a negative hash spreads its high bits.
    #[test]
    fn tp_hash_spreads_topic_partition_hash() {
        assert_eq!(tp_hash(3645, 5), 4761);
        let h = (31 * (31 + 2) + -49133785i32) as u32;
        assert_eq!(tp_hash(-49133785, 2), h ^ (h >> 16));
    }

    /// The iteration order rules the general builder relies on: the
    /// lowest bucket first, insertion order within a bucket, and buckets
    /// recomputed as the table grows past three quarters full.
    #[test]
    fn java_hash_set_iterates_by_bucket_then_insertion() {
        let mut s = JavaHashSet::default();
        // 17 and 1 share bucket 1 of 16, 2 is bucket 2.
        s.add(100, 17);
        s.add(101, 2);
        s.add(102, 1);
        assert_eq!(s.first(), 100, "bucket 1, inserted before 102");
        s.remove(100);
        assert_eq!(s.first(), 102);
        // Thirteen elements exceed 12 = 3/4 of 16: the table doubles to
        // 32, and hash 33 (bucket 1 of 32) now comes before 17 (bucket 17).
        let mut g = JavaHashSet::default();
        g.add(1, 17);
        for i in 0..11 {
            g.add(10 + i, 40 + i as u32);
        }
        assert_eq!(g.buckets, 16);
        assert_eq!(g.first(), 18, "hash 48, bucket 0");
        g.add(2, 33);
        assert_eq!(g.buckets, 32);
        assert_eq!(g.first(), 2, "bucket 1 of 32");
    }

    /// Eight elements chained in one bucket double a table below 64
    /// buckets when a ninth joins them, which reorders the buckets.
    #[test]
    fn java_hash_set_long_chain_doubles_small_table() {
        let mut s = JavaHashSet::default();
        for i in 0..8u32 {
            s.add(i as i32, 16 * (i + 1)); // all bucket 0 of 16
        }
        assert_eq!(s.buckets, 16);
        s.add(8, 16 * 9);
        assert_eq!(s.buckets, 32);
        // In 32 buckets, hashes 32, 64, ... (elements 1, 3, ...) stay in
        // bucket 0 and element 1 is the oldest there.
        assert_eq!(s.first(), 1);
    }

    #[test]
    fn java_hash_set_first_of_empty_is_none() {
        let s = JavaHashSet::default();
        assert_eq!(s.first(), -1);
    }
}

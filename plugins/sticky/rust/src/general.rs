//! The assignment for groups whose members do not all send the same
//! subscription: Kafka's GeneralAssignmentBuilder, restated partition by
//! partition so that it makes the same choices in the same order. This is
//! the port of general.go, whose file comment states Kafka's rules in the
//! order it applies them; the comments here name them by number:
//!
//!  1. Members keep the owned partitions of topics they still subscribe
//!     to (in rack mode, only rack-aligned ones); dropping any other one
//!     means a revocation is required.
//!  2. The partitions nobody kept are dealt in Kafka's partition order
//!     (topics by subscriber count, then name; partitions by id), each to
//!     the first subscriber by (partitions held, member id); in rack mode
//!     a rack-matching pass comes first.
//!  3. Topics with one subscriber, and members that can take part no
//!     further, are left out of step 4.
//!  4. The reassignment walks (fresh partitions unless a revocation is
//!     required, then all), with Kafka's previous-generation preference
//!     and its reversal of earlier movements; unlike Kafka, once a pass
//!     starts in a state an earlier pass started in, a reversal is taken
//!     only when the partition it moves back is held by the member giving
//!     one up.
//!  5. Moves that did not lower the balance score are undone when some
//!     member kept something.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::claims::{push_claim, Claim};
use crate::general_order::{java_string_hash, tp_hash, JavaHashSet, MemberSet};
use crate::group::Group;
use crate::rack::Racks;

/// A cheap multiplicative hasher for the builder's small integer keys: the
/// maps are looked up once per move, and SipHash's flood resistance buys
/// nothing against a request that is trusted to be a group's own.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
    #[inline]
    fn write_i32(&mut self, v: i32) {
        self.write_u64(v as u32 as u64);
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type KeyMap<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;

/// A global partition number with its topic rank.
#[derive(Clone, Copy)]
pub(crate) struct RankedPartition {
    pub(crate) x: i32,
    pub(crate) r: i32,
}

/// Names the partitions of a topic that moved from one member to another.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct MoveKey {
    pub(crate) rank: i32,
    pub(crate) from: i32,
    pub(crate) to: i32,
}

/// What decides the course of a pass of a walk: the holders, where each
/// partition was first taken from, and each movement set's table size and
/// elements in insertion order.
#[derive(Default)]
struct WalkState {
    holder: Vec<i32>,
    moved: Vec<i32>,
    moves: KeyMap<MoveKey, (u32, Vec<i32>)>,
}

/// The state of one general assignment.
pub(crate) struct General<'g, 'a> {
    pub(crate) g: &'g Group<'a>,
    pub(crate) rk: Option<&'g Racks>,

    /// Per global partition: the member holding it, or -1.
    pub(crate) holder: Vec<i32>,
    /// Per global partition: Kafka's prevAssignment, or -1; None when empty.
    pub(crate) prev: Option<Vec<i32>>,
    /// Per member: partitions held.
    pub(crate) size: Vec<i32>,
    /// Per member: partitions of the topics it subscribes to.
    pub(crate) most: Vec<i32>,
    /// held[entry[m]+i] counts the partitions member m holds of its i-th
    /// subscribed topic.
    pub(crate) entry: Vec<i32>,
    pub(crate) held: Vec<i32>,
    /// Per rank: number of subscribers.
    pub(crate) subs: Vec<i32>,
    /// bits[m*words..(m+1)*words] has bit r set when member m subscribes
    /// to rank r: the member scans ask that of every member they pass.
    /// Empty (has_bits false) for groups too large for it, which then
    /// search the member's list.
    pub(crate) bits: Vec<u64>,
    pub(crate) has_bits: bool,
    pub(crate) words: usize,
    /// member_list[member_start[r]..member_start[r+1]] are rank r's
    /// subscribers.
    pub(crate) member_start: Vec<i32>,
    pub(crate) member_list: Vec<i32>,
    /// Per member: takes no part in step 4.
    pub(crate) fixed: Vec<bool>,
    pub(crate) set: MemberSet,

    /// The ranks in Kafka's partition order (rule 2).
    pub(crate) order: Vec<i32>,

    /// moved[x] is the member partition x was first taken from in this
    /// rebalance, or -1; moves are the partitions that went from one
    /// member to another per (topic, from, to): Kafka's
    /// PartitionMovements.
    pub(crate) moved: Vec<i32>,
    pub(crate) moves: KeyMap<MoveKey, JavaHashSet>,
    /// Counts what members hold of topics they do not subscribe to, per
    /// (member, rank); strays is set once that happened (see walk).
    pub(crate) off: KeyMap<(i32, i32), i32>,
    pub(crate) strays: bool,
    /// Per rank: Java hash code of the topic name.
    pub(crate) topic_hash: Vec<i32>,
    /// Pairs (partition, member it was taken from).
    pub(crate) undo: Vec<i32>,
    /// Set once a walk came back to a state it had been in, where Kafka
    /// would loop for ever (see walk).
    pub(crate) cycled: bool,
    /// Counts moves, to cache what depends on counts.
    pub(crate) version: i32,
    pub(crate) bal_version: i32,
    pub(crate) balanced: bool,
    /// Per rank, cached for one version: the first subscriber by (count,
    /// member id), and the largest count among members holding some of it.
    pub(crate) min_sub: Vec<i32>,
    pub(crate) min_ver: Vec<i32>,
    pub(crate) max_hold: Vec<i32>,
    pub(crate) max_ver: Vec<i32>,
}

impl<'a> Group<'a> {
    /// Assigns a group whose members do not all send the same
    /// subscription, as Kafka's GeneralAssignmentBuilder does; see the
    /// comment at the top of this file.
    pub(crate) fn assign_general(&mut self, kept: &[Claim], rk: Option<&Racks>) -> Vec<Claim> {
        let n = self.req.members.len();
        let nt = self.by_rank.len();
        if n == 0 || nt == 0 {
            return Vec::new();
        }
        let total = self.base[nt] as usize;
        let holder = vec![-1i32; total];
        // Go computes this after rule 1; it reads only holder's length, and
        // it needs the group mutably (claims caches topic-list spans).
        let prev = self.previous_generation(&holder);
        let g: &Group<'a> = self;

        let mut s = General {
            g,
            rk,
            holder,
            prev,
            size: vec![0; n],
            most: vec![0; n],
            entry: vec![0; n + 1],
            held: Vec::new(),
            subs: vec![0; nt],
            bits: Vec::new(),
            has_bits: false,
            words: 0,
            member_start: Vec::new(),
            member_list: Vec::new(),
            fixed: Vec::new(),
            set: MemberSet::new(n),
            order: Vec::new(),
            moved: Vec::new(),
            moves: KeyMap::default(),
            off: KeyMap::default(),
            strays: false,
            topic_hash: Vec::new(),
            undo: Vec::new(),
            cycled: false,
            version: 0,
            bal_version: -1,
            balanced: false,
            min_sub: Vec::new(),
            min_ver: Vec::new(),
            max_hold: Vec::new(),
            max_ver: Vec::new(),
        };
        for m in 0..n {
            let ts = g.member_topics(m as i32);
            s.entry[m + 1] = s.entry[m] + ts.len() as i32;
            for &r in ts {
                s.subs[r as usize] += 1;
                s.most[m] += g.partitions(r);
            }
        }
        s.held = vec![0; s.entry[n] as usize];
        s.words = (nt + 63) / 64;
        if (n as u64) * (s.words as u64) <= 1 << 20 {
            s.bits = vec![0; n * s.words];
            s.has_bits = true;
            for m in 0..n {
                for &r in g.member_topics(m as i32) {
                    s.bits[m * s.words + (r / 64) as usize] |= 1u64 << (r % 64);
                }
            }
        }
        s.order = g.all_ranks();
        {
            let subs = &s.subs;
            s.order.sort_by_key(|&r| subs[r as usize]); // stable
        }

        // Rule 1.
        let mut revocation = false;
        for c in kept {
            let mut r = g.topic_at(c.start);
            let mut e = s.entry_of(c.member, r);
            let stride = c.stride();
            for k in 0..c.n {
                let x = c.start + k * stride;
                if x >= g.base[r as usize + 1] {
                    // A strided run may go on into later topics.
                    r = g.topic_at(x);
                    e = s.entry_of(c.member, r);
                }
                if e < 0 {
                    revocation = true;
                    continue;
                }
                if let Some(rk) = rk {
                    if !rk.matches(c.member, g.replica_set(r, x - g.base[r as usize])) {
                        revocation = true;
                        continue;
                    }
                }
                s.holder[x as usize] = c.member;
                s.held[e as usize] += 1;
                s.size[c.member as usize] += 1;
            }
        }

        // Rule 2.
        // unassigned lists the partitions nobody kept, each with its rank.
        let mut unassigned: Vec<RankedPartition> = Vec::new();
        for &r in &s.order {
            for x in g.base[r as usize]..g.base[r as usize + 1] {
                if s.holder[x as usize] < 0 {
                    unassigned.push(RankedPartition { x, r });
                }
            }
        }
        let initializing = s.size.iter().all(|&c| c <= 0);
        s.topic_members();
        if rk.is_some() {
            s.deal(&unassigned, true);
        }
        s.deal(&unassigned, false);
        for m in 0..n as i32 {
            s.set_add(m);
        }

        // Rule 3.
        s.fixed = vec![false; n];
        for m in 0..n as i32 {
            if !s.participates(m) {
                s.fixed[m as usize] = true;
                s.set.remove(m);
            }
        }
        {
            let subs = &s.subs;
            s.order.retain(|&r| subs[r as usize] >= 2);
        }
        let fresh: Vec<RankedPartition> = unassigned
            .iter()
            .copied()
            .filter(|p| s.subs[p.r as usize] >= 2)
            .collect();
        drop(unassigned);

        // Rules 4 and 5.
        s.moved = vec![-1; total];
        s.topic_hash = g
            .by_rank
            .iter()
            .map(|&t| java_string_hash(&g.req.topics[t as usize].name))
            .collect();
        s.min_sub = vec![0; nt];
        s.min_ver = vec![-1; nt];
        s.max_hold = vec![0; nt];
        s.max_ver = vec![-1; nt];
        s.bal_version = -1;
        let before = s.score();
        if !revocation {
            s.walk(Some(&fresh));
        }
        let performed = s.walk(None);
        if !initializing && performed && s.score() >= before {
            let mut i = s.undo.len() as isize - 2;
            while i >= 0 {
                let x = s.undo[i as usize];
                s.holder[x as usize] = s.undo[i as usize + 1];
                i -= 2;
            }
        } else if s.strays {
            s.repair();
        }
        s.runs()
    }
}

impl<'g, 'a> General<'g, 'a> {
    /// Adds member m to the member set under its current count.
    #[inline]
    fn set_add(&mut self, m: i32) {
        let (size, rank) = (self.size[m as usize], self.g.rank[m as usize]);
        self.set.add(m, size, rank);
    }

    /// Reports whether member m subscribes to rank r.
    #[inline]
    pub(crate) fn subscribes(&self, m: i32, r: i32) -> bool {
        if self.has_bits {
            let i = m as usize * self.words + (r / 64) as usize;
            return self.bits[i] & (1u64 << (r % 64)) != 0;
        }
        self.entry_of(m, r) >= 0
    }

    /// Returns the index in held of member m's count for rank r, or -1
    /// when m does not subscribe to r.
    #[inline]
    pub(crate) fn entry_of(&self, m: i32, r: i32) -> i32 {
        match self.g.member_topics(m).binary_search(&r) {
            Ok(i) => self.entry[m as usize] + i as i32,
            Err(_) => -1,
        }
    }

    /// Lists each rank's subscribers: member_list[member_start[r]..
    /// member_start[r+1]].
    pub(crate) fn topic_members(&mut self) {
        let g = self.g;
        let nt = g.by_rank.len();
        self.member_start = vec![0; nt + 1];
        for r in 0..nt {
            self.member_start[r + 1] = self.member_start[r] + self.subs[r];
        }
        self.member_list = vec![0; self.member_start[nt] as usize];
        let mut next: Vec<i32> = self.member_start[..nt].to_vec();
        for m in 0..self.size.len() as i32 {
            for &r in g.member_topics(m) {
                self.member_list[next[r as usize] as usize] = m;
                next[r as usize] += 1;
            }
        }
    }

    /// One of rule 2's dealing passes over unassigned (grouped by rank, in
    /// Kafka's order): each partition still free goes to the first member,
    /// by (count, member id), that subscribes to its topic; in the rack
    /// pass (on_racks) only to one on a rack of its replicas or without a
    /// rack, and it stays free when there is none. Only a topic's
    /// subscribers can take its partitions, and only their counts change
    /// while it is dealt, so a heap of them per topic (per rack in the rack
    /// pass) gives the member Kafka's scan of its whole member set finds.
    pub(crate) fn deal(&mut self, unassigned: &[RankedPartition], on_racks: bool) {
        let g = self.g;
        let rk = match (on_racks, self.rk) {
            (true, Some(rk)) => Some(rk),
            (true, None) => return,
            _ => None,
        };
        let nh = match rk {
            Some(rk) => rk.consumer_racks + 1, // the last: members without a rack
            None => 1,
        };
        let mut heaps: Vec<Vec<u64>> = (0..nh).map(|_| Vec::new()).collect();
        let mut i = 0;
        while i < unassigned.len() {
            let r = unassigned[i].r;
            let mut j = i;
            while j < unassigned.len() && unassigned[j].r == r {
                j += 1;
            }
            for h in heaps.iter_mut() {
                h.clear();
            }
            let (ms, me) = (self.member_start[r as usize] as usize, self.member_start[r as usize + 1] as usize);
            for &m in &self.member_list[ms..me] {
                let mut k = 0usize;
                if let Some(rk) = rk {
                    let id = rk.member[m as usize];
                    k = if id < 0 { nh - 1 } else { id as usize };
                }
                heaps[k].push(((self.size[m as usize] as u32 as u64) << 32) | g.rank[m as usize] as u32 as u64);
            }
            for h in heaps.iter_mut() {
                heap_init(h);
            }
            for p in &unassigned[i..j] {
                if self.holder[p.x as usize] >= 0 {
                    continue;
                }
                let mut h = 0usize;
                if let Some(rk) = rk {
                    h = nh - 1;
                    let heaps = &heaps;
                    rk.each_rack(g.replica_set(r, p.x - g.base[r as usize]), |k: i32| {
                        let c = &heaps[k as usize];
                        if !c.is_empty() && (heaps[h].is_empty() || c[0] < heaps[h][0]) {
                            h = k as usize;
                        }
                    });
                }
                if heaps[h].is_empty() {
                    continue;
                }
                let m = g.order[heaps[h][0] as u32 as usize];
                self.holder[p.x as usize] = m;
                let e = self.entry_of(m, r);
                self.held[e as usize] += 1;
                self.size[m as usize] += 1;
                heaps[h][0] += 1 << 32;
                heap_down(&mut heaps[h], 0);
            }
            i = j;
        }
    }

    /// Kafka's canConsumerParticipateInReassignment: member m can still
    /// gain partitions, or holds some of a topic with two or more
    /// subscribers.
    pub(crate) fn participates(&self, m: i32) -> bool {
        let mu = m as usize;
        if self.size[mu] < self.most[mu] {
            return true;
        }
        let e = self.entry[mu] as usize;
        for (i, &r) in self.g.member_topics(m).iter().enumerate() {
            if self.held[e + i] > 0 && self.subs[r as usize] >= 2 {
                return true;
            }
        }
        false
    }

    /// Kafka's getBalanceScore over the members that take part: the sum
    /// over all pairs of the difference of their counts, in Java int
    /// arithmetic.
    pub(crate) fn score(&mut self) -> i32 {
        // The counts ascend: member i is above the i before it and below
        // the k-1-i after it.
        let k = self.set.len as i64;
        let mut sum: i64 = 0;
        let mut i: i64 = 0;
        let mut w = self.set.walk(false);
        loop {
            let m = self.set.next(&mut w);
            if m < 0 {
                break;
            }
            sum = sum.wrapping_add((self.size[m as usize] as i64).wrapping_mul(2 * i - k + 1));
            i += 1;
        }
        self.set.finish(w);
        sum as i32
    }

    /// Kafka's performReassignments over the partitions of fresh, or (None)
    /// of every rank of order, in that order: it reports whether it moved
    /// anything. Deliberately unlike Kafka, which can repeat a cycle of
    /// passes for ever, it sets cycled when a pass starts in the state an
    /// earlier pass started in (saved at passes 1, 2, 4, 8, ...: Brent's
    /// cycle detection), which restricts reassign's reversals so that the
    /// walks end, as general.go's walk explains.
    pub(crate) fn walk(&mut self, fresh: Option<&[RankedPartition]>) -> bool {
        let g = self.g;
        let mut performed = false;
        let mut seen = WalkState::default();
        let mut pass: u64 = 0;
        loop {
            pass += 1;
            if pass > 1 && !self.cycled && self.in_state(&seen) {
                self.cycled = true;
            }
            if pass & (pass - 1) == 0 {
                self.save_state(&mut seen);
            }
            let mut modified = false;
            match fresh {
                Some(parts) => {
                    for p in parts {
                        match self.step(p.x, p.r) {
                            None => break,
                            Some(true) => modified = true,
                            Some(false) => {}
                        }
                    }
                }
                None => {
                    'ranks: for i in 0..self.order.len() {
                        let r = self.order[i];
                        for x in g.base[r as usize]..g.base[r as usize + 1] {
                            match self.step(x, r) {
                                None => break 'ranks,
                                Some(true) => modified = true,
                                Some(false) => {}
                            }
                        }
                    }
                }
            }
            if !modified {
                return performed;
            }
            performed = true;
        }
    }

    /// Copies the walk's current state into w.
    fn save_state(&self, w: &mut WalkState) {
        w.holder.clear();
        w.holder.extend_from_slice(&self.holder);
        w.moved.clear();
        w.moved.extend_from_slice(&self.moved);
        w.moves.clear();
        for (k, set) in &self.moves {
            w.moves.insert(*k, (set.buckets, set.order()));
        }
    }

    /// Reports whether the walk is in state w.
    fn in_state(&self, w: &WalkState) -> bool {
        if self.holder != w.holder || self.moved != w.moved || self.moves.len() != w.moves.len() {
            return false;
        }
        w.moves.iter().all(|(k, (buckets, xs))| match self.moves.get(k) {
            Some(set) => set.buckets == *buckets && set.in_order(xs),
            None => false,
        })
    }

    /// One partition of a walk: None when the group is balanced (the walk
    /// stops), else whether partition x of rank r moved.
    fn step(&mut self, x: i32, r: i32) -> Option<bool> {
        if self.is_balanced() {
            return None;
        }
        let c = self.holder[x as usize];
        if c < 0 {
            // Every partition is dealt before the walks; Go would fail here.
            return Some(false);
        }
        if let Some(prev) = &self.prev {
            // Kafka does not check that the previous owner still
            // subscribes to the topic; the partition may then pass through
            // it, and repair settles what stays there. (A previous owner
            // that takes no part in step 4 makes Kafka fail; it is passed
            // over.)
            let p = prev[x as usize];
            if p >= 0 && !self.fixed[p as usize] && self.size[c as usize] > self.size[p as usize] + 1 {
                self.reassign(x, r, p);
                return Some(true);
            }
        }
        let to = self.first_subscriber(r);
        if to >= 0 && self.size[c as usize] > self.size[to as usize] + 1 {
            self.reassign(x, r, to);
            return Some(true);
        }
        Some(false)
    }

    /// Returns the first member taking part, in ascending (or, with desc,
    /// descending) order of (count, member id), for which pred holds, or
    /// -1: the set's ascend and descend in general.go.
    fn first_where(&mut self, desc: bool, pred: impl Fn(&Self, i32) -> bool) -> i32 {
        let mut w = self.set.walk(desc);
        let found = loop {
            let m = self.set.next(&mut w);
            if m < 0 || pred(self, m) {
                break m;
            }
        };
        self.set.finish(w);
        found
    }

    /// Returns the first member, by (count, member id), taking part in
    /// step 4 that subscribes to rank r.
    pub(crate) fn first_subscriber(&mut self, r: i32) -> i32 {
        let ru = r as usize;
        if self.min_ver[ru] != self.version {
            self.min_ver[ru] = self.version;
            self.min_sub[ru] = self.first_where(false, |s, m| s.subscribes(m, r));
        }
        self.min_sub[ru]
    }

    /// Returns the largest count among the members taking part that hold
    /// a partition of rank r, or -1.
    pub(crate) fn most_held(&mut self, r: i32) -> i32 {
        let ru = r as usize;
        if self.max_ver[ru] != self.version {
            self.max_ver[ru] = self.version;
            let found = self.first_where(true, |s, m| s.holds(m, r));
            self.max_hold[ru] = if found >= 0 { self.size[found as usize] } else { -1 };
        }
        self.max_hold[ru]
    }

    /// Kafka's isBalanced over the members taking part: their counts
    /// differ by at most one, or no member that could take more subscribes
    /// to a topic some member holding two or more partitions more than it
    /// has a partition of.
    pub(crate) fn is_balanced(&mut self) -> bool {
        if self.bal_version == self.version {
            return self.balanced;
        }
        self.bal_version = self.version;
        self.balanced = true;
        let (lo, hi) = (self.set.first(), self.set.last());
        if lo < 0 || self.size[lo as usize] >= self.size[hi as usize] - 1 {
            return true;
        }
        let g = self.g;
        let top = self.size[hi as usize];
        let mut w = self.set.walk(false);
        'members: loop {
            let m = self.set.next(&mut w);
            if m < 0 {
                break;
            }
            let sm = self.size[m as usize];
            if sm >= top - 1 {
                break; // no holder can have two more than m
            }
            if sm == self.most[m as usize] {
                continue;
            }
            for &r in g.member_topics(m) {
                if self.most_held(r) > sm + 1 {
                    self.balanced = false;
                    break 'members;
                }
            }
        }
        self.set.finish(w);
        self.balanced
    }

    /// Kafka's reassignPartition: partition x of rank r is to go to member
    /// to, unless an earlier move took a partition of r from to towards
    /// x's original holder, in which case that one goes back instead (once
    /// the walk has cycled, only when x's holder holds it; see walk).
    pub(crate) fn reassign(&mut self, mut x: i32, r: i32, to: i32) {
        let mut from = self.holder[x as usize];
        let o = self.moved[x as usize];
        if o >= 0 {
            from = o;
        }
        if let Some(back) = self.moves.get(&MoveKey { rank: r, from: to, to: from }) {
            let y = back.first();
            if y >= 0 && (!self.cycled || self.holder[y as usize] == self.holder[x as usize]) {
                x = y;
            }
        }
        self.move_partition(x, r, to);
    }

    /// Kafka's processPartitionMovement (Go's general.move): partition x
    /// of rank r goes to member to, and the movement records follow.
    pub(crate) fn move_partition(&mut self, x: i32, r: i32, to: i32) {
        let xu = x as usize;
        let from = self.holder[xu];
        self.set.remove(from);
        self.set.remove(to);
        let o = self.moved[xu];
        if o >= 0 {
            self.forget(MoveKey { rank: r, from: o, to: from }, x);
            if o != to {
                self.record(MoveKey { rank: r, from: o, to }, x);
            } else {
                self.moved[xu] = -1;
            }
        } else {
            self.record(MoveKey { rank: r, from, to }, x);
            self.moved[xu] = from;
        }
        self.count(from, r, -1);
        self.count(to, r, 1);
        self.size[from as usize] -= 1;
        self.size[to as usize] += 1;
        self.holder[xu] = to;
        self.undo.push(x);
        self.undo.push(from);
        self.set_add(to);
        self.set_add(from);
        self.version = self.version.wrapping_add(1);
    }

    /// Adds d to what member m holds of rank r, which m may not subscribe
    /// to (see walk).
    pub(crate) fn count(&mut self, m: i32, r: i32, d: i32) {
        let e = self.entry_of(m, r);
        if e >= 0 {
            self.held[e as usize] += d;
            return;
        }
        let k = (m, r);
        let v = {
            let v = self.off.entry(k).or_insert(0);
            *v += d;
            *v
        };
        if v == 0 {
            self.off.remove(&k);
        }
        self.strays = true;
    }

    /// Reports whether member m holds a partition of rank r.
    pub(crate) fn holds(&self, m: i32, r: i32) -> bool {
        let e = self.entry_of(m, r);
        if e >= 0 {
            return self.held[e as usize] > 0;
        }
        !self.off.is_empty() && self.off.get(&(m, r)).map_or(false, |&v| v > 0)
    }

    /// Hands every partition held by a member that does not subscribe to
    /// its topic (Kafka's answer would leave it there) to the first
    /// subscriber by (count, member id), in Kafka's partition order.
    pub(crate) fn repair(&mut self) {
        let g = self.g;
        for i in 0..self.order.len() {
            let r = self.order[i];
            for x in g.base[r as usize]..g.base[r as usize + 1] {
                let xu = x as usize;
                let c = self.holder[xu];
                if c < 0 || self.entry_of(c, r) >= 0 {
                    continue;
                }
                self.moved[xu] = -1; // no movement record: this is not Kafka's move
                let to = self.first_subscriber(r);
                if to < 0 {
                    continue; // a topic of the walks always has one
                }
                self.set.remove(c);
                self.set.remove(to);
                self.count(c, r, -1);
                self.count(to, r, 1);
                self.size[c as usize] -= 1;
                self.size[to as usize] += 1;
                self.holder[xu] = to;
                self.set_add(to);
                self.set_add(c);
                self.version = self.version.wrapping_add(1);
            }
        }
    }

    pub(crate) fn record(&mut self, k: MoveKey, x: i32) {
        let h = tp_hash(self.topic_hash[k.rank as usize], x - self.g.base[k.rank as usize]);
        self.moves.entry(k).or_insert_with(JavaHashSet::default).add(x, h);
    }

    /// Removes x from the movements k; a set left empty is dropped, so
    /// that the next one starts afresh as Kafka's does.
    pub(crate) fn forget(&mut self, k: MoveKey, x: i32) {
        let empty = match self.moves.get_mut(&k) {
            Some(set) => {
                set.remove(x);
                set.elems.is_empty()
            }
            None => false,
        };
        if empty {
            self.moves.remove(&k);
        }
    }

    /// Returns the assignment as runs, member by member: each member's
    /// partitions in ascending order, joined into progressions where they
    /// continue one (Kafka's dealing gives a member every k-th partition,
    /// topic after topic), which keeps the response as compact as the
    /// uniform path's.
    pub(crate) fn runs(&self) -> Vec<Claim> {
        let g = self.g;
        let n = self.size.len();
        let mut start = vec![0usize; n + 1];
        for &m in &self.holder {
            if m >= 0 {
                start[m as usize + 1] += 1;
            }
        }
        for m in 0..n {
            start[m + 1] += start[m];
        }
        let mut next: Vec<usize> = start[..n].to_vec();
        let mut by_member = vec![RankedPartition { x: 0, r: 0 }; start[n]];
        for r in 0..g.by_rank.len() {
            for x in g.base[r]..g.base[r + 1] {
                let m = self.holder[x as usize];
                if m >= 0 {
                    by_member[next[m as usize]] = RankedPartition { x, r: r as i32 };
                    next[m as usize] += 1;
                }
            }
        }
        let mut out = Vec::new();
        for m in 0..n {
            for p in &by_member[start[m]..start[m + 1]] {
                push_claim(&mut out, Claim { start: p.x, n: 1, gap: 0, member: m as i32, gen: 0, topic: p.r });
            }
        }
        out
    }
}

/// Builds a binary min-heap of packed (count, member rank) keys in place.
fn heap_init(h: &mut [u64]) {
    let mut i = h.len() / 2;
    while i > 0 {
        i -= 1;
        heap_down(h, i);
    }
}

/// Restores the heap below i after h[i] grew.
fn heap_down(h: &mut [u64], mut i: usize) {
    loop {
        let mut l = 2 * i + 1;
        if l >= h.len() {
            return;
        }
        let r = l + 1;
        if r < h.len() && h[r] < h[l] {
            l = r;
        }
        if h[i] <= h[l] {
            return;
        }
        h.swap(i, l);
        i = l;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use wasmassign::{Broker, Member, Partition, Request, Response, Topic, TopicPartitions};

    use crate::general_order::tests::Rng;
    use crate::group::Group;

    /// Builds a request over topics (name, partition count) and members
    /// (id, subscribed topic names), topics and members in reverse order so
    /// that no test relies on request order.
    fn request(topics: &[(&str, i32)], members: &[(&str, &[&str])]) -> Request {
        let mut req = Request { group_id: "g".into(), generation: 5, ..Default::default() };
        for &(name, n) in topics.iter().rev() {
            req.topics.push(Topic { name: name.into(), exists: true, partition_count: n, ..Default::default() });
        }
        for &(id, subs) in members.iter().rev() {
            let mut ts: Vec<u32> = subs.iter().map(|s| topic_index(&req, s)).collect();
            ts.sort_unstable();
            ts.dedup();
            req.members.push(Member { member_id: id.into(), topics: ts, owned_generation: -1, ..Default::default() });
        }
        req
    }

    fn topic_index(req: &Request, name: &str) -> u32 {
        req.topics.iter().position(|t| t.name == name).expect("test names a known topic") as u32
    }

    /// The partitions "topic-p" as TopicPartitions entries of req.
    fn tps(req: &Request, parts: &[&str]) -> Vec<TopicPartitions> {
        let mut by: BTreeMap<u32, Vec<i32>> = BTreeMap::new();
        for s in parts {
            let i = s.rfind('-').expect("topic-partition");
            by.entry(topic_index(req, &s[..i])).or_default().push(s[i + 1..].parse().expect("partition id"));
        }
        by.into_iter().map(|(topic, partitions)| TopicPartitions { topic, partitions, list: false }).collect()
    }

    /// Per member id, the sorted (topic name, partition) pairs resp gives it.
    fn by_member(req: &Request, resp: &Response) -> BTreeMap<String, Vec<(String, i32)>> {
        let mut out: BTreeMap<String, Vec<(String, i32)>> = BTreeMap::new();
        for m in &req.members {
            out.insert(m.member_id.clone(), Vec::new());
        }
        for a in &resp.assignments {
            let v = out.get_mut(&req.members[a.member as usize].member_id).expect("assignment names a member");
            for tp in &a.partitions {
                assert!(!tp.list, "a plain request must get a plain response");
                for &p in &tp.partitions {
                    v.push((req.topics[tp.topic as usize].name.clone(), p));
                }
            }
        }
        for v in out.values_mut() {
            v.sort();
        }
        out
    }

    /// Checks that resp gives every partition of every existing topic some
    /// member subscribes to exactly once, to a subscriber, and nothing else;
    /// and returns each member's partition count.
    fn check_valid(req: &Request, resp: &Response) -> Vec<usize> {
        let mut owner: BTreeMap<(u32, i32), u32> = BTreeMap::new();
        let mut count = vec![0usize; req.members.len()];
        for a in &resp.assignments {
            let m = &req.members[a.member as usize];
            for tp in &a.partitions {
                let t = &req.topics[tp.topic as usize];
                assert!(m.subscribes(tp.topic), "{} got {} without subscribing", m.member_id, t.name);
                for &p in &tp.partitions {
                    assert!(t.exists && p >= 0 && p < t.partition_count, "{} got {}-{}", m.member_id, t.name, p);
                    let prev = owner.insert((tp.topic, p), a.member);
                    assert!(prev.is_none(), "{}-{} assigned twice", t.name, p);
                    count[a.member as usize] += 1;
                }
            }
        }
        for (t, topic) in req.topics.iter().enumerate() {
            if !topic.exists || !req.members.iter().any(|m| m.subscribes(t as u32)) {
                continue;
            }
            for p in 0..topic.partition_count.max(0) {
                assert!(owner.contains_key(&(t as u32, p)), "{}-{} unassigned", topic.name, p);
            }
        }
        count
    }

    /// Kafka's balance check (verifyValidityAndBalance): when two members'
    /// counts differ by two or more, the lighter one subscribes to no
    /// topic the heavier one holds a partition of.
    fn check_balanced(req: &Request, resp: &Response) {
        let count = check_valid(req, resp);
        let mut holds: Vec<Vec<u32>> = vec![Vec::new(); req.members.len()];
        for a in &resp.assignments {
            for tp in &a.partitions {
                if !tp.partitions.is_empty() {
                    holds[a.member as usize].push(tp.topic);
                }
            }
        }
        for a in 0..count.len() {
            for b in 0..count.len() {
                if count[a] >= count[b] + 2 {
                    for &t in &holds[a] {
                        assert!(
                            !req.members[b].subscribes(t),
                            "{} holds {} partitions, {} only {}, and it subscribes to {}",
                            req.members[a].member_id,
                            count[a],
                            req.members[b].member_id,
                            count[b],
                            req.topics[t as usize].name
                        );
                    }
                }
            }
        }
    }

    fn assign(req: &Request, cooperative: bool) -> Response {
        let resp = if cooperative { crate::assign_cooperative(req) } else { crate::assign_sticky(req) };
        resp.expect("the assignor accepts a well-formed request")
    }

    /// Kafka's prevAssignment: per partition, the claim of the highest
    /// generation below the newest any member reports, where a member that
    /// owns nothing still counts towards the newest.
    #[test]
    fn previous_generation_is_the_newest_older_claim() {
        for &cooperative in &[false, true] {
            let all: &[&str] = &["t"];
            let mut req = request(&[("t", 3)], &[("a", all), ("b", all), ("c", all), ("d", all)]);
            let owned: &[(&str, i32, &[&str])] =
                &[("a", 3, &["t-0"]), ("b", 2, &["t-0", "t-1"]), ("c", 1, &["t-1", "t-2"]), ("d", 4, &[])];
            for &(id, gen, parts) in owned {
                let list = tps(&req, parts);
                let m = req.members.iter_mut().find(|m| m.member_id == id).expect("member");
                if cooperative {
                    m.owned = list;
                    m.owned_generation = gen;
                } else {
                    m.user_data = sticky_user_data("t", &list, gen);
                }
            }
            let mut g = Group::new(&req).expect("valid request");
            g.cooperative = cooperative;
            let prev = g.previous_generation(&[0, 0, 0]).expect("some partition has an older claim");
            let got: Vec<&str> = prev.iter().map(|&m| req.members[m as usize].member_id.as_str()).collect();
            // d's generation 4 makes a's claim (3) an older one too.
            assert_eq!(got, vec!["a", "b", "c"], "cooperative={}", cooperative);
        }
    }

    /// Every member in one generation: no partition has a previous owner.
    #[test]
    fn previous_generation_is_none_when_generations_agree() {
        let all: &[&str] = &["t"];
        let mut req = request(&[("t", 2)], &[("a", all), ("b", all)]);
        for (i, m) in req.members.iter_mut().enumerate() {
            m.owned = vec![TopicPartitions { topic: 0, partitions: vec![i as i32], list: false }];
            m.owned_generation = 4;
        }
        let mut g = Group::new(&req).expect("valid request");
        g.cooperative = true;
        assert!(g.previous_generation(&[0, 0]).is_none());
    }

    /// v1 StickyAssignor user data for partitions of one topic.
    fn sticky_user_data(topic: &str, list: &[TopicPartitions], gen: i32) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&(list.len() as i32).to_be_bytes());
        for tp in list {
            b.extend_from_slice(&(topic.len() as i16).to_be_bytes());
            b.extend_from_slice(topic.as_bytes());
            b.extend_from_slice(&(tp.partitions.len() as i32).to_be_bytes());
            for p in &tp.partitions {
                b.extend_from_slice(&p.to_be_bytes());
            }
        }
        b.extend_from_slice(&gen.to_be_bytes());
        b
    }

    /// AbstractStickyAssignorTest#testMultipleConsumersMixedTopicSubscriptions:
    /// Kafka's exact answer for a group with different subscriptions.
    #[test]
    fn mixed_subscriptions_give_kafkas_assignment() {
        let req = request(
            &[("topic1", 3), ("topic2", 2)],
            &[("consumer1", &["topic1"]), ("consumer2", &["topic1", "topic2"]), ("consumer3", &["topic1"])],
        );
        for &cooperative in &[false, true] {
            let got = by_member(&req, &assign(&req, cooperative));
            let want: BTreeMap<String, Vec<(String, i32)>> = [
                ("consumer1", vec![("topic1", 0), ("topic1", 2)]),
                ("consumer2", vec![("topic2", 0), ("topic2", 1)]),
                ("consumer3", vec![("topic1", 1)]),
            ]
            .iter()
            .map(|(m, ps)| (m.to_string(), ps.iter().map(|&(t, p)| (t.to_string(), p)).collect()))
            .collect();
            assert_eq!(got, want, "cooperative={}", cooperative);
        }
    }

    /// Kafka's testReassignmentWithRandomSubscriptionsAndChanges, a few
    /// rounds: a random group with different subscriptions, then new random
    /// subscriptions with each member owning its first assignment; both
    /// answers must be valid and balanced as Kafka's test defines it.
    #[test]
    fn random_subscriptions_and_changes_stay_valid_and_balanced() {
        let mut rnd = Rng(77);
        for round in 0..40 {
            let cooperative = round % 2 == 1;
            let nt = 10 + rnd.below(10);
            let names: Vec<String> = (0..nt).map(|i| format!("t{:02}", i)).collect();
            let mut req = Request { group_id: "g".into(), generation: 2, ..Default::default() };
            for (i, n) in names.iter().enumerate() {
                req.topics.push(Topic { name: n.clone(), exists: true, partition_count: i as i32 + 1, ..Default::default() });
            }
            let nc = 20 + rnd.below(20);
            for i in 0..nc {
                let topics = random_sublist(&mut rnd, nt);
                req.members.push(Member { member_id: format!("c{:02}", i), topics, owned_generation: -1, ..Default::default() });
            }
            let first = assign(&req, cooperative);
            check_balanced(&req, &first);

            let mut next = req.clone();
            next.generation = 3;
            for a in &first.assignments {
                let m = &mut next.members[a.member as usize];
                if cooperative {
                    m.owned = a.partitions.clone();
                    m.owned_generation = 2;
                    m.cooperative = true;
                } else {
                    m.previous = a.partitions.clone();
                }
            }
            for m in next.members.iter_mut() {
                m.topics = random_sublist(&mut rnd, nt);
            }
            let second = assign(&next, cooperative);
            check_balanced(&next, &second);
        }
    }

    /// getRandomSublist: 0..n with a random number of random elements
    /// removed.
    fn random_sublist(rnd: &mut Rng, n: usize) -> Vec<u32> {
        let mut out: Vec<u32> = (0..n as u32).collect();
        for _ in 0..rnd.below(n) {
            let i = rnd.below(out.len());
            out.remove(i);
        }
        out
    }

    /// Requests no client would send (owned partitions out of range or of
    /// unknown topics, generations that disagree, broken user data, racks
    /// with and without placement, empty and missing topics) never make the
    /// assignor fail or trap, and every answer is valid. Debug builds check
    /// arithmetic overflow, so this also finds what would wrap silently in
    /// the wasm build.
    #[test]
    fn odd_requests_give_valid_answers() {
        let mut rnd = Rng(2026);
        let racks = ["", "a", "b", "c"];
        for round in 0..400 {
            let cooperative = round % 2 == 0;
            let mut req = Request { group_id: "g".into(), generation: 1 + rnd.below(4) as i32, ..Default::default() };
            for b in 0..4 {
                req.brokers.push(Broker { id: b, rack: racks[1 + (b as usize) % 3].into() });
            }
            for _ in 0..6 {
                let set: Vec<i32> = (0..1 + rnd.below(3)).map(|_| rnd.below(5) as i32).collect();
                req.replica_sets.push(set);
            }
            let nt = 1 + rnd.below(8);
            for t in 0..nt {
                let n = rnd.below(12) as i32;
                let placement = if rnd.below(3) == 0 {
                    None
                } else {
                    Some(
                        (0..n)
                            .map(|_| Partition { leader: 0, replicas: rnd.below(7) as u32, isr: 0 })
                            .collect(),
                    )
                };
                req.topics.push(Topic {
                    name: format!("t{}", t),
                    exists: rnd.below(8) != 0,
                    partition_count: n,
                    placement,
                    ..Default::default()
                });
            }
            let nm = 1 + rnd.below(12);
            for i in 0..nm {
                let mut m = Member {
                    member_id: format!("m{}", rnd.below(1000) * 100 + i),
                    rack: racks[rnd.below(4)].into(),
                    topics: random_sublist(&mut rnd, nt),
                    owned_generation: rnd.below(5) as i32 - 1,
                    cooperative,
                    ..Default::default()
                };
                for _ in 0..rnd.below(4) {
                    let parts: Vec<i32> = (0..rnd.below(6)).map(|_| rnd.below(14) as i32 - 1).collect();
                    let tp = TopicPartitions { topic: rnd.below(nt) as u32, partitions: parts, list: false };
                    match rnd.below(3) {
                        0 => m.owned.push(tp),
                        1 => m.previous.push(tp),
                        _ => {
                            let name = req.topics[tp.topic as usize].name.clone();
                            let gen = rnd.below(4) as i32;
                            m.user_data = sticky_user_data(&name, &[tp], gen);
                            if rnd.below(4) == 0 {
                                let cut = rnd.below(m.user_data.len() + 1);
                                m.user_data.truncate(cut);
                            }
                        }
                    }
                }
                req.members.push(m);
            }
            // Members' generations and ownership often conflict: the answer
            // must still be a valid assignment.
            let resp = assign(&req, cooperative);
            check_valid(&req, &resp);
        }
    }
}

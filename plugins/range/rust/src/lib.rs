//! Kafka's RangeAssignor, rack-aware per KIP-881, as a wasmassign plugin:
//! the Rust port of package plugins/range, which stays the readable
//! reference. The port follows the Go package pass for pass, so that both
//! give the same assignment for every request; a differential test holds
//! them to it. The built-in is Rust for its footprint: a worker running it
//! holds kilobytes of machine code where Go's wasm output needs megabytes.

use std::collections::HashMap;

use groupview::{Layout, View, Windows};
use wasmassign::{Request, Response};

/// The assignor's name, which is also the Kafka protocol it answers for.
pub const NAME: &str = "range";

/// Computes Kafka's range assignment for req: one assignment per member, in
/// request order.
pub fn assign(req: &Request) -> Result<Response, String> {
    assign_with(req, false)
}

/// assign, with prefer_rack_aware standing for Kafka's
/// AbstractPartitionAssignor.preferRackAwareLogic, which only tests set.
pub fn assign_with(req: &Request, prefer_rack_aware: bool) -> Result<Response, String> {
    let v = View::new(req).map_err(|e| format!("range: {}", e))?;
    let mut lay = Layout::new(&v);
    match RackView::new(req, &v, prefer_rack_aware)? {
        None => plain_layout(&v, &mut lay),
        Some(rv) => rv.layout(req, &v, &mut lay)?,
    }
    Ok(lay.response(&v))
}

/// The classic range assignment: subscriber i of a topic with P partitions
/// and C subscribers takes P/C partitions, plus one when i < P%C, starting
/// where subscriber i-1 stopped.
fn plain_layout(v: &View, lay: &mut Layout) {
    for &t in &v.by_name {
        let (ids, _) = lay.split(v, t, 0);
        for (i, id) in ids.iter_mut().enumerate() {
            *id = i as i32;
        }
    }
}

/// What the rack-aware passes need to know about a request: racks as small
/// integers, and each partition's replica racks as the id of an interned
/// rack set, so that comparing two partitions' racks is comparing integers.
struct RackView {
    // Racks some member is on have ids 0..n_racks-1; racks only brokers
    // are on come after them. Rack sets are sorted, so a set's member racks
    // are a prefix of it.
    n_racks: i32,
    member_rack: Vec<i32>,
    sets: Vec<Vec<i32>>, // sets[0] is the empty set
    // Per topic index, for topics some member with a rack subscribes to.
    rack_sub: Vec<bool>,
    needs: Vec<bool>, // Kafka's useRackAwareAssignment for the topic
    pset_start: Vec<usize>,
    pset: Vec<u32>,
    subs: groupview::Subscribers,
}

impl RackView {
    /// Returns the rack view of req, or None when Kafka would not assign by
    /// rack at all: no member has a rack, or no topic has a subscriber whose
    /// rack hosts some of its replicas while its partitions' replica racks
    /// differ.
    fn new(req: &Request, v: &View, prefer_rack_aware: bool) -> Result<Option<RackView>, String> {
        let rk = match groupview::new_racks(req) {
            Some(rk) => rk,
            None => return Ok(None),
        };
        let n_racks = rk.member_racks;
        let mut intern: HashMap<Vec<i32>, u32> = HashMap::new();
        intern.insert(Vec::new(), 0);
        let mut sets: Vec<Vec<i32>> = vec![Vec::new()];
        let mut set_of = Vec::with_capacity(req.replica_sets.len());
        for replicas in &req.replica_sets {
            let mut racks: Vec<i32> = replicas.iter().filter_map(|b| rk.broker.get(b).copied()).collect();
            racks.sort_unstable();
            racks.dedup();
            let next = sets.len() as u32;
            let id = *intern.entry(racks.clone()).or_insert(next);
            if id == next {
                sets.push(racks);
            }
            set_of.push(id);
        }

        let nt = req.topics.len();
        let mut rv = RackView {
            n_racks,
            member_rack: rk.member,
            sets,
            rack_sub: vec![false; nt],
            needs: vec![false; nt],
            pset_start: vec![0; nt],
            pset: Vec::new(),
            subs: v.subscribers(),
        };
        // Stamps (topic index + 1) instead of per-topic sets: stamp[r] marks
        // the racks of the current topic's subscribers, seen[s] the rack sets
        // whose overlap with them has been checked already.
        let mut stamp = vec![0u32; n_racks as usize];
        let mut seen = vec![0u32; rv.sets.len()];
        let mut used = false;
        for &t in &v.by_name {
            let mark = t + 1;
            for &m in rv.subs.of(t) {
                let r = rv.member_rack[m as usize];
                if r >= 0 {
                    stamp[r as usize] = mark;
                    rv.rack_sub[t as usize] = true;
                }
            }
            if !rv.rack_sub[t as usize] {
                continue;
            }
            let topic = &req.topics[t as usize];
            let base = rv.pset.len();
            rv.pset_start[t as usize] = base;
            for p in 0..topic.partition_count as usize {
                let mut s = 0; // no placement: no racks
                if let Some(pl) = &topic.placement {
                    if p < pl.len() {
                        let ri = pl[p].replicas as usize;
                        if ri >= set_of.len() {
                            return Err(format!(
                                "range: topic {:?} partition {} refers to replica set {}, but the request has {}",
                                topic.name,
                                p,
                                ri,
                                set_of.len()
                            ));
                        }
                        s = set_of[ri];
                    }
                }
                rv.pset.push(s);
            }
            // Kafka's useRackAwareAssignment: a subscriber's rack must host a
            // replica of the topic, and the partitions' replica racks must
            // not all be the same set.
            let ps = &rv.pset[base..];
            let mut all_same = true;
            let mut overlap = false;
            for &s in ps {
                if s != ps[0] {
                    all_same = false;
                }
                if !overlap && seen[s as usize] != mark {
                    seen[s as usize] = mark;
                    if rv.member_racks(s).iter().any(|&r| stamp[r as usize] == mark) {
                        overlap = true;
                    }
                }
            }
            rv.needs[t as usize] = overlap && (prefer_rack_aware || !all_same);
            used = used || rv.needs[t as usize];
        }
        Ok(if used { Some(rv) } else { None })
    }

    /// Returns the racks of set s that some member is on.
    fn member_racks(&self, s: u32) -> &[i32] {
        let set = &self.sets[s as usize];
        let n = set.iter().take_while(|&&r| r < self.n_racks).count();
        &set[..n]
    }

    /// Solves every group of co-partitioned topics and lays out the result.
    fn layout(&self, req: &Request, v: &View, lay: &mut Layout) -> Result<(), String> {
        let mut groups: Vec<CoGroup> = Vec::new();
        let mut buckets: HashMap<u64, Vec<usize>> = HashMap::new();
        for &t in &v.by_name {
            let list = self.subs.of(t);
            let p = req.topics[t as usize].partition_count;
            let h = group_hash(p, list);
            let bucket = buckets.entry(h).or_insert_with(Vec::new);
            let found = bucket.iter().copied().find(|&gi| groups[gi].p == p && groups[gi].subs == list);
            let gi = match found {
                Some(gi) => gi,
                None => {
                    bucket.push(groups.len());
                    groups.push(CoGroup { p, subs: list.to_vec(), topics: Vec::new() });
                    groups.len() - 1
                }
            };
            groups[gi].topics.push(t);
        }
        for g in &groups {
            let (count, ids) = self.solve(req, g)?;
            let w = lay.add_windows(Windows::new(count));
            for &t in &g.topics {
                lay.place(v, t, w).copy_from_slice(&ids);
            }
        }
        Ok(())
    }

    /// Runs Kafka's passes over one group: the co-partitioned rack pass
    /// (several topics) or the single-topic rack pass (one topic that
    /// qualifies for rack awareness), then the plain range pass for what is
    /// left. It returns each slot's partition count and the partitions
    /// grouped by slot, ascending within a slot.
    fn solve(&self, req: &Request, g: &CoGroup) -> Result<(Vec<u32>, Vec<i32>), String> {
        let mut owner = vec![-1i32; g.p as usize];
        let s = g.subs.len() as i32;
        let mut q = Quota { base: g.p / s, rem: g.p % s, count: vec![0; s as usize] };
        let t0 = g.topics[0] as usize;
        if g.topics.len() > 1 && self.rack_sub[t0] {
            self.co_partition(g, &mut q, &mut owner);
        } else if g.topics.len() == 1 && self.needs[t0] {
            self.rack_ranges(g, &mut q, &mut owner);
        }
        plain_ranges(&mut q, &mut owner);

        let count: Vec<u32> = q.count.iter().map(|&c| c as u32).collect();
        let mut next = Vec::with_capacity(count.len());
        let mut off = 0u32;
        for &c in &count {
            next.push(off);
            off += c;
        }
        let mut ids = vec![0i32; g.p as usize];
        for (p, &o) in owner.iter().enumerate() {
            if o < 0 {
                return Err(format!("range: internal error: topic {:?} partition {} left unassigned", req.topics[t0].name, p));
            }
            ids[next[o as usize] as usize] = p as i32;
            next[o as usize] += 1;
        }
        Ok((count, ids))
    }

    /// Kafka's assignCoPartitionedWithRackMatching: for each partition index
    /// in turn, the first subscriber with room whose rack hosts a replica of
    /// that index in every topic of the group (or that has no rack) takes
    /// it. One queue of slots per rack and one of slots without a rack,
    /// with full slots dropped from the front, stand for the scan over all
    /// subscribers.
    fn co_partition(&self, g: &CoGroup, q: &mut Quota, owner: &mut [i32]) {
        let nr = self.n_racks as usize;
        let mut qstart = vec![0usize; nr + 1];
        let mut rackless: Vec<i32> = Vec::new();
        for (s, &m) in g.subs.iter().enumerate() {
            let r = self.member_rack[m as usize];
            if r >= 0 {
                qstart[r as usize + 1] += 1;
            } else {
                rackless.push(s as i32);
            }
        }
        for r in 0..nr {
            qstart[r + 1] += qstart[r];
        }
        let mut queue = vec![0i32; qstart[nr]];
        let mut head: Vec<usize> = qstart[..nr].to_vec();
        for (s, &m) in g.subs.iter().enumerate() {
            let r = self.member_rack[m as usize];
            if r >= 0 {
                queue[head[r as usize]] = s as i32;
                head[r as usize] += 1;
            }
        }
        head.copy_from_slice(&qstart[..nr]);

        let mut scratch: Vec<i32> = Vec::new();
        let mut rl = 0;
        for p in 0..owner.len() {
            let mut best = -1i32;
            while rl < rackless.len() && q.room(rackless[rl]) == 0 {
                rl += 1;
            }
            if rl < rackless.len() {
                best = rackless[rl];
            }
            let matching = self.common_racks(&g.topics, p, &mut scratch);
            for &r in matching {
                let r = r as usize;
                let (mut h, end) = (head[r], qstart[r + 1]);
                while h < end && q.room(queue[h]) == 0 {
                    h += 1;
                }
                head[r] = h;
                if h < end && (best < 0 || queue[h] < best) {
                    best = queue[h];
                }
            }
            if best >= 0 {
                owner[p] = best;
                q.add(best, 1);
            }
        }
    }

    /// Returns the member racks that host a replica of partition p in every
    /// topic of topics. It may build them in scratch.
    fn common_racks<'s>(&'s self, topics: &[u32], p: usize, scratch: &'s mut Vec<i32>) -> &'s [i32] {
        let at = |t: u32| self.pset[self.pset_start[t as usize] + p];
        let s0 = at(topics[0]);
        if topics[1..].iter().all(|&t| at(t) == s0) {
            return self.member_racks(s0);
        }
        scratch.clear();
        scratch.extend_from_slice(self.member_racks(s0));
        for &t in &topics[1..] {
            let other = &self.sets[at(t) as usize];
            let (mut n, mut j) = (0, 0);
            for i in 0..scratch.len() {
                let r = scratch[i];
                while j < other.len() && other[j] < r {
                    j += 1;
                }
                if j < other.len() && other[j] == r {
                    scratch[n] = r;
                    n += 1;
                }
            }
            scratch.truncate(n);
            if n == 0 {
                break;
            }
        }
        scratch
    }

    /// Kafka's assignRanges with rack matching, for a topic that is not
    /// co-partitioned with another: each subscriber in turn takes the lowest
    /// unassigned partitions that have a replica on its rack (any, for a
    /// subscriber without a rack), up to its room. Partitions are listed per
    /// rack, and a subscriber resumes its rack's list where the previous one
    /// of that rack stopped.
    fn rack_ranges(&self, g: &CoGroup, q: &mut Quota, owner: &mut [i32]) {
        let t = g.topics[0] as usize;
        let nr = self.n_racks as usize;
        let ps = &self.pset[self.pset_start[t]..self.pset_start[t] + g.p as usize];
        let mut lstart = vec![0usize; nr + 1];
        for &s in ps {
            for &r in self.member_racks(s) {
                lstart[r as usize + 1] += 1;
            }
        }
        for r in 0..nr {
            lstart[r + 1] += lstart[r];
        }
        let mut lists = vec![0usize; lstart[nr]];
        let mut head: Vec<usize> = lstart[..nr].to_vec();
        for (p, &s) in ps.iter().enumerate() {
            for &r in self.member_racks(s) {
                lists[head[r as usize]] = p;
                head[r as usize] += 1;
            }
        }
        head.copy_from_slice(&lstart[..nr]);

        let mut cur = 0;
        for (s, &m) in g.subs.iter().enumerate() {
            let slot = s as i32;
            let k = q.room(slot);
            if k == 0 {
                continue;
            }
            let mut n = 0;
            let r = self.member_rack[m as usize];
            if r < 0 {
                while cur < owner.len() && n < k {
                    if owner[cur] < 0 {
                        owner[cur] = slot;
                        n += 1;
                    }
                    cur += 1;
                }
            } else {
                let r = r as usize;
                let (mut h, end) = (head[r], lstart[r + 1]);
                while h < end && n < k {
                    let p = lists[h];
                    if owner[p] < 0 {
                        owner[p] = slot;
                        n += 1;
                    }
                    h += 1;
                }
                head[r] = h;
            }
            if n > 0 {
                q.add(slot, n);
            }
        }
    }
}

/// A set of topics with the same subscribers and the same partition count:
/// in Kafka's rack mode they are co-partitioned, so partition p of all of
/// them goes to one member, and the group is solved once.
struct CoGroup {
    p: i32,
    subs: Vec<u32>, // member indices in Kafka order; a slot is an index here
    topics: Vec<u32>,
}

/// FNV-1a over a group's partition count and subscribers.
fn group_hash(p: i32, list: &[u32]) -> u64 {
    let mut h: u64 = 14695981039346656037;
    h = (h ^ p as u32 as u64).wrapping_mul(1099511628211);
    for &m in list {
        h = (h ^ m as u64).wrapping_mul(1099511628211);
    }
    h
}

/// Kafka's per-topic range quota: every subscriber may take base
/// partitions, and the first rem subscribers to go above base one more.
struct Quota {
    base: i32,
    rem: i32,
    count: Vec<i32>,
}

impl Quota {
    /// How many more partitions slot s may take now; it never grows.
    fn room(&self, s: i32) -> i32 {
        let mut n = self.base - self.count[s as usize];
        if self.rem > 0 {
            n += 1;
        }
        n.max(0)
    }

    /// Records n partitions given to slot s in one step. Like Kafka, a slot
    /// that goes above base uses up one extra partition, however far above
    /// it goes.
    fn add(&mut self, s: i32, n: i32) {
        self.count[s as usize] += n;
        if self.count[s as usize] > self.base {
            self.rem -= 1;
        }
    }
}

/// Kafka's assignRanges without a rack condition: each subscriber in turn
/// takes the lowest unassigned partitions up to its room.
fn plain_ranges(q: &mut Quota, owner: &mut [i32]) {
    let mut cur = 0;
    for s in 0..q.count.len() {
        if cur == owner.len() {
            return;
        }
        let slot = s as i32;
        let k = q.room(slot);
        if k == 0 {
            continue;
        }
        let mut n = 0;
        while cur < owner.len() && n < k {
            if owner[cur] < 0 {
                owner[cur] = slot;
                n += 1;
            }
            cur += 1;
        }
        if n > 0 {
            q.add(slot, n);
        }
    }
}

wasmassign::plugin! {
    wasmassign::Assignor {
        name: NAME,
        version: "1.0.0",
        protocols: &[NAME],
        modes: wasmassign::Modes::BOTH,
        may_leave_unassigned: false,
        grouped: true,
        description: "Kafka's RangeAssignor: consecutive partitions per topic, rack-aware per KIP-881",
        assign: assign,
    },
}

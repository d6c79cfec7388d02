//! Rack mode (KIP-881): which partitions match which members (rack.go).

use crate::group::Group;
use crate::groupview;
use crate::uniform::{counting_order, FreePartition};

/// What rack mode needs: each member's rack and, for each replica set of the
/// request, the set of racks its brokers are on, as bits. Rack ids below
/// consumer_racks are racks some member is on; the others are racks only
/// brokers are on, which count when deciding whether rack mode applies and
/// never match a member.
pub(crate) struct Racks {
    /// member[m] is member m's rack id, or -1 when it has none: a member
    /// without a rack matches every partition.
    pub(crate) member: Vec<i32>,
    /// on_rack[k] is the number of members on consumer rack k.
    pub(crate) on_rack: Vec<i32>,
    pub(crate) consumer_racks: usize,
    pub(crate) words: usize,
    /// masks[s*words..(s+1)*words] are the racks of replica set s.
    pub(crate) masks: Vec<u64>,
    /// cand[s] caches candidates(s) plus one; 0 when not computed yet.
    pub(crate) cand: Vec<i32>,
}

/// Decides rack mode as Kafka's AbstractStickyAssignor does, over the
/// partitions of every assignable topic: some member must be on a rack that
/// holds a replica, and not every partition may have the same set of
/// replica racks. It returns None when rack mode is off.
pub(crate) fn new_racks(g: &Group) -> Option<Racks> {
    let req = g.req;
    let numbered = groupview::new_racks(req)?;
    let words = (numbered.total as usize + 63) / 64;
    let mut rk = Racks {
        member: numbered.member,
        on_rack: Vec::new(),
        consumer_racks: numbered.member_racks as usize,
        words,
        masks: vec![0; req.replica_sets.len() * words],
        cand: Vec::new(),
    };
    for (s, set) in req.replica_sets.iter().enumerate() {
        let mask = &mut rk.masks[s * words..(s + 1) * words];
        for b in set {
            if let Some(&id) = numbered.broker.get(b) {
                mask[(id / 64) as usize] |= 1u64 << (id % 64);
            }
        }
    }

    // Which replica sets do the assignable partitions use, and does any of
    // them lack placement (an empty rack set)?
    let mut used = vec![false; req.replica_sets.len()];
    let mut empty = false;
    for &t in &g.by_rank {
        let tp = &req.topics[t as usize];
        let parts: &[wasmassign::Partition] = match &tp.placement {
            Some(p) => p,
            None => &[],
        };
        if parts.len() != tp.partition_count as usize {
            empty = true;
            continue;
        }
        for p in parts {
            if (p.replicas as usize) < used.len() {
                used[p.replicas as usize] = true;
            } else {
                empty = true;
            }
        }
    }
    let mut union = vec![0u64; words];
    for (s, &u) in used.iter().enumerate() {
        if u {
            for (d, v) in union.iter_mut().zip(&rk.masks[s * words..(s + 1) * words]) {
                *d |= *v;
            }
        }
    }
    if !rk.any_consumer_rack(&union) {
        return None;
    }
    let mut differs = empty;
    for (s, &u) in used.iter().enumerate() {
        if u && union[..] != rk.masks[s * words..(s + 1) * words] {
            differs = true;
            break;
        }
    }
    if !differs {
        return None;
    }
    rk.on_rack = vec![0; rk.consumer_racks];
    for &id in &rk.member {
        if id >= 0 {
            rk.on_rack[id as usize] += 1;
        }
    }
    Some(rk)
}

impl<'a> Group<'a> {
    /// Returns the replica-set index of partition p of rank r, or -1 when
    /// the request has no placement for it.
    pub(crate) fn replica_set(&self, r: i32, p: i32) -> i32 {
        let t = &self.req.topics[self.by_rank[r as usize] as usize];
        let parts: &[wasmassign::Partition] = match &t.placement {
            Some(p) => p,
            None => return -1,
        };
        if p < 0 || p as usize >= parts.len() || parts.len() != t.partition_count as usize {
            return -1;
        }
        let s = parts[p as usize].replicas;
        if s as usize >= self.req.replica_sets.len() {
            return -1;
        }
        s as i32
    }
}

impl Racks {
    /// Reports whether mask holds a rack some member is on.
    fn any_consumer_rack(&self, mask: &[u64]) -> bool {
        (0..self.consumer_racks).any(|k| mask[k / 64] & (1u64 << (k % 64)) != 0)
    }

    /// Reports whether member m may take a partition of replica set s
    /// without breaking rack alignment.
    #[inline]
    pub(crate) fn matches(&self, m: i32, s: i32) -> bool {
        let id = self.member[m as usize];
        if id < 0 {
            return true;
        }
        if s < 0 {
            return false;
        }
        self.masks[s as usize * self.words + (id / 64) as usize] & (1u64 << (id % 64)) != 0
    }

    /// Calls f with every consumer rack of replica set s.
    pub(crate) fn each_rack<F: FnMut(i32)>(&self, s: i32, mut f: F) {
        if s < 0 {
            return;
        }
        let s = s as usize;
        let mask = &self.masks[s * self.words..(s + 1) * self.words];
        for (w, &word) in mask.iter().enumerate() {
            let mut word = word;
            while word != 0 {
                let k = w * 64 + word.trailing_zeros() as usize;
                if k >= self.consumer_racks {
                    return;
                }
                f(k as i32);
                word &= word - 1;
            }
        }
    }

    /// Kafka's numConsumersByPartition for replica set s: the number of
    /// members on the racks of its replicas (0 for no placement).
    pub(crate) fn candidates(&mut self, s: i32) -> i32 {
        if s < 0 {
            return 0;
        }
        if self.cand.is_empty() {
            self.cand = vec![0; self.masks.len() / self.words.max(1)];
        }
        let c = self.cand[s as usize];
        if c > 0 {
            return c - 1;
        }
        let mut n = 0i32;
        let on_rack = &self.on_rack;
        self.each_rack(s, |k| n += on_rack[k as usize]);
        self.cand[s as usize] = n + 1;
        n
    }

    /// Returns the order in which the rack-matching passes visit parts, and
    /// each part's candidates: partitions with the fewest rack-matching
    /// members first (Kafka's sortPartitionsByRackConsumers), ties in
    /// partition order.
    pub(crate) fn by_candidates(&mut self, parts: &[FreePartition]) -> (Vec<i32>, Vec<i32>) {
        let cands: Vec<i32> = parts.iter().map(|p| self.candidates(p.set)).collect();
        (counting_order(&cands), cands)
    }

    /// Reports whether member m is on one of the racks of replica set s:
    /// unlike matches, a member without a rack is on none.
    #[inline]
    pub(crate) fn member_on_rack(&self, m: i32, s: i32) -> bool {
        let id = self.member[m as usize];
        id >= 0 && s >= 0 && self.masks[s as usize * self.words + (id / 64) as usize] & (1u64 << (id % 64)) != 0
    }

    /// Kafka's RackInfo.nextRackConsumer: the index of the first member of
    /// list, from first on and wrapping around, on one of the racks of
    /// replica set s; -1 when there is none.
    pub(crate) fn next_on_rack(&self, s: i32, list: &[i32], first: usize) -> i32 {
        if s < 0 || list.is_empty() {
            return -1;
        }
        for i in 0..list.len() {
            let mut idx = first + i;
            if idx >= list.len() {
                idx -= list.len();
            }
            if self.member_on_rack(list[idx], s) {
                return idx as i32;
            }
        }
        -1
    }
}

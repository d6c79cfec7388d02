//! The assignment for groups whose members all subscribe to the same
//! topics: Kafka's ConstrainedAssignmentBuilder, reworked to operate on runs
//! (uniform.go). With P partitions and M members every member gets P/M
//! partitions, and P%M of them one more. Members keep up to their quota of
//! what they own, first in Kafka's order (partition id, then topic); what is
//! left is dealt one partition at a time, round robin, as Kafka does.

use crate::claims::{common_stride, push_claim, residue_order, sort_by_start, Bitset, Claim};
use crate::group::Group;
use crate::rack::Racks;

/// The state Kafka's assignOwnedPartitions leaves for the round-robin
/// passes.
pub(crate) struct Dealing {
    pub(crate) min: i32,
    pub(crate) slots: i32,
    /// The number of members that kept one more than the minimum.
    pub(crate) over: i32,
    /// The members that kept less than the minimum, in member order.
    pub(crate) under: Vec<i32>,
    /// The members that kept exactly the minimum and may take one more
    /// (empty once no extra slot is left).
    pub(crate) at_min: Vec<i32>,
}

impl Dealing {
    /// Kafka's maxQuota.
    pub(crate) fn max(&self) -> i32 {
        if self.slots > 0 {
            self.min + 1
        } else {
            self.min
        }
    }
}

impl<'a> Group<'a> {
    /// Returns the runs each of members (in Kafka's member order) is
    /// assigned, when all of them subscribe to exactly the topic ranks ranks
    /// (ascending) and nobody else does. kept are the settled claims of those
    /// members on those topics, sorted by start (contiguous runs within one
    /// topic each in rack mode); rk is None outside rack mode.
    pub(crate) fn assign_uniform(
        &mut self,
        members: &[i32],
        ranks: &[i32],
        kept: Vec<Claim>,
        rk: Option<&mut Racks>,
    ) -> Vec<Claim> {
        let n = members.len() as i32;
        let mut total = 0i32;
        for &r in ranks {
            total = total.wrapping_add(self.partitions(r));
        }
        if n == 0 || total == 0 {
            return Vec::new();
        }
        let mut d = Dealing { min: total / n, slots: total % n, over: 0, under: Vec::new(), at_min: Vec::new() };

        let mut kept = kept;
        if let Some(rk) = rk.as_deref() {
            // Kafka's assignOwnedPartitions only keeps owned partitions on
            // their owner's rack.
            kept = self.split_by_rack(&kept, rk).0;
        }
        let mut sc = self.take_scratch();
        for (i, &m) in members.iter().enumerate() {
            sc.count[m as usize] = 0;
            sc.pos[m as usize] = i as i32;
        }
        for c in &kept {
            sc.count[c.member as usize] += c.n;
        }
        // Kafka's assignOwnedPartitions. Which members that own more than
        // the minimum keep one more is Java HashMap order in Kafka; member
        // order here.
        for &m in members {
            let c = sc.count[m as usize];
            if c < d.min {
                sc.keep[m as usize] = c;
                d.under.push(m);
            } else if c > d.min && d.over < d.slots {
                sc.keep[m as usize] = d.min + 1;
                d.over += 1;
            } else {
                sc.keep[m as usize] = d.min;
                d.at_min.push(m);
            }
        }
        if d.over == d.slots {
            d.at_min = Vec::new();
        }
        let kept = self.trim(kept, members, &sc.count, &sc.keep, &sc.pos);

        let free = if all_contiguous(&kept) {
            let mut gaps = Vec::new();
            self.universe_gaps(&kept, ranks, &mut gaps);
            merge_free(gaps)
        } else if let Some(f) = self.free_by_residues(&kept, ranks) {
            f
        } else {
            self.free_by_bits(&kept, ranks)
        };
        let out = match rk {
            Some(rk) => self.fill_uniform_racks(kept, &free, members, &d, &sc.keep, &mut sc.count, rk),
            None => deal(kept, &free, &d, &sc.keep),
        };
        self.put_scratch(sc);
        out
    }

    /// Keeps, of each member's runs, keep[m] partitions when the member
    /// holds count[m] > keep[m]: Kafka keeps the first owned partitions
    /// ordered by partition id, then topic. It returns the kept runs sorted
    /// by start. pos is each member's position in members.
    fn trim(&mut self, kept: Vec<Claim>, members: &[i32], count: &[i32], keep: &[i32], pos: &[i32]) -> Vec<Claim> {
        if !members.iter().any(|&m| count[m as usize] > keep[m as usize]) {
            return kept;
        }
        let (by_member, start) = bucket_by_member(&kept, members.len() as i32, Some(pos));
        let mut out = Vec::with_capacity(kept.len());
        for (i, &m) in members.iter().enumerate() {
            let runs = &by_member[start[i] as usize..start[i + 1] as usize];
            if count[m as usize] <= keep[m as usize] {
                out.extend_from_slice(runs);
                continue;
            }
            self.first_by_partition(&mut out, runs, keep[m as usize]);
        }
        sort_by_start(&mut out);
        out
    }

    /// Appends to out the first q partitions of runs (one member's, not
    /// overlapping) in the order (partition id, topic).
    fn first_by_partition(&mut self, out: &mut Vec<Claim>, runs: &[Claim], q: i32) {
        if q <= 0 {
            return;
        }
        if runs.len() == 1 && self.same_partition_id(&runs[0]) {
            // One partition id throughout, so the order is the topics'.
            let mut c = runs[0];
            c.n = q;
            push_claim(out, c);
            return;
        }
        let mut pieces: Vec<Claim> = Vec::new();
        for &c in runs {
            if c.last() < self.base[c.topic as usize + 1] {
                pieces.push(c);
            } else if c.contiguous() {
                self.append_split(&mut pieces, c);
            } else {
                self.append_strided_pieces(&mut pieces, c);
            }
        }
        let base = &self.base;
        // below(x) is how many of the pieces' partitions have an id below x.
        let below = |x: i32| -> i64 {
            let mut total = 0i64;
            for c in &pieces {
                let p0 = c.start - base[c.topic as usize];
                if x > p0 {
                    let s = c.stride() as i64;
                    total += (c.n as i64).min(((x - p0) as i64 + s - 1) / s);
                }
            }
            total
        };
        // The partition id of the q-th partition in that order: the smallest
        // t with below(t+1) >= q.
        let (mut lo, mut hi) = (0i32, 0i32);
        for c in &pieces {
            hi = hi.max(c.last() - base[c.topic as usize]);
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if below(mid + 1) >= q as i64 {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        let t = lo;
        let need = q as i64 - below(t);
        let mut ties: Vec<Claim> = Vec::new();
        for &c in &pieces {
            let p0 = c.start - base[c.topic as usize];
            let mut k = 0i32;
            if t > p0 {
                k = (c.n as i64).min(((t - p0) as i64 + c.stride() as i64 - 1) / c.stride() as i64) as i32;
            }
            if k > 0 {
                let mut prefix = c;
                prefix.n = k;
                push_claim(out, prefix);
            }
            if k < c.n && p0 + k * c.stride() == t {
                let mut tie = c;
                tie.start = c.start + k * c.stride();
                tie.n = 1;
                tie.gap = 0;
                ties.push(tie);
            }
        }
        // Partitions of the same id go by topic name, that is by rank.
        sort_by_start(&mut ties);
        let need = need.max(0).min(ties.len() as i64) as usize;
        for &c in &ties[..need] {
            push_claim(out, c);
        }
    }

    /// Reports whether every partition of the strided run c has the same
    /// partition id: its stride is the partition count of every topic it
    /// spans.
    pub(crate) fn same_partition_id(&mut self, c: &Claim) -> bool {
        if c.contiguous() {
            return false;
        }
        self.ensure_size_run();
        let r = self.topic_at(c.start);
        let size_run = match &self.size_run {
            Some(s) => s,
            None => return false,
        };
        self.partitions(r) == c.stride() && self.topic_at(c.last()) <= size_run[r as usize]
    }

    /// Computes size_run on first use: size_run[r] is the last rank of the
    /// stretch from r on whose topics all have r's partition count.
    pub(crate) fn ensure_size_run(&mut self) {
        if self.size_run.is_some() {
            return;
        }
        let nt = self.by_rank.len();
        let mut run = vec![0i32; nt];
        for r in (0..nt).rev() {
            run[r] = r as i32;
            if r + 1 < nt && self.partitions(r as i32) == self.partitions(r as i32 + 1) {
                run[r] = run[r + 1];
            }
        }
        self.size_run = Some(run);
    }

    /// free_by_bits for the common case after Kafka's round robin: the
    /// topics ranks are consecutive and every kept run of more than one
    /// partition has the same stride s. Each residue class modulo s is then a
    /// chain of its own, and what is free in it are the gaps between its
    /// kept runs. None when that does not apply, or when the free
    /// progressions of different classes interleave.
    fn free_by_residues(&self, kept: &[Claim], ranks: &[i32]) -> Option<Vec<Claim>> {
        let (s, ok) = common_stride(kept);
        if !ok || s as i64 > 4 * kept.len() as i64 + 64 || ranks.is_empty() {
            return None;
        }
        for (i, &r) in ranks.iter().enumerate() {
            if r != ranks[0] + i as i32 {
                return None;
            }
        }
        let lo = self.base[ranks[0] as usize];
        let hi = self.base[ranks[ranks.len() - 1] as usize + 1];
        let keys = residue_order(kept, s);
        let mut free: Vec<Claim> = Vec::new();
        // The chain's partitions in [from, to).
        let gap = |free: &mut Vec<Claim>, from: i32, to: i32| {
            if from < to {
                free.push(Claim { start: from, n: (to - from - 1) / s + 1, gap: s - 1, member: -1, gen: 0, topic: 0 });
            }
        };
        let mut k = 0usize;
        for r in 0..s {
            let mut at = lo + ((r - lo % s) % s + s) % s; // the class's first partition
            while k < keys.len() && (keys[k] >> 32) as i32 == r {
                let c = &kept[keys[k] as u32 as usize];
                gap(&mut free, at, c.start);
                at = c.last().wrapping_add(s);
                k += 1;
            }
            gap(&mut free, at, hi);
        }
        sort_by_start(&mut free);
        for i in 0..free.len() {
            if free[i].n == 1 {
                free[i].gap = 0;
            }
            free[i].topic = self.topic_at(free[i].start);
            if i > 0 && free[i - 1].last() > free[i].start {
                return None;
            }
        }
        Some(free)
    }

    /// Returns the runs of the topics ranks that no run of kept covers,
    /// sorted by start, found through a bit set.
    fn free_by_bits(&self, kept: &[Claim], ranks: &[i32]) -> Vec<Claim> {
        let mut bits = Bitset::new(self.base[self.by_rank.len()]);
        for c in kept {
            bits.mark(c);
        }
        let mut out = Vec::new();
        for &r in ranks {
            let (mut x, end) = (self.base[r as usize], self.base[r as usize + 1]);
            while x < end {
                let from = bits.next(x, end, false);
                if from == end {
                    break;
                }
                let to = bits.next(from, end, true);
                push_claim(&mut out, Claim { start: from, n: to - from, gap: 0, member: -1, gen: 0, topic: r });
                x = to;
            }
        }
        out
    }

    /// Appends to dst the runs of the topics ranks (ascending) that no run
    /// of kept (sorted by start, within those topics) covers.
    fn universe_gaps(&self, kept: &[Claim], ranks: &[i32], dst: &mut Vec<Claim>) {
        let mut i = 0usize;
        for &r in ranks {
            let j = up_to(kept, i, self.base[r as usize + 1]);
            gaps(&kept[i..j], self.base[r as usize], self.base[r as usize + 1], dst);
            i = j;
        }
    }

    /// Splits kept runs into the partitions whose replicas are on their
    /// owner's rack and those that are not. Both keep start order, and every
    /// other field of the runs.
    pub(crate) fn split_by_rack(&self, kept: &[Claim], rk: &Racks) -> (Vec<Claim>, Vec<Claim>) {
        let mut matched = Vec::with_capacity(kept.len());
        let mut mismatch = Vec::new();
        for &c in kept {
            if rk.member[c.member as usize] < 0 {
                matched.push(c);
                continue;
            }
            let p0 = c.start - self.base[c.topic as usize];
            let mut i = 0i32;
            while i < c.n {
                let ok = rk.matches(c.member, self.replica_set(c.topic, p0 + i));
                let mut j = i + 1;
                while j < c.n && rk.matches(c.member, self.replica_set(c.topic, p0 + j)) == ok {
                    j += 1;
                }
                let mut piece = c;
                piece.start = c.start + i;
                piece.n = j - i;
                if ok {
                    matched.push(piece);
                } else {
                    mismatch.push(piece);
                }
                i = j;
            }
        }
        (matched, mismatch)
    }

    /// Lists the partitions of the free runs (sorted by start, not
    /// interleaved) one by one, tagged with the member that owned them when
    /// they come from mismatched (contiguous runs sorted by start).
    pub(crate) fn expand_free(&self, free: &[Claim], mismatched: &[Claim]) -> Vec<FreePartition> {
        let size: usize = free.iter().map(|c| c.n as usize).sum();
        let mut out = Vec::with_capacity(size);
        let mut j = 0usize;
        let mut r = 0i32;
        for c in free {
            let (mut x, stride) = (c.start, c.stride());
            for _ in 0..c.n {
                while j < mismatched.len() && mismatched[j].end() <= x {
                    j += 1;
                }
                let mut owner = -1;
                if j < mismatched.len() && mismatched[j].start <= x {
                    owner = mismatched[j].member;
                }
                while self.base[r as usize + 1] <= x {
                    r += 1;
                }
                out.push(FreePartition { x, owner, to: -1, set: self.replica_set(r, x - self.base[r as usize]) });
                x = x.wrapping_add(stride);
            }
        }
        out
    }

    /// Hands out the free partitions of a uniform group in rack mode as
    /// Kafka's assignRackAwareRoundRobin and then assignRoundRobin do, one
    /// partition at a time. out holds the kept runs; keep is what each
    /// member kept; count is scratch.
    #[allow(clippy::too_many_arguments)]
    fn fill_uniform_racks(
        &self,
        mut out: Vec<Claim>,
        free: &[Claim],
        members: &[i32],
        d: &Dealing,
        keep: &[i32],
        count: &mut [i32],
        rk: &mut Racks,
    ) -> Vec<Claim> {
        let mut parts = self.expand_free(free, &[]);
        let (order, _) = rk.by_candidates(&parts);
        let rk: &Racks = rk;
        for &m in members {
            count[m as usize] = keep[m as usize];
        }
        let max_q = d.max();
        let mut under = RackList::new(rk, &d.under);
        let mut at_min = RackList::new(rk, &d.at_min);
        let mut over = d.over;
        let mut next = 0usize;
        for &i in &order {
            let p = &mut parts[i as usize];
            let mut m = -1i32;
            let idx = under.next(rk, p.set, next);
            if idx >= 0 {
                let mut idx = idx as usize;
                m = under.members[idx];
                if count[m as usize] + 1 >= d.min {
                    under.delete(rk, idx);
                    if count[m as usize] + 1 < max_q && over < d.slots {
                        at_min.add(rk, m);
                    }
                } else {
                    idx += 1;
                }
                next = 0;
                if !under.members.is_empty() {
                    next = idx % under.members.len();
                }
            } else if !at_min.members.is_empty() {
                let idx = at_min.next(rk, p.set, 0);
                if idx >= 0 {
                    m = at_min.members[idx as usize];
                    if count[m as usize] + 1 == max_q {
                        at_min.delete(rk, idx as usize);
                        over += 1;
                        if over == d.slots {
                            at_min.clear();
                        }
                    }
                }
            }
            if m >= 0 {
                p.to = m;
                count[m as usize] += 1;
            }
        }
        // assignRoundRobin over what is left, in the same order.
        let mut it = 0usize;
        let mut unders = under.members;
        let mut mins = at_min.members;
        let mut head = 0usize; // mins[head..] is the queue
        for &i in &order {
            let p = &mut parts[i as usize];
            if p.to >= 0 {
                continue;
            }
            let m;
            let mut from_under = true;
            if it < unders.len() {
                m = unders[it];
                it += 1;
            } else if !unders.is_empty() {
                m = unders[0];
                it = 1;
            } else if head < mins.len() {
                m = mins[head];
                head += 1;
                from_under = false;
            } else {
                // Kafka fails here; quotas add up, so it cannot happen.
                m = members[0];
                from_under = false;
            }
            p.to = m;
            count[m as usize] += 1;
            if from_under && count[m as usize] == d.min {
                it -= 1;
                unders.remove(it);
                mins.push(m);
            }
        }
        out.reserve(parts.len());
        for p in &parts {
            out.push(Claim { start: p.x, n: 1, gap: 0, member: p.to, gen: 0, topic: 0 });
        }
        out
    }
}

/// Reports whether no run of cs has holes.
pub(crate) fn all_contiguous(cs: &[Claim]) -> bool {
    cs.iter().all(|c| c.contiguous())
}

/// Returns the end of the runs of cs, from i on, that start before hi.
pub(crate) fn up_to(cs: &[Claim], mut i: usize, hi: i32) -> usize {
    while i < cs.len() && cs[i].start < hi {
        i += 1;
    }
    i
}

/// Hands the free partitions out as Kafka's assignRoundRobin does and
/// appends the runs to out: one at a time, in partition order, round robin
/// over the members below the minimum (dropping each as it reaches it),
/// then one each to the members at the minimum, in d.at_min's order
/// followed by the order in which the others reached it.
fn deal(mut out: Vec<Claim>, free: &[Claim], d: &Dealing, keep: &[i32]) -> Vec<Claim> {
    let fc = FreeCursor::new(free);
    let n = d.under.len();
    let join = vec![0i32; n];
    let leave: Vec<i32> = d.under.iter().map(|&m| d.min - keep[m as usize]).collect();
    let mut pos = fc.deal_rounds(&mut out, &d.under, &join, &leave);
    // Then one extra each: first the members that kept the minimum, then
    // the others in the order they reached it (by deficit, ties in member
    // order).
    for &m in &d.at_min {
        if pos >= fc.total {
            return out;
        }
        fc.emit(&mut out, m, pos, 1, 1);
        pos += 1;
    }
    let mut keys: Vec<u64> = (0..n).map(|i| (leave[i] as u32 as u64) << 32 | i as u64).collect();
    keys.sort_unstable();
    for key in keys {
        if pos >= fc.total {
            return out;
        }
        fc.emit(&mut out, d.under[key as u32 as usize], pos, 1, 1);
        pos += 1;
    }
    out
}

/// Maps positions in a list of free runs (sorted by start, not interleaved)
/// to global partition numbers.
pub(crate) struct FreeCursor<'r> {
    pub(crate) runs: &'r [Claim],
    /// off[i] is the position of runs[i]'s first partition.
    pub(crate) off: Vec<i64>,
    pub(crate) total: i64,
}

impl<'r> FreeCursor<'r> {
    pub(crate) fn new(runs: &'r [Claim]) -> Self {
        let mut off = vec![0i64; runs.len() + 1];
        for (i, c) in runs.iter().enumerate() {
            off[i + 1] = off[i] + c.n as i64;
        }
        let total = off[runs.len()];
        FreeCursor { runs, off, total }
    }

    /// Hands out the free positions from the first in rounds: in round l
    /// (lowest first) every member ms[i] with join[i] <= l < leave[i], in
    /// the order of ms, takes the next position. It returns the first
    /// position left.
    pub(crate) fn deal_rounds(&self, out: &mut Vec<Claim>, ms: &[i32], join: &[i32], leave: &[i32]) -> i64 {
        let mut levels: Vec<i32> = Vec::with_capacity(2 * ms.len());
        levels.extend_from_slice(join);
        levels.extend_from_slice(leave);
        levels.sort_unstable();
        levels.dedup();
        let mut pos = 0i64;
        let mut active: Vec<i32> = Vec::with_capacity(ms.len());
        for j in 0..levels.len().saturating_sub(1) {
            let (a, b) = (levels[j], levels[j + 1]);
            active.clear();
            for (i, &m) in ms.iter().enumerate() {
                if join[i] <= a && a < leave[i] {
                    active.push(m);
                }
            }
            let c = active.len() as i64;
            for (i, &m) in active.iter().enumerate() {
                self.emit(out, m, pos + i as i64, c, b - a);
            }
            pos += c * (b - a) as i64;
        }
        pos
    }

    /// Appends, as runs for member m, the free partitions at positions u,
    /// u+step, ..., n of them (fewer if the free runs end first).
    pub(crate) fn emit(&self, out: &mut Vec<Claim>, m: i32, mut u: i64, step: i64, mut n: i32) {
        let mut s = 0usize;
        while n > 0 && u < self.total {
            // The run holding position u: the last whose offset is <= u.
            if !(self.off[s] <= u && u < self.off[s + 1]) {
                s = self.off.partition_point(|&o| o < u + 1) - 1;
            }
            let r = &self.runs[s];
            let k = (n as i64).min((self.off[s + 1] - u + step - 1) / step) as i32;
            let stride = r.stride() as i64;
            let mut c = Claim { start: r.start + ((u - self.off[s]) * stride) as i32, n: k, gap: 0, member: m, gen: 0, topic: 0 };
            if k > 1 {
                c.gap = (stride * step - 1) as i32;
            }
            push_claim(out, c);
            u += k as i64 * step;
            n -= k;
        }
    }
}

/// Groups runs by member, keeping their order within each member: with pos
/// None, member m's runs are out[start[m]..start[m+1]]; else bucket pos[m]
/// (below n) holds them.
pub(crate) fn bucket_by_member(runs: &[Claim], n: i32, pos: Option<&[i32]>) -> (Vec<Claim>, Vec<i32>) {
    let bucket = |m: i32| -> usize {
        match pos {
            Some(p) => p[m as usize] as usize,
            None => m as usize,
        }
    };
    let n = n as usize;
    let mut start = vec![0i32; n + 1];
    for c in runs {
        start[bucket(c.member) + 1] += 1;
    }
    for b in 0..n {
        start[b + 1] += start[b];
    }
    let mut out = vec![Claim::default(); runs.len()];
    let mut next: Vec<i32> = start[..n].to_vec();
    for c in runs {
        let b = bucket(c.member);
        out[next[b] as usize] = *c;
        next[b] += 1;
    }
    (out, start)
}

/// Appends to dst the runs of [from, to) that no run of kept (sorted by
/// start, not overlapping, within [from, to)) covers.
fn gaps(kept: &[Claim], from: i32, to: i32, dst: &mut Vec<Claim>) {
    let mut at = from;
    for c in kept {
        if c.start > at {
            dst.push(Claim { start: at, n: c.start - at, gap: 0, member: -1, gen: 0, topic: 0 });
        }
        at = c.end();
    }
    if at < to {
        dst.push(Claim { start: at, n: to - at, gap: 0, member: -1, gen: 0, topic: 0 });
    }
}

/// Sorts free runs by start and joins neighbours.
fn merge_free(mut runs: Vec<Claim>) -> Vec<Claim> {
    sort_by_start(&mut runs);
    let mut w = 0usize;
    for i in 0..runs.len() {
        let c = runs[i];
        if w > 0 && runs[w - 1].end() == c.start {
            runs[w - 1].n += c.n;
            continue;
        }
        runs[w] = c;
        w += 1;
    }
    runs.truncate(w);
    runs
}

/// One free partition in rack mode: its global number, the member that
/// owned it before rack alignment took it away (-1 for none), who it goes
/// to (-1 until decided), and its replica set (-1 without placement).
#[derive(Clone, Copy, Debug)]
pub(crate) struct FreePartition {
    pub(crate) x: i32,
    /// Kept as in the Go package; the uniform path never passes owners.
    #[allow(dead_code)]
    pub(crate) owner: i32,
    pub(crate) to: i32,
    pub(crate) set: i32,
}

/// One of Kafka's lists of unfilled members in rack mode, with how many of
/// them are on each consumer rack, so that a partition no member of the
/// list could take costs no scan.
struct RackList {
    members: Vec<i32>,
    on_rack: Vec<i32>,
}

impl RackList {
    fn new(rk: &Racks, members: &[i32]) -> Self {
        let mut l = RackList { members: Vec::with_capacity(members.len()), on_rack: vec![0; rk.consumer_racks] };
        for &m in members {
            l.add(rk, m);
        }
        l
    }

    fn add(&mut self, rk: &Racks, m: i32) {
        self.members.push(m);
        let k = rk.member[m as usize];
        if k >= 0 {
            self.on_rack[k as usize] += 1;
        }
    }

    fn delete(&mut self, rk: &Racks, i: usize) {
        let k = rk.member[self.members[i] as usize];
        if k >= 0 {
            self.on_rack[k as usize] -= 1;
        }
        self.members.remove(i);
    }

    fn clear(&mut self) {
        self.members.clear();
        for v in &mut self.on_rack {
            *v = 0;
        }
    }

    /// Kafka's RackInfo.nextRackConsumer over the list.
    fn next(&self, rk: &Racks, s: i32, first: usize) -> i32 {
        let mut some = false;
        rk.each_rack(s, |k| some = some || self.on_rack[k as usize] > 0);
        if !some {
            return -1;
        }
        rk.next_on_rack(s, &self.members, first)
    }
}

/// Returns the indices of keys (each >= 0) sorted by key, ties in index
/// order.
pub(crate) fn counting_order(keys: &[i32]) -> Vec<i32> {
    let limit = keys.iter().copied().max().unwrap_or(0).max(0) as usize;
    let mut start = vec![0i32; limit + 2];
    for &k in keys {
        start[k as usize + 1] += 1;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    let mut out = vec![0i32; keys.len()];
    for (i, &k) in keys.iter().enumerate() {
        out[start[k as usize] as usize] = i as i32;
        start[k as usize] += 1;
    }
    out
}

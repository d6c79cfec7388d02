//! What members say they own, as runs, and how conflicts settle (claims.go).

use std::collections::HashMap;

use wasmassign::TopicPartitions;

use crate::group::Group;

/// A run of partitions that one member says it owns: the n global numbers
/// start, start+stride, start+2*stride, ..., claimed in generation gen.
/// After settle, the same type holds runs that a member keeps, or is
/// assigned, and gen is meaningless.
///
/// A contiguous run (stride 1) lies within one topic, topic; a strided run
/// may cross topics, and topic is then the rank of its first partition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Claim {
    pub(crate) start: i32,
    pub(crate) n: i32,
    /// The stride minus one, so that a claim without it is contiguous.
    pub(crate) gap: i32,
    pub(crate) member: i32,
    pub(crate) gen: i32,
    pub(crate) topic: i32,
}

impl Claim {
    /// Returns the distance between consecutive partitions of the run.
    #[inline]
    pub(crate) fn stride(&self) -> i32 {
        self.gap.wrapping_add(1)
    }

    /// Returns the run's last global number.
    #[inline]
    pub(crate) fn last(&self) -> i32 {
        self.start.wrapping_add((self.n.wrapping_sub(1)).wrapping_mul(self.gap.wrapping_add(1)))
    }

    /// Returns the global number just past the run's last partition.
    #[inline]
    pub(crate) fn end(&self) -> i32 {
        self.last().wrapping_add(1)
    }

    /// Reports whether the run has no holes.
    #[inline]
    pub(crate) fn contiguous(&self) -> bool {
        self.gap == 0 || self.n == 1
    }
}

/// Appends c to out, or extends out's last claim when c continues it: same
/// member and generation, and c's partitions carry on the last claim's
/// progression. Contiguous runs are only joined within one topic.
#[inline]
pub(crate) fn push_claim(out: &mut Vec<Claim>, mut c: Claim) {
    if c.n == 1 {
        c.gap = 0;
    }
    let k = match out.len().checked_sub(1) {
        Some(k) => k,
        None => {
            out.push(c);
            return;
        }
    };
    let p = out[k];
    if p.member != c.member || p.gen != c.gen || c.start <= p.last() {
        out.push(c);
        return;
    }
    let d = c.start as i64 - p.last() as i64;
    let joins = (p.n == 1 && (c.n == 1 || c.stride() as i64 == d))
        || (p.stride() as i64 == d && (c.n == 1 || c.gap == p.gap));
    if !joins || (d == 1 && p.topic != c.topic) {
        out.push(c);
        return;
    }
    let p = &mut out[k];
    p.gap = (d - 1) as i32;
    p.n += c.n;
}

/// Kafka's DEFAULT_GENERATION: the generation of a member that did not say.
pub(crate) const DEFAULT_GENERATION: i32 = -1;

/// Where a topic list of the request lies among the ranks: its topics are
/// the n consecutive ranks from r0, and each has size partitions.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ListSpan {
    pub(crate) r0: i32,
    pub(crate) n: i32,
    pub(crate) size: i32,
    pub(crate) ok: bool,
}

/// The state of appending one member's owned entries: the global number that
/// would continue the member's last claim as a progression of stride step;
/// -1 when there is none.
struct Next {
    next: i32,
    step: i32,
}

impl Next {
    /// Resets the state to continue the last claim of out (from from on).
    #[inline]
    fn after(&mut self, out: &[Claim], from: usize) {
        self.next = -1;
        if out.len() > from {
            let c = &out[out.len() - 1];
            if c.n > 1 && c.gap > 0 {
                self.step = c.gap + 1;
                self.next = c.last().wrapping_add(self.step);
            }
        }
    }
}

impl<'a> Group<'a> {
    /// Collects what every member says it owns, cut into runs, following
    /// each assignor's rules for where ownership comes from.
    pub(crate) fn claims(&mut self, cooperative: bool) -> Vec<Claim> {
        let req = self.req;
        let mut out = Vec::new();
        if cooperative {
            if any_owned(req) {
                for (m, mem) in req.members.iter().enumerate() {
                    let mut gen = mem.owned_generation;
                    if gen < 0 {
                        // CooperativeStickyAssignor.memberData: without a
                        // v2+ generation, the generation is in the user data.
                        gen = cooperative_user_data_generation(&mem.user_data);
                    }
                    self.append_owned(&mut out, &mem.owned, m as i32, gen);
                }
                return out;
            }
            self.previous_claims(&mut out);
            return out;
        }
        if !req.members.iter().any(|m| !m.user_data.is_empty()) {
            self.previous_claims(&mut out);
            return out;
        }
        let mut names: Option<HashMap<&[u8], i32>> = None;
        for (m, mem) in req.members.iter().enumerate() {
            if !mem.user_data.is_empty() {
                self.append_sticky_user_data(&mut out, &mem.user_data, m as i32, &mut names);
            }
        }
        out
    }

    /// The fallback when members report nothing: what the host assigned in
    /// the previous generation, one generation for all.
    fn previous_claims(&mut self, out: &mut Vec<Claim>) {
        let req = self.req;
        for (m, mem) in req.members.iter().enumerate() {
            self.append_owned(out, &mem.previous, m as i32, 0);
        }
    }

    /// Appends member m's claims from a topic-partitions list. Partitions of
    /// topics that cannot be assigned, or that do not exist, are skipped.
    pub(crate) fn append_owned(&mut self, out: &mut Vec<Claim>, tps: &[TopicPartitions], m: i32, gen: i32) {
        let from = out.len();
        let mut st = Next { next: -1, step: 0 };
        for tp in tps {
            if tp.list {
                // An entry over a topic list (the grouped layout).
                self.append_owned_list(out, tp.topic, &tp.partitions, m, gen);
                st.after(out, from);
                continue;
            }
            self.append_owned_entry(out, from, &mut st, tp.topic, &tp.partitions, m, gen);
        }
    }

    /// Appends the claims of one plain entry (topic t, parts) of member m.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn append_owned_entry(
        &self,
        out: &mut Vec<Claim>,
        from: usize,
        st: &mut Next,
        t: u32,
        parts: &[i32],
        m: i32,
        gen: i32,
    ) {
        if t as usize >= self.rank_of.len() {
            return;
        }
        let r = self.rank_of[t as usize];
        if r < 0 || parts.is_empty() {
            return;
        }
        let base = self.base[r as usize];
        let limit = self.base[r as usize + 1] - base;
        if parts.len() == 1 {
            // Kafka's round robin gives a member of a large group one
            // partition of each of many topics: extend the member's last
            // progression in place when the partition continues it.
            let p = parts[0];
            if p as u32 >= limit as u32 {
                return;
            }
            if base + p == st.next {
                let k = out.len() - 1;
                out[k].n += 1;
                st.next = st.next.wrapping_add(st.step);
                return;
            }
            push_claim(out, Claim { start: base + p, n: 1, gap: 0, member: m, gen, topic: r });
        } else {
            let (d, ok) = progression(parts, limit);
            if ok {
                push_claim(
                    out,
                    Claim { start: base + parts[0], n: parts.len() as i32, gap: d - 1, member: m, gen, topic: r },
                );
            } else {
                append_runs(out, parts, limit, base, m, gen, r);
            }
        }
        st.after(out, from);
    }

    /// Returns the span of the request's topic list k, worked out once per
    /// list: lists are shared by every member whose entries refer to them.
    fn span(&mut self, k: u32) -> ListSpan {
        let lists = match &self.req.topic_lists {
            Some(l) => l,
            None => return ListSpan { r0: 0, n: 0, size: 0, ok: false },
        };
        if self.spans.is_none() {
            self.spans = Some(vec![None; lists.len()]);
        }
        if let Some(Some(sp)) = self.spans.as_ref().map(|s| s[k as usize]) {
            return sp;
        }
        let sp = self.compute_span(&lists[k as usize]);
        if let Some(s) = self.spans.as_mut() {
            s[k as usize] = Some(sp);
        }
        sp
    }

    fn compute_span(&self, l: &[u32]) -> ListSpan {
        let none = ListSpan { r0: 0, n: 0, size: 0, ok: false };
        // The decoder refuses empty lists.
        if l.is_empty() || l[0] as usize >= self.rank_of.len() {
            return none;
        }
        let r0 = self.rank_of[l[0] as usize];
        if r0 < 0 {
            return none;
        }
        let size = self.partitions(r0);
        for (i, &t) in l.iter().enumerate() {
            if t as usize >= self.rank_of.len() {
                return none;
            }
            let r = self.rank_of[t as usize];
            if r != r0 + i as i32 || self.partitions(r) != size {
                return none;
            }
        }
        ListSpan { r0, n: l.len() as i32, size, ok: true }
    }

    /// Appends member m's claims from an entry over topic list k. The usual
    /// entry, one partition of each of equally large topics with consecutive
    /// ranks, is one progression whose stride is the topic size; anything
    /// else is read topic by topic.
    fn append_owned_list(&mut self, out: &mut Vec<Claim>, k: u32, parts: &[i32], m: i32, gen: i32) {
        let req = self.req;
        let lists = match &req.topic_lists {
            Some(l) => l,
            None => return,
        };
        if k as usize >= lists.len() || parts.is_empty() {
            return;
        }
        let sp = self.span(k);
        if sp.ok {
            let (mut d, mut ok) = (sp.size, (parts[0] as u32) < (sp.size as u32)); // one partition per topic
            if parts.len() > 1 {
                let (d2, ok2) = progression(parts, sp.size);
                d = d2;
                ok = ok2 && parts.len() as i64 * d as i64 == sp.size as i64;
            }
            if ok && d > 1 && parts[0] < d {
                let c = Claim {
                    start: self.base[sp.r0 as usize] + parts[0],
                    n: sp.n * parts.len() as i32,
                    gap: d - 1,
                    member: m,
                    gen,
                    topic: sp.r0,
                };
                push_claim(out, c);
                return;
            }
        }
        let from = out.len();
        let mut st = Next { next: -1, step: 0 };
        for &t in &lists[k as usize] {
            self.append_owned_entry(out, from, &mut st, t, parts, m, gen);
        }
    }

    /// Appends the claims of StickyAssignor user data:
    ///
    ///   previous_assignment: [ {topic: int16-length string, partitions: [int32]} ]
    ///   generation: int32    (v1 only)
    ///
    /// in Kafka's big-endian protocol encoding. Four or more bytes after the
    /// array are a v1 generation and fewer mean v0, with generation -1.
    /// User data that does not decode as either yields no claims at all.
    fn append_sticky_user_data<'u>(
        &self,
        out: &mut Vec<Claim>,
        ud: &'u [u8],
        m: i32,
        names: &mut Option<HashMap<&'a [u8], i32>>,
    ) {
        let from = out.len();
        let mut r = BeReader::new(ud);
        let topics = r.count();
        let mut guess = 0usize; // the rank the next topic probably has
        let mut i = 0usize;
        while i < topics && r.ok {
            i += 1;
            let name = r.str();
            let k = r.count();
            if !r.need(4 * k as u64) {
                break;
            }
            let raw = &r.b[r.off..r.off + 4 * k];
            r.off += 4 * k;
            // User data lists topics in name order, so the next topic is
            // usually the next rank: comparing one name costs less than
            // hashing it.
            let mut rk = -1i32;
            if guess < self.by_rank.len() && same_bytes(name, self.req.topics[self.by_rank[guess] as usize].name.as_bytes()) {
                rk = guess as i32;
            } else {
                let req = self.req;
                let map = names.get_or_insert_with(|| {
                    let mut map = HashMap::with_capacity(req.topics.len());
                    for (t, tp) in req.topics.iter().enumerate() {
                        map.insert(tp.name.as_bytes(), t as i32);
                    }
                    map
                });
                if let Some(&t) = map.get(name) {
                    rk = self.rank_of[t as usize];
                }
            }
            if rk < 0 {
                continue;
            }
            guess = rk as usize + 1;
            if k > 0 {
                let limit = self.partitions(rk);
                let base = self.base[rk as usize];
                if k == 1 {
                    // As in append_owned: extend the last progression.
                    let p = be_i32(raw, 0);
                    if p as u32 >= limit as u32 {
                        continue;
                    }
                    let x = base + p;
                    if out.len() > from {
                        let j = out.len() - 1;
                        let c = &mut out[j];
                        if c.n > 1 && c.gap > 0 && x as i64 == c.start as i64 + c.n as i64 * (c.gap as i64 + 1) {
                            c.n += 1;
                            continue;
                        }
                    }
                    push_claim(out, Claim { start: x, n: 1, gap: 0, member: m, gen: 0, topic: rk });
                    continue;
                }
                let p0 = be_i32(raw, 0);
                let d = be_i32(raw, 4).wrapping_sub(p0);
                if p0 >= 0
                    && d > 0
                    && (p0 as i64 + (k as i64 - 1) * d as i64) < limit as i64
                    && strided_be(raw, p0, d)
                {
                    push_claim(out, Claim { start: base + p0, n: k as i32, gap: d - 1, member: m, gen: 0, topic: rk });
                    continue;
                }
                append_runs_be(out, raw, limit, base, m, rk);
            }
        }
        if !r.ok {
            out.truncate(from);
            return;
        }
        let gen = if ud.len() - r.off >= 4 { be_i32(ud, r.off) } else { DEFAULT_GENERATION };
        for c in &mut out[from..] {
            c.gen = gen;
        }
    }

    /// Resolves conflicting claims and returns the runs each member keeps,
    /// sorted by start; no partition is in two runs. Per partition, the
    /// claims with the highest generation win; when they come from more than
    /// one member, nobody keeps the partition (Kafka's
    /// partitionsWithMultiplePreviousOwners).
    pub(crate) fn settle(&self, mut claims: Vec<Claim>) -> Vec<Claim> {
        if claims.is_empty() {
            return claims;
        }
        sort_by_start(&mut claims);
        if claims.iter().any(|c| !c.contiguous()) {
            if self.disjoint(&claims) {
                return claims;
            }
            return settle_runs(self.unstride(&claims));
        }
        settle_runs(claims)
    }

    /// Reports whether no partition is in two of runs (sorted by start).
    pub(crate) fn disjoint(&self, runs: &[Claim]) -> bool {
        let (s, ok) = common_stride(runs);
        if ok && s as i64 <= 4 * runs.len() as i64 + 64 {
            let keys = residue_order(runs, s);
            for k in 1..keys.len() {
                if keys[k] >> 32 == keys[k - 1] >> 32
                    && runs[keys[k] as u32 as usize].start <= runs[keys[k - 1] as u32 as usize].last()
                {
                    return false;
                }
            }
            return true;
        }
        let mut bits = Bitset::new(self.base[self.by_rank.len()]);
        for c in runs {
            if !bits.mark(c) {
                return false;
            }
        }
        true
    }

    /// Returns runs cut into contiguous runs within one topic each, sorted
    /// by start, with every other field kept.
    pub(crate) fn unstride(&self, runs: &[Claim]) -> Vec<Claim> {
        let size: usize = runs.iter().map(|c| if c.contiguous() { 1 } else { c.n as usize }).sum();
        let mut out = Vec::with_capacity(size);
        let mut interleaved = false;
        for c in runs {
            if c.contiguous() {
                self.append_split(&mut out, *c);
                continue;
            }
            interleaved = true;
            let stride = c.stride();
            let mut x = c.start;
            let mut r = self.topic_at(c.start);
            for _ in 0..c.n {
                while self.base[r as usize + 1] <= x {
                    r += 1;
                }
                out.push(Claim { start: x, n: 1, gap: 0, member: c.member, gen: c.gen, topic: r });
                x = x.wrapping_add(stride);
            }
        }
        if interleaved {
            sort_by_start(&mut out);
            coalesce_same_gen(&mut out);
        }
        out
    }

    /// Appends the contiguous run c cut at topic boundaries.
    pub(crate) fn append_split(&self, out: &mut Vec<Claim>, c: Claim) {
        let (mut x, end, mut r) = (c.start, c.end(), self.topic_at(c.start));
        while x < end {
            let e = end.min(self.base[r as usize + 1]);
            let mut piece = c;
            piece.start = x;
            piece.n = e - x;
            piece.gap = 0;
            piece.topic = r;
            out.push(piece);
            x = e;
            r += 1;
        }
    }

    /// Appends the pieces of the strided run c, one per topic it has
    /// partitions in.
    pub(crate) fn append_strided_pieces(&self, out: &mut Vec<Claim>, c: Claim) {
        let stride = c.stride() as i64;
        let (mut x, mut left) = (c.start as i64, c.n);
        while left > 0 {
            let r = self.topic_at(x as i32);
            let k = (left as i64).min((self.base[r as usize + 1] as i64 - x + stride - 1) / stride) as i32;
            let mut piece = c;
            piece.start = x as i32;
            piece.n = k;
            piece.topic = r;
            if k == 1 {
                piece.gap = 0;
            }
            out.push(piece);
            x += k as i64 * stride;
            left -= k;
        }
    }
}

/// Reports whether a and b are equal. Topic names are short: up to 16
/// bytes they are compared with two overlapping loads a side and no loop
/// (in wasm every loop iteration, memcmp's included, costs an exit to the
/// host's deadline check, and a rejoin compares a million names).
#[inline]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let w8 = |s: &[u8], at: usize| u64::from_le_bytes([s[at], s[at + 1], s[at + 2], s[at + 3], s[at + 4], s[at + 5], s[at + 6], s[at + 7]]);
    let w4 = |s: &[u8], at: usize| u32::from_le_bytes([s[at], s[at + 1], s[at + 2], s[at + 3]]);
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => w4(a, 0) == w4(b, 0) && w4(a, n - 4) == w4(b, n - 4),
        8..=16 => w8(a, 0) == w8(b, 0) && w8(a, n - 8) == w8(b, n - 8),
        _ => a == b,
    }
}

/// Reports whether some member reports an owned partition.
fn any_owned(req: &wasmassign::Request) -> bool {
    req.members.iter().any(|m| m.owned.iter().any(|tp| !tp.partitions.is_empty()))
}

/// Cuts parts into runs of consecutive ids below limit and appends them as
/// claims; ids out of range are skipped.
#[allow(clippy::too_many_arguments)]
fn append_runs(dst: &mut Vec<Claim>, parts: &[i32], limit: i32, base: i32, member: i32, gen: i32, topic: i32) {
    let mut i = 0;
    while i < parts.len() {
        let p = parts[i];
        i += 1;
        if p as u32 >= limit as u32 {
            continue;
        }
        let j = i + run_length(&parts[i..], p + 1, limit);
        push_claim(dst, Claim { start: base + p, n: (j - i + 1) as i32, gap: 0, member, gen, topic });
        i = j;
    }
}

/// Reports whether parts (not empty) is p0, p0+d, p0+2d, ... with
/// d = parts[1]-parts[0] > 0 (1 for a single partition), all within
/// [0, limit), and returns d.
pub(crate) fn progression(parts: &[i32], limit: i32) -> (i32, bool) {
    let p0 = parts[0];
    let d = if parts.len() > 1 { parts[1].wrapping_sub(p0) } else { 1 };
    if p0 < 0 || d <= 0 || p0 as i64 + (parts.len() as i64 - 1) * d as i64 >= limit as i64 {
        return (0, false);
    }
    (d, strided(parts, p0, d))
}

/// Reports whether parts is p0, p0+d, p0+2d, and so on.
fn strided(parts: &[i32], p0: i32, d: i32) -> bool {
    let mut diff = 0i32;
    let mut at = p0;
    for &p in parts {
        diff |= p ^ at;
        at = at.wrapping_add(d);
    }
    diff == 0
}

/// Returns how many leading elements of parts continue the run next,
/// next+1, ... below limit.
fn run_length(parts: &[i32], next: i32, limit: i32) -> usize {
    let lim = limit as i64 - next as i64;
    if lim <= 0 {
        return 0;
    }
    let n = parts.len().min(lim as usize);
    for (i, &p) in parts[..n].iter().enumerate() {
        if p != next + i as i32 {
            return i;
        }
    }
    n
}

/// Reads CooperativeStickyAssignor's user data: one big-endian int32
/// generation; -1 for no user data or user data too short to read.
pub(crate) fn cooperative_user_data_generation(ud: &[u8]) -> i32 {
    if ud.len() < 4 {
        return DEFAULT_GENERATION;
    }
    be_i32(ud, 0)
}

/// Returns the big-endian int32 at b[at..at+4].
#[inline]
pub(crate) fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Reports whether raw holds the big-endian int32s p0, p0+d, p0+2d, ...,
/// four per iteration: in wasm every loop iteration costs an exit to the
/// host's deadline check.
fn strided_be(raw: &[u8], p0: i32, d: i32) -> bool {
    let w = |b: &[u8], i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let mut diff = 0u32;
    let mut at = p0 as u32;
    let d = d as u32;
    let mut quads = raw.chunks_exact(16);
    for q in &mut quads {
        diff |= w(q, 0) ^ at;
        diff |= w(q, 4) ^ at.wrapping_add(d);
        diff |= w(q, 8) ^ at.wrapping_add(d.wrapping_mul(2));
        diff |= w(q, 12) ^ at.wrapping_add(d.wrapping_mul(3));
        at = at.wrapping_add(d.wrapping_mul(4));
    }
    for x in quads.remainder().chunks_exact(4) {
        diff |= w(x, 0) ^ at;
        at = at.wrapping_add(d);
    }
    diff == 0
}

/// append_runs over big-endian int32s, with the generation left for the
/// caller to fill in.
fn append_runs_be(dst: &mut Vec<Claim>, raw: &[u8], limit: i32, base: i32, member: i32, topic: i32) {
    let n = raw.len() / 4;
    let mut i = 0;
    while i < n {
        let p = be_i32(raw, 4 * i);
        i += 1;
        if p as u32 >= limit as u32 {
            continue;
        }
        let mut j = i;
        while j < n
            && (p as i64 + (j - i + 1) as i64) < limit as i64
            && be_i32(raw, 4 * j) as i64 == p as i64 + (j - i + 1) as i64
        {
            j += 1;
        }
        push_claim(dst, Claim { start: base + p, n: (j - i + 1) as i32, gap: 0, member, gen: 0, topic });
        i = j;
    }
}

/// Reads Kafka's big-endian protocol types; ok turns false at the first
/// thing that does not fit.
pub(crate) struct BeReader<'b> {
    pub(crate) b: &'b [u8],
    pub(crate) off: usize,
    pub(crate) ok: bool,
}

impl<'b> BeReader<'b> {
    /// A reader at the start of b.
    pub(crate) fn new(b: &'b [u8]) -> Self {
        BeReader { b, off: 0, ok: true }
    }

    /// Reports whether n more bytes are there (and ok stays true).
    #[inline]
    pub(crate) fn need(&mut self, n: u64) -> bool {
        if ((self.b.len() - self.off) as u64) < n {
            self.ok = false;
        }
        self.ok
    }

    /// Reads an int32 array length; a negative one (a null array, which
    /// these schemas do not allow) is a failure.
    pub(crate) fn count(&mut self) -> usize {
        if !self.need(4) {
            return 0;
        }
        let v = be_i32(self.b, self.off);
        self.off += 4;
        if v < 0 {
            self.ok = false;
            return 0;
        }
        v as usize
    }

    /// Reads an int16-length string; a negative length (a null string) is a
    /// failure.
    pub(crate) fn str(&mut self) -> &'b [u8] {
        if !self.need(2) {
            return &[];
        }
        let l = i16::from_be_bytes([self.b[self.off], self.b[self.off + 1]]);
        self.off += 2;
        if l < 0 || !self.need(l as u64) {
            self.ok = false;
            return &[];
        }
        let s = &self.b[self.off..self.off + l as usize];
        self.off += l as usize;
        s
    }
}

/// settle for contiguous runs sorted by start.
fn settle_runs(mut claims: Vec<Claim>) -> Vec<Claim> {
    let overlap = (1..claims.len()).any(|i| claims[i].start < claims[i - 1].end());
    if !overlap {
        coalesce(&mut claims);
        return claims;
    }
    sweep(&claims)
}

/// Returns the stride of the runs that hold more than one partition, when
/// there are some and all of them are strided alike.
pub(crate) fn common_stride(runs: &[Claim]) -> (i32, bool) {
    let mut s = 0i32;
    for c in runs {
        if c.n == 1 {
            continue;
        }
        if c.gap == 0 || (s != 0 && c.stride() != s) {
            return (0, false);
        }
        s = c.stride();
    }
    (s, s > 0)
}

/// Returns runs' indices ordered by start modulo s, then by index, each
/// packed under its residue.
pub(crate) fn residue_order(runs: &[Claim], s: i32) -> Vec<u64> {
    let mut keys: Vec<u64> = runs.iter().enumerate().map(|(i, c)| ((c.start % s) as u64) << 32 | i as u64).collect();
    keys.sort_unstable();
    keys
}

/// A set of global partition numbers.
pub(crate) struct Bitset(pub(crate) Vec<u64>);

impl Bitset {
    pub(crate) fn new(n: i32) -> Self {
        Bitset(vec![0; (n.max(0) as usize + 63) / 64])
    }

    /// Adds the partitions of c and reports whether none was in the set.
    pub(crate) fn mark(&mut self, c: &Claim) -> bool {
        if c.contiguous() {
            return self.mark_range(c.start, c.start + c.n);
        }
        self.mark_strided(c.start, c.stride(), c.n)
    }

    /// Adds [from, to) a word at a time.
    fn mark_range(&mut self, from: i32, to: i32) -> bool {
        let b = &mut self.0;
        let mut clash = 0u64;
        let mut x = from;
        while x < to {
            let w = x >> 6;
            let lo = (x & 63) as u32;
            let hi = (to - (w << 6)).min(64);
            let mut mask = !0u64 << lo;
            if hi < 64 {
                mask &= (1u64 << hi as u32) - 1;
            }
            clash |= b[w as usize] & mask;
            b[w as usize] |= mask;
            x = (w + 1) << 6;
        }
        clash == 0
    }

    /// Adds x, x+stride, ... (n of them).
    fn mark_strided(&mut self, mut x: i32, stride: i32, mut n: i32) -> bool {
        let b = &mut self.0;
        let mut clash = 0u64;
        while n > 0 {
            let bit = 1u64 << (x & 63) as u32;
            clash |= b[(x >> 6) as usize] & bit;
            b[(x >> 6) as usize] |= bit;
            x = x.wrapping_add(stride);
            n -= 1;
        }
        clash == 0
    }

    /// Returns the first x' in [x, end) whose bit is set (set) or clear
    /// (!set), or end.
    pub(crate) fn next(&self, mut x: i32, end: i32, set: bool) -> i32 {
        while x < end {
            let mut w = self.0[(x >> 6) as usize];
            if !set {
                w = !w;
            }
            w &= !0u64 << (x & 63) as u32;
            if w != 0 {
                return end.min((x & !63) + w.trailing_zeros() as i32);
            }
            x = (x & !63) + 64;
        }
        end
    }
}

/// coalesce for claims that still carry generations.
fn coalesce_same_gen(cs: &mut Vec<Claim>) {
    let mut w = 0usize;
    for i in 0..cs.len() {
        let c = cs[i];
        if w > 0 {
            let o = &mut cs[w - 1];
            if o.member == c.member && o.gen == c.gen && o.topic == c.topic && o.end() == c.start {
                o.n += c.n;
                continue;
            }
        }
        cs[w] = c;
        w += 1;
    }
    cs.truncate(w);
}

/// Sorts runs by start, keeping the order of equal starts, through packed
/// keys.
pub(crate) fn sort_by_start(cs: &mut [Claim]) {
    if (1..cs.len()).all(|i| cs[i].start >= cs[i - 1].start) {
        return;
    }
    let mut keys: Vec<u64> = cs.iter().enumerate().map(|(i, c)| (c.start as u32 as u64) << 32 | i as u64).collect();
    keys.sort_unstable();
    let tmp: Vec<Claim> = keys.iter().map(|&k| cs[k as u32 as usize]).collect();
    cs.copy_from_slice(&tmp);
}

/// Merges neighbouring runs of the same member and topic, in place.
pub(crate) fn coalesce(cs: &mut Vec<Claim>) {
    let mut w = 0usize;
    for i in 0..cs.len() {
        let c = cs[i];
        if w > 0 {
            let o = &mut cs[w - 1];
            if o.member == c.member && o.topic == c.topic && o.end() == c.start {
                o.n += c.n;
                continue;
            }
        }
        cs[w] = c;
        w += 1;
    }
    cs.truncate(w);
}

/// Settles overlapping claims, sorted by start, interval by interval between
/// consecutive run boundaries.
fn sweep(cs: &[Claim]) -> Vec<Claim> {
    let mut points: Vec<i32> = Vec::with_capacity(2 * cs.len());
    for c in cs {
        points.push(c.start);
        points.push(c.end());
    }
    points.sort_unstable();
    points.dedup();

    let mut kept: Vec<Claim> = Vec::new();
    let mut active: Vec<i32> = Vec::new();
    let mut next = 0usize;
    for k in 0..points.len().saturating_sub(1) {
        let (a, b) = (points[k], points[k + 1]);
        while next < cs.len() && cs[next].start == a {
            active.push(next as i32);
            next += 1;
        }
        active.retain(|&i| cs[i as usize].end() > a);
        if active.is_empty() {
            continue;
        }
        let w = winner(cs, &active);
        if w < 0 {
            continue;
        }
        let c = cs[w as usize];
        if let Some(j) = kept.last_mut() {
            if j.member == c.member && j.topic == c.topic && j.end() == a {
                j.n += b - a;
                continue;
            }
        }
        kept.push(Claim { start: a, n: b - a, gap: 0, member: c.member, gen: 0, topic: c.topic });
    }
    kept
}

/// Returns the claim that keeps an interval covered by the active claims,
/// or -1 when members of the highest generation disagree.
fn winner(cs: &[Claim], active: &[i32]) -> i32 {
    let mut best = active[0];
    for &i in &active[1..] {
        if cs[i as usize].gen > cs[best as usize].gen {
            best = i;
        }
    }
    let b = cs[best as usize];
    for &i in active {
        if cs[i as usize].gen == b.gen && cs[i as usize].member != b.member {
            return -1;
        }
    }
    best
}

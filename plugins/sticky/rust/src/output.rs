//! Assigned runs turned into the response (output.go).

use std::collections::HashMap;

use wasmassign::{MemberAssignment, Request, Response, TopicPartitions};

use crate::claims::Claim;
use crate::group::Group;
use crate::uniform::bucket_by_member;

/// A run of partitions p0, p0+step, ..., k of them, of topic rank r.
#[derive(Clone, Copy, Debug)]
struct Piece {
    r: i32,
    p0: i32,
    k: i32,
    step: i32,
}

/// The shortest run of entries that the grouper turns into one list entry
/// (abi.MinRun).
const MIN_RUN: usize = 3;

/// A strided run that holds the same progression of k partitions p0,
/// p0+stride, ... in each of topics consecutive ranks from r0, all of one
/// size.
#[derive(Clone, Copy, Debug, Default)]
struct WholeTopics {
    r0: i32,
    topics: i32,
    p0: i32,
    stride: i32,
    k: i32,
}

/// One entry of a member's answer while it is built: topic (a request topic
/// index, or a response list index when list is set) and its partitions,
/// ids[from..to] of the member's shared buffer. Entries cost no allocation
/// of their own until the response is materialized, after grouping.
#[derive(Clone, Copy, Debug)]
struct Entry {
    topic: u32,
    list: bool,
    from: u32,
    to: u32,
}

/// A member's answer while it is built: its entries, their partition ids.
#[derive(Default)]
struct Answer {
    entries: Vec<Entry>,
    ids: Vec<i32>,
}

impl Answer {
    fn clear(&mut self) {
        self.entries.clear();
        self.ids.clear();
    }

    /// Starts an entry whose partitions are appended to ids next; finish
    /// it with close.
    #[inline]
    fn open(&mut self, topic: u32, list: bool) {
        let at = self.ids.len() as u32;
        self.entries.push(Entry { topic, list, from: at, to: at });
    }

    #[inline]
    fn close(&mut self) {
        let at = self.ids.len() as u32;
        if let Some(e) = self.entries.last_mut() {
            e.to = at;
        }
    }

    #[inline]
    fn parts(&self, e: &Entry) -> &[i32] {
        &self.ids[e.from as usize..e.to as usize]
    }
}

impl<'a> Group<'a> {
    /// Turns assigned runs into the answer: one MemberAssignment per member,
    /// in request order, topics in name order, partitions ascending. With
    /// user_data, each member also gets StickyAssignor's v1 user data for
    /// generation.
    ///
    /// A grouped request gets a grouped response, for both assignors (the Go
    /// package groups only the cooperative one's; expanded, the answers are
    /// the same): with Kafka's round robin a member of a large group gets
    /// one partition of each of hundreds of topics, and an entry of its own
    /// each would cost an allocation apiece.
    pub(crate) fn response(&mut self, runs: &[Claim], user_data: bool, generation: i32) -> Response {
        let req = self.req;
        let n = req.members.len() as i32;
        let (by_member, start) = bucket_by_member(runs, n, None);

        let mut max_p = 0i32;
        for r in 0..self.by_rank.len() as i32 {
            max_p = max_p.max(self.partitions(r));
        }
        // A request with topic lists accepts a response with them.
        let mut lists: Option<RankLists> = None;
        if req.topic_lists.is_some() {
            lists = Some(RankLists { grouper: Grouper::default(), by_key: HashMap::new(), last: None });
        }
        let mut assignments = Vec::with_capacity(n as usize);
        let mut a = Answer::default();
        let mut grouped: Vec<Entry> = Vec::new();
        let mut pieces: Vec<Piece> = Vec::new();
        let mut templates: Vec<Option<Template>> = Vec::new();
        let mut ud_scratch: Vec<u8> = Vec::new();
        for m in 0..n {
            a.clear();
            let rs = &by_member[start[m as usize] as usize..start[m as usize + 1] as usize];
            let mut w = WholeTopics::default();
            let mut done = false;
            if rs.len() == 1 && lists.is_some() && self.whole_topics(&rs[0], &mut w) {
                if let Some(list) = lists.as_mut().and_then(|l| l.add(self, w.r0, w.topics)) {
                    // The same progression in each of equally large topics,
                    // as one entry.
                    a.open(list, true);
                    append_progression(&mut a.ids, w.p0, w.stride, w.k);
                    a.close();
                    done = true;
                }
            }
            if !done {
                if rs.len() == 1 && !rs[0].contiguous() && rs[0].stride() >= max_p {
                    // One partition per topic, each its own entry.
                    self.append_singles(&mut a, rs[0]);
                } else {
                    self.append_entries(&mut a, rs, &mut pieces);
                }
            }
            let mut ma = MemberAssignment { member: m as u32, partitions: Vec::new(), user_data: Vec::new() };
            if user_data {
                let table = lists.as_ref().map(|l| &l.grouper.lists[..]).unwrap_or(&[]);
                append_user_data(&mut ma.user_data, req, &a, table, &mut templates, &mut ud_scratch, generation);
            }
            let entries: &[Entry] = match lists.as_mut() {
                Some(l) if a.entries.len() >= MIN_RUN => {
                    grouped.clear();
                    l.grouper.group(&mut grouped, &a);
                    &grouped
                }
                _ => &a.entries,
            };
            ma.partitions = entries
                .iter()
                .map(|e| TopicPartitions { topic: e.topic, partitions: a.parts(e).to_vec(), list: e.list })
                .collect();
            assignments.push(ma);
        }
        let topic_lists = lists.map(|l| l.grouper.lists);
        Response { assignments, topic_lists }
    }

    /// Reports whether the run c holds the same progression in each of
    /// consecutive, equally large topics, and fills w. Only then can one
    /// entry over a topic list stand for it.
    fn whole_topics(&mut self, c: &Claim, w: &mut WholeTopics) -> bool {
        if c.contiguous() {
            return false;
        }
        let s = c.stride();
        let r0 = self.topic_at(c.start);
        let size = self.partitions(r0);
        if size % s != 0 {
            return false;
        }
        let k = size / s;
        let p0 = c.start - self.base[r0 as usize];
        if p0 >= s || c.n % k != 0 {
            return false;
        }
        let topics = c.n / k;
        self.ensure_size_run();
        let size_run = match &self.size_run {
            Some(s) => s,
            None => return false,
        };
        if (r0 + topics) as usize > self.by_rank.len() || size_run[r0 as usize] < r0 + topics - 1 {
            return false;
        }
        *w = WholeTopics { r0, topics, p0, stride: s, k };
        true
    }

    /// Appends the entries of the strided run c whose stride exceeds every
    /// topic, so that each partition is in a topic of its own.
    fn append_singles(&self, a: &mut Answer, c: Claim) {
        let (mut x, stride, mut r) = (c.start, c.stride(), self.topic_at(c.start));
        a.entries.reserve(c.n as usize);
        a.ids.reserve(c.n as usize);
        for _ in 0..c.n {
            r = self.rank_from(r, x);
            let at = a.ids.len() as u32;
            a.ids.push(x - self.base[r as usize]);
            a.entries.push(Entry { topic: self.by_rank[r as usize] as u32, list: false, from: at, to: at + 1 });
            x = x.wrapping_add(stride);
        }
    }

    /// Returns the rank of the topic holding global number x, which is in
    /// topic r or a later one.
    #[inline]
    fn rank_from(&self, mut r: i32, x: i32) -> i32 {
        if self.base[r as usize + 1] > x {
            return r;
        }
        r += 1;
        if (r as usize) < self.by_rank.len() && self.base[r as usize + 1] > x {
            return r;
        }
        self.topic_at(x)
    }

    /// Appends the entries of one member's runs rs, cutting them into
    /// pieces (pieces is scratch).
    fn append_entries(&self, a: &mut Answer, rs: &[Claim], pieces: &mut Vec<Piece>) {
        pieces.clear();
        for c in rs {
            self.append_pieces(pieces, 0, *c);
        }
        sort_pieces(pieces);
        let mut i = 0usize;
        while i < pieces.len() {
            let (j, _) = group_end(pieces, i);
            a.open(self.by_rank[pieces[i].r as usize] as u32, false);
            let from = a.ids.len();
            for p in &pieces[i..j] {
                append_progression(&mut a.ids, p.p0, p.step, p.k);
            }
            let parts = &mut a.ids[from..];
            if j - i > 1 && !parts.windows(2).all(|w| w[0] <= w[1]) {
                // Progressions of one member within a topic may interleave.
                parts.sort_unstable();
            }
            a.close();
            i = j;
        }
    }

    /// Appends the pieces of run c, one per topic it touches, to pieces,
    /// joining a contiguous piece to the previous one (pieces from from on)
    /// when it continues it.
    fn append_pieces(&self, pieces: &mut Vec<Piece>, from: usize, c: Claim) {
        let (mut x, mut r) = (c.start, self.topic_at(c.start));
        if c.contiguous() {
            let end = c.end();
            while x < end {
                let e = end.min(self.base[r as usize + 1]);
                let p0 = x - self.base[r as usize];
                let k = pieces.len();
                if k > from
                    && pieces[k - 1].r == r
                    && pieces[k - 1].step == 1
                    && pieces[k - 1].p0 + pieces[k - 1].k == p0
                {
                    pieces[k - 1].k += e - x;
                } else {
                    pieces.push(Piece { r, p0, k: e - x, step: 1 });
                }
                x = e;
                r += 1;
            }
            return;
        }
        let stride = c.stride() as i64;
        let mut left = c.n;
        while left > 0 {
            while self.base[r as usize + 1] <= x {
                r += 1;
            }
            let k = (left as i64).min(((self.base[r as usize + 1] - x) as i64 + stride - 1) / stride) as i32;
            let step = if k > 1 { stride as i32 } else { 1 };
            pieces.push(Piece { r, p0: x - self.base[r as usize], k, step });
            left -= k;
            x = (x as i64 + k as i64 * stride) as i32;
        }
    }
}

/// Sorts one member's pieces by topic rank, then first partition. No two
/// pieces of one member share both.
fn sort_pieces(ps: &mut [Piece]) {
    if ps.windows(2).all(|w| (w[0].r, w[0].p0) <= (w[1].r, w[1].p0)) {
        return;
    }
    ps.sort_unstable_by_key(|p| (p.r, p.p0));
}

/// Returns the end of the pieces of ps that share ps[i]'s topic, and how
/// many partitions they hold.
fn group_end(ps: &[Piece], i: usize) -> (usize, i32) {
    let mut total = ps[i].k;
    let mut j = i + 1;
    while j < ps.len() && ps[j].r == ps[i].r {
        total += ps[j].k;
        j += 1;
    }
    (j, total)
}

/// Appends p0, p0+step, ..., k of them, four per iteration: in wasm every
/// loop iteration costs an exit to the host's deadline check.
fn append_progression(dst: &mut Vec<i32>, mut p0: i32, step: i32, k: i32) {
    if k <= 0 {
        return;
    }
    let at = dst.len();
    dst.resize(at + k as usize, 0);
    let mut out = dst[at..].chunks_exact_mut(4);
    for q in &mut out {
        q[0] = p0;
        q[1] = p0.wrapping_add(step);
        q[2] = p0.wrapping_add(step.wrapping_mul(2));
        q[3] = p0.wrapping_add(step.wrapping_mul(3));
        p0 = p0.wrapping_add(step.wrapping_mul(4));
    }
    for v in out.into_remainder() {
        *v = p0;
        p0 = p0.wrapping_add(step);
    }
}

/// Appends StickyAssignor's v1 user data for the assignment a (topics in
/// name order, partitions ascending; an entry over a list of lists stands
/// for its topics, which are consecutive in name order): the array of
/// {topic, partitions} in Kafka's big-endian encoding, then the generation.
fn append_user_data(
    dst: &mut Vec<u8>,
    req: &Request,
    a: &Answer,
    lists: &[Vec<u32>],
    templates: &mut Vec<Option<Template>>,
    scratch: &mut Vec<u8>,
    generation: i32,
) {
    fn topics_of<'x>(e: &'x Entry, lists: &'x [Vec<u32>]) -> &'x [u32] {
        if e.list {
            &lists[e.topic as usize]
        } else {
            std::slice::from_ref(&e.topic)
        }
    }
    let topics = |e| topics_of(e, lists);
    let (mut count, mut size) = (0usize, 8usize);
    for e in &a.entries {
        for &t in topics(e) {
            count += 1;
            size += 6 + req.topics[t as usize].name.len() + 4 * (e.to - e.from) as usize;
        }
    }
    dst.reserve_exact(size);
    dst.extend_from_slice(&(count as u32).to_be_bytes());
    for e in &a.entries {
        let parts = a.parts(e);
        if e.list && parts.len() == 1 {
            // One partition of each topic of a list: every member of a
            // large group in Kafka's round robin. The bytes are the list's
            // template with the partition written into it.
            let k = e.topic as usize;
            if templates.len() <= k {
                templates.resize_with(k + 1, || None);
            }
            let tpl = templates[k].get_or_insert_with(|| Template::new(req, &lists[k]));
            let at = dst.len();
            dst.extend_from_slice(&tpl.bytes);
            let out = &mut dst[at..];
            let p = parts[0].to_be_bytes();
            let base = out.as_mut_ptr();
            let mut offs = tpl.offsets.chunks_exact(8);
            // SAFETY: Template::new records each offset as the start of
            // four bytes within tpl.bytes, which out is a copy of.
            unsafe {
                let put = |o: u32| (base.add(o as usize) as *mut [u8; 4]).write_unaligned(p);
                for o in &mut offs {
                    put(o[0]);
                    put(o[1]);
                    put(o[2]);
                    put(o[3]);
                    put(o[4]);
                    put(o[5]);
                    put(o[6]);
                    put(o[7]);
                }
                for &o in offs.remainder() {
                    put(o);
                }
            }
            continue;
        }
        if parts.len() == 1 {
            // One partition per topic: Kafka's round robin in a large
            // group. In wasm every loop iteration costs an exit to the
            // host's deadline check, so this path has no inner loop, and
            // writes two topics per iteration.
            let p = parts[0].to_be_bytes();
            let ts = topics(e);
            let mut i = 0;
            while i + 2 <= ts.len() {
                write_single(dst, req.topics[ts[i] as usize].name.as_bytes(), p);
                write_single(dst, req.topics[ts[i + 1] as usize].name.as_bytes(), p);
                i += 2;
            }
            if i < ts.len() {
                write_single(dst, req.topics[ts[i] as usize].name.as_bytes(), p);
            }
            continue;
        }
        // The partitions' bytes are the same for every topic of the entry:
        // write them once, then copy them per topic.
        let pb_at = scratch.len();
        append_big_endian(scratch, parts);
        for &t in topics(e) {
            let name = req.topics[t as usize].name.as_bytes();
            dst.extend_from_slice(&(name.len() as u16).to_be_bytes());
            dst.extend_from_slice(name);
            dst.extend_from_slice(&(parts.len() as u32).to_be_bytes());
            dst.extend_from_slice(&scratch[pb_at..]);
        }
        scratch.truncate(pb_at);
    }
    dst.extend_from_slice(&generation.to_be_bytes());
}

/// Reports whether a and b hold the same ids; one id, the usual case, is
/// compared without a call to memcmp (a loop in wasm).
#[inline]
fn same_ids(a: &[i32], b: &[i32]) -> bool {
    a.len() == b.len() && (a.len() == 1 && a[0] == b[0] || a.len() != 1 && a == b)
}

/// Appends parts as big-endian int32s, four per iteration: in wasm every
/// loop iteration costs an exit to the host's deadline check.
fn append_big_endian(dst: &mut Vec<u8>, parts: &[i32]) {
    let at = dst.len();
    dst.resize(at + 4 * parts.len(), 0);
    let out = &mut dst[at..];
    let mut src = parts.chunks_exact(4);
    let mut o = out.chunks_exact_mut(16);
    for (q, w) in (&mut src).zip(&mut o) {
        w[0..4].copy_from_slice(&q[0].to_be_bytes());
        w[4..8].copy_from_slice(&q[1].to_be_bytes());
        w[8..12].copy_from_slice(&q[2].to_be_bytes());
        w[12..16].copy_from_slice(&q[3].to_be_bytes());
    }
    for (p, w) in src.remainder().iter().zip(o.into_remainder().chunks_exact_mut(4)) {
        w.copy_from_slice(&p.to_be_bytes());
    }
}

/// The sticky user data of one partition of each topic of a list, with
/// the partition left blank at offsets.
struct Template {
    bytes: Vec<u8>,
    offsets: Vec<u32>,
}

impl Template {
    fn new(req: &Request, list: &[u32]) -> Template {
        let mut t = Template { bytes: Vec::new(), offsets: Vec::with_capacity(list.len()) };
        for &topic in list {
            write_single(&mut t.bytes, req.topics[topic as usize].name.as_bytes(), [0; 4]);
            t.offsets.push(t.bytes.len() as u32 - 4);
        }
        t
    }
}

/// Writes one {topic, [partition]} element of sticky user data.
#[inline(always)]
fn write_single(dst: &mut Vec<u8>, name: &[u8], p: [u8; 4]) {
    dst.extend_from_slice(&(name.len() as u16).to_be_bytes());
    dst.extend_from_slice(name);
    dst.extend_from_slice(&[0, 0, 0, 1, p[0], p[1], p[2], p[3]]);
}

/// The topic-list table of a grouped response, with the lists of
/// consecutive ranks found by their first rank and length rather than by
/// their contents: every member of a large group gets the same one.
struct RankLists {
    grouper: Grouper,
    /// {first rank, ranks} to list index, or None when the ranks cannot be
    /// a list.
    by_key: HashMap<(i32, i32), Option<u32>>,
    /// The last key asked for and its answer: members of one group mostly
    /// ask for the same list.
    last: Option<((i32, i32), Option<u32>)>,
}

impl RankLists {
    /// Makes sure the list of the n ranks from r0 is in the table and
    /// returns its index, or None when those ranks cannot be a list: their
    /// request indices must ascend.
    fn add(&mut self, g: &Group, r0: i32, n: i32) -> Option<u32> {
        if let Some((key, v)) = self.last {
            if key == (r0, n) {
                return v;
            }
        }
        let v = self.lookup(g, r0, n);
        self.last = Some(((r0, n), v));
        v
    }

    fn lookup(&mut self, g: &Group, r0: i32, n: i32) -> Option<u32> {
        if let Some(&v) = self.by_key.get(&(r0, n)) {
            return v;
        }
        let ts = &g.by_rank[r0 as usize..(r0 + n) as usize];
        if ts.windows(2).any(|w| w[1] <= w[0]) {
            self.by_key.insert((r0, n), None);
            return None;
        }
        let list: Vec<u32> = ts.iter().map(|&t| t as u32).collect();
        let k = self.grouper.list_of(&list);
        self.by_key.insert((r0, n), Some(k));
        Some(k)
    }
}

/// Builds grouped entries (abi.Grouper): turns runs of plain entries that
/// name ascending topics with equal partition lists into one entry over a
/// topic list, and keeps the table of the lists it made, each made once.
#[derive(Default)]
struct Grouper {
    lists: Vec<Vec<u32>>,
    /// Lists by first topic, last topic and length; equal keys are then
    /// compared in full.
    by_key: HashMap<(u32, u32, u32), Vec<u32>>,
}

impl Grouper {
    /// Appends to dst the entries of a with every run of at least MIN_RUN
    /// consecutive plain entries whose topics ascend and whose partition
    /// lists are equal replaced by one entry over a topic list.
    fn group(&mut self, dst: &mut Vec<Entry>, a: &Answer) {
        let tps = &a.entries;
        let mut i = 0usize;
        let len = tps.len();
        let mut ts: Vec<u32> = Vec::new();
        while i < len {
            let mut j = i + 1;
            if !tps[i].list {
                let first = a.parts(&tps[i]);
                while j < len && !tps[j].list && tps[j].topic > tps[j - 1].topic && same_ids(a.parts(&tps[j]), first) {
                    j += 1;
                }
            }
            if j - i < MIN_RUN {
                dst.extend_from_slice(&tps[i..j]);
                i = j;
                continue;
            }
            ts.clear();
            ts.extend(tps[i..j].iter().map(|e| e.topic));
            let k = self.list_of(&ts);
            dst.push(Entry { topic: k, list: true, from: tps[i].from, to: tps[i].to });
            i = j;
        }
    }

    /// Returns the index of the list of topics ts (ascending, not empty),
    /// adding it to the table when it is new.
    fn list_of(&mut self, ts: &[u32]) -> u32 {
        let key = (ts[0], ts[ts.len() - 1], ts.len() as u32);
        let lists = &self.lists;
        if let Some(ks) = self.by_key.get(&key) {
            for &k in ks {
                if lists[k as usize] == ts {
                    return k;
                }
            }
        }
        let k = self.lists.len() as u32;
        self.lists.push(ts.to_vec());
        self.by_key.entry(key).or_insert_with(Vec::new).push(k);
        k
    }
}

//! The request read the way both sticky assignors need it (group.go).

use std::cmp::Ordering;

use wasmassign::{Member, Request};

use crate::claims::ListSpan;
use crate::groupview::{self, compare_bytes};

/// A request read the way both sticky assignors need it.
///
/// Assignable topics (they exist, have partitions and at least one
/// subscriber) are numbered by name: topic rank r is the r-th of them in name
/// order. Their partitions are numbered globally, rank after rank, so that
/// partition p of rank r is base[r]+p, and a run of consecutive global
/// numbers is a run of partitions in Kafka's (topic, partition) order.
pub(crate) struct Group<'a> {
    /// Whose claims count: owned partitions (cooperative-sticky) or user
    /// data (sticky).
    pub(crate) cooperative: bool,
    pub(crate) req: &'a Request,

    /// Member indices in the sticky assignors' member order (see
    /// member_id_order); rank is its inverse.
    pub(crate) order: Vec<i32>,
    pub(crate) rank: Vec<i32>,

    /// by_rank[r] is the request index of topic rank r; rank_of[t] is the
    /// rank of request topic t, or -1 when t is not assignable.
    pub(crate) by_rank: Vec<i32>,
    pub(crate) rank_of: Vec<i32>,
    /// base[r] is the global number of partition 0 of rank r;
    /// base[by_rank.len()] is the total number of assignable partitions.
    pub(crate) base: Vec<i32>,

    /// subs[sub_start[m]..sub_start[m+1]] are member m's assignable
    /// subscribed topics, as ranks, ascending and without repeats. When
    /// shared is true every member sent the same subscription, sub_start is
    /// empty and subs is every member's list.
    pub(crate) sub_start: Vec<i32>,
    pub(crate) subs: Vec<i32>,
    pub(crate) shared: bool,
    /// True when every member sent the same subscription, topics that do not
    /// exist included: Kafka's allSubscriptionsEqual.
    pub(crate) uniform: bool,

    /// Allocated on first use; see member_scratch.
    pub(crate) scratch: Option<MemberScratch>,
    /// Allocated on first use; see same_partition_id.
    pub(crate) size_run: Option<Vec<i32>>,
    /// Where the request's topic lists lie among the ranks; allocated on
    /// first use, see span.
    pub(crate) spans: Option<Vec<Option<ListSpan>>>,
}

/// Per-member working state, allocated once per request.
pub(crate) struct MemberScratch {
    /// pos is a member's position in the member order; count what it holds;
    /// keep how many of its owned partitions it keeps.
    pub(crate) pos: Vec<i32>,
    pub(crate) count: Vec<i32>,
    pub(crate) keep: Vec<i32>,
}

impl<'a> Group<'a> {
    /// Takes the group's per-member scratch arrays (allocating them on first
    /// use); give them back with put_scratch.
    pub(crate) fn take_scratch(&mut self) -> MemberScratch {
        match self.scratch.take() {
            Some(s) => s,
            None => {
                let n = self.req.members.len();
                MemberScratch { pos: vec![0; n], count: vec![0; n], keep: vec![0; n] }
            }
        }
    }

    /// Returns scratch arrays taken with take_scratch.
    pub(crate) fn put_scratch(&mut self, s: MemberScratch) {
        self.scratch = Some(s);
    }

    /// Returns the partition count of rank r.
    #[inline]
    pub(crate) fn partitions(&self, r: i32) -> i32 {
        self.base[r as usize + 1] - self.base[r as usize]
    }

    /// Returns the rank whose partitions include global number x.
    pub(crate) fn topic_at(&self, x: i32) -> i32 {
        // Most lookups are of the first topic (where members' runs start in
        // Kafka's round robin): settle those without a search.
        if self.base.len() > 1 && x < self.base[1] {
            return 0;
        }
        // base is ascending; find the last rank whose base is <= x.
        let (mut lo, mut hi) = (0usize, self.by_rank.len());
        while lo < hi {
            let mid = (lo + hi) >> 1;
            if self.base[mid + 1] <= x {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo as i32
    }

    /// Returns every assignable topic rank, ascending.
    pub(crate) fn all_ranks(&self) -> Vec<i32> {
        (0..self.by_rank.len() as i32).collect()
    }

    /// Returns member m's assignable subscribed topic ranks.
    #[inline]
    pub(crate) fn member_topics(&self, m: i32) -> &[i32] {
        if self.shared {
            return &self.subs;
        }
        &self.subs[self.sub_start[m as usize] as usize..self.sub_start[m as usize + 1] as usize]
    }

    /// Appends the ranks of the assignable topics among ts to dst, ascending
    /// and without repeats.
    fn ranks_of(&self, dst: &mut Vec<i32>, ts: &[u32]) {
        let from = dst.len();
        let mut sorted = true;
        for &t in ts {
            let r = self.rank_of[t as usize];
            if r >= 0 {
                let k = dst.len();
                if k > from && dst[k - 1] >= r {
                    sorted = false;
                }
                dst.push(r);
            }
        }
        if !sorted {
            // Ranks follow names, not request indices; drop repeats too.
            dst[from..].sort_unstable();
            let mut w = from;
            for i in from..dst.len() {
                if w == from || dst[i] != dst[w - 1] {
                    dst[w] = dst[i];
                    w += 1;
                }
            }
            dst.truncate(w);
        }
    }

    /// Reads req. The error names the member whose subscription refers to a
    /// topic the request does not have.
    pub(crate) fn new(req: &'a Request) -> Result<Group<'a>, String> {
        let nt = req.topics.len();
        let n = req.members.len();
        let order = member_id_order(&req.members);
        let mut rank = vec![0i32; n];
        for (r, &m) in order.iter().enumerate() {
            rank[m as usize] = r as i32;
        }
        let mut g = Group {
            cooperative: false,
            req,
            order,
            rank,
            by_rank: Vec::new(),
            rank_of: Vec::new(),
            base: Vec::new(),
            sub_start: Vec::new(),
            subs: Vec::new(),
            shared: true,
            uniform: false,
            scratch: None,
            size_run: None,
            spans: None,
        };

        // Members of one application usually send the very same
        // subscription; then one member's list stands for all.
        let mut shared = true;
        for m in 1..n {
            if !shared {
                break;
            }
            shared = same_subscription(&req.members[m], &req.members[0]);
        }
        g.shared = shared;
        let mut subscribed = vec![false; nt];
        for (m, mem) in req.members.iter().enumerate() {
            if shared && m > 0 {
                break;
            }
            for &t in &mem.topics {
                if t as usize >= nt || t > i32::MAX as u32 {
                    return Err(format!(
                        "member {:?} subscribes to topic index {}, but the request has {} topics",
                        mem.member_id, t as i32, nt
                    ));
                }
                subscribed[t as usize] = true;
            }
        }
        g.by_rank = groupview::assignable_by_name(req, |t| subscribed[t as usize]);
        g.rank_of = vec![-1; nt];
        g.base = vec![0; g.by_rank.len() + 1];
        for r in 0..g.by_rank.len() {
            let t = g.by_rank[r] as usize;
            g.rank_of[t] = r as i32;
            let next = g.base[r] as i64 + req.topics[t].partition_count as i64;
            if next > i32::MAX as i64 {
                return Err("the subscribed topics have more than 2^31-1 partitions in total".to_owned());
            }
            g.base[r + 1] = next as i32;
        }

        g.uniform = shared;
        if shared {
            if n > 0 {
                let mut subs = Vec::new();
                g.ranks_of(&mut subs, &req.members[0].topics);
                g.subs = subs;
            }
            return Ok(g);
        }
        // sub_start[m] is set to where member m's ranks begin as they are
        // appended, which is also where member m-1's end.
        let mut sub_start = vec![0i32; n + 1];
        let capacity: usize = req.members.iter().map(|m| m.topics.len()).sum();
        let mut subs = Vec::with_capacity(capacity);
        // In the grouped layout members with one subscription share its
        // index: their ranks are copied rather than worked out again.
        let lists = req.topic_lists.as_ref().map_or(0, |l| l.len());
        let mut done: Vec<Option<(usize, usize)>> = vec![None; lists];
        for (m, mem) in req.members.iter().enumerate() {
            let from = subs.len();
            match mem.subscription.map(|k| k as usize) {
                Some(k) if k < lists => match done[k] {
                    Some((a, b)) => subs.extend_from_within(a..b),
                    None => {
                        g.ranks_of(&mut subs, &mem.topics);
                        done[k] = Some((from, subs.len()));
                    }
                },
                _ => g.ranks_of(&mut subs, &mem.topics),
            }
            sub_start[m] = from as i32;
        }
        sub_start[n] = subs.len() as i32;
        g.sub_start = sub_start;
        g.subs = subs;
        Ok(g)
    }
}

/// Reports whether two members sent the same subscription. In the grouped
/// layout equal subscriptions share a list index, which settles most pairs
/// without a look at the topics.
fn same_subscription(a: &Member, b: &Member) -> bool {
    if let (Some(x), Some(y)) = (a.subscription, b.subscription) {
        if x == y {
            return true;
        }
    }
    a.topics == b.topics
}

/// Returns the indices of ms ordered by member id (bytes), stable. Kafka's
/// consumer leader keys the subscriptions it hands the sticky assignors by
/// member id, static members included.
pub(crate) fn member_id_order(ms: &[Member]) -> Vec<i32> {
    let mut order: Vec<i32> = (0..ms.len() as i32).collect();
    let sorted = ms.windows(2).all(|w| compare_bytes(w[0].member_id.as_bytes(), w[1].member_id.as_bytes()) != Ordering::Greater);
    if !sorted {
        order.sort_by(|&a, &b| compare_bytes(ms[a as usize].member_id.as_bytes(), ms[b as usize].member_id.as_bytes()));
    }
    order
}

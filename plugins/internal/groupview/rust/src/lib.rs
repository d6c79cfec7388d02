//! A consumer group as Kafka's client-side assignors see it: the members in
//! Kafka's order, who subscribes to which topic, which topics have
//! partitions to hand out and in what order, which racks members and
//! brokers are on, and, once an assignor has decided who takes what, the
//! response that says so. It is the Rust port of package
//! plugins/internal/groupview, which stays the readable reference; the
//! built-in range and roundrobin plugins are written on it, and their
//! differential tests hold them to the Go packages' answers.
//!
//! A member's slot in a topic is its position among that topic's
//! subscribers, in Kafka's member order. Assignors decide per slot; the
//! view records the slot of every (member, subscribed topic) pair as it
//! reads the request, so nothing is looked up by name afterwards.

use std::cmp::Ordering;
use std::collections::HashMap;

use wasmassign::{MemberAssignment, Request, Response, TopicPartitions};

/// A request read the way Kafka's AbstractPartitionAssignor reads a group.
pub struct View<'a> {
    /// The request, which the view only borrows.
    pub req: &'a Request,
    /// The indices of the request's members in Kafka's member order: static
    /// members (with a group.instance.id) by instance id, then dynamic
    /// members by member id. The host's own order is not trusted.
    pub order: Vec<u32>,
    /// The topics that have partitions to assign, ordered by name: each
    /// exists, has at least one partition and at least one subscriber.
    pub by_name: Vec<u32>,
    /// count[t] is the number of members subscribed to topic t.
    pub count: Vec<u32>,
    // slot[entry[m] + j] is member m's slot in its j-th topic.
    entry: Vec<u32>,
    slot: Vec<u32>,
}

impl<'a> View<'a> {
    /// Reads req in one pass over its members in Kafka's order. Member topic
    /// lists are strictly ascending (the SDK's decoder enforces it), so no
    /// member lists a topic twice.
    pub fn new(req: &'a Request) -> Result<View<'a>, String> {
        let order = member_order(req);
        let nt = req.topics.len();
        let n = req.members.len();
        let mut entry = vec![0u32; n + 1];
        for m in 0..n {
            entry[m + 1] = entry[m] + req.members[m].topics.len() as u32;
        }
        let mut count = vec![0u32; nt];
        let mut slot = vec![0u32; entry[n] as usize];
        for &m in &order {
            let mem = &req.members[m as usize];
            let base = entry[m as usize] as usize;
            for (j, &t) in mem.topics.iter().enumerate() {
                if t as usize >= nt {
                    return Err(format!("member {:?} subscribes to topic index {}, but the request has {} topics", mem.member_id, t, nt));
                }
                slot[base + j] = count[t as usize];
                count[t as usize] += 1;
            }
        }
        let by_name = assignable_by_name(req, |t| count[t as usize] > 0);
        Ok(View { req, order, by_name, count, entry, slot })
    }

    /// Returns member m's slot in each of its topics, in the order of its
    /// topic list.
    pub fn slots(&self, m: usize) -> &[u32] {
        &self.slot[self.entry[m] as usize..self.entry[m + 1] as usize]
    }

    /// Builds the subscriber list of every topic, in Kafka's order: index i
    /// of a topic's list is the member in slot i.
    pub fn subscribers(&self) -> Subscribers {
        let n = self.order.len() as u32;
        let mut lists: Vec<Vec<u32>> = self
            .count
            .iter()
            .map(|&c| if c == n { Vec::new() } else { Vec::with_capacity(c as usize) })
            .collect();
        for (m, mem) in self.req.members.iter().enumerate() {
            for (j, &t) in mem.topics.iter().enumerate() {
                if self.count[t as usize] != n {
                    let list = &mut lists[t as usize];
                    let s = self.slot[self.entry[m] as usize + j] as usize;
                    if list.len() <= s {
                        list.resize(s + 1, 0);
                    }
                    list[s] = m as u32;
                }
            }
        }
        Subscribers { n, count: self.count.clone(), order: self.order.clone(), lists }
    }
}

/// Each topic's subscribers in Kafka's order.
pub struct Subscribers {
    n: u32,
    count: Vec<u32>,
    // order is the list of every topic that all members subscribe to, so
    // identical subscriptions need no per-topic lists.
    order: Vec<u32>,
    lists: Vec<Vec<u32>>,
}

impl Subscribers {
    /// Returns the member indices subscribed to topic t, in Kafka's order.
    pub fn of(&self, t: u32) -> &[u32] {
        if self.count[t as usize] == self.n {
            &self.order
        } else {
            &self.lists[t as usize]
        }
    }
}

/// Returns the indices of req's members in Kafka's member order (Kafka's
/// AbstractPartitionAssignor.MemberInfo ordering). Stable, so that equal
/// ids (which a valid group never has) still come out in a fixed order.
pub fn member_order(req: &Request) -> Vec<u32> {
    let ms = &req.members;
    let cmp = |a: &u32, b: &u32| {
        let (x, y) = (&ms[*a as usize], &ms[*b as usize]);
        match (x.instance_id.is_empty(), y.instance_id.is_empty()) {
            (false, false) => x.instance_id.as_bytes().cmp(y.instance_id.as_bytes()).then_with(|| x.member_id.as_bytes().cmp(y.member_id.as_bytes())),
            (false, true) => Ordering::Less,
            (true, false) => Ordering::Greater,
            (true, true) => x.member_id.as_bytes().cmp(y.member_id.as_bytes()),
        }
    };
    let mut order: Vec<u32> = (0..ms.len() as u32).collect();
    // The host usually sends members in this order already.
    if !order.windows(2).all(|w| cmp(&w[0], &w[1]) != Ordering::Greater) {
        order.sort_by(cmp);
    }
    order
}

/// Returns the topics of req that have partitions to assign, ordered by
/// name (ties, which a valid request never has, by index): each exists, has
/// at least one partition, and subscribed(t) says some member subscribes.
pub fn assignable_by_name<F: Fn(u32) -> bool>(req: &Request, subscribed: F) -> Vec<u32> {
    let mut by_name: Vec<u32> = (0..req.topics.len() as u32)
        .filter(|&t| {
            let tp = &req.topics[t as usize];
            tp.exists && tp.partition_count > 0 && subscribed(t)
        })
        .collect();
    let key = |a: &u32, b: &u32| req.topics[*a as usize].name.as_bytes().cmp(req.topics[*b as usize].name.as_bytes()).then(a.cmp(b));
    if !by_name.windows(2).all(|w| key(&w[0], &w[1]) == Ordering::Less) {
        by_name.sort_by(key);
    }
    by_name
}

/// The racks of a request numbered the way the rack-aware assignors
/// (KIP-881) compare them. Racks some member is on have ids 0 to
/// member_racks-1, in the order the members first name them (in request
/// order); racks only brokers are on have the ids after those.
pub struct Racks {
    /// member[m] is the rack id of member m, or -1 when it has none.
    pub member: Vec<i32>,
    /// The number of racks some member is on.
    pub member_racks: i32,
    /// The number of distinct racks of members and brokers.
    pub total: i32,
    /// The rack id of every broker that has a rack.
    pub broker: HashMap<i32, i32>,
}

/// Reads the racks of req's members and brokers; None when no member has a
/// rack, since Kafka then never assigns by rack.
pub fn new_racks(req: &Request) -> Option<Racks> {
    let mut ids: HashMap<&str, i32> = HashMap::new();
    let mut member = vec![-1i32; req.members.len()];
    for (m, mem) in req.members.iter().enumerate() {
        if mem.rack.is_empty() {
            continue;
        }
        let next = ids.len() as i32;
        member[m] = *ids.entry(mem.rack.as_str()).or_insert(next);
    }
    if ids.is_empty() {
        return None;
    }
    let member_racks = ids.len() as i32;
    let mut broker = HashMap::with_capacity(req.brokers.len());
    for b in &req.brokers {
        if b.rack.is_empty() {
            continue;
        }
        let next = ids.len() as i32;
        let id = *ids.entry(b.rack.as_str()).or_insert(next);
        broker.insert(b.id, id);
    }
    Some(Racks { member, member_racks, total: ids.len() as i32, broker })
}

/// The window arithmetic of an even split: P partitions over S subscribers
/// in runs of q = P/S, the first r = P%S of them one longer.
#[derive(Clone, Copy)]
pub struct EvenSplit {
    q: u32,
    r: u32,
}

impl EvenSplit {
    /// Returns where the window of the slot that is j turns after the first
    /// one lies, within the topic's ids: (start, length).
    pub fn turn(&self, j: u32) -> (u32, u32) {
        (j * self.q + j.min(self.r), self.q + if j < self.r { 1 } else { 0 })
    }
}

/// Each slot's own window, for assignments that are not an even split:
/// slot s owns count[s] partitions from start[s] on, the windows following
/// each other in slot order.
pub struct Windows {
    count: Vec<u32>,
    start: Vec<u32>,
}

impl Windows {
    /// Returns the windows of slots that own count[s] partitions each.
    pub fn new(count: Vec<u32>) -> Windows {
        let mut start = Vec::with_capacity(count.len());
        let mut off = 0;
        for &c in &count {
            start.push(off);
            off += c;
        }
        Windows { count, start }
    }

    /// Returns slot s's window: (start, length).
    pub fn window(&self, s: u32) -> (u32, u32) {
        (self.start[s as usize], self.count[s as usize])
    }
}

enum Placed {
    Unset,
    Even { first: u32, subs: u32, split: EvenSplit },
    Fixed(usize),
}

/// An assignment before it becomes a response: every assignable topic's
/// partition ids in one buffer, grouped by the slot that owns them. An
/// assignor lays out each topic of View::by_name exactly once, with split
/// or place, fills in the ids, and calls response.
pub struct Layout {
    rank: Vec<i32>,
    base: Vec<u32>,
    placed: Vec<Placed>,
    windows: Vec<Windows>,
    ids: Vec<i32>,
}

impl Layout {
    /// Returns an empty layout of v's assignable topics.
    pub fn new(v: &View) -> Layout {
        let nt = v.req.topics.len();
        let mut rank = vec![-1i32; nt];
        let mut base = vec![0u32; nt];
        let mut total = 0u32;
        for (i, &t) in v.by_name.iter().enumerate() {
            rank[t as usize] = i as i32;
            base[t as usize] = total;
            total += v.req.topics[t as usize].partition_count as u32;
        }
        let placed = (0..nt).map(|_| Placed::Unset).collect();
        Layout { rank, base, placed, windows: Vec::new(), ids: vec![0; total as usize] }
    }

    fn ids_of(&mut self, v: &View, t: u32) -> &mut [i32] {
        let b = self.base[t as usize] as usize;
        let p = v.req.topics[t as usize].partition_count as usize;
        &mut self.ids[b..b + p]
    }

    /// Lays topic t out as an even split in which slot first and the slots
    /// after it, wrapping around, own the windows in turn; returns the
    /// topic's ids to fill window by window, and the window arithmetic.
    pub fn split(&mut self, v: &View, t: u32, first: u32) -> (&mut [i32], EvenSplit) {
        let p = v.req.topics[t as usize].partition_count as u32;
        let s = v.count[t as usize];
        let split = EvenSplit { q: p / s, r: p % s };
        self.placed[t as usize] = Placed::Even { first, subs: s, split };
        (self.ids_of(v, t), split)
    }

    /// Adds windows that one or more topics are then placed with.
    pub fn add_windows(&mut self, w: Windows) -> usize {
        self.windows.push(w);
        self.windows.len() - 1
    }

    /// Lays topic t out with the windows add_windows returned as w, and
    /// returns the topic's ids to fill window by window.
    pub fn place(&mut self, v: &View, t: u32, w: usize) -> &mut [i32] {
        self.placed[t as usize] = Placed::Fixed(w);
        self.ids_of(v, t)
    }

    fn window(&self, t: u32, s: u32) -> &[i32] {
        let (start, n) = match &self.placed[t as usize] {
            Placed::Unset => (0, 0),
            Placed::Even { first, subs, split } => split.turn(if s >= *first { s - first } else { s + subs - first }),
            Placed::Fixed(w) => self.windows[*w].window(s),
        };
        let b = (self.base[t as usize] + start) as usize;
        &self.ids[b..b + n as usize]
    }

    /// Builds the response: one assignment per member, in request order,
    /// with its non-empty windows as topic entries in name order. When the
    /// request came in the grouped layout, a run of entries with the same
    /// partitions becomes one entry over a topic list (round robin and
    /// range over equally large topics give each member the same ids
    /// everywhere): a member of 500 such topics then carries one entry
    /// instead of 500. The host expands it in place, so the entries keep
    /// their name order whenever the topic table is in name order, as hosts
    /// send it.
    pub fn response(&self, v: &View) -> Response {
        let mut assignments = Vec::with_capacity(v.req.members.len());
        let mut keyed: Vec<(i32, u32, u32)> = Vec::new();
        let mut lists = if v.req.topic_lists.is_some() { Some(Lists::default()) } else { None };
        let mut run: Vec<u32> = Vec::new();
        for (m, mem) in v.req.members.iter().enumerate() {
            keyed.clear();
            for (j, &t) in mem.topics.iter().enumerate() {
                let r = self.rank[t as usize];
                if r >= 0 {
                    keyed.push((r, t, v.slots(m)[j]));
                }
            }
            // The topic table is in name order, so ascending indices are
            // ascending ranks, unless a host sent it otherwise.
            if !keyed.windows(2).all(|w| w[0].0 < w[1].0) {
                keyed.sort_unstable();
            }
            let mut partitions = Vec::new();
            let mut i = 0;
            while i < keyed.len() {
                let (_, t, s) = keyed[i];
                let w = self.window(t, s);
                i += 1;
                if w.is_empty() {
                    continue;
                }
                // In the grouped layout, the following topics (ascending)
                // with the same partitions join this entry's list.
                run.clear();
                run.push(t);
                if lists.is_some() {
                    while i < keyed.len() {
                        let (_, t2, s2) = keyed[i];
                        if t2 <= *run.last().unwrap() || self.window(t2, s2) != w {
                            break;
                        }
                        run.push(t2);
                        i += 1;
                    }
                }
                let topic = match lists.as_mut() {
                    Some(l) if run.len() > 1 => l.intern(&run),
                    _ => t,
                };
                partitions.push(TopicPartitions { topic, partitions: w.to_vec(), list: run.len() > 1 });
            }
            assignments.push(MemberAssignment { member: m as u32, partitions, user_data: Vec::new() });
        }
        Response { assignments, topic_lists: lists.map(|l| l.lists) }
    }
}

/// A response's topic-list table, each distinct list once.
#[derive(Default)]
struct Lists {
    lists: Vec<Vec<u32>>,
    index: HashMap<Vec<u32>, u32>,
}

impl Lists {
    /// Returns the index of topics (strictly ascending) in the table,
    /// adding it when new.
    fn intern(&mut self, topics: &[u32]) -> u32 {
        if let Some(&i) = self.index.get(topics) {
            return i;
        }
        let i = self.lists.len() as u32;
        self.lists.push(topics.to_vec());
        self.index.insert(topics.to_vec(), i);
        i
    }
}

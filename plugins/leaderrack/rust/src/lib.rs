//! NAVER's RackAwareRangeAssignor as a wasmassign plugin: the Rust port of
//! package plugins/leaderrack, which stays the readable reference (its
//! package comment gives the rules); a differential test holds the two to
//! the same answers. The built-in is Rust for its footprint, as
//! plugins/range/rust says.

use std::collections::HashMap;

use groupview::{Layout, View, Windows};
use wasmassign::{Request, Response, Topic};

/// The assignor's name, and the one client protocol it answers for.
pub const NAME: &str = "leader-rack-range";

/// Computes the assignment for req: per topic, range quotas filled from the
/// leader's rack, then the followers' racks, then in order. One assignment
/// per member, in request order.
pub fn assign(req: &Request) -> Result<Response, String> {
    let v = View::new(req).map_err(|e| format!("{}: {}", NAME, e))?;
    let rk = Racks::new(req);
    let subs = v.subscribers();
    let mut lay = Layout::new(&v);
    for &t in &v.by_name {
        let topic = &req.topics[t as usize];
        let list = subs.of(t);
        let pass = match &topic.placement {
            Some(_) if rk.any_broker => TopicPass::start(&rk, list, topic.partition_count),
            _ => None,
        };
        let mut tp = match pass {
            Some(tp) => tp,
            None => {
                // Nothing can match: Kafka's plain range, an even split in
                // member order starting at slot 0.
                let (ids, _) = lay.split(&v, t, 0);
                for (i, id) in ids.iter_mut().enumerate() {
                    *id = i as i32;
                }
                continue;
            }
        };
        tp.leaders(req, &rk, topic)?;
        tp.followers(req, &rk, topic);
        tp.rest(topic)?;
        tp.place(&v, &mut lay, t);
    }
    Ok(lay.response(&v))
}

/// The racks that some member is on, numbered 0 to n-1, and which of them
/// each member and each broker is on. A rack no member is on can never
/// match, so its brokers count as having no rack.
struct Racks {
    member: Vec<i32>, // -1 when the member has no rack
    // Some broker is on a member's rack; without one every topic is plain
    // range.
    any_broker: bool,
    broker: HashMap<i32, i32>,
}

impl Racks {
    /// Numbers the member racks as every built-in does (in the order the
    /// members name them), but on its own: a broker listed twice takes its
    /// last rack here, an empty one included, as the Go package reads it.
    fn new(req: &Request) -> Racks {
        let mut id: HashMap<&str, i32> = HashMap::new();
        let mut member = vec![-1i32; req.members.len()];
        for (m, mem) in req.members.iter().enumerate() {
            if mem.rack.is_empty() {
                continue;
            }
            let next = id.len() as i32;
            member[m] = *id.entry(mem.rack.as_str()).or_insert(next);
        }
        let mut rk = Racks { member, any_broker: false, broker: HashMap::new() };
        if id.is_empty() {
            return rk;
        }
        for b in &req.brokers {
            let r = id.get(b.rack.as_str()).copied();
            rk.any_broker = rk.any_broker || r.is_some();
            rk.broker.insert(b.id, r.unwrap_or(-1));
        }
        rk
    }

    /// Returns the rack of broker id, or -1 when it has none that a member
    /// is on, or is not in the broker list.
    fn broker(&self, id: i32) -> i32 {
        self.broker.get(&id).copied().unwrap_or(-1)
    }
}

/// The state of one topic's three steps.
struct TopicPass {
    // Range quota: a slot may hold base partitions, and the first rem slots
    // to go above base one more.
    base: i32,
    rem: i32,
    count: Vec<i32>, // per slot
    owner: Vec<i32>, // per partition: the owning slot, -1 while unassigned
    left: usize,
    // ring[first[r]..first[r+1]] are the slots of rack r's subscribers in
    // member order; cursor[r] is the position of the one that serves rack r
    // next, always the first in member order among its least loaded.
    ring: Vec<i32>,
    first: Vec<usize>,
    cursor: Vec<usize>,
}

impl TopicPass {
    /// Prepares the pass for a topic of p partitions whose subscribers, in
    /// slot order, are list; None when none of them has a rack, in which
    /// case the topic is plain range.
    fn start(rk: &Racks, list: &[u32], p: i32) -> Option<TopicPass> {
        let nr = rk.member.iter().copied().max().unwrap_or(-1).max(-1) + 1;
        let nr = nr as usize;
        let mut first = vec![0usize; nr + 1];
        let mut racked = 0;
        for &m in list {
            let r = rk.member[m as usize];
            if r >= 0 {
                first[r as usize + 1] += 1;
                racked += 1;
            }
        }
        if racked == 0 {
            return None;
        }
        for r in 0..nr {
            first[r + 1] += first[r];
        }
        let mut cursor: Vec<usize> = first[..nr].to_vec();
        let mut ring = vec![0i32; racked];
        for (s, &m) in list.iter().enumerate() {
            let r = rk.member[m as usize];
            if r >= 0 {
                ring[cursor[r as usize]] = s as i32;
                cursor[r as usize] += 1;
            }
        }
        cursor.copy_from_slice(&first[..nr]);
        let c = list.len() as i32;
        Some(TopicPass {
            base: p / c,
            rem: p % c,
            count: vec![0; c as usize],
            owner: vec![-1; p as usize],
            left: p as usize,
            ring,
            first,
            cursor,
        })
    }

    /// Returns the slot that serves rack r next, or -1 when the rack has no
    /// subscriber with quota left.
    fn next(&self, r: i32) -> i32 {
        if r < 0 || self.first[r as usize] == self.first[r as usize + 1] {
            return -1;
        }
        let s = self.ring[self.cursor[r as usize]];
        let c = self.count[s as usize];
        if c < self.base || (c == self.base && self.rem > 0) {
            s
        } else {
            -1
        }
    }

    /// Gives partition p to slot s, the one under rack r's cursor, and
    /// moves the cursor on.
    fn take(&mut self, p: usize, s: i32, r: i32) {
        self.owner[p] = s;
        self.left -= 1;
        self.count[s as usize] += 1;
        if self.count[s as usize] == self.base + 1 {
            self.rem -= 1; // s is the next to go above base
        }
        let r = r as usize;
        self.cursor[r] += 1;
        if self.cursor[r] == self.first[r + 1] {
            self.cursor[r] = self.first[r];
        }
    }

    /// Step 1: each partition, in ascending order, to the next subscriber
    /// with quota on its leader's rack. It also checks every placement's
    /// replica set, so that a malformed request is refused whether or not
    /// step 2 reads it.
    fn leaders(&mut self, req: &Request, rk: &Racks, topic: &Topic) -> Result<(), String> {
        let placement = topic.placement.as_deref().unwrap_or(&[]);
        for p in 0..self.owner.len().min(placement.len()) {
            let pt = &placement[p];
            if pt.replicas as usize >= req.replica_sets.len() {
                return Err(format!(
                    "{}: topic {:?} partition {} refers to replica set {}, but the request has {}",
                    NAME,
                    topic.name,
                    p,
                    pt.replicas,
                    req.replica_sets.len()
                ));
            }
            let r = rk.broker(pt.leader);
            let s = self.next(r);
            if s >= 0 {
                self.take(p, s, r);
            }
        }
        Ok(())
    }

    /// Step 2: each partition still left, in ascending order, to the least
    /// loaded subscriber with quota on the rack of a replica other than the
    /// leader, the first in member order among equals.
    fn followers(&mut self, req: &Request, rk: &Racks, topic: &Topic) {
        if self.left == 0 {
            return;
        }
        let placement = topic.placement.as_deref().unwrap_or(&[]);
        for p in 0..self.owner.len().min(placement.len()) {
            if self.owner[p] >= 0 {
                continue;
            }
            let pt = &placement[p];
            let (mut best, mut best_rack) = (-1i32, -1i32);
            for &b in &req.replica_sets[pt.replicas as usize] {
                if b == pt.leader {
                    continue;
                }
                let r = rk.broker(b);
                let s = self.next(r);
                if s < 0 {
                    continue;
                }
                let (cs, cb) = (self.count[s as usize], if best >= 0 { self.count[best as usize] } else { 0 });
                if best < 0 || cs < cb || (cs == cb && s < best) {
                    best = s;
                    best_rack = r;
                }
            }
            if best >= 0 {
                self.take(p, best, best_rack);
            }
        }
    }

    /// Step 3, Kafka's plain range pass over what is left: each slot's
    /// final count is fixed first (the extra going to the first slots still
    /// at or below base), then the partitions left are dealt in ascending
    /// order.
    fn rest(&mut self, topic: &Topic) -> Result<(), String> {
        if self.left == 0 {
            return Ok(());
        }
        let mut need = vec![0i32; self.count.len()];
        for s in 0..self.count.len() {
            let c = self.count[s];
            if c <= self.base {
                let mut fin = self.base;
                if self.rem > 0 {
                    fin += 1;
                    self.rem -= 1;
                }
                need[s] = fin - c;
                self.count[s] = fin;
            }
        }
        let mut s = 0;
        for p in 0..self.owner.len() {
            if self.owner[p] >= 0 {
                continue;
            }
            while s < need.len() && need[s] == 0 {
                s += 1;
            }
            if s == need.len() {
                return Err(format!("{}: internal error: topic {:?} partition {} is left over after every quota is full", NAME, topic.name, p));
            }
            self.owner[p] = s as i32;
            need[s] -= 1;
        }
        Ok(())
    }

    /// Lays the topic out from the owners: each slot's partitions,
    /// ascending, in one window.
    fn place(self, v: &View, lay: &mut Layout, t: u32) {
        let count: Vec<u32> = self.count.iter().map(|&c| c as u32).collect();
        let mut at = Vec::with_capacity(count.len());
        let mut off = 0u32;
        for &c in &count {
            at.push(off);
            off += c;
        }
        let w = lay.add_windows(Windows::new(count));
        let ids = lay.place(v, t, w);
        for (p, &s) in self.owner.iter().enumerate() {
            ids[at[s as usize] as usize] = p as i32;
            at[s as usize] += 1;
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
        description: "NAVER's RackAwareRangeAssignor: range quotas, each partition to a consumer on its leader's rack, else a follower's",
        assign: assign,
    },
}

//! Kafka's RoundRobinAssignor as a wasmassign plugin: the Rust port of
//! package plugins/roundrobin, which stays the readable reference; a
//! differential test holds the two to the same answers. The built-in is Rust
//! for its footprint, as plugins/range/rust says.

use groupview::{Layout, View};
use wasmassign::{Request, Response};

/// The assignor's name, which is also a Kafka protocol it answers for.
pub const NAME: &str = "roundrobin";

/// Computes Kafka's round-robin assignment for req: one assignment per
/// member, in request order.
pub fn assign(req: &Request) -> Result<Response, String> {
    let v = View::new(req).map_err(|e| format!("roundrobin: {}", e))?;
    let n = req.members.len() as u32;
    let mut rank = vec![0u32; n as usize]; // position in Kafka's order
    for (i, &m) in v.order.iter().enumerate() {
        rank[m as usize] = i as u32;
    }
    let subs = v.subscribers();
    let mut lay = Layout::new(&v);

    // Kafka's iterator stands on some member when a topic starts. The
    // topic's first partition goes to the first subscriber at or after it
    // (wrapping), and each following partition to the next subscriber in
    // the cycle. After the topic the iterator stands just past the
    // subscriber that took the last one.
    let mut pos = 0u32;
    for &t in &v.by_name {
        let list = subs.of(t);
        let s = list.len() as u64;
        let p = req.topics[t as usize].partition_count as u64;
        let k = list.partition_point(|&m| rank[m as usize] < pos) as u64;
        let first = k % s;
        let last = list[((first + p - 1) % s) as usize];
        pos = (rank[last as usize] + 1) % n;

        // The subscriber j turns after the first one takes partitions j,
        // j+s, j+2s, ...: an even split in turn order.
        let (ids, even) = lay.split(&v, t, first as u32);
        for j in 0..s.min(p) as u32 {
            let (start, cnt) = even.turn(j);
            let mut id = j as i32;
            for x in &mut ids[start as usize..(start + cnt) as usize] {
                *x = id;
                id += s as i32;
            }
        }
    }
    Ok(lay.response(&v))
}

wasmassign::plugin! {
    wasmassign::Assignor {
        name: NAME,
        version: "1.0.0",
        protocols: &[NAME, "RoundRobinAssigner"],
        modes: wasmassign::Modes::BOTH,
        may_leave_unassigned: false,
        grouped: true,
        description: "Kafka's RoundRobinAssignor: partitions dealt to members in turn, by topic name",
        assign: assign,
    },
}

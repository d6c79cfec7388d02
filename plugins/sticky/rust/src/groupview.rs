//! The parts of plugins/internal/groupview that the sticky assignors use:
//! assignable topics in name order (compared eight bytes at a time, which
//! the sticky assignors do thousands of times), and racks numbered as small
//! integers.

use std::cmp::Ordering;

use wasmassign::Request;

/// Returns the topics of req that have partitions to assign, ordered by
/// name: each exists, has at least one partition, and subscribed(t) says
/// some member subscribes to it. Ties between equal names (which a valid
/// request never has) go by index, so that the order is still fixed.
pub(crate) fn assignable_by_name<F: Fn(i32) -> bool>(req: &Request, subscribed: F) -> Vec<i32> {
    let mut by_name: Vec<i32> = Vec::new();
    for (t, tp) in req.topics.iter().enumerate() {
        if tp.exists && tp.partition_count > 0 && subscribed(t as i32) {
            by_name.push(t as i32);
        }
    }
    // Hosts send the topic table in name order already.
    let sorted = by_name.windows(2).all(|w| {
        let (a, b) = (req.topics[w[0] as usize].name.as_bytes(), req.topics[w[1] as usize].name.as_bytes());
        compare_bytes(a, b).then(w[0].cmp(&w[1])) == Ordering::Less
    });
    if !sorted {
        by_name.sort_unstable_by(|&a, &b| {
            compare_bytes(req.topics[a as usize].name.as_bytes(), req.topics[b as usize].name.as_bytes()).then(a.cmp(&b))
        });
    }
    by_name
}

/// Compares a and b as byte strings, as `a.cmp(b)` does, eight bytes at a
/// time: in wasm every loop iteration, memcmp's included, costs an exit to
/// the host's deadline check, and member ids and topic names are compared
/// thousands of times per request.
#[inline]
pub(crate) fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_be_bytes([a[i], a[i + 1], a[i + 2], a[i + 3], a[i + 4], a[i + 5], a[i + 6], a[i + 7]]);
        let y = u64::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5], b[i + 6], b[i + 7]]);
        if x != y {
            return x.cmp(&y);
        }
        i += 8;
    }
    // The tails, fewer than eight bytes: compared as the last eight (or
    // four) bytes of the common length, whose bytes before the tail are
    // equal in both, so no loop is needed; then the shorter string first,
    // as a prefix sorts first.
    let be8 = |s: &[u8], at: usize| u64::from_be_bytes([s[at], s[at + 1], s[at + 2], s[at + 3], s[at + 4], s[at + 5], s[at + 6], s[at + 7]]);
    let be4 = |s: &[u8], at: usize| u32::from_be_bytes([s[at], s[at + 1], s[at + 2], s[at + 3]]) as u64;
    let tails = if i == n {
        Ordering::Equal
    } else if n >= 8 {
        be8(a, n - 8).cmp(&be8(b, n - 8))
    } else if n >= 4 {
        be4(a, 0).cmp(&be4(b, 0)).then(be4(a, n - 4).cmp(&be4(b, n - 4)))
    } else {
        a[..n].cmp(&b[..n])
    };
    tails.then(a.len().cmp(&b.len()))
}

/// The racks of a request numbered the way the rack-aware assignors
/// (KIP-881) compare them, as the shared port of plugins/internal/groupview
/// numbers them for every built-in.
pub(crate) use ::groupview::new_racks;

//! The Rust SDK's conformance kit module (sdk/KIT.md): five assignors for the
//! protocol `kit`, written against the SDK's public API only, that the Go
//! runner in internal/conformance/ compares with every other SDK's kit module.

use wasmassign::{encode_request, log, Assignor, Level, MemberAssignment, Modes, Request, Response, TopicPartitions};

/// The version string every kit assignor reports: the SDK's version.
const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Kafka's round robin (KIT.md, as the built-in `roundrobin`): members in
/// Kafka's order, every partition of every subscribed, existing topic by topic
/// name then partition, each dealt to the next member of a circular iterator
/// that subscribes to its topic.
pub fn roundrobin(req: &Request) -> Result<Response, String> {
    let n = req.members.len();
    let mut assignments: Vec<MemberAssignment> = (0..n as u32)
        .map(|m| MemberAssignment { member: m, partitions: Vec::new(), user_data: Vec::new() })
        .collect();
    if n == 0 {
        return Ok(Response { assignments, topic_lists: None });
    }
    let order = member_order(req);
    let mut topics: Vec<u32> = (0..req.topics.len() as u32)
        .filter(|&t| {
            let tp = &req.topics[t as usize];
            tp.exists && tp.partition_count > 0 && req.members.iter().any(|m| m.subscribes(t))
        })
        .collect();
    topics.sort_by(|&a, &b| req.topics[a as usize].name.as_bytes().cmp(req.topics[b as usize].name.as_bytes()));

    let mut pos = 0usize; // position in `order` of the iterator
    for t in topics {
        // The members subscribing to t, as positions in `order`.
        let subs: Vec<usize> = (0..n).filter(|&i| req.members[order[i] as usize].subscribes(t)).collect();
        // The first subscriber at or after the iterator, wrapping, takes
        // partition 0; the subscriber j turns later takes j, j+s, j+2s, ...
        let s = subs.len();
        let first = subs.iter().position(|&i| i >= pos).unwrap_or(0);
        let pc = req.topics[t as usize].partition_count as usize;
        let mut lists: Vec<Vec<i32>> = vec![Vec::new(); s];
        for j in 0..s.min(pc) {
            lists[(first + j) % s] = (j..pc).step_by(s).map(|p| p as i32).collect();
        }
        // The iterator stops one past the subscriber of the last partition.
        pos = (subs[(first + pc - 1) % s] + 1) % n;
        for (j, parts) in lists.into_iter().enumerate() {
            if !parts.is_empty() {
                assignments[order[subs[j]] as usize].partitions.push(TopicPartitions { topic: t, partitions: parts, list: false });
            }
        }
    }
    Ok(Response { assignments, topic_lists: None })
}

/// Kafka's member order: static members by instance id, then dynamic members
/// by member id. The host already sends this order; sorting keeps the kit
/// correct on hand-made requests too.
fn member_order(req: &Request) -> Vec<u32> {
    let mut order: Vec<u32> = (0..req.members.len() as u32).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&req.members[a as usize], &req.members[b as usize]);
        let (xs, ys) = (!x.instance_id.is_empty(), !y.instance_id.is_empty());
        ys.cmp(&xs)
            .then_with(|| {
                if xs && ys {
                    x.instance_id.as_bytes().cmp(y.instance_id.as_bytes())
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .then_with(|| x.member_id.as_bytes().cmp(y.member_id.as_bytes()))
    });
    order
}

/// FNV-1a 64 of `b`.
pub fn fnv1a64(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn roundtrip(req: &Request) -> Result<Response, String> {
    let mut resp = roundrobin(req)?;
    if req.members.is_empty() {
        // Nobody to carry the hash; the call still succeeds (KIT.md).
        return Ok(resp);
    }
    let mut buf = Vec::new();
    encode_request(req, &mut buf);
    let hash = fnv1a64(&buf).to_le_bytes().to_vec();
    // roundrobin lists every member, so member 0 is always there.
    if let Some(a) = resp.assignments.iter_mut().find(|a| a.member == 0) {
        a.user_data = hash;
    }
    Ok(resp)
}

fn error(req: &Request) -> Result<Response, String> {
    Err(format!("kit error: {}", req.group_id))
}

fn log_line(req: &Request) -> Result<Response, String> {
    log(Level::Info, &format!("kit log: {}", req.group_id));
    roundrobin(req)
}

fn userdata(req: &Request) -> Result<Response, String> {
    let mut resp = roundrobin(req)?;
    for a in &mut resp.assignments {
        a.user_data = req.members[a.member as usize].user_data.clone();
    }
    Ok(resp)
}

const fn kit(name: &'static str, description: &'static str, assign: wasmassign::AssignFn) -> Assignor {
    Assignor {
        name,
        version: SDK_VERSION,
        protocols: &["kit"],
        modes: Modes::BOTH,
        may_leave_unassigned: false,
        description,
        grouped: false,
        assign,
    }
}

wasmassign::plugin! {
    kit("kit-roundrobin", "Kafka's round robin, as the built-in roundrobin (Rust SDK)", roundrobin),
    kit("kit-roundtrip", "round robin; member 0's user data is the FNV-1a 64 of the re-encoded request", roundtrip),
    kit("kit-error", "always answers with an error response naming the group", error),
    kit("kit-log", "logs one info line naming the group, then round robin", log_line),
    kit("kit-userdata", "round robin; every member's user data echoes its subscription user data", userdata),
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmassign::{Member, Topic};

    #[test]
    fn fnv1a64_matches_the_published_test_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    /// Kafka's RoundRobinAssignorTest#testMultipleConsumersMixedTopics: the
    /// iterator skips a member that does not subscribe and carries over from
    /// topic to topic.
    #[test]
    fn roundrobin_deals_in_turn_skipping_non_subscribers() {
        let member = |id: &str, topics: Vec<u32>| Member { member_id: id.into(), topics, owned_generation: -1, ..Member::default() };
        let topic = |name: &str, p: i32| Topic { name: name.into(), exists: true, partition_count: p, ..Topic::default() };
        let req = Request {
            topics: vec![topic("topic1", 3), topic("topic2", 2)],
            members: vec![member("consumer1", vec![0]), member("consumer2", vec![0, 1]), member("consumer3", vec![0])],
            ..Request::default()
        };
        let got: Vec<Vec<(u32, Vec<i32>)>> = roundrobin(&req)
            .unwrap()
            .assignments
            .into_iter()
            .map(|a| a.partitions.into_iter().map(|tp| (tp.topic, tp.partitions)).collect())
            .collect();
        assert_eq!(got, vec![vec![(0, vec![0])], vec![(0, vec![1]), (1, vec![0, 1])], vec![(0, vec![2])]]);
    }
}

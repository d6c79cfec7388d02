//! `weighted`: a wasmassign assignor that gives each member a share of every
//! topic's partitions in proportion to its weight, and keeps partitions where
//! they were across rebalances while their holder stays within its share.
//!
//! # Weights
//!
//! A member's weight, a whole number from 1 to 10000, is the first of:
//!
//! 1. the first entry of the plugin config `weights` whose pattern matches the
//!    member's client id. `weights` is a comma-separated list of
//!    `PATTERN=WEIGHT`; a pattern is matched against the whole client id, and
//!    `*` in it stands for any run of characters (`billing-*=3,analytics=1`);
//! 2. the member's subscription user data, when it is exactly the ASCII text
//!    `weight=N` (and `user_data_weights` is not `false`);
//! 3. the plugin config `default_weight`;
//! 4. 1.
//!
//! A malformed `weights`, `default_weight` or `user_data_weights` is an error
//! response, so the host falls back and the operator sees why. User data that
//! is not `weight=N` is ignored (it may belong to another protocol).
//!
//! # Shares
//!
//! Topics are handled in name order. Topic `t` with `P` partitions and
//! subscribers of total weight `W` gives member `m` either floor or ceil of
//! `P * w_m / W`: the floors first, then the partitions left over to the
//! members furthest behind their ideal so far, summed over the topics already
//! handled (ties to the earlier member in Kafka's order). So every member is
//! within one partition of its ideal on every topic, and, with identical
//! subscriptions, within one of its ideal overall.
//!
//! # Stickiness
//!
//! Each member first keeps the partitions it held, up to its share: those it
//! reports owning (highest owned generation first, when two members claim one
//! partition), then those the host assigned it in the previous generation.
//! Among its claims it keeps the lowest partition ids. Partitions left over go,
//! ascending, to members below their share, in member order.

use wasmassign::{Assignor, MemberAssignment, Modes, Request, Response, TopicPartitions};

/// The largest weight accepted; it keeps `P * w` well inside 64 bits.
pub const MAX_WEIGHT: u32 = 10_000;

/// One `PATTERN=WEIGHT` entry of the `weights` config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Matched against the whole client id; `*` matches any run of characters.
    pub pattern: String,
    /// The weight of a matching member.
    pub weight: u32,
}

/// The assignor's configuration, from the group's plugin config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The `weights` rules, first match wins.
    pub rules: Vec<Rule>,
    /// Whether `weight=N` user data counts (`user_data_weights`, default true).
    pub user_data: bool,
    /// The weight of members nothing else gives one (`default_weight`, default 1).
    pub default_weight: u32,
}

fn parse_weight(s: &str, what: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(w) if (1..=MAX_WEIGHT).contains(&w) => Ok(w),
        _ => Err(format!("{}: weight {:?} is not a whole number from 1 to {}", what, s.trim(), MAX_WEIGHT)),
    }
}

impl Config {
    /// Reads the configuration from a request's plugin config.
    pub fn from_request(req: &Request) -> Result<Config, String> {
        let mut c = Config { rules: Vec::new(), user_data: true, default_weight: 1 };
        if let Some(spec) = req.config("weights") {
            for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                let eq = entry
                    .rfind('=')
                    .ok_or_else(|| format!("weighted: config weights: entry {:?} is not PATTERN=WEIGHT", entry))?;
                let pattern = entry[..eq].trim();
                if pattern.is_empty() {
                    return Err(format!("weighted: config weights: entry {:?} has an empty pattern", entry));
                }
                let weight = parse_weight(&entry[eq + 1..], "weighted: config weights")?;
                c.rules.push(Rule { pattern: pattern.to_owned(), weight });
            }
        }
        if let Some(v) = req.config("default_weight") {
            c.default_weight = parse_weight(v, "weighted: config default_weight")?;
        }
        if let Some(v) = req.config("user_data_weights") {
            c.user_data = match v.trim() {
                "true" => true,
                "false" => false,
                _ => return Err(format!("weighted: config user_data_weights: {:?} is neither true nor false", v)),
            };
        }
        Ok(c)
    }

    /// Returns the weight of a member with this client id and user data.
    pub fn weight(&self, client_id: &str, user_data: &[u8]) -> u32 {
        if let Some(r) = self.rules.iter().find(|r| glob(&r.pattern, client_id)) {
            return r.weight;
        }
        if self.user_data {
            if let Some(w) = user_data_weight(user_data) {
                return w;
            }
        }
        self.default_weight
    }
}

/// Reads `weight=N` user data; anything else is not a weight.
pub fn user_data_weight(b: &[u8]) -> Option<u32> {
    let rest = b.strip_prefix(b"weight=")?;
    let s = std::str::from_utf8(rest).ok()?;
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    parse_weight(s, "").ok()
}

/// Matches `s` against `pattern`, where `*` stands for any run of bytes.
pub fn glob(pattern: &str, s: &str) -> bool {
    let (p, s) = (pattern.as_bytes(), s.as_bytes());
    let (mut pi, mut si) = (0, 0);
    // Where the last `*` was, and where in s its match would resume.
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if pi < p.len() && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Computes each subscriber's share of a topic of `partitions` partitions.
/// `subs` are member indices in member order; `deficit` is each member's
/// running ideal-minus-received over earlier topics, updated here.
fn shares(partitions: u32, subs: &[usize], weights: &[u32], deficit: &mut [f64]) -> Vec<u32> {
    let total: u64 = subs.iter().map(|&m| weights[m] as u64).sum();
    let p = partitions as u64;
    let mut quota: Vec<u32> = subs.iter().map(|&m| (p * weights[m] as u64 / total) as u32).collect();
    let given: u64 = quota.iter().map(|&q| q as u64).sum();
    let ideal: Vec<f64> = subs.iter().map(|&m| (p * weights[m] as u64) as f64 / total as f64).collect();
    // The left-over partitions (fewer than subs.len()) go to the members
    // furthest behind, counting this topic's floors.
    // Only members whose ideal is fractional may round up, so each share is
    // the floor or the ceiling of its ideal; there are always more of them
    // than partitions left over, since their fractions sum to that count.
    let mut order: Vec<usize> = (0..subs.len()).filter(|&i| (p * weights[subs[i]] as u64) % total != 0).collect();
    let behind = |i: usize| deficit[subs[i]] + ideal[i] - quota[i] as f64;
    order.sort_by(|&a, &b| behind(b).partial_cmp(&behind(a)).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b)));
    for &i in order.iter().take((p - given) as usize) {
        quota[i] += 1;
    }
    for (i, &m) in subs.iter().enumerate() {
        deficit[m] += ideal[i] - quota[i] as f64;
    }
    quota
}

/// The `weighted` assignment of `req` (see the crate documentation).
pub fn assign(req: &Request) -> Result<Response, String> {
    let cfg = Config::from_request(req)?;
    let n = req.members.len();
    let weights: Vec<u32> = req.members.iter().map(|m| cfg.weight(&m.client_id, &m.user_data)).collect();

    let mut topics: Vec<usize> = (0..req.topics.len())
        .filter(|&t| req.topics[t].exists && req.topics[t].partition_count > 0)
        .collect();
    topics.sort_by(|&a, &b| req.topics[a].name.as_bytes().cmp(req.topics[b].name.as_bytes()));

    // Claims per topic: (member, partition), owned ones first.
    let mut owned: Vec<Vec<(usize, i32)>> = vec![Vec::new(); req.topics.len()];
    let mut previous: Vec<Vec<(usize, i32)>> = vec![Vec::new(); req.topics.len()];
    let mut by_generation: Vec<usize> = (0..n).collect();
    by_generation.sort_by(|&a, &b| req.members[b].owned_generation.cmp(&req.members[a].owned_generation).then(a.cmp(&b)));
    for &m in &by_generation {
        for tp in &req.members[m].owned {
            owned[tp.topic as usize].extend(tp.partitions.iter().map(|&p| (m, p)));
        }
    }
    for (m, mem) in req.members.iter().enumerate() {
        for tp in &mem.previous {
            previous[tp.topic as usize].extend(tp.partitions.iter().map(|&p| (m, p)));
        }
    }

    let mut rank = vec![0usize; n]; // position in by_generation
    for (i, &m) in by_generation.iter().enumerate() {
        rank[m] = i;
    }
    let mut out: Vec<Vec<TopicPartitions>> = vec![Vec::new(); n];
    let mut deficit = vec![0f64; n];
    for t in topics {
        let subs: Vec<usize> = (0..n).filter(|&m| req.members[m].subscribes(t as u32)).collect();
        if subs.is_empty() {
            continue;
        }
        let pc = req.topics[t].partition_count as usize;
        let quota = shares(pc as u32, &subs, &weights, &mut deficit);
        let mut slot = vec![usize::MAX; n]; // member -> index in subs
        for (i, &m) in subs.iter().enumerate() {
            slot[m] = i;
        }
        let mut got: Vec<Vec<i32>> = vec![Vec::new(); subs.len()];
        let mut taken = vec![false; pc];
        for claims in [&mut owned[t], &mut previous[t]] {
            // Lowest partition ids first within each member, keeping the
            // owned-generation order between members.
            claims.sort_by(|a, b| a.1.cmp(&b.1));
            claims.sort_by_key(|&(m, _)| rank[m]);
            for &(m, p) in claims.iter() {
                let i = slot[m];
                if i == usize::MAX || p < 0 || p as usize >= pc || taken[p as usize] || got[i].len() >= quota[i] as usize {
                    continue;
                }
                taken[p as usize] = true;
                got[i].push(p);
            }
        }
        let mut free = (0..pc as i32).filter(|&p| !taken[p as usize]);
        for (i, g) in got.iter_mut().enumerate() {
            while g.len() < quota[i] as usize {
                match free.next() {
                    Some(p) => g.push(p),
                    None => return Err(format!("weighted: shares of topic {:?} exceed its partitions", req.topics[t].name)),
                }
            }
        }
        for (i, mut g) in got.into_iter().enumerate() {
            if !g.is_empty() {
                g.sort_unstable();
                out[subs[i]].push(TopicPartitions { topic: t as u32, partitions: g, list: false });
            }
        }
    }
    Ok(Response {
        assignments: out
            .into_iter()
            .enumerate()
            .map(|(m, partitions)| MemberAssignment { member: m as u32, partitions, user_data: Vec::new() })
            .collect(),
        topic_lists: None,
    })
}

wasmassign::plugin! {
    Assignor {
        name: "weighted",
        version: env!("CARGO_PKG_VERSION"),
        protocols: &["weighted"],
        modes: Modes::BOTH,
        may_leave_unassigned: false,
        description: "partitions in proportion to member weights (config weights, or user data weight=N), sticky",
        grouped: false,
        assign,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmassign::{Member, Topic};

    fn req_with(config: &[(&str, &str)], members: Vec<Member>, topics: Vec<Topic>) -> Request {
        let mut config: Vec<(String, String)> = config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        config.sort();
        Request { config, members, topics, ..Request::default() }
    }

    fn member(id: &str, client: &str, topics: Vec<u32>) -> Member {
        Member { member_id: id.into(), client_id: client.into(), topics, owned_generation: -1, ..Member::default() }
    }

    fn topic(name: &str, p: i32) -> Topic {
        Topic { name: name.into(), exists: true, partition_count: p, ..Topic::default() }
    }

    #[test]
    fn glob_matches_whole_ids_with_stars_for_any_run() {
        let cases = [
            ("billing-*", "billing-7", true),
            ("billing-*", "billing-", true),
            ("billing-*", "xbilling-7", false),
            ("*-eu", "a-b-eu", true),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
            ("*", "", true),
        ];
        for (p, s, want) in cases {
            assert_eq!(glob(p, s), want, "glob({:?}, {:?})", p, s);
        }
    }

    #[test]
    fn weight_comes_from_config_then_user_data_then_default() {
        let r = req_with(&[("weights", "billing-*=3, analytics=2"), ("default_weight", "5")], vec![], vec![]);
        let c = Config::from_request(&r).unwrap();
        assert_eq!(c.weight("billing-1", b"weight=9"), 3);
        assert_eq!(c.weight("analytics", b""), 2);
        assert_eq!(c.weight("other", b"weight=9"), 9);
        assert_eq!(c.weight("other", b"weight=x"), 5);
        assert_eq!(c.weight("other", b"\x00\x01weight=9"), 5);
        let r = req_with(&[("user_data_weights", "false")], vec![], vec![]);
        assert_eq!(Config::from_request(&r).unwrap().weight("x", b"weight=9"), 1);
    }

    #[test]
    fn malformed_config_is_an_error() {
        for cfg in [
            ("weights", "billing"),
            ("weights", "=3"),
            ("weights", "a=0"),
            ("weights", "a=10001"),
            ("weights", "a=-1"),
            ("default_weight", "zero"),
            ("user_data_weights", "yes"),
        ] {
            let r = req_with(&[cfg], vec![], vec![]);
            assert!(Config::from_request(&r).is_err(), "{:?} accepted", cfg);
        }
    }

    /// A small deterministic generator for the property tests.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) % n
        }
    }

    #[test]
    fn every_partition_goes_once_to_a_subscriber_within_one_of_its_weighted_share() {
        let mut rng = Rng(7);
        for round in 0..300 {
            let nt = 1 + rng.next(4) as usize;
            let topics: Vec<Topic> = (0..nt).map(|i| topic(&format!("t{}", i), rng.next(40) as i32)).collect();
            let nm = 1 + rng.next(8) as usize;
            let members: Vec<Member> = (0..nm)
                .map(|i| {
                    let subs: Vec<u32> = (0..nt as u32).filter(|_| rng.next(4) != 0).collect();
                    member(&format!("m{}", i), &format!("c{}", rng.next(4)), subs)
                })
                .collect();
            let r = req_with(&[("weights", "c0=1,c1=2,c2=5")], members, topics);
            let resp = assign(&r).unwrap();
            let cfg = Config::from_request(&r).unwrap();
            for (t, tp) in r.topics.iter().enumerate() {
                let subs: Vec<usize> = (0..nm).filter(|&m| r.members[m].subscribes(t as u32)).collect();
                let total: u32 = subs.iter().map(|&m| cfg.weight(&r.members[m].client_id, &[])).sum();
                let mut seen = vec![0; tp.partition_count as usize];
                for a in &resp.assignments {
                    let got: usize = a.partitions.iter().filter(|x| x.topic as usize == t).map(|x| x.partitions.len()).sum();
                    for x in a.partitions.iter().filter(|x| x.topic as usize == t) {
                        assert!(r.members[a.member as usize].subscribes(t as u32), "round {}: non-subscriber", round);
                        for &p in &x.partitions {
                            seen[p as usize] += 1;
                        }
                    }
                    if subs.contains(&(a.member as usize)) {
                        let w = cfg.weight(&r.members[a.member as usize].client_id, &[]);
                        let ideal = tp.partition_count as f64 * w as f64 / total as f64;
                        assert!((got as f64 - ideal).abs() < 1.0, "round {}: topic {} member {} got {} ideal {}", round, t, a.member, got, ideal);
                    }
                }
                let want = if subs.is_empty() { 0 } else { 1 };
                assert!(seen.iter().all(|&c| c == want), "round {}: topic {} coverage {:?}", round, t, seen);
            }
            // With identical subscriptions, totals are within one of the ideal.
            if r.members.iter().all(|m| m.topics == r.members[0].topics) {
                let parts: u32 = r.members[0].topics.iter().map(|&t| r.topics[t as usize].partition_count as u32).sum();
                let total: u32 = r.members.iter().map(|m| cfg.weight(&m.client_id, &[])).sum();
                for a in &resp.assignments {
                    let got: usize = a.partitions.iter().map(|x| x.partitions.len()).sum();
                    let ideal = parts as f64 * cfg.weight(&r.members[a.member as usize].client_id, &[]) as f64 / total as f64;
                    assert!((got as f64 - ideal).abs() < 1.0, "round {}: member {} total {} ideal {}", round, a.member, got, ideal);
                }
            }
        }
    }

    #[test]
    fn a_member_keeps_its_previous_partitions_up_to_its_new_share() {
        let mut rng = Rng(11);
        for round in 0..200 {
            let p = 1 + rng.next(60) as i32;
            let nm = 1 + rng.next(6) as usize;
            let mk = |n: usize| -> Vec<Member> { (0..n).map(|i| member(&format!("m{}", i), &format!("c{}", i % 3), vec![0])).collect() };
            let r1 = req_with(&[("weights", "c0=1,c1=3")], mk(nm), vec![topic("t", p)]);
            let first = assign(&r1).unwrap();
            // Members join or leave, then everyone reports what it had.
            let nm2 = 1 + rng.next(6) as usize;
            let mut members = mk(nm2);
            for a in &first.assignments {
                if (a.member as usize) < nm2 {
                    members[a.member as usize].previous = a.partitions.clone();
                }
            }
            let r2 = req_with(&[("weights", "c0=1,c1=3")], members, vec![topic("t", p)]);
            let second = assign(&r2).unwrap();
            for a in &second.assignments {
                let had: Vec<i32> = r2.members[a.member as usize].previous.iter().flat_map(|x| x.partitions.clone()).collect();
                let now: Vec<i32> = a.partitions.iter().flat_map(|x| x.partitions.clone()).collect();
                let kept = now.iter().filter(|p| had.contains(p)).count();
                assert_eq!(kept, had.len().min(now.len()), "round {}: member {} had {:?} got {:?}", round, a.member, had, now);
            }
            assert_eq!(assign(&r2).unwrap(), second, "round {}: not deterministic", round);
        }
    }
}

//! Native tests of the port: Kafka's cases and the package's ownership
//! tests on the uniform path, and properties of random uniform groups.
//! The differential test in plugins/sticky (Go) holds the module to the Go
//! package's exact answers; these tests check the Rust side on its own.

use std::collections::{BTreeMap, BTreeSet};

use wasmassign::{Member, Partition, Request, Response, Topic, TopicPartitions};

use crate::group::Group;
use crate::{assign_cooperative, assign_sticky};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Eager,
    Coop,
}

const BOTH: [Kind; 2] = [Kind::Eager, Kind::Coop];
const GENERATION_ID: i32 = 1;

#[derive(Clone, Default)]
struct Spec {
    id: String,
    topics: Vec<String>,
    owned: Option<Vec<String>>,
    gen: i32,
    user_data: Option<Vec<u8>>,
    previous: Vec<String>,
    rack: String,
}

fn sub(id: &str, topics: &[&str]) -> Spec {
    Spec { id: id.into(), topics: topics.iter().map(|s| s.to_string()).collect(), gen: -1, ..Default::default() }
}

fn owns(id: &str, topics: &[&str], gen: i32, owned: &[&str]) -> Spec {
    let mut s = sub(id, topics);
    s.owned = Some(owned.iter().map(|s| s.to_string()).collect());
    s.gen = gen;
    s
}

fn parse_tp(s: &str) -> (String, i32) {
    let i = s.rfind('-').unwrap();
    (s[..i].to_string(), s[i + 1..].parse().unwrap())
}

/// StickyAssignor user data, v1 when with_gen, v0 otherwise, written
/// independently of the port's encoder.
fn sticky_user_data(owned: &[String], gen: i32, with_gen: bool) -> Vec<u8> {
    let mut names: Vec<String> = Vec::new();
    let mut by: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for s in owned {
        let (t, p) = parse_tp(s);
        if !by.contains_key(&t) {
            names.push(t.clone());
        }
        by.entry(t).or_default().push(p);
    }
    let mut b = (names.len() as u32).to_be_bytes().to_vec();
    for n in &names {
        b.extend_from_slice(&(n.len() as u16).to_be_bytes());
        b.extend_from_slice(n.as_bytes());
        b.extend_from_slice(&(by[n].len() as u32).to_be_bytes());
        for p in &by[n] {
            b.extend_from_slice(&p.to_be_bytes());
        }
    }
    if with_gen {
        b.extend_from_slice(&gen.to_be_bytes());
    }
    b
}

fn be32(v: i32) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

/// Builds the request for ms: topic and member tables in reverse order, so
/// that no test passes by relying on the request's order; topics that
/// members only claim are in the table as topics that do not exist.
fn request(topics: &[(&str, i32)], k: Kind, generation: i32, ms: &[Spec]) -> Request {
    let mut req = Request { generation, ..Default::default() };
    for &(name, n) in topics.iter().rev() {
        req.topics.push(Topic { name: name.into(), exists: true, partition_count: n, ..Default::default() });
    }
    let mut index = |req: &mut Request, name: &str| -> u32 {
        if let Some(i) = req.topics.iter().position(|t| t.name == name) {
            return i as u32;
        }
        req.topics.push(Topic { name: name.into(), ..Default::default() });
        req.topics.len() as u32 - 1
    };
    for m in ms.iter().rev() {
        let mut am = Member { member_id: m.id.clone(), rack: m.rack.clone(), owned_generation: -1, ..Default::default() };
        let mut ts: Vec<u32> = m.topics.iter().map(|t| index(&mut req, t)).collect();
        ts.sort_unstable();
        ts.dedup();
        am.topics = ts;
        let mut tps = |req: &mut Request, list: &[String]| -> Vec<TopicPartitions> {
            let mut by: BTreeMap<u32, Vec<i32>> = BTreeMap::new();
            for s in list {
                let (t, p) = parse_tp(s);
                by.entry(index(req, &t)).or_default().push(p);
            }
            by.into_iter().map(|(topic, partitions)| TopicPartitions { topic, partitions, list: false }).collect()
        };
        match k {
            Kind::Coop => {
                am.cooperative = true;
                am.owned = tps(&mut req, m.owned.as_deref().unwrap_or(&[]));
                am.owned_generation = m.gen;
            }
            Kind::Eager => {
                if m.owned.is_some() || m.gen >= 0 {
                    am.user_data = sticky_user_data(m.owned.as_deref().unwrap_or(&[]), m.gen, true);
                }
            }
        }
        if let Some(ud) = &m.user_data {
            am.user_data = ud.clone();
        }
        am.previous = tps(&mut req, &m.previous);
        req.members.push(am);
    }
    req
}

fn run(k: Kind, req: &Request) -> Response {
    let resp = match k {
        Kind::Eager => assign_sticky(req),
        Kind::Coop => assign_cooperative(req),
    };
    resp.unwrap_or_else(|e| panic!("assign failed: {}", e))
}

type Plan = BTreeMap<String, Vec<String>>;

/// Reads resp back by name after checking it: every member answered once,
/// in request order, topics ascending by name, partitions ascending, only
/// subscribed partitions, each assigned partition exactly once, and every
/// subscribed partition assigned.
fn plan_of(req: &Request, resp: &Response) -> Plan {
    assert!(resp.topic_lists.is_none() || req.topic_lists.is_some());
    assert_eq!(resp.assignments.len(), req.members.len());
    let mut seen = BTreeSet::new();
    let mut plan = Plan::new();
    for (i, ma) in resp.assignments.iter().enumerate() {
        assert_eq!(ma.member as usize, i);
        let m = &req.members[i];
        let mut out = Vec::new();
        let mut last_name: Option<&str> = None;
        for tp in expand(resp, &ma.partitions) {
            let t = &req.topics[tp.topic as usize];
            assert!(m.subscribes(tp.topic), "{} got unsubscribed {}", m.member_id, t.name);
            if let Some(l) = last_name {
                assert!(l < t.name.as_str(), "topics out of order");
            }
            last_name = Some(&t.name);
            assert!(!tp.partitions.is_empty());
            assert!(tp.partitions.windows(2).all(|w| w[0] < w[1]), "partitions not ascending");
            for &p in &tp.partitions {
                assert!(p >= 0 && p < t.partition_count);
                assert!(seen.insert((tp.topic, p)), "{}-{} assigned twice", t.name, p);
                out.push(format!("{}-{}", t.name, p));
            }
        }
        out.sort();
        plan.insert(m.member_id.clone(), out);
    }
    for (t, topic) in req.topics.iter().enumerate() {
        if topic.exists && req.members.iter().any(|m| m.subscribes(t as u32)) {
            for p in 0..topic.partition_count {
                assert!(seen.contains(&(t as u32, p)), "{}-{} unassigned", topic.name, p);
            }
        }
    }
    plan
}

/// The plain entries of a member's assignment.
fn expand(resp: &Response, tps: &[TopicPartitions]) -> Vec<TopicPartitions> {
    let mut out = Vec::new();
    for tp in tps {
        if tp.list {
            let lists = resp.topic_lists.as_ref().expect("list entry without a table");
            for &t in &lists[tp.topic as usize] {
                out.push(TopicPartitions { topic: t, partitions: tp.partitions.clone(), list: false });
            }
        } else {
            out.push(tp.clone());
        }
    }
    out
}

fn tps(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.split(',').map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect();
    v.sort();
    v
}

/// Checks balance for a uniform group: counts differ by at most one.
fn check_balanced(p: &Plan) {
    let counts: Vec<usize> = p.values().map(|v| v.len()).collect();
    if let (Some(lo), Some(hi)) = (counts.iter().min(), counts.iter().max()) {
        assert!(hi - lo <= 1, "unbalanced: {:?}", p);
    }
}

/// Runs the claim reading and settling of kind k on req and returns who
/// keeps what, by name.
fn claims_by_name(k: Kind, req: &Request) -> BTreeMap<String, Vec<String>> {
    let mut g = Group::new(req).unwrap();
    let claims = g.claims(k == Kind::Coop);
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in g.settle(claims) {
        let id = req.members[c.member as usize].member_id.clone();
        for i in 0..c.n {
            let x = c.start + i * c.stride();
            let r = g.topic_at(x);
            let name = &req.topics[g.by_rank[r as usize] as usize].name;
            out.entry(id.clone()).or_default().push(format!("{}-{}", name, x - g.base[r as usize]));
        }
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

#[test]
fn kafka_one_assignment_cases_on_the_uniform_path() {
    let (c1, c2, c3) = ("consumer1", "consumer2", "consumer3");
    struct Case {
        name: &'static str,
        topics: Vec<(&'static str, i32)>,
        members: Vec<Spec>,
        want: Vec<(&'static str, &'static str)>,
    }
    let cases = vec![
        Case { name: "testOneConsumerNoTopic", topics: vec![], members: vec![sub("consumer", &[])], want: vec![("consumer", "")] },
        Case {
            name: "testOneConsumerNonexistentTopic",
            topics: vec![("topic", 0)],
            members: vec![sub("consumer", &["topic"])],
            want: vec![("consumer", "")],
        },
        Case {
            name: "testOneConsumerOneTopic",
            topics: vec![("topic", 3)],
            members: vec![sub("consumer", &["topic"])],
            want: vec![("consumer", "topic-0, topic-1, topic-2")],
        },
        Case {
            name: "testOnlyAssignsPartitionsFromSubscribedTopics",
            topics: vec![("topic", 2)],
            members: vec![owns("consumer", &["topic"], GENERATION_ID, &["topic-0", "topic-1", "other-0", "other-1"])],
            want: vec![("consumer", "topic-0, topic-1")],
        },
        Case {
            name: "testOneConsumerMultipleTopics",
            topics: vec![("topic1", 1), ("topic2", 2)],
            members: vec![sub("consumer", &["topic1", "topic2"])],
            want: vec![("consumer", "topic1-0, topic2-0, topic2-1")],
        },
        Case {
            name: "testTwoConsumersOneTopicTwoPartitions",
            topics: vec![("topic", 2)],
            members: vec![sub(c1, &["topic"]), sub(c2, &["topic"])],
            want: vec![(c1, "topic-0"), (c2, "topic-1")],
        },
        Case {
            name: "testTwoConsumersTwoTopicsSixPartitions",
            topics: vec![("topic1", 3), ("topic2", 3)],
            members: vec![sub(c1, &["topic1", "topic2"]), sub(c2, &["topic1", "topic2"])],
            want: vec![(c1, "topic1-0, topic1-2, topic2-1"), (c2, "topic1-1, topic2-0, topic2-2")],
        },
        Case {
            name: "testAllConsumersAreUnderMinQuota",
            topics: vec![("topic1", 2), ("topic2", 3)],
            members: vec![
                owns(c1, &["topic1", "topic2"], GENERATION_ID, &["topic1-0"]),
                owns(c2, &["topic1", "topic2"], GENERATION_ID, &["topic1-1"]),
                owns(c3, &["topic1", "topic2"], GENERATION_ID, &[]),
            ],
            want: vec![(c1, "topic1-0, topic2-1"), (c2, "topic1-1, topic2-2"), (c3, "topic2-0")],
        },
        Case {
            name: "testAllConsumersHaveOwnedPartitionInvalidatedWhenClaimedByMultipleConsumersInSameGeneration",
            topics: vec![("topic", 4)],
            members: vec![
                owns(c1, &["topic"], GENERATION_ID, &["topic-0", "topic-1"]),
                owns(c2, &["topic"], GENERATION_ID, &["topic-0", "topic-2"]),
                owns(c3, &["topic"], GENERATION_ID, &[]),
            ],
            want: vec![(c1, "topic-1, topic-3"), (c2, "topic-2"), (c3, "topic-0")],
        },
        Case {
            name: "testConsumerOwningMinQuotaExpectedMaxQuota",
            topics: vec![("topic1", 2), ("topic2", 3)],
            members: vec![
                owns(c1, &["topic1", "topic2"], GENERATION_ID, &["topic1-0", "topic2-1"]),
                owns(c2, &["topic1", "topic2"], GENERATION_ID, &["topic1-1", "topic2-2"]),
            ],
            want: vec![(c1, "topic1-0, topic2-1, topic2-0"), (c2, "topic1-1, topic2-2")],
        },
        Case {
            name: "testMaxQuotaConsumerMoreThanNumExpectedMaxCapacityMembers",
            topics: vec![("topic1", 2), ("topic2", 2)],
            members: vec![
                owns(c1, &["topic1", "topic2"], GENERATION_ID, &["topic1-0", "topic2-0"]),
                owns(c2, &["topic1", "topic2"], GENERATION_ID, &["topic1-1", "topic2-1"]),
                owns(c3, &["topic1", "topic2"], GENERATION_ID, &[]),
            ],
            want: vec![(c1, "topic1-0, topic2-0"), (c2, "topic1-1"), (c3, "topic2-1")],
        },
        Case {
            name: "testAllConsumersReachExpectedQuotaAndAreConsideredFilled",
            topics: vec![("topic", 4)],
            members: vec![
                owns(c1, &["topic"], GENERATION_ID, &["topic-0", "topic-1"]),
                owns(c2, &["topic"], GENERATION_ID, &["topic-2"]),
                owns(c3, &["topic"], GENERATION_ID, &[]),
            ],
            want: vec![(c1, "topic-0, topic-1"), (c2, "topic-2"), (c3, "topic-3")],
        },
    ];
    for c in &cases {
        for k in BOTH {
            let req = request(&c.topics, k, 2, &c.members);
            let p = plan_of(&req, &run(k, &req));
            check_balanced(&p);
            for (id, want) in &c.want {
                assert_eq!(p[*id], tps(want), "{} ({:?}): {}", c.name, k, id);
            }
        }
    }
}

/// Kafka's large uniform cases, scaled down: after a round-robin start,
/// the first consumer rejoins with nothing while the others keep reporting
/// what they own (nothing needs to move), or a new consumer joins (it takes
/// exactly what the others give up).
#[test]
fn rejoin_and_join_move_only_what_balance_requires() {
    let names: Vec<String> = (0..40).map(|i| format!("t{:02}", i)).collect();
    let topics: Vec<(&str, i32)> = names.iter().map(|n| (n.as_str(), 30)).collect();
    let subs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    for k in BOTH {
        let ms: Vec<Spec> = (0..70).map(|i| sub(&format!("c{:02}", i), &subs)).collect();
        let req = request(&topics, k, 1, &ms);
        let first = plan_of(&req, &run(k, &req));
        check_balanced(&first);
        let reported: Vec<Spec> = ms
            .iter()
            .map(|m| {
                let owned: Vec<&str> = first[&m.id].iter().map(|s| s.as_str()).collect();
                owns(&m.id, &subs, 1, &owned)
            })
            .collect();
        let moved = |second: &Plan| -> usize {
            ms[1..].iter().map(|m| first[&m.id].iter().filter(|tp| !second[&m.id].contains(tp)).count()).sum()
        };

        let mut rejoin = reported.clone();
        rejoin[0] = sub("c00", &subs);
        let req = request(&topics, k, 2, &rejoin);
        let second = plan_of(&req, &run(k, &req));
        check_balanced(&second);
        assert_eq!(moved(&second), 0, "{:?}: rejoin moved partitions", k);
        assert!(second["c00"].iter().all(|tp| first["c00"].contains(tp)), "{:?}: the rejoining member got other partitions", k);

        let mut join = reported.clone();
        join.push(sub("c70", &subs));
        let req = request(&topics, k, 2, &join);
        let second = plan_of(&req, &run(k, &req));
        check_balanced(&second);
        assert!(!second["c70"].is_empty());
        assert_eq!(moved(&second) + first["c00"].iter().filter(|tp| !second["c00"].contains(tp)).count(), second["c70"].len(), "{:?}: join", k);
    }
}

#[test]
fn sticky_user_data_versions() {
    let topics = [("topic1", 4), ("topic2", 4)];
    let owned: Vec<String> = ["topic1-0", "topic2-1", "topic2-2"].iter().map(|s| s.to_string()).collect();
    let mut v0_trailing = sticky_user_data(&owned, 0, false);
    v0_trailing.extend_from_slice(&[1, 2]);
    let mut v1_trailing = sticky_user_data(&owned, 7, true);
    v1_trailing.extend_from_slice(&[9, 9, 9]);
    let cases = vec![
        ("v1", sticky_user_data(&owned, 7, true), 7),
        ("v0", sticky_user_data(&owned, 0, false), -1),
        ("v0 with 1-3 trailing bytes", v0_trailing, -1),
        ("v1 with trailing bytes", v1_trailing, 7),
    ];
    for (name, ud, want_gen) in cases {
        // A rival claim of topic1-0 in generation 6 tells which generation
        // the user data carried: 7 beats it, -1 loses to it.
        let mut rival = sub("rival", &["topic1", "topic2"]);
        rival.user_data = Some(sticky_user_data(&["topic1-0".to_string()], 6, true));
        let mut me = sub("me", &["topic1", "topic2"]);
        me.user_data = Some(ud);
        let got = claims_by_name(Kind::Eager, &request(&topics, Kind::Eager, 8, &[me, rival]));
        let want = if want_gen < 6 { owned[1..].to_vec() } else { owned.clone() };
        assert_eq!(got["me"], want, "{}", name);
    }
}

#[test]
fn corrupt_user_data_means_no_ownership() {
    let topics = [("topic", 3)];
    let good = sticky_user_data(&["topic-0".to_string(), "topic-1".to_string()], 3, true);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated count", vec![0, 0]),
        ("negative topic count", vec![0xff, 0xff, 0xff, 0xff]),
        ("count past the end", vec![0, 0, 0, 9]),
        ("negative name length", vec![0, 0, 0, 1, 0xff, 0xff]),
        ("name past the end", vec![0, 0, 0, 1, 0, 40, b't']),
        ("partitions past end", good[..good.len() - 8].to_vec()),
        ("negative partitions", vec![0, 0, 0, 1, 0, 5, b't', b'o', b'p', b'i', b'c', 0xff, 0xff, 0xff, 0xff]),
        ("partition count huge", vec![0, 0, 0, 1, 0, 5, b't', b'o', b'p', b'i', b'c', 0x7f, 0xff, 0xff, 0xff]),
        ("single byte", vec![1]),
    ];
    for (name, ud) in cases {
        let mut a = sub("a", &["topic"]);
        a.user_data = Some(ud);
        let mut b = sub("b", &["topic"]);
        b.user_data = Some(sticky_user_data(&[], 3, true));
        let req = request(&topics, Kind::Eager, 4, &[a, b]);
        assert!(!claims_by_name(Kind::Eager, &req).contains_key("a"), "{}", name);
        check_balanced(&plan_of(&req, &run(Kind::Eager, &req)));
    }
    // Random bytes, and random cuts of valid user data, never fail.
    let mut rnd = Rng(1);
    for _ in 0..2000 {
        let ud: Vec<u8> = if rnd.below(2) == 0 {
            (0..rnd.below(40)).map(|_| rnd.below(256) as u8).collect()
        } else {
            good[..rnd.below(good.len() as u64 + 1) as usize].to_vec()
        };
        let mut a = sub("a", &["topic"]);
        a.user_data = Some(ud);
        let req = request(&topics, Kind::Eager, 4, &[a]);
        plan_of(&req, &run(Kind::Eager, &req));
    }
}

#[test]
fn eager_reads_user_data_not_owned() {
    let mut a = sub("a", &["topic"]);
    a.user_data = Some(sticky_user_data(&["topic-1".to_string()], 2, true));
    let mut req = request(&[("topic", 2)], Kind::Eager, 3, &[a]);
    req.members[0].owned = vec![TopicPartitions { topic: 0, partitions: vec![0], list: false }];
    req.members[0].owned_generation = 2;
    assert_eq!(claims_by_name(Kind::Eager, &req)["a"], tps("topic-1"));
}

#[test]
fn cooperative_generation_comes_from_the_field_or_user_data() {
    use crate::claims::cooperative_user_data_generation as gen;
    assert_eq!(gen(&[]), -1);
    assert_eq!(gen(&be32(10)), 10);
    assert_eq!(gen(&be32(-1)), -1);
    assert_eq!(gen(&[0, 0, 1]), -1);
    assert_eq!(gen(&[0, 0, 0, 4, 1, 2]), 4);
    let topics = [("topic", 2)];
    // Both claim topic-0; "a" says generation 5 through user data, "b" 4
    // through the v2+ field: "a" keeps it.
    let mut a = owns("a", &["topic"], -1, &["topic-0"]);
    a.user_data = Some(be32(5));
    let b = owns("b", &["topic"], 4, &["topic-0", "topic-1"]);
    let got = claims_by_name(Kind::Coop, &request(&topics, Kind::Coop, 6, &[a, b]));
    assert_eq!(got["a"], tps("topic-0"));
    assert_eq!(got["b"], tps("topic-1"));
    // Sticky-format user data listing partitions is not ownership for the
    // cooperative assignor.
    let mut m = owns("m", &["topic"], 5, &[]);
    m.user_data = Some(sticky_user_data(&["topic-0".to_string()], 5, true));
    let n = owns("n", &["topic"], 5, &["topic-1"]);
    let got = claims_by_name(Kind::Coop, &request(&topics, Kind::Coop, 6, &[m, n]));
    assert!(!got.contains_key("m"));
}

#[test]
fn ownership_that_cannot_stay_is_dropped() {
    let topics = [("a", 4), ("b", 4)];
    for k in BOTH {
        let ms = vec![
            owns("m1", &["a", "b"], 3, &["a-0", "a-1", "gone-0", "a-9"]),
            owns("m2", &["a", "b"], 3, &["b-1", "b-2"]),
        ];
        let mut req = request(&topics, k, 4, &ms);
        if k == Kind::Coop {
            // A negative partition id, which no encoder writes.
            let m1 = req.members.iter_mut().find(|m| m.member_id == "m1").unwrap();
            m1.owned[0].partitions.push(-3);
        }
        let p = plan_of(&req, &run(k, &req));
        check_balanced(&p);
        for tp in ["a-0", "a-1"] {
            assert!(p["m1"].contains(&tp.to_string()), "{:?}: {:?}", k, p);
        }
        for tp in ["b-1", "b-2"] {
            assert!(p["m2"].contains(&tp.to_string()), "{:?}: {:?}", k, p);
        }
    }
}

#[test]
fn previous_assignment_when_nobody_reports() {
    let topics = [("t", 12)];
    let prev = [("a", "t-9, t-10, t-11"), ("b", "t-0, t-1, t-2, t-3"), ("c", "t-4, t-5, t-6, t-7, t-8")];
    for k in BOTH {
        let mut ms: Vec<Spec> = prev
            .iter()
            .map(|(id, p)| {
                let mut m = sub(id, &["t"]);
                m.previous = tps(p);
                m
            })
            .collect();
        let req = request(&topics, k, 5, &ms);
        let p = plan_of(&req, &run(k, &req));
        // Four each: a keeps its three, b its four, c four of its five.
        assert!(tps(prev[0].1).iter().all(|x| p["a"].contains(x)));
        assert_eq!(p["b"], tps(prev[1].1));
        assert!(p["c"].iter().all(|x| tps(prev[2].1).contains(x)));
        // One member reporting ownership turns the fallback off.
        ms[0] = owns("a", &["t"], 4, &["t-0"]);
        let got = claims_by_name(k, &request(&topics, k, 5, &ms));
        assert_eq!(got.len(), 1, "{:?}: {:?}", k, got);
        assert_eq!(got["a"], tps("t-0"));
    }
}

/// Decodes StickyAssignor v1 user data into sorted "topic-p" and the
/// generation.
fn decode_user_data(b: &[u8]) -> (Vec<String>, i32) {
    let rd = |at: usize| i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    let mut off = 4;
    let mut out = Vec::new();
    for _ in 0..rd(0) {
        let l = u16::from_be_bytes([b[off], b[off + 1]]) as usize;
        let name = std::str::from_utf8(&b[off + 2..off + 2 + l]).unwrap().to_string();
        off += 2 + l;
        let k = rd(off);
        off += 4;
        for _ in 0..k {
            out.push(format!("{}-{}", name, rd(off)));
            off += 4;
        }
    }
    assert_eq!(off + 4, b.len());
    out.sort();
    (out, rd(off))
}

#[test]
fn sticky_writes_v1_user_data_of_the_assignment() {
    let topics = [("x", 5), ("y", 3)];
    let ms = vec![sub("m1", &["x", "y"]), sub("m2", &["x", "y"]), sub("m3", &["x", "y"])];
    let req = request(&topics, Kind::Eager, 42, &ms);
    let resp = run(Kind::Eager, &req);
    let p = plan_of(&req, &resp);
    for ma in &resp.assignments {
        let (got, gen) = decode_user_data(&ma.user_data);
        assert_eq!(gen, 42);
        assert_eq!(got, p[&req.members[ma.member as usize].member_id]);
    }
    let resp = run(Kind::Coop, &request(&topics, Kind::Coop, 42, &ms));
    assert!(resp.assignments.iter().all(|ma| ma.user_data.is_empty()));
}

#[test]
fn conflicting_claims_settle_per_partition() {
    let topics = [("t", 10)];
    let mut rnd = Rng(9);
    for _ in 0..300 {
        let mut ms = Vec::new();
        for i in 0..1 + rnd.below(5) {
            let mut owned = Vec::new();
            let lo = rnd.below(10) as i32;
            let hi = lo + rnd.below(8) as i32;
            let mut p = lo;
            while p < hi && p < 12 {
                owned.push(format!("t-{}", p));
                p += 1;
            }
            if rnd.below(4) == 0 && !owned.is_empty() {
                owned.push(owned[0].clone());
            }
            let owned: Vec<&str> = owned.iter().map(|s| s.as_str()).collect();
            ms.push(owns(&format!("m{}", i), &["t"], rnd.below(3) as i32, &owned));
        }
        // Per partition: the members claiming it in the highest generation;
        // it stays only when there is exactly one.
        let mut want: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for p in 0..10 {
            let tp = format!("t-{}", p);
            let claimants: Vec<&Spec> = ms.iter().filter(|m| m.owned.as_ref().unwrap().contains(&tp)).collect();
            if let Some(top) = claimants.iter().map(|m| m.gen).max() {
                let best: Vec<&&Spec> = claimants.iter().filter(|m| m.gen == top).collect();
                if best.len() == 1 {
                    want.entry(best[0].id.clone()).or_default().push(tp);
                }
            }
        }
        for v in want.values_mut() {
            v.sort();
        }
        for k in BOTH {
            let got = claims_by_name(k, &request(&topics, k, 5, &ms));
            assert_eq!(got, want, "{:?}", k);
        }
    }
}

#[test]
fn owned_lists_are_cut_into_runs_covering_exactly_the_valid_ids() {
    let mut rnd = Rng(23);
    for _ in 0..2000 {
        let limit = 1 + rnd.below(20) as i32;
        let mut parts = Vec::new();
        match rnd.below(4) {
            0 => {
                let p0 = rnd.below(25) as i32 - 2;
                for i in 0..rnd.below(12) as i32 + 1 {
                    parts.push(p0 + i);
                }
            }
            1 => {
                let (p0, d) = (rnd.below(25) as i32 - 2, rnd.below(5) as i32 - 1);
                for i in 0..rnd.below(8) as i32 + 1 {
                    parts.push(p0 + d * i);
                }
            }
            _ => {
                for _ in 0..rnd.below(12) + 1 {
                    parts.push(rnd.below(25) as i32 - 2);
                }
            }
        }
        let mut req = request(&[("t", limit)], Kind::Coop, 2, &[sub("m", &["t"])]);
        req.members[0].owned = vec![TopicPartitions { topic: 0, partitions: parts.clone(), list: false }];
        let mut g = Group::new(&req).unwrap();
        let mut cs = Vec::new();
        g.append_owned(&mut cs, &req.members[0].owned, 0, 1);
        let mut got: Vec<i32> = cs.iter().flat_map(|c| (0..c.n).map(move |i| c.start + i * c.stride())).collect();
        let mut want: Vec<i32> = parts.iter().copied().filter(|&p| p >= 0 && p < limit).collect();
        got.sort_unstable();
        want.sort_unstable();
        assert_eq!(got, want, "parts {:?} below {}", parts, limit);
    }
}

/// A grouped request (topic lists, list references in owned entries) gets
/// the same assignment as the plain one, and a cooperative answer to it
/// may use lists of its own.
#[test]
fn grouped_request_answers_like_plain() {
    let names: Vec<String> = (0..12).map(|i| format!("topic{:02}", i)).collect();
    let topics: Vec<(&str, i32)> = names.iter().map(|n| (n.as_str(), 6)).collect();
    let subs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    let mut rnd = Rng(5);
    let mut singles = 0;
    for round in 0..200 {
        for k in BOTH {
            let n = 1 + rnd.below(8) as usize;
            let ms: Vec<Spec> = (0..n).map(|i| sub(&format!("c{}", i), &subs)).collect();
            let req = request(&topics, k, 1, &ms);
            let first = plan_of(&req, &run(k, &req));
            // Each member reports what it got; some drop out.
            let again: Vec<Spec> = ms
                .iter()
                .filter(|_| rnd.below(4) != 0)
                .map(|m| {
                    let owned: Vec<&str> = first[&m.id].iter().map(|s| s.as_str()).collect();
                    owns(&m.id, &subs, 1, &owned)
                })
                .collect();
            let mut plain = request(&topics, Kind::Coop, 2, &again);
            if k == Kind::Eager {
                plain = request(&topics, k, 2, &again);
            }
            let grouped = group_request(&plain);
            let plain_resp = run(k, &plain);
            let want = plan_of(&plain, &plain_resp);
            let resp = run(k, &grouped);
            assert!(resp.topic_lists.is_some());
            assert_eq!(plan_of(&grouped, &resp), want, "round {} {:?}", round, k);
            // Sticky user data is written byte for byte alike.
            for (x, y) in resp.assignments.iter().zip(&plain_resp.assignments) {
                assert_eq!(x.user_data, y.user_data, "round {} {:?}", round, k);
            }
            if k == Kind::Eager && n % 6 == 0 && again.len() == n {
                singles += 1;
            }
        }
    }
    // Some rounds took the one-partition-per-topic template.
    assert!(singles > 0);
}

/// Returns req in the grouped layout: subscriptions as list references,
/// and runs of three or more owned entries with equal partitions and
/// ascending topics as one entry over a list.
fn group_request(req: &Request) -> Request {
    let mut out = req.clone();
    let mut lists: Vec<Vec<u32>> = Vec::new();
    let mut list_of = |ts: &[u32], lists: &mut Vec<Vec<u32>>| -> u32 {
        if let Some(i) = lists.iter().position(|l| l == ts) {
            return i as u32;
        }
        lists.push(ts.to_vec());
        lists.len() as u32 - 1
    };
    for m in &mut out.members {
        if !m.topics.is_empty() {
            m.subscription = Some(list_of(&m.topics, &mut lists));
        }
        let mut owned = Vec::new();
        let mut i = 0;
        while i < m.owned.len() {
            let mut j = i + 1;
            while j < m.owned.len()
                && m.owned[j].topic > m.owned[j - 1].topic
                && m.owned[j].partitions == m.owned[i].partitions
            {
                j += 1;
            }
            if j - i >= 3 {
                let ts: Vec<u32> = m.owned[i..j].iter().map(|tp| tp.topic).collect();
                let k = list_of(&ts, &mut lists);
                owned.push(TopicPartitions { topic: k, partitions: m.owned[i].partitions.clone(), list: true });
            } else {
                owned.extend_from_slice(&m.owned[i..j]);
            }
            i = j;
        }
        m.owned = owned;
    }
    out.topic_lists = Some(lists);
    out
}

/// Random uniform groups with random histories: every answer is valid and
/// balanced, and members that owned no more than the minimum quota (and
/// whose claims nobody disputes) keep all of it.
#[test]
fn random_uniform_groups_are_valid_balanced_and_sticky() {
    let mut rnd = Rng(77);
    for _ in 0..400 {
        let nt = 1 + rnd.below(6) as usize;
        let names: Vec<String> = (0..nt).map(|i| format!("t{}", i)).collect();
        let topics: Vec<(&str, i32)> = names.iter().map(|n| (n.as_str(), rnd.below(12) as i32)).collect();
        let subs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
        let racks = rnd.below(2) == 0;
        let n = 1 + rnd.below(9) as usize;
        let all: Vec<String> = topics.iter().flat_map(|(t, c)| (0..*c).map(move |p| format!("{}-{}", t, p))).collect();
        for k in BOTH {
            let ms: Vec<Spec> = (0..n)
                .map(|i| {
                    let owned: Vec<&str> = all.iter().filter(|_| rnd.below(n as u64 + 1) == 0).map(|s| s.as_str()).collect();
                    let mut m = owns(&format!("m{}", i), &subs, 1 + rnd.below(2) as i32, &owned);
                    if racks {
                        m.rack = format!("r{}", i % 3);
                    }
                    m
                })
                .collect();
            let mut req = request(&topics, k, 3, &ms);
            if racks {
                place(&mut req, &mut rnd);
            }
            let p = plan_of(&req, &run(k, &req));
            check_balanced(&p);
            if racks {
                continue;
            }
            let min = all.len() / n;
            let settled = claims_by_name(k, &req);
            for (id, kept) in &settled {
                if kept.len() <= min {
                    assert!(kept.iter().all(|x| p[id].contains(x)), "{:?}: {} lost some of {:?}: {:?}", k, id, kept, p);
                }
            }
        }
    }
}

/// Places every partition on random brokers of three racks.
fn place(req: &mut Request, rnd: &mut Rng) {
    req.brokers = (0..3).map(|b| wasmassign::Broker { id: b, rack: format!("r{}", b) }).collect();
    req.replica_sets = vec![vec![0], vec![1], vec![2], vec![0, 1], vec![1, 2]];
    for t in &mut req.topics {
        if t.exists {
            t.placement = Some(
                (0..t.partition_count)
                    .map(|_| Partition { leader: 0, replicas: rnd.below(5) as u32, isr: 0 })
                    .collect(),
            );
        }
    }
}

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

#[test]
fn subscription_to_a_missing_topic_index_is_an_error_not_a_panic() {
    let mut req = request(&[("t", 3)], Kind::Coop, 1, &[sub("a", &["t"])]);
    req.members[0].topics.push(7);
    for k in BOTH {
        let err = match k {
            Kind::Eager => assign_sticky(&req),
            Kind::Coop => assign_cooperative(&req),
        }
        .unwrap_err();
        assert!(err.contains("topic index 7"), "{}", err);
    }
}

#[test]
fn both_assignors_are_registered_as_the_go_package_describes_them() {
    let a = crate::registered_assignors();
    let names: Vec<&str> = a.iter().map(|x| x.name).collect();
    assert_eq!(names, ["sticky", "cooperative-sticky"]);
    for x in a {
        assert_eq!(x.protocols, [x.name]);
        assert_eq!(x.version, "1.0.0");
        assert_eq!(x.modes, wasmassign::Modes::BOTH);
        assert!(x.grouped && !x.may_leave_unassigned);
        assert!(x.description.starts_with("Kafka's "));
    }
}

#[test]
fn same_bytes_agrees_with_slice_equality() {
    let mut rnd = Rng(3);
    for _ in 0..20000 {
        let n = rnd.below(24) as usize;
        let a: Vec<u8> = (0..n).map(|_| rnd.below(3) as u8).collect();
        let mut b = a.clone();
        if rnd.below(2) == 0 && n > 0 {
            let i = rnd.below(n as u64) as usize;
            b[i] = rnd.below(3) as u8;
        }
        if rnd.below(8) == 0 {
            b.push(0);
        }
        assert_eq!(crate::claims::same_bytes(&a, &b), a == b, "{:?} {:?}", a, b);
    }
}

#[test]
fn compare_bytes_orders_like_slices() {
    let mut rnd = Rng(4);
    for _ in 0..50000 {
        let n = rnd.below(20) as usize;
        let a: Vec<u8> = (0..n).map(|_| [0u8, 1, 0x7f, 0x80, 0xff][rnd.below(5) as usize]).collect();
        let mut b = a.clone();
        match rnd.below(4) {
            0 if n > 0 => {
                let i = rnd.below(n as u64) as usize;
                b[i] = [0u8, 1, 0x7f, 0x80, 0xff][rnd.below(5) as usize];
            }
            1 => b.push([0u8, 1, 0xff][rnd.below(3) as usize]),
            2 if n > 0 => {
                b.pop();
            }
            _ => {}
        }
        assert_eq!(crate::groupview::compare_bytes(&a, &b), a.cmp(&b), "{:?} {:?}", a, b);
    }
}

/// The request on which Kafka's own assignor never returns (its
/// reassignment walk hands one partition back and forth for ever; see
/// general_cycle_test.go in the Go package, which shares the file): the
/// port leaves the cycle and answers, valid and balanced, within a
/// deadline.
#[test]
fn general_walk_stops_where_kafka_cycles_forever() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/general-cycle-seed11042.req");
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {}", path, e));
    let req = wasmassign::decode_request(&b).unwrap_or_else(|e| panic!("{}: {:?}", path, e));
    let (tx, rx) = std::sync::mpsc::channel();
    let sent = req.clone();
    std::thread::spawn(move || {
        let _ = tx.send(run(Kind::Coop, &sent));
    });
    let resp = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("no answer in 30 s: the reassignment walk does not end");
    let plan = plan_of(&req, &resp);
    // Balanced as Kafka's isBalanced defines it: nobody holds a partition
    // of a topic while a subscriber of that topic holds two or more fewer.
    for (t, topic) in req.topics.iter().enumerate() {
        let least = req
            .members
            .iter()
            .filter(|m| m.subscribes(t as u32))
            .map(|m| plan[&m.member_id].len())
            .min();
        for (id, held) in &plan {
            let holds = held.iter().any(|tp| tp.rsplit_once('-').map(|(name, _)| name) == Some(topic.name.as_str()));
            if let (true, Some(least)) = (holds, least) {
                assert!(held.len() <= least + 1, "unbalanced: {} holds {} while a subscriber of {} holds {}", id, held.len(), topic.name, least);
            }
        }
    }
}

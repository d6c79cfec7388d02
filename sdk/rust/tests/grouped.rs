//! Checks the grouped layout (sdk/ABI.md section 7) beyond the golden
//! vectors: how the encoder picks subscription references, that the
//! description carries the grouped flag, and that a grouped assignor gets
//! grouped requests through dispatch and may answer grouped.

use wasmassign::module::describe;
use wasmassign::*;

fn topic(name: &str, n: i32) -> Topic {
    Topic { name: name.to_owned(), exists: true, partition_count: n, ..Topic::default() }
}

fn member(id: &str, topics: Vec<u32>) -> Member {
    Member { member_id: id.to_owned(), topics, owned_generation: -1, ..Member::default() }
}

fn roundtrip(req: &Request) -> (Vec<u8>, Request) {
    let mut b = Vec::new();
    encode_request(req, &mut b);
    let back = decode_request(&b).expect("an encoded request decodes");
    (b, back)
}

#[test]
fn encoder_refers_each_subscription_to_an_equal_list_or_appends_one() {
    let req = Request {
        topics: vec![topic("a", 1), topic("b", 1), topic("c", 1)],
        topic_lists: Some(vec![vec![0, 1], vec![2]]),
        members: vec![
            member("in-table", vec![0, 1]),
            member("new", vec![1, 2]),
            member("none", vec![]),
            member("new-again", vec![1, 2]),
            member("other-new", vec![0]),
        ],
        ..Request::default()
    };
    let (b, back) = roundtrip(&req);
    assert_eq!(b[..4], [1, 0, 1, 0], "grouped version word");
    // The table keeps its lists in order and gains the missing ones in
    // member order, each once.
    assert_eq!(back.topic_lists, Some(vec![vec![0, 1], vec![2], vec![1, 2], vec![0]]));
    let subs: Vec<Option<u32>> = back.members.iter().map(|m| m.subscription).collect();
    assert_eq!(subs, vec![Some(0), Some(2), None, Some(2), Some(3)]);
    for (got, want) in back.members.iter().zip(&req.members) {
        assert_eq!(got.topics, want.topics, "member {}: topics are the expanded list", want.member_id);
    }
    // Encoding the decoded request gives the same bytes: subscription
    // references are kept.
    let (again, _) = roundtrip(&back);
    assert_eq!(again, b);
}

#[test]
fn an_explicit_subscription_is_written_as_given() {
    // Two equal lists: a search by content would pick the first.
    let mut req = Request {
        topics: vec![topic("a", 1), topic("b", 1)],
        topic_lists: Some(vec![vec![0, 1], vec![0, 1]]),
        members: vec![member("m", vec![0, 1]), member("n", vec![0, 1])],
        ..Request::default()
    };
    req.members[0].subscription = Some(1);
    let (_, back) = roundtrip(&req);
    assert_eq!(back.members[0].subscription, Some(1));
    assert_eq!(back.members[1].subscription, Some(0));
    assert_eq!(back.members[0].topics, vec![0, 1]);
}

#[test]
fn plain_requests_have_no_table_and_no_subscription_references() {
    let req = Request {
        topics: vec![topic("a", 1)],
        members: vec![member("m", vec![0])],
        ..Request::default()
    };
    let (b, back) = roundtrip(&req);
    assert_eq!(b[..4], [1, 0, 0, 0]);
    assert_eq!(back.topic_lists, None);
    assert_eq!(back.members[0].subscription, None);
    assert_eq!(back.members[0].topics, vec![0]);
}

#[test]
fn list_entries_travel_as_negative_topics() {
    let req = Request {
        topics: vec![topic("a", 2), topic("b", 2)],
        topic_lists: Some(vec![vec![0, 1]]),
        members: vec![Member {
            owned: vec![
                TopicPartitions { topic: 0, partitions: vec![1], list: true },
                TopicPartitions { topic: 1, partitions: vec![0], ..Default::default() },
            ],
            ..member("m", vec![0, 1])
        }],
        ..Request::default()
    };
    let (b, back) = roundtrip(&req);
    assert_eq!(back.members[0].owned, req.members[0].owned);
    // After owned generation -1 and owned count 2, the first entry's topic
    // is -1 (list 0) on the wire, the second's 1.
    let at = b.windows(8).position(|w| w == [0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0]).expect("owned count 2") + 8;
    assert_eq!(b[at..at + 4], [0xff, 0xff, 0xff, 0xff]);
    assert_eq!(b[at + 12..at + 16], [1, 0, 0, 0]);
}

fn grouped_assign(req: &Request) -> Result<Response, String> {
    let lists = req.topic_lists.as_ref().ok_or("want a grouped request")?;
    // Member i gets partition i of each topic of its subscription, as one
    // entry over the list.
    let assignments = req
        .members
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            m.subscription.map(|k| MemberAssignment {
                member: i as u32,
                partitions: vec![TopicPartitions { topic: k, partitions: vec![i as i32], list: true }],
                user_data: Vec::new(),
            })
        })
        .collect();
    Ok(Response { assignments, topic_lists: Some(lists.clone()) })
}

static GROUPED: &[Assignor] = &[Assignor {
    name: "grouped",
    version: "1",
    protocols: &["p"],
    modes: Modes::BOTH,
    may_leave_unassigned: true,
    description: "test",
    grouped: true,
    assign: grouped_assign,
}];

#[test]
fn a_grouped_assignor_declares_the_flag_and_answers_in_the_grouped_layout() {
    let mut d = Vec::new();
    describe(GROUPED, &mut d);
    let info = &decode_description(&d).unwrap().assignors[0];
    assert!(info.grouped && info.may_leave_unassigned);
    // Flags byte: bit 0 may leave unassigned, bit 1 grouped.
    assert_eq!(d[d.len() - 4 - 4 - 1], 3);

    let req = Request {
        topics: vec![topic("a", 3), topic("b", 3)],
        topic_lists: Some(vec![vec![0, 1]]),
        members: vec![member("m0", vec![0, 1]), member("m1", vec![]), member("m2", vec![0, 1])],
        ..Request::default()
    };
    let mut b = Vec::new();
    encode_request(&req, &mut b);
    let mut out = Vec::new();
    dispatch(GROUPED, &b, &mut out);
    assert_eq!(out[..4], [1, 0, 1, 0], "the response is grouped");
    let resp = decode_response(&out).unwrap().unwrap();
    assert_eq!(resp.topic_lists, Some(vec![vec![0, 1]]));
    let got: Vec<(u32, i32)> = resp.assignments.iter().map(|a| (a.member, a.partitions[0].partitions[0])).collect();
    assert_eq!(got, vec![(0, 0), (2, 2)]);
    assert!(resp.assignments.iter().all(|a| a.partitions[0].list && a.partitions[0].topic == 0));
}

#[test]
fn an_error_reply_is_written_plain() {
    let mut out = Vec::new();
    encode_response(&Err("no".to_owned()), &mut out);
    assert_eq!(out[..4], [1, 0, 0, 0]);
}

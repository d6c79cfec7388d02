//! The binary codec of ABI version 1 (sdk/ABI.md section 2 to 5).
//!
//! Decoders reject, with a [`DecodeError`], any buffer that ends early, has
//! bytes left over, carries a count its remaining bytes cannot hold, an
//! out-of-range index, an undefined flag bit or invalid UTF-8. Counts are
//! checked against the remaining bytes in 64-bit arithmetic before anything is
//! allocated, so a forged count never costs memory on wasm32.

use crate::model::*;
use std::fmt;

/// The ABI version this crate speaks.
pub const VERSION: u32 = 1;

const TOPIC_EXISTS: u8 = 1;
const TOPIC_PLACEMENT: u8 = 2;
const MEMBER_COOPERATIVE: u8 = 1;
const ASSIGNOR_MAY_LEAVE: u8 = 1;
const STATUS_OK: u8 = 0;
const STATUS_ERROR: u8 = 1;

/// Why a buffer did not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// The kind of buffer: "request", "response" or "description".
    pub what: &'static str,
    /// The byte offset where decoding stopped.
    pub offset: usize,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "abi: {}: {} at byte {}", self.what, self.reason, self.offset)
    }
}

impl std::error::Error for DecodeError {}

type Res<T> = Result<T, DecodeError>;

struct Reader<'a> {
    b: &'a [u8],
    off: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn fail<T>(&self, reason: String) -> Res<T> {
        Err(DecodeError { what: self.what, offset: self.off, reason })
    }

    fn remaining(&self) -> usize {
        self.b.len() - self.off
    }

    fn take(&mut self, n: usize, field: &str) -> Res<&'a [u8]> {
        if self.remaining() < n {
            return self.fail(format!("truncated {} (need {} bytes, have {})", field, n, self.remaining()));
        }
        let s = &self.b[self.off..self.off + n];
        self.off += n;
        Ok(s)
    }

    fn u8(&mut self, field: &str) -> Res<u8> {
        Ok(self.take(1, field)?[0])
    }

    fn u32(&mut self, field: &str) -> Res<u32> {
        let s = self.take(4, field)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }

    fn i32(&mut self, field: &str) -> Res<i32> {
        Ok(self.u32(field)? as i32)
    }

    fn u64(&mut self, field: &str) -> Res<u64> {
        let s = self.take(8, field)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }

    /// Reads a count and checks that the remaining bytes can hold that many
    /// elements of at least `min` bytes each.
    fn count(&mut self, field: &str, min: u64) -> Res<usize> {
        let n = self.u32(field)?;
        if (n as u64) * min > self.remaining() as u64 {
            return self.fail(format!("{} count {} exceeds the remaining {} bytes", field, n, self.remaining()));
        }
        Ok(n as usize)
    }

    fn bytes(&mut self, field: &str) -> Res<&'a [u8]> {
        let n = self.count(field, 1)?;
        self.take(n, field)
    }

    fn str(&mut self, field: &str) -> Res<String> {
        let b = self.bytes(field)?;
        match std::str::from_utf8(b) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => self.fail(format!("{} is not valid UTF-8", field)),
        }
    }

    fn i32s(&mut self, field: &str) -> Res<Vec<i32>> {
        let n = self.count(field, 4)?;
        let s = self.take(4 * n, field)?;
        Ok(get_i32_values(s))
    }

    /// Reads a `tps` list; `topics` bounds the topic indices when known.
    fn tps(&mut self, field: &str, topics: Option<usize>) -> Res<Vec<TopicPartitions>> {
        let n = self.count(field, 8)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let t = self.u32(field)?;
            if let Some(nt) = topics {
                if t as usize >= nt {
                    return self.fail(format!("{} refers to topic index {} of {}", field, t, nt));
                }
            }
            let partitions = self.i32s(field)?;
            out.push(TopicPartitions { topic: t, partitions });
        }
        Ok(out)
    }

    fn version(&mut self) -> Res<()> {
        let v = self.u32("version")?;
        if v != VERSION {
            return self.fail(format!("version {}, want {}", v, VERSION));
        }
        Ok(())
    }

    fn end(&self) -> Res<()> {
        if self.off != self.b.len() {
            return self.fail(format!("{} trailing bytes", self.remaining()));
        }
        Ok(())
    }
}

/// Decodes a request (section 3), checking every index against the table it
/// points into.
pub fn decode_request(b: &[u8]) -> Result<Request, DecodeError> {
    let mut r = Reader { b, off: 0, what: "request" };
    r.version()?;
    let mut req = Request::default();
    req.group_id = r.str("group id")?;
    req.generation = r.i32("generation")?;
    req.protocol = r.str("protocol")?;
    req.assignor = r.str("assignor")?;
    req.rebalance_protocol = match r.u8("rebalance protocol")? {
        0 => RebalanceProtocol::Eager,
        1 => RebalanceProtocol::Cooperative,
        p => return r.fail(format!("rebalance protocol {}", p)),
    };
    req.seed = r.u64("seed")?;

    let n = r.count("config", 8)?;
    req.config.reserve(n);
    for _ in 0..n {
        let k = r.str("config key")?;
        let v = r.str("config value")?;
        if let Some((prev, _)) = req.config.last() {
            if k.as_bytes() <= prev.as_bytes() {
                return r.fail(format!("config key {:?} out of order", k));
            }
        }
        req.config.push((k, v));
    }

    let n = r.count("brokers", 8)?;
    req.brokers.reserve(n);
    for _ in 0..n {
        let id = r.i32("broker id")?;
        let rack = r.str("broker rack")?;
        req.brokers.push(Broker { id, rack });
    }

    let n = r.count("replica sets", 4)?;
    req.replica_sets.reserve(n);
    for _ in 0..n {
        req.replica_sets.push(r.i32s("replica set")?);
    }
    let sets = req.replica_sets.len() as u64;

    let n_topics = r.count("topics", 25)?;
    req.topics.reserve(n_topics);
    for _ in 0..n_topics {
        let name = r.str("topic name")?;
        let mut id = [0u8; 16];
        id.copy_from_slice(r.take(16, "topic id")?);
        let flags = r.u8("topic flags")?;
        let pc = r.i32("partition count")?;
        if flags & !(TOPIC_EXISTS | TOPIC_PLACEMENT) != 0 {
            return r.fail(format!("topic {:?} has unknown flags {:#x}", name, flags));
        }
        if pc < 0 {
            return r.fail(format!("topic {:?} has partition count {}", name, pc));
        }
        if flags & TOPIC_EXISTS == 0 && (pc != 0 || flags & TOPIC_PLACEMENT != 0) {
            return r.fail(format!("topic {:?} does not exist but has partitions", name));
        }
        let mut placement = None;
        if flags & TOPIC_PLACEMENT != 0 {
            // 12 * pc overflows usize on wasm32; compare in 64 bits.
            if (pc as u64) * 12 > r.remaining() as u64 {
                return r.fail(format!(
                    "truncated partition placement (need {} bytes, have {})",
                    (pc as u64) * 12,
                    r.remaining()
                ));
            }
            let mut ps = Vec::with_capacity(pc as usize);
            for i in 0..pc {
                let leader = r.i32("leader")?;
                let replicas = r.u32("replicas")?;
                let isr = r.u32("isr")?;
                if replicas as u64 >= sets || isr as u64 >= sets {
                    return r.fail(format!("partition {} refers to a replica set beyond the {} sent", i, sets));
                }
                ps.push(Partition { leader, replicas, isr });
            }
            placement = Some(ps);
        }
        req.topics.push(Topic { name, id, exists: flags & TOPIC_EXISTS != 0, partition_count: pc, placement });
    }
    // Names must be unique; sorting references finds duplicates without a
    // hash map.
    if req.topics.len() > 1 {
        let mut names: Vec<&[u8]> = req.topics.iter().map(|t| t.name.as_bytes()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            let dup = String::from_utf8_lossy(w[0]).into_owned();
            return r.fail(format!("topic {:?} appears twice in the topic table", dup));
        }
    }

    let n = r.count("members", 41)?;
    req.members.reserve(n);
    for _ in 0..n {
        let mut m = Member::default();
        m.member_id = r.str("member id")?;
        m.instance_id = r.str("instance id")?;
        m.client_id = r.str("client id")?;
        m.client_host = r.str("client host")?;
        m.rack = r.str("member rack")?;
        let flags = r.u8("member flags")?;
        if flags & !MEMBER_COOPERATIVE != 0 {
            return r.fail(format!("member {:?} has unknown flags {:#x}", m.member_id, flags));
        }
        m.cooperative = flags & MEMBER_COOPERATIVE != 0;
        let nsub = r.count("subscribed topics", 4)?;
        let s = r.take(4 * nsub, "subscribed topics")?;
        m.topics.reserve(nsub);
        for c in s.chunks_exact(4) {
            let t = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            if t as usize >= n_topics {
                return r.fail(format!("member {:?} subscribes to topic index {} of {}", m.member_id, t, n_topics));
            }
            if let Some(&prev) = m.topics.last() {
                if t <= prev {
                    return r.fail(format!(
                        "member {:?}: subscribed topic indices are not strictly ascending ({} after {})",
                        m.member_id, t, prev
                    ));
                }
            }
            m.topics.push(t);
        }
        m.owned_generation = r.i32("owned generation")?;
        m.owned = r.tps("owned partitions", Some(n_topics))?;
        m.user_data = r.bytes("user data")?.to_vec();
        m.previous = r.tps("previous assignment", Some(n_topics))?;
        req.members.push(m);
    }
    r.end()?;
    Ok(req)
}

/// Decodes a response (section 5). It checks the layout only; whether the
/// assignment fits its request is the host's validation.
pub fn decode_response(b: &[u8]) -> Result<Reply, DecodeError> {
    let mut r = Reader { b, off: 0, what: "response" };
    r.version()?;
    let reply = match r.u8("status")? {
        STATUS_ERROR => {
            let msg = r.str("error message")?;
            if msg.is_empty() {
                return r.fail("empty error message".to_owned());
            }
            Err(msg)
        }
        STATUS_OK => {
            let n = r.count("members", 12)?;
            let mut assignments = Vec::with_capacity(n);
            for _ in 0..n {
                let member = r.u32("member index")?;
                let partitions = r.tps("assigned partitions", None)?;
                let user_data = r.bytes("user data")?.to_vec();
                assignments.push(MemberAssignment { member, partitions, user_data });
            }
            Ok(Response { assignments })
        }
        s => return r.fail(format!("status {}", s)),
    };
    r.end()?;
    Ok(reply)
}

/// Decodes a module description (section 4).
pub fn decode_description(b: &[u8]) -> Result<Description, DecodeError> {
    let mut r = Reader { b, off: 0, what: "description" };
    r.version()?;
    let n = r.count("assignors", 18)?;
    let mut d = Description { assignors: Vec::with_capacity(n) };
    for _ in 0..n {
        let name = r.str("assignor name")?;
        let version = r.str("assignor version")?;
        let np = r.count("protocols", 4)?;
        let mut protocols = Vec::with_capacity(np);
        for _ in 0..np {
            protocols.push(r.str("protocol")?);
        }
        let modes = r.u8("modes")?;
        let flags = r.u8("assignor flags")?;
        if modes & !3 != 0 || flags & !ASSIGNOR_MAY_LEAVE != 0 {
            return r.fail(format!("assignor {:?} has unknown mode or flag bits", name));
        }
        let description = r.str("assignor description")?;
        d.assignors.push(AssignorInfo {
            name,
            version,
            protocols,
            modes: Modes(modes),
            may_leave_unassigned: flags & ASSIGNOR_MAY_LEAVE != 0,
            description,
        });
    }
    r.end()?;
    Ok(d)
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, b.len() as u32);
    out.extend_from_slice(b);
}

fn put_i32s(out: &mut Vec<u8>, v: &[i32]) {
    put_u32(out, v.len() as u32);
    put_i32_values(out, v);
}

/// Appends the values of `v` little-endian, in one copy where the target is
/// little-endian (wasm32 always is): lists reach a million entries.
fn put_i32_values(out: &mut Vec<u8>, v: &[i32]) {
    #[cfg(target_endian = "little")]
    {
        // SAFETY: i32 has no padding and any alignment suits u8; the slice
        // covers exactly v's memory.
        let bytes = unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, 4 * v.len()) };
        out.extend_from_slice(bytes);
    }
    #[cfg(not(target_endian = "little"))]
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

/// Reads little-endian i32 values from `b` (a multiple of 4 bytes long).
fn get_i32_values(b: &[u8]) -> Vec<i32> {
    let n = b.len() / 4;
    let mut v: Vec<i32> = Vec::with_capacity(n);
    #[cfg(target_endian = "little")]
    // SAFETY: v has capacity for n values, which the 4*n bytes of b fill
    // completely; every bit pattern is a valid i32.
    unsafe {
        std::ptr::copy_nonoverlapping(b.as_ptr(), v.as_mut_ptr() as *mut u8, 4 * n);
        v.set_len(n);
    }
    #[cfg(not(target_endian = "little"))]
    v.extend(b.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])));
    v
}

fn put_tps(out: &mut Vec<u8>, tps: &[TopicPartitions]) {
    put_u32(out, tps.len() as u32);
    for tp in tps {
        put_u32(out, tp.topic);
        put_i32s(out, &tp.partitions);
    }
}

/// Appends the encoding of `r` to `out`. Config entries are written in
/// ascending key order whatever their order in `r`, so equal requests give
/// equal bytes. A topic's placement must have `partition_count` entries.
pub fn encode_request(r: &Request, out: &mut Vec<u8>) {
    put_u32(out, VERSION);
    put_bytes(out, r.group_id.as_bytes());
    put_u32(out, r.generation as u32);
    put_bytes(out, r.protocol.as_bytes());
    put_bytes(out, r.assignor.as_bytes());
    out.push(match r.rebalance_protocol {
        RebalanceProtocol::Eager => 0,
        RebalanceProtocol::Cooperative => 1,
    });
    out.extend_from_slice(&r.seed.to_le_bytes());

    let mut config: Vec<&(String, String)> = r.config.iter().collect();
    config.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    put_u32(out, config.len() as u32);
    for (k, v) in config {
        put_bytes(out, k.as_bytes());
        put_bytes(out, v.as_bytes());
    }

    put_u32(out, r.brokers.len() as u32);
    for b in &r.brokers {
        put_u32(out, b.id as u32);
        put_bytes(out, b.rack.as_bytes());
    }

    put_u32(out, r.replica_sets.len() as u32);
    for rs in &r.replica_sets {
        put_i32s(out, rs);
    }

    put_u32(out, r.topics.len() as u32);
    for t in &r.topics {
        put_bytes(out, t.name.as_bytes());
        out.extend_from_slice(&t.id);
        let mut flags = 0;
        if t.exists {
            flags |= TOPIC_EXISTS;
        }
        if t.placement.is_some() {
            flags |= TOPIC_PLACEMENT;
        }
        out.push(flags);
        put_u32(out, t.partition_count as u32);
        if let Some(ps) = &t.placement {
            out.reserve(12 * ps.len());
            for p in ps {
                put_u32(out, p.leader as u32);
                put_u32(out, p.replicas);
                put_u32(out, p.isr);
            }
        }
    }

    put_u32(out, r.members.len() as u32);
    for m in &r.members {
        put_bytes(out, m.member_id.as_bytes());
        put_bytes(out, m.instance_id.as_bytes());
        put_bytes(out, m.client_id.as_bytes());
        put_bytes(out, m.client_host.as_bytes());
        put_bytes(out, m.rack.as_bytes());
        out.push(if m.cooperative { MEMBER_COOPERATIVE } else { 0 });
        put_u32(out, m.topics.len() as u32);
        for &t in &m.topics {
            put_u32(out, t);
        }
        put_u32(out, m.owned_generation as u32);
        put_tps(out, &m.owned);
        put_bytes(out, &m.user_data);
        put_tps(out, &m.previous);
    }
}

/// Appends the encoding of a reply to `out`. An `Err` with an empty message
/// would not decode, so it is written as "assignor failed".
pub fn encode_response(r: &Reply, out: &mut Vec<u8>) {
    put_u32(out, VERSION);
    match r {
        Err(msg) => {
            out.push(STATUS_ERROR);
            put_bytes(out, if msg.is_empty() { "assignor failed" } else { msg.as_str() }.as_bytes());
        }
        Ok(resp) => {
            out.push(STATUS_OK);
            put_u32(out, resp.assignments.len() as u32);
            for a in &resp.assignments {
                put_u32(out, a.member);
                put_tps(out, &a.partitions);
                put_bytes(out, &a.user_data);
            }
        }
    }
}

/// Appends the encoding of a description to `out`.
pub fn encode_description(d: &Description, out: &mut Vec<u8>) {
    put_u32(out, VERSION);
    put_u32(out, d.assignors.len() as u32);
    for a in &d.assignors {
        put_bytes(out, a.name.as_bytes());
        put_bytes(out, a.version.as_bytes());
        put_u32(out, a.protocols.len() as u32);
        for p in &a.protocols {
            put_bytes(out, p.as_bytes());
        }
        out.push(a.modes.0);
        out.push(if a.may_leave_unassigned { ASSIGNOR_MAY_LEAVE } else { 0 });
        put_bytes(out, a.description.as_bytes());
    }
}

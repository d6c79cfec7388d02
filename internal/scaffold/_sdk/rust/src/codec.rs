//! The binary codec of ABI version 1 (sdk/ABI.md section 2 to 5), with the
//! grouped layout of section 7.
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
const ASSIGNOR_GROUPED: u8 = 2;
/// The bit of a request's or response's version word that marks the grouped
/// layout (sdk/ABI.md section 7).
pub const GROUPED_LAYOUT: u32 = 1 << 16;
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

/// Says that decoding stopped; the [`DecodeError`] waits in the
/// [`Reader`]. Every read returns a `Result`, and in wasm one that holds a
/// `DecodeError` goes back through memory: a marker keeps the hot path's
/// results in registers.
struct Stop;

type Res<T> = Result<T, Stop>;

struct Reader<'a> {
    b: &'a [u8],
    off: usize,
    what: &'static str,
    err: Option<DecodeError>,
}

impl<'a> Reader<'a> {
    fn new(b: &'a [u8], what: &'static str) -> Self {
        Reader { b, off: 0, what, err: None }
    }

    #[cold]
    #[inline(never)]
    fn fail<T>(&mut self, reason: String) -> Res<T> {
        self.err = Some(DecodeError { what: self.what, offset: self.off, reason });
        Err(Stop)
    }

    /// Turns the outcome of a decoding function into the public result.
    fn finish<T>(mut self, res: Res<T>) -> Result<T, DecodeError> {
        match res {
            Ok(v) => Ok(v),
            Err(Stop) => Err(self.err.take().expect("a decoder stopped without saying why")),
        }
    }

    #[inline(always)]
    fn remaining(&self) -> usize {
        self.b.len() - self.off
    }

    // The reads below run a dozen times per member and per `tps` entry:
    // they are inlined, and their error messages are built out of line
    // (the `#[cold]` functions), so the hot path is a bounds check and a
    // load.

    #[inline(always)]
    fn take(&mut self, n: usize, field: &str) -> Res<&'a [u8]> {
        if self.remaining() < n {
            return self.truncated(field, n);
        }
        // SAFETY: off <= b.len() always holds, and off + n <= b.len() was
        // just checked.
        let s = unsafe { self.b.get_unchecked(self.off..self.off + n) };
        self.off += n;
        Ok(s)
    }

    #[cold]
    #[inline(never)]
    fn truncated<T>(&mut self, field: &str, n: usize) -> Res<T> {
        let have = self.remaining();
        self.fail(format!("truncated {} (need {} bytes, have {})", field, n, have))
    }

    #[inline(always)]
    fn u8(&mut self, field: &str) -> Res<u8> {
        Ok(self.take(1, field)?[0])
    }

    #[inline(always)]
    fn u32(&mut self, field: &str) -> Res<u32> {
        let s = self.take(4, field)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }

    #[inline(always)]
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
    #[inline(always)]
    fn count(&mut self, field: &str, min: u64) -> Res<usize> {
        let n = self.u32(field)?;
        if (n as u64) * min > self.remaining() as u64 {
            return self.too_many(field, n);
        }
        Ok(n as usize)
    }

    #[cold]
    #[inline(never)]
    fn too_many<T>(&mut self, field: &str, n: u32) -> Res<T> {
        let have = self.remaining();
        self.fail(format!("{} count {} exceeds the remaining {} bytes", field, n, have))
    }

    #[inline(always)]
    fn bytes(&mut self, field: &str) -> Res<&'a [u8]> {
        let n = self.count(field, 1)?;
        self.take(n, field)
    }

    /// Reads a string. Most strings of a request are empty (instance ids,
    /// hosts, racks) or ASCII (ids, topic names), and neither needs the
    /// general UTF-8 check.
    #[inline(always)]
    fn str(&mut self, field: &str) -> Res<String> {
        let b = self.bytes(field)?;
        if b.is_empty() {
            return Ok(String::new());
        }
        if b.is_ascii() {
            // SAFETY: ASCII is valid UTF-8.
            return Ok(unsafe { std::str::from_utf8_unchecked(b) }.to_owned());
        }
        match std::str::from_utf8(b) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => self.not_utf8(field),
        }
    }

    #[cold]
    #[inline(never)]
    fn not_utf8<T>(&mut self, field: &str) -> Res<T> {
        self.fail(format!("{} is not valid UTF-8", field))
    }

    fn i32s(&mut self, field: &str) -> Res<Vec<i32>> {
        let n = self.count(field, 4)?;
        let s = self.take(4 * n, field)?;
        Ok(get_i32_values(s))
    }

    /// Reads a `tps` list. `topics` bounds the topic indices when known;
    /// `lists` is the size of the topic-list table that negative topics
    /// refer to (zero in the plain layout, where a negative topic is just a
    /// large index).
    fn tps(&mut self, field: &str, topics: Option<u64>, lists: usize) -> Res<Vec<TopicPartitions>> {
        let n = self.count(field, 8)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            // The entry header is read in one bounds check: large groups
            // send a million one-partition entries.
            let h = self.take(8, field)?;
            let t = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
            let c = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
            let mut tp = TopicPartitions { topic: t, partitions: Vec::new(), list: false };
            if (t as i32) < 0 && ((!t) as usize) < lists {
                tp.topic = !t;
                tp.list = true;
            } else if (t as i32) < 0 && lists > 0 {
                self.off -= 8;
                return self.fail(format!("{} refers to topic list {} of {}", field, !t, lists));
            } else if let Some(nt) = topics {
                if t as u64 >= nt {
                    self.off -= 8;
                    return self.fail(format!("{} refers to topic index {} of {}", field, t, nt));
                }
            }
            if (c as u64) * 4 > self.remaining() as u64 {
                self.off -= 4;
                return self.fail(format!("{} count {} exceeds the remaining {} bytes", field, c, self.remaining()));
            }
            if c > 0 {
                let s = self.take(4 * c as usize, field)?;
                tp.partitions = get_i32_values(s);
            }
            out.push(tp);
        }
        Ok(out)
    }

    /// Reads a topic-list table (sdk/ABI.md section 7): lists that are not
    /// empty, of topic indices strictly ascending and below `topics` when
    /// known (a response's table is checked against its request by the
    /// host).
    fn topic_lists(&mut self, topics: Option<usize>) -> Res<Vec<Vec<u32>>> {
        let n = self.count("topic lists", 8)?;
        let mut lists = Vec::with_capacity(n);
        for i in 0..n {
            let c = self.count("topic list", 4)?;
            let l = get_u32_values(self.take(4 * c, "topic list")?);
            if l.is_empty() {
                return self.fail(format!("topic list {} is empty", i));
            }
            let (first, last) = (l[0] as i32, l[l.len() - 1] as i32);
            if first < 0 || topics.map_or(false, |nt| last as i64 >= nt as i64) {
                let nt = topics.map_or(-1, |nt| nt as i64);
                return self.fail(format!("topic list {} refers to topic index {} or {} of {}", i, first, last, nt));
            }
            // Compared as i32, as on the wire: a response's list may not
            // end in a negative value either.
            if let Some(k) = first_not_ascending(&l) {
                return self.fail(format!(
                    "topic list {}: topic indices are not strictly ascending ({} after {})",
                    i,
                    l[k] as i32,
                    l[k - 1] as i32
                ));
            }
            lists.push(l);
        }
        Ok(lists)
    }

    fn version(&mut self) -> Res<()> {
        let v = self.u32("version")?;
        if v != VERSION {
            return self.fail(format!("version {}, want {}", v, VERSION));
        }
        Ok(())
    }

    /// Reads the version word of a request or response, which may also say
    /// the grouped layout, and reports whether it does.
    fn layout(&mut self) -> Res<bool> {
        let v = self.u32("version")?;
        if v != VERSION && v != VERSION | GROUPED_LAYOUT {
            return self.fail(format!(
                "version {}, want {} (or {} for the grouped layout)",
                v,
                VERSION,
                VERSION | GROUPED_LAYOUT
            ));
        }
        Ok(v == VERSION | GROUPED_LAYOUT)
    }

    fn end(&mut self) -> Res<()> {
        if self.off != self.b.len() {
            return self.fail(format!("{} trailing bytes", self.remaining()));
        }
        Ok(())
    }
}

/// Returns the first index `k` where `v[k] <= v[k-1]`, comparing as `i32`
/// as on the wire. A plain loop: the iterator version is a call per list in
/// wasm, and a group can send a list per member.
#[inline]
fn first_not_ascending(v: &[u32]) -> Option<usize> {
    let mut k = 1;
    while k < v.len() {
        if (v[k] as i32) <= (v[k - 1] as i32) {
            return Some(k);
        }
        k += 1;
    }
    None
}

/// Decodes a request (section 3, or section 7's grouped layout), checking
/// every index against the table it points into. A grouped request fills
/// [`Request::topic_lists`], and each member's [`Member::topics`] with a copy
/// of the list its [`Member::subscription`] names.
pub fn decode_request(b: &[u8]) -> Result<Request, DecodeError> {
    let mut r = Reader::new(b, "request");
    let res = read_request(&mut r);
    r.finish(res)
}

fn read_request(r: &mut Reader) -> Res<Request> {
    let grouped = r.layout()?;
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
    let mut lists = 0;
    if grouped {
        let l = r.topic_lists(Some(n_topics))?;
        lists = l.len();
        req.topic_lists = Some(l);
    }

    let n = r.count("members", 41)?;
    req.members.reserve(n);
    for _ in 0..n {
        // Built field by field and moved into place once: filling a
        // default Member would drop each default field it overwrites.
        let member_id = r.str("member id")?;
        let instance_id = r.str("instance id")?;
        let client_id = r.str("client id")?;
        let client_host = r.str("client host")?;
        let rack = r.str("member rack")?;
        let flags = r.u8("member flags")?;
        if flags & !MEMBER_COOPERATIVE != 0 {
            return r.fail(format!("member {:?} has unknown flags {:#x}", member_id, flags));
        }
        let cooperative = flags & MEMBER_COOPERATIVE != 0;
        let mut topics = Vec::new();
        let mut subscription = None;
        if let Some(tl) = &req.topic_lists {
            // One reference into the table, whose lists were checked once.
            let k = r.i32("subscription")?;
            if k != -1 {
                if k < 0 || k as usize >= tl.len() {
                    r.off -= 4;
                    return r.fail(format!("member {:?} subscribes to topic list {} of {}", member_id, k, tl.len()));
                }
                topics = copy_u32s(&tl[k as usize]);
                subscription = Some(k as u32);
            }
        } else {
            let nsub = r.count("subscribed topics", 4)?;
            let s = r.take(4 * nsub, "subscribed topics")?;
            // One bulk copy, then the checks: strictly ascending with the
            // last one in range puts every index in range.
            topics = get_u32_values(s);
            if let Some(w) = topics.windows(2).find(|w| w[1] <= w[0]) {
                return r.fail(format!(
                    "member {:?}: subscribed topic indices are not strictly ascending ({} after {})",
                    member_id, w[1], w[0]
                ));
            }
            if let Some(&t) = topics.last() {
                if t as usize >= n_topics {
                    return r.fail(format!("member {:?} subscribes to topic index {} of {}", member_id, t, n_topics));
                }
            }
        }
        let owned_generation = r.i32("owned generation")?;
        let owned = r.tps("owned partitions", Some(n_topics as u64), lists)?;
        let user_data = r.bytes("user data")?.to_vec();
        let previous = r.tps("previous assignment", Some(n_topics as u64), lists)?;
        req.members.push(Member {
            member_id,
            instance_id,
            client_id,
            client_host,
            rack,
            cooperative,
            topics,
            subscription,
            owned_generation,
            owned,
            user_data,
            previous,
        });
    }
    r.end()?;
    Ok(req)
}

/// Decodes a response (section 5, or section 7's grouped layout). It checks
/// the layout only; whether the assignment fits its request is the host's
/// validation. An error response decodes to `Err` in either layout.
pub fn decode_response(b: &[u8]) -> Result<Reply, DecodeError> {
    let mut r = Reader::new(b, "response");
    let res = read_response(&mut r);
    r.finish(res)
}

fn read_response(r: &mut Reader) -> Res<Reply> {
    let grouped = r.layout()?;
    let reply = match r.u8("status")? {
        STATUS_ERROR => {
            let msg = r.str("error message")?;
            if msg.is_empty() {
                return r.fail("empty error message".to_owned());
            }
            Err(msg)
        }
        STATUS_OK => {
            // The topic table is unknown here: any index passes and the host
            // checks it. In the grouped layout the sign bit marks list
            // references, checked against the response's own table.
            let (topic_lists, topics) = if grouped { (Some(r.topic_lists(None)?), Some(1u64 << 31)) } else { (None, None) };
            let lists = topic_lists.as_ref().map_or(0, |l| l.len());
            let n = r.count("members", 12)?;
            let mut assignments = Vec::with_capacity(n);
            for _ in 0..n {
                let member = r.u32("member index")?;
                let partitions = r.tps("assigned partitions", topics, lists)?;
                let user_data = r.bytes("user data")?.to_vec();
                assignments.push(MemberAssignment { member, partitions, user_data });
            }
            Ok(Response { assignments, topic_lists })
        }
        s => return r.fail(format!("status {}", s)),
    };
    r.end()?;
    Ok(reply)
}

/// Decodes a module description (section 4).
pub fn decode_description(b: &[u8]) -> Result<Description, DecodeError> {
    let mut r = Reader::new(b, "description");
    let res = read_description(&mut r);
    r.finish(res)
}

fn read_description(r: &mut Reader) -> Res<Description> {
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
        if modes & !3 != 0 || flags & !(ASSIGNOR_MAY_LEAVE | ASSIGNOR_GROUPED) != 0 {
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
            grouped: flags & ASSIGNOR_GROUPED != 0,
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

/// Copies `n` bytes from `src` to `dst`, 32 at a time. In a wasm guest
/// without bulk memory (rustc 1.63's wasm32 std) `memcpy` is a loop of
/// small steps, and the host's deadline check costs an exit per loop
/// iteration; a million-value copy (2,000 members' copies of a 500-topic
/// subscription) then costs more than the rest of the decoding.
///
/// # Safety
/// `src` readable and `dst` writable for `n` bytes, not overlapping.
#[inline]
unsafe fn copy_bytes(dst: *mut u8, src: *const u8, n: usize) {
    let mut i = 0;
    while i + 32 <= n {
        let w = std::ptr::read_unaligned(src.add(i) as *const [u64; 4]);
        std::ptr::write_unaligned(dst.add(i) as *mut [u64; 4], w);
        i += 32;
    }
    while i + 4 <= n {
        let w = std::ptr::read_unaligned(src.add(i) as *const u32);
        std::ptr::write_unaligned(dst.add(i) as *mut u32, w);
        i += 4;
    }
    while i < n {
        *dst.add(i) = *src.add(i);
        i += 1;
    }
}

/// Returns a copy of `v` made with [`copy_bytes`].
fn copy_u32s(v: &[u32]) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::with_capacity(v.len());
    // SAFETY: out has capacity for v.len() values, which the copy fills.
    unsafe {
        copy_bytes(out.as_mut_ptr() as *mut u8, v.as_ptr() as *const u8, 4 * v.len());
        out.set_len(v.len());
    }
    out
}

/// A 32-bit value the codec reads in bulk: every bit pattern is valid.
trait Word: Copy {
    fn from_le(b: [u8; 4]) -> Self;
}

impl Word for u32 {
    fn from_le(b: [u8; 4]) -> Self {
        u32::from_le_bytes(b)
    }
}

impl Word for i32 {
    fn from_le(b: [u8; 4]) -> Self {
        i32::from_le_bytes(b)
    }
}

/// Reads little-endian u32 values from `b` (a multiple of 4 bytes long).
fn get_u32_values(b: &[u8]) -> Vec<u32> {
    get_words(b)
}

/// Reads little-endian i32 values from `b` (a multiple of 4 bytes long).
fn get_i32_values(b: &[u8]) -> Vec<i32> {
    get_words(b)
}

/// Reads little-endian words from `b` (a multiple of 4 bytes long): on a
/// little-endian machine, wasm included, one bulk copy.
fn get_words<T: Word>(b: &[u8]) -> Vec<T> {
    let n = b.len() / 4;
    let mut v: Vec<T> = Vec::with_capacity(n);
    #[cfg(target_endian = "little")]
    // SAFETY: v has capacity for n values, which the 4*n bytes of b fill
    // completely; T is a 4-byte word for which every bit pattern is valid.
    unsafe {
        copy_bytes(v.as_mut_ptr() as *mut u8, b.as_ptr(), 4 * n);
        v.set_len(n);
    }
    #[cfg(not(target_endian = "little"))]
    v.extend(b.chunks_exact(4).map(|c| T::from_le([c[0], c[1], c[2], c[3]])));
    v
}

fn put_u32s(out: &mut Vec<u8>, v: &[u32]) {
    put_u32(out, v.len() as u32);
    #[cfg(target_endian = "little")]
    {
        // SAFETY: as in put_i32_values.
        let bytes = unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, 4 * v.len()) };
        out.extend_from_slice(bytes);
    }
    #[cfg(not(target_endian = "little"))]
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

/// Writes a `tps` list; an entry with `list` set goes out as the negative
/// reference `-1 - topic` (section 7), valid only in the grouped layout.
fn put_tps(out: &mut Vec<u8>, tps: &[TopicPartitions]) {
    put_u32(out, tps.len() as u32);
    for tp in tps {
        put_u32(out, if tp.list { !tp.topic } else { tp.topic });
        put_i32s(out, &tp.partitions);
    }
}

fn put_topic_lists(out: &mut Vec<u8>, lists: &[Vec<u32>], extra: &[&[u32]]) {
    put_u32(out, (lists.len() + extra.len()) as u32);
    for l in lists {
        put_u32s(out, l);
    }
    for l in extra {
        put_u32s(out, l);
    }
}

/// Finds each member's subscription in the topic-list table of a grouped
/// request: [`Member::subscription`] when set, else the first list with the
/// same topics. Subscriptions in no list are returned in `extra`, in member
/// order without repeats, to be written after the table (section 7's
/// canonical form); `refs` holds each member's list index, -1 for none.
fn subscription_refs<'a>(r: &'a Request, lists: &'a [Vec<u32>]) -> (Vec<&'a [u32]>, Vec<i32>) {
    let mut extra: Vec<&[u32]> = Vec::new();
    let mut refs = Vec::with_capacity(r.members.len());
    for m in &r.members {
        if let Some(k) = m.subscription {
            refs.push(k as i32);
            continue;
        }
        if m.topics.is_empty() {
            refs.push(-1);
            continue;
        }
        let ts = m.topics.as_slice();
        let k = match lists.iter().position(|l| l.as_slice() == ts) {
            Some(k) => k,
            None => match extra.iter().position(|l| *l == ts) {
                Some(k) => lists.len() + k,
                None => {
                    extra.push(ts);
                    lists.len() + extra.len() - 1
                }
            },
        };
        refs.push(k as i32);
    }
    (extra, refs)
}

/// Appends the encoding of `r` to `out`. Config entries are written in
/// ascending key order whatever their order in `r`, so equal requests give
/// equal bytes. A topic's placement must have `partition_count` entries.
///
/// The request is written in the grouped layout exactly when
/// `r.topic_lists` is `Some`. A member's subscription is then
/// [`Member::subscription`] when set, else the first list equal to its
/// `topics`, else a list appended after the table.
pub fn encode_request(r: &Request, out: &mut Vec<u8>) {
    put_u32(out, if r.topic_lists.is_some() { VERSION | GROUPED_LAYOUT } else { VERSION });
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

    let mut refs = Vec::new();
    if let Some(lists) = &r.topic_lists {
        let (extra, rs) = subscription_refs(r, lists);
        put_topic_lists(out, lists, &extra);
        refs = rs;
    }

    put_u32(out, r.members.len() as u32);
    for (i, m) in r.members.iter().enumerate() {
        put_bytes(out, m.member_id.as_bytes());
        put_bytes(out, m.instance_id.as_bytes());
        put_bytes(out, m.client_id.as_bytes());
        put_bytes(out, m.client_host.as_bytes());
        put_bytes(out, m.rack.as_bytes());
        out.push(if m.cooperative { MEMBER_COOPERATIVE } else { 0 });
        if r.topic_lists.is_some() {
            put_u32(out, refs[i] as u32);
        } else {
            put_u32s(out, &m.topics);
        }
        put_u32(out, m.owned_generation as u32);
        put_tps(out, &m.owned);
        put_bytes(out, &m.user_data);
        put_tps(out, &m.previous);
    }
}

/// Appends the encoding of a reply to `out`. An `Err` with an empty message
/// would not decode, so it is written as "assignor failed". An `Ok` response
/// is written in the grouped layout exactly when its `topic_lists` is
/// `Some`; an `Err` is written in the plain layout, which the ABI allows
/// for error responses in either case.
pub fn encode_response(r: &Reply, out: &mut Vec<u8>) {
    let grouped = matches!(r, Ok(Response { topic_lists: Some(_), .. }));
    put_u32(out, if grouped { VERSION | GROUPED_LAYOUT } else { VERSION });
    match r {
        Err(msg) => {
            out.push(STATUS_ERROR);
            put_bytes(out, if msg.is_empty() { "assignor failed" } else { msg.as_str() }.as_bytes());
        }
        Ok(resp) => {
            out.push(STATUS_OK);
            if let Some(lists) = &resp.topic_lists {
                put_topic_lists(out, lists, &[]);
            }
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
        let mut flags = 0;
        if a.may_leave_unassigned {
            flags |= ASSIGNOR_MAY_LEAVE;
        }
        if a.grouped {
            flags |= ASSIGNOR_GROUPED;
        }
        out.push(flags);
        put_bytes(out, a.description.as_bytes());
    }
}

// The AssemblyScript SDK for wasmassign assignor plugins (ABI version 1,
// sdk/ABI.md): typed request and response models, the codec in both
// directions, one registration point, error reporting, host logging, and the
// module's memory handling.
//
// A plugin's entry file registers its assignors at top level and re-exports
// the ABI's exports:
//
//   import { register, AssignorInfo, Request, Response } from "@wasmassign/sdk";
//   export * from "@wasmassign/sdk/exports";
//   register(new AssignorInfo("mine", "1.0.0", ["mine"]), (req: Request): Response => { ... });
//
// and builds with
//
//   asc plugin.ts -O3 --runtime incremental --exportStart _initialize -o plugin.wasm
//
// Memory: every call starts with a full collection of the previous call's
// garbage, and the request and response buffers are kept and reused, so a
// plugin serving the same request again allocates into the same free blocks
// and its memory stops growing (sdk/KIT.md, point 6). Nothing from one call
// may be kept for the next beyond what the plugin keeps on purpose.

/** The ABI version this SDK speaks. */
export const ABI_VERSION: u32 = 1;
/** The SDK's version, reported by the conformance kit. */
export const SDK_VERSION: string = "0.1.0";

/** Rebalance protocols of a request. */
export const EAGER: u8 = 0;
export const COOPERATIVE: u8 = 1;

/** Mode bits of an assignor description. */
export const MODE_EAGER: u8 = 1;
export const MODE_COOPERATIVE: u8 = 2;

/** Log levels: the values of Go's log/slog, as the host expects them. */
export enum LogLevel {
  Debug = -4,
  Info = 0,
  Warn = 4,
  Error = 8,
}

// ---------------------------------------------------------------------------
// Models

/** One config entry; a request's config comes with keys ascending by bytes. */
export class ConfigEntry {
  constructor(public key: string, public value: string) {}
}

/** One broker of the cluster; rack is "" when it has none. */
export class Broker {
  constructor(public id: i32, public rack: string) {}
}

/** One entry of the request's topic table. */
export class Topic {
  name: string = "";
  /** The topic's UUID, 16 bytes, all zero when unknown. */
  topicId: Uint8Array = new Uint8Array(16);
  /** False for a name members mention that the cluster does not have. */
  exists: bool = false;
  partitionCount: i32 = 0;
  /**
   * Null when the host sent no placement; otherwise 3 × partitionCount
   * values: leader, replicas, isr for each partition in order (see leader(),
   * replicas(), isr()). replicas and isr index Request.replicaSets.
   */
  placement: Int32Array | null = null;

  leader(p: i32): i32 { return this.placement!.at(3 * p); }
  replicas(p: i32): u32 { return <u32>this.placement!.at(3 * p + 1); }
  isr(p: i32): u32 { return <u32>this.placement!.at(3 * p + 2); }
}

/** Partitions of one topic; topic indexes the request's topic table. */
export class TopicPartitions {
  constructor(public topic: u32, public partitions: Int32Array) {}
}

/** One member of the group. */
export class Member {
  memberId: string = "";
  /** "" for a dynamic member. */
  instanceId: string = "";
  clientId: string = "";
  clientHost: string = "";
  /** The member's rack, "" when unknown. */
  rack: string = "";
  cooperative: bool = false;
  /** Subscribed topic indices, strictly ascending. */
  topics: Int32Array = new Int32Array(0);
  /** -1 when the member did not report one. */
  ownedGeneration: i32 = -1;
  owned: TopicPartitions[] = [];
  userData: Uint8Array = new Uint8Array(0);
  previous: TopicPartitions[] = [];
}

/** A request (sdk/ABI.md section 3). Members come in Kafka's order. */
export class Request {
  groupId: string = "";
  generation: i32 = 0;
  protocol: string = "";
  assignor: string = "";
  rebalanceProtocol: u8 = EAGER;
  /** The only randomness a plugin may use. */
  seed: u64 = 0;
  config: ConfigEntry[] = [];
  brokers: Broker[] = [];
  replicaSets: Int32Array[] = [];
  topics: Topic[] = [];
  members: Member[] = [];

  /** The value of a config key, or def when it is absent. */
  configValue(key: string, def: string = ""): string {
    for (let i = 0; i < this.config.length; i++) {
      if (this.config[i].key == key) return this.config[i].value;
    }
    return def;
  }
}

/** What one member receives; member indexes the request's members. */
export class Assignment {
  partitions: TopicPartitions[] = [];
  userData: Uint8Array = new Uint8Array(0);
  constructor(public member: u32) {}
}

/** A response: an assignment per member, or an error when error is set. */
export class Response {
  assignments: Assignment[] = [];
  error: string = "";

  /** An ok response. */
  static ok(assignments: Assignment[]): Response {
    const r = new Response();
    r.assignments = assignments;
    return r;
  }
}

/**
 * fail reports an error: the message reaches the host unchanged, which logs
 * it and falls back to the group's fallback assignor.
 */
export function fail(message: string): Response {
  const r = new Response();
  r.error = message.length > 0 ? message : "assignor failed";
  return r;
}

/** What an assignor declares about itself (sdk/ABI.md section 4). */
export class AssignorInfo {
  modes: u8 = MODE_EAGER | MODE_COOPERATIVE;
  mayLeaveUnassigned: bool = false;
  description: string = "";
  constructor(public name: string, public version: string, public protocols: string[]) {}
}

/** A module's description. */
export class Description {
  assignors: AssignorInfo[] = [];
}

/** The result of a decoder: value, or error when it rejected the buffer. */
export class Decoded<T> {
  constructor(public value: T | null, public error: string) {}
}

// ---------------------------------------------------------------------------
// Decoding

// Reader walks a buffer in linear memory. The first failure sticks, so the
// decoders read on and check once per entry.
class Reader {
  off: u32 = 0;
  failed: bool = false;
  error: string = "";
  constructor(public base: usize, public len: u32, public what: string) {}

  fail(msg: string): void {
    if (!this.failed) {
      this.failed = true;
      this.error = this.what + ": " + msg + " at byte " + this.off.toString();
    }
    this.off = this.len;
  }

  remaining(): u32 { return this.len - this.off; }

  need(n: u32, field: string): bool {
    if (this.failed) return false;
    if (this.remaining() < n) {
      this.fail("truncated " + field + " (need " + n.toString() + " bytes, have " + this.remaining().toString() + ")");
      return false;
    }
    return true;
  }

  u8(field: string): u8 {
    if (!this.need(1, field)) return 0;
    const v = load<u8>(this.base + this.off);
    this.off += 1;
    return v;
  }

  u32(field: string): u32 {
    if (!this.need(4, field)) return 0;
    const v = load<u32>(this.base + this.off);
    this.off += 4;
    return v;
  }

  u64(field: string): u64 {
    if (!this.need(8, field)) return 0;
    const v = load<u64>(this.base + this.off);
    this.off += 8;
    return v;
  }

  // count reads a count and checks, in 64-bit arithmetic, that the rest of
  // the buffer can hold that many elements of at least minSize bytes, so a
  // forged count never makes the decoder allocate beyond the buffer.
  count(field: string, minSize: u32): u32 {
    const n = this.u32(field);
    if (this.failed) return 0;
    if (<u64>n * <u64>minSize > <u64>this.remaining()) {
      this.fail(field + " count " + n.toString() + " exceeds the remaining " + this.remaining().toString() + " bytes");
      return 0;
    }
    return n;
  }

  bytes(field: string): Uint8Array {
    const n = this.count(field, 1);
    if (this.failed) return new Uint8Array(0);
    const out = new Uint8Array(n);
    memory.copy(out.dataStart, this.base + this.off, n);
    this.off += n;
    return out;
  }

  str(field: string): string {
    const n = this.count(field, 1);
    if (this.failed || n == 0) return "";
    const p = this.base + this.off;
    if (!utf8Valid(p, n)) {
      this.fail(field + " is not valid UTF-8");
      return "";
    }
    this.off += n;
    return String.UTF8.decodeUnsafe(p, n);
  }

  i32s(field: string): Int32Array {
    const n = this.count(field, 4);
    if (this.failed) return new Int32Array(0);
    const out = new Int32Array(n);
    memory.copy(out.dataStart, this.base + this.off, <usize>n << 2);
    this.off += n << 2;
    return out;
  }

  version(): void {
    const v = this.u32("version");
    if (!this.failed && v != ABI_VERSION) this.fail("version " + v.toString() + ", want 1");
  }

  end(): bool {
    if (!this.failed && this.off != this.len) this.fail((this.len - this.off).toString() + " trailing bytes");
    return !this.failed;
  }

  // tps reads a topic-partitions list; indices must be below nTopics unless
  // it is negative (responses: the decoder does not know the table).
  tps(field: string, nTopics: i64): TopicPartitions[] {
    const n = this.count(field, 8);
    const out = new Array<TopicPartitions>(0);
    for (let i: u32 = 0; i < n && !this.failed; i++) {
      const t = this.u32(field);
      if (!this.failed && nTopics >= 0 && <i64>t >= nTopics) {
        this.fail(field + " refers to topic index " + t.toString() + " of " + nTopics.toString());
      }
      out.push(new TopicPartitions(t, this.i32s(field)));
    }
    return out;
  }
}

// utf8Valid accepts exactly what Go's utf8.Valid accepts: no overlong forms,
// no surrogates, nothing above U+10FFFF.
function utf8Valid(p: usize, n: u32): bool {
  let i: u32 = 0;
  while (i < n) {
    const c = load<u8>(p + i);
    if (c < 0x80) { i++; continue; }
    let more: u32 = 0;
    let lo: u8 = 0x80, hi: u8 = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) more = 1;
    else if (c == 0xE0) { more = 2; lo = 0xA0; }
    else if (c >= 0xE1 && c <= 0xEC) more = 2;
    else if (c == 0xED) { more = 2; hi = 0x9F; }
    else if (c >= 0xEE && c <= 0xEF) more = 2;
    else if (c == 0xF0) { more = 3; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) more = 3;
    else if (c == 0xF4) { more = 3; hi = 0x8F; }
    else return false;
    if (n - i - 1 < more) return false;
    const c1 = load<u8>(p + i + 1);
    if (c1 < lo || c1 > hi) return false;
    for (let k: u32 = 2; k <= more; k++) {
      const ck = load<u8>(p + i + k);
      if (ck < 0x80 || ck > 0xBF) return false;
    }
    i += more + 1;
  }
  return true;
}

// compareBytes orders two UTF-8 ranges by bytes, as the ABI sorts strings.
function compareBytes(a: usize, an: u32, b: usize, bn: u32): i32 {
  const n = an < bn ? an : bn;
  const c = memory.compare(a, b, n);
  if (c != 0) return c;
  return an < bn ? -1 : (an > bn ? 1 : 0);
}

/** Decodes a request at ptr (len bytes). Every index is checked. */
export function decodeRequestAt(ptr: usize, len: u32): Decoded<Request> {
  const r = new Reader(ptr, len, "request");
  const q = new Request();
  r.version();
  q.groupId = r.str("group id");
  q.generation = <i32>r.u32("generation");
  q.protocol = r.str("protocol");
  q.assignor = r.str("assignor");
  q.rebalanceProtocol = r.u8("rebalance protocol");
  if (!r.failed && q.rebalanceProtocol > COOPERATIVE) r.fail("rebalance protocol " + q.rebalanceProtocol.toString());
  q.seed = r.u64("seed");

  let n = r.count("config", 8);
  let prevKey: usize = 0, prevLen: u32 = 0;
  for (let i: u32 = 0; i < n && !r.failed; i++) {
    const keyAt = r.base + r.off + 4;
    const key = r.str("config key");
    const keyLen = String.UTF8.byteLength(key);
    const value = r.str("config value");
    if (!r.failed && i > 0 && compareBytes(keyAt, keyLen, prevKey, prevLen) <= 0) {
      r.fail("config key \"" + key + "\" out of order");
    }
    prevKey = keyAt;
    prevLen = keyLen;
    q.config.push(new ConfigEntry(key, value));
  }

  n = r.count("brokers", 8);
  for (let i: u32 = 0; i < n && !r.failed; i++) {
    const id = <i32>r.u32("broker id");
    q.brokers.push(new Broker(id, r.str("broker rack")));
  }

  n = r.count("replica sets", 4);
  for (let i: u32 = 0; i < n && !r.failed; i++) q.replicaSets.push(r.i32s("replica set"));
  const nSets = <u32>q.replicaSets.length;

  const nt = r.count("topics", 25);
  const names = new Map<string, bool>();
  for (let i: u32 = 0; i < nt && !r.failed; i++) {
    const t = new Topic();
    t.name = r.str("topic name");
    if (!r.failed && names.has(t.name)) {
      r.fail("topic \"" + t.name + "\" appears twice in the topic table");
      break;
    }
    names.set(t.name, true);
    if (r.need(16, "topic id")) {
      memory.copy(t.topicId.dataStart, r.base + r.off, 16);
      r.off += 16;
    }
    const flags = r.u8("topic flags");
    const pc = <i32>r.u32("partition count");
    if (r.failed) break;
    if (flags & ~3) { r.fail("topic \"" + t.name + "\" has unknown flags " + flags.toString()); break; }
    if (pc < 0) { r.fail("topic \"" + t.name + "\" has partition count " + pc.toString()); break; }
    if (!(flags & 1) && (pc != 0 || (flags & 2))) { r.fail("topic \"" + t.name + "\" does not exist but has partitions"); break; }
    t.exists = (flags & 1) != 0;
    t.partitionCount = pc;
    if (flags & 2) {
      // 12 × pc overflows 32 bits for pc near 2^29; compare in 64.
      if (<u64>pc * 12 > <u64>r.remaining()) {
        r.fail("truncated partition placement (need " + (<u64>pc * 12).toString() + " bytes, have " + r.remaining().toString() + ")");
        break;
      }
      const pl = new Int32Array(3 * pc);
      const src = r.base + r.off;
      memory.copy(pl.dataStart, src, <usize>pc * 12);
      for (let p = 0; p < pc; p++) {
        if (<u32>pl[3 * p + 1] >= nSets || <u32>pl[3 * p + 2] >= nSets) {
          r.off += 12 * <u32>p;
          r.fail("partition " + p.toString() + " refers to a replica set beyond the " + nSets.toString() + " sent");
          break;
        }
      }
      if (r.failed) break;
      r.off += 12 * <u32>pc;
      t.placement = pl;
    }
    q.topics.push(t);
  }

  const nm = r.count("members", 41);
  for (let i: u32 = 0; i < nm && !r.failed; i++) {
    const m = new Member();
    m.memberId = r.str("member id");
    m.instanceId = r.str("instance id");
    m.clientId = r.str("client id");
    m.clientHost = r.str("client host");
    m.rack = r.str("member rack");
    const flags = r.u8("member flags");
    if (!r.failed && (flags & ~1)) r.fail("member \"" + m.memberId + "\" has unknown flags " + flags.toString());
    m.cooperative = (flags & 1) != 0;
    m.topics = r.i32s("subscribed topics");
    for (let k = 0; k < m.topics.length && !r.failed; k++) {
      const t = m.topics[k];
      if (t < 0 || <u32>t >= nt) r.fail("member \"" + m.memberId + "\" subscribes to topic index " + t.toString() + " of " + nt.toString());
      else if (k > 0 && t <= m.topics[k - 1]) r.fail("member \"" + m.memberId + "\": subscribed topic indices are not strictly ascending");
    }
    m.ownedGeneration = <i32>r.u32("owned generation");
    m.owned = r.tps("owned partitions", <i64>nt);
    m.userData = r.bytes("user data");
    m.previous = r.tps("previous assignment", <i64>nt);
    q.members.push(m);
  }
  if (!r.end()) return new Decoded<Request>(null, r.error);
  return new Decoded<Request>(q, "");
}

/** Decodes a response at ptr; the layout only, as the host's decoder. */
export function decodeResponseAt(ptr: usize, len: u32): Decoded<Response> {
  const r = new Reader(ptr, len, "response");
  const out = new Response();
  r.version();
  const status = r.u8("status");
  if (!r.failed) {
    if (status == 1) {
      out.error = r.str("error message");
      if (!r.failed && out.error.length == 0) r.fail("empty error message");
    } else if (status == 0) {
      const n = r.count("members", 12);
      for (let i: u32 = 0; i < n && !r.failed; i++) {
        const a = new Assignment(r.u32("member index"));
        a.partitions = r.tps("assigned partitions", -1);
        a.userData = r.bytes("user data");
        out.assignments.push(a);
      }
    } else {
      r.fail("status " + status.toString());
    }
  }
  if (!r.end()) return new Decoded<Response>(null, r.error);
  return new Decoded<Response>(out, "");
}

/** Decodes a description at ptr. */
export function decodeDescriptionAt(ptr: usize, len: u32): Decoded<Description> {
  const r = new Reader(ptr, len, "description");
  const d = new Description();
  r.version();
  const n = r.count("assignors", 18);
  for (let i: u32 = 0; i < n && !r.failed; i++) {
    const name = r.str("assignor name");
    const version = r.str("assignor version");
    const np = r.count("protocols", 4);
    const protocols = new Array<string>(0);
    for (let j: u32 = 0; j < np && !r.failed; j++) protocols.push(r.str("protocol"));
    const a = new AssignorInfo(name, version, protocols);
    const modes = r.u8("modes");
    const flags = r.u8("assignor flags");
    if (!r.failed && ((modes & ~3) || (flags & ~1))) r.fail("assignor \"" + name + "\" has unknown mode or flag bits");
    a.modes = modes;
    a.mayLeaveUnassigned = (flags & 1) != 0;
    a.description = r.str("assignor description");
    d.assignors.push(a);
  }
  if (!r.end()) return new Decoded<Description>(null, r.error);
  return new Decoded<Description>(d, "");
}

/** Decodes a request held in buf. */
export function decodeRequest(buf: Uint8Array): Decoded<Request> {
  return decodeRequestAt(buf.dataStart, <u32>buf.length);
}

/** Decodes a response held in buf. */
export function decodeResponse(buf: Uint8Array): Decoded<Response> {
  return decodeResponseAt(buf.dataStart, <u32>buf.length);
}

/** Decodes a description held in buf. */
export function decodeDescription(buf: Uint8Array): Decoded<Description> {
  return decodeDescriptionAt(buf.dataStart, <u32>buf.length);
}

// ---------------------------------------------------------------------------
// Encoding: each encoder computes the exact size, then writes.

// Writer writes at ptr; the caller has sized the buffer.
class Writer {
  constructor(public ptr: usize) {}

  u8(v: u8): void { store<u8>(this.ptr, v); this.ptr += 1; }
  u32(v: u32): void { store<u32>(this.ptr, v); this.ptr += 4; }
  u64(v: u64): void { store<u64>(this.ptr, v); this.ptr += 8; }

  str(s: string): void {
    const at = this.ptr;
    this.ptr += 4;
    const n = String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, this.ptr);
    store<u32>(at, <u32>n);
    this.ptr += n;
  }

  bytes(b: Uint8Array): void {
    this.u32(<u32>b.length);
    memory.copy(this.ptr, b.dataStart, b.length);
    this.ptr += b.length;
  }

  i32s(v: Int32Array): void {
    this.u32(<u32>v.length);
    memory.copy(this.ptr, v.dataStart, <usize>v.length << 2);
    this.ptr += <usize>v.length << 2;
  }

  tps(list: TopicPartitions[]): void {
    this.u32(<u32>list.length);
    for (let i = 0; i < list.length; i++) {
      this.u32(list[i].topic);
      this.i32s(list[i].partitions);
    }
  }
}

function strSize(s: string): u64 { return 4 + <u64>String.UTF8.byteLength(s); }

function tpsSize(list: TopicPartitions[]): u64 {
  let n: u64 = 4;
  for (let i = 0; i < list.length; i++) n += 8 + 4 * <u64>list[i].partitions.length;
  return n;
}

/** The exact encoded size of a request. */
export function requestSize(q: Request): u64 {
  let n: u64 = 4 + strSize(q.groupId) + 4 + strSize(q.protocol) + strSize(q.assignor) + 1 + 8;
  n += 4;
  for (let i = 0; i < q.config.length; i++) n += strSize(q.config[i].key) + strSize(q.config[i].value);
  n += 4;
  for (let i = 0; i < q.brokers.length; i++) n += 4 + strSize(q.brokers[i].rack);
  n += 4;
  for (let i = 0; i < q.replicaSets.length; i++) n += 4 + 4 * <u64>q.replicaSets[i].length;
  n += 4;
  for (let i = 0; i < q.topics.length; i++) {
    const t = q.topics[i];
    n += strSize(t.name) + 16 + 1 + 4;
    if (t.placement) n += 12 * <u64>t.partitionCount;
  }
  n += 4;
  for (let i = 0; i < q.members.length; i++) {
    const m = q.members[i];
    n += strSize(m.memberId) + strSize(m.instanceId) + strSize(m.clientId) + strSize(m.clientHost) + strSize(m.rack);
    n += 1 + 4 + 4 * <u64>m.topics.length + 4 + tpsSize(m.owned) + 4 + <u64>m.userData.length + tpsSize(m.previous);
  }
  return n;
}

/** Writes a request at ptr; requestSize(q) bytes must be writable there. */
export function writeRequest(q: Request, ptr: usize): void {
  const w = new Writer(ptr);
  w.u32(ABI_VERSION);
  w.str(q.groupId);
  w.u32(<u32>q.generation);
  w.str(q.protocol);
  w.str(q.assignor);
  w.u8(q.rebalanceProtocol);
  w.u64(q.seed);
  w.u32(<u32>q.config.length);
  for (let i = 0; i < q.config.length; i++) {
    w.str(q.config[i].key);
    w.str(q.config[i].value);
  }
  w.u32(<u32>q.brokers.length);
  for (let i = 0; i < q.brokers.length; i++) {
    w.u32(<u32>q.brokers[i].id);
    w.str(q.brokers[i].rack);
  }
  w.u32(<u32>q.replicaSets.length);
  for (let i = 0; i < q.replicaSets.length; i++) w.i32s(q.replicaSets[i]);
  w.u32(<u32>q.topics.length);
  for (let i = 0; i < q.topics.length; i++) {
    const t = q.topics[i];
    w.str(t.name);
    memory.copy(w.ptr, t.topicId.dataStart, 16);
    w.ptr += 16;
    const pl = t.placement;
    w.u8(<u8>((t.exists ? 1 : 0) | (pl ? 2 : 0)));
    w.u32(<u32>t.partitionCount);
    if (pl) {
      memory.copy(w.ptr, pl.dataStart, <usize>t.partitionCount * 12);
      w.ptr += <usize>t.partitionCount * 12;
    }
  }
  w.u32(<u32>q.members.length);
  for (let i = 0; i < q.members.length; i++) {
    const m = q.members[i];
    w.str(m.memberId);
    w.str(m.instanceId);
    w.str(m.clientId);
    w.str(m.clientHost);
    w.str(m.rack);
    w.u8(m.cooperative ? 1 : 0);
    w.i32s(m.topics);
    w.u32(<u32>m.ownedGeneration);
    w.tps(m.owned);
    w.bytes(m.userData);
    w.tps(m.previous);
  }
}

/** The exact encoded size of a response. */
export function responseSize(r: Response): u64 {
  if (r.error.length > 0) return 5 + strSize(r.error);
  let n: u64 = 9;
  for (let i = 0; i < r.assignments.length; i++) {
    const a = r.assignments[i];
    n += 4 + tpsSize(a.partitions) + 4 + <u64>a.userData.length;
  }
  return n;
}

/** Writes a response at ptr; responseSize(r) bytes must be writable there. */
export function writeResponse(r: Response, ptr: usize): void {
  const w = new Writer(ptr);
  w.u32(ABI_VERSION);
  if (r.error.length > 0) {
    w.u8(1);
    w.str(r.error);
    return;
  }
  w.u8(0);
  w.u32(<u32>r.assignments.length);
  for (let i = 0; i < r.assignments.length; i++) {
    const a = r.assignments[i];
    w.u32(a.member);
    w.tps(a.partitions);
    w.bytes(a.userData);
  }
}

/** The exact encoded size of a description. */
export function descriptionSize(d: Description): u64 {
  let n: u64 = 8;
  for (let i = 0; i < d.assignors.length; i++) {
    const a = d.assignors[i];
    n += strSize(a.name) + strSize(a.version) + 4 + 2 + strSize(a.description);
    for (let j = 0; j < a.protocols.length; j++) n += strSize(a.protocols[j]);
  }
  return n;
}

/** Writes a description at ptr; descriptionSize(d) bytes must be writable. */
export function writeDescription(d: Description, ptr: usize): void {
  const w = new Writer(ptr);
  w.u32(ABI_VERSION);
  w.u32(<u32>d.assignors.length);
  for (let i = 0; i < d.assignors.length; i++) {
    const a = d.assignors[i];
    w.str(a.name);
    w.str(a.version);
    w.u32(<u32>a.protocols.length);
    for (let j = 0; j < a.protocols.length; j++) w.str(a.protocols[j]);
    w.u8(a.modes);
    w.u8(a.mayLeaveUnassigned ? 1 : 0);
    w.str(a.description);
  }
}

/** Encodes a request into a new buffer. */
export function encodeRequest(q: Request): Uint8Array {
  const out = new Uint8Array(<i32>requestSize(q));
  writeRequest(q, out.dataStart);
  return out;
}

/** Encodes a response into a new buffer. */
export function encodeResponse(r: Response): Uint8Array {
  const out = new Uint8Array(<i32>responseSize(r));
  writeResponse(r, out.dataStart);
  return out;
}

/** Encodes a description into a new buffer. */
export function encodeDescription(d: Description): Uint8Array {
  const out = new Uint8Array(<i32>descriptionSize(d));
  writeDescription(d, out.dataStart);
  return out;
}

// ---------------------------------------------------------------------------
// Logging

// @ts-ignore: decorator
@external("wasmassign", "log")
declare function hostLog(level: i32, ptr: usize, len: i32): void;

/** Writes one line to the host's log, attributed to this plugin. */
export function log(level: LogLevel, message: string): void {
  if (message.length == 0) return;
  const b = String.UTF8.encode(message);
  hostLog(<i32>level, changetype<usize>(b), b.byteLength);
}

// ---------------------------------------------------------------------------
// Registration and the module's state

/** An assign function: a response, or fail(message). */
export type AssignFn = (req: Request) => Response;

// The module's state. A wasm instance is one single-threaded program with
// one set of exports, so module-level variables are its natural home.
const infos = new Array<AssignorInfo>(0);
const fns = new Array<AssignFn>(0);
let descBuf: ArrayBuffer | null = null;
let reqBuf: ArrayBuffer | null = null; // the request buffer, reused
let outBuf: ArrayBuffer | null = null; // the response buffer, reused

/**
 * register adds an assignor to the module; call it at the top level of the
 * plugin's entry file. It returns false when the name is taken.
 */
export function register(info: AssignorInfo, fn: AssignFn): bool {
  for (let i = 0; i < infos.length; i++) {
    if (infos[i].name == info.name) return false;
  }
  infos.push(info);
  fns.push(fn);
  descBuf = null;
  return true;
}

function packed(ptr: usize, len: u32): u64 {
  return (<u64>ptr << 32) | <u64>len;
}

/** @internal wasmassign_describe's body. */
export function describeModule(): u64 {
  let d = descBuf;
  if (!d) {
    const desc = new Description();
    desc.assignors = infos;
    d = new ArrayBuffer(<i32>descriptionSize(desc));
    writeDescription(desc, changetype<usize>(d));
    descBuf = d;
  }
  return packed(changetype<usize>(d), <u32>d.byteLength);
}

/** @internal wasmassign_alloc's body: one request buffer, grown and reused. */
export function allocRequest(size: i32): usize {
  if (size <= 0) return 0;
  let b = reqBuf;
  if (!b || b.byteLength < size) {
    reqBuf = null;
    b = new ArrayBuffer(size);
    reqBuf = b;
  }
  return changetype<usize>(b);
}

function output(r: Response): u64 {
  const n = responseSize(r);
  if (n > <u64>0x7fffffff) return 0;
  let b = outBuf;
  if (!b || <u64>b.byteLength < n) {
    outBuf = null;
    b = new ArrayBuffer(<i32>n);
    outBuf = b;
  }
  writeResponse(r, changetype<usize>(b));
  return packed(changetype<usize>(b), <u32>n);
}

/** @internal wasmassign_assign's body. */
export function assignRequest(ptr: usize, len: i32): u64 {
  // The previous call's garbage goes first: the same request then
  // allocates into the same free blocks, and memory stays flat.
  __collect();
  const b = reqBuf;
  if (!b || ptr != changetype<usize>(b) || len < 0 || len > b.byteLength) {
    return output(fail("wasmassign_assign: the request buffer was not returned by wasmassign_alloc with at least that size"));
  }
  const d = decodeRequestAt(ptr, <u32>len);
  const req = d.value;
  if (!req) return output(fail(d.error));
  let found = -1;
  if (req.assignor.length == 0 && infos.length == 1) found = 0;
  for (let i = 0; i < infos.length && found < 0; i++) {
    if (infos[i].name == req.assignor) found = i;
  }
  if (found < 0) return output(fail("this module has no assignor \"" + req.assignor + "\""));
  const fn = fns[found];
  return output(fn(req));
}

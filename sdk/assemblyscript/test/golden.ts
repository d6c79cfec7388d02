// golden.ts: a test module for the SDK's codec, run by
// sdk/assemblyscript/astest under the Go host's wasm engine. For each buffer
// the harness writes at input(len), run(kind, len) decodes it with the
// SDK's decoder for kind ('q' request, 'r' response, 'd' description),
// re-encodes it with the SDK's encoder and answers one line:
//
//   ok <json>        decoded, <json> in testdata/abi's JSON form, and the
//                    re-encoded bytes equal the input
//   reject <reason>  the decoder rejected the buffer
//   mismatch         decoded, but re-encoding gave different bytes

import {
  Description, Request, Response, TopicPartitions,
  decodeDescriptionAt, decodeRequestAt, decodeResponseAt,
  encodeDescription, encodeRequest, encodeResponse,
} from "../assembly/index";

let inBuf: ArrayBuffer = new ArrayBuffer(0);
let outBuf: ArrayBuffer = new ArrayBuffer(0);

export function input(len: i32): usize {
  if (inBuf.byteLength < len) inBuf = new ArrayBuffer(len);
  return changetype<usize>(inBuf);
}

function hex2(b: u8): string {
  const digits = "0123456789abcdef";
  return digits.charAt(b >> 4) + digits.charAt(b & 15);
}

function jstr(s: string): string {
  let out = "\"";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c == 0x22 || c == 0x5c) out += "\\" + String.fromCharCode(c);
    else if (c < 0x20 || c == 0x7f) out += "\\u00" + hex2(<u8>c);
    else out += String.fromCharCode(c);
  }
  return out + "\"";
}

function b64(b: Uint8Array): string {
  const tab = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  let out = "\"";
  for (let i = 0; i < b.length; i += 3) {
    let v: u32 = <u32>b[i] << 16;
    if (i + 1 < b.length) v |= <u32>b[i + 1] << 8;
    if (i + 2 < b.length) v |= <u32>b[i + 2];
    out += tab.charAt((v >> 18) & 63) + tab.charAt((v >> 12) & 63);
    out += i + 1 < b.length ? tab.charAt((v >> 6) & 63) : "=";
    out += i + 2 < b.length ? tab.charAt(v & 63) : "=";
  }
  return out + "\"";
}

function ints(v: Int32Array): string {
  const parts = new Array<string>(0);
  for (let i = 0; i < v.length; i++) parts.push(v[i].toString());
  return "[" + parts.join(",") + "]";
}

function tps(list: TopicPartitions[]): string {
  const parts = new Array<string>(0);
  for (let i = 0; i < list.length; i++) {
    parts.push("{\"topic\":" + list[i].topic.toString() + ",\"partitions\":" + ints(list[i].partitions) + "}");
  }
  return "[" + parts.join(",") + "]";
}

function requestJSON(q: Request): string {
  let s = "{\"group_id\":" + jstr(q.groupId) + ",\"generation\":" + q.generation.toString();
  s += ",\"protocol\":" + jstr(q.protocol) + ",\"assignor\":" + jstr(q.assignor);
  s += ",\"rebalance_protocol\":\"" + (q.rebalanceProtocol ? "cooperative" : "eager") + "\"";
  s += ",\"seed\":\"" + q.seed.toString() + "\",\"config\":[";
  for (let i = 0; i < q.config.length; i++) {
    s += (i ? "," : "") + "{\"key\":" + jstr(q.config[i].key) + ",\"value\":" + jstr(q.config[i].value) + "}";
  }
  s += "],\"brokers\":[";
  for (let i = 0; i < q.brokers.length; i++) {
    s += (i ? "," : "") + "{\"id\":" + q.brokers[i].id.toString() + ",\"rack\":" + jstr(q.brokers[i].rack) + "}";
  }
  s += "],\"replica_sets\":[";
  for (let i = 0; i < q.replicaSets.length; i++) s += (i ? "," : "") + ints(q.replicaSets[i]);
  s += "],\"topics\":[";
  for (let i = 0; i < q.topics.length; i++) {
    const t = q.topics[i];
    let id = "";
    for (let k = 0; k < 16; k++) id += hex2(t.topicId[k]);
    s += (i ? "," : "") + "{\"name\":" + jstr(t.name) + ",\"topic_id\":\"" + id + "\",\"exists\":" + (t.exists ? "true" : "false");
    s += ",\"partition_count\":" + t.partitionCount.toString() + ",\"placement\":";
    if (!t.placement) {
      s += "null";
    } else {
      const parts = new Array<string>(0);
      for (let p = 0; p < t.partitionCount; p++) {
        parts.push("{\"leader\":" + t.leader(p).toString() + ",\"replicas\":" + t.replicas(p).toString() + ",\"isr\":" + t.isr(p).toString() + "}");
      }
      s += "[" + parts.join(",") + "]";
    }
    s += "}";
  }
  s += "],\"members\":[";
  for (let i = 0; i < q.members.length; i++) {
    const m = q.members[i];
    s += (i ? "," : "") + "{\"member_id\":" + jstr(m.memberId) + ",\"instance_id\":" + jstr(m.instanceId);
    s += ",\"client_id\":" + jstr(m.clientId) + ",\"client_host\":" + jstr(m.clientHost) + ",\"rack\":" + jstr(m.rack);
    s += ",\"cooperative\":" + (m.cooperative ? "true" : "false") + ",\"subscribed_topics\":" + ints(m.topics);
    s += ",\"owned_generation\":" + m.ownedGeneration.toString() + ",\"owned\":" + tps(m.owned);
    s += ",\"user_data\":" + b64(m.userData) + ",\"previous\":" + tps(m.previous) + "}";
  }
  return s + "]}";
}

function responseJSON(r: Response): string {
  if (r.error.length > 0) return "{\"status\":\"error\",\"message\":" + jstr(r.error) + "}";
  let s = "{\"status\":\"ok\",\"assignments\":[";
  for (let i = 0; i < r.assignments.length; i++) {
    const a = r.assignments[i];
    s += (i ? "," : "") + "{\"member\":" + a.member.toString() + ",\"partitions\":" + tps(a.partitions) + ",\"user_data\":" + b64(a.userData) + "}";
  }
  return s + "]}";
}

function descriptionJSON(d: Description): string {
  let s = "{\"assignors\":[";
  for (let i = 0; i < d.assignors.length; i++) {
    const a = d.assignors[i];
    const protos = new Array<string>(0);
    for (let j = 0; j < a.protocols.length; j++) protos.push(jstr(a.protocols[j]));
    const modes = new Array<string>(0);
    if (a.modes & 1) modes.push("\"eager\"");
    if (a.modes & 2) modes.push("\"cooperative\"");
    s += (i ? "," : "") + "{\"name\":" + jstr(a.name) + ",\"version\":" + jstr(a.version);
    s += ",\"protocols\":[" + protos.join(",") + "],\"modes\":[" + modes.join(",") + "]";
    s += ",\"may_leave_unassigned\":" + (a.mayLeaveUnassigned ? "true" : "false") + ",\"description\":" + jstr(a.description) + "}";
  }
  return s + "]}";
}

function same(a: Uint8Array, p: usize, len: i32): bool {
  return a.length == len && memory.compare(a.dataStart, p, <usize>len) == 0;
}

function answer(s: string): u64 {
  const n = String.UTF8.byteLength(s);
  if (outBuf.byteLength < n) outBuf = new ArrayBuffer(n);
  String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, changetype<usize>(outBuf));
  return (<u64>changetype<usize>(outBuf) << 32) | <u64>n;
}

export function run(kind: i32, len: i32): u64 {
  const p = changetype<usize>(inBuf);
  if (kind == 0x71) { // 'q'
    const d = decodeRequestAt(p, <u32>len);
    const v = d.value;
    if (!v) return answer("reject " + d.error);
    return answer(same(encodeRequest(v), p, len) ? "ok " + requestJSON(v) : "mismatch");
  }
  if (kind == 0x72) { // 'r'
    const d = decodeResponseAt(p, <u32>len);
    const v = d.value;
    if (!v) return answer("reject " + d.error);
    return answer(same(encodeResponse(v), p, len) ? "ok " + responseJSON(v) : "mismatch");
  }
  const d = decodeDescriptionAt(p, <u32>len);
  const v = d.value;
  if (!v) return answer("reject " + d.error);
  return answer(same(encodeDescription(v), p, len) ? "ok " + descriptionJSON(v) : "mismatch");
}

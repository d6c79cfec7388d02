// The AssemblyScript SDK's conformance kit module (sdk/KIT.md): the five kit
// assignors, written with the SDK's public API only. internal/conformance/kit loads
// the built kit.wasm next to the other SDKs' and checks they behave alike.

import {
  Assignment, AssignorInfo, LogLevel, Request, Response, SDK_VERSION, TopicPartitions,
  encodeRequest, fail, log, register,
} from "../assembly/index";

export * from "../assembly/exports";

// roundRobin assigns as Kafka's round robin over the request's member order
// and topic-table order. Every member gets an assignment, possibly empty.
// Within one topic the iterator visits the topic's subscribers in a fixed
// cycle, so subscriber k after the start takes partitions k, k+S, k+2S, ...
function roundRobin(req: Request): Response {
  const nm = req.members.length;
  const nt = req.topics.length;
  const out = new Array<Assignment>(nm);
  for (let m = 0; m < nm; m++) out[m] = new Assignment(<u32>m);
  const subs = new Array<Array<i32>>(nt);
  for (let t = 0; t < nt; t++) subs[t] = new Array<i32>(0);
  for (let m = 0; m < nm; m++) {
    const ts = req.members[m].topics;
    for (let k = 0; k < ts.length; k++) subs[ts[k]].push(m);
  }
  let cursor = 0;
  for (let t = 0; t < nt; t++) {
    const topic = req.topics[t];
    const s = subs[t];
    const ns = s.length;
    const n = topic.partitionCount;
    if (!topic.exists || n == 0 || ns == 0) continue;
    let j = 0;
    while (j < ns && s[j] < cursor) j++;
    if (j == ns) j = 0;
    const takers = n < ns ? n : ns;
    for (let k = 0; k < takers; k++) {
      const m = s[(j + k) % ns];
      const count = (n - k + ns - 1) / ns;
      const parts = new Int32Array(count);
      for (let i = 0; i < count; i++) parts[i] = k + i * ns;
      out[m].partitions.push(new TopicPartitions(<u32>t, parts));
    }
    cursor = s[(j + n - 1) % ns] + 1;
    if (cursor == nm) cursor = 0;
  }
  return Response.ok(out);
}

// roundTrip answers as roundRobin, with member 0's user data the FNV-1a 64
// hash of the request as this SDK re-encodes it.
function roundTrip(req: Request): Response {
  const resp = roundRobin(req);
  if (req.members.length == 0) return resp;
  const b = encodeRequest(req);
  let h: u64 = 0xcbf29ce484222325;
  const p = b.dataStart;
  for (let i = 0; i < b.length; i++) {
    h = (h ^ <u64>load<u8>(p + <usize>i)) * 0x100000001b3;
  }
  const ud = new Uint8Array(8);
  store<u64>(ud.dataStart, h);
  resp.assignments[0].userData = ud;
  return resp;
}

function kitError(req: Request): Response {
  return fail("kit error: " + req.groupId);
}

function kitLog(req: Request): Response {
  log(LogLevel.Info, "kit log: " + req.groupId);
  return roundRobin(req);
}

function kitUserData(req: Request): Response {
  const resp = roundRobin(req);
  for (let m = 0; m < req.members.length; m++) resp.assignments[m].userData = req.members[m].userData;
  return resp;
}

function info(name: string, what: string): AssignorInfo {
  const i = new AssignorInfo(name, SDK_VERSION, ["kit"]);
  i.description = "conformance kit: " + what + " (AssemblyScript SDK)";
  return i;
}

register(info("kit-roundrobin", "Kafka round robin"), roundRobin);
register(info("kit-roundtrip", "round robin plus the re-encoded request's hash"), roundTrip);
register(info("kit-error", "always reports an error"), kitError);
register(info("kit-log", "logs one line, then round robin"), kitLog);
register(info("kit-userdata", "round robin echoing user data"), kitUserData);

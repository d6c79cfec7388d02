/*
 * kit.c: the C SDK's conformance kit module (sdk/KIT.md). It provides the
 * five kit assignors using only the SDK's public API; internal/conformance/kit loads
 * the built kit.wasm and checks it behaves like every other SDK's.
 */
#include "../wasmassign.h"

#include <string.h>

/* roundrobin assigns as Kafka's RoundRobinAssignor over the request's
 * member order and topic-table order (sdk/KIT.md). Every member gets an
 * assignment, possibly empty, so kit-userdata can answer for each.
 *
 * Within one topic the circular iterator visits the topic's subscribers in
 * a fixed cycle: starting at subscriber j, subscriber (j+k) mod S takes
 * partitions k, k+S, k+2S, ... So each topic costs O(subscribers +
 * partitions) with no per-partition search. */
static int roundrobin(const wasmassign_request *req, wasmassign_response *resp) {
    uint32_t nm = req->member_count, nt = req->topic_count;
    wasmassign_assignment *out = nm ? wasmassign_arena_alloc(sizeof *out * nm) : NULL;
    if (nm && !out) return wasmassign_failf("out of memory for %u members", nm);
    resp->assignments = out;
    resp->count = nm;
    if (nm == 0 || nt == 0) {
        for (uint32_t m = 0; m < nm; m++) out[m].member = m;
        return WASMASSIGN_OK;
    }

    /* Subscribers of each topic, in member order (a counting sort). */
    uint32_t *start = wasmassign_arena_alloc(sizeof *start * ((size_t)nt + 1));
    if (!start) return wasmassign_fail("out of memory", 13);
    uint64_t total = 0;
    for (uint32_t m = 0; m < nm; m++) {
        const wasmassign_i32s *s = &req->members[m].topics;
        for (uint32_t k = 0; k < s->count; k++) start[s->items[k] + 1]++;
        total += s->count;
    }
    for (uint32_t t = 0; t < nt; t++) start[t + 1] += start[t];
    uint32_t *subs = wasmassign_arena_alloc(sizeof *subs * (total ? total : 1));
    uint32_t *fill = wasmassign_arena_alloc(sizeof *fill * nt);
    if (!subs || !fill) return wasmassign_fail("out of memory", 13);
    memcpy(fill, start, sizeof *fill * nt);
    for (uint32_t m = 0; m < nm; m++) {
        const wasmassign_i32s *s = &req->members[m].topics;
        for (uint32_t k = 0; k < s->count; k++) subs[fill[s->items[k]]++] = m;
    }

    /* Two passes over the topics: count each member's entries, then fill
     * them. The iterator's walk is the same both times. */
    uint32_t *entries = wasmassign_arena_alloc(sizeof *entries * nm);
    if (!entries) return wasmassign_fail("out of memory", 13);
    for (int pass = 0; pass < 2; pass++) {
        uint32_t cursor = 0;
        for (uint32_t t = 0; t < nt; t++) {
            const wasmassign_topic *tp = &req->topics[t];
            uint32_t nsubs = start[t + 1] - start[t];
            uint32_t parts = (uint32_t)tp->partition_count;
            if (!tp->exists || parts == 0 || nsubs == 0) continue;
            const uint32_t *ts = subs + start[t];
            uint32_t lo = 0, hi = nsubs; /* first subscriber at or after cursor */
            while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (ts[mid] < cursor) lo = mid + 1;
                else hi = mid;
            }
            uint32_t j = lo == nsubs ? 0 : lo;
            uint32_t takers = parts < nsubs ? parts : nsubs;
            for (uint32_t k = 0; k < takers; k++) {
                uint32_t m = ts[(j + k) % nsubs];
                if (pass == 0) {
                    entries[m]++;
                    continue;
                }
                uint32_t n = (parts - k + nsubs - 1) / nsubs;
                int32_t *ps = wasmassign_arena_alloc(sizeof *ps * n);
                if (!ps) return wasmassign_fail("out of memory", 13);
                for (uint32_t i = 0; i < n; i++) ps[i] = (int32_t)(k + i * nsubs);
                wasmassign_topic_partitions *e =
                    (wasmassign_topic_partitions *)&out[m].partitions[out[m].partition_count++];
                e->topic = t;
                e->partitions = (wasmassign_i32s){ps, n};
            }
            cursor = ts[(j + parts - 1) % nsubs] + 1;
            if (cursor == nm) cursor = 0;
        }
        if (pass == 0) {
            for (uint32_t m = 0; m < nm; m++) {
                out[m].member = m;
                if (entries[m] == 0) continue;
                out[m].partitions = wasmassign_arena_alloc(sizeof *out[m].partitions * entries[m]);
                if (!out[m].partitions) return wasmassign_fail("out of memory", 13);
            }
        }
    }
    return WASMASSIGN_OK;
}

static int kit_roundrobin(const wasmassign_request *req, wasmassign_response *resp, void *ctx) {
    (void)ctx;
    return roundrobin(req, resp);
}

/* kit_roundtrip proves decode and encode agree: member 0 carries the
 * FNV-1a 64 hash of the request as this SDK re-encodes it. */
static int kit_roundtrip(const wasmassign_request *req, wasmassign_response *resp, void *ctx) {
    (void)ctx;
    if (roundrobin(req, resp) != WASMASSIGN_OK) return WASMASSIGN_ERROR;
    if (req->member_count == 0) return WASMASSIGN_OK;
    uint64_t n = wasmassign_request_size(req);
    uint8_t *buf = n <= SIZE_MAX ? wasmassign_arena_alloc((size_t)n) : NULL;
    uint8_t *hash = wasmassign_arena_alloc(8);
    if (!buf || !hash) return wasmassign_failf("out of memory re-encoding %llu bytes", (unsigned long long)n);
    wasmassign_write_request(req, buf);
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t i = 0; i < n; i++) h = (h ^ buf[i]) * 0x100000001b3ull;
    for (int i = 0; i < 8; i++) hash[i] = (uint8_t)(h >> (8 * i));
    ((wasmassign_assignment *)resp->assignments)[0].user_data = (wasmassign_bytes){hash, 8};
    return WASMASSIGN_OK;
}

static int kit_error(const wasmassign_request *req, wasmassign_response *resp, void *ctx) {
    (void)resp, (void)ctx;
    return wasmassign_failf("kit error: %.*s", (int)req->group_id.len, (const char *)req->group_id.ptr);
}

static int kit_log(const wasmassign_request *req, wasmassign_response *resp, void *ctx) {
    (void)ctx;
    wasmassign_logf(WASMASSIGN_LOG_INFO, "kit log: %.*s", (int)req->group_id.len,
                    (const char *)req->group_id.ptr);
    return roundrobin(req, resp);
}

static int kit_userdata(const wasmassign_request *req, wasmassign_response *resp, void *ctx) {
    (void)ctx;
    if (roundrobin(req, resp) != WASMASSIGN_OK) return WASMASSIGN_ERROR;
    wasmassign_assignment *out = (wasmassign_assignment *)resp->assignments;
    for (uint32_t m = 0; m < req->member_count; m++) out[m].user_data = req->members[m].user_data;
    return WASMASSIGN_OK;
}

static const char *const protocols[] = {"kit"};

#define KIT_ASSIGNOR(id, desc)                                                                        \
    {                                                                                                 \
        .name = id, .version = WASMASSIGN_SDK_VERSION, .protocols = protocols, .protocol_count = 1,   \
        .modes = WASMASSIGN_MODE_EAGER | WASMASSIGN_MODE_COOPERATIVE, .may_leave_unassigned = false, \
        .description = desc                                                                           \
    }

static const wasmassign_assignor_info infos[] = {
    KIT_ASSIGNOR("kit-roundrobin", "conformance kit: Kafka round robin (C SDK)"),
    KIT_ASSIGNOR("kit-roundtrip", "conformance kit: round robin plus the re-encoded request's hash (C SDK)"),
    KIT_ASSIGNOR("kit-error", "conformance kit: always reports an error (C SDK)"),
    KIT_ASSIGNOR("kit-log", "conformance kit: logs one line, then round robin (C SDK)"),
    KIT_ASSIGNOR("kit-userdata", "conformance kit: round robin echoing user data (C SDK)"),
};

__attribute__((constructor)) static void init(void) {
    static const wasmassign_assign_fn fns[] = {kit_roundrobin, kit_roundtrip, kit_error, kit_log, kit_userdata};
    for (unsigned i = 0; i < sizeof infos / sizeof infos[0]; i++) wasmassign_register(&infos[i], fns[i], NULL);
}

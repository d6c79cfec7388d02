/*
 * wasmassign.c: the C SDK's implementation (see wasmassign.h).
 *
 * The codec and the arena are plain C and compile natively, for the SDK's
 * tests; the exports, the host import and the module state are compiled only
 * for wasm (__wasm__).
 */
#include "wasmassign.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------- */
/* Arena                                                                    */

struct wasmassign_chunk {
    wasmassign_chunk *next;
    size_t cap;
    size_t used;
    /* data follows, 8-aligned */
};

#define CHUNK_MIN ((size_t)1 << 20)
#define CHUNK_DATA(c) ((uint8_t *)(c) + ((sizeof(wasmassign_chunk) + 7) & ~(size_t)7))

/*
 * wasmassign_arena_take walks the chunks in order and never frees one, so a
 * repeated sequence of allocations (the same request again) lands in the
 * same chunks and the heap stops growing.
 */
void *wasmassign_arena_take(wasmassign_arena *a, size_t size) {
    if (size > SIZE_MAX - 8) return NULL;
    size = (size + 7) & ~(size_t)7;
    if (size == 0) size = 8;
    wasmassign_chunk *c = a->cur ? a->cur : a->first;
    while (c) {
        if (c->cap - c->used >= size) {
            void *p = CHUNK_DATA(c) + c->used;
            c->used += size;
            a->cur = c;
            memset(p, 0, size);
            return p;
        }
        if (!c->next) break;
        c = c->next;
    }
    size_t cap = size > CHUNK_MIN ? size : CHUNK_MIN;
    size_t header = (sizeof(wasmassign_chunk) + 7) & ~(size_t)7;
    if (cap > SIZE_MAX - header) return NULL;
    wasmassign_chunk *n = malloc(header + cap);
    if (!n) return NULL;
    n->next = NULL;
    n->cap = cap;
    n->used = size;
    if (c) c->next = n;
    else a->first = n;
    a->cur = n;
    memset(CHUNK_DATA(n), 0, size);
    return CHUNK_DATA(n);
}

void wasmassign_arena_reset(wasmassign_arena *a) {
    for (wasmassign_chunk *c = a->first; c; c = c->next) c->used = 0;
    a->cur = a->first;
}

void wasmassign_arena_release(wasmassign_arena *a) {
    wasmassign_chunk *c = a->first;
    while (c) {
        wasmassign_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->first = a->cur = NULL;
}

/* ---------------------------------------------------------------------- */
/* Decoding                                                                 */

typedef struct {
    const uint8_t *b;
    uint32_t len, off;
    bool failed;
    wasmassign_arena *a;
    char *err;
    size_t errcap;
    const char *what;
} reader;

__attribute__((format(printf, 2, 3))) static void rfail(reader *r, const char *fmt, ...) {
    if (!r->failed) {
        r->failed = true;
        if (r->err && r->errcap > 0) {
            int n = snprintf(r->err, r->errcap, "%s: ", r->what);
            if (n < 0) n = 0;
            if ((size_t)n < r->errcap) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(r->err + n, r->errcap - (size_t)n, fmt, ap);
                va_end(ap);
            }
            size_t m = strlen(r->err);
            if (m < r->errcap) snprintf(r->err + m, r->errcap - m, " at byte %u", r->off);
        }
    }
    r->off = r->len;
}

static uint32_t remaining(const reader *r) { return r->len - r->off; }

static bool need(reader *r, uint32_t n, const char *field) {
    if (r->failed) return false;
    if (remaining(r) < n) {
        rfail(r, "truncated %s (need %u bytes, have %u)", field, n, remaining(r));
        return false;
    }
    return true;
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint8_t rd_u8(reader *r, const char *field) {
    if (!need(r, 1, field)) return 0;
    return r->b[r->off++];
}

static uint32_t rd_u32(reader *r, const char *field) {
    if (!need(r, 4, field)) return 0;
    uint32_t v = le32(r->b + r->off);
    r->off += 4;
    return v;
}

static uint64_t rd_u64(reader *r, const char *field) {
    if (!need(r, 8, field)) return 0;
    uint64_t v = (uint64_t)le32(r->b + r->off) | (uint64_t)le32(r->b + r->off + 4) << 32;
    r->off += 8;
    return v;
}

/* rd_count reads a count and checks, in 64-bit arithmetic, that the rest of
 * the buffer can hold that many elements of at least min_size bytes: a
 * forged count never makes the decoder allocate beyond what the buffer
 * could describe. */
static uint32_t rd_count(reader *r, const char *field, uint32_t min_size) {
    uint32_t n = rd_u32(r, field);
    if (r->failed) return 0;
    if ((uint64_t)n * min_size > remaining(r)) {
        rfail(r, "%s count %u exceeds the remaining %u bytes", field, n, remaining(r));
        return 0;
    }
    return n;
}

static void *rtake(reader *r, uint64_t n, size_t elem) {
    if (r->failed) return NULL;
    if (n == 0) return NULL;
    if (n > SIZE_MAX / elem) {
        rfail(r, "out of memory");
        return NULL;
    }
    void *p = wasmassign_arena_take(r->a, (size_t)n * elem);
    if (!p) rfail(r, "out of memory");
    return p;
}

/* utf8_valid accepts exactly what Go's utf8.Valid accepts: no overlong
 * forms, no surrogates, nothing above U+10FFFF. */
static bool utf8_valid(const uint8_t *s, uint32_t n) {
    uint32_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        uint32_t need_bytes;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) need_bytes = 1;
        else if (c == 0xE0) need_bytes = 2, lo = 0xA0;
        else if (c >= 0xE1 && c <= 0xEC) need_bytes = 2;
        else if (c == 0xED) need_bytes = 2, hi = 0x9F;
        else if (c >= 0xEE && c <= 0xEF) need_bytes = 2;
        else if (c == 0xF0) need_bytes = 3, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3) need_bytes = 3;
        else if (c == 0xF4) need_bytes = 3, hi = 0x8F;
        else return false;
        if (n - i - 1 < need_bytes) return false;
        if (s[i + 1] < lo || s[i + 1] > hi) return false;
        for (uint32_t k = 2; k <= need_bytes; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return false;
        i += need_bytes + 1;
    }
    return true;
}

static wasmassign_bytes rd_bytes(reader *r, const char *field) {
    wasmassign_bytes v = {0};
    uint32_t n = rd_count(r, field, 1);
    if (r->failed) return v;
    v.ptr = n ? r->b + r->off : NULL;
    v.len = n;
    r->off += n;
    return v;
}

static wasmassign_str rd_str(reader *r, const char *field) {
    wasmassign_str s = rd_bytes(r, field);
    if (!r->failed && !utf8_valid(s.ptr, s.len)) {
        rfail(r, "%s is not valid UTF-8", field);
        s.ptr = NULL, s.len = 0;
    }
    return s;
}

/* rd_i32s copies a counted list of i32 into the arena, aligned, so that an
 * assignor can index it as an array. */
static wasmassign_i32s rd_i32s(reader *r, const char *field) {
    wasmassign_i32s v = {0};
    uint32_t n = rd_count(r, field, 4);
    if (r->failed || n == 0) return v;
    int32_t *out = rtake(r, n, sizeof(int32_t));
    if (!out) return v;
    const uint8_t *src = r->b + r->off;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(out, src, (size_t)n * 4);
#else
    for (uint32_t i = 0; i < n; i++) out[i] = (int32_t)le32(src + 4 * i);
#endif
    r->off += 4 * n;
    v.items = out;
    v.count = n;
    return v;
}

static bool rd_version(reader *r) {
    uint32_t v = rd_u32(r, "version");
    if (!r->failed && v != WASMASSIGN_ABI_VERSION) rfail(r, "version %u, want %u", v, WASMASSIGN_ABI_VERSION);
    return !r->failed;
}

static int rd_end(reader *r) {
    if (!r->failed && r->off != r->len) rfail(r, "%u trailing bytes", r->len - r->off);
    return r->failed ? -1 : 0;
}

/* rd_tps reads a topic-partitions list; topic indices must be below
 * ntopics unless ntopics is negative (responses, whose table the decoder
 * does not know). */
static wasmassign_tps rd_tps(reader *r, const char *field, int64_t ntopics) {
    wasmassign_tps v = {0};
    uint32_t n = rd_count(r, field, 8);
    if (r->failed || n == 0) return v;
    wasmassign_topic_partitions *out = rtake(r, n, sizeof *out);
    if (!out) return v;
    for (uint32_t i = 0; i < n && !r->failed; i++) {
        out[i].topic = rd_u32(r, field);
        if (!r->failed && ntopics >= 0 && (int64_t)out[i].topic >= ntopics)
            rfail(r, "%s refers to topic index %u of %lld", field, out[i].topic, (long long)ntopics);
        out[i].partitions = rd_i32s(r, field);
    }
    if (r->failed) return (wasmassign_tps){0};
    v.items = out;
    v.count = n;
    return v;
}

int wasmassign_str_cmp(wasmassign_str a, wasmassign_str b) {
    uint32_t n = a.len < b.len ? a.len : b.len;
    int c = n ? memcmp(a.ptr, b.ptr, n) : 0;
    if (c) return c < 0 ? -1 : 1;
    return a.len < b.len ? -1 : a.len > b.len;
}

static uint32_t fnv32(wasmassign_str s) {
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < s.len; i++) h = (h ^ s.ptr[i]) * 16777619u;
    return h;
}

/* no_duplicate_names checks topic names with an open-addressing table in
 * the arena: O(topics), where pairwise comparison would be quadratic. */
static void no_duplicate_names(reader *r, const wasmassign_topic *t, uint32_t n) {
    if (r->failed || n < 2) return;
    uint32_t size = 4;
    while (size < 2 * (uint64_t)n) size <<= 1;
    uint32_t *slots = rtake(r, size, sizeof(uint32_t)); /* index+1, 0 = empty */
    if (!slots) return;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t h = fnv32(t[i].name) & (size - 1);
        while (slots[h]) {
            if (wasmassign_str_cmp(t[slots[h] - 1].name, t[i].name) == 0) {
                rfail(r, "topic \"%.*s\" appears twice in the topic table", (int)t[i].name.len,
                      (const char *)t[i].name.ptr);
                return;
            }
            h = (h + 1) & (size - 1);
        }
        slots[h] = i + 1;
    }
}

int wasmassign_decode_request(const uint8_t *buf, uint32_t len, wasmassign_arena *a,
                              wasmassign_request *q, char *err, size_t errcap) {
    reader rr = {buf, len, 0, false, a, err, errcap, "request"}, *r = &rr;
    memset(q, 0, sizeof *q);
    rd_version(r);
    q->group_id = rd_str(r, "group id");
    q->generation = (int32_t)rd_u32(r, "generation");
    q->protocol = rd_str(r, "protocol");
    q->assignor = rd_str(r, "assignor");
    q->rebalance_protocol = rd_u8(r, "rebalance protocol");
    if (!r->failed && q->rebalance_protocol > WASMASSIGN_COOPERATIVE)
        rfail(r, "rebalance protocol %u", q->rebalance_protocol);
    q->seed = rd_u64(r, "seed");

    uint32_t n = rd_count(r, "config", 8);
    wasmassign_config_entry *cfg = rtake(r, n, sizeof *cfg);
    for (uint32_t i = 0; i < n && !r->failed; i++) {
        cfg[i].key = rd_str(r, "config key");
        cfg[i].value = rd_str(r, "config value");
        if (!r->failed && i > 0 && wasmassign_str_cmp(cfg[i].key, cfg[i - 1].key) <= 0)
            rfail(r, "config key \"%.*s\" out of order", (int)cfg[i].key.len, (const char *)cfg[i].key.ptr);
    }
    q->config = cfg, q->config_count = n;

    n = rd_count(r, "brokers", 8);
    wasmassign_broker *brokers = rtake(r, n, sizeof *brokers);
    for (uint32_t i = 0; i < n && !r->failed; i++) {
        brokers[i].id = (int32_t)rd_u32(r, "broker id");
        brokers[i].rack = rd_str(r, "broker rack");
    }
    q->brokers = brokers, q->broker_count = n;

    n = rd_count(r, "replica sets", 4);
    wasmassign_i32s *sets = rtake(r, n, sizeof *sets);
    for (uint32_t i = 0; i < n && !r->failed; i++) sets[i] = rd_i32s(r, "replica set");
    q->replica_sets = sets, q->replica_set_count = n;

    uint32_t nt = rd_count(r, "topics", 25);
    wasmassign_topic *topics = rtake(r, nt, sizeof *topics);
    for (uint32_t i = 0; i < nt && !r->failed; i++) {
        wasmassign_topic *t = &topics[i];
        t->name = rd_str(r, "topic name");
        if (need(r, 16, "topic id")) {
            memcpy(t->topic_id, r->b + r->off, 16);
            r->off += 16;
        }
        uint8_t flags = rd_u8(r, "topic flags");
        int32_t pc = (int32_t)rd_u32(r, "partition count");
        if (r->failed) break;
        if (flags & ~3u) {
            rfail(r, "topic \"%.*s\" has unknown flags %#x", (int)t->name.len, (const char *)t->name.ptr, flags);
            break;
        }
        if (pc < 0) {
            rfail(r, "topic \"%.*s\" has partition count %d", (int)t->name.len, (const char *)t->name.ptr, pc);
            break;
        }
        if (!(flags & 1) && (pc != 0 || (flags & 2))) {
            rfail(r, "topic \"%.*s\" does not exist but has partitions", (int)t->name.len,
                  (const char *)t->name.ptr);
            break;
        }
        t->exists = flags & 1;
        t->partition_count = pc;
        if (flags & 2) {
            /* 12 * pc overflows 32 bits for pc near 2^29; compare in 64. */
            if ((uint64_t)pc * 12 > remaining(r)) {
                rfail(r, "truncated partition placement (need %llu bytes, have %u)",
                      (unsigned long long)pc * 12, remaining(r));
                break;
            }
            wasmassign_partition *pl = pc ? rtake(r, (uint32_t)pc, sizeof *pl) : NULL;
            if (pc == 0) {
                /* present but empty: a non-NULL pointer keeps the flag */
                pl = wasmassign_arena_take(r->a, 8);
                if (!pl) rfail(r, "out of memory");
            }
            if (r->failed) break;
            const uint8_t *src = r->b + r->off;
            for (int32_t p = 0; p < pc; p++) {
                pl[p].leader = (int32_t)le32(src + 12 * (uint32_t)p);
                pl[p].replicas = le32(src + 12 * (uint32_t)p + 4);
                pl[p].isr = le32(src + 12 * (uint32_t)p + 8);
                if (pl[p].replicas >= q->replica_set_count || pl[p].isr >= q->replica_set_count) {
                    r->off += 12 * (uint32_t)p;
                    rfail(r, "partition %d refers to a replica set beyond the %u sent", p, q->replica_set_count);
                    break;
                }
            }
            if (r->failed) break;
            r->off += 12 * (uint32_t)pc;
            t->placement = pl;
        }
    }
    no_duplicate_names(r, topics, nt);
    q->topics = topics, q->topic_count = nt;

    uint32_t nm = rd_count(r, "members", 41);
    wasmassign_member *members = rtake(r, nm, sizeof *members);
    for (uint32_t i = 0; i < nm && !r->failed; i++) {
        wasmassign_member *m = &members[i];
        m->member_id = rd_str(r, "member id");
        m->instance_id = rd_str(r, "instance id");
        m->client_id = rd_str(r, "client id");
        m->client_host = rd_str(r, "client host");
        m->rack = rd_str(r, "member rack");
        uint8_t flags = rd_u8(r, "member flags");
        if (!r->failed && (flags & ~1u))
            rfail(r, "member \"%.*s\" has unknown flags %#x", (int)m->member_id.len,
                  (const char *)m->member_id.ptr, flags);
        m->cooperative = flags & 1;
        m->topics = rd_i32s(r, "subscribed topics");
        for (uint32_t k = 0; k < m->topics.count && !r->failed; k++) {
            int32_t t = m->topics.items[k];
            if (t < 0 || (uint32_t)t >= nt)
                rfail(r, "member \"%.*s\" subscribes to topic index %d of %u", (int)m->member_id.len,
                      (const char *)m->member_id.ptr, t, nt);
            else if (k > 0 && t <= m->topics.items[k - 1])
                rfail(r, "member \"%.*s\": subscribed topic indices are not strictly ascending",
                      (int)m->member_id.len, (const char *)m->member_id.ptr);
        }
        m->owned_generation = (int32_t)rd_u32(r, "owned generation");
        m->owned = rd_tps(r, "owned partitions", nt);
        m->user_data = rd_bytes(r, "user data");
        m->previous = rd_tps(r, "previous assignment", nt);
    }
    q->members = members, q->member_count = nm;
    if (rd_end(r) != 0) {
        memset(q, 0, sizeof *q);
        return -1;
    }
    return 0;
}

int wasmassign_decode_response(const uint8_t *buf, uint32_t len, wasmassign_arena *a,
                               wasmassign_response *out, char *err, size_t errcap) {
    reader rr = {buf, len, 0, false, a, err, errcap, "response"}, *r = &rr;
    memset(out, 0, sizeof *out);
    rd_version(r);
    uint8_t status = rd_u8(r, "status");
    if (!r->failed) {
        if (status == 1) {
            out->error = rd_str(r, "error message");
            if (!r->failed && out->error.len == 0) rfail(r, "empty error message");
        } else if (status == 0) {
            uint32_t n = rd_count(r, "members", 12);
            wasmassign_assignment *as = rtake(r, n, sizeof *as);
            for (uint32_t i = 0; i < n && !r->failed; i++) {
                as[i].member = rd_u32(r, "member index");
                wasmassign_tps tps = rd_tps(r, "assigned partitions", -1);
                as[i].partitions = tps.items;
                as[i].partition_count = tps.count;
                as[i].user_data = rd_bytes(r, "user data");
            }
            out->assignments = as, out->count = n;
        } else {
            rfail(r, "status %u", status);
        }
    }
    if (rd_end(r) != 0) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    return 0;
}

int wasmassign_decode_description(const uint8_t *buf, uint32_t len, wasmassign_arena *a,
                                  wasmassign_description *out, char *err, size_t errcap) {
    reader rr = {buf, len, 0, false, a, err, errcap, "description"}, *r = &rr;
    memset(out, 0, sizeof *out);
    rd_version(r);
    uint32_t n = rd_count(r, "assignors", 18);
    wasmassign_assignor_desc *as = rtake(r, n, sizeof *as);
    for (uint32_t i = 0; i < n && !r->failed; i++) {
        as[i].name = rd_str(r, "assignor name");
        as[i].version = rd_str(r, "assignor version");
        uint32_t np = rd_count(r, "protocols", 4);
        wasmassign_str *ps = rtake(r, np, sizeof *ps);
        for (uint32_t j = 0; j < np && !r->failed; j++) ps[j] = rd_str(r, "protocol");
        as[i].protocols = ps, as[i].protocol_count = np;
        uint8_t modes = rd_u8(r, "modes");
        uint8_t flags = rd_u8(r, "assignor flags");
        if (!r->failed && ((modes & ~3u) || (flags & ~1u)))
            rfail(r, "assignor \"%.*s\" has unknown mode or flag bits", (int)as[i].name.len,
                  (const char *)as[i].name.ptr);
        as[i].modes = modes;
        as[i].may_leave_unassigned = flags & 1;
        as[i].description = rd_str(r, "assignor description");
    }
    out->assignors = as, out->count = n;
    if (rd_end(r) != 0) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Encoding                                                                 */

static uint8_t *put_u32(uint8_t *d, uint32_t v) {
    d[0] = (uint8_t)v, d[1] = (uint8_t)(v >> 8), d[2] = (uint8_t)(v >> 16), d[3] = (uint8_t)(v >> 24);
    return d + 4;
}

static uint8_t *put_bytes(uint8_t *d, wasmassign_bytes b) {
    d = put_u32(d, b.len);
    if (b.len) memcpy(d, b.ptr, b.len);
    return d + b.len;
}

static uint8_t *put_i32s(uint8_t *d, wasmassign_i32s v) {
    d = put_u32(d, v.count);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (v.count) memcpy(d, v.items, (size_t)v.count * 4);
    return d + (size_t)v.count * 4;
#else
    for (uint32_t i = 0; i < v.count; i++) d = put_u32(d, (uint32_t)v.items[i]);
    return d;
#endif
}

static uint8_t *put_tps(uint8_t *d, const wasmassign_topic_partitions *items, uint32_t n) {
    d = put_u32(d, n);
    for (uint32_t i = 0; i < n; i++) {
        d = put_u32(d, items[i].topic);
        d = put_i32s(d, items[i].partitions);
    }
    return d;
}

static uint64_t tps_size(const wasmassign_topic_partitions *items, uint32_t n) {
    uint64_t s = 4;
    for (uint32_t i = 0; i < n; i++) s += 8 + 4 * (uint64_t)items[i].partitions.count;
    return s;
}

uint64_t wasmassign_request_size(const wasmassign_request *r) {
    uint64_t s = 4 + 4 + r->group_id.len + 4 + 4 + r->protocol.len + 4 + r->assignor.len + 1 + 8;
    s += 4;
    for (uint32_t i = 0; i < r->config_count; i++) s += 8 + r->config[i].key.len + r->config[i].value.len;
    s += 4;
    for (uint32_t i = 0; i < r->broker_count; i++) s += 8 + r->brokers[i].rack.len;
    s += 4;
    for (uint32_t i = 0; i < r->replica_set_count; i++) s += 4 + 4 * (uint64_t)r->replica_sets[i].count;
    s += 4;
    for (uint32_t i = 0; i < r->topic_count; i++) {
        const wasmassign_topic *t = &r->topics[i];
        s += 4 + t->name.len + 16 + 1 + 4;
        if (t->placement) s += 12 * (uint64_t)t->partition_count;
    }
    s += 4;
    for (uint32_t i = 0; i < r->member_count; i++) {
        const wasmassign_member *m = &r->members[i];
        s += 20 + m->member_id.len + m->instance_id.len + m->client_id.len + m->client_host.len + m->rack.len;
        s += 1 + 4 + 4 * (uint64_t)m->topics.count + 4;
        s += tps_size(m->owned.items, m->owned.count) + 4 + m->user_data.len +
             tps_size(m->previous.items, m->previous.count);
    }
    return s;
}

void wasmassign_write_request(const wasmassign_request *r, uint8_t *d) {
    d = put_u32(d, WASMASSIGN_ABI_VERSION);
    d = put_bytes(d, r->group_id);
    d = put_u32(d, (uint32_t)r->generation);
    d = put_bytes(d, r->protocol);
    d = put_bytes(d, r->assignor);
    *d++ = r->rebalance_protocol;
    d = put_u32(d, (uint32_t)r->seed);
    d = put_u32(d, (uint32_t)(r->seed >> 32));
    d = put_u32(d, r->config_count);
    for (uint32_t i = 0; i < r->config_count; i++) {
        d = put_bytes(d, r->config[i].key);
        d = put_bytes(d, r->config[i].value);
    }
    d = put_u32(d, r->broker_count);
    for (uint32_t i = 0; i < r->broker_count; i++) {
        d = put_u32(d, (uint32_t)r->brokers[i].id);
        d = put_bytes(d, r->brokers[i].rack);
    }
    d = put_u32(d, r->replica_set_count);
    for (uint32_t i = 0; i < r->replica_set_count; i++) d = put_i32s(d, r->replica_sets[i]);
    d = put_u32(d, r->topic_count);
    for (uint32_t i = 0; i < r->topic_count; i++) {
        const wasmassign_topic *t = &r->topics[i];
        d = put_bytes(d, t->name);
        memcpy(d, t->topic_id, 16);
        d += 16;
        *d++ = (uint8_t)((t->exists ? 1 : 0) | (t->placement ? 2 : 0));
        d = put_u32(d, (uint32_t)t->partition_count);
        if (t->placement) {
            for (int32_t p = 0; p < t->partition_count; p++) {
                d = put_u32(d, (uint32_t)t->placement[p].leader);
                d = put_u32(d, t->placement[p].replicas);
                d = put_u32(d, t->placement[p].isr);
            }
        }
    }
    d = put_u32(d, r->member_count);
    for (uint32_t i = 0; i < r->member_count; i++) {
        const wasmassign_member *m = &r->members[i];
        d = put_bytes(d, m->member_id);
        d = put_bytes(d, m->instance_id);
        d = put_bytes(d, m->client_id);
        d = put_bytes(d, m->client_host);
        d = put_bytes(d, m->rack);
        *d++ = m->cooperative ? 1 : 0;
        d = put_i32s(d, m->topics);
        d = put_u32(d, (uint32_t)m->owned_generation);
        d = put_tps(d, m->owned.items, m->owned.count);
        d = put_bytes(d, m->user_data);
        d = put_tps(d, m->previous.items, m->previous.count);
    }
}

uint64_t wasmassign_response_size(const wasmassign_response *r) {
    if (r->error.len) return 4 + 1 + 4 + r->error.len;
    uint64_t s = 4 + 1 + 4;
    for (uint32_t i = 0; i < r->count; i++) {
        const wasmassign_assignment *a = &r->assignments[i];
        s += 4 + tps_size(a->partitions, a->partition_count) + 4 + a->user_data.len;
    }
    return s;
}

void wasmassign_write_response(const wasmassign_response *r, uint8_t *d) {
    d = put_u32(d, WASMASSIGN_ABI_VERSION);
    if (r->error.len) {
        *d++ = 1;
        put_bytes(d, r->error);
        return;
    }
    *d++ = 0;
    d = put_u32(d, r->count);
    for (uint32_t i = 0; i < r->count; i++) {
        const wasmassign_assignment *a = &r->assignments[i];
        d = put_u32(d, a->member);
        d = put_tps(d, a->partitions, a->partition_count);
        d = put_bytes(d, a->user_data);
    }
}

uint64_t wasmassign_description_size(const wasmassign_description *dd) {
    uint64_t s = 8;
    for (uint32_t i = 0; i < dd->count; i++) {
        const wasmassign_assignor_desc *a = &dd->assignors[i];
        s += 4 + a->name.len + 4 + a->version.len + 4 + 2 + 4 + a->description.len;
        for (uint32_t j = 0; j < a->protocol_count; j++) s += 4 + a->protocols[j].len;
    }
    return s;
}

void wasmassign_write_description(const wasmassign_description *dd, uint8_t *d) {
    d = put_u32(d, WASMASSIGN_ABI_VERSION);
    d = put_u32(d, dd->count);
    for (uint32_t i = 0; i < dd->count; i++) {
        const wasmassign_assignor_desc *a = &dd->assignors[i];
        d = put_bytes(d, a->name);
        d = put_bytes(d, a->version);
        d = put_u32(d, a->protocol_count);
        for (uint32_t j = 0; j < a->protocol_count; j++) d = put_bytes(d, a->protocols[j]);
        *d++ = a->modes;
        *d++ = a->may_leave_unassigned ? 1 : 0;
        d = put_bytes(d, a->description);
    }
}

/* ---------------------------------------------------------------------- */
/* The module: registration, errors, logging and the ABI's exports.         */

#define MAX_ASSIGNORS 32

/*
 * module is the state of this wasm instance. An instance is one
 * single-threaded program with one set of exports, so one static holds it;
 * natively (in tests) it serves the same functions.
 */
static struct {
    struct {
        const wasmassign_assignor_info *info;
        wasmassign_assign_fn fn;
        void *ctx;
    } assignors[MAX_ASSIGNORS];
    uint32_t count;
    wasmassign_arena arena;  /* reset at the start of every call */
    uint8_t *req;            /* the request buffer, kept across calls */
    uint32_t req_cap;
    uint8_t *out;            /* the response buffer, kept across calls */
    size_t out_cap;
    uint8_t *desc;           /* the encoded description, built once */
    uint32_t desc_len;
    wasmassign_str error;    /* the message of wasmassign_fail in this call */
} mod;

static wasmassign_str cstr(const char *s) {
    return (wasmassign_str){(const uint8_t *)s, s ? (uint32_t)strlen(s) : 0};
}

bool wasmassign_register(const wasmassign_assignor_info *info, wasmassign_assign_fn fn, void *ctx) {
    if (!info || !fn || !info->name || mod.count == MAX_ASSIGNORS) return false;
    for (uint32_t i = 0; i < mod.count; i++)
        if (strcmp(mod.assignors[i].info->name, info->name) == 0) return false;
    mod.assignors[mod.count].info = info;
    mod.assignors[mod.count].fn = fn;
    mod.assignors[mod.count].ctx = ctx;
    mod.count++;
    free(mod.desc);
    mod.desc = NULL;
    return true;
}

void *wasmassign_arena_alloc(size_t size) { return wasmassign_arena_take(&mod.arena, size); }

int wasmassign_fail(const char *msg, uint32_t len) {
    uint8_t *copy = len ? wasmassign_arena_alloc(len) : NULL;
    if (copy) {
        memcpy(copy, msg, len);
        mod.error = (wasmassign_str){copy, len};
    } else {
        mod.error = cstr("assignor failed (no message)");
    }
    return WASMASSIGN_ERROR;
}

int wasmassign_failf(const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *buf = n > 0 ? wasmassign_arena_alloc((size_t)n + 1) : NULL;
    if (buf) vsnprintf(buf, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return wasmassign_fail(buf, buf ? (uint32_t)n : 0);
}

#ifdef __wasm__
__attribute__((import_module("wasmassign"), import_name("log"))) void
wasmassign_host_log(int32_t level, const char *ptr, int32_t len);
#else
static void wasmassign_host_log(int32_t level, const char *ptr, int32_t len) {
    fprintf(stderr, "[%d] %.*s\n", level, (int)len, ptr);
}
#endif

void wasmassign_log(int32_t level, const char *msg, uint32_t len) {
    if (len) wasmassign_host_log(level, msg, (int32_t)len);
}

void wasmassign_logf(int32_t level, const char *fmt, ...) {
    char buf[1024]; /* the host cuts lines at 1 KiB anyway */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof buf) n = sizeof buf - 1;
    wasmassign_log(level, buf, (uint32_t)n);
}

static uint64_t packed(const uint8_t *p, uint32_t n) { return (uint64_t)(uintptr_t)p << 32 | n; }

/* encode_out writes resp into the module's response buffer, which grows to
 * the largest response served and is then reused. */
static uint64_t encode_out(const wasmassign_response *resp) {
    uint64_t n = wasmassign_response_size(resp);
    if (n > UINT32_MAX) return 0;
    if (n > mod.out_cap) {
        uint8_t *b = realloc(mod.out, (size_t)n);
        if (!b) return 0; /* the host reports an empty buffer as malformed */
        mod.out = b, mod.out_cap = (size_t)n;
    }
    wasmassign_write_response(resp, mod.out);
    return packed(mod.out, (uint32_t)n);
}

static uint64_t error_out(wasmassign_str msg) {
    wasmassign_response r = {0};
    /* A message cut at a buffer's end may end inside a UTF-8 sequence; the
     * host would reject it as malformed rather than show it. */
    while (msg.len > 0 && !utf8_valid(msg.ptr, msg.len)) msg.len--;
    r.error = msg.len ? msg : cstr("assignor failed");
    return encode_out(&r);
}

static uint64_t assign(const uint8_t *buf, uint32_t len) {
    wasmassign_arena_reset(&mod.arena);
    mod.error = (wasmassign_str){0};
    char err[256];
    wasmassign_request req;
    if (wasmassign_decode_request(buf, len, &mod.arena, &req, err, sizeof err) != 0)
        return error_out(cstr(err));
    int found = -1;
    if (req.assignor.len == 0 && mod.count == 1) found = 0;
    for (uint32_t i = 0; i < mod.count && found < 0; i++)
        if (wasmassign_str_cmp(cstr(mod.assignors[i].info->name), req.assignor) == 0) found = (int)i;
    if (found < 0) {
        wasmassign_failf("this module has no assignor \"%.*s\"", (int)req.assignor.len,
                         (const char *)req.assignor.ptr);
        return error_out(mod.error);
    }
    wasmassign_response resp = {0};
    int rc = mod.assignors[found].fn(&req, &resp, mod.assignors[found].ctx);
    if (rc != WASMASSIGN_OK || resp.error.len) {
        if (resp.error.len) return error_out(resp.error);
        if (mod.error.len) return error_out(mod.error);
        wasmassign_failf("assignor %s failed", mod.assignors[found].info->name);
        return error_out(mod.error);
    }
    return encode_out(&resp);
}

static uint64_t describe(void) {
    if (!mod.desc) {
        wasmassign_assignor_desc ds[MAX_ASSIGNORS];
        uint32_t nprotos = 0;
        for (uint32_t i = 0; i < mod.count; i++) nprotos += mod.assignors[i].info->protocol_count;
        wasmassign_str *protos = malloc(sizeof *protos * (nprotos ? nprotos : 1));
        if (!protos) return 0;
        wasmassign_str *p = protos;
        for (uint32_t i = 0; i < mod.count; i++) {
            const wasmassign_assignor_info *in = mod.assignors[i].info;
            for (uint32_t j = 0; j < in->protocol_count; j++) p[j] = cstr(in->protocols[j]);
            ds[i] = (wasmassign_assignor_desc){cstr(in->name), cstr(in->version), p, in->protocol_count,
                                               in->modes, in->may_leave_unassigned, cstr(in->description)};
            p += in->protocol_count;
        }
        wasmassign_description d = {ds, mod.count};
        uint64_t n = wasmassign_description_size(&d);
        mod.desc = malloc((size_t)n);
        if (mod.desc) wasmassign_write_description(&d, mod.desc);
        free(protos);
        if (!mod.desc) return 0;
        mod.desc_len = (uint32_t)n;
    }
    return packed(mod.desc, mod.desc_len);
}

#ifdef __wasm__
#define EXPORT(name) __attribute__((export_name(name), visibility("default")))

EXPORT("wasmassign_abi_version") int32_t wasmassign_abi_version(void) { return WASMASSIGN_ABI_VERSION; }

/* One request buffer, grown to the largest request and then reused: the
 * host has at most one outstanding (sdk/ABI.md section 1). */
EXPORT("wasmassign_alloc") uint32_t wasmassign_alloc(int32_t size) {
    if (size <= 0) return 0;
    if ((uint32_t)size > mod.req_cap) {
        free(mod.req);
        mod.req = malloc((size_t)size);
        mod.req_cap = mod.req ? (uint32_t)size : 0;
        if (!mod.req) return 0;
    }
    return (uint32_t)(uintptr_t)mod.req;
}

/* The request buffer stays with the module for the next call. */
EXPORT("wasmassign_free") void wasmassign_free(uint32_t ptr, int32_t size) {
    (void)ptr;
    (void)size;
}

EXPORT("wasmassign_describe") uint64_t wasmassign_describe(void) { return describe(); }

EXPORT("wasmassign_assign") uint64_t wasmassign_assign(uint32_t ptr, int32_t len) {
    if (!mod.req || ptr != (uint32_t)(uintptr_t)mod.req || len < 0 || (uint32_t)len > mod.req_cap) {
        wasmassign_arena_reset(&mod.arena);
        return error_out(cstr("wasmassign_assign: the request buffer was not returned by wasmassign_alloc "
                              "with at least that size"));
    }
    return assign(mod.req, (uint32_t)len);
}
#else
/* Native builds (the SDK's tests) reach the module through these. */
uint64_t wasmassign_native_assign(const uint8_t *buf, uint32_t len);
uint64_t wasmassign_native_assign(const uint8_t *buf, uint32_t len) { return assign(buf, len); }
uint64_t wasmassign_native_describe(void);
uint64_t wasmassign_native_describe(void) { return describe(); }
#endif

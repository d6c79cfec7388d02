/*
 * wasmassign.h: the wasmassign plugin ABI, version 1, for freestanding C.
 *
 * Written from sdk/ABI.md alone, to show that the ABI needs no library and no
 * libc: this header is the request decoder, the response and description
 * encoders, and a memory manager, for a guest built with
 *
 *   clang-14 --target=wasm32 -mbulk-memory -ffreestanding -nostdlib -Wl,--no-entry
 *
 * It must never include anything beyond the compiler's own freestanding
 * headers (stdint.h, stddef.h): there is no libc and no WASI.
 *
 * Header-only (every function is static) because a guest is one translation
 * unit. Include it from exactly one .c file.
 *
 * # Memory
 *
 * The heap, which starts at the linker's __heap_base, holds two regions:
 *
 *   [ request buffer (req_cap bytes) ][ arena: decoded request, scratch, response ]
 *
 * wasmassign_alloc hands out the request buffer, growing it (and moving the
 * empty arena up) when a request is larger than any before. Every
 * wasmassign_assign starts by resetting the arena, so memory stops growing
 * once the largest request has been served: the same request a thousand
 * times costs no new page. The response lives in the arena until the next
 * call, which is as long as sdk/ABI.md asks.
 *
 * Only one host buffer can be outstanding at a time, which is all that the
 * call sequence of sdk/ABI.md section 1 needs; a second wasmassign_alloc
 * before the matching wasmassign_free returns 0.
 */
#ifndef WASMASSIGN_H
#define WASMASSIGN_H

#include <stddef.h>
#include <stdint.h>

#define WA_ABI_VERSION 1u
#define WA_EXPORT(name) __attribute__((export_name(name), visibility("default")))

/* The optional host import: one UTF-8 line at a log/slog level. */
__attribute__((import_module("wasmassign"), import_name("log")))
void wa_host_log(int32_t level, const char *ptr, int32_t len);

enum { WA_LOG_DEBUG = -4, WA_LOG_INFO = 0, WA_LOG_WARN = 4, WA_LOG_ERROR = 8 };

/* ---------------------------------------------------------------------- */
/* Small freestanding helpers                                               */

static inline void wa_copy(uint8_t *dst, const uint8_t *src, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) dst[i] = src[i];
}

static inline void wa_zero(void *dst, uint64_t n) {
    uint8_t *d = dst;
    for (uint64_t i = 0; i < n; i++) d[i] = 0;
}

static inline uint32_t wa_cstrlen(const char *s) {
    uint32_t n = 0;
    while (s[n]) n++;
    return n;
}

static inline uint32_t wa_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---------------------------------------------------------------------- */
/* Memory                                                                   */

extern unsigned char __heap_base;

#define WA_PAGE 65536u
#define WA_MEM_LIMIT 0x100000000ull /* wasm32 address space */

/*
 * The allocator's state. A module instance is single-threaded and lives for
 * one plugin, so plain statics are the natural home for it.
 */
static uint32_t wa_req_cap;  /* bytes reserved for the request buffer */
static int wa_req_busy;      /* the host holds the request buffer */
static uint64_t wa_arena_top; /* next free arena byte */

static inline uint32_t wa_heap(void) { return ((uint32_t)(uintptr_t)&__heap_base + 7u) & ~7u; }

static inline uint64_t wa_memory_bytes(void) {
    return (uint64_t)__builtin_wasm_memory_size(0) * WA_PAGE;
}

/* wa_ensure makes linear memory at least end bytes long. */
static inline int wa_ensure(uint64_t end) {
    if (end > WA_MEM_LIMIT) return 0;
    uint64_t have = wa_memory_bytes();
    if (end <= have) return 1;
    uint64_t pages = (end - have + WA_PAGE - 1) / WA_PAGE;
    return __builtin_wasm_memory_grow(0, (size_t)pages) != (size_t)-1;
}

static inline void wa_arena_reset(void) { wa_arena_top = (uint64_t)wa_heap() + wa_req_cap; }

/* wa_arena_alloc returns n bytes aligned to 8, or NULL when memory is full. */
static inline void *wa_arena_alloc(uint64_t n) {
    uint64_t start = (wa_arena_top + 7u) & ~(uint64_t)7u;
    if (n > WA_MEM_LIMIT || start + n > WA_MEM_LIMIT || !wa_ensure(start + n)) return NULL;
    wa_arena_top = start + n;
    /* Address 0 is never in the arena (it starts at __heap_base), so a
     * zero-length allocation still gets a non-NULL pointer. */
    return (void *)(uintptr_t)start;
}

WA_EXPORT("wasmassign_alloc")
uint32_t wasmassign_alloc(uint32_t size) {
    if (wa_req_busy) return 0;
    if (size > wa_req_cap) {
        uint64_t cap = ((uint64_t)size + WA_PAGE - 1) / WA_PAGE * WA_PAGE;
        if (!wa_ensure((uint64_t)wa_heap() + cap)) return 0;
        wa_req_cap = (uint32_t)cap;
    }
    wa_req_busy = 1;
    return wa_heap();
}

WA_EXPORT("wasmassign_free")
void wasmassign_free(uint32_t ptr, uint32_t size) {
    (void)size;
    if (ptr == wa_heap()) wa_req_busy = 0;
}

WA_EXPORT("wasmassign_abi_version")
int32_t wasmassign_abi_version(void) { return (int32_t)WA_ABI_VERSION; }

static inline uint64_t wa_packed(const void *ptr, uint32_t len) {
    return (uint64_t)(uint32_t)(uintptr_t)ptr << 32 | len;
}

/* ---------------------------------------------------------------------- */
/* Strings and the request model                                            */

/* wa_str is a byte string inside the request buffer. */
typedef struct {
    const uint8_t *p;
    uint32_t n;
} wa_str;

/* wa_str_cmp orders byte strings bytewise, a shorter prefix first. */
static inline int wa_str_cmp(wa_str a, wa_str b) {
    uint32_t n = a.n < b.n ? a.n : b.n;
    for (uint32_t i = 0; i < n; i++)
        if (a.p[i] != b.p[i]) return a.p[i] < b.p[i] ? -1 : 1;
    return a.n < b.n ? -1 : a.n > b.n;
}

static inline int wa_str_eq(wa_str a, const char *b) {
    wa_str s = {(const uint8_t *)b, wa_cstrlen(b)};
    return wa_str_cmp(a, s) == 0;
}

/* wa_i32s is a validated list of little-endian i32 inside the request. */
typedef struct {
    const uint8_t *p;
    uint32_t count;
} wa_i32s;

static inline int32_t wa_i32s_at(wa_i32s v, uint32_t i) { return (int32_t)wa_le32(v.p + 4 * i); }

/* wa_tps is a validated topic-partitions list inside the request; walk it with
 * wa_tps_next. */
typedef struct {
    const uint8_t *p;
    uint32_t count;
} wa_tps;

/* wa_tps_next reads the entry at *p and moves *p past it. */
static inline uint32_t wa_tps_next(const uint8_t **p, wa_i32s *partitions) {
    uint32_t topic = wa_le32(*p);
    partitions->count = wa_le32(*p + 4);
    partitions->p = *p + 8;
    *p += 8 + 4 * (uint64_t)partitions->count;
    return topic;
}

typedef struct {
    wa_str key, value;
} wa_config;

typedef struct {
    int32_t id;
    wa_str rack;
} wa_broker;

typedef struct {
    wa_str name;
    const uint8_t *topic_id; /* 16 bytes */
    int exists;
    uint32_t partition_count; /* at most INT32_MAX */
    /* NULL, or partition_count × (i32 leader, u32 replicas, u32 isr); the
     * replica-set indices are checked. */
    const uint8_t *placement;
} wa_topic;

typedef struct {
    wa_str member_id, instance_id, client_id, client_host, rack;
    int cooperative;
    wa_i32s topics; /* checked: strictly ascending indices below topic_count */
    int32_t owned_generation;
    wa_tps owned;
    wa_str user_data;
    wa_tps previous;
} wa_member;

typedef struct {
    wa_str group_id;
    int32_t generation;
    wa_str protocol, assignor;
    uint8_t rebalance_protocol; /* 0 eager, 1 cooperative */
    uint64_t seed;
    uint32_t config_count;
    wa_config *config;
    uint32_t broker_count;
    wa_broker *brokers;
    uint32_t replica_set_count;
    wa_i32s *replica_sets;
    uint32_t topic_count;
    wa_topic *topics;
    uint32_t member_count;
    wa_member *members;
} wa_request;

/* ---------------------------------------------------------------------- */
/* Request decoder                                                          */

/*
 * wa_reader walks the request. The first failure sticks and moves the offset
 * to the end, so the decoder reads on without checking after every field and
 * never reads past len.
 */
typedef struct {
    const uint8_t *b;
    uint32_t len, off;
    const char *problem; /* NULL while all is well */
    const char *field;
    uint32_t at;  /* offset of the failure */
    int oom;      /* the arena ran out, not a malformed request */
} wa_reader;

static inline void wa_fail(wa_reader *r, const char *problem, const char *field) {
    if (!r->problem) {
        r->problem = problem;
        r->field = field;
        r->at = r->off;
    }
    r->off = r->len;
}

static inline int wa_need(wa_reader *r, uint64_t n, const char *field) {
    if (r->problem) return 0;
    if (n > (uint64_t)(r->len - r->off)) {
        wa_fail(r, "truncated", field);
        return 0;
    }
    return 1;
}

static inline uint8_t wa_u8(wa_reader *r, const char *field) {
    if (!wa_need(r, 1, field)) return 0;
    return r->b[r->off++];
}

static inline uint32_t wa_u32(wa_reader *r, const char *field) {
    if (!wa_need(r, 4, field)) return 0;
    uint32_t v = wa_le32(r->b + r->off);
    r->off += 4;
    return v;
}

static inline uint64_t wa_u64(wa_reader *r, const char *field) {
    uint64_t lo = wa_u32(r, field);
    uint64_t hi = wa_u32(r, field);
    return hi << 32 | lo;
}

/* wa_count reads a u32 count and rejects it when the rest of the buffer could
 * not hold that many elements of at least min_size bytes, so a forged count
 * never makes the decoder allocate more than the buffer could describe. */
static inline uint32_t wa_count(wa_reader *r, uint32_t min_size, const char *field) {
    uint32_t n = wa_u32(r, field);
    if (r->problem) return 0;
    if ((uint64_t)n * min_size > (uint64_t)(r->len - r->off)) {
        r->off -= 4;
        wa_fail(r, "count too large for the remaining bytes:", field);
        return 0;
    }
    return n;
}

static inline wa_str wa_bytes(wa_reader *r, const char *field) {
    wa_str s = {r->b, 0};
    uint32_t n = wa_count(r, 1, field);
    if (r->problem) return s;
    s.p = r->b + r->off;
    s.n = n;
    r->off += n;
    return s;
}

static inline wa_i32s wa_int32s(wa_reader *r, const char *field) {
    wa_i32s v = {r->b, 0};
    uint32_t n = wa_count(r, 4, field);
    if (r->problem) return v;
    v.p = r->b + r->off;
    v.count = n;
    r->off += 4 * n;
    return v;
}

static inline void *wa_reader_alloc(wa_reader *r, uint64_t n) {
    if (r->problem) return NULL;
    void *p = wa_arena_alloc(n);
    if (!p) {
        r->oom = 1;
        wa_fail(r, "out of memory decoding", "request");
    }
    return p;
}

static inline wa_tps wa_topic_partitions(wa_reader *r, uint32_t topic_count, const char *field) {
    wa_tps v = {r->b, 0};
    uint32_t n = wa_count(r, 8, field);
    if (r->problem) return v;
    v.p = r->b + r->off;
    v.count = n;
    for (uint32_t i = 0; i < n && !r->problem; i++) {
        if (wa_u32(r, field) >= topic_count && !r->problem) {
            r->off -= 4;
            wa_fail(r, "topic index out of range in", field);
        }
        wa_int32s(r, field);
    }
    return v;
}

/*
 * wa_decode_request decodes and checks a whole request, with no pointer into
 * anything but b[0..len). On failure it returns 0 and leaves the reason in r.
 * Strings are not checked for valid UTF-8: this guest only compares them.
 */
static inline int wa_decode_request(wa_reader *r, const uint8_t *b, uint32_t len, wa_request *q) {
    r->b = b;
    r->len = len;
    r->off = 0;
    r->problem = NULL;
    r->oom = 0;
    wa_zero(q, sizeof *q);

    uint32_t version = wa_u32(r, "version");
    if (!r->problem && version != WA_ABI_VERSION) {
        r->off = 0;
        wa_fail(r, "unsupported version in", "request");
        return 0;
    }
    q->group_id = wa_bytes(r, "group id");
    q->generation = (int32_t)wa_u32(r, "generation");
    q->protocol = wa_bytes(r, "protocol");
    q->assignor = wa_bytes(r, "assignor");
    q->rebalance_protocol = wa_u8(r, "rebalance protocol");
    if (!r->problem && q->rebalance_protocol > 1) {
        r->off -= 1;
        wa_fail(r, "unknown value of", "rebalance protocol");
    }
    q->seed = wa_u64(r, "seed");

    q->config_count = wa_count(r, 8, "config");
    q->config = wa_reader_alloc(r, (uint64_t)q->config_count * sizeof(wa_config));
    for (uint32_t i = 0; i < q->config_count && !r->problem; i++) {
        uint32_t at = r->off;
        q->config[i].key = wa_bytes(r, "config key");
        q->config[i].value = wa_bytes(r, "config value");
        if (!r->problem && i > 0 && wa_str_cmp(q->config[i - 1].key, q->config[i].key) >= 0) {
            r->off = at;
            wa_fail(r, "keys not ascending and unique:", "config key");
        }
    }

    q->broker_count = wa_count(r, 8, "brokers");
    q->brokers = wa_reader_alloc(r, (uint64_t)q->broker_count * sizeof(wa_broker));
    for (uint32_t i = 0; i < q->broker_count && !r->problem; i++) {
        q->brokers[i].id = (int32_t)wa_u32(r, "broker id");
        q->brokers[i].rack = wa_bytes(r, "broker rack");
    }

    q->replica_set_count = wa_count(r, 4, "replica sets");
    q->replica_sets = wa_reader_alloc(r, (uint64_t)q->replica_set_count * sizeof(wa_i32s));
    for (uint32_t i = 0; i < q->replica_set_count && !r->problem; i++)
        q->replica_sets[i] = wa_int32s(r, "replica set");

    q->topic_count = wa_count(r, 4 + 16 + 1 + 4, "topics");
    q->topics = wa_reader_alloc(r, (uint64_t)q->topic_count * sizeof(wa_topic));
    for (uint32_t i = 0; i < q->topic_count && !r->problem; i++) {
        wa_topic *t = &q->topics[i];
        t->name = wa_bytes(r, "topic name");
        if (wa_need(r, 16, "topic id")) {
            t->topic_id = r->b + r->off;
            r->off += 16;
        }
        uint8_t flags = wa_u8(r, "topic flags");
        uint32_t pc = wa_u32(r, "partition count");
        if (r->problem) break;
        uint32_t at = r->off - 5;
        if (flags & ~3u) {
            r->off = at;
            wa_fail(r, "unknown bits in", "topic flags");
        } else if (pc > 0x7fffffffu) {
            r->off = at + 1;
            wa_fail(r, "out of range:", "partition count");
        } else if (!(flags & 1u) && (pc != 0 || (flags & 2u))) {
            r->off = at;
            wa_fail(r, "partitions of a topic that does not exist:", "topic flags");
        }
        t->exists = flags & 1u;
        t->partition_count = pc;
        t->placement = NULL;
        if ((flags & 2u) && wa_need(r, 12 * (uint64_t)pc, "partition placement")) {
            t->placement = r->b + r->off;
            for (uint32_t p = 0; p < pc; p++) {
                const uint8_t *e = t->placement + 12 * p;
                if (wa_le32(e + 4) >= q->replica_set_count || wa_le32(e + 8) >= q->replica_set_count) {
                    r->off += 12 * p;
                    wa_fail(r, "replica set index out of range in", "partition placement");
                    break;
                }
            }
            if (!r->problem) r->off += 12 * pc;
        }
    }

    q->member_count = wa_count(r, 5 * 4 + 1 + 4 + 4 + 4 + 4 + 4, "members");
    q->members = wa_reader_alloc(r, (uint64_t)q->member_count * sizeof(wa_member));
    for (uint32_t i = 0; i < q->member_count && !r->problem; i++) {
        wa_member *m = &q->members[i];
        m->member_id = wa_bytes(r, "member id");
        m->instance_id = wa_bytes(r, "instance id");
        m->client_id = wa_bytes(r, "client id");
        m->client_host = wa_bytes(r, "client host");
        m->rack = wa_bytes(r, "member rack");
        uint8_t flags = wa_u8(r, "member flags");
        if (!r->problem && (flags & ~1u)) {
            r->off -= 1;
            wa_fail(r, "unknown bits in", "member flags");
        }
        m->cooperative = flags & 1u;
        uint32_t at = r->off + 4;
        m->topics = wa_int32s(r, "subscribed topics");
        for (uint32_t k = 0; k < m->topics.count && !r->problem; k++) {
            uint32_t t = (uint32_t)wa_i32s_at(m->topics, k);
            if (t >= q->topic_count || (k > 0 && t <= (uint32_t)wa_i32s_at(m->topics, k - 1))) {
                r->off = at + 4 * k;
                wa_fail(r, t >= q->topic_count ? "topic index out of range in"
                                               : "indices not strictly ascending in",
                        "subscribed topics");
            }
        }
        m->owned_generation = (int32_t)wa_u32(r, "owned generation");
        m->owned = wa_topic_partitions(r, q->topic_count, "owned partitions");
        m->user_data = wa_bytes(r, "user data");
        m->previous = wa_topic_partitions(r, q->topic_count, "previous assignment");
    }

    if (!r->problem && r->off != r->len) wa_fail(r, "trailing bytes after", "members");
    return r->problem == NULL;
}

/* ---------------------------------------------------------------------- */
/* Encoders                                                                 */

/* wa_writer fills a buffer whose size the caller computed in advance; a
 * write past cap is a bug in that computation, so it is dropped and flagged
 * rather than corrupting memory. */
typedef struct {
    uint8_t *p;
    uint32_t off, cap;
    int overflow;
} wa_writer;

static inline void wa_put(wa_writer *w, const void *src, uint32_t n) {
    if (n > w->cap - w->off) {
        w->overflow = 1;
        return;
    }
    wa_copy(w->p + w->off, src, n);
    w->off += n;
}

static inline void wa_put_u8(wa_writer *w, uint8_t v) { wa_put(w, &v, 1); }

static inline void wa_put_u32(wa_writer *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    wa_put(w, b, 4);
}

static inline void wa_patch_u32(wa_writer *w, uint32_t at, uint32_t v) {
    if (at + 4 > w->off) return;
    w->p[at] = (uint8_t)v;
    w->p[at + 1] = (uint8_t)(v >> 8);
    w->p[at + 2] = (uint8_t)(v >> 16);
    w->p[at + 3] = (uint8_t)(v >> 24);
}

static inline void wa_put_str(wa_writer *w, const char *s, uint32_t n) {
    wa_put_u32(w, n);
    wa_put(w, s, n);
}

static inline void wa_put_cstr(wa_writer *w, const char *s) { wa_put_str(w, s, wa_cstrlen(s)); }

/* The description of one assignor (sdk/ABI.md section 4). */
typedef struct {
    const char *name, *version;
    const char *const *protocols;
    uint32_t protocol_count;
    uint8_t modes; /* bit 0 eager, bit 1 cooperative */
    uint8_t flags; /* bit 0 may leave subscribed partitions unassigned */
    const char *description;
} wa_assignor_info;

enum { WA_MODE_EAGER = 1, WA_MODE_COOPERATIVE = 2 };

/* wa_encode_description writes a description of n assignors into w. */
static inline void wa_encode_description(wa_writer *w, const wa_assignor_info *a, uint32_t n) {
    wa_put_u32(w, WA_ABI_VERSION);
    wa_put_u32(w, n);
    for (uint32_t i = 0; i < n; i++) {
        wa_put_cstr(w, a[i].name);
        wa_put_cstr(w, a[i].version);
        wa_put_u32(w, a[i].protocol_count);
        for (uint32_t k = 0; k < a[i].protocol_count; k++) wa_put_cstr(w, a[i].protocols[k]);
        wa_put_u8(w, a[i].modes);
        wa_put_u8(w, a[i].flags);
        wa_put_cstr(w, a[i].description);
    }
}

/* Error responses are built in static buffers, so that a guest out of arena
 * memory can still say so. Messages longer than the buffer are cut. */
#define WA_MSG_MAX 400

typedef struct {
    char buf[WA_MSG_MAX];
    uint32_t n;
} wa_msg;

static inline void wa_msg_add(wa_msg *m, const char *s, uint32_t n) {
    for (uint32_t i = 0; i < n && m->n < WA_MSG_MAX; i++) m->buf[m->n++] = s[i];
}

static inline void wa_msg_cstr(wa_msg *m, const char *s) { wa_msg_add(m, s, wa_cstrlen(s)); }

static inline void wa_msg_u64(wa_msg *m, uint64_t v) {
    char d[20];
    uint32_t n = 0;
    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) wa_msg_add(m, &d[--n], 1);
}

/* wa_msg_quoted appends s in double quotes, with bytes outside printable
 * ASCII as \xNN, so a hostile name cannot break the line. */
static inline void wa_msg_quoted(wa_msg *m, wa_str s) {
    static const char hex[] = "0123456789abcdef";
    wa_msg_add(m, "\"", 1);
    for (uint32_t i = 0; i < s.n && i < 100; i++) {
        uint8_t c = s.p[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            wa_msg_add(m, (const char *)&c, 1);
        } else {
            char e[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
            wa_msg_add(m, e, 4);
        }
    }
    if (s.n > 100) wa_msg_cstr(m, "...");
    wa_msg_add(m, "\"", 1);
}

static inline void wa_log_msg(int32_t level, const wa_msg *m) { wa_host_log(level, m->buf, (int32_t)m->n); }

static uint8_t wa_error_buf[4 + 1 + 4 + WA_MSG_MAX];

/* wa_error_response encodes a status-1 response carrying m (sdk/ABI.md
 * section 5) and returns it packed. */
static inline uint64_t wa_error_response(const wa_msg *m) {
    wa_writer w = {wa_error_buf, 0, sizeof wa_error_buf, 0};
    wa_put_u32(&w, WA_ABI_VERSION);
    wa_put_u8(&w, 1);
    if (m->n == 0) {
        wa_put_cstr(&w, "unknown error"); /* the ABI forbids an empty message */
    } else {
        wa_put_str(&w, m->buf, m->n);
    }
    return wa_packed(w.p, w.off);
}

/* wa_request_error turns a failed decode into an error response. */
static inline uint64_t wa_request_error(const char *assignor, const wa_reader *r) {
    wa_msg m = {{0}, 0};
    wa_msg_cstr(&m, assignor);
    wa_msg_cstr(&m, r->oom ? ": " : ": malformed request: ");
    wa_msg_cstr(&m, r->problem);
    wa_msg_cstr(&m, " ");
    wa_msg_cstr(&m, r->field);
    wa_msg_cstr(&m, " at byte ");
    wa_msg_u64(&m, r->at);
    return wa_error_response(&m);
}

/* ---------------------------------------------------------------------- */
/* Sorting                                                                  */

typedef int (*wa_cmp_fn)(const void *ctx, uint32_t a, uint32_t b);

/*
 * wa_sort sorts the indices in a[0..n) by cmp, stably (equal elements keep
 * their order), with tmp[0..n) as scratch: a bottom-up merge sort, O(n log n).
 * n is below 2^28 here (each element costs the request at least 4 bytes), so
 * the widths never overflow.
 */
static inline void wa_sort(uint32_t *a, uint32_t *tmp, uint32_t n, wa_cmp_fn cmp, const void *ctx) {
    uint32_t *src = a, *dst = tmp;
    for (uint32_t width = 1; width < n; width *= 2) {
        for (uint32_t lo = 0; lo < n; lo += 2 * width) {
            uint32_t mid = lo + width < n ? lo + width : n;
            uint32_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            uint32_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) dst[k++] = cmp(ctx, src[j], src[i]) < 0 ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        for (uint32_t i = 0; i < n; i++) a[i] = src[i];
}

#endif /* WASMASSIGN_H */

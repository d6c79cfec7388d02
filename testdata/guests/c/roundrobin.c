/*
 * roundrobin.c: Kafka's RoundRobinAssignor as a wasmassign plugin written in
 * freestanding C, to prove that sdk/ABI.md is all a guest needs. It uses no
 * libc and no WASI; its only import is the optional wasmassign.log.
 *
 * Build (see Makefile):
 *   clang-14 --target=wasm32 -O2 -mbulk-memory -ffreestanding -nostdlib \
 *     -Wl,--no-entry -Wl,--strip-all -o roundrobin.wasm roundrobin.c
 *
 * The algorithm, as Kafka's RoundRobinAssignor defines it:
 *   - members in Kafka's order: static members (with an instance id) first,
 *     sorted by instance id, then dynamic members sorted by member id,
 *     comparing bytes; equal keys keep the request's order;
 *   - every partition of every subscribed topic, topics sorted by name, then
 *     partitions ascending; topics that do not exist or have no partitions
 *     are skipped;
 *   - a circular iterator over the sorted members, carried over from one
 *     topic to the next: each partition goes to the next member that
 *     subscribes to its topic, and the iterator moves past that member.
 *
 * The request's members already come in Kafka's order (sdk/ABI.md section
 * 3); sorting again costs little and keeps this file correct on its own.
 */
#include "wasmassign.h"

#define ASSIGNOR "c-roundrobin"

static const char *const protocols[] = {ASSIGNOR};

static const wa_assignor_info info = {
    .name = ASSIGNOR,
    .version = "1.0.0",
    .protocols = protocols,
    .protocol_count = 1,
    .modes = WA_MODE_EAGER | WA_MODE_COOPERATIVE,
    .flags = 0,
    .description = "Kafka round-robin assignment, written in C",
};

static uint8_t description_buf[256];

WA_EXPORT("wasmassign_describe")
uint64_t wasmassign_describe(void) {
    wa_writer w = {description_buf, 0, sizeof description_buf, 0};
    wa_encode_description(&w, &info, 1);
    if (w.overflow) __builtin_trap(); /* a bug in this file, not in a request */
    return wa_packed(w.p, w.off);
}

/* member_cmp orders member indices the way Kafka sorts MemberInfo. */
static int member_cmp(const void *ctx, uint32_t a, uint32_t b) {
    const wa_member *x = &((const wa_member *)ctx)[a];
    const wa_member *y = &((const wa_member *)ctx)[b];
    int xs = x->instance_id.n > 0, ys = y->instance_id.n > 0;
    if (xs && ys) return wa_str_cmp(x->instance_id, y->instance_id);
    if (xs != ys) return xs ? -1 : 1;
    return wa_str_cmp(x->member_id, y->member_id);
}

static int topic_cmp(const void *ctx, uint32_t a, uint32_t b) {
    const wa_topic *t = ctx;
    return wa_str_cmp(t[a].name, t[b].name);
}

/* The state of one assignment, all of it in the arena. Positions ("pos") are
 * indices into the sorted member order. */
typedef struct {
    const wa_request *q;
    uint32_t *order;      /* pos -> member index */
    uint32_t *rank;       /* member index -> pos */
    uint32_t *sub_start;  /* topic -> first entry in sub_pos; topic_count+1 entries */
    uint32_t *sub_pos;    /* per topic, the ascending positions of its subscribers */
    uint32_t *topics;     /* the topics to assign, sorted by name */
    uint32_t ntopics;
    uint64_t npartitions; /* partitions of those topics */
    uint32_t *per_member; /* pos -> partitions received (then: fill cursor) */
    uint32_t *start;      /* pos -> first entry in got_topic/got_partition */
    uint32_t *got_topic;
    uint32_t *got_partition;
} plan;

/*
 * walk runs the circular iterator over every partition. When got_topic is
 * NULL it only counts each member's partitions; otherwise it records them.
 *
 * Within one topic the iterator visits exactly that topic's subscribers in
 * position order, so instead of stepping over non-subscribers one by one it
 * finds the first subscriber at or after the iterator (binary search) and
 * cycles through the topic's subscriber list: O(partitions + members).
 */
static void walk(plan *pl) {
    uint32_t members = pl->q->member_count;
    uint32_t cur = 0; /* the iterator: the next position to consider */
    for (uint32_t k = 0; k < pl->ntopics; k++) {
        uint32_t t = pl->topics[k];
        const uint32_t *subs = pl->sub_pos + pl->sub_start[t];
        uint32_t nsubs = pl->sub_start[t + 1] - pl->sub_start[t];
        uint32_t lo = 0, hi = nsubs;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (subs[mid] < cur) lo = mid + 1;
            else hi = mid;
        }
        uint32_t i = lo == nsubs ? 0 : lo;
        uint32_t last = 0;
        for (uint32_t p = 0; p < pl->q->topics[t].partition_count; p++) {
            last = subs[i];
            if (pl->got_topic) {
                uint32_t at = pl->start[last] + pl->per_member[last]++;
                pl->got_topic[at] = t;
                pl->got_partition[at] = p;
            } else {
                pl->per_member[last]++;
            }
            if (++i == nsubs) i = 0;
        }
        cur = last + 1 == members ? 0 : last + 1;
    }
}

static uint64_t out_of_memory(const char *what, uint64_t n) {
    wa_msg m = {{0}, 0};
    wa_msg_cstr(&m, ASSIGNOR ": out of memory: ");
    wa_msg_u64(&m, n);
    wa_msg_cstr(&m, " ");
    wa_msg_cstr(&m, what);
    return wa_error_response(&m);
}

#define ALLOC(var, n, what)                                             \
    do {                                                                \
        (var) = wa_arena_alloc((uint64_t)(n) * sizeof *(var));          \
        if (!(var)) return out_of_memory(what, (uint64_t)(n));          \
    } while (0)

static uint64_t round_robin(const wa_request *q) {
    plan pl;
    wa_zero(&pl, sizeof pl);
    pl.q = q;
    uint32_t nm = q->member_count, nt = q->topic_count;

    uint32_t *tmp;
    uint32_t scratch = nm > nt ? nm : nt;
    ALLOC(tmp, scratch, "members and topics");

    ALLOC(pl.order, nm, "members");
    ALLOC(pl.rank, nm, "members");
    for (uint32_t i = 0; i < nm; i++) pl.order[i] = i;
    wa_sort(pl.order, tmp, nm, member_cmp, q->members);
    for (uint32_t pos = 0; pos < nm; pos++) pl.rank[pl.order[pos]] = pos;

    /* Subscriber lists per topic, by counting sort; filling them in position
     * order leaves every list ascending. */
    ALLOC(pl.sub_start, (uint64_t)nt + 1, "topics");
    wa_zero(pl.sub_start, ((uint64_t)nt + 1) * sizeof *pl.sub_start);
    uint32_t nsubs = 0;
    for (uint32_t i = 0; i < nm; i++) {
        wa_i32s s = q->members[i].topics;
        for (uint32_t k = 0; k < s.count; k++) pl.sub_start[wa_i32s_at(s, k) + 1]++;
        nsubs += s.count;
    }
    for (uint32_t t = 0; t < nt; t++) pl.sub_start[t + 1] += pl.sub_start[t];
    ALLOC(pl.sub_pos, nsubs, "subscriptions");
    for (uint32_t t = 0; t < nt; t++) tmp[t] = pl.sub_start[t];
    for (uint32_t pos = 0; pos < nm; pos++) {
        wa_i32s s = q->members[pl.order[pos]].topics;
        for (uint32_t k = 0; k < s.count; k++) pl.sub_pos[tmp[wa_i32s_at(s, k)]++] = pos;
    }

    /* Kafka skips topics missing from metadata or without partitions. */
    ALLOC(pl.topics, nt, "topics");
    for (uint32_t t = 0; t < nt; t++) {
        const wa_topic *tp = &q->topics[t];
        if (tp->exists && tp->partition_count > 0 && pl.sub_start[t + 1] > pl.sub_start[t]) {
            pl.topics[pl.ntopics++] = t;
            pl.npartitions += tp->partition_count;
        }
    }
    wa_sort(pl.topics, tmp, pl.ntopics, topic_cmp, q->topics);

    /* Partition counts come from the request, not from its size: a few bytes
     * can ask for 2^31 partitions, so everything sized by them is checked. */
    if (pl.npartitions > 0x3fffffffu) return out_of_memory("partitions", pl.npartitions);
    uint32_t *got_topic, *got_partition;
    ALLOC(got_topic, pl.npartitions, "partitions");
    ALLOC(got_partition, pl.npartitions, "partitions");
    ALLOC(pl.per_member, nm, "members");
    ALLOC(pl.start, nm, "members");
    wa_zero(pl.per_member, (uint64_t)nm * sizeof *pl.per_member);
    walk(&pl); /* count */
    uint32_t next = 0;
    for (uint32_t pos = 0; pos < nm; pos++) {
        pl.start[pos] = next;
        next += pl.per_member[pos];
        pl.per_member[pos] = 0;
    }
    pl.got_topic = got_topic;
    pl.got_partition = got_partition;
    walk(&pl); /* record */

    /* The response: every member that received something, in request order,
     * its partitions grouped by topic in name order, partitions ascending.
     * Each member costs at most 12 bytes of header, and each partition at
     * most 4 bytes plus 8 when it starts a new topic group. */
    uint64_t bound = 4 + 1 + 4 + 12 * (uint64_t)nm + 12 * pl.npartitions;
    uint8_t *out;
    ALLOC(out, bound, "response bytes");
    wa_writer w = {out, 0, (uint32_t)bound, 0};
    wa_put_u32(&w, WA_ABI_VERSION);
    wa_put_u8(&w, 0);
    uint32_t count_at = w.off, count = 0;
    wa_put_u32(&w, 0);
    for (uint32_t i = 0; i < nm; i++) {
        uint32_t pos = pl.rank[i];
        uint32_t n = pl.per_member[pos], first = pl.start[pos];
        if (n == 0) continue;
        count++;
        wa_put_u32(&w, i);
        uint32_t groups_at = w.off, groups = 0;
        wa_put_u32(&w, 0);
        for (uint32_t k = 0; k < n;) {
            uint32_t t = pl.got_topic[first + k], end = k;
            while (end < n && pl.got_topic[first + end] == t) end++;
            groups++;
            wa_put_u32(&w, t);
            wa_put_u32(&w, end - k);
            for (; k < end; k++) wa_put_u32(&w, pl.got_partition[first + k]);
        }
        wa_patch_u32(&w, groups_at, groups);
        wa_put_u32(&w, 0); /* no user data */
    }
    wa_patch_u32(&w, count_at, count);
    if (w.overflow) __builtin_trap(); /* the bound above is wrong: a bug */

    wa_msg m = {{0}, 0};
    wa_msg_cstr(&m, ASSIGNOR ": ");
    wa_msg_u64(&m, nm);
    wa_msg_cstr(&m, " members, ");
    wa_msg_u64(&m, pl.npartitions);
    wa_msg_cstr(&m, " partitions");
    wa_log_msg(WA_LOG_DEBUG, &m);
    return wa_packed(w.p, w.off);
}

WA_EXPORT("wasmassign_assign")
uint64_t wasmassign_assign(uint32_t ptr, uint32_t len) {
    wa_arena_reset();
    /* The host passes back the buffer it got from wasmassign_alloc; checking
     * the bounds anyway means a confused host gets an error, not a trap. */
    if ((uint64_t)ptr + len > wa_memory_bytes() || ptr == 0) {
        wa_msg m = {{0}, 0};
        wa_msg_cstr(&m, ASSIGNOR ": request buffer outside memory");
        return wa_error_response(&m);
    }
    wa_reader r;
    wa_request q;
    if (!wa_decode_request(&r, (const uint8_t *)(uintptr_t)ptr, len, &q))
        return wa_request_error(ASSIGNOR, &r);
    if (!wa_str_eq(q.assignor, ASSIGNOR)) {
        wa_msg m = {{0}, 0};
        wa_msg_cstr(&m, ASSIGNOR ": asked for assignor ");
        wa_msg_quoted(&m, q.assignor);
        wa_msg_cstr(&m, ", this module provides only \"" ASSIGNOR "\"");
        return wa_error_response(&m);
    }
    return round_robin(&q);
}

/*
 * wasmassign.h: the C SDK for wasmassign assignor plugins (ABI version 1,
 * sdk/ABI.md).
 *
 * A plugin is one .c file plus wasmassign.c, built by clang-14 for
 * wasm32-wasi as a reactor:
 *
 *   clang-14 --target=wasm32-wasi -O2 -mexec-model=reactor -Wl,--strip-all \
 *     -o plugin.wasm plugin.c wasmassign.c
 *
 * The plugin registers its assignors from a constructor, which the reactor's
 * _initialize runs before the host's first call:
 *
 *   static int assign(const wasmassign_request *req, wasmassign_response *resp,
 *                     void *ctx) { ... return WASMASSIGN_OK; }
 *   __attribute__((constructor)) static void init(void) {
 *       wasmassign_register(&info, assign, NULL);
 *   }
 *
 * The SDK owns the ABI: the exports, the request buffer, decoding (every
 * count, index and string checked, so an assignor may index with decoded
 * values without further checks), encoding, and memory.
 *
 * # Memory
 *
 * Everything an assignor builds during a call comes from the call arena
 * (wasmassign_arena_alloc), which is reset at the start of the next call.
 * The decoded request lives there too. The arena keeps the chunks it took
 * from the heap and hands them out again in the same order, so a plugin's
 * memory stops growing once it has served its largest request. Nothing from
 * one call may be kept for the next.
 *
 * The codec (decode and encode of requests, responses and descriptions)
 * does not depend on wasm: wasmassign.c compiles natively too, which is how
 * the SDK's golden-vector tests run it.
 */
#ifndef WASMASSIGN_H
#define WASMASSIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this SDK speaks. */
#define WASMASSIGN_ABI_VERSION 1u
/* The SDK's version, reported by the conformance kit. */
#define WASMASSIGN_SDK_VERSION "0.1.0"

/* Return values of an assign function. */
#define WASMASSIGN_OK 0
#define WASMASSIGN_ERROR 1

/* Rebalance protocols (request field rebalance_protocol). */
enum { WASMASSIGN_EAGER = 0, WASMASSIGN_COOPERATIVE = 1 };

/* Mode bits of an assignor description. */
enum { WASMASSIGN_MODE_EAGER = 1u << 0, WASMASSIGN_MODE_COOPERATIVE = 1u << 1 };

/* Log levels: the values of Go's log/slog, as the host expects them. */
enum {
    WASMASSIGN_LOG_DEBUG = -4,
    WASMASSIGN_LOG_INFO = 0,
    WASMASSIGN_LOG_WARN = 4,
    WASMASSIGN_LOG_ERROR = 8
};

/* bytes: a length and that many bytes, not NUL-terminated. Strings are the
 * same type; decoded strings are valid UTF-8. len 0 means "absent". */
typedef struct {
    const uint8_t *ptr;
    uint32_t len;
} wasmassign_bytes;
typedef wasmassign_bytes wasmassign_str;

/* A list of i32 values (partition ids, broker ids, topic indices). */
typedef struct {
    const int32_t *items;
    uint32_t count;
} wasmassign_i32s;

typedef struct {
    wasmassign_str key;
    wasmassign_str value;
} wasmassign_config_entry;

typedef struct {
    int32_t id;
    wasmassign_str rack; /* empty when the broker has no rack */
} wasmassign_broker;

/* The placement of one partition; replicas and isr index
 * wasmassign_request.replica_sets. */
typedef struct {
    int32_t leader; /* broker id, -1 when unknown */
    uint32_t replicas;
    uint32_t isr;
} wasmassign_partition;

typedef struct {
    wasmassign_str name;
    uint8_t topic_id[16]; /* all zero when unknown */
    bool exists;          /* false: a name members mention, not in the cluster */
    int32_t partition_count;
    /* NULL when the host sent no placement; otherwise partition_count
     * entries, entry i for partition i. */
    const wasmassign_partition *placement;
} wasmassign_topic;

/* Partitions of one topic; topic indexes the request's topic table. */
typedef struct {
    uint32_t topic;
    wasmassign_i32s partitions;
} wasmassign_topic_partitions;

typedef struct {
    const wasmassign_topic_partitions *items;
    uint32_t count;
} wasmassign_tps;

typedef struct {
    wasmassign_str member_id;
    wasmassign_str instance_id; /* empty for a dynamic member */
    wasmassign_str client_id;
    wasmassign_str client_host;
    wasmassign_str rack; /* empty when unknown */
    bool cooperative;
    wasmassign_i32s topics; /* subscribed topic indices, strictly ascending */
    int32_t owned_generation; /* -1 when the member did not report one */
    wasmassign_tps owned;
    wasmassign_bytes user_data;
    wasmassign_tps previous;
} wasmassign_member;

/* A decoded request (sdk/ABI.md section 3). Members come in Kafka's order. */
typedef struct {
    wasmassign_str group_id;
    int32_t generation;
    wasmassign_str protocol;
    wasmassign_str assignor;
    uint8_t rebalance_protocol; /* WASMASSIGN_EAGER or WASMASSIGN_COOPERATIVE */
    uint64_t seed;              /* the only randomness a plugin may use */
    const wasmassign_config_entry *config; /* keys ascending by bytes */
    uint32_t config_count;
    const wasmassign_broker *brokers;
    uint32_t broker_count;
    const wasmassign_i32s *replica_sets;
    uint32_t replica_set_count;
    const wasmassign_topic *topics;
    uint32_t topic_count;
    const wasmassign_member *members;
    uint32_t member_count;
} wasmassign_request;

/* What one member receives; member indexes the request's members. */
typedef struct {
    uint32_t member;
    const wasmassign_topic_partitions *partitions;
    uint32_t partition_count;
    wasmassign_bytes user_data;
} wasmassign_assignment;

/* A response (sdk/ABI.md section 5): error set (non-empty) means status 1. */
typedef struct {
    const wasmassign_assignment *assignments;
    uint32_t count;
    wasmassign_str error;
} wasmassign_response;

/* What an assignor declares about itself (sdk/ABI.md section 4). */
typedef struct {
    const char *name;
    const char *version;
    const char *const *protocols;
    uint32_t protocol_count;
    uint8_t modes; /* WASMASSIGN_MODE_* bits */
    bool may_leave_unassigned;
    const char *description;
} wasmassign_assignor_info;

/* A decoded description, as the codec sees it (lengths, not C strings). */
typedef struct {
    wasmassign_str name;
    wasmassign_str version;
    const wasmassign_str *protocols;
    uint32_t protocol_count;
    uint8_t modes;
    bool may_leave_unassigned;
    wasmassign_str description;
} wasmassign_assignor_desc;

typedef struct {
    const wasmassign_assignor_desc *assignors;
    uint32_t count;
} wasmassign_description;

/*
 * An assign function fills resp (arrays from wasmassign_arena_alloc) and
 * returns WASMASSIGN_OK, or reports an error with wasmassign_fail or
 * wasmassign_failf and returns WASMASSIGN_ERROR. ctx is what was passed to
 * wasmassign_register.
 */
typedef int (*wasmassign_assign_fn)(const wasmassign_request *req, wasmassign_response *resp,
                                    void *ctx);

/*
 * wasmassign_register adds an assignor to the module. Call it from a
 * constructor (__attribute__((constructor))); info and everything it points
 * to must live for the whole module (static data). It returns false when the
 * name is already registered or the SDK's table (32 assignors) is full.
 */
bool wasmassign_register(const wasmassign_assignor_info *info, wasmassign_assign_fn fn, void *ctx);

/* The call arena: memory valid until the next call into the module, zeroed.
 * Returns NULL when the heap is exhausted. */
void *wasmassign_arena_alloc(size_t size);

/* Error reporting: the message becomes the error response, unchanged; the
 * host logs it and falls back. Both return WASMASSIGN_ERROR. */
int wasmassign_fail(const char *msg, uint32_t len);
int wasmassign_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Host logging: one line at a WASMASSIGN_LOG_* level. */
void wasmassign_log(int32_t level, const char *msg, uint32_t len);
void wasmassign_logf(int32_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------------- */
/* The codec. Plugins rarely need it directly; the SDK's exports use it.  */

/* An arena: a chain of heap chunks reused in order after each reset. */
typedef struct wasmassign_chunk wasmassign_chunk;
typedef struct {
    wasmassign_chunk *first;
    wasmassign_chunk *cur;
} wasmassign_arena;

void *wasmassign_arena_take(wasmassign_arena *a, size_t size);
void wasmassign_arena_reset(wasmassign_arena *a);
/* Returns every chunk to the heap (native tools; a plugin never needs it). */
void wasmassign_arena_release(wasmassign_arena *a);

/* Decoders return 0 and fill out, or -1 and write a NUL-terminated reason
 * into err (errcap bytes). Everything they return points into buf or into a;
 * buf must stay intact while the result is used. */
int wasmassign_decode_request(const uint8_t *buf, uint32_t len, wasmassign_arena *a,
                              wasmassign_request *out, char *err, size_t errcap);
int wasmassign_decode_response(const uint8_t *buf, uint32_t len, wasmassign_arena *a,
                               wasmassign_response *out, char *err, size_t errcap);
int wasmassign_decode_description(const uint8_t *buf, uint32_t len, wasmassign_arena *a,
                                  wasmassign_description *out, char *err, size_t errcap);

/* Encoders: *_size returns the exact encoded size, and *_write writes that
 * many bytes to dst. Sizes are 64-bit because a forged model could exceed
 * 4 GiB; the ABI's buffers cannot. */
uint64_t wasmassign_request_size(const wasmassign_request *r);
void wasmassign_write_request(const wasmassign_request *r, uint8_t *dst);
uint64_t wasmassign_response_size(const wasmassign_response *r);
void wasmassign_write_response(const wasmassign_response *r, uint8_t *dst);
uint64_t wasmassign_description_size(const wasmassign_description *d);
void wasmassign_write_description(const wasmassign_description *d, uint8_t *dst);

/* Byte-wise comparison of two strings, as the ABI orders them. */
int wasmassign_str_cmp(wasmassign_str a, wasmassign_str b);

#ifdef __cplusplus
}
#endif
#endif

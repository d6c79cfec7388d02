/*
 * codec_check.c: a native driver for the C SDK's codec, run by
 * sdk/c/codec_test.go under AddressSanitizer and UBSan.
 *
 * It reads records from stdin, each one byte of kind ('q' request, 'r'
 * response, 'd' description), a little-endian u32 length and that many
 * bytes, and writes one line per record:
 *
 *   ok <json>        decoded; <json> is the value in testdata/abi's JSON form,
 *                    and re-encoding it gave back exactly the input bytes
 *   reject <reason>  the decoder rejected the buffer
 *   mismatch         decoded, but re-encoding gave different bytes
 */
#include "../wasmassign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void json_str(wasmassign_str s) {
    putchar('"');
    for (uint32_t i = 0; i < s.len; i++) {
        uint8_t c = s.ptr[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void json_b64(wasmassign_bytes b) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    putchar('"');
    for (uint32_t i = 0; i < b.len; i += 3) {
        uint32_t v = (uint32_t)b.ptr[i] << 16;
        if (i + 1 < b.len) v |= (uint32_t)b.ptr[i + 1] << 8;
        if (i + 2 < b.len) v |= b.ptr[i + 2];
        putchar(tab[v >> 18 & 63]);
        putchar(tab[v >> 12 & 63]);
        putchar(i + 1 < b.len ? tab[v >> 6 & 63] : '=');
        putchar(i + 2 < b.len ? tab[v & 63] : '=');
    }
    putchar('"');
}

static void json_i32s(wasmassign_i32s v) {
    putchar('[');
    for (uint32_t i = 0; i < v.count; i++) printf("%s%d", i ? "," : "", v.items[i]);
    putchar(']');
}

static void json_tps(const wasmassign_topic_partitions *items, uint32_t n) {
    putchar('[');
    for (uint32_t i = 0; i < n; i++) {
        printf("%s{\"topic\":%u,\"partitions\":", i ? "," : "", items[i].topic);
        json_i32s(items[i].partitions);
        putchar('}');
    }
    putchar(']');
}

static void json_request(const wasmassign_request *q) {
    printf("{\"group_id\":");
    json_str(q->group_id);
    printf(",\"generation\":%d,\"protocol\":", q->generation);
    json_str(q->protocol);
    printf(",\"assignor\":");
    json_str(q->assignor);
    printf(",\"rebalance_protocol\":\"%s\",\"seed\":\"%llu\",\"config\":[",
           q->rebalance_protocol ? "cooperative" : "eager", (unsigned long long)q->seed);
    for (uint32_t i = 0; i < q->config_count; i++) {
        printf("%s{\"key\":", i ? "," : "");
        json_str(q->config[i].key);
        printf(",\"value\":");
        json_str(q->config[i].value);
        putchar('}');
    }
    printf("],\"brokers\":[");
    for (uint32_t i = 0; i < q->broker_count; i++) {
        printf("%s{\"id\":%d,\"rack\":", i ? "," : "", q->brokers[i].id);
        json_str(q->brokers[i].rack);
        putchar('}');
    }
    printf("],\"replica_sets\":[");
    for (uint32_t i = 0; i < q->replica_set_count; i++) {
        if (i) putchar(',');
        json_i32s(q->replica_sets[i]);
    }
    printf("],\"topics\":[");
    for (uint32_t i = 0; i < q->topic_count; i++) {
        const wasmassign_topic *t = &q->topics[i];
        printf("%s{\"name\":", i ? "," : "");
        json_str(t->name);
        printf(",\"topic_id\":\"");
        for (int k = 0; k < 16; k++) printf("%02x", t->topic_id[k]);
        printf("\",\"exists\":%s,\"partition_count\":%d,\"placement\":", t->exists ? "true" : "false",
               t->partition_count);
        if (!t->placement) {
            printf("null");
        } else {
            putchar('[');
            for (int32_t p = 0; p < t->partition_count; p++)
                printf("%s{\"leader\":%d,\"replicas\":%u,\"isr\":%u}", p ? "," : "", t->placement[p].leader,
                       t->placement[p].replicas, t->placement[p].isr);
            putchar(']');
        }
        putchar('}');
    }
    printf("],\"members\":[");
    for (uint32_t i = 0; i < q->member_count; i++) {
        const wasmassign_member *m = &q->members[i];
        printf("%s{\"member_id\":", i ? "," : "");
        json_str(m->member_id);
        printf(",\"instance_id\":");
        json_str(m->instance_id);
        printf(",\"client_id\":");
        json_str(m->client_id);
        printf(",\"client_host\":");
        json_str(m->client_host);
        printf(",\"rack\":");
        json_str(m->rack);
        printf(",\"cooperative\":%s,\"subscribed_topics\":", m->cooperative ? "true" : "false");
        json_i32s(m->topics);
        printf(",\"owned_generation\":%d,\"owned\":", m->owned_generation);
        json_tps(m->owned.items, m->owned.count);
        printf(",\"user_data\":");
        json_b64(m->user_data);
        printf(",\"previous\":");
        json_tps(m->previous.items, m->previous.count);
        putchar('}');
    }
    printf("]}");
}

static void json_response(const wasmassign_response *r) {
    if (r->error.len) {
        printf("{\"status\":\"error\",\"message\":");
        json_str(r->error);
        putchar('}');
        return;
    }
    printf("{\"status\":\"ok\",\"assignments\":[");
    for (uint32_t i = 0; i < r->count; i++) {
        const wasmassign_assignment *a = &r->assignments[i];
        printf("%s{\"member\":%u,\"partitions\":", i ? "," : "", a->member);
        json_tps(a->partitions, a->partition_count);
        printf(",\"user_data\":");
        json_b64(a->user_data);
        putchar('}');
    }
    printf("]}");
}

static void json_description(const wasmassign_description *d) {
    printf("{\"assignors\":[");
    for (uint32_t i = 0; i < d->count; i++) {
        const wasmassign_assignor_desc *a = &d->assignors[i];
        printf("%s{\"name\":", i ? "," : "");
        json_str(a->name);
        printf(",\"version\":");
        json_str(a->version);
        printf(",\"protocols\":[");
        for (uint32_t j = 0; j < a->protocol_count; j++) {
            if (j) putchar(',');
            json_str(a->protocols[j]);
        }
        printf("],\"modes\":[");
        int first = 1;
        if (a->modes & WASMASSIGN_MODE_EAGER) printf("\"eager\""), first = 0;
        if (a->modes & WASMASSIGN_MODE_COOPERATIVE) printf("%s\"cooperative\"", first ? "" : ",");
        printf("],\"may_leave_unassigned\":%s,\"description\":", a->may_leave_unassigned ? "true" : "false");
        json_str(a->description);
        putchar('}');
    }
    printf("]}");
}

static int read_full(void *dst, size_t n) { return fread(dst, 1, n, stdin) == n; }

int main(void) {
    wasmassign_arena arena = {0};
    char err[256];
    for (;;) {
        uint8_t hdr[5];
        if (!read_full(hdr, 5)) break;
        uint32_t len = (uint32_t)hdr[1] | (uint32_t)hdr[2] << 8 | (uint32_t)hdr[3] << 16 | (uint32_t)hdr[4] << 24;
        /* An exact-size heap copy, so ASan sees any read past its end. */
        uint8_t *buf = malloc(len ? len : 1);
        if (!buf || (len && !read_full(buf, len))) return 2;
        wasmassign_arena_reset(&arena);
        int rc;
        uint64_t size = 0;
        uint8_t *again = NULL;
        wasmassign_request q;
        wasmassign_response r;
        wasmassign_description d;
        switch (hdr[0]) {
        case 'q':
            rc = wasmassign_decode_request(buf, len, &arena, &q, err, sizeof err);
            if (rc == 0) {
                size = wasmassign_request_size(&q);
                again = malloc(size);
                wasmassign_write_request(&q, again);
            }
            break;
        case 'r':
            rc = wasmassign_decode_response(buf, len, &arena, &r, err, sizeof err);
            if (rc == 0) {
                size = wasmassign_response_size(&r);
                again = malloc(size);
                wasmassign_write_response(&r, again);
            }
            break;
        case 'd':
            rc = wasmassign_decode_description(buf, len, &arena, &d, err, sizeof err);
            if (rc == 0) {
                size = wasmassign_description_size(&d);
                again = malloc(size);
                wasmassign_write_description(&d, again);
            }
            break;
        default:
            return 2;
        }
        if (rc != 0) {
            for (char *c = err; *c; c++)
                if (*c == '\n') *c = ' ';
            printf("reject %s\n", err);
        } else if (size != len || memcmp(again, buf, len) != 0) {
            printf("mismatch\n");
        } else {
            printf("ok ");
            if (hdr[0] == 'q') json_request(&q);
            else if (hdr[0] == 'r') json_response(&r);
            else json_description(&d);
            putchar('\n');
        }
        free(again);
        free(buf);
    }
    wasmassign_arena_release(&arena);
    return 0;
}

/* The extension codec (tf_ofx_*, src/orderflow/ext.c): the gateway kinds 0x14-0x16, 0x91-0x95.
 *
 * 1. The shared vectors (tests/vectors/ofx_frames.txt, also read by python/tests/test_orders.py):
 *    encode(fields) == bytes, decode(bytes) == fields, re-encode == bytes; bad frames fail with
 *    their code and leave the output untouched. The field names of each line must be the
 *    codec's field table in wire order.
 * 2. The OFL1 vectors (ofl_frames.txt) give the same results through the extension codec, and
 *    the OFL1 codec refuses every gateway frame and message (its kind set stays closed).
 * 3. Every value of every byte field, against rules written here from the spec; every prefix of
 *    every frame is "need more"; encode errors write nothing.
 * 4. No allocation on any path, and no read past the frame (a frame against a PROT_NONE page).
 * 5. The venue codec (tfv_decode/tfv_encode) reads the gateway kinds as the extension codec
 *    does, and a Keyed record wraps a gateway command (never a report).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "alloc_count.h"
#include "harness.h"
#include "orderflow/orderflow_internal.h"
#include "tollfree/error.h"
#include "tollfree/orderflow.h"
#include "venue/venue.h"

#define MAX_VEC 96

typedef struct vec {
    int is_error;
    int code;
    char name[32];
    uint64_t journal_seq;
    char fields[1024];
    uint8_t bytes[TF_OFL_MAX_FRAME + 16];
    size_t len;
} vec;

static vec vecs[MAX_VEC];
static int n_vecs;
static vec ofl_vecs[MAX_VEC];
static int n_ofl_vecs;

static int unhex(const char *h, uint8_t *out, size_t cap, size_t *len)
{
    size_t n = strlen(h);
    if (n % 2 || n / 2 > cap)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        unsigned v;
        if (sscanf(h + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (uint8_t)v;
    }
    *len = n / 2;
    return 0;
}

static int load(const char *file, vec *vs, int *count)
{
    char line[4096];
    FILE *f = tf_test_open_vectors(file);
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!line[0] || line[0] == '#')
            continue;
        char *tok[64];
        int nt = 0;
        for (char *p = strtok(line, " "); p && nt < 64; p = strtok(NULL, " "))
            tok[nt++] = p;
        int is_frame = !strcmp(tok[0], "frame"), is_error = !strcmp(tok[0], "error");
        if (!is_frame && !is_error)
            continue; /* the OFL1 file's client streams */
        CHECK(*count < MAX_VEC);
        if (*count >= MAX_VEC)
            break;
        vec *v = &vs[*count];
        memset(v, 0, sizeof *v);
        int bad = unhex(tok[nt - 1], v->bytes, sizeof v->bytes, &v->len);
        CHECK(bad == 0);
        if (bad)
            continue;
        v->is_error = is_error;
        if (is_error) {
            v->code = atoi(tok[1]);
        } else {
            snprintf(v->name, sizeof v->name, "%s", tok[1]);
            v->journal_seq = strtoull(tok[2], NULL, 10);
            for (int k = 3; k < nt - 1; k++) {
                strcat(v->fields, tok[k]);
                strcat(v->fields, " ");
            }
        }
        (*count)++;
    }
    fclose(f);
    return *count;
}

static int kind_by_name(const char *name)
{
    for (int k = 0; k < 256; k++)
        if (tf_ofx_kind_name(k) && !strcmp(tf_ofx_kind_name(k), name))
            return k;
    return -1;
}

/* Builds a gateway message from a vector's fields, checking they are the codec's field table in
 * wire order. Returns 0 or -1. */
static int build(const vec *v, tf_ofl_msg *m)
{
    int kind = kind_by_name(v->name);
    const tfo_field *f = tfo_ofx_kind_fields(kind);
    if (!f)
        return -1;
    memset(m, 0, sizeof *m);
    m->kind = (uint8_t)kind;
    m->journal_seq = v->journal_seq;
    unsigned char *u = (unsigned char *)&m->order;
    const char *p = v->fields;
    size_t wire = 0;
    for (; f->name; f++) {
        char key[64];
        int used = 0;
        char val[32];
        if (sscanf(p, "%63[^=]=%31s %n", key, val, &used) != 2 || strcmp(key, f->name))
            return -1;
        if (f->offset != wire) /* the struct has the wire's layout */
            return -1;
        p += used;
        if (f->size == 8) {
            uint64_t x =
                f->type == OFL_T_I64 ? (uint64_t)strtoll(val, NULL, 10) : strtoull(val, NULL, 10);
            memcpy(u + f->offset, &x, 8);
        } else {
            u[f->offset] = (uint8_t)strtoul(val, NULL, 10);
        }
        wire += f->size;
    }
    if (*p || (int)wire != tf_ofx_payload_size(kind))
        return -1;
    return 0;
}

/* The payload fields of two messages of the same gateway kind are equal. */
static int same_fields(const tf_ofl_msg *a, const tf_ofl_msg *b)
{
    if (a->kind != b->kind || a->journal_seq != b->journal_seq || a->session_id != b->session_id)
        return 0;
    const tfo_field *f =
        tf_ofx_is_gateway_kind(a->kind) ? tfo_ofx_kind_fields(a->kind) : tfo_kind_fields(a->kind);
    const unsigned char *ua = (const unsigned char *)&a->order,
                        *ub = (const unsigned char *)&b->order;
    for (; f && f->name; f++)
        if (memcmp(ua + f->offset, ub + f->offset, f->size))
            return 0;
    return 1;
}

static void test_vectors(void)
{
    int frames = 0, errors = 0;
    for (int i = 0; i < n_vecs; i++) {
        const vec *v = &vecs[i];
        tf_ofl_msg out, before;
        memset(&out, 0xA5, sizeof out);
        before = out;
        int rc = tf_ofx_frame_decode(v->bytes, v->len, &out);
        if (v->is_error) {
            errors++;
            CHECK_RC(rc, v->code);
            CHECK(memcmp(&out, &before, sizeof out) == 0); /* untouched */
            continue;
        }
        frames++;
        tf_ofl_msg want;
        int built = build(v, &want);
        if (built)
            fprintf(stderr, "vector %d (%s): fields differ from the codec's table\n", i, v->name);
        CHECK_EQ(built, 0);
        CHECK(tf_ofx_is_gateway_kind(want.kind));
        CHECK_RC(rc, (int)v->len);
        CHECK(same_fields(&out, &want));
        uint8_t buf[TF_OFL_MAX_FRAME];
        CHECK_RC(tf_ofx_frame_encode(buf, sizeof buf, &want), (int)v->len);
        CHECK_BITS(buf, v->bytes, v->len);
        memset(buf, 0, sizeof buf);
        CHECK_RC(tf_ofx_frame_encode(buf, v->len, &out), (int)v->len); /* exact capacity */
        CHECK_BITS(buf, v->bytes, v->len);
        CHECK_EQ(tf_ofx_frame_size(want.kind), (int)v->len);
        /* The OFL1 codec's set stays closed. */
        CHECK_RC(tf_ofl_frame_decode(v->bytes, v->len, &out), TF_E_OFL_UNKNOWN_KIND);
        CHECK_RC(tf_ofl_frame_encode(buf, sizeof buf, &want), TF_E_OFL_UNKNOWN_KIND);
        CHECK_RC(tf_ofl_payload_size(want.kind), TF_E_OFL_UNKNOWN_KIND);
        CHECK(tf_ofl_kind_name(want.kind) == NULL);
        /* Every prefix is "need more". */
        for (size_t n = 0; n < v->len; n++) {
            int want_rc = n < TF_OFL_FRAME_HEADER_LEN ? TF_E_OFL_HEADER_TOO_SHORT
                                                      : TF_E_OFL_PAYLOAD_TOO_SHORT;
            int got = tf_ofx_frame_decode(v->bytes, n, &out);
            if (got != want_rc)
                fprintf(stderr, "%s prefix %zu: %d\n", v->name, n, got);
            CHECK(got == want_rc);
        }
        /* A frame followed by more bytes: only its own are read. */
        uint8_t two[2 * TF_OFL_MAX_FRAME];
        memcpy(two, v->bytes, v->len);
        memset(two + v->len, 0xEE, sizeof two - v->len);
        CHECK_RC(tf_ofx_frame_decode(two, sizeof two, &out), (int)v->len);
        CHECK(same_fields(&out, &want));
    }
    CHECK(frames >= 16);
    CHECK(errors >= 20);
    int seen[256] = {0};
    for (int i = 0; i < n_vecs; i++)
        if (!vecs[i].is_error)
            seen[kind_by_name(vecs[i].name)] = 1;
    for (int k = 0; k < 256; k++)
        if (tf_ofx_is_gateway_kind(k))
            CHECK(seen[k]); /* every gateway kind has a vector */
}

/* OFL1 frames give the same results through the extension codec. */
static void test_ofl_through_ofx(void)
{
    int n = 0;
    for (int i = 0; i < n_ofl_vecs; i++) {
        const vec *v = &ofl_vecs[i];
        tf_ofl_msg a, b;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        int ra = tf_ofl_frame_decode(v->bytes, v->len, &a);
        int rb = tf_ofx_frame_decode(v->bytes, v->len, &b);
        CHECK_RC(rb, ra);
        if (v->is_error) {
            CHECK_RC(rb, v->code);
            continue;
        }
        n++;
        CHECK_RC(rb, (int)v->len);
        CHECK(same_fields(&a, &b));
        CHECK(strcmp(tf_ofx_kind_name(a.kind), tf_ofl_kind_name(a.kind)) == 0);
        uint8_t x[TF_OFL_MAX_FRAME], y[TF_OFL_MAX_FRAME];
        CHECK_RC(tf_ofx_frame_encode(x, sizeof x, &b), (int)v->len);
        CHECK_RC(tf_ofl_frame_encode(y, sizeof y, &a), (int)v->len);
        CHECK_BITS(x, v->bytes, v->len);
        CHECK_BITS(y, v->bytes, v->len);
    }
    CHECK(n >= 10);
}

/* Sizes, names and the kind sets. */
static void test_kinds(void)
{
    static const struct {
        int kind, len;
        const char *name;
    } gw[] = {{0x14, 52, "Order"},      {0x15, 24, "Cancel"},     {0x16, 48, "ReplaceByClient"},
              {0x91, 76, "AcceptedEx"}, {0x92, 89, "ReplacedEx"}, {0x93, 82, "CanceledEx"},
              {0x94, 113, "Fill"},      {0x95, 41, "RejectedEx"}};
    int n_gw = 0;
    for (int k = -2; k < 258; k++) {
        int g = -1;
        for (size_t i = 0; i < sizeof gw / sizeof gw[0]; i++)
            if (gw[i].kind == k)
                g = (int)i;
        if (g >= 0) {
            n_gw++;
            CHECK(tf_ofx_is_gateway_kind(k));
            CHECK_EQ(tf_ofx_payload_size(k), gw[g].len);
            CHECK_EQ(tf_ofx_frame_size(k), 11 + gw[g].len);
            CHECK(strcmp(tf_ofx_kind_name(k), gw[g].name) == 0);
            CHECK(tfo_ofx_kind_fields(k) != NULL);
        } else {
            CHECK(!tf_ofx_is_gateway_kind(k));
            CHECK_EQ(tf_ofx_payload_size(k), tf_ofl_payload_size(k));
            CHECK_EQ(tf_ofx_frame_size(k), tf_ofl_frame_size(k));
            CHECK(tf_ofx_kind_name(k) == tf_ofl_kind_name(k));
            CHECK(tfo_ofx_kind_fields(k) == NULL);
        }
    }
    CHECK_EQ(n_gw, 8);
    CHECK(strcmp(tf_strerror(TF_E_OFL_INVALID_ORDER_TYPE), "unknown error code") != 0);
    CHECK_EQ(TF_E_OFL_INVALID_ORDER_TYPE, -1416);
}

/* The kind table against a list written from the specs (docs/orderflow.md, docs/venue.md), for
 * every int around the byte range, and against the codecs' own size and name functions. */
static void test_kind_table(void)
{
    enum { N = TF_OFL_CLASS_NONE, C = TF_OFL_CLASS_COMMAND, E = TF_OFL_CLASS_EVENT };
    enum { K = TF_OFL_CLASS_CONTROL };
    static const struct {
        int kind, cls, family, len;
        const char *name;
    } spec[] = {
        {0x00, K, TF_OFL_FAMILY_OFL1, 0, "Heartbeat"},
        {0x01, C, TF_OFL_FAMILY_OFL1, 57, "NewLimit"},
        {0x02, C, TF_OFL_FAMILY_OFL1, 49, "NewMarket"},
        {0x03, C, TF_OFL_FAMILY_OFL1, 16, "CancelByOrder"},
        {0x04, C, TF_OFL_FAMILY_OFL1, 24, "CancelByClient"},
        {0x05, C, TF_OFL_FAMILY_OFL1, 48, "Replace"},
        {0x81, E, TF_OFL_FAMILY_OFL1, 48, "Accepted"},
        {0x82, E, TF_OFL_FAMILY_OFL1, 33, "Rejected"},
        {0x83, E, TF_OFL_FAMILY_OFL1, 40, "Replaced"},
        {0x84, E, TF_OFL_FAMILY_OFL1, 32, "Canceled"},
        {0x85, E, TF_OFL_FAMILY_OFL1, 72, "Trade"},
        {0x14, C, TF_OFL_FAMILY_GATEWAY, 52, "Order"},
        {0x15, C, TF_OFL_FAMILY_GATEWAY, 24, "Cancel"},
        {0x16, C, TF_OFL_FAMILY_GATEWAY, 48, "ReplaceByClient"},
        {0x91, E, TF_OFL_FAMILY_GATEWAY, 76, "AcceptedEx"},
        {0x92, E, TF_OFL_FAMILY_GATEWAY, 89, "ReplacedEx"},
        {0x93, E, TF_OFL_FAMILY_GATEWAY, 82, "CanceledEx"},
        {0x94, E, TF_OFL_FAMILY_GATEWAY, 113, "Fill"},
        {0x95, E, TF_OFL_FAMILY_GATEWAY, 41, "RejectedEx"},
        {0x10, K, TF_OFL_FAMILY_VENUE, -1, "Keyed"},
        {0x11, K, TF_OFL_FAMILY_VENUE, 48, "RiskLimits"},
        {0x12, K, TF_OFL_FAMILY_VENUE, 17, "KillSwitch"},
        {0x13, K, TF_OFL_FAMILY_VENUE, 16, "CancelOnDisconnect"},
        {0x90, E, TF_OFL_FAMILY_VENUE, 33, "VenueRejected"},
        {0x06, N, TF_OFL_FAMILY_RESERVED, -1, NULL},
        {0x40, N, TF_OFL_FAMILY_RESERVED, -1, NULL},
        {0xA0, N, TF_OFL_FAMILY_RESERVED, -1, NULL},
    };
    int rows = 0;
    for (int k = -300; k < 600; k++) {
        const tf_ofl_kind_info *ki = tf_ofl_kind_info_of(k);
        CHECK(ki != NULL);
        CHECK_EQ(tf_ofl_kind_class(k), ki->kind_class);
        int s = -1;
        for (size_t i = 0; i < sizeof spec / sizeof spec[0]; i++)
            if (spec[i].kind == k)
                s = (int)i;
        if (s < 0) {
            CHECK_EQ(ki->kind_class, TF_OFL_CLASS_NONE);
            CHECK_EQ(ki->family, TF_OFL_FAMILY_NONE);
            CHECK_EQ(ki->reserved_for, TF_OFL_CLASS_NONE);
            CHECK_EQ(ki->payload_len, -1);
            CHECK(ki->name == NULL);
            CHECK(tfv_payload_size(k, 0) < 0);
            continue;
        }
        rows++;
        CHECK_EQ(ki->kind_class, spec[s].cls);
        CHECK_EQ(ki->family, spec[s].family);
        CHECK_EQ(ki->payload_len, spec[s].len);
        CHECK(spec[s].name ? ki->name && !strcmp(ki->name, spec[s].name) : ki->name == NULL);
        /* the codecs agree with the table */
        if (spec[s].family == TF_OFL_FAMILY_OFL1) {
            CHECK_EQ(tf_ofl_payload_size(k), spec[s].len);
            CHECK(!strcmp(tf_ofl_kind_name(k), spec[s].name));
        }
        if (spec[s].family == TF_OFL_FAMILY_OFL1 || spec[s].family == TF_OFL_FAMILY_GATEWAY)
            CHECK_EQ(tf_ofx_payload_size(k), spec[s].len);
        CHECK_EQ(tf_ofx_is_gateway_kind(k), spec[s].family == TF_OFL_FAMILY_GATEWAY);
        CHECK(tfv_kind_name(k) == ki->name);
        if (k != 0x10 && spec[s].len >= 0)
            CHECK_EQ(tfv_payload_size(k, 0), spec[s].len);
        CHECK_EQ(tfv_is_command(k), spec[s].cls == C);
        if (spec[s].family == TF_OFL_FAMILY_RESERVED) {
            CHECK_EQ(ki->reserved_for, k == 0xA0 ? E : C);
            CHECK_RC(tf_ofl_payload_size(k), TF_E_OFL_RESERVED_KIND);
            CHECK_RC(tfv_payload_size(k, 0), TF_E_OFL_RESERVED_KIND);
        } else {
            CHECK_EQ(ki->reserved_for, TF_OFL_CLASS_NONE);
        }
    }
    CHECK_EQ(rows, (int)(sizeof spec / sizeof spec[0]));
    /* Keyed: its head and the inner command's payload; only a command may be wrapped */
    CHECK_EQ(tfv_payload_size(0x10, 0x01), 18 + 57);
    CHECK_EQ(tfv_payload_size(0x10, 0x14), 18 + 52);
    CHECK_RC(tfv_payload_size(0x10, 0x10), TF_E_OFL_UNKNOWN_KIND);
    CHECK_RC(tfv_payload_size(0x10, 0x06), TF_E_OFL_UNKNOWN_KIND);
    CHECK_RC(tfv_payload_size(0x10, 0x81), TF_E_OFL_UNKNOWN_KIND);
}

/* The rule for one byte field, written from the spec (orderflow.h, docs/orderflow.md). */
static int byte_rule(int kind, const char *field, unsigned v)
{
    if (!strcmp(field, "side") || !strcmp(field, "taker_side"))
        return v <= 1 ? 0 : TF_E_OFL_INVALID_SIDE;
    if (kind == TF_OFX_ORDER)
        return 0; /* type, tif, flags: the engine judges */
    if (!strcmp(field, "type"))
        return v <= 1 ? 0 : TF_E_OFL_INVALID_ORDER_TYPE;
    if (!strcmp(field, "tif"))
        return v <= 2 ? 0 : TF_E_OFL_INVALID_ORDER_TYPE;
    if (!strcmp(field, "flags"))
        return v <= 1 ? 0 : TF_E_OFL_INVALID_ORDER_TYPE;
    if (kind == TF_OFX_CANCELED && !strcmp(field, "reason"))
        return v <= 4 ? 0 : TF_E_OFL_INVALID_REASON;
    if (kind == TF_OFX_REJECTED && !strcmp(field, "reason"))
        return v <= 6 || v == 255 ? 0 : TF_E_OFL_INVALID_REASON;
    return -1; /* a byte field the test does not know: fails */
}

static void test_byte_fields(void)
{
    for (int i = 0; i < n_vecs; i++) {
        const vec *v = &vecs[i];
        if (v->is_error)
            continue;
        tf_ofl_msg base;
        if (build(v, &base))
            continue;
        for (const tfo_field *f = tfo_ofx_kind_fields(base.kind); f->name; f++) {
            if (f->size != 1)
                continue;
            int bad = 0;
            for (unsigned x = 0; x < 256; x++) {
                int rule = byte_rule(base.kind, f->name, x);
                if (rule == -1) {
                    bad++;
                    break;
                }
                uint8_t fr[TF_OFL_MAX_FRAME];
                memcpy(fr, v->bytes, v->len);
                fr[TF_OFL_FRAME_HEADER_LEN + f->offset] = (uint8_t)x;
                tf_ofl_msg out;
                memset(&out, 0x5A, sizeof out);
                int rc = tf_ofx_frame_decode(fr, v->len, &out);
                tf_ofl_msg m = base;
                ((unsigned char *)&m.order)[f->offset] = (uint8_t)x;
                uint8_t enc[TF_OFL_MAX_FRAME];
                memset(enc, 0x77, sizeof enc);
                int rce = tf_ofx_frame_encode(enc, sizeof enc, &m);
                if (rule) {
                    bad += rc != rule || rce != rule || enc[0] != 0x77 || out.kind != 0x5A;
                } else {
                    bad += rc != (int)v->len || rce != (int)v->len ||
                           memcmp(enc, fr, v->len) != 0 || !same_fields(&out, &m);
                }
            }
            if (bad)
                fprintf(stderr, "%s.%s: %d values disagree with the rule\n", v->name, f->name, bad);
            CHECK_EQ(bad, 0);
        }
    }
}

/* Encode errors write nothing; capacity one short is BUFFER_TOO_SHORT. */
static void test_encode_errors(void)
{
    tf_ofl_msg m;
    memset(&m, 0, sizeof m);
    m.kind = TF_OFX_FILL;
    uint8_t buf[TF_OFL_MAX_FRAME];
    memset(buf, 0x33, sizeof buf);
    CHECK_RC(tf_ofx_frame_encode(buf, 11 + 112, &m), TF_E_OFL_BUFFER_TOO_SHORT);
    CHECK_EQ(buf[0], 0x33);
    CHECK_RC(tf_ofx_frame_encode(buf, 11 + 113, &m), 11 + 113);
    m.kind = 0x17;
    memset(buf, 0x33, sizeof buf);
    CHECK_RC(tf_ofx_frame_encode(buf, sizeof buf, &m), TF_E_OFL_UNKNOWN_KIND);
    m.kind = 0xA0;
    CHECK_RC(tf_ofx_frame_encode(buf, sizeof buf, &m), TF_E_OFL_RESERVED_KIND);
    m.kind = 0x10; /* the venue's Keyed is not this codec's */
    CHECK_RC(tf_ofx_frame_encode(buf, sizeof buf, &m), TF_E_OFL_UNKNOWN_KIND);
    CHECK_EQ(buf[0], 0x33);
    m.kind = TF_OFL_NEW_LIMIT;
    m.new_limit.side = 2;
    CHECK_RC(tf_ofx_frame_encode(buf, sizeof buf, &m), TF_E_OFL_INVALID_SIDE);
    CHECK_EQ(buf[0], 0x33);
    CHECK_RC(tf_ofx_frame_encode(buf, sizeof buf, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_ofx_frame_decode(NULL, 5, &m), TF_E_NULL_ARG);
    CHECK_RC(tf_ofx_frame_decode(NULL, 0, &m), TF_E_OFL_HEADER_TOO_SHORT);
    CHECK_RC(tf_ofx_frame_decode(buf, sizeof buf, NULL), TF_E_NULL_ARG);
}

/* Each frame placed so its last byte is the last readable one before a PROT_NONE page: a read
 * past the frame faults. */
static void test_no_overread(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    uint8_t *map =
        mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(map != MAP_FAILED);
    if (map == MAP_FAILED)
        return;
    CHECK(mprotect(map + pg, (size_t)pg, PROT_NONE) == 0);
    for (int i = 0; i < n_vecs; i++) {
        const vec *v = &vecs[i];
        uint8_t *at = map + pg - v->len;
        memcpy(at, v->bytes, v->len);
        tf_ofl_msg out;
        int rc = tf_ofx_frame_decode(at, v->len, &out);
        CHECK_RC(rc, v->is_error ? v->code : (int)v->len);
        for (size_t n = 0; n < v->len; n++) { /* truncated, against the guard page */
            memcpy(map + pg - n, v->bytes, n);
            (void)tf_ofx_frame_decode(map + pg - n, n, &out);
        }
    }
    munmap(map, (size_t)pg * 2);
}

static void test_no_alloc(void)
{
    tf_alloc_calls = tf_free_calls = 0;
    tf_alloc_on = 1;
    void *volatile p = malloc(24); /* positive control */
    free(p);
    tf_alloc_on = 0;
    if (TF_ALLOC_COUNTING)
        CHECK(tf_alloc_calls == 1);
    tf_alloc_calls = tf_free_calls = 0;
    long work = 0;
    tf_alloc_on = 1;
    for (int i = 0; i < n_vecs; i++) {
        tf_ofl_msg out;
        uint8_t buf[TF_OFL_MAX_FRAME];
        int rc = tf_ofx_frame_decode(vecs[i].bytes, vecs[i].len, &out);
        if (rc > 0)
            work += tf_ofx_frame_encode(buf, sizeof buf, &out);
        (void)tf_ofx_kind_name(out.kind);
    }
    tf_alloc_on = 0;
    CHECK(work > 0);
    if (TF_ALLOC_COUNTING)
        CHECK_EQ(tf_alloc_calls + tf_free_calls, 0);
    else
        printf("SKIP allocation counting: AddressSanitizer owns malloc in this build\n");
}

static void test_venue_codec(void)
{
    int keyed = 0;
    for (int i = 0; i < n_vecs; i++) {
        const vec *v = &vecs[i];
        tfv_msg vm;
        tf_ofl_msg m;
        int rc = tfv_decode(v->bytes, v->len, &vm);
        if (v->len >= 3 && tfv_is_ext_kind(v->bytes[2]) && !tf_ofx_is_gateway_kind(v->bytes[2]))
            continue; /* the venue codec's own kinds (0x10 Keyed, 0x90 VenueRejected) */
        CHECK_RC(rc, tf_ofx_frame_decode(v->bytes, v->len, &m));
        if (rc < 0)
            continue;
        CHECK(vm.kind == m.kind && same_fields(&vm.ofl, &m));
        CHECK(strcmp(tfv_kind_name(vm.kind), tf_ofx_kind_name(m.kind)) == 0);
        CHECK_EQ(tfv_payload_size(vm.kind, 0), tf_ofx_payload_size(m.kind));
        uint8_t f[TF_OFL_MAX_FRAME], k[TF_OFL_MAX_FRAME];
        CHECK_RC(tfv_encode(f, sizeof f, &vm), (int)v->len);
        CHECK_BITS(f, v->bytes, v->len);
        CHECK_RC(tfv_encode_event(f, sizeof f, &m), (int)v->len); /* any gateway kind */
        /* Keyed around it: a command is carried (18 + payload), a report is not */
        tfv_msg kv = {.kind = TFV_KEYED, .ofl = m, .session = 77, .client_seq = 5};
        int n = tfv_encode(k, sizeof k, &kv);
        if (m.kind & 0x80) {
            CHECK_RC(n, TF_E_OFL_UNKNOWN_KIND);
            CHECK(!tfv_is_command(m.kind));
            continue;
        }
        keyed++;
        CHECK(tfv_is_command(m.kind));
        CHECK_RC(n, (int)v->len + TFV_KEYED_HEAD_LEN);
        CHECK_EQ(tfv_payload_size(TFV_KEYED, m.kind), TFV_KEYED_HEAD_LEN + (int)v->len - 11);
        tfv_msg back;
        CHECK_RC(tfv_decode(k, (size_t)n, &back), n);
        CHECK(back.kind == TFV_KEYED && back.session == 77 && back.client_seq == 5 &&
              back.ofl.kind == m.kind);
        back.ofl.journal_seq = m.journal_seq;
        CHECK(same_fields(&back.ofl, &m));
        for (int cut = 0; cut < n; cut++) {
            int r = tfv_decode(k, (size_t)cut, &back);
            /* the decoder decides: no whole header, or a header whose frame is not all there */
            CHECK_RC(r, cut < TF_OFL_FRAME_HEADER_LEN ? TF_E_OFL_HEADER_TOO_SHORT
                                                      : TF_E_OFL_PAYLOAD_TOO_SHORT);
        }
        /* a Keyed record whose inner kind byte names a report */
        k[11 + 17] = TF_OFX_FILL;
        CHECK_RC(tfv_decode(k, (size_t)n, &back), TF_E_OFL_UNKNOWN_KIND);
    }
    CHECK(keyed >= 8);
}

int main(void)
{
    CHECK(load("ofx_frames.txt", vecs, &n_vecs) > 30);
    CHECK(load("ofl_frames.txt", ofl_vecs, &n_ofl_vecs) > 20);
    test_kinds();
    test_kind_table();
    test_vectors();
    test_ofl_through_ofx();
    test_byte_fields();
    test_encode_errors();
    test_no_overread();
    test_no_alloc();
    test_venue_codec();
    return tf_test_report();
}

/* The pure wire decoder and encoders (include/tollfree/wire.h), without a server: every opcode,
 * every length rule, need-more semantics, error frames, the dataset hash, and reads placed against
 * an unreadable page so that any over-read crashes. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "tollfree/wire.h"
#include "wire/wire_internal.h"

static uint8_t body[1 << 12];

/* A v2 body: header + payload, returns its length. */
static size_t v2(uint8_t op, uint64_t id, const void *payload, size_t n)
{
    body[0] = op;
    body[1] = 2;
    body[2] = body[3] = 0;
    tf_put64(body + 4, id);
    memcpy(body + 12, payload, n);
    return 12 + n;
}

static int dec(size_t len, tf_wire_request *rq)
{
    return tf_wire_decode_request(body, len, len, rq);
}

/* Decoding must behave the same when bytes arrive one at a time: need-more counts grow, never
 * exceed the body, and the final result equals the one-shot result. */
static void check_incremental(size_t len)
{
    tf_wire_request a, b;
    int want = dec(len, &a);
    size_t avail = 0;
    int rc;
    for (;;) {
        rc = tf_wire_decode_request(body, avail, len, &b);
        if (rc <= 0)
            break;
        CHECK((size_t)rc > avail);
        CHECK((size_t)rc <= len && rc <= TF_WIRE_MAX_FIXED);
        avail = (size_t)rc;
    }
    CHECK_EQ(rc, want);
    CHECK_EQ(b.opcode, a.opcode);
    CHECK_EQ(b.request_id, a.request_id);
    if (rc == 0) {
        CHECK_EQ(b.fixed_len, a.fixed_len);
        CHECK_EQ(b.var_len, a.var_len);
        CHECK_EQ(b.n_bars, a.n_bars);
        CHECK_EQ(b.n_combos, a.n_combos);
        CHECK_EQ(b.id, a.id);
    }
}

static void test_v1(void)
{
    tf_wire_request rq;
    /* [op][n_bars][n_combos] + arrays */
    uint32_t nb = 5, nc = 2;
    size_t len = 9 + 8 * nb + 48 * nc;
    memset(body, 0, sizeof body);
    body[0] = TF_OP_V1_SWEEP;
    tf_put32(body + 1, nb);
    tf_put32(body + 5, nc);
    CHECK_RC(dec(len, &rq), 0);
    CHECK_EQ(rq.version, 1);
    CHECK_EQ(rq.n_bars, nb);
    CHECK_EQ(rq.n_combos, nc);
    CHECK_EQ(rq.fixed_len, 9);
    CHECK_EQ(rq.var_len, len - 9);
    CHECK_EQ(rq.close_off, 0);
    CHECK_EQ(rq.params_off, 8 * nb);
    CHECK_EQ(rq.request_id, 0);
    check_incremental(len);
    CHECK_RC(dec(len + 1, &rq), TF_E_LENGTH_MISMATCH);
    CHECK_RC(dec(len - 1, &rq), TF_E_LENGTH_MISMATCH);
    check_incremental(len - 1);
    body[0] = TF_OP_V1_ECHO;
    CHECK_RC(dec(len, &rq), 0);
    CHECK_EQ(rq.opcode, TF_OP_V1_ECHO);
    /* Short bodies. */
    CHECK_RC(tf_wire_decode_request(body, 0, 0, &rq), TF_E_FRAME_TOO_SHORT);
    CHECK_RC(dec(8, &rq), TF_E_FRAME_TOO_SHORT);
    CHECK_RC(dec(1, &rq), TF_E_FRAME_TOO_SHORT);
    /* Need more: 1 byte for the opcode, then the v1 fixed part. */
    CHECK_RC(tf_wire_decode_request(body, 0, len, &rq), 1);
    CHECK_RC(tf_wire_decode_request(body, 1, len, &rq), 9);
    CHECK_RC(tf_wire_decode_request(body, 8, len, &rq), 9);
    /* Huge counts from the wire cannot overflow the length rule. */
    tf_put32(body + 1, UINT32_MAX);
    tf_put32(body + 5, UINT32_MAX);
    CHECK_RC(tf_wire_decode_request(body, 9, (uint64_t)UINT32_MAX, &rq), TF_E_LENGTH_MISMATCH);
    CHECK_RC(tf_wire_decode_request(body, 9, 9 + 8ull * UINT32_MAX + 48ull * UINT32_MAX, &rq), 0);
    /* Unknown v1-range opcodes carry no request id. */
    for (int op = 2; op < 0x10; op++) {
        body[0] = (uint8_t)op;
        CHECK_RC(dec(40, &rq), TF_E_UNKNOWN_OPCODE);
        CHECK_EQ(rq.request_id, 0);
    }
}

static void test_v2_sizes(void)
{
    tf_wire_request rq;
    struct {
        uint8_t op;
        size_t payload;
    } fixed[] = {{TF_OP_HELLO, 8},        {TF_OP_RUN_ONE, 56},      {TF_OP_DROP, 8},
                 {TF_OP_STATS, 0},        {TF_OP_LOAD_FD, 16},      {TF_OP_SESSION_OPEN, 48},
                 {TF_OP_SESSION_BAR, 16}, {TF_OP_SESSION_QUERY, 8}, {TF_OP_SESSION_CLOSE, 8}};
    uint8_t pl[128];
    for (size_t i = 0; i < sizeof pl; i++)
        pl[i] = (uint8_t)(i + 1);
    for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++) {
        size_t len = v2(fixed[k].op, 0x1122334455667788ull, pl, fixed[k].payload);
        CHECK_RC(dec(len, &rq), 0);
        CHECK_EQ(rq.opcode, fixed[k].op);
        CHECK_EQ(rq.version, 2);
        CHECK_EQ(rq.request_id, 0x1122334455667788ull);
        CHECK_EQ(rq.fixed_len, len);
        CHECK_EQ(rq.var_len, 0);
        check_incremental(len);
        /* One byte more or less. */
        v2(fixed[k].op, 7, pl, fixed[k].payload + 1);
        CHECK_RC(dec(len + 1, &rq), TF_E_LENGTH_MISMATCH);
        CHECK_EQ(rq.request_id, 7);
        if (fixed[k].payload) {
            v2(fixed[k].op, 9, pl, fixed[k].payload - 1);
            CHECK_RC(dec(len - 1, &rq), TF_E_FRAME_TOO_SHORT);
            CHECK_EQ(rq.request_id, 9);
        }
        /* Too short for the header: no id. */
        CHECK_RC(dec(11, &rq), TF_E_FRAME_TOO_SHORT);
        CHECK_EQ(rq.request_id, 0);
    }
    /* Field values. */
    int64_t params[6] = {10, 5, 3, 5, 2, 3};
    uint8_t p[64];
    tf_put64(p, 0xABCDEFull);
    memcpy(p + 8, params, 48);
    CHECK_RC(dec(v2(TF_OP_RUN_ONE, 1, p, 56), &rq), 0);
    CHECK_EQ(rq.id, 0xABCDEF);
    CHECK_BITS(rq.params, params, 48);
    CHECK_RC(dec(v2(TF_OP_SESSION_OPEN, 1, params, 48), &rq), 0);
    CHECK_BITS(rq.params, params, 48);
    double px = 101.25;
    tf_put64(p, 42);
    memcpy(p + 8, &px, 8);
    CHECK_RC(dec(v2(TF_OP_SESSION_BAR, 1, p, 16), &rq), 0);
    CHECK_EQ(rq.id, 42);
    CHECK_BITS(&rq.close, &px, 8);
    tf_put32(p, 5);
    CHECK_RC(dec(v2(TF_OP_HELLO, 1, p, 8), &rq), 0);
    CHECK_EQ(rq.max_version, 5);
    tf_put64(p, 1000);
    CHECK_RC(dec(v2(TF_OP_LOAD_FD, 1, p, 16), &rq), 0);
    CHECK_EQ(rq.n_bars, 1000);
}

static void test_v2_arrays(void)
{
    tf_wire_request rq;
    uint8_t p[2048];
    memset(p, 0, sizeof p);
    /* LOAD: [u64 n_bars][n x f64] */
    tf_put64(p, 10);
    CHECK_RC(dec(v2(TF_OP_LOAD, 3, p, 8 + 80), &rq), 0);
    CHECK_EQ(rq.n_bars, 10);
    CHECK_EQ(rq.fixed_len, 20);
    CHECK_EQ(rq.var_len, 80);
    check_incremental(12 + 88);
    CHECK_RC(dec(v2(TF_OP_LOAD, 3, p, 8 + 79), &rq), TF_E_LENGTH_MISMATCH);
    CHECK_RC(dec(v2(TF_OP_LOAD, 3, p, 8 + 88), &rq), TF_E_LENGTH_MISMATCH);
    tf_put64(p, (uint64_t)1 << 61); /* 8 * n would wrap to 0 */
    CHECK_RC(dec(v2(TF_OP_LOAD, 3, p, 8), &rq), TF_E_LENGTH_MISMATCH);
    tf_put64(p, 0);
    CHECK_RC(dec(v2(TF_OP_LOAD, 3, p, 8), &rq), 0);
    /* SWEEP_DS: [u64 handle][u32 n][u32 0][n x 48] */
    tf_put64(p, 77);
    tf_put32(p + 8, 3);
    CHECK_RC(dec(v2(TF_OP_SWEEP_DS, 4, p, 16 + 144), &rq), 0);
    CHECK_EQ(rq.id, 77);
    CHECK_EQ(rq.n_combos, 3);
    CHECK_EQ(rq.params_off, 0);
    CHECK_RC(dec(v2(TF_OP_SWEEP_DS, 4, p, 16 + 143), &rq), TF_E_LENGTH_MISMATCH);
    CHECK_RC(dec(v2(TF_OP_SWEEP_DS, 4, p, 15), &rq), TF_E_FRAME_TOO_SHORT);
    /* SWEEP: [u32 n_bars][u32 n_combos][close][params] */
    tf_put32(p, 4);
    tf_put32(p + 4, 2);
    CHECK_RC(dec(v2(TF_OP_SWEEP, 5, p, 8 + 32 + 96), &rq), 0);
    CHECK_EQ(rq.n_bars, 4);
    CHECK_EQ(rq.n_combos, 2);
    CHECK_EQ(rq.close_off, 0);
    CHECK_EQ(rq.params_off, 32);
    CHECK_EQ(rq.var_len, 128);
    CHECK_RC(dec(v2(TF_OP_SWEEP, 5, p, 8 + 32 + 95), &rq), TF_E_LENGTH_MISMATCH);
    /* ECHO: anything. */
    for (size_t n = 0; n < 40; n += 7) {
        CHECK_RC(dec(v2(TF_OP_ECHO, 6, p, n), &rq), 0);
        CHECK_EQ(rq.var_len, n);
        CHECK_EQ(rq.fixed_len, 12);
    }
}

static void test_v2_errors(void)
{
    tf_wire_request rq;
    uint8_t p[16] = {0};
    size_t len = v2(TF_OP_STATS, 99, p, 0);
    body[1] = 1;
    CHECK_RC(dec(len, &rq), TF_E_BAD_HEADER);
    CHECK_EQ(rq.request_id, 99);
    body[1] = 3;
    CHECK_RC(dec(len, &rq), TF_E_BAD_HEADER);
    body[1] = 2;
    body[3] = 1;
    CHECK_RC(dec(len, &rq), TF_E_BAD_HEADER);
    body[3] = 0;
    CHECK_RC(dec(len, &rq), 0);
    /* Unknown v2-range opcodes echo the id; a client-sent ERROR is a protocol violation. */
    int unknown[] = {0x19, 0x1F, 0x24, 0x30, 0x7E, 0x80, 0xFF};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        len = v2((uint8_t)unknown[i], 1234, p, 8);
        CHECK_RC(dec(len, &rq), TF_E_UNKNOWN_OPCODE);
        CHECK_EQ(rq.request_id, 1234);
        CHECK_RC(dec(5, &rq), TF_E_UNKNOWN_OPCODE);
    }
    len = v2(TF_OP_ERROR, 5, p, 8);
    CHECK_RC(dec(len, &rq), TF_E_PROTOCOL);
    /* Argument checks. */
    CHECK_RC(tf_wire_decode_request(NULL, 4, 4, &rq), TF_E_NULL_ARG);
    CHECK_RC(tf_wire_decode_request(body, 4, 4, NULL), TF_E_NULL_ARG);
}

static void test_encoders(void)
{
    uint8_t f[2048];
    CHECK_EQ(tf_wire_put_header(f, 30, TF_OP_ECHO, 0x0102030405060708ull), 16);
    CHECK_EQ(tf_le32(f), 30);
    CHECK_EQ(f[4], TF_OP_ECHO);
    CHECK_EQ(f[5], 2);
    CHECK_EQ(f[6] | f[7], 0);
    CHECK_EQ(tf_le64(f + 8), 0x0102030405060708ull);

    int n = tf_wire_put_error(f, sizeof f, 42, TF_E_UNKNOWN_DATASET, "no such dataset");
    CHECK_EQ(n, 24 + 15);
    CHECK_EQ(tf_le32(f), 20 + 15);
    tf_wire_reply r;
    CHECK_RC(tf_wire_decode_reply(f + 4, (size_t)n - 4, (uint64_t)n - 4, &r), 0);
    CHECK_EQ(r.opcode, TF_OP_ERROR);
    CHECK_EQ(r.request_id, 42);
    CHECK_EQ(r.code, TF_E_UNKNOWN_DATASET);
    CHECK_EQ(r.msg_len, 15);
    CHECK(!memcmp(f + 24, "no such dataset", 15));
    /* Need more, then inconsistent lengths. */
    CHECK_RC(tf_wire_decode_reply(f + 4, 12, (uint64_t)n - 4, &r), 20);
    CHECK_RC(tf_wire_decode_reply(f + 4, 11, (uint64_t)n - 4, &r), 12);
    CHECK_RC(tf_wire_decode_reply(f + 4, (size_t)n - 4, (uint64_t)n - 3, &r), TF_E_PROTOCOL);
    CHECK_RC(tf_wire_decode_reply(f + 4, 10, 10, &r), TF_E_PROTOCOL);
    /* Long messages are cut to the protocol maximum and to the buffer. */
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    n = tf_wire_put_error(f, sizeof f, 1, TF_E_PROTOCOL, big);
    CHECK_EQ(n, 24 + TF_WIRE_MAX_ERROR_MSG);
    n = tf_wire_put_error(f, 100, 1, TF_E_PROTOCOL, big);
    CHECK_EQ(n, 100);
    CHECK_RC(tf_wire_decode_reply(f + 4, 96, 96, &r), 0);
    CHECK_EQ(r.msg_len, 76);
    CHECK_RC(tf_wire_put_error(f, 23, 1, TF_E_PROTOCOL, "x"), TF_E_INVALID_ARG);
    n = tf_wire_put_error(f, sizeof f, 1, TF_E_PROTOCOL, NULL);
    CHECK_EQ(n, 24);
    /* A success reply header. */
    tf_wire_put_header(f, 12 + 8, TF_OP_SESSION_OPEN, 5);
    CHECK_RC(tf_wire_decode_reply(f + 4, 12, 20, &r), 0);
    CHECK_EQ(r.opcode, TF_OP_SESSION_OPEN);
    f[5] = 3;
    CHECK_RC(tf_wire_decode_reply(f + 4, 12, 20, &r), TF_E_PROTOCOL);
}

static void test_hash(void)
{
    double c[5] = {1.0, -2.5, 3.25, 1e300, 0.0};
    for (uint64_t n = 0; n <= 5; n++) {
        /* An independent FNV-1a 64 over the u64 words (n, then each close's bits). */
        uint64_t words[6];
        words[0] = n;
        memcpy(words + 1, c, 8 * n);
        uint64_t h = 14695981039346656037ull;
        for (size_t i = 0; i < 1 + n; i++) {
            h ^= words[i];
            h *= 1099511628211ull;
        }
        CHECK_EQ(tf_wire_dataset_hash(c, n), h);
    }
    double d[5];
    memcpy(d, c, sizeof d);
    d[4] = -0.0; /* bytes, not values */
    CHECK(tf_wire_dataset_hash(c, 5) != tf_wire_dataset_hash(d, 5));
}

/* Every decode against the end of a readable page: an over-read faults. Random bodies too. */
static void test_guard_page(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    uint8_t *m =
        mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    if (m == MAP_FAILED)
        return;
    mprotect(m + pg, (size_t)pg, PROT_NONE);
    uint64_t s = 88172645463325252ull;
    int bad = 0;
    for (int it = 0; it < 200000; it++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        size_t avail = s % 80;
        uint8_t *b = m + pg - avail;
        for (size_t i = 0; i < avail; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            b[i] = (uint8_t)s;
        }
        if (avail > 0 && (s & 3) == 0)
            b[0] = (uint8_t)(0x10 + (s >> 8) % 20); /* mostly valid v2 opcodes */
        if (avail > 1 && (s & 4))
            b[1] = 2;
        if (avail > 3 && (s & 8))
            b[2] = b[3] = 0;
        uint64_t body_len = (s >> 16) & 1 ? avail : (s >> 20) % 4096;
        tf_wire_request rq;
        int rc = tf_wire_decode_request(b, avail, body_len, &rq);
        if (rc > 0 && ((size_t)rc <= avail || (uint64_t)rc > body_len || rc > TF_WIRE_MAX_FIXED))
            bad++;
        if (rc == 0) {
            uint64_t arr = 0;
            if (rq.opcode == TF_OP_V1_SWEEP || rq.opcode == TF_OP_V1_ECHO ||
                rq.opcode == TF_OP_SWEEP)
                arr = 8 * rq.n_bars + 48 * rq.n_combos;
            else if (rq.opcode == TF_OP_LOAD)
                arr = 8 * rq.n_bars;
            else if (rq.opcode == TF_OP_SWEEP_DS)
                arr = 48 * rq.n_combos;
            else if (rq.opcode == TF_OP_ECHO)
                arr = rq.var_len;
            if (rq.fixed_len > body_len || rq.fixed_len + rq.var_len != body_len ||
                arr != rq.var_len || rq.fixed_len > avail)
                bad++;
        }
    }
    CHECK_EQ(bad, 0);
    munmap(m, 2 * (size_t)pg);
}

/* ---- the v2 reply codecs against tests/vectors/v2_replies.txt ---- */

/* The value of field `name` in "a=1,b=2" (0 when absent: the test then fails on the bytes). */
static const char *field(const char *fields, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = fields; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, name, n) && p[n] == '=')
            return p + n + 1;
    fprintf(stderr, "v2_replies: no field %s in %s\n", name, fields);
    CHECK(0);
    return "0";
}

static uint64_t fu(const char *f, const char *n)
{
    return strtoull(field(f, n), NULL, 10);
}

static int64_t fi(const char *f, const char *n)
{
    return strtoll(field(f, n), NULL, 10);
}

static double fd(const char *f, const char *n)
{
    return strtod(field(f, n), NULL);
}

static int hex_bytes(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = strlen(hex) / 2;
    if (n > cap || strlen(hex) % 2)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (uint8_t)v;
    }
    return (int)n;
}

static const char *const stat_names[TF_STAT_COUNT] = {
    "requests",      "errors",        "connections_total", "connections_open", "datasets",
    "dataset_bytes", "sessions_open", "bytes_in",          "bytes_out",        "uptime_ns",
    "sweeps",        "combos"};

/* Encodes FIELDS with the reply's encoder into enc and decodes want with its decoder, checking
 * the decoded fields. Returns the encoded length, or -1 for an unknown reply. */
static int reply_case(const char *name, const char *f, const uint8_t *want, uint8_t *enc)
{
    memset(enc, 0xA5, 128); /* reserved fields must be written, as 0 */
    if (!strcmp(name, "hello")) {
        tfw_hello_reply r = {(uint32_t)fu(f, "version"),
                             (uint32_t)fu(f, "caps"),
                             fu(f, "max_frame"),
                             fu(f, "max_memory"),
                             (uint32_t)fu(f, "max_datasets"),
                             (uint32_t)fu(f, "threads")};
        tfw_hello_reply d;
        tfw_get_hello(want, &d);
        CHECK(d.version == r.version && d.caps == r.caps && d.max_frame == r.max_frame &&
              d.max_memory == r.max_memory && d.max_datasets == r.max_datasets &&
              d.threads == r.threads);
        return (int)tfw_put_hello(enc, &r);
    }
    if (!strcmp(name, "load")) {
        tfw_load_reply r = {fu(f, "handle"), fu(f, "n_bars"), (uint32_t)fu(f, "created")}, d;
        tfw_get_load(want, &d);
        CHECK(d.handle == r.handle && d.n_bars == r.n_bars && d.created == r.created);
        return (int)tfw_put_load(enc, &r);
    }
    if (!strcmp(name, "sweep")) {
        tfw_sweep_reply r = {(uint32_t)fu(f, "n_combos"), (uint32_t)fu(f, "flags")}, d;
        tfw_get_sweep(want, &d);
        CHECK(d.n_combos == r.n_combos && d.flags == r.flags);
        return (int)tfw_put_sweep(enc, &r);
    }
    if (!strcmp(name, "run_one")) {
        tfw_run_one_reply r = {fd(f, "pnl"), fi(f, "trades")}, d;
        tfw_get_run_one(want, &d);
        CHECK(tf_test_same_bits(d.pnl, r.pnl) && d.trades == r.trades);
        return (int)tfw_put_run_one(enc, &r);
    }
    if (!strcmp(name, "session_open")) {
        CHECK_EQ(tfw_get_session_open(want), fu(f, "session"));
        return (int)tfw_put_session_open(enc, fu(f, "session"));
    }
    if (!strcmp(name, "session_bar") || !strcmp(name, "session_state")) {
        int bars = !strcmp(name, "session_state");
        tfw_session_reply r = {(int32_t)fi(f, "position"), fi(f, "trades"), fd(f, "pnl"),
                               bars ? fi(f, "bars") : -1},
                          d;
        tfw_get_session(want, bars, &d);
        CHECK(d.position == r.position && d.trades == r.trades && tf_test_same_bits(d.pnl, r.pnl) &&
              d.bars == r.bars);
        return (int)tfw_put_session(enc, &r, bars);
    }
    if (!strcmp(name, "stats")) {
        uint64_t v[TF_STAT_COUNT], d[TF_STAT_COUNT];
        for (int i = 0; i < TF_STAT_COUNT; i++)
            v[i] = fu(f, stat_names[i]);
        tfw_get_stats(want, d);
        CHECK(!memcmp(v, d, sizeof v));
        return (int)tfw_put_stats(enc, v);
    }
    if (!strcmp(name, "strategies")) {
        tfw_strategies_reply r = {(uint32_t)fu(f, "count"), (uint32_t)fu(f, "text_len")}, d;
        tfw_get_strategies(want, &d);
        CHECK(d.count == r.count && d.text_len == r.text_len);
        return (int)tfw_put_strategies(enc, &r);
    }
    if (!strcmp(name, "error")) {
        tfw_error_reply r = {(int32_t)fi(f, "code"), (uint32_t)fu(f, "msg_len")}, d;
        tfw_get_error_fixed(want, &d);
        CHECK(d.code == r.code && d.msg_len == r.msg_len);
        return (int)tfw_put_error_fixed(enc, &r);
    }
    return -1;
}

static void test_reply_vectors(void)
{
    FILE *fp = tf_test_open_vectors("v2_replies.txt");
    if (!fp)
        return;
    char line[2048], name[64], fields[1024], hex[512];
    int n = 0, kinds = 0;
    const char *last = "";
    static char seen[16][64];
    while (fgets(line, sizeof line, fp)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (sscanf(line, "%63s %1023s %511s", name, fields, hex) != 3) {
            fprintf(stderr, "v2_replies: bad line %s", line);
            CHECK(0);
            continue;
        }
        uint8_t want[256], enc[256];
        int len = hex_bytes(hex, want, sizeof want);
        CHECK(len > 0);
        int got = reply_case(name, fields, want, enc);
        if (got != len || memcmp(enc, want, (size_t)len)) {
            fprintf(stderr, "v2_replies: %s %s: encoded %d bytes, want %d\n", name, fields, got,
                    len);
            CHECK(0);
        } else {
            CHECK(1);
        }
        if (strcmp(last, name) && kinds < 16) {
            snprintf(seen[kinds], sizeof seen[kinds], "%s", name);
            last = seen[kinds++];
        }
        n++;
    }
    fclose(fp);
    CHECK(n >= 18);
    CHECK_EQ(kinds, 10); /* every reply payload has vectors */
}

/* The opcode table against the opcode list of docs/protocol.md: request and reply sizes, the
 * facts the server switches on, and nothing else in the byte range. */
static void test_op_table(void)
{
    static const struct {
        uint8_t op, version, var, reply, reply_var, flags;
        uint16_t fixed;
        const char *name;
    } want[] = {
        {0x00, 1, 1, 0, 1, TFW_OP_SWEEPS | TFW_OP_CLOSES, 9, "v1 sweep"},
        {0x01, 1, 1, 0, 1, TFW_OP_CLOSES, 9, "v1 echo"},
        {0x10, 2, 0, 32, 0, 0, 8, "HELLO"},
        {0x11, 2, 1, 24, 0, TFW_OP_CLOSES, 8, "LOAD"},
        {0x12, 2, 1, 8, 1, TFW_OP_SWEEPS | TFW_OP_SWEEP_FLAGS | TFW_OP_DATASET, 16, "SWEEP_DS"},
        {0x13, 2, 0, 16, 0, TFW_OP_DATASET, 56, "RUN_ONE"},
        {0x14, 2, 1, 8, 1, TFW_OP_SWEEPS | TFW_OP_CLOSES, 8, "SWEEP"},
        {0x15, 2, 1, 0, 1, 0, 0, "ECHO"},
        {0x16, 2, 0, 0, 0, TFW_OP_DATASET, 8, "DROP"},
        {0x17, 2, 0, 96, 0, 0, 0, "STATS"},
        {0x18, 2, 0, 24, 0, 0, 16, "LOAD_FD"},
        {0x1A, 2, 0, 8, 1, 0, 0, "STRATEGIES"},
        {0x1B, 2, 1, 8, 1, TFW_OP_SWEEPS | TFW_OP_SWEEP_FLAGS | TFW_OP_CLOSES | TFW_OP_DATASET, 32,
         "SWEEP_WITH"},
        {0x20, 2, 0, 8, 0, 0, 48, "SESSION_OPEN"},
        {0x21, 2, 0, 24, 0, TFW_OP_SESSION, 16, "SESSION_BAR"},
        {0x22, 2, 0, 32, 0, TFW_OP_SESSION, 8, "SESSION_QUERY"},
        {0x23, 2, 0, 32, 0, TFW_OP_SESSION, 8, "SESSION_CLOSE"},
        {0x25, 2, 1, 8, 0, 0, 8, "SESSION_OPEN_WITH"},
    };
    int rows = 0;
    for (int op = 0; op < 256; op++) {
        const tfw_op *o = tfw_op_of((uint8_t)op);
        CHECK(o != NULL);
        int w = -1;
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
            if (want[i].op == op)
                w = (int)i;
        if (w < 0) {
            CHECK(o->name == NULL && o->version == 0 && o->flags == 0);
            CHECK(!strcmp(tfw_op_name((uint8_t)op), "opcode"));
            continue;
        }
        rows++;
        CHECK(o->name && !strcmp(o->name, want[w].name));
        CHECK(!strcmp(tfw_op_name((uint8_t)op), want[w].name));
        CHECK_EQ(o->version, want[w].version);
        CHECK_EQ(o->var, want[w].var);
        CHECK_EQ(o->fixed, want[w].fixed);
        CHECK_EQ(o->reply, want[w].reply);
        CHECK_EQ(o->reply_var, want[w].reply_var);
        CHECK_EQ(o->flags, want[w].flags);
        CHECK_EQ(tfw_op_has((uint8_t)op, TFW_OP_SWEEPS), (want[w].flags & TFW_OP_SWEEPS) != 0);
    }
    CHECK_EQ(rows, (int)(sizeof want / sizeof want[0]));
    CHECK(tfw_op_of(TF_OP_ERROR)->name == NULL); /* a client never sends one */
}

int main(void)
{
    test_v1();
    test_v2_sizes();
    test_v2_arrays();
    test_v2_errors();
    test_encoders();
    test_hash();
    test_guard_page();
    test_reply_vectors();
    test_op_table();
    return tf_test_report();
}

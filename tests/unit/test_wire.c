/* The pure wire decoder and encoders (include/tollfree/wire.h), without a server: every opcode,
 * every length rule, need-more semantics, error frames, the dataset hash, and reads placed against
 * an unreadable page so that any over-read crashes. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "tollfree/wire.h"

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

int main(void)
{
    test_v1();
    test_v2_sizes();
    test_v2_arrays();
    test_v2_errors();
    test_encoders();
    test_hash();
    test_guard_page();
    return tf_test_report();
}

/* OFL1 codec: golden vectors both ways, every error code, no over-read, CRC32C, generator. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "orderflow/orderflow_internal.h"
#include "test_ofl_golden.h"
#include "tollfree/error.h"
#include "tollfree/orderflow.h"

static void test_golden(void)
{
    for (int i = 0; i < GOLDEN_N; i++) {
        const struct golden *g = &goldens[i];
        uint8_t want_f[256], want_d[256], got[256];
        size_t nf = golden_bytes(g->frame_hex, want_f);
        size_t nd = golden_bytes(g->datagram_hex, want_d);
        tf_ofl_msg want, m;
        golden_msg(i, &want);
        CHECK(!strcmp(tf_ofl_kind_name(want.kind), g->name));
        CHECK_EQ(tf_ofl_payload_size(want.kind), g->payload_len);
        CHECK_EQ(tf_ofl_frame_size(want.kind), (int)nf);
        CHECK_EQ(tf_ofl_datagram_size(want.kind), (int)nd);
        CHECK_EQ(nf, 11 + (size_t)g->payload_len);
        CHECK_EQ(nd, 17 + (size_t)g->payload_len);

        /* bytes -> struct */
        memset(&m, 0x5a, sizeof m);
        CHECK_RC(tf_ofl_frame_decode(want_f, nf, &m), (int)nf);
        CHECK(golden_same(&m, &want));
        CHECK_EQ(m.session_id, 0);
        memset(&m, 0x5a, sizeof m);
        CHECK_RC(tf_ofl_datagram_decode(want_d, nd, &m), (int)nd);
        CHECK(golden_same(&m, &want));
        CHECK_EQ(m.session_id, GOLDEN_SESSION);

        /* struct -> bytes */
        memset(got, 0xee, sizeof got);
        CHECK_RC(tf_ofl_frame_encode(got, nf, &want), (int)nf);
        CHECK_BITS(got, want_f, nf);
        CHECK_EQ(got[nf], 0xee);
        tf_ofl_msg wd = want;
        wd.session_id = GOLDEN_SESSION;
        memset(got, 0xee, sizeof got);
        CHECK_RC(tf_ofl_datagram_encode(got, nd, &wd), (int)nd);
        CHECK_BITS(got, want_d, nd);
        CHECK_EQ(got[nd], 0xee);

        /* one byte short: nothing written */
        memset(got, 0xee, sizeof got);
        CHECK_RC(tf_ofl_frame_encode(got, nf - 1, &want), TF_E_OFL_BUFFER_TOO_SHORT);
        CHECK_RC(tf_ofl_datagram_encode(got, nd - 1, &wd), TF_E_OFL_BUFFER_TOO_SHORT);
        CHECK_EQ(got[0], 0xee);

        /* the raw envelope writer agrees with the typed one */
        CHECK_RC(
            tf_ofl_frame_encode_raw(got, sizeof got, want.kind, GOLDEN_SEQ, want_f + 11, nf - 11),
            (int)nf);
        CHECK_BITS(got, want_f, nf);

        /* a stream of two frames: decode returns the first frame's size */
        uint8_t two[512];
        memcpy(two, want_f, nf);
        memcpy(two + nf, want_f, nf);
        CHECK_RC(tf_ofl_frame_decode(two, 2 * nf, &m), (int)nf);
        CHECK_RC(tf_ofl_frame_decode(two + nf, nf, &m), (int)nf);
    }
}

/* Each input placed so that its last byte is the last readable byte before a PROT_NONE page:
 * any read past the given length faults. Every truncation of every golden frame. */
static void test_no_overread(void)
{
    long pg = sysconf(_SC_PAGESIZE);
    uint8_t *map =
        mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(map != MAP_FAILED);
    if (map == MAP_FAILED)
        return;
    CHECK_EQ(mprotect(map + pg, (size_t)pg, PROT_NONE), 0);
    uint8_t *end = map + pg;
    for (int i = 0; i < GOLDEN_N; i++) {
        uint8_t f[256], d[256];
        size_t nf = golden_bytes(goldens[i].frame_hex, f);
        size_t nd = golden_bytes(goldens[i].datagram_hex, d);
        tf_ofl_msg m;
        for (size_t len = 0; len <= nf; len++) {
            memcpy(end - len, f, len);
            int want = len < 11   ? TF_E_OFL_HEADER_TOO_SHORT
                       : len < nf ? TF_E_OFL_PAYLOAD_TOO_SHORT
                                  : (int)nf;
            CHECK_RC(tf_ofl_frame_decode(end - len, len, &m), want);
        }
        for (size_t len = 0; len <= nd; len++) {
            memcpy(end - len, d, len);
            int want = len < 17   ? TF_E_OFL_HEADER_TOO_SHORT
                       : len < nd ? TF_E_OFL_PAYLOAD_LENGTH
                                  : (int)nd;
            CHECK_RC(tf_ofl_datagram_decode(end - len, len, &m), want);
        }
        /* encoders write exactly the frame size and no more */
        tf_ofl_msg want;
        golden_msg(i, &want);
        CHECK_RC(tf_ofl_frame_encode(end - nf, nf, &want), (int)nf);
        CHECK_RC(tf_ofl_datagram_encode(end - nd, nd, &want), (int)nd);
    }
    munmap(map, (size_t)pg * 2);
}

/* A frame/datagram of golden i with one byte changed. */
static size_t frame_of(int i, uint8_t *b)
{
    return golden_bytes(goldens[i].frame_hex, b);
}

static size_t dgram_of(int i, uint8_t *b)
{
    return golden_bytes(goldens[i].datagram_hex, b);
}

enum { G_HB = 0, G_NL = 1, G_NM = 2, G_CBO = 3, G_REJ = 7, G_TRADE = 10 };

static void test_errors(void)
{
    uint8_t b[1024];
    tf_ofl_msg m, before;
    memset(&m, 0x5a, sizeof m);
    before = m;
    size_t n;

    /* HeaderTooShort: both envelopes */
    n = frame_of(G_NL, b);
    CHECK_RC(tf_ofl_frame_decode(b, 10, &m), TF_E_OFL_HEADER_TOO_SHORT);
    CHECK_RC(tf_ofl_frame_decode(b, 0, &m), TF_E_OFL_HEADER_TOO_SHORT);
    CHECK_RC(tf_ofl_frame_decode(NULL, 0, &m), TF_E_OFL_HEADER_TOO_SHORT);
    n = dgram_of(G_NL, b);
    CHECK_RC(tf_ofl_datagram_decode(b, 16, &m), TF_E_OFL_HEADER_TOO_SHORT);
    CHECK_RC(tf_ofl_frame_decode(NULL, 5, &m), TF_E_NULL_ARG);
    CHECK_RC(tf_ofl_datagram_decode(NULL, 5, &m), TF_E_NULL_ARG);

    /* FrameLengthTooSmall: frame_len 0..8, checked before the bytes are all there */
    for (int fl = 0; fl < 9; fl++) {
        n = frame_of(G_NL, b);
        b[0] = (uint8_t)fl;
        b[1] = 0;
        CHECK_RC(tf_ofl_frame_decode(b, n, &m), TF_E_OFL_FRAME_LENGTH_TOO_SMALL);
    }

    /* FrameTooLarge: 2 + frame_len > 128, even when all the bytes are there */
    memset(b, 0, sizeof b);
    b[0] = 127;
    b[2] = TF_OFL_NEW_LIMIT;
    CHECK_RC(tf_ofl_frame_decode(b, 129, &m), TF_E_OFL_FRAME_TOO_LARGE);
    b[0] = 0xff;
    b[1] = 0xff;
    CHECK_RC(tf_ofl_frame_decode(b, 11, &m), TF_E_OFL_FRAME_TOO_LARGE);
    b[0] = 126; /* exactly the cap: length wrong for the kind, but not too large */
    b[1] = 0;
    CHECK_RC(tf_ofl_frame_decode(b, 128, &m), TF_E_OFL_PAYLOAD_LENGTH);

    /* PayloadTooShort: the stream's "need more bytes" */
    n = frame_of(G_TRADE, b);
    CHECK_RC(tf_ofl_frame_decode(b, n - 1, &m), TF_E_OFL_PAYLOAD_TOO_SHORT);
    CHECK_RC(tf_ofl_frame_decode(b, 11, &m), TF_E_OFL_PAYLOAD_TOO_SHORT);

    /* UnknownKind / ReservedKind for every byte, both envelopes. A frame with the kind's right
     * length when it has one. */
    int known = 0, reserved = 0, unknown = 0;
    for (int k = 0; k < 256; k++) {
        int ps = tf_ofl_payload_size(k);
        uint8_t f[256], d[256];
        memset(f, 0, sizeof f);
        memset(d, 0, sizeof d);
        size_t plen = ps >= 0 ? (size_t)ps : 16;
        f[0] = (uint8_t)(9 + plen);
        f[2] = (uint8_t)k;
        d[16] = (uint8_t)k;
        int rf = tf_ofl_frame_decode(f, 11 + plen, &m);
        int rd = tf_ofl_datagram_decode(d, 17 + plen, &m);
        if (ps >= 0) {
            known++;
            CHECK_RC(rf, (int)(11 + plen));
            CHECK_RC(rd, (int)(17 + plen));
            CHECK(tf_ofl_kind_name(k) != NULL);
        } else if (k == 0x06 || k == 0x40 || k == 0xa0) {
            reserved++;
            CHECK_RC(ps, TF_E_OFL_RESERVED_KIND);
            CHECK_RC(rf, TF_E_OFL_RESERVED_KIND);
            CHECK_RC(rd, TF_E_OFL_RESERVED_KIND);
            CHECK(tf_ofl_kind_name(k) == NULL);
        } else {
            unknown++;
            CHECK_RC(ps, TF_E_OFL_UNKNOWN_KIND);
            CHECK_RC(rf, TF_E_OFL_UNKNOWN_KIND);
            CHECK_RC(rd, TF_E_OFL_UNKNOWN_KIND);
            CHECK(tf_ofl_kind_name(k) == NULL);
        }
    }
    CHECK_EQ(known, 11);
    CHECK_EQ(reserved, 3);
    CHECK_EQ(unknown, 242);
    CHECK_RC(tf_ofl_payload_size(-1), TF_E_OFL_UNKNOWN_KIND);
    CHECK_RC(tf_ofl_payload_size(256), TF_E_OFL_UNKNOWN_KIND);

    /* PayloadLength: the length must match the kind exactly, both directions */
    n = frame_of(G_CBO, b);
    b[0] = (uint8_t)(b[0] + 1);
    b[n] = 0;
    CHECK_RC(tf_ofl_frame_decode(b, n + 1, &m), TF_E_OFL_PAYLOAD_LENGTH);
    n = frame_of(G_CBO, b);
    b[0] = (uint8_t)(b[0] - 1);
    CHECK_RC(tf_ofl_frame_decode(b, n, &m), TF_E_OFL_PAYLOAD_LENGTH);
    n = frame_of(G_HB, b);
    b[0] = 10;
    CHECK_RC(tf_ofl_frame_decode(b, 12, &m), TF_E_OFL_PAYLOAD_LENGTH);
    n = dgram_of(G_CBO, b);
    b[n] = 0;
    CHECK_RC(tf_ofl_datagram_decode(b, n + 1, &m), TF_E_OFL_PAYLOAD_LENGTH);
    CHECK_RC(tf_ofl_datagram_decode(b, n - 1, &m), TF_E_OFL_PAYLOAD_LENGTH);

    /* DatagramTooLarge: over 512 bytes, whatever the kind */
    memset(b, 0, sizeof b);
    CHECK_RC(tf_ofl_datagram_decode(b, 513, &m), TF_E_OFL_DATAGRAM_TOO_LARGE);
    CHECK_RC(tf_ofl_datagram_decode(b, 512, &m), TF_E_OFL_PAYLOAD_LENGTH);

    /* InvalidSide: NewLimit and NewMarket, both envelopes, every bad byte */
    for (int side = 0; side < 256; side++) {
        int want = side <= 1 ? 0 : TF_E_OFL_INVALID_SIDE;
        n = frame_of(G_NL, b);
        b[11 + 32] = (uint8_t)side;
        int rc = tf_ofl_frame_decode(b, n, &m);
        CHECK_RC(rc < 0 ? rc : 0, want);
        n = dgram_of(G_NM, b);
        b[17 + 32] = (uint8_t)side;
        rc = tf_ofl_datagram_decode(b, n, &m);
        CHECK_RC(rc < 0 ? rc : 0, want);
    }
    /* InvalidReason: only 0..4 and 255 */
    for (int r = 0; r < 256; r++) {
        int want = r <= 4 || r == 255 ? 0 : TF_E_OFL_INVALID_REASON;
        n = frame_of(G_REJ, b);
        b[11 + 32] = (uint8_t)r;
        int rc = tf_ofl_frame_decode(b, n, &m);
        CHECK_RC(rc < 0 ? rc : 0, want);
        if (rc > 0)
            CHECK(tf_ofl_reason_name(r) != NULL && m.rejected.reason == r);
        else
            CHECK(tf_ofl_reason_name(r) == NULL);
        n = dgram_of(G_REJ, b);
        b[17 + 32] = (uint8_t)r;
        rc = tf_ofl_datagram_decode(b, n, &m);
        CHECK_RC(rc < 0 ? rc : 0, want);
    }
    /* The encoders refuse the same reasons (the frame encoder's jump-free path tests the byte
     * from the kind's row), before the room; every event kind's frame, whole room or one short. */
    for (int r = 0; r < 256; r++) {
        int want = r <= 4 || r == 255 ? 0 : TF_E_OFL_INVALID_REASON;
        tf_ofl_msg e;
        memset(&e, 0, sizeof e);
        e.kind = TF_OFL_REJECTED;
        e.journal_seq = 7;
        e.rejected.client_order_id = 9;
        e.rejected.reason = (uint8_t)r;
        uint8_t f[TF_OFL_MAX_FRAME];
        int rc = tf_ofl_frame_encode(f, sizeof f, &e);
        CHECK_RC(rc < 0 ? rc : 0, want);
        if (rc > 0) {
            tf_ofl_msg back;
            CHECK_RC(rc, TF_OFL_FRAME_HEADER_LEN + TF_OFL_REJECTED_LEN);
            CHECK_RC(tf_ofl_frame_decode(f, (size_t)rc, &back), rc);
            CHECK(back.rejected.reason == r && back.rejected.client_order_id == 9);
        }
        rc = tf_ofl_frame_encode(f, TF_OFL_FRAME_HEADER_LEN + TF_OFL_REJECTED_LEN - 1, &e);
        CHECK_RC(rc, want ? want : TF_E_OFL_BUFFER_TOO_SHORT);
        rc = tf_ofl_datagram_encode(f, sizeof f, &e);
        CHECK_RC(rc < 0 ? rc : 0, want);
    }
    CHECK(!strcmp(tf_ofl_reason_name(4), "DuplicateClientOrderId"));
    CHECK(!strcmp(tf_ofl_side_name(0), "Buy"));
    CHECK(!strcmp(tf_ofl_side_name(1), "Sell"));
    CHECK(tf_ofl_side_name(2) == NULL);

    /* every failed decode above left *out untouched? check on fresh failures */
    memset(&m, 0x5a, sizeof m);
    n = frame_of(G_NL, b);
    b[11 + 32] = 2;
    CHECK_RC(tf_ofl_frame_decode(b, n, &m), TF_E_OFL_INVALID_SIDE);
    CHECK_BITS(&m, &before, sizeof m);
    n = dgram_of(G_REJ, b);
    b[17 + 32] = 9;
    CHECK_RC(tf_ofl_datagram_decode(b, n, &m), TF_E_OFL_INVALID_REASON);
    CHECK_BITS(&m, &before, sizeof m);

    /* Encode refuses what a decoder would refuse, writing nothing */
    tf_ofl_msg e;
    memset(b, 0xee, 64);
    golden_msg(G_NL, &e);
    e.new_limit.side = 2;
    CHECK_RC(tf_ofl_frame_encode(b, sizeof b, &e), TF_E_OFL_INVALID_SIDE);
    CHECK_RC(tf_ofl_datagram_encode(b, sizeof b, &e), TF_E_OFL_INVALID_SIDE);
    golden_msg(G_NM, &e);
    e.new_market.side = 7;
    CHECK_RC(tf_ofl_frame_encode(b, sizeof b, &e), TF_E_OFL_INVALID_SIDE);
    golden_msg(G_REJ, &e);
    e.rejected.reason = 5;
    CHECK_RC(tf_ofl_frame_encode(b, sizeof b, &e), TF_E_OFL_INVALID_REASON);
    CHECK_RC(tf_ofl_datagram_encode(b, sizeof b, &e), TF_E_OFL_INVALID_REASON);
    e.kind = 0x06;
    CHECK_RC(tf_ofl_frame_encode(b, sizeof b, &e), TF_E_OFL_RESERVED_KIND);
    e.kind = 0x99;
    CHECK_RC(tf_ofl_datagram_encode(b, sizeof b, &e), TF_E_OFL_UNKNOWN_KIND);
    CHECK_EQ(b[0], 0xee);
    CHECK_EQ(b[63], 0xee);

    /* PayloadTooLarge (raw envelope): 9 + payload must fit frame_len's u16 */
    static uint8_t big[65536 + 64], src[65536];
    CHECK_RC(tf_ofl_frame_encode_raw(big, sizeof big, 1, 0, src, 65527),
             TF_E_OFL_PAYLOAD_TOO_LARGE);
    CHECK_RC(tf_ofl_frame_encode_raw(big, sizeof big, 1, 0, src, 65526), 65537);
    CHECK_EQ(big[0], 0xff);
    CHECK_EQ(big[1], 0xff);
    CHECK_RC(tf_ofl_frame_encode_raw(big, 10, 1, 0, NULL, 0), TF_E_OFL_BUFFER_TOO_SHORT);
    CHECK_RC(tf_ofl_frame_encode_raw(big, 11, 1, 0, NULL, 0), 11);
    CHECK_RC(tf_ofl_frame_encode_raw(big, 64, 1, 0, NULL, 3), TF_E_NULL_ARG);
}

static void test_journal_header(void)
{
    /* "OFL1", version 1, session 0x0102030405060708, clock 1 (wall ns) */
    static const uint8_t golden[15] = {'O', 'F', 'L', '1', 1, 0, 8, 7, 6, 5, 4, 3, 2, 1, 1};
    tf_ofl_journal_header h = {1, 0x0102030405060708ull, TF_OFL_CLOCK_WALL_NS}, d;
    uint8_t b[32];
    memset(b, 0xee, sizeof b);
    CHECK_RC(tf_ofl_journal_header_encode(b, sizeof b, &h), 15);
    CHECK_BITS(b, golden, 15);
    CHECK_EQ(b[15], 0xee);
    CHECK_RC(tf_ofl_journal_header_decode(golden, 15, &d), 15);
    CHECK_EQ(d.schema_version, 1);
    CHECK_EQ(d.session_id, 0x0102030405060708ull);
    CHECK_EQ(d.clock_kind, 1);

    for (size_t len = 0; len < 15; len++)
        CHECK_RC(tf_ofl_journal_header_decode(golden, len, &d), TF_E_OFL_BUFFER_TOO_SHORT);
    CHECK_RC(tf_ofl_journal_header_encode(b, 14, &h), TF_E_OFL_BUFFER_TOO_SHORT);
    memcpy(b, golden, 15);
    b[3] = '2';
    CHECK_RC(tf_ofl_journal_header_decode(b, 15, &d), TF_E_OFL_WRONG_MAGIC);
    memcpy(b, golden, 15);
    b[4] = 2;
    CHECK_RC(tf_ofl_journal_header_decode(b, 15, &d), TF_E_OFL_UNSUPPORTED_SCHEMA_VERSION);
    memcpy(b, golden, 15);
    b[5] = 1; /* version 257 */
    b[4] = 1;
    CHECK_RC(tf_ofl_journal_header_decode(b, 15, &d), TF_E_OFL_UNSUPPORTED_SCHEMA_VERSION);
    memcpy(b, golden, 15);
    b[14] = 2;
    CHECK_RC(tf_ofl_journal_header_decode(b, 15, &d), TF_E_OFL_UNSUPPORTED_CLOCK_KIND);
    h.schema_version = 0;
    CHECK_RC(tf_ofl_journal_header_encode(b, sizeof b, &h), TF_E_OFL_UNSUPPORTED_SCHEMA_VERSION);
    h.schema_version = 1;
    h.clock_kind = 9;
    CHECK_RC(tf_ofl_journal_header_encode(b, sizeof b, &h), TF_E_OFL_UNSUPPORTED_CLOCK_KIND);
}

static void test_error_codes(void)
{
    static const int codes[] = {
        TF_E_OFL_HEADER_TOO_SHORT,
        TF_E_OFL_FRAME_LENGTH_TOO_SMALL,
        TF_E_OFL_PAYLOAD_TOO_SHORT,
        TF_E_OFL_UNKNOWN_KIND,
        TF_E_OFL_RESERVED_KIND,
        TF_E_OFL_PAYLOAD_LENGTH,
        TF_E_OFL_INVALID_SIDE,
        TF_E_OFL_INVALID_REASON,
        TF_E_OFL_PAYLOAD_TOO_LARGE,
        TF_E_OFL_BUFFER_TOO_SHORT,
        TF_E_OFL_FRAME_TOO_LARGE,
        TF_E_OFL_DATAGRAM_TOO_LARGE,
        TF_E_OFL_WRONG_MAGIC,
        TF_E_OFL_UNSUPPORTED_SCHEMA_VERSION,
        TF_E_OFL_UNSUPPORTED_CLOCK_KIND,
        TF_E_OFL_TORN_RECORD,
        TF_E_OFL_CRC_MISMATCH,
        TF_E_OFL_SEQ_GAP,
        TF_E_OFL_SESSION_MISMATCH,
        TF_E_OFL_JOURNAL_FAILED,
        TF_E_OFL_HEADER_DAMAGED,
    };
    size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; i++) {
        CHECK(codes[i] < TF_E_OFL_BASE && codes[i] > TF_E_OFL_BASE - 100);
        CHECK(strcmp(tf_strerror(codes[i]), "unknown error code") != 0);
        for (size_t k = i + 1; k < n; k++) {
            CHECK(codes[i] != codes[k]);
            CHECK(strcmp(tf_strerror(codes[i]), tf_strerror(codes[k])) != 0);
        }
    }
    /* stable values: they are part of the ABI */
    CHECK_EQ(TF_E_OFL_HEADER_TOO_SHORT, -1401);
    CHECK_EQ(TF_E_OFL_UNSUPPORTED_CLOCK_KIND, -1415);
    CHECK_EQ(TF_E_OFL_JOURNAL_FAILED, -1424);
    CHECK_EQ(TF_E_OFL_HEADER_DAMAGED, -1425);
}

static void test_crc32c(void)
{
    /* Published CRC-32C check values (RFC 3720 B.4 and the "123456789" check). */
    uint8_t zeros[32], ones[32], inc[32];
    memset(zeros, 0, sizeof zeros);
    memset(ones, 0xff, sizeof ones);
    for (int i = 0; i < 32; i++)
        inc[i] = (uint8_t)i;
    CHECK_EQ(tf_crc32c(0, "123456789", 9), 0xE3069283u);
    CHECK_EQ(tf_crc32c(0, zeros, 32), 0x8A9136AAu);
    CHECK_EQ(tf_crc32c(0, ones, 32), 0x62A8AB43u);
    CHECK_EQ(tf_crc32c(0, inc, 32), 0x46DD794Eu);
    CHECK_EQ(tfo_crc32c_sw(0, "123456789", 9), 0xE3069283u);
    CHECK_EQ(tf_crc32c(0, NULL, 0), 0u);
    if (tfo_crc32c_hw_available())
        CHECK_EQ(tfo_crc32c_hw(0, "123456789", 9), 0xE3069283u);
    else
        printf("note: no SSE4.2 here, hardware CRC path not tested\n");
    /* both paths agree on every length and alignment, and chain at every split */
    uint8_t buf[300];
    for (int i = 0; i < 300; i++)
        buf[i] = (uint8_t)(i * 131 + 7);
    for (size_t off = 0; off < 8; off++)
        for (size_t len = 0; len + off <= 300; len += 7) {
            uint32_t s = tfo_crc32c_sw(0, buf + off, len);
            CHECK_EQ(tfo_crc32c_hw(0, buf + off, len), s);
            size_t cut = len / 3;
            CHECK_EQ(tf_crc32c(tf_crc32c(0, buf + off, cut), buf + off + cut, len - cut), s);
        }
}

static void test_generator(void)
{
    tf_ofl_gen a, b;
    tf_ofl_gen_init(&a, 42);
    tf_ofl_gen_init(&b, 42);
    int counts[256] = {0};
    uint8_t fa[TF_OFL_MAX_FRAME], fb[TF_OFL_MAX_FRAME], d[TF_OFL_MAX_DATAGRAM];
    int same = 1, roundtrip = 1;
    for (int i = 0; i < 20000; i++) {
        tf_ofl_msg ma, mb, back;
        tf_ofl_gen_next(&a, &ma);
        tf_ofl_gen_next(&b, &mb);
        counts[ma.kind]++;
        int na = tf_ofl_frame_encode(fa, sizeof fa, &ma);
        int nb = tf_ofl_frame_encode(fb, sizeof fb, &mb);
        same &= na > 0 && na == nb && !memcmp(fa, fb, (size_t)na) && ma.journal_seq == (uint64_t)i;
        roundtrip &= tf_ofl_frame_decode(fa, (size_t)na, &back) == na && golden_same(&back, &ma);
        int nd = tf_ofl_datagram_encode(d, sizeof d, &ma);
        roundtrip &= nd > 0 && tf_ofl_datagram_decode(d, (size_t)nd, &back) == nd &&
                     golden_same(&back, &ma) && back.session_id == a.session_id;
    }
    CHECK(same);
    CHECK(roundtrip);
    CHECK_EQ(counts[TF_OFL_NEW_LIMIT], 10000);
    CHECK_EQ(counts[TF_OFL_CANCEL_BY_ORDER], 4000);
    CHECK_EQ(counts[TF_OFL_REPLACE], 2000);
    CHECK_EQ(counts[TF_OFL_TRADE], 3000);
    CHECK_EQ(counts[TF_OFL_REJECTED], 1000);
    tf_ofl_gen c;
    tf_ofl_gen_init(&c, 43);
    CHECK(c.session_id != a.session_id);
}

/* Inside a longer buffer (72+ bytes after the header) the decoder takes its wide path (one
 * fixed copy, no jump on the kind): every golden frame decodes to the same fields, and a bad
 * side or reason still writes nothing. Also a walk of a journal-like run of all kinds. */
static void test_wide_path(void)
{
    uint8_t b[GOLDEN_N * TF_OFL_MAX_FRAME];
    tf_ofl_msg want, m, before;
    for (int i = 0; i < GOLDEN_N; i++) {
        memset(b, 0xc3, sizeof b);
        size_t n = golden_bytes(goldens[i].frame_hex, b);
        golden_msg(i, &want);
        memset(&m, 0x5a, sizeof m);
        CHECK_RC(tf_ofl_frame_decode(b, sizeof b, &m), (int)n);
        CHECK(golden_same(&m, &want));
        CHECK_EQ(m.session_id, 0);
    }
    int bad[3][2] = {{G_NL, 2}, {G_NM, 0xff}, {G_REJ, 9}};
    for (int k = 0; k < 3; k++) {
        memset(b, 0, sizeof b);
        frame_of(bad[k][0], b);
        b[11 + 32] = (uint8_t)bad[k][1];
        memset(&m, 0x5a, sizeof m);
        before = m;
        CHECK_RC(tf_ofl_frame_decode(b, sizeof b, &m),
                 k == 2 ? TF_E_OFL_INVALID_REASON : TF_E_OFL_INVALID_SIDE);
        CHECK_BITS(&m, &before, sizeof m);
    }
    /* every golden frame back to back, decoded in one pass: wide until the last few */
    size_t len = 0;
    for (int i = 0; i < GOLDEN_N; i++)
        len += golden_bytes(goldens[i].frame_hex, b + len);
    size_t at = 0;
    for (int i = 0; i < GOLDEN_N; i++) {
        golden_msg(i, &want);
        int r = tf_ofl_frame_decode(b + at, len - at, &m);
        CHECK(r > 0 && golden_same(&m, &want));
        at += r > 0 ? (size_t)r : len;
    }
    CHECK_EQ(at, len);
}

/* The kind table (orderflow_internal.h) is whole: every kind byte has a golden vector with its
 * name and size, and its field list covers the payload exactly once. A new row
 * without a golden or with a short field list fails here. */
static void test_kind_table(void)
{
    int kinds = 0;
    for (int k = 0; k < 256; k++) {
        int n = tf_ofl_payload_size(k);
        const tfo_field *f = tfo_kind_fields(k);
        CHECK((n >= 0) == (f != NULL));
        CHECK((n >= 0) == (tf_ofl_kind_name(k) != NULL));
        if (n < 0)
            continue;
        kinds++;
        int g = -1;
        for (int i = 0; i < GOLDEN_N; i++)
            if (golden_kinds[i] == k)
                g = i;
        CHECK(g >= 0);
        if (g >= 0) {
            CHECK(strcmp(goldens[g].name, tf_ofl_kind_name(k)) == 0);
            CHECK_EQ(goldens[g].payload_len, n);
        }
        int bytes = 0, twice = 0;
        uint8_t covered[TF_OFL_MAX_PAYLOAD + 16] = {0};
        for (; f->name; f++) {
            CHECK(f->offset + f->size <= TF_OFL_MAX_PAYLOAD);
            for (int b = f->offset; b < f->offset + f->size && b < (int)sizeof covered; b++)
                twice += covered[b]++ != 0;
            bytes += f->size;
        }
        CHECK_EQ(twice, 0);
        CHECK_EQ(bytes, n);
    }
    CHECK_EQ(kinds, GOLDEN_N);
    CHECK_EQ(kinds, OFL_IX_COUNT - 1);
}

int main(void)
{
    test_kind_table();
    test_golden();
    test_wide_path();
    test_no_overread();
    test_errors();
    test_journal_header();
    test_error_codes();
    test_crc32c();
    test_generator();
    return tf_test_report();
}

/* Internal to src/orderflow: the decode core shared by the codec and the journal walker (so the
 * walker can inline it), the CRC32C paths, and little-endian field access.
 *
 * Layout facts the decoder relies on are static assertions in codec.c. The host must be
 * little-endian: the wire is, and fields are moved with fixed-size memcpy. */
#ifndef TF_ORDERFLOW_INTERNAL_H
#define TF_ORDERFLOW_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tollfree/orderflow.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tollfree's OFL1 codec assumes a little-endian host"
#endif

/* Per kind byte: (dense index << 8) | payload size. A byte that is not a kind has index 0 and
 * size 0xFF, a size no length check of a valid frame can produce before the index is looked at. */
enum {
    OFL_IX_NONE = 0,
    OFL_IX_HEARTBEAT,
    OFL_IX_NEW_LIMIT,
    OFL_IX_NEW_MARKET,
    OFL_IX_CANCEL_BY_ORDER,
    OFL_IX_CANCEL_BY_CLIENT,
    OFL_IX_REPLACE,
    OFL_IX_ACCEPTED,
    OFL_IX_REJECTED,
    OFL_IX_REPLACED,
    OFL_IX_CANCELED,
    OFL_IX_TRADE,
};
#define OFL_NOT_A_KIND 0x00ff
extern const uint16_t tf_ofl_kind_table[256];

/* The ordered error of a frame/datagram the fast path refused (codec.c, kept out of line). */
int tf_ofl_frame_error(const uint8_t *b, size_t len);
int tf_ofl_datagram_error(const uint8_t *b, size_t len);

static inline uint16_t ofl_ld16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t ofl_ld64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint32_t ofl_ld32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void ofl_st16(uint8_t *p, uint16_t v)
{
    memcpy(p, &v, sizeof v);
}

static inline void ofl_st32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, sizeof v);
}

static inline void ofl_st64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, sizeof v);
}

/* The error for a byte that is not a kind. */
static inline int ofl_kind_error(uint8_t kind)
{
    return kind == 0x06 || kind == 0x40 || kind == 0xA0 ? TF_E_OFL_RESERVED_KIND
                                                        : TF_E_OFL_UNKNOWN_KIND;
}

/* Decodes a payload whose kind (dense index ix) and length have been checked: p points at that
 * many readable bytes. Validates side/reason before writing anything; writes only the union
 * member of the kind. Returns 0, INVALID_SIDE / INVALID_REASON, or 1 for index 0 (not a kind). */
static inline __attribute__((always_inline)) int ofl_payload_decode(unsigned ix, const uint8_t *p,
                                                                    tf_ofl_msg *out)
{
    switch (ix) {
    case OFL_IX_HEARTBEAT:
        return 0;
    case OFL_IX_NEW_LIMIT:
        if (p[32] > 1)
            return TF_E_OFL_INVALID_SIDE;
        /* Two contiguous runs: ids 0..32 and price+quantity 33..57. */
        memcpy(&out->new_limit, p, 32);
        memcpy((unsigned char *)&out->new_limit + offsetof(tf_ofl_new_limit, price), p + 33, 24);
        out->new_limit.side = p[32];
        return 0;
    case OFL_IX_NEW_MARKET:
        if (p[32] > 1)
            return TF_E_OFL_INVALID_SIDE;
        memcpy(&out->new_market, p, 32);
        memcpy(&out->new_market.quantity, p + 33, 16);
        out->new_market.side = p[32];
        return 0;
    case OFL_IX_CANCEL_BY_ORDER:
        memcpy(&out->cancel_by_order, p, TF_OFL_CANCEL_BY_ORDER_LEN);
        return 0;
    case OFL_IX_CANCEL_BY_CLIENT:
        memcpy(&out->cancel_by_client, p, TF_OFL_CANCEL_BY_CLIENT_LEN);
        return 0;
    case OFL_IX_REPLACE:
        memcpy(&out->replace, p, TF_OFL_REPLACE_LEN);
        return 0;
    case OFL_IX_ACCEPTED:
        memcpy(&out->accepted, p, TF_OFL_ACCEPTED_LEN);
        return 0;
    case OFL_IX_REJECTED:
        if (p[32] > TF_OFL_DUPLICATE_CLIENT_ORDER_ID && p[32] != TF_OFL_REASON_OTHER)
            return TF_E_OFL_INVALID_REASON;
        memcpy(&out->rejected, p, TF_OFL_REJECTED_LEN); /* the struct has the wire's layout */
        return 0;
    case OFL_IX_REPLACED:
        memcpy(&out->replaced, p, TF_OFL_REPLACED_LEN);
        return 0;
    case OFL_IX_CANCELED:
        memcpy(&out->canceled, p, TF_OFL_CANCELED_LEN);
        return 0;
    case OFL_IX_TRADE:
        memcpy(&out->trade, p, TF_OFL_TRADE_LEN);
        return 0;
    default: /* OFL_IX_NONE, and 12..15 which the table never holds */
        return 1;
    }
}

/* The payload when at least OFL_WIDE bytes are readable from p (the common case inside a
 * buffer or journal): no jump on the kind, which a shuffled flow of kinds mispredicts about
 * every other frame (issue 12: 10 ns/frame shuffled against 4 on a fixed cycle). Every struct
 * has the wire's layout except NewLimit and NewMarket, whose side byte (wire offset 32) moves
 * after the fields that follow it on the wire. So: one fixed copy of the largest payload; one
 * fixed 24-byte move to offset 32 from wire offset ofl_move_src[ix] (33 for those two, else 32:
 * the bytes already there); the side byte stored at ofl_side_dst[ix] (else at 32, where it
 * already is). The union's bytes past the kind's member receive whatever follows the payload
 * (unspecified). The side/reason byte is checked first, from a table: on an error nothing is
 * written. Same results as ofl_payload_decode. */
#define OFL_WIDE TF_OFL_MAX_PAYLOAD
enum { OFL_CHECK_NONE = 0, OFL_CHECK_SIDE = 1, OFL_CHECK_REASON = 2 };
static const uint8_t ofl_check[16] = {[OFL_IX_NEW_LIMIT] = OFL_CHECK_SIDE,
                                      [OFL_IX_NEW_MARKET] = OFL_CHECK_SIDE,
                                      [OFL_IX_REJECTED] = OFL_CHECK_REASON};
static const uint8_t ofl_move_src[16] = {32, 32, 33, 33, 32, 32, 32, 32,
                                         32, 32, 32, 32, 32, 32, 32, 32};
static const uint8_t ofl_side_dst[16] = {32,
                                         32,
                                         offsetof(tf_ofl_new_limit, side),
                                         offsetof(tf_ofl_new_market, side),
                                         32,
                                         32,
                                         32,
                                         32,
                                         32,
                                         32,
                                         32,
                                         32,
                                         32,
                                         32,
                                         32,
                                         32};

static inline __attribute__((always_inline)) int
ofl_payload_decode_wide(unsigned ix, const uint8_t *p, tf_ofl_msg *out)
{
    unsigned chk = ofl_check[ix], v = p[32];
    int bad_side = (chk == OFL_CHECK_SIDE) & (v > 1);
    int bad_reason = (chk == OFL_CHECK_REASON) & (v > TF_OFL_DUPLICATE_CLIENT_ORDER_ID) &
                     (v != TF_OFL_REASON_OTHER);
    if (__builtin_expect(bad_side | bad_reason | (ix == OFL_IX_NONE), 0))
        return ix == OFL_IX_NONE ? 1 : bad_side ? TF_E_OFL_INVALID_SIDE : TF_E_OFL_INVALID_REASON;
    unsigned char *u = (unsigned char *)&out->new_limit;
    _Static_assert(sizeof out->trade == OFL_WIDE, "the union is the largest payload");
    _Static_assert(offsetof(tf_ofl_new_limit, price) == 32 &&
                       offsetof(tf_ofl_new_limit, side) == 32 + 24,
                   "NewLimit: wire 33..57 at 32, side after");
    _Static_assert(offsetof(tf_ofl_new_market, quantity) == 32 &&
                       offsetof(tf_ofl_new_market, side) == 32 + 16,
                   "NewMarket: wire 33..49 at 32, side after");
    memcpy(u, p, OFL_WIDE);
    memcpy(u + 32, p + ofl_move_src[ix], 24);
    u[ofl_side_dst[ix]] = (unsigned char)v;
    return 0;
}

/* Decodes a stream frame (tf_ofl_frame_decode) of len bytes when avail >= len bytes are readable
 * at b (the wide payload copy needs OFL_WIDE of them after the header). The fast path needs two
 * comparisons for the envelope: frame_len - 9 equals the kind's size, and the bytes are there;
 * anything else goes to tf_ofl_frame_error, which checks in the documented order. */
static inline __attribute__((always_inline)) int ofl_frame_decode_in(const uint8_t *b, size_t len,
                                                                     size_t avail, tf_ofl_msg *out)
{
    if (len >= TF_OFL_FRAME_HEADER_LEN) {
        size_t fsize = (size_t)ofl_ld16(b) + 2; /* the frame's size; on the caller's chain */
        unsigned e = tf_ofl_kind_table[b[2]];
        if (fsize - TF_OFL_FRAME_HEADER_LEN == (e & 0xff) && len >= fsize) {
            /* Envelope fields first: out may not alias b, but the compiler cannot know. */
            uint8_t kind = b[2];
            uint64_t seq = ofl_ld64(b + 3);
            const uint8_t *pl = b + TF_OFL_FRAME_HEADER_LEN;
            int rc = avail - TF_OFL_FRAME_HEADER_LEN >= OFL_WIDE
                         ? ofl_payload_decode_wide(e >> 8 & 15, pl, out)
                         : ofl_payload_decode(e >> 8 & 15, pl, out);
            if (rc == 0) {
                out->kind = kind;
                out->journal_seq = seq;
                out->session_id = 0;
                return (int)fsize;
            }
            if (rc < 0)
                return rc;
        }
    }
    return tf_ofl_frame_error(b, len);
}

/* The same when exactly len bytes are readable. */
static inline __attribute__((always_inline)) int ofl_frame_decode(const uint8_t *b, size_t len,
                                                                  tf_ofl_msg *out)
{
    return ofl_frame_decode_in(b, len, len, out);
}

/* Decodes a whole datagram (tf_ofl_datagram_decode), same scheme. */
static inline __attribute__((always_inline)) int ofl_datagram_decode(const uint8_t *b, size_t len,
                                                                     tf_ofl_msg *out)
{
    if (len >= TF_OFL_DATAGRAM_HEADER_LEN) {
        unsigned e = tf_ofl_kind_table[b[16]];
        if (len - TF_OFL_DATAGRAM_HEADER_LEN == (e & 0xff)) {
            uint8_t kind = b[16];
            uint64_t session = ofl_ld64(b), seq = ofl_ld64(b + 8);
            int rc = ofl_payload_decode(e >> 8 & 15, b + TF_OFL_DATAGRAM_HEADER_LEN, out);
            if (rc == 0) {
                out->kind = kind;
                out->session_id = session;
                out->journal_seq = seq;
                return (int)len;
            }
            if (rc < 0)
                return rc;
        }
    }
    return tf_ofl_datagram_error(b, len);
}

/* The one payload writer (stream frames and datagrams both call it). Checks the kind and the
 * side/reason bytes first; writes plen bytes at p. Returns plen or an error. */
int tf_ofl_payload_write(uint8_t *p, size_t cap, const tf_ofl_msg *msg);

/* CRC32C paths (crc32c.c); tf_crc32c picks one. Exposed for the tests that compare them. */
uint32_t tf_crc32c_sw(uint32_t crc, const void *buf, size_t len);
uint32_t tf_crc32c_hw(uint32_t crc, const void *buf, size_t len);
int tf_crc32c_hw_available(void);

#endif

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

/* Decodes a stream frame (tf_ofl_frame_decode). The fast path needs two comparisons for the
 * envelope: frame_len - 9 equals the kind's size, and the bytes are there; anything else goes
 * to tf_ofl_frame_error, which checks in the documented order. */
static inline __attribute__((always_inline)) int ofl_frame_decode(const uint8_t *b, size_t len,
                                                                  tf_ofl_msg *out)
{
    if (len >= TF_OFL_FRAME_HEADER_LEN) {
        size_t fsize = (size_t)ofl_ld16(b) + 2; /* the frame's size; on the caller's chain */
        unsigned e = tf_ofl_kind_table[b[2]];
        if (fsize - TF_OFL_FRAME_HEADER_LEN == (e & 0xff) && len >= fsize) {
            /* Envelope fields first: out may not alias b, but the compiler cannot know. */
            uint8_t kind = b[2];
            uint64_t seq = ofl_ld64(b + 3);
            int rc = ofl_payload_decode(e >> 8 & 15, b + TF_OFL_FRAME_HEADER_LEN, out);
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

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

/* ---- the kind table ------------------------------------------------------------------------
 *
 * One row per OFL1 kind, read by everything that depends on the kind: the byte table, payload
 * sizes and names, the side/reason checks, the payload decoders and the writer (codec.c, the
 * journal walker through this header), `journal dump`'s field printer (src/cli/cmd_journal.c)
 * and the codec tests. A new kind is its enum value, TF_OFL_<NAME>_LEN, payload struct and
 * union member in orderflow.h, then one row here and its field list below.
 *
 *   X(NAME, "SpecName", member, layout, check, class)
 *
 * NAME:   TF_OFL_<NAME> is the kind byte, TF_OFL_<NAME>_LEN the payload size, OFL_IX_<NAME> the
 *         dense index, OFL_FIELDS_<NAME> the field list; member is the tf_ofl_msg union member.
 * layout: EMPTY  no payload;
 *         WIRE   the struct has the wire's layout for all LEN bytes (one copy);
 *         SIDE32 a side byte at wire offset 32 that the struct keeps after the fields behind it:
 *                wire 0..32 is struct 0..32, wire 33..LEN is struct 32..LEN-1, then side.
 * check:  NONE, SIDE (byte 32 is 0 or 1) or REASON (byte 32 is a tf_ofl_reason): a payload or
 *         message failing it is TF_E_OFL_INVALID_SIDE / INVALID_REASON and is never written.
 * class:  COMMAND, EVENT or CONTROL (tf_ofl_kind_class_t): the row of the kind table (kinds.c). */
#define OFL_KINDS(X)                                                                               \
    X(HEARTBEAT, "Heartbeat", new_limit, EMPTY, NONE, CONTROL)                                     \
    X(NEW_LIMIT, "NewLimit", new_limit, SIDE32, SIDE, COMMAND)                                     \
    X(NEW_MARKET, "NewMarket", new_market, SIDE32, SIDE, COMMAND)                                  \
    X(CANCEL_BY_ORDER, "CancelByOrder", cancel_by_order, WIRE, NONE, COMMAND)                      \
    X(CANCEL_BY_CLIENT, "CancelByClient", cancel_by_client, WIRE, NONE, COMMAND)                   \
    X(REPLACE, "Replace", replace, WIRE, NONE, COMMAND)                                            \
    X(ACCEPTED, "Accepted", accepted, WIRE, NONE, EVENT)                                           \
    X(REJECTED, "Rejected", rejected, WIRE, REASON, EVENT)                                         \
    X(REPLACED, "Replaced", replaced, WIRE, NONE, EVENT)                                           \
    X(CANCELED, "Canceled", canceled, WIRE, NONE, EVENT)                                           \
    X(TRADE, "Trade", trade, WIRE, NONE, EVENT)

/* The payload fields of each kind in wire order, as F(member, field, type): type U64, I64, QTY
 * (tf_ofl_qty), SIDE (tf_ofl_side byte) or REASON (tf_ofl_reason byte). */
#define OFL_FIELDS_HEARTBEAT(F)
#define OFL_FIELDS_NEW_LIMIT(F)                                                                    \
    F(new_limit, command_seq, U64)                                                                 \
    F(new_limit, account_id, U64)                                                                  \
    F(new_limit, client_order_id, U64)                                                             \
    F(new_limit, instrument_id, U64)                                                               \
    F(new_limit, side, SIDE)                                                                       \
    F(new_limit, price, I64)                                                                       \
    F(new_limit, quantity, QTY)
#define OFL_FIELDS_NEW_MARKET(F)                                                                   \
    F(new_market, command_seq, U64)                                                                \
    F(new_market, account_id, U64)                                                                 \
    F(new_market, client_order_id, U64)                                                            \
    F(new_market, instrument_id, U64)                                                              \
    F(new_market, side, SIDE)                                                                      \
    F(new_market, quantity, QTY)
#define OFL_FIELDS_CANCEL_BY_ORDER(F)                                                              \
    F(cancel_by_order, command_seq, U64)                                                           \
    F(cancel_by_order, order_id, U64)
#define OFL_FIELDS_CANCEL_BY_CLIENT(F)                                                             \
    F(cancel_by_client, command_seq, U64)                                                          \
    F(cancel_by_client, account_id, U64)                                                           \
    F(cancel_by_client, client_order_id, U64)
#define OFL_FIELDS_REPLACE(F)                                                                      \
    F(replace, command_seq, U64)                                                                   \
    F(replace, order_id, U64)                                                                      \
    F(replace, client_order_id, U64)                                                               \
    F(replace, price, I64)                                                                         \
    F(replace, quantity, QTY)
#define OFL_FIELDS_ACCEPTED(F)                                                                     \
    F(accepted, event_seq, U64)                                                                    \
    F(accepted, command_seq, U64)                                                                  \
    F(accepted, timestamp_ns, U64)                                                                 \
    F(accepted, order_id, U64)                                                                     \
    F(accepted, client_order_id, U64)                                                              \
    F(accepted, account_id, U64)
#define OFL_FIELDS_REJECTED(F)                                                                     \
    F(rejected, event_seq, U64)                                                                    \
    F(rejected, command_seq, U64)                                                                  \
    F(rejected, timestamp_ns, U64)                                                                 \
    F(rejected, client_order_id, U64)                                                              \
    F(rejected, reason, REASON)
#define OFL_FIELDS_REPLACED(F)                                                                     \
    F(replaced, event_seq, U64)                                                                    \
    F(replaced, command_seq, U64)                                                                  \
    F(replaced, timestamp_ns, U64)                                                                 \
    F(replaced, order_id, U64)                                                                     \
    F(replaced, client_order_id, U64)
#define OFL_FIELDS_CANCELED(F)                                                                     \
    F(canceled, event_seq, U64)                                                                    \
    F(canceled, command_seq, U64)                                                                  \
    F(canceled, timestamp_ns, U64)                                                                 \
    F(canceled, order_id, U64)
#define OFL_FIELDS_TRADE(F)                                                                        \
    F(trade, event_seq, U64)                                                                       \
    F(trade, command_seq, U64)                                                                     \
    F(trade, timestamp_ns, U64)                                                                    \
    F(trade, maker_order_id, U64)                                                                  \
    F(trade, taker_order_id, U64)                                                                  \
    F(trade, instrument_id, U64)                                                                   \
    F(trade, price, I64)                                                                           \
    F(trade, quantity, QTY)

/* Dense indexes: 0 is "not a kind". */
#define OFL_IX_ROW(NAME, str, member, layout, check, cls) OFL_IX_##NAME,
enum { OFL_IX_NONE = 0, OFL_KINDS(OFL_IX_ROW) OFL_IX_COUNT };
#undef OFL_IX_ROW

/* Per kind byte, what the codec's fast paths need in one 16-byte row (one load each, no shift or
 * mask on the hot path); all 0 for a byte that is not a kind. A frame of such a byte may pass the
 * fast path's size comparison (len 0) but its check (chk_lim 0 refuses every byte) and index 0 send
 * it to the ordered error path.
 *   len       payload size;           ix        dense index (0: not a kind);
 *   chk_add   chk_lim                 the side/reason check of the byte v at payload offset 32
 *                                     as one comparison: (uint8_t)(v + chk_add) < chk_lim
 *                                     (NONE: 0, 256; SIDE: 0, 2; REASON: 1, 6, which maps
 *                                     OTHER = 255 to 0 and 0..4 to 1..5);
 *   move_src  side_dst                the wide decoder's 24-byte move source and side-byte slot
 *                                     (ofl_payload_decode_wide). */
typedef struct tfo_kind_row {
    uint8_t len, ix, chk_add, move_src, side_dst;
    uint8_t enc_chk; /* the frame encoder's jump-free path (codec.c): where the check's byte is
                        in the struct (1: a byte inside the first field, for a kind without a
                        check), or 0 for a kind that path does not take (SIDE32, under 24 bytes) */
    uint16_t chk_lim;
    uint32_t frame_hdr; /* a stream frame's first 4 bytes: frame_len, kind, (0: journal_seq's) */
    uint8_t enc_mid;    /* the encoder's middle 24-byte move: at (len - 24) / 2 */
} tfo_kind_row;
extern const tfo_kind_row tfo_kind_table[256];

/* A payload field for generic readers (`journal dump`, tests): its name, type and offset in the
 * kind's union member. */
enum { OFL_T_U64, OFL_T_I64, OFL_T_QTY, OFL_T_SIDE, OFL_T_REASON };
typedef struct tfo_field {
    const char *name; /* NULL ends a list */
    uint8_t type;     /* OFL_T_* */
    uint8_t offset;   /* from the start of the union */
    uint8_t size;     /* bytes in the struct */
} tfo_field;
#define OFL_MAX_FIELDS 9
/* The fields of a kind byte (the list ends with a NULL name), or NULL for a byte that is not a
 * kind. */
const tfo_field *tfo_kind_fields(int kind);

/* ---- the gateway extension kinds (ext.c) ----------------------------------------------------
 *
 * Every gateway struct has the wire's layout for its LEN bytes (all u64/i64 fields, then the u8
 * fields, no hole: static assertions in ext.c), so a payload moves in one copy. The byte fields
 * `journal dump`, the tests and the fuzz target print or check, by kind: */
enum {
    OFL_T_U8 = OFL_T_REASON + 1, /* a plain byte (Order/AcceptedEx flags) */
    OFL_T_TYPE,                  /* tf_ofx_type */
    OFL_T_TIF,                   /* tf_ofx_tif */
    OFL_T_CANCEL_REASON,         /* tf_ofx_cancel_reason */
    OFL_T_EX_REASON              /* RejectedEx.reason: tf_ofl_reason or TF_OFX_REASON_* */
};
/* One row per gateway kind: X(NAME, "Name", member, number of u8 fields at the end, class). */
#define OFX_KINDS(X)                                                                               \
    X(ORDER, "Order", order, 4, COMMAND)                                                           \
    X(CANCEL, "Cancel", cancel, 0, COMMAND)                                                        \
    X(REPLACE_BY_CLIENT, "ReplaceByClient", replace_by_client, 0, COMMAND)                         \
    X(ACCEPTED, "AcceptedEx", accepted_ex, 4, EVENT)                                               \
    X(REPLACED, "ReplacedEx", replaced_ex, 1, EVENT)                                               \
    X(CANCELED, "CanceledEx", canceled_ex, 2, EVENT)                                               \
    X(FILL, "Fill", fill, 1, EVENT)                                                                \
    X(REJECTED, "RejectedEx", rejected_ex, 1, EVENT)
/* The venue's records (docs/venue.md "Extension records"), rows of the kind table (kinds.c):
 * X(NAME, "Name", class), payload size OFL_VENUE_<NAME>_LEN. src/venue/ names the same bytes and
 * sizes TFV_* and checks them against these at compile time. Keyed's payload is an 18-byte head and
 * the inner command's payload (-1: not fixed). */
#define OFL_VENUE_KEYED 0x10
#define OFL_VENUE_RISK_LIMITS 0x11
#define OFL_VENUE_KILL_SWITCH 0x12
#define OFL_VENUE_CANCEL_ON_DISCONNECT 0x13
#define OFL_VENUE_VENUE_REJECTED 0x90
#define OFL_VENUE_KEYED_LEN (-1)
#define OFL_VENUE_RISK_LIMITS_LEN 48
#define OFL_VENUE_KILL_SWITCH_LEN 17
#define OFL_VENUE_CANCEL_ON_DISCONNECT_LEN 16
#define OFL_VENUE_VENUE_REJECTED_LEN TF_OFL_REJECTED_LEN
#define OFL_VENUE_KINDS(X)                                                                         \
    X(KEYED, "Keyed", CONTROL)                                                                     \
    X(RISK_LIMITS, "RiskLimits", CONTROL)                                                          \
    X(KILL_SWITCH, "KillSwitch", CONTROL)                                                          \
    X(CANCEL_ON_DISCONNECT, "CancelOnDisconnect", CONTROL)                                         \
    X(VENUE_REJECTED, "VenueRejected", EVENT)

/* The reserved bytes and the class their range holds them for: X(byte, class). */
#define OFL_RESERVED_KINDS(X) X(0x06, COMMAND) X(0x40, COMMAND) X(0xA0, EVENT)

/* The kind table's rows by kind byte (kinds.c), for the codecs' hot paths: a byte outside the
 * table has family TF_OFL_FAMILY_NONE (and, unlike tf_ofl_kind_info_of's row, payload_len 0:
 * read it only for a byte of a family). */
extern const tf_ofl_kind_info tfo_kind_rows[256];

#define OFX_MAX_FIELDS 16
/* The fields of a gateway kind in wire order (the list ends with a NULL name; offsets are from
 * the start of the union), or NULL for any other byte. */
const tfo_field *tfo_ofx_kind_fields(int kind);
/* Names of the gateway byte fields, or NULL outside the set: "Limit"/"Market", "GTC"/"IOC"/
 * "FOK", "Requested"/"Unfilled"/"NotFillable"/"SelfTrade"/"Account", and a RejectedEx reason
 * (the OFL1 names, "WouldCross", "InvalidTif"). */
const char *tfo_ofx_type_name(int type);
const char *tfo_ofx_tif_name(int tif);
const char *tfo_ofx_cancel_reason_name(int reason);
const char *tfo_ofx_reject_reason_name(int reason);

/* The ordered error of a frame/datagram the fast path refused (codec.c, kept out of line). */
int tfo_frame_error(const uint8_t *b, size_t len);
int tfo_datagram_error(const uint8_t *b, size_t len);

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

/* A stream frame written without a jump on its kind, for the encoders' fast paths: hdr4 is the
 * frame's first 4 bytes as one constant of the kind's row (frame_len, kind; byte 3 is
 * journal_seq's first, stored next), then the n-byte payload u as three overlapping moves of w
 * bytes (a constant) at 0, mid = (n - w) / 2 and n - w: exactly n bytes for w <= n <= 3w.
 * Returns the frame's size. */
static inline __attribute__((always_inline)) int ofl_frame_store3(uint8_t *b, uint32_t hdr4,
                                                                  uint64_t seq, const uint8_t *u,
                                                                  size_t n, size_t mid, size_t w)
{
    ofl_st32(b, hdr4);
    ofl_st64(b + 3, seq);
    uint8_t *p = b + TF_OFL_FRAME_HEADER_LEN;
    memcpy(p, u, w);
    memcpy(p + mid, u + mid, w);
    memcpy(p + n - w, u + n - w, w);
    return (int)(TF_OFL_FRAME_HEADER_LEN + n);
}

/* The error for a byte that is not a kind. */
static inline int ofl_kind_error(uint8_t kind)
{
    return tfo_kind_rows[kind].family == TF_OFL_FAMILY_RESERVED ? TF_E_OFL_RESERVED_KIND
                                                                : TF_E_OFL_UNKNOWN_KIND;
}

/* The side/reason checks of the table, on the byte v (evaluated only where a check exists). */
#define OFL_BAD_NONE(v) 0
#define OFL_BAD_SIDE(v) ((v) > 1 ? TF_E_OFL_INVALID_SIDE : 0)
#define OFL_BAD_REASON(v)                                                                          \
    ((v) > TF_OFL_DUPLICATE_CLIENT_ORDER_ID && (v) != TF_OFL_REASON_OTHER                          \
         ? TF_E_OFL_INVALID_REASON                                                                 \
         : 0)
/* The same on a message's payload struct. */
#define OFL_BAD_MSG_NONE(m) 0
#define OFL_BAD_MSG_SIDE(m) OFL_BAD_SIDE((m).side)
#define OFL_BAD_MSG_REASON(m) OFL_BAD_REASON((m).reason)

/* Wire bytes p[0..len) into the union member u (unsigned char *), by layout. */
#define OFL_LOAD_EMPTY(u, p, len)
#define OFL_LOAD_WIRE(u, p, len) memcpy(u, p, len);
#define OFL_LOAD_SIDE32(u, p, len)                                                                 \
    memcpy(u, p, 32);                                                                              \
    memcpy((u) + 32, (p) + 33, (len)-33);                                                          \
    (u)[(len)-1] = (p)[32];
/* And back: the member u (const unsigned char *) to wire bytes p[0..len). */
#define OFL_STORE_EMPTY(p, u, len)
#define OFL_STORE_WIRE(p, u, len) memcpy(p, u, len);
#define OFL_STORE_SIDE32(p, u, len)                                                                \
    memcpy(p, u, 32);                                                                              \
    (p)[32] = (u)[(len)-1];                                                                        \
    memcpy((p) + 33, (u) + 32, (len)-33);

/* Decodes a payload whose kind (dense index ix) and length have been checked: p points at that
 * many readable bytes. Validates side/reason before writing anything; writes only the union
 * member of the kind. Returns 0, INVALID_SIDE / INVALID_REASON, or 1 for index 0 (not a kind). */
static inline __attribute__((always_inline)) int ofl_payload_decode(unsigned ix, const uint8_t *p,
                                                                    tf_ofl_msg *out)
{
    switch (ix) {
#define OFL_DECODE_CASE(NAME, str, member, layout, check, cls)                                     \
    case OFL_IX_##NAME: {                                                                          \
        int bad_ = OFL_BAD_##check(p[32]);                                                         \
        if (bad_)                                                                                  \
            return bad_;                                                                           \
        unsigned char *u_ = (unsigned char *)&out->member;                                         \
        (void)u_;                                                                                  \
        OFL_LOAD_##layout(u_, p, TF_OFL_##NAME##_LEN) return 0;                                    \
    }
        OFL_KINDS(OFL_DECODE_CASE)
#undef OFL_DECODE_CASE
    default: /* OFL_IX_NONE, and indexes the table never holds */
        return 1;
    }
}

/* The payload when at least OFL_WIDE bytes are readable from p (the common case inside a
 * buffer or journal): no jump on the kind, which a shuffled flow of kinds mispredicts about
 * every other frame (issue 12: 10 ns/frame shuffled against 4 on a fixed cycle). Every struct
 * has the wire's layout except NewLimit and NewMarket, whose side byte (wire offset 32) moves
 * after the fields that follow it on the wire. So: one fixed copy of the largest payload; one
 * fixed 24-byte move to offset 32 from wire offset k->move_src (33 for those two, else 32: the
 * bytes already there); the side byte stored at k->side_dst (else at 32, where it already is).
 * The union's bytes past the kind's member receive whatever follows the payload (unspecified).
 * The side/reason byte is checked first, in one comparison from the row (which also refuses
 * index 0): on a refusal nothing is written and ofl_payload_decode says why. Same results as
 * ofl_payload_decode. */
#define OFL_WIDE TF_OFL_MAX_PAYLOAD
#define OFL_CHK_ADD_NONE 0
#define OFL_CHK_ADD_SIDE 0
#define OFL_CHK_ADD_REASON 1
#define OFL_CHK_LIM_NONE 256
#define OFL_CHK_LIM_SIDE (TF_OFL_SELL + 1)
#define OFL_CHK_LIM_REASON (TF_OFL_DUPLICATE_CLIENT_ORDER_ID + 2)
_Static_assert(TF_OFL_BUY == 0 && TF_OFL_REASON_OTHER == 255 && TF_OFL_INVALID_QUANTITY == 0,
               "the one-comparison checks: side 0..1; reason 255 then 0..4 after adding 1");
#define OFL_MOVE_SRC_EMPTY 32
#define OFL_MOVE_SRC_WIRE 32
#define OFL_MOVE_SRC_SIDE32 33
#define OFL_SIDE_DST_EMPTY(len) 32
#define OFL_SIDE_DST_WIRE(len) 32
#define OFL_SIDE_DST_SIDE32(len) ((len)-1)

static inline __attribute__((always_inline)) int
ofl_payload_decode_wide(const tfo_kind_row *k, const uint8_t *p, tf_ofl_msg *out)
{
    unsigned v = p[32];
    if (__builtin_expect((uint8_t)(v + k->chk_add) >= k->chk_lim, 0))
        return ofl_payload_decode(k->ix, p, out); /* writes nothing here: an error, or 1 */
    unsigned char *u = (unsigned char *)&out->new_limit;
    _Static_assert(sizeof out->trade == OFL_WIDE, "the union is the largest payload");
    _Static_assert(offsetof(tf_ofl_new_limit, price) == 32 &&
                       offsetof(tf_ofl_new_limit, side) == 32 + 24,
                   "NewLimit: wire 33..57 at 32, side after");
    _Static_assert(offsetof(tf_ofl_new_market, quantity) == 32 &&
                       offsetof(tf_ofl_new_market, side) == 32 + 16,
                   "NewMarket: wire 33..49 at 32, side after");
    memcpy(u, p, OFL_WIDE);
    memcpy(u + 32, p + k->move_src, 24);
    u[k->side_dst] = (unsigned char)v;
    return 0;
}

/* Decodes a stream frame (tf_ofl_frame_decode) of len bytes when avail >= len bytes are readable
 * at b (the wide payload copy needs OFL_WIDE of them after the header). The fast path needs two
 * comparisons for the envelope: frame_len - 9 equals the kind's size, and the bytes are there;
 * anything else goes to tfo_frame_error, which checks in the documented order. */
static inline __attribute__((always_inline)) int ofl_frame_decode_in(const uint8_t *b, size_t len,
                                                                     size_t avail, tf_ofl_msg *out)
{
    if (len >= TF_OFL_FRAME_HEADER_LEN) {
        size_t fsize = (size_t)ofl_ld16(b) + 2; /* the frame's size; on the caller's chain */
        const tfo_kind_row *k = &tfo_kind_table[b[2]];
        if (fsize - TF_OFL_FRAME_HEADER_LEN == k->len && len >= fsize) {
            /* Envelope fields first: out may not alias b, but the compiler cannot know. */
            uint8_t kind = b[2];
            uint64_t seq = ofl_ld64(b + 3);
            const uint8_t *pl = b + TF_OFL_FRAME_HEADER_LEN;
            int rc = avail - TF_OFL_FRAME_HEADER_LEN >= OFL_WIDE
                         ? ofl_payload_decode_wide(k, pl, out)
                         : ofl_payload_decode(k->ix, pl, out);
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
    return tfo_frame_error(b, len);
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
        const tfo_kind_row *k = &tfo_kind_table[b[16]];
        if (len - TF_OFL_DATAGRAM_HEADER_LEN == k->len) {
            uint8_t kind = b[16];
            uint64_t session = ofl_ld64(b), seq = ofl_ld64(b + 8);
            int rc = ofl_payload_decode(k->ix, b + TF_OFL_DATAGRAM_HEADER_LEN, out);
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
    return tfo_datagram_error(b, len);
}

/* The one payload writer (stream frames and datagrams both call it). Checks the kind and the
 * side/reason bytes first; writes plen bytes at p. Returns plen or an error. */
int tfo_payload_write(uint8_t *p, size_t cap, const tf_ofl_msg *msg);

/* CRC32C paths (crc32c.c); tf_crc32c picks one. Exposed for the tests that compare them. */
uint32_t tfo_crc32c_sw(uint32_t crc, const void *buf, size_t len);
uint32_t tfo_crc32c_hw(uint32_t crc, const void *buf, size_t len);
int tfo_crc32c_hw_available(void);

#endif

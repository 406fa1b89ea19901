/* The OFL1 codec: stream frames, datagrams, the journal header (docs/orderflow.md). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "orderflow/orderflow_internal.h"
#include "tollfree/orderflow.h"

/* The decoder moves contiguous wire runs into the payload structs in one copy each: these are
 * the layout facts that makes that legal. A field added or reordered breaks the build here. */
#define SAME_LAYOUT(T, field, wire_off)                                                            \
    _Static_assert(offsetof(T, field) == (wire_off), #T "." #field)
SAME_LAYOUT(tf_ofl_new_limit, account_id, 8);
SAME_LAYOUT(tf_ofl_new_limit, client_order_id, 16);
SAME_LAYOUT(tf_ofl_new_limit, instrument_id, 24);
_Static_assert(offsetof(tf_ofl_new_limit, quantity) == offsetof(tf_ofl_new_limit, price) + 8,
               "NewLimit price+quantity contiguous");
_Static_assert(sizeof(tf_ofl_qty) == 16, "quantity is 16 bytes");
_Static_assert(33 + 8 + 16 == TF_OFL_NEW_LIMIT_LEN, "NewLimit is 57 bytes");
SAME_LAYOUT(tf_ofl_new_market, instrument_id, 24);
_Static_assert(33 + 16 == TF_OFL_NEW_MARKET_LEN, "NewMarket is 49 bytes");
_Static_assert(sizeof(tf_ofl_cancel_by_order) == TF_OFL_CANCEL_BY_ORDER_LEN, "CancelByOrder");
_Static_assert(sizeof(tf_ofl_cancel_by_client) == TF_OFL_CANCEL_BY_CLIENT_LEN, "CancelByClient");
_Static_assert(sizeof(tf_ofl_replace) == TF_OFL_REPLACE_LEN, "Replace");
SAME_LAYOUT(tf_ofl_replace, price, 24);
SAME_LAYOUT(tf_ofl_replace, quantity, 32);
_Static_assert(sizeof(tf_ofl_accepted) == TF_OFL_ACCEPTED_LEN, "Accepted");
SAME_LAYOUT(tf_ofl_rejected, client_order_id, 24);
SAME_LAYOUT(tf_ofl_rejected, reason, 32);
_Static_assert(32 + 1 == TF_OFL_REJECTED_LEN, "Rejected is 33 bytes");
_Static_assert(sizeof(tf_ofl_replaced) == TF_OFL_REPLACED_LEN, "Replaced");
_Static_assert(sizeof(tf_ofl_canceled) == TF_OFL_CANCELED_LEN, "Canceled");
_Static_assert(sizeof(tf_ofl_trade) == TF_OFL_TRADE_LEN, "Trade");
SAME_LAYOUT(tf_ofl_trade, price, 48);
SAME_LAYOUT(tf_ofl_trade, quantity, 56);
_Static_assert(TF_OFL_FRAME_HEADER_LEN + TF_OFL_MAX_PAYLOAD <= TF_OFL_MAX_FRAME, "frame cap");
_Static_assert(TF_OFL_DATAGRAM_HEADER_LEN + TF_OFL_MAX_PAYLOAD <= TF_OFL_MAX_DATAGRAM, "dgram cap");

/* What the table's layouts promise, row by row: WIRE structs are exactly the payload; a SIDE32
 * struct is the payload with the side byte moved last, and the wide decoder's fixed 24-byte move
 * covers what follows the side byte on the wire. */
#define LAYOUT_EMPTY(NAME, member) _Static_assert(TF_OFL_##NAME##_LEN == 0, #NAME " is empty");
#define LAYOUT_WIRE(NAME, member)                                                                  \
    _Static_assert(sizeof(((tf_ofl_msg *)0)->member) >= TF_OFL_##NAME##_LEN &&                     \
                       sizeof(((tf_ofl_msg *)0)->member) <= TF_OFL_##NAME##_LEN + 7,               \
                   #NAME ": the struct has the wire's layout");
#define LAYOUT_SIDE32(NAME, member)                                                                \
    _Static_assert(offsetof(tf_ofl_msg, member.side) - offsetof(tf_ofl_msg, member) ==             \
                           TF_OFL_##NAME##_LEN - 1 &&                                              \
                       TF_OFL_##NAME##_LEN - 33 <= 24,                                             \
                   #NAME ": side byte last, at most 24 bytes after it on the wire");
#define LAYOUT_ROW(NAME, str, member, layout, check, cls) LAYOUT_##layout(NAME, member)
OFL_KINDS(LAYOUT_ROW)
#undef LAYOUT_ROW
#undef LAYOUT_EMPTY
#undef LAYOUT_WIRE
#undef LAYOUT_SIDE32
#define MAX_ROW(NAME, str, member, layout, check, cls)                                             \
    _Static_assert(TF_OFL_##NAME##_LEN <= TF_OFL_MAX_PAYLOAD, #NAME " within the cap");
OFL_KINDS(MAX_ROW)
#undef MAX_ROW

/* The encoder's jump-free path takes WIRE kinds of 24 bytes or more (three overlapping 24-byte
 * moves write exactly 24..72 bytes); its check byte is the struct's byte 32 (REASON) or, without
 * a check, byte 1 (always inside the member, so never an unset byte). */
#define OFL_ENC_CHK_WIRE_NONE(len) ((len) >= 24 ? 1 : 0)
#define OFL_ENC_CHK_WIRE_REASON(len) ((len) >= 24 ? 32 : 0)
#define OFL_ENC_CHK_WIRE_SIDE(len) ((len) >= 24 ? 32 : 0)
#define OFL_ENC_CHK_SIDE32_SIDE(len) 0
#define OFL_ENC_CHK_EMPTY_NONE(len) 0
_Static_assert(TF_OFL_MAX_PAYLOAD <= 72, "three 24-byte moves cover the largest payload");

/* Bytes that are not a kind stay all 0 (index 0, chk_lim 0). */
#define KIND_ROW(NAME, str, member, layout, check, cls)                                            \
    [TF_OFL_##NAME] = {.len = TF_OFL_##NAME##_LEN,                                                 \
                       .ix = OFL_IX_##NAME,                                                        \
                       .chk_add = OFL_CHK_ADD_##check,                                             \
                       .move_src = OFL_MOVE_SRC_##layout,                                          \
                       .side_dst = OFL_SIDE_DST_##layout(TF_OFL_##NAME##_LEN),                     \
                       .enc_chk = OFL_ENC_CHK_##layout##_##check(TF_OFL_##NAME##_LEN),             \
                       .chk_lim = OFL_CHK_LIM_##check,                                             \
                       .frame_hdr = (TF_OFL_FRAME_LEN_BASE + TF_OFL_##NAME##_LEN) |                \
                                    (uint32_t)TF_OFL_##NAME << 16,                                 \
                       .enc_mid = TF_OFL_##NAME##_LEN >= 24 ? (TF_OFL_##NAME##_LEN - 24) / 2 : 0},
const tfo_kind_row tfo_kind_table[256] = {OFL_KINDS(KIND_ROW)};
#undef KIND_ROW
_Static_assert(sizeof(tfo_kind_row) == 16, "one 16-byte row a kind byte");

/* The fields of each kind, by dense index (row 0: not a kind). */
#define FIELD_ROW(member, field, type)                                                             \
    {#field, OFL_T_##type,                                                                         \
     (uint8_t)offsetof(tf_ofl_msg, member.field) - offsetof(tf_ofl_msg, member),                   \
     (uint8_t)sizeof(((tf_ofl_msg *)0)->member.field)},
#define FIELDS_ROW(NAME, str, member, layout, check, cls)                                          \
    [OFL_IX_##NAME] = {OFL_FIELDS_##NAME(FIELD_ROW){NULL, 0, 0, 0}},
static const tfo_field kind_fields[OFL_IX_COUNT][OFL_MAX_FIELDS] = {OFL_KINDS(FIELDS_ROW)};
#undef FIELDS_ROW
#undef FIELD_ROW

/* The payload size of a kind byte, or -1. */
static inline int kind_size(uint8_t kind)
{
    const tfo_kind_row *k = &tfo_kind_table[kind];
    return k->ix ? k->len : -1;
}

int tf_ofl_payload_size(int kind)
{
    if (kind < 0 || kind > 255)
        return TF_E_OFL_UNKNOWN_KIND;
    int n = kind_size((uint8_t)kind);
    return n >= 0 ? n : ofl_kind_error((uint8_t)kind);
}

int tf_ofl_frame_size(int kind)
{
    int n = tf_ofl_payload_size(kind);
    return n < 0 ? n : TF_OFL_FRAME_HEADER_LEN + n;
}

int tf_ofl_datagram_size(int kind)
{
    int n = tf_ofl_payload_size(kind);
    return n < 0 ? n : TF_OFL_DATAGRAM_HEADER_LEN + n;
}

const char *tf_ofl_kind_name(int kind)
{
    const tf_ofl_kind_info *k = tf_ofl_kind_info_of(kind); /* the kind table (kinds.c) */
    return k->family == TF_OFL_FAMILY_OFL1 ? k->name : NULL;
}

const tfo_field *tfo_kind_fields(int kind)
{
    if (kind < 0 || kind > 255)
        return NULL;
    unsigned ix = tfo_kind_table[kind].ix;
    return ix ? kind_fields[ix] : NULL;
}

const char *tf_ofl_side_name(int side)
{
    return side == TF_OFL_BUY ? "Buy" : side == TF_OFL_SELL ? "Sell" : NULL;
}

const char *tf_ofl_reason_name(int reason)
{
    switch (reason) {
    case TF_OFL_INVALID_QUANTITY:
        return "InvalidQuantity";
    case TF_OFL_UNKNOWN_INSTRUMENT:
        return "UnknownInstrument";
    case TF_OFL_ORDER_NOT_FOUND:
        return "OrderNotFound";
    case TF_OFL_INVALID_PRICE:
        return "InvalidPrice";
    case TF_OFL_DUPLICATE_CLIENT_ORDER_ID:
        return "DuplicateClientOrderId";
    case TF_OFL_REASON_OTHER:
        return "Other";
    default:
        return NULL;
    }
}

/* ---- the payload writer --------------------------------------------------------------------- */

/* The header of a message of kind `kind` and payload size n (constants in writer's cases), hdr
 * bytes of it: none (a bare payload), a stream frame's 11 or a datagram's 17. */
static inline __attribute__((always_inline)) void header_store(uint8_t *b, const tf_ofl_msg *msg,
                                                               size_t hdr, uint8_t kind, size_t n)
{
    if (hdr == TF_OFL_FRAME_HEADER_LEN) {
        /* frame_len and kind as one constant; its byte 3 is journal_seq's first, stored next */
        ofl_st32(b, (uint32_t)(TF_OFL_FRAME_LEN_BASE + n) | (uint32_t)kind << 16);
        ofl_st64(b + 3, msg->journal_seq);
    } else if (hdr == TF_OFL_DATAGRAM_HEADER_LEN) {
        ofl_st64(b, msg->session_id);
        ofl_st64(b + 8, msg->journal_seq);
        b[16] = kind;
    }
}

/* The one writer (the mirror of ofl_payload_decode): one switch on the kind byte, each case with
 * its kind's size, check and layout as constants, so the checks, the header and the payload
 * copies are all fixed (the kind is not looked up twice). Checks the kind and the side/reason
 * byte, then the room for hdr + payload bytes, before it writes anything. */
static inline __attribute__((always_inline)) int ofl_write(uint8_t *b, size_t cap,
                                                           const tf_ofl_msg *msg, size_t hdr)
{
    switch (tfo_kind_table[msg->kind].ix) { /* dense: one jump table, no tree of compares */
#define WRITE_CASE(NAME, str, member, layout, check, cls)                                          \
    case OFL_IX_##NAME: {                                                                          \
        int bad_ = OFL_BAD_MSG_##check(msg->member);                                               \
        if (bad_)                                                                                  \
            return bad_;                                                                           \
        if (cap < hdr + TF_OFL_##NAME##_LEN)                                                       \
            return TF_E_OFL_BUFFER_TOO_SHORT;                                                      \
        header_store(b, msg, hdr, TF_OFL_##NAME, TF_OFL_##NAME##_LEN);                             \
        const unsigned char *u_ = (const unsigned char *)&msg->member;                             \
        (void)u_;                                                                                  \
        OFL_STORE_##layout(b + hdr, u_, TF_OFL_##NAME##_LEN); /* the macro's own ; too */          \
        return (int)(hdr + TF_OFL_##NAME##_LEN);                                                   \
    }
        OFL_KINDS(WRITE_CASE)
#undef WRITE_CASE
    default:
        return ofl_kind_error(msg->kind);
    }
}

int tfo_payload_write(uint8_t *p, size_t cap, const tf_ofl_msg *msg)
{
    return ofl_write(p, cap, msg, 0);
}

/* ---- stream frame --------------------------------------------------------------------------- */

__attribute__((noinline, cold)) int tfo_frame_error(const uint8_t *b, size_t len)
{
    if (len < TF_OFL_FRAME_HEADER_LEN)
        return TF_E_OFL_HEADER_TOO_SHORT;
    size_t flen = ofl_ld16(b);
    if (flen < TF_OFL_FRAME_LEN_BASE)
        return TF_E_OFL_FRAME_LENGTH_TOO_SMALL;
    if (flen + 2 > TF_OFL_MAX_FRAME)
        return TF_E_OFL_FRAME_TOO_LARGE;
    if (len < flen + 2)
        return TF_E_OFL_PAYLOAD_TOO_SHORT;
    int n = kind_size(b[2]);
    if (n < 0)
        return ofl_kind_error(b[2]);
    /* The fast path refuses nothing else: the length must be what disagrees. */
    return TF_E_OFL_PAYLOAD_LENGTH;
}

int tf_ofl_frame_decode(const void *buf, size_t len, tf_ofl_msg *out)
{
    if (!buf)
        return len ? TF_E_NULL_ARG : TF_E_OFL_HEADER_TOO_SHORT;
    return ofl_frame_decode(buf, len, out);
}

/* A stream frame without a jump on the kind, for the kinds the row marks (enc_chk, which is
 * every event): an engine's events come in a data-dependent order that the per-kind jump
 * mispredicts often. The size, kind and check come from the row; the payload is three 24-byte
 * moves at 0, (n - 24) / 2 and n - 24, which write exactly n bytes for 24 <= n <= 72 (they
 * overlap). Any refusal, and every other kind, takes ofl_write, which finds the error in its
 * order; so results are ofl_write's. */
int tf_ofl_frame_encode(void *buf, size_t cap, const tf_ofl_msg *msg)
{
    uint8_t kind = msg->kind;
    const tfo_kind_row *k = &tfo_kind_table[kind];
    const unsigned char *u = (const unsigned char *)&msg->new_limit;
    size_t n = k->len;
    if (k->enc_chk && (uint8_t)(u[k->enc_chk] + k->chk_add) < k->chk_lim &&
        cap >= TF_OFL_FRAME_HEADER_LEN + n)
        return ofl_frame_store3(buf, k->frame_hdr, msg->journal_seq, u, n, k->enc_mid, 24);
    return ofl_write(buf, cap, msg, TF_OFL_FRAME_HEADER_LEN);
}

int tf_ofl_frame_encode_raw(void *buf, size_t cap, uint8_t kind, uint64_t journal_seq,
                            const void *payload, size_t payload_len)
{
    if (!payload && payload_len)
        return TF_E_NULL_ARG;
    if (payload_len > UINT16_MAX - TF_OFL_FRAME_LEN_BASE)
        return TF_E_OFL_PAYLOAD_TOO_LARGE;
    size_t need = TF_OFL_FRAME_HEADER_LEN + payload_len;
    if (cap < need)
        return TF_E_OFL_BUFFER_TOO_SHORT;
    uint8_t *b = buf;
    ofl_st16(b, (uint16_t)(TF_OFL_FRAME_LEN_BASE + payload_len));
    b[2] = kind;
    ofl_st64(b + 3, journal_seq);
    if (payload_len)
        memcpy(b + TF_OFL_FRAME_HEADER_LEN, payload, payload_len);
    return (int)need;
}

/* ---- datagram ------------------------------------------------------------------------------- */

__attribute__((noinline, cold)) int tfo_datagram_error(const uint8_t *b, size_t len)
{
    if (len < TF_OFL_DATAGRAM_HEADER_LEN)
        return TF_E_OFL_HEADER_TOO_SHORT;
    if (len > TF_OFL_MAX_DATAGRAM)
        return TF_E_OFL_DATAGRAM_TOO_LARGE;
    int n = kind_size(b[16]);
    if (n < 0)
        return ofl_kind_error(b[16]);
    return TF_E_OFL_PAYLOAD_LENGTH;
}

int tf_ofl_datagram_decode(const void *buf, size_t len, tf_ofl_msg *out)
{
    if (!buf)
        return len ? TF_E_NULL_ARG : TF_E_OFL_HEADER_TOO_SHORT;
    return ofl_datagram_decode(buf, len, out);
}

int tf_ofl_datagram_encode(void *buf, size_t cap, const tf_ofl_msg *msg)
{
    return ofl_write(buf, cap, msg, TF_OFL_DATAGRAM_HEADER_LEN);
}

/* ---- journal header ------------------------------------------------------------------------- */

static const uint8_t magic[4] = {'O', 'F', 'L', '1'};

int tf_ofl_journal_header_decode(const void *buf, size_t len, tf_ofl_journal_header *out)
{
    const uint8_t *b = buf;
    if (!b && len)
        return TF_E_NULL_ARG;
    if (len < TF_OFL_JOURNAL_HEADER_LEN)
        return TF_E_OFL_BUFFER_TOO_SHORT;
    if (memcmp(b, magic, sizeof magic) != 0)
        return TF_E_OFL_WRONG_MAGIC;
    uint16_t version = ofl_ld16(b + 4);
    if (version != TF_OFL_SCHEMA_VERSION)
        return TF_E_OFL_UNSUPPORTED_SCHEMA_VERSION;
    uint8_t clock = b[14];
    if (clock > TF_OFL_CLOCK_WALL_NS)
        return TF_E_OFL_UNSUPPORTED_CLOCK_KIND;
    out->schema_version = version;
    out->session_id = ofl_ld64(b + 6);
    out->clock_kind = clock;
    return TF_OFL_JOURNAL_HEADER_LEN;
}

int tf_ofl_journal_header_encode(void *buf, size_t cap, const tf_ofl_journal_header *h)
{
    if (h->schema_version != TF_OFL_SCHEMA_VERSION)
        return TF_E_OFL_UNSUPPORTED_SCHEMA_VERSION;
    if (h->clock_kind > TF_OFL_CLOCK_WALL_NS)
        return TF_E_OFL_UNSUPPORTED_CLOCK_KIND;
    if (cap < TF_OFL_JOURNAL_HEADER_LEN)
        return TF_E_OFL_BUFFER_TOO_SHORT;
    uint8_t *b = buf;
    memcpy(b, magic, sizeof magic);
    ofl_st16(b + 4, h->schema_version);
    ofl_st64(b + 6, h->session_id);
    b[14] = h->clock_kind;
    return TF_OFL_JOURNAL_HEADER_LEN;
}

/* The extension codec (docs/orderflow.md, "The gateway extension kinds"): OFL1's stream-frame
 * envelope around the OFL1 kinds (decoded and encoded by the OFL1 codec, same results) and the
 * gateway kinds 0x14-0x16 (commands) and 0x91-0x95 (execution reports).
 *
 * Every gateway payload is its u64/i64 fields then its u8 fields, and so is its struct (checked
 * below): a payload moves in one fixed-size copy. Decode checks the envelope in
 * tf_ofl_frame_decode's order, then the payload length, then the byte fields, before it writes
 * anything; encode checks the same bytes before it writes anything. No allocation, no state.
 *
 * Byte fields checked: every side byte (0/1, TF_E_OFL_INVALID_SIDE); CanceledEx.reason (0..4)
 * and RejectedEx.reason (a tf_ofl_reason or 5, 6) (TF_E_OFL_INVALID_REASON); AcceptedEx's type
 * (0/1), tif (0..2) and flags (TF_OFX_FLAGS bits) (TF_E_OFL_INVALID_ORDER_TYPE): the engine
 * accepts no other order. An Order's type, tif and flags are NOT checked: like its quantity they
 * are the engine's to judge (a RejectedEx with reason TF_OFX_REASON_INVALID_TIF, a business
 * outcome), so a gateway can relay any byte and the journal records what was sent. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "orderflow/orderflow_internal.h"
#include "tollfree/orderflow.h"

/* The struct is the wire: 8-byte fields from offset 0, the u8 fields right after them, the
 * struct no shorter than the payload, and only tail padding after it. */
#define LAYOUT_ROW(NAME, str, member, n8, cls)                                                     \
    _Static_assert(sizeof(((tf_ofl_msg *)0)->member) >= TF_OFX_##NAME##_LEN &&                     \
                       sizeof(((tf_ofl_msg *)0)->member) <= TF_OFX_##NAME##_LEN + 7,               \
                   #NAME ": the struct has the wire's layout");                                    \
    _Static_assert((TF_OFX_##NAME##_LEN - (n8)) % 8 == 0, #NAME ": 8-byte fields first");          \
    _Static_assert(offsetof(tf_ofl_msg, member) == offsetof(tf_ofl_msg, new_limit),                \
                   #NAME ": at the union's start");                                                \
    _Static_assert(TF_OFX_##NAME##_LEN <= TF_OFX_MAX_PAYLOAD, #NAME " within the cap");
OFX_KINDS(LAYOUT_ROW)
#undef LAYOUT_ROW
_Static_assert(TF_OFL_FRAME_HEADER_LEN + TF_OFX_MAX_PAYLOAD <= TF_OFL_MAX_FRAME, "frame cap");
#define AT(T, field, off) _Static_assert(offsetof(T, field) == (off), #T "." #field)
AT(tf_ofx_order, quantity, 40);
AT(tf_ofx_order, side, 48);
AT(tf_ofx_order, type, 49);
AT(tf_ofx_order, tif, 50);
AT(tf_ofx_order, flags, 51);
AT(tf_ofx_replace_by_client, quantity, 40);
AT(tf_ofx_accepted, quantity, 64);
AT(tf_ofx_accepted, side, 72);
AT(tf_ofx_accepted, type, 73);
AT(tf_ofx_accepted, tif, 74);
AT(tf_ofx_accepted, flags, 75);
AT(tf_ofx_replaced, filled, 80);
AT(tf_ofx_replaced, side, 88);
AT(tf_ofx_canceled, filled, 72);
AT(tf_ofx_canceled, side, 80);
AT(tf_ofx_canceled, reason, 81);
AT(tf_ofx_fill, maker_filled, 104);
AT(tf_ofx_fill, taker_side, 112);
AT(tf_ofx_rejected, client_order_id, 32);
AT(tf_ofx_rejected, reason, 40);
#undef AT

/* Payload size of a gateway kind byte, or 0 for any other byte (no gateway payload is empty). */
static int gw_len(int kind)
{
    if (kind < 0 || kind > 255)
        return 0;
    const tf_ofl_kind_info *k = &tfo_kind_rows[kind];
    return k->family == TF_OFL_FAMILY_GATEWAY ? k->payload_len : 0;
}

/* RejectedEx reasons: the OFL1 ones (0..4, 255) then 5 and 6, so "named" is v <= 6 or 255. */
_Static_assert(TF_OFL_DUPLICATE_CLIENT_ORDER_ID == 4 && TF_OFX_REASON_WOULD_CROSS == 5 &&
                   TF_OFX_REASON_INVALID_TIF == 6,
               "RejectedEx reasons 0..6 and 255");

static inline int side_bad(uint8_t v)
{
    return v > TF_OFL_SELL;
}

/* The error of a gateway payload's byte fields, 0 when they are valid. p holds the payload in
 * wire layout, which is also the struct's (so the encoder checks the struct in place). Inlined
 * with a constant kind by the codec's per-kind cases, where it folds to that kind's tests. */
static inline __attribute__((always_inline)) int bytes_error(int kind, const uint8_t *p)
{
    switch (kind) {
    case TF_OFX_ORDER: /* type, tif and flags are the engine's to judge */
        return side_bad(p[offsetof(tf_ofx_order, side)]) ? TF_E_OFL_INVALID_SIDE : 0;
    case TF_OFX_ACCEPTED:
        if (side_bad(p[offsetof(tf_ofx_accepted, side)]))
            return TF_E_OFL_INVALID_SIDE;
        if (p[offsetof(tf_ofx_accepted, type)] > TF_OFX_MARKET ||
            p[offsetof(tf_ofx_accepted, tif)] > TF_OFX_FOK ||
            (p[offsetof(tf_ofx_accepted, flags)] & ~TF_OFX_FLAGS))
            return TF_E_OFL_INVALID_ORDER_TYPE;
        return 0;
    case TF_OFX_REPLACED:
        return side_bad(p[offsetof(tf_ofx_replaced, side)]) ? TF_E_OFL_INVALID_SIDE : 0;
    case TF_OFX_CANCELED:
        if (side_bad(p[offsetof(tf_ofx_canceled, side)]))
            return TF_E_OFL_INVALID_SIDE;
        return p[offsetof(tf_ofx_canceled, reason)] > TF_OFX_CANCEL_ACCOUNT
                   ? TF_E_OFL_INVALID_REASON
                   : 0;
    case TF_OFX_FILL:
        return side_bad(p[offsetof(tf_ofx_fill, taker_side)]) ? TF_E_OFL_INVALID_SIDE : 0;
    case TF_OFX_REJECTED: { /* the set tfo_ofx_reject_reason_name names, without the call */
        uint8_t v = p[offsetof(tf_ofx_rejected, reason)];
        return v > TF_OFX_REASON_INVALID_TIF && v != TF_OFL_REASON_OTHER ? TF_E_OFL_INVALID_REASON
                                                                         : 0;
    }
    default: /* Cancel, ReplaceByClient: no byte field */
        return 0;
    }
}

int tf_ofx_is_gateway_kind(int kind)
{
    return gw_len(kind) > 0;
}

int tf_ofx_payload_size(int kind)
{
    int n = gw_len(kind);
    return n ? n : tf_ofl_payload_size(kind);
}

int tf_ofx_frame_size(int kind)
{
    int n = tf_ofx_payload_size(kind);
    return n < 0 ? n : TF_OFL_FRAME_HEADER_LEN + n;
}

const char *tf_ofx_kind_name(int kind)
{
    const tf_ofl_kind_info *k = tf_ofl_kind_info_of(kind);
    return k->family == TF_OFL_FAMILY_GATEWAY || k->family == TF_OFL_FAMILY_OFL1 ? k->name : NULL;
}

const char *tfo_ofx_type_name(int type)
{
    return type == TF_OFX_LIMIT ? "Limit" : type == TF_OFX_MARKET ? "Market" : NULL;
}

const char *tfo_ofx_tif_name(int tif)
{
    static const char *const names[] = {"GTC", "IOC", "FOK"};
    return tif >= 0 && tif <= TF_OFX_FOK ? names[tif] : NULL;
}

const char *tfo_ofx_cancel_reason_name(int reason)
{
    static const char *const names[] = {"Requested", "Unfilled", "NotFillable", "SelfTrade",
                                        "Account"};
    return reason >= 0 && reason <= TF_OFX_CANCEL_ACCOUNT ? names[reason] : NULL;
}

const char *tfo_ofx_reject_reason_name(int reason)
{
    switch (reason) {
    case TF_OFX_REASON_WOULD_CROSS:
        return "WouldCross";
    case TF_OFX_REASON_INVALID_TIF:
        return "InvalidTif";
    default:
        return tf_ofl_reason_name(reason);
    }
}

/* ---- fields, for generic readers ------------------------------------------------------------ */

/* One field a line, in wire order. */
/* clang-format off */
#define F(member, field, type)                                                                     \
    {#field, OFL_T_##type,                                                                         \
     (uint8_t)(offsetof(tf_ofl_msg, member.field) - offsetof(tf_ofl_msg, member)),                 \
     (uint8_t)sizeof(((tf_ofl_msg *)0)->member.field)},
#define END {NULL, 0, 0, 0}
static const tfo_field f_order[] = {
    F(order, command_seq, U64)
    F(order, account_id, U64)
    F(order, client_order_id, U64)
    F(order, instrument_id, U64)
    F(order, price, I64)
    F(order, quantity, U64)
    F(order, side, SIDE)
    F(order, type, TYPE)
    F(order, tif, TIF)
    F(order, flags, U8)
    END};
static const tfo_field f_cancel[] = {
    F(cancel, command_seq, U64)
    F(cancel, account_id, U64)
    F(cancel, client_order_id, U64)
    END};
static const tfo_field f_replace_by_client[] = {
    F(replace_by_client, command_seq, U64)
    F(replace_by_client, account_id, U64)
    F(replace_by_client, client_order_id, U64)
    F(replace_by_client, new_client_order_id, U64)
    F(replace_by_client, price, I64)
    F(replace_by_client, quantity, U64)
    END};
static const tfo_field f_accepted[] = {
    F(accepted_ex, event_seq, U64)
    F(accepted_ex, command_seq, U64)
    F(accepted_ex, timestamp_ns, U64)
    F(accepted_ex, order_id, U64)
    F(accepted_ex, client_order_id, U64)
    F(accepted_ex, account_id, U64)
    F(accepted_ex, instrument_id, U64)
    F(accepted_ex, price, I64)
    F(accepted_ex, quantity, U64)
    F(accepted_ex, side, SIDE)
    F(accepted_ex, type, TYPE)
    F(accepted_ex, tif, TIF)
    F(accepted_ex, flags, U8)
    END};
static const tfo_field f_replaced[] = {
    F(replaced_ex, event_seq, U64)
    F(replaced_ex, command_seq, U64)
    F(replaced_ex, timestamp_ns, U64)
    F(replaced_ex, order_id, U64)
    F(replaced_ex, client_order_id, U64)
    F(replaced_ex, orig_client_order_id, U64)
    F(replaced_ex, account_id, U64)
    F(replaced_ex, instrument_id, U64)
    F(replaced_ex, price, I64)
    F(replaced_ex, remaining, U64)
    F(replaced_ex, filled, U64)
    F(replaced_ex, side, SIDE)
    END};
static const tfo_field f_canceled[] = {
    F(canceled_ex, event_seq, U64)
    F(canceled_ex, command_seq, U64)
    F(canceled_ex, timestamp_ns, U64)
    F(canceled_ex, order_id, U64)
    F(canceled_ex, client_order_id, U64)
    F(canceled_ex, account_id, U64)
    F(canceled_ex, instrument_id, U64)
    F(canceled_ex, price, I64)
    F(canceled_ex, remaining, U64)
    F(canceled_ex, filled, U64)
    F(canceled_ex, side, SIDE)
    F(canceled_ex, reason, CANCEL_REASON)
    END};
static const tfo_field f_fill[] = {
    F(fill, event_seq, U64)
    F(fill, command_seq, U64)
    F(fill, timestamp_ns, U64)
    F(fill, maker_order_id, U64)
    F(fill, taker_order_id, U64)
    F(fill, maker_client_order_id, U64)
    F(fill, taker_client_order_id, U64)
    F(fill, maker_account_id, U64)
    F(fill, taker_account_id, U64)
    F(fill, instrument_id, U64)
    F(fill, price, I64)
    F(fill, quantity, U64)
    F(fill, maker_remaining, U64)
    F(fill, maker_filled, U64)
    F(fill, taker_side, SIDE)
    END};
static const tfo_field f_rejected[] = {
    F(rejected_ex, event_seq, U64)
    F(rejected_ex, command_seq, U64)
    F(rejected_ex, timestamp_ns, U64)
    F(rejected_ex, account_id, U64)
    F(rejected_ex, client_order_id, U64)
    F(rejected_ex, reason, EX_REASON)
    END};
/* clang-format on */
#undef F
#undef END
_Static_assert(sizeof f_fill / sizeof f_fill[0] <= OFX_MAX_FIELDS, "OFX_MAX_FIELDS");

const tfo_field *tfo_ofx_kind_fields(int kind)
{
    switch (kind) {
    case TF_OFX_ORDER:
        return f_order;
    case TF_OFX_CANCEL:
        return f_cancel;
    case TF_OFX_REPLACE_BY_CLIENT:
        return f_replace_by_client;
    case TF_OFX_ACCEPTED:
        return f_accepted;
    case TF_OFX_REPLACED:
        return f_replaced;
    case TF_OFX_CANCELED:
        return f_canceled;
    case TF_OFX_FILL:
        return f_fill;
    case TF_OFX_REJECTED:
        return f_rejected;
    default:
        return NULL;
    }
}

/* ---- stream frame ---------------------------------------------------------------------------
 *
 * Both directions switch once on the kind byte; each gateway case is instantiated with its kind
 * and payload size as constants, so the byte checks fold to that kind's tests, the payload moves
 * in fixed-size copies and the header is constants (no call to a variable-length memcpy, no
 * second dispatch on the kind for the checks). */

/* The envelope error of a gateway frame the fast path refused (its kind byte is a gateway kind):
 * tf_ofl_frame_decode's checks in its order, the kind's payload length last. */
static __attribute__((noinline, cold)) int gw_frame_error(const uint8_t *b, size_t len)
{
    size_t flen = ofl_ld16(b);
    if (flen < TF_OFL_FRAME_LEN_BASE)
        return TF_E_OFL_FRAME_LENGTH_TOO_SMALL;
    if (flen + 2 > TF_OFL_MAX_FRAME)
        return TF_E_OFL_FRAME_TOO_LARGE;
    if (len < flen + 2)
        return TF_E_OFL_PAYLOAD_TOO_SHORT;
    return TF_E_OFL_PAYLOAD_LENGTH;
}

/* A frame whose kind byte is the gateway kind `kind` of payload size n (both constants). A
 * frame_len of exactly 9 + n already passes the "too small" and "too large" checks, so the fast
 * path is that comparison and "the bytes are there"; anything else is gw_frame_error's. */
static inline __attribute__((always_inline)) int gw_decode(const uint8_t *b, size_t len,
                                                           tf_ofl_msg *out, int kind, size_t n)
{
    if (__builtin_expect(
            ofl_ld16(b) != TF_OFL_FRAME_LEN_BASE + n || len < TF_OFL_FRAME_HEADER_LEN + n, 0))
        return gw_frame_error(b, len);
    const uint8_t *p = b + TF_OFL_FRAME_HEADER_LEN;
    int rc = bytes_error(kind, p);
    if (rc)
        return rc;
    uint64_t seq = ofl_ld64(b + 3); /* before the copy: out may not alias b, but say it once */
    memcpy(&out->order, p, n);      /* every gateway member starts at the union's start */
    out->kind = (uint8_t)kind;
    out->journal_seq = seq;
    out->session_id = 0;
    return (int)(TF_OFL_FRAME_HEADER_LEN + n);
}

/* The gateway commands (0x14-0x16), what a gateway decodes on its hot path, without a jump on
 * the kind (a shuffled flow of kinds mispredicts it, as issue 12 found for OFL1): when
 * CMD_WIDE bytes of payload are readable, one fixed copy of CMD_WIDE bytes whatever the kind,
 * after the frame_len and the one byte check (Order's side; a check no byte fails for the
 * others) read from the kind's row. The union's bytes past the kind's member receive whatever
 * follows the payload (unspecified, as in the OFL1 wide decoder). Anything else (a refusal
 * included) takes the per-kind cases, which say why. */
#define CMD_WIDE 56
typedef struct gw_cmd_row {
    uint8_t len, chk_off;
    uint16_t chk_lim;
} gw_cmd_row;
static const gw_cmd_row gw_cmd_rows[3] = {
    [TF_OFX_ORDER - TF_OFX_ORDER] = {TF_OFX_ORDER_LEN, offsetof(tf_ofx_order, side),
                                     TF_OFL_SELL + 1},
    [TF_OFX_CANCEL - TF_OFX_ORDER] = {TF_OFX_CANCEL_LEN, 0, 256},
    [TF_OFX_REPLACE_BY_CLIENT - TF_OFX_ORDER] = {TF_OFX_REPLACE_BY_CLIENT_LEN, 0, 256},
};
_Static_assert(TF_OFX_CANCEL == TF_OFX_ORDER + 1 && TF_OFX_REPLACE_BY_CLIENT == TF_OFX_ORDER + 2,
               "the gateway commands are 3 consecutive bytes");
_Static_assert(TF_OFX_ORDER_LEN <= CMD_WIDE && TF_OFX_CANCEL_LEN <= CMD_WIDE &&
                   TF_OFX_REPLACE_BY_CLIENT_LEN <= CMD_WIDE && sizeof(tf_ofx_order) <= CMD_WIDE &&
                   sizeof(tf_ofx_cancel) <= CMD_WIDE &&
                   sizeof(tf_ofx_replace_by_client) <= CMD_WIDE,
               "one copy covers every command");
_Static_assert(sizeof(((tf_ofl_msg *)0)->fill) >= CMD_WIDE, "the union holds the copy");

int tf_ofx_frame_decode(const void *buf, size_t len, tf_ofl_msg *out)
{
    const uint8_t *b = buf;
    if (!b)
        return len ? TF_E_NULL_ARG : TF_E_OFL_HEADER_TOO_SHORT;
    if (!out)
        return TF_E_NULL_ARG;
    if (len < TF_OFL_FRAME_HEADER_LEN)
        return tf_ofl_frame_decode(buf, len, out);
    unsigned c = (unsigned)b[2] - TF_OFX_ORDER;
    if (c < 3 && len >= TF_OFL_FRAME_HEADER_LEN + CMD_WIDE) {
        const gw_cmd_row *r = &gw_cmd_rows[c];
        const uint8_t *p = b + TF_OFL_FRAME_HEADER_LEN;
        if (ofl_ld16(b) == TF_OFL_FRAME_LEN_BASE + r->len && p[r->chk_off] < r->chk_lim) {
            uint8_t kind = b[2];
            uint64_t seq = ofl_ld64(b + 3);
            memcpy(&out->order, p, CMD_WIDE);
            out->kind = kind;
            out->journal_seq = seq;
            out->session_id = 0;
            return TF_OFL_FRAME_HEADER_LEN + r->len;
        }
    }
    switch (b[2]) {
#define DECODE_CASE(NAME, str, member, n8, cls)                                                    \
    case TF_OFX_##NAME:                                                                            \
        return gw_decode(b, len, out, TF_OFX_##NAME, TF_OFX_##NAME##_LEN);
        OFX_KINDS(DECODE_CASE)
#undef DECODE_CASE
    default: /* OFL1 kinds, and the errors of every other byte */
        return tf_ofl_frame_decode(buf, len, out);
    }
}

/* A message of the gateway kind `kind`, payload size n (both constants). */
static inline __attribute__((always_inline)) int
gw_encode(uint8_t *b, size_t cap, const tf_ofl_msg *msg, int kind, size_t n)
{
    const uint8_t *u = (const uint8_t *)&msg->order;
    int rc = bytes_error(kind, u);
    if (rc)
        return rc;
    if (cap < TF_OFL_FRAME_HEADER_LEN + n)
        return TF_E_OFL_BUFFER_TOO_SHORT;
    /* frame_len and kind as one constant; its byte 3 is journal_seq's first, stored next */
    ofl_st32(b, (uint32_t)(TF_OFL_FRAME_LEN_BASE + n) | (uint32_t)kind << 16);
    ofl_st64(b + 3, msg->journal_seq);
    memcpy(b + TF_OFL_FRAME_HEADER_LEN, u, n);
    return (int)(TF_OFL_FRAME_HEADER_LEN + n);
}

/* The gateway events (0x91-0x95), what a gateway encodes on its hot path, without a jump on the
 * kind (an engine's events come in a data-dependent order). Each event's byte fields end its
 * payload, so one 4-byte window ending at the payload's end holds them all (the bytes before
 * them in the window are the last u64 field's, unchecked). Each checked byte v must satisfy
 * (uint8_t)(v + add) < lim (side 0..1: lim 2; AcceptedEx type 0..1, tif 0..2, flags within
 * TF_OFX_FLAGS; CanceledEx reason 0..4; RejectedEx reason 0..6 or 255: add 1, lim 8), tested
 * in the four bytes at once: with every lim <= 0x80, ((x | 0x80..) - lim..) sets a byte's top bit
 * when its low 7 bits reach lim, and x's own top bit is a byte >= 128. The payload is three
 * overlapping 40-byte moves at 0, (n - 40) / 2 and n - 40: exactly n bytes for 40 <= n <= 120.
 * Any refusal takes the per-kind cases, which say why. */
typedef struct gw_ev_row {
    uint32_t hdr; /* the frame's first 4 bytes: frame_len, kind, (0: journal_seq's) */
    uint32_t add, lim, mask;
    uint8_t len, win, mid; /* payload size; the window's offset, len - 4; (len - 40) / 2 */
} gw_ev_row;
#define EV_ROW(NAME, add, lim, mask)                                                               \
    [TF_OFX_##NAME - TF_OFX_ACCEPTED] = {(TF_OFL_FRAME_LEN_BASE + TF_OFX_##NAME##_LEN) |           \
                                             (uint32_t)TF_OFX_##NAME << 16,                        \
                                         add,                                                      \
                                         lim,                                                      \
                                         mask,                                                     \
                                         TF_OFX_##NAME##_LEN,                                      \
                                         TF_OFX_##NAME##_LEN - 4,                                  \
                                         (TF_OFX_##NAME##_LEN - 40) / 2}
#define B3(v) ((uint32_t)(v) << 24)
#define B2(v) ((uint32_t)(v) << 16)
static const gw_ev_row gw_ev_rows[5] = {
    EV_ROW(ACCEPTED, 0, 2u | 2u << 8 | B2(TF_OFX_FOK + 1) | B3(TF_OFX_FLAGS + 1), 0x80808080u),
    EV_ROW(REPLACED, 0, B3(2), B3(0x80)),
    EV_ROW(CANCELED, 0, B2(2) | B3(TF_OFX_CANCEL_ACCOUNT + 1), B2(0x80) | B3(0x80)),
    EV_ROW(FILL, 0, B3(2), B3(0x80)),
    EV_ROW(REJECTED, B3(1), B3(TF_OFX_REASON_INVALID_TIF + 2), B3(0x80)),
};
#undef EV_ROW
#undef B2
#undef B3
_Static_assert(TF_OFX_REPLACED == TF_OFX_ACCEPTED + 1 && TF_OFX_CANCELED == TF_OFX_ACCEPTED + 2 &&
                   TF_OFX_FILL == TF_OFX_ACCEPTED + 3 && TF_OFX_REJECTED == TF_OFX_ACCEPTED + 4,
               "the gateway events are 5 consecutive bytes");
_Static_assert(TF_OFX_FLAGS == 1 && TF_OFX_MARKET == 1, "AcceptedEx: flags and type 0..1");
_Static_assert(offsetof(tf_ofx_accepted, side) == TF_OFX_ACCEPTED_LEN - 4 &&
                   offsetof(tf_ofx_replaced, side) == TF_OFX_REPLACED_LEN - 1 &&
                   offsetof(tf_ofx_canceled, side) == TF_OFX_CANCELED_LEN - 2 &&
                   offsetof(tf_ofx_canceled, reason) == TF_OFX_CANCELED_LEN - 1 &&
                   offsetof(tf_ofx_fill, taker_side) == TF_OFX_FILL_LEN - 1 &&
                   offsetof(tf_ofx_rejected, reason) == TF_OFX_REJECTED_LEN - 1,
               "the byte fields end each event's payload, where the rows test them");
_Static_assert(TF_OFX_REJECTED_LEN >= 40 && TF_OFX_ACCEPTED_LEN >= 40 &&
                   TF_OFX_REPLACED_LEN >= 40 && TF_OFX_CANCELED_LEN >= 40 && TF_OFX_FILL_LEN <= 120,
               "three 40-byte moves write every event's payload");

int tf_ofx_frame_encode(void *buf, size_t cap, const tf_ofl_msg *msg)
{
    if (!msg || (!buf && cap))
        return TF_E_NULL_ARG;
    uint8_t kind = msg->kind;
    unsigned e = (unsigned)kind - TF_OFX_ACCEPTED;
    if (e < 5) {
        const gw_ev_row *r = &gw_ev_rows[e];
        const uint8_t *u = (const uint8_t *)&msg->order;
        size_t n = r->len;
        uint32_t x = ofl_ld32(u + r->win) + r->add;
        uint32_t bad = (((x | 0x80808080u) - r->lim) | x) & r->mask;
        if (!bad && cap >= TF_OFL_FRAME_HEADER_LEN + n)
            return ofl_frame_store3(buf, r->hdr, msg->journal_seq, u, n, r->mid, 40);
    }
    switch (kind) {
#define ENCODE_CASE(NAME, str, member, n8, cls)                                                    \
    case TF_OFX_##NAME:                                                                            \
        return gw_encode(buf, cap, msg, TF_OFX_##NAME, TF_OFX_##NAME##_LEN);
        OFX_KINDS(ENCODE_CASE)
#undef ENCODE_CASE
    default:
        return tf_ofl_frame_encode(buf, cap, msg);
    }
}

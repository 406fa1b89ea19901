/* The venue extension codec (docs/venue.md, "Extension records"): every OFL1 kind through the
 * OFL1 codec, the gateway kinds (0x14-0x16, 0x91-0x95) through the extension codec (tf_ofx_*),
 * plus the venue's own kinds, in the same stream-frame envelope (u16 frame_len, u8 kind, u64
 * journal_seq, payload). A Keyed record wraps an OFL1 command (0x01-0x05) or a gateway command
 * (0x14-0x16). Every length is checked before a byte of the payload is read.
 */
#include <endian.h>
#include <string.h>

#include "orderflow/orderflow_internal.h"
#include "venue/venue.h"

static uint64_t ld64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return le64toh(v);
}

static void st64(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, 8);
}

int tfv_is_ext_kind(int kind)
{
    return (kind >= 0x10 && kind <= 0x1F) || (kind >= 0x90 && kind <= 0x9F);
}

/* The venue's bytes are rows of the kind table (tf_ofl_kind_info_of). */
_Static_assert(TFV_KEYED == OFL_VENUE_KEYED && TFV_VENUE_REJECTED == OFL_VENUE_VENUE_REJECTED &&
                   TFV_RISK_LIMITS == OFL_VENUE_RISK_LIMITS &&
                   TFV_KILL_SWITCH == OFL_VENUE_KILL_SWITCH &&
                   TFV_CANCEL_ON_DISCONNECT == OFL_VENUE_CANCEL_ON_DISCONNECT &&
                   TFV_RISK_LIMITS_LEN == OFL_VENUE_RISK_LIMITS_LEN &&
                   TFV_KILL_SWITCH_LEN == OFL_VENUE_KILL_SWITCH_LEN &&
                   TFV_CANCEL_ON_DISCONNECT_LEN == OFL_VENUE_CANCEL_ON_DISCONNECT_LEN,
               "venue kinds match the kind table");

int tfv_is_command(int kind)
{
    /* tf_ofl_kind_class, inline: engine run asks it for every record */
    return kind >= 0 && kind <= 255 && tfo_kind_rows[kind].kind_class == TF_OFL_CLASS_COMMAND;
}

int tfv_payload_size(int kind, int inner_kind)
{
    const tf_ofl_kind_info *k = tf_ofl_kind_info_of(kind);
    if (kind == TFV_KEYED) {
        if (tf_ofl_kind_class(inner_kind) != TF_OFL_CLASS_COMMAND)
            return TF_E_OFL_UNKNOWN_KIND;
        return TFV_KEYED_HEAD_LEN + tf_ofl_kind_info_of(inner_kind)->payload_len;
    }
    if (k->family == TF_OFL_FAMILY_RESERVED)
        return TF_E_OFL_RESERVED_KIND;
    return k->payload_len >= 0 ? k->payload_len : TF_E_OFL_UNKNOWN_KIND;
}

const char *tfv_kind_name(int kind)
{
    return tf_ofl_kind_info_of(kind)->name;
}

const char *tfv_reason_name(int reason)
{
    switch (reason) {
    case TFV_REASON_NOT_AUTHORIZED:
        return "NotAuthorized";
    case 17:
        return "MaxQuantity";
    case 18:
        return "MaxNotional";
    case 19:
        return "PriceBand";
    case 20:
        return "MaxOpenOrders";
    case 21:
        return "KillSwitch";
    case 22:
        return "SelfTrade";
    case TFV_REASON_STALE_CLIENT_SEQ:
        return "StaleClientSeq";
    default:
        return tf_ofl_reason_name(reason);
    }
}

/* A VenueRejected reason must be one of the venue's (16 and up), never an OFL1 one. */
static int venue_reason_ok(int reason)
{
    return reason >= 16 && reason < 255 && tfv_reason_name(reason) != NULL;
}

/* An OFL1 or gateway frame of `kind` around payload[0..n), decoded by the extension codec (the
 * OFL1 codec for OFL1 kinds) into *out. */
static int decode_inner(int kind, const uint8_t *payload, size_t n, tf_ofl_msg *out)
{
    uint8_t f[TF_OFL_MAX_FRAME];
    if (n + TF_OFL_FRAME_HEADER_LEN > sizeof f)
        return TF_E_OFL_FRAME_TOO_LARGE;
    uint16_t flen = htole16((uint16_t)(TF_OFL_FRAME_LEN_BASE + n));
    memcpy(f, &flen, 2);
    f[2] = (uint8_t)kind;
    memset(f + 3, 0, 8);
    memcpy(f + TF_OFL_FRAME_HEADER_LEN, payload, n);
    int rc = tf_ofx_frame_decode(f, n + TF_OFL_FRAME_HEADER_LEN, out);
    return rc < 0 ? rc : 0;
}

static int decode_ext(const uint8_t *p, size_t fsize, tfv_msg *out)
{
    int kind = p[2];
    const uint8_t *pl = p + TF_OFL_FRAME_HEADER_LEN;
    size_t n = fsize - TF_OFL_FRAME_HEADER_LEN;
    tfv_msg m;
    memset(&m, 0, sizeof m);
    m.kind = (uint8_t)kind;
    m.journal_seq = ld64(p + 3);
    int rc;
    if (kind == TFV_KEYED) {
        if (n < TFV_KEYED_HEAD_LEN)
            return TF_E_OFL_PAYLOAD_LENGTH;
        int size = tfv_payload_size(kind, pl[17]);
        if (size < 0)
            return size;
        if (n != (size_t)size)
            return TF_E_OFL_PAYLOAD_LENGTH;
        if (pl[16] & ~TFV_KEYED_FLAGS)
            return TF_E_BAD_INPUT; /* a flag this version does not know */
        m.session = ld64(pl);
        m.client_seq = ld64(pl + 8);
        m.flags = pl[16];
        rc = decode_inner(pl[17], pl + TFV_KEYED_HEAD_LEN, n - TFV_KEYED_HEAD_LEN, &m.ofl);
    } else if (kind == TFV_VENUE_REJECTED) {
        if (n != TF_OFL_REJECTED_LEN)
            return TF_E_OFL_PAYLOAD_LENGTH;
        uint8_t pl2[TF_OFL_REJECTED_LEN];
        memcpy(pl2, pl, n);
        int reason = pl2[n - 1];
        if (!venue_reason_ok(reason))
            return TF_E_OFL_INVALID_REASON;
        pl2[n - 1] = TF_OFL_REASON_OTHER;
        rc = decode_inner(TF_OFL_REJECTED, pl2, n, &m.ofl);
        m.ofl.kind = TFV_VENUE_REJECTED;
        m.ofl.rejected.reason = (uint8_t)reason;
    } else if (tf_ofx_is_gateway_kind(kind)) { /* the extension codec's */
        rc = tf_ofx_frame_decode(p, fsize, &m.ofl);
    } else if (tfv_risk_kind(kind)) { /* risk.h: checked whole, kept raw */
        if ((rc = tfv_risk_payload_check(kind, pl, n)))
            return rc;
        memcpy(m.risk, pl, n);
        m.risk_len = (uint8_t)n;
        m.ofl.kind = (uint8_t)kind;
    } else {
        return TF_E_OFL_UNKNOWN_KIND;
    }
    if (rc < 0)
        return rc;
    m.ofl.journal_seq = m.journal_seq;
    *out = m;
    return (int)fsize;
}

int tfv_decode(const void *buf, size_t len, tfv_msg *out)
{
    const uint8_t *p = buf;
    if (!buf || !out)
        return TF_E_NULL_ARG;
    if (len < TF_OFL_FRAME_HEADER_LEN || !tfv_is_ext_kind(p[2])) {
        int rc = tf_ofl_frame_decode(buf, len, &out->ofl);
        if (rc >= 0) {
            out->kind = out->ofl.kind;
            out->journal_seq = out->ofl.journal_seq;
            out->session = out->client_seq = 0;
            out->flags = 0;
        }
        return rc;
    }
    /* The envelope checks of tf_ofl_frame_decode, in its order. */
    size_t flen = (size_t)p[0] | (size_t)p[1] << 8;
    if (flen < TF_OFL_FRAME_LEN_BASE)
        return TF_E_OFL_FRAME_LENGTH_TOO_SMALL;
    if (2 + flen > TF_OFL_MAX_FRAME)
        return TF_E_OFL_FRAME_TOO_LARGE;
    if (len < 2 + flen)
        return TF_E_OFL_PAYLOAD_TOO_SHORT;
    return decode_ext(p, 2 + flen, out);
}

/* An OFL1 or gateway message's payload, encoded by the extension codec, into pl (returns its
 * length). */
static int encode_inner(const tf_ofl_msg *m, uint8_t *pl, size_t cap)
{
    uint8_t f[TF_OFL_MAX_FRAME];
    int n = tf_ofx_frame_encode(f, sizeof f, m);
    if (n < 0)
        return n;
    size_t pn = (size_t)n - TF_OFL_FRAME_HEADER_LEN;
    if (pn > cap)
        return TF_E_OFL_BUFFER_TOO_SHORT;
    memcpy(pl, f + TF_OFL_FRAME_HEADER_LEN, pn);
    return (int)pn;
}

static int put_frame(uint8_t *buf, size_t cap, int kind, uint64_t jseq, const uint8_t *pl, size_t n)
{
    if (TF_OFL_FRAME_HEADER_LEN + n > TF_OFL_MAX_FRAME)
        return TF_E_OFL_FRAME_TOO_LARGE;
    return tf_ofl_frame_encode_raw(buf, cap, (uint8_t)kind, jseq, pl, n);
}

int tfv_encode_event(void *buf, size_t cap, const tf_ofl_msg *ev)
{
    if (!buf || !ev)
        return TF_E_NULL_ARG;
    if (ev->kind != TFV_VENUE_REJECTED)
        return tf_ofx_frame_encode(buf, cap, ev); /* OFL1 and gateway events */
    if (!venue_reason_ok(ev->rejected.reason))
        return TF_E_OFL_INVALID_REASON;
    tf_ofl_msg r = *ev;
    r.kind = TF_OFL_REJECTED;
    r.rejected.reason = TF_OFL_REASON_OTHER;
    uint8_t pl[TF_OFL_MAX_PAYLOAD];
    int n = encode_inner(&r, pl, sizeof pl);
    if (n < 0)
        return n;
    pl[n - 1] = ev->rejected.reason;
    return put_frame(buf, cap, TFV_VENUE_REJECTED, ev->journal_seq, pl, (size_t)n);
}

int tfv_encode(void *buf, size_t cap, const tfv_msg *msg)
{
    if (!buf || !msg)
        return TF_E_NULL_ARG;
    if (msg->kind == TFV_VENUE_REJECTED) {
        tf_ofl_msg ev = msg->ofl;
        ev.kind = TFV_VENUE_REJECTED;
        ev.journal_seq = msg->journal_seq;
        return tfv_encode_event(buf, cap, &ev);
    }
    if (tfv_risk_kind(msg->kind)) {
        int rc = tfv_risk_payload_check(msg->kind, msg->risk, msg->risk_len);
        return rc ? rc : put_frame(buf, cap, msg->kind, msg->journal_seq, msg->risk, msg->risk_len);
    }
    if (msg->kind != TFV_KEYED) {
        if (tfv_is_ext_kind(msg->kind) && !tf_ofx_is_gateway_kind(msg->kind))
            return TF_E_OFL_UNKNOWN_KIND;
        tf_ofl_msg m = msg->ofl;
        m.kind = msg->kind;
        m.journal_seq = msg->journal_seq;
        return tf_ofx_frame_encode(buf, cap, &m);
    }
    if (!tfv_is_command(msg->ofl.kind))
        return TF_E_OFL_UNKNOWN_KIND;
    if (msg->flags & ~TFV_KEYED_FLAGS)
        return TF_E_BAD_INPUT;
    uint8_t pl[TFV_KEYED_HEAD_LEN + TF_OFX_MAX_PAYLOAD];
    st64(pl, msg->session);
    st64(pl + 8, msg->client_seq);
    pl[16] = msg->flags;
    pl[17] = msg->ofl.kind;
    int n = encode_inner(&msg->ofl, pl + TFV_KEYED_HEAD_LEN, TF_OFX_MAX_PAYLOAD);
    if (n < 0)
        return n;
    return put_frame(buf, cap, TFV_KEYED, msg->journal_seq, pl, TFV_KEYED_HEAD_LEN + (size_t)n);
}

int tfv_journal_append(tf_journal *j, const tfv_msg *msg, uint64_t *seq)
{
    if (!tfv_is_ext_kind(msg->kind)) {
        tf_ofl_msg m = msg->ofl;
        m.kind = msg->kind;
        return tf_journal_append(j, &m, seq);
    }
    tfv_msg m = *msg;
    m.journal_seq = tf_journal_next_seq(j);
    uint8_t f[TF_OFL_MAX_FRAME];
    int n = tfv_encode(f, sizeof f, &m);
    if (n < 0)
        return n;
    int rc = tf_journal_append_frame(j, f, (size_t)n);
    if (!rc && seq)
        *seq = m.journal_seq;
    return rc;
}

int tfv_journal_append_event(tf_journal *j, const tf_ofl_msg *ev, uint64_t *seq)
{
    if (ev->kind != TFV_VENUE_REJECTED && !tf_ofx_is_gateway_kind(ev->kind))
        return tf_journal_append(j, ev, seq);
    tf_ofl_msg m = *ev;
    m.journal_seq = tf_journal_next_seq(j);
    uint8_t f[TF_OFL_MAX_FRAME];
    int n = tfv_encode_event(f, sizeof f, &m);
    if (n < 0)
        return n;
    int rc = tf_journal_append_frame(j, f, (size_t)n);
    if (!rc && seq)
        *seq = m.journal_seq;
    return rc;
}

int tfv_decode_reader_frame(const tf_journal_reader *r, tfv_msg *out)
{
    if (!r || !r->frame)
        return TF_E_NULL_ARG;
    int rc = tfv_decode(r->frame, r->frame_len, out);
    return rc < 0 ? rc : 0;
}

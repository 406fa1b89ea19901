/* The venue layer (internal): sessions, logon, account ownership and applied-once resends above
 * the order engine, below the engine service (docs/venue.md).
 *
 * The OFL1 codec's kind set is closed; what the venue needs on the wire and in the journal lives
 * in an extension beside it (ext.c): kinds 0x10-0x1F for commands and control records, 0x90-0x9F
 * for events. tfv_decode/tfv_encode accept every OFL1 kind (through the OFL1 codec) and the
 * extension kinds, with exact payload lengths.
 *
 * One path applies a record, live or in a replay: tfv_apply(venue, msg, sink). The checks that
 * depend on the sessions file (does this session hold this account) are made when a command is
 * taken (tfv_take) and recorded in its Keyed record, so a replay never depends on the file.
 */
#ifndef TF_VENUE_H
#define TF_VENUE_H

#include <stddef.h>
#include <stdint.h>

#include "tollfree/engine.h"
#include "tollfree/journal.h"
#include "tollfree/orderflow.h"
#include "venue/risk.h"

/* ---- extension kinds (ext.c) ----------------------------------------------------------------- */

#define TFV_KEYED 0x10             /* a command of a logged-on session, as journaled */
#define TFV_VENUE_REJECTED 0x90    /* Rejected (33 bytes) with a reason from the venue table */
#define TFV_KEYED_HEAD_LEN 18      /* u64 session, u64 client_seq, u8 flags, u8 inner kind */
#define TFV_KEYED_NOT_AUTHORIZED 1 /* flags bit: the session did not hold the account */
#define TFV_KEYED_NOT_OWNER 2      /* flags bit: the order named was not placed by the session */
#define TFV_KEYED_FLAGS 3          /* every flag this version knows */

/* The venue's reject reasons (VenueRejected.reason; docs/venue.md has the whole table). */
#define TFV_REASON_NOT_AUTHORIZED 16
#define TFV_REASON_STALE_CLIENT_SEQ 31

/* One decoded record: an OFL1 message or an extension record. */
typedef struct tfv_msg {
    uint8_t kind; /* an OFL1 kind or TFV_* */
    uint64_t journal_seq;
    /* OFL1 kinds: the message. Keyed: the inner command (ofl.kind = its kind). VenueRejected:
     * ofl.kind = TFV_VENUE_REJECTED, ofl.rejected holds the payload (reason from the venue
     * table). */
    tf_ofl_msg ofl;
    /* Keyed */
    uint64_t session;    /* the session's stable id (tfv_session_id) */
    uint64_t client_seq; /* the client's own number, 0 = none */
    uint8_t flags;       /* TFV_KEYED_* */
    /* the risk records 0x11-0x13 (risk.h): the payload as journaled, decoded when applied */
    uint8_t risk[TFV_RISK_PAYLOAD_MAX];
    uint8_t risk_len;
    /* Not journaled: the live connection a command came from, as the service names it (never 0;
     * 0: none, as in a replay). An order it places is that connection's (tfv_order_conn). */
    uint64_t conn;
} tfv_msg;

/* 1 when kind is one of the extension ranges (0x10-0x1F, 0x90-0x9F). */
int tfv_is_ext_kind(int kind);
/* 1 for a command a client may send and a Keyed record may wrap: the OFL1 commands 0x01-0x05
 * and the gateway commands 0x14-0x16 (Order, Cancel, ReplaceByClient). The gateway kinds
 * (tf_ofx_kind, orderflow.h) are decoded and encoded by the extension codec (tf_ofx_*) here, in
 * frames of their own and inside Keyed. */
int tfv_is_command(int kind);
/* Payload size of an OFL1 or registered extension kind, or the OFL1 kind error. For Keyed the
 * size depends on the inner kind: TFV_KEYED_HEAD_LEN + the inner payload. */
int tfv_payload_size(int kind, int inner_kind);
/* The name of a kind ("NewLimit", "Keyed", "VenueRejected", ...), or NULL. */
const char *tfv_kind_name(int kind);
/* The name of a Rejected or VenueRejected reason, or NULL. */
const char *tfv_reason_name(int reason);

/* Decodes one stream frame at buf[0..len), as tf_ofl_frame_decode (same errors, same order;
 * HEADER_TOO_SHORT and PAYLOAD_TOO_SHORT mean "read more"). Returns the frame's size. */
int tfv_decode(const void *buf, size_t len, tfv_msg *out);
/* Encodes msg as a stream frame into buf[0..cap). Returns the bytes written or an error. */
int tfv_encode(void *buf, size_t cap, const tfv_msg *msg);
/* An event (an OFL1 event or a VenueRejected in tf_ofl_msg form) as a stream frame. */
int tfv_encode_event(void *buf, size_t cap, const tf_ofl_msg *ev);
/* Appends msg to the journal j: an OFL1 message through tf_journal_append (the same bytes as
 * before the venue existed), an extension record as a frame. *seq gets its journal_seq. */
int tfv_journal_append(tf_journal *j, const tfv_msg *msg, uint64_t *seq);
/* The same for an event in tf_ofl_msg form (kind may be TFV_VENUE_REJECTED). */
int tfv_journal_append_event(tf_journal *j, const tf_ofl_msg *ev, uint64_t *seq);
/* Decodes the record a journal reader stopped on (r->frame) when the batch's last message has an
 * extension kind. */
int tfv_decode_reader_frame(const tf_journal_reader *r, tfv_msg *out);

/* ---- sessions (session.c) ------------------------------------------------------------------- */

#define TFV_NAME_MAX 64
#define TFV_SECRET_MIN 16
#define TFV_SECRET_MAX 256
#define TFV_MAX_ACCOUNTS 1024 /* accounts one session may hold */

typedef struct tfv_session {
    char name[TFV_NAME_MAX + 1];
    uint64_t id; /* tfv_session_id(name) */
    uint8_t secret[TFV_SECRET_MAX];
    size_t secret_len;
    uint64_t *accounts; /* ascending */
    uint32_t n_accounts;
    int line;
} tfv_session;

typedef struct tfv_sessions {
    tfv_session *v;
    uint32_t n;
} tfv_sessions;

/* The session's stable id: the first 8 bytes of SHA-256(name), little-endian (never 0). */
uint64_t tfv_session_id(const char *name, size_t len);
/* Loads a sessions file (docs/venue.md). On error writes a line naming the file and the line
 * into err[0..errcap) and returns TF_E_BAD_INPUT (syntax), TF_E_PERMISSION-like -EPERM (mode)
 * or -errno. */
int tfv_sessions_load(const char *path, tfv_sessions *out, char *err, size_t errcap);
void tfv_sessions_free(tfv_sessions *s);
const tfv_session *tfv_sessions_find(const tfv_sessions *s, const char *name, size_t len);
/* 1 when the session holds the account. */
int tfv_session_holds(const tfv_session *s, uint64_t account);

/* ---- logon (logon.c): the handshake before OFL1 frames -------------------------------------- */

#define TFV_LOGON_NONCE 32
#define TFV_LOGON_MAC 32
#define TFV_LOGON_MAX 128 /* the largest handshake frame, its 2-byte length included */
#define TFV_LOGON_CHALLENGE 0x01
#define TFV_LOGON_ANSWER 0x02
#define TFV_LOGON_RESULT 0x03
#define TFV_LOGON_LABEL "tollfree-venue-logon-v1"

/* HMAC-SHA256(secret, LABEL || nonce || name) into mac[32]. 0 or TF_E_INVALID_ARG. */
int tfv_logon_mac(const uint8_t *secret, size_t secret_len, const uint8_t nonce[TFV_LOGON_NONCE],
                  const char *name, size_t name_len, uint8_t mac[TFV_LOGON_MAC]);
/* Frames (docs/venue.md "Logon"): u16 LE length of what follows, u8 type, body. Each encoder
 * returns the bytes written (at most TFV_LOGON_MAX) or an error. */
int tfv_logon_challenge(uint8_t *buf, size_t cap, uint8_t nonce_out[TFV_LOGON_NONCE]);
int tfv_logon_answer(uint8_t *buf, size_t cap, const char *name, const uint8_t *secret,
                     size_t secret_len, const uint8_t nonce[TFV_LOGON_NONCE]);
int tfv_logon_result(uint8_t *buf, size_t cap, int accepted, uint64_t session_id,
                     uint64_t last_client_seq);
/* The size of the handshake frame at buf[0..len): > 0 when whole, 0 when more bytes are
 * needed, or TF_E_PROTOCOL (a length out of bounds). */
int tfv_logon_frame_size(const uint8_t *buf, size_t len);
/* Parses an answer: name into name[TFV_NAME_MAX + 1], mac[32]. 0 or TF_E_PROTOCOL. */
int tfv_logon_parse_answer(const uint8_t *f, size_t n, char *name, size_t *name_len,
                           uint8_t mac[TFV_LOGON_MAC]);
/* Checks an answer against the sessions: the session, or NULL (unknown name or bad MAC alike;
 * the MAC is compared in constant time). */
const tfv_session *tfv_logon_check(const tfv_sessions *s, const uint8_t nonce[TFV_LOGON_NONCE],
                                   const char *name, size_t name_len,
                                   const uint8_t mac[TFV_LOGON_MAC]);

/* ---- the venue (venue.c) -------------------------------------------------------------------- */

#define TFV_RESEND_WINDOW 1024 /* recent commands a session can have resent */

typedef struct tfv_venue tfv_venue;

/* The engine is the caller's (not freed here). events: the service's events journal (for the
 * byte offsets of live commands' events; may be NULL during a replay), ev_path: events.ofl (to
 * read events back for a resend). */
int tfv_open(tf_engine *engine, tfv_venue **out);
void tfv_close(tfv_venue *v);
void tfv_set_events(tfv_venue *v, tf_journal *events, const char *ev_path);

/* What tfv_take decided about a command from a session. */
typedef enum tfv_intake {
    TFV_NEW = 0,    /* apply it: *rec is the record to journal (command_seq still to assign) */
    TFV_RESEND = 1, /* already applied: *resend says where its events are */
    TFV_STALE = 2,  /* a client_seq below the session's last that is not remembered */
} tfv_intake;

typedef struct tfv_resend {
    uint64_t command_seq;
    uint64_t ev_first; /* index in events.ofl (= event_seq - 1) */
    uint32_t ev_count;
} tfv_resend;

/* A command from a connection: sess NULL for a service without sessions (the record stays a
 * plain OFL1 command). Fills *rec, or *resend. */
int tfv_take(tfv_venue *v, const tfv_session *sess, const tf_ofl_msg *cmd, uint64_t client_seq,
             tfv_msg *rec, tfv_resend *resend);
/* Part of a journal file that a rebuild walks: the records from byte `from` (a record's start)
 * to byte `to`, at most `records` of them (events). */
typedef struct tfv_rebuild_span {
    const char *path;
    uint64_t from, to, records;
} tfv_rebuild_span;
/* After a start from a snapshot, before the records after it are applied: the owners of the
 * orders live in the engine (their Keyed commands were not replayed), from the Accepted events
 * among the events the snapshot covers and the Keyed records among the commands it covers. Both
 * spans must be of what the journals' open checked (records are found by their length fields
 * alone). Returns the number of owners known, or an error (rebuild.c). */
int tfv_rebuild_owners(tfv_venue *v, const tfv_rebuild_span *ev, const tfv_rebuild_span *cmd);
/* For rebuild.c: the venue's engine; whether an order's owner is known; record an order's placing
 * session (no connection: a start has none); the owners known. */
tf_engine *tfv_venue_engine(tfv_venue *v);
int tfv_owner_known(const tfv_venue *v, uint64_t order_id);
int tfv_owner_put(tfv_venue *v, uint64_t order_id, uint64_t session);
uint64_t tfv_owner_count(const tfv_venue *v);
/* For a snapshot: fn(ctx, order_id, session) for each owner that names a session (an order of a
 * plain command has none to keep: its connection does not outlive the process); stops at fn's
 * first non-zero return, which it returns. */
int tfv_owner_each(const tfv_venue *v, int (*fn)(void *ctx, uint64_t order_id, uint64_t session),
                   void *ctx);
/* For a start from a snapshot: a Keyed record the snapshot covers, whose command the engine
 * takes as a duplicate (command_seq <= its last_command_seq), leaves the venue as tfv_apply
 * would: no event, so no owner moves; only the session's last client_seq and its resend ring (the
 * command's events unknown there: found by command_seq). The record need not be decoded. */
int tfv_keyed_covered(tfv_venue *v, uint64_t session, uint64_t client_seq, uint64_t command_seq);
/* The start of the venue, read inline by tfv_apply (venue.c keeps the rest). */
struct tfv_venue_head {
    tf_engine *e;
    tfv_risk *risk;       /* the limits and kill switches in force (risk.c) */
    uint64_t owner_count; /* live orders with an owner record */
};
/* tfv_apply for every record but the common one (venue.c). */
int tfv_apply_record(tfv_venue *v, const tfv_msg *msg, tf_engine_sink *sink);
/* Applies one record (live, after it was journaled, or in a replay): the venue's checks, then
 * the engine. Returns the tf_engine_outcome or an error, as tf_engine_apply. The sink gets the
 * events in tf_ofl_msg form (kind TFV_VENUE_REJECTED for the venue's rejections). Events may be
 * left in the sink as tf_engine_apply leaves them, except that a command whose Trades or Fills
 * may have taken a maker off the book hands all its events to sink->flush (when there is one)
 * before it returns: the makers' connections are still known then (tfv_order_conn).
 *
 * Inline for the common record, which needs no frame of the venue's: a plain OFL1 command, no
 * connection, no owners to follow, that the risk rules pass (checked only while some are in
 * force). One they refuse goes the long way, tfv_apply_record, which checks it again (the check
 * changes nothing). */
static inline int tfv_apply(tfv_venue *v, const tfv_msg *msg, tf_engine_sink *sink)
{
    const struct tfv_venue_head *h = (const struct tfv_venue_head *)(const void *)v;
    if (v && msg && sink &&
        (unsigned)msg->kind - TF_OFL_NEW_LIMIT <= TF_OFL_REPLACE - TF_OFL_NEW_LIMIT && !msg->conn &&
        !h->owner_count) {
        if (tfv_risk_idle(h->risk) || !tfv_risk_check_on(h->risk, &msg->ofl))
            return tf_engine_apply(h->e, &msg->ofl, sink);
    }
    return tfv_apply_record(v, msg, sink);
}
/* The connection (tfv_msg.conn) whose command placed this live order, or 0 (none recorded: the
 * order was placed in a replay, before a restart, or is not live). The one owner record of an
 * order: the service asks it which connection gets a maker's Trade or Fill, from its sink's
 * flush, where the makers that the command filled are still known. */
uint64_t tfv_order_conn(const tfv_venue *v, uint64_t order_id);
/* The risk state the venue applies (risk.c): its records come through tfv_apply. */
tfv_risk *tfv_venue_risk(tfv_venue *v);
/* The last client_seq applied for a session id (0: none). */
uint64_t tfv_last_client_seq(const tfv_venue *v, uint64_t session);
/* Appends the frames of events.ofl records [first, first + count) to out[0..*len) (a growing
 * buffer the caller frees), as they were sent the first time; with first UNKNOWN (UINT64_MAX:
 * the command was applied before the snapshot the service started from) the events whose
 * command_seq is command_seq. Returns 0 or an error. */
int tfv_read_events(tfv_venue *v, uint64_t first, uint32_t count, uint64_t command_seq,
                    uint8_t **out, size_t *len, size_t *cap);
/* resend.c: the walk behind tfv_read_events, over the file at path. idx holds the byte offset of
 * every TFV_EVENTS_STRIDE-th record found so far (a walk starts from the nearest one before
 * `first` and extends it): events.ofl only grows while the service runs. */
#define TFV_EVENTS_STRIDE 4096
typedef struct tfv_events_index {
    uint64_t *pos; /* pos[k]: the offset of record k * TFV_EVENTS_STRIDE */
    uint64_t n, cap;
} tfv_events_index;
int tfv_events_walk(const char *path, tfv_events_index *idx, uint64_t first, uint32_t count,
                    uint64_t command_seq, uint8_t **out, size_t *len, size_t *cap);

#endif

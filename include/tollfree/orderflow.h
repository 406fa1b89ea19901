/* tollfree order flow: the OFL1 zero-copy codec (docs/orderflow.md).
 *
 * OFL1 commands and events are fixed-width little-endian packed payloads carried in one of two
 * envelopes: the stream frame (journal records, stream transports) and the datagram (one message
 * per UDP datagram). Decode reads every field where it lies in the caller's buffer (fixed-size
 * memcpy, never a cast) and fills a caller-owned tf_ofl_msg; encode writes at fixed offsets into
 * a caller-owned buffer. No function here allocates, keeps a pointer past the call, prints or
 * aborts. Every function is thread-safe (no shared state).
 *
 * On any error a decoder leaves *out untouched and an encoder writes nothing.
 */
#ifndef TOLLFREE_ORDERFLOW_H
#define TOLLFREE_ORDERFLOW_H

#include <stddef.h>
#include <stdint.h>

#include "tollfree/api.h"
#include "tollfree/error.h"

/* Envelope sizes and the OFL1 v1 caps. */
#define TF_OFL_FRAME_HEADER_LEN 11    /* u16 frame_len, u8 kind, u64 journal_seq */
#define TF_OFL_FRAME_LEN_BASE 9       /* frame_len = 9 + payload_len */
#define TF_OFL_DATAGRAM_HEADER_LEN 17 /* u64 session_id, u64 journal_seq, u8 kind */
#define TF_OFL_JOURNAL_HEADER_LEN 15  /* "OFL1", u16 schema_version, u64 session_id, u8 clock */
#define TF_OFL_MAX_FRAME 128          /* a whole stream frame, header included */
#define TF_OFL_MAX_DATAGRAM 512       /* a whole datagram, header included */
#define TF_OFL_MAX_PAYLOAD 72         /* the largest payload of any kind (Trade) */
#define TF_OFL_SCHEMA_VERSION 1

/* The kind byte: a closed set. 0x06 (iceberg), 0x40 and 0xA0 are reserved (decoding them is
 * TF_E_OFL_RESERVED_KIND); every other byte not listed is TF_E_OFL_UNKNOWN_KIND. */
typedef enum tf_ofl_kind {
    TF_OFL_HEARTBEAT = 0x00,        /* control, 0 payload bytes */
    TF_OFL_NEW_LIMIT = 0x01,        /* command, 57 */
    TF_OFL_NEW_MARKET = 0x02,       /* command, 49 */
    TF_OFL_CANCEL_BY_ORDER = 0x03,  /* command, 16 */
    TF_OFL_CANCEL_BY_CLIENT = 0x04, /* command, 24 */
    TF_OFL_REPLACE = 0x05,          /* command, 48 */
    TF_OFL_ACCEPTED = 0x81,         /* event, 48 */
    TF_OFL_REJECTED = 0x82,         /* event, 33 */
    TF_OFL_REPLACED = 0x83,         /* event, 40 */
    TF_OFL_CANCELED = 0x84,         /* event, 32 */
    TF_OFL_TRADE = 0x85,            /* event, 72 */
} tf_ofl_kind;

/* Payload sizes, part of the contract. */
#define TF_OFL_HEARTBEAT_LEN 0
#define TF_OFL_NEW_LIMIT_LEN 57
#define TF_OFL_NEW_MARKET_LEN 49
#define TF_OFL_CANCEL_BY_ORDER_LEN 16
#define TF_OFL_CANCEL_BY_CLIENT_LEN 24
#define TF_OFL_REPLACE_LEN 48
#define TF_OFL_ACCEPTED_LEN 48
#define TF_OFL_REJECTED_LEN 33
#define TF_OFL_REPLACED_LEN 40
#define TF_OFL_CANCELED_LEN 32
#define TF_OFL_TRADE_LEN 72

/* Side byte: any other value is TF_E_OFL_INVALID_SIDE. */
typedef enum tf_ofl_side { TF_OFL_BUY = 0, TF_OFL_SELL = 1 } tf_ofl_side;

/* Rejected.reason: any other value is TF_E_OFL_INVALID_REASON. 4 is tollfree's addition. */
typedef enum tf_ofl_reason {
    TF_OFL_INVALID_QUANTITY = 0,
    TF_OFL_UNKNOWN_INSTRUMENT = 1,
    TF_OFL_ORDER_NOT_FOUND = 2,
    TF_OFL_INVALID_PRICE = 3,
    TF_OFL_DUPLICATE_CLIENT_ORDER_ID = 4,
    TF_OFL_REASON_OTHER = 255,
} tf_ofl_reason;

/* Quantity: u128 lots on the wire, kept as two u64 halves. The codec carries any value; the
 * engine rejects hi != 0 or lo > INT64_MAX as InvalidQuantity (a business outcome). */
typedef struct tf_ofl_qty {
    uint64_t lo;
    uint64_t hi;
} tf_ofl_qty;

/* Payload structs. Fields are declared in wire order; where the wire has no 1-byte field in
 * between, the struct has the wire's layout (checked by static assertions in the codec), so the
 * decoder moves contiguous runs in one fixed-size copy. Prices are i64 ticks. */
typedef struct tf_ofl_new_limit {
    uint64_t command_seq;
    uint64_t account_id;
    uint64_t client_order_id;
    uint64_t instrument_id;
    int64_t price;       /* wire offset 33 */
    tf_ofl_qty quantity; /* wire offset 41 */
    uint8_t side;        /* wire offset 32, tf_ofl_side */
} tf_ofl_new_limit;

typedef struct tf_ofl_new_market {
    uint64_t command_seq;
    uint64_t account_id;
    uint64_t client_order_id;
    uint64_t instrument_id;
    tf_ofl_qty quantity; /* wire offset 33 */
    uint8_t side;        /* wire offset 32 */
} tf_ofl_new_market;

typedef struct tf_ofl_cancel_by_order {
    uint64_t command_seq;
    uint64_t order_id;
} tf_ofl_cancel_by_order;

typedef struct tf_ofl_cancel_by_client {
    uint64_t command_seq;
    uint64_t account_id;
    uint64_t client_order_id;
} tf_ofl_cancel_by_client;

typedef struct tf_ofl_replace {
    uint64_t command_seq;
    uint64_t order_id;
    uint64_t client_order_id; /* a fresh id for this request */
    int64_t price;
    tf_ofl_qty quantity;
} tf_ofl_replace;

typedef struct tf_ofl_accepted {
    uint64_t event_seq;
    uint64_t command_seq;
    uint64_t timestamp_ns;
    uint64_t order_id;
    uint64_t client_order_id;
    uint64_t account_id;
} tf_ofl_accepted;

typedef struct tf_ofl_rejected {
    uint64_t event_seq;
    uint64_t command_seq;
    uint64_t timestamp_ns;
    uint64_t client_order_id; /* 0 if none */
    uint8_t reason;           /* tf_ofl_reason */
} tf_ofl_rejected;

typedef struct tf_ofl_replaced {
    uint64_t event_seq;
    uint64_t command_seq;
    uint64_t timestamp_ns;
    uint64_t order_id;
    uint64_t client_order_id;
} tf_ofl_replaced;

typedef struct tf_ofl_canceled {
    uint64_t event_seq;
    uint64_t command_seq;
    uint64_t timestamp_ns;
    uint64_t order_id;
} tf_ofl_canceled;

typedef struct tf_ofl_trade {
    uint64_t event_seq;
    uint64_t command_seq;
    uint64_t timestamp_ns;
    uint64_t maker_order_id;
    uint64_t taker_order_id;
    uint64_t instrument_id;
    int64_t price;
    tf_ofl_qty quantity;
} tf_ofl_trade;

/* ---- gateway extension kinds (docs/engine.md "Gateway commands and execution reports") -----
 *
 * Not OFL1: the OFL1 codec (tf_ofl_*) refuses these bytes as it refuses every kind outside its
 * closed set. They share OFL1's stream-frame envelope and sit in the extension ranges (0x10-0x1F
 * commands and control records, 0x90-0x9F events) beside the venue's records (0x10-0x13, 0x90).
 * The extension codec (tf_ofx_*) reads and writes them, and every OFL1 kind too. A gateway
 * command is answered with report events only: AcceptedEx/ReplacedEx/CanceledEx/RejectedEx and
 * one Fill per match; the OFL1 commands keep their OFL1 events. Quantities are u64 lots,
 * valid in 1..INT64_MAX. Payloads are little-endian, in the order of the struct fields below. */
typedef enum tf_ofx_kind {
    TF_OFX_ORDER = 0x14,             /* command, 52: a limit or market order with time in force */
    TF_OFX_CANCEL = 0x15,            /* command, 24: cancel by (account, client_order_id) */
    TF_OFX_REPLACE_BY_CLIENT = 0x16, /* command, 48: Replace, the order named by client id */
    TF_OFX_ACCEPTED = 0x91,          /* event, 76 */
    TF_OFX_REPLACED = 0x92,          /* event, 89 */
    TF_OFX_CANCELED = 0x93,          /* event, 82 */
    TF_OFX_FILL = 0x94,              /* event, 113 */
    TF_OFX_REJECTED = 0x95,          /* event, 41 */
} tf_ofx_kind;

#define TF_OFX_ORDER_LEN 52
#define TF_OFX_CANCEL_LEN 24
#define TF_OFX_REPLACE_BY_CLIENT_LEN 48
#define TF_OFX_ACCEPTED_LEN 76
#define TF_OFX_REPLACED_LEN 89
#define TF_OFX_CANCELED_LEN 82
#define TF_OFX_FILL_LEN 113
#define TF_OFX_REJECTED_LEN 41
#define TF_OFX_MAX_PAYLOAD 113 /* the largest extension payload (Fill); 11 + 113 <= 128 */

/* Order.type */
typedef enum tf_ofx_type { TF_OFX_LIMIT = 0, TF_OFX_MARKET = 1 } tf_ofx_type;
/* Order.tif: good till canceled (rests), immediate or cancel (the remainder is canceled), fill
 * or kill (all at once or nothing: canceled without a trade). A market order is IOC or FOK. */
typedef enum tf_ofx_tif { TF_OFX_GTC = 0, TF_OFX_IOC = 1, TF_OFX_FOK = 2 } tf_ofx_tif;
/* Order.flags */
#define TF_OFX_POST_ONLY 1 /* a GTC limit order that would trade on arrival is rejected */
#define TF_OFX_FLAGS 1     /* every flag this version knows */

/* RejectedEx.reason: the tf_ofl_reason values, and these. */
#define TF_OFX_REASON_WOULD_CROSS 5 /* a post-only order would have traded */
#define TF_OFX_REASON_INVALID_TIF 6 /* type, tif or flags out of range or not allowed together */

/* CanceledEx.reason */
typedef enum tf_ofx_cancel_reason {
    TF_OFX_CANCEL_REQUESTED = 0,    /* a Cancel (or an OFL1 cancel) */
    TF_OFX_CANCEL_UNFILLED = 1,     /* the remainder of an IOC or market order */
    TF_OFX_CANCEL_NOT_FILLABLE = 2, /* a FOK order the book could not fill whole: no trade */
    TF_OFX_CANCEL_SELF_TRADE = 3,   /* self-trade prevention */
    TF_OFX_CANCEL_ACCOUNT = 4       /* an account-wide or listed cancel (kill switch, disconnect) */
} tf_ofx_cancel_reason;

typedef struct tf_ofx_order {
    uint64_t command_seq;
    uint64_t account_id;
    uint64_t client_order_id;
    uint64_t instrument_id;
    int64_t price; /* ticks; ignored (and 0 on the wire) for a market order */
    uint64_t quantity;
    uint8_t side;  /* tf_ofl_side */
    uint8_t type;  /* tf_ofx_type */
    uint8_t tif;   /* tf_ofx_tif */
    uint8_t flags; /* TF_OFX_POST_ONLY */
} tf_ofx_order;

typedef struct tf_ofx_cancel {
    uint64_t command_seq;
    uint64_t account_id;
    uint64_t client_order_id;
} tf_ofx_cancel;

typedef struct tf_ofx_replace_by_client {
    uint64_t command_seq;
    uint64_t account_id;
    uint64_t client_order_id;     /* the live order's */
    uint64_t new_client_order_id; /* may equal client_order_id */
    int64_t price;
    uint64_t quantity; /* the new remaining quantity, as Replace */
} tf_ofx_replace_by_client;

/* Execution reports. `filled` is the order's cumulative filled quantity since it was accepted
 * (a replace keeps it); `remaining` what is left to trade (0 in a Fill: the order is done). */
typedef struct tf_ofx_accepted {
    uint64_t event_seq;
    uint64_t command_seq;
    uint64_t timestamp_ns;
    uint64_t order_id;
    uint64_t client_order_id;
    uint64_t account_id;
    uint64_t instrument_id;
    int64_t price; /* 0 for a market order */
    uint64_t quantity;
    uint8_t side;
    uint8_t type;
    uint8_t tif;
    uint8_t flags;
} tf_ofx_accepted;

typedef struct tf_ofx_replaced {
    uint64_t event_seq;
    uint64_t command_seq;
    uint64_t timestamp_ns;
    uint64_t order_id;
    uint64_t client_order_id;      /* the new one */
    uint64_t orig_client_order_id; /* the one it replaced */
    uint64_t account_id;
    uint64_t instrument_id;
    int64_t price;
    uint64_t remaining;
    uint64_t filled;
    uint8_t side;
} tf_ofx_replaced;

typedef struct tf_ofx_canceled {
    uint64_t event_seq;
    uint64_t command_seq;
    uint64_t timestamp_ns;
    uint64_t order_id;
    uint64_t client_order_id;
    uint64_t account_id;
    uint64_t instrument_id;
    int64_t price;      /* 0 for a market order */
    uint64_t remaining; /* the quantity canceled */
    uint64_t filled;
    uint8_t side;
    uint8_t reason; /* tf_ofx_cancel_reason */
} tf_ofx_canceled;

/* One match. The maker's state after it is in the event; the taker's follows from the
 * command's AcceptedEx or ReplacedEx and the Fills before this one in the same command. */
typedef struct tf_ofx_fill {
    uint64_t event_seq;
    uint64_t command_seq;
    uint64_t timestamp_ns;
    uint64_t maker_order_id;
    uint64_t taker_order_id;
    uint64_t maker_client_order_id;
    uint64_t taker_client_order_id;
    uint64_t maker_account_id;
    uint64_t taker_account_id;
    uint64_t instrument_id;
    int64_t price; /* the maker's */
    uint64_t quantity;
    uint64_t maker_remaining;
    uint64_t maker_filled;
    uint8_t taker_side;
} tf_ofx_fill;

typedef struct tf_ofx_rejected {
    uint64_t event_seq;
    uint64_t command_seq;
    uint64_t timestamp_ns;
    uint64_t account_id;
    uint64_t client_order_id;
    uint8_t reason; /* tf_ofl_reason or TF_OFX_REASON_* */
} tf_ofx_rejected;

/* One decoded message: the envelope fields and a tagged union of the payloads (`kind` selects
 * the member; a Heartbeat has none; the tf_ofx_* members carry the gateway extension kinds).
 * session_id is set by the datagram codec only (0 from a stream frame). A plain value: it holds
 * no pointer into the decoded buffer. */
typedef struct tf_ofl_msg {
    uint8_t kind; /* tf_ofl_kind */
    uint64_t journal_seq;
    uint64_t session_id;
    union {
        tf_ofl_new_limit new_limit;
        tf_ofl_new_market new_market;
        tf_ofl_cancel_by_order cancel_by_order;
        tf_ofl_cancel_by_client cancel_by_client;
        tf_ofl_replace replace;
        tf_ofl_accepted accepted;
        tf_ofl_rejected rejected;
        tf_ofl_replaced replaced;
        tf_ofl_canceled canceled;
        tf_ofl_trade trade;
        /* gateway extension kinds (never produced by the OFL1 codec) */
        tf_ofx_order order;
        tf_ofx_cancel cancel;
        tf_ofx_replace_by_client replace_by_client;
        tf_ofx_accepted accepted_ex;
        tf_ofx_replaced replaced_ex;
        tf_ofx_canceled canceled_ex;
        tf_ofx_fill fill;
        tf_ofx_rejected rejected_ex;
    };
} tf_ofl_msg;

/* The journal file header (written once, before the first record). */
typedef enum tf_ofl_clock_kind {
    TF_OFL_CLOCK_LOGICAL = 0,
    TF_OFL_CLOCK_WALL_NS = 1
} tf_ofl_clock_kind;

typedef struct tf_ofl_journal_header {
    uint16_t schema_version; /* TF_OFL_SCHEMA_VERSION */
    uint64_t session_id;
    uint8_t clock_kind; /* tf_ofl_clock_kind */
} tf_ofl_journal_header;

/* ---- the extension codec (OFL1 kinds and the gateway kinds, src/orderflow/ext.c) -------------
 * Same envelope, conventions and errors as the OFL1 stream codec below; it accepts every OFL1
 * kind (decoded by the OFL1 codec, same results) and the tf_ofx_kind kinds. */

/* Payload size of an OFL1 or gateway kind, or TF_E_OFL_UNKNOWN_KIND / TF_E_OFL_RESERVED_KIND. */
TF_API int tf_ofx_payload_size(int kind);
/* The name of an OFL1 or gateway kind ("Order", "Fill", ...), or NULL. */
TF_API const char *tf_ofx_kind_name(int kind);
/* 1 for a gateway kind (tf_ofx_kind), else 0. */
TF_API int tf_ofx_is_gateway_kind(int kind);
/* Decodes one stream frame at buf[0..len) as tf_ofl_frame_decode does, gateway kinds included
 * (their byte fields checked: side, type, tif, flags, reasons). Returns the frame's length. */
TF_API int tf_ofx_frame_decode(const void *buf, size_t len, tf_ofl_msg *out);
/* Encodes msg as a stream frame (gateway kinds included). Returns the bytes written. */
TF_API int tf_ofx_frame_encode(void *buf, size_t cap, const tf_ofl_msg *msg);
/* Bytes a stream frame of this kind takes (11 + payload), or the kind error. */
TF_API int tf_ofx_frame_size(int kind);

/* ---- the kind table (docs/orderflow.md "The kind table") -------------------------------------
 *
 * One row per kind byte of the stream-frame envelope: the OFL1 kinds, the gateway extension
 * kinds, the venue's records (docs/venue.md "Extension records") and the reserved bytes. Code
 * that must tell a command from an event asks here instead of testing byte ranges. */
typedef enum {
    TF_OFL_CLASS_NONE = 0,    /* not a kind: unknown or reserved */
    TF_OFL_CLASS_COMMAND = 1, /* an order command the engine applies: OFL1 0x01-0x05, gateway
                                 0x14-0x16 (what a Keyed record may wrap) */
    TF_OFL_CLASS_EVENT = 2,   /* an event: OFL1 0x81-0x85, gateway 0x91-0x95, VenueRejected 0x90 */
    TF_OFL_CLASS_CONTROL = 3  /* neither: Heartbeat, the venue's Keyed envelope (0x10: its inner
                                 kind is the command), RiskLimits, KillSwitch, CancelOnDisconnect */
} tf_ofl_kind_class_t;

typedef enum {
    TF_OFL_FAMILY_NONE = 0,     /* a byte outside the table */
    TF_OFL_FAMILY_OFL1 = 1,     /* read by the OFL1 codec (tf_ofl_*) */
    TF_OFL_FAMILY_GATEWAY = 2,  /* the gateway extension kinds (tf_ofx_*) */
    TF_OFL_FAMILY_VENUE = 3,    /* the venue's records: 0x10-0x13, 0x90 */
    TF_OFL_FAMILY_RESERVED = 4, /* 0x06 (iceberg), 0x40, 0xA0: decoding one is an error */
} tf_ofl_kind_family_t;

/* A row. Static storage: the pointer stays valid for the life of the process. */
typedef struct tf_ofl_kind_info {
    const char *name;   /* "NewLimit", "Fill", "Keyed", ...; NULL for a reserved or unknown byte */
    uint8_t kind_class; /* tf_ofl_kind_class_t */
    uint8_t family;     /* tf_ofl_kind_family_t */
    uint8_t reserved_for; /* a reserved byte: the class its range holds it for (0x06 and 0x40
                             COMMAND, 0xA0 EVENT); else TF_OFL_CLASS_NONE */
    int16_t payload_len;  /* the payload's fixed size; -1 when not fixed (Keyed: an 18-byte head
                             and the inner command's payload) or not a kind */
} tf_ofl_kind_info;

/* The class of any int (a value outside 0..255 is TF_OFL_CLASS_NONE). */
TF_API int tf_ofl_kind_class(int kind);
/* The row of any int; never NULL (an all-NONE row with payload_len -1 outside the table). */
TF_API const tf_ofl_kind_info *tf_ofl_kind_info_of(int kind);

/* ---- kinds ---------------------------------------------------------------------------------- */

/* Payload size of a kind, or TF_E_OFL_UNKNOWN_KIND / TF_E_OFL_RESERVED_KIND. */
TF_API int tf_ofl_payload_size(int kind);
/* The spec's name of a kind ("NewLimit", "Trade", ...), or NULL for a byte outside the set. */
TF_API const char *tf_ofl_kind_name(int kind);
/* "Buy"/"Sell", or NULL. */
TF_API const char *tf_ofl_side_name(int side);
/* "InvalidQuantity", ..., "DuplicateClientOrderId", "Other", or NULL. */
TF_API const char *tf_ofl_reason_name(int reason);

/* ---- stream frame --------------------------------------------------------------------------- */

/* Decodes one stream frame at the start of buf[0..len). Returns the frame's size in bytes
 * (TF_OFL_FRAME_HEADER_LEN + payload; the next frame starts there) or an error, checked in this
 * order:
 *   TF_E_OFL_HEADER_TOO_SHORT       len < 11                           (stream: need more bytes)
 *   TF_E_OFL_FRAME_LENGTH_TOO_SMALL frame_len < 9
 *   TF_E_OFL_FRAME_TOO_LARGE        2 + frame_len > TF_OFL_MAX_FRAME   (the v1 cap)
 *   TF_E_OFL_PAYLOAD_TOO_SHORT      len < 2 + frame_len                (stream: need more bytes)
 *   TF_E_OFL_UNKNOWN_KIND / TF_E_OFL_RESERVED_KIND
 *   TF_E_OFL_PAYLOAD_LENGTH         frame_len - 9 != the kind's payload size
 *   TF_E_OFL_INVALID_SIDE / TF_E_OFL_INVALID_REASON
 * For a stream reader only HEADER_TOO_SHORT and PAYLOAD_TOO_SHORT are flow control ("read more
 * and call again"); the cap check before them bounds a reader's buffer to TF_OFL_MAX_FRAME. */
TF_API int tf_ofl_frame_decode(const void *buf, size_t len, tf_ofl_msg *out);

/* Encodes msg (kind, journal_seq, payload) as a stream frame into buf[0..cap). Returns the bytes
 * written, or TF_E_OFL_UNKNOWN_KIND / RESERVED_KIND, TF_E_OFL_INVALID_SIDE / INVALID_REASON (a
 * frame no decoder would accept is never written), TF_E_OFL_BUFFER_TOO_SHORT (cap < needed:
 * tf_ofl_frame_size() tells what is needed). */
TF_API int tf_ofl_frame_encode(void *buf, size_t cap, const tf_ofl_msg *msg);

/* The envelope alone, for relays and tests: header + payload_len opaque bytes, no check of the
 * kind or the payload. TF_E_OFL_PAYLOAD_TOO_LARGE when 9 + payload_len > 65535 (frame_len is a
 * u16), TF_E_OFL_BUFFER_TOO_SHORT, TF_E_NULL_ARG. Returns the bytes written. */
TF_API int tf_ofl_frame_encode_raw(void *buf, size_t cap, uint8_t kind, uint64_t journal_seq,
                                   const void *payload, size_t payload_len);

/* Bytes a stream frame of this kind takes (11 + payload), or the kind error. */
TF_API int tf_ofl_frame_size(int kind);

/* ---- datagram ------------------------------------------------------------------------------- */

/* Decodes one whole datagram buf[0..len) (the datagram boundary is the length). Fills
 * out->session_id, journal_seq, kind and payload. Returns len, or TF_E_OFL_HEADER_TOO_SHORT
 * (len < 17), TF_E_OFL_DATAGRAM_TOO_LARGE (len > TF_OFL_MAX_DATAGRAM), UNKNOWN_KIND /
 * RESERVED_KIND, TF_E_OFL_PAYLOAD_LENGTH (len - 17 != the kind's payload size), INVALID_SIDE /
 * INVALID_REASON, in that order. */
TF_API int tf_ofl_datagram_decode(const void *buf, size_t len, tf_ofl_msg *out);

/* Encodes msg (session_id, journal_seq, kind, payload) as a datagram. Same errors and result as
 * tf_ofl_frame_encode; the payload is written by the same writer. */
TF_API int tf_ofl_datagram_encode(void *buf, size_t cap, const tf_ofl_msg *msg);

/* Bytes a datagram of this kind takes (17 + payload), or the kind error. */
TF_API int tf_ofl_datagram_size(int kind);

/* ---- journal file header -------------------------------------------------------------------- */

/* Decodes the 15-byte journal header: TF_E_OFL_BUFFER_TOO_SHORT, TF_E_OFL_WRONG_MAGIC,
 * TF_E_OFL_UNSUPPORTED_SCHEMA_VERSION, TF_E_OFL_UNSUPPORTED_CLOCK_KIND, in that order. Returns
 * TF_OFL_JOURNAL_HEADER_LEN. */
TF_API int tf_ofl_journal_header_decode(const void *buf, size_t len, tf_ofl_journal_header *out);
/* Encodes it (same checks of version and clock kind, and BUFFER_TOO_SHORT). Returns 15. */
TF_API int tf_ofl_journal_header_encode(void *buf, size_t cap, const tf_ofl_journal_header *h);

/* ---- CRC32C --------------------------------------------------------------------------------- */

/* CRC-32C (Castagnoli, reflected, as iSCSI/ext4). Start with crc = 0 and chain by passing the
 * previous result: tf_crc32c(tf_crc32c(0, a, n), b, m) == tf_crc32c(0, ab, n + m). Uses SSE4.2
 * when the CPU has it, else a table; both give the same bits. */
TF_API uint32_t tf_crc32c(uint32_t crc, const void *buf, size_t len);

/* ---- the mixed order-flow cycle ------------------------------------------------------------- */

/* A deterministic generator of plausible order flow: a cycle of 20 messages, 10 NewLimit,
 * 4 CancelByOrder, 2 Replace, 3 Trade, 1 Rejected (50/20/10/15/5 %), field values from a seeded
 * PRNG. The same seed gives the same sequence on every machine. journal_seq counts from 0. */
typedef struct tf_ofl_gen {
    uint64_t state;
    uint64_t n;
    uint64_t command_seq;
    uint64_t event_seq;
    uint64_t client_order_id;
    uint64_t order_id;
    uint64_t ts_ns;
    uint64_t session_id;
} tf_ofl_gen;

TF_API void tf_ofl_gen_init(tf_ofl_gen *g, uint64_t seed);
/* Fills *out with the next message (kind, journal_seq, session_id, payload). */
TF_API void tf_ofl_gen_next(tf_ofl_gen *g, tf_ofl_msg *out);

#endif

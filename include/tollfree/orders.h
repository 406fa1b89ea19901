/* tollfree order client: OFL1 commands to `tollfree engine serve` over a Unix socket or TCP.
 *
 * The protocol (docs/engine.md, "the engine service"): the client sends OFL1 stream frames
 * (11-byte header, no CRC) carrying commands; the server's sequencer assigns command_seq (the
 * value the client puts in the payload is ignored). For each command the server sends the
 * command's events as stream frames, then a Heartbeat whose journal_seq field is the command's
 * command_seq: "this reply is complete". A reply starts with Accepted, Rejected, Replaced or
 * Canceled. A Trade of a resting order this connection placed, hit by someone else's command,
 * arrives unsolicited, between replies (never inside one); so do other unsolicited events (a
 * kill switch's cancels of this connection's orders), behind a TF_ORDERS_UNSOLICITED marker that
 * says how many follow (tf_orders_poll_unsolicited). A command the server cannot decode is
 * answered Rejected(Other, event_seq 0) + Heartbeat(0). Replies are sent only once the command is
 * durable, so an event a client has seen is never lost by a crash of the engine.
 *
 * Gateway commands (orderflow.h, "gateway extension kinds": Order, Cancel, ReplaceByClient) go
 * through tf_orders_call / tf_orders_send_many / tf_orders_send like the OFL1 ones (a tf_ofl_msg of
 * that kind); their replies are gateway reports (AcceptedEx ... RejectedEx, Fill). An unsolicited
 * fill is a Trade or, when the taker's command was a gateway Order, a Fill (kind TF_OFX_FILL).
 *
 * One tf_orders is one connection, used by one thread at a time. Every buffer is sized by
 * tf_orders_connect; no call allocates after it. Calls return a count (>= 0) or a negative code:
 * -errno from the OS (-ECONNREFUSED, -ECONNRESET when the server closed between frames, ...),
 * -ETIMEDOUT when a call ran past its timeout, TF_E_TRUNCATED when the server closed in the
 * middle of a frame or a reply, TF_E_PROTOCOL when it sent something the protocol does not
 * allow (an undecodable frame, a reply that does not start with its first event, a Heartbeat
 * that closes no reply), TF_E_INVALID_ARG / TF_E_NULL_ARG for bad arguments, and the codec's
 * TF_E_OFL_* for a command that cannot be encoded (a bad side byte). After a timeout, a transport
 * failure or a protocol violation the position in the stream is unknown: the connection is
 * closed and every later call returns -ENOTCONN. Business outcomes (a reject) are events, never
 * error codes.
 */
#ifndef TOLLFREE_ORDERS_H
#define TOLLFREE_ORDERS_H

#include <stddef.h>
#include <stdint.h>

#include "tollfree/api.h"
#include "tollfree/error.h"
#include "tollfree/orderflow.h"

#define TF_ORDERS_DEFAULT_TIMEOUT_MS 30000
#define TF_ORDERS_DEFAULT_MAX_FILLS 4096
#define TF_ORDERS_DEFAULT_MAX_INFLIGHT 1024

typedef struct tf_orders tf_orders;

/* Called for each unsolicited Trade, from inside whichever tf_orders_* call read it, with the
 * connection in a consistent state; it must not call back into this tf_orders. The message is
 * valid during the call only. */
typedef void (*tf_orders_fill_fn)(void *ctx, const tf_ofl_msg *trade);

/* Options, read by tf_orders_connect only. A zeroed struct (or NULL) gives the defaults. */
typedef struct tf_orders_opts {
    /* The size rule of docs/api.md ("Growable structs"): sizeof as the caller's header declares
     * it (0: this library's layout). Any size from TF_ORDERS_OPTS_SIZE_V1 up is a layout (the
     * fields beyond it read NULL or 0); a larger size than the library's is accepted only when
     * every byte it does not know is zero. A uint32_t (not the rule's size_t) until the next
     * layout break. */
    uint32_t size;             /* sizeof(tf_orders_opts), or 0: lets the struct grow */
    int timeout_ms;            /* per call; 0 = TF_ORDERS_DEFAULT_TIMEOUT_MS; < 0 = wait forever */
    uint32_t max_fills;        /* unsolicited Trades queued for tf_orders_poll_fills; 0 = default */
    uint32_t max_inflight;     /* commands tf_orders_send_many or tf_orders_send keep
                                  unanswered at most; 0 = default */
    tf_orders_fill_fn on_fill; /* when set, unsolicited Trades go here instead of the queue */
    void *on_fill_ctx;
    /* A service started with --sessions (docs/venue.md): the session's name and secret. The
     * connect then logs on (challenge-response: the secret never leaves this process) and every
     * command goes out as a Keyed frame with the next client_seq. NULL: no logon. */
    const char *session;
    const void *secret;
    size_t secret_len;
    /* A tls: URL (docs/venue.md, "TLS"): the CA file (PEM) the server's certificate must chain
     * to. NULL: the environment variable TOLLFREE_TLS_CA, else the system's CA store. The
     * certificate must also name the URL's host (a DNS name, or the IP address given). */
    const char *tls_ca;
} tf_orders_opts;

/* The layout of tf_orders_opts before the session fields: a caller built against it passes this
 * size and gets no logon. */
#define TF_ORDERS_OPTS_SIZE_V1 offsetof(tf_orders_opts, session)
/* The layout before tls_ca (which then stays NULL). */
#define TF_ORDERS_OPTS_SIZE_V2 offsetof(tf_orders_opts, tls_ca)

/* A venue rejection (docs/venue.md): an event of kind TF_ORDERS_VENUE_REJECTED carries the
 * Rejected payload (msg.rejected) with a reason from the venue's table, e.g. 16 NotAuthorized
 * (the session does not hold the account), 31 StaleClientSeq (a client_seq below the session's
 * last that the service no longer remembers). */
#define TF_ORDERS_VENUE_REJECTED 0x90
#define TF_ORDERS_NOT_AUTHORIZED 16
#define TF_ORDERS_STALE_CLIENT_SEQ 31

/* Unsolicited events other than fills (docs/engine-service.md, "Unsolicited events"). The
 * service sends them to the connection that placed the orders, between two whole replies, behind
 * a marker frame of kind TF_ORDERS_UNSOLICITED (a connection-level frame: never journaled, never
 * on the feed, never sent by a client): journal_seq = the command_seq of the command that caused
 * them, payload (TF_ORDERS_UNSOLICITED_LEN bytes) u32 count (>= 1: the event frames that follow
 * at once, each byte for byte its record in events.ofl, each of that command_seq), u8 cause
 * (TF_ORDERS_CAUSE_*), 3 zero bytes. Today: the Canceled / CanceledEx events of a kill switch
 * (docs/venue.md, "Kill switch") for orders this connection placed. */
#define TF_ORDERS_UNSOLICITED 0x1F
#define TF_ORDERS_UNSOLICITED_LEN 8
#define TF_ORDERS_CAUSE_KILL_SWITCH 1

/* One command's reply. ev/cap are the caller's (in); the rest is written by the call. */
typedef struct tf_orders_reply {
    tf_ofl_msg *ev;       /* in: room for the reply's events (may be NULL when cap is 0) */
    size_t cap;           /* in */
    size_t n;             /* out: events in the reply; min(n, cap) were stored, in order (the
                             rest were read and dropped: the connection stays usable) */
    uint64_t command_seq; /* out: assigned by the server; 0 when it could not decode the command */
} tf_orders_reply;

/* Connects to "unix:PATH", "tcp:[HOST:]PORT" (HOST 127.0.0.1 when left out; "tcp:[::1]:PORT"
 * for IPv6) or "tls:[HOST:]PORT" (TCP with TLS 1.2 or later; "tls://HOST:PORT" too), the grammar
 * of docs/protocol.md, "URLs". opts may be NULL.
 * TF_E_INVALID_ARG for a bad url or opts (or a CA file that cannot be read), -errno when the
 * connection fails, -EPROTO when the TLS handshake fails (a certificate that does not chain to
 * the CA or does not name the host, a server that does not speak TLS), TF_E_NOMEM. */
TF_API int tf_orders_connect(tf_orders **out, const char *url, const tf_orders_opts *opts);
/* Closes the connection and frees the client. Queued fills are dropped. Accepts NULL. */
TF_API void tf_orders_close(tf_orders *c);
/* Changes the per-call timeout (as tf_orders_opts.timeout_ms; 0 = the default). */
TF_API int tf_orders_set_timeout(tf_orders *c, int timeout_ms);

/* One command: sends it, waits for its reply (reading, and queueing or passing to on_fill, any
 * unsolicited Trade that arrives first) and stores it in *r. Returns r->n (>= 1). The payload's
 * command_seq is ignored (the server assigns it); cmd->journal_seq is ignored too. */
TF_API int tf_orders_call(tf_orders *c, const tf_ofl_msg *cmd, tf_orders_reply *r);

/* The five commands, as tf_orders_call. quantity is in lots (the u128 wire quantity's low half;
 * use tf_orders_call for a high half). side is TF_OFL_BUY or TF_OFL_SELL. */
TF_API int tf_orders_new_limit(tf_orders *c, uint64_t account_id, uint64_t client_order_id,
                               uint64_t instrument_id, int side, int64_t price_ticks,
                               uint64_t qty_lots, tf_orders_reply *r);
TF_API int tf_orders_new_market(tf_orders *c, uint64_t account_id, uint64_t client_order_id,
                                uint64_t instrument_id, int side, uint64_t qty_lots,
                                tf_orders_reply *r);
TF_API int tf_orders_cancel(tf_orders *c, uint64_t order_id, tf_orders_reply *r);
TF_API int tf_orders_cancel_client(tf_orders *c, uint64_t account_id, uint64_t client_order_id,
                                   tf_orders_reply *r);
TF_API int tf_orders_replace(tf_orders *c, uint64_t order_id, uint64_t client_order_id,
                             int64_t price_ticks, uint64_t qty_lots, tf_orders_reply *r);

/* Pipelined bulk flow: sends cmds[0..n) without waiting for replies (at most max_inflight
 * unanswered at a time), reading replies as they come, and returns when every reply is in.
 * Every event of every reply goes to ev[0..cap) in order (like tf_orders_reply: min(total, cap)
 * stored); command_seq[i] (may be NULL) gets command i's assigned sequence and reply_end[i]
 * (may be NULL) the index one past its reply's last event. Returns the total number of events.
 * A command that cannot be encoded fails the call before anything is sent. */
TF_API int64_t tf_orders_send_many(tf_orders *c, const tf_ofl_msg *cmds, size_t n, tf_ofl_msg *ev,
                                   size_t cap, uint64_t *command_seq, size_t *reply_end);

/* ---- pipelining: send now, read each reply later -------------------------------------------
 *
 * tf_orders_send sends commands without waiting for their replies; each tf_orders_recv then
 * returns the reply of the oldest command sent and not yet answered, so the i-th recv after
 * connect is the i-th command's (the service answers in the order of the commands). The events
 * of a reply are its command's alone (command_seq ties them to it). A sequence whose second
 * command does not depend on the first's events (a counterparty's resting order and the order
 * that crosses it; a cancel and a new order by client ids; two quotes) goes out in one send
 * and costs one round trip; what depends on an order id the engine assigns must wait for the
 * reply, or name the order by its client id (CancelByClient, the gateway commands).
 * tf_orders_call and tf_orders_send_many refuse (TF_E_INVALID_ARG) while commands sent this way
 * are unanswered: their replies come first on the stream. Memory stays the connect's: the
 * commands wait only as bytes in the send buffer (64 KiB). */

/* Queues cmds[0..n) and writes as much of them as the socket takes at once, never waiting.
 * Takes commands while fewer than max_inflight (tf_orders_opts) are unanswered and the send
 * buffer has room for a frame; returns how many it took, 0 .. n: fewer than n is flow control,
 * not an error (recv replies, then send the rest). The commands it takes are checked first:
 * when one is not a command or cannot be encoded, its code is returned (TF_E_INVALID_ARG,
 * TF_E_OFL_*) and none of this call's commands is taken (those past the window are checked by
 * the call that takes them). Bytes the socket did not take go out with the next call on the
 * connection (tf_orders_recv and tf_orders_poll_fills write before they wait); a caller that waits
 * on tf_orders_fd itself calls tf_orders_flush first. A logged-on connection numbers each command
 * with the next client_seq as it takes it. */
TF_API int tf_orders_send(tf_orders *c, const tf_ofl_msg *cmds, size_t n);
/* Waits for the reply of the oldest unanswered command (up to the per-call timeout, reading
 * unsolicited Trades that come before it as every call does) and stores it in *r, as
 * tf_orders_call does. Returns r->n (>= 1). TF_E_INVALID_ARG when no command is unanswered. A
 * failure closes the connection, as for every call. */
TF_API int tf_orders_recv(tf_orders *c, tf_orders_reply *r);
/* Commands tf_orders_send took whose replies tf_orders_recv has not returned. After a failure
 * it keeps its value: those commands may or may not have been applied (a session resends them,
 * tf_orders_set_next_client_seq). */
TF_API size_t tf_orders_unanswered(const tf_orders *c);
/* Writes every byte tf_orders_send queued, waiting up to the per-call timeout; meanwhile what
 * the server sends is read into the receive buffer (while it has room) for later calls. 0, or
 * the error (the connection is then closed). Needed only by a caller that waits on
 * tf_orders_fd between a send and a recv. */
TF_API int tf_orders_flush(tf_orders *c);

/* Unsolicited Trades (fills of this connection's resting orders hit by other connections).
 * They are read by every call on the connection; without on_fill they wait in a bounded queue
 * (max_fills; when it is full the oldest is dropped and counted, see tf_orders_fills_dropped).
 * tf_orders_poll_fills moves up to cap queued Trades to out, oldest first. When the queue is
 * empty and timeout_ms != 0 it first reads the socket for up to timeout_ms (< 0: until one
 * arrives) for new ones. Returns how many were stored (0: none). With on_fill set it only reads
 * what has already arrived (passing each Trade to on_fill) and returns 0. When the server has
 * closed, the queued Trades are returned first; then the call fails like any other. While
 * pipelined commands are unanswered it reads up to the next reply and stops there without
 * waiting (that reply, and the fills behind it, are tf_orders_recv's to read). */
TF_API int tf_orders_poll_fills(tf_orders *c, tf_ofl_msg *out, size_t cap, int timeout_ms);
/* Unsolicited Trades dropped because the queue was full (since connect). */
TF_API uint64_t tf_orders_fills_dropped(const tf_orders *c);

/* Unsolicited events other than fills: what the service announces with a TF_ORDERS_UNSOLICITED
 * marker (today the Canceled / CanceledEx a kill switch made of this connection's orders, each
 * with the kill's command_seq; docs/venue.md "Kill switch"). Every call reads them as it reads
 * fills, never as a reply: without a callback they wait in a bounded queue of max_fills
 * messages (when it is full the oldest is dropped and counted, tf_orders_unsolicited_dropped).
 * tf_orders_poll_unsolicited moves up to cap of them to out, oldest first, with the rules of
 * tf_orders_poll_fills (timeout_ms, a closed server, pipelined commands unanswered). */
TF_API int tf_orders_poll_unsolicited(tf_orders *c, tf_ofl_msg *out, size_t cap, int timeout_ms);
/* Called for each unsolicited event (as on_fill: from inside whichever call read it, the
 * message valid during the call only, no call back into this tf_orders). */
typedef void (*tf_orders_event_fn)(void *ctx, const tf_ofl_msg *ev);
/* Sets (fn) or clears (NULL) the callback; events already queued are passed to fn first, in
 * order. 0 or TF_E_NULL_ARG. */
TF_API int tf_orders_set_on_unsolicited(tf_orders *c, tf_orders_event_fn fn, void *ctx);
/* Unsolicited events dropped because their queue was full (since connect). */
TF_API uint64_t tf_orders_unsolicited_dropped(const tf_orders *c);

/* The socket, for a caller's poll loop (readable: call tf_orders_poll_fills). -1 when closed. */
TF_API int tf_orders_fd(const tf_orders *c);

/* ---- sessions (a service with --sessions, docs/venue.md) ------------------------------------ */

/* Connects and logs on as `session` with `secret` (as tf_orders_connect with opts->session set;
 * opts may be NULL). -EACCES when the service refuses the logon (an unknown session or a wrong
 * secret: the service does not say which), TF_E_PROTOCOL when the service sent no logon
 * challenge (it was started without --sessions). */
TF_API int tf_orders_connect_session(tf_orders **out, const char *url, const char *session,
                                     const void *secret, size_t secret_len,
                                     const tf_orders_opts *opts);
/* The last client_seq the service had applied for this session when this connection logged on
 * (0: none, or no logon). The next command goes out with tf_orders_next_client_seq(), which
 * starts one above it. */
TF_API uint64_t tf_orders_logon_client_seq(const tf_orders *c);
TF_API uint64_t tf_orders_next_client_seq(const tf_orders *c);
/* Resends: sets the client_seq the next command goes out with. After a connection broke with
 * commands unanswered, log on again, set it to the first unanswered command's client_seq and send
 * the same commands in the same order: those the service had applied are answered with their
 * original events (not applied again), the others are applied. A client_seq at or below the
 * session's last that the service no longer remembers is answered VenueRejected
 * StaleClientSeq. The connections of one session share its client_seq, which must increase in
 * the order the service takes the commands: a session sending on several connections at once
 * numbers on one of them and sets 0 on the others (0: every later command goes out with
 * client_seq 0, no resend protection). TF_E_INVALID_ARG for a connection without logon. */
TF_API int tf_orders_set_next_client_seq(tf_orders *c, uint64_t client_seq);

#endif

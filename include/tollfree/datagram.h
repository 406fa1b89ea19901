/* tollfree datagram ingress: OFL1 datagrams over UDP, with gap, duplicate and foreign-session
 * detection (docs/orderflow.md).
 *
 * One message per datagram (TF_OFL_DATAGRAM_HEADER_LEN + payload). A sender stamps its session
 * id; journal_seq is the caller's (normally the journal position). A heartbeat (kind Heartbeat)
 * carries in its journal_seq the last journal_seq the sender sent, or TF_DGRAM_NO_SEQ before the
 * first, so a receiver learns of lost tail messages without waiting for the next one.
 * A sender, receiver or tracker is used by one thread at a time.
 */
#ifndef TOLLFREE_DATAGRAM_H
#define TOLLFREE_DATAGRAM_H

#include <stddef.h>
#include <stdint.h>

#include "tollfree/api.h"
#include "tollfree/error.h"
#include "tollfree/orderflow.h"

#define TF_DGRAM_NO_SEQ UINT64_MAX /* heartbeat before anything was sent */
#define TF_DGRAM_BATCH 64          /* datagrams per sendmmsg/recvmmsg call */

/* What one received datagram means for the session's sequence. */
typedef enum tf_dgram_status {
    TF_DGRAM_IN_ORDER = 0,  /* journal_seq is the next expected one (or a heartbeat, no loss) */
    TF_DGRAM_GAP = 1,       /* journal_seq (or a heartbeat's last seq) is ahead: gap_first ..
                               gap_first + gap_count - 1 were not received; msg is delivered */
    TF_DGRAM_LATE = 2,      /* fills a slot an earlier gap reported (reordered); delivered */
    TF_DGRAM_DUPLICATE = 3, /* already received, or older than the 64-seq window: drop it */
    TF_DGRAM_FOREIGN = 4,   /* session_id is not the tracked session: ignored, no state change */
    TF_DGRAM_MALFORMED = 5, /* does not decode: ev->error says why; no state change. Also a
                               data message with journal_seq TF_DGRAM_NO_SEQ (reserved for
                               heartbeats): error TF_E_OFL_SEQ_GAP */
} tf_dgram_status;

typedef struct tf_dgram_event {
    int status; /* tf_dgram_status */
    int error;  /* MALFORMED: the decode error (TF_E_OFL_*) */
    uint64_t gap_first;
    uint64_t gap_count;
    tf_ofl_msg msg; /* decoded (all but MALFORMED) */
} tf_dgram_event;

typedef struct tf_dgram_stats {
    uint64_t datagrams;  /* everything seen */
    uint64_t in_order;   /* data messages in order */
    uint64_t gaps;       /* GAP events */
    uint64_t missing;    /* journal_seqs reported missing and not (yet) filled by a LATE one */
    uint64_t late;       /* LATE events */
    uint64_t duplicates; /* DUPLICATE events */
    uint64_t foreign;    /* FOREIGN events */
    uint64_t malformed;  /* MALFORMED events */
    uint64_t heartbeats; /* heartbeats of the tracked session */
} tf_dgram_stats;

/* Sequence tracking for one session, without I/O (the receiver uses it; so can any transport).
 * Caller-owned storage; no allocation. */
typedef struct tf_dgram_tracker {
    uint64_t session_id;
    uint64_t next_seq; /* the journal_seq expected next */
    uint64_t seen;     /* bit i set: next_seq - 1 - i was received */
    tf_dgram_stats stats;
} tf_dgram_tracker;

/* Tracks session_id starting at first_seq (journal_seqs below it count as duplicates). NULL is a
 * no-op. */
TF_API void tf_dgram_tracker_init(tf_dgram_tracker *t, uint64_t session_id, uint64_t first_seq);
/* Decodes and classifies one datagram buf[0..len) into *ev. Returns ev->status, or
 * TF_E_NULL_ARG for a NULL t or ev. */
TF_API int tf_dgram_track(tf_dgram_tracker *t, const void *buf, size_t len, tf_dgram_event *ev);

/* ---- UDP sockets ---------------------------------------------------------------------------- */

typedef struct tf_dgram_sender tf_dgram_sender;
typedef struct tf_dgram_receiver tf_dgram_receiver;

/* A UDP socket connected to host (a numeric IPv4 or IPv6 address, e.g. "127.0.0.1") and port.
 * Returns 0 or -errno / TF_E_INVALID_ARG (not a numeric address) / TF_E_NOMEM. */
TF_API int tf_dgram_sender_open(const char *host, uint16_t port, uint64_t session_id,
                                tf_dgram_sender **out);
/* Sends msgs[0..n) (each its own datagram, stamped with the sender's session id and its own
 * journal_seq), TF_DGRAM_BATCH per system call. Returns how many were sent (n unless an error
 * stopped it: then the count so far, or the error when none was sent). Codec errors are
 * returned before anything of that message is sent. No allocation. */
TF_API int tf_dgram_send(tf_dgram_sender *s, const tf_ofl_msg *msgs, size_t n);
/* Sends a heartbeat carrying the last journal_seq sent (TF_DGRAM_NO_SEQ if none). 1 or error. */
TF_API int tf_dgram_send_heartbeat(tf_dgram_sender *s);
/* The socket, or TF_E_NULL_ARG. (Every call above returns TF_E_NULL_ARG for a NULL s.) */
TF_API int tf_dgram_sender_fd(const tf_dgram_sender *s);
/* NULL is a no-op. */
TF_API void tf_dgram_sender_close(tf_dgram_sender *s);

/* A UDP socket bound to host:port (port 0: an ephemeral port, see tf_dgram_receiver_port)
 * tracking session_id from first_seq. Asks for a 4 MiB receive buffer (the kernel may cap it). */
TF_API int tf_dgram_receiver_open(const char *host, uint16_t port, uint64_t session_id,
                                  uint64_t first_seq, tf_dgram_receiver **out);
/* Receives up to max (at most TF_DGRAM_BATCH per call) datagrams and classifies each into ev[].
 * timeout_ms: 0 do not wait, < 0 wait for ever, > 0 wait at most that long for the first.
 * Returns how many events were filled (0: nothing arrived in time), -errno or TF_E_NULL_ARG. */
TF_API int tf_dgram_recv(tf_dgram_receiver *r, tf_dgram_event *ev, size_t max, int timeout_ms);
/* The bound port and the socket, or TF_E_NULL_ARG (as tf_dgram_recv for a NULL r). */
TF_API int tf_dgram_receiver_port(const tf_dgram_receiver *r);
TF_API int tf_dgram_receiver_fd(const tf_dgram_receiver *r);
/* The receiver's tracker (its stats and next expected journal_seq). Valid until close. NULL for
 * a NULL r. */
TF_API const tf_dgram_tracker *tf_dgram_receiver_tracker(const tf_dgram_receiver *r);
/* NULL is a no-op. */
TF_API void tf_dgram_receiver_close(tf_dgram_receiver *r);

#endif

/* Inside the connection layer (src/net/ only): the connection, the loop and the listener as the
 * files of the layer share them, a connection's one state, the transport hook, and the functions
 * one file of the layer calls in another. Nothing outside src/net/ includes it.
 *
 * The files, one job each: poller.c (epoll), listeners.c (accept, Unix and TCP sockets),
 * limits.c (per-peer and per-process caps, the memory counter), timers.c (idle, stall, rate),
 * workers.c (the pool), output.c (reply queues, flow control), log.c (the one throttled logger),
 * shutdown.c (signals, stopping, closing), transport.c (plain, fd-passing, stdio and TLS bytes),
 * conn.c (a connection's state machine and its input), stdio.c (the stdin/stdout connection),
 * ring.c (shared-memory ring connections: a thread per ring, run by the layer), loop.c (the
 * loop itself), config.c (the limits both servers share).
 */
#ifndef TF_NET_PRIVATE_H
#define TF_NET_PRIVATE_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "net/net.h"
#include "net/tls.h"
#include "wire/wire_internal.h"

/* Output buffers above this are freed once empty instead of kept (and every one once the
 * connection has been at rest for a tick). */
#define OBUF_KEEP ((size_t)4 << 10)
#define NS_PER_S 1000000000ll

/* Tags of the loop's own fds in epoll (a connection's is its pointer). */
enum { TAG_SIGNAL = 1, TAG_DONE = 2, TAG_STDIO = 3, TAG_LISTEN = 16 };

/* A connection's state: one value, and these transitions only.
 *
 *   HANDSHAKE -> OPEN      the transport's handshake finished (TLS)
 *   OPEN      -> PARKED    a heavy frame goes to a worker (the loop then does not touch it)
 *   PARKED    -> resume    the worker is done: OPEN, or CLOSING / DOOMED if asked meanwhile
 *   OPEN      -> CLOSING   tfn_conn_close, a bad envelope, a frame that failed
 *   any live  -> DOOMED    output beyond out_max, no memory for output
 *   any live  -> DEAD      conn_close: on_close ran, the socket is closed
 *
 * In HANDSHAKE and PARKED a request to close or doom is kept in `resume` (the state taken when
 * the handshake or the worker is done; a doomed one is closed at the loop's next look, before
 * any more handshake). DOOMED keeps its first reason: a later close does not replace it. DEAD
 * connections are freed at the end of the loop turn (lists of the turn may point at them).
 * What is not the state: the input side's observations (drained, rdhup, eof), list and poll
 * bookkeeping (in_ready, want_out), buffers given back (rested), a stream (pull_more).
 * Whether an OPEN connection is inside a frame's body is not a state of its own: it is
 * got < body_len (in_body). */
typedef enum conn_state {
    CS_HANDSHAKE, /* the transport's handshake is under way: no frame, output waits */
    CS_OPEN,      /* taking frames: between frames, in a header or in a body */
    CS_PARKED,    /* a worker runs its frame and sends the reply */
    CS_CLOSING,   /* reads nothing more; closes once output is out and ops->busy says done */
    CS_DOOMED,    /* closes at the next chance, output or not */
    CS_DEAD,      /* closed; freed at the end of the loop turn */
} conn_state;

/* How bytes move between a connection and its fds (transport.c): a plain socket, a Unix socket
 * that carries fds, stdin/stdout, TLS over a socket. */
typedef struct net_transport {
    /* 1: blocking fds served by their own thread (stdio), never by the loop. */
    int blocking;
    /* 1: a read may wait for the socket to take bytes (TLS), so EPOLLOUT resumes reading. */
    int out_wakes_read;
    /* Up to n bytes: > 0 (sets c->drained when a short read means the socket is empty), 0 the
     * peer's end, -EAGAIN, -ECANCELED (stopping, blocking mode), or -errno. */
    ssize_t (*read)(tfn_conn *c, void *buf, size_t n);
    /* Writes from iov[0..n): bytes taken (> 0), -EAGAIN, or < 0. A transport may take fewer
     * pieces than given (TLS takes the first only). */
    ssize_t (*writev)(tfn_conn *c, const struct iovec *iov, int n);
    /* NULL, or drives the handshake: 0 done, TFN_TLS_WANT_READ / _WRITE, < 0 failed (why). */
    int (*handshake)(tfn_conn *c, char *why, size_t cap);
    /* Before the fd is closed (clean: a goodbye may be sent). NULL: nothing to do. */
    void (*end)(tfn_conn *c, int clean);
    /* NULL, or gives back what the transport holds for a connection at rest (timers.c). */
    void (*rest)(tfn_conn *c);
} net_transport;

extern const net_transport tfn_io_plain, tfn_io_pass_fds, tfn_io_stdio, tfn_io_tls;

struct tfn_conn {
    tfn_loop *lp;
    const tfn_ops *ops;
    const net_transport *io;
    void *data;
    const char *transport;
    int rfd, wfd;
    conn_state state;
    conn_state resume; /* HANDSHAKE, PARKED: the state taken afterwards (see conn_state) */
    const char *why;   /* why it closes (CLOSING, DOOMED), a static string */
    /* What the input side has seen (edge-triggered reads, conn.c). */
    int drained;   /* the last read came back short or EAGAIN: wait for the next edge */
    int rdhup;     /* the peer signalled its end: never trust a short read again */
    int eof;       /* read returned 0 */
    int io_failed; /* a fatal transport error: no goodbye (TLS close_notify) */
    /* Bookkeeping: ready-list membership, poll interest, buffers given back. */
    int in_ready, want_out, rested;
    uint8_t *ibuf;
    size_t icap, ipos, iend;
    uint8_t *body;          /* NULL: drop the body */
    uint64_t body_len, got; /* got < body_len: inside a body */
    /* output: obuf[opos..oend), then zc[izc..nzc) from zc_off into zc[izc] */
    uint8_t *obuf;
    size_t ocap, opos, oend;
    struct iovec zc[TFN_MAX_ZC];
    int nzc, izc;
    size_t zc_off;
    int pull_more; /* ops->pull has more to give (tfn_conn_pull_ready) */
    int64_t last_io_ns;
    int last_outq;                    /* bytes the peer had not read at the last tick (SIOCOUTQ) */
    int64_t outq_since_ns;            /* since when that backlog has not shrunk */
    int64_t frame_t0_ns;              /* when the frame in progress began (0: none) */
    uint64_t frame_bytes;             /* bytes read since then */
    uint8_t peer[TFN_PEER_KEY_BYTES]; /* family (1 uid, 4, 6) and key; peer[0] == 0: not counted */
    tfn_log_throttle log;             /* tfn_conn_log */
    tfn_ssl *ssl;                     /* the TLS transport's object (NULL: plain) */
    /* What the SSL object is counted for in the memory counter now: TFN_TLS_HANDSHAKE_BYTES
     * until the handshake is done, then TFN_TLS_CONN_BYTES, less TFN_TLS_BUF_BYTES while its
     * record buffers are given back (ssl_lean). */
    size_t ssl_mem;
    int ssl_lean;
    int64_t opened_ns;            /* accepted at (bounds the handshake) */
    struct tfn_ring *ring;        /* the ring this connection is the control socket of */
    struct tfn_conn *prev, *next; /* every live socket connection */
    struct tfn_conn *qnext;       /* worker queue, done list, ready list, graveyard */
};

/* What a ring's thread is doing (tfn_ring.phase), for the timers. */
enum { RING_BUSY = 0, RING_WAIT_DATA = 1, RING_WAIT_ROOM = 2 };
/* Why the layer ends a ring (tfn_ring.end; never sent: they name why it closed). */
#define RING_END_IDLE (-ETIME)
#define RING_END_STALLED (-ETIMEDOUT)

/* A ring connection (net.h, "shared-memory rings"). The loop thread owns the list, the control
 * link and the timer fields; the ring's thread owns the rings, the waiter and the frame being
 * answered; the rest is atomic or under lock. Freed by the loop once its thread is joined and
 * its control connection is gone, whichever comes last. */
struct tfn_ring {
    tfn_loop *lp;
    const tfn_ring_ops *ops;
    void *data;
    uint8_t *map; /* the client's memfd, mapped */
    size_t map_len;
    uint64_t ring_bytes, max_body;
    pid_t pid;                        /* the client's process (SO_PEERCRED of the control socket) */
    uint8_t peer[TFN_PEER_KEY_BYTES]; /* its key in the per-peer caps */
    /* the ring's thread */
    pthread_t thr;
    tfw_ring_cons req;
    tfw_ring_prod resp;
    tfw_shm_waiter wait;
    uint32_t body_len; /* of the request being answered */
    int owed;          /* that request is not released yet (its reply will release it) */
    /* shared */
    int end;         /* atomic: why the layer ends it (RING_END_*, TF_E_SHM_PEER_GONE), 0: no */
    int phase;       /* atomic: RING_BUSY, RING_WAIT_DATA, RING_WAIT_ROOM */
    uint64_t frames; /* atomic: requests answered (the timers' sign of progress) */
    pthread_mutex_t lock;
    int ctl_fd; /* under lock: the control socket while it is open, -1 after */
    /* the loop thread */
    tfn_conn *ctl; /* the control connection, NULL once it closed */
    int reaped;    /* its thread is joined and its slot given back */
    uint64_t seen_frames;
    int seen_phase;
    int64_t moved_ns;              /* when the timers last saw it move */
    struct tfn_ring *next, *dnext; /* the loop's rings; the list of rings whose thread ended */
};

/* Open connections per peer: open addressing, linear probing, backward-shift deletion. */
typedef struct peer_ent {
    uint8_t key[TFN_PEER_KEY_BYTES];
    int count; /* 0: empty */
} peer_ent;

typedef struct listener {
    int fd;
    const tfn_ops *ops;
    const char *label;
    int pass_fds;
    tfn_tls *tls; /* NULL: plain */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    dev_t dev;
    ino_t ino;
} listener;

struct tfn_loop {
    tfn_config cfg;
    int ep, sig_fd, done_efd, stdio_efd, stop_efd; /* stop_efd: wakes the stdio thread's poll */
    sigset_t old_mask;
    struct sigaction old_pipe;
    listener ls[TFN_MAX_LISTEN];
    int nls;
    tfn_conn *conns;
    int nconns;
    peer_ent *peers;
    size_t peer_mask;
    tfn_counters ctr;
    tfn_conn *ready, *ready_tail;
    tfn_conn *grave;
    int stopping;
    int stopping_flag; /* atomic copy of `stopping` for the workers and stdio */
    int64_t stop_deadline_ns;
    int parked;
    /* worker pool */
    pthread_t *workers;
    int nworkers;
    pthread_mutex_t qlock;
    pthread_cond_t qcond;
    tfn_conn *qhead, *qtail;
    int qstop;
    pthread_mutex_t dlock;
    tfn_conn *dhead;
    /* rings (ring.c): live ones (loop thread); those whose thread ended (under dlock) */
    tfn_ring *rings;
    int nrings;
    tfn_ring *rdone;
    /* stdio */
    const tfn_ops *stdio_ops;
    pthread_t stdio_thr;
    int stdio_started, stdio_done;
};

int64_t tfn_now_ns(void);
void tfn_stat_add(uint64_t *ctr, int64_t n);

/* ---- the state (conn.c) ---- */

/* The state a connection settles in once its handshake or its worker is done. */
static inline conn_state conn_settled(const tfn_conn *c)
{
    return c->state == CS_HANDSHAKE || c->state == CS_PARKED ? c->resume : c->state;
}
static inline int conn_in_body(const tfn_conn *c)
{
    return c->got < c->body_len;
}
/* Asks for CLOSING or DOOMED (kept in resume while a handshake or a worker has it). */
void tfn_conn_request(tfn_conn *c, conn_state to, const char *why);

/* ---- poller.c ---- */
int tfn_poll_open(tfn_loop *lp);
int tfn_poll_add_tag(tfn_loop *lp, int fd, uint64_t tag);
int tfn_poll_add_conn(tfn_loop *lp, tfn_conn *c);
void tfn_want_out(tfn_loop *lp, tfn_conn *c, int on);

/* ---- limits.c ---- */
void tfn_mem_add(tfn_loop *lp, size_t n);
void tfn_mem_sub(tfn_loop *lp, size_t n);
int tfn_peers_open(tfn_loop *lp);
void tfn_peer_inc(tfn_loop *lp, const uint8_t *key);
void tfn_peer_dec(tfn_loop *lp, const uint8_t *key);
void tfn_peer_key(int fd, int is_unix, uint8_t key[TFN_PEER_KEY_BYTES]);
void tfn_peer_name(const uint8_t key[TFN_PEER_KEY_BYTES], char *buf, size_t cap);
int tfn_admit(tfn_loop *lp, const uint8_t key[TFN_PEER_KEY_BYTES], size_t bytes, const char **why);
int tfn_ring_admit(tfn_loop *lp, const uint8_t key[TFN_PEER_KEY_BYTES], size_t bytes,
                   const char **why);
void tfn_config_defaults(tfn_config *cfg);

/* ---- output.c ---- */
int tfn_out_pending(const tfn_conn *c);
int tfn_owes_out(const tfn_conn *c);
void tfn_obuf_release(tfn_conn *c);
int tfn_flush(tfn_conn *c);
int tfn_pull_fill(tfn_conn *c);

/* ---- conn.c ---- */
tfn_conn *tfn_conn_new(tfn_loop *lp, int fd, const tfn_ops *ops, const char *transport,
                       const net_transport *io);
void tfn_conn_free(tfn_conn *c);
void tfn_conn_close_in(tfn_loop *lp, tfn_conn *c, const char *why);
void tfn_conn_link(tfn_loop *lp, tfn_conn *c);
int tfn_conn_step(tfn_loop *lp, tfn_conn *c, const char **why);
int tfn_run_frame(tfn_conn *c, int where);
int tfn_at_rest(tfn_conn *c);
void tfn_add_ready(tfn_loop *lp, tfn_conn *c);
void tfn_drive(tfn_loop *lp, tfn_conn *c);

/* ---- workers.c ---- */
int tfn_workers_start(tfn_loop *lp);
void tfn_workers_stop(tfn_loop *lp);
void tfn_park(tfn_loop *lp, tfn_conn *c);
void tfn_on_done(tfn_loop *lp);

/* ---- timers.c ---- */
void tfn_timeouts(tfn_loop *lp);

/* ---- listeners.c ---- */
void tfn_accept_all(tfn_loop *lp, listener *l);
void tfn_close_listeners(tfn_loop *lp);

/* ---- ring.c ---- */
void tfn_ring_end(tfn_ring *r, int why);
void tfn_ring_detach(tfn_ring *r);
void tfn_rings_reap(tfn_loop *lp);
void tfn_rings_wake(tfn_loop *lp);
void tfn_rings_join(tfn_loop *lp);

/* ---- stdio.c ---- */
int tfn_stdio_start(tfn_loop *lp);

/* ---- shutdown.c ---- */
int tfn_signals_open(tfn_loop *lp);
void tfn_signals_read(tfn_loop *lp);
void tfn_signals_close(tfn_loop *lp);
void tfn_final_close(tfn_loop *lp);
void tfn_drain_ready(tfn_loop *lp);
void tfn_bury(tfn_loop *lp);

/* ---- log.c ---- */
void tfn_log_line(const char *name, const char *prefix, const char *fmt, va_list ap);

#endif

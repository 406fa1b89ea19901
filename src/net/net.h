/* The connection layer every tollfree server drives (internal): an epoll event loop with
 * listeners (Unix 0600, TCP on loopback unless told otherwise, stdio), connection accounting and
 * limits, stall and idle timeouts, bounded per-connection output, a worker pool and a clean
 * shutdown. A server supplies a small table of operations per protocol (tfn_ops): where a frame
 * starts and how long it is, what to do with a whole frame, whether it is heavy (runs on a
 * worker), and what to do when a connection ends; the way Redis' ae.c serves what is above it.
 *
 * Threads: one loop thread owns every socket connection. A connection whose frame is heavy is
 * parked and handed to a worker; until the worker is done the loop does not touch it, so the
 * operations of one connection never run on two threads at once. The stdio connection runs the
 * same state machine on blocking fds in its own thread. Operations of different connections may
 * run at the same time on different threads (loop, workers, stdio).
 *
 * Input: a connection reads into its input buffer and asks ops->head() about the bytes at the
 * front. The head names how many header bytes it takes and where the body goes (server memory,
 * filled by the layer, straight from the socket when it is large) or that the body is dropped.
 * When the frame is whole, ops->frame() runs. The layer reads until the socket says EAGAIN or
 * the peer's end: a peer that sends and half-closes is always seen to leave, after its replies.
 *
 * Output: tfn_conn_send() copies bytes into the connection's output buffer; tfn_conn_send_zc()
 * also queues caller memory that is sent without a copy (it must stay valid until
 * ops->on_flushed). A connection stops taking frames while zero-copy output is pending or its
 * buffered output is above out_high (a reader that does not read slows only itself), and output
 * beyond out_max closes it: the loop never blocks on a peer. Output too large to hold is streamed:
 * the server queues it itself and calls tfn_conn_pull_ready; the layer then asks ops->pull for
 * one chunk at a time as the peer drains (taking no frame meanwhile), so out_max bounds memory,
 * not the size of a reply.
 *
 * Memory: with cfg.mem_used set, every buffer the layer holds for a connection (its input buffer,
 * its output buffer, and on a TLS listener its SSL object: TFN_TLS_*_BYTES, net/tls.h) is
 * added to that counter (the server's own, shared with what it holds itself) while it is held; a
 * connection whose input buffer and SSL object would pass cfg.mem_limit is refused at accept. A
 * connection at rest for a tick (nothing owed, no frame in progress) gives its buffers back
 * (input, output, TLS record buffers: they return with its next byte) and the server its own
 * (ops->on_idle). While the counter is above cfg.mem_limit, a connection that has output waiting
 * takes no new frame: output waits for its peers, never grows the server past the limit by more
 * than one loop turn of replies. A server checks its request bodies against the same counter in
 * head() (tfn_mem_room) and refuses a frame that would pass it, before allocating.
 *
 * Peers: a socket connection has a peer (the process of a Unix peer, by SO_PEERCRED: every client
 * of a user has its UID, so a UID would put them all behind one cap; the address of
 * a TCP peer: an IPv4 address, or the /64 prefix of an IPv6 one, since one host is routinely
 * given a whole /64 and could otherwise open its connections from as many addresses; an
 * IPv4-mapped IPv6 address is its IPv4 address). One peer holds at most max_conns_per_peer
 * connections, and the last conn_reserve slots of max_conns go only to peers that hold fewer than
 * TFN_RESERVE_PEER_CONNS: whoever fills the server, a new peer still gets in.
 *
 * Timeouts (checked once a second): stall_timeout_s for a frame or output that does not move,
 * idle_timeout_s between frames (idle_full_timeout_s while the server is full), and min_rate: a
 * frame in progress for more than TFN_RATE_GRACE_S seconds that has averaged fewer than min_rate
 * bytes a second is closed.
 *
 * TLS (cfg.tls, net/tls.h): a TCP connection first does its TLS handshake inside the loop (no
 * thread waits on it); its reads and writes then go through the SSL object (the TLS transport:
 * one row of the layer's table of transports, beside plain sockets, fd-passing Unix sockets and
 * stdio), with the poll interest following what OpenSSL wants. A handshake is bounded by
 * stall_timeout_s from the accept (by idle_timeout_s when there is no stall timeout); one that
 * fails or runs out closes only its connection, with a rate-limited line. Output a server queues
 * before the handshake is done (a logon challenge) goes out right after it.
 *
 * Logs a peer can provoke are rate-limited: every such line of every server goes through one
 * process-wide gate (tfn_log_gate: TFN_LOG_PER_SEC lines a second, the rest counted and the count
 * said), and tfn_conn_log also limits one connection (a burst, then one line a second).
 */
#ifndef TF_NET_H
#define TF_NET_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define TFN_MAX_LISTEN 32                   /* listeners of one loop */
#define TFN_MAX_ZC 3                        /* zero-copy segments per connection */
#define TFN_IBUF_DEFAULT ((size_t)64 << 10) /* input buffer when ops->ibuf_bytes is 0 */
#define TFN_RESERVE_PEER_CONNS 4            /* a peer below this may take a reserved slot */
#define TFN_RATE_GRACE_S 10                 /* seconds a frame may take before min_rate applies */
#define TFN_CONN_LOG_BURST 10               /* tfn_conn_log lines a connection may write at once */
#define TFN_LOG_PER_SEC 20                  /* lines a second through tfn_log_gate, in all */
#define TFN_PULL_CHUNK ((size_t)64 << 10)   /* what ops->pull is asked for at once */

typedef struct tfn_loop tfn_loop;
typedef struct tfn_conn tfn_conn;

/* Where ops->frame runs. */
enum { TFN_ON_LOOP = 0, TFN_ON_WORKER = 1, TFN_ON_STDIO = 2 };

/* What ops->head decided about the frame at the front of the input. */
typedef struct tfn_head {
    size_t consume;    /* header bytes the frame takes from the input (may be the whole frame) */
    uint64_t body_len; /* bytes after them that belong to the frame */
    uint8_t *body;     /* their destination (server memory, body_len bytes); NULL: drop them */
} tfn_head;

typedef struct tfn_ops {
    /* Input buffer of a connection (0: TFN_IBUF_DEFAULT). */
    size_t ibuf_bytes;
    /* The most bytes head() ever asks for before it decides (at most ibuf_bytes / 2). */
    size_t max_head;
    /* A new connection (optional): 0 to keep it, < 0 to refuse it (closed, on_close not called). */
    int (*on_open)(tfn_conn *c);
    /* Looks at the avail (>= 1) bytes at p, the front of the input. Returns 0 with *h filled (a
     * frame starts here), N > avail when it needs N bytes to decide (N <= max_head), or < 0: the
     * envelope is bad; the connection reads nothing more and closes once queued output is out. */
    int (*head)(tfn_conn *c, const uint8_t *p, size_t avail, tfn_head *h);
    /* The frame announced by the last head() is whole (its body filled or dropped). where is
     * TFN_ON_LOOP, TFN_ON_WORKER or TFN_ON_STDIO. Returns 0, or < 0 to close the connection once
     * queued output is out. */
    int (*frame)(tfn_conn *c, int where);
    /* Optional: 1 when that frame should run on the worker pool (stdio runs it in place). */
    int (*is_heavy)(tfn_conn *c);
    /* Optional: a file descriptor received with SCM_RIGHTS; the server owns it (else closed). */
    void (*on_fd)(tfn_conn *c, int fd);
    /* Optional: every queued byte, zero-copy segments included, has been sent. */
    void (*on_flushed)(tfn_conn *c);
    /* Optional: 1 while the server still owes this peer output it has not queued yet (a peer
     * that has half-closed is not closed before). The server calls tfn_conn_send later. */
    int (*busy)(tfn_conn *c);
    /* Optional: the connection has been at rest (nothing owed, no frame in progress) for a tick;
     * the layer has released its input and output buffers, the server releases its own. */
    void (*on_idle)(tfn_conn *c);
    /* Optional: output streamed as the peer drains it (a reply too large to hold in memory).
     * After tfn_conn_pull_ready, whenever the connection's output buffer is empty the layer
     * calls it to write up to cap bytes into buf; it returns their count (0: nothing) and sets
     * *more while it has more to give, or < 0 when it fails (the connection is closed). While
     * it has more, the connection takes no frame and the server queues its output there, never
     * with tfn_conn_send. */
    int (*pull)(tfn_conn *c, uint8_t *buf, size_t cap, int *more);
    /* The connection ends (called once, before its socket is closed, on the thread that closes
     * it: the loop, or the stdio thread). why is a static string. */
    void (*on_close)(tfn_conn *c, const char *why);
} tfn_ops;

typedef struct tfn_config {
    const char *name; /* log prefix, e.g. "tollfree serve" */
    int quiet;        /* only `always` log lines */
    int max_conns;    /* socket connections at once; more are refused (0: 4096) */
    /* Connections of one peer (UID or address) at once (0: max_conns - conn_reserve). */
    int max_conns_per_peer;
    /* Slots kept for peers holding fewer than TFN_RESERVE_PEER_CONNS (0: max_conns / 16;
     * -1: none). */
    int conn_reserve;
    int stall_timeout_s; /* close a connection stuck mid-frame or with unsent output (0: never) */
    int idle_timeout_s;  /* close a connection that does nothing at a frame boundary (0: never) */
    /* The same, but only while the server is full (its free slots are down to conn_reserve):
     * idle connections then make room (0: off). */
    int idle_full_timeout_s;
    uint64_t min_rate; /* bytes/s a frame in progress must average after the grace (0: off) */
    /* The server's memory counter (atomic) and its limit: output the layer holds is added to it
     * (NULL: not counted, no limit). */
    uint64_t *mem_used;
    uint64_t mem_limit;
    size_t out_high;     /* stop taking frames while more output waits (0: 256 KiB; <= out_max/4) */
    size_t out_max;      /* tfn_conn_send beyond this closes the connection (0: 16 MiB) */
    int sockbuf_bytes;   /* SO_SNDBUF / SO_RCVBUF asked for accepted sockets (0: 4 MiB) */
    int frames_per_turn; /* steps (a read, a header, a frame) on one connection per loop turn,
                            for fairness (0: 32) */
    int workers;         /* worker threads (-1: one per core, 2..64; 0: none) */
    /* On SIGINT/SIGTERM: 0 closes every connection at once (after one non-blocking try to send
     * what is queued); 1 first takes the frames already received (reading until EAGAIN, for at
     * most a second), runs before_sleep(more = 0) and tries once to send the output. */
    int drain_on_stop;
    /* Optional, on the loop thread, once per loop turn before it waits: more is 1 when some
     * connection still has frames to take in this round (the server may wait to batch). */
    void (*before_sleep)(tfn_loop *lp, void *ud, int more);
    /* Optional, on the loop thread, when stopping begins (after the listeners are closed). */
    void (*on_stop)(tfn_loop *lp, void *ud);
    void *ud;
    /* Optional counters the layer adds to atomically. */
    uint64_t *stat_bytes_in, *stat_bytes_out, *stat_conns_total, *stat_conns_open;
    /* TLS on every TCP listener (net/tls.h; NULL: plain TCP). Unix sockets and stdio stay
     * plain. Must outlive the loop. */
    struct tfn_tls *tls;
} tfn_config;

/* What the layer refused or closed, for tests and logs (read on the loop thread or after). */
typedef struct tfn_counters {
    uint64_t refused_full, refused_peer, refused_reserve, refused_memory; /* at accept */
    uint64_t closed_idle, closed_stall, closed_slow;
    uint64_t mem_waits;     /* loop turns a connection was held back by the memory limit */
    uint64_t closed_tls;    /* TLS handshakes that failed or did not finish in time */
    uint64_t refused_rings; /* rings refused by their caps (TFN_MAX_RINGS, TFN_RINGS_PER_PEER) */
} tfn_counters;

/* Creates a loop (epoll, signalfd for SIGINT/SIGTERM). Blocks SIGINT and SIGTERM in the calling
 * thread (every thread created after inherits it) and ignores SIGPIPE until tfn_loop_close: call
 * it before starting any thread. Returns 0 or -errno / TF_E_NOMEM. */
int tfn_loop_open(const tfn_config *cfg, tfn_loop **out);
/* Joins the workers and the stdio thread, closes every connection and listener (removing the
 * socket files it created, if still its own), restores the signal mask. NULL is a no-op. */
void tfn_loop_close(tfn_loop *lp);

/* Listeners: call before tfn_loop_run. The label names the transport in logs ("unix", "shm");
 * pass_fds: receive SCM_RIGHTS (ops->on_fd). A stale socket file is replaced, a live one
 * refused. Prints "listening LABEL PATH". Returns 0 or a negative code (printed). */
int tfn_listen_unix(tfn_loop *lp, const char *path, const char *label, const tfn_ops *ops,
                    int pass_fds);
/* "[HOST:]PORT" ("[v6]:PORT" too); HOST defaults to 127.0.0.1, PORT 0 picks a free port, ports
 * above 65535 are refused. Prints "listening tcp HOST:PORT". */
int tfn_listen_tcp(tfn_loop *lp, const char *spec, const tfn_ops *ops);
/* stdin/stdout as one connection, served by its own thread from tfn_loop_run. When it reaches
 * the end of its input and the loop has no listener, the loop stops. */
int tfn_loop_add_stdio(tfn_loop *lp, const tfn_ops *ops);

/* Runs until SIGINT/SIGTERM or tfn_loop_stop, then shuts down as the config says. Returns 0, or
 * a negative code when the workers or the stdio thread could not start. */
int tfn_loop_run(tfn_loop *lp);
/* Begins the shutdown (loop thread only). */
void tfn_loop_stop(tfn_loop *lp, const char *why);
int tfn_loop_stopping(const tfn_loop *lp);
/* Socket connections open now. */
int tfn_loop_conns(const tfn_loop *lp);
void tfn_loop_counters(const tfn_loop *lp, tfn_counters *out);
/* 1 when `bytes` more would keep cfg.mem_used within cfg.mem_limit (always 1 without one).
 * Any thread; a check, not a reservation (the server adds what it allocates itself). */
int tfn_mem_room(const tfn_loop *lp, uint64_t bytes);
void *tfn_loop_ud(const tfn_loop *lp);

/* ---- the one logger of every server (log.c) ---- */

/* A burst of one source's lines (a connection): TFN_CONN_LOG_BURST, then one a second; the rest
 * are counted (dropped: since the last line that went, said with the next; dropped_total: all,
 * for the close line). Zero-initialised. */
typedef struct tfn_log_throttle {
    int tokens;
    int64_t sec;
    uint64_t dropped, dropped_total;
} tfn_log_throttle;

enum {
    TFN_LOG_ALWAYS = 1, /* printed even when quiet, never gated nor throttled */
    TFN_LOG_GATED = 2   /* a line a peer can provoke: through the process-wide gate */
};

/* One line "NAME: ..." on stderr, written with a single write(2) (lines of different threads
 * never interleave). Unless TFN_LOG_ALWAYS: nothing when quiet; with t, the throttle t first;
 * with TFN_LOG_GATED, the gate (tfn_log_gate). Lines left out are counted and the counts said
 * in front of the next line that goes: "(N lines left out) " (the gate's),
 * "(N lines of this connection left out) " (t's). Any thread (t: the caller's own). */
void tfn_logv(const char *name, int quiet, int flags, tfn_log_throttle *t, const char *fmt,
              va_list ap) __attribute__((format(printf, 5, 0)));
/* "NAME: ..." always: start-up lines of a server before or outside its loop (a bad
 * --max-memory, a strategy that cannot be loaded). Recovery's lines reach the same logger
 * through tfn_logv (the engine service's tfes_log callback). */
void tfn_log_named(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* tfn_logv with the loop's name and quiet: `always` lines are printed even when quiet. */
void tfn_log(tfn_loop *lp, int always, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same, through the gate below. For errors and ends a peer can provoke. */
void tfn_log_limited(tfn_loop *lp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The one gate of the lines peers can provoke, process-wide (every server, every thread):
 * TFN_LOG_PER_SEC lines a second. 1 when a line may go out (*dropped: the lines left out since
 * the last one that went, to be said with it); 0 when it is left out (counted). */
int tfn_log_gate(uint64_t *dropped);
/* Prints "NAME: N log lines about connections left out" when the gate left some out since the
 * last line that went (the loop calls it once a second and on close). */
void tfn_log_gate_report(const char *name);

/* The peer key of a TCP address (see "Peers" above): key[0] = 4 (IPv4, key[1..4]) or 6 (IPv6,
 * the /64 prefix in key[1..8], the rest zero); all zero for another family. Pure. */
#define TFN_PEER_KEY_BYTES 17
struct sockaddr;
void tfn_peer_key_of(const struct sockaddr *sa, uint8_t key[TFN_PEER_KEY_BYTES]);

/* ---- one server configuration (config.c): what `serve` and `engine serve` share ---- */

#define TFN_MAX_LISTENERS 8                /* --unix or --tcp options of one server */
#define TFN_MIN_MEMORY ((uint64_t)1 << 20) /* the least --max-memory (there is no unlimited) */

/* The listeners a server's options name. The strings must outlive the loop. */
typedef struct tfn_listeners {
    const char *unix_paths[TFN_MAX_LISTENERS];
    int n_unix;
    const char *tcp_addrs[TFN_MAX_LISTENERS];
    int n_tcp;
} tfn_listeners;

/* The connection limits of a server, embedded in its config (srv_config, tfes_config) and set
 * by the same options (tfn_limits_option). 0 in a field means the default noted. */
typedef struct tfn_limits {
    int max_conns;           /* --max-conns: socket connections at once (0: 4096) */
    int max_conns_per_peer;  /* --max-conns-per-peer (0: max_conns - conn_reserve) */
    int conn_reserve;        /* --conn-reserve (0: max_conns / 16; -1: none) */
    int stall_timeout_s;     /* --stall-timeout (0: never) */
    int idle_timeout_s;      /* --idle-timeout (0: never) */
    int idle_full_timeout_s; /* --idle-timeout-full: the same while full (0: off) */
    uint64_t min_rate;       /* --min-rate: bytes/s a frame in progress averages (0: off) */
    uint64_t max_memory;     /* --max-memory: the server's memory bound (0: the server's default) */
    uint64_t max_output;     /* --max-output: one peer's queued output (0: the server's default) */
    int quiet;               /* --quiet: only the lines that are always said */
} tfn_limits;

/* The defaults both servers share: stall 60 s, min-rate 1024 B/s, 4096 connections; the rest
 * 0 (each server sets its own: the sweep service idle 300 s and 4G, the engine service
 * idle-full 300 s and 1G). */
void tfn_limits_init(tfn_limits *l);
/* Option opt with value val, when it is one of the limits (the grammar of
 * common/opts_size.h: sizes with K, M, G; counts in digits; the same messages): 1 taken, 0 not
 * a limit option, -1 a bad value (msg says why, naming the option and the value). */
int tfn_limits_option(tfn_limits *l, const char *opt, const char *val, char *msg, size_t cap);
/* The limits into a loop's config: connections, timeouts, rate, quiet; mem_limit = max_memory
 * and out_max = max_output where they are set (the server fills mem_used). */
void tfn_limits_apply(const tfn_limits *l, tfn_config *nc);
/* Start-up both servers do before listening: the soft limit of open files raised to the hard
 * one (--max-conns sockets and more). */
void tfn_raise_nofile(void);
/* Listens on every --unix (label "unix", pass_fds as given) and then every --tcp of ls, in
 * order; stops at the first failure (said). 0 or a negative code. */
int tfn_listen_all(tfn_loop *lp, const tfn_listeners *ls, const tfn_ops *ops, int pass_fds);

/* ---- shared-memory rings (ring.c) ----
 *
 * A ring connection (docs/protocol.md, "Shared memory"): the client's sealed memfd holding a
 * request ring and a response ring, set up by a handshake on a Unix control socket (a connection
 * of this loop, whose ops call tfn_ring_open). The layer owns it as it owns a socket connection:
 * it is admitted by the same limits (one more connection of the control socket's peer, the
 * process by SO_PEERCRED; the reserve; the memory counter, with the mapping's bytes) and by the
 * rings' own caps (TFN_MAX_RINGS threads, TFN_RINGS_PER_PEER of one peer); it is closed by the
 * same timers (idle_timeout_s while it waits for a request, stall_timeout_s while a reply waits
 * for room) and by the same shutdown (a stop wakes its thread, tfn_loop_close joins it). A thread
 * per ring, run by the layer, waits as include/tollfree/shm.h says ("Waiting") and hands every
 * request frame to ops->frame. The ring ends when its peer leaves (control socket closed, the
 * client's closed word, its process gone), when it writes an invalid position or length, on a
 * timer, on a stop, or when frame() fails; it then tells the client (server_closed, a wake) and
 * closes the control socket. */
#define TFN_MAX_RINGS 64                       /* rings (threads) of one loop */
#define TFN_RINGS_PER_PEER (TFN_MAX_RINGS / 4) /* of one process: others still get one */

typedef struct tfn_ring tfn_ring;

typedef struct tfn_ring_ops {
    /* Optional, first thing on the ring's thread. */
    void (*on_start)(tfn_ring *r);
    /* A request frame lies in the request ring: frame points at its u32 prefix, body_len bytes
     * follow (the peer can rewrite them at any time: copy before checking). Answers it with
     * tfn_ring_reply (the request is released then, before the reply is published). Returns 0,
     * or < 0 to end the ring (what tfn_ring_reply returned, for one). On the ring's thread. */
    int (*frame)(tfn_ring *r, const uint8_t *frame, uint32_t body_len);
    /* The ring ends (its thread, once): line says why, its ring size, the client's pid and how
     * its thread waited ("ring closed: ..."), for the server's close line. */
    void (*on_close)(tfn_ring *r, const char *line);
} tfn_ring_ops;

/* Validates a handshake (hello: TF_SHM_HELLO_BYTES, include/tollfree/shm.h; memfd sealed
 * against growing and shrinking, of the announced size), admits the ring and starts its thread
 * with data for ops; spin is the waiters' budget (TF_SHM_DEFAULT_SPIN when < 0), max_body the
 * longest request body taken. From the operations of ctl, a Unix socket connection of the loop
 * thread, at most once per connection. 0, or the status for the client: TF_E_SHM_HANDSHAKE,
 * TF_E_BAD_FD, TF_E_SHM_LIMIT (a limit or cap, said in the log), TF_E_SHUTTING_DOWN, TF_E_NOMEM.
 * The memfd stays the caller's. */
int tfn_ring_open(tfn_conn *ctl, int memfd, const uint8_t *hello, const tfn_ring_ops *ops,
                  void *data, int spin, uint64_t max_body);
/* The reply to the frame being answered: head[0..head_len) (its u32 prefix first) and segs,
 * copied into the response ring once there is room (waiting as the ring waits). 0, or a
 * negative code that ends the ring. From ops->frame. */
int tfn_ring_reply(tfn_ring *r, const void *head, size_t head_len, const struct iovec *segs,
                   int nseg);
void *tfn_ring_data(const tfn_ring *r);
/* The size of each of its two rings. */
uint64_t tfn_ring_bytes(const tfn_ring *r);

/* ---- connections ---- */

/* A log line about one connection, for errors its peer can provoke: the first
 * TFN_CONN_LOG_BURST go out, then one a second; the rest are counted, the count said with the
 * next line that goes out and returned by tfn_conn_log_dropped (for the close line). From the
 * thread that runs the connection's operations. */
void tfn_conn_log(tfn_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t tfn_conn_log_dropped(const tfn_conn *c);

void *tfn_conn_data(const tfn_conn *c);
void tfn_conn_set_data(tfn_conn *c, void *data);
tfn_loop *tfn_conn_loop(const tfn_conn *c);
/* "unix", "tcp", "stdio", or the listener's label. Static. */
const char *tfn_conn_transport(const tfn_conn *c);
/* The socket (the read side for stdio). */
int tfn_conn_fd(const tfn_conn *c);
/* Switches the protocol of the connection (e.g. after a handshake); from the next frame on. */
void tfn_conn_set_ops(tfn_conn *c, const tfn_ops *ops);

/* Queues a copy of p[0..n) for the peer. Returns 0, or TF_E_LIMIT when the connection's queued
 * output would pass out_max: nothing is queued and the connection is closed ("output limit").
 * Also TF_E_SHUTTING_DOWN when the connection is already closed or doomed (a connection that
 * tfn_conn_close marked still takes output: it closes once that is out). From the thread that runs
 * the connection's operations, or from before_sleep. */
int tfn_conn_send(tfn_conn *c, const void *p, size_t n);
/* Queues a copy of head[0..head_len) followed by segs[0..nseg) (nseg <= TFN_MAX_ZC) sent from
 * where they lie: the segments must stay valid and unchanged until ops->on_flushed. No frame is
 * taken in the meantime. Same returns as tfn_conn_send. */
int tfn_conn_send_zc(tfn_conn *c, const void *head, size_t head_len, const struct iovec *segs,
                     int nseg);
/* Output that ops->pull will give is waiting: the layer pulls it as the peer drains (loop
 * thread). */
void tfn_conn_pull_ready(tfn_conn *c);
/* Bytes queued in the layer's output buffer, not yet taken by the kernel. */
size_t tfn_conn_queued(const tfn_conn *c);
/* Reads nothing more; closes the connection once its queued output is sent and ops->busy says
 * nothing more is owed (or it stalls). why is a static string for the close line. */
void tfn_conn_close(tfn_conn *c, const char *why);

#endif

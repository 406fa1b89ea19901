/* Internal to wire, server and client: the SPSC rings of the shared-memory transport
 * (docs/protocol.md, "Rings" and "Publishing and waiting").
 *
 * A ring has one producer and one consumer in different processes. head and tail are byte
 * counters that only grow; the peer's counter is hostile and is validated on every load. Each
 * side keeps its own counter locally and only ever stores it (never trusts the shared copy of its
 * own counter, which the peer could scribble on).
 */
#ifndef TF_WIRE_INTERNAL_H
#define TF_WIRE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tollfree/shm.h"
#include "tollfree/wire.h"

static inline void tfw_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static inline uint64_t tfw_align8(uint64_t n)
{
    return (n + 7) & ~(uint64_t)7;
}

/* Peer liveness check: 0 while the peer is alive, else a negative code (TF_E_SHM_PEER_GONE,
 * TF_E_SHUTTING_DOWN, ...). Called at most every TF_SHM_WAIT_NS while waiting. */
typedef int (*tfw_shm_alive_fn)(void *ctx);

/* How one side waits for its peer (include/tollfree/shm.h, "Waiting"): its spin budget, adapted
 * after every wait, and its contention state. One per waiting thread; no locking. */
typedef struct tfw_shm_waiter {
    int max_spin;            /* the configured budget (PAUSE iterations); 0: sleep at once */
    int spin;                /* the budget now, 0 .. max_spin */
    int64_t iter_ps;         /* measured cost of one spin iteration, picoseconds */
    int64_t calm_until;      /* contended: no spinning or yielding before this time (ns) */
    int64_t calm_ns;         /* the length of the last calm window */
    int64_t last_contention; /* when contention was last found (ns), 0: never */
    uint64_t contentions;    /* times contention was found (tests, logs): */
    uint64_t preempted;      /*   a spin cut short by a preemption */
    uint64_t yields_lost;    /*   a yield that held the CPU from us for TF_SHM_YIELD_SLOW_NS */
    uint64_t yields_won;     /* waits that a yield ended (a peer on our CPU ran) */
    uint64_t sleeps;         /* waits that ended in (or after) a futex sleep */
    uint64_t stalls;         /* gaps with no other task on our CPU (not contention) */
    uint64_t timeouts;       /* futex sleeps that ran out with no data (lost wake-ups would) */
    long nivcsw;             /* this thread's involuntary switches when last read; -1: never */
    int64_t sleep_ns;        /* one futex sleep at most: TF_SHM_WAIT_NS (a test sets its deadline,
                              * so that only a lost wake-up can end a sleep with no data) */
} tfw_shm_waiter;

/* Starts at the full budget (max_spin < 0: TF_SHM_DEFAULT_SPIN). */
void tfw_shm_waiter_init(tfw_shm_waiter *w, int max_spin);

/* The side of a ring that this process produces into. */
typedef struct tfw_ring_prod {
    uint8_t *data;        /* ring_bytes of frame space */
    uint64_t size;        /* ring_bytes (a power of two) */
    uint64_t *head;       /* shared, written by us */
    const uint64_t *tail; /* shared, written by the peer: hostile */
    uint32_t *seq;        /* shared futex word, written by us */
    const uint32_t *peer_sleeping;
    uint64_t local_head; /* our head, the truth */
    uint64_t last_tail;  /* the peer's tail as last validated (tails only grow) */
} tfw_ring_prod;

/* The side of a ring that this process consumes from. */
typedef struct tfw_ring_cons {
    const uint8_t *data;
    uint64_t size;
    const uint64_t *head; /* shared, written by the peer: hostile */
    uint64_t *tail;       /* shared, written by us */
    const uint32_t *seq;  /* the peer's futex word */
    uint32_t *sleeping;   /* our sleeping word */
    uint64_t local_tail;
    uint64_t last_head;
} tfw_ring_cons;

/* Sets up both rings of one side over a mapped memfd (control page at map). server != 0: this
 * process consumes requests and produces responses; else the reverse. Counters start at 0. */
void tfw_ring_setup(uint8_t *map, uint64_t ring_bytes, int server, tfw_ring_prod *prod,
                    tfw_ring_cons *cons);

/* How long a ring wait may take, fixed only when the wait is about to sleep: the clock is read
 * then, not when the wait starts, so a wait the spin ends reads no clock for it. One per call:
 * the waits of a call share it, and the first that sleeps starts it. */
typedef struct tfw_deadline {
    int64_t after_ns; /* <= 0: none */
    int64_t at;       /* CLOCK_MONOTONIC ns once fixed; 0 before */
} tfw_deadline;

static inline tfw_deadline tfw_deadline_in(int64_t after_ns)
{
    return (tfw_deadline){after_ns, 0};
}

/* The deadline (0: none), fixed at now + after_ns by the first call. */
static inline int64_t tfw_deadline_at(tfw_deadline *d, int64_t now)
{
    if (d->after_ns <= 0)
        return 0;
    if (!d->at)
        d->at = now + d->after_ns;
    return d->at;
}

/* Claims room for a frame of `span` bytes (TF_SHM_FRAME_SPAN of its body_len) and points *where
 * at it. 1: claimed (write the frame, then tfw_ring_publish); 0: ring full for now (wait for the
 * consumer and retry; a wrap marker may have been published already); TF_E_SHM_TOO_BIG: the
 * frame can never fit; TF_E_SHM_CORRUPT: the peer's tail is invalid. Never allocates. */
int tfw_ring_reserve(tfw_ring_prod *p, uint64_t span, uint8_t **where);
/* Publishes the claimed frame: head (release), seq++ (seq_cst), wake if the peer sleeps. */
void tfw_ring_publish(tfw_ring_prod *p, uint64_t span);
/* Claims `span` bytes like tfw_ring_reserve, waiting while the ring is full: spins, then sleeps up
 * to 1 ms at a time, calling alive() about every TF_SHM_WAIT_NS. 0 with *where set, or a
 * negative code. -ETIMEDOUT once the deadline dl (fixed when it first sleeps) has passed. */
int tfw_ring_wait_room(tfw_ring_prod *p, uint64_t span, tfw_shm_waiter *w, tfw_shm_alive_fn alive,
                       void *ctx, tfw_deadline *dl, uint8_t **where);

/* Looks at the next frame. 1: *frame points at its prefix, *body_len is set (the whole frame is
 * published and lies before the ring end); 0: nothing to read; TF_E_SHM_CORRUPT: the peer wrote
 * an invalid head, length or wrap marker (max_body bounds body_len, beyond -> TF_E_SHM_CORRUPT).
 * Wrap markers are consumed here. */
int tfw_ring_peek(tfw_ring_cons *c, uint64_t max_body, const uint8_t **frame, uint32_t *body_len);
/* Releases the frame returned by the last peek. */
void tfw_ring_consume(tfw_ring_cons *c, uint32_t body_len);
/* Waits until the ring is non-empty: spin (w's budget), yield once, then the futex protocol with
 * sleeps of at most TF_SHM_WAIT_NS, calling alive() before each sleep; w adapts to the wait.
 * 0 when something is readable (or the head changed), a negative code otherwise. dl as above. */
int tfw_ring_wait_data(tfw_ring_cons *c, tfw_shm_waiter *w, tfw_shm_alive_fn alive, void *ctx,
                       tfw_deadline *dl);

/* CLOCK_MONOTONIC in ns. */
int64_t tfw_now_ns(void);

/* ---- the opcode table ------------------------------------------------------------------------
 *
 * One row per opcode (docs/protocol.md), read by the request decoder (wire.c), the server
 * (exec.c, conn.c, shm_server.c), the C client (client.c) and the tests:
 *
 *   X(NAME, "name", fixed, var, reply, reply_var, flags)
 *
 * TF_OP_<NAME> is the opcode. fixed: v2 request bytes after the 12-byte header and before any
 * variable part (a v1 row: the v1 body header, TF_WIRE_V1_FIXED); var: 1 when a variable part
 * (arrays, echo bytes, a name) may follow, else the body is exactly header + fixed. reply: the
 * fixed reply payload after the v2 header (a v1 reply has no header and no fixed part);
 * reply_var: 1 when arrays or text follow it. flags: TFW_OP_* facts the server switches on.
 * A new request is one row here, its decoding in tf_wire_decode_request, its reply codec in
 * reply.c and its operation on the server. */
#define TFW_OP_SWEEPS 1u      /* runs a sweep: one pnl and one trades per combo in the reply */
#define TFW_OP_SWEEP_FLAGS 2u /* carries TF_SWEEP_* flags (a statistics row per combo, a fee) */
#define TFW_OP_CLOSES 4u      /* its variable part carries n_bars closes (f64) */
#define TFW_OP_DATASET 8u     /* names a dataset by its handle (SWEEP_WITH: when id != 0) */
#define TFW_OP_SESSION 16u    /* names a live session of the connection */
#define TF_WIRE_V1_OPS(X)                                                                          \
    X(V1_SWEEP, "v1 sweep", TF_WIRE_V1_FIXED, 1, 0, 1, TFW_OP_SWEEPS | TFW_OP_CLOSES)              \
    X(V1_ECHO, "v1 echo", TF_WIRE_V1_FIXED, 1, 0, 1, TFW_OP_CLOSES)
#define TF_WIRE_V2_REQUESTS(X)                                                                     \
    X(HELLO, "HELLO", 8, 0, TF_WIRE_HELLO_REPLY, 0, 0)                                             \
    X(LOAD, "LOAD", 8, 1, TF_WIRE_LOAD_REPLY, 0, TFW_OP_CLOSES)                                    \
    X(SWEEP_DS, "SWEEP_DS", 16, 1, TF_WIRE_SWEEP_REPLY_FIXED, 1,                                   \
      TFW_OP_SWEEPS | TFW_OP_SWEEP_FLAGS | TFW_OP_DATASET)                                         \
    X(RUN_ONE, "RUN_ONE", 8 + TF_WIRE_PARAMS_BYTES, 0, TF_WIRE_RUN_ONE_REPLY, 0, TFW_OP_DATASET)   \
    X(SWEEP, "SWEEP", 8, 1, TF_WIRE_SWEEP_REPLY_FIXED, 1, TFW_OP_SWEEPS | TFW_OP_CLOSES)           \
    X(ECHO, "ECHO", 0, 1, 0, 1, 0)                                                                 \
    X(DROP, "DROP", 8, 0, 0, 0, TFW_OP_DATASET)                                                    \
    X(STATS, "STATS", 0, 0, TF_WIRE_STATS_REPLY, 0, 0)                                             \
    X(LOAD_FD, "LOAD_FD", 16, 0, TF_WIRE_LOAD_REPLY, 0, 0)                                         \
    X(STRATEGIES, "STRATEGIES", 0, 0, TF_WIRE_STRATEGIES_REPLY_FIXED, 1, 0)                        \
    X(SWEEP_WITH, "SWEEP_WITH", 32, 1, TF_WIRE_SWEEP_REPLY_FIXED, 1,                               \
      TFW_OP_SWEEPS | TFW_OP_SWEEP_FLAGS | TFW_OP_CLOSES | TFW_OP_DATASET)                         \
    X(SESSION_OPEN, "SESSION_OPEN", TF_WIRE_PARAMS_BYTES, 0, TF_WIRE_SESSION_OPEN_REPLY, 0, 0)     \
    X(SESSION_BAR, "SESSION_BAR", 16, 0, TF_WIRE_SESSION_BAR_REPLY, 0, TFW_OP_SESSION)             \
    X(SESSION_QUERY, "SESSION_QUERY", 8, 0, TF_WIRE_SESSION_STATE_REPLY, 0, TFW_OP_SESSION)        \
    X(SESSION_CLOSE, "SESSION_CLOSE", 8, 0, TF_WIRE_SESSION_STATE_REPLY, 0, TFW_OP_SESSION)        \
    X(SESSION_OPEN_WITH, "SESSION_OPEN_WITH", 8, 1, TF_WIRE_SESSION_OPEN_REPLY, 0, 0)

/* A row of the opcode table. */
typedef struct tfw_op {
    const char *name; /* "SWEEP_DS", "v1 sweep"; NULL: not an opcode */
    uint8_t version;  /* 1 or 2 */
    uint8_t var;      /* a variable part may follow the fixed one */
    uint8_t reply_var;
    uint8_t flags;  /* TFW_OP_* */
    uint16_t fixed; /* request bytes after the v2 header (v1: the v1 body header) */
    uint16_t reply; /* fixed reply payload bytes after the v2 header */
} tfw_op;

/* The row of an opcode; a row with name NULL (every field 0) for a byte that is not one (ERROR
 * included: a client never sends it). Never NULL. */
const tfw_op *tfw_op_of(uint8_t op);
/* The name of an opcode, "opcode" for a byte that is not one (for messages and logs). */
const char *tfw_op_name(uint8_t op);
/* 1 when the opcode's row has every flag in `flags`. */
static inline int tfw_op_has(uint8_t op, unsigned flags)
{
    return (tfw_op_of(op)->flags & flags) == flags;
}

/* Where a v2 request's arguments start in its frame (u32 prefix + v2 header), and the bytes of
 * each request frame before its variable part: TF_WIRE_REQ_HELLO, ... */
#define TF_WIRE_REQ_ARGS (TF_WIRE_PREFIX + TF_WIRE_V2_HEADER)
#define TF_WIRE_REQ_ROW(NAME, str, fixed, var, reply, reply_var, flags)                            \
    TF_WIRE_REQ_##NAME = TF_WIRE_REQ_ARGS + (fixed),
enum { TF_WIRE_V2_REQUESTS(TF_WIRE_REQ_ROW) };
#undef TF_WIRE_REQ_ROW

/* ---- the v2 reply codecs (reply.c, docs/protocol.md "Replies") --------------------------------
 *
 * One encoder and one decoder per reply payload: the server encodes with tfw_put_*, the C client
 * decodes with tfw_get_*; tests/vectors/v2_replies.txt pins the bytes for C and Python. An
 * encoder writes exactly the payload's fixed size at p (reserved fields 0) and returns it; a
 * decoder reads that many bytes at p (its length checked by the caller against the opcode
 * table) and cannot fail: every bit pattern of a fixed payload is a value (reserved fields are
 * not read). Arrays and text after a fixed payload travel as they are. */
typedef struct tfw_hello_reply {
    uint32_t version;
    uint32_t caps; /* TF_CAP_* */
    uint64_t max_frame;
    uint64_t max_memory;
    uint32_t max_datasets;
    uint32_t threads;
} tfw_hello_reply;

typedef struct tfw_load_reply { /* LOAD and LOAD_FD */
    uint64_t handle;
    uint64_t n_bars;
    uint32_t created;
} tfw_load_reply;

typedef struct tfw_sweep_reply { /* SWEEP, SWEEP_DS, SWEEP_WITH: then the arrays */
    uint32_t n_combos;
    uint32_t flags; /* TF_SWEEP_STATS when statistics rows follow the arrays, else 0 */
} tfw_sweep_reply;

typedef struct tfw_run_one_reply {
    double pnl;
    int64_t trades;
} tfw_run_one_reply;

typedef struct tfw_session_reply { /* SESSION_BAR (no bars), SESSION_QUERY / SESSION_CLOSE */
    int32_t position;
    int64_t trades;
    double pnl;
    int64_t bars; /* not on the wire in a SESSION_BAR reply: -1 from its decoder */
} tfw_session_reply;

typedef struct tfw_strategies_reply { /* then text_len bytes of text */
    uint32_t count;
    uint32_t text_len;
} tfw_strategies_reply;

typedef struct tfw_error_reply { /* then msg_len bytes of UTF-8 */
    int32_t code;
    uint32_t msg_len;
} tfw_error_reply;

size_t tfw_put_hello(uint8_t *p, const tfw_hello_reply *r);
void tfw_get_hello(const uint8_t *p, tfw_hello_reply *r);
size_t tfw_put_load(uint8_t *p, const tfw_load_reply *r);
void tfw_get_load(const uint8_t *p, tfw_load_reply *r);
size_t tfw_put_sweep(uint8_t *p, const tfw_sweep_reply *r);
void tfw_get_sweep(const uint8_t *p, tfw_sweep_reply *r);
size_t tfw_put_run_one(uint8_t *p, const tfw_run_one_reply *r);
void tfw_get_run_one(const uint8_t *p, tfw_run_one_reply *r);
size_t tfw_put_session_open(uint8_t *p, uint64_t session);
uint64_t tfw_get_session_open(const uint8_t *p);
/* with_bars: the SESSION_QUERY / SESSION_CLOSE layout (32 bytes), else SESSION_BAR's (24). */
size_t tfw_put_session(uint8_t *p, const tfw_session_reply *r, int with_bars);
void tfw_get_session(const uint8_t *p, int with_bars, tfw_session_reply *r);
size_t tfw_put_stats(uint8_t *p, const uint64_t v[TF_STAT_COUNT]);
void tfw_get_stats(const uint8_t *p, uint64_t v[TF_STAT_COUNT]);
size_t tfw_put_strategies(uint8_t *p, const tfw_strategies_reply *r);
void tfw_get_strategies(const uint8_t *p, tfw_strategies_reply *r);
size_t tfw_put_error_fixed(uint8_t *p, const tfw_error_reply *r);
void tfw_get_error_fixed(const uint8_t *p, tfw_error_reply *r);

#endif

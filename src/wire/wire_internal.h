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

/* ---- the v2 request table ----------------------------------------------------------------------
 *
 * One row per v2 request opcode (docs/protocol.md), read by the decoder (src/wire/wire.c) and the
 * C client (src/client/client.c): X(NAME, fixed, var). TF_OP_<NAME> is the opcode; fixed is the
 * bytes of the body after the 12-byte v2 header and before any variable part; var is 1 when a
 * variable part (arrays, echo bytes) may follow, else the body is exactly header + fixed. A new
 * request is one row here, its decoding in tf_wire_decode_request and its operation on the server.
 */
#define TF_WIRE_V2_REQUESTS(X)                                                                     \
    X(HELLO, 8, 0)                                                                                 \
    X(LOAD, 8, 1)                                                                                  \
    X(SWEEP_DS, 16, 1)                                                                             \
    X(RUN_ONE, 8 + TF_WIRE_PARAMS_BYTES, 0)                                                        \
    X(SWEEP, 8, 1)                                                                                 \
    X(ECHO, 0, 1)                                                                                  \
    X(DROP, 8, 0)                                                                                  \
    X(STATS, 0, 0)                                                                                 \
    X(LOAD_FD, 16, 0)                                                                              \
    X(STRATEGIES, 0, 0)                                                                            \
    X(SWEEP_WITH, 32, 1)                                                                           \
    X(SESSION_OPEN, TF_WIRE_PARAMS_BYTES, 0)                                                       \
    X(SESSION_BAR, 16, 0)                                                                          \
    X(SESSION_QUERY, 8, 0)                                                                         \
    X(SESSION_CLOSE, 8, 0)                                                                         \
    X(SESSION_OPEN_WITH, 8, 1)

/* Where a v2 request's arguments start in its frame (u32 prefix + v2 header), and the bytes of
 * each request frame before its variable part: TF_WIRE_REQ_HELLO, ... */
#define TF_WIRE_REQ_ARGS (TF_WIRE_PREFIX + TF_WIRE_V2_HEADER)
#define TF_WIRE_REQ_ROW(NAME, fixed, var) TF_WIRE_REQ_##NAME = TF_WIRE_REQ_ARGS + (fixed),
enum { TF_WIRE_V2_REQUESTS(TF_WIRE_REQ_ROW) };
#undef TF_WIRE_REQ_ROW

#endif

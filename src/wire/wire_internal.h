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

static inline void tf_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static inline uint64_t tf_align8(uint64_t n)
{
    return (n + 7) & ~(uint64_t)7;
}

/* Peer liveness check: 0 while the peer is alive, else a negative code (TF_E_SHM_PEER_GONE,
 * TF_E_SHUTTING_DOWN, ...). Called at most every TF_SHM_WAIT_NS while waiting. */
typedef int (*tf_shm_alive_fn)(void *ctx);

/* The side of a ring that this process produces into. */
typedef struct tf_ring_prod {
    uint8_t *data;        /* ring_bytes of frame space */
    uint64_t size;        /* ring_bytes (a power of two) */
    uint64_t *head;       /* shared, written by us */
    const uint64_t *tail; /* shared, written by the peer: hostile */
    uint32_t *seq;        /* shared futex word, written by us */
    const uint32_t *peer_sleeping;
    uint64_t local_head;    /* our head, the truth */
    uint64_t last_tail;     /* the peer's tail as last validated (tails only grow) */
    uint64_t reserved_skip; /* a wrap written by reserve, published with the frame */
} tf_ring_prod;

/* The side of a ring that this process consumes from. */
typedef struct tf_ring_cons {
    const uint8_t *data;
    uint64_t size;
    const uint64_t *head; /* shared, written by the peer: hostile */
    uint64_t *tail;       /* shared, written by us */
    const uint32_t *seq;  /* the peer's futex word */
    uint32_t *sleeping;   /* our sleeping word */
    uint64_t local_tail;
    uint64_t last_head;
} tf_ring_cons;

/* Sets up both rings of one side over a mapped memfd (control page at map). server != 0: this
 * process consumes requests and produces responses; else the reverse. Counters start at 0. */
void tf_ring_setup(uint8_t *map, uint64_t ring_bytes, int server, tf_ring_prod *prod,
                   tf_ring_cons *cons);

/* Claims room for a frame of `span` bytes (TF_SHM_FRAME_SPAN of its body_len) and points *where
 * at it. 1: claimed (write the frame, then tf_ring_publish); 0: ring full for now (wait for the
 * consumer and retry; a wrap marker may have been published already); TF_E_SHM_TOO_BIG: the
 * frame can never fit; TF_E_SHM_CORRUPT: the peer's tail is invalid. Never allocates. */
int tf_ring_reserve(tf_ring_prod *p, uint64_t span, uint8_t **where);
/* Publishes the claimed frame: head (release), seq++ (seq_cst), wake if the peer sleeps. */
void tf_ring_publish(tf_ring_prod *p, uint64_t span);
/* Claims `span` bytes like tf_ring_reserve, waiting while the ring is full: spins, then sleeps up
 * to 1 ms at a time, calling alive() about every TF_SHM_WAIT_NS. 0 with *where set, or a
 * negative code.
 * deadline_ns: CLOCK_MONOTONIC deadline, or 0 for none (-ETIMEDOUT after it). */
int tf_ring_wait_room(tf_ring_prod *p, uint64_t span, int spin, tf_shm_alive_fn alive, void *ctx,
                      int64_t deadline_ns, uint8_t **where);

/* Looks at the next frame. 1: *frame points at its prefix, *body_len is set (the whole frame is
 * published and lies before the ring end); 0: nothing to read; TF_E_SHM_CORRUPT: the peer wrote
 * an invalid head, length or wrap marker (max_body bounds body_len, beyond -> TF_E_SHM_CORRUPT).
 * Wrap markers are consumed here. */
int tf_ring_peek(tf_ring_cons *c, uint64_t max_body, const uint8_t **frame, uint32_t *body_len);
/* Releases the frame returned by the last peek. */
void tf_ring_consume(tf_ring_cons *c, uint32_t body_len);
/* Waits until the ring is non-empty: spin (PAUSE x spin), then the futex protocol with sleeps of
 * at most TF_SHM_WAIT_NS, calling alive() after each timeout. 0 when something is readable (or
 * the head changed), a negative code otherwise. deadline_ns as above. */
int tf_ring_wait_data(tf_ring_cons *c, int spin, tf_shm_alive_fn alive, void *ctx,
                      int64_t deadline_ns);

/* CLOCK_MONOTONIC in ns. */
int64_t tf_now_ns(void);

#endif

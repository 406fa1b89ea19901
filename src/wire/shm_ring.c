/* Futex helpers and the SPSC rings of the shared-memory transport. */
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "wire/wire_internal.h"

/* One spin iteration: PAUSE, and past the first TF_SHM_PURE_SPIN iterations a sched_yield every
 * TF_SHM_PURE_SPIN, so that a peer pinned to the same CPU gets to run (a pure spin there would
 * burn the whole budget while the peer waits for the CPU). Across CPUs an answer normally
 * arrives within the pure phase (~2.5 us). */
static void spin_step(int i)
{
    tf_cpu_relax();
    if (i >= TF_SHM_PURE_SPIN && i % TF_SHM_PURE_SPIN == TF_SHM_PURE_SPIN - 1)
        sched_yield();
}

int64_t tf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

int tf_futex_wait(uint32_t *word, uint32_t expected, int64_t timeout_ns)
{
    struct timespec ts, *tp = NULL;
    if (!word)
        return TF_E_NULL_ARG;
    if (timeout_ns >= 0) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000ll);
        ts.tv_nsec = (long)(timeout_ns % 1000000000ll);
        tp = &ts;
    }
    /* Shared futex (no FUTEX_PRIVATE_FLAG): the two sides are different processes. */
    long r = syscall(SYS_futex, word, FUTEX_WAIT, expected, tp, NULL, 0);
    if (r == 0)
        return 0;
    int e = errno;
    if (e == EAGAIN)
        return 0;
    return -e;
}

int tf_futex_wake(uint32_t *word)
{
    if (!word)
        return TF_E_NULL_ARG;
    long r = syscall(SYS_futex, word, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
    return r < 0 ? -errno : (int)r;
}

void tf_ring_setup(uint8_t *map, uint64_t ring_bytes, int server, tf_ring_prod *prod,
                   tf_ring_cons *cons)
{
    uint8_t *req = map + TF_SHM_OFF_REQ_RING, *resp = req + ring_bytes;
    uint64_t *req_head = (uint64_t *)(map + TF_SHM_OFF_REQ_HEAD);
    uint64_t *req_tail = (uint64_t *)(map + TF_SHM_OFF_REQ_TAIL);
    uint64_t *resp_head = (uint64_t *)(map + TF_SHM_OFF_RESP_HEAD);
    uint64_t *resp_tail = (uint64_t *)(map + TF_SHM_OFF_RESP_TAIL);
    uint32_t *req_seq = (uint32_t *)(map + TF_SHM_OFF_REQ_SEQ);
    uint32_t *resp_seq = (uint32_t *)(map + TF_SHM_OFF_RESP_SEQ);
    uint32_t *srv_sleep = (uint32_t *)(map + TF_SHM_OFF_SERVER_SLEEPING);
    uint32_t *cli_sleep = (uint32_t *)(map + TF_SHM_OFF_CLIENT_SLEEPING);
    *prod = (tf_ring_prod){0};
    *cons = (tf_ring_cons){0};
    prod->size = cons->size = ring_bytes;
    if (server) {
        prod->data = resp;
        prod->head = resp_head;
        prod->tail = resp_tail;
        prod->seq = resp_seq;
        prod->peer_sleeping = cli_sleep;
        cons->data = req;
        cons->head = req_head;
        cons->tail = req_tail;
        cons->seq = req_seq;
        cons->sleeping = srv_sleep;
    } else {
        prod->data = req;
        prod->head = req_head;
        prod->tail = req_tail;
        prod->seq = req_seq;
        prod->peer_sleeping = srv_sleep;
        cons->data = resp;
        cons->head = resp_head;
        cons->tail = resp_tail;
        cons->seq = resp_seq;
        cons->sleeping = cli_sleep;
    }
}

/* The peer's tail, validated: it never moves backwards, never passes our head, stays aligned. */
static int load_tail(tf_ring_prod *p, uint64_t *out)
{
    uint64_t t = __atomic_load_n(p->tail, __ATOMIC_ACQUIRE);
    if (t < p->last_tail || t > p->local_head || (t & 7))
        return TF_E_SHM_CORRUPT;
    p->last_tail = t;
    *out = t;
    return 0;
}

int tf_ring_reserve(tf_ring_prod *p, uint64_t span, uint8_t **where)
{
    if (span > p->size - 8)
        return TF_E_SHM_TOO_BIG;
    uint64_t tail;
    int rc = load_tail(p, &tail);
    if (rc)
        return rc;
    uint64_t off = p->local_head & (p->size - 1);
    uint64_t used = p->local_head - tail;
    if (off + span > p->size) {
        /* The frame would cross the end: mark a wrap and restart at the ring start. */
        uint64_t skip = p->size - off;
        if (used + skip > p->size)
            return 0;
        __atomic_store_n((uint32_t *)(p->data + off), TF_SHM_WRAP, __ATOMIC_RELAXED);
        p->local_head += skip;
        used += skip;
        if (used + span > p->size) {
            /* No room for the frame yet: publish the wrap alone so the consumer can pass it. */
            __atomic_store_n(p->head, p->local_head, __ATOMIC_RELEASE);
            __atomic_fetch_add(p->seq, 1, __ATOMIC_SEQ_CST);
            if (__atomic_load_n(p->peer_sleeping, __ATOMIC_SEQ_CST))
                tf_futex_wake(p->seq);
            return 0;
        }
        off = 0;
    }
    if (used + span > p->size)
        return 0;
    *where = p->data + off;
    return 1;
}

void tf_ring_publish(tf_ring_prod *p, uint64_t span)
{
    p->local_head += span;
    __atomic_store_n(p->head, p->local_head, __ATOMIC_RELEASE);
    /* The locked add is a full barrier: the peer's sleeping flag is read after our head is
     * visible (the consumer sets the flag, then re-reads head: one of us sees the other). */
    __atomic_fetch_add(p->seq, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(p->peer_sleeping, __ATOMIC_SEQ_CST))
        tf_futex_wake(p->seq);
}

int tf_ring_wait_room(tf_ring_prod *p, uint64_t span, int spin, tf_shm_alive_fn alive, void *ctx,
                      int64_t deadline_ns, uint8_t **where)
{
    int64_t next_check = 0, sleep_ns = 1000;
    for (int i = 0;; i++) {
        int rc = tf_ring_reserve(p, span, where);
        if (rc)
            return rc < 0 ? rc : 0;
        if (i < spin) {
            spin_step(i);
            continue;
        }
        int64_t now = tf_now_ns();
        if (deadline_ns && now >= deadline_ns)
            return -ETIMEDOUT;
        if (now >= next_check) {
            if (next_check && alive && (rc = alive(ctx)) != 0)
                return rc;
            next_check = now + TF_SHM_WAIT_NS;
        }
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 1000000)
            sleep_ns *= 2;
    }
}

int tf_ring_peek(tf_ring_cons *c, uint64_t max_body, const uint8_t **frame, uint32_t *body_len)
{
    for (;;) {
        uint64_t head = __atomic_load_n(c->head, __ATOMIC_ACQUIRE);
        if (head < c->last_head || head - c->local_tail > c->size || (head & 7))
            return TF_E_SHM_CORRUPT;
        c->last_head = head;
        if (head == c->local_tail)
            return 0;
        uint64_t avail = head - c->local_tail;
        uint64_t off = c->local_tail & (c->size - 1);
        uint32_t len = __atomic_load_n((const uint32_t *)(c->data + off), __ATOMIC_RELAXED);
        if (len == TF_SHM_WRAP) {
            uint64_t skip = c->size - off;
            if (avail < skip)
                return TF_E_SHM_CORRUPT;
            c->local_tail += skip;
            __atomic_store_n(c->tail, c->local_tail, __ATOMIC_RELEASE);
            continue;
        }
        uint64_t span = TF_SHM_FRAME_SPAN(len);
        if (len > max_body || span > c->size - 8 || off + span > c->size || span > avail)
            return TF_E_SHM_CORRUPT;
        *frame = c->data + off;
        *body_len = len;
        return 1;
    }
}

void tf_ring_consume(tf_ring_cons *c, uint32_t body_len)
{
    c->local_tail += TF_SHM_FRAME_SPAN(body_len);
    __atomic_store_n(c->tail, c->local_tail, __ATOMIC_RELEASE);
}

int tf_ring_wait_data(tf_ring_cons *c, int spin, tf_shm_alive_fn alive, void *ctx,
                      int64_t deadline_ns)
{
    for (int i = 0; i < spin; i++) {
        if (__atomic_load_n(c->head, __ATOMIC_ACQUIRE) != c->local_tail)
            return 0;
        spin_step(i);
    }
    for (;;) {
        /* Before every sleep: a peer that said goodbye while we spun must not cost a timeout. */
        int rc;
        if (alive && (rc = alive(ctx)) != 0)
            return rc;
        uint32_t seq = __atomic_load_n(c->seq, __ATOMIC_ACQUIRE);
        __atomic_store_n(c->sleeping, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(c->head, __ATOMIC_SEQ_CST) != c->local_tail) {
            __atomic_store_n(c->sleeping, 0, __ATOMIC_RELAXED);
            return 0;
        }
        int64_t wait = TF_SHM_WAIT_NS;
        if (deadline_ns) {
            int64_t left = deadline_ns - tf_now_ns();
            if (left <= 0) {
                __atomic_store_n(c->sleeping, 0, __ATOMIC_RELAXED);
                return -ETIMEDOUT;
            }
            if (left < wait)
                wait = left;
        }
        rc = tf_futex_wait((uint32_t *)c->seq, seq, wait);
        __atomic_store_n(c->sleeping, 0, __ATOMIC_RELAXED);
        if (__atomic_load_n(c->head, __ATOMIC_ACQUIRE) != c->local_tail)
            return 0;
        /* A timeout or a wake with no data (spurious, or a peer saying goodbye): the liveness
         * check at the top of the loop decides. */
        if (rc != 0 && rc != -ETIMEDOUT && rc != -EINTR)
            return rc;
    }
}

/* Futex helpers and the SPSC rings of the shared-memory transport. */
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "wire/wire_internal.h"

/* Waiting (include/tollfree/shm.h, "Waiting"). Spinning is only worth it while the peer runs
 * on another CPU and answers within the budget; on a CPU that other tasks want, every spun
 * iteration is taken from one of them (perhaps the peer), and the scheduler charges it to us:
 * the measured cost was 77-867 us per live-session bar under load, against 0.7 us quiet. So the
 * waiter keeps what spinning recently bought (the budget), notices contention (a preempted spin,
 * a yield that ran someone else), and then sleeps at once for a while: a futex sleeper that is
 * woken is scheduled promptly, a spinner that used its share is not. */

void tfw_shm_waiter_init(tfw_shm_waiter *w, int max_spin)
{
    *w = (tfw_shm_waiter){0};
    w->max_spin = max_spin < 0 ? TF_SHM_DEFAULT_SPIN : max_spin;
    w->spin = w->max_spin;
    w->iter_ps = 37000; /* PAUSE on the reference machine, until measured here */
    w->calm_ns = TF_SHM_CALM_NS;
    w->nivcsw = -1;
    w->sleep_ns = TF_SHM_WAIT_NS;
}

/* Whether another task of this machine took our CPU since the last call: this thread's count of
 * involuntary context switches (preemptions, and yields that ran someone) moved. A gap without
 * one is the hypervisor holding the vCPU (or a stop signal): a KVM guest that spins on PAUSE is
 * descheduled for ~50-100 us now and then even on an idle host (measured: 5-16 such gaps per
 * thousand 1.2 MB echoes), and taking those for load switched spinning off on a quiet machine.
 * Read only when a gap or a slow yield is seen (one syscall); the first read has no baseline
 * and counts as a switch (contention, as before). */
static int switched_away(tfw_shm_waiter *w)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0)
        return 1;
    int moved = ru.ru_nivcsw != w->nivcsw;
    w->nivcsw = ru.ru_nivcsw;
    return moved;
}

/* A sched_yield that returns sooner than this ran nobody else (a switch away and back is more). */
#define YIELD_RAN_NS 3000

/* Contention found at `now`. Once is chance (a task that woke on our CPU for a moment): this
 * wait sleeps and the budget halves. Twice within TF_SHM_CALM_NS is load: no spinning or
 * yielding for a calm window, longer while the load persists. Returns 1 when calm began. */
static int contended(tfw_shm_waiter *w, int64_t now)
{
    int again = w->last_contention && now - w->last_contention < TF_SHM_CALM_NS;
    w->last_contention = now;
    w->contentions++;
    w->spin /= 2;
    if (!again)
        return 0;
    /* Found again as soon as the last window ended: the load persists, so back off longer. */
    if (w->calm_until && now - w->calm_until < w->calm_ns)
        w->calm_ns = w->calm_ns >= TF_SHM_CALM_MAX_NS / 2 ? TF_SHM_CALM_MAX_NS : 2 * w->calm_ns;
    else
        w->calm_ns = TF_SHM_CALM_NS;
    w->calm_until = now + w->calm_ns;
    w->spin = 0;
    return 1;
}

static int spin_cap(const tfw_shm_waiter *w, int64_t n)
{
    return n >= w->max_spin ? w->max_spin : (int)n;
}

/* Spins (PAUSE) up to w's budget while *word == value, reading the clock every 64 iterations.
 * 1: the word changed after *iters iterations; 0: the budget ran out, or the spinner was
 * preempted (contention recorded). */
static int spin_while(tfw_shm_waiter *w, const uint64_t *word, uint64_t value, int64_t t0,
                      int *iters)
{
    int64_t last = t0;
    int n = w->spin;
    for (int i = 0; i < n; i++) {
        if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != value) {
            *iters = i;
            return 1;
        }
        tfw_cpu_relax();
        if ((i & 63) == 63) {
            int64_t now = tfw_now_ns();
            if (now - last > TF_SHM_PREEMPT_NS) {
                *iters = i;
                /* Preempted, and the peer answered meanwhile: it runs and is quick, and we
                 * only lost our CPU to someone else for a while; spinning still pays. */
                if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != value)
                    return 1;
                if (!switched_away(w)) {
                    w->stalls++; /* nobody else ran here: keep spinning */
                    last = tfw_now_ns();
                    continue;
                }
                contended(w, now);
                w->preempted++;
                return 0;
            }
            last = now;
        }
    }
    if (n >= 64 && last > t0)
        w->iter_ps = (last - t0) * 1000 / (n & ~63);
    if (w->iter_ps < 100)
        w->iter_ps = 100;
    *iters = n;
    return 0;
}

/* After a wait that ended in a sleep, T ns after it began: a spin of about twice the iterations
 * T took would have caught it, if that is within the configured budget; else spinning did not
 * pay, and the budget halves. */
static void adapt_after_sleep(tfw_shm_waiter *w, int64_t t_ns)
{
    int64_t need = t_ns * 1000 / w->iter_ps;
    if (need <= w->max_spin)
        w->spin = spin_cap(w, 2 * need + 64);
    else
        w->spin /= 2;
}

int64_t tfw_now_ns(void)
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

void tfw_ring_setup(uint8_t *map, uint64_t ring_bytes, int server, tfw_ring_prod *prod,
                    tfw_ring_cons *cons)
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
    *prod = (tfw_ring_prod){0};
    *cons = (tfw_ring_cons){0};
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
static int load_tail(tfw_ring_prod *p, uint64_t *out)
{
    uint64_t t = __atomic_load_n(p->tail, __ATOMIC_ACQUIRE);
    if (t < p->last_tail || t > p->local_head || (t & 7))
        return TF_E_SHM_CORRUPT;
    p->last_tail = t;
    *out = t;
    return 0;
}

int tfw_ring_reserve(tfw_ring_prod *p, uint64_t span, uint8_t **where)
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

void tfw_ring_publish(tfw_ring_prod *p, uint64_t span)
{
    p->local_head += span;
    __atomic_store_n(p->head, p->local_head, __ATOMIC_RELEASE);
    /* The locked add is a full barrier: the peer's sleeping flag is read after our head is
     * visible (the consumer sets the flag, then re-reads head: one of us sees the other). */
    __atomic_fetch_add(p->seq, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(p->peer_sleeping, __ATOMIC_SEQ_CST))
        tf_futex_wake(p->seq);
}

int tfw_ring_wait_room(tfw_ring_prod *p, uint64_t span, tfw_shm_waiter *w, tfw_shm_alive_fn alive,
                       void *ctx, tfw_deadline *dl, uint8_t **where)
{
    int64_t next_check = 0, sleep_ns = 1000, last = 0;
    int budget = -1;
    for (int i = 0;; i++) {
        int rc = tfw_ring_reserve(p, span, where);
        if (rc)
            return rc < 0 ? rc : 0;
        if (budget < 0) {
            last = tfw_now_ns();
            budget = last < w->calm_until ? 0 : w->spin;
        }
        if (i < budget) {
            tfw_cpu_relax();
            if ((i & 63) == 63) {
                int64_t now = tfw_now_ns();
                if (now - last > TF_SHM_PREEMPT_NS && !switched_away(w)) {
                    w->stalls++;
                    now = tfw_now_ns();
                } else if (now - last > TF_SHM_PREEMPT_NS) {
                    contended(w, now);
                    w->preempted++;
                    budget = 0;
                }
                last = now;
            }
            continue;
        }
        int64_t now = tfw_now_ns(), at = tfw_deadline_at(dl, now);
        if (at && now >= at)
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

int tfw_ring_peek(tfw_ring_cons *c, uint64_t max_body, const uint8_t **frame, uint32_t *body_len)
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
            /* A marker at the ring start skips nothing a frame could need: never written. */
            uint64_t skip = c->size - off;
            if (off == 0 || avail < skip)
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

void tfw_ring_consume(tfw_ring_cons *c, uint32_t body_len)
{
    c->local_tail += TF_SHM_FRAME_SPAN(body_len);
    __atomic_store_n(c->tail, c->local_tail, __ATOMIC_RELEASE);
}

static int readable(const tfw_ring_cons *c)
{
    return __atomic_load_n(c->head, __ATOMIC_ACQUIRE) != c->local_tail;
}

/* The futex protocol of docs/protocol.md: liveness check, seq, sleeping = 1, re-check, wait. */
static int sleep_until_data(tfw_ring_cons *c, tfw_shm_waiter *w, tfw_shm_alive_fn alive, void *ctx,
                            tfw_deadline *dl)
{
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
        int64_t wait = w->sleep_ns;
        if (dl->after_ns > 0) {
            int64_t now = tfw_now_ns();
            int64_t left = tfw_deadline_at(dl, now) - now;
            if (left <= 0) {
                __atomic_store_n(c->sleeping, 0, __ATOMIC_RELAXED);
                return -ETIMEDOUT;
            }
            if (left < wait)
                wait = left;
        }
        rc = tf_futex_wait((uint32_t *)c->seq, seq, wait);
        __atomic_store_n(c->sleeping, 0, __ATOMIC_RELAXED);
        if (readable(c))
            return 0;
        /* A timeout or a wake with no data (spurious, or a peer saying goodbye): the liveness
         * check at the top of the loop decides. A spurious wake is harmless (a wake meant for
         * an earlier frame that arrives late); a timeout is what a lost wake-up would cost. */
        if (rc == -ETIMEDOUT)
            w->timeouts++;
        if (rc != 0 && rc != -ETIMEDOUT && rc != -EINTR)
            return rc;
    }
}

int tfw_ring_wait_data(tfw_ring_cons *c, tfw_shm_waiter *w, tfw_shm_alive_fn alive, void *ctx,
                       tfw_deadline *dl)
{
    if (readable(c))
        return 0;
    int64_t t0 = tfw_now_ns();
    int calm = t0 < w->calm_until;
    if (!calm && w->spin > 0) {
        int it;
        uint64_t seen = w->contentions;
        if (spin_while(w, c->head, c->local_tail, t0, &it)) {
            /* Caught late in the budget: give it room to keep catching. */
            if (it > w->spin / 2)
                w->spin = spin_cap(w, 2 * (int64_t)w->spin);
            return 0;
        }
        calm = w->contentions != seen; /* preempted: this wait sleeps, without a yield */
    }
    if (!calm && w->max_spin > 0) {
        int64_t ty = tfw_now_ns();
        sched_yield();
        int64_t ny = tfw_now_ns(), dy = ny - ty;
        int got = readable(c);
        if (dy > TF_SHM_YIELD_SLOW_NS && !switched_away(w)) {
            w->stalls++; /* the yield ran nobody: the vCPU itself was held */
            if (got)
                adapt_after_sleep(w, ny - t0);
        } else if (dy > TF_SHM_YIELD_SLOW_NS) {
            /* Another task held our CPU that long: had it been the peer, it would have answered
             * sooner. Data or not, yielding (and spinning) costs us whole time slices here. */
            contended(w, ny);
            w->yields_lost++;
            calm = 1; /* for this wait: no adapting of the budget after it */
        } else if (got && dy > YIELD_RAN_NS) {
            /* The yield bought it: the peer shares our CPU and ran in our place. Spinning
             * cannot help there (the peer needs this CPU), so the budget shrinks. */
            w->spin /= 2;
            w->yields_won++;
        } else if (got) {
            adapt_after_sleep(w, ny - t0); /* nobody ran: it was only a little late */
        }
        if (got)
            return 0;
    }
    int rc = sleep_until_data(c, w, alive, ctx, dl);
    if (rc)
        return rc;
    w->sleeps++;
    if (!calm && w->max_spin > 0)
        adapt_after_sleep(w, tfw_now_ns() - t0);
    return 0;
}

/* Timers, checked once a second: the TLS handshake bound, the stall timeout (a frame or output
 * that does not move, a peer that does not read), the idle timeouts, the minimum rate, the same
 * idle and stall timeouts for shared-memory rings, and giving back the buffers of a connection
 * at rest; it knows no protocol and does no I/O but the SIOCOUTQ look at a socket's backlog. */
#include <arpa/inet.h>
#include <linux/sockios.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "net/net_private.h"

/* A connection at rest for a tick gives back its buffers: the layer's (input, output), the
 * transport's (TLS record buffers) and, by ops->on_idle, the server's. They come back with the
 * next byte. */
static void rest(tfn_conn *c)
{
    if (c->rested || c->io->blocking || (c->ops->busy && c->ops->busy(c)))
        return;
    c->rested = 1;
    tfn_obuf_release(c);
    if (c->ibuf && !conn_in_body(c) && c->ipos == c->iend) {
        tfn_mem_sub(c->lp, c->icap);
        free(c->ibuf);
        c->ibuf = NULL;
        c->ipos = c->iend = 0;
    }
    if (c->io->rest)
        c->io->rest(c);
    if (c->ops->on_idle)
        c->ops->on_idle(c);
}

/* What the timers of one tick go by. */
typedef struct tick {
    int64_t now, stall, idle;
    uint64_t rate;
} tick;

/* A handshake has the stall timeout from the accept (the idle one without it). */
static void handshake_timer(tfn_loop *lp, tfn_conn *c, const tick *t)
{
    int64_t hs = t->stall > 0 ? t->stall : t->idle;
    if (hs <= 0 || t->now - c->opened_ns <= hs)
        return;
    lp->ctr.closed_tls++;
    lp->ctr.closed_stall++;
    char pn[INET6_ADDRSTRLEN + 16];
    tfn_peer_name(c->peer, pn, sizeof pn);
    tfn_log_limited(lp, "TLS handshake with %s not finished in %lld s", pn,
                    (long long)(hs / NS_PER_S));
    tfn_conn_close_in(lp, c, "stalled in the TLS handshake");
}

/* Output the kernel holds for a peer that does not read is output pending too: a backlog that
 * has not shrunk for the stall timeout is a stalled reader. 1: deaf. */
static int deaf_reader(tfn_conn *c, const tick *t)
{
    int outq = 0;
    if (t->stall > 0 && ioctl(c->wfd, SIOCOUTQ, &outq) != 0)
        outq = 0;
    if (outq <= 0 || outq < c->last_outq)
        c->outq_since_ns = t->now;
    c->last_outq = outq;
    return outq > 0 && t->now - c->outq_since_ns > t->stall;
}

/* The rate is the peer's only while the layer is reading: output that waits (or the memory
 * limit) stops the reading, and restarts the clock. 1: too slow. */
static int too_slow(tfn_conn *c, const tick *t, int in_frame)
{
    if (!in_frame || tfn_owes_out(c) || c->state == CS_CLOSING) {
        c->frame_t0_ns = in_frame ? t->now : 0;
        c->frame_bytes = 0;
    }
    int64_t took = c->frame_t0_ns ? t->now - c->frame_t0_ns : 0;
    return t->rate && in_frame && took > (int64_t)TFN_RATE_GRACE_S * NS_PER_S &&
           (double)c->frame_bytes < (double)t->rate * (double)took / 1e9;
}

static void conn_timers(tfn_loop *lp, tfn_conn *c, const tick *t)
{
    int64_t quiet = t->now - c->last_io_ns;
    int deaf = deaf_reader(c, t);
    int in_frame = conn_in_body(c) || c->ipos < c->iend;
    int mid = tfn_owes_out(c) || in_frame;
    int slow = too_slow(c, t, in_frame);
    if (t->stall > 0 && quiet > t->stall && (mid || deaf)) {
        lp->ctr.closed_stall++;
        tfn_conn_close_in(lp, c,
                          tfn_owes_out(c) || deaf ? "stalled: the peer does not read its replies"
                                                  : "stalled in the middle of a frame");
    } else if (slow) {
        lp->ctr.closed_slow++;
        tfn_conn_close_in(lp, c, "too slow: a frame below the minimum receive rate");
    } else if (!mid && t->idle > 0 && quiet > t->idle && !(c->ops->busy && c->ops->busy(c)) &&
               !c->ring) { /* a ring's control socket is quiet while its ring works */
        lp->ctr.closed_idle++;
        tfn_conn_close_in(lp, c, "idle timeout");
    } else if (!mid && c->state != CS_CLOSING && quiet > NS_PER_S) {
        rest(c); /* idle for a tick: give its buffers back */
    }
}

/* A ring's timers go by what its thread does (the loop sees no byte of it): waiting for a request
 * for idle, or for room for a reply for stall, with no request answered since the timers last
 * saw it move. A ring that answers a long request is busy, as a parked connection is. */
static void ring_timers(tfn_loop *lp, tfn_ring *r, const tick *t)
{
    uint64_t frames = __atomic_load_n(&r->frames, __ATOMIC_RELAXED);
    int phase = __atomic_load_n(&r->phase, __ATOMIC_RELAXED);
    if (frames != r->seen_frames || phase != r->seen_phase) {
        r->seen_frames = frames;
        r->seen_phase = phase;
        r->moved_ns = t->now;
        return;
    }
    int64_t quiet = t->now - r->moved_ns;
    if (phase == RING_WAIT_ROOM && t->stall > 0 && quiet > t->stall) {
        lp->ctr.closed_stall++;
        tfn_ring_end(r, RING_END_STALLED);
    } else if (phase == RING_WAIT_DATA && t->idle > 0 && quiet > t->idle) {
        lp->ctr.closed_idle++;
        tfn_ring_end(r, RING_END_IDLE);
    }
}

void tfn_timeouts(tfn_loop *lp)
{
    tick t = {.now = tfn_now_ns(),
              .stall = (int64_t)lp->cfg.stall_timeout_s * NS_PER_S,
              .idle = (int64_t)lp->cfg.idle_timeout_s * NS_PER_S,
              .rate = lp->cfg.min_rate};
    /* Full: only the reserve is left; then idle_full_timeout_s applies too. */
    int full = lp->nconns + lp->nrings >= lp->cfg.max_conns - lp->cfg.conn_reserve;
    int64_t full_idle = (int64_t)lp->cfg.idle_full_timeout_s * NS_PER_S;
    if (full && full_idle > 0 && (t.idle <= 0 || full_idle < t.idle))
        t.idle = full_idle;
    uint64_t used0 = lp->cfg.mem_used ? __atomic_load_n(lp->cfg.mem_used, __ATOMIC_RELAXED) : 0;
    for (tfn_conn *c = lp->conns, *next; c; c = next) {
        next = c->next;
        if (c->state == CS_PARKED || c->state == CS_DEAD)
            continue;
        if (c->state == CS_HANDSHAKE)
            handshake_timer(lp, c, &t);
        else
            conn_timers(lp, c, &t);
    }
    for (tfn_ring *r = lp->rings; r; r = r->next)
        if (!__atomic_load_n(&r->end, __ATOMIC_RELAXED))
            ring_timers(lp, r, &t);
#ifdef __GLIBC__
    /* What resting connections gave back goes back to the system too, not only to the heap. */
    uint64_t used1 = lp->cfg.mem_used ? __atomic_load_n(lp->cfg.mem_used, __ATOMIC_RELAXED) : 0;
    if (used1 + ((uint64_t)1 << 20) < used0)
        malloc_trim(0);
#endif
}

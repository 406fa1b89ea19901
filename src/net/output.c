/* Output: each connection's reply queue (a copy buffer, then zero-copy segments, then what
 * ops->pull streams), flushing it through the transport and the flow control that bounds it
 * (out_max closes, out_high and zero-copy stop the input); it knows no frame and no timer. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net/net_private.h"
#include "tollfree/error.h"

int tfn_out_pending(const tfn_conn *c)
{
    return c->opos < c->oend || c->izc < c->nzc;
}

/* Output queued, or still to be pulled from the server. */
int tfn_owes_out(const tfn_conn *c)
{
    return tfn_out_pending(c) || c->pull_more;
}

size_t tfn_conn_queued(const tfn_conn *c)
{
    return c->oend - c->opos;
}

void tfn_obuf_release(tfn_conn *c)
{
    if (c->obuf && c->opos == c->oend) {
        tfn_mem_sub(c->lp, c->ocap);
        free(c->obuf);
        c->obuf = NULL;
        c->ocap = c->opos = c->oend = 0;
    }
}

/* The pending output as an iovec (the buffer, then the zero-copy segments). */
static int out_iov(const tfn_conn *c, struct iovec *iov)
{
    int n = 0;
    if (c->opos < c->oend) {
        iov[n].iov_base = c->obuf + c->opos;
        iov[n].iov_len = c->oend - c->opos;
        n++;
    }
    for (int i = c->izc; i < c->nzc; i++) {
        size_t skip = i == c->izc ? c->zc_off : 0;
        iov[n].iov_base = (uint8_t *)c->zc[i].iov_base + skip;
        iov[n].iov_len = c->zc[i].iov_len - skip;
        n++;
    }
    return n;
}

/* w bytes were sent: advance the buffer, then the segments. */
static void out_advance(tfn_conn *c, size_t left)
{
    size_t ob = c->oend - c->opos;
    if (ob) {
        size_t t = left < ob ? left : ob;
        c->opos += t;
        left -= t;
    }
    while (left && c->izc < c->nzc) {
        size_t seg = c->zc[c->izc].iov_len - c->zc_off;
        if (left < seg) {
            c->zc_off += left;
            left = 0;
        } else {
            left -= seg;
            c->izc++;
            c->zc_off = 0;
        }
    }
    while (c->izc < c->nzc && c->zc[c->izc].iov_len == 0)
        c->izc++;
}

/* Sends queued output. 1 all sent, 0 would block (or the handshake is not done), <0 failed. */
int tfn_flush(tfn_conn *c)
{
    if (c->state == CS_HANDSHAKE && tfn_out_pending(c))
        return 0; /* sent once the handshake is done */
    while (tfn_out_pending(c)) {
        struct iovec iov[1 + TFN_MAX_ZC];
        int n = out_iov(c, iov);
        ssize_t w = c->io->writev(c, iov, n);
        if (w == -EAGAIN)
            return 0;
        if (w < 0)
            return (int)w;
        c->last_io_ns = tfn_now_ns();
        tfn_stat_add(c->lp->cfg.stat_bytes_out, w);
        out_advance(c, (size_t)w);
    }
    if (c->opos == c->oend) {
        c->opos = c->oend = 0;
        if (c->ocap > OBUF_KEEP && !c->pull_more)
            tfn_obuf_release(c);
    }
    c->nzc = c->izc = 0;
    c->zc_off = 0;
    return 1;
}

static int out_reserve(tfn_conn *c, size_t n)
{
    tfn_loop *lp = c->lp;
    size_t used = c->oend - c->opos;
    if (n > lp->cfg.out_max || used > lp->cfg.out_max - n)
        return TF_E_LIMIT;
    if (c->ocap - c->oend >= n)
        return 0;
    if (c->opos) { /* slide down first */
        memmove(c->obuf, c->obuf + c->opos, used);
        c->opos = 0;
        c->oend = used;
        if (c->ocap - c->oend >= n)
            return 0;
    }
    size_t cap = c->ocap ? c->ocap : 4096;
    while (cap - used < n)
        cap *= 2;
    uint8_t *p = realloc(c->obuf, cap);
    if (!p)
        return TF_E_NOMEM;
    tfn_mem_add(lp, cap - c->ocap);
    c->obuf = p;
    c->ocap = cap;
    return 0;
}

/* Nothing queued on a socket the loop owns: try to send at once and keep only the rest (the
 * common case copies nothing and needs no further loop turn). 1: all of it went. */
static int send_now(tfn_conn *c, const void **p, size_t *n)
{
    conn_state st = c->state;
    if (!*n || c->io->blocking || (st != CS_OPEN && st != CS_CLOSING) || tfn_owes_out(c) ||
        c->lp->stopping)
        return 0;
    /* TLS: a write that would block keeps its record; the copy queued after is retried. */
    struct iovec iov = {(void *)*p, *n};
    ssize_t w = c->io->writev(c, &iov, 1);
    if (w <= 0)
        return 0; /* errors are seen by the next flush */
    c->last_io_ns = tfn_now_ns();
    tfn_stat_add(c->lp->cfg.stat_bytes_out, w);
    *p = (const uint8_t *)*p + w;
    *n -= (size_t)w;
    if (*n)
        return 0;
    if (st == CS_CLOSING || c->eof)
        tfn_add_ready(c->lp, c); /* it may close now */
    return 1;
}

static int send_common(tfn_conn *c, const void *p, size_t n, const struct iovec *segs, int nseg)
{
    conn_state st = conn_settled(c);
    if (c->state == CS_DEAD || st == CS_DOOMED)
        return TF_E_SHUTTING_DOWN;
    if (nseg < 0 || nseg > TFN_MAX_ZC || c->nzc)
        return TF_E_INVALID_ARG; /* one zero-copy reply at a time (no frame is taken meanwhile) */
    if (!nseg && send_now(c, &p, &n))
        return 0;
    /* Zero-copy segments are the server's memory, accounted by the server: out_max bounds what
     * the layer itself holds. */
    int rc = out_reserve(c, n);
    if (rc) {
        tfn_conn_request(c, CS_DOOMED,
                         rc == TF_E_LIMIT ? "output limit: the peer does not read its replies"
                                          : "out of memory for output");
        tfn_add_ready(c->lp, c);
        return rc;
    }
    if (n) {
        memcpy(c->obuf + c->oend, p, n);
        c->oend += n;
    }
    for (int i = 0; i < nseg; i++)
        c->zc[c->nzc++] = segs[i];
    c->izc = 0;
    c->zc_off = 0;
    tfn_add_ready(c->lp, c);
    return 0;
}

int tfn_conn_send(tfn_conn *c, const void *p, size_t n)
{
    return send_common(c, p, n, NULL, 0);
}

int tfn_conn_send_zc(tfn_conn *c, const void *head, size_t head_len, const struct iovec *segs,
                     int nseg)
{
    return send_common(c, head, head_len, segs, nseg);
}

void tfn_conn_pull_ready(tfn_conn *c)
{
    if (c->state == CS_DEAD || !c->ops->pull)
        return;
    c->pull_more = 1;
    tfn_add_ready(c->lp, c);
}

/* Fills the empty output buffer from ops->pull (one chunk). 0, or < 0: the stream failed. */
int tfn_pull_fill(tfn_conn *c)
{
    if (!c->pull_more || tfn_out_pending(c))
        return 0;
    size_t chunk = TFN_PULL_CHUNK < c->lp->cfg.out_max ? TFN_PULL_CHUNK : c->lp->cfg.out_max;
    int rc = out_reserve(c, chunk);
    if (rc)
        return rc;
    int more = 0;
    int n = c->ops->pull(c, c->obuf + c->oend, c->ocap - c->oend, &more);
    if (n < 0)
        return n;
    c->oend += (size_t)n;
    c->pull_more = n > 0 && more;
    if (!c->pull_more && c->opos == c->oend)
        tfn_obuf_release(c);
    return 0;
}

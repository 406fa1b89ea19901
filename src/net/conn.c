/* A connection's state machine (net_private.h, conn_state) and its input: reading through the
 * transport, asking ops->head where a frame starts, filling its body, running ops->frame here
 * or parking it on a worker, and driving one connection for one loop turn; it knows no
 * protocol, no socket type and no limit beyond what the loop's config says. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/net_private.h"
#include "tollfree/error.h"

/* ---------------------------------------------------------------- accessors */

void *tfn_conn_data(const tfn_conn *c)
{
    return c->data;
}

void tfn_conn_set_data(tfn_conn *c, void *data)
{
    c->data = data;
}

tfn_loop *tfn_conn_loop(const tfn_conn *c)
{
    return c->lp;
}

const char *tfn_conn_transport(const tfn_conn *c)
{
    return c->transport;
}

int tfn_conn_fd(const tfn_conn *c)
{
    return c->rfd;
}

void tfn_conn_set_ops(tfn_conn *c, const tfn_ops *ops)
{
    c->ops = ops;
}

/* ---------------------------------------------------------------- the state */

void tfn_conn_request(tfn_conn *c, conn_state to, const char *why)
{
    int later = c->state == CS_PARKED || c->state == CS_HANDSHAKE;
    conn_state *slot = later ? &c->resume : &c->state;
    if (c->state == CS_DEAD || *slot == CS_DOOMED)
        return; /* DOOMED keeps the first reason (output limit, no memory) */
    *slot = to;
    c->why = why;
}

void tfn_conn_close(tfn_conn *c, const char *why)
{
    conn_state st = conn_settled(c);
    if (st == CS_CLOSING || st == CS_DOOMED || c->state == CS_DEAD)
        return;
    tfn_conn_request(c, CS_CLOSING, why);
    tfn_add_ready(c->lp, c);
}

void tfn_add_ready(tfn_loop *lp, tfn_conn *c)
{
    if (c->in_ready || c->io->blocking || c->state == CS_PARKED)
        return;
    c->in_ready = 1;
    c->qnext = NULL;
    if (lp->ready_tail)
        lp->ready_tail->qnext = c;
    else
        lp->ready = c;
    lp->ready_tail = c;
}

/* ---------------------------------------------------------------- life */

tfn_conn *tfn_conn_new(tfn_loop *lp, int fd, const tfn_ops *ops, const char *transport,
                       const net_transport *io)
{
    tfn_conn *c = calloc(1, sizeof *c);
    size_t icap = ops->ibuf_bytes ? ops->ibuf_bytes : TFN_IBUF_DEFAULT;
    uint8_t *ibuf = malloc(icap);
    if (!c || !ibuf) {
        free(c);
        free(ibuf);
        return NULL;
    }
    c->ibuf = ibuf;
    c->icap = icap;
    tfn_mem_add(lp, icap);
    c->lp = lp;
    c->ops = ops;
    c->io = io;
    c->state = c->resume = CS_OPEN;
    c->transport = transport;
    c->rfd = c->wfd = fd;
    c->last_io_ns = tfn_now_ns();
    return c;
}

void tfn_conn_free(tfn_conn *c)
{
    if (c->io->end)
        c->io->end(c, 0);
    tfn_mem_sub(c->lp, c->ocap + (c->ibuf ? c->icap : 0));
    free(c->ibuf);
    free(c->obuf);
    free(c);
}

/* A connection the loop serves: on the list, counted for its peer. */
void tfn_conn_link(tfn_loop *lp, tfn_conn *c)
{
    tfn_stat_add(lp->cfg.stat_conns_total, 1);
    tfn_stat_add(lp->cfg.stat_conns_open, 1);
    if (c->peer[0])
        tfn_peer_inc(lp, c->peer);
    c->next = lp->conns;
    if (lp->conns)
        lp->conns->prev = c;
    lp->conns = c;
    lp->nconns++;
}

/* -> DEAD: on_close, the transport's goodbye, the socket closed, the peer's count given back. */
void tfn_conn_close_in(tfn_loop *lp, tfn_conn *c, const char *why)
{
    if (c->state == CS_DEAD)
        return;
    int clean = c->state != CS_HANDSHAKE;
    c->state = CS_DEAD;
    c->ops->on_close(c, why);
    if (c->ring)
        tfn_ring_detach(c->ring); /* the control socket of a ring: its peer is gone */
    if (c->io->end)
        c->io->end(c, clean);
    close(c->rfd);
    if (c->peer[0])
        tfn_peer_dec(lp, c->peer);
    tfn_stat_add(lp->cfg.stat_conns_open, -1);
    if (c->prev)
        c->prev->next = c->next;
    else
        lp->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    lp->nconns--;
    /* Freed at the end of the loop turn: lists of this turn may still point at it. */
    if (!c->in_ready) {
        c->qnext = lp->grave;
        lp->grave = c;
    }
}

/* ---------------------------------------------------------------- input */

int tfn_run_frame(tfn_conn *c, int where)
{
    int r = c->ops->frame(c, where);
    if (r < 0)
        tfn_conn_close(c, c->why ? c->why : "closed after an error");
    return r;
}

/* Reads through the transport and keeps the accounts. >0 bytes, 0 EOF, -EAGAIN, -ECANCELED
 * (stopping, stdio), -errno. */
static ssize_t conn_read(tfn_conn *c, void *buf, size_t n)
{
    ssize_t r = c->io->read(c, buf, n);
    if (r > 0) {
        c->last_io_ns = tfn_now_ns();
        if (!c->frame_t0_ns)
            c->frame_t0_ns = c->last_io_ns;
        c->frame_bytes += (uint64_t)r;
        tfn_stat_add(c->lp->cfg.stat_bytes_in, r);
    } else if (r == 0) {
        c->eof = 1;
    } else if (r == -EAGAIN) {
        c->drained = 1;
    }
    return r;
}

/* The frame is whole: run it here or park it on a worker. 1: go on; 0: parked. */
static int frame_done(tfn_loop *lp, tfn_conn *c)
{
    c->got = c->body_len = 0;
    /* The next frame's clock starts with its first byte (already here when pipelined). */
    c->frame_t0_ns = c->ipos < c->iend ? tfn_now_ns() : 0;
    c->frame_bytes = c->iend - c->ipos;
    if (!c->io->blocking && lp->nworkers && c->ops->is_heavy && c->ops->is_heavy(c)) {
        tfn_park(lp, c);
        return 0;
    }
    tfn_run_frame(c, c->io->blocking ? TFN_ON_STDIO : TFN_ON_LOOP);
    return 1;
}

/* The input steps below return 1: progress (call again), 0: would block, parked or at the
 * peer's end, <0: close now (*why set). */

/* What a read that brought no bytes means. */
static int read_stopped(ssize_t n, int mid_frame, const char **why)
{
    if (n == -EAGAIN)
        return 0;
    if (n == 0) {
        if (!mid_frame)
            return 0; /* a clean end: the caller closes once the replies are out */
        *why = "peer closed in the middle of a frame";
        return -1;
    }
    *why = n == -ECANCELED ? "server shutting down" : "read failed";
    return -1;
}

/* head() decided: take the header, and what the input already holds of the body. */
static int frame_begin(tfn_loop *lp, tfn_conn *c, const tfn_head *h, size_t avail, const char **why)
{
    if (h->consume > avail) {
        *why = "internal error: a frame header longer than the input";
        return -1;
    }
    c->ipos += h->consume;
    c->body = h->body;
    uint64_t have = c->iend - c->ipos;
    uint64_t take = have < h->body_len ? have : h->body_len;
    if (c->body && take)
        memcpy(c->body, c->ibuf + c->ipos, take);
    c->ipos += take;
    if (c->ipos == c->iend)
        c->ipos = c->iend = 0;
    if (take == h->body_len)
        return frame_done(lp, c);
    c->got = take;
    c->body_len = h->body_len; /* got < body_len: in the body */
    return 1;
}

/* Asks head() about the bytes at the front: 0 with *h (a frame starts), 1 head wants more
 * (fine), 2 head closed the connection, -1 (why). */
static int ask_head(tfn_conn *c, size_t avail, tfn_head *h, const char **why)
{
    int r = c->ops->head(c, c->ibuf + c->ipos, avail, h);
    if (r < 0) {
        tfn_conn_close(c, c->why ? c->why : "closed after an error");
        return 2;
    }
    if (r == 0)
        return 0;
    size_t need = (size_t)r;
    if (need <= avail || need > c->ops->max_head || need > c->icap / 2) {
        *why = "internal error: a frame header that cannot be decided";
        return -1;
    }
    return 1;
}

/* Between frames or inside a header: ask head() about what is here, else read more. */
static int step_head(tfn_loop *lp, tfn_conn *c, const char **why)
{
    size_t avail = c->iend - c->ipos;
    if (avail) {
        tfn_head h = {0, 0, NULL};
        int r = ask_head(c, avail, &h, why);
        if (r == 0)
            return frame_begin(lp, c, &h, avail, why);
        if (r != 1)
            return r == 2 ? 1 : -1;
    }
    if (c->ipos == c->iend)
        c->ipos = c->iend = 0;
    if (c->icap - c->ipos < c->ops->max_head) {
        memmove(c->ibuf, c->ibuf + c->ipos, c->iend - c->ipos);
        c->iend -= c->ipos;
        c->ipos = 0;
    }
    if (c->eof) {
        if (avail)
            *why = "peer closed in the middle of a frame";
        return avail ? -1 : 0;
    }
    if (c->drained)
        return 0;
    ssize_t n = conn_read(c, c->ibuf + c->iend, c->icap - c->iend);
    if (n > 0) {
        c->iend += (size_t)n;
        return 1;
    }
    return read_stopped(n, c->iend > c->ipos, why);
}

/* Small or dropped bodies go through the input buffer; what follows them stays there. */
static ssize_t body_via_ibuf(tfn_conn *c, uint64_t need)
{
    c->ipos = c->iend = 0;
    ssize_t n = conn_read(c, c->ibuf, c->icap);
    if (n > 0) {
        uint64_t take = (uint64_t)n < need ? (uint64_t)n : need;
        if (c->body)
            memcpy(c->body + c->got, c->ibuf, take);
        c->got += take;
        c->ipos = take;
        c->iend = (size_t)n;
        if (c->ipos == c->iend)
            c->ipos = c->iend = 0;
    }
    return n;
}

/* Inside a body (the input buffer is empty here: frame_begin took what it held). */
static int step_body(tfn_loop *lp, tfn_conn *c, const char **why)
{
    uint64_t need = c->body_len - c->got;
    if (c->eof) {
        *why = "peer closed in the middle of a frame";
        return -1;
    }
    if (c->drained)
        return 0;
    ssize_t n;
    if (c->body && need >= c->icap / 2) {
        /* Big bodies go straight to their final home. */
        n = conn_read(c, c->body + c->got, need > SIZE_MAX ? SIZE_MAX : (size_t)need);
        if (n > 0)
            c->got += (uint64_t)n;
    } else {
        n = body_via_ibuf(c, need);
    }
    if (n > 0)
        return c->got == c->body_len ? frame_done(lp, c) : 1;
    return read_stopped(n, 1, why);
}

int tfn_conn_step(tfn_loop *lp, tfn_conn *c, const char **why)
{
    c->rested = 0;
    if (!c->ibuf) {
        c->ibuf = malloc(c->icap);
        if (!c->ibuf) {
            *why = "out of memory for input";
            return -1;
        }
        tfn_mem_add(lp, c->icap);
    }
    return conn_in_body(c) ? step_body(lp, c, why) : step_head(lp, c, why);
}

/* 1 when the connection is at rest between frames with nothing owed to the peer. */
int tfn_at_rest(tfn_conn *c)
{
    return !conn_in_body(c) && c->ipos == c->iend && !tfn_owes_out(c) &&
           !(c->ops->busy && c->ops->busy(c));
}

/* ---------------------------------------------------------------- one loop turn */

enum { GO_ON, STOP, AGAIN };

/* HANDSHAKE: 1 done (the connection takes its resume state), 0 waiting for the socket, -1
 * closed. */
static int drive_handshake(tfn_loop *lp, tfn_conn *c)
{
    if (lp->stopping && !lp->cfg.drain_on_stop) {
        tfn_conn_close_in(lp, c, "server shutting down");
        return -1;
    }
    char why[256] = "";
    int r = c->io->handshake(c, why, sizeof why);
    if (r == TFN_TLS_WANT_READ || r == TFN_TLS_WANT_WRITE) {
        tfn_want_out(lp, c, r == TFN_TLS_WANT_WRITE);
        return 0;
    }
    if (r < 0) {
        char pn[INET6_ADDRSTRLEN + 16];
        tfn_peer_name(c->peer, pn, sizeof pn);
        tfn_log_limited(lp, "TLS handshake with %s failed: %s", pn, why);
        lp->ctr.closed_tls++;
        tfn_conn_close_in(lp, c, "TLS handshake failed");
        return -1;
    }
    c->state = c->resume;
    c->drained = 0; /* application data may have come with the handshake's last flight */
    tfn_want_out(lp, c, tfn_out_pending(c));
    return 1;
}

/* Output first: pull the next chunk of a stream, flush. GO_ON, STOP (closed, or the budget is
 * spent), AGAIN (a stream's next chunk). */
static int drive_out(tfn_loop *lp, tfn_conn *c, int *budget)
{
    if (tfn_pull_fill(c) < 0) {
        tfn_conn_close_in(lp, c, "a reply stream could not be read");
        return STOP;
    }
    if (!tfn_out_pending(c))
        return GO_ON;
    int r = tfn_flush(c);
    if (r < 0) {
        tfn_conn_close_in(lp, c, "peer gone while a reply was being sent");
        return STOP;
    }
    if (r == 0) {
        tfn_want_out(lp, c, 1); /* EPOLLOUT resumes us */
        return GO_ON;
    }
    tfn_want_out(lp, c, 0);
    if (c->ops->on_flushed)
        c->ops->on_flushed(c);
    if (!c->pull_more)
        return GO_ON;
    if (--*budget == 0) {
        tfn_add_ready(lp, c);
        return STOP;
    }
    return AGAIN;
}

/* 1 when the connection may take input now; 0 when it closed or must wait (flow control). */
static int may_read(tfn_loop *lp, tfn_conn *c)
{
    if (c->state == CS_CLOSING) {
        if (!tfn_owes_out(c) && !(c->ops->busy && c->ops->busy(c)))
            tfn_conn_close_in(lp, c, c->why);
        return 0;
    }
    if (c->nzc || c->pull_more || c->oend - c->opos > lp->cfg.out_high)
        return 0; /* the peer must read first */
    if (tfn_out_pending(c) && !tfn_mem_room(lp, 0)) {
        lp->ctr.mem_waits++;
        return 0; /* over the memory limit: output waits for its peer (EPOLLOUT resumes) */
    }
    if (lp->stopping && !lp->cfg.drain_on_stop) {
        tfn_conn_close_in(lp, c, "server shutting down");
        return 0;
    }
    return 1;
}

/* Serves one connection for one loop turn: at most frames_per_turn steps, then it queues
 * itself behind the others (fairness). */
void tfn_drive(tfn_loop *lp, tfn_conn *c)
{
    int budget = lp->cfg.frames_per_turn;
    while (c->state != CS_DEAD) {
        if (c->state == CS_PARKED)
            return; /* it belongs to its worker (which also sends the reply) */
        if (conn_settled(c) == CS_DOOMED) {
            tfn_conn_close_in(lp, c, c->why);
            return;
        }
        if (c->state == CS_HANDSHAKE && drive_handshake(lp, c) <= 0)
            return;
        int o = drive_out(lp, c, &budget);
        if (o == STOP)
            return;
        if (o == AGAIN)
            continue;
        if (!may_read(lp, c))
            return;
        const char *why = NULL;
        int r = tfn_conn_step(lp, c, &why);
        if (r < 0) {
            tfn_conn_close_in(lp, c, why ? why : "error");
            return;
        }
        if (r == 0) {
            if (c->eof && c->state != CS_PARKED && tfn_at_rest(c))
                tfn_conn_close_in(lp, c, "peer closed");
            return;
        }
        if (--budget == 0) {
            tfn_add_ready(lp, c);
            return;
        }
    }
}

/* The order client (include/tollfree/orders.h): OFL1 stream frames to `tollfree engine serve`.
 *
 * One non-blocking socket, one receive and one send buffer sized at connect. Every call runs the
 * same pump: write what is pending, read what has come, and hand each whole frame to
 * on_frame(), which assembles replies (events up to the closing Heartbeat) and sets unsolicited
 * Trades aside, and the events an Unsolicited marker announces (a kill switch's cancels) too.
 * A single command is a pipeline of one.
 *
 * The split flow (tf_orders_send / tf_orders_recv) keeps one count across calls: `unanswered`,
 * the commands sent whose replies no tf_orders_recv has returned. The server answers in the
 * order of the commands, so the next reply on the stream is always the oldest unanswered
 * command's: a recv is the pump with one reply expected, and it stops at that reply's Heartbeat,
 * leaving what follows in the receive buffer for the next call. Nothing is queued per command
 * beyond its bytes in the send buffer, so the memory is the connect's, whatever the pipeline. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "client/client_internal.h"
#include "common/opts_size.h"
#include "tollfree/orders.h"
#include "venue/venue.h"

/* Buffers: many frames per system call when pipelining; a frame is at most TF_OFL_MAX_FRAME. */
#define RX_BYTES (64 * 1024)
#define TX_BYTES (64 * 1024)
#define SOCKBUF_BYTES (1 << 20)

struct tf_orders {
    int fd;
    tfc_tls *tls; /* a tls: URL (NULL: plain) */
    int timeout_ms;
    uint32_t max_inflight;
    tf_orders_fill_fn on_fill;
    void *on_fill_ctx;
    /* unsolicited Trades: a ring of fills_cap messages */
    tf_ofl_msg *fills;
    uint32_t fills_cap, fills_head, fills_n;
    uint64_t fills_dropped;
    /* unsolicited events behind a marker (TF_ORDERS_UNSOLICITED): a ring of fills_cap messages;
     * unsol_left of the last marker's frames (of command unsol_seq) are still to come. The
     * marker's state lives here, not in a call's rx_target: a call may end between the two. */
    tf_orders_event_fn on_unsolicited;
    void *on_unsolicited_ctx;
    tf_ofl_msg *unsol;
    uint32_t unsol_head, unsol_n, unsol_left;
    uint64_t unsol_dropped, unsol_seq;
    /* received bytes not yet consumed are rx[rpos..rlen) */
    uint8_t *rx;
    size_t rpos, rlen;
    /* bytes to send are tx[tpos..tlen) */
    uint8_t *tx;
    size_t tpos, tlen;
    /* a logged-on session (docs/venue.md): commands go out Keyed with next_seq */
    int keyed;
    uint64_t session_id, logon_seq, next_seq;
    /* commands tf_orders_send sent whose replies tf_orders_recv has not returned */
    size_t unanswered;
};

/* The replies one call is waiting for. */
typedef struct rx_target {
    size_t expected;   /* replies this call waits for */
    size_t done;       /* replies complete */
    tf_ofl_msg *ev;    /* every event of every reply, in order */
    size_t cap;        /* room in ev */
    size_t n;          /* events seen (those past cap are dropped) */
    size_t cur;        /* events of the reply in progress (0: between replies) */
    uint64_t cur_seq;  /* command_seq of the reply in progress (from its first event) */
    uint64_t *seqs;    /* [expected] or NULL */
    size_t *ends;      /* [expected] or NULL */
    uint64_t last_seq; /* command_seq of the last reply completed */
    int peek;          /* fills only: stop before the first event of a reply (left for recv) */
    int stopped;       /* peek: a reply is at the front of the receive buffer */
} rx_target;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t deadline_of(int timeout_ms)
{
    return timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
}

/* Milliseconds left for poll(): -1 forever, 0 when the deadline has passed. */
static int ms_left(int64_t deadline)
{
    if (deadline < 0)
        return -1;
    int64_t left = deadline - now_ms();
    if (left <= 0)
        return 0;
    return left > 1000000 ? 1000000 : (int)left;
}

/* After a failure the stream position is unknown: close it for good. */
static int fail(tf_orders *c, int rc)
{
    if (c->fd >= 0) {
        tfc_tls_free(c->tls, 0);
        c->tls = NULL;
        close(c->fd);
        c->fd = -1;
    }
    return rc;
}

/* Waits until pf's events or the deadline: 0 when ready (or interrupted: the caller looks
 * again), else the connection is closed and -ETIMEDOUT or -errno returned. */
static int wait_ready(tf_orders *c, struct pollfd *pf, int64_t deadline)
{
    int left = ms_left(deadline);
    if (left == 0)
        return fail(c, -ETIMEDOUT);
    int pr = poll(pf, 1, left);
    if (pr < 0 && errno != EINTR)
        return fail(c, -errno);
    return pr == 0 ? fail(c, -ETIMEDOUT) : 0;
}

/* An OFL1 event, a VenueRejected or a gateway report (AcceptedEx ... RejectedEx, Fill). */
static int is_event(uint8_t kind)
{
    return tf_ofl_kind_class(kind) == TF_OFL_CLASS_EVENT;
}

/* A Trade or a gateway Fill: between replies, a fill of a resting order hit by someone else. */
static int is_fill(uint8_t kind)
{
    return kind == TF_OFL_TRADE || kind == TF_OFX_FILL;
}

static void queue_fill(tf_orders *c, const tf_ofl_msg *m)
{
    if (c->on_fill) {
        c->on_fill(c->on_fill_ctx, m);
        return;
    }
    if (c->fills_n == c->fills_cap) { /* full: the oldest goes, and is counted */
        c->fills_head = (c->fills_head + 1) % c->fills_cap;
        c->fills_n--;
        c->fills_dropped++;
    }
    c->fills[(c->fills_head + c->fills_n) % c->fills_cap] = *m;
    c->fills_n++;
}

static void queue_unsolicited(tf_orders *c, const tf_ofl_msg *m)
{
    if (c->on_unsolicited) {
        c->on_unsolicited(c->on_unsolicited_ctx, m);
        return;
    }
    if (c->unsol_n == c->fills_cap) { /* full: the oldest goes, and is counted */
        c->unsol_head = (c->unsol_head + 1) % c->fills_cap;
        c->unsol_n--;
        c->unsol_dropped++;
    }
    c->unsol[(c->unsol_head + c->unsol_n) % c->fills_cap] = *m;
    c->unsol_n++;
}

/* The Unsolicited marker at rx[rpos..]: its size (consumed), 0 when more bytes are needed, or
 * TF_E_PROTOCOL (a bad length or count, or a marker inside a reply or inside another marker's
 * frames: the service sends one only between two whole replies). */
static int on_marker(tf_orders *c, const rx_target *t)
{
    const uint8_t *f = c->rx + c->rpos;
    size_t avail = c->rlen - c->rpos, size = 2 + TF_OFL_FRAME_LEN_BASE + TF_ORDERS_UNSOLICITED_LEN;
    if (avail >= 2 && (size_t)(f[0] | f[1] << 8) != size - 2)
        return TF_E_PROTOCOL;
    if (avail < size)
        return 0;
    uint64_t seq = 0;
    uint32_t count = 0;
    for (int i = 7; i >= 0; i--)
        seq = seq << 8 | f[3 + i];
    for (int i = 3; i >= 0; i--)
        count = count << 8 | f[11 + i];
    if (t->cur || c->unsol_left || !count || !seq)
        return TF_E_PROTOCOL;
    c->unsol_left = count;
    c->unsol_seq = seq;
    return (int)size;
}

/* One whole frame from the server. Every event payload starts with event_seq, command_seq,
 * timestamp_ns, so the union's common initial sequence reads command_seq of any event. */
static int on_frame(tf_orders *c, rx_target *t, const tf_ofl_msg *m)
{
    if (m->kind == TF_OFL_HEARTBEAT) {
        /* A Heartbeat closes the reply in progress; one that closes nothing is a violation. */
        if (t->cur == 0 || t->cur_seq != m->journal_seq)
            return TF_E_PROTOCOL;
        if (t->seqs)
            t->seqs[t->done] = m->journal_seq;
        if (t->ends)
            t->ends[t->done] = t->n;
        t->last_seq = m->journal_seq;
        t->done++;
        t->cur = 0;
        return 0;
    }
    if (!is_event(m->kind))
        return TF_E_PROTOCOL;
    if (c->unsol_left) { /* a frame a marker announced: an event of the marker's command */
        if (m->accepted.command_seq != c->unsol_seq)
            return TF_E_PROTOCOL;
        c->unsol_left--;
        queue_unsolicited(c, m);
        return 0;
    }
    if (t->cur == 0) {
        /* Between replies a Trade (or a gateway Fill) is a fill of a resting order hit by
         * someone else. */
        if (is_fill(m->kind)) {
            queue_fill(c, m);
            return 0;
        }
        if (t->done >= t->expected)
            return TF_E_PROTOCOL; /* a reply to no command of ours */
        t->cur_seq = m->accepted.command_seq;
    } else if (m->accepted.command_seq != t->cur_seq) {
        return TF_E_PROTOCOL;
    }
    if (t->n < t->cap)
        t->ev[t->n] = *m;
    t->n++;
    t->cur++;
    return 0;
}

/* Decodes and handles every whole frame in rx; keeps a partial one at the front. */
static int drain_rx(tf_orders *c, rx_target *t)
{
    /* A call stops at its last reply: what follows is the next call's (or a fill's). */
    while (c->rpos < c->rlen && !(t->expected && t->done == t->expected)) {
        tfv_msg m; /* an OFL1 frame, or a VenueRejected */
        int rc = tfv_decode(c->rx + c->rpos, c->rlen - c->rpos, &m);
        if (rc == TF_E_OFL_HEADER_TOO_SHORT || rc == TF_E_OFL_PAYLOAD_TOO_SHORT)
            break; /* need more bytes */
        if (rc < 0 && c->rx[c->rpos + 2] == TF_ORDERS_UNSOLICITED) {
            /* The marker is no codec's kind (unknown to tfv_decode): looked for only then, so
             * the frames of every reply pay nothing for it. */
            rc = on_marker(c, t);
            if (rc < 0)
                return rc;
            if (rc == 0)
                break; /* need more bytes */
            c->rpos += (size_t)rc;
            continue;
        }
        if (rc < 0 || m.kind == TFV_KEYED)
            return TF_E_PROTOCOL;
        if (t->peek && t->cur == 0 && !c->unsol_left && is_event(m.ofl.kind) &&
            !is_fill(m.ofl.kind)) {
            t->stopped = 1; /* a pipelined command's reply: tf_orders_recv's to read */
            break;
        }
        c->rpos += (size_t)rc;
        rc = on_frame(c, t, &m.ofl);
        if (rc)
            return rc;
    }
    if (c->rpos == c->rlen) {
        c->rpos = c->rlen = 0;
    } else if (c->rpos > RX_BYTES - TF_OFL_MAX_FRAME) {
        memmove(c->rx, c->rx + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
    }
    return 0;
}

/* One read. 1: bytes came; 0: would block; < 0: the peer closed (-ECONNRESET between frames
 * and replies, TF_E_TRUNCATED inside one) or an error. */
static int read_some(tf_orders *c, const rx_target *t)
{
    if (RX_BYTES - c->rlen < TF_OFL_MAX_FRAME && c->rpos) { /* room for at least one frame */
        memmove(c->rx, c->rx + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
    }
    for (;;) {
        ssize_t r = tfc_recv(c->tls, c->fd, c->rx + c->rlen, RX_BYTES - c->rlen);
        if (r > 0) {
            c->rlen += (size_t)r;
            return 1;
        }
        if (r == 0)
            return (c->rlen > c->rpos || t->cur || c->unsol_left) ? TF_E_TRUNCATED : -ECONNRESET;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        return -errno;
    }
}

static int write_some(tf_orders *c)
{
    while (c->tpos < c->tlen) {
        ssize_t w = tfc_send(c->tls, c->fd, c->tx + c->tpos, c->tlen - c->tpos);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -errno;
        }
        c->tpos += (size_t)w;
    }
    c->tpos = c->tlen = 0;
    return 0;
}

/* A command as sent: plain, or Keyed with the next client_seq when logged on. */
static int encode_cmd(tf_orders *c, uint8_t *buf, size_t cap, const tf_ofl_msg *cmd)
{
    if (!c->keyed)
        return tf_ofx_frame_encode(buf, cap, cmd); /* OFL1 and gateway commands */
    tfv_msg k = {
        .kind = TFV_KEYED, .ofl = *cmd, .session = c->session_id, .client_seq = c->next_seq};
    int w = tfv_encode(buf, cap, &k);
    if (w > 0 && c->next_seq)
        c->next_seq++; /* 0: no client_seq from now on */
    return w;
}

/* Sends cmds[0..n) and waits for their n replies, per rx_target. The workhorse of every call. */
static int run(tf_orders *c, const tf_ofl_msg *cmds, size_t n, rx_target *t, int64_t deadline)
{
    size_t sent = 0;
    for (;;) {
        /* Encode while there is room and the window allows: at most max_inflight unanswered. */
        while (sent < n && sent - t->done < c->max_inflight &&
               TX_BYTES - c->tlen >= TF_OFL_MAX_FRAME) {
            int w = encode_cmd(c, c->tx + c->tlen, TX_BYTES - c->tlen, &cmds[sent]);
            if (w < 0)
                return fail(c, TF_E_PROTOCOL); /* checked before; cannot happen */
            c->tlen += (size_t)w;
            sent++;
        }
        int rc = write_some(c);
        if (!rc)
            rc = drain_rx(c, t); /* frames already buffered first */
        if (rc)
            return fail(c, rc);
        if (t->done == t->expected && sent == n)
            return 0;
        rc = read_some(c, t);
        if (rc < 0)
            return fail(c, rc);
        if (rc > 0)
            continue; /* read until it would block, so replies never wait behind a poll */
        if (sent < n && sent - t->done < c->max_inflight && c->tlen == 0)
            continue; /* the replies just drained opened the window: send before waiting */
        struct pollfd pf = {c->fd, POLLIN, 0};
        if (c->tlen > c->tpos)
            pf.events |= POLLOUT;
        int rc_wait = wait_ready(c, &pf, deadline);
        if (rc_wait)
            return rc_wait;
    }
}

/* A command the encoder refuses is the caller's error, found before anything is sent. */
static int check_cmd(const tf_ofl_msg *m)
{
    /* OFL1 (0x01-0x05) and gateway (0x14-0x16) commands; not the venue's records */
    if (tf_ofl_kind_class(m->kind) != TF_OFL_CLASS_COMMAND)
        return TF_E_INVALID_ARG;
    uint8_t scratch[TF_OFL_MAX_FRAME];
    int rc = tf_ofx_frame_encode(scratch, sizeof scratch, m);
    return rc < 0 ? rc : 0;
}

int tf_orders_call(tf_orders *c, const tf_ofl_msg *cmd, tf_orders_reply *r)
{
    if (!c || !cmd || !r || (!r->ev && r->cap))
        return TF_E_NULL_ARG;
    if (c->fd < 0)
        return -ENOTCONN;
    if (c->unanswered)
        return TF_E_INVALID_ARG; /* the next reply is a pipelined command's: recv it first */
    int rc = check_cmd(cmd);
    if (rc)
        return rc;
    rx_target t = {.expected = 1, .ev = r->ev, .cap = r->cap};
    rc = run(c, cmd, 1, &t, deadline_of(c->timeout_ms));
    if (rc)
        return rc;
    r->n = t.n;
    r->command_seq = t.last_seq;
    return (int)(t.n > INT32_MAX ? INT32_MAX : t.n);
}

int64_t tf_orders_send_many(tf_orders *c, const tf_ofl_msg *cmds, size_t n, tf_ofl_msg *ev,
                            size_t cap, uint64_t *command_seq, size_t *reply_end)
{
    if (!c || (!cmds && n) || (!ev && cap))
        return TF_E_NULL_ARG;
    if (c->fd < 0)
        return -ENOTCONN;
    if (c->unanswered)
        return TF_E_INVALID_ARG;
    for (size_t i = 0; i < n; i++) {
        int rc = check_cmd(&cmds[i]);
        if (rc)
            return rc;
    }
    if (n == 0)
        return 0;
    rx_target t = {.expected = n, .ev = ev, .cap = cap, .seqs = command_seq, .ends = reply_end};
    int rc = run(c, cmds, n, &t, deadline_of(c->timeout_ms));
    return rc ? rc : (int64_t)t.n;
}

/* ---------------------------------------------------------------- send now, recv later */

int tf_orders_send(tf_orders *c, const tf_ofl_msg *cmds, size_t n)
{
    if (!c || (!cmds && n))
        return TF_E_NULL_ARG;
    if (c->fd < 0)
        return -ENOTCONN;
    /* Take while the window and the send buffer allow; a full one is a status (the count).
     * Only what is taken is checked (a caller that sends the rest of a long array again and
     * again pays for each command once); a refused one undoes this call's, as nothing of them
     * has reached the socket yet. */
    size_t k = 0, tlen0 = c->tlen, unanswered0 = c->unanswered;
    uint64_t seq0 = c->next_seq;
    while (k < n && k < INT32_MAX && c->unanswered < c->max_inflight &&
           TX_BYTES - c->tlen >= TF_OFL_MAX_FRAME) {
        int rc = check_cmd(&cmds[k]);
        if (rc) {
            c->tlen = tlen0;
            c->unanswered = unanswered0;
            c->next_seq = seq0;
            return rc;
        }
        int w = encode_cmd(c, c->tx + c->tlen, TX_BYTES - c->tlen, &cmds[k]);
        if (w < 0)
            return fail(c, TF_E_PROTOCOL); /* checked above; cannot happen */
        c->tlen += (size_t)w;
        c->unanswered++;
        k++;
    }
    /* What the socket takes now goes now; the rest with the next call (never a wait here). */
    int rc = write_some(c);
    return rc ? fail(c, rc) : (int)k;
}

int tf_orders_recv(tf_orders *c, tf_orders_reply *r)
{
    if (!c || !r || (!r->ev && r->cap))
        return TF_E_NULL_ARG;
    if (c->fd < 0)
        return -ENOTCONN;
    if (!c->unanswered)
        return TF_E_INVALID_ARG; /* no reply is owed: it would wait for nothing */
    rx_target t = {.expected = 1, .ev = r->ev, .cap = r->cap};
    int rc = run(c, NULL, 0, &t, deadline_of(c->timeout_ms));
    if (rc)
        return rc;
    c->unanswered--;
    r->n = t.n;
    r->command_seq = t.last_seq;
    return (int)(t.n > INT32_MAX ? INT32_MAX : t.n);
}

size_t tf_orders_unanswered(const tf_orders *c)
{
    return c ? c->unanswered : 0; /* kept after a failure: the commands a resend starts from */
}

int tf_orders_flush(tf_orders *c)
{
    if (!c)
        return TF_E_NULL_ARG;
    if (c->fd < 0)
        return -ENOTCONN;
    int64_t deadline = deadline_of(c->timeout_ms);
    rx_target t = {0}; /* frames read here wait in rx, undecoded, for the next call */
    for (;;) {
        int rc = write_some(c);
        if (rc)
            return fail(c, rc);
        if (c->tlen == 0)
            return 0;
        /* While writing, take in what the server sends (as long as rx has room): it answers
         * as it reads, and must not be held back by replies nobody reads (TLS may also need
         * to read before it can write). */
        int room = RX_BYTES - (c->rlen - c->rpos) >= TF_OFL_MAX_FRAME;
        if (room && (rc = read_some(c, &t)) != 0) {
            if (rc < 0)
                return fail(c, rc);
            continue;
        }
        struct pollfd pf = {c->fd, (short)(POLLOUT | (room ? POLLIN : 0)), 0};
        int rc_wait = wait_ready(c, &pf, deadline);
        if (rc_wait)
            return rc_wait;
    }
}

int tf_orders_new_limit(tf_orders *c, uint64_t account_id, uint64_t client_order_id,
                        uint64_t instrument_id, int side, int64_t price_ticks, uint64_t qty_lots,
                        tf_orders_reply *r)
{
    tf_ofl_msg m = {.kind = TF_OFL_NEW_LIMIT};
    m.new_limit.account_id = account_id;
    m.new_limit.client_order_id = client_order_id;
    m.new_limit.instrument_id = instrument_id;
    m.new_limit.side = (uint8_t)side;
    m.new_limit.price = price_ticks;
    m.new_limit.quantity.lo = qty_lots;
    if (side != TF_OFL_BUY && side != TF_OFL_SELL)
        return TF_E_OFL_INVALID_SIDE;
    return tf_orders_call(c, &m, r);
}

int tf_orders_new_market(tf_orders *c, uint64_t account_id, uint64_t client_order_id,
                         uint64_t instrument_id, int side, uint64_t qty_lots, tf_orders_reply *r)
{
    tf_ofl_msg m = {.kind = TF_OFL_NEW_MARKET};
    m.new_market.account_id = account_id;
    m.new_market.client_order_id = client_order_id;
    m.new_market.instrument_id = instrument_id;
    m.new_market.side = (uint8_t)side;
    m.new_market.quantity.lo = qty_lots;
    if (side != TF_OFL_BUY && side != TF_OFL_SELL)
        return TF_E_OFL_INVALID_SIDE;
    return tf_orders_call(c, &m, r);
}

int tf_orders_cancel(tf_orders *c, uint64_t order_id, tf_orders_reply *r)
{
    tf_ofl_msg m = {.kind = TF_OFL_CANCEL_BY_ORDER};
    m.cancel_by_order.order_id = order_id;
    return tf_orders_call(c, &m, r);
}

int tf_orders_cancel_client(tf_orders *c, uint64_t account_id, uint64_t client_order_id,
                            tf_orders_reply *r)
{
    tf_ofl_msg m = {.kind = TF_OFL_CANCEL_BY_CLIENT};
    m.cancel_by_client.account_id = account_id;
    m.cancel_by_client.client_order_id = client_order_id;
    return tf_orders_call(c, &m, r);
}

int tf_orders_replace(tf_orders *c, uint64_t order_id, uint64_t client_order_id,
                      int64_t price_ticks, uint64_t qty_lots, tf_orders_reply *r)
{
    tf_ofl_msg m = {.kind = TF_OFL_REPLACE};
    m.replace.order_id = order_id;
    m.replace.client_order_id = client_order_id;
    m.replace.price = price_ticks;
    m.replace.quantity.lo = qty_lots;
    return tf_orders_call(c, &m, r);
}

/* ---------------------------------------------------------------- fills */

/* The pump of tf_orders_poll_fills and tf_orders_poll_unsolicited: reads until something is
 * queued in the ring they take from (or a callback is set, or the timeout passes), then moves up
 * to cap of the ring's messages to out. */
static int poll_ring(tf_orders *c, int unsol, tf_ofl_msg *out, size_t cap, int timeout_ms)
{
    tf_ofl_msg *ring = unsol ? c->unsol : c->fills;
    uint32_t *head = unsol ? &c->unsol_head : &c->fills_head;
    uint32_t *n = unsol ? &c->unsol_n : &c->fills_n;
    int cb = unsol ? c->on_unsolicited != NULL : c->on_fill != NULL;
    /* With no command of ours outstanding, any event but a Trade between replies is a
     * violation; with pipelined commands unanswered, the reading stops at the next reply (the
     * fills behind it are read with it, by tf_orders_recv). A failure is reported once the
     * fills queued before it have been taken. */
    rx_target t = {.peek = c->unanswered > 0};
    int err = 0;
    int64_t deadline = deadline_of(timeout_ms);
    while (c->fd >= 0) {
        int rc = drain_rx(c, &t);
        if (!rc && t.stopped)
            break;
        if (!rc)
            rc = write_some(c); /* a pipeline's bytes the socket had not taken */
        if (!rc)
            rc = read_some(c, &t);
        if (rc < 0) {
            err = fail(c, rc);
            break;
        }
        if (rc > 0)
            continue; /* read until it would block */
        if (*n || cb || timeout_ms == 0)
            break;
        int left = ms_left(deadline);
        if (left == 0)
            break;
        struct pollfd pf = {c->fd, POLLIN, 0};
        if (c->tlen > c->tpos)
            pf.events |= POLLOUT;
        int pr = poll(&pf, 1, left);
        if (pr < 0 && errno != EINTR) {
            err = fail(c, -errno);
            break;
        }
        if (pr == 0)
            break;
    }
    size_t k = 0;
    while (k < cap && *n) {
        out[k++] = ring[*head];
        *head = (*head + 1) % c->fills_cap;
        (*n)--;
    }
    if (k)
        return (int)k;
    return err ? err : (c->fd < 0 && !*n ? -ENOTCONN : 0);
}

int tf_orders_poll_fills(tf_orders *c, tf_ofl_msg *out, size_t cap, int timeout_ms)
{
    if (!c || (!out && cap))
        return TF_E_NULL_ARG;
    return poll_ring(c, 0, out, cap, timeout_ms);
}

int tf_orders_poll_unsolicited(tf_orders *c, tf_ofl_msg *out, size_t cap, int timeout_ms)
{
    if (!c || (!out && cap))
        return TF_E_NULL_ARG;
    return poll_ring(c, 1, out, cap, timeout_ms);
}

int tf_orders_set_on_unsolicited(tf_orders *c, tf_orders_event_fn fn, void *ctx)
{
    if (!c)
        return TF_E_NULL_ARG;
    if (fn) /* the queued ones first, in order: then the callback has every later one */
        while (c->unsol_n) {
            tf_ofl_msg m = c->unsol[c->unsol_head];
            c->unsol_head = (c->unsol_head + 1) % c->fills_cap;
            c->unsol_n--;
            fn(ctx, &m);
        }
    c->on_unsolicited = fn;
    c->on_unsolicited_ctx = ctx;
    return 0;
}

uint64_t tf_orders_unsolicited_dropped(const tf_orders *c)
{
    return c ? c->unsol_dropped : 0;
}

uint64_t tf_orders_fills_dropped(const tf_orders *c)
{
    return c ? c->fills_dropped : 0;
}

int tf_orders_fd(const tf_orders *c)
{
    return c ? c->fd : -1;
}

/* ---------------------------------------------------------------- logon */

/* One handshake frame into f (at most TFV_LOGON_MAX bytes), waiting until the deadline. */
static int logon_read(tf_orders *c, uint8_t *f, int64_t deadline)
{
    rx_target t = {0};
    for (;;) {
        int n = tfv_logon_frame_size(c->rx + c->rpos, c->rlen - c->rpos);
        if (n < 0)
            return TF_E_PROTOCOL;
        if (n > 0) {
            memcpy(f, c->rx + c->rpos, (size_t)n);
            c->rpos += (size_t)n;
            return n;
        }
        int rc = read_some(c, &t);
        if (rc < 0)
            return rc;
        if (rc > 0)
            continue;
        int left = ms_left(deadline);
        struct pollfd pf = {c->fd, POLLIN, 0};
        int pr = left == 0 ? 0 : poll(&pf, 1, left);
        if (pr < 0 && errno != EINTR)
            return -errno;
        if (pr == 0)
            return TF_E_PROTOCOL; /* no challenge: a service without --sessions says nothing */
    }
}

/* Challenge, answer, result (docs/venue.md, "Logon"). */
static int logon(tf_orders *c, const char *session, const void *secret, size_t secret_len)
{
    uint8_t f[TFV_LOGON_MAX];
    /* A service without --sessions sends nothing: do not wait the whole call timeout for it. */
    int wait = c->timeout_ms < 0 || c->timeout_ms > 5000 ? 5000 : c->timeout_ms;
    int n = logon_read(c, f, deadline_of(wait));
    if (n < 0)
        return n;
    if (n != 3 + 5 + TFV_LOGON_NONCE || f[2] != TFV_LOGON_CHALLENGE || memcmp(f + 3, "TFV1", 4) ||
        f[7] != 1)
        return TF_E_PROTOCOL;
    uint8_t a[TFV_LOGON_MAX];
    int an = tfv_logon_answer(a, sizeof a, session, secret, secret_len, f + 8);
    if (an < 0)
        return an;
    memcpy(c->tx, a, (size_t)an);
    c->tpos = 0;
    c->tlen = (size_t)an;
    int64_t deadline = deadline_of(c->timeout_ms);
    int rc;
    while ((rc = write_some(c)) == 0 && c->tlen) {
        struct pollfd pf = {c->fd, POLLOUT, 0};
        if (poll(&pf, 1, ms_left(deadline)) == 0)
            return -ETIMEDOUT;
    }
    if (rc)
        return rc;
    n = logon_read(c, f, deadline);
    if (n == -ECONNRESET || n == TF_E_TRUNCATED)
        return -EACCES; /* refused and closed before the result was read */
    if (n < 0)
        return n;
    if (n != 20 || f[2] != TFV_LOGON_RESULT)
        return TF_E_PROTOCOL;
    if (f[3] != 0)
        return -EACCES;
    uint64_t id, last;
    memcpy(&id, f + 4, 8);
    memcpy(&last, f + 12, 8);
    c->session_id = le64toh(id);
    c->logon_seq = le64toh(last);
    c->next_seq = c->logon_seq + 1;
    c->keyed = 1;
    return 0;
}

/* ---------------------------------------------------------------- connect / close */

/* The caller's options under the size rule (docs/api.md): any size from the first layout (_V1)
 * up, the fields it lacks NULL or 0; a longer struct only with its unknown bytes zero. NULL:
 * the defaults. 0, or TF_E_INVALID_ARG. */
static int load_opts(tf_orders_opts *o, const tf_orders_opts *opts)
{
    *o = (tf_orders_opts){.size = sizeof *o};
    if (!opts)
        return 0;
    int rc = tfu_opts_load_n(o, sizeof *o, opts, opts->size, TF_ORDERS_OPTS_SIZE_V1);
    o->size = sizeof *o;
    return rc;
}

int tf_orders_connect(tf_orders **out, const char *url, const tf_orders_opts *opts)
{
    if (!out || !url)
        return TF_E_NULL_ARG;
    *out = NULL;
    tf_orders_opts o;
    if (load_opts(&o, opts))
        return TF_E_INVALID_ARG;
    if (o.session && (!o.secret || !o.secret_len || o.secret_len > TFV_SECRET_MAX))
        return TF_E_INVALID_ARG;
    if (o.max_fills > (1u << 24) || o.max_inflight > (1u << 24))
        return TF_E_INVALID_ARG;
    tf_orders *c = calloc(1, sizeof *c);
    if (!c)
        return TF_E_NOMEM;
    c->fd = -1;
    c->timeout_ms = o.timeout_ms ? o.timeout_ms : TF_ORDERS_DEFAULT_TIMEOUT_MS;
    c->max_inflight = o.max_inflight ? o.max_inflight : TF_ORDERS_DEFAULT_MAX_INFLIGHT;
    c->fills_cap = o.max_fills ? o.max_fills : TF_ORDERS_DEFAULT_MAX_FILLS;
    c->on_fill = o.on_fill;
    c->on_fill_ctx = o.on_fill_ctx;
    c->rx = malloc(RX_BYTES);
    c->tx = malloc(TX_BYTES);
    c->fills = c->on_fill ? NULL : calloc(c->fills_cap, sizeof *c->fills);
    c->unsol = malloc(c->fills_cap * sizeof *c->unsol); /* written before read: not zeroed */
    if (!c->rx || !c->tx || (!c->on_fill && !c->fills) || !c->unsol) {
        tf_orders_close(c);
        return TF_E_NOMEM;
    }
    tfc_url u;
    int rc = tfc_parse_url(url, &u);
    if (!rc && u.scheme == TFC_UNIX)
        rc = tfc_dial_unix(u.path, &c->fd);
    else if (!rc && (u.scheme == TFC_TCP || u.scheme == TFC_TLS))
        rc = tfc_dial_tcp(u.host, u.port, &c->fd);
    else if (!rc)
        rc = TF_E_INVALID_ARG; /* shm: is the sweep service's */
    if (!rc) {
        int sz = SOCKBUF_BYTES;
        setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
        setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
        int fl = fcntl(c->fd, F_GETFL);
        if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) != 0)
            rc = -errno;
    }
    if (!rc && u.scheme == TFC_TLS)
        rc = tfc_tls_start(c->fd, u.host, o.tls_ca, c->timeout_ms, &c->tls);
    if (!rc && o.session)
        rc = logon(c, o.session, o.secret, o.secret_len);
    if (rc) {
        tf_orders_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

int tf_orders_connect_session(tf_orders **out, const char *url, const char *session,
                              const void *secret, size_t secret_len, const tf_orders_opts *opts)
{
    if (!session || !secret)
        return TF_E_NULL_ARG;
    tf_orders_opts o;
    if (load_opts(&o, opts))
        return TF_E_INVALID_ARG;
    o.session = session;
    o.secret = secret;
    o.secret_len = secret_len;
    return tf_orders_connect(out, url, &o);
}

uint64_t tf_orders_logon_client_seq(const tf_orders *c)
{
    return c ? c->logon_seq : 0;
}

uint64_t tf_orders_next_client_seq(const tf_orders *c)
{
    return c && c->keyed ? c->next_seq : 0;
}

int tf_orders_set_next_client_seq(tf_orders *c, uint64_t client_seq)
{
    if (!c)
        return TF_E_NULL_ARG;
    if (!c->keyed)
        return TF_E_INVALID_ARG;
    c->next_seq = client_seq;
    return 0;
}

int tf_orders_set_timeout(tf_orders *c, int timeout_ms)
{
    if (!c)
        return TF_E_NULL_ARG;
    c->timeout_ms = timeout_ms ? timeout_ms : TF_ORDERS_DEFAULT_TIMEOUT_MS;
    return 0;
}

void tf_orders_close(tf_orders *c)
{
    if (!c)
        return;
    tfc_tls_free(c->tls, 1);
    if (c->fd >= 0)
        close(c->fd);
    free(c->rx);
    free(c->tx);
    free(c->fills);
    free(c->unsol);
    free(c);
}

/* The connection layer (net.h): event loop, listeners, connection state machine, bounded output,
 * worker pool, stdio, stall/idle/rate timeouts, per-peer caps and the reserve, the memory counter,
 * rate-limited logs, signals and shutdown.
 *
 * Sockets are non-blocking and registered edge-triggered once (EPOLLIN | EPOLLRDHUP); EPOLLOUT is
 * added only while output is blocked, so a client reading its replies never wakes the loop for
 * nothing. A short read is taken to mean "drained" (saving one recv that would say EAGAIN) only
 * while the peer has not signalled its end: once EPOLLRDHUP or EPOLLHUP was seen the connection
 * reads until 0, so a FIN that arrives in the same edge as the last data is never missed.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <linux/sockios.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "net/net.h"
#include "net/tls.h"
#include "tollfree/error.h"

enum { IN_HEAD, IN_BODY };
enum { TAG_SIGNAL = 1, TAG_DONE = 2, TAG_STDIO = 3, TAG_LISTEN = 16 };

/* Output buffers above this are freed once empty instead of kept (and every one once the
 * connection has been at rest for a tick). */
#define OBUF_KEEP ((size_t)4 << 10)

struct tfn_conn {
    tfn_loop *lp;
    const tfn_ops *ops;
    void *data;
    const char *transport;
    int rfd, wfd;
    int pass_fds, is_sock, blocking;
    int drained; /* the last read came back short or EAGAIN: wait for the next edge */
    int rdhup;   /* the peer signalled its end: never trust a short read again */
    int eof;     /* read returned 0 */
    int state;
    uint8_t *ibuf;
    size_t icap, ipos, iend;
    uint8_t *body; /* NULL: drop the body */
    uint64_t body_len, got;
    /* output: obuf[opos..oend), then zc[izc..nzc) from zc_off into zc[izc] */
    uint8_t *obuf;
    size_t ocap, opos, oend;
    struct iovec zc[TFN_MAX_ZC];
    int nzc, izc;
    size_t zc_off;
    int pull_more; /* ops->pull has more to give (tfn_conn_pull_ready) */
    int rested;    /* at rest at the last tick: its buffers were released */
    int closing;   /* read nothing more; close once output is out */
    int doomed;    /* close at the next chance, output or not */
    const char *why;
    int parked, dead, want_out, in_ready;
    int64_t last_io_ns;
    int last_outq;                    /* bytes the peer had not read at the last tick (SIOCOUTQ) */
    int64_t outq_since_ns;            /* since when that backlog has not shrunk */
    int64_t frame_t0_ns;              /* when the frame in progress began (0: none) */
    uint64_t frame_bytes;             /* bytes read since then */
    uint8_t peer[TFN_PEER_KEY_BYTES]; /* family (1 uid, 4, 6) and key; peer[0] == 0: not counted */
    int log_tokens;                   /* tfn_conn_log */
    int64_t log_sec;
    uint64_t log_dropped, log_dropped_total;
    /* TLS (NULL: plain). Used only by the thread that owns the connection (net.h, "Threads"). */
    tfn_ssl *ssl;
    int tls_hs;                   /* the handshake is not done yet */
    int tls_failed;               /* a fatal TLS error: no close_notify */
    int64_t opened_ns;            /* accepted at (bounds the handshake) */
    struct tfn_conn *prev, *next; /* every live socket connection */
    struct tfn_conn *qnext;       /* worker queue, done list, ready list, graveyard */
};

/* Open connections per peer: open addressing, linear probing, backward-shift deletion. */
typedef struct peer_ent {
    uint8_t key[TFN_PEER_KEY_BYTES];
    int count; /* 0: empty */
} peer_ent;

typedef struct listener {
    int fd;
    const tfn_ops *ops;
    const char *label;
    int pass_fds;
    tfn_tls *tls; /* NULL: plain */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    dev_t dev;
    ino_t ino;
} listener;

struct tfn_loop {
    tfn_config cfg;
    int ep, sig_fd, done_efd, stdio_efd, stop_efd;
    sigset_t old_mask;
    struct sigaction old_pipe;
    listener ls[TFN_MAX_LISTEN];
    int nls;
    tfn_conn *conns;
    int nconns;
    peer_ent *peers;
    size_t peer_mask;
    tfn_counters ctr;
    tfn_conn *ready, *ready_tail;
    tfn_conn *grave;
    int stopping;
    int stopping_flag; /* atomic copy of `stopping` for the workers and stdio */
    int64_t stop_deadline_ns;
    int parked;
    /* worker pool */
    pthread_t *workers;
    int nworkers;
    pthread_mutex_t qlock;
    pthread_cond_t qcond;
    tfn_conn *qhead, *qtail;
    int qstop;
    pthread_mutex_t dlock;
    tfn_conn *dhead;
    /* stdio */
    const tfn_ops *stdio_ops;
    pthread_t stdio_thr;
    int stdio_started, stdio_done;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void stat_add(uint64_t *ctr, int64_t n)
{
    if (ctr)
        __atomic_fetch_add(ctr, (uint64_t)n, __ATOMIC_RELAXED);
}

static void mem_add(tfn_loop *lp, size_t n)
{
    if (lp->cfg.mem_used && n)
        __atomic_fetch_add(lp->cfg.mem_used, (uint64_t)n, __ATOMIC_RELAXED);
}

static void mem_sub(tfn_loop *lp, size_t n)
{
    if (lp->cfg.mem_used && n)
        __atomic_fetch_sub(lp->cfg.mem_used, (uint64_t)n, __ATOMIC_RELAXED);
}

int tfn_mem_room(const tfn_loop *lp, uint64_t bytes)
{
    if (!lp->cfg.mem_used)
        return 1;
    uint64_t used = __atomic_load_n(lp->cfg.mem_used, __ATOMIC_RELAXED);
    return bytes <= lp->cfg.mem_limit && used <= lp->cfg.mem_limit - bytes;
}

/* ---------------------------------------------------------------- logging */

static void log_line(tfn_loop *lp, const char *prefix, const char *fmt, va_list ap)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "%s: %s", lp->cfg.name ? lp->cfg.name : "tollfree",
                     prefix ? prefix : "");
    if (n < 0)
        n = 0;
    if ((size_t)n > sizeof line / 2)
        n = (int)(sizeof line / 2);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    /* One write per line so lines from different threads never interleave. */
    ssize_t w = write(2, line, len);
    (void)w;
}

void tfn_log(tfn_loop *lp, int always, const char *fmt, ...)
{
    if (!always && lp->cfg.quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    log_line(lp, NULL, fmt, ap);
    va_end(ap);
}

/* The process-wide gate of the lines peers can provoke: every server and thread shares it, so N
 * bad connections a second cost at most TFN_LOG_PER_SEC lines whatever each line is about. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t gate_sec;
static int gate_count;
static uint64_t gate_dropped;

int tfn_log_gate(uint64_t *dropped)
{
    int64_t sec = now_ns() / 1000000000ll;
    pthread_mutex_lock(&gate_lock);
    if (sec != gate_sec) {
        gate_sec = sec;
        gate_count = 0;
    }
    int go = gate_count < TFN_LOG_PER_SEC;
    if (go) {
        gate_count++;
        *dropped = gate_dropped;
        gate_dropped = 0;
    } else {
        gate_dropped++;
    }
    pthread_mutex_unlock(&gate_lock);
    return go;
}

void tfn_log_gate_report(const char *name)
{
    pthread_mutex_lock(&gate_lock);
    uint64_t d = gate_dropped;
    gate_dropped = 0;
    pthread_mutex_unlock(&gate_lock);
    if (!d)
        return;
    char line[256];
    int n = snprintf(line, sizeof line,
                     "%s: %llu log lines about connections left out (at most %d a second)\n",
                     name ? name : "tollfree", (unsigned long long)d, TFN_LOG_PER_SEC);
    if (n > 0) {
        ssize_t w = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
}

/* "(N similar lines left out) " for the next line that goes out. */
static void gate_prefix(char *prefix, size_t cap, uint64_t dropped)
{
    prefix[0] = 0;
    if (dropped)
        snprintf(prefix, cap, "(%llu lines left out) ", (unsigned long long)dropped);
}

void tfn_log_limited(tfn_loop *lp, const char *fmt, ...)
{
    uint64_t dropped = 0;
    if (lp->cfg.quiet || !tfn_log_gate(&dropped))
        return;
    char prefix[96];
    gate_prefix(prefix, sizeof prefix, dropped);
    va_list ap;
    va_start(ap, fmt);
    log_line(lp, prefix, fmt, ap);
    va_end(ap);
}

void tfn_conn_log(tfn_conn *c, const char *fmt, ...)
{
    tfn_loop *lp = c->lp;
    if (lp->cfg.quiet)
        return;
    /* A token bucket per connection: a burst, then one line a second. */
    int64_t sec = now_ns() / 1000000000ll;
    if (c->log_sec == 0) {
        c->log_tokens = TFN_CONN_LOG_BURST;
    } else if (sec > c->log_sec) {
        int64_t add = sec - c->log_sec;
        c->log_tokens = add >= TFN_CONN_LOG_BURST                       ? TFN_CONN_LOG_BURST
                        : c->log_tokens + (int)add > TFN_CONN_LOG_BURST ? TFN_CONN_LOG_BURST
                                                                        : c->log_tokens + (int)add;
    }
    c->log_sec = sec;
    if (c->log_tokens <= 0) {
        c->log_dropped++;
        c->log_dropped_total++;
        return;
    }
    c->log_tokens--;
    uint64_t gated = 0;
    if (!tfn_log_gate(&gated))
        return; /* counted by the gate */
    char prefix[160] = "";
    if (c->log_dropped || gated)
        snprintf(prefix, sizeof prefix, "(%llu lines of this connection, %llu in all left out) ",
                 (unsigned long long)c->log_dropped, (unsigned long long)gated);
    c->log_dropped = 0;
    va_list ap;
    va_start(ap, fmt);
    log_line(lp, prefix, fmt, ap);
    va_end(ap);
}

uint64_t tfn_conn_log_dropped(const tfn_conn *c)
{
    return c->log_dropped_total;
}

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

int tfn_loop_stopping(const tfn_loop *lp)
{
    return __atomic_load_n(&lp->stopping_flag, __ATOMIC_ACQUIRE);
}

int tfn_loop_conns(const tfn_loop *lp)
{
    return lp->nconns;
}

void tfn_loop_counters(const tfn_loop *lp, tfn_counters *out)
{
    *out = lp->ctr;
}

void *tfn_loop_ud(const tfn_loop *lp)
{
    return lp->cfg.ud;
}

/* ---------------------------------------------------------------- I/O primitives */

static int out_pending(const tfn_conn *c)
{
    return c->opos < c->oend || c->izc < c->nzc;
}

/* Output queued, or still to be pulled from the server. */
static int owes_out(const tfn_conn *c)
{
    return out_pending(c) || c->pull_more;
}

size_t tfn_conn_queued(const tfn_conn *c)
{
    return c->oend - c->opos;
}

static void obuf_release(tfn_conn *c)
{
    if (c->obuf && c->opos == c->oend) {
        mem_sub(c->lp, c->ocap);
        free(c->obuf);
        c->obuf = NULL;
        c->ocap = c->opos = c->oend = 0;
    }
}

static void want_out(tfn_loop *lp, tfn_conn *c, int on);

/* conn_read of a TLS connection. */
static ssize_t tls_read(tfn_conn *c, void *buf, size_t n)
{
    int want = 0;
    ssize_t r = tfn_tls_read(c->ssl, buf, n, &want);
    if (r > 0) {
        /* OpenSSL may hold more than the socket does: only a read that wants more tells. */
        c->drained = 0;
        c->last_io_ns = now_ns();
        if (!c->frame_t0_ns)
            c->frame_t0_ns = c->last_io_ns;
        c->frame_bytes += (uint64_t)r;
        stat_add(c->lp->cfg.stat_bytes_in, r);
        return r;
    }
    if (r == 0) {
        c->eof = 1;
        return 0;
    }
    if (r == -EAGAIN) {
        c->drained = 1;
        if (want == TFN_TLS_WANT_WRITE)
            want_out(c->lp, c, 1); /* the read goes on once the socket takes bytes */
        return -EAGAIN;
    }
    c->tls_failed = 1;
    return r;
}

/* Reads up to n bytes. >0 bytes, 0 EOF, -EAGAIN, -ECANCELED (stopping, blocking mode), -errno. */
static ssize_t conn_read(tfn_conn *c, void *buf, size_t n)
{
    tfn_loop *lp = c->lp;
    if (c->ssl)
        return tls_read(c, buf, n);
    for (;;) {
        if (c->blocking) {
            struct pollfd pf[2] = {{c->rfd, POLLIN, 0}, {lp->stop_efd, POLLIN, 0}};
            int pr = poll(pf, 2, -1);
            if (pr < 0 && errno == EINTR)
                continue;
            if (pf[1].revents)
                return -ECANCELED;
        }
        ssize_t r;
        int got_fd = 0;
        if (c->pass_fds) {
            union {
                char buf[CMSG_SPACE(sizeof(int) * 8)];
                struct cmsghdr align;
            } cm;
            struct iovec iov = {buf, n};
            struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
            mh.msg_control = cm.buf;
            mh.msg_controllen = sizeof cm.buf;
            r = recvmsg(c->rfd, &mh, MSG_CMSG_CLOEXEC);
            if (r >= 0) {
                for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
                    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
                        continue;
                    size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                    for (size_t i = 0; i < k; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof fd);
                        if (c->ops->on_fd)
                            c->ops->on_fd(c, fd);
                        else
                            close(fd);
                        got_fd = 1;
                    }
                }
            }
        } else if (c->is_sock) {
            r = recv(c->rfd, buf, n, 0);
        } else {
            r = read(c->rfd, buf, n);
        }
        if (r > 0) {
            /* A short read drained the socket, unless it stopped at an fd boundary or the peer
             * has signalled its end (then only a read of 0 tells that everything was taken). */
            c->drained = !c->blocking && (size_t)r < n && !got_fd && !c->rdhup;
            c->last_io_ns = now_ns();
            if (!c->frame_t0_ns)
                c->frame_t0_ns = c->last_io_ns;
            c->frame_bytes += (uint64_t)r;
            stat_add(lp->cfg.stat_bytes_in, r);
            return r;
        }
        if (r == 0) {
            c->eof = 1;
            return 0;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (c->blocking)
                continue; /* a non-blocking stdin: poll again */
            c->drained = 1;
            return -EAGAIN;
        }
        return -errno;
    }
}

/* Sends queued output. 1 all sent, 0 would block, <0 failed. */
static int conn_flush(tfn_conn *c)
{
    tfn_loop *lp = c->lp;
    while (out_pending(c)) {
        struct iovec iov[1 + TFN_MAX_ZC];
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
        ssize_t w;
        if (c->ssl) {
            /* One record stream: the pieces go one after the other. A write that would block
             * leaves its record inside OpenSSL; the retry starts with the same bytes. */
            if (c->tls_hs)
                return 0; /* sent once the handshake is done */
            int want = 0;
            w = tfn_tls_write(c->ssl, iov[0].iov_base, iov[0].iov_len, &want);
            if (w == -EAGAIN)
                return 0;
            if (w < 0) {
                c->tls_failed = 1;
                return (int)w;
            }
        } else if (c->is_sock) {
            struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
            w = sendmsg(c->wfd, &mh, MSG_NOSIGNAL);
        } else {
            w = writev(c->wfd, iov, n);
        }
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (c->blocking) {
                    struct pollfd pf = {c->wfd, POLLOUT, 0};
                    poll(&pf, 1, 1000);
                    continue;
                }
                return 0;
            }
            return -errno;
        }
        c->last_io_ns = now_ns();
        stat_add(lp->cfg.stat_bytes_out, w);
        size_t left = (size_t)w;
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
    if (c->opos == c->oend) {
        c->opos = c->oend = 0;
        if (c->ocap > OBUF_KEEP && !c->pull_more)
            obuf_release(c);
    }
    c->nzc = c->izc = 0;
    c->zc_off = 0;
    return 1;
}

static void add_ready(tfn_loop *lp, tfn_conn *c)
{
    if (c->in_ready || c->blocking || c->parked)
        return;
    c->in_ready = 1;
    c->qnext = NULL;
    if (lp->ready_tail)
        lp->ready_tail->qnext = c;
    else
        lp->ready = c;
    lp->ready_tail = c;
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
    mem_add(lp, cap - c->ocap);
    c->obuf = p;
    c->ocap = cap;
    return 0;
}

static int send_common(tfn_conn *c, const void *p, size_t n, const struct iovec *segs, int nseg)
{
    if (c->dead || c->doomed)
        return TF_E_SHUTTING_DOWN;
    if (nseg < 0 || nseg > TFN_MAX_ZC || c->nzc)
        return TF_E_INVALID_ARG; /* one zero-copy reply at a time (no frame is taken meanwhile) */
    /* Nothing queued on a socket the loop owns: try to send at once, and keep only the rest
     * (the common case copies nothing and needs no further loop turn). */
    if (!nseg && n && !c->blocking && !c->parked && !owes_out(c) && !c->lp->stopping &&
        !c->tls_hs) {
        int want = 0;
        /* TLS: a write that would block keeps its record; the copy below is what is retried. */
        ssize_t w = c->ssl ? tfn_tls_write(c->ssl, p, n, &want)
                           : send(c->wfd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            c->last_io_ns = now_ns();
            stat_add(c->lp->cfg.stat_bytes_out, w);
            p = (const uint8_t *)p + w;
            n -= (size_t)w;
            if (!n) {
                if (c->closing || c->eof)
                    add_ready(c->lp, c); /* it may close now */
                return 0;
            }
        }
        /* errors are seen by the next flush */
    }
    /* Zero-copy segments are the server's memory, accounted by the server: out_max bounds what
     * the layer itself holds. */
    int rc = out_reserve(c, n);
    if (rc) {
        c->doomed = 1;
        c->why = rc == TF_E_LIMIT ? "output limit: the peer does not read its replies"
                                  : "out of memory for output";
        add_ready(c->lp, c);
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
    add_ready(c->lp, c);
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

void tfn_conn_close(tfn_conn *c, const char *why)
{
    if (c->closing || c->dead)
        return;
    c->closing = 1;
    c->why = why;
    add_ready(c->lp, c);
}

void tfn_conn_pull_ready(tfn_conn *c)
{
    if (c->dead || !c->ops->pull)
        return;
    c->pull_more = 1;
    add_ready(c->lp, c);
}

/* Fills the empty output buffer from ops->pull (one chunk). 0, or < 0: the stream failed. */
static int pull_fill(tfn_conn *c)
{
    if (!c->pull_more || out_pending(c))
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
        obuf_release(c);
    return 0;
}

/* ---------------------------------------------------------------- worker pool */

static int run_frame(tfn_conn *c, int where)
{
    int r = c->ops->frame(c, where);
    if (r < 0)
        tfn_conn_close(c, c->why ? c->why : "closed after an error");
    return r;
}

static void *worker_main(void *arg)
{
    tfn_loop *lp = arg;
    for (;;) {
        pthread_mutex_lock(&lp->qlock);
        while (!lp->qhead && !lp->qstop)
            pthread_cond_wait(&lp->qcond, &lp->qlock);
        tfn_conn *c = lp->qhead;
        if (!c) {
            pthread_mutex_unlock(&lp->qlock);
            return NULL;
        }
        lp->qhead = c->qnext;
        if (!lp->qhead)
            lp->qtail = NULL;
        pthread_mutex_unlock(&lp->qlock);

        run_frame(c, TFN_ON_WORKER);
        /* Send the reply from here (the loop does not touch a parked connection): the client
         * gets it without waiting for the loop thread to wake up. What does not fit in the
         * socket buffer, or a failure, is left to the loop. */
        if (!tfn_loop_stopping(lp) && !c->doomed && out_pending(c) && conn_flush(c) == 1 &&
            c->ops->on_flushed)
            c->ops->on_flushed(c);

        pthread_mutex_lock(&lp->dlock);
        c->qnext = lp->dhead;
        lp->dhead = c;
        pthread_mutex_unlock(&lp->dlock);
        uint64_t one = 1;
        ssize_t w = write(lp->done_efd, &one, sizeof one);
        (void)w;
    }
}

static void park(tfn_loop *lp, tfn_conn *c)
{
    c->parked = 1;
    lp->parked++;
    c->qnext = NULL;
    pthread_mutex_lock(&lp->qlock);
    if (lp->qtail)
        lp->qtail->qnext = c;
    else
        lp->qhead = c;
    lp->qtail = c;
    pthread_cond_signal(&lp->qcond);
    pthread_mutex_unlock(&lp->qlock);
}

/* ---------------------------------------------------------------- peers */

static size_t peer_hash(const uint8_t *key)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < TFN_PEER_KEY_BYTES; i++)
        h = (h ^ key[i]) * 0x100000001b3ull;
    return (size_t)(h ^ h >> 29);
}

/* The slot of key, or of the empty slot where it would go. */
static size_t peer_find(const tfn_loop *lp, const uint8_t *key)
{
    size_t i = peer_hash(key) & lp->peer_mask;
    while (lp->peers[i].count && memcmp(lp->peers[i].key, key, TFN_PEER_KEY_BYTES))
        i = (i + 1) & lp->peer_mask;
    return i;
}

static int peer_count(const tfn_loop *lp, const uint8_t *key)
{
    return lp->peers[peer_find(lp, key)].count;
}

/* The table holds at most max_conns keys in 2 x max_conns (or more) slots: never full. */
static void peer_inc(tfn_loop *lp, const uint8_t *key)
{
    peer_ent *e = &lp->peers[peer_find(lp, key)];
    if (!e->count)
        memcpy(e->key, key, TFN_PEER_KEY_BYTES);
    e->count++;
}

static void peer_dec(tfn_loop *lp, const uint8_t *key)
{
    size_t m = lp->peer_mask, i = peer_find(lp, key);
    if (!lp->peers[i].count || --lp->peers[i].count)
        return;
    /* Backward-shift: move later entries of the cluster into the hole when their home allows. */
    for (size_t j = i;;) {
        j = (j + 1) & m;
        if (!lp->peers[j].count)
            break;
        size_t home = peer_hash(lp->peers[j].key) & m;
        if (((j - home) & m) >= ((j - i) & m)) {
            lp->peers[i] = lp->peers[j];
            lp->peers[j].count = 0;
            i = j;
        }
    }
}

/* The peer of an accepted socket: the process of a Unix peer (every client of one user shares
 * its UID, so a UID key would put them all behind one cap), the address of a TCP peer. */
static void peer_key(int fd, int is_unix, uint8_t key[TFN_PEER_KEY_BYTES])
{
    memset(key, 0, TFN_PEER_KEY_BYTES);
    if (is_unix) {
        struct ucred cr;
        socklen_t cl = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0) {
            key[0] = 1;
            memcpy(key + 1, &cr.uid, sizeof cr.uid);
            memcpy(key + 1 + sizeof cr.uid, &cr.pid, sizeof cr.pid);
        }
        return;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
        tfn_peer_key_of((const struct sockaddr *)&ss, key);
}

void tfn_peer_key_of(const struct sockaddr *sa, uint8_t key[TFN_PEER_KEY_BYTES])
{
    memset(key, 0, TFN_PEER_KEY_BYTES);
    if (sa->sa_family == AF_INET) {
        key[0] = 4;
        memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            key[0] = 4;
            memcpy(key + 1, a->s6_addr + 12, 4);
        } else {
            key[0] = 6;
            memcpy(key + 1, a->s6_addr, 8); /* the /64 */
        }
    }
}

static void peer_name(const uint8_t key[TFN_PEER_KEY_BYTES], char *buf, size_t cap)
{
    if (key[0] == 1) {
        uid_t uid;
        pid_t pid;
        memcpy(&uid, key + 1, sizeof uid);
        memcpy(&pid, key + 1 + sizeof uid, sizeof pid);
        snprintf(buf, cap, "pid %d (uid %u)", (int)pid, (unsigned)uid);
    } else if (key[0] == 4) {
        inet_ntop(AF_INET, key + 1, buf, (socklen_t)cap);
    } else if (key[0] == 6) {
        char a[INET6_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET6, key + 1, a, sizeof a);
        snprintf(buf, cap, "%s/64", a);
    } else {
        snprintf(buf, cap, "unknown peer");
    }
}

/* Whether a new connection of this peer may be taken; why is set when not. */
static int admit(tfn_loop *lp, const uint8_t key[TFN_PEER_KEY_BYTES], const char **why)
{
    int n = lp->nconns, max = lp->cfg.max_conns;
    if (n >= max) {
        lp->ctr.refused_full++;
        *why = "the server is full (max-conns)";
        return 0;
    }
    int pc = key[0] ? peer_count(lp, key) : 0;
    if (key[0] && pc >= lp->cfg.max_conns_per_peer) {
        lp->ctr.refused_peer++;
        *why = "this peer holds its maximum (max-conns-per-peer)";
        return 0;
    }
    if (n >= max - lp->cfg.conn_reserve && pc >= TFN_RESERVE_PEER_CONNS) {
        lp->ctr.refused_reserve++;
        *why = "only the reserve is left, for peers with few connections";
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- connections */

static void conn_free(tfn_conn *c)
{
    tfn_tls_conn_free(c->ssl, 0);
    mem_sub(c->lp, c->ocap + (c->ibuf ? c->icap : 0));
    free(c->ibuf);
    free(c->obuf);
    free(c);
}

static void conn_close(tfn_loop *lp, tfn_conn *c, const char *why)
{
    if (c->dead)
        return;
    c->dead = 1;
    c->ops->on_close(c, why);
    if (c->ssl) {
        tfn_tls_conn_free(c->ssl, !c->tls_hs && !c->tls_failed);
        c->ssl = NULL;
    }
    close(c->rfd);
    if (c->peer[0])
        peer_dec(lp, c->peer);
    stat_add(lp->cfg.stat_conns_open, -1);
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

/* The frame is whole: run it here or park it on a worker. 1: go on; 0: parked. */
static int frame_done(tfn_loop *lp, tfn_conn *c)
{
    c->state = IN_HEAD;
    /* The next frame's clock starts with its first byte (already here when pipelined). */
    c->frame_t0_ns = c->ipos < c->iend ? now_ns() : 0;
    c->frame_bytes = c->iend - c->ipos;
    if (!c->blocking && lp->nworkers && c->ops->is_heavy && c->ops->is_heavy(c)) {
        park(lp, c);
        return 0;
    }
    run_frame(c, c->blocking ? TFN_ON_STDIO : TFN_ON_LOOP);
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
    c->body_len = h->body_len;
    uint64_t have = c->iend - c->ipos;
    uint64_t take = have < h->body_len ? have : h->body_len;
    if (c->body && take)
        memcpy(c->body, c->ibuf + c->ipos, take);
    c->ipos += take;
    c->got = take;
    if (c->ipos == c->iend)
        c->ipos = c->iend = 0;
    if (c->got == c->body_len)
        return frame_done(lp, c);
    c->state = IN_BODY;
    return 1;
}

/* Between frames or inside a header: ask head() about what is here, else read more. */
static int step_head(tfn_loop *lp, tfn_conn *c, const char **why)
{
    size_t avail = c->iend - c->ipos;
    if (avail) {
        tfn_head h = {0, 0, NULL};
        int r = c->ops->head(c, c->ibuf + c->ipos, avail, &h);
        if (r < 0) {
            tfn_conn_close(c, c->why ? c->why : "closed after an error");
            return 1;
        }
        if (r == 0)
            return frame_begin(lp, c, &h, avail, why);
        size_t need = (size_t)r;
        if (need <= avail || need > c->ops->max_head || need > c->icap / 2) {
            *why = "internal error: a frame header that cannot be decided";
            return -1;
        }
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
        /* Small or dropped bodies through the input buffer; what follows stays there. */
        c->ipos = c->iend = 0;
        n = conn_read(c, c->ibuf, c->icap);
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
    }
    if (n > 0)
        return c->got == c->body_len ? frame_done(lp, c) : 1;
    return read_stopped(n, 1, why);
}

static int conn_step(tfn_loop *lp, tfn_conn *c, const char **why)
{
    c->rested = 0;
    if (!c->ibuf) {
        c->ibuf = malloc(c->icap);
        if (!c->ibuf) {
            *why = "out of memory for input";
            return -1;
        }
        mem_add(lp, c->icap);
    }
    return c->state == IN_HEAD ? step_head(lp, c, why) : step_body(lp, c, why);
}

/* EPOLLOUT is registered only while output is blocked. */
static void want_out(tfn_loop *lp, tfn_conn *c, int on)
{
    if (c->want_out == on || c->blocking)
        return;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET | (on ? EPOLLOUT : 0),
                             .data.ptr = c};
    epoll_ctl(lp->ep, EPOLL_CTL_MOD, c->rfd, &ev);
    c->want_out = on;
}

/* 1 when the connection is at rest between frames with nothing owed to the peer. */
static int at_rest(tfn_conn *c)
{
    return c->state == IN_HEAD && c->ipos == c->iend && !owes_out(c) &&
           !(c->ops->busy && c->ops->busy(c));
}

/* Drives a TLS handshake: 1 done, 0 waiting for the socket, -1 failed (closed). */
static int tls_handshake(tfn_loop *lp, tfn_conn *c)
{
    char why[256] = "";
    int r = tfn_tls_handshake(c->ssl, why, sizeof why);
    if (r == TFN_TLS_WANT_READ || r == TFN_TLS_WANT_WRITE) {
        want_out(lp, c, r == TFN_TLS_WANT_WRITE);
        return 0;
    }
    if (r < 0) {
        char pn[INET6_ADDRSTRLEN + 16];
        peer_name(c->peer, pn, sizeof pn);
        tfn_log_limited(lp, "TLS handshake with %s failed: %s", pn, why);
        c->tls_failed = 1;
        lp->ctr.closed_tls++;
        conn_close(lp, c, "TLS handshake failed");
        return -1;
    }
    c->tls_hs = 0;
    c->drained = 0; /* application data may have come with the handshake's last flight */
    want_out(lp, c, out_pending(c));
    return 1;
}

static void conn_drive(tfn_loop *lp, tfn_conn *c)
{
    int budget = lp->cfg.frames_per_turn;
    while (!c->dead) {
        /* A parked connection belongs to its worker (which also sends the reply). */
        if (c->parked)
            return;
        if (c->doomed) {
            conn_close(lp, c, c->why);
            return;
        }
        if (c->tls_hs) {
            if (lp->stopping && !lp->cfg.drain_on_stop) {
                conn_close(lp, c, "server shutting down");
                return;
            }
            if (tls_handshake(lp, c) <= 0)
                return;
        }
        if (pull_fill(c) < 0) {
            conn_close(lp, c, "a reply stream could not be read");
            return;
        }
        if (out_pending(c)) {
            int r = conn_flush(c);
            if (r < 0) {
                conn_close(lp, c, "peer gone while a reply was being sent");
                return;
            }
            if (r == 0) {
                want_out(lp, c, 1); /* EPOLLOUT resumes us */
            } else {
                want_out(lp, c, 0);
                if (c->ops->on_flushed)
                    c->ops->on_flushed(c);
                if (c->pull_more) { /* the next chunk of a stream */
                    if (--budget == 0) {
                        add_ready(lp, c);
                        return;
                    }
                    continue;
                }
            }
        }
        if (c->closing) {
            if (!owes_out(c) && !(c->ops->busy && c->ops->busy(c)))
                conn_close(lp, c, c->why);
            return;
        }
        if (c->nzc || c->pull_more || c->oend - c->opos > lp->cfg.out_high)
            return; /* the peer must read first */
        if (out_pending(c) && !tfn_mem_room(lp, 0)) {
            lp->ctr.mem_waits++;
            return; /* over the memory limit: output waits for its peer (EPOLLOUT resumes) */
        }
        if (lp->stopping && !lp->cfg.drain_on_stop) {
            conn_close(lp, c, "server shutting down");
            return;
        }
        const char *why = NULL;
        int r = conn_step(lp, c, &why);
        if (r < 0) {
            conn_close(lp, c, why ? why : "error");
            return;
        }
        if (r == 0) {
            if (c->eof && !c->parked && at_rest(c))
                conn_close(lp, c, "peer closed");
            return;
        }
        if (--budget == 0) {
            add_ready(lp, c);
            return;
        }
    }
}

static tfn_conn *conn_new(tfn_loop *lp, int fd, const tfn_ops *ops, const char *transport)
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
    mem_add(lp, icap);
    c->lp = lp;
    c->ops = ops;
    c->transport = transport;
    c->rfd = c->wfd = fd;
    c->is_sock = 1;
    c->last_io_ns = now_ns();
    return c;
}

static void accept_all(tfn_loop *lp, listener *l)
{
    for (;;) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                tfn_log_limited(lp, "accept on %s failed: %s", l->label, strerror(errno));
            return;
        }
        uint8_t key[TFN_PEER_KEY_BYTES];
        peer_key(fd, l->path[0] != 0, key);
        const char *why = NULL;
        size_t icap = l->ops->ibuf_bytes ? l->ops->ibuf_bytes : TFN_IBUF_DEFAULT;
        if (admit(lp, key, &why) && !tfn_mem_room(lp, icap)) {
            lp->ctr.refused_memory++;
            why = "its input buffer would pass the memory limit (max-memory)";
        }
        if (why) {
            char pn[INET6_ADDRSTRLEN + 16];
            peer_name(key, pn, sizeof pn);
            tfn_log_limited(lp, "refusing a %s connection from %s: %s (%d open)", l->label, pn, why,
                            lp->nconns);
            close(fd);
            continue;
        }
        int sz = lp->cfg.sockbuf_bytes;
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
        if (!l->path[0]) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        tfn_conn *c = conn_new(lp, fd, l->ops, l->label);
        if (!c) {
            tfn_log_limited(lp, "refusing a connection: out of memory");
            close(fd);
            continue;
        }
        c->pass_fds = l->pass_fds;
        c->opened_ns = c->last_io_ns;
        memcpy(c->peer, key, TFN_PEER_KEY_BYTES); /* for the log lines of the handshake */
        if (l->tls) {
            c->ssl = tfn_tls_conn_new(l->tls, fd);
            c->tls_hs = 1;
            if (!c->ssl) {
                tfn_log_limited(lp, "refusing a connection: out of memory for TLS");
                close(fd);
                conn_free(c);
                continue;
            }
        }
        if (l->ops->on_open && l->ops->on_open(c) < 0) {
            close(fd);
            conn_free(c);
            continue;
        }
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = c};
        if (epoll_ctl(lp->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            c->ops->on_close(c, "epoll_ctl failed");
            close(fd);
            conn_free(c);
            continue;
        }
        stat_add(lp->cfg.stat_conns_total, 1);
        stat_add(lp->cfg.stat_conns_open, 1);
        memcpy(c->peer, key, TFN_PEER_KEY_BYTES);
        if (key[0])
            peer_inc(lp, key);
        c->next = lp->conns;
        if (lp->conns)
            lp->conns->prev = c;
        lp->conns = c;
        lp->nconns++;
    }
}

/* ---------------------------------------------------------------- stdio */

static void *stdio_main(void *arg)
{
    tfn_loop *lp = arg;
    tfn_conn *c = conn_new(lp, 0, lp->stdio_ops, "stdio");
    const char *why = "end of input";
    if (c && c->ops->on_open && c->ops->on_open(c) < 0) {
        conn_free(c);
        c = NULL;
    }
    if (c) {
        c->wfd = 1;
        c->blocking = 1;
        c->is_sock = 0;
        stat_add(lp->cfg.stat_conns_total, 1);
        stat_add(lp->cfg.stat_conns_open, 1);
        for (;;) {
            if (pull_fill(c) < 0) {
                why = "a reply stream could not be read";
                break;
            }
            if (out_pending(c)) {
                if (conn_flush(c) < 0) {
                    why = "stdout closed";
                    break;
                }
                if (c->ops->on_flushed)
                    c->ops->on_flushed(c);
            }
            if (c->doomed || c->closing) {
                why = c->why;
                break;
            }
            const char *w = NULL;
            int r = conn_step(lp, c, &w);
            if (r < 0) {
                why = w ? w : "error";
                break;
            }
            if (r == 0 && c->eof && at_rest(c))
                break;
        }
        c->ops->on_close(c, why);
        stat_add(lp->cfg.stat_conns_open, -1);
        conn_free(c);
    }
    __atomic_store_n(&lp->stdio_done, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    ssize_t w = write(lp->stdio_efd, &one, sizeof one);
    (void)w;
    return NULL;
}

int tfn_loop_add_stdio(tfn_loop *lp, const tfn_ops *ops)
{
    if (lp->stdio_ops)
        return TF_E_INVALID_ARG;
    lp->stdio_ops = ops;
    return 0;
}

/* ---------------------------------------------------------------- listeners */

static int add_listener(tfn_loop *lp, int fd, const tfn_ops *ops, const char *label, int pass_fds,
                        const char *path)
{
    if (lp->nls >= TFN_MAX_LISTEN) {
        close(fd);
        return TF_E_LIMIT;
    }
    listener *l = &lp->ls[lp->nls];
    memset(l, 0, sizeof *l);
    l->fd = fd;
    l->ops = ops;
    l->label = label;
    l->pass_fds = pass_fds;
    if (path) {
        struct stat st;
        strcpy(l->path, path);
        if (stat(path, &st) == 0) {
            l->dev = st.st_dev;
            l->ino = st.st_ino;
        }
    }
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.u64 = TAG_LISTEN + (uint64_t)lp->nls;
    if (epoll_ctl(lp->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        int e = errno;
        close(fd);
        if (path)
            unlink(path);
        return -e;
    }
    lp->nls++;
    return 0;
}

int tfn_listen_unix(tfn_loop *lp, const char *path, const char *label, const tfn_ops *ops,
                    int pass_fds)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        tfn_log(lp, 1, "error: socket path too long: %s", path);
        return TF_E_INVALID_ARG;
    }
    strcpy(sa.sun_path, path);
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            tfn_log(lp, 1, "error: %s exists and is not a socket: refusing to replace it", path);
            return -EEXIST;
        }
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe < 0)
            return -errno;
        int live = connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0;
        int e = errno;
        close(probe);
        if (live) {
            tfn_log(lp, 1, "error: %s: a server is already listening there", path);
            return -EADDRINUSE;
        }
        if (e != ECONNREFUSED) {
            tfn_log(lp, 1, "error: %s: cannot tell whether it is stale: %s", path, strerror(e));
            return -e;
        }
        unlink(path);
        tfn_log(lp, 0, "replaced a stale socket at %s", path);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /* 0600 from the start: no window in which others could connect. */
    mode_t old = umask(0177);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    int e = errno;
    umask(old);
    if (rc != 0 || listen(fd, 1024) != 0) {
        e = errno;
        tfn_log(lp, 1, "error: cannot listen on %s: %s", path, strerror(e));
        close(fd);
        return -e;
    }
    chmod(path, 0600);
    rc = add_listener(lp, fd, ops, label, pass_fds, path);
    if (rc)
        return rc;
    tfn_log(lp, 1, "listening %s %s", label, path);
    return 0;
}

int tfn_listen_tcp(tfn_loop *lp, const char *spec, const tfn_ops *ops)
{
    char host[256] = "127.0.0.1", port[32];
    const char *colon = strrchr(spec, ':');
    const char *ps = colon ? colon + 1 : spec;
    if (colon) {
        size_t hl = (size_t)(colon - spec);
        const char *h = spec;
        if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
            h++;
            hl -= 2;
        }
        if (hl >= sizeof host)
            return TF_E_INVALID_ARG;
        if (hl) {
            memcpy(host, h, hl);
            host[hl] = 0;
        }
    }
    /* A port is 0..65535 in decimal: getaddrinfo would wrap 99999 to 34463. */
    size_t pl = strlen(ps);
    if (pl == 0 || pl > 5 || strspn(ps, "0123456789") != pl || atol(ps) > 65535) {
        tfn_log(lp, 1, "error: --tcp %s: the port must be a number from 0 to 65535", spec);
        return TF_E_INVALID_ARG;
    }
    strcpy(port, ps);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g != 0) {
        tfn_log(lp, 1, "error: --tcp %s: %s", spec, gai_strerror(g));
        return TF_E_INVALID_ARG;
    }
    int fd = -1, e = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1024) == 0)
            break;
        e = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        tfn_log(lp, 1, "error: cannot listen on tcp %s: %s", spec, strerror(e));
        return -e;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char hb[NI_MAXHOST] = "?", pb[NI_MAXSERV] = "?";
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    getnameinfo((struct sockaddr *)&ss, sl, hb, sizeof hb, pb, sizeof pb,
                NI_NUMERICHOST | NI_NUMERICSERV);
    int rc = add_listener(lp, fd, ops, "tcp", 0, NULL);
    if (rc)
        return rc;
    lp->ls[lp->nls - 1].tls = lp->cfg.tls;
    const char *what = lp->cfg.tls ? " (TLS)" : "";
    if (ss.ss_family == AF_INET6)
        tfn_log(lp, 1, "listening tcp [%s]:%s%s", hb, pb, what);
    else
        tfn_log(lp, 1, "listening tcp %s:%s%s", hb, pb, what);
    return 0;
}

static void close_listeners(tfn_loop *lp)
{
    for (int i = 0; i < lp->nls; i++) {
        listener *l = &lp->ls[i];
        if (l->fd < 0)
            continue;
        close(l->fd);
        l->fd = -1;
        struct stat st;
        /* Remove the socket file only if it is still ours. */
        if (l->path[0] && stat(l->path, &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino)
            unlink(l->path);
    }
}

/* ---------------------------------------------------------------- the loop */

void tfn_loop_stop(tfn_loop *lp, const char *why)
{
    if (lp->stopping)
        return;
    lp->stopping = 1;
    lp->stop_deadline_ns = now_ns() + 1000000000ll;
    __atomic_store_n(&lp->stopping_flag, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    ssize_t w = write(lp->stop_efd, &one, sizeof one);
    (void)w;
    tfn_log(lp, 1, "shutting down (%s)", why);
    close_listeners(lp);
    if (lp->cfg.on_stop)
        lp->cfg.on_stop(lp, lp->cfg.ud);
    for (tfn_conn *c = lp->conns, *next; c; c = next) {
        next = c->next;
        if (c->parked)
            continue;
        if (lp->cfg.drain_on_stop) {
            c->drained = 0; /* take what the socket holds */
            add_ready(lp, c);
            continue;
        }
        if (out_pending(c))
            conn_flush(c); /* one last try, never blocking */
        conn_close(lp, c, "server shutting down");
    }
}

/* A connection at rest for a tick gives back its buffers: the layer's (input, output) and, by
 * ops->on_idle, the server's. The input buffer comes back with the next byte. */
static void rest(tfn_conn *c)
{
    if (c->rested || c->blocking || (c->ops->busy && c->ops->busy(c)))
        return;
    c->rested = 1;
    obuf_release(c);
    if (c->ibuf && c->state == IN_HEAD && c->ipos == c->iend) {
        mem_sub(c->lp, c->icap);
        free(c->ibuf);
        c->ibuf = NULL;
        c->ipos = c->iend = 0;
    }
    if (c->ops->on_idle)
        c->ops->on_idle(c);
}

static void timeouts(tfn_loop *lp)
{
    int64_t stall = (int64_t)lp->cfg.stall_timeout_s * 1000000000ll;
    int64_t idle = (int64_t)lp->cfg.idle_timeout_s * 1000000000ll;
    uint64_t rate = lp->cfg.min_rate;
    /* Full: only the reserve is left; then idle_full_timeout_s applies too. */
    int full = lp->nconns >= lp->cfg.max_conns - lp->cfg.conn_reserve;
    int64_t full_idle = (int64_t)lp->cfg.idle_full_timeout_s * 1000000000ll;
    if (full && full_idle > 0 && (idle <= 0 || full_idle < idle))
        idle = full_idle;
    int64_t now = now_ns();
    uint64_t used0 = lp->cfg.mem_used ? __atomic_load_n(lp->cfg.mem_used, __ATOMIC_RELAXED) : 0;
    for (tfn_conn *c = lp->conns, *next; c; c = next) {
        next = c->next;
        if (c->parked || c->dead)
            continue;
        if (c->tls_hs) {
            /* A handshake has the stall timeout from the accept (the idle one without it). */
            int64_t hs = stall > 0 ? stall : idle;
            if (hs > 0 && now - c->opened_ns > hs) {
                lp->ctr.closed_tls++;
                lp->ctr.closed_stall++;
                char pn[INET6_ADDRSTRLEN + 16];
                peer_name(c->peer, pn, sizeof pn);
                tfn_log_limited(lp, "TLS handshake with %s not finished in %lld s", pn,
                                (long long)(hs / 1000000000ll));
                conn_close(lp, c, "stalled in the TLS handshake");
            }
            continue;
        }
        int64_t quiet = now - c->last_io_ns;
        /* Output the kernel holds for a peer that does not read is output pending too: a
         * backlog that has not shrunk for the stall timeout is a stalled reader. */
        int outq = 0;
        if (stall > 0 && ioctl(c->wfd, SIOCOUTQ, &outq) != 0)
            outq = 0;
        if (outq <= 0 || outq < c->last_outq)
            c->outq_since_ns = now;
        c->last_outq = outq;
        int deaf = outq > 0 && now - c->outq_since_ns > stall;
        int in_frame = c->state != IN_HEAD || c->ipos < c->iend;
        int mid = owes_out(c) || in_frame;
        /* The rate is the peer's only while the layer is reading: output that waits (or the
         * memory limit) stops the reading, and restarts the clock. */
        if (!in_frame || owes_out(c) || c->closing) {
            c->frame_t0_ns = in_frame ? now : 0;
            c->frame_bytes = 0;
        }
        int64_t took = c->frame_t0_ns ? now - c->frame_t0_ns : 0;
        int slow = rate && in_frame && took > (int64_t)TFN_RATE_GRACE_S * 1000000000ll &&
                   (double)c->frame_bytes < (double)rate * (double)took / 1e9;
        if (stall > 0 && quiet > stall && (mid || deaf)) {
            lp->ctr.closed_stall++;
            conn_close(lp, c,
                       owes_out(c) || deaf ? "stalled: the peer does not read its replies"
                                           : "stalled in the middle of a frame");
        } else if (slow) {
            lp->ctr.closed_slow++;
            conn_close(lp, c, "too slow: a frame below the minimum receive rate");
        } else if (!mid && idle > 0 && quiet > idle && !(c->ops->busy && c->ops->busy(c)) &&
                   !(c->ops->keep_idle && c->ops->keep_idle(c))) {
            lp->ctr.closed_idle++;
            conn_close(lp, c, "idle timeout");
        } else if (!mid && !c->closing && quiet > 1000000000ll) {
            rest(c); /* idle for a tick: give its buffers back */
        }
    }
#ifdef __GLIBC__
    /* What resting connections gave back goes back to the system too, not only to the heap. */
    uint64_t used1 = lp->cfg.mem_used ? __atomic_load_n(lp->cfg.mem_used, __ATOMIC_RELAXED) : 0;
    if (used1 + ((uint64_t)1 << 20) < used0)
        malloc_trim(0);
#endif
}

static void on_done(tfn_loop *lp)
{
    uint64_t v;
    ssize_t r = read(lp->done_efd, &v, sizeof v);
    (void)r;
    pthread_mutex_lock(&lp->dlock);
    tfn_conn *list = lp->dhead;
    lp->dhead = NULL;
    pthread_mutex_unlock(&lp->dlock);
    while (list) {
        tfn_conn *c = list;
        list = c->qnext;
        c->qnext = NULL;
        c->parked = 0;
        lp->parked--;
        if (lp->stopping && !lp->cfg.drain_on_stop) {
            conn_flush(c);
            conn_close(lp, c, "server shutting down");
            continue;
        }
        c->drained = 0;
        conn_drive(lp, c);
    }
}

int tfn_loop_open(const tfn_config *cfg, tfn_loop **out)
{
    tfn_loop *lp = calloc(1, sizeof *lp);
    if (!lp)
        return TF_E_NOMEM;
    lp->cfg = *cfg;
    if (lp->cfg.max_conns <= 0)
        lp->cfg.max_conns = 4096;
    if (!lp->cfg.out_high)
        lp->cfg.out_high = (size_t)256 << 10;
    if (!lp->cfg.out_max)
        lp->cfg.out_max = (size_t)16 << 20;
    if (lp->cfg.out_high > lp->cfg.out_max / 4)
        lp->cfg.out_high = lp->cfg.out_max / 4; /* stop reading well before the limit */
    if (lp->cfg.sockbuf_bytes <= 0)
        lp->cfg.sockbuf_bytes = 4 << 20;
    if (lp->cfg.frames_per_turn <= 0)
        lp->cfg.frames_per_turn = 32;
    if (lp->cfg.conn_reserve == 0)
        lp->cfg.conn_reserve = lp->cfg.max_conns / 16;
    if (lp->cfg.conn_reserve < 0 || lp->cfg.conn_reserve >= lp->cfg.max_conns)
        lp->cfg.conn_reserve = 0;
    if (lp->cfg.max_conns_per_peer <= 0)
        lp->cfg.max_conns_per_peer = lp->cfg.max_conns - lp->cfg.conn_reserve;
    size_t pcap = 16;
    while (pcap < 2 * (size_t)lp->cfg.max_conns)
        pcap *= 2;
    lp->peers = calloc(pcap, sizeof *lp->peers);
    lp->peer_mask = pcap - 1;
    lp->ep = lp->sig_fd = lp->done_efd = lp->stdio_efd = lp->stop_efd = -1;
    if (!lp->peers) {
        free(lp);
        return TF_E_NOMEM;
    }
    pthread_mutex_init(&lp->qlock, NULL);
    pthread_cond_init(&lp->qcond, NULL);
    pthread_mutex_init(&lp->dlock, NULL);

    /* Signals are taken by the loop's signalfd: block them before any thread exists so every
     * thread inherits the mask. A peer that vanishes must never kill us with SIGPIPE. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, &lp->old_mask);
    struct sigaction sa = {.sa_handler = SIG_IGN};
    sigaction(SIGPIPE, &sa, &lp->old_pipe);

    lp->ep = epoll_create1(EPOLL_CLOEXEC);
    lp->done_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    lp->stdio_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    lp->stop_efd = eventfd(0, EFD_CLOEXEC);
    lp->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (lp->ep < 0 || lp->done_efd < 0 || lp->stdio_efd < 0 || lp->sig_fd < 0 || lp->stop_efd < 0) {
        int e = -errno;
        tfn_loop_close(lp);
        return e;
    }
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.u64 = TAG_SIGNAL;
    epoll_ctl(lp->ep, EPOLL_CTL_ADD, lp->sig_fd, &ev);
    ev.data.u64 = TAG_DONE;
    epoll_ctl(lp->ep, EPOLL_CTL_ADD, lp->done_efd, &ev);
    ev.data.u64 = TAG_STDIO;
    epoll_ctl(lp->ep, EPOLL_CTL_ADD, lp->stdio_efd, &ev);
    *out = lp;
    return 0;
}

void tfn_loop_close(tfn_loop *lp)
{
    if (!lp)
        return;
    pthread_mutex_lock(&lp->qlock);
    lp->qstop = 1;
    pthread_cond_broadcast(&lp->qcond);
    pthread_mutex_unlock(&lp->qlock);
    for (int i = 0; i < lp->nworkers; i++)
        pthread_join(lp->workers[i], NULL);
    free(lp->workers);
    if (lp->stdio_started) {
        uint64_t one = 1;
        ssize_t w = write(lp->stop_efd, &one, sizeof one);
        (void)w;
        pthread_join(lp->stdio_thr, NULL);
    }
    close_listeners(lp);
    /* Connections a worker still held when the loop ended come back through the done list. */
    pthread_mutex_lock(&lp->dlock);
    for (tfn_conn *c = lp->dhead; c; c = c->qnext)
        c->parked = 0;
    lp->dhead = NULL;
    pthread_mutex_unlock(&lp->dlock);
    while (lp->conns)
        conn_close(lp, lp->conns, "server stopped");
    for (tfn_conn *c = lp->ready, *next; c; c = next) {
        next = c->qnext;
        c->in_ready = 0;
        if (c->dead) {
            c->qnext = lp->grave;
            lp->grave = c;
        }
    }
    lp->ready = lp->ready_tail = NULL;
    while (lp->grave) {
        tfn_conn *c = lp->grave;
        lp->grave = c->qnext;
        conn_free(c);
    }
    pthread_mutex_destroy(&lp->qlock);
    pthread_cond_destroy(&lp->qcond);
    pthread_mutex_destroy(&lp->dlock);
    if (!lp->cfg.quiet)
        tfn_log_gate_report(lp->cfg.name);
    free(lp->peers);
    int fds[] = {lp->ep, lp->sig_fd, lp->done_efd, lp->stdio_efd, lp->stop_efd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    sigaction(SIGPIPE, &lp->old_pipe, NULL);
    pthread_sigmask(SIG_SETMASK, &lp->old_mask, NULL);
    free(lp);
}

static int start_threads(tfn_loop *lp)
{
    int n = lp->cfg.workers;
    if (n < 0) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        n = ncpu < 2 ? 2 : (int)(ncpu > 64 ? 64 : ncpu);
    }
    if (n > 0) {
        lp->workers = calloc((size_t)n, sizeof(pthread_t));
        if (!lp->workers)
            return TF_E_NOMEM;
        for (int i = 0; i < n; i++) {
            if (pthread_create(&lp->workers[i], NULL, worker_main, lp) != 0)
                return TF_E_NOMEM;
            lp->nworkers = i + 1;
        }
    }
    if (lp->stdio_ops) {
        if (pthread_create(&lp->stdio_thr, NULL, stdio_main, lp) != 0)
            return TF_E_NOMEM;
        lp->stdio_started = 1;
        tfn_log(lp, 1, "listening stdio");
    }
    return 0;
}

static void drain_ready(tfn_loop *lp)
{
    tfn_conn *r = lp->ready;
    lp->ready = lp->ready_tail = NULL;
    while (r) {
        tfn_conn *c = r;
        r = c->qnext;
        c->qnext = NULL;
        c->in_ready = 0;
        if (c->dead) {
            c->qnext = lp->grave;
            lp->grave = c;
            continue;
        }
        conn_drive(lp, c);
    }
}

static void bury(tfn_loop *lp)
{
    while (lp->grave) {
        tfn_conn *c = lp->grave;
        lp->grave = c->qnext;
        conn_free(c);
    }
}

/* The last step of a draining shutdown: the server makes what it took durable and queues the
 * replies (before_sleep), each connection gets one non-blocking try to send them. */
static void final_close(tfn_loop *lp)
{
    if (lp->cfg.before_sleep)
        lp->cfg.before_sleep(lp, lp->cfg.ud, 0);
    for (tfn_conn *c = lp->conns, *next; c; c = next) {
        next = c->next;
        if (c->parked)
            continue;
        if (out_pending(c) && !c->doomed)
            conn_flush(c);
        conn_close(lp, c, "server shutting down");
    }
    drain_ready(lp);
    bury(lp);
}

int tfn_loop_run(tfn_loop *lp)
{
    int rc = start_threads(lp);
    if (rc)
        return rc;
    struct epoll_event evs[64];
    int64_t next_tick = now_ns() + 1000000000ll;
    for (;;) {
        if (lp->stopping && lp->parked == 0 &&
            (!lp->stdio_started || __atomic_load_n(&lp->stdio_done, __ATOMIC_ACQUIRE)) &&
            (!lp->cfg.drain_on_stop || !lp->ready || now_ns() > lp->stop_deadline_ns))
            break;
        int n = epoll_wait(lp->ep, evs, 64, lp->ready ? 0 : 250);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            uint64_t tag = evs[i].data.u64;
            if (tag == TAG_SIGNAL) {
                struct signalfd_siginfo si;
                while (read(lp->sig_fd, &si, sizeof si) == (ssize_t)sizeof si)
                    tfn_loop_stop(lp, si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
            } else if (tag == TAG_DONE) {
                on_done(lp);
            } else if (tag == TAG_STDIO) {
                uint64_t v;
                ssize_t r = read(lp->stdio_efd, &v, sizeof v);
                (void)r;
                if (lp->nls == 0)
                    tfn_loop_stop(lp, "end of stdio input");
            } else if (tag >= TAG_LISTEN && tag < TAG_LISTEN + (uint64_t)lp->nls) {
                listener *l = &lp->ls[tag - TAG_LISTEN];
                if (l->fd >= 0 && !lp->stopping)
                    accept_all(lp, l);
            } else {
                tfn_conn *c = evs[i].data.ptr;
                if (c->dead)
                    continue;
                if (evs[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                    c->rdhup = 1;
                if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                    c->drained = 0;
                if (c->ssl && (evs[i].events & EPOLLOUT))
                    c->drained = 0; /* a TLS read may have waited for the socket to take bytes */
                conn_drive(lp, c);
            }
        }
        drain_ready(lp);
        bury(lp);
        if (lp->cfg.before_sleep)
            lp->cfg.before_sleep(lp, lp->cfg.ud, lp->ready != NULL);
        int64_t now = now_ns();
        if (now >= next_tick) {
            timeouts(lp);
            if (!lp->cfg.quiet)
                tfn_log_gate_report(lp->cfg.name);
            next_tick = now + 1000000000ll;
        }
    }
    if (lp->cfg.drain_on_stop)
        final_close(lp);
    return 0;
}

/* The event loop: listeners, socket connections (unix, tcp, the shm control sockets), the worker
 * pool, stdio, signals and shutdown (docs/protocol.md, "Scheduling").
 *
 * Each connection is a small state machine driven by conn_drive(): flush the pending reply, then
 * read and decode the next frame. Sockets are non-blocking and registered edge-triggered once, so
 * the loop never needs epoll_ctl again; a connection stops reading while its reply is pending or
 * its request is parked on a worker, which bounds its memory and makes a slow reader stall only
 * itself. The stdio connection runs the same state machine on blocking fds in its own thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "server/server.h"

#define IBUF_BYTES ((size_t)64 << 10)
#define SOCKBUF_BYTES (4 << 20)
#define DRIVE_BUDGET 32 /* frames per connection per loop turn (fairness) */

enum { CK_UNIX, CK_TCP, CK_STDIO, CK_SHM_HS, CK_SHM_CTL };
enum { ST_HEAD, ST_BODY, ST_DISCARD };
enum { TAG_SIGNAL = 1, TAG_DONE = 2, TAG_STDIO = 3, TAG_LISTEN = 16 };

static const char *kind_name[] = {"unix", "tcp", "stdio", "shm", "shm"};

typedef struct loop loop;

typedef struct conn {
    srv_ctx ctx;
    loop *lp;
    int rfd, wfd;
    int kind;
    int pass_fds; /* recvmsg with SCM_RIGHTS (unix sockets) */
    int is_sock;
    int blocking; /* stdio: blocking fds, poll with the stop eventfd */
    int drained;  /* the last read came back short: wait for the next edge */
    uint8_t *ibuf;
    size_t ipos, iend;
    int state;
    tf_wire_request rq;
    int rq_err;
    uint64_t got, discard_left;
    srv_req_data data;
    srv_reply rep;
    uint64_t out_off, out_len;
    int out_pending;
    int parked;
    int dead;
    int want_out; /* registered for EPOLLOUT (only while a reply is blocked) */
    int64_t last_io_ns;
    uint8_t hs[TF_SHM_HELLO_BYTES];
    size_t hs_got;
    int hs_fd;
    srv_shm *shm;
    struct conn *prev, *next; /* every live socket connection */
    struct conn *qnext;       /* worker queue, done list, ready list, graveyard */
    int in_ready;
} conn;

typedef struct listener {
    int fd;
    int kind;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    dev_t dev;
    ino_t ino;
} listener;

struct loop {
    srv *s;
    int ep, sig_fd, done_efd, stdio_efd;
    listener ls[3 * TF_SERVER_MAX_LISTEN];
    int nls;
    conn *conns;
    int nconns;
    conn *ready, *ready_tail;
    conn *grave;
    int stopping;
    int stopping_flag; /* atomic copy of `stopping` for the workers */
    int parked;
    /* worker pool */
    pthread_t *workers;
    int nworkers;
    pthread_mutex_t qlock;
    pthread_cond_t qcond;
    conn *qhead, *qtail;
    int qstop;
    pthread_mutex_t dlock;
    conn *dhead;
    /* stdio */
    pthread_t stdio_thr;
    int stdio_started, stdio_done;
};

/* ---------------------------------------------------------------- I/O primitives */

/* Reads up to n bytes. >0 bytes, 0 EOF, -EAGAIN, -ECANCELED (stopping, blocking mode), -errno. */
static ssize_t conn_read(conn *c, void *buf, size_t n)
{
    srv *s = c->ctx.s;
    for (;;) {
        if (c->blocking) {
            struct pollfd pf[2] = {{c->rfd, POLLIN, 0}, {s->stop_efd, POLLIN, 0}};
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
                char buf[CMSG_SPACE(sizeof(int) * TF_SERVER_MAX_FDS)];
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
                        if (c->kind == CK_SHM_HS && c->hs_fd < 0)
                            c->hs_fd = fd;
                        else
                            srv_ctx_push_fd(&c->ctx, fd);
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
            /* A short read drained the socket (unless it stopped at an fd boundary). */
            c->drained = !c->blocking && (size_t)r < n && !got_fd;
            c->last_io_ns = tf_now_ns();
            srv_stat_add(s, TF_STAT_BYTES_IN, (uint64_t)r);
            return r;
        }
        if (r == 0)
            return 0;
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

/* Sends the pending reply. 1 all sent, 0 would block, <0 failed. */
static int conn_flush(conn *c)
{
    srv *s = c->ctx.s;
    while (c->out_off < c->out_len) {
        struct iovec iov[3];
        int n = 0;
        uint64_t skip = c->out_off;
        const uint8_t *parts[3] = {c->rep.head, NULL, NULL};
        size_t lens[3] = {c->rep.head_len, 0, 0};
        for (int i = 0; i < c->rep.nseg; i++) {
            parts[i + 1] = c->rep.seg[i].iov_base;
            lens[i + 1] = c->rep.seg[i].iov_len;
        }
        for (int i = 0; i < 1 + c->rep.nseg; i++) {
            if (skip >= lens[i]) {
                skip -= lens[i];
                continue;
            }
            iov[n].iov_base = (void *)(parts[i] + skip);
            iov[n].iov_len = lens[i] - skip;
            skip = 0;
            n++;
        }
        ssize_t w;
        if (c->is_sock) {
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
        c->out_off += (uint64_t)w;
        c->last_io_ns = tf_now_ns();
        srv_stat_add(s, TF_STAT_BYTES_OUT, (uint64_t)w);
    }
    return 1;
}

static void queue_reply(conn *c)
{
    c->out_off = 0;
    c->out_len = srv_reply_len(&c->rep);
    c->out_pending = 1;
    srv_count_reply(&c->ctx, &c->rep);
}

/* ---------------------------------------------------------------- worker pool */

static void *worker_main(void *arg)
{
    loop *lp = arg;
    for (;;) {
        pthread_mutex_lock(&lp->qlock);
        while (!lp->qhead && !lp->qstop)
            pthread_cond_wait(&lp->qcond, &lp->qlock);
        conn *c = lp->qhead;
        if (!c) {
            pthread_mutex_unlock(&lp->qlock);
            return NULL;
        }
        lp->qhead = c->qnext;
        if (!lp->qhead)
            lp->qtail = NULL;
        pthread_mutex_unlock(&lp->qlock);

        c->ctx.sweep_threads = lp->s->cfg.threads;
        srv_exec(&c->ctx, &c->rq, &c->data, &c->rep);
        /* Send the reply from here (the loop does not touch a parked connection): the client
         * gets it without waiting for the loop thread to wake up. What does not fit in the
         * socket buffer, or a failure, is left to the loop (conn_drive flushes again). */
        queue_reply(c);
        if (!__atomic_load_n(&lp->stopping_flag, __ATOMIC_ACQUIRE))
            conn_flush(c);

        pthread_mutex_lock(&lp->dlock);
        c->qnext = lp->dhead;
        lp->dhead = c;
        pthread_mutex_unlock(&lp->dlock);
        uint64_t one = 1;
        ssize_t w = write(lp->done_efd, &one, sizeof one);
        (void)w;
    }
}

static void park(loop *lp, conn *c)
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

/* ---------------------------------------------------------------- connections */

static void conn_free(conn *c)
{
    srv_ctx_fini(&c->ctx);
    if (c->hs_fd >= 0)
        close(c->hs_fd);
    free(c->ibuf);
    free(c);
}

static void conn_close(loop *lp, conn *c, const char *why)
{
    srv *s = lp->s;
    if (c->dead)
        return;
    c->dead = 1;
    if (c->shm) {
        srv_shm_detach(c->shm);
        c->shm = NULL;
    }
    close(c->rfd);
    /* A shared-memory connection's line is written by its ring thread. */
    if (c->kind != CK_SHM_CTL)
        srv_log_close(&c->ctx, why);
    __atomic_fetch_sub(&s->st[TF_STAT_CONNECTIONS_OPEN], 1, __ATOMIC_RELAXED);
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

/* A complete frame is in c->ctx.payload: run it inline or park it on a worker.
 * 1: a reply is queued; 0: parked. */
static int frame_done(loop *lp, conn *c)
{
    c->state = ST_HEAD;
    uint8_t *v = c->ctx.payload.p;
    c->data = (srv_req_data){0};
    c->data.close = (const double *)(v + c->rq.close_off);
    c->data.params = (const int64_t *)(v + c->rq.params_off);
    c->data.bytes = v;
    c->data.owner = &c->ctx.payload;
    if (c->kind != CK_STDIO && srv_is_heavy(&c->rq)) {
        park(lp, c);
        return 0;
    }
    c->ctx.sweep_threads = c->kind == CK_STDIO ? lp->s->cfg.threads : 1;
    srv_exec(&c->ctx, &c->rq, &c->data, &c->rep);
    queue_reply(c);
    return 1;
}

static void reply_frame_error(conn *c, int code)
{
    srv_reply_error(&c->ctx, &c->rep, &c->rq, code, "malformed request: %s", tf_strerror(code));
    c->rep.close_after = 0;
    queue_reply(c);
}

/* Makes progress on input. 1: progress (call again), 0: would block or parked, <0: close. */
static int conn_step(loop *lp, conn *c, const char **why)
{
    srv *s = lp->s;
    ssize_t n;
    if (c->state == ST_HEAD) {
        size_t avail = c->iend - c->ipos;
        if (avail >= 4) {
            const uint8_t *p = c->ibuf + c->ipos;
            uint32_t body_len = tf_le32(p);
            if (body_len > s->cfg.max_frame) {
                memset(&c->rq, 0, sizeof c->rq);
                srv_reply_error(&c->ctx, &c->rep, NULL, TF_E_FRAME_TOO_LARGE,
                                "frame body of %u bytes above --max-frame %llu", body_len,
                                (unsigned long long)s->cfg.max_frame);
                c->rep.close_after = 1;
                queue_reply(c);
                c->ipos = c->iend;
                return 1;
            }
            int r = tf_wire_decode_request(p + 4, avail - 4, body_len, &c->rq);
            if (r < 0) {
                uint64_t have = avail - 4 < body_len ? avail - 4 : body_len;
                c->ipos += 4 + have;
                c->discard_left = body_len - have;
                c->rq_err = r;
                if (c->discard_left == 0) {
                    reply_frame_error(c, r);
                    return 1;
                }
                c->state = ST_DISCARD;
                return 1;
            }
            if (r == 0) {
                c->ipos += 4 + c->rq.fixed_len;
                uint64_t var = c->rq.var_len;
                if (srv_buf_reserve(&c->ctx.payload, var ? var : 1)) {
                    c->rq_err = TF_E_NOMEM;
                    c->discard_left = var;
                    c->state = ST_DISCARD;
                    return 1;
                }
                uint64_t take = c->iend - c->ipos < var ? c->iend - c->ipos : var;
                memcpy(c->ctx.payload.p, c->ibuf + c->ipos, take);
                c->ipos += take;
                c->got = take;
                if (c->got == var)
                    return frame_done(lp, c);
                c->ipos = c->iend = 0;
                c->state = ST_BODY;
                return 1;
            }
            /* r > 0: need 4 + r bytes from ipos (at most 4 + TF_WIRE_MAX_FIXED). */
        }
        if (c->ipos == c->iend)
            c->ipos = c->iend = 0;
        if (IBUF_BYTES - c->ipos < 4 + TF_WIRE_MAX_FIXED) {
            memmove(c->ibuf, c->ibuf + c->ipos, c->iend - c->ipos);
            c->iend -= c->ipos;
            c->ipos = 0;
        }
        if (c->drained)
            return 0;
        n = conn_read(c, c->ibuf + c->iend, IBUF_BYTES - c->iend);
        if (n > 0) {
            c->iend += (size_t)n;
            return 1;
        }
        if (n == 0 && c->iend > c->ipos)
            *why = "peer closed in the middle of a frame";
    } else if (c->state == ST_BODY) {
        uint64_t need = c->rq.var_len - c->got;
        if (c->drained)
            return 0;
        if (need >= IBUF_BYTES / 2) {
            /* Big payloads go straight to their final home. */
            n = conn_read(c, c->ctx.payload.p + c->got, need);
            if (n > 0)
                c->got += (uint64_t)n;
        } else {
            n = conn_read(c, c->ibuf, IBUF_BYTES);
            if (n > 0) {
                uint64_t take = (uint64_t)n < need ? (uint64_t)n : need;
                memcpy(c->ctx.payload.p + c->got, c->ibuf, take);
                c->got += take;
                c->ipos = take;
                c->iend = (size_t)n;
            }
        }
        if (n > 0) {
            if (c->got == c->rq.var_len)
                return frame_done(lp, c);
            return 1;
        }
        if (n == 0)
            *why = "peer closed in the middle of a frame";
    } else { /* ST_DISCARD */
        if (c->ipos < c->iend) {
            uint64_t take = c->iend - c->ipos;
            if (take > c->discard_left)
                take = c->discard_left;
            c->ipos += take;
            c->discard_left -= take;
            if (c->discard_left == 0) {
                c->state = ST_HEAD;
                reply_frame_error(c, c->rq_err);
            }
            return 1;
        }
        c->ipos = c->iend = 0;
        if (c->drained)
            return 0;
        n = conn_read(c, c->ibuf, IBUF_BYTES);
        if (n > 0) {
            c->iend = (size_t)n;
            return 1;
        }
        if (n == 0)
            *why = "peer closed in the middle of a frame";
    }
    if (n == -EAGAIN)
        return 0;
    if (n == 0) {
        if (!*why)
            *why = "peer closed";
        return -1;
    }
    if (n == -ECANCELED)
        *why = "server shutting down";
    else
        *why = "read failed";
    return -1;
}

/* The shm handshake on a --shm connection: 24 bytes with a memfd, then an 8-byte status. */
static int hs_step(loop *lp, conn *c, const char **why)
{
    srv *s = lp->s;
    ssize_t n = conn_read(c, c->hs + c->hs_got, TF_SHM_HELLO_BYTES - c->hs_got);
    if (n == -EAGAIN)
        return 0;
    if (n <= 0) {
        *why = n == 0 ? "peer closed during the shm handshake" : "read failed";
        return -1;
    }
    c->hs_got += (size_t)n;
    if (c->hs_got < TF_SHM_HELLO_BYTES)
        return 1;
    struct ucred cred = {0};
    socklen_t cl = sizeof cred;
    getsockopt(c->rfd, SOL_SOCKET, SO_PEERCRED, &cred, &cl);
    int status = srv_shm_start(s, c->hs_fd, c->hs, cred.pid, c->rfd, c->ctx.conn_id, &c->shm);
    if (c->hs_fd >= 0) {
        close(c->hs_fd);
        c->hs_fd = -1;
    }
    memset(&c->rep, 0, sizeof c->rep);
    tf_put32(c->rep.head, (uint32_t)status);
    tf_put32(c->rep.head + 4, (uint32_t)getpid());
    c->rep.head_len = TF_SHM_HELLO_REPLY_BYTES;
    c->rep.close_after = status != 0;
    c->out_off = 0;
    c->out_len = TF_SHM_HELLO_REPLY_BYTES;
    c->out_pending = 1;
    if (status)
        srv_log(s, 0, "conn %llu (shm): handshake refused: error %d: %s",
                (unsigned long long)c->ctx.conn_id, status, tf_strerror(status));
    if (!status)
        c->kind = CK_SHM_CTL; /* from now on an ordinary framed connection */
    c->state = ST_HEAD;
    return 1;
}

static void add_ready(loop *lp, conn *c)
{
    if (c->in_ready)
        return;
    c->in_ready = 1;
    c->qnext = NULL;
    if (lp->ready_tail)
        lp->ready_tail->qnext = c;
    else
        lp->ready = c;
    lp->ready_tail = c;
}

/* EPOLLOUT is registered only while a reply is blocked: otherwise every read of a reply by the
 * client would wake the loop for nothing. */
static void want_out(loop *lp, conn *c, int on)
{
    if (c->want_out == on)
        return;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET | (on ? EPOLLOUT : 0),
                             .data.ptr = c};
    epoll_ctl(lp->ep, EPOLL_CTL_MOD, c->rfd, &ev);
    c->want_out = on;
}

static void conn_drive(loop *lp, conn *c)
{
    int budget = DRIVE_BUDGET;
    while (!c->dead) {
        /* A parked connection belongs to its worker (which also sends the reply). */
        if (c->parked)
            return;
        if (c->out_pending) {
            int r = conn_flush(c);
            if (r < 0) {
                conn_close(lp, c, "peer gone while a reply was being sent");
                return;
            }
            if (r == 0) {
                want_out(lp, c, 1); /* EPOLLOUT resumes us */
                return;
            }
            want_out(lp, c, 0);
            c->out_pending = 0;
            srv_buf_trim(&c->ctx.payload);
            srv_buf_trim(&c->ctx.result);
            if (c->rep.close_after) {
                conn_close(lp, c, "closed after an error");
                return;
            }
        }
        if (c->parked)
            return;
        if (lp->stopping) {
            conn_close(lp, c, "server shutting down");
            return;
        }
        const char *why = NULL;
        int r = c->kind == CK_SHM_HS ? hs_step(lp, c, &why) : conn_step(lp, c, &why);
        if (r < 0) {
            conn_close(lp, c, why ? why : "error");
            return;
        }
        if (r == 0)
            return;
        if (--budget == 0) {
            add_ready(lp, c);
            return;
        }
    }
}

static conn *conn_new(loop *lp, int fd, int kind)
{
    srv *s = lp->s;
    conn *c = calloc(1, sizeof *c);
    uint8_t *ibuf = malloc(IBUF_BYTES);
    if (!c || !ibuf) {
        free(c);
        free(ibuf);
        return NULL;
    }
    c->ibuf = ibuf;
    c->lp = lp;
    c->rfd = c->wfd = fd;
    c->kind = kind;
    c->hs_fd = -1;
    c->is_sock = kind != CK_STDIO;
    c->pass_fds = kind == CK_UNIX || kind == CK_SHM_HS;
    c->last_io_ns = tf_now_ns();
    srv_ctx_init(&c->ctx, s, kind_name[kind], c->pass_fds ? TF_CAP_LOAD_FD : 0);
    srv_stat_add(s, TF_STAT_CONNECTIONS_TOTAL, 1);
    srv_stat_add(s, TF_STAT_CONNECTIONS_OPEN, 1);
    return c;
}

static void accept_all(loop *lp, listener *l)
{
    srv *s = lp->s;
    for (;;) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                srv_log(s, 0, "accept on %s failed: %s", kind_name[l->kind], strerror(errno));
            return;
        }
        if (lp->nconns >= TF_SERVER_MAX_CONNS) {
            srv_log(s, 0, "refusing a %s connection: %d connections open", kind_name[l->kind],
                    lp->nconns);
            close(fd);
            continue;
        }
        int sz = SOCKBUF_BYTES;
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
        if (l->kind == CK_TCP) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        conn *c = conn_new(lp, fd, l->kind);
        if (!c) {
            srv_log(s, 0, "refusing a connection: out of memory");
            close(fd);
            continue;
        }
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = c};
        if (epoll_ctl(lp->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            conn_free(c);
            continue;
        }
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
    loop *lp = arg;
    srv *s = lp->s;
    conn *c = conn_new(lp, 0, CK_STDIO);
    const char *why = "end of input";
    if (c) {
        c->wfd = 1;
        c->blocking = 1;
        for (;;) {
            if (c->out_pending) {
                if (conn_flush(c) < 0) {
                    why = "stdout closed";
                    break;
                }
                c->out_pending = 0;
                srv_buf_trim(&c->ctx.payload);
                srv_buf_trim(&c->ctx.result);
                if (c->rep.close_after) {
                    why = "closed after an error";
                    break;
                }
            }
            const char *w = NULL;
            int r = conn_step(lp, c, &w);
            if (r < 0) {
                why = w ? w : "error";
                break;
            }
        }
        srv_log_close(&c->ctx, why);
        __atomic_fetch_sub(&s->st[TF_STAT_CONNECTIONS_OPEN], 1, __ATOMIC_RELAXED);
        conn_free(c);
    }
    __atomic_store_n(&lp->stdio_done, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    ssize_t w = write(lp->stdio_efd, &one, sizeof one);
    (void)w;
    return NULL;
}

/* ---------------------------------------------------------------- listeners */

static int listen_unix(loop *lp, const char *path, int kind)
{
    srv *s = lp->s;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        srv_log(s, 1, "error: socket path too long: %s", path);
        return TF_E_INVALID_ARG;
    }
    strcpy(sa.sun_path, path);
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            srv_log(s, 1, "error: %s exists and is not a socket: refusing to replace it", path);
            return -EEXIST;
        }
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe < 0)
            return -errno;
        int live = connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0;
        int e = errno;
        close(probe);
        if (live) {
            srv_log(s, 1, "error: %s: a server is already listening there", path);
            return -EADDRINUSE;
        }
        if (e != ECONNREFUSED) {
            srv_log(s, 1, "error: %s: cannot tell whether it is stale: %s", path, strerror(e));
            return -e;
        }
        unlink(path);
        srv_log(s, 0, "replaced a stale socket at %s", path);
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
        srv_log(s, 1, "error: cannot listen on %s: %s", path, strerror(e));
        close(fd);
        return -e;
    }
    chmod(path, 0600);
    listener *l = &lp->ls[lp->nls++];
    l->fd = fd;
    l->kind = kind;
    strcpy(l->path, path);
    if (stat(path, &st) == 0) {
        l->dev = st.st_dev;
        l->ino = st.st_ino;
    }
    srv_log(s, 1, "listening %s %s", kind == CK_SHM_HS ? "shm" : "unix", path);
    return 0;
}

static int listen_tcp(loop *lp, const char *spec)
{
    srv *s = lp->s;
    char host[256] = "127.0.0.1", port[32];
    const char *colon = strrchr(spec, ':');
    if (colon) {
        size_t hl = (size_t)(colon - spec);
        const char *h = spec;
        if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
            h++;
            hl -= 2;
        }
        if (hl >= sizeof host || strlen(colon + 1) >= sizeof port)
            return TF_E_INVALID_ARG;
        if (hl) {
            memcpy(host, h, hl);
            host[hl] = 0;
        }
        strcpy(port, colon + 1);
    } else {
        if (strlen(spec) >= sizeof port)
            return TF_E_INVALID_ARG;
        strcpy(port, spec);
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int g = getaddrinfo(host, port, &hints, &res);
    if (g != 0) {
        srv_log(s, 1, "error: --tcp %s: %s", spec, gai_strerror(g));
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
        srv_log(s, 1, "error: cannot listen on tcp %s: %s", spec, strerror(e));
        return -e;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char hb[NI_MAXHOST], pb[NI_MAXSERV];
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    getnameinfo((struct sockaddr *)&ss, sl, hb, sizeof hb, pb, sizeof pb,
                NI_NUMERICHOST | NI_NUMERICSERV);
    listener *l = &lp->ls[lp->nls++];
    l->fd = fd;
    l->kind = CK_TCP;
    if (ss.ss_family == AF_INET6)
        srv_log(s, 1, "listening tcp [%s]:%s", hb, pb);
    else
        srv_log(s, 1, "listening tcp %s:%s", hb, pb);
    return 0;
}

static void close_listeners(loop *lp)
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

static void begin_stop(loop *lp, const char *why)
{
    srv *s = lp->s;
    if (lp->stopping)
        return;
    lp->stopping = 1;
    __atomic_store_n(&lp->stopping_flag, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    ssize_t w = write(s->stop_efd, &one, sizeof one);
    (void)w;
    srv_log(s, 1, "shutting down (%s)", why);
    close_listeners(lp);
    for (conn *c = lp->conns, *next; c; c = next) {
        next = c->next;
        if (c->parked)
            continue;
        if (c->out_pending)
            conn_flush(c); /* one last try, never blocking */
        conn_close(lp, c, "server shutting down");
    }
}

static void stall_check(loop *lp)
{
    int64_t limit = (int64_t)lp->s->cfg.stall_timeout_s * 1000000000ll;
    if (limit <= 0)
        return;
    int64_t now = tf_now_ns();
    for (conn *c = lp->conns, *next; c; c = next) {
        next = c->next;
        if (c->parked)
            continue;
        int mid =
            c->out_pending || c->state != ST_HEAD || c->ipos < c->iend || c->kind == CK_SHM_HS;
        if (mid && now - c->last_io_ns > limit)
            conn_close(lp, c, "stalled in the middle of a frame");
    }
}

static void on_done(loop *lp)
{
    uint64_t v;
    ssize_t r = read(lp->done_efd, &v, sizeof v);
    (void)r;
    pthread_mutex_lock(&lp->dlock);
    conn *list = lp->dhead;
    lp->dhead = NULL;
    pthread_mutex_unlock(&lp->dlock);
    while (list) {
        conn *c = list;
        list = c->qnext;
        c->parked = 0;
        lp->parked--;
        if (lp->stopping) {
            conn_flush(c);
            conn_close(lp, c, "server shutting down");
            continue;
        }
        c->drained = 0;
        conn_drive(lp, c);
    }
}

static int loop_init(loop *lp, srv *s)
{
    memset(lp, 0, sizeof *lp);
    lp->s = s;
    pthread_mutex_init(&lp->qlock, NULL);
    pthread_cond_init(&lp->qcond, NULL);
    pthread_mutex_init(&lp->dlock, NULL);
    lp->ep = epoll_create1(EPOLL_CLOEXEC);
    lp->done_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    lp->stdio_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    lp->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (lp->ep < 0 || lp->done_efd < 0 || lp->stdio_efd < 0 || lp->sig_fd < 0)
        return -errno;
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.u64 = TAG_SIGNAL;
    epoll_ctl(lp->ep, EPOLL_CTL_ADD, lp->sig_fd, &ev);
    ev.data.u64 = TAG_DONE;
    epoll_ctl(lp->ep, EPOLL_CTL_ADD, lp->done_efd, &ev);
    ev.data.u64 = TAG_STDIO;
    epoll_ctl(lp->ep, EPOLL_CTL_ADD, lp->stdio_efd, &ev);
    return 0;
}

static void loop_fini(loop *lp)
{
    pthread_mutex_lock(&lp->qlock);
    lp->qstop = 1;
    pthread_cond_broadcast(&lp->qcond);
    pthread_mutex_unlock(&lp->qlock);
    for (int i = 0; i < lp->nworkers; i++)
        pthread_join(lp->workers[i], NULL);
    free(lp->workers);
    if (lp->stdio_started)
        pthread_join(lp->stdio_thr, NULL);
    close_listeners(lp);
    while (lp->conns)
        conn_close(lp, lp->conns, "server stopped");
    for (conn *c = lp->ready, *next; c; c = next) {
        next = c->qnext;
        c->in_ready = 0;
        c->qnext = lp->grave;
        lp->grave = c;
    }
    lp->ready = lp->ready_tail = NULL;
    while (lp->grave) {
        conn *c = lp->grave;
        lp->grave = c->qnext;
        conn_free(c);
    }
    pthread_mutex_destroy(&lp->qlock);
    pthread_cond_destroy(&lp->qcond);
    pthread_mutex_destroy(&lp->dlock);
    if (lp->ep >= 0)
        close(lp->ep);
    if (lp->sig_fd >= 0)
        close(lp->sig_fd);
    if (lp->done_efd >= 0)
        close(lp->done_efd);
    if (lp->stdio_efd >= 0)
        close(lp->stdio_efd);
}

static int start_threads(loop *lp)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    lp->nworkers = ncpu < 2 ? 2 : (int)(ncpu > 64 ? 64 : ncpu);
    lp->workers = calloc((size_t)lp->nworkers, sizeof(pthread_t));
    if (!lp->workers)
        return TF_E_NOMEM;
    for (int i = 0; i < lp->nworkers; i++) {
        if (pthread_create(&lp->workers[i], NULL, worker_main, lp) != 0) {
            lp->nworkers = i;
            return TF_E_NOMEM;
        }
    }
    if (lp->s->cfg.stdio) {
        if (pthread_create(&lp->stdio_thr, NULL, stdio_main, lp) != 0)
            return TF_E_NOMEM;
        lp->stdio_started = 1;
        srv_log(lp->s, 1, "listening stdio");
    }
    return 0;
}

static void run_loop(loop *lp)
{
    struct epoll_event evs[64];
    int64_t next_stall = tf_now_ns() + 1000000000ll;
    for (;;) {
        if (lp->stopping && lp->parked == 0 &&
            (!lp->stdio_started || __atomic_load_n(&lp->stdio_done, __ATOMIC_ACQUIRE)))
            break;
        int n = epoll_wait(lp->ep, evs, 64, lp->ready ? 0 : 250);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            uint64_t tag = evs[i].data.u64;
            if (tag == TAG_SIGNAL) {
                struct signalfd_siginfo si;
                while (read(lp->sig_fd, &si, sizeof si) == (ssize_t)sizeof si)
                    begin_stop(lp, si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
            } else if (tag == TAG_DONE) {
                on_done(lp);
            } else if (tag == TAG_STDIO) {
                uint64_t v;
                ssize_t r = read(lp->stdio_efd, &v, sizeof v);
                (void)r;
                if (lp->nls == 0)
                    begin_stop(lp, "end of stdio input");
            } else if (tag >= TAG_LISTEN && tag < TAG_LISTEN + (uint64_t)lp->nls) {
                listener *l = &lp->ls[tag - TAG_LISTEN];
                if (l->fd >= 0 && !lp->stopping)
                    accept_all(lp, l);
            } else {
                conn *c = evs[i].data.ptr;
                if (c->dead)
                    continue;
                if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                    c->drained = 0;
                conn_drive(lp, c);
            }
        }
        conn *r = lp->ready;
        lp->ready = lp->ready_tail = NULL;
        while (r) {
            conn *c = r;
            r = c->qnext;
            c->in_ready = 0;
            if (c->dead) {
                c->qnext = lp->grave;
                lp->grave = c;
                continue;
            }
            conn_drive(lp, c);
        }
        while (lp->grave) {
            conn *c = lp->grave;
            lp->grave = c->qnext;
            conn_free(c);
        }
        int64_t now = tf_now_ns();
        if (now >= next_stall) {
            stall_check(lp);
            next_stall = now + 1000000000ll;
        }
    }
}

int tf_server_run(const tf_server_config *cfg)
{
    srv *s = calloc(1, sizeof *s);
    if (!s)
        return TF_E_NOMEM;
    s->cfg = *cfg;
    if (s->cfg.max_frame > TF_WIRE_MAX_FRAME_LIMIT)
        s->cfg.max_frame = TF_WIRE_MAX_FRAME_LIMIT;
    if (s->cfg.max_datasets > TF_SERVER_MAX_DATASETS_LIMIT)
        s->cfg.max_datasets = TF_SERVER_MAX_DATASETS_LIMIT;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    s->kernel_threads = cfg->threads > 0 ? cfg->threads : (int)(ncpu < 1 ? 1 : ncpu);
    s->start_ns = tf_now_ns();
    s->stop_efd = eventfd(0, EFD_CLOEXEC);

    /* Signals are taken by the loop's signalfd: block them before any thread exists so every
     * thread inherits the mask. A peer that vanishes must never kill us with SIGPIPE. */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    struct sigaction sa = {.sa_handler = SIG_IGN}, old_pipe;
    sigaction(SIGPIPE, &sa, &old_pipe);

    loop lp;
    int rc = loop_init(&lp, s);
    if (!rc)
        rc = srv_ds_init(s);
    for (int i = 0; !rc && i < cfg->n_unix; i++)
        rc = listen_unix(&lp, cfg->unix_paths[i], CK_UNIX);
    for (int i = 0; !rc && i < cfg->n_shm; i++)
        rc = listen_unix(&lp, cfg->shm_paths[i], CK_SHM_HS);
    for (int i = 0; !rc && i < cfg->n_tcp; i++)
        rc = listen_tcp(&lp, cfg->tcp_addrs[i]);
    for (int i = 0; !rc && i < lp.nls; i++) {
        struct epoll_event ev = {.events = EPOLLIN};
        ev.data.u64 = TAG_LISTEN + (uint64_t)i;
        if (epoll_ctl(lp.ep, EPOLL_CTL_ADD, lp.ls[i].fd, &ev) != 0)
            rc = -errno;
    }
    if (!rc)
        rc = start_threads(&lp);
    if (!rc) {
        run_loop(&lp);
        srv_log(s, 1, "stopped");
    } else {
        __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
        uint64_t one = 1;
        ssize_t w = write(s->stop_efd, &one, sizeof one);
        (void)w;
    }
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    loop_fini(&lp);
    srv_shm_join_all(s);
    srv_ds_fini(s);
    close(s->stop_efd);
    sigaction(SIGPIPE, &old_pipe, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    free(s);
    return rc;
}

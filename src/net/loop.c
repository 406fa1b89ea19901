/* The loop: opens the layer (config defaults, poller, signals, eventfds), runs one thread's
 * turns (wait, dispatch each ready fd to its job, the ready list, before_sleep, the tick) until
 * stopped; it knows no protocol and leaves each job to its file (net_private.h lists them).
 *
 * Sockets are non-blocking and registered edge-triggered once (EPOLLIN | EPOLLRDHUP); EPOLLOUT is
 * added only while output is blocked. A short read is taken to mean "drained" (saving one recv
 * that would say EAGAIN) only while the peer has not signalled its end: once EPOLLRDHUP or
 * EPOLLHUP was seen the connection reads until 0, so a FIN that arrives in the same edge as the
 * last data is never missed.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "net/net_private.h"
#include "tollfree/error.h"

int64_t tfn_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

void tfn_stat_add(uint64_t *ctr, int64_t n)
{
    if (ctr)
        __atomic_fetch_add(ctr, (uint64_t)n, __ATOMIC_RELAXED);
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

/* The poller, the signalfd and the eventfds, registered. 0 or -errno. */
static int open_fds(tfn_loop *lp)
{
    tfn_poll_open(lp);
    lp->done_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    lp->stdio_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    lp->stop_efd = eventfd(0, EFD_CLOEXEC);
    tfn_signals_open(lp);
    if (lp->ep < 0 || lp->done_efd < 0 || lp->stdio_efd < 0 || lp->sig_fd < 0 || lp->stop_efd < 0)
        return -errno;
    tfn_poll_add_tag(lp, lp->sig_fd, TAG_SIGNAL);
    tfn_poll_add_tag(lp, lp->done_efd, TAG_DONE);
    tfn_poll_add_tag(lp, lp->stdio_efd, TAG_STDIO);
    return 0;
}

int tfn_loop_open(const tfn_config *cfg, tfn_loop **out)
{
    tfn_loop *lp = calloc(1, sizeof *lp);
    if (!lp)
        return TF_E_NOMEM;
    lp->cfg = *cfg;
    tfn_config_defaults(&lp->cfg);
    lp->ep = lp->sig_fd = lp->done_efd = lp->stdio_efd = lp->stop_efd = -1;
    if (tfn_peers_open(lp)) {
        free(lp);
        return TF_E_NOMEM;
    }
    pthread_mutex_init(&lp->qlock, NULL);
    pthread_cond_init(&lp->qcond, NULL);
    pthread_mutex_init(&lp->dlock, NULL);
    int rc = open_fds(lp);
    if (rc) {
        tfn_loop_close(lp);
        return rc;
    }
    *out = lp;
    return 0;
}

/* One event of epoll_wait. */
static void dispatch(tfn_loop *lp, const struct epoll_event *ev)
{
    uint64_t tag = ev->data.u64;
    if (tag == TAG_SIGNAL) {
        tfn_signals_read(lp);
    } else if (tag == TAG_DONE) {
        tfn_on_done(lp);
    } else if (tag == TAG_STDIO) {
        uint64_t v;
        ssize_t r = read(lp->stdio_efd, &v, sizeof v);
        (void)r;
        if (lp->nls == 0)
            tfn_loop_stop(lp, "end of stdio input");
    } else if (tag >= TAG_LISTEN && tag < TAG_LISTEN + (uint64_t)lp->nls) {
        listener *l = &lp->ls[tag - TAG_LISTEN];
        if (l->fd >= 0 && !lp->stopping)
            tfn_accept_all(lp, l);
    } else {
        tfn_conn *c = ev->data.ptr;
        if (c->state == CS_DEAD)
            return;
        if (ev->events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            c->rdhup = 1;
        if (ev->events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            c->drained = 0;
        if (c->io->out_wakes_read && (ev->events & EPOLLOUT))
            c->drained = 0; /* a read may have waited for the socket to take bytes */
        tfn_drive(lp, c);
    }
}

/* 1 when a stopping loop may end: no worker holds a connection, stdio is done, and a draining
 * stop has taken what was ready (or its second is up). */
static int may_end(tfn_loop *lp)
{
    return lp->stopping && lp->parked == 0 &&
           (!lp->stdio_started || __atomic_load_n(&lp->stdio_done, __ATOMIC_ACQUIRE)) &&
           (!lp->cfg.drain_on_stop || !lp->ready || tfn_now_ns() > lp->stop_deadline_ns);
}

int tfn_loop_run(tfn_loop *lp)
{
    int rc = tfn_workers_start(lp);
    if (!rc)
        rc = tfn_stdio_start(lp);
    if (rc)
        return rc;
    struct epoll_event evs[64];
    int64_t next_tick = tfn_now_ns() + NS_PER_S;
    while (!may_end(lp)) {
        int n = epoll_wait(lp->ep, evs, 64, lp->ready ? 0 : 250);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++)
            dispatch(lp, &evs[i]);
        tfn_drain_ready(lp);
        tfn_bury(lp);
        if (lp->cfg.before_sleep)
            lp->cfg.before_sleep(lp, lp->cfg.ud, lp->ready != NULL);
        int64_t now = tfn_now_ns();
        if (now >= next_tick) {
            tfn_timeouts(lp);
            if (!lp->cfg.quiet)
                tfn_log_gate_report(lp->cfg.name);
            next_tick = now + NS_PER_S;
        }
    }
    if (lp->cfg.drain_on_stop)
        tfn_final_close(lp);
    return 0;
}

/* Shutdown: SIGINT/SIGTERM through a signalfd (and SIGPIPE ignored) while the loop lives,
 * stopping (listeners closed, rings woken, connections closed or drained), the final close of a
 * draining stop, and tearing the loop down (ring threads joined); it knows no frame and no
 * protocol (the server's part is cfg.on_stop and cfg.before_sleep). */
#include <stdlib.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "net/net_private.h"

/* Signals are taken by the loop's signalfd: block them before any thread exists so every
 * thread inherits the mask. A peer that vanishes must never kill us with SIGPIPE. */
int tfn_signals_open(tfn_loop *lp)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, &lp->old_mask);
    struct sigaction sa = {.sa_handler = SIG_IGN};
    sigaction(SIGPIPE, &sa, &lp->old_pipe);
    lp->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    return lp->sig_fd;
}

void tfn_signals_read(tfn_loop *lp)
{
    struct signalfd_siginfo si;
    while (read(lp->sig_fd, &si, sizeof si) == (ssize_t)sizeof si)
        tfn_loop_stop(lp, si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
}

void tfn_signals_close(tfn_loop *lp)
{
    sigaction(SIGPIPE, &lp->old_pipe, NULL);
    pthread_sigmask(SIG_SETMASK, &lp->old_mask, NULL);
}

void tfn_loop_stop(tfn_loop *lp, const char *why)
{
    if (lp->stopping)
        return;
    lp->stopping = 1;
    lp->stop_deadline_ns = tfn_now_ns() + NS_PER_S;
    __atomic_store_n(&lp->stopping_flag, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    ssize_t w = write(lp->stop_efd, &one, sizeof one); /* wakes the stdio thread */
    (void)w;
    tfn_log(lp, 1, "shutting down (%s)", why);
    tfn_close_listeners(lp);
    tfn_rings_wake(lp); /* each ring's thread ends after the request it is answering */
    if (lp->cfg.on_stop)
        lp->cfg.on_stop(lp, lp->cfg.ud);
    for (tfn_conn *c = lp->conns, *next; c; c = next) {
        next = c->next;
        if (c->state == CS_PARKED)
            continue;
        if (lp->cfg.drain_on_stop) {
            c->drained = 0; /* take what the socket holds */
            tfn_add_ready(lp, c);
            continue;
        }
        if (tfn_out_pending(c))
            tfn_flush(c); /* one last try, never blocking */
        tfn_conn_close_in(lp, c, "server shutting down");
    }
}

void tfn_drain_ready(tfn_loop *lp)
{
    tfn_conn *r = lp->ready;
    lp->ready = lp->ready_tail = NULL;
    while (r) {
        tfn_conn *c = r;
        r = c->qnext;
        c->qnext = NULL;
        c->in_ready = 0;
        if (c->state == CS_DEAD) {
            c->qnext = lp->grave;
            lp->grave = c;
            continue;
        }
        tfn_drive(lp, c);
    }
}

void tfn_bury(tfn_loop *lp)
{
    while (lp->grave) {
        tfn_conn *c = lp->grave;
        lp->grave = c->qnext;
        tfn_conn_free(c);
    }
}

/* The last step of a draining shutdown: the server makes what it took durable and queues the
 * replies (before_sleep), each connection gets one non-blocking try to send them. */
void tfn_final_close(tfn_loop *lp)
{
    if (lp->cfg.before_sleep)
        lp->cfg.before_sleep(lp, lp->cfg.ud, 0);
    for (tfn_conn *c = lp->conns, *next; c; c = next) {
        next = c->next;
        if (c->state == CS_PARKED)
            continue;
        if (tfn_out_pending(c) && c->state != CS_DOOMED)
            tfn_flush(c);
        tfn_conn_close_in(lp, c, "server shutting down");
    }
    tfn_drain_ready(lp);
    tfn_bury(lp);
}

/* Connections a worker still held when the loop ended come back through the done list. */
static void take_back_parked(tfn_loop *lp)
{
    pthread_mutex_lock(&lp->dlock);
    for (tfn_conn *c = lp->dhead; c; c = c->qnext)
        c->state = c->resume;
    lp->dhead = NULL;
    pthread_mutex_unlock(&lp->dlock);
}

/* Every connection closed, the ready list emptied, everything freed. */
static void close_all(tfn_loop *lp)
{
    while (lp->conns)
        tfn_conn_close_in(lp, lp->conns, "server stopped");
    for (tfn_conn *c = lp->ready, *next; c; c = next) {
        next = c->qnext;
        c->in_ready = 0;
        if (c->state == CS_DEAD) {
            c->qnext = lp->grave;
            lp->grave = c;
        }
    }
    lp->ready = lp->ready_tail = NULL;
    tfn_bury(lp);
}

void tfn_loop_close(tfn_loop *lp)
{
    if (!lp)
        return;
    tfn_workers_stop(lp);
    if (lp->stdio_started) {
        uint64_t one = 1;
        ssize_t w = write(lp->stop_efd, &one, sizeof one);
        (void)w;
        pthread_join(lp->stdio_thr, NULL);
    }
    tfn_close_listeners(lp);
    tfn_rings_join(lp);
    take_back_parked(lp);
    close_all(lp);
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
    tfn_signals_close(lp);
    free(lp);
}

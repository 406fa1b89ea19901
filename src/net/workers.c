/* The worker pool: threads that run the heavy frames of parked connections and send their
 * replies, and the done list through which the loop takes them back; it knows no socket, no
 * limit and no protocol (what is heavy is ops->is_heavy's to say). */
#include <stdlib.h>
#include <unistd.h>

#include "net/net_private.h"
#include "tollfree/error.h"

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

        tfn_run_frame(c, TFN_ON_WORKER);
        /* Send the reply from here (the loop does not touch a parked connection): the client
         * gets it without waiting for the loop thread to wake up. What does not fit in the
         * socket buffer, or a failure, is left to the loop. */
        if (!tfn_loop_stopping(lp) && c->resume != CS_DOOMED && tfn_out_pending(c) &&
            tfn_flush(c) == 1 && c->ops->on_flushed)
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

/* OPEN -> PARKED: its frame goes to a worker. */
void tfn_park(tfn_loop *lp, tfn_conn *c)
{
    c->resume = CS_OPEN;
    c->state = CS_PARKED;
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

/* Workers are done with these: PARKED -> resume, and on. */
void tfn_on_done(tfn_loop *lp)
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
        c->state = c->resume;
        lp->parked--;
        if (lp->stopping && !lp->cfg.drain_on_stop) {
            tfn_flush(c);
            tfn_conn_close_in(lp, c, "server shutting down");
            continue;
        }
        c->drained = 0;
        tfn_drive(lp, c);
    }
    tfn_rings_reap(lp); /* ring threads that ended say so on the same eventfd */
}

int tfn_workers_start(tfn_loop *lp)
{
    int n = lp->cfg.workers;
    if (n < 0) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        n = ncpu < 2 ? 2 : (int)(ncpu > 64 ? 64 : ncpu);
    }
    if (n <= 0)
        return 0;
    lp->workers = calloc((size_t)n, sizeof(pthread_t));
    if (!lp->workers)
        return TF_E_NOMEM;
    for (int i = 0; i < n; i++) {
        if (pthread_create(&lp->workers[i], NULL, worker_main, lp) != 0)
            return TF_E_NOMEM;
        lp->nworkers = i + 1;
    }
    return 0;
}

/* Joins the workers; connections they held come back through the done list (left there). */
void tfn_workers_stop(tfn_loop *lp)
{
    pthread_mutex_lock(&lp->qlock);
    lp->qstop = 1;
    pthread_cond_broadcast(&lp->qcond);
    pthread_mutex_unlock(&lp->qlock);
    for (int i = 0; i < lp->nworkers; i++)
        pthread_join(lp->workers[i], NULL);
    free(lp->workers);
    lp->workers = NULL;
    lp->nworkers = 0;
}

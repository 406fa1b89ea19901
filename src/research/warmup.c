/* The warmed-up out-of-sample run (warmup.h): threads over combos; each combo's targets from
 * its step (over the whole series once for TF_OOS_WARMUP_ALL, since every part then sees every
 * bar before it; else over each part and its N bars before), each part booked by span.c. A
 * combo's figures depend only on its own steps, never on the thread that ran it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernel/book.h"
#include "research/span.h"
#include "research/warmup.h"

typedef struct wjob {
    const tfr_warm *w;
    double fee;
    tf_progress *progress;
    atomic_llong next;
    atomic_int rc;
} wjob;

/* Part p (0 in sample, 1 out) of fold k: [s, e). */
static void part_of(const tf_fold *f, int p, int64_t *s, int64_t *e)
{
    *s = p ? f->oos_start : f->is_start;
    *e = p ? f->oos_end : f->is_end;
}

static int64_t warm_start(int64_t warmup, int64_t s)
{
    return warmup == TF_OOS_WARMUP_ALL || warmup >= s ? 0 : s - warmup;
}

/* Combo j: its targets and every part's booking. */
static int run_combo(const wjob *jb, int64_t j, int8_t *t)
{
    const tfr_warm *w = jb->w;
    double p[TF_STRATEGY_MAX_PARAMS];
    uint32_t np = w->def->n_params;
    for (uint32_t k = 0; k < np; k++)
        p[k] = w->iparams ? (double)w->iparams[j * 6 + k] : w->dparams[j * (int64_t)np + k];
    size_t bytes = tfk_state_bytes(w->def, p);
    void *state = bytes ? aligned_alloc(16, bytes) : NULL;
    if (!state)
        return bytes ? TF_E_NOMEM : TF_E_STRATEGY;
    int all = w->warmup == TF_OOS_WARMUP_ALL, rc = 0;
    if (all) {
        int64_t end = 0;
        for (int k = 0; k < w->nf; k++)
            end = w->folds[k].oos_end > end ? w->folds[k].oos_end : end;
        rc = tfr_targets(w->def, state, bytes, p, w->close, end, w->batch, jb->progress, t);
    }
    for (int k = 0; k < w->nf && !rc; k++)
        for (int part = 0; part < 2 && !rc; part++) {
            int64_t s, e;
            part_of(&w->folds[k], part, &s, &e);
            int64_t w0 = all ? 0 : warm_start(w->warmup, s);
            if (!all)
                rc = tfr_targets(w->def, state, bytes, p, w->close + w0, e - w0, w->batch,
                                 jb->progress, t);
            if (!rc)
                tfr_book_span(t, w->close, w0, s, e, jb->fee, &w->out[(2 * k + part) * w->m + j],
                              NULL);
        }
    free(state);
    return rc;
}

static void *worker(void *arg)
{
    wjob *jb = arg;
    int8_t *t = malloc(jb->w->n > 0 ? (size_t)jb->w->n : 1);
    int rc = t ? 0 : TF_E_NOMEM;
    for (long long j; !rc && (j = atomic_fetch_add(&jb->next, 1)) < jb->w->m;) {
        if (atomic_load(&jb->rc))
            break;
        rc = run_combo(jb, j, t);
        if (!rc && jb->progress)
            __atomic_fetch_add(&jb->progress->done, 1, __ATOMIC_RELAXED);
    }
    if (rc) {
        int zero = 0;
        atomic_compare_exchange_strong(&jb->rc, &zero, rc);
    }
    free(t);
    return NULL;
}

static int threads_for(int threads, int64_t m)
{
    long t = threads > 0 ? threads : sysconf(_SC_NPROCESSORS_ONLN);
    if (t < 1)
        t = 1;
    if (t > m)
        t = m;
    return (int)(t > TF_MAX_THREADS ? TF_MAX_THREADS : t);
}

int tfr_warm_run(const tfr_warm *w)
{
    tfk_opts o;
    int rc = tfk_opts_resolve(w->sweep, &o);
    if (rc)
        return rc;
    wjob jb = {.w = w, .fee = o.fee, .progress = o.progress};
    atomic_init(&jb.next, 0);
    atomic_init(&jb.rc, 0);
    if (o.progress)
        __atomic_store_n(&o.progress->total, w->m, __ATOMIC_RELAXED);
    int nt = threads_for(o.threads, w->m);
    pthread_t tid[TF_MAX_THREADS];
    int started = 0;
    for (int k = 1; k < nt; k++)
        if (pthread_create(&tid[started], NULL, worker, &jb) == 0)
            started++;
    worker(&jb);
    for (int k = 0; k < started; k++)
        pthread_join(tid[k], NULL);
    return atomic_load(&jb.rc);
}

/* The sweep of a def with the changes member (strategy.h): lanes combos in one call of the
 * strategy's own loop, a block of bars a call, and only the bars where a position moves go
 * through the booking (book.h's tfk_book_change); the bars between are only counted for
 * exposure. A combo's bits are those of stepping it bar by bar: the same steps in the same
 * order on its own state, the same booking at the only bars where the booking does anything
 * (a bar whose target is TF_HOLD or the position itself changes nothing). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "strategy_internal.h"

/* Bars per call of changes: each lane's bars and targets take 32 KiB. */
#define LANES_BLOCK 4096

typedef struct lanes_job {
    const tf_strategy_def *def;
    const double *close;
    int64_t n_bars;
    const double *params; /* [n][k]: the distinct combos */
    int64_t n;
    size_t stride; /* bytes per lane's state */
    double fee;
    int stats;
    const tfk_time_in *tin; /* the time-aware figures' hook, or NULL */
    tf_progress *progress;
    tfk_book *out;  /* [n] */
    tfk_tacc *tacc; /* [n] with tin */
    atomic_llong next;
    atomic_int rc; /* the first error any thread met */
} lanes_job;

/* One thread's work space: a group's states, the changes of one call, the books. */
typedef struct lanes_work {
    unsigned char *states; /* [lanes][stride] */
    int32_t *bars;         /* [lanes][LANES_BLOCK] */
    int32_t *targets;      /* [lanes][LANES_BLOCK] */
    int64_t counts[TF_STRATEGY_MAX_LANES];
    int32_t pos[TF_STRATEGY_MAX_LANES];
    int64_t since[TF_STRATEGY_MAX_LANES]; /* the bar each lane's position last moved at */
    tfk_book book[TF_STRATEGY_MAX_LANES];
    tfk_tacc ta[TF_STRATEGY_MAX_LANES]; /* with the figures' hook */
} lanes_work;

double tfs_lanes_bytes(uint32_t lanes, size_t stride)
{
    return (double)sizeof(lanes_work) + (double)lanes * ((double)stride + 8.0 * LANES_BLOCK);
}

/* Books one lane's changes of the run of len bars at bar i: 0, or TF_E_STRATEGY when they break
 * the contract (a count outside 0 .. len, a bar out of order or outside the run, a target that
 * is TF_HOLD, the position itself, or not -1, 0, +1). */
static inline __attribute__((always_inline)) int
book_lane(tfk_book *b, tfk_tacc *ta, const tfk_time_in *tin, int64_t *since, const int32_t *bars,
          const int32_t *t, int64_t m, int64_t i, int64_t len, const double *close, int stats)
{
    if (m < 0 || m > len)
        return TF_E_STRATEGY;
    int64_t next = 0;
    for (int64_t k = 0; k < m; k++) {
        int64_t at = bars[k];
        if (at < next || at >= len || !tfk_target_ok(t[k]) || t[k] == TF_HOLD || t[k] == b->sar.pos)
            return TF_E_STRATEGY;
        next = at + 1;
        at += i;
        if (stats) { /* the bars since the last move ended in the old position */
            b->exposure += b->sar.pos != 0 ? at - *since : 0;
            *since = at;
        }
        if (ta) /* the figures' hook (stats set) */
            tfk_tacc_change(ta, tin, &b->sar, &b->x, t[k], close[at], at);
        else
            tfk_book_change(&b->sar, stats ? &b->x : NULL, t[k], close[at]);
    }
    return 0;
}

/* The states of the group of combos from j0 (lanes past the last combo get a copy of it),
 * initialised, and their books started. 0 or TF_E_STRATEGY. */
static int group_start(const lanes_job *jb, int64_t j0, lanes_work *w)
{
    const tf_strategy_def *def = jb->def;
    for (uint32_t l = 0; l < def->lanes; l++) {
        int64_t j = j0 + l < jb->n ? j0 + (int64_t)l : jb->n - 1;
        void *st = w->states + l * jb->stride;
        memset(st, 0, jb->stride);
        if (def->init(st, jb->params + j * (int64_t)def->n_params))
            return TF_E_STRATEGY;
        tfk_book_start(&w->book[l], jb->fee);
        w->ta[l] = tfk_tacc_start();
        w->since[l] = 0;
    }
    return 0;
}

/* The group of combos from j0 over every bar, booked into jb->out. 0, TF_E_STRATEGY,
 * TF_E_CANCELLED. */
static int run_group(const lanes_job *jb, int64_t j0, lanes_work *w)
{
    const tf_strategy_def *def = jb->def;
    uint32_t lanes = def->lanes;
    int rc = group_start(jb, j0, w);
    for (int64_t i = 0; i < jb->n_bars && !rc; i += LANES_BLOCK) {
        int64_t len = jb->n_bars - i < LANES_BLOCK ? jb->n_bars - i : LANES_BLOCK;
        if (jb->progress && __atomic_load_n(&jb->progress->cancel, __ATOMIC_RELAXED))
            return TF_E_CANCELLED;
        for (uint32_t l = 0; l < lanes; l++)
            w->pos[l] = (int32_t)w->book[l].sar.pos;
        if (def->changes(w->states, jb->stride, jb->close + i, len, w->pos, w->bars, w->targets,
                         w->counts))
            return TF_E_STRATEGY;
        for (uint32_t l = 0; l < lanes && !rc; l++) {
            const int32_t *b = w->bars + l * len, *t = w->targets + l * len;
            rc = jb->tin     ? book_lane(&w->book[l], &w->ta[l], jb->tin, &w->since[l], b, t,
                                         w->counts[l], i, len, jb->close, 1)
                 : jb->stats ? book_lane(&w->book[l], NULL, NULL, &w->since[l], b, t, w->counts[l],
                                         i, len, jb->close, 1)
                             : book_lane(&w->book[l], NULL, NULL, &w->since[l], b, t, w->counts[l],
                                         i, len, jb->close, 0);
        }
    }
    for (uint32_t l = 0; l < lanes && j0 + l < jb->n && !rc; l++) {
        tfk_book *b = &w->book[l];
        if (jb->stats && b->sar.pos != 0)
            b->exposure += jb->n_bars - w->since[l];
        jb->out[j0 + l] = *b;
        if (jb->tin)
            jb->tacc[j0 + l] = w->ta[l];
    }
    return rc;
}

static void fail(lanes_job *jb, int rc)
{
    int zero = 0;
    atomic_compare_exchange_strong(&jb->rc, &zero, rc);
}

static void *lanes_main(void *arg)
{
    lanes_job *jb = arg;
    uint32_t lanes = jb->def->lanes;
    lanes_work *w = malloc(sizeof *w);
    if (w) {
        w->states = aligned_alloc(16, lanes * jb->stride);
        w->bars = malloc(sizeof(int32_t) * LANES_BLOCK * lanes);
        w->targets = malloc(sizeof(int32_t) * LANES_BLOCK * lanes);
    }
    if (!w || !w->states || !w->bars || !w->targets)
        fail(jb, TF_E_NOMEM);
    for (long long j; !atomic_load(&jb->rc) && (j = atomic_fetch_add(&jb->next, lanes)) < jb->n;) {
        if (jb->progress && __atomic_load_n(&jb->progress->cancel, __ATOMIC_RELAXED))
            break;
        int rc = run_group(jb, j, w);
        if (rc) {
            fail(jb, rc);
            break;
        }
        if (jb->progress)
            __atomic_fetch_add(&jb->progress->done, jb->n - j < lanes ? jb->n - j : lanes,
                               __ATOMIC_RELAXED);
    }
    if (w) {
        free(w->states);
        free(w->bars);
        free(w->targets);
    }
    free(w);
    return NULL;
}

int tfs_lanes_sweep(const tf_strategy_def *def, const double *close, int64_t n_bars,
                    const double *params, int64_t n, size_t stride, const tfs_fast_opts *fo,
                    tfk_book *out)
{
    lanes_job jb = {.def = def,
                    .close = close,
                    .n_bars = n_bars,
                    .params = params,
                    .n = n,
                    .stride = stride,
                    .fee = fo->fee,
                    .stats = fo->stats,
                    .tin = fo->tin,
                    .progress = fo->progress,
                    .out = out,
                    .tacc = fo->tacc};
    atomic_init(&jb.next, 0);
    atomic_init(&jb.rc, 0);
    int groups = (int)((n + def->lanes - 1) / def->lanes);
    tfs_run_threads(lanes_main, &jb, fo->nt < groups ? fo->nt : groups);
    return atomic_load(&jb.rc);
}

/* The fast sweep: bit-identical to tf_sweep_reference, much faster.
 *
 * - First-stage WMAs of the close (lengths L, half, p, p3, p2) depend only on the length, so each
 *   distinct length is computed once per call and shared by every combo that needs it.
 * - Time is cut into blocks of TF_BLOCK bars so the working set stays in cache. For block
 *   [t0, t1) the first stage is computed over exactly [t0, t1). Each combo carries the last
 *   sq-1 values of its raw series and the last p-1 of its inner series from block to block (its
 *   "history"), so WMA(raw, sq) and WMA(inner, p) read the same values, in the same order, as an
 *   unblocked pass: the bits do not depend on the blocking, nothing is recomputed, and memory
 *   does not grow with n_bars.
 * - Within a block, threads first share out the distinct first-stage lengths, then (after a
 *   barrier) whole combos; each combo's history and stop-and-reverse state live in its own slots.
 *   Who computes what never changes a result, so any thread count gives the same bits.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernel_internal.h"

#define TF_BLOCK 8192
#define N_FIRST 5 /* first-stage WMAs per combo: half, L, p3, p2, p */

static const int first_param[N_FIRST] = {TF_P_HALF, TF_P_L, TF_P_P3, TF_P_P2, TF_P_P};

typedef struct plan {
    const double *close;
    int64_t n_bars;
    const int64_t *params;
    int64_t n_combos;
    tf_isa_ops ops;

    int64_t n_len;       /* distinct first-stage lengths, longest first */
    int64_t *len;        /* [n_len] */
    int32_t *slot;       /* [n_combos][N_FIRST]: index into len */
    double *first;       /* [n_len][TF_BLOCK]: the current block's first stage */
    const double **full; /* [n_len]: a whole-series row of a tf_series, or NULL */
    char *ready;        /* [n_len]: 1 if full[u] is already complete (else filled block by block) */
    int64_t n_fill;     /* whole-series rows this call fills for its tf_series */
    int64_t *fill_idx;  /* [n_fill]: index into len */
    double **fill_buf;  /* [n_fill] */
    int64_t *hist_off;  /* [n_combos]: start of the combo's raw history, inner history after it */
    double *hist;       /* all histories */
    int64_t hist_total; /* doubles in hist */
    int64_t hraw_max, hinner_max;
    tf_sar *sar; /* [n_combos] */

    /* Work counters, two per block (first-stage rows, combos), so nobody ever resets one. */
    atomic_llong *next;
    int n_threads;
    pthread_barrier_t barrier;
} plan;

/* Outputs [t0, t1) of one block. */
typedef struct block {
    int64_t t0, t1;
} block;

struct gate;

typedef struct worker {
    plan *pl;
    struct gate *gate;
    double *scratch; /* raw: hraw_max + TF_BLOCK, inner: hinner_max + TF_BLOCK, hma, hma3 */
    pthread_t tid;
} worker;

/* History a second-stage window W needs: W-1 values, or none if the line can never exist. */
static int64_t hist_len(int64_t W, int64_t n_bars)
{
    return W <= n_bars ? W - 1 : 0;
}

static void fill_nan(double *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = NAN;
}

/* WMA(x, W) at bars [lo, hi) into out[t - t0], NaN during warm-up (t < W-1); x[k] holds the
 * input at bar k + x_origin. */
static void wma_block(const plan *pl, const double *x, int64_t x_origin, int64_t W, const block *b,
                      double *out)
{
    int64_t lo = W - 1 > b->t0 ? W - 1 : b->t0;
    if (lo >= b->t1) {
        fill_nan(out, b->t1 - b->t0);
        return;
    }
    fill_nan(out, lo - b->t0);
    /* Bars lo-W+1 .. t1-1 are all in x: lo-W+1 >= x_origin (the close from 0, a history of W-1). */
    pl->ops.wma(x, W, lo - x_origin, b->t1 - x_origin, out + (lo - b->t0));
}

/* The first-stage row u for block b, wherever it lives: in a tf_series' whole-series row, or
 * in this call's block buffer. */
static const double *row(const plan *pl, const block *b, int64_t u)
{
    return pl->full[u] ? pl->full[u] + b->t0 : pl->first + u * TF_BLOCK;
}

/* One first-stage row for the current block: WMA(close, len)[t] at row[t - t0]. A row a
 * tf_series already holds is not computed again; one it is filling is written in place. */
static void first_row(const plan *pl, const block *b, int64_t u)
{
    if (!pl->ready[u])
        wma_block(pl, pl->close, 0, pl->len[u], b, (double *)row(pl, b, u));
}

static void combo_block(const plan *pl, const block *b, int64_t j, double *scratch)
{
    const int64_t *p = pl->params + j * TF_PARAMS_PER_COMBO;
    const int32_t *sl = pl->slot + j * N_FIRST;
    const double *half = row(pl, b, sl[0]), *full = row(pl, b, sl[1]);
    const double *w3 = row(pl, b, sl[2]), *w2 = row(pl, b, sl[3]), *wp = row(pl, b, sl[4]);
    int64_t n = b->t1 - b->t0;
    int64_t hr = hist_len(p[TF_P_SQ], pl->n_bars), hi = hist_len(p[TF_P_P], pl->n_bars);
    double *raw_hist = pl->hist + pl->hist_off[j], *inner_hist = raw_hist + hr;
    double *raw = scratch, *inner = raw + pl->hraw_max + TF_BLOCK;
    double *hma = inner + pl->hinner_max + TF_BLOCK, *hma3 = hma + TF_BLOCK;

    /* [history | this block] contiguous, so each window is one straight run, oldest first. */
    memcpy(raw, raw_hist, sizeof(double) * (size_t)hr);
    pl->ops.raw(half, full, n, raw + hr);
    memcpy(inner, inner_hist, sizeof(double) * (size_t)hi);
    pl->ops.inner(w3, w2, wp, n, inner + hi);
    wma_block(pl, raw, b->t0 - hr, p[TF_P_SQ], b, hma);
    wma_block(pl, inner, b->t0 - hi, p[TF_P_P], b, hma3);
    memcpy(raw_hist, raw + n, sizeof(double) * (size_t)hr);
    memcpy(inner_hist, inner + n, sizeof(double) * (size_t)hi);

    tf_sar st = pl->sar[j];
    const double *c = pl->close + b->t0;
    for (int64_t i = 0; i < n; i++)
        tf_sar_step_select(&st, hma3[i], hma[i], c[i]);
    pl->sar[j] = st;
}

static void run_blocks(worker *w)
{
    plan *pl = w->pl;
    int64_t nb = 0;
    for (int64_t t0 = 0; t0 < pl->n_bars; t0 += TF_BLOCK, nb++) {
        block b = {t0, t0 + TF_BLOCK < pl->n_bars ? t0 + TF_BLOCK : pl->n_bars};
        atomic_llong *next_len = &pl->next[2 * nb], *next_combo = &pl->next[2 * nb + 1];
        for (long long u; (u = atomic_fetch_add(next_len, 1)) < pl->n_len;)
            first_row(pl, &b, u);
        if (pl->n_threads > 1)
            pthread_barrier_wait(&pl->barrier);
        for (long long j; (j = atomic_fetch_add(next_combo, 1)) < pl->n_combos;)
            combo_block(pl, &b, j, w->scratch);
        /* The next block's first stage overwrites the rows this block's combos read. */
        if (pl->n_threads > 1)
            pthread_barrier_wait(&pl->barrier);
    }
}

/* Workers wait at a gate until every thread that could be started is known, so the barrier
 * counts exactly the threads that run; a failed pthread_create only means fewer threads. */
typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
} gate;

static void *worker_main(void *arg)
{
    worker *w = arg;
    gate *g = w->gate;
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    if (g->open > 0)
        run_blocks(w);
    return NULL;
}

static void run_threads(plan *pl, worker *ws, int nt)
{
    gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    int started = 1;
    for (; started < nt; started++) {
        ws[started].gate = &g;
        if (pthread_create(&ws[started].tid, NULL, worker_main, &ws[started]) != 0)
            break;
    }
    pl->n_threads = started;
    int barrier_ok =
        started == 1 || pthread_barrier_init(&pl->barrier, NULL, (unsigned)started) == 0;
    pthread_mutex_lock(&g.mu);
    g.open = barrier_ok ? 1 : -1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    if (!barrier_ok)
        pl->n_threads = 1; /* the workers leave at once; run alone */
    run_blocks(&ws[0]);
    for (int t = 1; t < started; t++)
        pthread_join(ws[t].tid, NULL);
    if (started > 1 && barrier_ok)
        pthread_barrier_destroy(&pl->barrier);
}

static int cmp_desc(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a < b) - (a > b);
}

/* Distinct first-stage lengths (longest first, so dynamic scheduling balances), each combo's
 * five row indices, and where each combo's history lives. */
static int make_plan(plan *pl)
{
    int64_t m = pl->n_combos, cand = m * N_FIRST;
    pl->len = malloc(sizeof(int64_t) * (size_t)cand);
    pl->slot = malloc(sizeof(int32_t) * (size_t)cand);
    pl->hist_off = malloc(sizeof(int64_t) * (size_t)m);
    if (!pl->len || !pl->slot || !pl->hist_off)
        return TF_E_NOMEM;
    pl->hist_total = pl->hraw_max = pl->hinner_max = 0;
    for (int64_t j = 0; j < m; j++) {
        const int64_t *p = pl->params + j * TF_PARAMS_PER_COMBO;
        for (int f = 0; f < N_FIRST; f++)
            pl->len[j * N_FIRST + f] = p[first_param[f]];
        int64_t hr = hist_len(p[TF_P_SQ], pl->n_bars), hi = hist_len(p[TF_P_P], pl->n_bars);
        pl->hist_off[j] = pl->hist_total;
        pl->hist_total += hr + hi;
        pl->hraw_max = hr > pl->hraw_max ? hr : pl->hraw_max;
        pl->hinner_max = hi > pl->hinner_max ? hi : pl->hinner_max;
    }
    qsort(pl->len, (size_t)cand, sizeof(int64_t), cmp_desc);
    int64_t n = 0;
    for (int64_t i = 0; i < cand; i++)
        if (n == 0 || pl->len[n - 1] != pl->len[i])
            pl->len[n++] = pl->len[i];
    pl->n_len = n;
    for (int64_t j = 0; j < m; j++) {
        const int64_t *p = pl->params + j * TF_PARAMS_PER_COMBO;
        for (int f = 0; f < N_FIRST; f++) {
            int64_t want = p[first_param[f]], lo = 0, hi = n - 1;
            while (lo < hi) { /* descending order */
                int64_t mid = (lo + hi) / 2;
                if (pl->len[mid] > want)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            pl->slot[j * N_FIRST + f] = (int32_t)lo;
        }
    }
    return 0;
}

/* Doubles of scratch one worker needs. */
static int64_t scratch_len(const plan *pl)
{
    return pl->hraw_max + pl->hinner_max + 4 * TF_BLOCK;
}

/* Bytes of working memory the sweep will hold with nt threads (before allocating it). */
static double footprint(const plan *pl, int nt, int64_t n_blocks)
{
    return 8.0 * ((double)pl->n_len * TF_BLOCK + (double)pl->hist_total +
                  (double)nt * (double)scratch_len(pl) + 2.0 * (double)n_blocks) +
           (double)pl->n_combos * (double)(sizeof(tf_sar) + N_FIRST * 12 + 8);
}

static int resolve_threads(const tf_sweep_opts *opts, const plan *pl)
{
    long t = opts ? opts->threads : 0;
    if (t == 0) {
        t = sysconf(_SC_NPROCESSORS_ONLN);
        if (t < 1)
            t = 1;
    }
    /* Tiny jobs are not worth a thread start (~20 us); results never depend on this. */
    double work = (double)pl->n_bars * (double)pl->n_combos;
    if (work < 2.0e5)
        t = 1;
    if (t > pl->n_combos && t > pl->n_len)
        t = pl->n_combos > pl->n_len ? pl->n_combos : pl->n_len;
    return (int)(t > TF_MAX_THREADS ? TF_MAX_THREADS : t);
}

static void free_plan(plan *pl)
{
    free(pl->len);
    free(pl->slot);
    free(pl->hist_off);
    free(pl->hist);
    free(pl->first);
    free(pl->full);
    free(pl->ready);
    free(pl->fill_idx);
    free(pl->fill_buf);
    free(pl->sar);
    free(pl->next);
}

int tf_sweep_impl(const double *close, int64_t n_bars, const int64_t *params, int64_t n_combos,
                  double *pnl, int64_t *trades, const tf_sweep_opts *opts, tf_series *series)
{
    if (n_bars < 0 || n_bars > TF_MAX_BARS)
        return TF_E_TOO_MANY_BARS;
    int rc = tf_params_check(params, n_combos);
    if (rc)
        return rc;
    if (opts && (opts->threads < 0 || opts->threads > TF_MAX_THREADS))
        return TF_E_THREADS;
    tf_isa isa = opts ? opts->isa : TF_ISA_AUTO;
    if ((unsigned)isa > TF_ISA_AVX512)
        return TF_E_INVALID_ARG;
    tf_isa_ops ops;
    if (tf_isa_ops_for(isa, &ops))
        return TF_E_ISA_UNAVAILABLE;
    if (n_combos == 0)
        return 0;
    if ((n_bars > 0 && !close) || !pnl || !trades)
        return TF_E_NULL_ARG;
    if (n_bars == 0) {
        for (int64_t j = 0; j < n_combos; j++) {
            pnl[j] = 0.0;
            trades[j] = 0;
        }
        return 0;
    }

    plan pl = {
        .close = close, .n_bars = n_bars, .params = params, .n_combos = n_combos, .ops = ops};
    worker *ws = NULL;
    rc = make_plan(&pl);
    int64_t n_blocks = (n_bars + TF_BLOCK - 1) / TF_BLOCK;
    int nt = rc ? 0 : resolve_threads(opts, &pl);
    if (!rc && opts && opts->max_bytes && footprint(&pl, nt, n_blocks) > (double)opts->max_bytes)
        rc = TF_E_LIMIT;
    if (!rc) {
        pl.full = calloc((size_t)pl.n_len, sizeof(double *));
        pl.ready = calloc((size_t)pl.n_len, 1);
        pl.fill_idx = malloc(sizeof(int64_t) * (size_t)pl.n_len);
        pl.fill_buf = malloc(sizeof(double *) * (size_t)pl.n_len);
        if (!pl.full || !pl.ready || !pl.fill_idx || !pl.fill_buf)
            rc = TF_E_NOMEM;
    }
    if (!rc && series) {
        rc = tf_series_reserve(series, pl.len, pl.n_len, pl.full, pl.fill_idx, pl.fill_buf,
                               &pl.n_fill);
        for (int64_t u = 0; u < pl.n_len; u++)
            pl.ready[u] = pl.full[u] != NULL;
        for (int64_t k = 0; k < pl.n_fill; k++)
            pl.ready[pl.fill_idx[k]] = 0;
    }
    if (!rc) {
        pl.first = malloc(sizeof(double) * (size_t)(pl.n_len * TF_BLOCK));
        pl.hist = malloc(sizeof(double) * (size_t)(pl.hist_total + 1));
        pl.sar = calloc((size_t)n_combos, sizeof(tf_sar));
        pl.next = calloc((size_t)(2 * n_blocks), sizeof(atomic_llong));
        if (!pl.first || !pl.hist || !pl.sar || !pl.next)
            rc = TF_E_NOMEM;
        else
            fill_nan(pl.hist, pl.hist_total); /* bars before 0: never read, but defined */
    }
    if (!rc && !(ws = calloc((size_t)nt, sizeof(worker))))
        rc = TF_E_NOMEM;
    for (int t = 0; !rc && t < nt; t++) {
        ws[t].pl = &pl;
        ws[t].scratch = malloc(sizeof(double) * (size_t)scratch_len(&pl));
        if (!ws[t].scratch)
            rc = TF_E_NOMEM;
    }
    if (!rc) {
        for (int64_t i = 0; i < 2 * n_blocks; i++)
            atomic_init(&pl.next[i], 0);
        run_threads(&pl, ws, nt);
    }
    if (series)
        tf_series_publish(series, pl.len, pl.fill_idx, pl.fill_buf, pl.n_fill, rc == 0);
    if (!rc) {
        for (int64_t j = 0; j < n_combos; j++) {
            pnl[j] = pl.sar[j].pnl;
            trades[j] = pl.sar[j].trades;
        }
    }
    for (int t = 0; ws && t < nt; t++)
        free(ws[t].scratch);
    free(ws);
    free_plan(&pl);
    return rc;
}

int tf_sweep(const double *close, int64_t n_bars, const int64_t *params, int64_t n_combos,
             double *pnl, int64_t *trades, const tf_sweep_opts *opts)
{
    return tf_sweep_impl(close, n_bars, params, n_combos, pnl, trades, opts, NULL);
}

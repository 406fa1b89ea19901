/* The fast sweep: bit-identical to tf_sweep_reference, much faster (docs/kernel.md).
 *
 * - Duplicate combos in the caller's grid are computed once; results are scattered back to the
 *   caller's rows.
 * - First-stage WMAs of the close (lengths L, half, p, p3, p2) depend only on the length, and the
 *   spec's oldest-first sum for a start bar s passes through the numerator of every length on its
 *   way to the longest one. So one running sum per start bar, up to the longest length wanted,
 *   yields every distinct first-stage length at once (tfk_wma_multi_fn): nothing is subtracted or
 *   reassociated, each value is the spec's sequence of operations.
 * - Time is cut into blocks sized from the L2 cache so the working set stays in cache. For block
 *   [t0, t1) the first stage is computed over exactly [t0, t1). Each combo carries the last
 *   sq-1 values of its raw series and the last p-1 of its inner series from block to block (its
 *   "history"), so WMA(raw, sq) and WMA(inner, p) read the same values, in the same order, as an
 *   unblocked pass: the bits do not depend on the blocking, and memory does not grow with n_bars.
 * - Within a block, threads first share out slices of time for the first stage, then (after a
 *   barrier) whole combos; each combo's history and stop-and-reverse state live in its own slots.
 *   Who computes what never changes a result, so any thread count gives the same bits.
 * - The stop-and-reverse loop compares the two lines 64 bars at a time into bitmasks and visits
 *   only the bars where the position flips: the only bars where the spec divides.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernel_internal.h"
#include "timeacc.h"

#define N_FIRST 5 /* first-stage WMAs per combo: half, L, p3, p2, p */

static const int first_param[N_FIRST] = {TF_P_HALF, TF_P_L, TF_P_P3, TF_P_P2, TF_P_P};

typedef struct plan {
    const double *close;
    int64_t n_bars;
    int64_t *params; /* [n_combos][6]: the distinct combos of the caller's grid */
    int64_t n_combos;
    int64_t *combo_of; /* [caller's n_combos]: index into params */
    tfk_isa_ops ops;
    int64_t block; /* bars per time block */

    int64_t n_len;       /* distinct first-stage lengths, ascending */
    int64_t *len;        /* [n_len] */
    int32_t *slot;       /* [n_combos][N_FIRST]: index into len */
    double *first;       /* [n_len][block]: the current block's first stage */
    const double **full; /* [n_len]: a whole-series row of a tf_series, or NULL */
    char *ready;        /* [n_len]: 1 if full[u] is already complete (else filled block by block) */
    int64_t n_fill;     /* whole-series rows this call fills for its tf_series */
    int64_t *fill_idx;  /* [n_fill]: index into len */
    double **fill_buf;  /* [n_fill] */
    int64_t n_need;     /* rows this call computes (not ready), ascending length */
    int64_t n_multi;    /* need[0, n_multi) come from one running sum, the rest one by one */
    int64_t *need;      /* [n_need]: index into len */
    int64_t *need_len;  /* [n_need] */
    double *need_denom; /* [n_need] */
    int by_inner;       /* groups share the inner series (p, p3, p2), else the HMA (L, half, sq) */
    int64_t n_groups;   /* runs of combos (adjacent in params) that share that line */
    int64_t *group_at;  /* [n_groups + 1]: first combo of each group */
    int64_t *hist_off; /* [n_combos + n_groups]: each combo's own line history, then each group's */
    double *hist;      /* all histories */
    int64_t hist_total; /* doubles in hist */
    int64_t hraw_max, hinner_max;
    tfk_sar *sar;           /* [n_combos] */
    tfk_sar_extra *extra;   /* [n_combos] when statistics are asked for, else NULL */
    const tfk_time_in *tin; /* the time-aware figures' hook (tfk_sweep_timed), or NULL */
    tfk_tacc *tacc;         /* [n_combos] with tin, else NULL */
    double fee;
    tf_progress *progress; /* NULL, or the caller's progress and cancel flag */
    int extra_wanted;

    /* Work counters, two per block (first-stage slices, combos), so nobody ever resets one. */
    atomic_llong *next;
    int n_threads;
    pthread_barrier_t barrier;
} plan;

/* The two lines a combo compares. Group key first: the comparator orders combos so that those
 * sharing the group's line are adjacent. */
static const int hma_key[TF_PARAMS_PER_COMBO] = {TF_P_L, TF_P_HALF, TF_P_SQ,
                                                 TF_P_P, TF_P_P3,   TF_P_P2};
static const int inner_key[TF_PARAMS_PER_COMBO] = {TF_P_P, TF_P_P3,   TF_P_P2,
                                                   TF_P_L, TF_P_HALF, TF_P_SQ};

/* Outputs [t0, t1) of one block. */
typedef struct block {
    int64_t t0, t1;
} block;

struct gate;

typedef struct worker {
    plan *pl;
    struct gate *gate;
    double *scratch; /* raw: hraw_max + block, inner: hinner_max + block, hma, hma3 */
    uint64_t *mask;  /* [2][block/64 + 1]: the SAR signal bitmasks */
    double **outs;   /* [n_need]: where the first-stage slice writes each row */
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
    return pl->full[u] ? pl->full[u] + b->t0 : pl->first + u * pl->block;
}

/* Slice k of n_slices of block b's first stage: every row this call computes, for the bars
 * [c0, c1), from one running sum (rows a tf_series already holds are not computed again; rows
 * it is filling are written in place). Slices overlap only in what they read. */
static void first_slice(const plan *pl, const block *b, int64_t k, int64_t n_slices, double **outs)
{
    int64_t n = b->t1 - b->t0;
    int64_t c0 = b->t0 + n * k / n_slices, c1 = b->t0 + n * (k + 1) / n_slices;
    if (c0 >= c1)
        return;
    for (int64_t q = 0; q < pl->n_multi; q++) {
        outs[q] = (double *)row(pl, b, pl->need[q]) + (c0 - b->t0);
        int64_t warm = pl->need_len[q] - 1; /* bars before it are NaN (spec section 3) */
        if (warm > c0)
            fill_nan(outs[q], (warm < c1 ? warm : c1) - c0);
    }
    pl->ops.wma_multi(pl->close, pl->n_bars, pl->need_len, pl->need_denom, pl->n_multi, c0, c1,
                      outs);
}

/* Phase one of a block, item k: a slice of the one-pass rows, or one row too long for it. */
static void first_item(const plan *pl, const block *b, int64_t k, int64_t n_slices, double **outs)
{
    if (k < n_slices) {
        first_slice(pl, b, k, n_slices, outs);
        return;
    }
    int64_t u = pl->need[pl->n_need - 1 - (k - n_slices)]; /* longest first, to balance */
    wma_block(pl, pl->close, 0, pl->len[u], b, (double *)row(pl, b, u));
}

/* The spec's loop (section 5) over one block, visiting only the bars that matter: where both
 * lines exist and differ on all 64 bars of a word and a position is open, the wanted side is
 * the gt bit, and the position flips exactly where that bit differs from the one before it.
 * Other words (warm-up, NaN, equal lines, before the first open) run the spec's step per bar. */
/* x: the combo's statistics, or NULL; t0: the block's first bar. Inlined into two copies, so
 * the plain sweep carries no trace of the statistics. (Measured: Welford's chain waits on a
 * division per trade; buffering the returns to run two combos' chains side by side was slower
 * than keeping it here, where the flip loop's other work overlaps it.) */
/* tfk_sar_step with the time-aware figures' hook (x and ta set): the same booking, and the closed
 * trade handed to ta at its exit bar i. */
static inline __attribute__((always_inline)) void sar_step_timed(tfk_sar *st, tfk_sar_extra *x,
                                                                 tfk_tacc *ta,
                                                                 const tfk_time_in *tin, double f,
                                                                 double s, double c, int64_t i)
{
    int64_t want;
    if (f != f || s != s)
        return;
    if (f > s)
        want = 1;
    else if (f < s)
        want = -1;
    else
        return;
    if (want != st->pos) {
        if (st->pos != 0) {
            int p = (int)st->pos;
            double r = tfk_sar_book(st, x, c);
            tfk_tacc_close(ta, tin, i, p, r);
        } else {
            x->first_bar = i;
        }
        st->pos = want;
        st->entry = c;
        tfk_tacc_enter(ta, tin, i);
    }
}

/* ta_mem, tin: the time-aware figures' hook (x_mem set), or NULL: a third copy. */
static inline __attribute__((always_inline)) void
sar_block_with(tfk_sar *st_mem, tfk_sar_extra *x_mem, tfk_tacc *ta_mem, const tfk_time_in *tin,
               const double *hma3, const double *hma, const double *c, int64_t n, int64_t t0,
               const uint64_t *gt, const uint64_t *lt)
{
    /* The state in locals for the block (registers: stores and reloads through the combo's
     * slots would put store-to-load latency on every trade's dependency chains). */
    tfk_sar st_local = *st_mem, *st = &st_local;
    tfk_sar_extra x_local, *x = NULL;
    if (x_mem) {
        x_local = *x_mem;
        x = &x_local;
    }
    tfk_tacc ta_local, *ta = NULL;
    if (ta_mem) {
        ta_local = *ta_mem;
        ta = &ta_local;
    }
    for (int64_t w = 0; w * 64 < n; w++) {
        int64_t base = w * 64, nb = n - base < 64 ? n - base : 64;
        uint64_t all = nb == 64 ? ~(uint64_t)0 : ((uint64_t)1 << nb) - 1;
        uint64_t g = gt[w];
        if (st->pos == 0 || (g | lt[w]) != all) {
            for (int64_t i = base; i < base + nb; i++) {
                if (ta)
                    sar_step_timed(st, x, ta, tin, hma3[i], hma[i], c[i], t0 + i);
                else
                    tfk_sar_step(st, x, hma3[i], hma[i], c[i], t0 + i);
            }
            continue;
        }
        uint64_t flips = (g ^ ((g << 1) | (uint64_t)(st->pos > 0))) & all;
        while (flips) {
            int bit = __builtin_ctzll(flips);
            flips &= flips - 1;
            int64_t want = (g >> bit) & 1 ? 1 : -1;
            if (ta) {
                int p = (int)st->pos;
                int64_t at = t0 + base + bit;
                double r = tfk_sar_book(st, x, c[base + bit]);
                tfk_tacc_close(ta, tin, at, p, r);
                st->pos = want;
                st->entry = c[base + bit];
                tfk_tacc_enter(ta, tin, at);
            } else {
                tfk_sar_flip(st, x, want, c[base + bit]);
            }
        }
    }
    *st_mem = st_local;
    if (x_mem)
        *x_mem = x_local;
    if (ta_mem)
        *ta_mem = ta_local;
}

static void sar_block(tfk_sar *st, const double *hma3, const double *hma, const double *c,
                      int64_t n, const uint64_t *gt, const uint64_t *lt)
{
    sar_block_with(st, NULL, NULL, NULL, hma3, hma, c, n, 0, gt, lt);
}

static void sar_block_stats(tfk_sar *st, tfk_sar_extra *x, const double *hma3, const double *hma,
                            const double *c, int64_t n, int64_t t0, const uint64_t *gt,
                            const uint64_t *lt)
{
    sar_block_with(st, x, NULL, NULL, hma3, hma, c, n, t0, gt, lt);
}

static void sar_block_timed(tfk_sar *st, tfk_sar_extra *x, tfk_tacc *ta, const tfk_time_in *tin,
                            const double *hma3, const double *hma, const double *c, int64_t n,
                            int64_t t0, const uint64_t *gt, const uint64_t *lt)
{
    sar_block_with(st, x, ta, tin, hma3, hma, c, n, t0, gt, lt);
}

/* One second-stage line over block b (spec section 4): the element-wise combination of its
 * first-stage rows after its history, `[history | block]`, so each window is one straight run
 * read oldest first; then WMA(that, W) into out, and the history slides on. inner: HMA3's line
 * (inner, W = p), else HMA's (raw, W = sq). */
static void line_block(const plan *pl, const block *b, int inner, const int32_t *sl, int64_t W,
                       double *hist, double *buf, double *out)
{
    int64_t n = b->t1 - b->t0, h = hist_len(W, pl->n_bars);
    memcpy(buf, hist, sizeof(double) * (size_t)h);
    if (inner)
        pl->ops.inner(row(pl, b, sl[2]), row(pl, b, sl[3]), row(pl, b, sl[4]), n, buf + h);
    else
        pl->ops.raw(row(pl, b, sl[0]), row(pl, b, sl[1]), n, buf + h);
    wma_block(pl, buf, b->t0 - h, W, b, out);
    memcpy(hist, buf + n, sizeof(double) * (size_t)h);
}

/* One group of combos over block b: the line they share once, then each combo's own line and
 * its stop-and-reverse loop. */
static void group_block(const plan *pl, const block *b, int64_t g, const worker *wk)
{
    int64_t B = pl->block, n = b->t1 - b->t0, j0 = pl->group_at[g], j1 = pl->group_at[g + 1];
    int in = pl->by_inner;
    double *raw_buf = wk->scratch, *inner_buf = raw_buf + pl->hraw_max + B;
    double *hma = inner_buf + pl->hinner_max + B, *hma3 = hma + B;
    const int64_t *p = pl->params + j0 * TF_PARAMS_PER_COMBO;
    line_block(pl, b, in, pl->slot + j0 * N_FIRST, in ? p[TF_P_P] : p[TF_P_SQ],
               pl->hist + pl->hist_off[pl->n_combos + g], in ? inner_buf : raw_buf,
               in ? hma3 : hma);
    uint64_t *gt = wk->mask, *lt = gt + B / 64 + 1;
    for (int64_t j = j0; j < j1; j++) {
        p = pl->params + j * TF_PARAMS_PER_COMBO;
        line_block(pl, b, !in, pl->slot + j * N_FIRST, in ? p[TF_P_SQ] : p[TF_P_P],
                   pl->hist + pl->hist_off[j], in ? raw_buf : inner_buf, in ? hma : hma3);
        pl->ops.cmp(hma3, hma, n, gt, lt);
        if (pl->tacc)
            sar_block_timed(&pl->sar[j], &pl->extra[j], &pl->tacc[j], pl->tin, hma3, hma,
                            pl->close + b->t0, n, b->t0, gt, lt);
        else if (pl->extra)
            sar_block_stats(&pl->sar[j], &pl->extra[j], hma3, hma, pl->close + b->t0, n, b->t0, gt,
                            lt);
        else
            sar_block(&pl->sar[j], hma3, hma, pl->close + b->t0, n, gt, lt);
    }
}

/* The caller asked the sweep to stop. Every thread still passes every barrier (so none waits
 * for one that left); the work between them is skipped. */
static int cancelled(const plan *pl)
{
    return pl->progress && __atomic_load_n(&pl->progress->cancel, __ATOMIC_RELAXED);
}

static void group_block_counted(const plan *pl, const block *b, int64_t g, const worker *wk)
{
    group_block(pl, b, g, wk);
    if (pl->progress)
        __atomic_fetch_add(&pl->progress->done, pl->group_at[g + 1] - pl->group_at[g],
                           __ATOMIC_RELAXED);
}

static void run_blocks(worker *w)
{
    plan *pl = w->pl;
    int64_t nb = 0, n_slices = pl->n_multi ? pl->n_threads : 0;
    int64_t n_items = n_slices + pl->n_need - pl->n_multi;
    for (int64_t t0 = 0; t0 < pl->n_bars; t0 += pl->block, nb++) {
        block b = {t0, t0 + pl->block < pl->n_bars ? t0 + pl->block : pl->n_bars};
        atomic_llong *next_slice = &pl->next[2 * nb], *next_combo = &pl->next[2 * nb + 1];
        for (long long k; (k = atomic_fetch_add(next_slice, 1)) < n_items;)
            if (!cancelled(pl))
                first_item(pl, &b, k, n_slices, w->outs);
        if (pl->n_threads > 1)
            pthread_barrier_wait(&pl->barrier);
        for (long long g; (g = atomic_fetch_add(next_combo, 1)) < pl->n_groups;)
            if (!cancelled(pl))
                group_block_counted(pl, &b, g, w);
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

/* Bars per time block, from the L2 cache of this machine (read once). A combo's block works over
 * 5 first-stage rows and 4 scratch rows of `block` doubles, which must stay in L2 while the other
 * combos' rows stream through it. Measured: 2,048 bars 1.12x faster than 8,192 on a 512 KiB L2
 * (Zen 3); on a 1 MiB L2 (Zen 5, thread CPU time, default sweep, under load) 512..2,048 within
 * noise, 4,096 5-10% slower, 8,192 slower still (quiet: all within 1.5%). So a block is L2 / 512
 * bytes' worth of bars, a power of two in 1,024 .. 16,384 (larger blocks cost barriers and
 * first-stage overlap less). Unknown L2: 1 MiB assumed. */
static int64_t block_bars;
static pthread_once_t block_once = PTHREAD_ONCE_INIT;

/* The L2 size in bytes from sysfs (cpu0's unified level-2 cache), or 0. */
static long l2_from_sysfs(void)
{
    for (int idx = 0; idx < 8; idx++) {
        char path[96], buf[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", idx);
        FILE *f = fopen(path, "r");
        if (!f)
            return 0;
        int level = fgets(buf, sizeof buf, f) ? atoi(buf) : 0;
        fclose(f);
        if (level != 2)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        if (!(f = fopen(path, "r")))
            return 0;
        long kib = 0;
        char unit = 'K';
        if (fscanf(f, "%ld%c", &kib, &unit) < 1)
            kib = 0;
        fclose(f);
        return unit == 'M' ? kib << 20 : kib << 10;
    }
    return 0;
}

static void read_block_bars(void)
{
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l2 <= 0)
        l2 = l2_from_sysfs();
    if (l2 <= 0)
        l2 = 1L << 20;
    int64_t b = 1024;
    while (b < 16384 && 2 * b * 512 <= l2)
        b *= 2;
    block_bars = b;
}

int64_t tfk_sweep_block_bars(void)
{
    pthread_once(&block_once, read_block_bars);
    return block_bars;
}

/* Orders combo rows by their parameters, key[] first (then by row, so the order is defined). */
/* The block for nt threads: the L2's, times the thread count (up to 4). Each block costs two
 * barriers and an uneven finish; measured on 2 threads (1 MiB L2, quiet machine, default
 * sweep): 1,024 bars 43 ms, 2,048 40 ms, 4,096 37.7 ms, 8,192 37.0 ms, while one thread is
 * within 1.5% from 1,024 to 8,192 bars. Results never depend on the block. */
static int64_t block_for(int nt)
{
    int64_t b = tfk_sweep_block_bars() * (nt < 4 ? nt : 4);
    return b < 16384 ? b : 16384;
}

static int cmp_by(const int64_t *a, const int64_t *b, const int *key)
{
    for (int k = 0; k < TF_PARAMS_PER_COMBO; k++)
        if (a[key[k]] != b[key[k]])
            return (a[key[k]] > b[key[k]]) - (a[key[k]] < b[key[k]]);
    return (a > b) - (a < b);
}

static int cmp_hma_first(const void *x, const void *y)
{
    return cmp_by(*(const int64_t *const *)x, *(const int64_t *const *)y, hma_key);
}

static int cmp_inner_first(const void *x, const void *y)
{
    return cmp_by(*(const int64_t *const *)x, *(const int64_t *const *)y, inner_key);
}

/* Distinct values of the first three key[] parameters among sorted rows. */
static int64_t count_keys(const int64_t *const *rows, int64_t m, const int *key)
{
    int64_t n = 0;
    for (int64_t i = 0; i < m; i++)
        if (i == 0 || rows[i][key[0]] != rows[i - 1][key[0]] ||
            rows[i][key[1]] != rows[i - 1][key[1]] || rows[i][key[2]] != rows[i - 1][key[2]])
            n++;
    return n;
}

/* Groups of at most GROUP_MAX combos, and at least ~8 groups when there are 8 combos, so the
 * threads still share a block's work when one line is shared by a large part of the grid (each
 * part computes the shared line once, with its own history). */
#define GROUP_MAX 16

static void split_groups(plan *pl)
{
    int64_t cap = pl->n_combos / 8, n = pl->n_groups, k = 0;
    cap = cap < 1 ? 1 : cap > GROUP_MAX ? GROUP_MAX : cap;
    int64_t *old = malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (!old)
        return; /* unsplit groups only cost balance, never a bit */
    memcpy(old, pl->group_at, sizeof(int64_t) * (size_t)(n + 1));
    for (int64_t g = 0; g < n; g++)
        for (int64_t a = old[g]; a < old[g + 1]; a += cap)
            pl->group_at[k++] = a;
    pl->group_at[k] = old[n];
    pl->n_groups = k;
    free(old);
}

/* The distinct combos of the caller's grid (params, n_combos) and each caller row's index among
 * them (combo_of): identical rows are computed once. They are grouped by the second-stage line
 * that fewer distinct values need computing (HMA3's inner series or the HMA), each group's line
 * computed once per block (group_at). */
static int dedup_combos(plan *pl, const int64_t *params, int64_t m)
{
    const int64_t **rows = malloc(sizeof(*rows) * (size_t)m);
    pl->params = malloc(sizeof(int64_t) * TF_PARAMS_PER_COMBO * (size_t)m);
    pl->combo_of = malloc(sizeof(int64_t) * (size_t)m);
    pl->group_at = malloc(sizeof(int64_t) * (size_t)(m + 1));
    if (!rows || !pl->params || !pl->combo_of || !pl->group_at) {
        free(rows);
        return TF_E_NOMEM;
    }
    for (int64_t j = 0; j < m; j++)
        rows[j] = params + j * TF_PARAMS_PER_COMBO;
    qsort(rows, (size_t)m, sizeof(*rows), cmp_inner_first);
    int64_t n_inner = count_keys(rows, m, inner_key);
    qsort(rows, (size_t)m, sizeof(*rows), cmp_hma_first);
    pl->by_inner = n_inner < count_keys(rows, m, hma_key);
    const int *key = pl->by_inner ? inner_key : hma_key;
    if (pl->by_inner)
        qsort(rows, (size_t)m, sizeof(*rows), cmp_inner_first);
    int64_t n = 0;
    pl->n_groups = 0;
    const size_t bytes = sizeof(int64_t) * TF_PARAMS_PER_COMBO;
    for (int64_t i = 0; i < m; i++) {
        const int64_t *last = pl->params + (n - 1) * TF_PARAMS_PER_COMBO;
        if (n == 0 || memcmp(last, rows[i], bytes)) {
            if (n == 0 || last[key[0]] != rows[i][key[0]] || last[key[1]] != rows[i][key[1]] ||
                last[key[2]] != rows[i][key[2]])
                pl->group_at[pl->n_groups++] = n;
            memcpy(pl->params + (n++) * TF_PARAMS_PER_COMBO, rows[i], bytes);
        }
        pl->combo_of[(rows[i] - params) / TF_PARAMS_PER_COMBO] = n - 1;
    }
    pl->group_at[pl->n_groups] = n;
    pl->n_combos = n;
    free(rows);
    split_groups(pl);
    return 0;
}

static int cmp_asc(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* Distinct first-stage lengths (ascending, the order one running sum reaches them), each
 * combo's five row indices, and where each combo's history lives. */
static int make_plan(plan *pl)
{
    int64_t m = pl->n_combos, cand = m * N_FIRST;
    pl->len = malloc(sizeof(int64_t) * (size_t)cand);
    pl->slot = malloc(sizeof(int32_t) * (size_t)cand);
    pl->hist_off = malloc(sizeof(int64_t) * (size_t)(m + pl->n_groups));
    if (!pl->len || !pl->slot || !pl->hist_off)
        return TF_E_NOMEM;
    pl->hist_total = pl->hraw_max = pl->hinner_max = 0;
    for (int64_t j = 0; j < m; j++) {
        const int64_t *p = pl->params + j * TF_PARAMS_PER_COMBO;
        for (int f = 0; f < N_FIRST; f++)
            pl->len[j * N_FIRST + f] = p[first_param[f]];
        int64_t hr = hist_len(p[TF_P_SQ], pl->n_bars), hi = hist_len(p[TF_P_P], pl->n_bars);
        pl->hist_off[j] = pl->hist_total; /* the combo's own line */
        pl->hist_total += pl->by_inner ? hr : hi;
        pl->hraw_max = hr > pl->hraw_max ? hr : pl->hraw_max;
        pl->hinner_max = hi > pl->hinner_max ? hi : pl->hinner_max;
    }
    for (int64_t g = 0; g < pl->n_groups; g++) { /* each group's shared line */
        const int64_t *p = pl->params + pl->group_at[g] * TF_PARAMS_PER_COMBO;
        pl->hist_off[m + g] = pl->hist_total;
        pl->hist_total += hist_len(p[pl->by_inner ? TF_P_P : TF_P_SQ], pl->n_bars);
    }
    qsort(pl->len, (size_t)cand, sizeof(int64_t), cmp_asc);
    int64_t n = 0;
    for (int64_t i = 0; i < cand; i++)
        if (n == 0 || pl->len[n - 1] != pl->len[i])
            pl->len[n++] = pl->len[i];
    pl->n_len = n;
    for (int64_t j = 0; j < m; j++) {
        const int64_t *p = pl->params + j * TF_PARAMS_PER_COMBO;
        for (int f = 0; f < N_FIRST; f++) {
            int64_t want = p[first_param[f]], lo = 0, hi = n - 1;
            while (lo < hi) {
                int64_t mid = (lo + hi) / 2;
                if (pl->len[mid] < want)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            pl->slot[j * N_FIRST + f] = (int32_t)lo;
        }
    }
    return 0;
}

/* How many of the needed rows (ascending) one running sum should give, for slices of about
 * `width` bars: a slice's sum costs about width*M + M*M/2 multiply-adds for a longest length M
 * (its starts reach back M-1 bars before the slice), a row computed alone width*L. Long lengths
 * (relative to the block) are cheaper alone; pick the cheapest split. */
static int64_t multi_prefix(const int64_t *len, int64_t n, double width)
{
    double rest = 0.0, best_cost, cost;
    for (int64_t q = 0; q < n; q++)
        rest += width * (double)len[q];
    best_cost = rest;
    int64_t best = 0;
    for (int64_t q = 0; q < n; q++) {
        double M = (double)len[q];
        rest -= width * M;
        cost = width * M + M * M / 2.0 + rest;
        if (cost < best_cost) {
            best_cost = cost;
            best = q + 1;
        }
    }
    return best;
}

/* The rows this call computes: those no tf_series holds complete, ascending, split between the
 * one running sum and rows computed alone (multi_prefix). */
static int plan_need(plan *pl, int nt)
{
    pl->need = malloc(sizeof(int64_t) * (size_t)pl->n_len);
    pl->need_len = malloc(sizeof(int64_t) * (size_t)pl->n_len);
    pl->need_denom = malloc(sizeof(double) * (size_t)pl->n_len);
    if (!pl->need || !pl->need_len || !pl->need_denom)
        return TF_E_NOMEM;
    pl->n_need = 0;
    for (int64_t u = 0; u < pl->n_len; u++) {
        if (pl->ready[u])
            continue;
        pl->need[pl->n_need] = u;
        pl->need_len[pl->n_need] = pl->len[u];
        pl->need_denom[pl->n_need] = tfk_wma_denom(pl->len[u]);
        pl->n_need++;
    }
    pl->n_multi = multi_prefix(pl->need_len, pl->n_need, (double)pl->block / (double)nt);
    return 0;
}

/* Doubles of scratch one worker needs. */
static int64_t scratch_len(const plan *pl)
{
    return pl->hraw_max + pl->hinner_max + 4 * pl->block;
}

/* Bytes of working memory the sweep will hold with nt threads (before allocating it). */
static double footprint(const plan *pl, int nt, int64_t n_blocks)
{
    double per_thread =
        8.0 * ((double)scratch_len(pl) + 2.0 * (double)(pl->block / 64 + 1) + (double)pl->n_len);
    return 8.0 * ((double)pl->n_len * (double)pl->block + (double)pl->hist_total +
                  2.0 * (double)n_blocks + 3.0 * (double)pl->n_len) +
           (double)nt * per_thread +
           (double)pl->n_combos * (double)(sizeof(tfk_sar) + N_FIRST * 12 + 8 + 48 +
                                           (pl->extra_wanted ? sizeof(tfk_sar_extra) : 0) +
                                           (pl->tin ? sizeof(tfk_tacc) : 0)) +
           (pl->tin ? tfk_time_bytes(pl->n_bars) : 0.0);
}

static int resolve_threads(const tfk_opts *opts, const plan *pl)
{
    long t = opts->threads;
    if (t == 0) {
        t = sysconf(_SC_NPROCESSORS_ONLN);
        if (t < 1)
            t = 1;
    }
    /* Tiny jobs are not worth a thread start (~20 us); results never depend on this. */
    double work = (double)pl->n_bars * (double)pl->n_combos;
    if (work < 2.0e5)
        t = 1;
    if (t > pl->n_groups && t > pl->n_len)
        t = pl->n_groups > pl->n_len ? pl->n_groups : pl->n_len;
    return (int)(t > TF_MAX_THREADS ? TF_MAX_THREADS : t);
}

static void free_plan(plan *pl)
{
    free(pl->params);
    free(pl->combo_of);
    free(pl->group_at);
    free(pl->len);
    free(pl->slot);
    free(pl->hist_off);
    free(pl->hist);
    free(pl->first);
    free(pl->full);
    free(pl->ready);
    free(pl->fill_idx);
    free(pl->fill_buf);
    free(pl->need);
    free(pl->need_len);
    free(pl->need_denom);
    free(pl->sar);
    free(pl->extra);
    free(pl->tacc);
    free(pl->next);
}

/* Arguments, as tf_sweep documents them; 0 or the error, with ops filled. */
static int check_args(const double *close, int64_t n_bars, const int64_t *params, int64_t n_combos,
                      double *pnl, int64_t *trades, const tf_sweep_opts *in, tfk_opts *opts,
                      tfk_isa_ops *ops)
{
    if (n_bars < 0 || n_bars > TF_MAX_BARS)
        return TF_E_TOO_MANY_BARS;
    int rc = tf_params_check(params, n_combos);
    if (rc)
        return rc;
    if ((rc = tfk_opts_resolve(in, opts)))
        return rc;
    if (opts->threads < 0 || opts->threads > TF_MAX_THREADS)
        return TF_E_THREADS;
    tf_isa isa = opts->isa;
    if ((unsigned)isa > TF_ISA_AVX512)
        return TF_E_INVALID_ARG;
    if (tfk_isa_ops_for(isa, ops))
        return TF_E_ISA_UNAVAILABLE;
    if (n_combos > 0 && ((n_bars > 0 && !close) || !pnl || !trades))
        return TF_E_NULL_ARG;
    return 0;
}

/* Everything the plan holds for one run, after the footprint check: 0 or TF_E_NOMEM. */
static int alloc_run(plan *pl, int nt, int64_t n_blocks, tf_series *series)
{
    pl->full = calloc((size_t)pl->n_len, sizeof(double *));
    pl->ready = calloc((size_t)pl->n_len, 1);
    pl->fill_idx = malloc(sizeof(int64_t) * (size_t)pl->n_len);
    pl->fill_buf = malloc(sizeof(double *) * (size_t)pl->n_len);
    if (!pl->full || !pl->ready || !pl->fill_idx || !pl->fill_buf)
        return TF_E_NOMEM;
    if (series) {
        int rc = tfk_series_reserve(series, pl->len, pl->n_len, pl->full, pl->fill_idx,
                                    pl->fill_buf, &pl->n_fill);
        if (rc)
            return rc;
        for (int64_t u = 0; u < pl->n_len; u++)
            pl->ready[u] = pl->full[u] != NULL;
        for (int64_t k = 0; k < pl->n_fill; k++)
            pl->ready[pl->fill_idx[k]] = 0;
    }
    pl->first = malloc(sizeof(double) * (size_t)(pl->n_len * pl->block));
    pl->hist = malloc(sizeof(double) * (size_t)(pl->hist_total + 1));
    pl->sar = malloc(sizeof(tfk_sar) * (size_t)pl->n_combos);
    pl->next = calloc((size_t)(2 * n_blocks), sizeof(atomic_llong));
    if (!pl->first || !pl->hist || !pl->sar || !pl->next)
        return TF_E_NOMEM;
    if (pl->extra_wanted && !(pl->extra = malloc(sizeof(tfk_sar_extra) * (size_t)pl->n_combos)))
        return TF_E_NOMEM;
    if (pl->tin && !(pl->tacc = malloc(sizeof(tfk_tacc) * (size_t)pl->n_combos)))
        return TF_E_NOMEM;
    for (int64_t j = 0; j < pl->n_combos; j++) {
        pl->sar[j] = tfk_sar_start(pl->fee);
        if (pl->extra)
            pl->extra[j] = tfk_sar_extra_start();
        if (pl->tacc)
            pl->tacc[j] = tfk_tacc_start();
    }
    fill_nan(pl->hist, pl->hist_total); /* bars before 0: never read, but defined */
    for (int64_t i = 0; i < 2 * n_blocks; i++)
        atomic_init(&pl->next[i], 0);
    return plan_need(pl, nt);
}

static int alloc_workers(plan *pl, worker *ws, int nt)
{
    for (int t = 0; t < nt; t++) {
        ws[t].pl = pl;
        ws[t].scratch = malloc(sizeof(double) * (size_t)scratch_len(pl));
        ws[t].mask = malloc(sizeof(uint64_t) * 2 * (size_t)(pl->block / 64 + 1));
        ws[t].outs = malloc(sizeof(double *) * (size_t)(pl->n_len + 1));
        if (!ws[t].scratch || !ws[t].mask || !ws[t].outs)
            return TF_E_NOMEM;
    }
    return 0;
}

/* Zero combos or zero bars: nothing to compute, every output at its start value. */
static void empty_outputs(int64_t n_combos, double *pnl, int64_t *trades, const tfk_opts *o,
                          tfk_tacc *tacc)
{
    tfk_sar st = tfk_sar_start(o->fee);
    tfk_sar_extra x = tfk_sar_extra_start();
    for (int64_t j = 0; j < n_combos; j++) {
        pnl[j] = 0.0;
        trades[j] = 0;
        if (o->stats)
            tfk_sar_output(&st, &x, 0, &o->stats[j]);
        if (tacc)
            tacc[j] = tfk_tacc_start();
    }
}

/* The plan for a run of nt threads over n_blocks blocks: 0, TF_E_LIMIT or TF_E_NOMEM. */
static int prepare(plan *pl, const int64_t *params, int64_t n_combos, const tfk_opts *o, int *nt,
                   int64_t *n_blocks)
{
    int rc = dedup_combos(pl, params, n_combos);
    if (!rc)
        rc = make_plan(pl);
    if (rc)
        return rc;
    *nt = resolve_threads(o, pl);
    pl->block = block_for(*nt);
    *n_blocks = (pl->n_bars + pl->block - 1) / pl->block;
    if (o->max_bytes && footprint(pl, *nt, *n_blocks) > (double)o->max_bytes)
        return TF_E_LIMIT;
    return 0;
}

/* Each caller row's outputs from its distinct combo. */
static void scatter(const plan *pl, int64_t n_combos, double *pnl, int64_t *trades, tf_stats *stats,
                    tfk_tacc *tacc)
{
    for (int64_t j = 0; j < n_combos; j++) {
        int64_t u = pl->combo_of[j];
        pnl[j] = pl->sar[u].pnl;
        trades[j] = pl->sar[u].trades;
        if (stats)
            tfk_sar_output(&pl->sar[u], &pl->extra[u], pl->n_bars, &stats[j]);
        if (tacc) {
            tacc[j] = pl->tacc[u];
            tacc[j].pos = pl->sar[u].pos;
        }
    }
}

int tfk_sweep_timed(const double *close, int64_t n_bars, const int64_t *params, int64_t n_combos,
                    double *pnl, int64_t *trades, const tf_sweep_opts *opts, tf_series *series,
                    const tfk_time_in *tin, tfk_tacc *tacc)
{
    tfk_isa_ops ops;
    tfk_opts o;
    int rc = check_args(close, n_bars, params, n_combos, pnl, trades, opts, &o, &ops);
    if (rc || n_combos == 0)
        return rc;
    if (tin && (!tacc || !o.stats || tin->n != n_bars || tin->fee != o.fee))
        return TF_E_INVALID_ARG;
    if (!tin)
        tacc = NULL;
    if (n_bars == 0) {
        empty_outputs(n_combos, pnl, trades, &o, tacc);
        return 0;
    }

    plan pl = {.close = close,
               .n_bars = n_bars,
               .ops = ops,
               .fee = o.fee,
               .progress = o.progress,
               .extra_wanted = o.stats != NULL,
               .tin = tacc ? tin : NULL};
    worker *ws = NULL;
    int nt = 0;
    int64_t n_blocks = 0;
    rc = prepare(&pl, params, n_combos, &o, &nt, &n_blocks);
    if (!rc)
        rc = alloc_run(&pl, nt, n_blocks, series);
    if (!rc && !(ws = calloc((size_t)nt, sizeof(worker))))
        rc = TF_E_NOMEM;
    if (!rc)
        rc = alloc_workers(&pl, ws, nt);
    if (!rc) {
        if (o.progress)
            __atomic_store_n(&o.progress->total, pl.n_combos * n_blocks, __ATOMIC_RELAXED);
        run_threads(&pl, ws, nt);
        if (cancelled(&pl))
            rc = TF_E_CANCELLED;
    }
    if (series && pl.fill_idx)
        tfk_series_publish(series, pl.len, pl.fill_idx, pl.fill_buf, pl.n_fill, rc == 0);
    if (!rc)
        scatter(&pl, n_combos, pnl, trades, o.stats, tacc);
    for (int t = 0; ws && t < nt; t++) {
        free(ws[t].scratch);
        free(ws[t].mask);
        free(ws[t].outs);
    }
    free(ws);
    free_plan(&pl);
    return rc;
}

int tfk_sweep_impl(const double *close, int64_t n_bars, const int64_t *params, int64_t n_combos,
                   double *pnl, int64_t *trades, const tf_sweep_opts *opts, tf_series *series)
{
    return tfk_sweep_timed(close, n_bars, params, n_combos, pnl, trades, opts, series, NULL, NULL);
}

int tf_sweep(const double *close, int64_t n_bars, const int64_t *params, int64_t n_combos,
             double *pnl, int64_t *trades, const tf_sweep_opts *opts)
{
    return tfk_sweep_impl(close, n_bars, params, n_combos, pnl, trades, opts, NULL);
}

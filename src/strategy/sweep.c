/* The sweep of any strategy: identical combos once, every combo's init checked before anything
 * runs (so outputs stay untouched on error), then threads over the distinct combos, each stepped
 * bar by bar through the one booking (src/kernel/book.h). "hma" goes to tf_sweep, its fast path;
 * the five other built-ins to their shared-work sweeps (fast.c); a def with the changes member
 * to lanes.c. Who computes a combo never changes its bits: a combo's result depends only on its
 * own steps. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strategy_internal.h"

/* ---- the combo loop, written once for the reference and the threaded sweep ---- */

/* Bars per call of a def's steps (strategy.h): 16 KiB of targets on the stack. */
#define STEPS_BLOCK 4096

/* A def's steps (a block of targets a call) or step (a bar a call) over close[n] into st, every
 * bar through the booking. 0, TF_E_STRATEGY (a target outside -1, 0, +1, TF_HOLD, steps
 * failed), TF_E_CANCELLED (checked every block, or every 64 Ki bars when stepping). */
/* One bar's target t (valid) at close c, bar i: the booking, or with ta the booking with the
 * time-aware figures' hook (x is then set). */
static inline __attribute__((always_inline)) void book_bar(tfk_sar *st, tfk_sar_extra *x,
                                                           int64_t *expo, tfk_tacc *ta,
                                                           const tfk_time_in *tin, int t, double c,
                                                           int64_t i)
{
    if (!ta) {
        tfk_book_bar(st, x, expo, t, c);
        return;
    }
    if (t != TF_HOLD && t != st->pos)
        tfk_tacc_change(ta, tin, st, x, t, c, i);
    *expo += st->pos != 0;
}

/* ta, tin: the time-aware figures' hook (x set), or NULL. */
static inline __attribute__((always_inline)) int
run_targets(const tf_strategy_def *def, int (*steps)(void *, const double *, int64_t, int32_t *),
            void *state, const double *close, int64_t n, tfk_sar *st, tfk_sar_extra *x,
            int64_t *expo, tfk_tacc *ta, const tfk_time_in *tin, const tf_progress *progress)
{
    if (steps) { /* the strategy's own loop, a block of bars a call, then the booking */
        int32_t t[STEPS_BLOCK];
        for (int64_t i = 0; i < n; i += STEPS_BLOCK) {
            int64_t len = n - i < STEPS_BLOCK ? n - i : STEPS_BLOCK;
            if (progress && __atomic_load_n(&progress->cancel, __ATOMIC_RELAXED))
                return TF_E_CANCELLED;
            if (steps(state, close + i, len, t))
                return TF_E_STRATEGY;
            for (int64_t k = 0; k < len; k++) {
                if (!tfk_target_ok(t[k]))
                    return TF_E_STRATEGY;
                book_bar(st, x, expo, ta, tin, t[k], close[i + k], i + k);
            }
        }
        return 0;
    }
    int (*step)(void *, double) = def->step;
    for (int64_t i = 0; i < n; i++) {
        if (progress && (i & 0xffff) == 0xffff &&
            __atomic_load_n(&progress->cancel, __ATOMIC_RELAXED))
            return TF_E_CANCELLED;
        int t = step(state, close[i]);
        if (!tfk_target_ok(t))
            return TF_E_STRATEGY;
        book_bar(st, x, expo, ta, tin, t, close[i], i);
    }
    return 0;
}

/* Runs one combo over close[n] from a freshly initialised state into *b (statistics kept when
 * stats is non-zero). batch: through the def's steps where it has them, else (and always in the
 * reference) step by step. */
static inline __attribute__((always_inline)) int run_with(const tf_strategy_def *def, void *state,
                                                          const double *close, int64_t n,
                                                          tfk_book *b, int stats, int batch,
                                                          tfk_tacc *ta_mem, const tfk_time_in *tin,
                                                          const tf_progress *progress)
{
    tfk_sar st = b->sar;
    tfk_sar_extra x = b->x;
    int64_t expo = b->exposure;
    tfk_tacc ta_local, *ta = NULL;
    if (ta_mem) {
        ta_local = *ta_mem;
        ta = &ta_local;
    }
    int rc = run_targets(def, batch ? tfk_def_steps(def) : NULL, state, close, n, &st,
                         stats ? &x : NULL, &expo, ta, tin, progress);
    if (rc)
        return rc;
    b->sar = st;
    b->x = x;
    b->exposure = expo;
    if (ta_mem)
        *ta_mem = ta_local;
    return 0;
}

/* ta, tin: the time-aware figures' hook (stats set), or NULL. */
static int run_combo(const tf_strategy_def *def, void *state, size_t bytes, const double *p,
                     const double *close, int64_t n, double fee, int stats, int batch,
                     const tf_progress *progress, tfk_book *b, tfk_tacc *ta, const tfk_time_in *tin)
{
    tfk_book_start(b, fee);
    memset(state, 0, bytes);
    if (def->init(state, p))
        return TF_E_STRATEGY;
    if (ta) {
        *ta = tfk_tacc_start();
        return run_with(def, state, close, n, b, 1, batch, ta, tin, progress);
    }
    if (stats)
        return run_with(def, state, close, n, b, 1, batch, NULL, NULL, progress);
    return run_with(def, state, close, n, b, 0, batch, NULL, NULL, progress);
}

/* ---- argument checks shared by tf_sweep_with and its reference ---- */

static int check_args(const tf_strategy_def *def, const double *close, int64_t n_bars,
                      const double *params, int64_t n_combos, double *pnl, int64_t *trades,
                      const tf_sweep_opts *opts, tfk_opts *o)
{
    if (!def)
        return TF_E_NULL_ARG;
    if (tf_strategy_def_check(def, NULL, 0))
        return TF_E_STRATEGY;
    if (n_bars < 0 || n_bars > TF_MAX_BARS)
        return TF_E_TOO_MANY_BARS;
    if (n_combos < 0 || n_combos > TF_MAX_COMBOS)
        return TF_E_TOO_MANY_COMBOS;
    int rc = tfk_opts_resolve(opts, o);
    if (rc)
        return rc;
    if (o->threads < 0 || o->threads > TF_MAX_THREADS)
        return TF_E_THREADS;
    if ((unsigned)o->isa > TF_ISA_AVX512)
        return TF_E_INVALID_ARG;
    if (n_combos > 0 && (!params || (n_bars > 0 && !close) || !pnl || !trades))
        return TF_E_NULL_ARG;
    return 0;
}

/* Every combo's init, in the caller's order: 0, TF_E_STRATEGY, TF_E_NOMEM. *max_bytes: the
 * largest state asked for. */
static int check_inits(const tf_strategy_def *def, const double *params, int64_t n,
                       size_t *max_bytes)
{
    void *state = NULL;
    size_t cap = 0;
    int rc = 0;
    *max_bytes = 16;
    for (int64_t j = 0; j < n && !rc; j++) {
        const double *p = params + j * (int64_t)def->n_params;
        size_t bytes = tfk_state_bytes(def, p);
        if (!bytes) {
            rc = TF_E_STRATEGY;
            break;
        }
        if (bytes > cap) {
            free(state);
            if (!(state = aligned_alloc(16, bytes))) {
                rc = TF_E_NOMEM;
                break;
            }
            cap = bytes;
        }
        memset(state, 0, bytes);
        if (def->init(state, p))
            rc = TF_E_STRATEGY;
        if (bytes > *max_bytes)
            *max_bytes = bytes;
    }
    free(state);
    return rc;
}

static void write_outputs(const tfk_book *b, int stats, double *pnl, int64_t *trades, tf_stats *out)
{
    *pnl = tfk_nan_canon(b->sar.pnl);
    *trades = b->sar.trades;
    if (out)
        tfk_book_output(&b->sar, stats ? &b->x : NULL, b->exposure, out);
}

/* ---- the reference ---- */

int tf_sweep_with_reference(const tf_strategy_def *def, const double *close, int64_t n_bars,
                            const double *params, int64_t n_combos, double *pnl, int64_t *trades,
                            const tf_sweep_opts *opts)
{
    tfk_opts o;
    int rc = check_args(def, close, n_bars, params, n_combos, pnl, trades, opts, &o);
    if (rc || n_combos == 0)
        return rc;
    size_t max_bytes;
    if ((rc = check_inits(def, params, n_combos, &max_bytes)))
        return rc;
    tfk_book *books = malloc(sizeof(tfk_book) * (size_t)n_combos);
    void *state = aligned_alloc(16, max_bytes);
    if (!books || !state)
        rc = TF_E_NOMEM;
    for (int64_t j = 0; j < n_combos && !rc; j++) {
        const double *p = params + j * (int64_t)def->n_params;
        rc =
            run_combo(def, state, tfk_state_bytes(def, p), p, close, n_bars, o.fee, o.stats != NULL,
                      0, NULL, &books[j], NULL, NULL); /* the model: step, bar by bar */
    }
    for (int64_t j = 0; j < n_combos && !rc; j++)
        write_outputs(&books[j], o.stats != NULL, &pnl[j], &trades[j],
                      o.stats ? &o.stats[j] : NULL);
    free(state);
    free(books);
    return rc;
}

/* ---- the threaded sweep ---- */

typedef struct job {
    const tf_strategy_def *def;
    const double *close;
    int64_t n_bars;
    const double *params; /* [n][k]: the distinct combos */
    int64_t n;
    double fee;
    int stats;
    size_t max_bytes;
    tf_progress *progress;
    tfk_book *books;        /* [n] */
    const tfk_time_in *tin; /* the time-aware figures' hook, or NULL */
    tfk_tacc *tacc;         /* [n] with tin */
    atomic_llong next;
    atomic_int rc; /* the first error any thread met */
} job;

static int job_cancelled(const job *jb)
{
    return jb->progress && __atomic_load_n(&jb->progress->cancel, __ATOMIC_RELAXED);
}

static void *job_main(void *arg)
{
    job *jb = arg;
    void *state = aligned_alloc(16, jb->max_bytes);
    if (!state) {
        int zero = 0;
        atomic_compare_exchange_strong(&jb->rc, &zero, TF_E_NOMEM);
        return NULL;
    }
    for (long long j; (j = atomic_fetch_add(&jb->next, 1)) < jb->n;) {
        if (atomic_load(&jb->rc) || job_cancelled(jb))
            break;
        const double *p = jb->params + j * (int64_t)jb->def->n_params;
        int rc = run_combo(jb->def, state, tfk_state_bytes(jb->def, p), p, jb->close, jb->n_bars,
                           jb->fee, jb->stats, 1, jb->progress, &jb->books[j],
                           jb->tacc ? &jb->tacc[j] : NULL, jb->tin);
        if (rc) {
            int zero = 0;
            atomic_compare_exchange_strong(&jb->rc, &zero, rc);
            break;
        }
        if (jb->progress)
            __atomic_fetch_add(&jb->progress->done, 1, __ATOMIC_RELAXED);
    }
    free(state);
    return NULL;
}

void tfs_run_threads(void *(*fn)(void *), void *arg, int nt)
{
    pthread_t tid[TF_MAX_THREADS];
    int started = 0;
    for (int t = 1; t < nt; t++) {
        if (pthread_create(&tid[started], NULL, fn, arg) != 0)
            break;
        started++;
    }
    fn(arg);
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
}

int tfs_threads(int threads, double work, int64_t units)
{
    long t = threads;
    if (t == 0) {
        t = sysconf(_SC_NPROCESSORS_ONLN);
        if (t < 1)
            t = 1;
    }
    if (work < 2.0e5) /* not worth a thread start (~20 us); results never depend on this */
        t = 1;
    if (t > units)
        t = units < 1 ? 1 : units;
    return (int)(t > TF_MAX_THREADS ? TF_MAX_THREADS : t);
}

/* A caller row for the sort: identical rows (bitwise) end up adjacent, in the caller's order. */
typedef struct row_ref {
    const double *row;
    int64_t idx;
    uint32_t k;
} row_ref;

static int cmp_rows(const void *a, const void *b)
{
    const row_ref *x = a, *y = b;
    int c = memcmp(x->row, y->row, sizeof(double) * x->k);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* params[m][k] -> the distinct rows in *uniq[*n][k] (malloc'd), and combo_of[m]. */
static int dedup(const double *params, int64_t m, uint32_t k, double **uniq, int64_t *n,
                 int64_t *combo_of)
{
    row_ref *refs = malloc(sizeof(row_ref) * (size_t)m);
    double *u = malloc(sizeof(double) * (size_t)m * k);
    if (!refs || !u) {
        free(refs);
        free(u);
        return TF_E_NOMEM;
    }
    for (int64_t j = 0; j < m; j++)
        refs[j] = (row_ref){params + j * k, j, k};
    qsort(refs, (size_t)m, sizeof(row_ref), cmp_rows);
    int64_t cnt = 0;
    for (int64_t q = 0; q < m; q++) {
        if (cnt == 0 || memcmp(u + (cnt - 1) * k, refs[q].row, sizeof(double) * k) != 0)
            memcpy(u + (cnt++) * k, refs[q].row, sizeof(double) * k);
        combo_of[refs[q].idx] = cnt - 1;
    }
    free(refs);
    *uniq = u;
    *n = cnt;
    return 0;
}

/* "hma": whole numbers to int64, then tf_sweep (the fast path, every ISA); with tin, the same
 * sweep with the figures' hook (tfk_sweep_timed). */
static int sweep_hma(const double *close, int64_t n_bars, const double *params, int64_t n_combos,
                     double *pnl, int64_t *trades, const tf_sweep_opts *opts,
                     const tfk_time_in *tin, tfk_tacc *tacc)
{
    int64_t *ip = malloc(sizeof(int64_t) * TF_PARAMS_PER_COMBO * (size_t)(n_combos ? n_combos : 1));
    if (!ip)
        return TF_E_NOMEM;
    for (int64_t i = 0; i < n_combos * TF_PARAMS_PER_COMBO; i++) {
        if (!tfs_whole(params[i], 1.0, (double)TFS_MAX_WINDOW)) {
            free(ip);
            return TF_E_STRATEGY;
        }
        ip[i] = (int64_t)params[i];
    }
    int rc = tin ? tfk_sweep_timed(close, n_bars, ip, n_combos, pnl, trades, opts, NULL, tin, tacc)
                 : tf_sweep(close, n_bars, ip, n_combos, pnl, trades, opts);
    free(ip);
    return rc;
}

/* tf_sweep_with, and with tin (opts' stats set) the figures' hook: tacc_out[n_combos]. */
static int sweep_with(const tf_strategy_def *def, const double *close, int64_t n_bars,
                      const double *params, int64_t n_combos, double *pnl, int64_t *trades,
                      const tf_sweep_opts *opts, const tfk_time_in *tin, tfk_tacc *tacc_out)
{
    tfk_opts o;
    int rc = check_args(def, close, n_bars, params, n_combos, pnl, trades, opts, &o);
    if (rc || n_combos == 0)
        return rc;
    if (tin && (!tacc_out || !o.stats || tin->n != n_bars || tin->fee != o.fee))
        return TF_E_INVALID_ARG;
    if (def == &tfk_hma_def)
        return sweep_hma(close, n_bars, params, n_combos, pnl, trades, opts, tin, tacc_out);
    tfk_isa_ops ops;
    if (tfk_isa_ops_for(o.isa, &ops))
        return TF_E_ISA_UNAVAILABLE;

    int64_t *combo_of = malloc(sizeof(int64_t) * (size_t)n_combos);
    double *uniq = NULL;
    int64_t n = 0;
    tfk_book *books = NULL;
    tfk_tacc *tacc = NULL;
    size_t max_bytes = 16;
    if (!combo_of)
        return TF_E_NOMEM;
    rc = dedup(params, n_combos, def->n_params, &uniq, &n, combo_of);
    if (!rc)
        rc = check_inits(def, uniq, n, &max_bytes);
    int nt = tfs_threads(o.threads, (double)n_bars * (double)n, n);
    uint32_t lanes = tfk_def_changes(def) ? def->lanes : 0;
    if (!rc && o.max_bytes) {
        double need = (double)n * (double)(sizeof(tfk_book) + 8 * def->n_params + 8) +
                      (double)nt * (lanes ? tfs_lanes_bytes(lanes, max_bytes) : (double)max_bytes);
        if (tin) /* the series' sums and each combo's accumulation */
            need += tfk_time_bytes(n_bars) + (double)n * (double)sizeof(tfk_tacc);
        if (need > (double)o.max_bytes)
            rc = TF_E_LIMIT;
    }
    if (!rc && !(books = malloc(sizeof(tfk_book) * (size_t)n)))
        rc = TF_E_NOMEM;
    if (!rc && tin && !(tacc = malloc(sizeof(tfk_tacc) * (size_t)n)))
        rc = TF_E_NOMEM;
    if (!rc) {
        if (o.progress)
            __atomic_store_n(&o.progress->total, n, __ATOMIC_RELAXED);
        tf_isa isa = o.isa == TF_ISA_AUTO ? tf_isa_best() : o.isa;
        tfs_fast_opts fo = {o.fee,   o.stats != NULL,    nt,  o.progress, o.max_bytes,
                            ops.cmp, isa >= TF_ISA_AVX2, tin, tacc};
        rc = tfs_fast_sweep(def, close, n_bars, uniq, n, &fo, books);
        if (rc == -1 && lanes)
            rc = tfs_lanes_sweep(def, close, n_bars, uniq, n, max_bytes, &fo, books);
        if (rc == -1) {
            job jb = {.def = def,
                      .close = close,
                      .n_bars = n_bars,
                      .params = uniq,
                      .n = n,
                      .fee = o.fee,
                      .stats = o.stats != NULL,
                      .max_bytes = max_bytes,
                      .progress = o.progress,
                      .books = books,
                      .tin = tin,
                      .tacc = tacc};
            atomic_init(&jb.next, 0);
            atomic_init(&jb.rc, 0);
            tfs_run_threads(job_main, &jb, nt);
            rc = atomic_load(&jb.rc);
        }
        if (!rc && o.progress && __atomic_load_n(&o.progress->cancel, __ATOMIC_RELAXED))
            rc = TF_E_CANCELLED;
    }
    for (int64_t j = 0; j < n_combos && !rc; j++) {
        write_outputs(&books[combo_of[j]], o.stats != NULL, &pnl[j], &trades[j],
                      o.stats ? &o.stats[j] : NULL);
        if (tin) {
            tacc_out[j] = tacc[combo_of[j]];
            tacc_out[j].pos = books[combo_of[j]].sar.pos;
        }
    }
    free(tacc);
    free(books);
    free(uniq);
    free(combo_of);
    return rc;
}

int tf_sweep_with(const tf_strategy_def *def, const double *close, int64_t n_bars,
                  const double *params, int64_t n_combos, double *pnl, int64_t *trades,
                  const tf_sweep_opts *opts)
{
    return sweep_with(def, close, n_bars, params, n_combos, pnl, trades, opts, NULL, NULL);
}

int tfs_sweep_with_timed(const tf_strategy_def *def, const double *close, int64_t n_bars,
                         const double *params, int64_t n_combos, double *pnl, int64_t *trades,
                         const tf_sweep_opts *opts, const tfk_time_in *in, tfk_tacc *tacc)
{
    if (!in)
        return TF_E_NULL_ARG;
    return sweep_with(def, close, n_bars, params, n_combos, pnl, trades, opts, in, tacc);
}

/* Out-of-sample splits and walk-forward folds: the folds (rolling or anchored), the run (each
 * part swept cold, or stepped after a warm-up by warmup.c; the in-sample winner by a metric,
 * its rank out of sample) and the verdict (research.h). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/opts_size.h"
#include "common/msg.h"
#include "kernel/book.h"
#include "research/warmup.h"
#include "tollfree/error.h"
#include "tollfree/research.h"
#include "tollfree/strategy.h"

/* The first sized layout of tf_oos_opts ends with `reference`. */
#define OOS_MIN_SIZE TFU_FIELD_END(tf_oos_opts, reference)

/* Resolves the options: 0 with *o loaded and *col / *sign the metric, or the refusal. */
static int load_opts(const tf_oos_opts *in, tf_oos_opts *o, int *col, int *sign, char *msg,
                     size_t msg_cap)
{
    if (!in)
        return TF_E_NULL_ARG;
    if (tfu_opts_load(o, sizeof *o, in, OOS_MIN_SIZE))
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap,
                       "tf_oos_opts: size %zu is not a layout this library knows (%zu)", in->size,
                       sizeof *o);
    int has_split = o->split != 0.0, has_wf = o->walk_forward != 0;
    if (has_split == has_wf)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap,
                       "give exactly one of split and walk_forward (they exclude each other)");
    if (has_split && !(o->split > 0.0 && o->split < 1.0))
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap,
                       "split wants a fraction 0 < F < 1, got %.17g", o->split);
    if (has_wf && (o->walk_forward < 1 || o->walk_forward > TF_OOS_MAX_FOLDS))
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "walk_forward wants 1..%d folds, got %d",
                       TF_OOS_MAX_FOLDS, o->walk_forward);
    if (o->warmup < 0 && o->warmup != TF_OOS_WARMUP_ALL)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap,
                       "warmup wants 0 (cold), N > 0 bars or TF_OOS_WARMUP_ALL (-1), got %lld",
                       (long long)o->warmup);
    if (o->min_trades < 0)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "min_trades wants N >= 0, got %lld",
                       (long long)o->min_trades);
    const char *metric = o->metric ? o->metric : "pnl";
    int rc = tf_column_find(metric, strlen(metric), sign, msg, msg_cap);
    if (rc < 0)
        return rc;
    if (tf_column_flags(rc) & TF_COLUMN_WINDOW)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "metric %.64s: a window is not a metric",
                       metric);
    if (tf_column_flags(rc) & TF_COLUMN_TIME)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap,
                       "metric %.64s: the time-aware figures rank a plain sweep (--sort), not "
                       "the folds",
                       metric);
    *col = rc;
    return 0;
}

/* The folds of a checked o over n bars into out[cap] (cap >= the count): their count, or the
 * refusal of an empty part. */
static int make_folds(int64_t n, const tf_oos_opts *o, tf_fold *out, char *msg, size_t msg_cap)
{
    int folds = o->walk_forward > 0 ? o->walk_forward : 1;
    int64_t seg = n / (folds + 1);
    for (int k = 1; k <= folds; k++) {
        int64_t a, b, c;
        if (o->walk_forward > 0) {
            a = o->anchored ? 0 : (k - 1) * seg;
            b = k * seg;
            c = k == folds ? n : (k + 1) * seg;
        } else {
            a = 0;
            b = (int64_t)floor((double)n * o->split);
            c = n;
        }
        if (b - a < 1 || c - b < 1)
            return tfu_msg(TF_E_BAD_INPUT, msg, msg_cap,
                           "fold %d has an empty in-sample or out-of-sample part (%lld bars): use "
                           "a longer series, %s",
                           k, (long long)n,
                           o->walk_forward > 0 ? "or fewer folds" : "or a split nearer 0.5");
        out[k - 1] = (tf_fold){a, b, b, c};
    }
    return folds;
}

int tf_folds(int64_t n_bars, const tf_oos_opts *opts, tf_fold *out, int cap, char *msg,
             size_t msg_cap)
{
    tf_oos_opts o;
    int col, sign;
    int rc = load_opts(opts, &o, &col, &sign, msg, msg_cap);
    if (rc)
        return rc;
    if (n_bars < 0)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "n_bars %lld < 0", (long long)n_bars);
    int folds = o.walk_forward > 0 ? o.walk_forward : 1;
    if (!out && cap == 0)
        out = NULL;
    else if (!out)
        return TF_E_NULL_ARG;
    tf_fold local[TF_OOS_MAX_FOLDS];
    rc = make_folds(n_bars, &o, local, msg, msg_cap);
    if (rc < 0)
        return rc;
    if (!out)
        return folds;
    if (cap < folds)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "%d folds do not fit in %d rows", folds,
                       cap);
    memcpy(out, local, sizeof(tf_fold) * (size_t)folds);
    return folds;
}

/* a better than b: NaN is worse than any number. */
static int better(double a, double b)
{
    if (a != a)
        return 0;
    return b != b || a > b;
}

/* The first best of v[m] (NaN never wins; all NaN: 0). */
static int64_t best_of(const double *v, int64_t m)
{
    int64_t w = 0;
    for (int64_t j = 1; j < m; j++)
        if (better(v[j], v[w]))
            w = j;
    return w;
}

/* One part of the series, swept cold into part (stats NULL: no statistics). */
typedef struct part {
    double *pnl, *value;
    int64_t *trades;
    tf_stats *stats;
} part;

/* The combos of a run: the six windows of params, or (def set) a strategy's dparams. */
typedef struct combos {
    const tf_strategy_def *def;
    const int64_t *params;
    const double *dparams;
    int64_t m;
} combos;

static int sweep_part(const double *close, int64_t n, const combos *c, part *p,
                      const tf_sweep_opts *so, int reference)
{
    tf_sweep_opts o = *so;
    o.stats = p->stats;
    int64_t m = c->m;
    int rc;
    if (c->def)
        rc = reference
                 ? tf_sweep_with_reference(c->def, close, n, c->dparams, m, p->pnl, p->trades, &o)
                 : tf_sweep_with(c->def, close, n, c->dparams, m, p->pnl, p->trades, &o);
    else
        rc = reference ? tf_sweep_reference(close, n, c->params, m, p->pnl, p->trades, &o)
                       : tf_sweep(close, n, c->params, m, p->pnl, p->trades, &o);
    return rc;
}

/* p->value = sign * the metric column col (of the HMA table) of the part's results. */
static int part_values(const combos *c, part *p, int col, int sign)
{
    int64_t m = c->m;
    /* col is a column of the HMA table (a metric, never a window): the same metric in a
     * strategy's table is col - TF_COLUMN_PNL + n_params */
    tf_results r = {c->params, p->pnl, p->trades, p->stats, m, NULL, 0, NULL, NULL};
    if (c->def) {
        r.dparams = c->dparams;
        r.n_params = c->def->n_params;
        r.param_names = c->def->param_names;
        col = col - TF_COLUMN_PNL + (int)c->def->n_params;
    }
    return tf_column_values(&r, col, sign, p->value);
}

/* The checks of a run's arguments: 0 with *so loaded, or the refusal. */
static int check_run(const combos *c, const double *close, int64_t n_bars, const tf_oos_opts *o,
                     const tf_oos_row *rows, const tf_sweep_opts *sweep, tf_sweep_opts *so,
                     char *msg, size_t msg_cap)
{
    int64_t m = c->m;
    if (n_bars < 0 || m < 0)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "n_bars %lld or combos %lld < 0",
                       (long long)n_bars, (long long)m);
    if ((n_bars > 0 && !close) || (m > 0 && !c->params && !c->dparams) || !rows)
        return TF_E_NULL_ARG;
    *so = (tf_sweep_opts){0};
    if (sweep && tfu_opts_load(so, sizeof *so, sweep, TFU_FIELD_END(tf_sweep_opts, max_bytes)))
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "tf_sweep_opts: a bad size");
    if (so->stats)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap,
                       "tf_oos_run computes the statistics itself: sweep->stats must be NULL");
    if (m < 1)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "an empty grid (no combos)");
    if (c->def)
        return tf_strategy_params_check(c->def, c->dparams, m, NULL, msg, msg_cap);
    if (!o->warmup)
        return 0; /* tf_sweep checks the windows */
    for (int64_t j = 0; j < m; j++)
        for (int k = 0; k < TF_PARAMS_PER_COMBO; k++) {
            int64_t v = c->params[j * TF_PARAMS_PER_COMBO + k];
            if (v < 1 || v > TF_STREAM_MAX_WINDOW)
                return tfu_msg(v < 1 ? TF_E_WINDOW_TOO_SHORT : TF_E_WINDOW_TOO_LONG, msg, msg_cap,
                               "combo %lld: window %lld outside 1..%lld (a warm-up steps each "
                               "combo, as streaming does)",
                               (long long)j + 1, (long long)v, (long long)TF_STREAM_MAX_WINDOW);
        }
    return 0;
}

/* Bytes the warm run would hold: every fold's two parts of every combo, and per thread the
 * series' targets and the largest combo's state (warmup.c's allocations). */
static double warm_bytes(const combos *c, int64_t n_bars, int nf, int threads)
{
    const tf_strategy_def *def = c->def ? c->def : tf_strategy_builtin("hma");
    uint32_t np = def->n_params;
    double most = 16.0, p[TF_STRATEGY_MAX_PARAMS];
    for (int64_t j = 0; j < c->m; j++) {
        for (uint32_t k = 0; k < np; k++)
            p[k] = c->params ? (double)c->params[j * 6 + k] : c->dparams[j * (int64_t)np + k];
        size_t b = tfk_state_bytes(def, p);
        double bytes = b ? (double)b : (double)TFK_MAX_STATE;
        most = bytes > most ? bytes : most;
    }
    long nt = threads > 0 ? threads : sysconf(_SC_NPROCESSORS_ONLN);
    nt = nt < 1 ? 1 : nt > c->m ? (long)c->m : nt;
    return 2.0 * (double)nf * (double)c->m * (double)sizeof(tf_stats) +
           (double)nt * ((double)n_bars + most);
}

/* With a warm-up: every fold's parts of every combo into *out ([nf][2][m], malloc'd), within
 * the sweep options' max_bytes (TF_E_LIMIT with a message naming it). */
static int warm_all(const combos *c, const double *close, int64_t n_bars, const tf_oos_opts *o,
                    const tf_fold *folds, int nf, const tf_sweep_opts *so, tf_stats **out,
                    char *msg, size_t msg_cap)
{
    int64_t m = c->m;
    if ((uint64_t)m > SIZE_MAX / sizeof(tf_stats) / 2 / (size_t)nf)
        return TF_E_NOMEM;
    if (so->max_bytes) {
        double need = warm_bytes(c, n_bars, nf, so->threads);
        if (need > (double)so->max_bytes)
            return tfu_msg(TF_E_LIMIT, msg, msg_cap,
                           "the warm-up run needs about %.0f bytes (%d folds x 2 parts x %lld "
                           "combos, and the series and a combo's state per thread), over "
                           "max_bytes %zu",
                           need, nf, (long long)m, so->max_bytes);
    }
    *out = malloc(sizeof(tf_stats) * 2 * (size_t)nf * (size_t)m);
    if (!*out)
        return TF_E_NOMEM;
    tfr_warm w = {c->def ? c->def : tf_strategy_builtin("hma"),
                  c->params,
                  c->dparams,
                  m,
                  close,
                  n_bars,
                  folds,
                  nf,
                  o->warmup,
                  !o->reference,
                  so,
                  *out};
    return tfr_warm_run(&w);
}

/* A part's results from the warm run's rows st[m]. */
static void warm_part(const tf_stats *st, int64_t m, part *p)
{
    for (int64_t j = 0; j < m; j++) {
        p->pnl[j] = st[j].pnl;
        p->trades[j] = st[j].trades;
        if (p->stats)
            p->stats[j] = st[j];
    }
}

/* Fold k's two parts into is and os (by the warm run's rows, or swept cold). */
static int run_fold(const combos *c, const double *close, const tf_fold *f, int k,
                    const tf_stats *warm, const tf_sweep_opts *so, int reference, part *is,
                    part *os)
{
    if (warm) {
        warm_part(warm + (size_t)(2 * k) * (size_t)c->m, c->m, is);
        warm_part(warm + (size_t)(2 * k + 1) * (size_t)c->m, c->m, os);
        return 0;
    }
    int rc = sweep_part(close + f->is_start, f->is_end - f->is_start, c, is, so, reference);
    if (!rc)
        rc = sweep_part(close + f->oos_start, f->oos_end - f->oos_start, c, os, so, reference);
    return rc;
}

/* The working memory of both parts: 2 x m x (pnl, value, trades[, stats]); NULL when it cannot
 * be had. */
static char *parts_alloc(int64_t m, int stats, part *is, part *os)
{
    size_t per = 2 * sizeof(double) + sizeof(int64_t) + (stats ? sizeof(tf_stats) : 0);
    if ((uint64_t)m > SIZE_MAX / 2 / per)
        return NULL;
    char *mem = malloc(2 * per * (size_t)m);
    if (!mem)
        return NULL;
    is->pnl = (double *)(void *)mem;
    os->pnl = is->pnl + m;
    is->value = os->pnl + m;
    os->value = is->value + m;
    is->trades = (int64_t *)(void *)(os->value + m);
    os->trades = is->trades + m;
    is->stats = stats ? (tf_stats *)(void *)(os->trades + m) : NULL;
    os->stats = stats ? is->stats + m : NULL;
    return mem;
}

/* The first best of v[m] among the combos with at least min trades (NaN never wins; all NaN:
 * the first eligible); -1 when none is eligible. */
static int64_t best_eligible(const double *v, const int64_t *trades, int64_t m, int64_t min)
{
    int64_t w = -1;
    for (int64_t j = 0; j < m; j++)
        if (trades[j] >= min && (w < 0 || better(v[j], v[w])))
            w = j;
    return w;
}

/* Fold k's row from its parts' values. */
static tf_oos_row fold_row(const tf_fold *f, const part *is, const part *os, int64_t m,
                           int64_t min_trades)
{
    int64_t w = min_trades > 0 ? best_eligible(is->value, is->trades, m, min_trades)
                               : best_of(is->value, m);
    if (w < 0)
        return (tf_oos_row){*f, -1, NAN, NAN, 0, NAN, NAN, 0, 0, os->value[best_of(os->value, m)]};
    double ov = os->value[w];
    int64_t rank = 1;
    for (int64_t j = 0; j < m; j++)
        rank += better(os->value[j], ov);
    return (tf_oos_row){
        *f, w,          is->value[w],  is->pnl[w], is->trades[w],
        ov, os->pnl[w], os->trades[w], rank,       os->value[best_of(os->value, m)]};
}

static int oos_run(const combos *c, const double *close, int64_t n_bars, const tf_oos_opts *oos,
                   tf_oos_row *rows, int cap, char *msg, size_t msg_cap, const tf_sweep_opts *sweep)
{
    tf_oos_opts o;
    tf_sweep_opts so;
    int col, sign;
    int64_t m = c->m;
    int rc = load_opts(oos, &o, &col, &sign, msg, msg_cap);
    if (!rc)
        rc = check_run(c, close, n_bars, &o, rows, sweep, &so, msg, msg_cap);
    if (rc)
        return rc;
    tf_fold folds[TF_OOS_MAX_FOLDS];
    int nf = make_folds(n_bars, &o, folds, msg, msg_cap);
    if (nf < 0)
        return nf;
    if (cap < nf)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "%d folds do not fit in %d rows", nf, cap);
    part is, os;
    char *mem = parts_alloc(m, (tf_column_flags(col) & TF_COLUMN_STATS) != 0, &is, &os);
    if (!mem)
        return tfu_msg(TF_E_NOMEM, msg, msg_cap, "out of memory");
    tf_stats *warm = NULL;
    if (o.warmup && (rc = warm_all(c, close, n_bars, &o, folds, nf, &so, &warm, msg, msg_cap)) &&
        rc != TF_E_LIMIT)
        tfu_msg(rc, msg, msg_cap, "the warm-up run: %s", tf_strerror(rc));
    for (int k = 0; k < nf && !rc; k++) {
        rc = run_fold(c, close, &folds[k], k, warm, &so, o.reference, &is, &os);
        if (!rc)
            rc = part_values(c, &is, col, sign);
        if (!rc)
            rc = part_values(c, &os, col, sign);
        if (rc) {
            tfu_msg(rc, msg, msg_cap, "fold %d: %s", k + 1, tf_strerror(rc));
            break;
        }
        rows[k] = fold_row(&folds[k], &is, &os, m, o.min_trades);
    }
    free(warm);
    free(mem);
    return rc ? rc : nf;
}

int tf_oos_run(const double *close, int64_t n_bars, const int64_t *params, int64_t m,
               const tf_oos_opts *oos, tf_oos_row *rows, int cap, char *msg, size_t msg_cap,
               const tf_sweep_opts *sweep)
{
    combos c = {NULL, params, NULL, m};
    return oos_run(&c, close, n_bars, oos, rows, cap, msg, msg_cap, sweep);
}

int tf_oos_run_with(const tf_strategy_def *def, const double *close, int64_t n_bars,
                    const double *params, int64_t m, const tf_oos_opts *oos, tf_oos_row *rows,
                    int cap, char *msg, size_t msg_cap, const tf_sweep_opts *sweep)
{
    if (!def)
        return TF_E_NULL_ARG;
    combos c = {def, NULL, params, m};
    return oos_run(&c, close, n_bars, oos, rows, cap, msg, msg_cap, sweep);
}

int tf_oos_verdict(const tf_oos_row *rows, int n, int64_t m, char *msg, size_t msg_cap)
{
    if (n < 1 || m < 1)
        return TF_E_INVALID_ARG;
    if (!rows || !msg)
        return TF_E_NULL_ARG;
    int64_t rank_sum = 0;
    double oos_sum = 0;
    int won = 0; /* folds with a winner (min_trades may leave one without) */
    for (int k = 0; k < n; k++) {
        if (rows[k].winner < 0)
            continue;
        rank_sum += rows[k].oos_rank;
        oos_sum += rows[k].oos_pnl;
        won++;
    }
    if (!won)
        return tfu_msg(0, msg, msg_cap,
                       "no fold had an eligible combo (min_trades): nothing to judge");
    double mean_rank = (double)rank_sum / won;
    tfu_msg(0, msg, msg_cap,
            "the in-sample winner's mean out-of-sample rank is %.1f of %lld (%s; random choice: "
            "%.1f), its oos pnl summed over folds %.4g",
            mean_rank, (long long)m,
            mean_rank <= 0.25 * (double)m  ? "holds up: top quarter"
            : mean_rank <= 0.5 * (double)m ? "weak: top half"
                                           : "does not hold up: bottom half",
            ((double)m + 1) / 2, oos_sum);
    return 0;
}

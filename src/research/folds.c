/* Out-of-sample splits and walk-forward folds: the folds, the run (each part swept cold, the
 * in-sample winner by a metric, its rank out of sample) and the verdict (research.h). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/opts_size.h"
#include "common/msg.h"
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
    const char *metric = o->metric ? o->metric : "pnl";
    int rc = tf_column_find(metric, strlen(metric), sign, msg, msg_cap);
    if (rc < 0)
        return rc;
    if (tf_column_flags(rc) & TF_COLUMN_WINDOW)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "metric %.64s: a window is not a metric",
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
            a = (k - 1) * seg;
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
                      const tf_sweep_opts *so, int reference, int col, int sign)
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
    if (rc)
        return rc;
    /* col is a column of the HMA table (a metric, never a window): the same metric in a
     * strategy's table is col - TF_COLUMN_PNL + n_params */
    tf_results r = {c->params, p->pnl, p->trades, p->stats, m, NULL, 0, NULL};
    if (c->def) {
        r.dparams = c->dparams;
        r.n_params = c->def->n_params;
        r.param_names = c->def->param_names;
        col = col - TF_COLUMN_PNL + (int)c->def->n_params;
    }
    return tf_column_values(&r, col, sign, p->value);
}

static int oos_run(const combos *c, const double *close, int64_t n_bars, const tf_oos_opts *oos,
                   tf_oos_row *rows, int cap, char *msg, size_t msg_cap, const tf_sweep_opts *sweep)
{
    tf_oos_opts o;
    int col, sign;
    int64_t m = c->m;
    int rc = load_opts(oos, &o, &col, &sign, msg, msg_cap);
    if (rc)
        return rc;
    if (n_bars < 0 || m < 0)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "n_bars %lld or combos %lld < 0",
                       (long long)n_bars, (long long)m);
    if ((n_bars > 0 && !close) || (m > 0 && !c->params && !c->dparams) || !rows)
        return TF_E_NULL_ARG;
    tf_sweep_opts so = {0};
    if (sweep && tfu_opts_load(&so, sizeof so, sweep, TFU_FIELD_END(tf_sweep_opts, max_bytes)))
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "tf_sweep_opts: a bad size");
    if (so.stats)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap,
                       "tf_oos_run computes the statistics itself: sweep->stats must be NULL");
    if (m < 1)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "an empty grid (no combos)");
    if (c->def) {
        rc = tf_strategy_params_check(c->def, c->dparams, m, NULL, msg, msg_cap);
        if (rc)
            return rc;
    }
    tf_fold folds[TF_OOS_MAX_FOLDS];
    int nf = make_folds(n_bars, &o, folds, msg, msg_cap);
    if (nf < 0)
        return nf;
    if (cap < nf)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "%d folds do not fit in %d rows", nf, cap);
    int stats = (tf_column_flags(col) & TF_COLUMN_STATS) != 0;
    size_t per = 2 * sizeof(double) + sizeof(int64_t) + (stats ? sizeof(tf_stats) : 0);
    if ((uint64_t)m > SIZE_MAX / 2 / per)
        return tfu_msg(TF_E_NOMEM, msg, msg_cap, "out of memory");
    char *mem = malloc(2 * per * (size_t)m);
    if (!mem)
        return tfu_msg(TF_E_NOMEM, msg, msg_cap, "out of memory");
    part is, os;
    is.pnl = (double *)(void *)mem;
    os.pnl = is.pnl + m;
    is.value = os.pnl + m;
    os.value = is.value + m;
    is.trades = (int64_t *)(void *)(os.value + m);
    os.trades = is.trades + m;
    is.stats = stats ? (tf_stats *)(void *)(os.trades + m) : NULL;
    os.stats = stats ? is.stats + m : NULL;
    for (int k = 0; k < nf; k++) {
        const tf_fold *f = &folds[k];
        rc = sweep_part(close + f->is_start, f->is_end - f->is_start, c, &is, &so, o.reference, col,
                        sign);
        if (!rc)
            rc = sweep_part(close + f->oos_start, f->oos_end - f->oos_start, c, &os, &so,
                            o.reference, col, sign);
        if (rc) {
            tfu_msg(rc, msg, msg_cap, "fold %d: %s", k + 1, tf_strerror(rc));
            break;
        }
        int64_t w = best_of(is.value, m);
        double ov = os.value[w];
        int64_t rank = 1;
        for (int64_t j = 0; j < m; j++)
            rank += better(os.value[j], ov);
        rows[k] =
            (tf_oos_row){*f, w,         is.value[w],  is.pnl[w], is.trades[w],
                         ov, os.pnl[w], os.trades[w], rank,      os.value[best_of(os.value, m)]};
    }
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
    for (int k = 0; k < n; k++) {
        rank_sum += rows[k].oos_rank;
        oos_sum += rows[k].oos_pnl;
    }
    double mean_rank = (double)rank_sum / n;
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

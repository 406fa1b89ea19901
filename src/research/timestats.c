/* The time-aware figures (research.h, docs/definition.md section 10): one combo's figures from
 * its positions, by prefix sums of the close's differences at each trade's two ends, and the
 * second pass that gets every named combo's positions from its streaming handle (threads over
 * combos; a combo's figures depend only on its own bars, never on the thread). */
#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/msg.h"
#include "common/opts_size.h"
#include "kernel/kernel_internal.h"
#include "kernel/timeacc.h"
#include "strategy/strategy_internal.h"
#include "tollfree/error.h"
#include "tollfree/research.h"
#include "tollfree/strategy.h"

#define DAYS_PER_YEAR 365.25

/* A block of at least 2 MiB on huge pages where the system gives them on request (Linux's
 * transparent huge pages in "madvise" mode): the prefix sums are 32 bytes a bar, written once
 * per call, and a fresh process otherwise takes a page fault every 4 KiB of them (measured: 12%
 * of a one-thread `tollfree sweep --time-stats` on the default data, a KVM guest). */
#define HUGE_BYTES ((size_t)2 << 20)
static void *big_alloc(size_t bytes)
{
#ifdef MADV_HUGEPAGE
    if (bytes >= HUGE_BYTES && bytes <= SIZE_MAX - HUGE_BYTES) {
        size_t round = (bytes + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1);
        void *p = aligned_alloc(HUGE_BYTES, round);
        if (p)
            madvise(p, round, MADV_HUGEPAGE); /* advice only: its failure changes nothing */
        return p;
    }
#endif
    return malloc(bytes);
}

/* The prefix sums of timeacc.h over close[n] (n >= 1 arrays even for n == 0) and the words'
 * bounds of p1, with what the accumulation reads besides: the close, the dates and the fee.
 * all: the one block to free. */
static int prefix_build(const double *c, int64_t n, const int64_t *times, double fee,
                        tfk_time_in *in, double **all)
{
    size_t len = (size_t)(n > 0 ? n : 1), nw = (len >> TFK_WORD_SHIFT) + 1;
    double *p = big_alloc(sizeof(double) * (4 * len + 2 * nw));
    if (!p)
        return TF_E_NOMEM;
    *all = p;
    double *p1 = p, *p2 = p + len, *dn = p + 2 * len, *up = p + 3 * len;
    double *wlo = p + 4 * len, *whi = wlo + nw;
    p1[0] = p2[0] = dn[0] = up[0] = 0.0;
    int64_t bad = n;
    for (int64_t t = 1; t < n; t++) {
        double d = c[t] - c[t - 1];
        double q = d * d;
        p1[t] = p1[t - 1] + d;
        p2[t] = p2[t - 1] + q;
        dn[t] = dn[t - 1] + (d > 0.0 ? 0.0 : q);
        up[t] = up[t - 1] + (d < 0.0 ? 0.0 : q);
        if (bad == n && !isfinite(p1[t]))
            bad = t;
    }
    for (size_t w = 0; w < nw; w++) { /* read only up to the first non-finite p1 */
        int64_t W = (int64_t)1 << TFK_WORD_SHIFT;
        int64_t t0 = (int64_t)w * W, t1 = t0 + W < n ? t0 + W : n;
        double l = t0 < n ? p1[t0] : 0.0, h = l;
        for (int64_t t = t0 + 1; t < t1; t++) {
            l = p1[t] < l ? p1[t] : l;
            h = p1[t] > h ? p1[t] : h;
        }
        wlo[w] = l;
        whi[w] = h;
    }
    *in = (tfk_time_in){.close = c,
                        .p1 = p1,
                        .p2 = p2,
                        .dn = dn,
                        .up = up,
                        .times = times,
                        .n = n,
                        .first_bad = bad,
                        .fee = fee,
                        .wlo = wlo,
                        .whi = whi};
    return 0;
}

/* The figures in tf_time_stats order: names and where each lives. */
#define FIG(f) offsetof(tf_time_stats, f)
static const char *const figure_names[TF_TIME_FIGURES] = {
    "equity",    "cagr",       "ann_vol",      "sharpe",   "sortino",
    "calmar",    "mtm_max_dd", "exposure_pct", "buy_hold", "compounded",
    "mean_bars", "max_bars",   "mean_days",    "max_days", "periods_per_year"};
static const size_t figure_at[TF_TIME_FIGURES] = {
    FIG(equity),    FIG(cagr),       FIG(ann_vol),      FIG(sharpe),   FIG(sortino),
    FIG(calmar),    FIG(mtm_max_dd), FIG(exposure_pct), FIG(buy_hold), FIG(compounded),
    FIG(mean_bars), FIG(max_bars),   FIG(mean_days),    FIG(max_days), FIG(periods_per_year)};

static double nan_canon(double v)
{
    if (v == v)
        return v;
    union {
        uint64_t u;
        double d;
    } z = {0xfff8000000000000ull};
    return z.d;
}

/* The figures from the accumulated sums (docs/definition.md section 10's last step). */
static void finish(const tfk_tacc *a, double equity, int64_t n, int64_t expo, const double *c,
                   int has_times, double ppy, tf_time_stats *o)
{
    double N = (double)(n - 1), sq = sqrt(ppy);
    double mean = equity / N;
    double var = n >= 3 ? (a->q - equity * equity / N) / (N - 1.0) : NAN;
    double sd = var < 0.0 ? 0.0 : sqrt(var);
    double dsd = n >= 2 ? sqrt(a->d / N) : NAN;
    double years = N / ppy, g = 1.0 + equity / 100.0;
    o->equity = equity;
    o->cagr = n < 2 || !(years > 0.0) ? NAN
              : g > 0.0               ? (pow(g, 1.0 / years) - 1.0) * 100.0
              : g <= 0.0              ? -100.0
                                      : NAN;
    o->ann_vol = sd * sq;
    o->sharpe = sd > 0.0 ? mean / sd * sq : NAN;
    o->sortino = dsd > 0.0 ? mean / dsd * sq : NAN;
    o->mtm_max_dd = a->mdd;
    o->calmar = a->mdd > 0.0 ? o->cagr / a->mdd : NAN;
    o->exposure_pct = n > 0 ? (double)expo / (double)n * 100.0 : NAN;
    o->buy_hold = n > 0 ? (c[n - 1] - c[0]) / c[0] * 100.0 : NAN;
    o->compounded = (a->comp - 1.0) * 100.0;
    o->mean_bars = a->trades ? a->dur / (double)a->trades : NAN;
    o->max_bars = (double)a->max_dur;
    o->mean_days = has_times && a->trades ? a->days / (double)a->trades : NAN;
    o->max_days = has_times ? a->max_days : NAN;
    o->periods_per_year = ppy;
    for (int k = 0; k < TF_TIME_FIGURES; k++) {
        double *f = (double *)(void *)((char *)o + figure_at[k]);
        *f = nan_canon(*f);
    }
}

/* The figures from a combo's state after its last bar: the position still open (pos, entered
 * at a->entry) marked to the last bar, then finish. expo: the bars that ended in a position. */
static void figures_from(tfk_tacc *a, const tfk_time_in *in, int pos, int64_t expo, double ppy,
                         tf_time_stats *o)
{
    int64_t n = in->n;
    double equity = a->eq;
    if (pos != 0) {
        int64_t e = a->entry;
        tfk_tacc_hold(a, in, n - 1, pos);
        equity = a->eq + a->k * ((double)pos * (in->p1[n - 1] - in->p1[e]));
    }
    finish(a, equity, n, expo, in->close, in->times != NULL, ppy, o);
}

/* One combo: pos[n] checked (-1..1) by the caller. */
static void combo_figures(const tfk_time_in *in, const int8_t *pos, double ppy, tf_time_stats *o)
{
    const double *c = in->close;
    tfk_tacc a = tfk_tacc_start();
    int cur = 0;
    int64_t expo = 0;
    for (int64_t t = 0; t < in->n; t++) {
        int p = pos[t];
        if (p != cur) {
            if (cur != 0) {
                int64_t e = a.entry;
                double r = (double)cur * (c[t] - c[e]) / c[e] * 100.0 - in->fee; /* the booking's */
                tfk_tacc_close(&a, in, t, cur, r);
            }
            tfk_tacc_enter(&a, in, t);
            cur = p;
        }
        expo += cur != 0;
    }
    figures_from(&a, in, cur, expo, ppy, o);
}

/* ---- options ---- */

typedef struct tt_opts {
    const int64_t *times;
    double ppy, fee;
    int threads;
} tt_opts;

int tf_time_periods(const int64_t *times, int64_t n, const tf_time_opts *opts, double *out,
                    char *msg, size_t msg_cap)
{
    if (!out)
        return TF_E_NULL_ARG;
    double over = opts ? opts->periods_per_year : 0.0;
    if (over != 0.0) {
        if (!(over > 0.0) || !isfinite(over))
            return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap,
                           "periods per year must be a positive finite number (252 for daily "
                           "stock bars), got %g",
                           over);
        *out = over;
        return 0;
    }
    if (!times) {
        *out = 1.0;
        return 0;
    }
    double years =
        n >= 2 ? (double)(times[n - 1] - times[0]) / (DAYS_PER_YEAR * TFK_NS_PER_DAY) : 0.0;
    *out = years > 0.0 ? (double)(n - 1) / years : NAN;
    return 0;
}

static int opts_resolve(const tf_time_opts *in, int64_t n, tt_opts *o, char *msg, size_t cap)
{
    tf_time_opts z = {0};
    if (in && tfu_opts_load(&z, sizeof z, in, TFU_FIELD_END(tf_time_opts, threads)))
        return tfu_msg(TF_E_INVALID_ARG, msg, cap, "tf_time_opts: bad size %zu", in->size);
    if (z.fee && !isfinite(*z.fee))
        return tfu_msg(TF_E_INVALID_ARG, msg, cap, "fee must be finite, got %g", *z.fee);
    if (z.threads < 0 || z.threads > TF_MAX_THREADS)
        return tfu_msg(TF_E_INVALID_ARG, msg, cap, "threads must be 0..%d, got %d", TF_MAX_THREADS,
                       z.threads);
    o->times = z.times;
    o->fee = z.fee ? *z.fee : TF_FEE_DEFAULT;
    o->threads = z.threads;
    return tf_time_periods(z.times, n, &z, &o->ppy, msg, cap);
}

int tf_time_stats_positions(const double *close, int64_t n, const int8_t *pos,
                            const tf_time_opts *opts, tf_time_stats *out, char *msg, size_t msg_cap)
{
    if (n < 0)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "n must be >= 0, got %lld", (long long)n);
    if (!out || (n > 0 && (!close || !pos)))
        return TF_E_NULL_ARG;
    tt_opts o;
    int rc = opts_resolve(opts, n, &o, msg, msg_cap);
    if (rc)
        return rc;
    for (int64_t t = 0; t < n; t++)
        if (pos[t] < -1 || pos[t] > 1)
            return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap,
                           "position %d at bar %lld: positions are -1, 0 or +1", pos[t],
                           (long long)t);
    tfk_time_in in;
    double *all;
    if ((rc = prefix_build(close, n, o.times, o.fee, &in, &all)))
        return rc;
    combo_figures(&in, pos, o.ppy, out);
    free(all);
    return 0;
}

/* ---- the sweep with the hook (HMA, and any strategy) ---- */

/* tf_sweep_time (def NULL: params are int64 iparams) and tf_sweep_with_time (def: dparams). */
static int sweep_time(const tf_strategy_def *def, const double *close, int64_t n_bars,
                      const int64_t *iparams, const double *dparams, int64_t n_combos, double *pnl,
                      int64_t *trades, const tf_sweep_opts *opts, const tf_time_opts *topts,
                      tf_time_stats *out, char *msg, size_t msg_cap)
{
    if (n_bars < 0 || n_combos < 0)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "n and m must be >= 0, got %lld and %lld",
                       (long long)n_bars, (long long)n_combos);
    if (n_combos > 0 && (!out || !pnl || !trades || !(def ? (const void *)dparams : iparams) ||
                         (n_bars > 0 && !close)))
        return TF_E_NULL_ARG;
    tfk_opts ko;
    if (tfk_opts_resolve(opts, &ko))
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "tf_sweep_opts: bad size or non-finite fee");
    tt_opts o;
    int rc = opts_resolve(topts, n_bars, &o, msg, msg_cap);
    if (rc || n_combos == 0)
        return rc;
    /* the prefix sums first: 32 bytes a bar, within the sweep's budget */
    if (ko.max_bytes && tfk_time_bytes(n_bars) > (double)ko.max_bytes)
        return tfu_msg(TF_E_LIMIT, msg, msg_cap,
                       "the time-aware figures need %.0f bytes for %lld bars, over max_bytes %zu",
                       tfk_time_bytes(n_bars), (long long)n_bars, ko.max_bytes);
    tfk_time_in in;
    double *all = NULL;
    tf_stats *st = ko.stats ? ko.stats : malloc(sizeof(tf_stats) * (size_t)n_combos);
    tfk_tacc *acc = malloc(sizeof(tfk_tacc) * (size_t)n_combos);
    if (!st || !acc || (rc = prefix_build(close, n_bars, o.times, ko.fee, &in, &all))) {
        rc = TF_E_NOMEM;
        goto done;
    }
    tf_sweep_opts so = {.size = sizeof so,
                        .threads = ko.threads,
                        .isa = ko.isa,
                        .max_bytes = ko.max_bytes,
                        .fee = &ko.fee,
                        .stats = st,
                        .progress = ko.progress};
    rc = def ? tfs_sweep_with_timed(def, close, n_bars, dparams, n_combos, pnl, trades, &so, &in,
                                    acc)
             : tfk_sweep_timed(close, n_bars, iparams, n_combos, pnl, trades, &so, NULL, &in, acc);
    if (rc) {
        tfu_msg(rc, msg, msg_cap, "%s", tf_strerror(rc));
        goto done;
    }
    for (int64_t j = 0; j < n_combos; j++)
        figures_from(&acc[j], &in, (int)acc[j].pos, st[j].exposure_bars, o.ppy, &out[j]);
done:
    if (st != ko.stats)
        free(st);
    free(acc);
    free(all);
    return rc;
}

int tf_sweep_time(const double *close, int64_t n_bars, const int64_t *params, int64_t n_combos,
                  double *pnl, int64_t *trades, const tf_sweep_opts *opts,
                  const tf_time_opts *topts, tf_time_stats *out, char *msg, size_t msg_cap)
{
    return sweep_time(NULL, close, n_bars, params, NULL, n_combos, pnl, trades, opts, topts, out,
                      msg, msg_cap);
}

int tf_sweep_with_time(const tf_strategy_def *def, const double *close, int64_t n_bars,
                       const double *params, int64_t n_combos, double *pnl, int64_t *trades,
                       const tf_sweep_opts *opts, const tf_time_opts *topts, tf_time_stats *out,
                       char *msg, size_t msg_cap)
{
    if (!def)
        return TF_E_NULL_ARG;
    int rc = tf_strategy_def_check(def, msg, msg_cap);
    if (rc)
        return rc;
    return sweep_time(def, close, n_bars, NULL, params, n_combos, pnl, trades, opts, topts, out,
                      msg, msg_cap);
}

/* ---- the second pass over combos (any other strategy) ---- */

typedef struct tt_job {
    const tf_strategy_def *def;
    const double *dparams;
    int64_t m;
    double ppy;
    int threads;
    const tfk_time_in *in;
    tf_time_stats *out;
    atomic_llong next;
    atomic_int rc;
    atomic_llong bad;
} tt_job;

/* Combo j's positions into pos[n] from its streaming handle, then its figures. */
static int run_one(tt_job *jb, int64_t j, int8_t *pos)
{
    uint32_t np = jb->def->n_params;
    tf_strategy *s = NULL;
    int rc = tf_strategy_open_with(&s, jb->def, jb->dparams + j * (int64_t)np);
    if (rc)
        return rc;
    rc = tf_strategy_set_fee(s, jb->in->fee);
    for (int64_t t = 0; t < jb->in->n && !rc; t++) {
        int v = tf_strategy_step(s, jb->in->close[t]);
        if (v < -1 || v > 1)
            rc = v < 0 ? v : TF_E_STRATEGY;
        else
            pos[t] = (int8_t)v;
    }
    tf_strategy_close(s);
    if (rc)
        return rc;
    combo_figures(jb->in, pos, jb->ppy, &jb->out[j]);
    return 0;
}

static void *worker(void *arg)
{
    tt_job *jb = arg;
    int8_t *pos = malloc((size_t)(jb->in->n > 0 ? jb->in->n : 1));
    if (!pos) {
        atomic_store(&jb->rc, TF_E_NOMEM);
        return NULL;
    }
    for (;;) {
        long long j = atomic_fetch_add(&jb->next, 1);
        if (j >= jb->m || atomic_load(&jb->rc))
            break;
        int rc = run_one(jb, j, pos);
        if (rc) {
            int zero = 0;
            if (atomic_compare_exchange_strong(&jb->rc, &zero, rc))
                atomic_store(&jb->bad, j);
            break;
        }
    }
    free(pos);
    return NULL;
}

static int run_all(tt_job *jb)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t nt = jb->threads ? jb->threads : (cores > 0 ? cores : 1);
    if (nt > jb->m)
        nt = jb->m > 0 ? jb->m : 1;
    if (nt > TF_MAX_THREADS)
        nt = TF_MAX_THREADS;
    pthread_t tid[TF_MAX_THREADS];
    int started = 0;
    for (; started < nt - 1; started++)
        if (pthread_create(&tid[started], NULL, worker, jb) != 0)
            break;
    worker(jb);
    for (int k = 0; k < started; k++)
        pthread_join(tid[k], NULL);
    return atomic_load(&jb->rc);
}

int tf_time_stats_hma(const double *close, int64_t n, const int64_t *params, int64_t m,
                      const tf_time_opts *opts, tf_time_stats *out, char *msg, size_t msg_cap)
{
    if (n < 0 || m < 0)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "n and m must be >= 0, got %lld and %lld",
                       (long long)n, (long long)m);
    if (m > 0 && (!out || !params || (n > 0 && !close)))
        return TF_E_NULL_ARG;
    if (m > 0) {
        int rc = tf_params_check(params, m);
        if (rc)
            return tfu_msg(rc, msg, msg_cap, "bad combo: %s", tf_strerror(rc));
    }
    tt_opts o;
    int rc = opts_resolve(opts, n, &o, msg, msg_cap);
    if (rc || m == 0)
        return rc;
    size_t k = (size_t)m;
    double *pnl = malloc(sizeof(double) * k);
    int64_t *trades = malloc(sizeof(int64_t) * k);
    tf_time_stats *tmp = malloc(sizeof(tf_time_stats) * k);
    rc = TF_E_NOMEM;
    if (pnl && trades && tmp) {
        tf_sweep_opts so = {.size = sizeof so, .threads = o.threads, .fee = &o.fee};
        rc = tf_sweep_time(close, n, params, m, pnl, trades, &so, opts, tmp, msg, msg_cap);
    }
    if (!rc)
        memcpy(out, tmp, sizeof(tf_time_stats) * k);
    free(pnl);
    free(trades);
    free(tmp);
    return rc;
}

int tf_time_stats_with(const tf_strategy_def *def, const double *close, int64_t n,
                       const double *params, int64_t m, const tf_time_opts *opts,
                       tf_time_stats *out, char *msg, size_t msg_cap)
{
    if (!def)
        return TF_E_NULL_ARG;
    int rc = tf_strategy_def_check(def, msg, msg_cap);
    if (rc)
        return rc;
    if (n < 0 || m < 0)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "n and m must be >= 0, got %lld and %lld",
                       (long long)n, (long long)m);
    if (m > 0 && (!out || !params || (n > 0 && !close)))
        return TF_E_NULL_ARG;
    tt_opts o;
    if ((rc = opts_resolve(opts, n, &o, msg, msg_cap)) || m == 0)
        return rc;
    tfk_time_in in;
    double *all;
    if ((rc = prefix_build(close, n, o.times, o.fee, &in, &all)))
        return rc;
    tf_time_stats *tmp = malloc(sizeof *tmp * (size_t)m);
    if (!tmp) {
        free(all);
        return TF_E_NOMEM;
    }
    tt_job jb = {.def = def,
                 .dparams = params,
                 .m = m,
                 .ppy = o.ppy,
                 .threads = o.threads,
                 .in = &in,
                 .out = tmp};
    atomic_init(&jb.next, 0);
    atomic_init(&jb.rc, 0);
    atomic_init(&jb.bad, -1);
    rc = run_all(&jb);
    if (!rc)
        memcpy(out, tmp, sizeof *tmp * (size_t)m);
    else
        tfu_msg(rc, msg, msg_cap, "combo %lld: %s", (long long)atomic_load(&jb.bad) + 1,
                tf_strerror(rc));
    free(tmp);
    free(all);
    return rc;
}

/* ---- names ---- */

const char *tf_time_figure_name(int k)
{
    return k >= 0 && k < TF_TIME_FIGURES ? figure_names[k] : NULL;
}

double tf_time_figure(const tf_time_stats *s, int k)
{
    if (!s || k < 0 || k >= TF_TIME_FIGURES)
        return NAN;
    return *(const double *)(const void *)((const char *)s + figure_at[k]);
}

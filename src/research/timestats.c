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
#include <unistd.h>

#include "common/msg.h"
#include "common/opts_size.h"
#include "kernel/kernel_internal.h"
#include "tollfree/error.h"
#include "tollfree/research.h"
#include "tollfree/strategy.h"

#define NS_PER_DAY 86400e9
#define DAYS_PER_YEAR 365.25

/* Prefix sums over the differences d[t] = close[t] - close[t-1] (t >= 1; index 0 holds 0):
 * p1 of d, p2 of d*d, dn of d*d where d is not > 0 (a long's falls), up of d*d where d is
 * not < 0 (a short's). */
typedef struct tt_prefix {
    double *p1, *p2, *dn, *up;
} tt_prefix;

static int prefix_build(const double *c, int64_t n, tt_prefix *px)
{
    size_t len = (size_t)(n > 0 ? n : 1);
    double *all = malloc(sizeof(double) * 4 * len);
    if (!all)
        return TF_E_NOMEM;
    *px = (tt_prefix){all, all + len, all + 2 * len, all + 3 * len};
    px->p1[0] = px->p2[0] = px->dn[0] = px->up[0] = 0.0;
    for (int64_t t = 1; t < n; t++) {
        double d = c[t] - c[t - 1];
        double q = d * d;
        px->p1[t] = px->p1[t - 1] + d;
        px->p2[t] = px->p2[t - 1] + q;
        px->dn[t] = px->dn[t - 1] + (d > 0.0 ? 0.0 : q);
        px->up[t] = px->up[t - 1] + (d < 0.0 ? 0.0 : q);
    }
    return 0;
}

/* One combo's running state over its trades. */
typedef struct tt_acc {
    double eq;   /* closed equity: the closed trades' returns summed in order (pnl's bits) */
    double q, d; /* sums of the squared changes, and of the squared falls */
    double peak, mdd, comp;
    double dur, days, max_days;
    int64_t trades, max_dur;
} tt_acc;

static void mark(tt_acc *a, double e)
{
    if (e > a->peak)
        a->peak = e;
    double dd = a->peak - e;
    if (dd > a->mdd)
        a->mdd = dd;
}

/* The bars t in (e, end] of a trade entered at e in direction p, without its exit bar's
 * booking: the MTM marks and the sums of squares over (e, end]. */
static void hold(tt_acc *a, const tt_prefix *px, const double *c, int64_t e, int64_t end, int p)
{
    double k = 100.0 / c[e], kk = k * k, dp = (double)p;
    for (int64_t t = e + 1; t <= end; t++)
        mark(a, a->eq + k * (dp * (px->p1[t] - px->p1[e])));
    const double *w = p > 0 ? px->dn : px->up;
    a->q = a->q + kk * (px->p2[end] - px->p2[e]);
    a->d = a->d + kk * (w[end] - w[e]);
}

/* The trade entered at e, closed at x > e in direction p. */
static void close_trade(tt_acc *a, const tt_prefix *px, const double *c, const int64_t *times,
                        int64_t e, int64_t x, int p, double fee)
{
    double k = 100.0 / c[e], dp = (double)p;
    double r = dp * (c[x] - c[e]) / c[e] * 100.0 - fee; /* the booking's return, bit for bit */
    hold(a, px, c, e, x - 1, p);
    double g = r - k * (dp * (px->p1[x - 1] - px->p1[e])); /* the exit bar's change */
    a->q = a->q + g * g;
    a->d = a->d + (g < 0.0 ? g * g : 0.0);
    a->eq = a->eq + r;
    mark(a, a->eq);
    a->comp = a->comp * (1.0 + r / 100.0);
    a->trades++;
    a->dur = a->dur + (double)(x - e);
    if (x - e > a->max_dur)
        a->max_dur = x - e;
    if (times) {
        double dd = (double)(times[x] - times[e]) / NS_PER_DAY;
        a->days = a->days + dd;
        if (dd > a->max_days)
            a->max_days = dd;
    }
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
static void finish(const tt_acc *a, double equity, int64_t n, int64_t expo, const double *c,
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

/* One combo: pos[n] checked (-1..1) by the caller. */
static void combo_figures(const double *c, int64_t n, const int8_t *pos, const tt_prefix *px,
                          const int64_t *times, double fee, double ppy, tf_time_stats *o)
{
    tt_acc a = {0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0, 0};
    int cur = 0;
    int64_t e = -1, expo = 0;
    for (int64_t t = 0; t < n; t++) {
        int p = pos[t];
        if (p != cur) {
            if (cur != 0)
                close_trade(&a, px, c, times, e, t, cur, fee);
            e = t;
            cur = p;
        }
        expo += cur != 0;
    }
    double equity = a.eq;
    if (cur != 0) {
        hold(&a, px, c, e, n - 1, cur);
        double k = 100.0 / c[e];
        equity = a.eq + k * ((double)cur * (px->p1[n - 1] - px->p1[e]));
    }
    finish(&a, equity, n, expo, c, times != NULL, ppy, o);
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
    double years = n >= 2 ? (double)(times[n - 1] - times[0]) / (DAYS_PER_YEAR * NS_PER_DAY) : 0.0;
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
    tt_prefix px;
    if ((rc = prefix_build(close, n, &px)))
        return rc;
    combo_figures(close, n, pos, &px, o.times, o.fee, o.ppy, out);
    free(px.p1);
    return 0;
}

/* ---- the second pass over combos ---- */

typedef struct tt_job {
    const tf_strategy_def *def;
    const double *close, *dparams;
    const int64_t *iparams;
    int64_t n, m;
    const tt_opts *o;
    const tt_prefix *px;
    tf_time_stats *out;
    tfk_isa_ops ops; /* the HMA combos' WMA routines (iparams set) */
    atomic_llong next;
    atomic_int rc;
    atomic_llong bad;
} tt_job;

/* WMA(x, L) over bars [0, n) into out, x defined from bar `from` (NaN before): the kernel's
 * routine of section 3 (ops->wma, the bits of every path) from bar from + L - 1, NaN before. */
static void wma_from(const tfk_isa_ops *ops, const double *x, int64_t from, int64_t n, int64_t L,
                     double *out)
{
    int64_t lo = from + L - 1;
    for (int64_t i = 0; i < lo && i < n; i++)
        out[i] = NAN;
    if (lo < n)
        ops->wma(x, L, lo, n, out + lo);
}

static int64_t max3(int64_t a, int64_t b, int64_t c)
{
    int64_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* An HMA combo's positions (docs/definition.md sections 4 and 5: the lines, then the stop and
 * reverse's position after each bar), by the kernel's WMA routine: what its streaming handle
 * gives, in seven vectorised passes. buf: 6 x n doubles. */
static void hma_positions(const tfk_isa_ops *ops, const double *c, int64_t n, const int64_t *w,
                          double *buf, int8_t *pos)
{
    double *a = buf, *b = buf + n, *raw = buf + 2 * n, *hma = buf + 3 * n, *inner = buf + 4 * n,
           *hma3 = buf + 5 * n;
    int64_t L = w[TF_P_L], half = w[TF_P_HALF], sq = w[TF_P_SQ], p = w[TF_P_P], p3 = w[TF_P_P3],
            p2 = w[TF_P_P2];
    int64_t r0 = (L > half ? L : half) - 1, i0 = max3(p, p3, p2) - 1;
    wma_from(ops, c, 0, n, half, a);
    wma_from(ops, c, 0, n, L, b);
    for (int64_t i = 0; i < n; i++)
        raw[i] = i >= r0 ? 2.0 * a[i] - b[i] : NAN;
    wma_from(ops, raw, r0, n, sq, hma);
    const double *wp = a; /* p == half for every combo of one Hull length: one pass less */
    if (p != half) {
        wma_from(ops, c, 0, n, p, hma3);
        wp = hma3;
    }
    wma_from(ops, c, 0, n, p3, b);   /* w3 */
    wma_from(ops, c, 0, n, p2, raw); /* w2 (raw is done with) */
    for (int64_t i = 0; i < n; i++)
        inner[i] = i >= i0 ? 3.0 * b[i] - raw[i] - wp[i] : NAN;
    wma_from(ops, inner, i0, n, p, hma3);
    int cur = 0;
    for (int64_t i = 0; i < n; i++) {
        double f = hma3[i], s = hma[i];
        if (f == f && s == s) {
            if (f > s)
                cur = 1;
            else if (f < s)
                cur = -1;
        }
        pos[i] = (int8_t)cur;
    }
}

/* Combo j's positions into pos[n] (HMA: hma_positions in buf; any other strategy: its
 * streaming handle), then its figures. */
static int run_one(tt_job *jb, int64_t j, int8_t *pos, double *buf)
{
    if (jb->iparams) {
        hma_positions(&jb->ops, jb->close, jb->n, jb->iparams + 6 * j, buf, pos);
        combo_figures(jb->close, jb->n, pos, jb->px, jb->o->times, jb->o->fee, jb->o->ppy,
                      &jb->out[j]);
        return 0;
    }
    double p[TF_STRATEGY_MAX_PARAMS];
    uint32_t np = jb->def->n_params;
    for (uint32_t k = 0; k < np; k++)
        p[k] = jb->iparams ? (double)jb->iparams[j * 6 + k] : jb->dparams[j * (int64_t)np + k];
    tf_strategy *s = NULL;
    int rc = tf_strategy_open_with(&s, jb->def, p);
    if (rc)
        return rc;
    rc = tf_strategy_set_fee(s, jb->o->fee);
    for (int64_t t = 0; t < jb->n && !rc; t++) {
        int v = tf_strategy_step(s, jb->close[t]);
        if (v < -1 || v > 1)
            rc = v < 0 ? v : TF_E_STRATEGY;
        else
            pos[t] = (int8_t)v;
    }
    tf_strategy_close(s);
    if (rc)
        return rc;
    combo_figures(jb->close, jb->n, pos, jb->px, jb->o->times, jb->o->fee, jb->o->ppy, &jb->out[j]);
    return 0;
}

static void *worker(void *arg)
{
    tt_job *jb = arg;
    size_t n = (size_t)(jb->n > 0 ? jb->n : 1);
    int8_t *pos = malloc(n);
    double *buf = jb->iparams ? malloc(sizeof(double) * 6 * n) : NULL;
    if (!pos || (jb->iparams && !buf)) {
        atomic_store(&jb->rc, TF_E_NOMEM);
        free(pos);
        free(buf);
        return NULL;
    }
    for (;;) {
        long long j = atomic_fetch_add(&jb->next, 1);
        if (j >= jb->m || atomic_load(&jb->rc))
            break;
        int rc = run_one(jb, j, pos, buf);
        if (rc) {
            int zero = 0;
            if (atomic_compare_exchange_strong(&jb->rc, &zero, rc))
                atomic_store(&jb->bad, j);
            break;
        }
    }
    free(pos);
    free(buf);
    return NULL;
}

static int run_all(tt_job *jb)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t nt = jb->o->threads ? jb->o->threads : (cores > 0 ? cores : 1);
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

static int combos_run(const tf_strategy_def *def, const double *close, int64_t n,
                      const int64_t *iparams, const double *dparams, int64_t m,
                      const tf_time_opts *opts, tf_time_stats *out, char *msg, size_t cap)
{
    if (n < 0 || m < 0)
        return tfu_msg(TF_E_INVALID_ARG, msg, cap, "n and m must be >= 0, got %lld and %lld",
                       (long long)n, (long long)m);
    if (m > 0 && (!out || (!iparams && !dparams) || (n > 0 && !close)))
        return TF_E_NULL_ARG;
    tt_opts o;
    int rc = opts_resolve(opts, n, &o, msg, cap);
    if (rc || m == 0)
        return rc;
    tt_prefix px;
    if ((rc = prefix_build(close, n, &px)))
        return rc;
    tf_time_stats *tmp = malloc(sizeof *tmp * (size_t)m);
    if (!tmp) {
        free(px.p1);
        return TF_E_NOMEM;
    }
    tt_job jb = {.def = def,
                 .close = close,
                 .dparams = dparams,
                 .iparams = iparams,
                 .n = n,
                 .m = m,
                 .o = &o,
                 .px = &px,
                 .out = tmp};
    if (iparams && (rc = tfk_isa_ops_for(TF_ISA_AUTO, &jb.ops))) {
        free(tmp);
        free(px.p1);
        return rc;
    }
    atomic_init(&jb.next, 0);
    atomic_init(&jb.rc, 0);
    atomic_init(&jb.bad, -1);
    rc = run_all(&jb);
    if (!rc)
        memcpy(out, tmp, sizeof *tmp * (size_t)m);
    else
        tfu_msg(rc, msg, cap, "combo %lld: %s", (long long)atomic_load(&jb.bad) + 1,
                tf_strerror(rc));
    free(tmp);
    free(px.p1);
    return rc;
}

int tf_time_stats_hma(const double *close, int64_t n, const int64_t *params, int64_t m,
                      const tf_time_opts *opts, tf_time_stats *out, char *msg, size_t msg_cap)
{
    if (m > 0 && params) {
        int rc = tf_params_check(params, m);
        if (rc)
            return tfu_msg(rc, msg, msg_cap, "bad combo: %s", tf_strerror(rc));
    }
    return combos_run(tf_strategy_builtin("hma"), close, n, params, NULL, m, opts, out, msg,
                      msg_cap);
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
    return combos_run(def, close, n, NULL, params, m, opts, out, msg, msg_cap);
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

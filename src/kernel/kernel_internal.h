/* Kernel internals shared by the kernel's translation units. Not installed. */
#ifndef TF_KERNEL_INTERNAL_H
#define TF_KERNEL_INTERNAL_H

#include <stdint.h>

#include "tollfree/kernel.h"

/* HMA/HMA3 as a strategy (hma_def.c): the "hma" built-in, and what tf_strategy_open streams. */
struct tf_strategy_def;
extern const struct tf_strategy_def tfk_hma_def;

/* A streaming handle (stream.c) for def with params[def->n_params], which the caller has checked
 * (tf_strategy_def_check: the strategy layer's tf_strategy_open_with does): the kernel runs the
 * def it is handed and calls nothing of the strategy layer. 0, TF_E_STRATEGY (no state, or init
 * refuses the params), TF_E_NOMEM. */
struct tf_strategy;
int tfk_stream_open(struct tf_strategy **out, const struct tf_strategy_def *def,
                    const double *params);

/* WMA(x, L)[i] for output bars i in [lo, hi), docs/definition.md section 3: a direct windowed sum,
 * oldest first, from 0.0, divided by L*(L+1)/2. Requires lo >= L-1 (no warm-up handling here)
 * and x readable over [lo-L+1, hi). out[i - lo] receives bar i. SIMD versions put consecutive
 * output bars in lanes, each lane running exactly the scalar sequence of operations. */
typedef void (*tfk_wma_fn)(const double *x, int64_t L, int64_t lo, int64_t hi, double *out);

void tfk_wma_scalar(const double *x, int64_t L, int64_t lo, int64_t hi, double *out);
void tfk_wma_sse2(const double *x, int64_t L, int64_t lo, int64_t hi, double *out);
void tfk_wma_avx2(const double *x, int64_t L, int64_t lo, int64_t hi, double *out);
void tfk_wma_avx512(const double *x, int64_t L, int64_t lo, int64_t hi, double *out);

/* Element-wise first-stage combinations (spec section 4), per ISA:
 * raw[i] = 2.0*half[i] - full[i];  inner[i] = 3.0*w3[i] - w2[i] - wp[i]. */
typedef void (*tfk_raw_fn)(const double *half, const double *full, int64_t n, double *raw);
typedef void (*tfk_inner_fn)(const double *w3, const double *w2, const double *wp, int64_t n,
                             double *inner);

void tfk_raw_scalar(const double *half, const double *full, int64_t n, double *raw);
void tfk_raw_sse2(const double *half, const double *full, int64_t n, double *raw);
void tfk_raw_avx2(const double *half, const double *full, int64_t n, double *raw);
void tfk_raw_avx512(const double *half, const double *full, int64_t n, double *raw);
void tfk_inner_scalar(const double *w3, const double *w2, const double *wp, int64_t n,
                      double *inner);
void tfk_inner_sse2(const double *w3, const double *w2, const double *wp, int64_t n, double *inner);
void tfk_inner_avx2(const double *w3, const double *w2, const double *wp, int64_t n, double *inner);
void tfk_inner_avx512(const double *w3, const double *w2, const double *wp, int64_t n,
                      double *inner);

/* Every first-stage WMA of x from one accumulation (docs/kernel.md, "one pass"). len[0..n_len)
 * ascending and distinct, denom[k] = tfk_wma_denom(len[k]); x readable over [0, n_x), hi <= n_x.
 * For each k and each output bar t in [lo, hi) with t >= len[k]-1, out[k][t - lo] receives
 * WMA(x, len[k])[t]; warm-up bars are not written. The running sum from start s,
 * S(s, m) = S(s, m-1) + x[s+m-1] * m from 0.0, is at step m exactly the spec's numerator of
 * WMA(m) at bar s+m-1 (same operations, same order), so one sum up to the longest length serves
 * every length. SIMD versions put consecutive starts in lanes. */
typedef void (*tfk_wma_multi_fn)(const double *x, int64_t n_x, const int64_t *len,
                                 const double *denom, int64_t n_len, int64_t lo, int64_t hi,
                                 double *const *out);

void tfk_wma_multi_scalar(const double *x, int64_t n_x, const int64_t *len, const double *denom,
                          int64_t n_len, int64_t lo, int64_t hi, double *const *out);
void tfk_wma_multi_sse2(const double *x, int64_t n_x, const int64_t *len, const double *denom,
                        int64_t n_len, int64_t lo, int64_t hi, double *const *out);
void tfk_wma_multi_avx2(const double *x, int64_t n_x, const int64_t *len, const double *denom,
                        int64_t n_len, int64_t lo, int64_t hi, double *const *out);
void tfk_wma_multi_avx512(const double *x, int64_t n_x, const int64_t *len, const double *denom,
                          int64_t n_len, int64_t lo, int64_t hi, double *const *out);

/* The scalar one-pass sum for the starts [s_lo, s_hi) only (the SIMD versions' edges). */
void tfk_wma_multi_starts(const double *x, const int64_t *len, const double *denom, int64_t n_len,
                          int64_t lo, int64_t hi, double *const *out, int64_t s_lo, int64_t s_hi);

/* Signal bitmasks for the SAR loop: bit i%64 of gt[i/64] is (f[i] > s[i]), of lt[i/64]
 * (f[i] < s[i]), for i < n; bits at and above n are 0. Comparisons are exact, NaN gives 0. */
typedef void (*tfk_cmp_fn)(const double *f, const double *s, int64_t n, uint64_t *gt, uint64_t *lt);

void tfk_cmp_scalar(const double *f, const double *s, int64_t n, uint64_t *gt, uint64_t *lt);
void tfk_cmp_sse2(const double *f, const double *s, int64_t n, uint64_t *gt, uint64_t *lt);
void tfk_cmp_avx2(const double *f, const double *s, int64_t n, uint64_t *gt, uint64_t *lt);
void tfk_cmp_avx512(const double *f, const double *s, int64_t n, uint64_t *gt, uint64_t *lt);

/* The routines of one ISA path. */
typedef struct tfk_isa_ops {
    tfk_wma_fn wma;
    tfk_raw_fn raw;
    tfk_inner_fn inner;
    tfk_wma_multi_fn wma_multi;
    tfk_cmp_fn cmp;
} tfk_isa_ops;

/* The routines for an ISA (AUTO resolves to the best); 0, or TF_E_ISA_UNAVAILABLE. */
int tfk_isa_ops_for(tf_isa isa, tfk_isa_ops *ops);

/* The spec's denominator, (double)(L*(L+1)) / 2.0. */
static inline double tfk_wma_denom(int64_t L)
{
    return (double)(L * (L + 1)) / 2.0;
}

/* The fast sweep, optionally reading and filling a tf_series' first-stage cache. */
int tfk_sweep_impl(const double *close, int64_t n_bars, const int64_t *params, int64_t n_combos,
                   double *pnl, int64_t *trades, const tf_sweep_opts *opts, tf_series *series);

/* tfk_sweep_impl with the time-aware figures' hook (timeacc.h): tin (over the same close and
 * n_bars, its fee the sweep's) and tacc [n_combos] both set, and opts->stats set. The booking
 * hands each closed trade to its combo's accumulator at its exit bar (a separate instantiation
 * of the flip loop: the sweep without tin carries no trace of it); tacc[j] receives caller row
 * j's state after the last bar, with entry and pos the trade still open (pos 0: none). The
 * footprint that max_bytes bounds adds sizeof(tfk_tacc) a combo and 32 bytes a bar (tin's
 * prefix sums). tin NULL: tfk_sweep_impl. */
struct tfk_time_in;
struct tfk_tacc;
int tfk_sweep_timed(const double *close, int64_t n_bars, const int64_t *params, int64_t n_combos,
                    double *pnl, int64_t *trades, const tf_sweep_opts *opts, tf_series *series,
                    const struct tfk_time_in *tin, struct tfk_tacc *tacc);

/* For each distinct length len[u]: full[u] = the cached whole-series row, or NULL. Rows not
 * cached get a fresh buffer while the cache budget allows (listed in fill_idx/fill_buf, *n_fill);
 * the caller computes them and hands them to tfk_series_publish, which keeps them (or frees them
 * if another sweep published the same length first, or if ok is 0). */
int tfk_series_reserve(tf_series *s, const int64_t *len, int64_t n_len, const double **full,
                       int64_t *fill_idx, double **fill_buf, int64_t *n_fill);
void tfk_series_publish(tf_series *s, const int64_t *len, const int64_t *fill_idx,
                        double **fill_buf, int64_t n_fill, int ok);

/* Stop-and-reverse state of one combo (spec section 5), with its fee. */
typedef struct tfk_sar {
    int64_t pos;
    double entry;
    double pnl;
    int64_t trades;
    double fee;
} tfk_sar;

/* The statistics' extra state (spec section 8). Kept only when statistics are asked for. */
typedef struct tfk_sar_extra {
    int64_t wins;
    double gross_win, gross_loss, best, worst, mean, m2, peak, max_dd;
    int64_t first_bar; /* -1 until a position opens */
} tfk_sar_extra;

static inline tfk_sar tfk_sar_start(double fee)
{
    return (tfk_sar){0, 0.0, 0.0, 0, fee};
}

static inline tfk_sar_extra tfk_sar_extra_start(void)
{
    return (tfk_sar_extra){0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1};
}

/* Welford's update for the trades-th return r (spec section 8's order of operations). */
static inline void tfk_sar_welford(double *mean, double *m2, double r, int64_t trades)
{
    double delta = r - *mean;
    *mean += delta / (double)trades;
    *m2 += delta * (r - *mean);
}

/* One closed trade at close c: the spec's booking line, then (x non-NULL) the statistics in the
 * spec's order. The return r is the value pnl adds, so pnl's bits do not depend on x; it is
 * returned for the time-aware figures' hook (timeacc.h). */
static inline double tfk_sar_book(tfk_sar *st, tfk_sar_extra *x, double c)
{
    double r = (double)st->pos * (c - st->entry) / st->entry * 100.0 - st->fee;
    st->pnl += r;
    st->trades += 1;
    if (!x)
        return r;
    /* Without a branch (a win is a coin flip the predictor cannot learn): the side that does not
     * take r adds +0.0, which leaves it unchanged, since neither sum can ever be -0.0 (both start
     * at +0.0, and +0.0 + -0.0 is +0.0). NaN goes to gross_loss, as the spec's else does. */
    int win = r > 0.0;
    x->wins += win;
    uint64_t rb, keep = (uint64_t)0 - (uint64_t)win;
    __builtin_memcpy(&rb, &r, sizeof rb);
    uint64_t wb = rb & keep, lb = rb & ~keep;
    double rw, rl;
    __builtin_memcpy(&rw, &wb, sizeof rw);
    __builtin_memcpy(&rl, &lb, sizeof rl);
    x->gross_win += rw;
    x->gross_loss += rl;
    if (st->trades == 1) {
        x->best = r;
        x->worst = r;
    } else {
        x->best = r > x->best ? r : x->best;
        x->worst = r < x->worst ? r : x->worst;
    }
    tfk_sar_welford(&x->mean, &x->m2, r, st->trades);
    /* Stores on both sides, so the compiler selects without a branch even where x lives in
     * memory (the time-aware sweep's copy, whose state does not fit in registers): a new
     * drawdown is a coin flip to the predictor. */
    x->peak = st->pnl > x->peak ? st->pnl : x->peak;
    double dd = x->peak - st->pnl;
    x->max_dd = dd > x->max_dd ? dd : x->max_dd;
    return r;
}

/* One bar (number i of the series) of the SAR loop, exactly as the spec writes it. Used by the
 * reference, streaming and the fast sweep's bar-by-bar words. */
static inline void tfk_sar_step(tfk_sar *st, tfk_sar_extra *x, double f, double s, double c,
                                int64_t i)
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
        if (st->pos != 0)
            tfk_sar_book(st, x, c);
        else if (x)
            x->first_bar = i;
        st->pos = want;
        st->entry = c;
    }
}

/* One closed trade and the reversal at a bar where the signal flips an open position: the spec's
 * booking line, exactly as tfk_sar_step evaluates it. */
static inline void tfk_sar_flip(tfk_sar *st, tfk_sar_extra *x, int64_t want, double c)
{
    tfk_sar_book(st, x, c);
    st->pos = want;
    st->entry = c;
}

/* A combo's outputs after n bars; x NULL leaves the statistics at zero. */
static inline void tfk_sar_output(const tfk_sar *st, const tfk_sar_extra *x, int64_t n,
                                  tf_stats *out)
{
    tfk_sar_extra z = tfk_sar_extra_start();
    if (!x)
        x = &z;
    *out = (tf_stats){.pnl = st->pnl,
                      .trades = st->trades,
                      .wins = x->wins,
                      .gross_win = x->gross_win,
                      .gross_loss = x->gross_loss,
                      .best = x->best,
                      .worst = x->worst,
                      .mean = x->mean,
                      .m2 = x->m2,
                      .max_dd = x->max_dd,
                      .exposure_bars = x->first_bar >= 0 ? n - x->first_bar : 0};
}

/* The options a sweep reads, resolved from a caller's tf_sweep_opts of any known size: 0, or
 * TF_E_INVALID_ARG (bad size, unknown non-zero bytes, non-finite fee). */
typedef struct tfk_opts {
    int threads;
    tf_isa isa;
    size_t max_bytes;
    double fee;
    tf_stats *stats;
    tf_progress *progress;
} tfk_opts;

int tfk_opts_resolve(const tf_sweep_opts *in, tfk_opts *out);

/* Bars per time block of the sweep: sized from the L2 cache found at first use (sweep.c). */
int64_t tfk_sweep_block_bars(void);

#endif

/* The time-aware figures' accumulation (docs/definition.md section 10) at each trade's two ends:
 * one home for the sweeps' per-trade hook (sweep.c's tfk_sweep_timed, and every strategy's sweep
 * through tfk_tacc_change) and research's positions path (src/research/timestats.c), so the
 * figures' arithmetic exists once.
 *
 * The MTM drawdown is defined over every bar's mark. A trade's marks are
 * E[t] = eq + k * (dp * (P1[t] - P1[e])), each operation rounded, and every rounded operation is
 * monotone in its argument (a constant factor of either sign keeps or reverses the order), so
 * E[t] is a monotone function of P1[t]: the largest and smallest marks of a trade are the marks
 * of the largest and smallest P1 over its bars, bit for bit. With both known, mark() over the
 * trade's bars is known without visiting them when (A) no mark rises above the running peak (the
 * drawdown can only become peak - smallest mark) or (B) a new peak is made but the trade's whole
 * swing (largest - smallest mark, rounded) is not above the drawdown so far (no drop inside the
 * trade can exceed it); otherwise, and whenever a value is not finite, the bars are marked one
 * by one as the definition writes it. Either way the bits are the definition's. */
#ifndef TF_KERNEL_TIMEACC_H
#define TF_KERNEL_TIMEACC_H

#include <math.h>
#include <stdint.h>

#include "kernel_internal.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define TFK_NS_PER_DAY 86400e9

/* Bars per word of tfk_time_in's wlo and whi: 1 << TFK_WORD_SHIFT (measured: 16- and 32-bar words
 * run as many instructions, with more mispredicted branches). */
#define TFK_WORD_SHIFT 6

/* What every combo of a series shares: the close, the prefix sums over its differences (each
 * [n], index 0 holding 0.0: p1 of d, p2 of d*d, dn of the long's falls, up of the short's
 * rises), the dates (NULL or [n]) and the fee. first_bad: the first bar whose p1 is not
 * finite, n if none (a non-finite p1 stays non-finite: inf + x is inf or NaN, NaN stays NaN). */
typedef struct tfk_time_in {
    const double *close;
    const double *p1, *p2, *dn, *up;
    const int64_t *times;
    int64_t n, first_bad;
    double fee;
    /* wlo[w], whi[w]: the smallest and largest p1 over the bars [64w, 64w + 64) of the series
     * (each [n/64 + 1]): bounds of a trade's marks from the words it touches, cache-resident */
    const double *wlo, *whi;
} tfk_time_in;

/* Bytes a series of n bars needs for tfk_time_in's arrays, what max_bytes counts: the four
 * prefix sums, 32 bytes a bar (the words' bounds, 16 bytes per 64 bars, ride along uncounted). */
static inline double tfk_time_bytes(int64_t n)
{
    return 32.0 * (double)n;
}

/* One combo's running state over its trades. */
typedef struct tfk_tacc {
    double eq;   /* closed equity: the closed trades' returns summed in order (pnl's bits) */
    double q, d; /* sums of the squared changes, and of the squared falls */
    double peak, mdd, comp;
    double dur, days, max_days;
    int64_t trades, max_dur;
    int64_t entry; /* the open trade's entry bar (-1: none) */
    int64_t pos;   /* its direction after the last bar (the sweep's scatter sets it) */
    double k;      /* 100.0 / close[entry]: divided at the entry, so the exit does not wait on it */
} tfk_tacc;

static inline tfk_tacc tfk_tacc_start(void)
{
    return (tfk_tacc){.peak = 0.0, .mdd = 0.0, .comp = 1.0, .entry = -1, .k = 0.0};
}

/* Bar i becomes the entry of the next trade (or of a flat run: then k is never read). */
static inline void tfk_tacc_enter(tfk_tacc *a, const tfk_time_in *in, int64_t i)
{
    a->entry = i;
    a->k = 100.0 / in->close[i];
}

/* a > b ? a : b and a < b ? a : b, NaN and all, without a branch (SSE2's maxsd and minsd are
 * exactly these): the two marks of a trade's ends are ordered by its direction, a coin flip to
 * the predictor. */
static inline double tfk_max2(double a, double b)
{
#if defined(__SSE2__) && defined(__GNUC__)
    __asm__("maxsd %1, %0" : "+x"(a) : "x"(b)); /* (intrinsics would zero the upper lane) */
    return a;
#else
    return a > b ? a : b;
#endif
}

static inline double tfk_min2(double a, double b)
{
#if defined(__SSE2__) && defined(__GNUC__)
    __asm__("minsd %1, %0" : "+x"(a) : "x"(b));
    return a;
#else
    return a < b ? a : b;
#endif
}

static inline void tfk_tacc_mark(tfk_tacc *a, double e)
{
    a->peak = e > a->peak ? e : a->peak;
    double dd = a->peak - e;
    a->mdd = dd > a->mdd ? dd : a->mdd;
}

/* The smallest and largest of x[0..len) (len >= 1, all finite: min and max are then exact in
 * any order, and windows may overlap). The scan runs over every bar a combo holds, trade by
 * trade, so its per-trade overhead is the figures' main cost: with SSE2 (x86-64's baseline),
 * up to 4 values by four loads that cover them without a branch on the length, longer runs by
 * windows of 4 whose last one overlaps the one before instead of a scalar tail. */
static inline __attribute__((always_inline)) void tfk_range_minmax(const double *x, int64_t len,
                                                                   double *lo, double *hi)
{
#ifdef __SSE2__
    __m128d l, h;
    if (len <= 4) {
        int64_t m = len - 1, i1 = m < 1 ? m : 1, i2 = m < 2 ? 0 : m - 1;
        __m128d a = _mm_set_pd(x[i1], x[0]), b = _mm_set_pd(x[m], x[i2]);
        l = _mm_min_pd(a, b);
        h = _mm_max_pd(a, b);
    } else {
        __m128d l0 = _mm_loadu_pd(x), h0 = l0, l1 = _mm_loadu_pd(x + 2), h1 = l1;
        const double *last = x + len - 4;
        for (const double *p = x + 4; p < last; p += 4) {
            __m128d a = _mm_loadu_pd(p), b = _mm_loadu_pd(p + 2);
            l0 = _mm_min_pd(l0, a);
            h0 = _mm_max_pd(h0, a);
            l1 = _mm_min_pd(l1, b);
            h1 = _mm_max_pd(h1, b);
        }
        __m128d a = _mm_loadu_pd(last), b = _mm_loadu_pd(last + 2);
        l = _mm_min_pd(_mm_min_pd(l0, a), _mm_min_pd(l1, b));
        h = _mm_max_pd(_mm_max_pd(h0, a), _mm_max_pd(h1, b));
    }
    *lo = _mm_cvtsd_f64(_mm_min_sd(l, _mm_unpackhi_pd(l, l)));
    *hi = _mm_cvtsd_f64(_mm_max_sd(h, _mm_unpackhi_pd(h, h)));
#else
    double l = x[0], h = x[0];
    for (int64_t i = 1; i < len; i++) {
        double v = x[i];
        l = v < l ? v : l;
        h = v > h ? v : h;
    }
    *lo = l;
    *hi = h;
#endif
}

/* The smallest and largest of x[0..len), 2 <= len <= 16, all finite: eight overlapping pairs
 * whose starts are clamped into the run, so every value is covered and none outside is read,
 * without a branch on len. */
static inline __attribute__((always_inline)) void tfk_short_minmax(const double *x, int64_t len,
                                                                   double *lo, double *hi)
{
#ifdef __SSE2__
    int64_t m = len - 2; /* the last pair's start */
    int64_t f2 = m < 2 ? m : 2, f4 = m < 4 ? m : 4, f6 = m < 6 ? m : 6;
    int64_t b2 = m > 2 ? m - 2 : 0, b4 = m > 4 ? m - 4 : 0, b6 = m > 6 ? m - 6 : 0;
    __m128d u0 = _mm_loadu_pd(x), u1 = _mm_loadu_pd(x + f2), u2 = _mm_loadu_pd(x + f4),
            u3 = _mm_loadu_pd(x + f6), v0 = _mm_loadu_pd(x + m), v1 = _mm_loadu_pd(x + b2),
            v2 = _mm_loadu_pd(x + b4), v3 = _mm_loadu_pd(x + b6);
    __m128d l = _mm_min_pd(_mm_min_pd(_mm_min_pd(u0, u1), _mm_min_pd(u2, u3)),
                           _mm_min_pd(_mm_min_pd(v0, v1), _mm_min_pd(v2, v3)));
    __m128d h = _mm_max_pd(_mm_max_pd(_mm_max_pd(u0, u1), _mm_max_pd(u2, u3)),
                           _mm_max_pd(_mm_max_pd(v0, v1), _mm_max_pd(v2, v3)));
    *lo = _mm_cvtsd_f64(_mm_min_sd(l, _mm_unpackhi_pd(l, l)));
    *hi = _mm_cvtsd_f64(_mm_max_sd(h, _mm_unpackhi_pd(h, h)));
#else
    tfk_range_minmax(x, len, lo, hi);
#endif
}

/* The marks of the bars t in (e, end] of a trade entered at e (k = 100 / close[e], dp its
 * direction): mark() of each, by the shortcut of the header comment where it is exact. */
static inline __attribute__((always_inline)) void
tfk_tacc_marks(tfk_tacc *a, const tfk_time_in *in, double k, double dp, int64_t e, int64_t end)
{
    const double *p1 = in->p1;
    if (end <= e)
        return;
    double base = p1[e];
    if (end < in->first_bad) {
        double lo, hi;
        if (end - e < 16) {
            /* A short trade (most of them) gets its exact smallest and largest p1 without a
             * branch on its length. The entry bar rides along: its mark is the closed equity,
             * which the last exit already marked (peak >= it, peak - it <= mdd), so it can
             * change neither test nor update below. */
            tfk_short_minmax(p1 + e, end - e + 1, &lo, &hi);
        } else {
            /* First the bounds of the words the trade's bars lie in (wider than its bars, so
             * marks below and above all of its own): when they prove that no mark passes the
             * peak and no drop passes the drawdown, mark() would change nothing, bar by bar.
             * Words that reach a non-finite p1 are not used. The proof needs no finiteness:
             * both comparisons hold only when neither bound is NaN (maxsd and minsd pass a NaN
             * on), each mark that is not NaN lies between the bounds (every rounded operation
             * is monotone, infinities included), and a NaN mark changes nothing. */
            int64_t w0 = (e + 1) >> TFK_WORD_SHIFT, w1 = end >> TFK_WORD_SHIFT;
            int64_t wend = ((w1 + 1) << TFK_WORD_SHIFT) - 1;
            if (wend < in->first_bad || in->first_bad == in->n) {
                /* the first two words without a branch (a trade under 65 bars touches one or
                 * two) */
                int64_t wb = w0 + 1 < w1 ? w0 + 1 : w1;
                double wl = tfk_min2(in->wlo[w0], in->wlo[wb]),
                       wh = tfk_max2(in->whi[w0], in->whi[wb]);
                for (int64_t w = w0 + 2; w <= w1; w++) {
                    wl = tfk_min2(in->wlo[w], wl);
                    wh = tfk_max2(in->whi[w], wh);
                }
                double ba = a->eq + k * (dp * (wh - base)), bb = a->eq + k * (dp * (wl - base));
                double bmax = tfk_max2(ba, bb), bmin = tfk_min2(bb, ba);
                if ((bmax <= a->peak) & (a->peak - bmin <= a->mdd))
                    return;
            }
            tfk_range_minmax(p1 + e + 1, end - e, &lo, &hi);
        }
        double ea = a->eq + k * (dp * (hi - base)), eb = a->eq + k * (dp * (lo - base));
        double emax = tfk_max2(ea, eb), emin = tfk_min2(eb, ea);
        /* (B) implies peak - emin <= emax - emin <= mdd: the update of (A) is then a no-op, so
         * both take it, without a branch on which (it is a coin flip to the predictor). z is
         * finite only when emax, emin and the peak are (a sum that overflows only sends the
         * trade to the bar-by-bar marks); with emax and peak finite, emax <= peak is
         * !(emax > peak). */
        double z = emax + emin + a->peak;
        int finite = z - z == 0.0;
        int shortcut = (emax <= a->peak) | (emax - emin <= a->mdd);
        if (finite & shortcut) {
            double dd = a->peak - emin;
            a->mdd = dd > a->mdd ? dd : a->mdd;
            a->peak = emax > a->peak ? emax : a->peak;
            return;
        }
    }
    for (int64_t t = e + 1; t <= end; t++)
        tfk_tacc_mark(a, a->eq + k * (dp * (p1[t] - base)));
}

/* The bars (e, end] of the trade entered at e = a->entry in direction p, without an exit bar's
 * booking: the marks and the sums of squares over them (also the position still open after the
 * last bar). */
static inline __attribute__((always_inline)) void tfk_tacc_hold(tfk_tacc *a, const tfk_time_in *in,
                                                                int64_t end, int p)
{
    int64_t e = a->entry;
    double k = a->k, kk = k * k, dp = (double)p;
    tfk_tacc_marks(a, in, k, dp, e, end);
    const double *w = p > 0 ? in->dn : in->up;
    a->q = a->q + kk * (in->p2[end] - in->p2[e]);
    a->d = a->d + kk * (w[end] - w[e]);
}

/* The trade entered at e = a->entry, closed at x > e in direction p with the booking's return r
 * (dp * (close[x] - close[e]) / close[e] * 100.0 - fee, bit for bit). */
static inline __attribute__((always_inline)) void tfk_tacc_close(tfk_tacc *a, const tfk_time_in *in,
                                                                 int64_t x, int p, double r)
{
    int64_t e = a->entry;
    double k = a->k, dp = (double)p;
    tfk_tacc_hold(a, in, x - 1, p);
    double g = r - k * (dp * (in->p1[x - 1] - in->p1[e])); /* the exit bar's change */
    a->q = a->q + g * g;
    a->d = a->d + (g < 0.0 ? g * g : 0.0);
    a->eq = a->eq + r;
    tfk_tacc_mark(a, a->eq);
    a->comp = a->comp * (1.0 + r / 100.0);
    a->trades++;
    a->dur = a->dur + (double)(x - e);
    if (x - e > a->max_dur)
        a->max_dur = x - e;
    if (in->times) {
        double dd = (double)(in->times[x] - in->times[e]) / TFK_NS_PER_DAY;
        a->days = a->days + dd;
        if (dd > a->max_days)
            a->max_days = dd;
    }
}

/* A bar i where a position moves from st->pos to want (-1..1, != st->pos) at close c: the
 * booking (book.h's tfk_book_change; tfk_sar_flip when neither is 0) with the figures' hook:
 * the closed trade handed to ta at its exit bar i, and i kept as the next trade's entry bar.
 * Every strategy's sweep books through this when it books the figures in the same pass. */
static inline __attribute__((always_inline)) void tfk_tacc_change(tfk_tacc *ta,
                                                                  const tfk_time_in *in,
                                                                  tfk_sar *st, tfk_sar_extra *x,
                                                                  int want, double c, int64_t i)
{
    if (st->pos != 0) {
        int p = (int)st->pos;
        double r = tfk_sar_book(st, x, c);
        tfk_tacc_close(ta, in, i, p, r);
    }
    if (want != 0)
        st->entry = c;
    st->pos = want;
    tfk_tacc_enter(ta, in, i);
}

#endif

/* Fast sweeps of the five built-ins: work shared across combos computed once per series.
 *
 * A built-in's combos read a few shared lines: sma_cross an SMA per distinct window, ema_cross
 * an EMA per distinct length, rsi an RSI per distinct period, bollinger a mean and a standard
 * deviation per distinct window, donchian two "distance" lines for the whole grid (below). Each
 * line is computed once per series ("units"), with exactly the operations of the step
 * definition (builtins.c) in the same order, so every value has the step's bits; each combo then
 * only compares and books.
 *
 * Time is cut into blocks (the working set stays in cache and memory does not grow with
 * n_bars): per block, a plan computes its units (each carries its running state from block to
 * block: a rolling sum, an EMA, the RSI averages), then its combos (each carries its booking).
 * Threads take contiguous slices of the sorted distinct combos, one plan each, with no barrier
 * between them (a line two slices need is computed by both, with the same bits). Who computes
 * what never changes a value, so any thread count gives the same bits.
 *
 * Booking: for targets that are never 0 (every built-in but bollinger), a combo's up/down bits
 * (64 bars a word) are booked visiting only the bars that matter (book_events): in a word where
 * every bar has a target and a position is open, only the bars where it flips; otherwise each
 * bar with a target. Bars without one are HOLD, which books nothing. Bollinger's targets depend
 * on the position (its own last non-HOLD target is always the booking's position): from its
 * band bitmasks and its line's close >= mean / close <= mean bitmasks, it visits the bars where,
 * given the position it holds, its branches change it (book_bollinger_with).
 *
 * donchian(w): +1 iff close[i] > every close of the w bars before it, i.e. iff no bar j in
 * [i-w, i-1] has close[j] >= close[i] (and none is NaN). So one pass with two monotone stacks
 * gives, per bar, U[i] = the distance to the nearest earlier bar j with close[j] >= close[i], or
 * to the last NaN if nearer; D[i] the same for <=. Then up = U[i] > w, down = D[i] > w, for
 * every window at once: a comparison per combo and bar. The stacks only keep the last w_max+1
 * bars (an older bar is farther than any window looks). */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "strategy_internal.h"

/* The AVX2 helpers (bitmasks, four or eight chains a register) are compiled with a target
 * attribute and chosen at run time (tfs_fast_opts.avx2); every one gives the scalar bits. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_MASKS 1
#endif

enum kind { K_SMA, K_EMA, K_DONCHIAN, K_RSI, K_BOLLINGER };

/* A unit's running state from block to block. */
typedef struct unit {
    int64_t w;       /* window / length / period */
    double a;        /* ema: 2.0 / (w + 1.0) */
    double s;        /* sma, bollinger: the rolling sum; ema: the EMA; rsi: ag */
    double al, prev; /* rsi */
} unit;

/* donchian's two monotone stacks: bar indices in a ring of cap, oldest at head. */
typedef struct mstack {
    int64_t *idx;
    int64_t head, len, cap;
} mstack;

typedef struct fplan {
    enum kind kind;
    const double *close;
    int64_t n_bars, B, n_blocks;
    int64_t n_units;
    unit *units;
    int rows_per_unit;
    double *rows;    /* [n_units * rows_per_unit][B] */
    int64_t W;       /* words of one block's bitmask: B / 64 + 1 */
    uint64_t *umask; /* bollinger: [n_units][2][W], close >= mean and close <= mean */
    int64_t n;       /* combos */
    const double *params;
    uint32_t k;
    int64_t *uidx;   /* [n][2]: the units a combo reads */
    tfk_book *books; /* [n] */
    int stats;
    const tfk_time_in *tin; /* the time-aware figures' hook, or NULL */
    tfk_tacc *tacc;         /* [n] with tin */
    tfk_cmp_fn cmp;
    int avx2; /* the AVX2 bitmask builders (same bits as the scalar ones) */
    /* donchian */
    mstack hi, lo;
    int64_t last_nan, w_max;
    tf_progress *progress;
    atomic_llong *next; /* [2 * n_blocks] */
    uint64_t *masks;    /* [4][W]: the combos' bitmasks */
} fplan;

static int cancelled(const fplan *pl)
{
    return pl->progress && __atomic_load_n(&pl->progress->cancel, __ATOMIC_RELAXED);
}

/* ---- units ---- */

static double *row(const fplan *pl, int64_t u, int r)
{
    return pl->rows + (u * pl->rows_per_unit + r) * pl->B;
}

/* S_w after close[i] (builtins.c's roll, reading close[i-w] from the series). */
static inline double roll(double S, const double *close, int64_t i, int64_t w)
{
    double c = close[i];
    if (i == 0)
        return c;
    if (i < w)
        return S + c;
    return (S + c) - close[i - w];
}

static void unit_sma(const fplan *pl, unit *u, double *out, int64_t t0, int64_t t1)
{
    double S = u->s, w = (double)u->w;
    for (int64_t i = t0; i < t1; i++) {
        S = roll(S, pl->close, i, u->w);
        out[i - t0] = i >= u->w - 1 ? S / w : NAN;
    }
    u->s = S;
}

static void unit_ema(const fplan *pl, unit *u, double *out, int64_t t0, int64_t t1)
{
    double e = u->s, a = u->a;
    for (int64_t i = t0; i < t1; i++) {
        double c = pl->close[i];
        e = i == 0 ? c : e + a * (c - e);
        out[i - t0] = e;
    }
    u->s = e;
}

static inline double rsi_value(double ag, double al)
{
    if (al == 0.0)
        return ag == 0.0 ? 50.0 : 100.0;
    return 100.0 - 100.0 / (1.0 + ag / al);
}

static void unit_rsi(const fplan *pl, unit *u, double *out, int64_t t0, int64_t t1)
{
    double ag = u->s, al = u->al, prev = u->prev, per = (double)u->w;
    int64_t p = u->w;
    for (int64_t i = t0; i < t1; i++) {
        double c = pl->close[i];
        if (i == 0) {
            prev = c;
            out[0] = NAN;
            continue;
        }
        double d = c - prev;
        prev = c;
        double g = d > 0 ? d : 0.0, l = d < 0 ? -d : 0.0;
        if (i <= p) {
            ag += g;
            al += l;
            if (i < p) {
                out[i - t0] = NAN;
                continue;
            }
            ag = ag / per;
            al = al / per;
        } else {
            ag = (ag * (per - 1) + g) / per;
            al = (al * (per - 1) + l) / per;
        }
        out[i - t0] = rsi_value(ag, al);
    }
    u->s = ag;
    u->al = al;
    u->prev = prev;
}

#ifdef HAVE_AVX2_MASKS
/* v[q] = the sum over j = 0 .. w-1, in that order, of (x[j+q] - m[q]) * (x[j+q] - m[q]), for
 * eight consecutive bars q: lane q of two registers runs bar q's scalar sequence. */
__attribute__((target("avx2"))) static void var8_avx2(const double *x, int64_t w, const double *m,
                                                      double *v)
{
    __m256d m0 = _mm256_loadu_pd(m), m1 = _mm256_loadu_pd(m + 4);
    __m256d v0 = _mm256_setzero_pd(), v1 = _mm256_setzero_pd();
    for (int64_t j = 0; j < w; j++) {
        __m256d e0 = _mm256_sub_pd(_mm256_loadu_pd(x + j), m0);
        __m256d e1 = _mm256_sub_pd(_mm256_loadu_pd(x + j + 4), m1);
        v0 = _mm256_add_pd(v0, _mm256_mul_pd(e0, e0));
        v1 = _mm256_add_pd(v1, _mm256_mul_pd(e1, e1));
    }
    _mm256_storeu_pd(v, v0);
    _mm256_storeu_pd(v + 4, v1);
}
#endif

/* Mean and standard deviation of the w bars ending at each bar (bollinger's step). The sums of
 * squares of four consecutive bars run side by side, each in its own left-to-right order. */
static void unit_bollinger(const fplan *pl, unit *u, double *m_out, double *sd_out, int64_t t0,
                           int64_t t1)
{
    const double *c = pl->close;
    int64_t w = u->w;
    double S = u->s, wd = (double)w;
    int64_t i = t0;
    for (; i < t1 && i < w - 1; i++) {
        S = roll(S, c, i, w);
        m_out[i - t0] = NAN;
        sd_out[i - t0] = NAN;
    }
#ifdef HAVE_AVX2_MASKS
    for (; pl->avx2 && i + 8 <= t1; i += 8) {
        double m[8], v[8];
        for (int q = 0; q < 8; q++) {
            S = roll(S, c, i + q, w);
            m[q] = S / wd;
        }
        var8_avx2(c + i - w + 1, w, m, v);
        for (int q = 0; q < 8; q++) {
            m_out[i + q - t0] = m[q];
            sd_out[i + q - t0] = sqrt(v[q] / wd);
        }
    }
#endif
    for (; i + 4 <= t1; i += 4) {
        double m[4];
        for (int q = 0; q < 4; q++) {
            S = roll(S, c, i + q, w);
            m[q] = S / wd;
        }
        double v0 = 0.0, v1 = 0.0, v2 = 0.0, v3 = 0.0;
        const double *x = c + i - w + 1;
        for (int64_t j = 0; j < w; j++) {
            double e0 = x[j] - m[0], e1 = x[j + 1] - m[1], e2 = x[j + 2] - m[2],
                   e3 = x[j + 3] - m[3];
            v0 += e0 * e0;
            v1 += e1 * e1;
            v2 += e2 * e2;
            v3 += e3 * e3;
        }
        double v[4] = {v0, v1, v2, v3};
        for (int q = 0; q < 4; q++) {
            m_out[i + q - t0] = m[q];
            sd_out[i + q - t0] = sqrt(v[q] / wd);
        }
    }
    for (; i < t1; i++) {
        S = roll(S, c, i, w);
        double m = S / wd, v = 0.0;
        for (int64_t j = i - w + 1; j <= i; j++) {
            double e = c[j] - m;
            v += e * e;
        }
        m_out[i - t0] = m;
        sd_out[i - t0] = sqrt(v / wd);
    }
    u->s = S;
}

static void ms_drop_old(mstack *s, int64_t oldest)
{
    while (s->len && s->idx[s->head] < oldest) {
        s->head = s->head + 1 == s->cap ? 0 : s->head + 1;
        s->len--;
    }
}

static int64_t ms_top(const mstack *s)
{
    int64_t t = s->head + s->len - 1;
    return s->idx[t >= s->cap ? t - s->cap : t];
}

static void ms_pop(mstack *s)
{
    s->len--;
}

static void ms_push(mstack *s, int64_t i)
{
    int64_t t = s->head + s->len;
    s->idx[t >= s->cap ? t - s->cap : t] = i;
    s->len++;
}

/* U and D for the bars of the block (see the top of the file), capped at w_max + 1 (farther
 * than any window looks), so they fit int32 (w_max <= 2^24) and a combo compares 8 a
 * instruction. */
static void unit_donchian(fplan *pl, int32_t *U, int32_t *D, int64_t t0, int64_t t1)
{
    const double *c = pl->close;
    const int64_t far = pl->w_max + 1;
    for (int64_t i = t0; i < t1; i++) {
        double x = c[i];
        ms_drop_old(&pl->hi, i - pl->w_max);
        ms_drop_old(&pl->lo, i - pl->w_max);
        if (x != x) {
            U[i - t0] = D[i - t0] = 0; /* a NaN close: neither side */
            pl->last_nan = i;
            continue;
        }
        /* Nearest earlier bar with close >= x: pop the ones below x (they can never be the
         * nearest >= for a later bar that x does not already cover). */
        while (pl->hi.len && c[ms_top(&pl->hi)] < x)
            ms_pop(&pl->hi);
        while (pl->lo.len && c[ms_top(&pl->lo)] > x)
            ms_pop(&pl->lo);
        int64_t dn = pl->last_nan >= 0 ? i - pl->last_nan : far;
        int64_t du = pl->hi.len ? i - ms_top(&pl->hi) : far;
        int64_t dd = pl->lo.len ? i - ms_top(&pl->lo) : far;
        du = du < dn ? du : dn;
        dd = dd < dn ? dd : dn;
        U[i - t0] = (int32_t)(du < far ? du : far);
        D[i - t0] = (int32_t)(dd < far ? dd : far);
        ms_push(&pl->hi, i);
        ms_push(&pl->lo, i);
    }
}

/* donchian's rows live in the row buffer as int32 (only ever read and written as such). */
static int32_t *drow(const fplan *pl, int r)
{
    return (int32_t *)(void *)(pl->rows + r * pl->B);
}

/* ---- bitmasks: 64 bars a word, bit q of word w for bar 64w+q; bits past n are 0; a NaN
 * compares false. Comparisons are exact, so the AVX2 versions give the scalar bits. ---- */

/* Word w of a mask from a per-bar predicate, scalar. */
#define SCALAR_BITS(n, pred_a, pred_b, out_a, out_b)                                               \
    for (int64_t w = 0; w * 64 < (n); w++) {                                                       \
        int64_t base = w * 64, nb = (n)-base < 64 ? (n)-base : 64;                                 \
        uint64_t a = 0, b = 0;                                                                     \
        for (int64_t q = 0; q < nb; q++) {                                                         \
            int64_t i = base + q;                                                                  \
            a |= (uint64_t)(pred_a) << q;                                                          \
            b |= (uint64_t)(pred_b) << q;                                                          \
        }                                                                                          \
        (out_a)[w] = a;                                                                            \
        (out_b)[w] = b;                                                                            \
    }

/* below: x < lo; above: y > hi (donchian passes U and D, rsi the RSI twice). */
static void thresh_scalar(const double *x, const double *y, int64_t n, double lo, double hi,
                          uint64_t *below, uint64_t *above)
{
    SCALAR_BITS(n, x[i]<lo, y[i]> hi, below, above)
}

/* ge: c >= m; le: c <= m. */
static void order_scalar(const double *c, const double *m, int64_t n, uint64_t *ge, uint64_t *le)
{
    SCALAR_BITS(n, c[i] >= m[i], c[i] <= m[i], ge, le)
}

/* up: c < m - k * sd; down: c > m + k * sd (the step's bands, operation for operation). */
static void bands_scalar(const double *c, const double *m, const double *sd, int64_t n, double k,
                         uint64_t *up, uint64_t *down)
{
    SCALAR_BITS(n, c[i]<m[i] - k * sd[i], c[i]> m[i] + k * sd[i], up, down)
}

#ifdef HAVE_AVX2_MASKS
/* Four bars per instruction; the word's tail (n not a multiple of 4) scalar. */
#define AVX2_BITS(n, va_expr, vb_expr, sa_expr, sb_expr, out_a, out_b)                             \
    for (int64_t w = 0; w * 64 < (n); w++) {                                                       \
        int64_t base = w * 64, nb = (n)-base < 64 ? (n)-base : 64, q = 0;                          \
        uint64_t a = 0, b = 0;                                                                     \
        for (; q + 4 <= nb; q += 4) {                                                              \
            int64_t i = base + q;                                                                  \
            a |= (uint64_t)_mm256_movemask_pd(va_expr) << q;                                       \
            b |= (uint64_t)_mm256_movemask_pd(vb_expr) << q;                                       \
        }                                                                                          \
        for (; q < nb; q++) {                                                                      \
            int64_t i = base + q;                                                                  \
            a |= (uint64_t)(sa_expr) << q;                                                         \
            b |= (uint64_t)(sb_expr) << q;                                                         \
        }                                                                                          \
        (out_a)[w] = a;                                                                            \
        (out_b)[w] = b;                                                                            \
    }

__attribute__((target("avx2"))) static void thresh_avx2(const double *x, const double *y, int64_t n,
                                                        double lo, double hi, uint64_t *below,
                                                        uint64_t *above)
{
    __m256d vlo = _mm256_set1_pd(lo), vhi = _mm256_set1_pd(hi);
    AVX2_BITS(n, _mm256_cmp_pd(_mm256_loadu_pd(x + i), vlo, _CMP_LT_OQ),
              _mm256_cmp_pd(_mm256_loadu_pd(y + i), vhi, _CMP_GT_OQ), x[i]<lo, y[i]> hi, below,
              above)
}

__attribute__((target("avx2"))) static void order_avx2(const double *c, const double *m, int64_t n,
                                                       uint64_t *ge, uint64_t *le)
{
    AVX2_BITS(n, _mm256_cmp_pd(_mm256_loadu_pd(c + i), _mm256_loadu_pd(m + i), _CMP_GE_OQ),
              _mm256_cmp_pd(_mm256_loadu_pd(c + i), _mm256_loadu_pd(m + i), _CMP_LE_OQ),
              c[i] >= m[i], c[i] <= m[i], ge, le)
}

/* The bands as the step computes them: k * sd, then m minus (plus) it; no FMA (the target
 * has none, and the strategy part is built with -ffp-contract=off). */
__attribute__((target("avx2"))) static void bands_avx2(const double *c, const double *m,
                                                       const double *sd, int64_t n, double k,
                                                       uint64_t *up, uint64_t *down)
{
    __m256d vk = _mm256_set1_pd(k);
    AVX2_BITS(n,
              _mm256_cmp_pd(
                  _mm256_loadu_pd(c + i),
                  _mm256_sub_pd(_mm256_loadu_pd(m + i), _mm256_mul_pd(vk, _mm256_loadu_pd(sd + i))),
                  _CMP_LT_OQ),
              _mm256_cmp_pd(
                  _mm256_loadu_pd(c + i),
                  _mm256_add_pd(_mm256_loadu_pd(m + i), _mm256_mul_pd(vk, _mm256_loadu_pd(sd + i))),
                  _CMP_GT_OQ),
              c[i]<m[i] - k * sd[i], c[i]> m[i] + k * sd[i], up, down)
}
#endif

static void beyond_scalar(const int32_t *U, const int32_t *D, int64_t n, int32_t win, uint64_t *up,
                          uint64_t *down)
{
    SCALAR_BITS(n, U[i] > win, D[i] > win, up, down)
}

#ifdef HAVE_AVX2_MASKS
/* up: U > w, down: D > w, eight bars an instruction. */
__attribute__((target("avx2"))) static void
beyond_avx2(const int32_t *U, const int32_t *D, int64_t n, int32_t w, uint64_t *up, uint64_t *down)
{
    __m256i vw = _mm256_set1_epi32(w);
    for (int64_t q = 0; q * 64 < n; q++) {
        int64_t base = q * 64, nb = n - base < 64 ? n - base : 64, k = 0;
        uint64_t a = 0, b = 0;
        for (; k + 8 <= nb; k += 8) {
            __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(U + base + k));
            __m256i d = _mm256_loadu_si256((const __m256i *)(const void *)(D + base + k));
            a |= (uint64_t)(uint32_t)_mm256_movemask_ps(
                     _mm256_castsi256_ps(_mm256_cmpgt_epi32(u, vw)))
                 << k;
            b |= (uint64_t)(uint32_t)_mm256_movemask_ps(
                     _mm256_castsi256_ps(_mm256_cmpgt_epi32(d, vw)))
                 << k;
        }
        for (; k < nb; k++) {
            a |= (uint64_t)(U[base + k] > w) << k;
            b |= (uint64_t)(D[base + k] > w) << k;
        }
        up[q] = a;
        down[q] = b;
    }
}
#endif

static void beyond(const fplan *pl, const int32_t *U, const int32_t *D, int64_t n, int32_t w,
                   uint64_t *up, uint64_t *down)
{
#ifdef HAVE_AVX2_MASKS
    if (pl->avx2) {
        beyond_avx2(U, D, n, w, up, down);
        return;
    }
#endif
    beyond_scalar(U, D, n, w, up, down);
}

static void thresh(const fplan *pl, const double *x, const double *y, int64_t n, double lo,
                   double hi, uint64_t *below, uint64_t *above)
{
#ifdef HAVE_AVX2_MASKS
    if (pl->avx2) {
        thresh_avx2(x, y, n, lo, hi, below, above);
        return;
    }
#endif
    thresh_scalar(x, y, n, lo, hi, below, above);
}

static void order_bits(const fplan *pl, const double *c, const double *m, int64_t n, uint64_t *ge,
                       uint64_t *le)
{
#ifdef HAVE_AVX2_MASKS
    if (pl->avx2) {
        order_avx2(c, m, n, ge, le);
        return;
    }
#endif
    order_scalar(c, m, n, ge, le);
}

static void bands(const fplan *pl, const double *c, const double *m, const double *sd, int64_t n,
                  double k, uint64_t *up, uint64_t *down)
{
#ifdef HAVE_AVX2_MASKS
    if (pl->avx2) {
        bands_avx2(c, m, sd, n, k, up, down);
        return;
    }
#endif
    bands_scalar(c, m, sd, n, k, up, down);
}

static void unit_block(fplan *pl, int64_t u, int64_t t0, int64_t t1)
{
    unit *un = &pl->units[u];
    switch (pl->kind) {
    case K_SMA:
        unit_sma(pl, un, row(pl, u, 0), t0, t1);
        break;
    case K_EMA:
        unit_ema(pl, un, row(pl, u, 0), t0, t1);
        break;
    case K_RSI:
        unit_rsi(pl, un, row(pl, u, 0), t0, t1);
        break;
    case K_BOLLINGER:
        unit_bollinger(pl, un, row(pl, u, 0), row(pl, u, 1), t0, t1);
        order_bits(pl, pl->close + t0, row(pl, u, 0), t1 - t0, pl->umask + u * 2 * pl->W,
                   pl->umask + (u * 2 + 1) * pl->W);
        break;
    case K_DONCHIAN:
        unit_donchian(pl, drow(pl, 0), drow(pl, 1), t0, t1);
        break;
    }
}

/* Four units side by side past their warm-up: each keeps its own chain of operations (the
 * step's, in the step's order), and the four chains overlap in the CPU instead of each waiting
 * on its own latency. Bars [t0, t1) of the block that starts at b0, all at or past every unit's
 * warm-up. */
static void units4_sma(const fplan *pl, unit *u, int64_t g0, int64_t b0, int64_t t0, int64_t t1)
{
    const double *c = pl->close;
    double S[4], wd[4], *out[4];
    int64_t w[4];
    for (int q = 0; q < 4; q++) {
        S[q] = u[q].s;
        w[q] = u[q].w;
        wd[q] = (double)u[q].w;
        out[q] = row(pl, g0 + q, 0) - b0;
    }
    for (int64_t i = t0; i < t1; i++) {
        double ci = c[i];
        for (int q = 0; q < 4; q++) {
            S[q] = (S[q] + ci) - c[i - w[q]];
            out[q][i] = S[q] / wd[q];
        }
    }
    for (int q = 0; q < 4; q++)
        u[q].s = S[q];
}

static void units4_ema(const fplan *pl, unit *u, int64_t g0, int64_t b0, int64_t t0, int64_t t1)
{
    const double *c = pl->close;
    double e[4], a[4], *out[4];
    for (int q = 0; q < 4; q++) {
        e[q] = u[q].s;
        a[q] = u[q].a;
        out[q] = row(pl, g0 + q, 0) - b0;
    }
    for (int64_t i = t0; i < t1; i++) {
        double ci = c[i];
        for (int q = 0; q < 4; q++) {
            e[q] = e[q] + a[q] * (ci - e[q]);
            out[q][i] = e[q];
        }
    }
    for (int q = 0; q < 4; q++)
        u[q].s = e[q];
}

static void units4_rsi(const fplan *pl, unit *u, int64_t g0, int64_t b0, int64_t t0, int64_t t1)
{
    const double *c = pl->close;
    double ag[4], al[4], per[4], pm1[4], *out[4];
    double prev = u[0].prev; /* the same close for every unit */
    for (int q = 0; q < 4; q++) {
        ag[q] = u[q].s;
        al[q] = u[q].al;
        per[q] = (double)u[q].w;
        pm1[q] = per[q] - 1;
        out[q] = row(pl, g0 + q, 0) - b0;
    }
    for (int64_t i = t0; i < t1; i++) {
        double ci = c[i], d = ci - prev;
        prev = ci;
        double g = d > 0 ? d : 0.0, l = d < 0 ? -d : 0.0;
        for (int q = 0; q < 4; q++) {
            ag[q] = (ag[q] * pm1[q] + g) / per[q];
            al[q] = (al[q] * pm1[q] + l) / per[q];
            out[q][i] = rsi_value(ag[q], al[q]);
        }
    }
    for (int q = 0; q < 4; q++) {
        u[q].s = ag[q];
        u[q].al = al[q];
        u[q].prev = prev;
    }
}

#ifdef HAVE_AVX2_MASKS
/* The same four chains in the four lanes of one register: each lane runs its unit's scalar
 * sequence of operations (no FMA: the target has none, and -ffp-contract=off), so the values are
 * the scalar ones; four divisions cost about one. */
/* Lane q of v into out[q][i]. */
__attribute__((target("avx2"))) static inline void scatter4(double *const out[4], int64_t i,
                                                            __m256d v)
{
    double tmp[4];
    _mm256_storeu_pd(tmp, v);
    for (int q = 0; q < 4; q++)
        out[q][i] = tmp[q];
}

/* Lane q of v into u[q].s (a group's running state at the end of the block). */
__attribute__((target("avx2"))) static inline void state4(unit *u, __m256d v)
{
    double tmp[4];
    _mm256_storeu_pd(tmp, v);
    for (int q = 0; q < 4; q++)
        u[q].s = tmp[q];
}

__attribute__((target("avx2"))) static void units4_sma_avx2(const fplan *pl, unit *u, int64_t g0,
                                                            int64_t b0, int64_t t0, int64_t t1)
{
    const double *c = pl->close;
    double *out[4];
    int64_t w[4];
    for (int q = 0; q < 4; q++) {
        w[q] = u[q].w;
        out[q] = row(pl, g0 + q, 0) - b0;
    }
    __m256d S = _mm256_set_pd(u[3].s, u[2].s, u[1].s, u[0].s);
    __m256d wd = _mm256_set_pd((double)w[3], (double)w[2], (double)w[1], (double)w[0]);
    for (int64_t i = t0; i < t1; i++) {
        __m256d old = _mm256_set_pd(c[i - w[3]], c[i - w[2]], c[i - w[1]], c[i - w[0]]);
        S = _mm256_sub_pd(_mm256_add_pd(S, _mm256_set1_pd(c[i])), old);
        scatter4(out, i, _mm256_div_pd(S, wd));
    }
    state4(u, S);
}

__attribute__((target("avx2"))) static void units4_ema_avx2(const fplan *pl, unit *u, int64_t g0,
                                                            int64_t b0, int64_t t0, int64_t t1)
{
    const double *c = pl->close;
    double *out[4];
    for (int q = 0; q < 4; q++)
        out[q] = row(pl, g0 + q, 0) - b0;
    __m256d e = _mm256_set_pd(u[3].s, u[2].s, u[1].s, u[0].s);
    __m256d a = _mm256_set_pd(u[3].a, u[2].a, u[1].a, u[0].a);
    for (int64_t i = t0; i < t1; i++) {
        e = _mm256_add_pd(e, _mm256_mul_pd(a, _mm256_sub_pd(_mm256_set1_pd(c[i]), e)));
        scatter4(out, i, e);
    }
    state4(u, e);
}

__attribute__((target("avx2"))) static void units4_rsi_avx2(const fplan *pl, unit *u, int64_t g0,
                                                            int64_t b0, int64_t t0, int64_t t1)
{
    const double *c = pl->close;
    double *out[4], prev = u[0].prev;
    for (int q = 0; q < 4; q++)
        out[q] = row(pl, g0 + q, 0) - b0;
    __m256d ag = _mm256_set_pd(u[3].s, u[2].s, u[1].s, u[0].s);
    __m256d al = _mm256_set_pd(u[3].al, u[2].al, u[1].al, u[0].al);
    __m256d per = _mm256_set_pd((double)u[3].w, (double)u[2].w, (double)u[1].w, (double)u[0].w);
    __m256d pm1 = _mm256_sub_pd(per, _mm256_set1_pd(1.0));
    const __m256d zero = _mm256_setzero_pd(), one = _mm256_set1_pd(1.0);
    const __m256d c50 = _mm256_set1_pd(50.0), c100 = _mm256_set1_pd(100.0);
    for (int64_t i = t0; i < t1; i++) {
        double ci = c[i], d = ci - prev;
        prev = ci;
        double g = d > 0 ? d : 0.0, l = d < 0 ? -d : 0.0;
        ag = _mm256_div_pd(_mm256_add_pd(_mm256_mul_pd(ag, pm1), _mm256_set1_pd(g)), per);
        al = _mm256_div_pd(_mm256_add_pd(_mm256_mul_pd(al, pm1), _mm256_set1_pd(l)), per);
        /* rsi_value: 100 - 100 / (1 + ag / al), or (al == 0) 100, or 50 with ag == 0 too */
        __m256d r =
            _mm256_sub_pd(c100, _mm256_div_pd(c100, _mm256_add_pd(one, _mm256_div_pd(ag, al))));
        __m256d flat = _mm256_blendv_pd(c100, c50, _mm256_cmp_pd(ag, zero, _CMP_EQ_OQ));
        r = _mm256_blendv_pd(r, flat, _mm256_cmp_pd(al, zero, _CMP_EQ_OQ));
        scatter4(out, i, r);
    }
    double tg[4], tl[4];
    _mm256_storeu_pd(tg, ag);
    _mm256_storeu_pd(tl, al);
    for (int q = 0; q < 4; q++) {
        u[q].s = tg[q];
        u[q].al = tl[q];
        u[q].prev = prev;
    }
}
#endif

/* Phase one, item g: a group of up to four units (consecutive, so similar lengths) over the
 * block; donchian's one pass is item 0. */
static void group_block(fplan *pl, int64_t g, int64_t t0, int64_t t1)
{
    if (pl->kind == K_DONCHIAN || pl->kind == K_BOLLINGER) {
        unit_block(pl, g, t0, t1);
        return;
    }
    int64_t g0 = 4 * g, g1 = g0 + 4 < pl->n_units ? g0 + 4 : pl->n_units;
    unit *u = &pl->units[g0];
    /* The first bar every unit of the group computes with its steady formula. */
    int64_t steady = 0;
    for (int64_t q = 0; q < g1 - g0; q++) {
        int64_t s0 = pl->kind == K_SMA ? u[q].w : pl->kind == K_EMA ? 1 : u[q].w + 1;
        steady = s0 > steady ? s0 : steady;
    }
    int64_t mid = g1 - g0 < 4 ? t1 : steady < t0 ? t0 : steady > t1 ? t1 : steady;
    if (mid > t0)
        for (int64_t q = g0; q < g1; q++)
            unit_block(pl, q, t0, mid);
    if (mid >= t1)
        return;
#ifdef HAVE_AVX2_MASKS
    if (pl->avx2) {
        if (pl->kind == K_SMA)
            units4_sma_avx2(pl, u, g0, t0, mid, t1);
        else if (pl->kind == K_EMA)
            units4_ema_avx2(pl, u, g0, t0, mid, t1);
        else
            units4_rsi_avx2(pl, u, g0, t0, mid, t1);
        return;
    }
#endif
    if (pl->kind == K_SMA)
        units4_sma(pl, u, g0, t0, mid, t1);
    else if (pl->kind == K_EMA)
        units4_ema(pl, u, g0, t0, mid, t1);
    else
        units4_rsi(pl, u, g0, t0, mid, t1);
}

/* ---- booking ---- */

/* One bar's target want (not HOLD) at close c, bar i: the booking, or with ta the booking with
 * the time-aware figures' hook (stats are then kept). */
static inline __attribute__((always_inline)) void book_bar(tfk_sar *st, tfk_sar_extra *x,
                                                           int64_t *expo, tfk_tacc *ta,
                                                           const tfk_time_in *tin, int want,
                                                           double c, int64_t i)
{
    if (!ta) {
        tfk_book_bar(st, x, expo, want, c);
        return;
    }
    if (want != st->pos)
        tfk_tacc_change(ta, tin, st, x, want, c, i);
    *expo += st->pos != 0;
}

/* Books n bars whose targets are up (+1), down (-1) or neither (HOLD), never both; c[0] is the
 * close of the first, bar i0. See the top of the file. ta_mem, tin: the time-aware figures'
 * hook (stats set), or NULL: a third copy. */
static inline __attribute__((always_inline)) void
book_events_with(tfk_book *b, int stats, tfk_tacc *ta_mem, const tfk_time_in *tin, int64_t i0,
                 const uint64_t *up, const uint64_t *down, const double *c, int64_t n)
{
    tfk_sar st = b->sar;
    tfk_sar_extra xl = b->x, *x = stats ? &xl : NULL;
    int64_t expo = b->exposure;
    tfk_tacc ta_local, *ta = NULL;
    if (ta_mem) {
        ta_local = *ta_mem;
        ta = &ta_local;
    }
    for (int64_t w = 0; w * 64 < n; w++) {
        int64_t base = w * 64, nb = n - base < 64 ? n - base : 64;
        uint64_t all = nb == 64 ? ~(uint64_t)0 : ((uint64_t)1 << nb) - 1;
        uint64_t u = up[w] & all, ev = (u | down[w]) & all;
        if (st.pos != 0 && ev == all) {
            uint64_t flips = (u ^ ((u << 1) | (uint64_t)(st.pos > 0))) & all;
            while (flips) {
                int bit = __builtin_ctzll(flips);
                flips &= flips - 1;
                if (ta)
                    tfk_tacc_change(ta, tin, &st, x, (u >> bit) & 1 ? 1 : -1, c[base + bit],
                                    i0 + base + bit);
                else
                    tfk_sar_flip(&st, x, (u >> bit) & 1 ? 1 : -1, c[base + bit]);
            }
            if (stats)
                expo += nb;
            continue;
        }
        int64_t from = 0; /* bars [from, bit) hold the position */
        while (ev) {
            int bit = __builtin_ctzll(ev);
            ev &= ev - 1;
            if (stats && st.pos != 0)
                expo += bit - from;
            book_bar(&st, x, &expo, ta, tin, (u >> bit) & 1 ? 1 : -1, c[base + bit],
                     i0 + base + bit);
            from = bit + 1;
        }
        if (stats && st.pos != 0)
            expo += nb - from;
    }
    b->sar = st;
    b->x = xl;
    b->exposure = expo;
    if (ta_mem)
        *ta_mem = ta_local;
}

static void book_events(tfk_book *b, int stats, tfk_tacc *ta, const tfk_time_in *tin, int64_t i0,
                        const uint64_t *up, const uint64_t *down, const double *c, int64_t n)
{
    if (ta)
        book_events_with(b, 1, ta, tin, i0, up, down, c, n);
    else if (stats)
        book_events_with(b, 1, NULL, NULL, 0, up, down, c, n);
    else
        book_events_with(b, 0, NULL, NULL, 0, up, down, c, n);
}

/* bollinger's targets from its bitmasks, visiting only the bars where the position changes
 * (the step's branches, in its order, given the position t it holds): up = close below the
 * lower band, down = above the upper band, ge/le = close >= / <= the mean (each false on NaN).
 *   t == 0:  up -> +1, down -> -1;
 *   t == +1: down -> -1, else (not up) ge -> 0;
 *   t == -1: up -> +1, else (not down) le -> 0.
 * Every other bar is HOLD or the target t already holds, which book nothing. */
static inline __attribute__((always_inline)) void
book_bollinger_with(tfk_book *b, int stats, tfk_tacc *ta_mem, const tfk_time_in *tin, int64_t i0,
                    const uint64_t *upm, const uint64_t *downm, const uint64_t *gem,
                    const uint64_t *lem, const double *c, int64_t n)
{
    tfk_sar st = b->sar;
    tfk_sar_extra xl = b->x, *x = stats ? &xl : NULL;
    int64_t expo = b->exposure;
    tfk_tacc ta_local, *ta = NULL;
    if (ta_mem) {
        ta_local = *ta_mem;
        ta = &ta_local;
    }
    for (int64_t w = 0; w * 64 < n; w++) {
        int64_t base = w * 64, nb = n - base < 64 ? n - base : 64;
        uint64_t all = nb == 64 ? ~(uint64_t)0 : ((uint64_t)1 << nb) - 1;
        uint64_t u = upm[w], d = downm[w], g = gem[w], l = lem[w], rest = all;
        int64_t from = 0;
        for (;;) {
            uint64_t ch = st.pos == 0 ? (u | d) : st.pos > 0 ? (~u & (d | g)) : (u | (~d & l));
            ch &= rest;
            if (!ch)
                break;
            int bit = __builtin_ctzll(ch);
            if (stats && st.pos != 0)
                expo += bit - from;
            int want = st.pos == 0  ? ((u >> bit) & 1 ? 1 : -1)
                       : st.pos > 0 ? ((d >> bit) & 1 ? -1 : 0)
                                    : ((u >> bit) & 1 ? 1 : 0);
            book_bar(&st, x, &expo, ta, tin, want, c[base + bit], i0 + base + bit);
            from = bit + 1;
            rest = from < 64 ? all & (~(uint64_t)0 << from) : 0;
        }
        if (stats && st.pos != 0)
            expo += nb - from;
    }
    b->sar = st;
    b->x = xl;
    b->exposure = expo;
    if (ta_mem)
        *ta_mem = ta_local;
}

/* out = the n bits of in starting at bit off. */
static void shift_bits(const uint64_t *in, int64_t off, int64_t n, uint64_t *out)
{
    int64_t w0 = off / 64, sh = off % 64;
    for (int64_t q = 0; q * 64 < n; q++) {
        uint64_t lo = in[w0 + q] >> sh;
        uint64_t hi = sh && (w0 + q + 1) * 64 < off + n ? in[w0 + q + 1] << (64 - sh) : 0;
        out[q] = lo | hi;
    }
}

/* One combo over the block [t0, t1); masks: this thread's [4][W] words. */
static void combo_block(const fplan *pl, int64_t j, int64_t t0, int64_t t1, uint64_t *masks)
{
    const double *p = pl->params + j * pl->k;
    const int64_t *ui = pl->uidx + 2 * j;
    tfk_book *b = &pl->books[j];
    tfk_tacc *ta = pl->tacc ? &pl->tacc[j] : NULL;
    /* The first bar with a target: slow-1, donchian's w, rsi's period, bollinger's w-1. */
    int64_t first;
    switch (pl->kind) {
    case K_SMA:
    case K_EMA:
        first = (int64_t)p[1] - 1;
        break;
    case K_DONCHIAN:
    case K_RSI:
        first = (int64_t)p[0];
        break;
    default:
        first = (int64_t)p[0] - 1;
        break;
    }
    int64_t lo = first > t0 ? first : t0;
    if (lo >= t1)
        return;
    int64_t n = t1 - lo, off = lo - t0;
    uint64_t *up = masks, *down = masks + pl->W, *junk = masks + 2 * pl->W;
    const double *c = pl->close + lo;
    switch (pl->kind) {
    case K_SMA:
    case K_EMA:
        pl->cmp(row(pl, ui[0], 0) + off, row(pl, ui[1], 0) + off, n, up, down);
        book_events(b, pl->stats, ta, pl->tin, lo, up, down, c, n);
        break;
    case K_RSI: /* up: rsi < lower, down: rsi > upper */
        thresh(pl, row(pl, ui[0], 0) + off, row(pl, ui[0], 0) + off, n, p[1], p[2], up, down);
        book_events(b, pl->stats, ta, pl->tin, lo, up, down, c, n);
        break;
    case K_DONCHIAN: /* up: U > w, down: D > w */
        beyond(pl, drow(pl, 0) + off, drow(pl, 1) + off, n, (int32_t)p[0], up, down);
        book_events(b, pl->stats, ta, pl->tin, lo, up, down, c, n);
        break;
    case K_BOLLINGER: {
        const double *m = row(pl, ui[0], 0) + off, *sd = row(pl, ui[0], 1) + off;
        bands(pl, c, m, sd, n, p[1], up, down);
        /* ge/le of the unit, shifted to start at bar lo (off bars into the block). */
        const uint64_t *ge = pl->umask + ui[0] * 2 * pl->W, *le = ge + pl->W;
        uint64_t *ge_s = masks + 3 * pl->W, *le_s = junk;
        shift_bits(ge, off, n, ge_s);
        shift_bits(le, off, n, le_s);
        if (ta)
            book_bollinger_with(b, 1, ta, pl->tin, lo, up, down, ge_s, le_s, c, n);
        else if (pl->stats)
            book_bollinger_with(b, 1, NULL, NULL, 0, up, down, ge_s, le_s, c, n);
        else
            book_bollinger_with(b, 0, NULL, NULL, 0, up, down, ge_s, le_s, c, n);
        break;
    }
    }
}

/* ---- threads ---- */

/* Runs one slice's plan, block by block: its units, then its combos. */
static void *plan_run(void *arg)
{
    fplan *pl = arg;
    int64_t n_items = pl->kind == K_DONCHIAN    ? 1
                      : pl->kind == K_BOLLINGER ? pl->n_units
                                                : (pl->n_units + 3) / 4;
    for (int64_t blk = 0; blk < pl->n_blocks; blk++) {
        int64_t t0 = blk * pl->B, t1 = t0 + pl->B < pl->n_bars ? t0 + pl->B : pl->n_bars;
        for (long long g; (g = atomic_fetch_add(&pl->next[2 * blk], 1)) < n_items;)
            if (!cancelled(pl))
                group_block(pl, g, t0, t1);
        for (long long j; (j = atomic_fetch_add(&pl->next[2 * blk + 1], 1)) < pl->n;) {
            if (cancelled(pl))
                continue;
            combo_block(pl, j, t0, t1, pl->masks);
            if (pl->progress)
                __atomic_fetch_add(&pl->progress->done, 1, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

/* ---- the plan ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t find(const int64_t *v, int64_t n, int64_t want)
{
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (v[mid] < want)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Distinct unit lengths (the params columns in cols[0..n_cols)), each combo's unit indices. */
static int plan_units(fplan *pl, const int *cols, int n_cols)
{
    int64_t cand = pl->n * n_cols;
    int64_t *len = malloc(sizeof(int64_t) * (size_t)(cand ? cand : 1));
    pl->uidx = calloc((size_t)(2 * pl->n), sizeof(int64_t));
    if (!len || !pl->uidx) {
        free(len);
        return TF_E_NOMEM;
    }
    for (int64_t j = 0; j < pl->n; j++)
        for (int q = 0; q < n_cols; q++)
            len[j * n_cols + q] = (int64_t)pl->params[j * pl->k + cols[q]];
    qsort(len, (size_t)cand, sizeof(int64_t), cmp_i64);
    int64_t m = 0;
    for (int64_t i = 0; i < cand; i++)
        if (m == 0 || len[m - 1] != len[i])
            len[m++] = len[i];
    for (int64_t j = 0; j < pl->n; j++)
        for (int q = 0; q < n_cols; q++)
            pl->uidx[2 * j + q] = find(len, m, (int64_t)pl->params[j * pl->k + cols[q]]);
    pl->units = calloc((size_t)m, sizeof(unit));
    if (!pl->units) {
        free(len);
        return TF_E_NOMEM;
    }
    pl->n_units = m;
    for (int64_t u = 0; u < m; u++) {
        pl->units[u].w = len[u];
        pl->units[u].a = 2.0 / ((double)len[u] + 1.0);
    }
    free(len);
    return 0;
}

/* Bars per block: the block's shared rows (8 bytes a bar each) take about half the L2, so the
 * rows a combo reads stay in cache while the others stream by; a power of two in 1,024 ..
 * 8,192 (smaller blocks cost more per-block overhead than the cache saves). Measured on a 1 MiB
 * L2 (Zen 5, one thread, 1,000 sma_cross combos over 70 windows): 1,024 bars 44 ms, 2,048 51,
 * 4,096 61; rsi and bollinger within noise from 512 to 8,192. Results never depend on it. */
static int64_t block_for(const fplan *pl)
{
    int64_t rows = (pl->kind == K_DONCHIAN ? 1 : pl->n_units) * pl->rows_per_unit;
    double want = (double)tfk_sweep_block_bars() * 512.0 / 2.0 / (8.0 * (double)rows);
    int64_t B = 1024;
    while (B < 8192 && (double)(2 * B) <= want)
        B *= 2;
    return B;
}

/* One slice's plan (n combos from params, results into out), before allocating: 0 or
 * TF_E_NOMEM; *bytes: the working memory it will hold. */
static int plan_init(fplan *pl, const tf_strategy_def *def, const int *cols, int n_cols,
                     const double *close, int64_t n_bars, const double *params, int64_t n,
                     const tfs_fast_opts *fo, tfk_book *out, double *bytes)
{
    pl->close = close;
    pl->n_bars = n_bars;
    pl->params = params;
    pl->n = n;
    pl->k = def->n_params;
    pl->books = out;
    pl->stats = fo->stats;
    pl->tin = fo->tin;
    pl->cmp = fo->cmp;
    pl->avx2 = fo->avx2;
    pl->progress = fo->progress;
    pl->last_nan = -1;
    pl->rows_per_unit = pl->kind == K_BOLLINGER || pl->kind == K_DONCHIAN ? 2 : 1;
    int rc = plan_units(pl, cols, n_cols);
    if (rc)
        return rc;
    pl->B = block_for(pl);
    pl->n_blocks = (n_bars + pl->B - 1) / pl->B;
    pl->W = pl->B / 64 + 1;
    if (pl->kind == K_DONCHIAN)
        pl->w_max = pl->units[pl->n_units - 1].w;
    int64_t row_units = pl->kind == K_DONCHIAN ? 1 : pl->n_units;
    *bytes = 8.0 * (double)(row_units * pl->rows_per_unit) * (double)pl->B +
             (double)pl->n_units * sizeof(unit) + 16.0 * (double)pl->n + 32.0 * (double)pl->W +
             16.0 * (double)pl->n_blocks +
             (pl->kind == K_BOLLINGER ? 16.0 * (double)(pl->n_units * pl->W) : 0.0) +
             (pl->kind == K_DONCHIAN ? 16.0 * (double)(pl->w_max + 2) : 0.0);
    return 0;
}

static int plan_alloc(fplan *pl)
{
    int64_t row_units = pl->kind == K_DONCHIAN ? 1 : pl->n_units;
    pl->rows = malloc(sizeof(double) * (size_t)(row_units * pl->rows_per_unit * pl->B));
    pl->next = malloc(sizeof(atomic_llong) * 2 * (size_t)pl->n_blocks);
    pl->masks = malloc(sizeof(uint64_t) * 4 * (size_t)pl->W);
    if (!pl->rows || !pl->next || !pl->masks)
        return TF_E_NOMEM;
    if (pl->kind == K_BOLLINGER &&
        !(pl->umask = malloc(sizeof(uint64_t) * 2 * (size_t)(pl->n_units * pl->W))))
        return TF_E_NOMEM;
    if (pl->kind == K_DONCHIAN) {
        pl->hi.cap = pl->lo.cap = pl->w_max + 2;
        pl->hi.idx = malloc(sizeof(int64_t) * (size_t)pl->hi.cap);
        pl->lo.idx = malloc(sizeof(int64_t) * (size_t)pl->lo.cap);
        if (!pl->hi.idx || !pl->lo.idx)
            return TF_E_NOMEM;
    }
    for (int64_t i = 0; i < 2 * pl->n_blocks; i++)
        atomic_init(&pl->next[i], 0);
    return 0;
}

static void plan_free(fplan *pl)
{
    free(pl->hi.idx);
    free(pl->lo.idx);
    free(pl->next);
    free(pl->rows);
    free(pl->umask);
    free(pl->masks);
    free(pl->units);
    free(pl->uidx);
}

/* Threads take contiguous slices of the distinct combos (sorted, so a slice's combos share most
 * of their lines) and each runs its slice's plan alone: no barrier, no waiting on a thread the
 * machine has descheduled; lines two slices both need are computed by both (the same bits). */
int tfs_fast_sweep(const tf_strategy_def *def, const double *close, int64_t n_bars,
                   const double *params, int64_t n, const tfs_fast_opts *fo, tfk_book *out)
{
    static const int cols_cross[] = {0, 1}, cols_one[] = {0};
    const int *cols;
    int n_cols;
    enum kind kind;
    if (def == &tfs_sma_cross)
        kind = K_SMA, cols = cols_cross, n_cols = 2;
    else if (def == &tfs_ema_cross)
        kind = K_EMA, cols = cols_cross, n_cols = 2;
    else if (def == &tfs_rsi)
        kind = K_RSI, cols = cols_one, n_cols = 1;
    else if (def == &tfs_bollinger)
        kind = K_BOLLINGER, cols = cols_one, n_cols = 1;
    else if (def == &tfs_donchian)
        kind = K_DONCHIAN, cols = cols_one, n_cols = 1;
    else
        return -1;
    for (int64_t j = 0; j < n; j++) {
        tfk_book_start(&out[j], fo->fee);
        if (fo->tacc)
            fo->tacc[j] = tfk_tacc_start();
    }
    if (n_bars == 0 || n == 0)
        return 0;

    int nt = fo->nt < 1 ? 1 : fo->nt > n ? (int)n : fo->nt;
    fplan *pls = calloc((size_t)nt, sizeof(fplan));
    if (!pls)
        return TF_E_NOMEM;
    int rc = 0;
    double bytes = 0.0;
    int64_t total = 0;
    for (int t = 0; t < nt && !rc; t++) {
        int64_t j0 = n * t / nt, j1 = n * (t + 1) / nt;
        double b = 0.0;
        pls[t].kind = kind;
        rc = plan_init(&pls[t], def, cols, n_cols, close, n_bars, params + j0 * def->n_params,
                       j1 - j0, fo, out + j0, &b);
        pls[t].tacc = fo->tacc ? fo->tacc + j0 : NULL;
        bytes += b;
        total += (j1 - j0) * pls[t].n_blocks;
    }
    if (!rc && fo->max_bytes && bytes > (double)fo->max_bytes)
        rc = TF_E_LIMIT;
    for (int t = 0; t < nt && !rc; t++)
        rc = plan_alloc(&pls[t]);
    if (!rc) {
        if (fo->progress)
            __atomic_store_n(&fo->progress->total, total, __ATOMIC_RELAXED);
        pthread_t tid[TF_MAX_THREADS];
        char started[TF_MAX_THREADS] = {0};
        for (int t = 1; t < nt; t++)
            started[t] = pthread_create(&tid[t], NULL, plan_run, &pls[t]) == 0;
        plan_run(&pls[0]);
        for (int t = 1; t < nt; t++) {
            if (started[t])
                pthread_join(tid[t], NULL);
            else
                plan_run(&pls[t]); /* a thread that could not start: its slice runs here */
        }
        if (cancelled(&pls[0]))
            rc = TF_E_CANCELLED;
    }
    for (int t = 0; t < nt; t++)
        plan_free(&pls[t]);
    free(pls);
    return rc;
}

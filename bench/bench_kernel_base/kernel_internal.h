/* Kernel internals shared by the kernel's translation units. Not installed. */
#ifndef TF_KERNEL_INTERNAL_H
#define TF_KERNEL_INTERNAL_H

#include <stdint.h>

#include "tollfree/kernel.h"

/* WMA(x, L)[i] for output bars i in [lo, hi), docs/definition.md section 3: a direct windowed sum,
 * oldest first, from 0.0, divided by L*(L+1)/2. Requires lo >= L-1 (no warm-up handling here)
 * and x readable over [lo-L+1, hi). out[i - lo] receives bar i. SIMD versions put consecutive
 * output bars in lanes, each lane running exactly the scalar sequence of operations. */
typedef void (*tf_wma_fn)(const double *x, int64_t L, int64_t lo, int64_t hi, double *out);

void tf_wma_scalar(const double *x, int64_t L, int64_t lo, int64_t hi, double *out);
void tf_wma_sse2(const double *x, int64_t L, int64_t lo, int64_t hi, double *out);
void tf_wma_avx2(const double *x, int64_t L, int64_t lo, int64_t hi, double *out);
void tf_wma_avx512(const double *x, int64_t L, int64_t lo, int64_t hi, double *out);

/* Element-wise first-stage combinations (spec section 4), per ISA:
 * raw[i] = 2.0*half[i] - full[i];  inner[i] = 3.0*w3[i] - w2[i] - wp[i]. */
typedef void (*tf_raw_fn)(const double *half, const double *full, int64_t n, double *raw);
typedef void (*tf_inner_fn)(const double *w3, const double *w2, const double *wp, int64_t n,
                            double *inner);

void tf_raw_scalar(const double *half, const double *full, int64_t n, double *raw);
void tf_raw_sse2(const double *half, const double *full, int64_t n, double *raw);
void tf_raw_avx2(const double *half, const double *full, int64_t n, double *raw);
void tf_raw_avx512(const double *half, const double *full, int64_t n, double *raw);
void tf_inner_scalar(const double *w3, const double *w2, const double *wp, int64_t n,
                     double *inner);
void tf_inner_sse2(const double *w3, const double *w2, const double *wp, int64_t n, double *inner);
void tf_inner_avx2(const double *w3, const double *w2, const double *wp, int64_t n, double *inner);
void tf_inner_avx512(const double *w3, const double *w2, const double *wp, int64_t n,
                     double *inner);

/* The routines of one ISA path. */
typedef struct tf_isa_ops {
    tf_wma_fn wma;
    tf_raw_fn raw;
    tf_inner_fn inner;
} tf_isa_ops;

/* The routines for an ISA (AUTO resolves to the best); 0, or TF_E_ISA_UNAVAILABLE. */
int tf_isa_ops_for(tf_isa isa, tf_isa_ops *ops);

/* The spec's denominator, (double)(L*(L+1)) / 2.0. */
static inline double tf_wma_denom(int64_t L)
{
    return (double)(L * (L + 1)) / 2.0;
}

/* The fast sweep, optionally reading and filling a tf_series' first-stage cache. */
int tf_sweep_impl(const double *close, int64_t n_bars, const int64_t *params, int64_t n_combos,
                  double *pnl, int64_t *trades, const tf_sweep_opts *opts, tf_series *series);

/* For each distinct length len[u]: full[u] = the cached whole-series row, or NULL. Rows not
 * cached get a fresh buffer while the cache budget allows (listed in fill_idx/fill_buf, *n_fill);
 * the caller computes them and hands them to tf_series_publish, which keeps them (or frees them
 * if another sweep published the same length first, or if ok is 0). */
int tf_series_reserve(tf_series *s, const int64_t *len, int64_t n_len, const double **full,
                      int64_t *fill_idx, double **fill_buf, int64_t *n_fill);
void tf_series_publish(tf_series *s, const int64_t *len, const int64_t *fill_idx, double **fill_buf,
                       int64_t n_fill, int ok);

/* Stop-and-reverse state of one combo (spec section 5). */
typedef struct tf_sar {
    int64_t pos;
    double entry;
    double pnl;
    int64_t trades;
} tf_sar;

#define TF_FEE 0.09

/* One bar of the SAR loop, exactly as the spec writes it. Used by the reference and streaming. */
static inline void tf_sar_step(tf_sar *st, double f, double s, double c)
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
            st->pnl += (double)st->pos * (c - st->entry) / st->entry * 100.0 - TF_FEE;
            st->trades += 1;
        }
        st->pos = want;
        st->entry = c;
    }
}

/* The same bar without branches on the data (the signal flips every few bars, so branches
 * mispredict): every candidate value is computed with the same IEEE operations as above and
 * then selected, so the bits are the same. NaN lines give gt = lt = 0, hence want = 0. */
static inline void tf_sar_step_select(tf_sar *st, double f, double s, double c)
{
    int64_t want = (int64_t)(f > s) - (int64_t)(f < s);
    int64_t flip = (want != 0) & (want != st->pos);
    int64_t book = flip & (st->pos != 0);
    double booked = st->pnl + ((double)st->pos * (c - st->entry) / st->entry * 100.0 - TF_FEE);
    st->pnl = book ? booked : st->pnl;
    st->trades += book;
    st->entry = flip ? c : st->entry;
    st->pos = flip ? want : st->pos;
}

#endif

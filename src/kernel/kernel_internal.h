/* Kernel internals shared by the kernel's translation units. Not installed. */
#ifndef TF_KERNEL_INTERNAL_H
#define TF_KERNEL_INTERNAL_H

#include <stdint.h>

#include "tollfree/kernel.h"

/* WMA(x, L)[i] for output bars i in [lo, hi), spec/kernel.md section 3: a direct windowed sum,
 * oldest first, from 0.0, divided by L*(L+1)/2. Requires lo >= L-1 (no warm-up handling here)
 * and x readable over [lo-L+1, hi). out[i - lo] receives bar i. SIMD versions put consecutive
 * output bars in lanes, each lane running exactly the scalar sequence of operations. */
typedef void (*tf_wma_fn)(const double *x, int64_t L, int64_t lo, int64_t hi, double *out);

void tf_wma_scalar(const double *x, int64_t L, int64_t lo, int64_t hi, double *out);
void tf_wma_sse2(const double *x, int64_t L, int64_t lo, int64_t hi, double *out);
void tf_wma_avx2(const double *x, int64_t L, int64_t lo, int64_t hi, double *out);
void tf_wma_avx512(const double *x, int64_t L, int64_t lo, int64_t hi, double *out);

/* The resolved WMA routine for an ISA (never AUTO); NULL if unsupported. */
tf_wma_fn tf_wma_for(tf_isa isa);

/* The spec's denominator, (double)(L*(L+1)) / 2.0. */
static inline double tf_wma_denom(int64_t L)
{
    return (double)(L * (L + 1)) / 2.0;
}

/* Stop-and-reverse state of one combo (spec section 5). */
typedef struct tf_sar {
    int64_t pos;
    double entry;
    double pnl;
    int64_t trades;
} tf_sar;

#define TF_FEE 0.09

/* One bar of the SAR loop, exactly as the spec writes it. */
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

#endif

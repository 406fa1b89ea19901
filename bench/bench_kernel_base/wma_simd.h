/* The SIMD WMA, written once and instantiated per ISA (wma_sse2.c, wma_avx2.c, wma_avx512.c).
 *
 * Lanes = VLANES consecutive output bars; VUNROLL independent vectors are in flight to cover the
 * add latency. Each lane computes s = 0.0; s = s + x*w (a mul then an add, never fused: kernel
 * files are built with -ffp-contract=off) over its window oldest first, then s / denom: exactly
 * the scalar sequence of IEEE operations, so every path gives the same bits.
 *
 * The including file defines: VFN (function name), VRAW and VINNER (the element-wise
 * combinations of the first stage, below), VLANES, VUNROLL, vec (type), vload, vmul,
 * vadd, vset1, vzero, vdiv, vstore. */
#include <immintrin.h>

#include "kernel_internal.h"

/* The accumulators must live in registers: without a full unroll GCC keeps acc[] on the stack
 * and the loop runs 3x slower (measured: 10 vs 34 multiply-adds per ns with AVX-512). */
#define UNROLL_ALL _Pragma("GCC unroll 16")

void VFN(const double *x, int64_t L, int64_t lo, int64_t hi, double *out)
{
    const vec denom = vset1(tf_wma_denom(L));
    int64_t i = lo;
    for (; i + VLANES * VUNROLL <= hi; i += VLANES * VUNROLL) {
        vec acc[VUNROLL];
        UNROLL_ALL
        for (int u = 0; u < VUNROLL; u++)
            acc[u] = vzero();
        const double *w = x + i - L + 1;
        for (int64_t k = 0; k < L; k++) {
            const vec wk = vset1((double)(k + 1));
            UNROLL_ALL
            for (int u = 0; u < VUNROLL; u++)
                acc[u] = vadd(acc[u], vmul(vload(w + k + u * VLANES), wk));
        }
        UNROLL_ALL
        for (int u = 0; u < VUNROLL; u++)
            vstore(out + (i - lo) + u * VLANES, vdiv(acc[u], denom));
    }
    for (; i + VLANES <= hi; i += VLANES) {
        vec acc = vzero();
        const double *w = x + i - L + 1;
        for (int64_t k = 0; k < L; k++)
            acc = vadd(acc, vmul(vload(w + k), vset1((double)(k + 1))));
        vstore(out + (i - lo), vdiv(acc, denom));
    }
    if (i < hi)
        tf_wma_scalar(x, L, i, hi, out + (i - lo));
}

/* raw[i] = 2.0 * half[i] - full[i], element-wise (the same two IEEE operations per element). */
void VRAW(const double *half, const double *full, int64_t n, double *raw)
{
    const vec two = vset1(2.0);
    int64_t i = 0;
    for (; i + VLANES <= n; i += VLANES)
        vstore(raw + i, vsub(vmul(two, vload(half + i)), vload(full + i)));
    for (; i < n; i++)
        raw[i] = 2.0 * half[i] - full[i];
}

/* inner[i] = 3.0 * w3[i] - w2[i] - wp[i], left to right. */
void VINNER(const double *w3, const double *w2, const double *wp, int64_t n, double *inner)
{
    const vec three = vset1(3.0);
    int64_t i = 0;
    for (; i + VLANES <= n; i += VLANES)
        vstore(inner + i, vsub(vsub(vmul(three, vload(w3 + i)), vload(w2 + i)), vload(wp + i)));
    for (; i < n; i++)
        inner[i] = 3.0 * w3[i] - w2[i] - wp[i];
}

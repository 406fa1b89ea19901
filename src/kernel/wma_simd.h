/* The SIMD WMA, written once and instantiated per ISA (wma_sse2.c, wma_avx2.c, wma_avx512.c).
 *
 * Lanes = VLANES consecutive output bars; VUNROLL independent vectors are in flight to cover the
 * add latency. Each lane computes s = 0.0; s = s + x*w (a mul then an add, never fused: kernel
 * files are built with -ffp-contract=off) over its window oldest first, then s / denom: exactly
 * the scalar sequence of IEEE operations, so every path gives the same bits.
 *
 * The including file defines: VFN (function name), VLANES, VUNROLL, vec (type), vload, vmul,
 * vadd, vset1, vzero, vdiv, vstore. */
#include <immintrin.h>

#include "kernel_internal.h"

void VFN(const double *x, int64_t L, int64_t lo, int64_t hi, double *out)
{
    const vec denom = vset1(tf_wma_denom(L));
    int64_t i = lo;
    for (; i + VLANES * VUNROLL <= hi; i += VLANES * VUNROLL) {
        vec acc[VUNROLL];
        for (int u = 0; u < VUNROLL; u++)
            acc[u] = vzero();
        const double *w = x + i - L + 1;
        for (int64_t k = 0; k < L; k++) {
            const vec wk = vset1((double)(k + 1));
            for (int u = 0; u < VUNROLL; u++)
                acc[u] = vadd(acc[u], vmul(vload(w + k + u * VLANES), wk));
        }
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

/* The SIMD WMA, written once and instantiated per ISA (wma_sse2.c, wma_avx2.c, wma_avx512.c).
 *
 * Lanes = VLANES consecutive output bars; VUNROLL independent vectors are in flight to cover the
 * add latency. Each lane computes s = 0.0; s = s + x*w (a mul then an add, never fused: kernel
 * files are built with -ffp-contract=off) over its window oldest first, then s / denom: exactly
 * the scalar sequence of IEEE operations, so every path gives the same bits.
 *
 * The including file defines: VFN (function name), VRAW and VINNER (the element-wise
 * combinations of the first stage, below), VLANES, VUNROLL, vec (type), vload, vmul,
 * vadd, vset1, vzero, vdiv, vstore; VMULTI (the one-pass first stage) and VCMP (SAR signal
 * masks) with vgt_bits, vlt_bits (a lane mask of an ordered compare). */
#include <immintrin.h>

#include "kernel_internal.h"

/* The accumulators must live in registers: without a full unroll GCC keeps acc[] on the stack
 * and the loop runs 3x slower (measured: 10 vs 34 multiply-adds per ns with AVX-512). */
#define UNROLL_ALL _Pragma("GCC unroll 16")

void VFN(const double *x, int64_t L, int64_t lo, int64_t hi, double *out)
{
    const vec denom = vset1(tfk_wma_denom(L));
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
        tfk_wma_scalar(x, L, i, hi, out + (i - lo));
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

/* Every first-stage length from one running sum (kernel_internal.h, tfk_wma_multi_fn). Lanes are
 * VLANES * VUNROLL consecutive start bars s; at step m each lane adds x[s+m-1] * m, so at each
 * wanted length it holds the spec's numerator for bar s+len-1, which is divided and stored. */
#define GROUP (VLANES * VUNROLL)

/* The lanes of one group at one length: all in [lo, hi) straight to the row, else only those. */
static inline void multi_emit(const vec *acc, double denom, int64_t t, int64_t lo, int64_t hi,
                              double *row)
{
    const vec d = vset1(denom);
    if (t >= lo && t + GROUP <= hi) {
        UNROLL_ALL
        for (int u = 0; u < VUNROLL; u++)
            vstore(row + (t - lo) + u * VLANES, vdiv(acc[u], d));
        return;
    }
    double tmp[GROUP];
    UNROLL_ALL
    for (int u = 0; u < VUNROLL; u++)
        vstore(tmp + u * VLANES, vdiv(acc[u], d));
    for (int64_t i = 0; i < GROUP; i++)
        if (t + i >= lo && t + i < hi)
            row[t + i - lo] = tmp[i];
}

void VMULTI(const double *x, int64_t n_x, const int64_t *len, const double *denom, int64_t n_len,
            int64_t lo, int64_t hi, double *const *out)
{
    if (n_len == 0 || lo >= hi)
        return;
    const int64_t longest = len[n_len - 1];
    int64_t s = lo - longest + 1 > 0 ? lo - longest + 1 : 0;
    for (; s < hi; s += GROUP) {
        /* The first lane needs steps up to mmax; later lanes may read GROUP-1 bars further. */
        int64_t mmax = hi - s < longest ? hi - s : longest;
        if (s + GROUP - 1 + mmax - 1 >= n_x) {
            tfk_wma_multi_starts(x, len, denom, n_len, lo, hi, out, s,
                                 s + GROUP < hi ? s + GROUP : hi);
            continue;
        }
        vec acc[VUNROLL];
        UNROLL_ALL
        for (int u = 0; u < VUNROLL; u++)
            acc[u] = vzero();
        const double *w = x + s;
        int64_t m = 0;
        for (int64_t k = 0; k < n_len && len[k] <= mmax; k++) {
            for (; m < len[k]; m++) {
                const vec wk = vset1((double)(m + 1));
                UNROLL_ALL
                for (int u = 0; u < VUNROLL; u++)
                    acc[u] = vadd(acc[u], vmul(vload(w + m + u * VLANES), wk));
            }
            if (s + len[k] - 1 + GROUP > lo)
                multi_emit(acc, denom[k], s + len[k] - 1, lo, hi, out[k]);
        }
    }
}

/* Signal bitmasks, VLANES bars per compare (ordered compares: NaN gives 0, as in the spec). */
void VCMP(const double *f, const double *s, int64_t n, uint64_t *gt, uint64_t *lt)
{
    int64_t w = 0;
    for (; (w + 1) * 64 <= n; w++) {
        uint64_t g = 0, l = 0;
        UNROLL_ALL
        for (int b = 0; b < 64; b += VLANES) {
            const vec a = vload(f + w * 64 + b), c = vload(s + w * 64 + b);
            g |= (uint64_t)vgt_bits(a, c) << b;
            l |= (uint64_t)vlt_bits(a, c) << b;
        }
        gt[w] = g;
        lt[w] = l;
    }
    if (w * 64 < n)
        tfk_cmp_scalar(f + w * 64, s + w * 64, n - w * 64, gt + w, lt + w);
}

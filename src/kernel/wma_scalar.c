#include "kernel_internal.h"

void tfk_wma_scalar(const double *x, int64_t L, int64_t lo, int64_t hi, double *out)
{
    double denom = tfk_wma_denom(L);
    for (int64_t i = lo; i < hi; i++) {
        const double *w = x + i - L + 1;
        double s = 0.0;
        for (int64_t k = 0; k < L; k++)
            s += w[k] * (double)(k + 1);
        out[i - lo] = s / denom;
    }
}

void tfk_raw_scalar(const double *half, const double *full, int64_t n, double *raw)
{
    for (int64_t i = 0; i < n; i++)
        raw[i] = 2.0 * half[i] - full[i];
}

void tfk_inner_scalar(const double *w3, const double *w2, const double *wp, int64_t n,
                      double *inner)
{
    for (int64_t i = 0; i < n; i++)
        inner[i] = 3.0 * w3[i] - w2[i] - wp[i];
}

void tfk_wma_multi_starts(const double *x, const int64_t *len, const double *denom, int64_t n_len,
                          int64_t lo, int64_t hi, double *const *out, int64_t s_lo, int64_t s_hi)
{
    for (int64_t st = s_lo; st < s_hi; st++) {
        double s = 0.0;
        int64_t m = 0;
        /* Lengths whose bar st+len-1 falls at or after hi are not wanted (nor read). */
        for (int64_t k = 0; k < n_len && st + len[k] - 1 < hi; k++) {
            for (; m < len[k]; m++)
                s += x[st + m] * (double)(m + 1);
            if (st + len[k] - 1 >= lo)
                out[k][st + len[k] - 1 - lo] = s / denom[k];
        }
    }
}

void tfk_wma_multi_scalar(const double *x, int64_t n_x, const int64_t *len, const double *denom,
                          int64_t n_len, int64_t lo, int64_t hi, double *const *out)
{
    (void)n_x;
    if (n_len == 0 || lo >= hi)
        return;
    int64_t first = lo - len[n_len - 1] + 1;
    tfk_wma_multi_starts(x, len, denom, n_len, lo, hi, out, first > 0 ? first : 0, hi);
}

void tfk_cmp_scalar(const double *f, const double *s, int64_t n, uint64_t *gt, uint64_t *lt)
{
    for (int64_t w = 0; w * 64 < n; w++) {
        uint64_t g = 0, l = 0;
        int64_t end = n - w * 64 < 64 ? n - w * 64 : 64;
        for (int64_t b = 0; b < end; b++) {
            g |= (uint64_t)(f[w * 64 + b] > s[w * 64 + b]) << b;
            l |= (uint64_t)(f[w * 64 + b] < s[w * 64 + b]) << b;
        }
        gt[w] = g;
        lt[w] = l;
    }
}

#include "kernel_internal.h"

void tf_wma_scalar(const double *x, int64_t L, int64_t lo, int64_t hi, double *out)
{
    double denom = tf_wma_denom(L);
    for (int64_t i = lo; i < hi; i++) {
        const double *w = x + i - L + 1;
        double s = 0.0;
        for (int64_t k = 0; k < L; k++)
            s += w[k] * (double)(k + 1);
        out[i - lo] = s / denom;
    }
}

void tf_raw_scalar(const double *half, const double *full, int64_t n, double *raw)
{
    for (int64_t i = 0; i < n; i++)
        raw[i] = 2.0 * half[i] - full[i];
}

void tf_inner_scalar(const double *w3, const double *w2, const double *wp, int64_t n, double *inner)
{
    for (int64_t i = 0; i < n; i++)
        inner[i] = 3.0 * w3[i] - w2[i] - wp[i];
}

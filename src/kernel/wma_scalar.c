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

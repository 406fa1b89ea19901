/* What the frozen sweep needs besides its own files: the ISA table of that time (the real
 * library answers which paths this CPU runs) and no series cache (the benchmark never uses one). */
#include "kernel_internal.h"

int tf_isa_ops_for(tf_isa isa, tf_isa_ops *ops)
{
    if (isa == TF_ISA_AUTO)
        isa = tf_isa_best();
    if (!tf_isa_supported(isa))
        return TF_E_ISA_UNAVAILABLE;
    switch (isa) {
    case TF_ISA_SCALAR:
        *ops = (tf_isa_ops){tf_wma_scalar, tf_raw_scalar, tf_inner_scalar};
        return 0;
    case TF_ISA_SSE2:
        *ops = (tf_isa_ops){tf_wma_sse2, tf_raw_sse2, tf_inner_sse2};
        return 0;
    case TF_ISA_AVX2:
        *ops = (tf_isa_ops){tf_wma_avx2, tf_raw_avx2, tf_inner_avx2};
        return 0;
    case TF_ISA_AVX512:
        *ops = (tf_isa_ops){tf_wma_avx512, tf_raw_avx512, tf_inner_avx512};
        return 0;
    default:
        return TF_E_ISA_UNAVAILABLE;
    }
}

int tf_series_reserve(tf_series *s, const int64_t *len, int64_t n_len, const double **full,
                      int64_t *fill_idx, double **fill_buf, int64_t *n_fill)
{
    (void)s;
    (void)len;
    (void)fill_idx;
    (void)fill_buf;
    for (int64_t u = 0; u < n_len; u++)
        full[u] = NULL;
    *n_fill = 0;
    return 0;
}

void tf_series_publish(tf_series *s, const int64_t *len, const int64_t *fill_idx, double **fill_buf,
                       int64_t n_fill, int ok)
{
    (void)s;
    (void)len;
    (void)fill_idx;
    (void)fill_buf;
    (void)n_fill;
    (void)ok;
}

/* Runtime ISA detection and the names of the SIMD paths. */
#include <string.h>

#include "kernel_internal.h"

static const char *const names[] = {"auto", "scalar", "sse2", "avx2", "avx512"};

int tf_isa_supported(tf_isa isa)
{
    switch (isa) {
    case TF_ISA_AUTO:
    case TF_ISA_SCALAR:
        return 1;
#if defined(__x86_64__)
    case TF_ISA_SSE2:
        return 1; /* part of x86-64 */
    case TF_ISA_AVX2:
        return __builtin_cpu_supports("avx2");
    case TF_ISA_AVX512:
        return __builtin_cpu_supports("avx512f");
#endif
    default:
        return 0;
    }
}

tf_isa tf_isa_best(void)
{
    if (tf_isa_supported(TF_ISA_AVX512))
        return TF_ISA_AVX512;
    if (tf_isa_supported(TF_ISA_AVX2))
        return TF_ISA_AVX2;
    if (tf_isa_supported(TF_ISA_SSE2))
        return TF_ISA_SSE2;
    return TF_ISA_SCALAR;
}

const char *tf_isa_name(tf_isa isa)
{
    if ((unsigned)isa < sizeof names / sizeof names[0])
        return names[isa];
    return "unknown";
}

int tf_isa_parse(const char *name, tf_isa *out)
{
    if (!name || !out)
        return TF_E_NULL_ARG;
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!strcmp(name, names[i])) {
            *out = (tf_isa)i;
            return 0;
        }
    }
    return TF_E_INVALID_ARG;
}

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

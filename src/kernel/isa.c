/* Runtime ISA detection and the names of the SIMD paths. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_internal.h"

static const char *const names[] = {"auto", "scalar", "sse2", "avx2", "avx512"};

/* TF_ISA_MAX (scalar|sse2|avx2|avx512) caps what this process treats as present, so an AVX2-only
 * CPU can be simulated on an AVX-512 one. Read once: a path that was supported stays supported
 * for the life of the process (the series cache and the scheduler rely on that). An unset,
 * empty, "auto" or unknown value is no cap; the library never prints, so the CLI reports a bad
 * value (docs/kernel.md). */
static tf_isa isa_cap = TF_ISA_AVX512;
static pthread_once_t isa_cap_once = PTHREAD_ONCE_INIT;

static void read_isa_cap(void)
{
    const char *v = getenv("TF_ISA_MAX");
    tf_isa cap;
    if (v && tf_isa_parse(v, &cap) == 0 && cap != TF_ISA_AUTO)
        isa_cap = cap;
}

static int cpu_has(tf_isa isa)
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

int tf_isa_supported(tf_isa isa)
{
    if (isa == TF_ISA_AUTO)
        return 1;
    pthread_once(&isa_cap_once, read_isa_cap);
    if ((unsigned)isa > (unsigned)isa_cap)
        return 0;
    return cpu_has(isa);
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

int tfk_isa_ops_for(tf_isa isa, tfk_isa_ops *ops)
{
    if (isa == TF_ISA_AUTO)
        isa = tf_isa_best();
    if (!tf_isa_supported(isa))
        return TF_E_ISA_UNAVAILABLE;
    switch (isa) {
    case TF_ISA_SCALAR:
        *ops = (tfk_isa_ops){tfk_wma_scalar, tfk_raw_scalar, tfk_inner_scalar, tfk_wma_multi_scalar,
                             tfk_cmp_scalar};
        return 0;
    case TF_ISA_SSE2:
        *ops = (tfk_isa_ops){tfk_wma_sse2, tfk_raw_sse2, tfk_inner_sse2, tfk_wma_multi_sse2,
                             tfk_cmp_sse2};
        return 0;
    case TF_ISA_AVX2:
        *ops = (tfk_isa_ops){tfk_wma_avx2, tfk_raw_avx2, tfk_inner_avx2, tfk_wma_multi_avx2,
                             tfk_cmp_avx2};
        return 0;
    case TF_ISA_AVX512:
        *ops = (tfk_isa_ops){tfk_wma_avx512, tfk_raw_avx512, tfk_inner_avx512, tfk_wma_multi_avx512,
                             tfk_cmp_avx512};
        return 0;
    default:
        return TF_E_ISA_UNAVAILABLE;
    }
}

/* WMA, avx2 instance of wma_simd.h. */
#define VFN tfk_wma_avx2
#define VRAW tfk_raw_avx2
#define VINNER tfk_inner_avx2
#define VMULTI tfk_wma_multi_avx2
#define VCMP tfk_cmp_avx2
#define VLANES 4
#define VUNROLL 8
#define vec __m256d
#define vload _mm256_loadu_pd
#define vmul _mm256_mul_pd
#define vadd _mm256_add_pd
#define vsub _mm256_sub_pd
#define vset1 _mm256_set1_pd
#define vzero _mm256_setzero_pd
#define vdiv _mm256_div_pd
#define vstore _mm256_storeu_pd
#define vgt_bits(a, b) _mm256_movemask_pd(_mm256_cmp_pd(a, b, _CMP_GT_OQ))
#define vlt_bits(a, b) _mm256_movemask_pd(_mm256_cmp_pd(a, b, _CMP_LT_OQ))
#include "wma_simd.h"

/* WMA, avx512 instance of wma_simd.h. */
#define VFN tfk_wma_avx512
#define VRAW tfk_raw_avx512
#define VINNER tfk_inner_avx512
#define VMULTI tfk_wma_multi_avx512
#define VCMP tfk_cmp_avx512
#define VLANES 8
#define VUNROLL 4
#define vec __m512d
#define vload _mm512_loadu_pd
#define vmul _mm512_mul_pd
#define vadd _mm512_add_pd
#define vsub _mm512_sub_pd
#define vset1 _mm512_set1_pd
#define vzero _mm512_setzero_pd
#define vdiv _mm512_div_pd
#define vstore _mm512_storeu_pd
#define vgt_bits(a, b) _mm512_cmp_pd_mask(a, b, _CMP_GT_OQ)
#define vlt_bits(a, b) _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ)
#include "wma_simd.h"

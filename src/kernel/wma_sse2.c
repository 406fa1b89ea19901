/* WMA, sse2 instance of wma_simd.h. */
#define VFN tfk_wma_sse2
#define VRAW tfk_raw_sse2
#define VINNER tfk_inner_sse2
#define VMULTI tfk_wma_multi_sse2
#define VCMP tfk_cmp_sse2
#define VLANES 2
#define VUNROLL 8
#define vec __m128d
#define vload _mm_loadu_pd
#define vmul _mm_mul_pd
#define vadd _mm_add_pd
#define vsub _mm_sub_pd
#define vset1 _mm_set1_pd
#define vzero _mm_setzero_pd
#define vdiv _mm_div_pd
#define vstore _mm_storeu_pd
#define vgt_bits(a, b) _mm_movemask_pd(_mm_cmpgt_pd(a, b))
#define vlt_bits(a, b) _mm_movemask_pd(_mm_cmplt_pd(a, b))
#include "wma_simd.h"

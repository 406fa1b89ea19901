#include <math.h>

#include "kernel_internal.h"

int tf_params_check(const int64_t *params, int64_t n_combos)
{
    if (n_combos < 0 || n_combos > TF_MAX_COMBOS)
        return TF_E_TOO_MANY_COMBOS;
    if (n_combos > 0 && !params)
        return TF_E_NULL_ARG;
    for (int64_t i = 0; i < n_combos * TF_PARAMS_PER_COMBO; i++) {
        if (params[i] < 1)
            return TF_E_WINDOW_TOO_SHORT;
        if (params[i] > TF_MAX_WINDOW)
            return TF_E_WINDOW_TOO_LONG;
    }
    return 0;
}

/* round(num / den) with ties to even (Python's round), for num >= 0, den > 0. */
static int64_t div_round_even(int64_t num, int64_t den)
{
    int64_t q = num / den, r = num % den;
    if (2 * r > den || (2 * r == den && (q & 1)))
        q++;
    return q;
}

static int64_t at_least_1(int64_t v)
{
    return v < 1 ? 1 : v;
}

int tf_combo_from_length(int64_t L, int64_t out[TF_PARAMS_PER_COMBO])
{
    if (!out)
        return TF_E_NULL_ARG;
    if (L < 1)
        return TF_E_WINDOW_TOO_SHORT;
    if (L > TF_MAX_WINDOW)
        return TF_E_WINDOW_TOO_LONG;
    int64_t half = at_least_1(div_round_even(L, 2));
    /* sqrt(L) is never within 2^-30 of a half-integer for integer L, so llround is exact. */
    out[TF_P_L] = L;
    out[TF_P_HALF] = half;
    out[TF_P_SQ] = at_least_1((int64_t)llround(sqrt((double)L)));
    out[TF_P_P] = half;
    out[TF_P_P3] = at_least_1(div_round_even(half, 3));
    out[TF_P_P2] = at_least_1(div_round_even(half, 2));
    return 0;
}

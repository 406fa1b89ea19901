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

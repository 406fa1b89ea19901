/* tf_strategy_open_with: a caller's strategy definition, checked here, streamed by the kernel. */
#include "strategy_internal.h"
#include "tollfree/error.h"

/* The check is the strategy layer's (def.c), so that the kernel's streaming handle
 * (src/kernel/stream.c) calls nothing above the kernel: the dependency runs one way. */
int tf_strategy_open_with(tf_strategy **out, const tf_strategy_def *def, const double *params)
{
    if (!out || !def || !params)
        return TF_E_NULL_ARG;
    if (tf_strategy_def_check(def, NULL, 0))
        return TF_E_STRATEGY;
    return tfk_stream_open(out, def, params);
}

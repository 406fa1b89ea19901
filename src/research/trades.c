/* Trade lists (research.h, tf_trades_list): one combo stepped from its first bar and booked by
 * the one booking, every trade written down on the way (span.c). */
#include <math.h>
#include <stdlib.h>

#include "common/msg.h"
#include "kernel/book.h"
#include "research/span.h"
#include "tollfree/error.h"
#include "tollfree/research.h"

static int check_args(const tf_strategy_def *def, const double *params, const double *close,
                      int64_t n, double fee, const tf_trade *out, int64_t cap, char *msg,
                      size_t msg_cap)
{
    if (!def || !params || (n > 0 && !close) || (cap > 0 && !out))
        return tfu_msg(TF_E_NULL_ARG, msg, msg_cap, "tf_trades_list: a NULL argument");
    if (n < 0 || n > TF_MAX_BARS || cap < 0)
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap,
                       "tf_trades_list: n_bars %lld (0 .. %lld) or cap %lld < 0", (long long)n,
                       (long long)TF_MAX_BARS, (long long)cap);
    if (!isfinite(fee))
        return tfu_msg(TF_E_INVALID_ARG, msg, msg_cap, "tf_trades_list: the fee %g is not finite",
                       fee);
    char why[512];
    if (tf_strategy_def_check(def, why, sizeof why))
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap, "%s", why);
    return 0;
}

int64_t tf_trades_list(const tf_strategy_def *def, const double *params, const double *close,
                       int64_t n_bars, double fee, tf_trade *out, int64_t cap, tf_stats *stats,
                       char *msg, size_t msg_cap)
{
    int rc = check_args(def, params, close, n_bars, fee, out, cap, msg, msg_cap);
    if (rc)
        return rc;
    size_t bytes = tfk_state_bytes(def, params);
    if (!bytes)
        return tfu_msg(TF_E_STRATEGY, msg, msg_cap,
                       "%s: these parameters ask for more state than "
                       "1 GiB",
                       def->name);
    void *state = aligned_alloc(16, bytes);
    int8_t *t = malloc(n_bars > 0 ? (size_t)n_bars : 1);
    if (!state || !t) {
        free(state);
        free(t);
        return tfu_msg(TF_E_NOMEM, msg, msg_cap, "tf_trades_list: out of memory");
    }
    rc = tfr_targets(def, state, bytes, params, close, n_bars, 1, NULL, t);
    tfr_sink sink = {out, cap, 0};
    tf_stats st;
    if (!rc)
        tfr_book_span(t, close, 0, 0, n_bars, fee, &st, &sink);
    free(state);
    free(t);
    if (rc)
        return tfu_msg(rc, msg, msg_cap, "%s: %s", def->name,
                       rc == TF_E_STRATEGY ? "init refused these parameters, or a step gave a "
                                             "target outside -1, 0, +1, HOLD"
                                           : tf_strerror(rc));
    if (stats)
        *stats = st;
    return sink.n;
}

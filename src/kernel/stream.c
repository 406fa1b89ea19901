/* The streaming kernel: one combo, one bar at a time, bit-identical to the batch sweep.
 *
 * A handle runs a strategy (tf_strategy_def): its step gives the target, the one booking
 * (book.h) books it, exactly as tf_sweep_with does. tf_strategy_open is the HMA/HMA3 def
 * (hma_def.c: seven WMAs over mirrored rings, a step never allocates) with int64 windows. The
 * kernel trusts the def it is handed: checking a caller's def is the strategy layer's
 * (tf_strategy_open_with, src/strategy/stream.c), so the kernel calls nothing above it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/book.h"
#include "kernel_internal.h"

struct tf_strategy {
    const tf_strategy_def *def;
    double *params;
    void *state;
    size_t state_bytes;
    int64_t n; /* bars seen */
    tfk_sar sar;
    tfk_sar_extra extra;
    int64_t exposure; /* bars that ended in a position */
};

/* tf_strategy_open's window check (its error codes are the batch sweep's). */
static int check(const int64_t *p)
{
    if (!p)
        return TF_E_NULL_ARG;
    for (int k = 0; k < TF_PARAMS_PER_COMBO; k++) {
        if (p[k] < 1)
            return TF_E_WINDOW_TOO_SHORT;
        if (p[k] > TF_STREAM_MAX_WINDOW)
            return TF_E_WINDOW_TOO_LONG;
    }
    return 0;
}

static void as_doubles(const int64_t *p, double *d)
{
    for (int k = 0; k < TF_PARAMS_PER_COMBO; k++)
        d[k] = (double)p[k]; /* exact: windows are at most 2^24 here */
}

size_t tf_strategy_footprint(const int64_t params[TF_PARAMS_PER_COMBO])
{
    if (check(params))
        return 0;
    double d[TF_PARAMS_PER_COMBO];
    as_doubles(params, d);
    return sizeof(struct tf_strategy) + sizeof d + tfk_state_bytes(&tfk_hma_def, d);
}

int tf_strategy_open(tf_strategy **out, const int64_t params[TF_PARAMS_PER_COMBO])
{
    if (!out)
        return TF_E_NULL_ARG;
    int rc = check(params);
    if (rc)
        return rc;
    double d[TF_PARAMS_PER_COMBO];
    as_doubles(params, d);
    rc = tfk_stream_open(out, &tfk_hma_def, d);
    return rc == TF_E_STRATEGY ? TF_E_INVALID_ARG : rc; /* not reached: check() took them */
}

void tf_strategy_reset(tf_strategy *s)
{
    if (!s)
        return;
    s->n = 0;
    s->sar = tfk_sar_start(s->sar.fee);
    s->extra = tfk_sar_extra_start();
    s->exposure = 0;
    memset(s->state, 0, s->state_bytes);
    s->def->init(s->state, s->params); /* init accepted these params at open */
}

int tf_strategy_set_fee(tf_strategy *s, double fee)
{
    if (!s)
        return TF_E_NULL_ARG;
    if (s->n != 0 || !isfinite(fee))
        return TF_E_INVALID_ARG;
    s->sar.fee = fee;
    return 0;
}

void tf_strategy_close(tf_strategy *s)
{
    if (!s)
        return;
    free(s->params);
    free(s->state);
    free(s);
}

/* The handle for def and params, which the caller has checked (tf_strategy_open_with, in
 * src/strategy/stream.c, checks a caller's def; tf_strategy_open passes the built-in HMA def). */
int tfk_stream_open(tf_strategy **out, const tf_strategy_def *def, const double *params)
{
    size_t bytes = tfk_state_bytes(def, params);
    if (!bytes)
        return TF_E_STRATEGY;
    tf_strategy *s = calloc(1, sizeof *s);
    if (!s)
        return TF_E_NOMEM;
    s->def = def;
    s->state_bytes = bytes;
    s->params = malloc(sizeof(double) * def->n_params);
    s->state = aligned_alloc(16, bytes);
    if (!s->params || !s->state) {
        tf_strategy_close(s);
        return TF_E_NOMEM;
    }
    memcpy(s->params, params, sizeof(double) * def->n_params);
    memset(s->state, 0, bytes);
    if (def->init(s->state, s->params)) {
        tf_strategy_close(s);
        return TF_E_STRATEGY;
    }
    s->sar = tfk_sar_start(TF_FEE_DEFAULT);
    s->extra = tfk_sar_extra_start();
    *out = s;
    return 0;
}

/* One bar of a handle. A target outside the contract is TF_E_STRATEGY and books nothing (the
 * strategy's own state has seen the bar: reset the handle to reuse it). */
static int step_with(tf_strategy *s, double close)
{
    int t = s->def->step(s->state, close);
    if (!tfk_target_ok(t))
        return TF_E_STRATEGY;
    tfk_book_bar(&s->sar, &s->extra, &s->exposure, t, close);
    s->n++;
    return (int)s->sar.pos;
}

int tf_strategy_step(tf_strategy *s, double close)
{
    if (!s)
        return TF_E_NULL_ARG;
    return step_with(s, close);
}

double tf_strategy_pnl(const tf_strategy *s)
{
    if (!s)
        return 0.0;
    return tfk_nan_canon(s->sar.pnl);
}

int64_t tf_strategy_trades(const tf_strategy *s)
{
    return s ? s->sar.trades : 0;
}

int64_t tf_strategy_bars(const tf_strategy *s)
{
    return s ? s->n : 0;
}

int tf_strategy_stats(const tf_strategy *s, tf_stats *out)
{
    if (!s || !out)
        return TF_E_NULL_ARG;
    tfk_book_output(&s->sar, &s->extra, s->exposure, out);
    return 0;
}

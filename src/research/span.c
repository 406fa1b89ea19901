/* One combo's targets and the booking of a span of them (span.h): the trade lists and the
 * warmed-up walk-forward. The booking is the kernel's (book.h), called as it is. */
#include <string.h>

#include "kernel/book.h"
#include "research/span.h"
#include "tollfree/error.h"

/* Bars per call of a def's steps (strategy.h): 16 KiB of targets on the stack. */
#define SPAN_BLOCK 4096

static int cancelled(const tf_progress *p)
{
    return p && __atomic_load_n(&p->cancel, __ATOMIC_RELAXED);
}

int tfr_targets(const tf_strategy_def *def, void *state, size_t bytes, const double *params,
                const double *close, int64_t n, int batch, const tf_progress *progress,
                int8_t *targets)
{
    memset(state, 0, bytes);
    if (def->init(state, params))
        return TF_E_STRATEGY;
    int (*steps)(void *, const double *, int64_t, int32_t *) = batch ? tfk_def_steps(def) : NULL;
    int32_t t[SPAN_BLOCK];
    for (int64_t i = 0; i < n; i += SPAN_BLOCK) {
        int64_t len = n - i < SPAN_BLOCK ? n - i : SPAN_BLOCK;
        if (cancelled(progress))
            return TF_E_CANCELLED;
        if (steps) {
            if (steps(state, close + i, len, t))
                return TF_E_STRATEGY;
        } else {
            for (int64_t k = 0; k < len; k++)
                t[k] = def->step(state, close[i + k]);
        }
        for (int64_t k = 0; k < len; k++) {
            if (!tfk_target_ok(t[k]))
                return TF_E_STRATEGY;
            targets[i + k] = (int8_t)t[k];
        }
    }
    return 0;
}

/* The return the booking adds for closing st's position at c: the one booking run on a copy
 * holding only this trade, whose first trade's return sets best as computed (the same
 * operations, so the same bits, as the pnl the real booking adds). */
static double trade_return(const tfk_sar *st, double c)
{
    tfk_sar one = *st;
    one.pnl = 0.0;
    one.trades = 0;
    tfk_sar_extra x = tfk_sar_extra_start();
    tfk_sar_book(&one, &x, c);
    return tfk_nan_canon(x.best);
}

static void sink_put(tfr_sink *sink, const tfk_sar *st, int64_t entry_bar, int64_t exit_bar,
                     const double *close, int open)
{
    if (!sink)
        return;
    if (sink->n < sink->cap) {
        double c = close[exit_bar];
        sink->out[sink->n] = (tf_trade){entry_bar,           exit_bar,         st->entry, c,
                                        trade_return(st, c), (int32_t)st->pos, open};
    }
    sink->n++;
}

/* The position the targets t[0 .. k) leave: the last that is not TF_HOLD, 0 when none. */
static int held(const int8_t *t, int64_t k)
{
    while (k-- > 0)
        if (t[k] != TF_HOLD)
            return t[k];
    return 0;
}

void tfr_book_span(const int8_t *t, const double *close, int64_t w0, int64_t s, int64_t e,
                   double fee, tf_stats *out, tfr_sink *sink)
{
    tfk_book b;
    tfk_book_start(&b, fee);
    int64_t entry_bar = -1;
    for (int64_t i = s; i < e; i++) {
        int want = t[i - w0];
        if (i == s && want == TF_HOLD)
            want = held(t, s - w0);
        double c = close[i];
        if (want != TF_HOLD && want != b.sar.pos) {
            if (b.sar.pos != 0)
                sink_put(sink, &b.sar, entry_bar, i, close, 0);
            entry_bar = i;
        }
        tfk_book_bar(&b.sar, &b.x, &b.exposure, want, c);
    }
    if (b.sar.pos != 0)
        sink_put(sink, &b.sar, entry_bar, e - 1, close, 1);
    tfk_book_output(&b.sar, &b.x, b.exposure, out);
}

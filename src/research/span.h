/* One combo's targets and the booking of a span of them (src/research): what the trade lists
 * and the warmed-up walk-forward share. Not installed.
 *
 * The targets come from the strategy's own step (or steps) from a fresh state, exactly as the
 * streaming handle and tf_sweep_with_reference feed it; the booking is the one booking of
 * src/kernel/book.h (tfk_book_bar, tfk_sar_book), called as it is, so a span that starts at
 * the run's first bar gives the sweep's bits. */
#ifndef TF_RESEARCH_SPAN_H
#define TF_RESEARCH_SPAN_H

#include <stddef.h>
#include <stdint.h>

#include "tollfree/research.h"
#include "tollfree/strategy.h"

/* targets[i] = the target of bar w0 + i for i < n, def run from a fresh state (init(params))
 * over close[w0 .. w0 + n): state is bytes (tfk_state_bytes) of 16-byte aligned memory. batch:
 * through def's steps where it has one, else step by step. 0; TF_E_STRATEGY (init refused, a
 * target outside -1, 0, +1, TF_HOLD, steps failed); TF_E_CANCELLED (progress cancelled). */
int tfr_targets(const tf_strategy_def *def, void *state, size_t bytes, const double *params,
                const double *close, int64_t n, int batch, const tf_progress *progress,
                int8_t *targets);

/* Where the trades of a booked span go (NULL: nowhere): rows [0, cap) of out; n counts every
 * row, written or not. */
typedef struct tfr_sink {
    tf_trade *out;
    int64_t cap;
    int64_t n;
} tfr_sink;

/* Books the span [s, e) of a run whose targets t[i - w0] are those of bars w0 <= i < e (w0 <=
 * s < e): flat before s; at bar s the target is t's, or where that is TF_HOLD the position the
 * targets of bars w0 .. s-1 leave (their last target other than TF_HOLD; 0 when none), so a
 * position the warm-up holds is entered at close[s]; from s + 1 on, t as it is. With w0 == s
 * this is the sweep's booking of close[s .. e). *out = every output (tfk_book_output); each
 * closed trade and then the position still open after bar e - 1 (marked open) go to sink. */
void tfr_book_span(const int8_t *t, const double *close, int64_t w0, int64_t s, int64_t e,
                   double fee, tf_stats *out, tfr_sink *sink);

#endif

/* The booking: targets in, trades, pnl, fee and every statistic of tf_stats out. Written once,
 * here, for every strategy and every path (the generic sweep, its reference, streaming); the
 * HMA fast sweep books with the same tfk_sar_book, so a closed trade's arithmetic exists once.
 *
 * Per bar (docs/strategies.md, "The booking"):
 *     if want is not HOLD and want != pos:
 *         if pos != 0: book the trade closed at close (tfk_sar_book: r, pnl, trades, statistics)
 *         if want != 0: entry = close
 *         pos = want
 *     if pos != 0: exposure_bars += 1
 * HMA never goes flat once in, so exposure_bars is then n_bars - first_bar: the HMA paths count
 * it that way (tfk_sar_extra.first_bar) and give the same number. */
#ifndef TF_KERNEL_BOOK_H
#define TF_KERNEL_BOOK_H

#include <stddef.h>
#include <stdint.h>

#include "kernel/kernel_internal.h"
#include "tollfree/strategy.h"

/* One combo's booking: the stop-and-reverse state (pos, entry, pnl, trades, fee), the
 * statistics' extra state and the bars that ended in a position. */
typedef struct tfk_book {
    tfk_sar sar;
    tfk_sar_extra x;
    int64_t exposure;
} tfk_book;

static inline void tfk_book_start(tfk_book *b, double fee)
{
    b->sar = tfk_sar_start(fee);
    b->x = tfk_sar_extra_start();
    b->exposure = 0;
}

/* 1 if t is a target the contract allows (-1, 0, +1, TF_HOLD). */
static inline int tfk_target_ok(int t)
{
    return (unsigned)(t + 1) <= 2u || t == TF_HOLD;
}

/* A bar where the position moves: want (valid, not TF_HOLD, != st->pos) at close c. */
static inline void tfk_book_change(tfk_sar *st, tfk_sar_extra *x, int want, double c)
{
    if (st->pos != 0)
        tfk_sar_book(st, x, c);
    if (want != 0)
        st->entry = c;
    st->pos = want;
}

/* One bar: the target want (valid: tfk_target_ok) at close c. x NULL: no statistics (exposure
 * is then not counted either). */
static inline void tfk_book_bar(tfk_sar *st, tfk_sar_extra *x, int64_t *exposure, int want,
                                double c)
{
    if (want != TF_HOLD && want != st->pos)
        tfk_book_change(st, x, want, c);
    if (x)
        *exposure += st->pos != 0;
}

/* NaN as the outputs give it: the default NaN of an invalid operation on x86 (sign set, quiet,
 * no payload). A NaN close that a strategy trades at enters pnl with the input's own bits, an
 * inf - inf makes the default NaN, and when two NaNs meet, which one an addition returns depends
 * on the operand order the compiler chose. NaN-ness itself is sticky and the same on every path
 * (a NaN sum stays NaN, a NaN never passes a comparison), so one NaN at the output makes the
 * bits the same on every path. */
static inline double tfk_nan_canon(double v)
{
    if (v == v)
        return v;
    union {
        uint64_t u;
        double d;
    } n = {0xfff8000000000000ull};
    return n.d;
}

/* The combo's outputs after its bars (x NULL: statistics at their start values). */
static inline void tfk_book_output(const tfk_sar *st, const tfk_sar_extra *x, int64_t exposure,
                                   tf_stats *out)
{
    tfk_sar_output(st, x, 0, out);
    out->exposure_bars = x ? exposure : 0;
    out->pnl = tfk_nan_canon(out->pnl);
    out->gross_win = tfk_nan_canon(out->gross_win);
    out->gross_loss = tfk_nan_canon(out->gross_loss);
    out->best = tfk_nan_canon(out->best);
    out->worst = tfk_nan_canon(out->worst);
    out->mean = tfk_nan_canon(out->mean);
    out->m2 = tfk_nan_canon(out->m2);
    out->max_dd = tfk_nan_canon(out->max_dd);
}

/* The most state one combo may ask for (state_size or state_bytes): 1 GiB. */
#define TFK_MAX_STATE ((size_t)1 << 30)

/* The def's steps member (strategy.h), or NULL when it has none or was built without it. */
static inline int (*tfk_def_steps(const tf_strategy_def *def))(void *, const double *, int64_t,
                                                               int32_t *)
{
    size_t end = offsetof(tf_strategy_def, steps) + sizeof def->steps;
    return def->size >= end ? def->steps : NULL;
}

/* The def's changes member (strategy.h), or NULL when it has none, was built without it or
 * gives lanes outside 1 .. TF_STRATEGY_MAX_LANES (tf_strategy_def_check refuses that). */
static inline int (*tfk_def_changes(const tf_strategy_def *def))(void *, size_t, const double *,
                                                                 int64_t, int32_t *, int32_t *,
                                                                 int32_t *, int64_t *)
{
    size_t end = offsetof(tf_strategy_def, changes) + sizeof def->changes;
    if (def->size < end || def->lanes < 1 || def->lanes > TF_STRATEGY_MAX_LANES)
        return NULL;
    return def->changes;
}

/* Bytes of state def needs for params, rounded up to a multiple of 16 (at least 16, so the
 * caller's 16-byte aligned block is never empty); 0 if it asks for more than TFK_MAX_STATE. */
static inline size_t tfk_state_bytes(const tf_strategy_def *def, const double *params)
{
    size_t b = def->state_bytes ? def->state_bytes(params) : def->state_size;
    if (b > TFK_MAX_STATE)
        return 0;
    return b < 16 ? 16 : (b + 15) & ~(size_t)15;
}

#endif

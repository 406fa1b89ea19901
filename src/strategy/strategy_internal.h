/* Strategy internals shared by src/strategy's translation units. Not installed. */
#ifndef TF_STRATEGY_INTERNAL_H
#define TF_STRATEGY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kernel/book.h"
#include "kernel/kernel_internal.h"
#include "kernel/timeacc.h"
#include "tollfree/strategy.h"

/* The built-ins (builtins.c; "hma" is the kernel's, tfk_hma_def in kernel_internal.h). */
extern const tf_strategy_def tfs_sma_cross;
extern const tf_strategy_def tfs_ema_cross;
extern const tf_strategy_def tfs_donchian;
extern const tf_strategy_def tfs_rsi;
extern const tf_strategy_def tfs_bollinger;

/* Built-in windows are whole numbers in 1 .. this (the streaming kernel's limit: a window's
 * ring of closes is at most 128 MiB). */
#define TFS_MAX_WINDOW TF_STREAM_MAX_WINDOW

/* 1 if x is a whole number in [lo, hi]. */
static inline int tfs_whole(double x, double lo, double hi)
{
    return x >= lo && x <= hi && x == (double)(int64_t)x;
}

/* What the fast sweeps read of a sweep's options. */
typedef struct tfs_fast_opts {
    double fee;
    int stats;             /* keep every statistic */
    int nt;                /* threads, >= 1 */
    tf_progress *progress; /* NULL, or progress and cancel */
    size_t max_bytes;      /* 0, or TF_E_LIMIT above it */
    tfk_cmp_fn cmp;        /* the ISA's signal bitmasks (kernel_internal.h) */
    int avx2;              /* 1: the ISA has AVX2 (the fast sweeps' own bitmask builders) */
    /* The time-aware figures' hook (stats set): NULL, or the series' sums, and then tacc[n],
     * each combo's accumulation (timeacc.h), booked at each change of its position. */
    const tfk_time_in *tin;
    tfk_tacc *tacc;
} tfs_fast_opts;

/* The fast sweep of a built-in other than hma over the distinct combos params[n][k] (each
 * accepted by init): each combo's booking into out[j]. Work shared across combos (a rolling sum
 * per window, an EMA per length, ...) is computed once, with the step definition's exact
 * operations, so the bits are the step-by-step ones (fast.c). 0, TF_E_NOMEM, TF_E_LIMIT,
 * TF_E_CANCELLED; -1 if def has no fast path (the caller then steps it). */
int tfs_fast_sweep(const tf_strategy_def *def, const double *close, int64_t n_bars,
                   const double *params, int64_t n, const tfs_fast_opts *fo, tfk_book *out);

/* Threads for a sweep: threads (0 = all online cores), one for tiny work (bars x combos under
 * 2e5), at most units. Results never depend on it. */
int tfs_threads(int threads, double work, int64_t units);

/* Runs fn(arg) on nt threads, the caller's included; a thread that cannot start only means
 * fewer threads (the work is shared by a counter, so nothing is lost). */
void tfs_run_threads(void *(*fn)(void *), void *arg, int nt);

/* The sweep of a def with the changes member (tfk_def_changes non-NULL; lanes.c) over the
 * distinct combos params[n][k] (each accepted by init), states of stride bytes (a multiple of
 * 16, at least every combo's tfk_state_bytes): each combo's booking into out[j], the bits of
 * stepping it bar by bar. 0, TF_E_STRATEGY (changes failed or broke the contract), TF_E_NOMEM,
 * TF_E_CANCELLED. */
int tfs_lanes_sweep(const tf_strategy_def *def, const double *close, int64_t n_bars,
                    const double *params, int64_t n, size_t stride, const tfs_fast_opts *fo,
                    tfk_book *out);
/* The bytes one thread of tfs_lanes_sweep holds (for max_bytes). */
double tfs_lanes_bytes(uint32_t lanes, size_t stride);

/* tf_sweep_with (opts->stats required) with the time-aware figures' hook: each caller row's
 * accumulation into tacc[n_combos] (its pos set to the position after the last bar), booked in
 * the same pass by every path ("hma": tfk_sweep_timed; the built-ins' fast sweeps, the changes
 * lanes, the stepped combos: tfk_tacc_change at each move). in->n == n_bars, in->fee the
 * sweep's fee. tf_sweep_with's codes, TF_E_INVALID_ARG for a mismatched in. */
int tfs_sweep_with_timed(const tf_strategy_def *def, const double *close, int64_t n_bars,
                         const double *params, int64_t n_combos, double *pnl, int64_t *trades,
                         const tf_sweep_opts *opts, const tfk_time_in *in, tfk_tacc *tacc);

#endif

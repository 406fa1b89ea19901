/* tollfree kernel: the HMA/HMA3 stop-and-reverse sweep of docs/definition.md.
 *
 * Every path (reference, scalar, SSE2, AVX2, AVX-512, any thread count, streaming) gives
 * bit-identical outputs (pnl, trades and the statistics of tf_stats) for the same inputs. Buffers
 * are the caller's; the library keeps no pointer past a call, except a tf_series, which reads its
 * close series in place until tf_series_close (said there). On any error, outputs are left
 * untouched.
 */
#ifndef TOLLFREE_KERNEL_H
#define TOLLFREE_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "tollfree/api.h"
#include "tollfree/error.h"

/* Six window lengths per combo, in this order (also the wire order). */
#define TF_PARAMS_PER_COMBO 6
enum { TF_P_L = 0, TF_P_HALF = 1, TF_P_SQ = 2, TF_P_P = 3, TF_P_P3 = 4, TF_P_P2 = 5 };

/* Limits. A window above TF_MAX_WINDOW is rejected so that L*(L+1) can never overflow int64.
 * Streaming keeps a ring of the last L inputs per window, so its limit is lower: 2^24 windows
 * cost at most 7 x 2 x 128 MiB. n_bars and n_combos are bounded by what the wire can carry. */
#define TF_MAX_WINDOW ((int64_t)1 << 31)
#define TF_STREAM_MAX_WINDOW ((int64_t)1 << 24)
#define TF_MAX_BARS ((int64_t)UINT32_MAX)
#define TF_MAX_COMBOS ((int64_t)UINT32_MAX)
#define TF_MAX_THREADS 1024

/* SIMD path of the fast sweep. AUTO picks the widest the CPU supports. */
typedef enum tf_isa {
    TF_ISA_AUTO = 0,
    TF_ISA_SCALAR = 1,
    TF_ISA_SSE2 = 2,
    TF_ISA_AVX2 = 3,
    TF_ISA_AVX512 = 4,
} tf_isa;

/* One combo's outputs (docs/definition.md section 8): what the stop-and-reverse loop books at each
 * closed trade, in the same loop, with no second pass. trades, wins and exposure_bars are counts;
 * the rest are in percent points, like pnl. All start at 0 / 0.0; best and worst are set by the
 * first trade. A new output is one field here (and one line where the loop books a trade). */
typedef struct tf_stats {
    double pnl;            /* sum of closed trades' returns minus fees */
    int64_t trades;        /* closed trades */
    int64_t wins;          /* closed trades with a return > 0 */
    double gross_win;      /* sum of the returns > 0 */
    double gross_loss;     /* sum of the returns <= 0 (so <= 0) */
    double best;           /* largest return (0.0 with no trade) */
    double worst;          /* smallest return (0.0 with no trade) */
    double mean;           /* running mean of the returns (Welford) */
    double m2;             /* running sum of squared deviations (Welford) */
    double max_dd;         /* largest drop of pnl from its running peak (which starts at 0.0) */
    int64_t exposure_bars; /* bars that end in a position (for HMA, which never goes flat once
                              in: from the first open position to the end; 0 if none) */
} tf_stats;

/* Progress of a running sweep, and the way to stop it. The caller owns the struct, zeroes it,
 * passes it in opts and may read it from another thread while the sweep runs (use
 * tf_progress_read) or cancel it (tf_progress_cancel): the sweep then stops at its next unit of
 * work and returns TF_E_CANCELLED, leaving the outputs untouched. Unused, it costs nothing. */
typedef struct tf_progress {
    int64_t done;  /* units of work finished (one combo over one time block) */
    int64_t total; /* units of work in the whole sweep, set when it starts (0 before) */
    int cancel;    /* non-zero: stop */
} tf_progress;

/* Reads done and total (either pointer may be NULL) with atomic loads. */
TF_API void tf_progress_read(const tf_progress *p, int64_t *done, int64_t *total);
/* Asks the sweep using p to stop (an atomic store; safe from a signal handler). */
TF_API void tf_progress_cancel(tf_progress *p);

/* The fee per closed trade, in percent points, when opts do not set one. */
#define TF_FEE_DEFAULT 0.09

/* Options of a sweep. Zero-initialise, then set what you need: zero means "the default" for every
 * field. `size` makes the struct extensible: 0 or sizeof(tf_sweep_opts) = this layout; a caller
 * built against an older, shorter layout passes its own sizeof and the fields it lacks take their
 * defaults; a longer one is accepted only if the bytes this library does not know are all zero.
 * This is the one size rule of every growable struct (docs/api.md, "Growable structs"); a binary
 * that may run against a newer library sets sizeof, not 0. */
typedef struct tf_sweep_opts {
    size_t size;       /* 0, or sizeof(tf_sweep_opts) as the caller knows it */
    int threads;       /* 0 = all online cores; 1 = run on the calling thread */
    tf_isa isa;        /* TF_ISA_AUTO, or force one path (TF_E_ISA_UNAVAILABLE if unsupported) */
    size_t max_bytes;  /* 0 = no limit; else TF_E_LIMIT if the working memory would exceed it:
                          about 64 KiB per distinct first-stage length, 8 x (sq + p) bytes per
                          combo (+ 96 with stats), 256 KiB + 8 x (max sq + max p) bytes per
                          thread. Checked after the plan of the grid (~100 bytes per combo) and
                          before the working memory is allocated. */
    const double *fee; /* NULL = TF_FEE_DEFAULT; else the fee per closed trade, finite */
    tf_stats *stats;   /* NULL, or [n_combos] rows that receive every output of each combo */
    tf_progress *progress; /* NULL, or progress and cancellation (above) */
} tf_sweep_opts;

/* The fast sweep: shared first-stage WMAs, SIMD over time, threads over combos, cache-blocked
 * over time. close: f64[n_bars]; params: i64[n_combos][6]; pnl: f64[n_combos];
 * trades: i64[n_combos]. opts may be NULL (all cores, AUTO, the default fee, no statistics).
 * Returns 0 or a negative tf_error (TF_E_INVALID_ARG for a bad size or a non-finite fee). */
TF_API int tf_sweep(const double *close, int64_t n_bars, const int64_t *params, int64_t n_combos,
                    double *pnl, int64_t *trades, const tf_sweep_opts *opts);

/* The reference: docs/definition.md written out literally, one combo at a time, seven full WMA
 * passes each. Slow on purpose; it is what every other path is checked against in C. Of opts it
 * reads size, fee and stats (threads, isa, max_bytes and progress are ignored). */
TF_API int tf_sweep_reference(const double *close, int64_t n_bars, const int64_t *params,
                              int64_t n_combos, double *pnl, int64_t *trades,
                              const tf_sweep_opts *opts);

/* Checks n_combos x 6 window lengths: 0, or the first error (TF_E_WINDOW_TOO_SHORT/LONG). */
TF_API int tf_params_check(const int64_t *params, int64_t n_combos);

/* The six lengths derived from one Hull length L (docs/definition.md section 2: half = round(L/2),
 * sq = round(sqrt(L)), p = round(L/2), p3 = round(p/3), p2 = round(p/2), half to even, each
 * at least 1). TF_E_WINDOW_TOO_SHORT / TOO_LONG for L outside 1 .. TF_MAX_WINDOW. */
TF_API int tf_combo_from_length(int64_t L, int64_t out[TF_PARAMS_PER_COMBO]);

/* 1 if this CPU (and build) can run the path, else 0. TF_ISA_AUTO is always 1. The environment
 * variable TF_ISA_MAX (scalar|sse2|avx2|avx512), read once per process, caps the answer and so
 * what AUTO picks: TF_ISA_MAX=avx2 makes an AVX-512 CPU look AVX2-only (docs/kernel.md). */
TF_API int tf_isa_supported(tf_isa isa);
/* The path AUTO resolves to on this CPU. */
TF_API tf_isa tf_isa_best(void);
/* "auto", "scalar", "sse2", "avx2", "avx512"; "unknown" otherwise. */
TF_API const char *tf_isa_name(tf_isa isa);
/* Parses a name above; returns 0 and sets *out, or TF_E_INVALID_ARG. */
TF_API int tf_isa_parse(const char *name, tf_isa *out);

/* ---- Prepared series: a dataset swept many times (the sweep service's datasets). ----
 *
 * A tf_series keeps, for one immutable close series, the first-stage WMAs it has computed (one
 * n_bars array per distinct length, up to cache_bytes), so later sweeps on it, one-combo calls
 * included, skip that work. Results are bit-identical to tf_sweep. `close` is a view: it must
 * stay valid and unchanged until tf_series_close. Sweeps may run concurrently on one series. */
typedef struct tf_series tf_series;

/* TF_E_TOO_MANY_BARS, TF_E_NULL_ARG, TF_E_NOMEM. cache_bytes 0 = cache nothing. */
TF_API int tf_series_open(tf_series **out, const double *close, int64_t n_bars, size_t cache_bytes);
/* tf_sweep on the series' close, with its cache. Same arguments, errors and results. */
TF_API int tf_series_sweep(tf_series *s, const int64_t *params, int64_t n_combos, double *pnl,
                           int64_t *trades, const tf_sweep_opts *opts);
/* Bytes of cached first-stage arrays (for memory accounting). */
TF_API size_t tf_series_cached_bytes(tf_series *s);
/* Accepts NULL. No sweep may be running on s. */
TF_API void tf_series_close(tf_series *s);

/* ---- Streaming: one combo, one bar at a time (the live path). ----
 *
 * Fed the same bars in order, a strategy reproduces the batch sweep's (pnl, trades) for its combo
 * exactly. All state is sized at open (window rings); tf_strategy_step never allocates. A handle
 * runs HMA/HMA3 (tf_strategy_open) or any strategy (tf_strategy_open_with, strategy.h); the
 * functions below work for both. */
typedef struct tf_strategy tf_strategy;

/* Opens a strategy for params[6] into *out, with the default fee. TF_E_WINDOW_TOO_SHORT,
 * TF_E_WINDOW_TOO_LONG (above TF_STREAM_MAX_WINDOW), TF_E_NULL_ARG, TF_E_NOMEM. */
TF_API int tf_strategy_open(tf_strategy **out, const int64_t params[TF_PARAMS_PER_COMBO]);
/* Sets the fee per closed trade (finite; what opts->fee is to a sweep). Only before the first
 * bar (or after a reset): TF_E_INVALID_ARG otherwise, or for a non-finite fee. */
TF_API int tf_strategy_set_fee(tf_strategy *s, double fee);
/* Bytes a strategy for these params holds (for memory accounting); 0 if params are invalid. */
TF_API size_t tf_strategy_footprint(const int64_t params[TF_PARAMS_PER_COMBO]);
/* Feeds one close; returns the position after this bar: -1, 0 (flat, or not yet in the market)
 * or +1, or TF_E_NULL_ARG for a NULL s. A handle of tf_strategy_open_with (strategy.h) returns
 * TF_E_STRATEGY when its strategy's step gives a target outside the contract: that bar is not
 * booked (reset the handle before using it again). */
TF_API int tf_strategy_step(tf_strategy *s, double close);
/* Back to the state right after open (the fee is kept). Accepts NULL. */
TF_API void tf_strategy_reset(tf_strategy *s);
/* The state so far (0 for a NULL s). */
TF_API double tf_strategy_pnl(const tf_strategy *s);
TF_API int64_t tf_strategy_trades(const tf_strategy *s);
TF_API int64_t tf_strategy_bars(const tf_strategy *s);
/* Every output so far, as the batch sweep would give them for the bars seen (exposure_bars
 * counts to the last bar seen). TF_E_NULL_ARG if s or out is NULL. */
TF_API int tf_strategy_stats(const tf_strategy *s, tf_stats *out);
/* Accepts NULL. */
TF_API void tf_strategy_close(tf_strategy *s);

#endif

/* tollfree kernel: the HMA/HMA3 stop-and-reverse sweep of docs/definition.md.
 *
 * Every path (reference, scalar, SSE2, AVX2, AVX-512, any thread count, streaming) gives
 * bit-identical (pnl, trades) for the same inputs. All buffers are the caller's: the library
 * never keeps a pointer past a call. On any error, outputs are left untouched.
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

typedef struct tf_sweep_opts {
    int threads;      /* 0 = all online cores; 1 = run on the calling thread */
    tf_isa isa;       /* TF_ISA_AUTO, or force one path (TF_E_ISA_UNAVAILABLE if unsupported) */
    size_t max_bytes; /* 0 = no limit; else TF_E_LIMIT, before allocating, if the working memory
                         (about 64 KiB per distinct first-stage length, 8 x (sq + p) bytes per
                         combo, 256 KiB + 8 x (max sq + max p) bytes per thread) would exceed it */
} tf_sweep_opts;

/* The fast sweep: shared first-stage WMAs, SIMD over time, threads over combos, cache-blocked
 * over time. close: f64[n_bars]; params: i64[n_combos][6]; pnl: f64[n_combos];
 * trades: i64[n_combos]. opts may be NULL (all cores, AUTO). Returns 0 or a negative tf_error. */
TF_API int tf_sweep(const double *close, int64_t n_bars, const int64_t *params, int64_t n_combos,
                    double *pnl, int64_t *trades, const tf_sweep_opts *opts);

/* The reference: docs/definition.md written out literally, one combo at a time, seven full WMA
 * passes each. Slow on purpose; it is what every other path is checked against in C. */
TF_API int tf_sweep_reference(const double *close, int64_t n_bars, const int64_t *params,
                              int64_t n_combos, double *pnl, int64_t *trades);

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

/* ---- Prepared series: a dataset swept many times (the engine service's datasets). ----
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
 * exactly. All state is sized at open (window rings); tf_strategy_step never allocates. */
typedef struct tf_strategy tf_strategy;

/* Opens a strategy for params[6] into *out. TF_E_WINDOW_TOO_SHORT, TF_E_WINDOW_TOO_LONG
 * (above TF_STREAM_MAX_WINDOW), TF_E_NULL_ARG, TF_E_NOMEM. */
TF_API int tf_strategy_open(tf_strategy **out, const int64_t params[TF_PARAMS_PER_COMBO]);
/* Bytes a strategy for these params holds (for memory accounting); 0 if params are invalid. */
TF_API size_t tf_strategy_footprint(const int64_t params[TF_PARAMS_PER_COMBO]);
/* Feeds one close; returns the position after this bar: -1, 0 (not yet in the market) or +1. */
TF_API int tf_strategy_step(tf_strategy *s, double close);
/* Back to the state right after open. */
TF_API void tf_strategy_reset(tf_strategy *s);
TF_API double tf_strategy_pnl(const tf_strategy *s);
TF_API int64_t tf_strategy_trades(const tf_strategy *s);
TF_API int64_t tf_strategy_bars(const tf_strategy *s);
/* Accepts NULL. */
TF_API void tf_strategy_close(tf_strategy *s);

#endif

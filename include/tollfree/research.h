/* The researcher's side of the sweep, once, for the `tollfree` program and the Python package
 * alike: the figures derived from tf_stats, the table of result columns and the ranking by one
 * of them, the fee check, the grid check, and the out-of-sample / walk-forward folds.
 *
 * Nothing here prints. Functions that can refuse their input take `msg`, NULL or msg_cap bytes
 * that receive one NUL-terminated line saying what was refused and what to do (truncated to
 * fit); it is written on every non-zero return and left untouched on success. No function
 * keeps a pointer past its call. */
#ifndef TOLLFREE_RESEARCH_H
#define TOLLFREE_RESEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "tollfree/api.h"
#include "tollfree/kernel.h"
#include "tollfree/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Derived figures (docs/definition.md section 8) ----
 *
 * From one combo's tf_stats, where they are shown, never in the loop:
 *   win_rate = wins / trades                      NaN without trades
 *   profit_factor = gross_win / -gross_loss       inf with gains and no loss; NaN with neither
 *   std = sqrt(m2 / (trades - 1))                 NaN under two trades
 *   sharpe_per_trade = mean / std                 NaN where std is NaN or 0
 *   avg_trade = pnl / trades                      NaN without trades
 * (counts converted to double first; each a single IEEE operation sequence, so the same bits
 * wherever they are computed). */
typedef struct tf_derived {
    double win_rate;
    double profit_factor;
    double sharpe_per_trade;
    double avg_trade;
} tf_derived;

/* out[j] = the derived figures of stats[j] for j < n. 0; TF_E_INVALID_ARG for n < 0;
 * TF_E_NULL_ARG for a NULL array with n > 0. */
TF_API int tf_stats_derive(const tf_stats *stats, int64_t n, tf_derived *out);

/* ---- Result columns ----
 *
 * Every column a sweep's table can show, in this order: the six windows (L, half, sq, p, p3,
 * p2), pnl, trades, the other tf_stats fields (wins, gross_win, gross_loss, best, worst, mean,
 * m2, max_dd, exposure_bars), then the derived figures (win_rate, profit_factor,
 * sharpe_per_trade, avg_trade), then the time-aware figures in tf_time_stats order (equity,
 * cagr, ..., periods_per_year: TF_COLUMN_TIME, readable where tf_results.time is set; a ranking
 * by one, not a fold's metric). Column numbers are the positions in this list. */
enum {
    TF_COLUMN_WINDOW = 1, /* one of the six window lengths (not a metric) */
    TF_COLUMN_INT = 2,    /* an integer (printed as one) */
    TF_COLUMN_STATS = 4,  /* needs the kernel's statistics (tf_sweep_opts.stats) */
    TF_COLUMN_TIME = 8,   /* needs the time-aware figures (tf_results.time, tf_sweep_time) */
};
#define TF_COLUMN_PNL 6 /* the column of pnl */

/* A sweep's results, read in place during a call: params [m][6], pnl [m], trades [m], stats
 * NULL or [m] (without it only the windows, pnl and trades can be read).
 *
 * Any strategy (strategy.h): set dparams [m][n_params] and param_names [n_params] (params is
 * then unused, may be NULL). Its table is then the strategy's parameter columns, in its order,
 * followed by pnl, trades and the rest of the list above: column col of such results is
 * parameter col for col < n_params, else the column col - n_params + TF_COLUMN_PNL of the
 * HMA table. With dparams NULL (the fields zeroed) the table is the HMA one above, column
 * numbers and all. The tf_results_column_* functions answer for either; tf_column_value and
 * tf_column_values number columns by r's table. */
typedef struct tf_results {
    const int64_t *params;
    const double *pnl;
    const int64_t *trades;
    const tf_stats *stats;
    int64_t m;
    /* appended for strategies; zero: the HMA table */
    const double *dparams;
    uint32_t n_params;              /* 1 .. TF_STRATEGY_MAX_PARAMS (64) when dparams is set */
    const char *const *param_names; /* n_params names */
    /* appended: NULL, or [m] time-aware figures (tf_sweep_time), the TF_COLUMN_TIME columns */
    const struct tf_time_stats *time;
} tf_results;

/* How many columns there are. */
TF_API int tf_column_count(void);
/* Column col's name; NULL outside 0 .. tf_column_count() - 1. */
TF_API const char *tf_column_name(int col);
/* Column col's TF_COLUMN_* flags; 0 outside the table. */
TF_API int tf_column_flags(int col);
/* Looks up name[0..len): a column name, or "-name" where lower is better (*sign = -1; else
 * +1; sign may be NULL). Returns the column, or TF_E_INVALID_ARG with msg "unknown column
 * 'x'; columns: L, half, ..." (TF_E_NULL_ARG for a NULL name). */
TF_API int tf_column_find(const char *name, size_t len, int *sign, char *msg, size_t msg_cap);
/* The table of r (only its dparams, n_params and param_names are read; m may be 0): the number
 * of columns, the first metric column (pnl: 6 for HMA, n_params for a strategy), a column's
 * name and flags (a strategy's parameter columns are TF_COLUMN_WINDOW, reals: not
 * TF_COLUMN_INT), and a name looked up as tf_column_find does (parameters first). A NULL r, or
 * one with dparams set and no names or n_params outside 1..64: count and pnl TF_E_INVALID_ARG
 * (TF_E_NULL_ARG for NULL r), name NULL, flags 0, find TF_E_INVALID_ARG. */
TF_API int tf_results_column_count(const tf_results *r);
TF_API int tf_results_column_pnl(const tf_results *r);
TF_API const char *tf_results_column_name(const tf_results *r, int col);
TF_API int tf_results_column_flags(const tf_results *r, int col);
TF_API int tf_results_column_find(const tf_results *r, const char *name, size_t len, int *sign,
                                  char *msg, size_t msg_cap);
/* Column col of combo j as a double (integers converted exactly: every count and window of a
 * sweep is below 2^53). NaN where col or j is out of range, r is NULL or the column needs
 * statistics that r lacks: check with tf_column_values when that can happen. */
TF_API double tf_column_value(const tf_results *r, int col, int64_t j);
/* out[j] = sign * column col of combo j for every combo (sign -1 negates: higher is better
 * either way), the values a ranking compares. 0; TF_E_INVALID_ARG for a column outside the
 * table, a sign other than +1 and -1, m < 0, or a statistics column without r->stats;
 * TF_E_NULL_ARG for NULL arrays. */
TF_API int tf_column_values(const tf_results *r, int col, int sign, double *out);

/* order[0..m) = the combos 0..m-1 ranked by value, highest first, NaN last, ties (and NaNs) in
 * combo order: a stable sort, the one behind `--sort`, `--top` and sweep_frame(sort=). 0;
 * TF_E_INVALID_ARG for m < 0; TF_E_NULL_ARG; TF_E_NOMEM (it allocates 16 bytes per combo). */
TF_API int tf_rank(const double *value, int64_t m, int64_t *order);

/* ---- The fee ----
 *
 * A fee is the cost of one closed trade in percent points of the entry price: a finite number,
 * 0 <= fee < 100. A negative fee (a rebate) is refused: it would reward trading for its own
 * sake and turn the sweep's ranking upside down without a word; 100 or more would cost a whole
 * position per trade. The kernel itself takes any finite fee (tf_sweep_opts.fee); the command
 * and the Python package check it here first. */
#define TF_FEE_MAX 100.0

/* 0 when fee is a valid fee, else TF_E_INVALID_ARG with a message naming it and the rule. */
TF_API int tf_fee_check(double fee, char *msg, size_t msg_cap);
/* Parses text as a fee: a whole C strtod number (no trailing characters, not out of range)
 * that tf_fee_check accepts, into *fee. 0, or TF_E_INVALID_ARG with a message (TF_E_NULL_ARG
 * for NULL text or fee). */
TF_API int tf_fee_parse(const char *text, double *fee, char *msg, size_t msg_cap);

/* ---- The grid against the data: notes, not refusals ----
 *
 * A combo needs warmup = max(max(L, half) + sq - 1, max(p, p3, p2) + p - 1) bars before both
 * lines exist, and one bar more to close a trade: on a series of at most `warmup` bars it can
 * never trade (pnl 0, trades 0, every statistic 0). A combo equal to an earlier one only repeats
 * its row. Both are worth a word to the user, not a refusal. */
typedef struct tf_grid_report {
    int64_t too_long;        /* combos that can never trade on n_bars bars */
    int64_t first_too_long;  /* the first of them (-1: none) */
    int64_t first_warmup;    /* its warm-up in bars (0: none) */
    int64_t duplicates;      /* combos equal to an earlier combo */
    int64_t first_duplicate; /* the first of them (-1: none) */
    int64_t duplicate_of;    /* the earlier combo it repeats (-1: none) */
} tf_grid_report;

/* Checks the m valid combos params[m][6] (tf_params_check) against a series of n_bars bars.
 * Returns how many notes there are (0, 1 or 2) with *out (may be NULL) filled, and msg the
 * notes as one line ("" when there are none; combos numbered from 1, as the CLI's grid
 * messages); TF_E_NULL_ARG, TF_E_INVALID_ARG (m or n_bars < 0, a window outside 1 ..
 * TF_MAX_WINDOW), TF_E_NOMEM (it allocates 16 bytes per combo). */
TF_API int tf_grid_check(const int64_t *params, int64_t m, int64_t n_bars, tf_grid_report *out,
                         char *msg, size_t msg_cap);

/* ---- Out of sample and walk-forward ---- */

#define TF_OOS_MAX_FOLDS 1000

/* One fold, in bars (0-based, end exclusive): in sample [is_start, is_end), out of sample
 * [oos_start, oos_end); oos_start == is_end. */
typedef struct tf_fold {
    int64_t is_start, is_end, oos_start, oos_end;
} tf_fold;

/* What an out-of-sample run does. Zero-initialise, then set one of split and walk_forward.
 * `size` as in tf_sweep_opts (0 or sizeof: this layout; see kernel.h). */
typedef struct tf_oos_opts {
    size_t size;
    double split;       /* 0 < split < 1: one fold, in sample = the first floor(n * split) bars */
    int walk_forward;   /* 1 .. TF_OOS_MAX_FOLDS folds: the bars cut into walk_forward + 1 equal
                           segments (the last takes the remainder); fold k picks its winner on
                           segment k-1 and tests it on segment k */
    const char *metric; /* NULL = "pnl"; else a column name (not a window), "-name" = lower is
                           better: what picks the in-sample winner and ranks out of sample */
    int reference;      /* non-zero: sweep with tf_sweep_reference */
    /* appended: anchored walk-forward and warm-up (docs/research.md, "Walk-forward") */
    int anchored;   /* non-zero: every in-sample part starts at bar 0 and grows (walk_forward:
                       fold k's in sample is [0, k*seg)); the out-of-sample parts as without it.
                       A split is anchored already */
    int64_t warmup; /* 0: each part swept cold (its first bar is the strategy's first); N > 0:
                       the N bars before a part (as many as there are) feed the strategy first;
                       TF_OOS_WARMUP_ALL: every bar before it. Trades are booked only inside the
                       part (tf_trades_list's rule at the first bar, below) */
    /* appended: honest winners */
    int64_t min_trades; /* > 0: a combo with fewer in-sample trades is not eligible to win its
                           fold; a fold with no eligible combo has winner -1 (tf_oos_row) */
} tf_oos_opts;

/* tf_oos_opts.warmup: every bar before a part warms its strategy up. */
#define TF_OOS_WARMUP_ALL ((int64_t)-1)

/* The folds of opts over n_bars bars into out[cap] (with anchored, is_start is 0). Returns the
 * number of folds (1 for a split, walk_forward otherwise; out may be NULL with cap 0 to ask for it)
 * or: TF_E_INVALID_ARG with a message (neither or both of split and walk_forward, either out of
 * range, a bad size or metric, cap too small); TF_E_BAD_INPUT with "fold k has an empty in-sample
 * or out-of-sample part (n bars)" when the series is too short for the folds; TF_E_NULL_ARG. */
TF_API int tf_folds(int64_t n_bars, const tf_oos_opts *opts, tf_fold *out, int cap, char *msg,
                    size_t msg_cap);

/* One fold's result: the in-sample winner by the metric (NaN never wins; ties: the first in
 * combo order) and how it did out of sample. Values are the metric's, signed so that higher is
 * better ("-max_dd" gives -max_dd). */
typedef struct tf_oos_row {
    tf_fold fold;
    int64_t winner; /* the combo (row of params); -1: no combo was eligible (min_trades): the
                       values are then NaN, the trades 0 and oos_rank 0 */
    double is_value, is_pnl;
    int64_t is_trades;
    double oos_value, oos_pnl;
    int64_t oos_trades;
    int64_t oos_rank;      /* 1 + the combos strictly better out of sample; NaN ranks after
                              every number (1 + the combos that are not NaN) */
    double oos_best_value; /* the best out-of-sample value (NaN when all are) */
} tf_oos_row;

/* Runs every fold of oos over close[n_bars] with the combos params[m][6]: each part of the
 * series swept cold by tf_sweep (or tf_sweep_reference) with sweep's threads, isa, fee,
 * max_bytes and progress (sweep may be NULL; its stats must be NULL: statistics are computed
 * here when the metric needs them). With oos->warmup each combo is stepped instead (the
 * strategy's step, threads over combos, the one booking), every part booked from its first bar
 * after its warm-up: the bits of tf_trades_list on that part (warmup 0 gives the cold sweep's
 * bits too). rows[cap] receive one row per fold. Returns the number of
 * folds, or an error of tf_folds, TF_E_NOMEM (16 + 96 bytes per combo and part with
 * statistics), or the first sweep's error (TF_E_CANCELLED when progress is cancelled, with a
 * message on each). The sweep options come last, as in tf_sweep. */
TF_API int tf_oos_run(const double *close, int64_t n_bars, const int64_t *params, int64_t m,
                      const tf_oos_opts *oos, tf_oos_row *rows, int cap, char *msg, size_t msg_cap,
                      const tf_sweep_opts *sweep);

/* tf_oos_run for any strategy (strategy.h): the combos params[m][def->n_params] as doubles,
 * each part swept cold by tf_sweep_with (or, with oos->reference, tf_sweep_with_reference).
 * Everything else as tf_oos_run; a combo init refuses is TF_E_STRATEGY with the combo named
 * (tf_strategy_params_check) before any sweep. */
TF_API int tf_oos_run_with(const tf_strategy_def *def, const double *close, int64_t n_bars,
                           const double *params, int64_t m, const tf_oos_opts *oos,
                           tf_oos_row *rows, int cap, char *msg, size_t msg_cap,
                           const tf_sweep_opts *sweep);

/* ---- Trade lists ---- */

/* One trade of a combo: entered at close[entry_bar], closed at close[exit_bar] (a reversal
 * closes one trade and enters the next at the same bar). ret is the return the booking adds to
 * pnl for it, fee included, in percent points: the closed trades' ret summed in order from 0.0
 * give pnl bit for bit. The position still open after the last bar is one more row, open = 1,
 * exit_bar the last bar and ret what closing it at the last close would book: it is in no
 * figure (pnl, trades, wins, ...). */
typedef struct tf_trade {
    int64_t entry_bar, exit_bar;
    double entry_price, exit_price;
    double ret;        /* percent points, fee included */
    int32_t direction; /* +1 long, -1 short */
    int32_t open;      /* 1: still open after the last bar, marked to its close */
} tf_trade;

/* Every trade of one combo of def (params[def->n_params]; HMA: tf_strategy_builtin("hma") with
 * the six windows as doubles) over close[n_bars] at fee (finite, percent points per closed
 * trade), as the sweep books them: the strategy stepped from its first bar, the one booking.
 * out[cap] receives the first cap rows (out may be NULL with cap 0 to count them); stats (may
 * be NULL) every output, equal to the sweep's for that combo. Returns the number of rows (closed
 * trades, plus one when a position is open at the end), or TF_E_STRATEGY (def breaks the
 * contract, init refuses params, a target outside -1, 0, +1, TF_HOLD), TF_E_INVALID_ARG
 * (n_bars outside 0 .. TF_MAX_BARS, cap < 0, a fee that is not finite), TF_E_NULL_ARG,
 * TF_E_NOMEM (it allocates n_bars bytes and the strategy's state), with a message on each. */
TF_API int64_t tf_trades_list(const tf_strategy_def *def, const double *params, const double *close,
                              int64_t n_bars, double fee, tf_trade *out, int64_t cap,
                              tf_stats *stats, char *msg, size_t msg_cap);

/* The verdict on n folds' rows over m combos: "the in-sample winner's mean out-of-sample rank is
 * 12.5 of 80 (holds up: top quarter; random choice: 40.5), its oos pnl summed over folds
 * 123.4" (top quarter / top half / bottom half by the mean rank against m). 0, or
 * TF_E_INVALID_ARG (n < 1, m < 1) / TF_E_NULL_ARG with msg unwritten. */
TF_API int tf_oos_verdict(const tf_oos_row *rows, int n, int64_t m, char *msg, size_t msg_cap);

/* ---- Time-aware figures (docs/definition.md section 10) ----
 *
 * Booked by the sweep itself (tf_sweep_time, tf_sweep_with_time: one pass, in a copy of the
 * booking loop, so the plain sweep's speed and bits are untouched), or computed after one for the
 * combos the caller names, from the bars each combo holds a position. Every figure is the
 * arithmetic docs/definition.md section 10 writes out, on the mark-to-market equity in percent
 * points of the starting capital (additive, like pnl) and its per-bar changes; annualised with
 * periods_per_year. The same bits from every path that calls these functions. */
typedef struct tf_time_stats {
    double equity;           /* the MTM equity at the last bar: pnl + the open trade's gain */
    double cagr;             /* percent a year (a period without dates and override) */
    double ann_vol;          /* standard deviation of the per-bar changes x sqrt(periods) */
    double sharpe;           /* mean / standard deviation of the changes x sqrt(periods) */
    double sortino;          /* mean / downside deviation of the changes x sqrt(periods) */
    double calmar;           /* cagr / mtm_max_dd */
    double mtm_max_dd;       /* largest drop of the MTM equity from its running peak (from 0) */
    double exposure_pct;     /* percent of the bars that end in a position */
    double buy_hold;         /* (close[n-1] - close[0]) / close[0] x 100 */
    double compounded;       /* (prod(1 + r / 100) - 1) x 100 over the closed trades' returns */
    double mean_bars;        /* mean closed-trade duration in bars (NaN without trades) */
    double max_bars;         /* longest closed trade in bars (0 without trades) */
    double mean_days;        /* the same in days (NaN without dates or trades) */
    double max_days;         /* (NaN without dates; 0 with dates and no trade) */
    double periods_per_year; /* what annualised the figures (1: per bar) */
} tf_time_stats;

/* How to compute them. Zero-initialise; `size` as in tf_sweep_opts. */
typedef struct tf_time_opts {
    size_t size;
    const int64_t *times;    /* NULL, or n_bars times in ns since 1970, oldest first */
    double periods_per_year; /* 0: inferred (with times: (n_bars - 1) / years spanned; without:
                                1, per-bar figures); else > 0 and finite, used as given */
    const double *fee;       /* NULL: TF_FEE_DEFAULT; else the fee the sweep used */
    int threads;             /* 0: all online cores; 1: the calling thread */
} tf_time_opts;

/* The periods a year that opts give over times[n] (n >= 2 with times spanning a positive
 * time, else 1 without times; NaN with times that span no time). TF_E_INVALID_ARG for a bad
 * override (with msg). */
TF_API int tf_time_periods(const int64_t *times, int64_t n, const tf_time_opts *opts, double *out,
                           char *msg, size_t msg_cap);

/* The figures of one combo given its position after each bar, pos[n] (-1, 0, +1: what a
 * streaming handle returns bar by bar), over close[n]. The reference the numba gate compares
 * with, and what the combo functions below run per combo. 0, TF_E_NULL_ARG, TF_E_INVALID_ARG
 * (n < 0, a position outside -1..1, a bad opts). */
TF_API int tf_time_stats_positions(const double *close, int64_t n, const int8_t *pos,
                                   const tf_time_opts *opts, tf_time_stats *out, char *msg,
                                   size_t msg_cap);

/* The figures of the HMA combos params[m][6] (tf_sweep's) into out[m]: tf_sweep_time below on
 * opts' threads and fee (AUTO ISA), its sweep outputs dropped. 0, TF_E_WINDOW_TOO_SHORT / LONG
 * (tf_params_check), TF_E_INVALID_ARG, TF_E_NULL_ARG, TF_E_NOMEM. */
TF_API int tf_time_stats_hma(const double *close, int64_t n, const int64_t *params, int64_t m,
                             const tf_time_opts *opts, tf_time_stats *out, char *msg,
                             size_t msg_cap);
/* The same for any strategy's combos params[m][def->n_params] (tf_sweep_with's), each combo's
 * positions from its streaming handle (tf_strategy_open_with): TF_E_STRATEGY as there. */
TF_API int tf_time_stats_with(const tf_strategy_def *def, const double *close, int64_t n,
                              const double *params, int64_t m, const tf_time_opts *opts,
                              tf_time_stats *out, char *msg, size_t msg_cap);

/* The fast sweep (tf_sweep: pnl[m], trades[m], opts->stats when set) and, in the same pass, the
 * time-aware figures of every combo into out[m]: the booking hands each closed trade's entry and
 * exit bar to the figures' sums as it closes it (docs/definition.md section 10), and the
 * figures are finished after the last bar. Every output is bit-identical to tf_sweep's and to
 * tf_time_stats_positions' given the combo's positions, on every ISA and thread count. opts
 * gives threads, isa, fee, max_bytes (which then also counts 32 bytes a bar and about 100 bytes
 * a combo for the figures) and progress; topts gives
 * times and periods_per_year (its fee and threads are not read: the sweep's are). 0, or tf_sweep's
 * errors (TF_E_LIMIT with a message naming max_bytes when the figures' sums alone exceed it),
 * TF_E_INVALID_ARG for a bad topts. */
TF_API int tf_sweep_time(const double *close, int64_t n_bars, const int64_t *params,
                         int64_t n_combos, double *pnl, int64_t *trades, const tf_sweep_opts *opts,
                         const tf_time_opts *topts, tf_time_stats *out, char *msg, size_t msg_cap);

/* tf_sweep_with and, in the same pass, the time-aware figures of every combo into out[m], as
 * tf_sweep_time does for HMA: every path of tf_sweep_with (the built-ins' fast sweeps, a def's
 * changes lanes or steps, step by step; "hma" is tf_sweep_time) hands each position change to
 * the figures' sums as it books it. Every output is bit-identical to tf_sweep_with's and to
 * tf_time_stats_with's (the second pass over streaming handles), on every path and thread
 * count. opts and topts as for tf_sweep_time. 0, tf_sweep_with's errors (TF_E_STRATEGY for a def
 * that breaks the contract, with a message), TF_E_LIMIT, TF_E_INVALID_ARG, TF_E_NULL_ARG. */
TF_API int tf_sweep_with_time(const tf_strategy_def *def, const double *close, int64_t n_bars,
                              const double *params, int64_t n_combos, double *pnl, int64_t *trades,
                              const tf_sweep_opts *opts, const tf_time_opts *topts,
                              tf_time_stats *out, char *msg, size_t msg_cap);

/* The figures' names in tf_time_stats order (the CLI's and sweep_frame's column names), and
 * figure k of s as a double; NULL / NaN outside 0 .. TF_TIME_FIGURES - 1. */
#define TF_TIME_FIGURES 15
TF_API const char *tf_time_figure_name(int k);
TF_API double tf_time_figure(const tf_time_stats *s, int k);

#ifdef __cplusplus
}
#endif

#endif

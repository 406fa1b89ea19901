/* tollfree paper trading: one combo trades bar by bar through the order engine, and its PnL,
 * computed from the fills alone, equals the sweep's on the tick-rounded series, bit for bit.
 *
 * Each close is rounded to a whole number of ticks (tf_paper_round); the strategy (the kernel's
 * streaming API) sees the price of that many ticks (tf_paper_price); when its position changes it
 * sends an order for the change (1 lot to open, 2 to reverse) from account 1. In the closing
 * auction (the default) a counterparty, account 2, first rests a limit order at that tick price
 * on the other side and the strategy's limit order crosses it, so every fill is at the bar's
 * rounded close. With a half spread of K ticks a quoter, account 3, keeps a bid K ticks under and
 * an ask K ticks over each close (replaced every bar) and the strategy sends market orders: no
 * parity is expected and the result says what the spread cost. The venue is an in-process engine
 * (optionally journaled) or `tollfree engine serve` through tf_orders connections, pipelined.
 *
 * The CLI (`tollfree paper`) and Python (tollfree.paper.run) are shells over tf_paper_run: the
 * same inputs give the same bits through both. Nothing here prints; a failure returns a negative
 * code and writes one line saying why (and what to do) into the caller's message buffer. Nothing
 * keeps a caller's pointer past a call.
 */
#ifndef TOLLFREE_PAPER_H
#define TOLLFREE_PAPER_H

#include <stddef.h>
#include <stdint.h>

#include "tollfree/api.h"
#include "tollfree/error.h"
#include "tollfree/kernel.h"
#include "tollfree/strategy.h"

/* Decimal ticks 10^-k are tried and recognised for k = 0 .. TF_PAPER_MAX_DECIMALS. */
#define TF_PAPER_MAX_DECIMALS 10
/* The tick used when none is given and no decimal tick holds every close exactly. */
#define TF_PAPER_DEFAULT_TICK 1e-4
/* The in-process engine's live-order limit (the auction never leaves more than 3 live). */
#define TF_PAPER_MAX_LIVE_ORDERS 1024
/* tf_paper_config.max_inflight: the default, and the most (position changes). */
#define TF_PAPER_DEFAULT_INFLIGHT 256
#define TF_PAPER_MAX_INFLIGHT 65536

/* Where the tick of a run came from (tf_paper_result.tick_source). */
typedef enum tf_paper_tick_source {
    TF_PAPER_TICK_GIVEN = 0,   /* the caller's tf_paper_config.tick */
    TF_PAPER_TICK_DATA = 1,    /* tf_paper_tick_from_data: every close is a whole number of it */
    TF_PAPER_TICK_DEFAULT = 2, /* no decimal tick fits the data: TF_PAPER_DEFAULT_TICK */
} tf_paper_tick_source;

/* The price of px_ticks ticks: the double the strategy sees, the kernel's figure is computed on
 * and every fill is booked at. For a decimal tick, a tick equal to the double nearest 10^-k
 * (the literal 1e-k) for some k in 0 .. TF_PAPER_MAX_DECIMALS, it is (double)px_ticks / 10^k,
 * correctly rounded: the double that the text of that price with k decimals parses to (so a
 * close written with k decimals comes back as itself). For any other tick it is
 * (double)px_ticks * tick. */
TF_API double tf_paper_price(int64_t px_ticks, double tick);

/* A close rounded to ticks: round(close x 10^k) for a decimal tick (as above), else
 * round(close / tick), half to even either way. 0 and *px_ticks set when that is a positive
 * whole number a double holds exactly (1 .. 2^53), else TF_E_BAD_INPUT (a close that is not a
 * positive finite price in these ticks); TF_E_INVALID_ARG for a tick that is not a positive
 * finite number. */
TF_API int tf_paper_round(double close, double tick, int64_t *px_ticks);

/* The default tick of a series: the coarsest power of ten 10^-k, k = 0 .. TF_PAPER_MAX_DECIMALS,
 * such that every close rounds to itself, tf_paper_price(t, 10^-k) == close as doubles with t
 * from tf_paper_round. Returns 1 and sets *tick to it, or 0 when none fits (a series with more
 * decimals, a generated random walk, a value that is not a positive price) and sets *tick to
 * TF_PAPER_DEFAULT_TICK. TF_E_NULL_ARG (close NULL with n_bars > 0, or tick NULL),
 * TF_E_TOO_MANY_BARS. */
TF_API int tf_paper_tick_from_data(const double *close, int64_t n_bars, double *tick);

/* One fill of the strategy's orders (rows of tf_paper_result.fill_log). */
typedef struct tf_paper_fill {
    int64_t bar;      /* 0-based bar index */
    int64_t dir;      /* +1 bought, -1 sold */
    int64_t qty_lots; /* lots filled */
    int64_t px_ticks; /* the fill's price in ticks: tf_paper_price(px_ticks, tick) */
} tf_paper_fill;

/* What to run. Zero-initialise, then set what you need: zero is the default of every field but
 * combo (or strategy and params). `size` makes the struct extensible (0 or sizeof as the caller
 * knows it; the rules of tf_sweep_opts). Read by tf_paper_run only. */
typedef struct tf_paper_config {
    size_t size;
    int64_t combo[TF_PARAMS_PER_COMBO]; /* six window lengths (tf_params_check), <= 2^24 each */
    double tick;         /* 0: tf_paper_tick_from_data; else a positive finite tick size */
    const double *fee;   /* NULL: TF_FEE_DEFAULT; else the fee per closed trade in percent
                            points, one tf_fee_check accepts (0 <= fee < 100), for the fills'
                            PnL and the kernel's figures alike */
    uint64_t instrument; /* the instrument traded; 0: 1 (the service must list it) */
    int64_t half_spread; /* 0: the closing auction; K in 1 .. 2^40: the quoted market */
    int coarse_tick;     /* 0: refuse a given tick under which rounding changes a close of a
                            series that has a decimal tick (TF_E_BAD_INPUT); 1: trade the
                            rounded series anyway */
    int timeout_ms;      /* service: per call, and for the last fills; 0: the tf_orders default */
    const char *engine_url;  /* NULL: an in-process engine; else "unix:PATH", "tcp:HOST:PORT" or
                                "tls:HOST:PORT" of `tollfree engine serve`: the strategy's
                                connection (which in the auction also carries the counterparty's
                                orders, each just before the order that crosses it) and, with a
                                half spread, the quoter's, which receives its fills unsolicited */
    const char *journal_dir; /* in-process only, NULL: none; else a directory (made if missing)
                                that gets commands.ofl and events.ofl (OFL1); refused when either
                                already holds records */
    tf_progress *progress;   /* NULL, or the caller's counters: total = bars, done = bars traded
                                (read with tf_progress_read from another thread); cancel stops
                                the run at the next bar with TF_E_CANCELLED */
    /* Appended (a caller of the layout above passes its size and gets HMA with combo). Any
     * strategy: NULL is HMA with combo; else def (strategy.h; it must outlive the call) with
     * params[def->n_params] (combo is then ignored): the loop streams it through
     * tf_strategy_open_with and the kernel's figures are tf_sweep_with's. The "hma" built-in
     * here is HMA with combo = params (whole numbers). */
    const tf_strategy_def *strategy;
    const double *params;
    /* Appended: a service started with --sessions (docs/venue.md). Both connections log on as
     * this session (it must hold the accounts the run uses: 1 and 2, and 3 with half_spread);
     * NULL: no logon. */
    const char *session;
    const void *secret;
    size_t secret_len;
    /* Appended: the service's closing auction only. The position changes sent whose replies
     * are not read yet, at most: the strategy's next position depends on prices alone, so the
     * loop sends a change (the counterparty's order and the strategy's, one send) and goes on
     * while the service answers; the fills are booked in the order they were made, so the
     * results are the same bits whatever the window. 0: TF_PAPER_DEFAULT_INFLIGHT; 1: each
     * change's replies are read before the next bar (one round trip per change); at most
     * TF_PAPER_MAX_INFLIGHT. The in-process engine and the half spread (whose quotes follow
     * the fills) always read them at once. */
    uint32_t max_inflight;
} tf_paper_config;

/* What a run did. The caller sets size and the four optional outputs (in); tf_paper_run writes
 * the rest (out). */
typedef struct tf_paper_result {
    size_t size; /* in: 0, or sizeof(tf_paper_result) as the caller knows it */
    /* in: NULL, or where the fills go: min(fills, fill_log_cap) rows are stored, in order.
     * A run makes at most two fills per bar, so 2 x n_bars rows always suffice. */
    tf_paper_fill *fill_log;
    size_t fill_log_cap;
    double *equity; /* in: NULL, or [n_bars]: the closed-trade PnL after each bar */
    double *mtm;    /* in: NULL, or [n_bars]: equity plus the open position marked at the bar's
                       rounded close, pos x (px - entry) / entry x 100 */

    double tick;            /* the tick used */
    int tick_source;        /* tf_paper_tick_source */
    int position;           /* the position at the end: -1, 0, +1 */
    int64_t rounded_closes; /* closes the rounding changed (0: the rounded series is the data) */
    int64_t first_rounded;  /* the first such bar, -1 when none */
    int64_t bars, orders, fills, lots, commands, events;
    double pnl; /* from the fills, the kernel's expression per closed trade */
    int64_t trades;
    double kernel_pnl; /* the sweep (tf_sweep / tf_sweep_with, one thread) on the rounded series */
    int64_t kernel_trades;
    double stream_pnl; /* the strategy's own books (tf_strategy_pnl) */
    int64_t stream_trades;
    double unrounded_pnl; /* the sweep on the series as given (no rounding) */
    int64_t unrounded_trades;
    double unrounded_diff;  /* pnl - unrounded_pnl: what the rounding (and the spread) changed */
    double spread_cost;     /* half spread: kernel_pnl - pnl; 0 in the auction */
    int parity;             /* pnl and kernel_pnl have the same bits and the trades are equal */
    int unrounded_parity;   /* the same against the unrounded sweep */
    int has_state_hash;     /* in-process: 1 and state_hash set */
    int in_process;         /* 1: the in-process engine; 0: the service */
    uint64_t state_hash;    /* tf_engine_state_hash after the run (tf_engine_format_hash) */
    uint64_t venue_fills;   /* service, half spread: unsolicited Trades the quoter's connection
                               received (0 in the auction: no second connection) */
    uint64_t fills_dropped; /* service: of those, dropped by its full queue */
    double seconds;         /* wall time of the bar loop */
} tf_paper_result;

/* Paper-trades cfg->combo (or cfg->strategy with cfg->params) on close[0 .. n_bars) (positive
 * finite prices). Checks the configuration and rounds the series before any venue is opened or file
 * made. Returns 0 (the run happened: res->parity says whether it matched), or a negative code with
 * one line in msg[0 .. msg_cap) (msg may be NULL when msg_cap is 0; the text is cut to fit,
 * NUL-terminated): TF_E_NULL_ARG, TF_E_INVALID_ARG (a bad size, tick, fee, half spread, or a
 * journal with a service), TF_E_STRATEGY (a def tf_strategy_def_check refuses, or params its init
 * refuses: the message names them), TF_E_WINDOW_TOO_SHORT / TOO_LONG, TF_E_TOO_MANY_BARS,
 * TF_E_BAD_INPUT (a close that is no positive price in ticks, or, unless coarse_tick, a tick
 * coarser than the data's), TF_E_CANCELLED, TF_E_NOMEM, TF_E_PROTOCOL (the venue refused or did not
 * fill an order the loop needs: the bar and the reason are in the message), TF_E_LIMIT (a reply too
 * long), the journal's and the engine's codes, and the order client's (-errno, -ETIMEDOUT, ...). On
 * failure the outputs of res are unspecified. */
TF_API int tf_paper_run(const double *close, int64_t n_bars, const tf_paper_config *cfg,
                        tf_paper_result *res, char *msg, size_t msg_cap);

/* The summary of a run (cfg as given to tf_paper_run, res as it filled it), the one text
 * `tollfree paper` and `python3 -m tollfree.paper` print: lines of text, or (as_json) ONE JSON
 * object on one line (floats with %.17g, so they round-trip), newline-terminated. Writes at
 * most cap bytes, NUL-terminated when cap > 0 (snprintf's rule), and returns the length of the
 * whole text (a return >= cap: cut; about 1 KiB always suffices); TF_E_NULL_ARG (cfg or res
 * NULL, or buf NULL with cap > 0); TF_E_INVALID_ARG (a cfg or res whose size breaks the size
 * rule of docs/api.md: res below its first layout, or either longer with a non-zero tail; nothing
 * is written). */
TF_API int tf_paper_format(const tf_paper_config *cfg, const tf_paper_result *res, int as_json,
                           char *buf, size_t cap);

#endif

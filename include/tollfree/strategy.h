/* tollfree strategies: any strategy on every path.
 *
 * A strategy turns a close series into targets, one per bar: +1 long, -1 short, 0 flat, or
 * TF_HOLD (no opinion on this bar: keep what you have). It knows nothing of trades, pnl, fees or
 * statistics: the booking (docs/strategies.md) turns targets into those, the same for every
 * strategy, with the arithmetic of docs/definition.md sections 5, 8 and 9. Parameters are
 * doubles (integers are exact up to 2^53); a combo is one parameter vector.
 *
 * A strategy is a tf_strategy_def: built into the library (tf_strategy_builtin: "hma",
 * "sma_cross", "ema_cross", "donchian", "rsi", "bollinger"), loaded from a plugin (a shared
 * object exporting `const tf_strategy_def *tollfree_strategy(void)`, tf_strategy_load), or made
 * by the caller (Python builds one from numba functions). Every path takes one.
 */
#ifndef TOLLFREE_STRATEGY_H
#define TOLLFREE_STRATEGY_H

#include <stddef.h>
#include <stdint.h>

#include "tollfree/api.h"
#include "tollfree/kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TF_STRATEGY_ABI 1
#define TF_HOLD 2
/* The symbol a plugin exports. */
#define TF_STRATEGY_SYMBOL "tollfree_strategy"
/* At most this many parameters per combo. */
#define TF_STRATEGY_MAX_PARAMS 64
/* At most this many combos in one call of a def's changes (its lanes). */
#define TF_STRATEGY_MAX_LANES 16
/* At most this many combos in one grid built by name (tf_grid_named). */
#define TF_GRID_MAX_COMBOS 10000000

typedef struct tf_strategy_def {
    size_t size;                    /* sizeof(tf_strategy_def) the plugin was built with */
    uint32_t abi;                   /* TF_STRATEGY_ABI */
    const char *name;               /* [a-z0-9_]+ */
    uint32_t n_params;              /* 1 .. TF_STRATEGY_MAX_PARAMS */
    const char *const *param_names; /* n_params names, [a-z0-9_]+, distinct */
    size_t state_size;              /* bytes of per-combo state, 16-byte aligned by the caller */
    int (*init)(void *state, const double *params); /* 0, or nonzero: these params are invalid */
    int (*step)(void *state, double close);         /* -1, 0, +1 or TF_HOLD */
    size_t (*state_bytes)(const double *params);    /* NULL: state_size; else the state these
                                                       params need (window rings, say) */
    /* Optional members follow; a plugin built with a smaller size has none of them, and a
     * plugin that leaves a member out (zero) gets the default. */
    int (*steps)(void *state, const double *close, int64_t n, int32_t *targets);
    /* NULL: the sweep calls step once a bar. Else it may call steps instead, for a run of n bars
     * in order: targets[i] must be exactly what step(state, close[i]) would return, and the state
     * must end where those n steps leave it (so a plugin or a numba strategy can run its own loop,
     * with step inlined, in one call per block of bars). Return 0; nonzero stops the sweep
     * (TF_E_STRATEGY). Streaming always calls step. */
    uint32_t lanes; /* combos per call of changes: 1 .. TF_STRATEGY_MAX_LANES (with changes) */
    int (*changes)(void *states, size_t stride, const double *close, int64_t n, int32_t *pos,
                   int32_t *bars, int32_t *targets, int64_t *counts);
    /* NULL: as steps says. Else the sweep calls changes instead of steps: lanes combos at once
     * (lane l's state at (char *)states + l * stride, initialised), a run of n bars (n at most
     * 2^31 - 1) in order. For each lane, it steps the n bars as steps would (the state ends
     * where those steps leave it), but writes only the bars where the lane's position moves:
     * from p = pos[l] (the lane's position before the run: -1, 0 or +1), each bar i whose
     * target t = step(state, close[i]) is not TF_HOLD and differs from p is written, in bar
     * order, as bars[l * n + k] = i, targets[l * n + k] = t (k = 0, 1, ...), and p becomes t;
     * then counts[l] = k, the number written, and pos[l] = p. Return 0; nonzero stops the
     * sweep (TF_E_STRATEGY). Only those bars move the booking, so the sweep books them and
     * skips the others; running several combos in one loop lets the CPU overlap their steps.
     * The sweep fills the lanes of a last, partial group with copies of a combo and drops
     * their results. tf_strategy_def_check refuses changes with lanes outside 1 .. 16. */
} tf_strategy_def;

/* The function a plugin exports under TF_STRATEGY_SYMBOL. */
typedef const tf_strategy_def *(*tf_strategy_entry)(void);

/* ---- Finding a strategy ---- */

/* The built-in strategy of that name, or NULL. Built-ins live as long as the library. */
TF_API const tf_strategy_def *tf_strategy_builtin(const char *name);
/* The i-th built-in's name (i from 0), or NULL past the last: for lists in messages. */
TF_API const char *tf_strategy_builtin_name(int i);

/* Checks a def against the contract: abi, size (at least the members above), name and
 * parameter names ([a-z0-9_]+, distinct), n_params, init and step present, state_size or
 * state_bytes (a state_size above 1 GiB is refused). The library's own built-ins pass as they
 * are (hma's first parameter keeps its name L). 0, or TF_E_STRATEGY with one line in msg saying
 * what is wrong. */
TF_API int tf_strategy_def_check(const tf_strategy_def *def, char *msg, size_t msg_cap);

/* A loaded plugin: the shared object stays open until tf_strategy_unload. */
typedef struct tf_strategy_lib tf_strategy_lib;

/* dlopens path, finds TF_STRATEGY_SYMBOL, calls it and checks the def (tf_strategy_def_check).
 * 0 and *out, or TF_E_STRATEGY with msg naming the file and the reason (cannot open it and why,
 * no such symbol, another ABI, a size too small, bad names); TF_E_NULL_ARG. */
TF_API int tf_strategy_load(const char *path, tf_strategy_lib **out, char *msg, size_t msg_cap);
/* The plugin's def; valid until tf_strategy_unload. */
TF_API const tf_strategy_def *tf_strategy_lib_def(const tf_strategy_lib *lib);
/* Closes the plugin (NULL is fine). No def, state or stream of it may be used after. */
TF_API void tf_strategy_unload(tf_strategy_lib *lib);

/* A built-in name, or a path (one holding a '/' or ending in ".so") to load: *def, and *lib
 * (NULL for a built-in; the caller unloads it). An unknown name is TF_E_STRATEGY with a message
 * listing the built-ins. */
TF_API int tf_strategy_resolve(const char *name_or_path, const tf_strategy_def **def,
                               tf_strategy_lib **lib, char *msg, size_t msg_cap);

/* Checks every combo of params[n_combos][def->n_params] with def->init: 0, or TF_E_STRATEGY
 * with *bad_combo (may be NULL) its index and msg naming it and its parameters. */
TF_API int tf_strategy_params_check(const tf_strategy_def *def, const double *params,
                                    int64_t n_combos, int64_t *bad_combo, char *msg,
                                    size_t msg_cap);

/* ---- Sweeping any strategy ---- */

/* The sweep of def over close[n_bars] for params[n_combos][def->n_params] (row-major): pnl,
 * trades and (opts->stats) every statistic per combo, booked as docs/definition.md says, bit for
 * bit the same for any thread count and as tf_sweep_with_reference. opts as for tf_sweep
 * (threads, fee, stats, progress, max_bytes; isa is the HMA fast path's). For the "hma"
 * built-in the parameters must be whole numbers and this is tf_sweep (its fast path).
 * Identical combos are computed once. Returns 0, or TF_E_STRATEGY (a def breaking the contract,
 * a combo refused by init: use tf_strategy_params_check to name it, or a step returning a target
 * other than -1, 0, +1, TF_HOLD), TF_E_INVALID_ARG, TF_E_NOMEM, TF_E_LIMIT, TF_E_CANCELLED, ...;
 * outputs untouched on error. Every NaN output is the one NaN 0xfff8000000000000, so NaN bits do
 * not depend on the path (docs/strategies.md, "The booking"). */
TF_API int tf_sweep_with(const tf_strategy_def *def, const double *close, int64_t n_bars,
                         const double *params, int64_t n_combos, double *pnl, int64_t *trades,
                         const tf_sweep_opts *opts);
/* The model: one combo at a time, step by step, the booking written out plainly, one thread. */
TF_API int tf_sweep_with_reference(const tf_strategy_def *def, const double *close, int64_t n_bars,
                                   const double *params, int64_t n_combos, double *pnl,
                                   int64_t *trades, const tf_sweep_opts *opts);

/* ---- Streaming any strategy ---- */

/* A streaming handle (kernel.h's tf_strategy: step, pnl, trades, stats, reset, set_fee, close)
 * for one combo of def (params[def->n_params], copied), the default fee. def must outlive the
 * handle. TF_E_STRATEGY when def breaks the contract or init refuses params; TF_E_NULL_ARG,
 * TF_E_NOMEM. */
TF_API int tf_strategy_open_with(tf_strategy **out, const tf_strategy_def *def,
                                 const double *params);

/* ---- Grids by name ---- */

/* Builds the grid "a=LO:HI:STEP,b=V,..." for def: every parameter named once (any order; a
 * single value V is LO=HI=V), ranges inclusive (LO + k*STEP <= HI, computed as LO + k*STEP),
 * the cartesian product in def's parameter order with the LAST parameter varying fastest; then
 * where (NULL or "": none) keeps the combos for which every condition holds: conditions
 * separated by ',' or "&&", each `A OP B` with A and B a parameter name or a number and OP one
 * of < <= > >= == !=. *out is malloc'd [*n_combos][def->n_params] (free with free()). 0, or
 * TF_E_BAD_INPUT with msg naming the part of spec or where at fault, TF_E_LIMIT (more than
 * TF_GRID_MAX_COMBOS combos before where), TF_E_NOMEM. An empty result (where kept none) is
 * TF_E_BAD_INPUT. */
TF_API int tf_grid_named(const tf_strategy_def *def, const char *spec, const char *where,
                         double **out, int64_t *n_combos, char *msg, size_t msg_cap);
/* Evaluates where over params[n_combos][n_params] (names: n_params parameter names): keep[j]
 * = 1 when every condition holds for combo j, else 0. 0, or TF_E_BAD_INPUT with msg. */
TF_API int tf_grid_where(const char *where, const char *const *names, uint32_t n_params,
                         const double *params, int64_t n_combos, unsigned char *keep, char *msg,
                         size_t msg_cap);

#ifdef __cplusplus
}
#endif

#endif

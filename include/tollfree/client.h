/* tollfree C client: speaks v1 and v2 (docs/protocol.md) to `tollfree serve` over a Unix socket,
 * TCP, or the shared-memory transport.
 *
 * One tf_client is one connection; calls are synchronous and not thread-safe (use one client per
 * thread). Every call returns 0 or a negative code: a server error frame surfaces as the server's
 * code (TF_E_UNKNOWN_DATASET, TF_E_WINDOW_TOO_SHORT, ...) with its message available from
 * tf_client_error_message(); transport failures are -errno, TF_E_TRUNCATED, TF_E_PROTOCOL or a
 * shared-memory code. After a timeout, a transport failure or a protocol violation the client is
 * unusable (calls return -ENOTCONN): close it and open another. Result arrays are written
 * straight from the socket into the caller's buffers.
 */
#ifndef TOLLFREE_CLIENT_H
#define TOLLFREE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "tollfree/api.h"
#include "tollfree/error.h"
#include "tollfree/kernel.h"
#include "tollfree/wire.h"

typedef struct tf_client tf_client;

/* Options of a connection. Zero-initialise, then set what you need. `size` makes the struct
 * extensible: 0 or sizeof(tf_client_opts) = this layout; a caller built against an older, shorter
 * layout passes its own sizeof and the fields it lacks take their defaults; a longer one is
 * accepted only if the bytes this library does not know are all zero. A size that does not reach
 * the end of spin, or unknown non-zero bytes, is TF_E_INVALID_ARG. */
typedef struct tf_client_opts {
    size_t size;         /* 0, or sizeof(tf_client_opts) as the caller knows it */
    int timeout_ms;      /* per call (shm: from the call's first sleep, after the spin);
                            0 = default (60 s); < 0 = wait forever */
    uint64_t ring_bytes; /* shm: ring size, a power of two (0 = 4 MiB) */
    int spin; /* shm: most PAUSE iterations before a yield and a futex sleep (the budget adapts
               * below it, include/tollfree/shm.h; 0 = sleep at once; < 0 = default) */
} tf_client_opts;

typedef struct tf_server_info {
    uint32_t version;
    uint32_t caps; /* TF_CAP_* */
    uint64_t max_frame;
    uint64_t max_memory;
    uint32_t max_datasets;
    uint32_t threads;
} tf_server_info;

typedef struct tf_session_state {
    int position; /* -1, 0 or +1 after the last bar */
    int64_t trades;
    double pnl;
    int64_t bars; /* query and close only (-1 after a bar call) */
} tf_session_state;

/* url: "unix:PATH", "tcp:[HOST:]PORT" (HOST 127.0.0.1 when left out; "tcp:[::1]:PORT" for IPv6)
 * or "shm:PATH" (the server's --shm socket): docs/protocol.md, "URLs". opts may be NULL.
 * TF_E_INVALID_ARG for a bad url, a bad opts size or (shm) a bad ring_bytes, before anything is
 * dialed; -errno when the connection fails; a shared-memory handshake
 * status (TF_E_SHM_*, TF_E_BAD_FD). */
TF_API int tf_client_open(tf_client **out, const char *url);
TF_API int tf_client_open_opts(tf_client **out, const char *url, const tf_client_opts *opts);
/* Accepts NULL. Closes the connection (a shared-memory peer is told first). */
TF_API void tf_client_close(tf_client *c);
/* The message of the last server error frame ("" if none). Valid until the next call. */
TF_API const char *tf_client_error_message(const tf_client *c);
/* timeout_ms as in tf_client_opts. */
TF_API int tf_client_set_timeout(tf_client *c, int timeout_ms);

/* ---- v2 ---- */
TF_API int tf_client_hello(tf_client *c, tf_server_info *info);
/* Sends n bytes and receives them back into out (which may alias data). */
TF_API int tf_client_echo(tf_client *c, const void *data, size_t n, void *out);
/* Loads a dataset; *handle is its content address, *created 1 if the server stored it now (either
 * pointer may be NULL). On a shared-memory connection the closes go into a sealed memfd passed
 * with LOAD_FD (the server maps it; nothing is copied through the ring). */
TF_API int tf_client_load(tf_client *c, const double *close, uint64_t n_bars, uint64_t *handle,
                          int *created);
/* LOAD_FD with a caller's sealed memfd (unix and shm connections). The fd stays the caller's. */
TF_API int tf_client_load_fd(tf_client *c, int memfd, uint64_t n_bars, uint64_t *handle,
                             int *created);
/* SWEEP_DS: n_combos x 6 params against a loaded dataset; pnl[n_combos], trades[n_combos]. */
TF_API int tf_client_sweep(tf_client *c, uint64_t handle, const int64_t *params, uint32_t n_combos,
                           double *pnl, int64_t *trades);
/* SWEEP_DS with statistics (HELLO caps TF_CAP_SWEEP_FLAGS): pnl, trades and rows[n_combos], every
 * output of each combo (docs/definition.md section 8); fee NULL = the server's default 0.09. */
TF_API int tf_client_sweep_stats(tf_client *c, uint64_t handle, const int64_t *params,
                                 uint32_t n_combos, const double *fee, double *pnl, int64_t *trades,
                                 tf_stats *rows);
/* SWEEP: the close series travels with the call. */
TF_API int tf_client_sweep_inline(tf_client *c, const double *close, uint32_t n_bars,
                                  const int64_t *params, uint32_t n_combos, double *pnl,
                                  int64_t *trades);
TF_API int tf_client_run_one(tf_client *c, uint64_t handle, const int64_t params[6], double *pnl,
                             int64_t *trades);
TF_API int tf_client_drop(tf_client *c, uint64_t handle);
/* stats[TF_STAT_COUNT], in the order of TF_STAT_*. */
TF_API int tf_client_stats(tf_client *c, uint64_t *stats);

TF_API int tf_client_session_open(tf_client *c, const int64_t params[6], uint64_t *session);
/* One bar; st may be NULL. */
TF_API int tf_client_session_bar(tf_client *c, uint64_t session, double close,
                                 tf_session_state *st);
TF_API int tf_client_session_query(tf_client *c, uint64_t session, tf_session_state *st);
TF_API int tf_client_session_close(tf_client *c, uint64_t session, tf_session_state *st);

/* ---- strategies by name (HELLO caps TF_CAP_STRATEGIES; docs/protocol.md, "Strategies") ---- */

/* STRATEGIES: what the server offers ("hma" and its --strategy ones), one line per strategy:
 * its name, then its parameter names in order, separated by single spaces, each line ending in
 * '\n'. The text is copied into text[cap] NUL-terminated (cut to cap - 1 bytes; cap 0: not
 * copied); *len (may be NULL) gets its whole length. Returns the number of strategies. */
TF_API int tf_client_strategies(tf_client *c, char *text, size_t cap, size_t *len);
/* SWEEP_WITH: a sweep of the strategy the server offers under that name. handle != 0: against a
 * loaded dataset (close NULL, n_bars 0); handle 0: close[n_bars] travels with the call.
 * params[n_combos][n_params] (row-major, the strategy's parameter order), f64. fee NULL: the
 * default 0.09; rows NULL: no statistics (else rows[n_combos], docs/definition.md section 8).
 * pnl and trades as tf_sweep_with gives them, bit for bit. An unknown name, a wrong n_params or a
 * combo the strategy refuses: TF_E_STRATEGY with the server's message (which names it);
 * TF_E_INVALID_ARG for n_params outside 1..TF_WIRE_MAX_PARAMS or a name longer than
 * TF_WIRE_MAX_NAME, before anything is sent. */
TF_API int tf_client_sweep_with(tf_client *c, const char *strategy, uint64_t handle,
                                const double *close, uint64_t n_bars, const double *params,
                                uint32_t n_params, uint32_t n_combos, const double *fee,
                                double *pnl, int64_t *trades, tf_stats *rows);
/* SESSION_OPEN_WITH: a live session of a named strategy for one combo params[n_params]; then
 * tf_client_session_bar / _query / _close as for HMA. Errors as tf_client_sweep_with. */
TF_API int tf_client_session_open_with(tf_client *c, const char *strategy, const double *params,
                                       uint32_t n_params, uint64_t *session);

/* ---- v1 (the published protocol) ---- */
TF_API int tf_client_v1_sweep(tf_client *c, const double *close, uint32_t n_bars,
                              const int64_t *params, uint32_t n_combos, double *pnl,
                              int64_t *trades);
/* v1 echo of the close array (sent with no params). */
TF_API int tf_client_v1_echo(tf_client *c, const double *close, uint32_t n_bars, double *out);

#endif

/* tollfree order engine: price-time matching on decoded OFL1 commands and the gateway commands
 * of orderflow.h (TF_OFX_ORDER, TF_OFX_CANCEL, TF_OFX_REPLACE_BY_CLIENT; docs/engine.md).
 *
 * One engine holds the books of a fixed set of instruments. Every size is fixed when it is
 * created: the live-order pool, the price-level pool and the lookup tables are allocated once by
 * tf_engine_create and never grow, so applying a command never allocates. Applying a command
 * appends its events (OFL1 event messages for an OFL1 command, execution reports tf_ofx_* for a
 * gateway command; event_seq contiguous from 1) to a caller-owned event sink. The state hash
 * (FNV-1a 64 over the books and counters, docs/engine.md) is the same after the same commands on
 * every path: one run, a replay, a snapshot + the tail.
 *
 * An engine is used by one thread at a time. It keeps no pointer to the caller's memory past a
 * call, except the sink's buffer and flush callback while a tf_engine_apply runs.
 */
#ifndef TOLLFREE_ENGINE_H
#define TOLLFREE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "tollfree/api.h"
#include "tollfree/error.h"
#include "tollfree/orderflow.h"

#define TF_ENGINE_MAX_INSTRUMENTS 65536 /* instruments in one engine */
#define TF_ENGINE_MAX_ORDERS (1u << 30) /* live orders: pool indices are 32-bit */
#define TF_ENGINE_DEFAULT_MAX_ORDERS 1000000

/* Configuration, read by tf_engine_create only (nothing is kept). */
typedef struct tf_engine_config {
    uint32_t size;               /* sizeof(tf_engine_config), or 0 for this header's layout:
                                    the size rule of docs/api.md */
    const uint64_t *instruments; /* instrument ids, any order, no duplicates, none 0 */
    uint32_t n_instruments;      /* 1..TF_ENGINE_MAX_INSTRUMENTS */
    uint32_t max_orders;         /* live orders at once: 1..TF_ENGINE_MAX_ORDERS */
    uint64_t max_bytes;          /* memory budget of the engine; 0 = no limit */
} tf_engine_config;
/* The first sized layout (through max_bytes): the smallest size a caller may pass. */
#define TF_ENGINE_CONFIG_SIZE_V1 32u

/* Where events go. The engine writes events at ev[n], ev[n+1], ... and increments n; when n
 * reaches cap in the middle of a command it calls flush(ctx, ev, n), which must consume them
 * all (return 0, and the engine sets n = 0) or fail (return < 0: the engine stops writing events
 * for this command, finishes the command's state change, and tf_engine_apply returns that
 * code). Without flush (NULL), cap must hold every event one command can emit: max_orders + 2
 * (an aggressor filling every resting order, plus Accepted and the market remainder's Canceled);
 * tf_engine_apply returns TF_E_LIMIT when a command would overflow it, after applying it. */
typedef struct tf_engine_sink {
    tf_ofl_msg *ev;
    size_t cap;
    size_t n;
    int (*flush)(void *ctx, const tf_ofl_msg *ev, size_t n);
    void *ctx;
} tf_engine_sink;

/* What tf_engine_apply did with a record, for the counters of a run. */
typedef enum tf_engine_outcome {
    TF_ENGINE_APPLIED = 0,   /* a command applied (its events may include a Rejected) */
    TF_ENGINE_DUPLICATE = 1, /* command_seq <= last_command_seq: skipped, no event */
    TF_ENGINE_SKIPPED = 2,   /* an event or a Heartbeat record: skipped, no event */
} tf_engine_outcome;

typedef struct tf_engine tf_engine;

/* Creates an engine. Returns 0 or TF_E_NULL_ARG, TF_E_INVALID_ARG (no instruments, too many, a
 * duplicate or zero id, max_orders out of range, size too small), TF_E_LIMIT (the engine would
 * need more than max_bytes: tf_engine_bytes_needed says how much), TF_E_NOMEM. */
TF_API int tf_engine_create(const tf_engine_config *cfg, tf_engine **out);
/* Frees everything. NULL is a no-op. */
TF_API void tf_engine_destroy(tf_engine *e);
/* Bytes tf_engine_create would allocate for cfg (0 when cfg is invalid). */
TF_API uint64_t tf_engine_bytes_needed(const tf_engine_config *cfg);

/* Applies one decoded record (an OFL1 or gateway command, or an event/Heartbeat that is skipped)
 * and appends its events to sink. Returns the tf_engine_outcome (>= 0), or an error:
 * TF_E_NULL_ARG, TF_E_OFL_UNKNOWN_KIND for a kind outside the OFL1 set and the gateway kinds, or
 * TF_E_OFL_INVALID_SIDE for a side byte other than 0/1 (a malformed command: nothing changes, not
 * even last_command_seq), or the sink's failure as described above. Never allocates. */
TF_API int tf_engine_apply(tf_engine *e, const tf_ofl_msg *cmd, tf_engine_sink *sink);

/* Applies cmds[0..n) in order, exactly as n calls of tf_engine_apply with the same sink (the
 * same state, events and counters), while fetching the table and price-level memory of the next
 * commands ahead of them (for a caller that holds several decoded commands: a journal replay, a
 * pipelined connection). rc[i], when rc is not NULL, receives what tf_engine_apply would have
 * returned for cmds[i]. Returns 0, or TF_E_NULL_ARG (e, sink or cmds with n > 0 NULL, or a sink
 * with cap > 0 and no buffer) before applying anything. */
TF_API int tf_engine_apply_batch(tf_engine *e, const tf_ofl_msg *cmds, size_t n,
                                 tf_engine_sink *sink, int *rc);

/* Counters. */
typedef struct tf_engine_counters {
    uint64_t next_order_id;    /* starts at 1 */
    uint64_t last_command_seq; /* starts at 0 */
    uint64_t next_event_seq;   /* starts at 1 */
    uint64_t resting_orders;   /* live orders now */
    uint64_t price_levels;     /* non-empty price levels now, both sides of every book */
    uint64_t applied, duplicates, skipped;
    uint64_t events, trades, rejected;
} tf_engine_counters;
/* All zero for a NULL e (no-op for a NULL out). */
TF_API void tf_engine_get_counters(const tf_engine *e, tf_engine_counters *out);

/* The state hash of docs/engine.md (FNV-1a 64). O(resting orders). */
TF_API uint64_t tf_engine_state_hash(const tf_engine *e);

/* ---- queries -------------------------------------------------------------------------------- */

/* A live order as the book holds it. */
typedef struct tf_engine_order {
    uint64_t order_id;
    uint64_t account_id;
    uint64_t client_order_id;
    uint64_t instrument_id;
    int64_t price;
    uint64_t remaining;
    uint8_t side;    /* tf_ofl_side */
    uint64_t filled; /* cumulative filled quantity since accepted (a replace keeps it) */
} tf_engine_order;

/* The live order with this id: 1 (filled in), 0 (not live). */
TF_API int tf_engine_find_order(const tf_engine *e, uint64_t order_id, tf_engine_order *out);
/* The live order of (account, client order id): 1 (filled in), 0 (not live), TF_E_NULL_ARG. */
TF_API int tf_engine_find_client(const tf_engine *e, uint64_t account_id, uint64_t client_order_id,
                                 tf_engine_order *out);

/* Best price of one side: 1 (*price and *quantity, the level's total, filled in), 0 (the side is
 * empty), TF_E_INVALID_ARG (unknown instrument or side). O(1): every level keeps its total. */
TF_API int tf_engine_best(const tf_engine *e, uint64_t instrument_id, int side, int64_t *price,
                          uint64_t *quantity);

/* One price level of a depth view. total is the sum of its orders' remaining quantities
 * (saturating at UINT64_MAX: the engine keeps the exact sum, which can pass 2^64 - 1 only with
 * more than one order of nearly INT64_MAX lots). */
typedef struct tf_engine_level {
    int64_t price;
    uint64_t total;
    uint32_t orders;
} tf_engine_level;
/* Up to max levels of one side, best first. Returns how many, or TF_E_INVALID_ARG. O(levels
 * returned). */
TF_API int tf_engine_depth(const tf_engine *e, uint64_t instrument_id, int side,
                           tf_engine_level *levels, int max);
/* The level of one side at one price, O(1) through the level table: 1 (*out filled in), 0 (no
 * order at that price), TF_E_INVALID_ARG (unknown instrument or side), TF_E_NULL_ARG. */
TF_API int tf_engine_level_at(const tf_engine *e, uint64_t instrument_id, int side, int64_t price,
                              tf_engine_level *out);
/* The price of the book's last trade (an OFL1 Trade or a Fill; kept in the snapshot, not in the
 * state hash): 1 (*price filled in), 0 (no trade yet, *price = 0), TF_E_INVALID_ARG (unknown
 * instrument), TF_E_NULL_ARG. */
TF_API int tf_engine_last_trade(const tf_engine *e, uint64_t instrument_id, int64_t *price);

/* Calls fn for every live order in hash order: instruments ascending, bids (best first, oldest
 * first within a price), then asks. Stops early when fn returns non-zero and returns that. */
TF_API int tf_engine_for_each_order(const tf_engine *e,
                                    int (*fn)(void *ctx, const tf_engine_order *o), void *ctx);

/* ---- snapshots ------------------------------------------------------------------------------ */

/* A snapshot is the whole state (config, counters, every live order in priority order) in one
 * CRC32C-protected image (docs/engine.md has the format). */

/* Bytes tf_engine_snapshot_write needs for the engine's current state. */
TF_API uint64_t tf_engine_snapshot_size(const tf_engine *e);
/* Writes the snapshot into buf[0..cap). Returns the bytes written (as a 64-bit count in *len)
 * and 0, or TF_E_OFL_BUFFER_TOO_SHORT. */
TF_API int tf_engine_snapshot_write(const tf_engine *e, void *buf, uint64_t cap, uint64_t *len);
/* Builds a new engine from a snapshot image. max_orders and max_bytes of cfg_override, when it
 * is not NULL and they are non-zero, replace the snapshot's (never below its live orders). The
 * image is checked whole (magic, version, lengths, CRC, every order) before anything is built:
 * TF_E_ENGINE_SNAPSHOT (damaged or not a snapshot), TF_E_LIMIT, TF_E_NOMEM; TF_E_INVALID_ARG
 * when cfg_override's size breaks the size rule (as for tf_engine_create). */
TF_API int tf_engine_snapshot_read(const void *buf, uint64_t len,
                                   const tf_engine_config *cfg_override, tf_engine **out);
/* File helpers: written to PATH.tmp, fsync'd, renamed over PATH, directory synced. Load also
 * reads the engine service's DIR/snapshot.tfs: the image followed by a 40-byte block starting
 * "TFSB" that binds it to its journal (docs/engine-service.md); the block is ignored here. */
TF_API int tf_engine_snapshot_save(const tf_engine *e, const char *path);
TF_API int tf_engine_snapshot_load(const char *path, const tf_engine_config *cfg_override,
                                   tf_engine **out);

/* ---- instrument lists ----------------------------------------------------------------------- */

/* Parses "1-16,42" into ids[0..cap): ascending, without duplicates. Returns the count, or
 * TF_E_INVALID_ARG (syntax, 0, a reversed range), TF_E_LIMIT (more than cap). */
TF_API int tf_engine_parse_instruments(const char *s, uint64_t *ids, uint32_t cap);

/* Cancels the listed orders that are live as one command with this command_seq (duplicates
 * skipped as tf_engine_apply skips them): one Canceled per live order (a CanceledEx with reason
 * TF_OFX_CANCEL_ACCOUNT for an order a gateway command placed), in the list's order;
 * ids not live are passed over without an event. Returns the tf_engine_outcome, or
 * TF_E_NULL_ARG, or the sink's failure. Never allocates. */
TF_API int tf_engine_cancel_orders(tf_engine *e, uint64_t command_seq, const uint64_t *order_ids,
                                   size_t n, tf_engine_sink *sink);

/* ---- generated order flow ------------------------------------------------------------------- */

/* A deterministic, realistic command flow for benchmarks and tests. The generator runs an engine
 * of its own to know which orders are live, so its cancels and replaces hit live orders; client
 * order ids are unique; command_seq counts from 1; journal_seq from 0. The same config gives the
 * same records on every machine.
 *   EXCHANGE_CORE: the exchange-core benchmark's mix: about 9% limit orders (GTC), 3% market
 *     orders (IOC-like), 6% cancels, 82% replaces moving an order to a new price, around
 *     target_orders resting orders over roughly 3/4 as many price levels, a few percent of
 *     commands trading.
 *   OFL1: the OFL1 article's cycle of 20 records: 10 NewLimit, 4 CancelByOrder, 2 Replace, and 3
 *     Trade + 1 Rejected event records (copies of the generator engine's own events), which an
 *     engine reading the stream skips. */
typedef enum tf_engine_mix {
    TF_ENGINE_MIX_EXCHANGE_CORE = 0,
    TF_ENGINE_MIX_OFL1 = 1
} tf_engine_mix;

typedef struct tf_engine_flow_config {
    uint32_t size; /* sizeof(tf_engine_flow_config), or 0: the size rule of docs/api.md */
    uint32_t mix;  /* tf_engine_mix */
    uint64_t seed;
    const uint64_t *instruments; /* the instruments orders go to (NULL: instrument 1) */
    uint32_t n_instruments;
    uint32_t target_orders; /* resting orders the flow keeps (0: 1,000) */
} tf_engine_flow_config;
/* The first sized layout (through target_orders): the smallest size a caller may pass. */
#define TF_ENGINE_FLOW_CONFIG_SIZE_V1 32u

typedef struct tf_engine_flow tf_engine_flow;
/* Returns 0, TF_E_NULL_ARG, TF_E_INVALID_ARG, TF_E_NOMEM. */
TF_API int tf_engine_flow_open(const tf_engine_flow_config *cfg, tf_engine_flow **out);
/* The next record (a command, or an event record in the OFL1 mix). Never fails on an open flow:
 * returns 0, or TF_E_NULL_ARG. Never allocates. */
TF_API int tf_engine_flow_next(tf_engine_flow *f, tf_ofl_msg *out);
TF_API void tf_engine_flow_close(tf_engine_flow *f);

/* ---- self-trade prevention and account-wide cancels (docs/engine.md "Self-trade prevention") --
 */

/* What happens when an incoming order (a NewLimit, a NewMarket, or a Replace that re-matches)
 * of an account would trade with a resting order of the same account. The mode is the incoming
 * order's account's. NONE (the default) lets it trade. */
typedef enum tf_engine_stp {
    TF_ENGINE_STP_NONE = 0,
    TF_ENGINE_STP_CANCEL_NEWEST = 1, /* the incoming order's remainder is canceled */
    TF_ENGINE_STP_CANCEL_OLDEST = 2, /* the resting order is canceled, matching goes on */
    TF_ENGINE_STP_CANCEL_BOTH = 3    /* both are canceled */
} tf_engine_stp;

/* Accounts that can have a mode other than NONE at once (a table allocated at create). */
#define TF_ENGINE_STP_ACCOUNTS 4096

/* Sets an account's STP mode (NONE removes it). Not a command: no event, no sequence number;
 * a journal records it beside the commands so a replay sets it at the same place. Returns 0,
 * TF_E_NULL_ARG, TF_E_INVALID_ARG (mode out of range), TF_E_LIMIT (TF_ENGINE_STP_ACCOUNTS
 * accounts already have a mode). Never allocates. */
TF_API int tf_engine_set_stp(tf_engine *e, uint64_t account_id, int mode);
/* Every account's mode back to NONE (a venue's new config starts from none). No-op for NULL. */
TF_API void tf_engine_clear_stp(tf_engine *e);
/* The account's mode (TF_ENGINE_STP_NONE for NULL e or an account without one). */
TF_API int tf_engine_get_stp(const tf_engine *e, uint64_t account_id);
/* Accounts with a mode other than NONE. */
TF_API uint32_t tf_engine_stp_count(const tf_engine *e);

/* Counts an account's live orders from now on (on = 1; 0 stops), for a venue's open-order limit.
 * Starting counts the live orders once (O(live orders)); after that each order resting or leaving
 * costs a binary search over the tracked and STP accounts, and nothing while none is tracked.
 * Shares the TF_ENGINE_STP_ACCOUNTS table with the STP modes. Not part of the state hash or the
 * snapshot. Returns 0, TF_E_NULL_ARG, TF_E_LIMIT. Never allocates. */
TF_API int tf_engine_track_account(tf_engine *e, uint64_t account_id, int on);
/* A tracked account's live orders, or -1 (NULL e, not tracked). */
TF_API int64_t tf_engine_account_orders(const tf_engine *e, uint64_t account_id);

/* The best price of one side, without the level's total (O(1)): 1 (*price filled in), 0 (the
 * side is empty), TF_E_INVALID_ARG (unknown instrument or side), TF_E_NULL_ARG. */
TF_API int tf_engine_best_price(const tf_engine *e, uint64_t instrument_id, int side,
                                int64_t *price);

/* Cancels every live order of an account as one command with this command_seq (duplicates are
 * skipped as tf_engine_apply skips them): one Canceled event per order (a CanceledEx with reason
 * TF_OFX_CANCEL_ACCOUNT for an order a gateway command placed), in hash order. A walk
 * of every book: O(live orders + price levels), whatever the account's share of them.
 * Returns the tf_engine_outcome, or TF_E_NULL_ARG, or the sink's failure. Never allocates. */
TF_API int tf_engine_cancel_account(tf_engine *e, uint64_t command_seq, uint64_t account_id,
                                    tf_engine_sink *sink);

/* Formats a state hash as the spec prints it: "0x" and 16 lowercase hex digits (19 bytes). */
TF_API void tf_engine_format_hash(uint64_t hash, char out[19]);

#endif

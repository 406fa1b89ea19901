/* The order engine's slow model: docs/engine.md written as plainly as possible, for differential
 * tests of the fast engine (src/engine/) only. Never used by the library.
 *
 * Everything is a linear scan over one flat array of live orders; time priority is a global
 * insertion counter (an order that loses its priority gets a fresh value). Nothing here is meant
 * to be fast or to avoid allocation: it is meant to be obviously what the spec says.
 *
 * Decisions where the spec leaves room (each mirrored by a comment at the code):
 *   - NewMarket runs checks 1, 2, 4 only, as the spec lists them: a market order never rests, so
 *     the live-order limit (--max-orders) does not apply to it. Replace has no limit check either
 *     (it never adds a live order).
 *   - Replace check 4 compares the new client id with the order's own: a Replace that keeps its
 *     client id never fails check 4.
 *   - A decoded command with a side byte other than 0/1 cannot come off the wire (the codec
 *     refuses it); the spec calls such a record malformed: no event, no change. The model returns
 *     TF_E_OFL_INVALID_SIDE for it and changes nothing (not even last_command_seq).
 *   - A kind outside the closed OFL1 set and the gateway commands (including the reserved 0x06,
 *     0x40, 0xA0) returns TF_E_OFL_UNKNOWN_KIND and changes nothing; the gateway events
 *     (0x91-0x95) are skipped as the OFL1 events are.
 *   - Gateway commands (docs/engine.md "Gateway commands and execution reports"): a FOK order
 *     counts every acceptable opposite order, the account's own included; a rejected
 *     ReplaceByClient reports the new client id; a limit order of any tif needs a free live-order
 *     slot, a market order none.
 */
#ifndef TF_ENGINE_MODEL_H
#define TF_ENGINE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "tollfree/orderflow.h"

/* em_apply's outcomes: the same numbers as tf_engine_outcome. */
#define EM_APPLIED 0
#define EM_DUPLICATE 1
#define EM_SKIPPED 2

typedef struct em_model em_model;

/* A live order as the model holds it. `time` is the priority stamp: lower = older. */
typedef struct em_order {
    uint64_t order_id;
    uint64_t account_id;
    uint64_t client_order_id;
    uint64_t instrument_id;
    int64_t price;
    uint64_t remaining;
    uint64_t time;
    uint8_t side;    /* tf_ofl_side */
    uint64_t filled; /* cumulative filled quantity since accepted (a replace keeps it) */
    uint8_t gateway; /* 1: a gateway command placed it (an account-wide cancel reports it so) */
} em_order;

typedef struct em_counters {
    uint64_t next_order_id;    /* starts at 1 */
    uint64_t last_command_seq; /* starts at 0 */
    uint64_t next_event_seq;   /* starts at 1 */
    uint64_t resting_orders;   /* live orders now */
    uint64_t price_levels;     /* distinct (instrument, side, price) among live orders */
    uint64_t applied, duplicates, skipped;
    uint64_t events, trades, rejected;
} em_counters;

/* instruments: any order, no duplicates, none 0, n >= 1; max_orders >= 1 (the live-order limit).
 * Returns 0, TF_E_NULL_ARG, TF_E_INVALID_ARG or TF_E_NOMEM. */
int em_create(const uint64_t *instruments, uint32_t n, uint32_t max_orders, em_model **out);
/* NULL is a no-op. */
void em_destroy(em_model *m);

/* Applies one decoded record. Returns EM_APPLIED, EM_DUPLICATE, EM_SKIPPED, or an error:
 * TF_E_NULL_ARG, TF_E_OFL_UNKNOWN_KIND / TF_E_OFL_INVALID_SIDE (nothing changed), TF_E_NOMEM, or
 * TF_E_LIMIT when the command's events do not fit in events[0..cap): the command is applied
 * anyway (like the fast engine without a flush callback), the first cap events are copied, and
 * *n_events is the full count. The model keeps every event of the last command in its own
 * growing array (em_last_events), so a caller may pass events = NULL, cap = 0 and read them
 * there. Every event has every field set: event_seq contiguous from 1, command_seq,
 * timestamp_ns = command_seq, journal_seq = 0, session_id = 0; unused bytes of the union are 0. */
int em_apply(em_model *m, const tf_ofl_msg *cmd, tf_ofl_msg *events, size_t cap, size_t *n_events);

/* The events of the last em_apply call. The pointer is valid until the next em_apply or
 * em_destroy. */
const tf_ofl_msg *em_last_events(const em_model *m, size_t *n);

/* The state hash of docs/engine.md (FNV-1a 64). */
uint64_t em_state_hash(const em_model *m);

void em_get_counters(const em_model *m, em_counters *out);

/* The live order with this id: 1 (filled in), 0 (not live). */
int em_find_order(const em_model *m, uint64_t order_id, em_order *out);

/* Best price of one side and the total of that level (saturating at UINT64_MAX): 1, 0 (empty),
 * TF_E_INVALID_ARG (unknown instrument or side). */
int em_best(const em_model *m, uint64_t instrument_id, int side, int64_t *price,
            uint64_t *quantity);

/* Every live order in hash order (instruments ascending; bids best first, oldest first; then
 * asks), written to out[0..cap). Returns the number of live orders (may exceed cap). */
size_t em_orders_in_order(const em_model *m, em_order *out, size_t cap);

/* The live order of (account, client id): 1 (filled in), 0 (not live). */
int em_find_client(const em_model *m, uint64_t account_id, uint64_t client_order_id, em_order *out);

/* The level at one price: *total (the sum of its remaining quantities, saturating) and *orders.
 * 1 (some order there), 0 (none), TF_E_INVALID_ARG (unknown instrument or side). */
int em_level_at(const em_model *m, uint64_t instrument_id, int side, int64_t price, uint64_t *total,
                uint32_t *orders);

/* Up to max distinct prices of one side, best first. Returns how many, or TF_E_INVALID_ARG. */
int em_depth(const em_model *m, uint64_t instrument_id, int side, int64_t *prices, int max);

/* The price of the book's last trade: 1, 0 (none yet, *price = 0), TF_E_INVALID_ARG. */
int em_last_trade(const em_model *m, uint64_t instrument_id, int64_t *price);

/* The k-th entry of the flat array (0 <= k < resting orders), in no particular order: lets a
 * stream generator aim at live orders. Returns 1, or 0 when k is out of range. */
int em_live_at(const em_model *m, size_t k, em_order *out);

/* Self-trade prevention: the account's mode (tf_engine_stp values; NONE removes it). Returns 0,
 * TF_E_INVALID_ARG, TF_E_LIMIT (TF_ENGINE_STP_ACCOUNTS accounts already set). Incoming orders of
 * an account with a mode never trade with the same account's resting orders (docs/engine.md). */
int em_set_stp(em_model *m, uint64_t account, int mode);

/* Cancels every live order of the account as one command (duplicate check as em_apply): one
 * Canceled per order in hash order, read with em_last_events. EM_APPLIED, EM_DUPLICATE or
 * TF_E_NOMEM. */
int em_cancel_account(em_model *m, uint64_t command_seq, uint64_t account);

#endif

/* What the venue's pre-trade checks read of the engine (src/venue/risk.c, docs/venue.md "Risk"),
 * in one call each, without the argument checks and copies of the public queries: a check runs
 * before every order command, so it reads the few fields it needs straight from the pools.
 * Implemented in stp.c, beside the per-account counts the checks also read.
 *
 * Only for an engine the caller holds (no NULL checks). Nothing here changes the engine's state
 * (the lookup hint is not state: it is checked before it is used, never hashed or saved).
 */
#ifndef TF_ENGINE_RISK_VIEW_H
#define TF_ENGINE_RISK_VIEW_H

#include <stdint.h>

#include "tollfree/engine.h"

/* A live order as the checks see it, with what its book offers a price band as reference. */
typedef struct eng_order_brief {
    uint64_t account_id;
    int64_t price;
    uint64_t remaining;
    int64_t book_ref;   /* its book's best of the opposite side, else of its own; 0: empty */
    int64_t last_trade; /* its book's last trade price (tf_engine_last_trade); 0: none yet */
    uint8_t side;       /* tf_ofl_side */
} eng_order_brief;

/* 1 with *out when order_id is live, else 0. Also leaves the order's pool slot as the engine's
 * hint (e->hint), so that the command applied next finds the order without a second table
 * lookup (engine.c checks the hint against the slot's entry before trusting it). */
int eng_order_brief_of(tf_engine *e, uint64_t order_id, eng_order_brief *out);
/* The same for the live order (account_id, client_order_id), for a ReplaceByClient. */
int eng_client_brief_of(tf_engine *e, uint64_t account_id, uint64_t client_order_id,
                        eng_order_brief *out);

/* A price band's reference for an order of `side` (0 or 1) on instrument_id: with `last`, the
 * instrument's last trade price once it has traded; otherwise, or before any trade, the best price
 * of the opposite side (where the order would trade first), else the best of its own side; 0 when
 * there is none of these or the engine does not trade the instrument. */
int64_t eng_band_ref(const tf_engine *e, uint64_t instrument_id, int side, int last);

/* The live orders of a counted account (tf_engine_track_account), 0 for one not counted: the
 * count tf_engine_account_orders gives, without its argument check. */
uint64_t eng_account_open(const tf_engine *e, uint64_t account_id);

#endif

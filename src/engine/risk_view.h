/* What the venue's pre-trade checks read of the engine (src/venue/risk.c, docs/venue.md "Risk"),
 * without the argument checks and copies of the public queries: a check runs before every order
 * command, so it reads the few fields it needs straight from the pools.
 *
 * Inline over the engine's internals (engine_internal.h): a Replace, the most frequent order
 * command, is checked in one function with no call but the order's table lookup, and no copy of
 * the order (a call that copied a brief of the order out cost about a third of the check). The
 * venue reads only what is named here; the counts of tracked accounts stay in stp.c.
 *
 * Only for an engine the caller holds (no NULL checks). Nothing here changes the engine's state
 * (the lookup hint is not state: it is checked before it is used, never hashed or saved).
 */
#ifndef TF_ENGINE_RISK_VIEW_H
#define TF_ENGINE_RISK_VIEW_H

#include <stdint.h>

#include "engine/engine_internal.h"
#include "tollfree/engine.h"

/* The pool slot of the live order order_id, 0 when it is not live. A slot found is left as the
 * engine's hint (e->hint), so that the command applied next finds the order without a second
 * table lookup (engine.c checks the hint against the slot's entry before trusting it). The
 * order's fields (account, price, remaining, tree = book * 2 + side) are valid until the engine
 * applies the next command. */
static inline uint32_t eng_risk_find(tf_engine *e, uint64_t order_id)
{
    uint32_t oi = eng_find_id(e, order_id);
    if (oi)
        e->hint = oi;
    return oi;
}

/* The same for the live order (account_id, client_order_id), for a ReplaceByClient. */
static inline uint32_t eng_risk_find_client(tf_engine *e, uint64_t account_id,
                                            uint64_t client_order_id)
{
    uint32_t oi = eng_find_client(e, account_id, client_order_id);
    if (oi)
        e->hint = oi;
    return oi;
}

/* The slot eng_risk_find or eng_risk_find_client found last (while the engine has applied no
 * command since). */
static inline uint32_t eng_risk_hint(const tf_engine *e)
{
    return e->hint;
}

static inline const eng_order *eng_risk_order(const tf_engine *e, uint32_t oi)
{
    return &e->orders[oi];
}

/* A price band's reference for an order on tree (book * 2 + side): with `last`, the book's last
 * trade price once it has traded; otherwise, or before any trade, the best price of the opposite
 * side (where the order would trade first), else the best of its own side; 0 when there is none
 * of these. Read when a band needs it, never copied ahead. */
static inline int64_t eng_risk_ref(const tf_engine *e, uint32_t tree, int last)
{
    if (last && e->last_trade[tree >> 1])
        return e->last_trade[tree >> 1];
    uint32_t t = tree ^ 1, li = e->sides[t].best;
    if (!li && !(li = e->sides[t = tree].best))
        return 0;
    /* eng_level_price with the side known from the tree rather than read from the level: key
     * is -price on the bid side, price on the ask side (a select, not a branch: the side is a
     * coin toss in a flow of buys and sells) */
    int64_t key = e->levels[li].key;
    return (t & 1) == TF_OFL_BUY ? -key : key;
}

/* eng_book_of from its direct table, inline: the book of instrument_id, -1 when the engine does
 * not trade it, or ENG_BOOK_SEARCH when the engine has no direct table (its ids are too sparse:
 * eng_book_of searches). */
#define ENG_BOOK_SEARCH (-2)
static inline int eng_risk_book(const tf_engine *e, uint64_t instrument_id)
{
    if (!e->direct)
        return ENG_BOOK_SEARCH;
    uint64_t off = instrument_id - e->direct_base; /* wraps for ids below the base */
    return off < e->direct_len ? (int)e->direct[off] - 1 : -1;
}

/* The same for a new order of `side` (0 or 1) on the book (eng_risk_book, eng_book_of); 0 when
 * the engine does not trade the instrument (book < 0). */
static inline int64_t eng_band_ref(const tf_engine *e, int book, int side, int last)
{
    return book < 0 ? 0 : eng_risk_ref(e, (uint32_t)book * 2 + (uint32_t)(side & 1), last);
}

/* The live orders of a counted account (tf_engine_track_account), 0 for one not counted: the
 * count tf_engine_account_orders gives, without its argument check (stp.c). */
uint64_t eng_account_open(const tf_engine *e, uint64_t account_id);

/* The same, inline when the accounts with settings are consecutive ids (a venue's 1..N): the
 * entry of account a is then a - stp[0].account places in (stp.c, find()); else ENG_OPEN_SEARCH
 * (never a count: counts are below max_orders), where eng_account_open searches. The table is
 * allocated whole at create, so stp[0] is readable even while it has no entry. */
#define ENG_OPEN_SEARCH UINT64_MAX
static inline uint64_t eng_risk_open_at(const tf_engine *e, uint64_t account_id)
{
    uint64_t d = account_id - e->stp[0].account; /* wraps for an account below the first */
    if (d < e->n_stp && e->stp[d].account == account_id)
        return e->stp[d].tracked ? e->stp[d].open : 0;
    return ENG_OPEN_SEARCH;
}

static inline uint64_t eng_risk_open(const tf_engine *e, uint64_t account_id)
{
    uint64_t n = eng_risk_open_at(e, account_id);
    return n != ENG_OPEN_SEARCH ? n : eng_account_open(e, account_id);
}

#endif

/* The order engine: create, apply one command (validation, matching, events), destroy. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/opts_size.h"
#include "engine/engine_internal.h"
#include "orderflow/orderflow_internal.h"

/* Every command payload starts with command_seq (tf_engine_apply reads it through new_limit). */
#define SEQ_FIRST(m)                                                                               \
    _Static_assert(offsetof(tf_ofl_msg, m.command_seq) ==                                          \
                       offsetof(tf_ofl_msg, new_limit.command_seq),                                \
                   #m ": command_seq first")
SEQ_FIRST(new_market);
SEQ_FIRST(cancel_by_order);
SEQ_FIRST(cancel_by_client);
SEQ_FIRST(replace);
SEQ_FIRST(order);
SEQ_FIRST(cancel);
SEQ_FIRST(replace_by_client);
#undef SEQ_FIRST

/* ---- create / destroy ----------------------------------------------------------------------- */

/* The caller's config read under the one size rule (docs/api.md, "Growable structs": 0 is this
 * layout, an older one at least through max_bytes, a newer one only with its unknown bytes zero)
 * into *c, then checked. 1 when it is usable. */
_Static_assert(TF_ENGINE_CONFIG_SIZE_V1 == TFU_FIELD_END(tf_engine_config, max_bytes),
               "the first sized layout of tf_engine_config ends at max_bytes");

static int config_load(const tf_engine_config *cfg, tf_engine_config *c)
{
    if (!cfg || tfu_opts_load_n(c, sizeof *c, cfg, cfg->size, TF_ENGINE_CONFIG_SIZE_V1))
        return 0;
    c->size = sizeof *c;
    return c->instruments && c->n_instruments >= 1 &&
           c->n_instruments <= TF_ENGINE_MAX_INSTRUMENTS && c->max_orders >= 1 &&
           c->max_orders <= TF_ENGINE_MAX_ORDERS;
}

/* A direct id -> book table pays when it is at most a few times the number of books. */
static uint64_t direct_len(const uint64_t *sorted, uint32_t n)
{
    uint64_t span = sorted[n - 1] - sorted[0] + 1;
    return span <= 4ull * n + 4096 ? span : 0;
}

uint64_t tf_engine_bytes_needed(const tf_engine_config *in)
{
    tf_engine_config c;
    if (!config_load(in, &c))
        return 0;
    const tf_engine_config *cfg = &c;
    uint64_t n = cfg->n_instruments, m = cfg->max_orders;
    uint64_t bytes = sizeof(tf_engine) + n * 8 + 2 * n * sizeof(eng_side);
    bytes += (m + 2) * (sizeof(eng_order) + sizeof(eng_level)); /* a spare entry each to align */
    bytes += 6 * tfu_table_capacity(m) * sizeof(uint32_t);      /* tables and their spares */
    /* the direct table, at its largest (its size depends on the ids' spread) */
    bytes += (4 * n + 4096) * sizeof(uint32_t);
    bytes += eng_ladder_bytes(cfg->n_instruments);
    bytes += TF_ENGINE_STP_ACCOUNTS * sizeof(eng_stp);
    bytes += n * sizeof(int64_t); /* last trade prices */
    bytes += m + 1;               /* by_gateway */
    return bytes;
}

int tf_engine_create(const tf_engine_config *in, tf_engine **out)
{
    if (!out)
        return TF_E_NULL_ARG;
    *out = NULL;
    if (!in)
        return TF_E_NULL_ARG;
    tf_engine_config c;
    if (!config_load(in, &c))
        return TF_E_INVALID_ARG;
    const tf_engine_config *cfg = &c;
    if (cfg->max_bytes && tf_engine_bytes_needed(cfg) > cfg->max_bytes)
        return TF_E_LIMIT;
    tf_engine *e = calloc(1, sizeof *e);
    if (!e)
        return TF_E_NOMEM;
    uint32_t n = cfg->n_instruments;
    e->n_books = n;
    e->max_orders = cfg->max_orders;
    e->max_bytes = cfg->max_bytes;
    e->next_order_id = 1;
    e->next_event_seq = 1;
    e->prefetch_live = ENG_PREFETCH_LIVE;
    int rc = TF_E_NOMEM;
    e->instrument = malloc(n * sizeof *e->instrument);
    if (!e->instrument)
        goto fail;
    memcpy(e->instrument, cfg->instruments, n * sizeof *e->instrument);
    qsort(e->instrument, n, sizeof *e->instrument, eng_cmp_u64);
    rc = TF_E_INVALID_ARG;
    for (uint32_t i = 0; i < n; i++)
        if (e->instrument[i] == 0 || (i && e->instrument[i] == e->instrument[i - 1]))
            goto fail;
    rc = TF_E_NOMEM;
    uint64_t dl = direct_len(e->instrument, n);
    if (dl) {
        e->direct = calloc(dl, sizeof *e->direct);
        if (!e->direct)
            goto fail;
        e->direct_base = e->instrument[0];
        e->direct_len = dl;
        for (uint32_t i = 0; i < n; i++)
            e->direct[e->instrument[i] - e->direct_base] = i + 1;
    }
    uint64_t m = cfg->max_orders;
    e->sides = calloc(2 * (size_t)n, sizeof *e->sides);
    /* one spare entry to align each pool to a cache line (calloc's pages stay untouched) */
    e->orders_mem = calloc(m + 2, sizeof *e->orders);
    if (e->orders_mem)
        e->orders = (eng_order *)(((uintptr_t)e->orders_mem + 63) & ~(uintptr_t)63);
    e->levels_mem = calloc(m + 2, sizeof *e->levels);
    if (e->levels_mem)
        e->levels = (eng_level *)(((uintptr_t)e->levels_mem + 63) & ~(uintptr_t)63);
    e->stp = calloc(TF_ENGINE_STP_ACCOUNTS, sizeof *e->stp);
    e->last_trade = calloc(n, sizeof *e->last_trade);
    e->by_gateway = calloc(m + 1, 1);
    if (!e->sides || !e->orders || !e->levels || !e->stp || !e->last_trade || !e->by_gateway)
        goto fail;
    if ((rc = tfu_table_init(&e->by_id, m)) || (rc = tfu_table_init(&e->by_client, m)) ||
        (rc = tfu_table_init(&e->by_price, m)) || (rc = eng_ladder_init(e)))
        goto fail;
    /* The pools are handed out front to back (fresh_order/fresh_level) before their free lists
     * are used, so pages of a large pool are touched only when orders need them. */
    e->fresh_order = e->fresh_level = 1;
    *out = e;
    return 0;
fail:
    tf_engine_destroy(e);
    return rc;
}

void tf_engine_destroy(tf_engine *e)
{
    if (!e)
        return;
    tfu_table_fini(&e->by_id);
    tfu_table_fini(&e->by_client);
    tfu_table_fini(&e->by_price);
    free(e->stp);
    free(e->last_trade);
    free(e->by_gateway);
    free(e->levels_mem);
    free(e->lad_mem);
    free(e->orders_mem);
    free(e->sides);
    free(e->direct);
    free(e->instrument);
    free(e);
}

/* ---- events --------------------------------------------------------------------------------- */

/* The next event slot, or NULL when the sink cannot take more (the event is still counted: the
 * state, event_seq included, never depends on the sink). */
static inline tf_ofl_msg *emit(tf_engine *e, uint8_t kind)
{
    uint64_t seq = e->next_event_seq++;
    e->events++;
    tf_engine_sink *s = e->sink;
    if (s->n == s->cap) {
        if (e->sink_err)
            return NULL;
        if (!s->flush) {
            e->sink_err = TF_E_LIMIT;
            return NULL;
        }
        int rc = s->flush(s->ctx, s->ev, s->n);
        if (rc < 0) {
            e->sink_err = rc;
            return NULL;
        }
        s->n = 0;
        if (!s->cap) {
            e->sink_err = TF_E_LIMIT;
            return NULL;
        }
    }
    tf_ofl_msg *m = &s->ev[s->n++];
    m->kind = kind;
    m->journal_seq = 0;
    m->session_id = 0;
    /* Every event payload starts with event_seq, command_seq, timestamp_ns. */
    m->accepted.event_seq = seq;
    m->accepted.command_seq = e->now;
    m->accepted.timestamp_ns = e->now;
    return m;
}

static void emit_rejected(tf_engine *e, uint64_t coid, uint8_t reason)
{
    e->rejected++;
    tf_ofl_msg *m = emit(e, TF_OFL_REJECTED);
    if (m) {
        m->rejected.client_order_id = coid;
        m->rejected.reason = reason;
    }
}

static void emit_accepted(tf_engine *e, uint64_t id, uint64_t coid, uint64_t account)
{
    tf_ofl_msg *m = emit(e, TF_OFL_ACCEPTED);
    if (m) {
        m->accepted.order_id = id;
        m->accepted.client_order_id = coid;
        m->accepted.account_id = account;
    }
}

static void emit_canceled(tf_engine *e, uint64_t id)
{
    tf_ofl_msg *m = emit(e, TF_OFL_CANCELED);
    if (m)
        m->canceled.order_id = id;
}

static void emit_rejected_ex(tf_engine *e, uint64_t account, uint64_t coid, uint8_t reason)
{
    e->rejected++;
    tf_ofl_msg *m = emit(e, TF_OFX_REJECTED);
    if (m) {
        m->rejected_ex.account_id = account;
        m->rejected_ex.client_order_id = coid;
        m->rejected_ex.reason = reason;
    }
}

/* A CanceledEx: the order's state when it left (remaining is the quantity canceled). */
typedef struct ex_order {
    uint64_t id, coid, account, instrument;
    int64_t price;
    uint64_t remaining, filled;
    uint8_t side;
} ex_order;

static void emit_canceled_ex(tf_engine *e, const ex_order *o, uint8_t reason)
{
    tf_ofl_msg *m = emit(e, TF_OFX_CANCELED);
    if (m) {
        m->canceled_ex.order_id = o->id;
        m->canceled_ex.client_order_id = o->coid;
        m->canceled_ex.account_id = o->account;
        m->canceled_ex.instrument_id = o->instrument;
        m->canceled_ex.price = o->price;
        m->canceled_ex.remaining = o->remaining;
        m->canceled_ex.filled = o->filled;
        m->canceled_ex.side = o->side;
        m->canceled_ex.reason = reason;
    }
}

/* One match of `taker` (side `side`) with the maker `o` at `price` for q lots;
 * its remaining and filled are already the maker's after it. An OFL1 command emits a Trade, a
 * gateway command a Fill. */
static inline void emit_trade(tf_engine *e, uint32_t book, const eng_order *o, uint64_t taker,
                              int side, int64_t price, uint64_t q)
{
    e->trades++;
    tf_ofl_msg *m;
    if (!e->ext) {
        m = emit(e, TF_OFL_TRADE);
        if (m) {
            m->trade.maker_order_id = o->id;
            m->trade.taker_order_id = taker;
            m->trade.instrument_id = e->instrument[book];
            m->trade.price = price;
            m->trade.quantity.lo = q;
            m->trade.quantity.hi = 0;
        }
        return;
    }
    m = emit(e, TF_OFX_FILL);
    if (m) {
        m->fill.maker_order_id = o->id;
        m->fill.taker_order_id = taker;
        m->fill.maker_client_order_id = o->coid;
        m->fill.taker_client_order_id = e->taker_coid;
        m->fill.maker_account_id = o->account;
        m->fill.taker_account_id = e->taker_account;
        m->fill.instrument_id = e->instrument[book];
        m->fill.price = price;
        m->fill.quantity = q;
        m->fill.maker_remaining = o->remaining;
        m->fill.maker_filled = o->filled;
        m->fill.taker_side = (uint8_t)side;
    }
}

/* ---- matching ------------------------------------------------------------------------------- */

/* The aggressor (order id `taker`, side `side` of book `book`) takes from the opposite side
 * while it has quantity and the best opposite level is acceptable: key <= the limit's key on the
 * opposite side (for a buy at P the asks' keys are prices: ask <= P; for a sell at P the bids'
 * keys are -bid: -bid <= -P). A market order passes INT64_MAX. Returns what is left. */
static uint64_t match(tf_engine *e, uint32_t book, int side, uint64_t taker, int64_t limit_key,
                      uint64_t qty)
{
    eng_side *opp = &e->sides[book * 2 + (side ^ 1)];
    while (qty && opp->best) {
        eng_level *l = &e->levels[opp->best];
        if (l->key > limit_key)
            break;
        int64_t price = eng_level_price(l);
        e->last_trade[book] = price;
        uint32_t oi = l->head;
        for (;;) {
            eng_order *o = &e->orders[oi];
            uint64_t q = qty < o->remaining ? qty : o->remaining;
            qty -= q;
            o->remaining -= q;
            o->filled += q;
            eng_total_sub(l, q);
            emit_trade(e, book, o, taker, side, price, q);
            if (o->remaining)
                return 0; /* the aggressor is done; the maker keeps its place */
            uint32_t next = o->next;
            int last = l->n_orders == 1;
            eng_unlink(e, oi); /* frees the level with its last order */
            eng_forget(e, oi);
            if (last || !qty)
                break;
            oi = next;
        }
    }
    return qty;
}

/* The same walk for an aggressor whose account has an STP mode: one maker per step, and a
 * maker of the same account is not traded with. CANCEL_OLDEST cancels the maker (Canceled) and
 * goes on; CANCEL_NEWEST stops and sets *stopped (the caller cancels the aggressor's remainder);
 * CANCEL_BOTH cancels the maker, then stops. Returns what is left. */
static uint64_t match_stp(tf_engine *e, uint32_t book, int side, uint64_t taker, uint64_t account,
                          int mode, int64_t limit_key, uint64_t qty, int *stopped)
{
    eng_side *opp = &e->sides[book * 2 + (side ^ 1)];
    while (qty && opp->best) {
        eng_level *l = &e->levels[opp->best];
        if (l->key > limit_key)
            break;
        uint32_t oi = l->head;
        eng_order *o = &e->orders[oi];
        if (o->account == account) {
            if (mode != TF_ENGINE_STP_CANCEL_NEWEST) {
                e->cancel_reason = TF_OFX_CANCEL_SELF_TRADE;
                eng_cancel_order(e, oi);
            }
            if (mode != TF_ENGINE_STP_CANCEL_OLDEST) {
                *stopped = 1;
                return qty;
            }
            continue;
        }
        int64_t price = eng_level_price(l);
        e->last_trade[book] = price;
        uint64_t q = qty < o->remaining ? qty : o->remaining;
        qty -= q;
        o->remaining -= q;
        o->filled += q;
        eng_total_sub(l, q);
        emit_trade(e, book, o, taker, side, price, q);
        if (!o->remaining) {
            eng_unlink(e, oi);
            eng_forget(e, oi);
        }
    }
    return qty;
}

/* match, or match_stp when the aggressor's account has a mode (looked up only while some
 * account has one, so an engine without STP settings pays one compare). */
static uint64_t match_call(tf_engine *e, uint32_t book, int side, uint64_t taker, uint64_t account,
                           int64_t limit_key, uint64_t qty, int *stopped)
{
    int mode = e->n_modes ? eng_stp_mode(e, account) : TF_ENGINE_STP_NONE;
    if (mode == TF_ENGINE_STP_NONE)
        return match(e, book, side, taker, limit_key, qty);
    return match_stp(e, book, side, taker, account, mode, limit_key, qty, stopped);
}

/* match_call when the best opposite level is acceptable; else nothing trades, with or without
 * a mode (most orders and replaces do not cross, and this test spares them the call). */
__attribute__((always_inline)) static inline uint64_t match_any(tf_engine *e, uint32_t book,
                                                                int side, uint64_t taker,
                                                                uint64_t account, int64_t limit_key,
                                                                uint64_t qty, int *stopped)
{
    *stopped = 0;
    uint32_t best = e->sides[book * 2 + (uint32_t)(side ^ 1)].best;
    if (!best || e->levels[best].key > limit_key)
        return qty;
    return match_call(e, book, side, taker, account, limit_key, qty, stopped);
}

/* 1 when the acceptable levels opposite (keys <= limit_key) hold at least qty lots in all:
 * a walk of level totals, best first, that stops as soon as it has enough. */
static int fillable(const tf_engine *e, uint32_t book, int side, int64_t limit_key, uint64_t qty)
{
    const eng_side *opp = &e->sides[book * 2 + (uint32_t)(side ^ 1)];
    for (uint32_t li = opp->best; li; li = eng_tree_next(e, li)) {
        const eng_level *l = &e->levels[li];
        if (l->key > limit_key)
            return 0;
        if (l->total_hi || l->total_lo >= qty)
            return 1;
        qty -= l->total_lo;
    }
    return 0;
}

/* ---- commands ------------------------------------------------------------------------------- */

static int qty_ok(tf_ofl_qty q)
{
    return q.hi == 0 && q.lo >= 1 && q.lo <= (uint64_t)INT64_MAX;
}

#define OK (-1)

/* The checks of NewLimit and NewMarket, in the spec's order: the first failing one's reason. */
static int check_new(const tf_engine *e, int book, uint64_t account, uint64_t coid, tf_ofl_qty q,
                     const int64_t *limit_price)
{
    if (book < 0)
        return TF_OFL_UNKNOWN_INSTRUMENT;
    if (!qty_ok(q))
        return TF_OFL_INVALID_QUANTITY;
    if (limit_price && *limit_price <= 0)
        return TF_OFL_INVALID_PRICE;
    if (eng_find_client(e, account, coid))
        return TF_OFL_DUPLICATE_CLIENT_ORDER_ID;
    /* Only an order that may rest needs a slot: a market order never rests. */
    if (limit_price && e->live >= e->max_orders)
        return TF_OFL_REASON_OTHER;
    return OK;
}

static void new_limit(tf_engine *e, const tf_ofl_new_limit *c)
{
    int book = eng_book_of(e, c->instrument_id);
    int reason = check_new(e, book, c->account_id, c->client_order_id, c->quantity, &c->price);
    if (reason != OK) {
        emit_rejected(e, c->client_order_id, (uint8_t)reason);
        return;
    }
    uint64_t id = e->next_order_id++;
    emit_accepted(e, id, c->client_order_id, c->account_id);
    int side = c->side, stopped;
    uint64_t left = match_any(e, (uint32_t)book, side, id, c->account_id,
                              eng_key(side ^ 1, c->price), c->quantity.lo, &stopped);
    if (stopped)
        emit_canceled(e, id); /* self-trade prevention: the remainder does not rest */
    else if (left) {
        uint32_t oi = eng_rest(e, (uint32_t)book * 2 + (uint32_t)side, c->price, id, c->account_id,
                               c->client_order_id, left);
        if (left != c->quantity.lo) /* eng_rest set 0 */
            e->orders[oi].filled = c->quantity.lo - left;
    }
}

static void new_market(tf_engine *e, const tf_ofl_new_market *c)
{
    int book = eng_book_of(e, c->instrument_id);
    int reason = check_new(e, book, c->account_id, c->client_order_id, c->quantity, NULL);
    if (reason != OK) {
        emit_rejected(e, c->client_order_id, (uint8_t)reason);
        return;
    }
    uint64_t id = e->next_order_id++;
    emit_accepted(e, id, c->client_order_id, c->account_id);
    int stopped;
    if (match_any(e, (uint32_t)book, c->side, id, c->account_id, INT64_MAX, c->quantity.lo,
                  &stopped))
        emit_canceled(e, id);
}

static void ex_of(const tf_engine *e, uint32_t oi, ex_order *x)
{
    const eng_order *o = &e->orders[oi];
    *x = (ex_order){.id = o->id,
                    .coid = o->coid,
                    .account = o->account,
                    .instrument = e->instrument[o->tree >> 1],
                    .price = o->price,
                    .remaining = o->remaining,
                    .filled = o->filled,
                    .side = (uint8_t)(o->tree & 1)};
}

void eng_cancel_order(tf_engine *e, uint32_t oi)
{
    ex_order x;
    if (e->ext)
        ex_of(e, oi, &x);
    uint64_t id = e->orders[oi].id;
    eng_unlink(e, oi);
    eng_forget(e, oi);
    if (e->ext)
        emit_canceled_ex(e, &x, e->cancel_reason);
    else
        emit_canceled(e, id);
}

/* Replace's checks 1-4 for the live order oi (0: not live), in the spec's order. A new client
 * id's duplicate probe leaves in *to where it stopped: replace_order moves the order's entry
 * there. */
static inline __attribute__((always_inline)) int check_replace(const tf_engine *e, uint32_t oi,
                                                               uint64_t coid, int64_t price,
                                                               tf_ofl_qty q, uint64_t *to)
{
    if (!oi)
        return TF_OFL_ORDER_NOT_FOUND;
    if (!qty_ok(q))
        return TF_OFL_INVALID_QUANTITY;
    if (price <= 0)
        return TF_OFL_INVALID_PRICE;
    const eng_order *o = &e->orders[oi];
    if (coid != o->coid && eng_find_client_at(e, o->account, coid, to))
        return TF_OFL_DUPLICATE_CLIENT_ORDER_ID;
    return OK;
}

/* A checked replace of the live order oi, after its Replaced/ReplacedEx: the new client id (its
 * client-table entry moved from slot `from` to slot `to`, check_replace's), then either the same
 * place (same price, quantity <= remaining) or out of the book, a match as aggressor and the
 * remainder back at the new price. */
__attribute__((always_inline)) static inline void replace_order(tf_engine *e, uint32_t oi,
                                                                uint64_t coid, int64_t price,
                                                                uint64_t qty, uint64_t from,
                                                                uint64_t to)
{
    eng_order *o = &e->orders[oi];
    if (coid != o->coid)
        eng_set_client(e, oi, coid, from, to);
    if (price == o->price && qty <= o->remaining) {
        eng_total_sub(&e->levels[o->level], o->remaining - qty);
        o->remaining = qty; /* keeps its time priority */
        return;
    }
    /* Leaves its level and comes back as an aggressor at the new price and quantity; it keeps
     * its pool slot and table entries (nothing can match it while it is out of the book). */
    uint32_t tree = o->tree;
    int side = (int)(tree & 1), stopped;
    eng_unlink_in(e, oi);
    if (e->ext) { /* a gateway taker's Fills name it */
        e->taker_coid = o->coid;
        e->taker_account = o->account;
    }
    uint64_t left =
        match_any(e, tree >> 1, side, o->id, o->account, eng_key(side ^ 1, price), qty, &stopped);
    o = &e->orders[oi];
    o->filled += qty - left;
    if (stopped) { /* self-trade prevention: the order is canceled, as if it had left */
        ex_order x;
        ex_of(e, oi, &x);
        x.price = price;
        x.remaining = left;
        eng_forget(e, oi);
        if (e->ext)
            emit_canceled_ex(e, &x, TF_OFX_CANCEL_SELF_TRADE);
        else
            emit_canceled(e, x.id);
    } else if (left) {
        o->remaining = left;
        eng_link_in(e, oi, tree, price);
    } else {
        eng_forget(e, oi);
    }
}

static void replace(tf_engine *e, const tf_ofl_replace *c)
{
    uint32_t oi = eng_find_id_hinted(e, c->order_id);
    uint64_t to = 0;
    int reason = check_replace(e, oi, c->client_order_id, c->price, c->quantity, &to);
    if (reason != OK) {
        emit_rejected(e, c->client_order_id, (uint8_t)reason);
        return;
    }
    tf_ofl_msg *m = emit(e, TF_OFL_REPLACED);
    if (m) {
        m->replaced.order_id = c->order_id;
        m->replaced.client_order_id = c->client_order_id;
    }
    replace_order(e, oi, c->client_order_id, c->price, c->quantity.lo, ENG_AT_UNKNOWN, to);
}

/* ---- gateway commands (docs/engine.md "Gateway commands and execution reports") ------------- */

/* Order's checks, in the documented order: the first failing one's reason. */
static int check_order(const tf_engine *e, int book, const tf_ofx_order *c)
{
    int market = c->type == TF_OFX_MARKET, post = (c->flags & TF_OFX_POST_ONLY) != 0;
    if (book < 0)
        return TF_OFL_UNKNOWN_INSTRUMENT;
    if (c->quantity == 0 || c->quantity > (uint64_t)INT64_MAX)
        return TF_OFL_INVALID_QUANTITY;
    if (c->type > TF_OFX_MARKET || c->tif > TF_OFX_FOK || (c->flags & ~TF_OFX_FLAGS) ||
        (market && c->tif == TF_OFX_GTC) || (post && (market || c->tif != TF_OFX_GTC)))
        return TF_OFX_REASON_INVALID_TIF;
    if (!market && c->price <= 0)
        return TF_OFL_INVALID_PRICE;
    if (eng_find_client(e, c->account_id, c->client_order_id))
        return TF_OFL_DUPLICATE_CLIENT_ORDER_ID;
    /* as NewLimit and NewMarket: every limit order needs a free slot, a market order none */
    if (!market && e->live >= e->max_orders)
        return TF_OFL_REASON_OTHER;
    if (post) {
        const eng_side *opp = &e->sides[(uint32_t)book * 2 + (uint32_t)(c->side ^ 1)];
        if (opp->best && e->levels[opp->best].key <= eng_key(c->side ^ 1, c->price))
            return TF_OFX_REASON_WOULD_CROSS;
    }
    return OK;
}

static void gw_order(tf_engine *e, const tf_ofx_order *c)
{
    int book = eng_book_of(e, c->instrument_id);
    int reason = check_order(e, book, c);
    if (reason != OK) {
        emit_rejected_ex(e, c->account_id, c->client_order_id, (uint8_t)reason);
        return;
    }
    int market = c->type == TF_OFX_MARKET, side = c->side, stopped;
    int64_t price = market ? 0 : c->price;
    uint64_t id = e->next_order_id++;
    tf_ofl_msg *m = emit(e, TF_OFX_ACCEPTED);
    if (m) {
        m->accepted_ex.order_id = id;
        m->accepted_ex.client_order_id = c->client_order_id;
        m->accepted_ex.account_id = c->account_id;
        m->accepted_ex.instrument_id = c->instrument_id;
        m->accepted_ex.price = price;
        m->accepted_ex.quantity = c->quantity;
        m->accepted_ex.side = c->side;
        m->accepted_ex.type = c->type;
        m->accepted_ex.tif = c->tif;
        m->accepted_ex.flags = c->flags;
    }
    ex_order x = {.id = id,
                  .coid = c->client_order_id,
                  .account = c->account_id,
                  .instrument = c->instrument_id,
                  .price = price,
                  .remaining = c->quantity,
                  .side = c->side};
    int64_t limit_key = market ? INT64_MAX : eng_key(side ^ 1, c->price);
    if (c->tif == TF_OFX_FOK && !fillable(e, (uint32_t)book, side, limit_key, c->quantity)) {
        emit_canceled_ex(e, &x, TF_OFX_CANCEL_NOT_FILLABLE);
        return;
    }
    e->taker_coid = c->client_order_id;
    e->taker_account = c->account_id;
    uint64_t left =
        match_any(e, (uint32_t)book, side, id, c->account_id, limit_key, c->quantity, &stopped);
    x.remaining = left;
    x.filled = c->quantity - left;
    if (stopped) {
        emit_canceled_ex(e, &x, TF_OFX_CANCEL_SELF_TRADE);
    } else if (left && c->tif == TF_OFX_GTC) {
        uint32_t oi = eng_rest(e, (uint32_t)book * 2 + (uint32_t)side, c->price, id, c->account_id,
                               c->client_order_id, left);
        if (x.filled)
            e->orders[oi].filled = x.filled;
    } else if (left) {
        emit_canceled_ex(e, &x, TF_OFX_CANCEL_UNFILLED);
    }
}

static void gw_cancel(tf_engine *e, const tf_ofx_cancel *c)
{
    uint32_t oi = eng_find_client(e, c->account_id, c->client_order_id);
    if (!oi) {
        emit_rejected_ex(e, c->account_id, c->client_order_id, TF_OFL_ORDER_NOT_FOUND);
        return;
    }
    e->cancel_reason = TF_OFX_CANCEL_REQUESTED;
    eng_cancel_order(e, oi);
}

static void gw_replace(tf_engine *e, const tf_ofx_replace_by_client *c)
{
    uint64_t from = ENG_AT_UNKNOWN, to = 0; /* the order's slot in the client table, if probed */
    uint32_t oi = eng_find_client_hinted(e, c->account_id, c->client_order_id, &from);
    tf_ofl_qty q = {c->quantity, 0};
    int reason = check_replace(e, oi, c->new_client_order_id, c->price, q, &to);
    if (reason != OK) { /* the rejected request's client id: the new one, as Replace */
        emit_rejected_ex(e, c->account_id, c->new_client_order_id, (uint8_t)reason);
        return;
    }
    const eng_order *o = &e->orders[oi];
    tf_ofl_msg *m = emit(e, TF_OFX_REPLACED);
    if (m) {
        m->replaced_ex.order_id = o->id;
        m->replaced_ex.client_order_id = c->new_client_order_id;
        m->replaced_ex.orig_client_order_id = o->coid;
        m->replaced_ex.account_id = o->account;
        m->replaced_ex.instrument_id = e->instrument[o->tree >> 1];
        m->replaced_ex.price = c->price;
        m->replaced_ex.remaining = c->quantity;
        m->replaced_ex.filled = o->filled;
        m->replaced_ex.side = (uint8_t)(o->tree & 1);
    }
    replace_order(e, oi, c->new_client_order_id, c->price, c->quantity, from, to);
}

/* Where a command's side byte is and which of its bits the codec refuses (any but bit 0: a side
 * is 0 or 1), by kind; a kind without a side reads its own kind byte against no bits. One table
 * read instead of a test per kind with a side: a mixed stream mispredicted those. */
typedef struct side_rule {
    uint8_t at, bad_bits;
} side_rule;

#define SIDE_RULE(kind, field) [kind] = {(uint8_t)offsetof(tf_ofl_msg, field), (uint8_t)~1u}

_Static_assert(offsetof(tf_ofl_msg, order.side) < 256 &&
                   offsetof(tf_ofl_msg, new_limit.side) < 256 &&
                   offsetof(tf_ofl_msg, new_market.side) < 256,
               "a side byte's offset fits the table");

static const side_rule side_rules[256] = {
    SIDE_RULE(TF_OFL_NEW_LIMIT, new_limit.side),
    SIDE_RULE(TF_OFL_NEW_MARKET, new_market.side),
    SIDE_RULE(TF_OFX_ORDER, order.side),
};

/* One command, its arguments checked by the caller (tf_engine_apply, eng_apply_run's). */
static inline __attribute__((always_inline)) int apply_one(tf_engine *e, const tf_ofl_msg *cmd,
                                                           tf_engine_sink *sink)
{
    /* The kind table says what a kind is (docs/orderflow.md "The kind table"): the engine
     * applies OFL1 and gateway commands, skips their events and Heartbeat, and knows nothing
     * else (the venue's records are the venue's). */
    const tf_ofl_kind_info *k = &tfo_kind_rows[cmd->kind];
    if (k->family != TF_OFL_FAMILY_OFL1 && k->family != TF_OFL_FAMILY_GATEWAY)
        return TF_E_OFL_UNKNOWN_KIND;
    if (k->kind_class != TF_OFL_CLASS_COMMAND) {
        e->skipped++;
        return TF_ENGINE_SKIPPED;
    }
    uint64_t seq = cmd->new_limit.command_seq; /* the first field of every command */
    /* A side the codec would refuse: malformed, nothing changes (a hand-built message). */
    const side_rule r = side_rules[cmd->kind];
    if (((const uint8_t *)cmd)[r.at] & r.bad_bits)
        return TF_E_OFL_INVALID_SIDE;
    if (!eng_begin(e, seq, sink))
        return TF_ENGINE_DUPLICATE;
    uint32_t oi;
    switch (cmd->kind) {
    case TF_OFL_NEW_LIMIT:
        new_limit(e, &cmd->new_limit);
        break;
    case TF_OFL_NEW_MARKET:
        new_market(e, &cmd->new_market);
        break;
    case TF_OFL_CANCEL_BY_ORDER:
        oi = eng_find_id(e, cmd->cancel_by_order.order_id);
        if (oi)
            eng_cancel_order(e, oi);
        else
            emit_rejected(e, 0, TF_OFL_ORDER_NOT_FOUND);
        break;
    case TF_OFL_CANCEL_BY_CLIENT:
        oi = eng_find_client(e, cmd->cancel_by_client.account_id,
                             cmd->cancel_by_client.client_order_id);
        if (oi)
            eng_cancel_order(e, oi);
        else
            emit_rejected(e, cmd->cancel_by_client.client_order_id, TF_OFL_ORDER_NOT_FOUND);
        break;
    case TF_OFL_REPLACE:
        replace(e, &cmd->replace);
        break;
    default: /* the gateway commands */
        e->ext = 1;
        e->gateway = 1;
        if (cmd->kind == TF_OFX_ORDER)
            gw_order(e, &cmd->order);
        else if (cmd->kind == TF_OFX_CANCEL)
            gw_cancel(e, &cmd->cancel);
        else
            gw_replace(e, &cmd->replace_by_client);
        e->ext = 0;
        break;
    }
    e->sink = NULL;
    return e->sink_err ? e->sink_err : TF_ENGINE_APPLIED;
}

int tf_engine_apply(tf_engine *e, const tf_ofl_msg *cmd, tf_engine_sink *sink)
{
    if (!e || !cmd || !sink || (!sink->ev && sink->cap))
        return TF_E_NULL_ARG;
    return apply_one(e, cmd, sink);
}

void eng_apply_run(tf_engine *e, const tf_ofl_msg *cmds, size_t n, tf_engine_sink *sink, int *rc)
{
    if (rc)
        for (size_t i = 0; i < n; i++)
            rc[i] = apply_one(e, &cmds[i], sink);
    else
        for (size_t i = 0; i < n; i++)
            apply_one(e, &cmds[i], sink);
}

void tf_engine_get_counters(const tf_engine *e, tf_engine_counters *out)
{
    if (!out)
        return;
    if (!e) {
        *out = (tf_engine_counters){0};
        return;
    }
    uint64_t levels = 0;
    for (uint32_t i = 0; i < 2 * e->n_books; i++)
        levels += e->sides[i].n_levels;
    *out = (tf_engine_counters){
        .next_order_id = e->next_order_id,
        .last_command_seq = e->last_command_seq,
        .next_event_seq = e->next_event_seq,
        .resting_orders = e->live,
        .price_levels = levels,
        .applied = e->applied,
        .duplicates = e->duplicates,
        .skipped = e->skipped,
        .events = e->events,
        .trades = e->trades,
        .rejected = e->rejected,
    };
}

/* The order engine: create, apply one command (validation, matching, events), destroy. */
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* ---- create / destroy ----------------------------------------------------------------------- */

static int config_ok(const tf_engine_config *cfg)
{
    return cfg && cfg->size >= sizeof(tf_engine_config) && cfg->instruments &&
           cfg->n_instruments >= 1 && cfg->n_instruments <= TF_ENGINE_MAX_INSTRUMENTS &&
           cfg->max_orders >= 1 && cfg->max_orders <= TF_ENGINE_MAX_ORDERS;
}

/* A direct id -> book table pays when it is at most a few times the number of books. */
static uint64_t direct_len(const uint64_t *sorted, uint32_t n)
{
    uint64_t span = sorted[n - 1] - sorted[0] + 1;
    return span <= 4ull * n + 4096 ? span : 0;
}

uint64_t tf_engine_bytes_needed(const tf_engine_config *cfg)
{
    if (!config_ok(cfg))
        return 0;
    uint64_t n = cfg->n_instruments, m = cfg->max_orders;
    uint64_t bytes = sizeof(tf_engine) + n * 8 + 2 * n * sizeof(eng_side);
    bytes += (m + 1) * (sizeof(eng_order) + sizeof(eng_level));
    bytes += 6 * eng_table_capacity(m) * sizeof(uint32_t); /* tables and their spares */
    /* the direct table, at its largest (its size depends on the ids' spread) */
    bytes += (4 * n + 4096) * sizeof(uint32_t);
    bytes += TF_ENGINE_STP_ACCOUNTS * sizeof(eng_stp);
    return bytes;
}

int tf_engine_create(const tf_engine_config *cfg, tf_engine **out)
{
    if (!out)
        return TF_E_NULL_ARG;
    *out = NULL;
    if (!cfg)
        return TF_E_NULL_ARG;
    if (!config_ok(cfg))
        return TF_E_INVALID_ARG;
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
    e->orders = calloc(m + 1, sizeof *e->orders);
    e->levels = calloc(m + 1, sizeof *e->levels);
    e->stp = calloc(TF_ENGINE_STP_ACCOUNTS, sizeof *e->stp);
    if (!e->sides || !e->orders || !e->levels || !e->stp)
        goto fail;
    if ((rc = eng_table_init(&e->by_id, m)) || (rc = eng_table_init(&e->by_client, m)) ||
        (rc = eng_table_init(&e->by_price, m)))
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
    eng_table_fini(&e->by_id);
    eng_table_fini(&e->by_client);
    eng_table_fini(&e->by_price);
    free(e->stp);
    free(e->levels);
    free(e->orders);
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

/* ---- matching ------------------------------------------------------------------------------- */

/* The aggressor (order id `taker`, side `side` of book `book`) takes from the opposite side
 * while it has quantity and the best opposite level is acceptable: key <= the limit's key on the
 * opposite side (for a buy at P the asks' keys are prices: ask <= P; for a sell at P the bids'
 * keys are -bid: -bid <= -P). A market order passes INT64_MAX. Returns what is left. */
static uint64_t match(tf_engine *e, uint32_t book, int side, uint64_t taker, int64_t limit_key,
                      uint64_t qty)
{
    eng_side *opp = &e->sides[book * 2 + (side ^ 1)];
    uint64_t instrument = e->instrument[book];
    while (qty && opp->best) {
        eng_level *l = &e->levels[opp->best];
        if (l->key > limit_key)
            break;
        int64_t price = eng_level_price(l);
        uint32_t oi = l->head;
        for (;;) {
            eng_order *o = &e->orders[oi];
            uint64_t q = qty < o->remaining ? qty : o->remaining;
            e->trades++;
            tf_ofl_msg *m = emit(e, TF_OFL_TRADE);
            if (m) {
                m->trade.maker_order_id = o->id;
                m->trade.taker_order_id = taker;
                m->trade.instrument_id = instrument;
                m->trade.price = price;
                m->trade.quantity.lo = q;
                m->trade.quantity.hi = 0;
            }
            qty -= q;
            o->remaining -= q;
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
            if (mode != TF_ENGINE_STP_CANCEL_NEWEST)
                eng_cancel_order(e, oi);
            if (mode != TF_ENGINE_STP_CANCEL_OLDEST) {
                *stopped = 1;
                return qty;
            }
            continue;
        }
        uint64_t q = qty < o->remaining ? qty : o->remaining;
        e->trades++;
        tf_ofl_msg *m = emit(e, TF_OFL_TRADE);
        if (m) {
            m->trade.maker_order_id = o->id;
            m->trade.taker_order_id = taker;
            m->trade.instrument_id = e->instrument[book];
            m->trade.price = eng_level_price(l);
            m->trade.quantity.lo = q;
            m->trade.quantity.hi = 0;
        }
        qty -= q;
        o->remaining -= q;
        if (!o->remaining) {
            eng_unlink(e, oi);
            eng_forget(e, oi);
        }
    }
    return qty;
}

/* match, or match_stp when the aggressor's account has a mode (looked up only while some
 * account has one, so an engine without STP settings pays one compare). */
static uint64_t match_any(tf_engine *e, uint32_t book, int side, uint64_t taker, uint64_t account,
                          int64_t limit_key, uint64_t qty, int *stopped)
{
    *stopped = 0;
    int mode = e->n_modes ? eng_stp_mode(e, account) : TF_ENGINE_STP_NONE;
    if (mode == TF_ENGINE_STP_NONE)
        return match(e, book, side, taker, limit_key, qty);
    return match_stp(e, book, side, taker, account, mode, limit_key, qty, stopped);
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
    else if (left)
        eng_rest(e, (uint32_t)book * 2 + (uint32_t)side, c->price, id, c->account_id,
                 c->client_order_id, left);
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

void eng_cancel_order(tf_engine *e, uint32_t oi)
{
    uint64_t id = e->orders[oi].id;
    eng_unlink(e, oi);
    eng_forget(e, oi);
    emit_canceled(e, id);
}

static int check_replace(const tf_engine *e, uint32_t oi, const tf_ofl_replace *c)
{
    if (!oi)
        return TF_OFL_ORDER_NOT_FOUND;
    if (!qty_ok(c->quantity))
        return TF_OFL_INVALID_QUANTITY;
    if (c->price <= 0)
        return TF_OFL_INVALID_PRICE;
    const eng_order *o = &e->orders[oi];
    if (c->client_order_id != o->coid && eng_find_client(e, o->account, c->client_order_id))
        return TF_OFL_DUPLICATE_CLIENT_ORDER_ID;
    return OK;
}

static void replace(tf_engine *e, const tf_ofl_replace *c)
{
    uint32_t oi = eng_find_id(e, c->order_id);
    int reason = check_replace(e, oi, c);
    if (reason != OK) {
        emit_rejected(e, c->client_order_id, (uint8_t)reason);
        return;
    }
    eng_order *o = &e->orders[oi];
    tf_ofl_msg *m = emit(e, TF_OFL_REPLACED);
    if (m) {
        m->replaced.order_id = c->order_id;
        m->replaced.client_order_id = c->client_order_id;
    }
    if (c->client_order_id != o->coid) {
        eng_remove_client(e, oi);
        o->coid = c->client_order_id;
        eng_insert_client(e, oi);
    }
    if (c->price == o->price && c->quantity.lo <= o->remaining) {
        o->remaining = c->quantity.lo; /* keeps its time priority */
        return;
    }
    /* Leaves its level and comes back as an aggressor at the new price and quantity; it keeps
     * its pool slot and table entries (nothing can match it while it is out of the book). */
    uint32_t tree = o->tree;
    int side = (int)(tree & 1), stopped;
    eng_unlink(e, oi);
    uint64_t left = match_any(e, tree >> 1, side, o->id, o->account, eng_key(side ^ 1, c->price),
                              c->quantity.lo, &stopped);
    if (stopped) { /* self-trade prevention: the order is canceled, as if it had left */
        uint64_t id = o->id;
        eng_forget(e, oi);
        emit_canceled(e, id);
    } else if (left) {
        o->remaining = left;
        eng_link(e, oi, tree, c->price);
    } else {
        eng_forget(e, oi);
    }
}

int tf_engine_apply(tf_engine *e, const tf_ofl_msg *cmd, tf_engine_sink *sink)
{
    if (!e || !cmd || !sink || (!sink->ev && sink->cap))
        return TF_E_NULL_ARG;
    uint64_t seq;
    switch (cmd->kind) {
    case TF_OFL_NEW_LIMIT:
    case TF_OFL_NEW_MARKET:
    case TF_OFL_CANCEL_BY_ORDER:
    case TF_OFL_CANCEL_BY_CLIENT:
    case TF_OFL_REPLACE:
        seq = cmd->new_limit.command_seq; /* the first field of every command */
        break;
    case TF_OFL_HEARTBEAT:
    case TF_OFL_ACCEPTED:
    case TF_OFL_REJECTED:
    case TF_OFL_REPLACED:
    case TF_OFL_CANCELED:
    case TF_OFL_TRADE:
        e->skipped++;
        return TF_ENGINE_SKIPPED;
    default:
        return TF_E_OFL_UNKNOWN_KIND;
    }
    /* A side the codec would refuse: malformed, nothing changes (a hand-built message). */
    if ((cmd->kind == TF_OFL_NEW_LIMIT && cmd->new_limit.side > TF_OFL_SELL) ||
        (cmd->kind == TF_OFL_NEW_MARKET && cmd->new_market.side > TF_OFL_SELL))
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
    default:
        replace(e, &cmd->replace);
        break;
    }
    e->sink = NULL;
    return e->sink_err ? e->sink_err : TF_ENGINE_APPLIED;
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

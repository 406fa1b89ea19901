/* The order engine's slow model (engine_model.h): docs/engine.md, line by line. */
#include "engine_model.h"

#include <stdlib.h>
#include <string.h>

#include "tollfree/engine.h"
#include "tollfree/error.h"

#define EM_STP_MAX TF_ENGINE_STP_ACCOUNTS

struct em_model {
    uint64_t *instruments; /* ascending */
    uint32_t n_instruments;
    uint32_t max_orders;

    em_order *orders; /* the live orders, in no particular order */
    size_t n_orders, cap_orders;
    uint64_t clock; /* the next priority stamp */

    /* self-trade prevention: accounts with a mode other than none, in the order they were set */
    uint64_t stp_account[EM_STP_MAX];
    int stp_mode[EM_STP_MAX];
    size_t n_stp;

    uint64_t next_order_id, last_command_seq, next_event_seq;
    uint64_t applied, duplicates, skipped, events, trades, rejected;

    /* gateway commands: `gateway` is set for good by the first one applied; `ext` while one is
     * applied (its events are execution reports); the taker's ids for its Fills */
    int gateway, ext;
    uint64_t taker_coid, taker_account;
    int64_t *last_trade; /* [n_instruments], by the index in `instruments`: 0 = none yet */

    /* the events of the current/last command */
    tf_ofl_msg *ev;
    size_t n_ev, cap_ev;
    int ev_nomem;
    uint64_t cur_seq; /* command_seq of the command being applied */
};

/* ---- small helpers ------------------------------------------------------------------------ */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int known_instrument(const em_model *m, uint64_t id)
{
    for (uint32_t i = 0; i < m->n_instruments; i++)
        if (m->instruments[i] == id)
            return 1;
    return 0;
}

static int valid_quantity(tf_ofl_qty q)
{
    return q.hi == 0 && q.lo >= 1 && q.lo <= (uint64_t)INT64_MAX;
}

/* Index of the live order with this id, or -1. */
static long find_by_id(const em_model *m, uint64_t order_id)
{
    for (size_t i = 0; i < m->n_orders; i++)
        if (m->orders[i].order_id == order_id)
            return (long)i;
    return -1;
}

/* Index of the live order with this (account, client id), or -1. */
static long find_by_client(const em_model *m, uint64_t account_id, uint64_t client_order_id)
{
    for (size_t i = 0; i < m->n_orders; i++)
        if (m->orders[i].account_id == account_id &&
            m->orders[i].client_order_id == client_order_id)
            return (long)i;
    return -1;
}

/* Removing swaps the last order in: the array's order means nothing (priority is `time`). */
static void remove_at(em_model *m, size_t i)
{
    m->orders[i] = m->orders[m->n_orders - 1];
    m->n_orders--;
}

static int add_order(em_model *m, const em_order *o)
{
    if (m->n_orders == m->cap_orders) {
        size_t cap = m->cap_orders ? m->cap_orders * 2 : 64;
        em_order *p = realloc(m->orders, cap * sizeof *p);
        if (!p)
            return TF_E_NOMEM;
        m->orders = p;
        m->cap_orders = cap;
    }
    m->orders[m->n_orders++] = *o;
    return 0;
}

/* A new event with the common fields set and every other byte 0. */
static tf_ofl_msg *new_event(em_model *m, uint8_t kind)
{
    static tf_ofl_msg scratch; /* where events go once an allocation failed */
    if (m->n_ev == m->cap_ev && !m->ev_nomem) {
        size_t cap = m->cap_ev ? m->cap_ev * 2 : 16;
        tf_ofl_msg *p = realloc(m->ev, cap * sizeof *p);
        if (p) {
            m->ev = p;
            m->cap_ev = cap;
        } else {
            m->ev_nomem = 1;
        }
    }
    tf_ofl_msg *e = m->ev_nomem ? &scratch : &m->ev[m->n_ev++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->journal_seq = 0;
    e->session_id = 0;
    /* event_seq, command_seq and timestamp_ns are the first three u64 of every event payload */
    e->accepted.event_seq = m->next_event_seq++;
    e->accepted.command_seq = m->cur_seq;
    e->accepted.timestamp_ns = m->cur_seq; /* the logical clock */
    m->events++;
    return e;
}

static void emit_rejected(em_model *m, uint64_t client_order_id, uint8_t reason)
{
    tf_ofl_msg *e = new_event(m, TF_OFL_REJECTED);
    e->rejected.client_order_id = client_order_id;
    e->rejected.reason = reason;
    m->rejected++;
}

static void emit_accepted(em_model *m, uint64_t order_id, uint64_t client_order_id,
                          uint64_t account_id)
{
    tf_ofl_msg *e = new_event(m, TF_OFL_ACCEPTED);
    e->accepted.order_id = order_id;
    e->accepted.client_order_id = client_order_id;
    e->accepted.account_id = account_id;
}

static void emit_canceled(em_model *m, uint64_t order_id)
{
    tf_ofl_msg *e = new_event(m, TF_OFL_CANCELED);
    e->canceled.order_id = order_id;
}

static void emit_replaced(em_model *m, uint64_t order_id, uint64_t client_order_id)
{
    tf_ofl_msg *e = new_event(m, TF_OFL_REPLACED);
    e->replaced.order_id = order_id;
    e->replaced.client_order_id = client_order_id;
}

static long instrument_index(const em_model *m, uint64_t id)
{
    for (uint32_t i = 0; i < m->n_instruments; i++)
        if (m->instruments[i] == id)
            return (long)i;
    return -1;
}

/* One match; `maker` already holds its remaining and filled after it. An OFL1 command's match is
 * a Trade, a gateway command's a Fill. */
static void emit_trade(em_model *m, const em_order *maker, uint64_t taker, uint8_t taker_side,
                       uint64_t qty)
{
    m->last_trade[instrument_index(m, maker->instrument_id)] = maker->price;
    m->trades++;
    if (!m->ext) {
        tf_ofl_msg *e = new_event(m, TF_OFL_TRADE);
        e->trade.maker_order_id = maker->order_id;
        e->trade.taker_order_id = taker;
        e->trade.instrument_id = maker->instrument_id;
        e->trade.price = maker->price;
        e->trade.quantity.lo = qty;
        e->trade.quantity.hi = 0;
        return;
    }
    tf_ofl_msg *e = new_event(m, TF_OFX_FILL);
    e->fill.maker_order_id = maker->order_id;
    e->fill.taker_order_id = taker;
    e->fill.maker_client_order_id = maker->client_order_id;
    e->fill.taker_client_order_id = m->taker_coid;
    e->fill.maker_account_id = maker->account_id;
    e->fill.taker_account_id = m->taker_account;
    e->fill.instrument_id = maker->instrument_id;
    e->fill.price = maker->price;
    e->fill.quantity = qty;
    e->fill.maker_remaining = maker->remaining;
    e->fill.maker_filled = maker->filled;
    e->fill.taker_side = taker_side;
}

static void emit_rejected_ex(em_model *m, uint64_t account, uint64_t client_order_id,
                             uint8_t reason)
{
    tf_ofl_msg *e = new_event(m, TF_OFX_REJECTED);
    e->rejected_ex.account_id = account;
    e->rejected_ex.client_order_id = client_order_id;
    e->rejected_ex.reason = reason;
    m->rejected++;
}

/* The order as it leaves: `remaining` is what is canceled. */
static void emit_canceled_ex(em_model *m, const em_order *o, uint8_t reason)
{
    tf_ofl_msg *e = new_event(m, TF_OFX_CANCELED);
    e->canceled_ex.order_id = o->order_id;
    e->canceled_ex.client_order_id = o->client_order_id;
    e->canceled_ex.account_id = o->account_id;
    e->canceled_ex.instrument_id = o->instrument_id;
    e->canceled_ex.price = o->price;
    e->canceled_ex.remaining = o->remaining;
    e->canceled_ex.filled = o->filled;
    e->canceled_ex.side = o->side;
    e->canceled_ex.reason = reason;
}

/* A resting order taken out by a cancel: Canceled, or CanceledEx under a gateway command. */
static void emit_cancel_of(em_model *m, const em_order *o, uint8_t reason)
{
    if (m->ext)
        emit_canceled_ex(m, o, reason);
    else
        emit_canceled(m, o->order_id);
}

/* ---- matching ----------------------------------------------------------------------------- */

/* Is a better than b for its side's priority: better price, then older. */
static int better(const em_order *a, const em_order *b)
{
    if (a->price != b->price)
        return a->side == TF_OFL_BUY ? a->price > b->price : a->price < b->price;
    return a->time < b->time;
}

/* Index of the first order in priority of one side of one book, or -1. */
static long best_of(const em_model *m, uint64_t instrument, uint8_t side)
{
    long best = -1;
    for (size_t i = 0; i < m->n_orders; i++) {
        const em_order *o = &m->orders[i];
        if (o->instrument_id != instrument || o->side != side)
            continue;
        if (best < 0 || better(o, &m->orders[best]))
            best = (long)i;
    }
    return best;
}

static int stp_mode(const em_model *m, uint64_t account)
{
    for (size_t i = 0; i < m->n_stp; i++)
        if (m->stp_account[i] == account)
            return m->stp_mode[i];
    return TF_ENGINE_STP_NONE;
}

/* The aggressor (not in the book) takes from the opposite side while it has quantity left and
 * the best opposite price is acceptable. has_limit = 0 for a market order. Updates *remaining.
 * Self-trade prevention (the aggressor's account's mode): when the best maker belongs to the
 * aggressor's account, cancel-oldest cancels the maker and goes on, cancel-newest stops,
 * cancel-both cancels the maker and stops. Returns 1 when it stopped that way (the caller
 * cancels the aggressor's remainder), else 0. */
static int match(em_model *m, uint64_t taker_id, uint64_t account, uint64_t instrument,
                 uint8_t side, int has_limit, int64_t limit, uint64_t *remaining)
{
    uint8_t other = side == TF_OFL_BUY ? TF_OFL_SELL : TF_OFL_BUY;
    int mode = stp_mode(m, account);
    while (*remaining > 0) {
        long b = best_of(m, instrument, other);
        if (b < 0)
            break;
        em_order *maker = &m->orders[b];
        if (has_limit) {
            if (side == TF_OFL_BUY && maker->price > limit)
                break;
            if (side == TF_OFL_SELL && maker->price < limit)
                break;
        }
        if (mode != TF_ENGINE_STP_NONE && maker->account_id == account) {
            if (mode != TF_ENGINE_STP_CANCEL_NEWEST) {
                em_order gone = *maker;
                remove_at(m, (size_t)b);
                emit_cancel_of(m, &gone, TF_OFX_CANCEL_SELF_TRADE);
            }
            if (mode != TF_ENGINE_STP_CANCEL_OLDEST)
                return 1;
            continue;
        }
        uint64_t q = maker->remaining < *remaining ? maker->remaining : *remaining;
        maker->remaining -= q;
        maker->filled += q;
        *remaining -= q;
        emit_trade(m, maker, taker_id, side, q);
        if (maker->remaining == 0)
            remove_at(m, (size_t)b); /* a maker with nothing left leaves the book, no event */
    }
    return 0;
}

/* ---- commands ----------------------------------------------------------------------------- */

static int new_limit(em_model *m, const tf_ofl_new_limit *c)
{
    if (!known_instrument(m, c->instrument_id)) {
        emit_rejected(m, c->client_order_id, TF_OFL_UNKNOWN_INSTRUMENT);
        return 0;
    }
    if (!valid_quantity(c->quantity)) {
        emit_rejected(m, c->client_order_id, TF_OFL_INVALID_QUANTITY);
        return 0;
    }
    if (c->price <= 0) {
        emit_rejected(m, c->client_order_id, TF_OFL_INVALID_PRICE);
        return 0;
    }
    if (find_by_client(m, c->account_id, c->client_order_id) >= 0) {
        emit_rejected(m, c->client_order_id, TF_OFL_DUPLICATE_CLIENT_ORDER_ID);
        return 0;
    }
    /* "the live-order limit reached": checked before matching, so even a limit order that would
     * fill at once is refused when the book already holds max_orders */
    if (m->n_orders >= m->max_orders) {
        emit_rejected(m, c->client_order_id, TF_OFL_REASON_OTHER);
        return 0;
    }
    uint64_t id = m->next_order_id++;
    emit_accepted(m, id, c->client_order_id, c->account_id);
    uint64_t rem = c->quantity.lo;
    if (match(m, id, c->account_id, c->instrument_id, c->side, 1, c->price, &rem)) {
        emit_canceled(m, id); /* self-trade prevention: the remainder never rests */
        return 0;
    }
    if (rem == 0)
        return 0;
    em_order o = {.order_id = id,
                  .account_id = c->account_id,
                  .client_order_id = c->client_order_id,
                  .instrument_id = c->instrument_id,
                  .price = c->price,
                  .remaining = rem,
                  .time = m->clock++,
                  .side = c->side,
                  .filled = c->quantity.lo - rem};
    return add_order(m, &o);
}

static int new_market(em_model *m, const tf_ofl_new_market *c)
{
    /* Checks 1, 2, 4 only (the spec's list): no price, and no live-order limit because a market
     * order never rests. */
    if (!known_instrument(m, c->instrument_id)) {
        emit_rejected(m, c->client_order_id, TF_OFL_UNKNOWN_INSTRUMENT);
        return 0;
    }
    if (!valid_quantity(c->quantity)) {
        emit_rejected(m, c->client_order_id, TF_OFL_INVALID_QUANTITY);
        return 0;
    }
    if (find_by_client(m, c->account_id, c->client_order_id) >= 0) {
        emit_rejected(m, c->client_order_id, TF_OFL_DUPLICATE_CLIENT_ORDER_ID);
        return 0;
    }
    uint64_t id = m->next_order_id++;
    emit_accepted(m, id, c->client_order_id, c->account_id);
    uint64_t rem = c->quantity.lo;
    match(m, id, c->account_id, c->instrument_id, c->side, 0, 0, &rem);
    if (rem > 0)
        emit_canceled(m, id); /* the remainder, after the trades */
    return 0;
}

static int cancel_by_order(em_model *m, const tf_ofl_cancel_by_order *c)
{
    long i = find_by_id(m, c->order_id);
    if (i < 0) {
        emit_rejected(m, 0, TF_OFL_ORDER_NOT_FOUND); /* 0: the command has no client id */
        return 0;
    }
    em_order gone = m->orders[i];
    remove_at(m, (size_t)i);
    emit_cancel_of(m, &gone, TF_OFX_CANCEL_REQUESTED);
    return 0;
}

static int cancel_by_client(em_model *m, const tf_ofl_cancel_by_client *c)
{
    long i = find_by_client(m, c->account_id, c->client_order_id);
    if (i < 0) {
        emit_rejected(m, c->client_order_id, TF_OFL_ORDER_NOT_FOUND);
        return 0;
    }
    em_order gone = m->orders[i];
    remove_at(m, (size_t)i);
    emit_cancel_of(m, &gone, TF_OFX_CANCEL_REQUESTED);
    return 0;
}

/* Replace's checks 1-4 on the live order at index i (-1: not live): the reason, or -1. */
static int replace_check(const em_model *m, long i, uint64_t new_coid, int64_t price,
                         tf_ofl_qty qty)
{
    if (i < 0)
        return TF_OFL_ORDER_NOT_FOUND;
    if (!valid_quantity(qty))
        return TF_OFL_INVALID_QUANTITY;
    if (price <= 0)
        return TF_OFL_INVALID_PRICE;
    const em_order *o = &m->orders[i];
    if (new_coid != o->client_order_id && find_by_client(m, o->account_id, new_coid) >= 0)
        return TF_OFL_DUPLICATE_CLIENT_ORDER_ID;
    return -1;
}

/* The replace itself, after its Replaced/ReplacedEx event. */
static int replace_apply(em_model *m, long i, uint64_t new_coid, int64_t price, uint64_t qty)
{
    em_order o = m->orders[i];
    if (price == o.price && qty <= o.remaining) {
        /* keeps its place in the level */
        m->orders[i].client_order_id = new_coid;
        m->orders[i].remaining = qty;
        return 0;
    }
    /* leaves the level, matches as the aggressor, rests at the back of its new level */
    remove_at(m, (size_t)i);
    o.client_order_id = new_coid;
    o.price = price;
    o.remaining = qty;
    m->taker_coid = new_coid;
    m->taker_account = o.account_id;
    int stopped =
        match(m, o.order_id, o.account_id, o.instrument_id, o.side, 1, o.price, &o.remaining);
    o.filled += qty - o.remaining;
    if (stopped) {
        /* self-trade prevention: the order is gone */
        if (m->ext)
            emit_canceled_ex(m, &o, TF_OFX_CANCEL_SELF_TRADE);
        else
            emit_canceled(m, o.order_id);
        return 0;
    }
    if (o.remaining == 0)
        return 0;
    o.time = m->clock++;
    return add_order(m, &o);
}

static int replace(em_model *m, const tf_ofl_replace *c)
{
    long i = find_by_id(m, c->order_id);
    int reason = replace_check(m, i, c->client_order_id, c->price, c->quantity);
    if (reason >= 0) {
        emit_rejected(m, c->client_order_id, (uint8_t)reason);
        return 0;
    }
    emit_replaced(m, m->orders[i].order_id, c->client_order_id);
    return replace_apply(m, i, c->client_order_id, c->price, c->quantity.lo);
}

/* ---- gateway commands --------------------------------------------------------------------- */

/* Sum of the remaining quantities of the orders of one side of one book at acceptable prices
 * (has_limit = 0: all), saturating: enough to compare with a quantity <= INT64_MAX. */
static uint64_t available(const em_model *m, uint64_t instrument, uint8_t side, int has_limit,
                          int64_t limit)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < m->n_orders; i++) {
        const em_order *o = &m->orders[i];
        if (o->instrument_id != instrument || o->side != side)
            continue;
        if (has_limit && (side == TF_OFL_SELL ? o->price > limit : o->price < limit))
            continue;
        sum = UINT64_MAX - sum < o->remaining ? UINT64_MAX : sum + o->remaining;
    }
    return sum;
}

static int gw_order(em_model *m, const tf_ofx_order *c)
{
    int market = c->type == TF_OFX_MARKET;
    int post_only = (c->flags & TF_OFX_POST_ONLY) != 0;
    uint8_t other = c->side == TF_OFL_BUY ? TF_OFL_SELL : TF_OFL_BUY;
    int reason = -1;
    if (!known_instrument(m, c->instrument_id))
        reason = TF_OFL_UNKNOWN_INSTRUMENT;
    else if (c->quantity == 0 || c->quantity > (uint64_t)INT64_MAX)
        reason = TF_OFL_INVALID_QUANTITY;
    else if (c->type > 1 || c->tif > 2 || c->flags > 1 || (market && c->tif == TF_OFX_GTC) ||
             (post_only && market) || (post_only && c->tif != TF_OFX_GTC))
        reason = TF_OFX_REASON_INVALID_TIF;
    else if (!market && c->price <= 0)
        reason = TF_OFL_INVALID_PRICE;
    else if (find_by_client(m, c->account_id, c->client_order_id) >= 0)
        reason = TF_OFL_DUPLICATE_CLIENT_ORDER_ID;
    else if (!market && m->n_orders >= m->max_orders)
        reason = TF_OFL_REASON_OTHER; /* as NewLimit: every limit order, whatever its tif */
    else if (post_only) {
        long b = best_of(m, c->instrument_id, other);
        if (b >= 0 && (c->side == TF_OFL_BUY ? m->orders[b].price <= c->price
                                             : m->orders[b].price >= c->price))
            reason = TF_OFX_REASON_WOULD_CROSS;
    }
    if (reason >= 0) {
        emit_rejected_ex(m, c->account_id, c->client_order_id, (uint8_t)reason);
        return 0;
    }
    em_order o = {.order_id = m->next_order_id++,
                  .account_id = c->account_id,
                  .client_order_id = c->client_order_id,
                  .instrument_id = c->instrument_id,
                  .price = market ? 0 : c->price,
                  .remaining = c->quantity,
                  .side = c->side,
                  .gateway = 1};
    tf_ofl_msg *e = new_event(m, TF_OFX_ACCEPTED);
    e->accepted_ex.order_id = o.order_id;
    e->accepted_ex.client_order_id = o.client_order_id;
    e->accepted_ex.account_id = o.account_id;
    e->accepted_ex.instrument_id = o.instrument_id;
    e->accepted_ex.price = o.price;
    e->accepted_ex.quantity = c->quantity;
    e->accepted_ex.side = c->side;
    e->accepted_ex.type = c->type;
    e->accepted_ex.tif = c->tif;
    e->accepted_ex.flags = c->flags;
    /* FOK: every acceptable order counts, the account's own included (STP is not foreseen) */
    if (c->tif == TF_OFX_FOK &&
        available(m, c->instrument_id, other, !market, c->price) < c->quantity) {
        emit_canceled_ex(m, &o, TF_OFX_CANCEL_NOT_FILLABLE);
        return 0;
    }
    m->taker_coid = c->client_order_id;
    m->taker_account = c->account_id;
    int stopped = match(m, o.order_id, o.account_id, o.instrument_id, o.side, !market, c->price,
                        &o.remaining);
    o.filled = c->quantity - o.remaining;
    if (stopped) {
        emit_canceled_ex(m, &o, TF_OFX_CANCEL_SELF_TRADE);
        return 0;
    }
    if (o.remaining == 0)
        return 0;
    if (c->tif != TF_OFX_GTC) {
        emit_canceled_ex(m, &o, TF_OFX_CANCEL_UNFILLED);
        return 0;
    }
    o.time = m->clock++;
    return add_order(m, &o);
}

static int gw_cancel(em_model *m, const tf_ofx_cancel *c)
{
    long i = find_by_client(m, c->account_id, c->client_order_id);
    if (i < 0) {
        emit_rejected_ex(m, c->account_id, c->client_order_id, TF_OFL_ORDER_NOT_FOUND);
        return 0;
    }
    em_order gone = m->orders[i];
    remove_at(m, (size_t)i);
    emit_canceled_ex(m, &gone, TF_OFX_CANCEL_REQUESTED);
    return 0;
}

static int gw_replace(em_model *m, const tf_ofx_replace_by_client *c)
{
    long i = find_by_client(m, c->account_id, c->client_order_id);
    tf_ofl_qty q = {c->quantity, 0};
    int reason = replace_check(m, i, c->new_client_order_id, c->price, q);
    if (reason >= 0) {
        emit_rejected_ex(m, c->account_id, c->new_client_order_id, (uint8_t)reason);
        return 0;
    }
    const em_order *o = &m->orders[i];
    tf_ofl_msg *e = new_event(m, TF_OFX_REPLACED);
    e->replaced_ex.order_id = o->order_id;
    e->replaced_ex.client_order_id = c->new_client_order_id;
    e->replaced_ex.orig_client_order_id = o->client_order_id;
    e->replaced_ex.account_id = o->account_id;
    e->replaced_ex.instrument_id = o->instrument_id;
    e->replaced_ex.price = c->price;
    e->replaced_ex.remaining = c->quantity;
    e->replaced_ex.filled = o->filled;
    e->replaced_ex.side = o->side;
    return replace_apply(m, i, c->new_client_order_id, c->price, c->quantity);
}

/* ---- public ------------------------------------------------------------------------------- */

int em_create(const uint64_t *instruments, uint32_t n, uint32_t max_orders, em_model **out)
{
    if (!out || (!instruments && n))
        return TF_E_NULL_ARG;
    *out = NULL;
    if (n == 0 || max_orders == 0)
        return TF_E_INVALID_ARG;
    em_model *m = calloc(1, sizeof *m);
    if (!m)
        return TF_E_NOMEM;
    m->instruments = malloc(n * sizeof *m->instruments);
    if (!m->instruments) {
        free(m);
        return TF_E_NOMEM;
    }
    memcpy(m->instruments, instruments, n * sizeof *instruments);
    qsort(m->instruments, n, sizeof *m->instruments, cmp_u64);
    for (uint32_t i = 0; i < n; i++) {
        if (m->instruments[i] == 0 || (i > 0 && m->instruments[i] == m->instruments[i - 1])) {
            free(m->instruments);
            free(m);
            return TF_E_INVALID_ARG;
        }
    }
    m->last_trade = calloc(n, sizeof *m->last_trade);
    if (!m->last_trade) {
        free(m->instruments);
        free(m);
        return TF_E_NOMEM;
    }
    m->n_instruments = n;
    m->max_orders = max_orders;
    m->next_order_id = 1;
    m->last_command_seq = 0;
    m->next_event_seq = 1;
    *out = m;
    return 0;
}

void em_destroy(em_model *m)
{
    if (!m)
        return;
    free(m->instruments);
    free(m->last_trade);
    free(m->orders);
    free(m->ev);
    free(m);
}

static int is_gateway_command(uint8_t kind)
{
    return kind == TF_OFX_ORDER || kind == TF_OFX_CANCEL || kind == TF_OFX_REPLACE_BY_CLIENT;
}

static int is_command(uint8_t kind)
{
    return (kind >= TF_OFL_NEW_LIMIT && kind <= TF_OFL_REPLACE) || is_gateway_command(kind);
}

static int is_skipped_kind(uint8_t kind)
{
    return kind == TF_OFL_HEARTBEAT || (kind >= TF_OFL_ACCEPTED && kind <= TF_OFL_TRADE) ||
           (kind >= TF_OFX_ACCEPTED && kind <= TF_OFX_REJECTED);
}

int em_apply(em_model *m, const tf_ofl_msg *cmd, tf_ofl_msg *events, size_t cap, size_t *n_events)
{
    if (!m || !cmd || (!events && cap))
        return TF_E_NULL_ARG;
    m->n_ev = 0;
    m->ev_nomem = 0;
    if (n_events)
        *n_events = 0;
    if (is_skipped_kind(cmd->kind)) {
        m->skipped++;
        return EM_SKIPPED;
    }
    if (!is_command(cmd->kind))
        return TF_E_OFL_UNKNOWN_KIND;
    /* the decoder refuses such a side byte: a malformed record changes nothing */
    if ((cmd->kind == TF_OFL_NEW_LIMIT && cmd->new_limit.side > TF_OFL_SELL) ||
        (cmd->kind == TF_OFL_NEW_MARKET && cmd->new_market.side > TF_OFL_SELL) ||
        (cmd->kind == TF_OFX_ORDER && cmd->order.side > TF_OFL_SELL))
        return TF_E_OFL_INVALID_SIDE;
    /* command_seq is the first u64 of every command payload */
    uint64_t seq = cmd->new_limit.command_seq;
    if (seq <= m->last_command_seq) {
        m->duplicates++;
        return EM_DUPLICATE;
    }
    m->last_command_seq = seq;
    m->cur_seq = seq;
    m->applied++;
    m->ext = is_gateway_command(cmd->kind);
    if (m->ext)
        m->gateway = 1;
    int rc = 0;
    switch (cmd->kind) {
    case TF_OFL_NEW_LIMIT:
        rc = new_limit(m, &cmd->new_limit);
        break;
    case TF_OFL_NEW_MARKET:
        rc = new_market(m, &cmd->new_market);
        break;
    case TF_OFL_CANCEL_BY_ORDER:
        rc = cancel_by_order(m, &cmd->cancel_by_order);
        break;
    case TF_OFL_CANCEL_BY_CLIENT:
        rc = cancel_by_client(m, &cmd->cancel_by_client);
        break;
    case TF_OFL_REPLACE:
        rc = replace(m, &cmd->replace);
        break;
    case TF_OFX_ORDER:
        rc = gw_order(m, &cmd->order);
        break;
    case TF_OFX_CANCEL:
        rc = gw_cancel(m, &cmd->cancel);
        break;
    case TF_OFX_REPLACE_BY_CLIENT:
        rc = gw_replace(m, &cmd->replace_by_client);
        break;
    }
    m->ext = 0;
    if (rc < 0)
        return rc;
    if (m->ev_nomem)
        return TF_E_NOMEM;
    if (n_events)
        *n_events = m->n_ev;
    if (events) {
        size_t k = m->n_ev < cap ? m->n_ev : cap;
        if (k)
            memcpy(events, m->ev, k * sizeof *events);
    }
    if (m->n_ev > cap && events)
        return TF_E_LIMIT;
    return EM_APPLIED;
}

const tf_ofl_msg *em_last_events(const em_model *m, size_t *n)
{
    *n = m->n_ev;
    return m->ev;
}

/* ---- state -------------------------------------------------------------------------------- */

/* Hash order: instrument ascending, bids before asks, best price first, oldest first. */
static int cmp_hash_order(const void *pa, const void *pb)
{
    const em_order *a = pa, *b = pb;
    if (a->instrument_id != b->instrument_id)
        return a->instrument_id < b->instrument_id ? -1 : 1;
    if (a->side != b->side)
        return a->side == TF_OFL_BUY ? -1 : 1;
    if (a->price != b->price) {
        if (a->side == TF_OFL_BUY)
            return a->price > b->price ? -1 : 1;
        return a->price < b->price ? -1 : 1;
    }
    return a->time < b->time ? -1 : a->time > b->time;
}

size_t em_orders_in_order(const em_model *m, em_order *out, size_t cap)
{
    em_order *all = malloc((m->n_orders ? m->n_orders : 1) * sizeof *all);
    if (!all)
        return 0;
    if (m->n_orders)
        memcpy(all, m->orders, m->n_orders * sizeof *all);
    qsort(all, m->n_orders, sizeof *all, cmp_hash_order);
    size_t k = m->n_orders < cap ? m->n_orders : cap;
    if (k)
        memcpy(out, all, k * sizeof *all);
    free(all);
    return m->n_orders;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (uint8_t)(v >> (8 * i)); /* little-endian byte order, whatever the host */
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t fnv_order(uint64_t h, const em_order *o, int gateway)
{
    h = fnv_u64(h, o->order_id);
    h = fnv_u64(h, o->account_id);
    h = fnv_u64(h, o->client_order_id);
    h = fnv_u64(h, (uint64_t)o->price);
    h = fnv_u64(h, o->remaining);
    return gateway ? fnv_u64(h, o->filled) : h; /* once a gateway command was applied */
}

uint64_t em_state_hash(const em_model *m)
{
    em_order *all = malloc((m->n_orders ? m->n_orders : 1) * sizeof *all);
    if (!all)
        return 0;
    size_t n = em_orders_in_order(m, all, m->n_orders);
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint32_t k = 0; k < m->n_instruments; k++) {
        uint64_t id = m->instruments[k];
        h = fnv_u64(h, id);
        for (uint8_t side = TF_OFL_BUY; side <= TF_OFL_SELL; side++) {
            uint64_t count = 0;
            for (size_t i = 0; i < n; i++)
                count += all[i].instrument_id == id && all[i].side == side;
            h = fnv_u64(h, count);
            for (size_t i = 0; i < n; i++)
                if (all[i].instrument_id == id && all[i].side == side)
                    h = fnv_order(h, &all[i], m->gateway);
        }
    }
    h = fnv_u64(h, m->next_order_id);
    h = fnv_u64(h, m->last_command_seq);
    h = fnv_u64(h, m->next_event_seq);
    free(all);
    if (m->n_stp == 0)
        return m->gateway ? fnv_u64(h, 1) : h;
    /* the STP settings, accounts ascending: found by repeated minimum, the plainest way */
    h = fnv_u64(h, m->n_stp);
    uint64_t last = 0;
    for (size_t k = 0; k < m->n_stp; k++) {
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < m->n_stp; i++)
            if ((k == 0 || m->stp_account[i] > last) &&
                (best == SIZE_MAX || m->stp_account[i] < m->stp_account[best]))
                best = i;
        last = m->stp_account[best];
        h = fnv_u64(h, last);
        h = fnv_u64(h, (uint64_t)m->stp_mode[best]);
    }
    return m->gateway ? fnv_u64(h, 1) : h;
}

void em_get_counters(const em_model *m, em_counters *out)
{
    memset(out, 0, sizeof *out);
    out->next_order_id = m->next_order_id;
    out->last_command_seq = m->last_command_seq;
    out->next_event_seq = m->next_event_seq;
    out->resting_orders = m->n_orders;
    /* a level is counted by its first order in array position */
    for (size_t i = 0; i < m->n_orders; i++) {
        const em_order *o = &m->orders[i];
        int first = 1;
        for (size_t j = 0; j < i && first; j++)
            if (m->orders[j].instrument_id == o->instrument_id && m->orders[j].side == o->side &&
                m->orders[j].price == o->price)
                first = 0;
        out->price_levels += first;
    }
    out->applied = m->applied;
    out->duplicates = m->duplicates;
    out->skipped = m->skipped;
    out->events = m->events;
    out->trades = m->trades;
    out->rejected = m->rejected;
}

int em_find_order(const em_model *m, uint64_t order_id, em_order *out)
{
    long i = find_by_id(m, order_id);
    if (i < 0)
        return 0;
    *out = m->orders[i];
    return 1;
}

int em_best(const em_model *m, uint64_t instrument_id, int side, int64_t *price, uint64_t *quantity)
{
    if (!known_instrument(m, instrument_id) || (side != TF_OFL_BUY && side != TF_OFL_SELL))
        return TF_E_INVALID_ARG;
    long b = best_of(m, instrument_id, (uint8_t)side);
    if (b < 0)
        return 0;
    int64_t px = m->orders[b].price;
    uint64_t total = 0;
    for (size_t i = 0; i < m->n_orders; i++) {
        const em_order *o = &m->orders[i];
        if (o->instrument_id == instrument_id && o->side == side && o->price == px)
            total = UINT64_MAX - total < o->remaining ? UINT64_MAX : total + o->remaining;
    }
    *price = px;
    *quantity = total;
    return 1;
}

int em_find_client(const em_model *m, uint64_t account_id, uint64_t client_order_id, em_order *out)
{
    long i = find_by_client(m, account_id, client_order_id);
    if (i < 0)
        return 0;
    *out = m->orders[i];
    return 1;
}

int em_level_at(const em_model *m, uint64_t instrument_id, int side, int64_t price, uint64_t *total,
                uint32_t *orders)
{
    if (!known_instrument(m, instrument_id) || (side != TF_OFL_BUY && side != TF_OFL_SELL))
        return TF_E_INVALID_ARG;
    uint64_t sum = 0;
    uint32_t n = 0;
    for (size_t i = 0; i < m->n_orders; i++) {
        const em_order *o = &m->orders[i];
        if (o->instrument_id == instrument_id && o->side == side && o->price == price) {
            sum = UINT64_MAX - sum < o->remaining ? UINT64_MAX : sum + o->remaining;
            n++;
        }
    }
    *total = sum;
    *orders = n;
    return n > 0;
}

int em_depth(const em_model *m, uint64_t instrument_id, int side, int64_t *prices, int max)
{
    if (!known_instrument(m, instrument_id) || (side != TF_OFL_BUY && side != TF_OFL_SELL))
        return TF_E_INVALID_ARG;
    /* the distinct prices, best first, found by repeated "next best after the last one" */
    int n = 0;
    while (n < max) {
        int found = 0;
        int64_t next = 0;
        for (size_t i = 0; i < m->n_orders; i++) {
            const em_order *o = &m->orders[i];
            if (o->instrument_id != instrument_id || o->side != side)
                continue;
            int after = n == 0 ||
                        (side == TF_OFL_BUY ? o->price < prices[n - 1] : o->price > prices[n - 1]);
            int nearer = !found || (side == TF_OFL_BUY ? o->price > next : o->price < next);
            if (after && nearer) {
                next = o->price;
                found = 1;
            }
        }
        if (!found)
            break;
        prices[n++] = next;
    }
    return n;
}

int em_last_trade(const em_model *m, uint64_t instrument_id, int64_t *price)
{
    long i = instrument_index(m, instrument_id);
    if (i < 0)
        return TF_E_INVALID_ARG;
    *price = m->last_trade[i];
    return *price != 0;
}

int em_live_at(const em_model *m, size_t k, em_order *out)
{
    if (k >= m->n_orders)
        return 0;
    *out = m->orders[k];
    return 1;
}

/* ---- self-trade prevention and account-wide cancels ---------------------------------------- */

int em_set_stp(em_model *m, uint64_t account, int mode)
{
    m->n_ev = 0; /* no events */
    if (mode < TF_ENGINE_STP_NONE || mode > TF_ENGINE_STP_CANCEL_BOTH)
        return TF_E_INVALID_ARG;
    for (size_t i = 0; i < m->n_stp; i++)
        if (m->stp_account[i] == account) {
            if (mode == TF_ENGINE_STP_NONE) {
                m->stp_account[i] = m->stp_account[m->n_stp - 1];
                m->stp_mode[i] = m->stp_mode[m->n_stp - 1];
                m->n_stp--;
            } else {
                m->stp_mode[i] = mode;
            }
            return 0;
        }
    if (mode == TF_ENGINE_STP_NONE)
        return 0;
    if (m->n_stp == EM_STP_MAX)
        return TF_E_LIMIT;
    m->stp_account[m->n_stp] = account;
    m->stp_mode[m->n_stp++] = mode;
    return 0;
}

int em_cancel_account(em_model *m, uint64_t command_seq, uint64_t account)
{
    m->n_ev = 0;
    m->ev_nomem = 0;
    if (command_seq <= m->last_command_seq) {
        m->duplicates++;
        return EM_DUPLICATE;
    }
    m->last_command_seq = command_seq;
    m->cur_seq = command_seq;
    m->applied++;
    /* Canceled events in hash order: sort a copy, then take the account's orders out */
    size_t n = m->n_orders;
    em_order *all = malloc((n ? n : 1) * sizeof *all);
    if (!all)
        return TF_E_NOMEM;
    em_orders_in_order(m, all, n);
    for (size_t i = 0; i < n; i++)
        if (all[i].account_id == account) {
            remove_at(m, (size_t)find_by_id(m, all[i].order_id));
            if (all[i].gateway) /* its placer's kind of report */
                emit_canceled_ex(m, &all[i], TF_OFX_CANCEL_ACCOUNT);
            else
                emit_canceled(m, all[i].order_id);
        }
    free(all);
    return m->ev_nomem ? TF_E_NOMEM : EM_APPLIED;
}

/* The mixed order-flow cycle used by `tollfree journal gen`, the benchmarks and the tests. */
#include <stdint.h>
#include <string.h>

#include "orderflow/orderflow_internal.h"
#include "tollfree/orderflow.h"

/* 20 messages: 10 NewLimit, 4 CancelByOrder, 2 Replace, 3 Trade, 1 Rejected, interleaved so that
 * any window of the stream has roughly the mix (what a decoder sees in steady state). */
static const uint8_t cycle[20] = {
    TF_OFL_NEW_LIMIT, TF_OFL_CANCEL_BY_ORDER, TF_OFL_NEW_LIMIT, TF_OFL_TRADE,
    TF_OFL_NEW_LIMIT, TF_OFL_REPLACE,         TF_OFL_NEW_LIMIT, TF_OFL_CANCEL_BY_ORDER,
    TF_OFL_NEW_LIMIT, TF_OFL_TRADE,           TF_OFL_NEW_LIMIT, TF_OFL_REJECTED,
    TF_OFL_NEW_LIMIT, TF_OFL_CANCEL_BY_ORDER, TF_OFL_NEW_LIMIT, TF_OFL_TRADE,
    TF_OFL_NEW_LIMIT, TF_OFL_REPLACE,         TF_OFL_NEW_LIMIT, TF_OFL_CANCEL_BY_ORDER,
};

static const uint8_t reasons[6] = {
    TF_OFL_INVALID_QUANTITY, TF_OFL_UNKNOWN_INSTRUMENT,        TF_OFL_ORDER_NOT_FOUND,
    TF_OFL_INVALID_PRICE,    TF_OFL_DUPLICATE_CLIENT_ORDER_ID, TF_OFL_REASON_OTHER,
};

/* splitmix64: a fixed, portable sequence for a seed. */
static uint64_t next_u64(tf_ofl_gen *g)
{
    uint64_t z = (g->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void tf_ofl_gen_init(tf_ofl_gen *g, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    g->state = seed;
    g->session_id = next_u64(g) | 1;
    g->ts_ns = 1700000000000000000ull;
}

static int64_t price(tf_ofl_gen *g)
{
    return 100000 + (int64_t)(next_u64(g) % 2001) - 1000;
}

static tf_ofl_qty qty(tf_ofl_gen *g)
{
    tf_ofl_qty q = {1 + next_u64(g) % 1000, 0};
    return q;
}

/* An order id the flow has already seen (1 when none yet). */
static uint64_t live_order(tf_ofl_gen *g)
{
    return g->order_id ? 1 + next_u64(g) % g->order_id : 1;
}

void tf_ofl_gen_next(tf_ofl_gen *g, tf_ofl_msg *m)
{
    memset(m, 0, sizeof *m);
    m->kind = cycle[g->n % 20];
    m->journal_seq = g->n++;
    m->session_id = g->session_id;
    g->ts_ns += 1 + next_u64(g) % 5000;
    switch (m->kind) {
    case TF_OFL_NEW_LIMIT:
        m->new_limit.command_seq = ++g->command_seq;
        m->new_limit.account_id = 1000 + next_u64(g) % 64;
        m->new_limit.client_order_id = ++g->client_order_id;
        m->new_limit.instrument_id = 1 + next_u64(g) % 16;
        m->new_limit.side = (uint8_t)(next_u64(g) & 1);
        m->new_limit.price = price(g);
        m->new_limit.quantity = qty(g);
        g->order_id++; /* the engine would accept it with the next order id */
        break;
    case TF_OFL_CANCEL_BY_ORDER:
        m->cancel_by_order.command_seq = ++g->command_seq;
        m->cancel_by_order.order_id = live_order(g);
        break;
    case TF_OFL_REPLACE:
        m->replace.command_seq = ++g->command_seq;
        m->replace.order_id = live_order(g);
        m->replace.client_order_id = ++g->client_order_id;
        m->replace.price = price(g);
        m->replace.quantity = qty(g);
        break;
    case TF_OFL_TRADE:
        m->trade.event_seq = ++g->event_seq;
        m->trade.command_seq = g->command_seq;
        m->trade.timestamp_ns = g->ts_ns;
        m->trade.maker_order_id = live_order(g);
        m->trade.taker_order_id = g->order_id;
        m->trade.instrument_id = 1 + next_u64(g) % 16;
        m->trade.price = price(g);
        m->trade.quantity = qty(g);
        break;
    default: /* TF_OFL_REJECTED */
        m->rejected.event_seq = ++g->event_seq;
        m->rejected.command_seq = g->command_seq;
        m->rejected.timestamp_ns = g->ts_ns;
        m->rejected.client_order_id = next_u64(g) & 1 ? g->client_order_id : 0;
        m->rejected.reason = reasons[next_u64(g) % 6];
        break;
    }
}

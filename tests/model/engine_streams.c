/* Deterministic random OFL1 and gateway command streams (engine_streams.h). */
#include "engine_streams.h"

#include <string.h>

uint64_t es_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t below(es_gen *g, uint64_t n)
{
    return n ? es_rand(&g->rng) % n : 0;
}

/* percent: 0..99 */
static int pct(es_gen *g)
{
    return (int)below(g, 100);
}

void es_init(es_gen *g, uint64_t seed, const uint64_t *instruments, uint32_t n_instruments)
{
    memset(g, 0, sizeof *g);
    g->rng = seed ^ 0x5eed5eed5eed5eedull;
    g->instruments = instruments;
    g->n_instruments = n_instruments;
    g->hot = n_instruments < 2 ? n_instruments : 1 + (uint32_t)below(g, 3);
    if (g->hot > n_instruments)
        g->hot = n_instruments;
    g->accounts = 1 + (uint32_t)below(g, 6);
    g->client_ids = 2 + (uint32_t)below(g, 14);
    int p = pct(g);
    if (p < 60)
        g->mid = 1000;
    else if (p < 80)
        g->mid = 3; /* near 1: some prices fall to <= 0 */
    else
        g->mid = INT64_MAX - 3; /* near the top: prices reach INT64_MAX */
    /* mostly a few ticks (many orders per level, frequent trades); sometimes wide (many levels,
     * deep books) */
    g->spread = pct(g) < 70 ? 2 + (int64_t)below(g, 6) : 20 + (int64_t)below(g, 2000);
    g->next_cid = 1000;
    /* a third of the streams stay OFL1-only (the old paths and hashes), the rest mix in gateway
     * commands */
    int gp = pct(g);
    g->gateway_pct = gp < 33 ? 0 : gp < 66 ? 15 : 45;
}

void es_set_oracle(es_gen *g, const em_model *oracle)
{
    g->oracle = oracle;
}

static const int64_t extreme_prices[] = {
    INT64_MAX, INT64_MAX - 1, 1, 2, 0, -1, INT64_MIN, INT64_MIN + 1, 1000000007,
};

static int64_t add_clamped(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b)
        return INT64_MIN;
    return a + b;
}

static int64_t gen_price(es_gen *g)
{
    int p = pct(g);
    if (p < 4)
        return extreme_prices[below(g, sizeof extreme_prices / sizeof *extreme_prices)];
    int64_t off = (int64_t)below(g, 2 * (uint64_t)g->spread + 1) - g->spread;
    return add_clamped(g->mid, off);
}

/* A limit price: while building, mostly on the passive side of the mid so that books get deep
 * (many levels, many orders per level); otherwise anywhere. */
static int64_t gen_limit_price(es_gen *g, uint8_t side)
{
    if (g->phase == 0 && pct(g) < 80) {
        int64_t off = 1 + (int64_t)below(g, (uint64_t)g->spread);
        return add_clamped(g->mid, side == TF_OFL_BUY ? -off : off);
    }
    return gen_price(g);
}

static tf_ofl_qty gen_qty(es_gen *g)
{
    tf_ofl_qty q = {0, 0};
    int p = pct(g);
    if (g->phase == 0 && p < 80)
        p = 0; /* building: small orders */
    if (g->phase == 2 && p < 40)
        p = 70; /* sweeping: large ones */
    if (p < 65) {
        q.lo = 1 + below(g, 10);
    } else if (p < 80) {
        q.lo = 10 + below(g, 200); /* multi-level sweeps, market orders larger than the book */
    } else if (p < 85) {
        static const uint64_t big[] = {INT64_MAX, INT64_MAX - 1, 1ull << 62, 1ull << 40};
        q.lo = big[below(g, 4)];
    } else if (p < 93) {
        switch (below(g, 6)) {
        case 0:
            q.lo = 0;
            break;
        case 1:
            q.lo = 5, q.hi = 1;
            break;
        case 2:
            q.lo = (uint64_t)INT64_MAX + 1;
            break;
        case 3:
            q.lo = UINT64_MAX;
            break;
        case 4:
            q.lo = 0, q.hi = UINT64_MAX;
            break;
        default:
            q.lo = 1, q.hi = 1ull << 63;
            break;
        }
    } else {
        q.lo = 1;
    }
    return q;
}

static uint64_t gen_instrument(es_gen *g)
{
    int p = pct(g);
    if (p < 85)
        return g->instruments[below(g, g->hot)];
    if (p < 95)
        return g->instruments[below(g, g->n_instruments)];
    static const uint64_t unknown[] = {0, UINT64_MAX, 100000, 17, 65537};
    uint64_t id = unknown[below(g, 5)];
    for (uint32_t i = 0; i < g->n_instruments; i++)
        if (g->instruments[i] == id)
            return 0; /* never an instrument id (the engine refuses 0) */
    return id;
}

static uint64_t gen_account(es_gen *g)
{
    if (pct(g) < 2)
        return below(g, 2) ? 0 : UINT64_MAX;
    return 1 + below(g, g->accounts);
}

static int pick_live(es_gen *g, em_order *o);

static uint64_t gen_client(es_gen *g)
{
    int p = pct(g);
    if (p < 2)
        return below(g, 2) ? 0 : UINT64_MAX;
    if (p < 40) /* a small id: reused after a fill or cancel, or a duplicate of a live one */
        return 1 + below(g, g->client_ids);
    return g->next_cid++;
}

/* account and client id of a new order: sometimes exactly a live order's (a duplicate) */
static void gen_owner(es_gen *g, uint64_t *account, uint64_t *client)
{
    em_order o;
    if (pct(g) < 5 && pick_live(g, &o)) {
        *account = o.account_id;
        *client = o.client_order_id;
        return;
    }
    *account = gen_account(g);
    *client = gen_client(g);
}

static uint8_t gen_side(es_gen *g)
{
    return (uint8_t)below(g, 2);
}

static uint64_t gen_seq(es_gen *g)
{
    int p = pct(g);
    if (p < 4) { /* a redelivery: an old or the current seq (skipped as a duplicate) */
        uint64_t back = below(g, 6);
        return g->seq > back ? g->seq - back : 0;
    }
    if (p < 5)
        return 0;
    if (p < 8)
        g->seq += 2 + below(g, 1000); /* a gap */
    else
        g->seq += 1;
    return g->seq;
}

/* A live order of the oracle, or 0 when there is none. */
static int pick_live(es_gen *g, em_order *o)
{
    if (!g->oracle)
        return 0;
    em_counters c;
    em_get_counters(g->oracle, &c);
    if (c.resting_orders == 0)
        return 0;
    return em_live_at(g->oracle, (size_t)below(g, c.resting_orders), o);
}

static uint64_t gen_order_id(es_gen *g)
{
    em_order o;
    int p = pct(g);
    if (p < 65 && pick_live(g, &o))
        return o.order_id;
    if (p < 85 && g->n_new) /* a recent one: live, filled or canceled */
        return g->n_new + 1 - below(g, g->n_new < 20 ? g->n_new : 20);
    switch (below(g, 4)) {
    case 0:
        return 0;
    case 1:
        return UINT64_MAX;
    default:
        return g->n_new + 1 + below(g, 5); /* not issued yet */
    }
}

static void gen_replace(es_gen *g, tf_ofl_replace *r)
{
    em_order o;
    if (!(pct(g) < 80 && pick_live(g, &o))) {
        r->order_id = gen_order_id(g);
        r->client_order_id = gen_client(g);
        r->price = gen_price(g);
        r->quantity = gen_qty(g);
        return;
    }
    r->order_id = o.order_id;
    int p = pct(g);
    if (p < 40)
        r->client_order_id = o.client_order_id; /* keeps its id */
    else if (p < 60) {
        em_order other; /* another live order's id: a duplicate when the account matches */
        r->client_order_id = pick_live(g, &other) ? other.client_order_id : gen_client(g);
    } else
        r->client_order_id = gen_client(g);

    p = pct(g);
    if (p < 40) {
        r->price = o.price;
    } else if (p < 65) {
        r->price = add_clamped(o.price, (int64_t)below(g, 7) - 3); /* up or down a little */
    } else if (p < 80) {
        /* across the spread: a buy moves up, a sell moves down */
        int64_t step = 1 + (int64_t)below(g, 2 * (uint64_t)g->spread + 1);
        r->price = add_clamped(o.price, o.side == TF_OFL_BUY ? step : -step);
    } else {
        r->price = gen_price(g);
    }

    tf_ofl_qty q = {0, 0};
    p = pct(g);
    if (p < 30 && o.remaining > 1)
        q.lo = 1 + below(g, o.remaining - 1); /* smaller */
    else if (p < 45)
        q.lo = o.remaining; /* equal */
    else if (p < 70 && o.remaining < (uint64_t)INT64_MAX - 100)
        q.lo = o.remaining + 1 + below(g, 100); /* larger: loses priority */
    else
        q = gen_qty(g);
    r->quantity = q;
}

static void gen_cancel_by_client(es_gen *g, tf_ofl_cancel_by_client *c)
{
    em_order o;
    if (pct(g) < 60 && pick_live(g, &o)) {
        c->account_id = o.account_id;
        c->client_order_id = o.client_order_id;
        return;
    }
    c->account_id = gen_account(g);
    c->client_order_id = gen_client(g);
}

/* An event or Heartbeat record with arbitrary fields: the engine skips it. */
static void gen_noise(es_gen *g, tf_ofl_msg *out)
{
    static const uint8_t kinds[] = {TF_OFL_HEARTBEAT, TF_OFL_ACCEPTED, TF_OFL_REJECTED,
                                    TF_OFL_REPLACED,  TF_OFL_CANCELED, TF_OFL_TRADE};
    out->kind = kinds[below(g, 6)];
    if (out->kind == TF_OFL_HEARTBEAT)
        return;
    out->trade.event_seq = es_rand(&g->rng);
    out->trade.command_seq = g->seq + 1 + below(g, 3); /* would look like the next command */
    out->trade.timestamp_ns = es_rand(&g->rng);
    out->trade.maker_order_id = below(g, 10);
    out->trade.taker_order_id = below(g, 10);
    out->trade.instrument_id = g->instruments[0];
    out->trade.price = gen_price(g);
    out->trade.quantity = gen_qty(g);
    if (out->kind == TF_OFL_REJECTED)
        out->rejected.reason = TF_OFL_ORDER_NOT_FOUND;
}

/* ---- gateway commands ---------------------------------------------------------------------- */

/* A u64 quantity: gen_qty's valid ones as they are, the invalid ones as 0 or above INT64_MAX. */
static uint64_t gen_qty64(es_gen *g)
{
    tf_ofl_qty q = gen_qty(g);
    if (q.hi == 0)
        return q.lo;
    return below(g, 2) ? 0 : (uint64_t)INT64_MAX + 1 + below(g, 3);
}

static void gen_order(es_gen *g, tf_ofx_order *c)
{
    gen_owner(g, &c->account_id, &c->client_order_id);
    c->instrument_id = gen_instrument(g);
    c->side = gen_side(g);
    int p = pct(g);
    /* mostly valid combinations, GTC limit first; sometimes anything */
    if (p < 35) {
        c->type = TF_OFX_LIMIT, c->tif = TF_OFX_GTC;
    } else if (p < 55) {
        c->type = TF_OFX_LIMIT, c->tif = TF_OFX_IOC;
    } else if (p < 70) {
        c->type = TF_OFX_LIMIT, c->tif = TF_OFX_FOK;
    } else if (p < 80) {
        c->type = TF_OFX_MARKET, c->tif = TF_OFX_IOC;
    } else if (p < 88) {
        c->type = TF_OFX_MARKET, c->tif = TF_OFX_FOK;
    } else if (p < 95) {
        c->type = (uint8_t)below(g, 2), c->tif = (uint8_t)below(g, 3);
    } else {
        c->type = (uint8_t)below(g, 4), c->tif = (uint8_t)below(g, 5);
    }
    p = pct(g);
    c->flags = p < 75 ? 0 : p < 97 ? TF_OFX_POST_ONLY : (uint8_t)below(g, 256);
    if (c->type == TF_OFX_MARKET)
        c->price = pct(g) < 90 ? 0 : gen_price(g); /* ignored */
    else
        c->price = gen_limit_price(g, c->side);
    c->quantity = gen_qty64(g);
    g->n_new++;
}

static void gen_gw_cancel(es_gen *g, tf_ofx_cancel *c)
{
    em_order o;
    if (pct(g) < 65 && pick_live(g, &o)) {
        c->account_id = o.account_id;
        c->client_order_id = o.client_order_id;
        return;
    }
    c->account_id = gen_account(g);
    c->client_order_id = gen_client(g);
}

/* Built from gen_replace's choices (an order id becomes the order's account and client id). */
static void gen_gw_replace(es_gen *g, tf_ofx_replace_by_client *c)
{
    tf_ofl_replace r;
    memset(&r, 0, sizeof r);
    gen_replace(g, &r);
    em_order o;
    if (g->oracle && em_find_order(g->oracle, r.order_id, &o) == 1 && pct(g) < 90) {
        c->account_id = o.account_id;
        c->client_order_id = o.client_order_id;
    } else {
        c->account_id = gen_account(g);
        c->client_order_id = gen_client(g);
    }
    c->new_client_order_id = r.client_order_id;
    c->price = r.price;
    c->quantity = r.quantity.hi == 0 ? r.quantity.lo : (uint64_t)INT64_MAX + 1;
}

static void gen_gateway(es_gen *g, tf_ofl_msg *out)
{
    int p = pct(g);
    if (p < 60) {
        out->kind = TF_OFX_ORDER;
        out->order.command_seq = gen_seq(g);
        gen_order(g, &out->order);
    } else if (p < 75) {
        out->kind = TF_OFX_CANCEL;
        out->cancel.command_seq = gen_seq(g);
        gen_gw_cancel(g, &out->cancel);
    } else {
        out->kind = TF_OFX_REPLACE_BY_CLIENT;
        out->replace_by_client.command_seq = gen_seq(g);
        gen_gw_replace(g, &out->replace_by_client);
    }
}

void es_next(es_gen *g, tf_ofl_msg *out)
{
    memset(out, 0, sizeof *out);
    g->phase = (int)((g->n_out++ / 250) % 3);
    if (g->gateway_pct && pct(g) < g->gateway_pct) {
        if (pct(g) < 3) { /* a gateway event record: skipped */
            gen_noise(g, out);
            if (out->kind != TF_OFL_HEARTBEAT)
                out->kind = (uint8_t)(TF_OFX_ACCEPTED + below(g, 5));
            return;
        }
        gen_gateway(g, out);
        return;
    }
    /* cumulative percentages: noise, NewLimit, NewMarket, CancelByOrder, CancelByClient; the
     * rest is Replace */
    static const int mix[3][5] = {
        {3, 68, 71, 78, 82}, /* build */
        {4, 48, 58, 72, 80}, /* churn */
        {4, 44, 64, 72, 76}, /* sweep */
    };
    const int *w = mix[g->phase];
    int p = pct(g);
    if (p < w[0]) {
        gen_noise(g, out);
        return;
    }
    if (p < w[1]) {
        out->kind = TF_OFL_NEW_LIMIT;
        tf_ofl_new_limit *c = &out->new_limit;
        c->command_seq = gen_seq(g);
        gen_owner(g, &c->account_id, &c->client_order_id);
        c->instrument_id = gen_instrument(g);
        c->side = gen_side(g);
        c->price = gen_limit_price(g, c->side);
        c->quantity = gen_qty(g);
        g->n_new++;
    } else if (p < w[2]) {
        out->kind = TF_OFL_NEW_MARKET;
        tf_ofl_new_market *c = &out->new_market;
        c->command_seq = gen_seq(g);
        gen_owner(g, &c->account_id, &c->client_order_id);
        c->instrument_id = gen_instrument(g);
        c->side = gen_side(g);
        c->quantity = gen_qty(g);
        g->n_new++;
    } else if (p < w[3]) {
        out->kind = TF_OFL_CANCEL_BY_ORDER;
        out->cancel_by_order.command_seq = gen_seq(g);
        out->cancel_by_order.order_id = gen_order_id(g);
    } else if (p < w[4]) {
        out->kind = TF_OFL_CANCEL_BY_CLIENT;
        out->cancel_by_client.command_seq = gen_seq(g);
        gen_cancel_by_client(g, &out->cancel_by_client);
    } else {
        out->kind = TF_OFL_REPLACE;
        out->replace.command_seq = gen_seq(g);
        gen_replace(g, &out->replace);
    }
}

/* Generated order flow (tf_engine_flow): the exchange-core benchmark mix and the OFL1 cycle.
 *
 * The generator applies every command it makes to an engine of its own, so it knows the order
 * ids the engine assigned and which orders are still live; a cancel or replace then picks a
 * live order. Prices walk around a mid price with most orders a few ticks from it, so that the
 * book holds about target_orders orders over about 3/4 as many levels and a few percent of
 * commands trade. Everything is integer arithmetic on a seeded xorshift: the same config gives
 * the same records on every machine.
 */
#include <stdlib.h>
#include <string.h>

#include "common/opts_size.h"
#include "engine/engine_internal.h"

#define MID0 1000000     /* starting mid price, ticks */
#define EVENTS_CAP 64    /* the shadow engine's sink, flushed to a no-op */
#define N_ACCOUNTS 1000u /* accounts the flow trades for */

struct tf_engine_flow {
    tf_engine *shadow;
    uint32_t mix;
    uint64_t rng;
    uint64_t *instruments;
    uint32_t n_instruments;
    uint32_t target;
    uint32_t spread; /* ticks each side orders spread over */
    int64_t mid;
    uint64_t command_seq, journal_seq, coid, n;
    uint64_t *live; /* candidate live order ids (some may have died since) */
    uint32_t n_live, cap_live;
    tf_ofl_msg ev[EVENTS_CAP];
    tf_engine_sink sink;
    tf_ofl_msg last_trade, last_rejected; /* for the OFL1 mix's event records */
    int have_trade, have_rejected;
};

static uint64_t next_u64(tf_engine_flow *f)
{
    uint64_t x = f->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return f->rng = x;
}

static uint32_t below(tf_engine_flow *f, uint32_t n)
{
    return (uint32_t)(((next_u64(f) >> 32) * n) >> 32);
}

/* Keeps the last events of interest; the rest are dropped. */
static int watch(void *ctx, const tf_ofl_msg *ev, size_t n)
{
    tf_engine_flow *f = ctx;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].kind == TF_OFL_TRADE) {
            f->last_trade = ev[i];
            f->have_trade = 1;
        } else if (ev[i].kind == TF_OFL_REJECTED) {
            f->last_rejected = ev[i];
            f->have_rejected = 1;
        }
    }
    return 0;
}

_Static_assert(TF_ENGINE_FLOW_CONFIG_SIZE_V1 == TFU_FIELD_END(tf_engine_flow_config, target_orders),
               "the first sized layout of tf_engine_flow_config ends at target_orders");

int tf_engine_flow_open(const tf_engine_flow_config *cfg, tf_engine_flow **out)
{
    if (!out || !cfg)
        return TF_E_NULL_ARG;
    *out = NULL;
    tf_engine_flow_config c; /* the size rule (docs/api.md) */
    if (tfu_opts_load_n(&c, sizeof c, cfg, cfg->size, TF_ENGINE_FLOW_CONFIG_SIZE_V1))
        return TF_E_INVALID_ARG;
    cfg = &c;
    if (cfg->mix > TF_ENGINE_MIX_OFL1 ||
        (cfg->instruments &&
         (cfg->n_instruments == 0 || cfg->n_instruments > TF_ENGINE_MAX_INSTRUMENTS)) ||
        cfg->target_orders > TF_ENGINE_MAX_ORDERS / 8)
        return TF_E_INVALID_ARG;
    tf_engine_flow *f = calloc(1, sizeof *f);
    if (!f)
        return TF_E_NOMEM;
    static const uint64_t one = 1;
    const uint64_t *ids = cfg->instruments ? cfg->instruments : &one;
    f->n_instruments = cfg->instruments ? cfg->n_instruments : 1;
    f->mix = cfg->mix;
    f->rng = cfg->seed * 0x9E3779B97F4A7C15ull ^ 0xD1B54A32D192ED03ull;
    if (!f->rng)
        f->rng = 1;
    f->target = cfg->target_orders ? cfg->target_orders : 1000;
    /* About 3 orders per 4 levels: each side spreads over 2/3 of target levels; the draw
     * favours prices near the mid, so the outer ones stay sparse. */
    f->spread = f->target * 2 / 3 + 2;
    f->mid = MID0 + (int64_t)f->spread;
    f->cap_live = f->target * 4 + 1024;
    f->instruments = malloc(f->n_instruments * sizeof *f->instruments);
    f->live = malloc(f->cap_live * sizeof *f->live);
    tf_engine_config ec = {.size = sizeof ec,
                           .instruments = ids,
                           .n_instruments = f->n_instruments,
                           .max_orders = f->target * 4 + 1024};
    int rc = f->instruments && f->live ? tf_engine_create(&ec, &f->shadow) : TF_E_NOMEM;
    if (rc) {
        tf_engine_flow_close(f);
        return rc;
    }
    memcpy(f->instruments, ids, f->n_instruments * sizeof *ids);
    f->sink = (tf_engine_sink){.ev = f->ev, .cap = EVENTS_CAP, .flush = watch, .ctx = f};
    *out = f;
    return 0;
}

void tf_engine_flow_close(tf_engine_flow *f)
{
    if (!f)
        return;
    tf_engine_destroy(f->shadow);
    free(f->live);
    free(f->instruments);
    free(f);
}

/* A live order id picked at random (0 when none): dead candidates are dropped on the way. */
static uint64_t pick_live(tf_engine_flow *f, tf_engine_order *o)
{
    while (f->n_live) {
        uint32_t i = below(f, f->n_live);
        if (tf_engine_find_order(f->shadow, f->live[i], o) == 1)
            return f->live[i];
        f->live[i] = f->live[--f->n_live];
    }
    return 0;
}

static void remember(tf_engine_flow *f, uint64_t id)
{
    if (f->n_live == f->cap_live) { /* drop the dead before growing past the bound */
        uint32_t k = 0;
        tf_engine_order o;
        for (uint32_t i = 0; i < f->n_live; i++)
            if (tf_engine_find_order(f->shadow, f->live[i], &o) == 1)
                f->live[k++] = f->live[i];
        f->n_live = k;
        if (k == f->cap_live)
            return;
    }
    f->live[f->n_live++] = id;
}

/* A passive price: most near the mid, a long thin tail out to `spread` ticks. */
static int64_t passive_price(tf_engine_flow *f, int side)
{
    uint32_t a = below(f, f->spread), b = below(f, f->spread);
    int64_t off = 1 + (int64_t)((uint64_t)a * b / f->spread);
    return side == TF_OFL_BUY ? f->mid - off : f->mid + off;
}

/* A price that crosses the spread by a few ticks (the order trades). */
static int64_t aggressive_price(tf_engine_flow *f, int side)
{
    int64_t off = (int64_t)below(f, 4);
    return side == TF_OFL_BUY ? f->mid + off : f->mid - off;
}

enum op { GTC, MARKET, CANCEL, REPLACE };

static enum op draw_exchange_core(tf_engine_flow *f)
{
    uint32_t r = below(f, 100);
    enum op op = r < 9 ? GTC : r < 12 ? MARKET : r < 18 ? CANCEL : REPLACE;
    uint64_t live = f->shadow->live;
    /* Keep the book near its target size. */
    if (op == CANCEL && live < f->target)
        op = GTC;
    else if (op == GTC && live > f->target + f->target / 8)
        op = CANCEL;
    return op;
}

static enum op draw_ofl1(tf_engine_flow *f, int *event_kind)
{
    static const uint8_t cycle[20] = {0, 0, 2, 0, 9, 0, 3, 0, 2, 0, 9, 0, 3, 0, 2, 9, 0, 2, 8, 0};
    uint8_t c = cycle[f->n % 20];
    *event_kind = c == 9 ? TF_OFL_TRADE : c == 8 ? TF_OFL_REJECTED : 0;
    return c == 0 ? GTC : c == 2 ? CANCEL : REPLACE;
}

static void make_command(tf_engine_flow *f, enum op op, tf_ofl_msg *m)
{
    tf_engine_order o;
    uint64_t id = (op == CANCEL || op == REPLACE) ? pick_live(f, &o) : 0;
    if ((op == CANCEL || op == REPLACE) && !id)
        op = GTC;
    uint64_t seq = ++f->command_seq;
    int side = (int)below(f, 2);
    uint64_t account = 1 + below(f, N_ACCOUNTS);
    uint64_t instrument = f->instruments[below(f, f->n_instruments)];
    switch (op) {
    case GTC:
        m->kind = TF_OFL_NEW_LIMIT;
        m->new_limit = (tf_ofl_new_limit){
            .command_seq = seq,
            .account_id = account,
            .client_order_id = ++f->coid,
            .instrument_id = instrument,
            .price = below(f, 20) ? passive_price(f, side) : aggressive_price(f, side),
            .quantity = {1 + below(f, 100), 0},
            .side = (uint8_t)side,
        };
        break;
    case MARKET:
        m->kind = TF_OFL_NEW_MARKET;
        m->new_market = (tf_ofl_new_market){
            .command_seq = seq,
            .account_id = account,
            .client_order_id = ++f->coid,
            .instrument_id = instrument,
            .quantity = {1 + below(f, 150), 0},
            .side = (uint8_t)side,
        };
        break;
    case CANCEL:
        if (below(f, 2)) {
            m->kind = TF_OFL_CANCEL_BY_ORDER;
            m->cancel_by_order = (tf_ofl_cancel_by_order){.command_seq = seq, .order_id = id};
        } else {
            m->kind = TF_OFL_CANCEL_BY_CLIENT;
            m->cancel_by_client = (tf_ofl_cancel_by_client){.command_seq = seq,
                                                            .account_id = o.account_id,
                                                            .client_order_id = o.client_order_id};
        }
        break;
    case REPLACE:
        m->kind = TF_OFL_REPLACE;
        m->replace = (tf_ofl_replace){
            .command_seq = seq,
            .order_id = id,
            .client_order_id = ++f->coid,
            .price = below(f, 33) ? passive_price(f, o.side) : aggressive_price(f, o.side),
            .quantity = {o.remaining, 0},
        };
        break;
    }
}

int tf_engine_flow_next(tf_engine_flow *f, tf_ofl_msg *out)
{
    if (!f || !out)
        return TF_E_NULL_ARG;
    int event_kind = 0;
    enum op op = f->mix == TF_ENGINE_MIX_OFL1 ? draw_ofl1(f, &event_kind) : draw_exchange_core(f);
    f->n++;
    memset(out, 0, sizeof *out);
    if (event_kind) {
        int have = event_kind == TF_OFL_TRADE ? f->have_trade : f->have_rejected;
        if (have) {
            *out = event_kind == TF_OFL_TRADE ? f->last_trade : f->last_rejected;
        } else { /* none yet: a Rejected(OrderNotFound) with event_seq 0 stands in */
            out->kind = TF_OFL_REJECTED;
            out->rejected.reason = TF_OFL_ORDER_NOT_FOUND;
        }
        out->journal_seq = f->journal_seq++;
        return 0;
    }
    /* The mid drifts a tick now and then, so resting orders end up crossed and trade. */
    if (below(f, 64) == 0)
        f->mid += below(f, 2) ? 1 : -1;
    make_command(f, op, out);
    out->journal_seq = f->journal_seq++;
    f->sink.n = 0;
    uint64_t before = f->shadow->next_order_id;
    tf_engine_apply(f->shadow, out, &f->sink);
    watch(f, f->ev, f->sink.n);
    if (f->shadow->next_order_id != before) { /* accepted: a new order id that may rest */
        tf_engine_order o;
        if (tf_engine_find_order(f->shadow, before, &o) == 1)
            remember(f, before);
    }
    return 0;
}

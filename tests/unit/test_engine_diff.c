/* Differential test: the fast engine (src/engine/) against the slow model (tests/model/) on
 * seeded random command streams (tests/model/engine_streams.c). Every event is compared byte for
 * byte (encoded stream frames, plus session_id), the outcome of every record, the counters and
 * the state hash after every command (every few commands late in a long stream), and the query
 * API (find_order, find_client, best, depth, level_at, last_trade, for_each_order with filled)
 * against the model's book every so often. The streams mix gateway commands (Order, Cancel,
 * ReplaceByClient) into two thirds of the seeds; their reports are compared the same way.
 *
 * On a mismatch the stream is shortened (records removed while it still diverges) and printed as
 * the builder calls of test_engine_spec.c, ready to paste into a hand-worked test.
 *
 * Usage: test_engine_diff [SEEDS [COMMANDS [FIRST_SEED]]] (defaults keep ctest under a few
 * seconds in release, about 5 s of CPU under ASan). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_model.h"
#include "engine_streams.h"
#include "harness.h"
#include "tollfree/engine.h"
#include "tollfree/error.h"
#include "tollfree/orderflow.h"

/* ---- a sink that collects every event, through small flushes ------------------------------ */

typedef struct collected {
    tf_ofl_msg *ev;
    size_t n, cap;
} collected;

static int collect(void *ctx, const tf_ofl_msg *ev, size_t n)
{
    collected *c = ctx;
    if (n == 0)
        return 0;
    if (c->n + n > c->cap) {
        size_t cap = (c->n + n) * 2;
        tf_ofl_msg *p = realloc(c->ev, cap * sizeof *p);
        if (!p)
            return TF_E_NOMEM;
        c->ev = p;
        c->cap = cap;
    }
    memcpy(c->ev + c->n, ev, n * sizeof *ev);
    c->n += n;
    return 0;
}

/* ---- one configuration -------------------------------------------------------------------- */

typedef struct config {
    const char *name;
    const uint64_t *instruments;
    uint32_t n_instruments;
    uint32_t max_orders;
    size_t sink_cap; /* 0: max_orders + 2 without flush; else this cap with a flush callback */
    int stp;         /* self-trade prevention: modes set at open and by STP_SET records */
} config;

/* Two records the streams of an STP config carry beside the OFL1 ones (kinds outside the OFL1
 * set, never encoded): an account's STP mode (cancel_by_client's account_id, mode in its
 * client_order_id), and a cancel of every order of an account (cancel_by_client's command_seq
 * and account_id). */
#define STP_SET 0x75
#define CANCEL_ACCOUNT 0x76

typedef struct pair {
    const config *cfg;
    em_model *m;
    tf_engine *e;
    tf_engine_sink sink;
    tf_ofl_msg *buf;
    collected got;
    /* scratch for the book comparison */
    em_order *mo;
    tf_engine_order *eo;
    size_t n_eo, cap_o;
} pair;

static int pair_open(pair *p, const config *cfg)
{
    memset(p, 0, sizeof *p);
    p->cfg = cfg;
    if (em_create(cfg->instruments, cfg->n_instruments, cfg->max_orders, &p->m) != 0)
        return -1;
    tf_engine_config ec = {.size = sizeof ec,
                           .instruments = cfg->instruments,
                           .n_instruments = cfg->n_instruments,
                           .max_orders = cfg->max_orders,
                           .max_bytes = 0};
    int rc = tf_engine_create(&ec, &p->e);
    if (rc != 0) {
        fprintf(stderr, "tf_engine_create(%s): %d %s\n", cfg->name, rc, tf_strerror(rc));
        em_destroy(p->m);
        return -1;
    }
    size_t cap = cfg->sink_cap ? cfg->sink_cap : (size_t)cfg->max_orders + 2;
    p->buf = calloc(cap, sizeof *p->buf);
    p->sink.ev = p->buf;
    p->sink.cap = cap;
    if (cfg->sink_cap) {
        p->sink.flush = collect;
        p->sink.ctx = &p->got;
    }
    for (uint64_t a = 1; cfg->stp && a <= 8; a++) /* accounts 1..8: modes 1, 2, 3, 0, 1, ... */
        if (em_set_stp(p->m, a, (int)(a % 4)) || tf_engine_set_stp(p->e, a, (int)(a % 4)))
            return -1;
    p->cap_o = (size_t)cfg->max_orders + 1;
    p->mo = calloc(p->cap_o, sizeof *p->mo);
    p->eo = calloc(p->cap_o, sizeof *p->eo);
    return p->buf && p->mo && p->eo ? 0 : -1;
}

static void pair_close(pair *p)
{
    em_destroy(p->m);
    tf_engine_destroy(p->e);
    free(p->buf);
    free(p->got.ev);
    free(p->mo);
    free(p->eo);
}

/* ---- printing ----------------------------------------------------------------------------- */

static void fmt_qty(char *out, size_t cap, tf_ofl_qty q)
{
    if (q.hi)
        snprintf(out, cap, "QH(%" PRIu64 "u, %" PRIu64 "u)", q.lo, q.hi);
    else
        snprintf(out, cap, "Q(%" PRIu64 "u)", q.lo);
}

static void fmt_i64(char *out, size_t cap, int64_t v)
{
    if (v == INT64_MIN)
        snprintf(out, cap, "INT64_MIN");
    else
        snprintf(out, cap, "%" PRId64, v);
}

/* A record as test_engine_spec.c's builder calls (nl, nm, cxo, cxc, rep, acc, ...). */
static void fmt_msg(const tf_ofl_msg *m, char *out, size_t cap)
{
    char q[64], px[32];
    switch (m->kind) {
    case TF_OFL_NEW_LIMIT: {
        const tf_ofl_new_limit *c = &m->new_limit;
        fmt_qty(q, sizeof q, c->quantity);
        fmt_i64(px, sizeof px, c->price);
        snprintf(out, cap, "nl(%" PRIu64 "u, %" PRIu64 "u, %" PRIu64 "u, %" PRIu64 "u, %s, %s, %s)",
                 c->command_seq, c->account_id, c->client_order_id, c->instrument_id,
                 c->side ? "SELL" : "BUY", px, q);
        break;
    }
    case TF_OFL_NEW_MARKET: {
        const tf_ofl_new_market *c = &m->new_market;
        fmt_qty(q, sizeof q, c->quantity);
        snprintf(out, cap, "nm(%" PRIu64 "u, %" PRIu64 "u, %" PRIu64 "u, %" PRIu64 "u, %s, %s)",
                 c->command_seq, c->account_id, c->client_order_id, c->instrument_id,
                 c->side ? "SELL" : "BUY", q);
        break;
    }
    case TF_OFL_CANCEL_BY_ORDER:
        snprintf(out, cap, "cxo(%" PRIu64 "u, %" PRIu64 "u)", m->cancel_by_order.command_seq,
                 m->cancel_by_order.order_id);
        break;
    case TF_OFL_CANCEL_BY_CLIENT:
        snprintf(out, cap, "cxc(%" PRIu64 "u, %" PRIu64 "u, %" PRIu64 "u)",
                 m->cancel_by_client.command_seq, m->cancel_by_client.account_id,
                 m->cancel_by_client.client_order_id);
        break;
    case TF_OFL_REPLACE: {
        const tf_ofl_replace *c = &m->replace;
        fmt_qty(q, sizeof q, c->quantity);
        fmt_i64(px, sizeof px, c->price);
        snprintf(out, cap, "rep(%" PRIu64 "u, %" PRIu64 "u, %" PRIu64 "u, %s, %s)", c->command_seq,
                 c->order_id, c->client_order_id, px, q);
        break;
    }
    case TF_OFL_ACCEPTED:
        snprintf(out, cap, "acc(%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ")",
                 m->accepted.event_seq, m->accepted.command_seq, m->accepted.order_id,
                 m->accepted.client_order_id, m->accepted.account_id);
        break;
    case TF_OFL_REJECTED:
        snprintf(out, cap, "rej(%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %s)", m->rejected.event_seq,
                 m->rejected.command_seq, m->rejected.client_order_id,
                 tf_ofl_reason_name(m->rejected.reason) ? tf_ofl_reason_name(m->rejected.reason)
                                                        : "?");
        break;
    case TF_OFL_REPLACED:
        snprintf(out, cap, "rpl(%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ")",
                 m->replaced.event_seq, m->replaced.command_seq, m->replaced.order_id,
                 m->replaced.client_order_id);
        break;
    case TF_OFL_CANCELED:
        snprintf(out, cap, "can(%" PRIu64 ", %" PRIu64 ", %" PRIu64 ")", m->canceled.event_seq,
                 m->canceled.command_seq, m->canceled.order_id);
        break;
    case TF_OFL_TRADE:
        fmt_i64(px, sizeof px, m->trade.price);
        fmt_qty(q, sizeof q, m->trade.quantity);
        snprintf(out, cap,
                 "trd(%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %s, %s)",
                 m->trade.event_seq, m->trade.command_seq, m->trade.maker_order_id,
                 m->trade.taker_order_id, m->trade.instrument_id, px, q);
        break;
    case TF_OFX_ORDER: {
        const tf_ofx_order *c = &m->order;
        fmt_i64(px, sizeof px, c->price);
        snprintf(out, cap,
                 "order(%" PRIu64 "u, %" PRIu64 "u, %" PRIu64 "u, %" PRIu64 "u, %s, %s, %" PRIu64
                 "u, type %u, tif %u, flags %u)",
                 c->command_seq, c->account_id, c->client_order_id, c->instrument_id,
                 c->side ? "SELL" : "BUY", px, c->quantity, c->type, c->tif, c->flags);
        break;
    }
    case TF_OFX_CANCEL:
        snprintf(out, cap, "gcancel(%" PRIu64 "u, %" PRIu64 "u, %" PRIu64 "u)",
                 m->cancel.command_seq, m->cancel.account_id, m->cancel.client_order_id);
        break;
    case TF_OFX_REPLACE_BY_CLIENT: {
        const tf_ofx_replace_by_client *c = &m->replace_by_client;
        fmt_i64(px, sizeof px, c->price);
        snprintf(out, cap,
                 "greplace(%" PRIu64 "u, %" PRIu64 "u, %" PRIu64 "u, %" PRIu64 "u, %s, %" PRIu64
                 "u)",
                 c->command_seq, c->account_id, c->client_order_id, c->new_client_order_id, px,
                 c->quantity);
        break;
    }
    case TF_OFX_ACCEPTED:
        snprintf(out, cap, "ACC(%" PRIu64 ", order %" PRIu64 ", coid %" PRIu64 ", qty %" PRIu64 ")",
                 m->accepted_ex.event_seq, m->accepted_ex.order_id, m->accepted_ex.client_order_id,
                 m->accepted_ex.quantity);
        break;
    case TF_OFX_REPLACED:
        snprintf(out, cap,
                 "RPL(%" PRIu64 ", order %" PRIu64 ", coid %" PRIu64 " <- %" PRIu64 ", rem %" PRIu64
                 ", filled %" PRIu64 ")",
                 m->replaced_ex.event_seq, m->replaced_ex.order_id, m->replaced_ex.client_order_id,
                 m->replaced_ex.orig_client_order_id, m->replaced_ex.remaining,
                 m->replaced_ex.filled);
        break;
    case TF_OFX_CANCELED:
        snprintf(out, cap,
                 "CAN(%" PRIu64 ", order %" PRIu64 ", rem %" PRIu64 ", filled %" PRIu64
                 ", reason %u)",
                 m->canceled_ex.event_seq, m->canceled_ex.order_id, m->canceled_ex.remaining,
                 m->canceled_ex.filled, m->canceled_ex.reason);
        break;
    case TF_OFX_FILL:
        snprintf(out, cap,
                 "FIL(%" PRIu64 ", maker %" PRIu64 ", taker %" PRIu64 ", px %" PRId64
                 ", qty %" PRIu64 ", maker rem %" PRIu64 " filled %" PRIu64 ")",
                 m->fill.event_seq, m->fill.maker_order_id, m->fill.taker_order_id, m->fill.price,
                 m->fill.quantity, m->fill.maker_remaining, m->fill.maker_filled);
        break;
    case TF_OFX_REJECTED:
        snprintf(out, cap, "REJ(%" PRIu64 ", account %" PRIu64 ", coid %" PRIu64 ", reason %u)",
                 m->rejected_ex.event_seq, m->rejected_ex.account_id,
                 m->rejected_ex.client_order_id, m->rejected_ex.reason);
        break;
    case STP_SET:
        snprintf(out, cap, "stp(account %" PRIu64 ", mode %" PRIu64 ")",
                 m->cancel_by_client.account_id, m->cancel_by_client.client_order_id);
        break;
    case CANCEL_ACCOUNT:
        snprintf(out, cap, "cancel_account(%" PRIu64 "u, account %" PRIu64 ")",
                 m->cancel_by_client.command_seq, m->cancel_by_client.account_id);
        break;
    default:
        snprintf(out, cap, "record(kind 0x%02x)", m->kind);
        break;
    }
    if (m->kind >= TF_OFL_ACCEPTED && (m->journal_seq || m->session_id)) {
        size_t l = strlen(out);
        snprintf(out + l, cap - l, " [journal_seq %" PRIu64 " session %" PRIu64 "]", m->journal_seq,
                 m->session_id);
    }
    if (m->kind == TF_OFL_ACCEPTED || m->kind == TF_OFL_REJECTED || m->kind == TF_OFL_REPLACED ||
        m->kind == TF_OFL_CANCELED || m->kind == TF_OFL_TRADE) {
        if (m->accepted.timestamp_ns != m->accepted.command_seq) {
            size_t l = strlen(out);
            snprintf(out + l, cap - l, " [timestamp_ns %" PRIu64 "]", m->accepted.timestamp_ns);
        }
    }
}

/* ---- comparing ---------------------------------------------------------------------------- */

/* Encoded as stream frames by the extension codec (OFL1 and gateway kinds alike). */
static int same_event(const tf_ofl_msg *a, const tf_ofl_msg *b)
{
    uint8_t fa[256], fb[256];
    int na = tf_ofx_frame_encode(fa, sizeof fa, a);
    int nb = tf_ofx_frame_encode(fb, sizeof fb, b);
    return na > 0 && na == nb && memcmp(fa, fb, (size_t)na) == 0 && a->session_id == b->session_id;
}

static int collect_order(void *ctx, const tf_engine_order *o)
{
    pair *p = ctx;
    if (p->n_eo < p->cap_o)
        p->eo[p->n_eo] = *o;
    p->n_eo++;
    return 0;
}

static int same_order(const em_order *a, const tf_engine_order *b)
{
    return a->order_id == b->order_id && a->account_id == b->account_id &&
           a->client_order_id == b->client_order_id && a->instrument_id == b->instrument_id &&
           a->price == b->price && a->remaining == b->remaining && a->side == b->side &&
           a->filled == b->filled;
}

/* Books, queries. Returns a description of the first difference, or NULL. */
static const char *compare_books(pair *p, uint64_t probe_id)
{
    size_t n = em_orders_in_order(p->m, p->mo, p->cap_o);
    p->n_eo = 0;
    if (tf_engine_for_each_order(p->e, collect_order, p) != 0)
        return "for_each_order returned non-zero";
    if (p->n_eo != n)
        return "for_each_order: order count";
    for (size_t i = 0; i < n; i++)
        if (!same_order(&p->mo[i], &p->eo[i]))
            return "for_each_order: an order or its place";
    for (size_t i = 0; i < n; i++) {
        tf_engine_order o;
        if (tf_engine_find_order(p->e, p->mo[i].order_id, &o) != 1 || !same_order(&p->mo[i], &o))
            return "find_order of a live order";
    }
    for (size_t i = 0; i < n; i++) {
        tf_engine_order o;
        if (tf_engine_find_client(p->e, p->mo[i].account_id, p->mo[i].client_order_id, &o) != 1 ||
            !same_order(&p->mo[i], &o))
            return "find_client of a live order";
    }
    em_order mo;
    tf_engine_order eo;
    if (tf_engine_find_order(p->e, probe_id, &eo) != em_find_order(p->m, probe_id, &mo))
        return "find_order of a probe id";
    /* a probe (account, client id): small ids are the streams' reused ones */
    uint64_t pa = 1 + probe_id % 7, pc = 1 + probe_id % 16;
    int fr = tf_engine_find_client(p->e, pa, pc, &eo);
    if (fr != em_find_client(p->m, pa, pc, &mo) || (fr == 1 && !same_order(&mo, &eo)))
        return "find_client of a probe";
    /* best and depth of every side of every book, from the ordered list */
    for (uint32_t k = 0; k < p->cfg->n_instruments; k++) {
        uint64_t id = p->cfg->instruments[k];
        for (int side = TF_OFL_BUY; side <= TF_OFL_SELL; side++) {
            int64_t mp = 0, ep = 0;
            uint64_t mq = 0, eq = 0;
            int mr = em_best(p->m, id, side, &mp, &mq);
            int er = tf_engine_best(p->e, id, side, &ep, &eq);
            if (mr != er || (mr == 1 && (mp != ep || mq != eq)))
                return "best";
            tf_engine_level lv[8], want[8];
            int n_lv = tf_engine_depth(p->e, id, side, lv, 8);
            int n_want = 0;
            for (size_t i = 0; i < n; i++) {
                const em_order *o = &p->mo[i];
                if (o->instrument_id != id || o->side != side)
                    continue;
                if (n_want == 0 || want[n_want - 1].price != o->price) {
                    if (n_want == 8)
                        break;
                    want[n_want].price = o->price;
                    want[n_want].total = 0;
                    want[n_want].orders = 0;
                    n_want++;
                }
                tf_engine_level *l = &want[n_want - 1];
                l->total =
                    UINT64_MAX - l->total < o->remaining ? UINT64_MAX : l->total + o->remaining;
                l->orders++;
            }
            if (n_lv != n_want)
                return "depth: level count";
            for (int i = 0; i < n_lv; i++)
                if (lv[i].price != want[i].price || lv[i].total != want[i].total ||
                    lv[i].orders != want[i].orders)
                    return "depth: a level";
            int64_t mprices[8];
            int n_mp = em_depth(p->m, id, side, mprices, 8);
            if (n_mp != n_lv)
                return "depth: the model's level count";
            /* level_at (O(1), the level table) at every depth price, one tick either side and the
             * model's totals */
            for (int i = 0; i < n_lv; i++) {
                if (mprices[i] != lv[i].price)
                    return "depth: the model's prices";
                for (int64_t d = -1; d <= 1; d++) {
                    /* prices of levels are in 1..INT64_MAX */
                    if ((d < 0 && lv[i].price == 1) || (d > 0 && lv[i].price == INT64_MAX))
                        continue;
                    int64_t px = lv[i].price + d;
                    tf_engine_level l;
                    uint64_t mt = 0;
                    uint32_t mn = 0;
                    int er2 = tf_engine_level_at(p->e, id, side, px, &l);
                    int mr2 = em_level_at(p->m, id, side, px, &mt, &mn);
                    if (er2 != mr2 ||
                        (er2 == 1 && (l.price != px || l.total != mt || l.orders != mn)))
                        return "level_at";
                }
            }
            tf_engine_level l;
            uint64_t mt;
            uint32_t mn;
            int64_t probe_px = (int64_t)(probe_id % 4000);
            if (tf_engine_level_at(p->e, id, side, probe_px, &l) !=
                em_level_at(p->m, id, side, probe_px, &mt, &mn))
                return "level_at of a probe price";
        }
        int64_t mlt = -1, elt = -2;
        int mr3 = em_last_trade(p->m, id, &mlt), er3 = tf_engine_last_trade(p->e, id, &elt);
        if (mr3 != er3 || (mr3 >= 0 && mlt != elt))
            return "last_trade";
        if (tf_engine_best(p->e, id, 2, &(int64_t){0}, &(uint64_t){0}) != TF_E_INVALID_ARG)
            return "best of side 2";
    }
    return NULL;
}

static const char *compare_state(pair *p)
{
    if (em_state_hash(p->m) != tf_engine_state_hash(p->e))
        return "state hash";
    em_counters mc;
    tf_engine_counters ec;
    em_get_counters(p->m, &mc);
    tf_engine_get_counters(p->e, &ec);
    if (mc.next_order_id != ec.next_order_id || mc.last_command_seq != ec.last_command_seq ||
        mc.next_event_seq != ec.next_event_seq)
        return "counters: next_order_id / last_command_seq / next_event_seq";
    if (mc.resting_orders != ec.resting_orders || mc.price_levels != ec.price_levels)
        return "counters: resting_orders / price_levels";
    if (mc.applied != ec.applied || mc.duplicates != ec.duplicates || mc.skipped != ec.skipped)
        return "counters: applied / duplicates / skipped";
    if (mc.events != ec.events || mc.trades != ec.trades || mc.rejected != ec.rejected)
        return "counters: events / trades / rejected";
    return NULL;
}

/* Applies one record to both. Returns NULL, or what differed. verbose prints both sides. */
/* The two sides of one record: the OFL1 ones through em_apply / tf_engine_apply, the STP ones
 * through their own calls. */
static int step_model(pair *p, const tf_ofl_msg *cmd)
{
    const tf_ofl_cancel_by_client *c = &cmd->cancel_by_client;
    size_t n_m = 0;
    if (cmd->kind == STP_SET)
        return em_set_stp(p->m, c->account_id, (int)c->client_order_id);
    if (cmd->kind == CANCEL_ACCOUNT)
        return em_cancel_account(p->m, c->command_seq, c->account_id);
    return em_apply(p->m, cmd, NULL, 0, &n_m);
}

static int step_engine(pair *p, const tf_ofl_msg *cmd)
{
    const tf_ofl_cancel_by_client *c = &cmd->cancel_by_client;
    if (cmd->kind == STP_SET)
        return tf_engine_set_stp(p->e, c->account_id, (int)c->client_order_id);
    if (cmd->kind == CANCEL_ACCOUNT)
        return tf_engine_cancel_account(p->e, c->command_seq, c->account_id, &p->sink);
    return tf_engine_apply(p->e, cmd, &p->sink);
}

/* Gateway reports seen (the engine's side), to show the streams reach those paths at all:
 * Fills, ReplacedEx, CanceledEx by reason (0..4), RejectedEx WouldCross and InvalidTif. */
static uint64_t seen_fill, seen_replaced, seen_canceled[5], seen_would_cross, seen_invalid_tif;

static void count_reports(const tf_ofl_msg *ev, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const tf_ofl_msg *m = &ev[i];
        seen_fill += m->kind == TF_OFX_FILL;
        seen_replaced += m->kind == TF_OFX_REPLACED;
        if (m->kind == TF_OFX_CANCELED && m->canceled_ex.reason < 5)
            seen_canceled[m->canceled_ex.reason]++;
        if (m->kind == TF_OFX_REJECTED) {
            seen_would_cross += m->rejected_ex.reason == TF_OFX_REASON_WOULD_CROSS;
            seen_invalid_tif += m->rejected_ex.reason == TF_OFX_REASON_INVALID_TIF;
        }
    }
}

static const char *step(pair *p, const tf_ofl_msg *cmd, int check_state, int verbose)
{
    size_t n_m = 0;
    int rm = step_model(p, cmd);
    const tf_ofl_msg *ev_m = em_last_events(p->m, &n_m);

    p->sink.n = 0;
    p->got.n = 0;
    int re = step_engine(p, cmd);
    const tf_ofl_msg *ev_e = p->buf;
    size_t n_e = p->sink.n;
    if (p->cfg->sink_cap) { /* what was flushed, then what is left in the buffer */
        if (collect(&p->got, p->buf, p->sink.n) != 0)
            return "out of memory";
        ev_e = p->got.ev;
        n_e = p->got.n;
    }
    count_reports(ev_e, n_e);
    const char *why = NULL;
    if (rm != re)
        why = "outcome";
    else if (n_m != n_e)
        why = "event count";
    for (size_t i = 0; !why && i < n_m; i++)
        if (!same_event(&ev_m[i], &ev_e[i]))
            why = "an event";
    if (!why && check_state)
        why = compare_state(p);
    if (verbose && why) {
        char s[256];
        fmt_msg(cmd, s, sizeof s);
        fprintf(stderr, "    %s -> model %d, engine %d\n", s, rm, re);
        for (size_t i = 0; i < n_m || i < n_e; i++) {
            if (i < n_m) {
                fmt_msg(&ev_m[i], s, sizeof s);
                fprintf(stderr, "      model  %s\n", s);
            }
            if (i < n_e) {
                fmt_msg(&ev_e[i], s, sizeof s);
                fprintf(stderr, "      engine %s\n", s);
            }
        }
        if (!strcmp(why, "state hash"))
            fprintf(stderr, "      hash model %016" PRIx64 " engine %016" PRIx64 "\n",
                    em_state_hash(p->m), tf_engine_state_hash(p->e));
    }
    return why;
}

/* Replays cmds[0..n) on a fresh pair, checking everything after every record. Returns the index
 * of the first record after which they differ, or -1. */
static long first_divergence(const config *cfg, const tf_ofl_msg *cmds, size_t n, int verbose)
{
    pair p;
    if (pair_open(&p, cfg) != 0) {
        pair_close(&p);
        return 0;
    }
    long at = -1;
    for (size_t i = 0; i < n && at < 0; i++) {
        const char *why = step(&p, &cmds[i], 1, verbose);
        if (!why)
            why = compare_books(&p, i);
        if (why) {
            at = (long)i;
            if (verbose)
                fprintf(stderr, "    differs after record %zu: %s\n", i, why);
        }
    }
    pair_close(&p);
    return at;
}

/* Shrinks a diverging stream (delta debugging over chunks, then single records) and prints the
 * result. */
static void shrink_and_print(const config *cfg, const tf_ofl_msg *cmds, size_t n)
{
    tf_ofl_msg *cur = malloc(n * sizeof *cur), *tmp = malloc(n * sizeof *tmp);
    if (!cur || !tmp) {
        free(cur);
        free(tmp);
        return;
    }
    long at = first_divergence(cfg, cmds, n, 0);
    if (at < 0) {
        fprintf(stderr, "  (the divergence does not reproduce on a fresh replay)\n");
        free(cur);
        free(tmp);
        return;
    }
    size_t len = (size_t)at + 1;
    memcpy(cur, cmds, len * sizeof *cur);
    for (size_t chunk = len / 2; chunk >= 1; chunk /= 2) {
        int progress = 1;
        while (progress) {
            progress = 0;
            for (size_t start = 0; start + chunk <= len && len > 1;) {
                size_t k = 0;
                for (size_t i = 0; i < len; i++)
                    if (i < start || i >= start + chunk)
                        tmp[k++] = cur[i];
                long a = first_divergence(cfg, tmp, k, 0);
                if (a >= 0) {
                    len = (size_t)a + 1;
                    memcpy(cur, tmp, len * sizeof *cur);
                    progress = 1;
                } else {
                    start += chunk;
                }
            }
        }
        if (chunk == 1)
            break;
    }
    fprintf(stderr,
            "  minimal reproduction (%s: %u instruments from %" PRIu64
            ", max_orders %u), %zu records:\n",
            cfg->name, cfg->n_instruments, cfg->instruments[0], cfg->max_orders, len);
    for (size_t i = 0; i < len; i++) {
        char s[256];
        fmt_msg(&cur[i], s, sizeof s);
        fprintf(stderr, "    %s\n", s);
    }
    first_divergence(cfg, cur, len, 1);
    free(cur);
    free(tmp);
}

/* ---- the run ------------------------------------------------------------------------------ */

static const uint64_t ins16[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const uint64_t ins1[1] = {7};
static const uint64_t ins_odd[4] = {UINT64_MAX, 42, 1, 1000000};

static const config configs[] = {
    {"16 instruments", ins16, 16, 1000, 0, 0},
    {"16 instruments, flushing sink", ins16, 16, 1000, 3, 0},
    {"1 instrument, max_orders 8", ins1, 1, 8, 0, 0},
    {"odd ids, max_orders 8", ins_odd, 4, 8, 1, 0},
    {"1 instrument, max_orders 1", ins1, 1, 1, 0, 0},
    {"odd ids", ins_odd, 4, 1000, 0, 0},
    {"16 instruments, STP", ins16, 16, 1000, 0, 1},
    {"1 instrument, STP, flushing sink", ins1, 1, 1000, 2, 1},
};
#define N_CONFIGS (sizeof configs / sizeof *configs)

/* In an STP config, about 1 record in 40 becomes an STP_SET (modes 0..3 of accounts 1..8 and
 * a few others) and 1 in 80 a CANCEL_ACCOUNT with the next command_seq. */
static void stp_record(es_gen *g, tf_ofl_msg *m)
{
    uint64_t r = es_rand(&g->rng) % 80;
    if (r > 2)
        return;
    uint64_t account = 1 + es_rand(&g->rng) % (g->accounts > 8 ? g->accounts : 8);
    memset(m, 0, sizeof *m);
    m->kind = r == 0 ? CANCEL_ACCOUNT : STP_SET;
    m->cancel_by_client.account_id = account;
    if (r == 0)
        m->cancel_by_client.command_seq = ++g->seq;
    else
        m->cancel_by_client.client_order_id = es_rand(&g->rng) % 4;
}

/* One seeded stream. Returns 0 when the two agree throughout. */
static int run_stream(const config *cfg, uint64_t seed, size_t n_cmds, uint64_t *applied,
                      uint64_t *trades)
{
    pair p;
    if (pair_open(&p, cfg) != 0) {
        pair_close(&p);
        CHECK(0);
        return -1;
    }
    tf_ofl_msg *cmds = malloc(n_cmds * sizeof *cmds);
    es_gen g;
    es_init(&g, seed, cfg->instruments, cfg->n_instruments);
    es_set_oracle(&g, p.m);
    int bad = 0;
    for (size_t i = 0; i < n_cmds && cmds; i++) {
        es_next(&g, &cmds[i]);
        if (cfg->stp)
            stp_record(&g, &cmds[i]);
        /* every record early on, then every 5th, and every record near the end */
        int check_state = i < 400 || i % 5 == 0 || i + 50 >= n_cmds;
        const char *why = step(&p, &cmds[i], check_state, 0);
        if (!why && (i % 50 == 0 || i + 1 == n_cmds))
            why = compare_books(&p, es_rand(&g.rng) % (g.n_new + 3));
        if (why) {
            fprintf(stderr, "%s, seed %" PRIu64 ": differs after record %zu: %s\n", cfg->name, seed,
                    i, why);
            shrink_and_print(cfg, cmds, i + 1);
            bad = 1;
            break;
        }
    }
    em_counters c;
    em_get_counters(p.m, &c);
    *applied += c.applied;
    *trades += c.trades;
    CHECK(!bad && cmds);
    free(cmds);
    pair_close(&p);
    return bad;
}

int main(int argc, char **argv)
{
    size_t seeds = argc > 1 ? strtoull(argv[1], NULL, 0) : 150;
    size_t n_cmds = argc > 2 ? strtoull(argv[2], NULL, 0) : 4000;
    uint64_t first = argc > 3 ? strtoull(argv[3], NULL, 0) : 1;
    uint64_t applied = 0, trades = 0;
    int failures = 0;
    for (size_t s = 0; s < seeds; s++) {
        const config *cfg = &configs[s % N_CONFIGS];
        failures += run_stream(cfg, first + s, n_cmds, &applied, &trades) != 0;
        if (failures >= 3) {
            fprintf(stderr, "stopping after 3 diverging streams\n");
            break;
        }
    }
    printf("%zu streams of %zu records: %" PRIu64 " commands applied, %" PRIu64 " trades\n", seeds,
           n_cmds, applied, trades);
    printf("gateway reports: %" PRIu64 " Fill, %" PRIu64 " ReplacedEx, CanceledEx %" PRIu64
           " requested / %" PRIu64 " unfilled / %" PRIu64 " not fillable / %" PRIu64
           " self-trade, RejectedEx %" PRIu64 " would cross / %" PRIu64 " invalid tif\n",
           seen_fill, seen_replaced, seen_canceled[0], seen_canceled[1], seen_canceled[2],
           seen_canceled[3], seen_would_cross, seen_invalid_tif);
    /* the streams must reach the interesting paths at all */
    CHECK(trades > applied / 20);
    if (seeds >= N_CONFIGS * 3) {
        CHECK(seen_fill > 0 && seen_replaced > 0 && seen_would_cross > 0 && seen_invalid_tif > 0);
        for (int r = 0; r < 4; r++)
            CHECK(seen_canceled[r] > 0);
    }
    return tf_test_report();
}

/* The engine as a gateway drives it (docs/engine.md "Gateway commands and execution reports"):
 * one hand-worked case per rule of the Order (time in force, post-only, market), Cancel and
 * ReplaceByClient commands, their execution reports field by field, `filled`, OFL1 and gateway
 * orders meeting each other, self-trade prevention, level totals and tf_engine_level_at, the
 * last trade price, the state hash rule for the gateway flag, and snapshot version 3 beside
 * versions 1 and 2. The random streams of test_engine_diff compare the same rules with the slow
 * model. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tollfree/engine.h"

static tf_ofl_msg ev[256];
static tf_engine_sink sink = {.ev = ev, .cap = 256};
static uint64_t seq;

static tf_engine *make_n(uint32_t max_orders)
{
    static const uint64_t ids[] = {1, 2};
    tf_engine_config ec = {
        .size = sizeof ec, .instruments = ids, .n_instruments = 2, .max_orders = max_orders};
    tf_engine *e = NULL;
    CHECK_RC(tf_engine_create(&ec, &e), 0);
    seq = 0;
    return e;
}

static tf_engine *make(void)
{
    return make_n(100);
}

static int apply(tf_engine *e, tf_ofl_msg *m)
{
    sink.n = 0;
    return tf_engine_apply(e, m, &sink);
}

static int order(tf_engine *e, uint64_t account, uint64_t coid, int side, int type, int tif,
                 int flags, int64_t price, uint64_t qty)
{
    tf_ofl_msg m = {.kind = TF_OFX_ORDER};
    m.order = (tf_ofx_order){.command_seq = ++seq,
                             .account_id = account,
                             .client_order_id = coid,
                             .instrument_id = 1,
                             .price = price,
                             .quantity = qty,
                             .side = (uint8_t)side,
                             .type = (uint8_t)type,
                             .tif = (uint8_t)tif,
                             .flags = (uint8_t)flags};
    return apply(e, &m);
}

/* A resting GTC limit order through the gateway. */
static int gtc(tf_engine *e, uint64_t account, uint64_t coid, int side, int64_t price, uint64_t qty)
{
    return order(e, account, coid, side, TF_OFX_LIMIT, TF_OFX_GTC, 0, price, qty);
}

static int cancel(tf_engine *e, uint64_t account, uint64_t coid)
{
    tf_ofl_msg m = {.kind = TF_OFX_CANCEL};
    m.cancel =
        (tf_ofx_cancel){.command_seq = ++seq, .account_id = account, .client_order_id = coid};
    return apply(e, &m);
}

static int replace(tf_engine *e, uint64_t account, uint64_t coid, uint64_t new_coid, int64_t price,
                   uint64_t qty)
{
    tf_ofl_msg m = {.kind = TF_OFX_REPLACE_BY_CLIENT};
    m.replace_by_client = (tf_ofx_replace_by_client){.command_seq = ++seq,
                                                     .account_id = account,
                                                     .client_order_id = coid,
                                                     .new_client_order_id = new_coid,
                                                     .price = price,
                                                     .quantity = qty};
    return apply(e, &m);
}

static int ofl_limit(tf_engine *e, uint64_t account, uint64_t coid, int side, int64_t price,
                     uint64_t qty)
{
    tf_ofl_msg m = {.kind = TF_OFL_NEW_LIMIT};
    m.new_limit = (tf_ofl_new_limit){.command_seq = ++seq,
                                     .account_id = account,
                                     .client_order_id = coid,
                                     .instrument_id = 1,
                                     .price = price,
                                     .quantity = {qty, 0},
                                     .side = (uint8_t)side};
    return apply(e, &m);
}

/* The last command's event kinds: gateway reports upper case (A accepted, P replaced, C canceled,
 * F fill, R rejected), OFL1 events lower case (a, p, c, t, r). */
static const char *kinds(void)
{
    static char s[257];
    size_t i;
    for (i = 0; i < sink.n; i++) {
        switch (ev[i].kind) {
        case TF_OFX_ACCEPTED:
            s[i] = 'A';
            break;
        case TF_OFX_REPLACED:
            s[i] = 'P';
            break;
        case TF_OFX_CANCELED:
            s[i] = 'C';
            break;
        case TF_OFX_FILL:
            s[i] = 'F';
            break;
        case TF_OFX_REJECTED:
            s[i] = 'R';
            break;
        case TF_OFL_ACCEPTED:
            s[i] = 'a';
            break;
        case TF_OFL_REPLACED:
            s[i] = 'p';
            break;
        case TF_OFL_CANCELED:
            s[i] = 'c';
            break;
        case TF_OFL_TRADE:
            s[i] = 't';
            break;
        case TF_OFL_REJECTED:
            s[i] = 'r';
            break;
        default:
            s[i] = '?';
        }
    }
    s[i] = 0;
    return s;
}

#define CHECK_KINDS(want)                                                                          \
    do {                                                                                           \
        if (strcmp(kinds(), want))                                                                 \
            fprintf(stderr, "%s:%d: events %s, want %s\n", __FILE__, __LINE__, kinds(), want);     \
        CHECK(!strcmp(kinds(), want));                                                             \
    } while (0)

static void check_rejected(uint64_t account, uint64_t coid, int reason)
{
    CHECK_KINDS("R");
    CHECK_EQ(ev[0].rejected_ex.account_id, account);
    CHECK_EQ(ev[0].rejected_ex.client_order_id, coid);
    CHECK_EQ(ev[0].rejected_ex.reason, reason);
    CHECK_EQ(ev[0].rejected_ex.command_seq, seq);
}

static void check_canceled(const tf_ofl_msg *m, uint64_t id, uint64_t coid, int64_t price,
                           uint64_t remaining, uint64_t filled, int side, int reason)
{
    CHECK_EQ(m->kind, TF_OFX_CANCELED);
    CHECK_EQ(m->canceled_ex.order_id, id);
    CHECK_EQ(m->canceled_ex.client_order_id, coid);
    CHECK_EQ(m->canceled_ex.instrument_id, 1);
    CHECK_EQ(m->canceled_ex.price, price);
    CHECK_EQ(m->canceled_ex.remaining, remaining);
    CHECK_EQ(m->canceled_ex.filled, filled);
    CHECK_EQ(m->canceled_ex.side, side);
    CHECK_EQ(m->canceled_ex.reason, reason);
}

static uint64_t level_total(tf_engine *e, int side, int64_t price)
{
    tf_engine_level l;
    int rc = tf_engine_level_at(e, 1, side, price, &l);
    return rc == 1 ? l.total : 0;
}

/* Asks: order 1 (acct 8, coid 1) 50 @ 100, order 2 (acct 9, coid 1) 30 @ 101. */
static tf_engine *two_asks(void)
{
    tf_engine *e = make();
    CHECK_RC(gtc(e, 8, 1, TF_OFL_SELL, 100, 50), TF_ENGINE_APPLIED);
    CHECK_KINDS("A");
    CHECK_RC(gtc(e, 9, 1, TF_OFL_SELL, 101, 30), TF_ENGINE_APPLIED);
    return e;
}

static void ioc(void)
{
    tf_engine *e = two_asks();
    /* IOC partial: 70 @ 100 takes the 50 at 100; 20 canceled */
    CHECK_RC(order(e, 7, 5, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_IOC, 0, 100, 70), 0);
    CHECK_KINDS("AFC");
    CHECK_EQ(ev[0].accepted_ex.order_id, 3);
    CHECK_EQ(ev[0].accepted_ex.client_order_id, 5);
    CHECK_EQ(ev[0].accepted_ex.account_id, 7);
    CHECK_EQ(ev[0].accepted_ex.instrument_id, 1);
    CHECK_EQ(ev[0].accepted_ex.price, 100);
    CHECK_EQ(ev[0].accepted_ex.quantity, 70);
    CHECK_EQ(ev[0].accepted_ex.side, TF_OFL_BUY);
    CHECK_EQ(ev[0].accepted_ex.type, TF_OFX_LIMIT);
    CHECK_EQ(ev[0].accepted_ex.tif, TF_OFX_IOC);
    CHECK_EQ(ev[0].accepted_ex.flags, 0);
    const tf_ofx_fill *f = &ev[1].fill;
    CHECK_EQ(f->maker_order_id, 1);
    CHECK_EQ(f->taker_order_id, 3);
    CHECK_EQ(f->maker_client_order_id, 1);
    CHECK_EQ(f->taker_client_order_id, 5);
    CHECK_EQ(f->maker_account_id, 8);
    CHECK_EQ(f->taker_account_id, 7);
    CHECK_EQ(f->instrument_id, 1);
    CHECK_EQ(f->price, 100);
    CHECK_EQ(f->quantity, 50);
    CHECK_EQ(f->maker_remaining, 0);
    CHECK_EQ(f->maker_filled, 50);
    CHECK_EQ(f->taker_side, TF_OFL_BUY);
    CHECK_EQ(f->event_seq + 1, ev[2].canceled_ex.event_seq);
    check_canceled(&ev[2], 3, 5, 100, 20, 50, TF_OFL_BUY, TF_OFX_CANCEL_UNFILLED);
    CHECK_EQ(ev[2].canceled_ex.account_id, 7);
    tf_engine_order o;
    CHECK_EQ(tf_engine_find_order(e, 3, &o), 0); /* an IOC never rests */
    /* IOC nothing: the best ask is 101 */
    CHECK_RC(order(e, 7, 6, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_IOC, 0, 100, 10), 0);
    CHECK_KINDS("AC");
    check_canceled(&ev[1], 4, 6, 100, 10, 0, TF_OFL_BUY, TF_OFX_CANCEL_UNFILLED);
    CHECK_EQ(level_total(e, TF_OFL_SELL, 101), 30);
    tf_engine_destroy(e);
}

/* The book as a string of its orders (for "unchanged" checks). */
static int dump_one(void *ctx, const tf_engine_order *o)
{
    char *s = ctx;
    size_t n = strlen(s);
    snprintf(s + n, 4096 - n, "%llu:%lld:%llu:%llu;", (unsigned long long)o->order_id,
             (long long)o->price, (unsigned long long)o->remaining, (unsigned long long)o->filled);
    return 0;
}

static void dump(tf_engine *e, char *s)
{
    s[0] = 0;
    tf_engine_for_each_order(e, dump_one, s);
}

static void fok(void)
{
    tf_engine *e = two_asks();
    static char before[4096], after[4096];
    dump(e, before);
    /* not fillable: 81 > 50 + 30 at <= 101; no Fill, the book as it was */
    CHECK_RC(order(e, 7, 5, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_FOK, 0, 101, 81), 0);
    CHECK_KINDS("AC");
    check_canceled(&ev[1], 3, 5, 101, 81, 0, TF_OFL_BUY, TF_OFX_CANCEL_NOT_FILLABLE);
    dump(e, after);
    CHECK(!strcmp(before, after));
    /* not fillable at its limit: 60 @ 100 sees only the 50 */
    CHECK_RC(order(e, 7, 6, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_FOK, 0, 100, 60), 0);
    CHECK_KINDS("AC");
    CHECK_EQ(ev[1].canceled_ex.reason, TF_OFX_CANCEL_NOT_FILLABLE);
    /* fillable across two levels: 80 @ 101 */
    CHECK_RC(order(e, 7, 7, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_FOK, 0, 101, 80), 0);
    CHECK_KINDS("AFF");
    CHECK_EQ(ev[1].fill.quantity, 50);
    CHECK_EQ(ev[2].fill.quantity, 30);
    CHECK_EQ(ev[2].fill.price, 101);
    CHECK_EQ(ev[2].fill.maker_filled, 30);
    int64_t p;
    uint64_t q;
    CHECK_RC(tf_engine_best(e, 1, TF_OFL_SELL, &p, &q), 0);
    /* market FOK: not fillable on an empty side, then fillable */
    CHECK_RC(order(e, 7, 8, TF_OFL_BUY, TF_OFX_MARKET, TF_OFX_FOK, 0, 0, 1), 0);
    CHECK_KINDS("AC");
    check_canceled(&ev[1], 6, 8, 0, 1, 0, TF_OFL_BUY, TF_OFX_CANCEL_NOT_FILLABLE);
    CHECK_RC(gtc(e, 8, 2, TF_OFL_SELL, 120, 10), 0);
    CHECK_RC(order(e, 7, 9, TF_OFL_BUY, TF_OFX_MARKET, TF_OFX_FOK, 0, 0, 10), 0);
    CHECK_KINDS("AF");
    CHECK_EQ(ev[1].fill.price, 120);
    tf_engine_destroy(e);
}

static void market(void)
{
    tf_engine *e = two_asks();
    /* market IOC larger than the book: both levels, remainder canceled at price 0; the wire
     * price of a market order is ignored */
    CHECK_RC(order(e, 7, 5, TF_OFL_BUY, TF_OFX_MARKET, TF_OFX_IOC, 0, -5, 100), 0);
    CHECK_KINDS("AFFC");
    CHECK_EQ(ev[0].accepted_ex.price, 0);
    CHECK_EQ(ev[0].accepted_ex.type, TF_OFX_MARKET);
    check_canceled(&ev[3], 3, 5, 0, 20, 80, TF_OFL_BUY, TF_OFX_CANCEL_UNFILLED);
    int64_t px;
    CHECK_RC(tf_engine_last_trade(e, 1, &px), 1);
    CHECK_EQ(px, 101);
    CHECK_RC(tf_engine_last_trade(e, 2, &px), 0);
    CHECK_EQ(px, 0);
    CHECK_RC(tf_engine_last_trade(e, 3, &px), TF_E_INVALID_ARG);
    CHECK_RC(tf_engine_last_trade(e, 1, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_engine_last_trade(NULL, 1, &px), TF_E_NULL_ARG);
    tf_engine_destroy(e);
}

static void post_only(void)
{
    tf_engine *e = two_asks();
    CHECK_RC(order(e, 7, 5, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_GTC, TF_OFX_POST_ONLY, 100, 10), 0);
    check_rejected(7, 5, TF_OFX_REASON_WOULD_CROSS);
    CHECK_RC(order(e, 7, 5, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_GTC, TF_OFX_POST_ONLY, 101, 10), 0);
    check_rejected(7, 5, TF_OFX_REASON_WOULD_CROSS);
    CHECK_RC(order(e, 7, 5, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_GTC, TF_OFX_POST_ONLY, 99, 10), 0);
    CHECK_KINDS("A");
    CHECK_EQ(ev[0].accepted_ex.flags, TF_OFX_POST_ONLY);
    CHECK_EQ(level_total(e, TF_OFL_BUY, 99), 10);
    /* a sell post-only at the best bid crosses, above it rests */
    CHECK_RC(order(e, 8, 6, TF_OFL_SELL, TF_OFX_LIMIT, TF_OFX_GTC, TF_OFX_POST_ONLY, 99, 10), 0);
    check_rejected(8, 6, TF_OFX_REASON_WOULD_CROSS);
    CHECK_RC(order(e, 8, 6, TF_OFL_SELL, TF_OFX_LIMIT, TF_OFX_GTC, TF_OFX_POST_ONLY, 100, 10), 0);
    CHECK_KINDS("A");
    CHECK_EQ(level_total(e, TF_OFL_SELL, 100), 60);
    tf_engine_destroy(e);
}

/* Every check in its place of the documented order: each case fails the named check and, where
 * it can, a later one too (the earlier reason wins). */
static void invalid(void)
{
    tf_engine *e = make_n(2);
    CHECK_RC(gtc(e, 7, 1, TF_OFL_SELL, 100, 10), 0);
    const int L = TF_OFX_LIMIT, M = TF_OFX_MARKET, G = TF_OFX_GTC, I = TF_OFX_IOC, F = TF_OFX_FOK;
    const int PO = TF_OFX_POST_ONLY;
    struct {
        uint64_t instrument;
        int type, tif, flags;
        int64_t price;
        uint64_t qty, coid;
        int reason;
    } cases[] = {
        {3, L, 9, 0, 0, 0, 1, TF_OFL_UNKNOWN_INSTRUMENT},
        {1, L, 9, 0, 0, 0, 1, TF_OFL_INVALID_QUANTITY},
        {1, L, 9, 0, 0, (uint64_t)INT64_MAX + 1, 1, TF_OFL_INVALID_QUANTITY},
        {1, L, G, 0, 0, UINT64_MAX, 1, TF_OFL_INVALID_QUANTITY},
        {1, 2, G, 0, 0, 5, 1, TF_OFX_REASON_INVALID_TIF},
        {1, L, 3, 0, 0, 5, 1, TF_OFX_REASON_INVALID_TIF},
        {1, L, G, 2, 0, 5, 1, TF_OFX_REASON_INVALID_TIF},
        {1, L, G, 0x80, 0, 5, 1, TF_OFX_REASON_INVALID_TIF},
        {1, M, G, 0, 0, 5, 1, TF_OFX_REASON_INVALID_TIF},
        {1, M, I, PO, 0, 5, 1, TF_OFX_REASON_INVALID_TIF},
        {1, M, F, PO, 0, 5, 1, TF_OFX_REASON_INVALID_TIF},
        {1, L, I, PO, 0, 5, 1, TF_OFX_REASON_INVALID_TIF},
        {1, L, F, PO, 0, 5, 1, TF_OFX_REASON_INVALID_TIF},
        {1, L, G, 0, 0, 5, 1, TF_OFL_INVALID_PRICE},
        {1, L, I, 0, -1, 5, 1, TF_OFL_INVALID_PRICE},
        {1, L, G, 0, 50, 5, 1, TF_OFL_DUPLICATE_CLIENT_ORDER_ID},
        {1, M, I, 0, 0, 5, 1, TF_OFL_DUPLICATE_CLIENT_ORDER_ID},
        {1, L, G, PO, 150, 5, 1, TF_OFL_DUPLICATE_CLIENT_ORDER_ID},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tf_ofl_msg m = {.kind = TF_OFX_ORDER};
        m.order = (tf_ofx_order){.command_seq = ++seq,
                                 .account_id = 7,
                                 .client_order_id = cases[i].coid,
                                 .instrument_id = cases[i].instrument,
                                 .price = cases[i].price,
                                 .quantity = cases[i].qty,
                                 .side = TF_OFL_BUY,
                                 .type = (uint8_t)cases[i].type,
                                 .tif = (uint8_t)cases[i].tif,
                                 .flags = (uint8_t)cases[i].flags};
        CHECK_RC(apply(e, &m), TF_ENGINE_APPLIED);
        if (sink.n != 1 || ev[0].kind != TF_OFX_REJECTED ||
            ev[0].rejected_ex.reason != cases[i].reason)
            fprintf(stderr, "case %zu: %s reason %d\n", i, kinds(), ev[0].rejected_ex.reason);
        check_rejected(7, cases[i].coid, cases[i].reason);
    }
    /* the live-order limit (2): a second resting order fits, then every limit order (even an
     * IOC) is refused with Other and a post-only that would cross too (Other comes first); a
     * market order needs no slot */
    CHECK_RC(gtc(e, 7, 2, TF_OFL_SELL, 101, 10), 0);
    CHECK_KINDS("A");
    CHECK_RC(order(e, 7, 3, TF_OFL_BUY, L, I, 0, 100, 1), 0);
    check_rejected(7, 3, TF_OFL_REASON_OTHER);
    CHECK_RC(order(e, 7, 3, TF_OFL_BUY, L, G, PO, 100, 1), 0);
    check_rejected(7, 3, TF_OFL_REASON_OTHER);
    CHECK_RC(order(e, 8, 3, TF_OFL_BUY, M, I, 0, 0, 1), 0);
    CHECK_KINDS("AF");
    /* a side byte the codec refuses: malformed, nothing changes */
    tf_engine_counters c0, c1;
    tf_engine_get_counters(e, &c0);
    tf_ofl_msg m = {.kind = TF_OFX_ORDER};
    m.order = (tf_ofx_order){.command_seq = seq + 1,
                             .account_id = 7,
                             .client_order_id = 9,
                             .instrument_id = 1,
                             .price = 5,
                             .quantity = 5,
                             .side = 2};
    CHECK_RC(apply(e, &m), TF_E_OFL_INVALID_SIDE);
    tf_engine_get_counters(e, &c1);
    CHECK_EQ(c1.last_command_seq, c0.last_command_seq);
    /* a redelivered gateway command is a duplicate; an event record is skipped */
    m.order.side = 0;
    m.order.command_seq = seq;
    CHECK_RC(apply(e, &m), TF_ENGINE_DUPLICATE);
    CHECK_EQ(sink.n, 0);
    m.kind = TF_OFX_FILL;
    CHECK_RC(apply(e, &m), TF_ENGINE_SKIPPED);
    tf_engine_destroy(e);
}

static void cancel_cmd(void)
{
    tf_engine *e = two_asks();
    CHECK_RC(cancel(e, 9, 1), 0);
    CHECK_KINDS("C");
    check_canceled(&ev[0], 2, 1, 101, 30, 0, TF_OFL_SELL, TF_OFX_CANCEL_REQUESTED);
    CHECK_EQ(ev[0].canceled_ex.account_id, 9);
    CHECK_RC(cancel(e, 9, 1), 0);
    check_rejected(9, 1, TF_OFL_ORDER_NOT_FOUND);
    CHECK_RC(cancel(e, 7, 1), 0); /* coid 1 lives for account 8, not 7 */
    check_rejected(7, 1, TF_OFL_ORDER_NOT_FOUND);
    /* after a partial fill, the cancel reports what was filled */
    CHECK_RC(order(e, 7, 5, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_IOC, 0, 100, 20), 0);
    CHECK_RC(cancel(e, 8, 1), 0);
    check_canceled(&ev[0], 1, 1, 100, 30, 20, TF_OFL_SELL, TF_OFX_CANCEL_REQUESTED);
    tf_engine_destroy(e);
}

static void replace_cmd(void)
{
    tf_engine *e = make();
    CHECK_RC(gtc(e, 8, 1, TF_OFL_SELL, 100, 50), 0); /* order 1 */
    CHECK_RC(gtc(e, 9, 1, TF_OFL_SELL, 100, 40), 0); /* order 2, behind it */
    /* partial fill of order 1: filled 10 */
    CHECK_RC(order(e, 7, 1, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_IOC, 0, 100, 10), 0);
    CHECK_EQ(level_total(e, TF_OFL_SELL, 100), 80);
    /* keep priority: same price, 30 <= 40 remaining, new client id 2 */
    CHECK_RC(replace(e, 8, 1, 2, 100, 30), 0);
    CHECK_KINDS("P");
    const tf_ofx_replaced *r = &ev[0].replaced_ex;
    CHECK_EQ(r->order_id, 1);
    CHECK_EQ(r->client_order_id, 2);
    CHECK_EQ(r->orig_client_order_id, 1);
    CHECK_EQ(r->account_id, 8);
    CHECK_EQ(r->instrument_id, 1);
    CHECK_EQ(r->price, 100);
    CHECK_EQ(r->remaining, 30);
    CHECK_EQ(r->filled, 10);
    CHECK_EQ(r->side, TF_OFL_SELL);
    CHECK_EQ(level_total(e, TF_OFL_SELL, 100), 70);
    tf_engine_order o;
    CHECK_RC(tf_engine_find_client(e, 8, 1, &o), 0);
    CHECK_RC(tf_engine_find_client(e, 8, 2, &o), 1);
    CHECK_EQ(o.order_id, 1);
    CHECK_EQ(o.remaining, 30);
    CHECK_EQ(o.filled, 10);
    CHECK_RC(tf_engine_find_client(NULL, 8, 2, &o), TF_E_NULL_ARG);
    /* it kept its place: the next taker meets order 1 first */
    CHECK_RC(order(e, 7, 2, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_IOC, 0, 100, 5), 0);
    CHECK_KINDS("AF");
    CHECK_EQ(ev[1].fill.maker_order_id, 1);
    CHECK_EQ(ev[1].fill.maker_client_order_id, 2);
    CHECK_EQ(ev[1].fill.maker_remaining, 25);
    CHECK_EQ(ev[1].fill.maker_filled, 15);
    /* rejects: the new client id is reported */
    CHECK_RC(replace(e, 8, 1, 3, 100, 10), 0);
    check_rejected(8, 3, TF_OFL_ORDER_NOT_FOUND);
    CHECK_RC(replace(e, 8, 2, 3, 100, 0), 0);
    check_rejected(8, 3, TF_OFL_INVALID_QUANTITY);
    CHECK_RC(replace(e, 8, 2, 3, 0, 10), 0);
    check_rejected(8, 3, TF_OFL_INVALID_PRICE);
    CHECK_RC(gtc(e, 8, 3, TF_OFL_SELL, 105, 1), 0);
    CHECK_RC(replace(e, 8, 2, 3, 100, 10), 0);
    check_rejected(8, 3, TF_OFL_DUPLICATE_CLIENT_ORDER_ID);
    /* a larger quantity loses priority: order 1 goes behind order 2 */
    CHECK_RC(replace(e, 8, 2, 2, 100, 26), 0);
    CHECK_KINDS("P");
    CHECK_EQ(ev[0].replaced_ex.orig_client_order_id, 2);
    CHECK_EQ(ev[0].replaced_ex.remaining, 26);
    CHECK_EQ(ev[0].replaced_ex.filled, 15);
    CHECK_RC(order(e, 7, 3, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_IOC, 0, 100, 1), 0);
    CHECK_EQ(ev[1].fill.maker_order_id, 2);
    /* re-match: a buy order replaced across the asks trades as aggressor and keeps its filled */
    CHECK_RC(gtc(e, 7, 10, TF_OFL_BUY, 90, 100), 0); /* order 7 */
    CHECK_RC(replace(e, 7, 10, 11, 100, 100), 0);
    CHECK_KINDS("PFF");
    CHECK_EQ(ev[0].replaced_ex.order_id, 7);
    CHECK_EQ(ev[0].replaced_ex.remaining, 100);
    CHECK_EQ(ev[1].fill.taker_order_id, 7);
    CHECK_EQ(ev[1].fill.taker_client_order_id, 11);
    CHECK_EQ(ev[1].fill.maker_order_id, 2);
    CHECK_EQ(ev[1].fill.quantity, 39);
    CHECK_EQ(ev[2].fill.maker_order_id, 1);
    CHECK_EQ(ev[2].fill.quantity, 26);
    CHECK_EQ(ev[2].fill.maker_remaining, 0);
    CHECK_EQ(ev[2].fill.maker_filled, 41);
    CHECK_RC(tf_engine_find_client(e, 7, 11, &o), 1);
    CHECK_EQ(o.remaining, 35);
    CHECK_EQ(o.filled, 65);
    CHECK_EQ(o.price, 100);
    CHECK_EQ(level_total(e, TF_OFL_BUY, 100), 35);
    CHECK_EQ(level_total(e, TF_OFL_BUY, 90), 0);
    /* filled survives a replace that moves it again */
    CHECK_RC(replace(e, 7, 11, 11, 95, 40), 0);
    CHECK_KINDS("P");
    CHECK_RC(tf_engine_find_client(e, 7, 11, &o), 1);
    CHECK_EQ(o.filled, 65);
    CHECK_EQ(o.remaining, 40);
    tf_engine_destroy(e);
}

/* OFL1 and gateway orders meet: the command being applied decides every event's layout. */
static void mixed(void)
{
    tf_engine *e = make();
    CHECK_RC(ofl_limit(e, 8, 1, TF_OFL_SELL, 100, 50), 0); /* order 1, OFL1 */
    CHECK_KINDS("a");
    CHECK_RC(gtc(e, 9, 1, TF_OFL_SELL, 100, 50), 0); /* order 2, gateway */
    /* a gateway taker against both: Fills, the OFL1 maker's client id included */
    CHECK_RC(order(e, 7, 1, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_GTC, 0, 100, 60), 0);
    CHECK_KINDS("AFF");
    CHECK_EQ(ev[1].fill.maker_order_id, 1);
    CHECK_EQ(ev[1].fill.maker_client_order_id, 1);
    CHECK_EQ(ev[1].fill.maker_account_id, 8);
    CHECK_EQ(ev[2].fill.maker_order_id, 2);
    CHECK_EQ(ev[2].fill.quantity, 10);
    CHECK_EQ(ev[2].fill.maker_remaining, 40);
    /* an OFL1 taker against the gateway maker: OFL1 Trade; its filled still counts */
    CHECK_RC(ofl_limit(e, 7, 2, TF_OFL_BUY, 100, 15), 0);
    CHECK_KINDS("at");
    CHECK_EQ(ev[1].trade.maker_order_id, 2);
    CHECK_EQ(ev[1].trade.quantity.lo, 15);
    tf_engine_order o;
    CHECK_RC(tf_engine_find_order(e, 2, &o), 1);
    CHECK_EQ(o.filled, 25);
    CHECK_EQ(o.remaining, 25);
    /* an OFL1 cancel of a gateway order: Canceled; a gateway cancel of an OFL1 order: CanceledEx */
    CHECK_RC(ofl_limit(e, 8, 3, TF_OFL_SELL, 110, 5), 0); /* order 5 */
    CHECK_RC(cancel(e, 8, 3), 0);
    CHECK_KINDS("C");
    CHECK_EQ(ev[0].canceled_ex.order_id, 5);
    tf_ofl_msg m = {.kind = TF_OFL_CANCEL_BY_ORDER};
    m.cancel_by_order = (tf_ofl_cancel_by_order){.command_seq = ++seq, .order_id = 2};
    CHECK_RC(apply(e, &m), 0);
    CHECK_KINDS("c");
    tf_engine_destroy(e);
}

static void stp(void)
{
    tf_engine *e = make();
    CHECK_RC(tf_engine_set_stp(e, 7, TF_ENGINE_STP_CANCEL_OLDEST), 0);
    CHECK_RC(gtc(e, 7, 1, TF_OFL_SELL, 100, 10), 0); /* order 1, own */
    CHECK_RC(gtc(e, 8, 1, TF_OFL_SELL, 100, 10), 0); /* order 2 */
    /* FOK counts the own order (20 >= 15) and matches; STP cancels order 1, order 2 fills 10,
     * the book runs out: the remainder 5 is canceled as an IOC's (UNFILLED) */
    CHECK_RC(order(e, 7, 2, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_FOK, 0, 100, 15), 0);
    CHECK_KINDS("ACFC");
    check_canceled(&ev[1], 1, 1, 100, 10, 0, TF_OFL_SELL, TF_OFX_CANCEL_SELF_TRADE);
    CHECK_EQ(ev[2].fill.maker_order_id, 2);
    check_canceled(&ev[3], 3, 2, 100, 5, 10, TF_OFL_BUY, TF_OFX_CANCEL_UNFILLED);
    /* cancel-newest: the gateway aggressor's remainder is canceled with SELF_TRADE */
    CHECK_RC(tf_engine_set_stp(e, 7, TF_ENGINE_STP_CANCEL_NEWEST), 0);
    CHECK_RC(gtc(e, 8, 2, TF_OFL_SELL, 100, 5), 0); /* order 4 */
    CHECK_RC(gtc(e, 7, 3, TF_OFL_SELL, 101, 5), 0); /* order 5, own */
    CHECK_RC(order(e, 7, 4, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_GTC, 0, 101, 8), 0);
    CHECK_KINDS("AFC");
    CHECK_EQ(ev[1].fill.maker_order_id, 4);
    check_canceled(&ev[2], 6, 4, 101, 3, 5, TF_OFL_BUY, TF_OFX_CANCEL_SELF_TRADE);
    tf_engine_order o;
    CHECK_RC(tf_engine_find_client(e, 7, 4, &o), 0); /* it does not rest */
    /* an OFL1 taker's STP cancel stays an OFL1 Canceled */
    CHECK_RC(tf_engine_set_stp(e, 7, TF_ENGINE_STP_CANCEL_BOTH), 0);
    CHECK_RC(ofl_limit(e, 7, 5, TF_OFL_BUY, 101, 1), 0);
    CHECK_KINDS("acc");
    tf_engine_destroy(e);
}

/* Level totals stay exact through saturation: three orders of INT64_MAX lots pass 2^64 - 1. */
static void totals(void)
{
    tf_engine *e = make();
    const uint64_t big = (uint64_t)INT64_MAX;
    tf_engine_level l;
    CHECK_RC(tf_engine_level_at(e, 1, TF_OFL_BUY, 50, &l), 0);
    CHECK_RC(tf_engine_level_at(e, 3, TF_OFL_BUY, 50, &l), TF_E_INVALID_ARG);
    CHECK_RC(tf_engine_level_at(e, 1, 2, 50, &l), TF_E_INVALID_ARG);
    CHECK_RC(tf_engine_level_at(e, 1, TF_OFL_BUY, 50, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_engine_level_at(e, 1, TF_OFL_BUY, INT64_MIN, &l), 0);
    CHECK_RC(gtc(e, 8, 1, TF_OFL_BUY, 50, big), 0);
    CHECK_RC(gtc(e, 8, 2, TF_OFL_BUY, 50, big), 0);
    CHECK_RC(tf_engine_level_at(e, 1, TF_OFL_BUY, 50, &l), 1);
    CHECK(l.total == 2 * big && l.orders == 2 && l.price == 50);
    CHECK_RC(gtc(e, 8, 3, TF_OFL_BUY, 50, big), 0);
    CHECK_RC(tf_engine_level_at(e, 1, TF_OFL_BUY, 50, &l), 1);
    CHECK(l.total == UINT64_MAX && l.orders == 3);
    int64_t p;
    uint64_t q;
    CHECK_RC(tf_engine_best(e, 1, TF_OFL_BUY, &p, &q), 1);
    CHECK(p == 50 && q == UINT64_MAX);
    /* a fill of 7 from the first, then the second leaves: exact again */
    CHECK_RC(order(e, 9, 1, TF_OFL_SELL, TF_OFX_MARKET, TF_OFX_IOC, 0, 0, 7), 0);
    CHECK_RC(tf_engine_level_at(e, 1, TF_OFL_BUY, 50, &l), 1);
    CHECK(l.total == UINT64_MAX);
    CHECK_RC(cancel(e, 8, 2), 0);
    CHECK_RC(tf_engine_level_at(e, 1, TF_OFL_BUY, 50, &l), 1);
    CHECK(l.total == 2 * big - 7 && l.orders == 2);
    tf_engine_level d[4];
    CHECK_RC(tf_engine_depth(e, 1, TF_OFL_BUY, d, 4), 1);
    CHECK(d[0].total == 2 * big - 7);
    tf_engine_destroy(e);
}

/* FNV-1a 64 of u64s, as docs/engine.md "The state hash" writes it. */
static uint64_t fnv(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}

static void hash_rule(void)
{
    /* one order resting after a partial fill; hash worked out by hand from the documented rule */
    tf_engine *e = make();
    CHECK_RC(gtc(e, 8, 4, TF_OFL_SELL, 100, 50), 0);                               /* 1 */
    CHECK_RC(order(e, 7, 5, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_IOC, 0, 100, 20), 0); /* 2 */
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv(h, 1);
    h = fnv(h, 0); /* bids */
    h = fnv(h, 1); /* asks */
    const uint64_t o[] = {1, 8, 4, 100, 30, 20};
    for (int i = 0; i < 6; i++)
        h = fnv(h, o[i]);
    h = fnv(fnv(h, 2), 0); /* instrument 2: no bids */
    h = fnv(h, 0);         /* no asks */
    tf_engine_counters c;
    tf_engine_get_counters(e, &c);
    CHECK_EQ(c.next_event_seq, 4); /* A; A F */
    h = fnv(fnv(fnv(h, 3), 2), 4);
    CHECK_EQ(tf_engine_state_hash(e), fnv(h, 1));

    /* the flag alone changes the hash: the same counters and no orders, with and without */
    tf_engine *a = make(), *b = make();
    CHECK_RC(cancel(a, 1, 1), 0); /* RejectedEx */
    seq = 0;
    tf_ofl_msg m = {.kind = TF_OFL_CANCEL_BY_CLIENT};
    m.cancel_by_client =
        (tf_ofl_cancel_by_client){.command_seq = 1, .account_id = 1, .client_order_id = 1};
    CHECK_RC(apply(b, &m), 0); /* Rejected */
    uint64_t hb = 0xcbf29ce484222325ull;
    for (uint64_t k = 1; k <= 2; k++)
        hb = fnv(fnv(fnv(hb, k), 0), 0);
    hb = fnv(fnv(fnv(hb, 1), 1), 2);
    CHECK_EQ(tf_engine_state_hash(b), hb);
    CHECK_EQ(tf_engine_state_hash(a), fnv(hb, 1));
    tf_engine_destroy(a);
    tf_engine_destroy(b);
    tf_engine_destroy(e);
}

static tf_engine *reload(const tf_engine *e, int version)
{
    static uint8_t buf[1 << 16];
    uint64_t len = 0;
    CHECK_RC(tf_engine_snapshot_write(e, buf, sizeof buf, &len), 0);
    CHECK_EQ(len, tf_engine_snapshot_size(e));
    CHECK_EQ(buf[4], version);
    tf_engine *c = NULL;
    CHECK_RC(tf_engine_snapshot_read(buf, len, NULL, &c), 0);
    if (c)
        CHECK_EQ(tf_engine_state_hash(c), tf_engine_state_hash(e));
    return c;
}

static void snapshots(void)
{
    /* version 1: OFL1 only, nothing traded; loads with filled 0, no last trade, flag off */
    tf_engine *e = make();
    CHECK_RC(ofl_limit(e, 8, 1, TF_OFL_SELL, 100, 50), 0);
    uint64_t h1 = tf_engine_state_hash(e);
    tf_engine *c = reload(e, 1);
    int64_t px = 5;
    CHECK_RC(tf_engine_last_trade(c, 1, &px), 0);
    CHECK_EQ(px, 0);
    /* the loaded engine goes on exactly as the original: an OFL1 trade */
    CHECK_RC(ofl_limit(e, 7, 1, TF_OFL_BUY, 100, 20), 0);
    seq--;
    CHECK_RC(ofl_limit(c, 7, 1, TF_OFL_BUY, 100, 20), 0);
    CHECK_EQ(tf_engine_state_hash(c), tf_engine_state_hash(e));
    CHECK(tf_engine_state_hash(e) != h1);
    tf_engine_destroy(c);
    /* now a book has traded: version 3 (last trade, filled), flag still off */
    c = reload(e, 3);
    CHECK_RC(tf_engine_last_trade(c, 1, &px), 1);
    CHECK_EQ(px, 100);
    tf_engine_order o;
    CHECK_RC(tf_engine_find_order(c, 1, &o), 1);
    CHECK_EQ(o.filled, 20);
    tf_engine_destroy(c);
    /* with a gateway command: the flag travels (the hash would differ without it) */
    CHECK_RC(cancel(e, 8, 1), 0);
    CHECK_RC(gtc(e, 8, 2, TF_OFL_SELL, 101, 40), 0);
    CHECK_RC(order(e, 7, 9, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_IOC, 0, 101, 15), 0);
    CHECK_RC(tf_engine_set_stp(e, 9, TF_ENGINE_STP_CANCEL_BOTH), 0);
    c = reload(e, 3);
    CHECK_RC(tf_engine_find_client(c, 8, 2, &o), 1);
    CHECK_EQ(o.filled, 15);
    CHECK_EQ(tf_engine_get_stp(c, 9), TF_ENGINE_STP_CANCEL_BOTH);
    CHECK_RC(tf_engine_last_trade(c, 1, &px), 1);
    CHECK_EQ(px, 101);
    /* both go on alike: a gateway replace that re-matches against a resting bid */
    CHECK_RC(gtc(e, 7, 20, TF_OFL_BUY, 99, 5), 0);
    seq--;
    CHECK_RC(gtc(c, 7, 20, TF_OFL_BUY, 99, 5), 0);
    uint64_t s0 = seq;
    CHECK_RC(replace(e, 8, 2, 3, 99, 40), 0);
    CHECK_KINDS("PF");
    seq = s0;
    CHECK_RC(replace(c, 8, 2, 3, 99, 40), 0);
    CHECK_KINDS("PF");
    CHECK_EQ(ev[1].fill.taker_client_order_id, 3);
    CHECK_EQ(tf_engine_state_hash(c), tf_engine_state_hash(e));
    tf_engine_destroy(c);
    /* a damaged version-3 image is refused */
    static uint8_t buf[1 << 16];
    uint64_t len;
    CHECK_RC(tf_engine_snapshot_write(e, buf, sizeof buf, &len), 0);
    CHECK_EQ(buf[4], 3);
    tf_engine_destroy(e);
    tf_engine *d = NULL;
    for (uint64_t cut = 1; cut < 16; cut++) /* a truncated image never loads */
        CHECK_RC(tf_engine_snapshot_read(buf, len - cut, NULL, &d), TF_E_ENGINE_SNAPSHOT);
    /* the gateway flag sits before 2 last trades, n_stp and one STP entry: 1 loads, 2 does not
     * (CRC fixed up each time) */
    uint8_t *flag = buf + len - 4 - 16 - 8 - 16 - 8;
    CHECK_EQ(flag[0], 1);
    for (int v = 1; v <= 2; v++) {
        flag[0] = (uint8_t)v;
        uint32_t crc = tf_crc32c(0, buf, len - 4);
        for (int i = 0; i < 4; i++)
            buf[len - 4 + i] = (uint8_t)(crc >> (8 * i));
        CHECK_RC(tf_engine_snapshot_read(buf, len, NULL, &d), v == 1 ? 0 : TF_E_ENGINE_SNAPSHOT);
        tf_engine_destroy(d);
        d = NULL;
    }
    buf[len - 5] ^= 1; /* a CRC mismatch */
    CHECK_RC(tf_engine_snapshot_read(buf, len, NULL, &d), TF_E_ENGINE_SNAPSHOT);
}

/* Replaying the same gateway commands into two engines (one through a snapshot in the middle)
 * gives the same events and hashes. */
static void snapshot_mid_stream(void)
{
    tf_engine *a = make();
    CHECK_RC(gtc(a, 8, 1, TF_OFL_SELL, 100, 50), 0);
    CHECK_RC(order(a, 7, 1, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_IOC, 0, 100, 20), 0);
    tf_engine *b = reload(a, 3);
    uint64_t s0 = seq;
    CHECK_RC(order(a, 7, 2, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_FOK, 0, 100, 30), 0);
    tf_ofl_msg ea[8];
    size_t na = sink.n;
    memcpy(ea, ev, na * sizeof ev[0]);
    seq = s0;
    CHECK_RC(order(b, 7, 2, TF_OFL_BUY, TF_OFX_LIMIT, TF_OFX_FOK, 0, 100, 30), 0);
    CHECK_EQ(sink.n, na);
    CHECK_KINDS("AF");
    CHECK_EQ(ev[1].fill.maker_filled, 50);
    CHECK(!memcmp(&ev[1].fill, &ea[1].fill, sizeof ev[1].fill));
    CHECK_EQ(tf_engine_state_hash(a), tf_engine_state_hash(b));
    tf_engine_destroy(a);
    tf_engine_destroy(b);
}

int main(void)
{
    ioc();
    fok();
    market();
    post_only();
    invalid();
    cancel_cmd();
    replace_cmd();
    mixed();
    stp();
    totals();
    hash_rule();
    snapshots();
    snapshot_mid_stream();
    return tf_test_report();
}

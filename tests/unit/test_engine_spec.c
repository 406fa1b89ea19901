/* The order engine against docs/engine.md by hand: worked examples with their exact event lists,
 * run against both the slow model (tests/model/) and the fast engine (src/engine/), and state
 * hashes computed here from bytes written out explicitly. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "engine_model.h"
#include "harness.h"
#include "tollfree/engine.h"
#include "tollfree/error.h"
#include "tollfree/orderflow.h"

#define BUY TF_OFL_BUY
#define SELL TF_OFL_SELL
#define IMAX INT64_MAX

/* ---- message builders --------------------------------------------------------------------- */

static tf_ofl_qty Q(uint64_t lo)
{
    tf_ofl_qty q = {lo, 0};
    return q;
}

static tf_ofl_qty QH(uint64_t lo, uint64_t hi)
{
    tf_ofl_qty q = {lo, hi};
    return q;
}

static tf_ofl_msg nl(uint64_t seq, uint64_t acct, uint64_t cid, uint64_t inst, int side, int64_t px,
                     tf_ofl_qty q)
{
    tf_ofl_msg m;
    memset(&m, 0, sizeof m);
    m.kind = TF_OFL_NEW_LIMIT;
    m.new_limit.command_seq = seq;
    m.new_limit.account_id = acct;
    m.new_limit.client_order_id = cid;
    m.new_limit.instrument_id = inst;
    m.new_limit.side = (uint8_t)side;
    m.new_limit.price = px;
    m.new_limit.quantity = q;
    return m;
}

static tf_ofl_msg nm(uint64_t seq, uint64_t acct, uint64_t cid, uint64_t inst, int side,
                     tf_ofl_qty q)
{
    tf_ofl_msg m;
    memset(&m, 0, sizeof m);
    m.kind = TF_OFL_NEW_MARKET;
    m.new_market.command_seq = seq;
    m.new_market.account_id = acct;
    m.new_market.client_order_id = cid;
    m.new_market.instrument_id = inst;
    m.new_market.side = (uint8_t)side;
    m.new_market.quantity = q;
    return m;
}

static tf_ofl_msg cxo(uint64_t seq, uint64_t oid)
{
    tf_ofl_msg m;
    memset(&m, 0, sizeof m);
    m.kind = TF_OFL_CANCEL_BY_ORDER;
    m.cancel_by_order.command_seq = seq;
    m.cancel_by_order.order_id = oid;
    return m;
}

static tf_ofl_msg cxc(uint64_t seq, uint64_t acct, uint64_t cid)
{
    tf_ofl_msg m;
    memset(&m, 0, sizeof m);
    m.kind = TF_OFL_CANCEL_BY_CLIENT;
    m.cancel_by_client.command_seq = seq;
    m.cancel_by_client.account_id = acct;
    m.cancel_by_client.client_order_id = cid;
    return m;
}

static tf_ofl_msg rep(uint64_t seq, uint64_t oid, uint64_t cid, int64_t px, tf_ofl_qty q)
{
    tf_ofl_msg m;
    memset(&m, 0, sizeof m);
    m.kind = TF_OFL_REPLACE;
    m.replace.command_seq = seq;
    m.replace.order_id = oid;
    m.replace.client_order_id = cid;
    m.replace.price = px;
    m.replace.quantity = q;
    return m;
}

/* events: (event_seq, command_seq, ...); timestamp_ns = command_seq */
static tf_ofl_msg ev_head(uint8_t kind, uint64_t es, uint64_t cs)
{
    tf_ofl_msg m;
    memset(&m, 0, sizeof m);
    m.kind = kind;
    m.accepted.event_seq = es;
    m.accepted.command_seq = cs;
    m.accepted.timestamp_ns = cs;
    return m;
}

static tf_ofl_msg acc(uint64_t es, uint64_t cs, uint64_t oid, uint64_t cid, uint64_t acct)
{
    tf_ofl_msg m = ev_head(TF_OFL_ACCEPTED, es, cs);
    m.accepted.order_id = oid;
    m.accepted.client_order_id = cid;
    m.accepted.account_id = acct;
    return m;
}

static tf_ofl_msg rej(uint64_t es, uint64_t cs, uint64_t cid, uint8_t reason)
{
    tf_ofl_msg m = ev_head(TF_OFL_REJECTED, es, cs);
    m.rejected.client_order_id = cid;
    m.rejected.reason = reason;
    return m;
}

static tf_ofl_msg rpl(uint64_t es, uint64_t cs, uint64_t oid, uint64_t cid)
{
    tf_ofl_msg m = ev_head(TF_OFL_REPLACED, es, cs);
    m.replaced.order_id = oid;
    m.replaced.client_order_id = cid;
    return m;
}

static tf_ofl_msg can(uint64_t es, uint64_t cs, uint64_t oid)
{
    tf_ofl_msg m = ev_head(TF_OFL_CANCELED, es, cs);
    m.canceled.order_id = oid;
    return m;
}

static tf_ofl_msg trd(uint64_t es, uint64_t cs, uint64_t maker, uint64_t taker, uint64_t inst,
                      int64_t px, uint64_t q)
{
    tf_ofl_msg m = ev_head(TF_OFL_TRADE, es, cs);
    m.trade.maker_order_id = maker;
    m.trade.taker_order_id = taker;
    m.trade.instrument_id = inst;
    m.trade.price = px;
    m.trade.quantity = Q(q);
    return m;
}

enum {
    INVQ = TF_OFL_INVALID_QUANTITY,
    UNKI = TF_OFL_UNKNOWN_INSTRUMENT,
    NOTF = TF_OFL_ORDER_NOT_FOUND,
    INVP = TF_OFL_INVALID_PRICE,
    DUPC = TF_OFL_DUPLICATE_CLIENT_ORDER_ID,
    OTHR = TF_OFL_REASON_OTHER,
};

/* ---- the two implementations side by side ------------------------------------------------- */

#define EV_CAP 256

typedef struct both {
    const char *name;
    int step;
    em_model *m;
    tf_engine *e;
    tf_engine_sink sink;
    tf_ofl_msg buf[EV_CAP];
} both;

static void fmt_event(const tf_ofl_msg *v, char *out, size_t cap)
{
    const tf_ofl_trade *t = &v->trade;
    snprintf(
        out, cap,
        "%s(es=%" PRIu64 " cs=%" PRIu64 " ts=%" PRIu64 " f3=%" PRIu64 " f4=%" PRIu64 " f5=%" PRIu64
        " px=%" PRId64 " q=%" PRIu64 "/%" PRIu64 " reason=%u js=%" PRIu64 " sess=%" PRIu64 ")",
        tf_ofl_kind_name(v->kind) ? tf_ofl_kind_name(v->kind) : "?", t->event_seq, t->command_seq,
        t->timestamp_ns, t->maker_order_id, t->taker_order_id, t->instrument_id,
        v->kind == TF_OFL_TRADE ? t->price : 0, v->kind == TF_OFL_TRADE ? t->quantity.lo : 0,
        v->kind == TF_OFL_TRADE ? t->quantity.hi : 0,
        v->kind == TF_OFL_REJECTED ? v->rejected.reason : 0, v->journal_seq, v->session_id);
}

/* Same event: the encoded stream frames are equal (every payload field and journal_seq), and
 * the session ids too. */
static int same_event(const tf_ofl_msg *a, const tf_ofl_msg *b)
{
    uint8_t fa[TF_OFL_MAX_FRAME], fb[TF_OFL_MAX_FRAME];
    int na = tf_ofl_frame_encode(fa, sizeof fa, a);
    int nb = tf_ofl_frame_encode(fb, sizeof fb, b);
    return na > 0 && na == nb && memcmp(fa, fb, (size_t)na) == 0 && a->session_id == b->session_id;
}

static void check_events(const both *b, const char *who, int rc, int want, const tf_ofl_msg *got,
                         size_t n, const tf_ofl_msg *ev, size_t n_ev)
{
    int ok = rc == want && n == n_ev;
    for (size_t i = 0; ok && i < n; i++)
        ok = same_event(&got[i], &ev[i]);
    CHECK(ok);
    if (ok)
        return;
    char s[512];
    fprintf(stderr, "  %s step %d, %s: outcome %d (wanted %d), %zu events (wanted %zu)\n", b->name,
            b->step, who, rc, want, n, n_ev);
    for (size_t i = 0; i < n || i < n_ev; i++) {
        if (i < n) {
            fmt_event(&got[i], s, sizeof s);
            fprintf(stderr, "    got  %s\n", s);
        }
        if (i < n_ev) {
            fmt_event(&ev[i], s, sizeof s);
            fprintf(stderr, "    want %s\n", s);
        }
    }
}

static int both_open(both *b, const char *name, const uint64_t *ins, uint32_t n,
                     uint32_t max_orders)
{
    memset(b, 0, sizeof *b);
    b->name = name;
    int rc = em_create(ins, n, max_orders, &b->m);
    CHECK_RC(rc, 0);
    tf_engine_config cfg = {.size = sizeof cfg,
                            .instruments = ins,
                            .n_instruments = n,
                            .max_orders = max_orders,
                            .max_bytes = 0};
    int rc2 = tf_engine_create(&cfg, &b->e);
    CHECK_RC(rc2, 0);
    b->sink.ev = b->buf;
    b->sink.cap = EV_CAP;
    return rc == 0 && rc2 == 0 ? 0 : -1;
}

static int fail_flush(void *ctx, const tf_ofl_msg *ev, size_t n)
{
    (void)ctx;
    (void)ev;
    (void)n;
    return TF_E_INVALID_ARG;
}

static void both_close(both *b)
{
    em_destroy(b->m);
    tf_engine_destroy(b->e);
}

static void check_same_state(both *b)
{
    uint64_t hm = em_state_hash(b->m), he = tf_engine_state_hash(b->e);
    CHECK(hm == he);
    if (hm != he)
        fprintf(stderr, "  %s step %d: state hash model %016" PRIx64 " engine %016" PRIx64 "\n",
                b->name, b->step, hm, he);
    em_counters mc;
    tf_engine_counters ec;
    em_get_counters(b->m, &mc);
    tf_engine_get_counters(b->e, &ec);
    CHECK_EQ(ec.next_order_id, mc.next_order_id);
    CHECK_EQ(ec.last_command_seq, mc.last_command_seq);
    CHECK_EQ(ec.next_event_seq, mc.next_event_seq);
    CHECK_EQ(ec.resting_orders, mc.resting_orders);
    CHECK_EQ(ec.price_levels, mc.price_levels);
}

/* One command: both implementations must give the outcome want and exactly the events ev. */
static void run(both *b, tf_ofl_msg cmd, int want, size_t n_ev, const tf_ofl_msg *ev)
{
    b->step++;
    size_t n = 0;
    int rc = em_apply(b->m, &cmd, NULL, 0, &n);
    const tf_ofl_msg *got = em_last_events(b->m, &n);
    check_events(b, "model", rc, want, got, n, ev, n_ev);

    b->sink.n = 0;
    rc = tf_engine_apply(b->e, &cmd, &b->sink);
    check_events(b, "engine", rc, want, b->buf, b->sink.n, ev, n_ev);
    check_same_state(b);
}

#define EXPECT(b, cmd, want, ...)                                                                  \
    run(b, cmd, want, sizeof((tf_ofl_msg[]){__VA_ARGS__}) / sizeof(tf_ofl_msg),                    \
        (tf_ofl_msg[]){__VA_ARGS__})
#define EXPECT_NONE(b, cmd, want) run(b, cmd, want, 0, NULL)
#define APPLIED TF_ENGINE_APPLIED
#define DUPLICATE TF_ENGINE_DUPLICATE
#define SKIPPED TF_ENGINE_SKIPPED

/* ---- hand-built hashes -------------------------------------------------------------------- */

typedef struct bytes {
    uint8_t b[4096];
    size_t n;
} bytes;

static void put_u64(bytes *s, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        s->b[s->n++] = (uint8_t)(v >> (8 * i));
}

static void put_order(bytes *s, uint64_t oid, uint64_t acct, uint64_t cid, int64_t px, uint64_t rem)
{
    put_u64(s, oid);
    put_u64(s, acct);
    put_u64(s, cid);
    put_u64(s, (uint64_t)px);
    put_u64(s, rem);
}

static uint64_t fnv1a(const bytes *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < s->n; i++) {
        h ^= s->b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The bytes of instruments lo..hi with empty books. */
static void put_empty_books(bytes *s, uint64_t lo, uint64_t hi)
{
    for (uint64_t i = lo; i <= hi; i++) {
        put_u64(s, i);
        put_u64(s, 0);
        put_u64(s, 0);
    }
}

static void check_hash(both *b, uint64_t want)
{
    uint64_t hm = em_state_hash(b->m), he = tf_engine_state_hash(b->e);
    CHECK(hm == want);
    CHECK(he == want);
    if (hm != want || he != want)
        fprintf(stderr,
                "  %s step %d: hash want %016" PRIx64 " model %016" PRIx64 " engine %016" PRIx64
                "\n",
                b->name, b->step, want, hm, he);
}

static const uint64_t ins16[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static void test_empty_hash(void)
{
    bytes s = {.n = 0};
    put_empty_books(&s, 1, 16);
    put_u64(&s, 1); /* next_order_id */
    put_u64(&s, 0); /* last_command_seq */
    put_u64(&s, 1); /* next_event_seq */
    CHECK_EQ(s.n, 16 * 24 + 24);
    uint64_t want = fnv1a(&s);
    both b;
    if (both_open(&b, "empty", ins16, 16, 1000) == 0) {
        check_hash(&b, want);
        char txt[19];
        tf_engine_format_hash(want, txt);
        char mine[32];
        snprintf(mine, sizeof mine, "0x%016" PRIx64, want);
        CHECK(memcmp(txt, mine, 18) == 0 && strlen(mine) == 18);
    }
    both_close(&b);

    /* instruments given in any order hash ascending */
    const uint64_t shuffled[16] = {9, 3, 16, 1, 2, 15, 4, 14, 5, 13, 6, 12, 7, 11, 8, 10};
    if (both_open(&b, "empty-shuffled", shuffled, 16, 1000) == 0)
        check_hash(&b, want);
    both_close(&b);
}

/* ---- scenarios ---------------------------------------------------------------------------- */

/* Multi-level sweep, a market order larger than the book, a market order on an empty side. */
static void scenario_sweep(void)
{
    both b;
    if (both_open(&b, "sweep", ins16, 16, 1000) == 0) {
        EXPECT(&b, nl(1, 1, 10, 1, SELL, 101, Q(5)), APPLIED, acc(1, 1, 1, 10, 1));
        EXPECT(&b, nl(2, 2, 20, 1, SELL, 100, Q(3)), APPLIED, acc(2, 2, 2, 20, 2));
        EXPECT(&b, nl(3, 3, 30, 1, SELL, 101, Q(4)), APPLIED, acc(3, 3, 3, 30, 3));
        /* best price first, then oldest first at 101; the last fill is partial */
        EXPECT(&b, nl(4, 4, 40, 1, BUY, 101, Q(10)), APPLIED, acc(4, 4, 4, 40, 4),
               trd(5, 4, 2, 4, 1, 100, 3), trd(6, 4, 1, 4, 1, 101, 5), trd(7, 4, 3, 4, 1, 101, 2));
        /* the market remainder is canceled after the trades */
        EXPECT(&b, nm(5, 5, 50, 1, BUY, Q(7)), APPLIED, acc(8, 5, 5, 50, 5),
               trd(9, 5, 3, 5, 1, 101, 2), can(10, 5, 5));
        EXPECT(&b, nm(6, 5, 50, 1, SELL, Q(1)), APPLIED, acc(11, 6, 6, 50, 5), can(12, 6, 6));

        bytes s = {.n = 0};
        put_empty_books(&s, 1, 16);
        put_u64(&s, 7);
        put_u64(&s, 6);
        put_u64(&s, 13);
        check_hash(&b, fnv1a(&s));

        /* a limit buy that crosses, fills partly at the maker's price, and rests */
        EXPECT(&b, nl(7, 1, 1, 1, SELL, 100, Q(2)), APPLIED, acc(13, 7, 7, 1, 1));
        EXPECT(&b, nl(8, 2, 2, 1, BUY, 102, Q(5)), APPLIED, acc(14, 8, 8, 2, 2),
               trd(15, 8, 7, 8, 1, 100, 2));
        s.n = 0;
        put_u64(&s, 1);
        put_u64(&s, 1);
        put_order(&s, 8, 2, 2, 102, 3);
        put_u64(&s, 0);
        put_empty_books(&s, 2, 16);
        put_u64(&s, 9);
        put_u64(&s, 8);
        put_u64(&s, 16);
        check_hash(&b, fnv1a(&s));

        tf_engine_order o;
        CHECK_EQ(tf_engine_find_order(b.e, 8, &o), 1);
        CHECK(o.order_id == 8 && o.account_id == 2 && o.client_order_id == 2 &&
              o.instrument_id == 1 && o.price == 102 && o.remaining == 3 && o.side == BUY);
        CHECK_EQ(tf_engine_find_order(b.e, 7, &o), 0);
        int64_t px = 0;
        uint64_t qty = 0;
        CHECK_EQ(tf_engine_best(b.e, 1, BUY, &px, &qty), 1);
        CHECK(px == 102 && qty == 3);
        CHECK_EQ(tf_engine_best(b.e, 1, SELL, &px, &qty), 0);
        CHECK_RC(tf_engine_best(b.e, 17, SELL, &px, &qty), TF_E_INVALID_ARG);
    }
    both_close(&b);
}

/* Full fill of a market order (no Canceled), DuplicateClientOrderId among live orders only,
 * self-trade, redeliveries, skipped records, client id reuse after a fill and a cancel. */
static void scenario_ids(void)
{
    both b;
    if (both_open(&b, "ids", ins16, 16, 1000) == 0) {
        EXPECT(&b, nl(1, 1, 1, 2, BUY, 50, Q(2)), APPLIED, acc(1, 1, 1, 1, 1));
        EXPECT(&b, nl(2, 1, 2, 2, BUY, 51, Q(2)), APPLIED, acc(2, 2, 2, 2, 1));
        EXPECT(&b, nm(3, 2, 1, 2, SELL, Q(3)), APPLIED, acc(3, 3, 3, 1, 2),
               trd(4, 3, 2, 3, 2, 51, 2), trd(5, 3, 1, 3, 2, 50, 1));
        EXPECT(&b, nl(4, 1, 1, 2, SELL, 50, Q(1)), APPLIED, rej(6, 4, 1, DUPC));
        /* (1, 2) was filled: free again; account 1 trades with itself */
        EXPECT(&b, nl(5, 1, 2, 2, SELL, 49, Q(1)), APPLIED, acc(7, 5, 4, 2, 1),
               trd(8, 5, 1, 4, 2, 50, 1));
        EXPECT_NONE(&b, nl(5, 9, 9, 2, SELL, 49, Q(1)), DUPLICATE);
        EXPECT_NONE(&b, cxo(3, 1), DUPLICATE);
        EXPECT_NONE(&b, cxo(0, 1), DUPLICATE);
        tf_ofl_msg hb;
        memset(&hb, 0, sizeof hb);
        EXPECT_NONE(&b, hb, SKIPPED);
        /* an event record with a higher command_seq does not move last_command_seq */
        EXPECT_NONE(&b, acc(50, 100, 1, 1, 1), SKIPPED);
        EXPECT_NONE(&b, trd(51, 101, 1, 2, 2, 50, 1), SKIPPED);
        EXPECT(&b, cxo(10, 1), APPLIED, rej(9, 10, 0, NOTF));
        EXPECT(&b, cxc(11, 1, 2), APPLIED, rej(10, 11, 2, NOTF));
        EXPECT(&b, nl(12, 1, 2, 2, BUY, 10, Q(1)), APPLIED, acc(11, 12, 5, 2, 1));
        EXPECT(&b, cxc(13, 1, 2), APPLIED, can(12, 13, 5));
        /* (1, 2) was canceled: free again */
        EXPECT(&b, nl(14, 1, 2, 2, BUY, 10, Q(1)), APPLIED, acc(13, 14, 6, 2, 1));
        /* the same client id under another account is another pair */
        EXPECT(&b, nl(15, 2, 2, 2, BUY, 10, Q(1)), APPLIED, acc(14, 15, 7, 2, 2));

        tf_engine_counters c;
        tf_engine_get_counters(b.e, &c);
        CHECK_EQ(c.next_order_id, 8);
        CHECK_EQ(c.last_command_seq, 15);
        CHECK_EQ(c.next_event_seq, 15);
        CHECK_EQ(c.applied, 11);
        CHECK_EQ(c.duplicates, 3);
        CHECK_EQ(c.skipped, 3);
        CHECK_EQ(c.trades, 3);
        CHECK_EQ(c.rejected, 3);
        CHECK_EQ(c.events, 14);
        CHECK_EQ(c.resting_orders, 2);
        CHECK_EQ(c.price_levels, 1);
        em_counters mc;
        em_get_counters(b.m, &mc);
        CHECK_EQ(mc.applied, 11);
        CHECK_EQ(mc.duplicates, 3);
        CHECK_EQ(mc.skipped, 3);
        CHECK_EQ(mc.trades, 3);
        CHECK_EQ(mc.rejected, 3);
        CHECK_EQ(mc.events, 14);
    }
    both_close(&b);
}

/* Validation order and every reject reason of NewLimit, NewMarket and the cancels; extremes. */
static void scenario_validation(void)
{
    both b;
    if (both_open(&b, "validation", ins16, 16, 1000) == 0) {
        EXPECT(&b, nl(1, 1, 1, 99, BUY, 0, QH(0, 1)), APPLIED, rej(1, 1, 1, UNKI));
        EXPECT(&b, nl(2, 1, 2, 1, BUY, -5, Q(0)), APPLIED, rej(2, 2, 2, INVQ));
        EXPECT(&b, nl(3, 1, 3, 1, BUY, 5, Q((uint64_t)IMAX + 1)), APPLIED, rej(3, 3, 3, INVQ));
        EXPECT(&b, nl(4, 1, 4, 1, BUY, 5, QH(1, 1)), APPLIED, rej(4, 4, 4, INVQ));
        EXPECT(&b, nl(5, 1, 5, 1, BUY, 0, Q(5)), APPLIED, rej(5, 5, 5, INVP));
        EXPECT(&b, nl(6, 1, 6, 1, BUY, INT64_MIN, Q(5)), APPLIED, rej(6, 6, 6, INVP));
        EXPECT(&b, nl(7, 1, 7, 1, BUY, 1, Q(IMAX)), APPLIED, acc(7, 7, 1, 7, 1));
        /* (1, 7) is live, but a bad price is found first */
        EXPECT(&b, nl(8, 1, 7, 1, SELL, 0, Q(1)), APPLIED, rej(8, 8, 7, INVP));
        EXPECT(&b, nl(9, 1, 7, 1, SELL, 5, Q(1)), APPLIED, rej(9, 9, 7, DUPC));
        EXPECT(&b, nm(10, 1, 7, 99, BUY, Q(1)), APPLIED, rej(10, 10, 7, UNKI));
        EXPECT(&b, nm(11, 1, 7, 1, BUY, Q(0)), APPLIED, rej(11, 11, 7, INVQ));
        EXPECT(&b, nm(12, 1, 7, 1, BUY, Q(1)), APPLIED, rej(12, 12, 7, DUPC));
        EXPECT(&b, nm(13, 2, 7, 1, SELL, Q(2)), APPLIED, acc(13, 13, 2, 7, 2),
               trd(14, 13, 1, 2, 1, 1, 2));
        /* a market order never rests */
        EXPECT(&b, cxc(14, 2, 7), APPLIED, rej(15, 14, 7, NOTF));
        EXPECT(&b, cxc(15, 1, 7), APPLIED, can(16, 15, 1));
        EXPECT(&b, cxo(16, 1), APPLIED, rej(17, 16, 0, NOTF));
        EXPECT(&b, nl(17, 3, 1, 1, SELL, IMAX, Q(IMAX)), APPLIED, acc(18, 17, 3, 1, 3));
        EXPECT(&b, nl(18, 4, 1, 1, BUY, IMAX, Q(IMAX)), APPLIED, acc(19, 18, 4, 1, 4),
               trd(20, 18, 3, 4, 1, IMAX, (uint64_t)IMAX));
        EXPECT(&b, nl(19, 5, 0, 1, BUY, 1, Q(UINT64_MAX)), APPLIED, rej(21, 19, 0, INVQ));
        EXPECT(&b, nm(20, 5, 1, 1, BUY, QH(5, UINT64_MAX)), APPLIED, rej(22, 20, 1, INVQ));
        EXPECT(&b, cxo(21, 0), APPLIED, rej(23, 21, 0, NOTF));
        EXPECT(&b, cxc(22, 0, 0), APPLIED, rej(24, 22, 0, NOTF));
        /* the largest command_seq; everything after it is a redelivery */
        EXPECT(&b, cxo(UINT64_MAX, 5), APPLIED, rej(25, UINT64_MAX, 0, NOTF));
        EXPECT_NONE(&b, cxo(UINT64_MAX, 5), DUPLICATE);
        EXPECT_NONE(&b, nl(UINT64_MAX - 1, 1, 1, 1, BUY, 1, Q(1)), DUPLICATE);
    }
    both_close(&b);
}

/* Replace: keep priority (same price, smaller or equal), lose it (larger, or another price),
 * cross and fill completely, cross and rest, every reject in its order, check 4 only against
 * another id. */
static void scenario_replace(void)
{
    both b;
    if (both_open(&b, "replace", ins16, 16, 1000) == 0) {
        EXPECT(&b, nl(1, 1, 1, 3, BUY, 100, Q(5)), APPLIED, acc(1, 1, 1, 1, 1));
        EXPECT(&b, nl(2, 2, 1, 3, BUY, 100, Q(5)), APPLIED, acc(2, 2, 2, 1, 2));
        EXPECT(&b, nl(3, 3, 1, 3, BUY, 99, Q(5)), APPLIED, acc(3, 3, 3, 1, 3));
        /* same price, smaller: keeps its place ahead of order 2 */
        EXPECT(&b, rep(4, 1, 11, 100, Q(3)), APPLIED, rpl(4, 4, 1, 11));
        EXPECT(&b, nm(5, 9, 1, 3, SELL, Q(4)), APPLIED, acc(5, 5, 4, 1, 9),
               trd(6, 5, 1, 4, 3, 100, 3), trd(7, 5, 2, 4, 3, 100, 1));
        /* order 3 moves up to 100: behind order 2 */
        EXPECT(&b, rep(6, 3, 1, 100, Q(5)), APPLIED, rpl(8, 6, 3, 1));
        /* same price, larger: loses its place (behind order 3) */
        EXPECT(&b, rep(7, 2, 1, 100, Q(6)), APPLIED, rpl(9, 7, 2, 1));
        /* same price, equal: keeps it */
        EXPECT(&b, rep(8, 2, 1, 100, Q(6)), APPLIED, rpl(10, 8, 2, 1));
        EXPECT(&b, nm(9, 9, 2, 3, SELL, Q(6)), APPLIED, acc(11, 9, 5, 2, 9),
               trd(12, 9, 3, 5, 3, 100, 5), trd(13, 9, 2, 5, 3, 100, 1));
        EXPECT(&b, nl(10, 5, 1, 3, SELL, 105, Q(2)), APPLIED, acc(14, 10, 6, 1, 5));
        EXPECT(&b, nl(11, 5, 2, 3, SELL, 106, Q(3)), APPLIED, acc(15, 11, 7, 2, 5));
        /* across the spread: the replaced order is the taker, fills completely, does not rest */
        EXPECT(&b, rep(12, 2, 2, 106, Q(4)), APPLIED, rpl(16, 12, 2, 2),
               trd(17, 12, 6, 2, 3, 105, 2), trd(18, 12, 7, 2, 3, 106, 2));
        EXPECT(&b, cxo(13, 2), APPLIED, rej(19, 13, 0, NOTF));
        EXPECT(&b, nl(14, 5, 3, 3, SELL, 110, Q(1)), APPLIED, acc(20, 14, 8, 3, 5));
        /* check 4: another live order of the account holds client id 3 */
        EXPECT(&b, rep(15, 7, 3, 106, Q(1)), APPLIED, rej(21, 15, 3, DUPC));
        /* its own client id is never a duplicate */
        EXPECT(&b, rep(16, 7, 2, 106, Q(1)), APPLIED, rpl(22, 16, 7, 2));
        /* the checks in order; Rejected carries the Replace's client id */
        EXPECT(&b, rep(17, 999, 5, 0, Q(0)), APPLIED, rej(23, 17, 5, NOTF));
        EXPECT(&b, rep(18, 7, 3, 0, Q(0)), APPLIED, rej(24, 18, 3, INVQ));
        EXPECT(&b, rep(19, 7, 3, 0, Q(1)), APPLIED, rej(25, 19, 3, INVP));
        EXPECT(&b, rep(20, 7, 3, -1, QH(1, 1)), APPLIED, rej(26, 20, 3, INVQ));
        EXPECT(&b, rep(21, 8, 3, 107, Q(1)), APPLIED, rpl(27, 21, 8, 3));
        EXPECT(&b, nl(22, 6, 1, 3, SELL, 106, Q(1)), APPLIED, acc(28, 22, 9, 1, 6));
        /* to another price: the back of the new level (after 7 and 9) */
        EXPECT(&b, rep(23, 8, 3, 106, Q(1)), APPLIED, rpl(29, 23, 8, 3));
        EXPECT(&b, nm(24, 7, 1, 3, BUY, Q(3)), APPLIED, acc(30, 24, 10, 1, 7),
               trd(31, 24, 7, 10, 3, 106, 1), trd(32, 24, 9, 10, 3, 106, 1),
               trd(33, 24, 8, 10, 3, 106, 1));
        EXPECT(&b, nl(25, 1, 5, 3, SELL, 200, Q(2)), APPLIED, acc(34, 25, 11, 5, 1));
        EXPECT(&b, nl(26, 2, 5, 3, BUY, 150, Q(1)), APPLIED, acc(35, 26, 12, 5, 2));
        /* across, partly filled, the rest rests at the new price */
        EXPECT(&b, rep(27, 12, 5, 200, Q(5)), APPLIED, rpl(36, 27, 12, 5),
               trd(37, 27, 11, 12, 3, 200, 2));
        int64_t px = 0;
        uint64_t qty = 0;
        CHECK_EQ(tf_engine_best(b.e, 3, BUY, &px, &qty), 1);
        CHECK(px == 200 && qty == 3);
        CHECK_EQ(tf_engine_best(b.e, 3, SELL, &px, &qty), 0);
        /* a replace of a filled order, and one whose new client id was freed by a fill */
        EXPECT(&b, rep(28, 11, 5, 200, Q(1)), APPLIED, rej(38, 28, 5, NOTF));
        EXPECT(&b, rep(29, 12, 1, 200, Q(1)), APPLIED, rpl(39, 29, 12, 1));
    }
    both_close(&b);
}

/* The live-order limit: NewLimit's 5th check (after the duplicate check), never for NewMarket
 * or Replace. */
static void scenario_max_orders(void)
{
    const uint64_t one[1] = {1};
    both b;
    if (both_open(&b, "max-orders", one, 1, 2) == 0) {
        EXPECT(&b, nl(1, 1, 1, 1, BUY, 10, Q(1)), APPLIED, acc(1, 1, 1, 1, 1));
        EXPECT(&b, nl(2, 1, 2, 1, BUY, 10, Q(1)), APPLIED, acc(2, 2, 2, 2, 1));
        /* refused although it would fill at once */
        EXPECT(&b, nl(3, 1, 3, 1, SELL, 10, Q(1)), APPLIED, rej(3, 3, 3, OTHR));
        EXPECT(&b, nl(4, 1, 1, 1, SELL, 10, Q(1)), APPLIED, rej(4, 4, 1, DUPC));
        EXPECT(&b, nl(5, 1, 3, 9999, SELL, 10, Q(1)), APPLIED, rej(5, 5, 3, UNKI));
        EXPECT(&b, nm(6, 1, 3, 1, SELL, Q(1)), APPLIED, acc(6, 6, 3, 3, 1),
               trd(7, 6, 1, 3, 1, 10, 1));
        EXPECT(&b, nl(7, 1, 3, 1, SELL, 11, Q(1)), APPLIED, acc(8, 7, 4, 3, 1));
        EXPECT(&b, rep(8, 4, 3, 9, Q(2)), APPLIED, rpl(9, 8, 4, 3), trd(10, 8, 2, 4, 1, 10, 1));
        EXPECT(&b, nl(9, 2, 1, 1, BUY, 8, Q(1)), APPLIED, acc(11, 9, 5, 1, 2));
        EXPECT(&b, nl(10, 2, 2, 1, BUY, 8, Q(1)), APPLIED, rej(12, 10, 2, OTHR));
        EXPECT(&b, rep(11, 5, 1, 8, Q(5)), APPLIED, rpl(13, 11, 5, 1));
        EXPECT(&b, cxo(12, 5), APPLIED, can(14, 12, 5));
        EXPECT(&b, nl(13, 2, 2, 1, BUY, 8, Q(1)), APPLIED, acc(15, 13, 6, 2, 2));
    }
    both_close(&b);
}

/* A state with orders on two instruments (given out of order), hashed from explicit bytes;
 * then a replace that keeps priority and one that loses it. */
static void scenario_hash(void)
{
    const uint64_t ins[2] = {5, 2};
    both b;
    if (both_open(&b, "hash", ins, 2, 100) == 0) {
        EXPECT(&b, nl(1, 1, 1, 2, BUY, 10, Q(3)), APPLIED, acc(1, 1, 1, 1, 1));
        EXPECT(&b, nl(2, 2, 2, 2, BUY, 11, Q(4)), APPLIED, acc(2, 2, 2, 2, 2));
        EXPECT(&b, nl(3, 3, 3, 2, SELL, 12, Q(1)), APPLIED, acc(3, 3, 3, 3, 3));
        EXPECT(&b, nl(4, 4, 4, 2, SELL, 12, Q(2)), APPLIED, acc(4, 4, 4, 4, 4));
        EXPECT(&b, nl(5, 5, 5, 5, SELL, 7, Q(9)), APPLIED, acc(5, 5, 5, 5, 5));
        EXPECT(&b, nl(6, 6, 6, 5, BUY, 6, Q(1)), APPLIED, acc(6, 6, 6, 6, 6));
        EXPECT(&b, nl(7, 1, 7, 2, BUY, 10, Q(2)), APPLIED, acc(7, 7, 7, 7, 1));
        for (int round = 0; round < 3; round++) {
            bytes s = {.n = 0};
            put_u64(&s, 2);
            put_u64(&s, 3);
            put_order(&s, 2, 2, 2, 11, 4);
            if (round < 2) {
                put_order(&s, 1, 1, 1, 10, round == 0 ? 3 : 1);
                put_order(&s, 7, 1, 7, 10, 2);
            } else {
                put_order(&s, 7, 1, 7, 10, 2);
                put_order(&s, 1, 1, 1, 10, 5);
            }
            put_u64(&s, 2);
            put_order(&s, 3, 3, 3, 12, 1);
            put_order(&s, 4, 4, 4, 12, 2);
            put_u64(&s, 5);
            put_u64(&s, 1);
            put_order(&s, 6, 6, 6, 6, 1);
            put_u64(&s, 1);
            put_order(&s, 5, 5, 5, 7, 9);
            put_u64(&s, 8);
            put_u64(&s, 7 + (uint64_t)round);
            put_u64(&s, 8 + (uint64_t)round);
            check_hash(&b, fnv1a(&s));
            if (round == 0)
                EXPECT(&b, rep(8, 1, 1, 10, Q(1)), APPLIED, rpl(8, 8, 1, 1));
            else if (round == 1)
                EXPECT(&b, rep(9, 1, 1, 10, Q(5)), APPLIED, rpl(9, 9, 1, 1));
        }
    }
    both_close(&b);
}

/* Records that are not commands: a kind outside the set is an error and changes nothing; a
 * decoded command with an impossible side byte (the codec refuses it) is malformed: no event,
 * no change (the spec's "skipped, counted"; the engine may say so with SKIPPED or an error). */
static void scenario_not_commands(void)
{
    both b;
    if (both_open(&b, "not-commands", ins16, 16, 1000) == 0) {
        EXPECT(&b, nl(1, 1, 1, 1, BUY, 10, Q(1)), APPLIED, acc(1, 1, 1, 1, 1));
        uint64_t h0 = em_state_hash(b.m);
        tf_ofl_msg m = cxo(5, 1);
        m.kind = 0x07;
        size_t n = 0;
        CHECK_RC(em_apply(b.m, &m, NULL, 0, &n), TF_E_OFL_UNKNOWN_KIND);
        b.sink.n = 0;
        CHECK_RC(tf_engine_apply(b.e, &m, &b.sink), TF_E_OFL_UNKNOWN_KIND);
        CHECK_EQ(b.sink.n, 0);
        m.kind = 0x06; /* reserved (iceberg): the engine knows commands, not reservations */
        CHECK_RC(tf_engine_apply(b.e, &m, &b.sink), TF_E_OFL_UNKNOWN_KIND);
        CHECK_EQ(b.sink.n, 0);
        /* A side byte no decoder would pass: refused before the sequence is looked at. */
        tf_ofl_msg bad = nl(6, 1, 2, 1, 2, 10, Q(1));
        CHECK_RC(tf_engine_apply(b.e, &bad, &b.sink), TF_E_OFL_INVALID_SIDE);
        CHECK_EQ(b.sink.n, 0);
        bad = nm(6, 1, 2, 1, 7, Q(1));
        CHECK_RC(tf_engine_apply(b.e, &bad, &b.sink), TF_E_OFL_INVALID_SIDE);
        CHECK_EQ(b.sink.n, 0);
        CHECK(tf_engine_state_hash(b.e) == h0);
        CHECK(em_state_hash(b.m) == h0);
        /* the next command is still seq 2 */
        EXPECT(&b, cxo(2, 1), APPLIED, can(2, 2, 1));
    }
    both_close(&b);
}

/* Level totals saturate at UINT64_MAX (engine.h): three orders of INT64_MAX at one price. */
static void scenario_saturation(void)
{
    both b;
    if (both_open(&b, "saturation", ins16, 16, 1000) == 0) {
        EXPECT(&b, nl(1, 1, 1, 4, SELL, 7, Q(IMAX)), APPLIED, acc(1, 1, 1, 1, 1));
        EXPECT(&b, nl(2, 1, 2, 4, SELL, 7, Q(IMAX)), APPLIED, acc(2, 2, 2, 2, 1));
        int64_t px = 0;
        uint64_t qty = 0;
        CHECK_EQ(tf_engine_best(b.e, 4, SELL, &px, &qty), 1);
        CHECK(px == 7 && qty == UINT64_MAX - 1);
        EXPECT(&b, nl(3, 1, 3, 4, SELL, 7, Q(IMAX)), APPLIED, acc(3, 3, 3, 3, 1));
        CHECK_EQ(tf_engine_best(b.e, 4, SELL, &px, &qty), 1);
        CHECK(px == 7 && qty == UINT64_MAX);
        tf_engine_level lv[2];
        CHECK_EQ(tf_engine_depth(b.e, 4, SELL, lv, 2), 1);
        CHECK(lv[0].price == 7 && lv[0].total == UINT64_MAX && lv[0].orders == 3);
        CHECK_EQ(em_best(b.m, 4, SELL, &px, &qty), 1);
        CHECK(px == 7 && qty == UINT64_MAX);
        /* a market order of INT64_MAX takes the first order whole */
        EXPECT(&b, nm(4, 2, 1, 4, BUY, Q(IMAX)), APPLIED, acc(4, 4, 4, 1, 2),
               trd(5, 4, 1, 4, 4, 7, (uint64_t)IMAX));
        CHECK_EQ(tf_engine_best(b.e, 4, SELL, &px, &qty), 1);
        CHECK(px == 7 && qty == UINT64_MAX - 1);
    }
    both_close(&b);
}

/* The sink contract of engine.h: without flush, a command whose events overflow cap is applied
 * anyway and returns TF_E_LIMIT; a failing flush stops the events but not the state change. The
 * state afterwards is the model's, events numbered as if all were delivered. */
static void scenario_sink(void)
{
    for (int mode = 0; mode < 2; mode++) {
        both b;
        if (both_open(&b, mode ? "sink-flush-fails" : "sink-overflow", ins16, 16, 8) == 0) {
            EXPECT(&b, nl(1, 1, 1, 1, SELL, 10, Q(1)), APPLIED, acc(1, 1, 1, 1, 1));
            EXPECT(&b, nl(2, 1, 2, 1, SELL, 11, Q(1)), APPLIED, acc(2, 2, 2, 2, 1));
            EXPECT(&b, nl(3, 1, 3, 1, SELL, 12, Q(1)), APPLIED, acc(3, 3, 3, 3, 1));
            size_t n = 0;
            tf_ofl_msg c = nm(4, 2, 1, 1, BUY, Q(5));
            CHECK_RC(em_apply(b.m, &c, NULL, 0, &n), EM_APPLIED);
            CHECK_EQ(n, 5); /* Accepted, 3 trades, Canceled */
            b.sink.n = 0;
            b.sink.cap = 2;
            if (mode)
                b.sink.flush = fail_flush;
            int rc = tf_engine_apply(b.e, &c, &b.sink);
            CHECK_RC(rc, mode ? TF_E_INVALID_ARG : TF_E_LIMIT);
            CHECK(b.sink.n <= 2);
            CHECK(b.sink.n >= 1 && b.buf[0].kind == TF_OFL_ACCEPTED);
            b.sink.cap = EV_CAP;
            b.sink.flush = NULL;
            check_same_state(&b);
            EXPECT(&b, cxo(5, 1), APPLIED, rej(9, 5, 0, NOTF));
        }
        both_close(&b);
    }
}

/* The model's own error returns. */
static void test_model_api(void)
{
    em_model *m = NULL;
    const uint64_t dup[2] = {3, 3}, zero[2] = {0, 1}, ok[1] = {1};
    CHECK_RC(em_create(dup, 2, 10, &m), TF_E_INVALID_ARG);
    CHECK_RC(em_create(zero, 2, 10, &m), TF_E_INVALID_ARG);
    CHECK_RC(em_create(ok, 0, 10, &m), TF_E_INVALID_ARG);
    CHECK_RC(em_create(ok, 1, 0, &m), TF_E_INVALID_ARG);
    CHECK_RC(em_create(NULL, 1, 10, &m), TF_E_NULL_ARG);
    CHECK_RC(em_create(ok, 1, 10, &m), 0);
    /* events that do not fit: applied anyway, TF_E_LIMIT, full count, first cap copied */
    tf_ofl_msg ev[2];
    size_t n = 0;
    tf_ofl_msg hb, c1 = nl(1, 1, 1, 1, SELL, 5, Q(1)), c2 = nl(2, 1, 2, 1, SELL, 5, Q(1)),
                   c3 = nm(3, 2, 1, 1, BUY, Q(5));
    memset(&hb, 0, sizeof hb);
    CHECK_RC(em_apply(m, &hb, ev, 2, &n), EM_SKIPPED);
    CHECK_RC(em_apply(m, &c1, ev, 2, &n), EM_APPLIED);
    CHECK_RC(em_apply(m, &c2, ev, 2, &n), EM_APPLIED);
    CHECK_RC(em_apply(m, &c3, ev, 2, &n), TF_E_LIMIT);
    CHECK_EQ(n, 4);
    CHECK_EQ(ev[1].kind, TF_OFL_TRADE);
    em_counters c;
    em_get_counters(m, &c);
    CHECK_EQ(c.next_event_seq, 7);
    CHECK_EQ(c.resting_orders, 0);
    CHECK_RC(em_apply(m, NULL, ev, 2, &n), TF_E_NULL_ARG);
    em_destroy(m);
    em_destroy(NULL);
}

int main(void)
{
    test_model_api();
    test_empty_hash();
    scenario_sweep();
    scenario_ids();
    scenario_validation();
    scenario_replace();
    scenario_max_orders();
    scenario_hash();
    scenario_saturation();
    scenario_sink();
    scenario_not_commands();
    return tf_test_report();
}

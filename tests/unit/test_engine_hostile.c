/* Hostile streams for the order engine's data structures: prices spread over all of
 * 1..INT64_MAX, a level per order, sweeps that empty a hundred thousand levels at once, the
 * live-order limit, a full pool, and the red-black rules of every book side checked as levels
 * come and go (src/engine/tree.c). Nothing here is timed; a structure that went linear in the
 * number of levels would make this program take hours instead of a second. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "engine_model.h"
#include "harness.h"
#include "tollfree/engine.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint64_t seq;
static tf_ofl_msg ev[1 << 20], mev[1 << 10];

static int limit(tf_engine *e, uint64_t coid, int side, int64_t price, uint64_t qty)
{
    tf_ofl_msg m = {.kind = TF_OFL_NEW_LIMIT};
    m.new_limit = (tf_ofl_new_limit){.command_seq = ++seq,
                                     .account_id = 1 + coid % 7,
                                     .client_order_id = coid,
                                     .instrument_id = 1,
                                     .price = price,
                                     .quantity = {qty, 0},
                                     .side = (uint8_t)side};
    tf_engine_sink s = {.ev = ev, .cap = 1 << 20};
    return tf_engine_apply(e, &m, &s) < 0 ? -1 : (int)s.n;
}

static size_t market(tf_engine *e, uint64_t coid, int side, uint64_t qty)
{
    tf_ofl_msg m = {.kind = TF_OFL_NEW_MARKET};
    m.new_market = (tf_ofl_new_market){.command_seq = ++seq,
                                       .account_id = 99,
                                       .client_order_id = coid,
                                       .instrument_id = 1,
                                       .quantity = {qty, 0},
                                       .side = (uint8_t)side};
    tf_engine_sink s = {.ev = ev, .cap = 1 << 20};
    CHECK_RC(tf_engine_apply(e, &m, &s), TF_ENGINE_APPLIED);
    return s.n;
}

static int trees_ok(const tf_engine *e)
{
    for (uint32_t t = 0; t < 2 * e->n_books; t++)
        if (eng_tree_check(e, &e->sides[t]))
            return 0;
    return 1;
}

static void far_apart_prices(void)
{
    enum { N = 200000 };
    static const uint64_t one = 1;
    tf_engine_config cfg = {
        .size = sizeof cfg, .instruments = &one, .n_instruments = 1, .max_orders = N};
    tf_engine *e;
    CHECK_RC(tf_engine_create(&cfg, &e), 0);
    if (!e)
        return;
    int64_t best_bid = 0, best_ask = INT64_MAX;
    int bad = 0;
    /* bids anywhere in [1, 2^62), asks anywhere in [2^62, 2^63 - 1]: nothing crosses. */
    for (uint64_t i = 0; i < N; i++) {
        int side = (int)(i & 1);
        int64_t p = side == TF_OFL_BUY ? (int64_t)(1 + next() % ((1ull << 62) - 1))
                                       : (int64_t)((1ull << 62) + next() % (1ull << 62));
        if (i == N - 2)
            p = 1; /* the extremes */
        if (i == N - 1)
            p = INT64_MAX;
        bad += limit(e, i + 1, side, p, 1 + next() % 1000) != 1;
        if (side == TF_OFL_BUY && p > best_bid)
            best_bid = p;
        if (side == TF_OFL_SELL && p < best_ask)
            best_ask = p;
        if (i % 20000 == 0)
            bad += !trees_ok(e);
    }
    CHECK_EQ(bad, 0);
    CHECK(trees_ok(e));
    tf_engine_counters c;
    tf_engine_get_counters(e, &c);
    CHECK_EQ(c.resting_orders, N);
    CHECK(c.price_levels > N - 10);
    int64_t px;
    uint64_t q;
    CHECK_RC(tf_engine_best(e, 1, TF_OFL_BUY, &px, &q), 1);
    CHECK_EQ(px, best_bid);
    CHECK_RC(tf_engine_best(e, 1, TF_OFL_SELL, &px, &q), 1);
    CHECK_EQ(px, best_ask);
    /* The pool is full: one more limit order is Rejected(Other). */
    CHECK_EQ(limit(e, 10 * N, TF_OFL_BUY, 5, 1), 1);
    CHECK_EQ(ev[0].kind, TF_OFL_REJECTED);
    CHECK_EQ(ev[0].rejected.reason, TF_OFL_REASON_OTHER);
    /* One market order larger than every ask: a trade per ask, then its remainder canceled. */
    size_t n = market(e, 10 * N + 1, TF_OFL_BUY, (uint64_t)INT64_MAX);
    CHECK_EQ(n, 1 + N / 2 + 1);
    CHECK_EQ(ev[n - 1].kind, TF_OFL_CANCELED);
    int sorted = 1;
    for (size_t k = 2; k + 1 < n; k++)
        sorted &= ev[k].trade.price >= ev[k - 1].trade.price;
    CHECK(sorted);
    CHECK(trees_ok(e));
    CHECK_RC(tf_engine_best(e, 1, TF_OFL_SELL, &px, &q), 0);
    /* Refill the freed half at far-apart prices and sweep the bids too. */
    for (uint64_t i = 0; i < N / 2; i++)
        bad += limit(e, 20 * N + i, TF_OFL_SELL, (int64_t)((1ull << 62) + next() % (1ull << 62)),
                     1) != 1;
    CHECK_EQ(bad, 0);
    n = market(e, 30 * N, TF_OFL_SELL, (uint64_t)INT64_MAX);
    CHECK_EQ(n, 1 + N / 2 + 1);
    CHECK(trees_ok(e));
    tf_engine_get_counters(e, &c);
    CHECK_EQ(c.resting_orders, N / 2);
    tf_engine_destroy(e);
}

/* Random levels added and emptied in every pattern, with the tree checked after each step. */
static void churn(void)
{
    static const uint64_t one = 1;
    tf_engine_config cfg = {
        .size = sizeof cfg, .instruments = &one, .n_instruments = 1, .max_orders = 4096};
    tf_engine *e;
    CHECK_RC(tf_engine_create(&cfg, &e), 0);
    if (!e)
        return;
    int bad = 0;
    for (uint64_t i = 0; i < 60000; i++) {
        uint64_t r = next();
        tf_ofl_msg m = {0};
        tf_engine_sink s = {.ev = ev, .cap = 1 << 20};
        if (r % 3) {
            int side = (int)(r >> 8 & 1);
            int64_t p = 1000 + (int64_t)(r >> 16) % 300 + (side == TF_OFL_BUY ? -150 : 150);
            bad += limit(e, 100000 + i, side, p, 1 + (r >> 40) % 5) < 1;
        } else {
            m.kind = TF_OFL_CANCEL_BY_ORDER;
            m.cancel_by_order = (tf_ofl_cancel_by_order){++seq, 1 + (r >> 20) % (i + 1)};
            bad += tf_engine_apply(e, &m, &s) != TF_ENGINE_APPLIED;
        }
        if (i % 97 == 0)
            bad += !trees_ok(e);
    }
    CHECK_EQ(bad, 0);
    CHECK(trees_ok(e));
    tf_engine_destroy(e);
}

static void config_errors(void)
{
    static const uint64_t ids[] = {3, 1, 3};
    tf_engine *e = (tf_engine *)1;
    tf_engine_config cfg = {
        .size = sizeof cfg, .instruments = ids, .n_instruments = 3, .max_orders = 10};
    CHECK_RC(tf_engine_create(&cfg, &e), TF_E_INVALID_ARG); /* a duplicate id */
    CHECK(e == NULL);
    cfg.n_instruments = 2;
    cfg.max_bytes = 1000;
    CHECK_RC(tf_engine_create(&cfg, &e), TF_E_LIMIT);
    CHECK(tf_engine_bytes_needed(&cfg) > 1000);
    cfg.max_bytes = 0;
    cfg.max_orders = 0;
    CHECK_RC(tf_engine_create(&cfg, &e), TF_E_INVALID_ARG);
    cfg.max_orders = 10;
    cfg.size = 4;
    CHECK_RC(tf_engine_create(&cfg, &e), TF_E_INVALID_ARG);
    CHECK_RC(tf_engine_create(NULL, &e), TF_E_NULL_ARG);
    CHECK_RC(tf_engine_apply(NULL, NULL, NULL), TF_E_NULL_ARG);
    uint64_t out[4];
    CHECK_RC(tf_engine_parse_instruments("1-3,2,9", out, 4), 4);
    CHECK_RC(tf_engine_parse_instruments("1-5", out, 4), TF_E_LIMIT);
    CHECK_RC(tf_engine_parse_instruments("0", out, 4), TF_E_INVALID_ARG);
    CHECK_RC(tf_engine_parse_instruments("3-1", out, 4), TF_E_INVALID_ARG);
    CHECK_RC(tf_engine_parse_instruments("1,,2", out, 4), TF_E_INVALID_ARG);
    CHECK_RC(tf_engine_parse_instruments("", out, 4), TF_E_INVALID_ARG);
    char h[19];
    tf_engine_format_hash(0xabcull, h);
    CHECK(!strcmp(h, "0x0000000000000abc"));
    tf_engine_destroy(NULL);
}

/* Kept empty levels (src/engine/book.c): a level that loses its last order stays in its tree
 * and the level table until ENG_EMPTY_LEVELS others have emptied after it, or until the pool
 * needs its entry. A plain list of the live orders is the reference: after every command the
 * trees keep their rules, the kept levels are counted and bounded, and depth, level_at, best
 * and the level count see only levels with orders. `max_orders` 16 makes nearly every new level
 * take a kept one's entry; 4,096 makes more than ENG_EMPTY_LEVELS empty at once. At the end the
 * state hash is that of an engine rebuilt from a snapshot (which has no kept levels). */
typedef struct live_order {
    uint64_t coid;
    int side;
    int64_t price;
    uint64_t qty;
} live_order;

static int cmp_level(const void *a, const void *b)
{
    const tf_engine_level *x = a, *y = b;
    return (x->price > y->price) - (x->price < y->price);
}

/* The reference depth of one side, best first, from the live list. */
static int ref_depth(const live_order *lv, int n, int side, tf_engine_level *out)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (lv[i].side != side)
            continue;
        int j = 0;
        while (j < k && out[j].price != lv[i].price)
            j++;
        if (j == k)
            out[k++] = (tf_engine_level){lv[i].price, 0, 0};
        out[j].total += lv[i].qty;
        out[j].orders++;
    }
    qsort(out, (size_t)k, sizeof *out, cmp_level);
    if (side == TF_OFL_BUY) /* highest first */
        for (int i = 0; i < k / 2; i++) {
            tf_engine_level t = out[i];
            out[i] = out[k - 1 - i];
            out[k - 1 - i] = t;
        }
    return k;
}

/* lad_w: each side's ladder narrowed to it (0: as created), so that most levels live in the
 * trees, the only place empty levels are kept (book.c). */
static void kept_empty_levels_case(uint32_t max_orders, int steps, int64_t span, uint32_t lad_w)
{
    static const uint64_t one = 1;
    tf_engine_config cfg = {
        .size = sizeof cfg, .instruments = &one, .n_instruments = 1, .max_orders = max_orders};
    tf_engine *e;
    CHECK_RC(tf_engine_create(&cfg, &e), 0);
    if (!e)
        return;
    if (lad_w) {
        CHECK(e->lad_w >= lad_w);
        e->lad_w = lad_w; /* narrower: each side uses the front of its own arrays */
    }
    live_order *lv = calloc(max_orders, sizeof *lv);
    tf_engine_level *a = calloc(max_orders + 1, sizeof *a), *b = calloc(max_orders + 1, sizeof *b);
    int n = 0, bad = 0, max_empty_seen = 0;
    uint64_t coid = 0;
    for (int i = 0; i < steps && lv && a && b; i++) {
        uint64_t r = next();
        tf_ofl_msg m = {0};
        tf_engine_sink s = {.ev = ev, .cap = 1 << 20};
        int side = (int)(r & 1);
        /* bids in [1000, 1000 + span), asks above them: nothing crosses */
        int64_t price = side == TF_OFL_BUY ? 1000 + (int64_t)((r >> 8) % (uint64_t)span)
                                           : 1000 + span + (int64_t)((r >> 8) % (uint64_t)span);
        /* fill up to the limit, then drain, then fill again: levels empty in bulk */
        int phase = (i / (int)(2 * max_orders)) & 1;
        if (n < (int)max_orders && (n == 0 || (r >> 40) % 4 != 0) && !phase) {
            m.kind = TF_OFL_NEW_LIMIT;
            m.new_limit = (tf_ofl_new_limit){
                ++seq, 5, ++coid, 1, price, {1 + (r >> 50) % 9, 0}, (uint8_t)side};
            bad += tf_engine_apply(e, &m, &s) != TF_ENGINE_APPLIED;
            lv[n++] = (live_order){coid, side, price, m.new_limit.quantity.lo};
        } else if (n && (r >> 40) % 3 == 0) { /* a replace to a new price, same side */
            int k = (int)((r >> 20) % (uint64_t)n);
            int64_t p = lv[k].side == TF_OFL_BUY ? price - (side == TF_OFL_SELL ? span : 0)
                                                 : price + (side == TF_OFL_BUY ? span : 0);
            tf_engine_order o;
            CHECK_RC(tf_engine_find_client(e, 5, lv[k].coid, &o), 1);
            m.kind = TF_OFL_REPLACE;
            m.replace = (tf_ofl_replace){++seq, o.order_id, ++coid, p, {lv[k].qty, 0}};
            bad += tf_engine_apply(e, &m, &s) != TF_ENGINE_APPLIED;
            lv[k].coid = coid;
            lv[k].price = p;
        } else if (n) {
            int k = (int)((r >> 20) % (uint64_t)n);
            m.kind = TF_OFL_CANCEL_BY_CLIENT;
            m.cancel_by_client = (tf_ofl_cancel_by_client){++seq, 5, lv[k].coid};
            bad += tf_engine_apply(e, &m, &s) != TF_ENGINE_APPLIED;
            lv[k] = lv[--n];
        }
        if (e->n_empty > ENG_EMPTY_LEVELS)
            bad++;
        if ((int)e->n_empty > max_empty_seen)
            max_empty_seen = (int)e->n_empty;
        if (i % 7 && i != steps - 1)
            continue;
        bad += !trees_ok(e);
        tf_engine_counters c;
        tf_engine_get_counters(e, &c);
        uint64_t levels = 0;
        for (int sd = 0; sd < 2; sd++) {
            int k1 = tf_engine_depth(e, 1, sd, a, (int)max_orders + 1);
            int k2 = ref_depth(lv, n, sd, b);
            levels += (uint64_t)k2;
            bad += k1 != k2;
            for (int j = 0; j < k1 && j < k2; j++)
                bad += a[j].price != b[j].price || a[j].total != b[j].total ||
                       a[j].orders != b[j].orders;
            int64_t bp = 0;
            uint64_t bq = 0;
            bad += tf_engine_best(e, 1, sd, &bp, &bq) != (k2 > 0);
            bad += k2 > 0 && (bp != b[0].price || bq != b[0].total);
            /* a price that may be a kept empty level, or a live one */
            tf_engine_level at;
            int found = tf_engine_level_at(e, 1, sd, price, &at);
            int want = 0;
            for (int j = 0; j < k2; j++)
                want |= b[j].price == price;
            bad += found != want;
        }
        bad += c.price_levels != levels || c.resting_orders != (uint64_t)n;
        uint64_t nodes = e->sides[0].n_nodes + e->sides[1].n_nodes;
        bad += nodes != levels + e->n_empty;
        /* the ladders hold only levels with orders */
        for (int sd = 0; sd < 2; sd++)
            for (uint64_t j = 0; j < e->lad_w; j++)
                bad += e->sides[sd].slot[j] && !e->levels[e->sides[sd].slot[j]].n_orders;
    }
    CHECK_EQ(bad, 0);
    /* the bulk emptying reached the bound (4,096 with a narrow ladder), kept levels were taken
     * for new ones (16 with one), or, with every level in the ladder, none was kept */
    if (!lad_w)
        CHECK_EQ(max_empty_seen, 0);
    else
        CHECK(max_orders > ENG_EMPTY_LEVELS ? max_empty_seen == (int)ENG_EMPTY_LEVELS
                                            : e->fresh_level == max_orders + 1);
    uint64_t cap = tf_engine_snapshot_size(e), len = 0;
    uint8_t *img = malloc(cap);
    tf_engine *f = NULL;
    CHECK_RC(tf_engine_snapshot_write(e, img, cap, &len), 0);
    CHECK_RC(tf_engine_snapshot_read(img, len, NULL, &f), 0);
    CHECK(f && f->n_empty == 0 && tf_engine_state_hash(f) == tf_engine_state_hash(e));
    free(img);
    tf_engine_destroy(f);
    free(lv);
    free(a);
    free(b);
    tf_engine_destroy(e);
}

static void kept_empty_levels(void)
{
    kept_empty_levels_case(16, 20000, 3000, 1024);
    kept_empty_levels_case(4096, 60000, 20000, 1024);
    kept_empty_levels_case(4096, 60000, 20000, 0);
}

/* One ladder price that empties and fills again many times, beside a level that stays: each
 * emptying frees the level (its slot cleared, the pool entry reused), tf_engine_level_at reports
 * the price absent while it is empty, and the counts and the state hash follow the model's. */
static void ladder_level_refills(void)
{
    static const uint64_t one = 1;
    tf_engine_config cfg = {
        .size = sizeof cfg, .instruments = &one, .n_instruments = 1, .max_orders = 64};
    tf_engine *e = NULL;
    em_model *m = NULL;
    CHECK_RC(tf_engine_create(&cfg, &e), 0);
    CHECK_RC(em_create(&one, 1, 64, &m), 0);
    if (!e || !m)
        return;
    int bad = 0;
    uint64_t s0 = 0;
    tf_ofl_msg c;
    size_t me;
    tf_engine_sink s = {.ev = ev, .cap = 1 << 20};
    c = (tf_ofl_msg){.kind = TF_OFL_NEW_LIMIT};
    s0++; /* apart: the order of an initializer list's expressions is not fixed */
    c.new_limit = (tf_ofl_new_limit){s0, 7, s0, 1, 1000, {5, 0}, TF_OFL_BUY};
    bad += tf_engine_apply(e, &c, &s) != em_apply(m, &c, mev, 1 << 10, &me);
    for (int i = 0; i < 5000; i++) {
        int n = 1 + i % 3; /* one to three orders at the price, then all canceled */
        uint64_t first = 0;
        for (int k = 0; k < n; k++) {
            tf_engine_counters before;
            tf_engine_get_counters(e, &before);
            first = k ? first : before.next_order_id;
            c = (tf_ofl_msg){.kind = TF_OFL_NEW_LIMIT};
            s0++;
            c.new_limit = (tf_ofl_new_limit){s0, 7, s0, 1, 990, {1 + (uint64_t)k, 0}, TF_OFL_BUY};
            s.n = 0;
            bad += tf_engine_apply(e, &c, &s) != em_apply(m, &c, mev, 1 << 10, &me);
        }
        tf_engine_level at;
        bad += tf_engine_level_at(e, 1, TF_OFL_BUY, 990, &at) != 1 || at.orders != (uint32_t)n;
        bad += e->sides[0].n_win != 2 || e->sides[0].n_nodes != 2 || e->sides[0].n_levels != 2;
        for (int k = 0; k < n; k++) {
            c = (tf_ofl_msg){.kind = TF_OFL_CANCEL_BY_ORDER};
            c.cancel_by_order = (tf_ofl_cancel_by_order){++s0, first + (uint64_t)k};
            s.n = 0;
            bad += tf_engine_apply(e, &c, &s) != em_apply(m, &c, mev, 1 << 10, &me);
        }
        bad += tf_engine_level_at(e, 1, TF_OFL_BUY, 990, &at) != 0;
        bad += e->sides[0].n_win != 1 || e->sides[0].n_nodes != 1 || e->sides[0].n_levels != 1;
        bad += e->n_empty != 0 || !trees_ok(e);
        bad += tf_engine_state_hash(e) != em_state_hash(m);
    }
    CHECK_EQ(bad, 0);
    /* the freed entries were reused: no more than the two levels ever held at once, plus one */
    CHECK(e->fresh_level <= 4);
    em_destroy(m);
    tf_engine_destroy(e);
}

int main(void)
{
    config_errors();
    kept_empty_levels();
    ladder_level_refills();
    churn();
    far_apart_prices();
    return tf_test_report();
}

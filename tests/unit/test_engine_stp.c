/* Self-trade prevention, tracked accounts' live-order counts and the account-wide cancel
 * (docs/engine.md "Self-trade prevention"): hand-worked event sequences for each mode, the
 * state hash and the snapshot (unchanged without settings, carrying them with), and no heap
 * call while STP commands and cancels run (tests/unit/alloc_count.h). The random streams of
 * test_engine_diff compare the same rules with the slow model. */
#include <stdlib.h>

#include "harness.h"
#include "tollfree/engine.h"

#include "alloc_count.h"

static tf_ofl_msg ev[64];
static tf_engine_sink sink = {.ev = ev, .cap = 64};

static tf_engine *make(void)
{
    static const uint64_t ids[] = {1};
    tf_engine_config ec = {
        .size = sizeof ec, .instruments = ids, .n_instruments = 1, .max_orders = 100};
    tf_engine *e = NULL;
    CHECK_RC(tf_engine_create(&ec, &e), 0);
    return e;
}

static int limit(tf_engine *e, uint64_t seq, uint64_t account, uint64_t coid, int side,
                 int64_t price, uint64_t qty)
{
    tf_ofl_msg m = {.kind = TF_OFL_NEW_LIMIT};
    m.new_limit = (tf_ofl_new_limit){.command_seq = seq,
                                     .account_id = account,
                                     .client_order_id = coid,
                                     .instrument_id = 1,
                                     .price = price,
                                     .quantity = {qty, 0},
                                     .side = (uint8_t)side};
    sink.n = 0;
    return tf_engine_apply(e, &m, &sink);
}

/* The kinds of the last command's events, as a string: A accepted, T trade, C canceled,
 * P replaced, R rejected. */
static const char *kinds(void)
{
    static char s[65];
    size_t i;
    for (i = 0; i < sink.n; i++)
        s[i] = "?APCTR"[ev[i].kind == TF_OFL_ACCEPTED   ? 1
                        : ev[i].kind == TF_OFL_REPLACED ? 2
                        : ev[i].kind == TF_OFL_CANCELED ? 3
                        : ev[i].kind == TF_OFL_TRADE    ? 4
                        : ev[i].kind == TF_OFL_REJECTED ? 5
                                                        : 0];
    s[i] = 0;
    return s;
}

/* Account 7 rests asks 1 (100 @ 10, order 1) and 2 (account 8, 100 @ 10, order 2) and
 * 3 (account 7, 100 @ 11, order 3); then account 7 buys 250 @ 11 under `mode`. */
static void one_mode(int mode, const char *want, uint64_t want_left_on_book)
{
    tf_engine *e = make();
    CHECK_RC(tf_engine_set_stp(e, 7, mode), 0);
    limit(e, 1, 7, 1, TF_OFL_SELL, 10, 100);
    limit(e, 2, 8, 1, TF_OFL_SELL, 10, 100);
    limit(e, 3, 7, 2, TF_OFL_SELL, 11, 100);
    CHECK_RC(limit(e, 4, 7, 3, TF_OFL_BUY, 11, 250), TF_ENGINE_APPLIED);
    if (strcmp(kinds(), want)) {
        fprintf(stderr, "mode %d: events %s, want %s\n", mode, kinds(), want);
        CHECK(0);
    }
    tf_engine_counters c;
    tf_engine_get_counters(e, &c);
    CHECK_EQ(c.resting_orders, want_left_on_book);
    tf_engine_destroy(e);
}

static void modes(void)
{
    /* none: trades with order 1, order 2, order 3 (its own), rests nothing (250 = 100+100+50) */
    one_mode(TF_ENGINE_STP_NONE, "ATTT", 1);
    /* cancel-newest: meets order 1 (own) first: the buy's remainder is canceled at once */
    one_mode(TF_ENGINE_STP_CANCEL_NEWEST, "AC", 3);
    /* cancel-oldest: order 1 canceled, trades 100 with order 2, order 3 canceled, 150 rests */
    one_mode(TF_ENGINE_STP_CANCEL_OLDEST, "ACTC", 1);
    /* cancel-both: order 1 canceled, then the buy */
    one_mode(TF_ENGINE_STP_CANCEL_BOTH, "ACC", 2);

    /* which ids: cancel-both cancels the maker (order 1) first, then the taker (order 4) */
    tf_engine *e = make();
    tf_engine_set_stp(e, 7, TF_ENGINE_STP_CANCEL_BOTH);
    limit(e, 1, 7, 1, TF_OFL_SELL, 10, 100);
    limit(e, 2, 7, 2, TF_OFL_BUY, 10, 5);
    CHECK_EQ(sink.n, 3u);
    CHECK_EQ(ev[1].canceled.order_id, 1u);
    CHECK_EQ(ev[2].canceled.order_id, 2u);
    /* another account is unaffected by account 7's mode, and account 7's mode is its own
     * orders' only: account 9 (no mode) sells into account 9's bid... */
    limit(e, 3, 9, 1, TF_OFL_BUY, 10, 5);
    CHECK_RC(limit(e, 4, 9, 2, TF_OFL_SELL, 10, 5), TF_ENGINE_APPLIED);
    CHECK(!strcmp(kinds(), "AT"));
    tf_engine_destroy(e);

    CHECK_RC(tf_engine_set_stp(NULL, 1, 1), TF_E_NULL_ARG);
    e = make();
    CHECK_RC(tf_engine_set_stp(e, 1, 4), TF_E_INVALID_ARG);
    CHECK_RC(tf_engine_set_stp(e, 1, -1), TF_E_INVALID_ARG);
    for (uint64_t a = 1; a <= TF_ENGINE_STP_ACCOUNTS; a++)
        CHECK_RC(tf_engine_set_stp(e, a, 1), 0);
    CHECK_RC(tf_engine_set_stp(e, 0, 1), TF_E_LIMIT);
    CHECK_RC(tf_engine_set_stp(e, 5, 0), 0); /* frees one */
    CHECK_RC(tf_engine_set_stp(e, 0, 2), 0);
    CHECK_EQ(tf_engine_get_stp(e, 0), 2);
    CHECK_EQ(tf_engine_get_stp(e, 5), 0);
    CHECK_EQ(tf_engine_stp_count(e), (uint32_t)TF_ENGINE_STP_ACCOUNTS);
    tf_engine_track_account(e, 77, 1);
    tf_engine_clear_stp(e); /* every mode goes, counting stays */
    CHECK_EQ(tf_engine_stp_count(e), 0u);
    CHECK_EQ(tf_engine_get_stp(e, 0), 0);
    CHECK_EQ(tf_engine_account_orders(e, 77), 0);
    tf_engine_destroy(e);
}

/* A Replace that re-matches under cancel-newest: Replaced, then Canceled of the order. */
static void replace_stops(void)
{
    tf_engine *e = make();
    tf_engine_set_stp(e, 7, TF_ENGINE_STP_CANCEL_NEWEST);
    limit(e, 1, 7, 1, TF_OFL_SELL, 12, 100);
    limit(e, 2, 7, 2, TF_OFL_BUY, 10, 100);
    tf_ofl_msg m = {.kind = TF_OFL_REPLACE};
    m.replace = (tf_ofl_replace){
        .command_seq = 3, .order_id = 2, .client_order_id = 3, .price = 12, .quantity = {100, 0}};
    sink.n = 0;
    CHECK_RC(tf_engine_apply(e, &m, &sink), TF_ENGINE_APPLIED);
    CHECK(!strcmp(kinds(), "PC"));
    tf_engine_order o;
    CHECK_EQ(tf_engine_find_order(e, 2, &o), 0);
    CHECK_EQ(tf_engine_find_order(e, 1, &o), 1);
    tf_engine_destroy(e);
}

/* The hash and the snapshot: without settings as before (version 1); with them, both carry
 * the modes and a reload gives the same hash and the same behaviour. */
static void hash_and_snapshot(void)
{
    tf_engine *a = make(), *b = make();
    limit(a, 1, 7, 1, TF_OFL_SELL, 10, 100);
    limit(b, 1, 7, 1, TF_OFL_SELL, 10, 100);
    uint64_t h = tf_engine_state_hash(a);
    CHECK_RC(tf_engine_set_stp(a, 7, 1), 0);
    CHECK(tf_engine_state_hash(a) != h);
    CHECK_RC(tf_engine_set_stp(a, 7, 0), 0);
    CHECK_EQ(tf_engine_state_hash(a), h); /* none again: as if never set */
    CHECK_RC(tf_engine_track_account(a, 7, 1), 0);
    CHECK_EQ(tf_engine_state_hash(a), h); /* counts are not state */
    uint8_t buf[4096];
    uint64_t len;
    CHECK_RC(tf_engine_snapshot_write(a, buf, sizeof buf, &len), 0);
    CHECK_EQ(buf[4], 1);
    CHECK_EQ(len, tf_engine_snapshot_size(b));

    tf_engine_set_stp(a, 9, 3);
    tf_engine_set_stp(a, 7, 2);
    CHECK_RC(tf_engine_snapshot_write(a, buf, sizeof buf, &len), 0);
    CHECK_EQ(buf[4], 2);
    tf_engine *c = NULL;
    CHECK_RC(tf_engine_snapshot_read(buf, len, NULL, &c), 0);
    CHECK_EQ(tf_engine_state_hash(c), tf_engine_state_hash(a));
    CHECK_EQ(tf_engine_get_stp(c, 7), 2);
    CHECK_EQ(tf_engine_get_stp(c, 9), 3);
    /* the order of settings does not matter */
    tf_engine_set_stp(b, 7, 2);
    tf_engine_set_stp(b, 9, 3);
    CHECK_EQ(tf_engine_state_hash(b), tf_engine_state_hash(a));
    /* a damaged STP section is refused */
    tf_engine_destroy(c);
    uint8_t bad[4096];
    memcpy(bad, buf, len);
    bad[len - 4 - 8] = 4;
    CHECK_RC(tf_engine_snapshot_read(bad, len, NULL, &c), TF_E_ENGINE_SNAPSHOT);
    tf_engine_destroy(a);
    tf_engine_destroy(b);
}

/* Cancel of every order of an account, in hash order; live-order counts follow every path. */
static void cancel_account_and_counts(void)
{
    tf_engine *e = make();
    CHECK_RC(tf_engine_track_account(e, 7, 1), 0);
    limit(e, 1, 7, 1, TF_OFL_SELL, 12, 100); /* order 1 */
    limit(e, 2, 8, 1, TF_OFL_SELL, 11, 100); /* order 2 */
    limit(e, 3, 7, 2, TF_OFL_BUY, 9, 100);   /* order 3 */
    limit(e, 4, 7, 3, TF_OFL_SELL, 11, 100); /* order 4 */
    CHECK_EQ(tf_engine_account_orders(e, 7), 3);
    CHECK_EQ(tf_engine_account_orders(e, 8), -1);
    CHECK_RC(tf_engine_track_account(e, 8, 1), 0); /* counts what is live already */
    CHECK_EQ(tf_engine_account_orders(e, 8), 1);
    limit(e, 5, 9, 1, TF_OFL_BUY, 11, 150); /* fills order 2, half of order 4 */
    CHECK_EQ(tf_engine_account_orders(e, 8), 0);
    CHECK_EQ(tf_engine_account_orders(e, 7), 3);
    sink.n = 0;
    CHECK_RC(tf_engine_cancel_account(e, 6, 7, &sink), TF_ENGINE_APPLIED);
    /* hash order: bids (order 3), then asks best first (order 4 @ 11, order 1 @ 12) */
    CHECK_EQ(sink.n, 3u);
    CHECK_EQ(ev[0].canceled.order_id, 3u);
    CHECK_EQ(ev[1].canceled.order_id, 4u);
    CHECK_EQ(ev[2].canceled.order_id, 1u);
    CHECK_EQ(ev[0].canceled.command_seq, 6u);
    CHECK_EQ(tf_engine_account_orders(e, 7), 0);
    CHECK_RC(tf_engine_cancel_account(e, 6, 7, &sink), TF_ENGINE_DUPLICATE);
    sink.n = 0;
    CHECK_RC(tf_engine_cancel_account(e, 7, 7, &sink), TF_ENGINE_APPLIED); /* none left */
    CHECK_EQ(sink.n, 0u);
    tf_engine_counters c;
    tf_engine_get_counters(e, &c);
    CHECK_EQ(c.last_command_seq, 7u);
    CHECK_RC(tf_engine_track_account(e, 7, 0), 0);
    CHECK_EQ(tf_engine_account_orders(e, 7), -1);
    tf_engine_destroy(e);
}

#if TF_ALLOC_COUNTING
/* STP matching, counts and cancels never touch the heap. */
static void no_alloc(void)
{
    static const uint64_t ids[] = {1, 2, 3};
    tf_engine_flow_config fc = {.size = sizeof fc,
                                .seed = 5,
                                .instruments = ids,
                                .n_instruments = 3,
                                .target_orders = 2000};
    tf_engine_config ec = {
        .size = sizeof ec, .instruments = ids, .n_instruments = 3, .max_orders = 20000};
    tf_engine_flow *f = NULL;
    tf_engine *e = NULL;
    CHECK_RC(tf_engine_flow_open(&fc, &f), 0);
    CHECK_RC(tf_engine_create(&ec, &e), 0);
    for (uint64_t a = 1; a <= 1000; a++) { /* the flow's accounts: every mode, all counted */
        tf_engine_set_stp(e, a, (int)(a % 4));
        tf_engine_track_account(e, a, 1);
    }
    static tf_ofl_msg big[20002];
    tf_engine_sink s = {.ev = big, .cap = 20002};
    tf_alloc_on = 1;
    long before = tf_alloc_calls + tf_free_calls;
    uint64_t seq = 0;
    for (int i = 0; i < 200000; i++) {
        tf_ofl_msg m;
        tf_engine_flow_next(f, &m);
        m.new_limit.command_seq = ++seq; /* first field of every command: renumbered so the
                                          * cancels below can take a number of their own */
        s.n = 0;
        tf_engine_apply(e, &m, &s);
        if (i % 1000 == 999) {
            s.n = 0;
            CHECK_RC(tf_engine_cancel_account(e, ++seq, 1 + (uint64_t)i % 1000, &s),
                     TF_ENGINE_APPLIED);
        }
    }
    long after = tf_alloc_calls + tf_free_calls;
    tf_alloc_on = 0;
    CHECK_EQ(after - before, 0);
    tf_engine_destroy(e);
    tf_engine_flow_close(f);
}
#endif

int main(void)
{
    modes();
    replace_stops();
    hash_and_snapshot();
    cancel_account_and_counts();
#if TF_ALLOC_COUNTING
    no_alloc();
#endif
    return tf_test_report();
}

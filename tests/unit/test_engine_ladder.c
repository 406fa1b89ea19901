/* The price ladder (src/engine/ladder.c) against the slow model: books whose prices drift far
 * past a ladder narrowed to 64 or 1,024 ticks, so that levels live in the ladder and in the
 * tree at once, the window is placed again and again (with levels moving between the two), and
 * windows sit against the ends of the price range. After every command the engine's state hash
 * equals the model's (it walks every level in price order), the events match in number and
 * kind, and every few commands each side's ladder, tree, best and counts pass eng_tree_check. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "engine_model.h"
#include "harness.h"
#include "tollfree/engine.h"

static uint64_t rng;

static uint64_t below(uint64_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng % n;
}

static tf_ofl_msg ev[1 << 16], mev[1 << 16];

static int sides_ok(const tf_engine *e)
{
    for (uint32_t t = 0; t < 2 * e->n_books; t++)
        if (eng_tree_check(e, &e->sides[t]))
            return 0;
    return 1;
}

/* A price near the mid (clamped to 1..INT64_MAX, or 0 now and then: a rejected one). */
static int64_t price_near(int64_t mid, int64_t spread)
{
    int64_t off = (int64_t)below(2 * (uint64_t)spread + 1) - spread;
    if (off > 0 && mid > INT64_MAX - off)
        return INT64_MAX;
    int64_t p = mid + off;
    return p < 1 ? 1 : p;
}

static void next_command(tf_ofl_msg *m, uint64_t seq, int64_t mid, int64_t spread, uint64_t live)
{
    memset(m, 0, sizeof *m);
    uint64_t r = below(100), side = below(2);
    uint64_t oid = live ? 1 + below(live + live / 4 + 1) : 1; /* some ids are gone */
    if (r < 55) {
        m->kind = TF_OFL_NEW_LIMIT;
        m->new_limit = (tf_ofl_new_limit){.command_seq = seq,
                                          .account_id = 1 + below(3),
                                          .client_order_id = seq,
                                          .instrument_id = 1 + below(2),
                                          .price = price_near(mid, spread),
                                          .quantity = {1 + below(20), 0},
                                          .side = (uint8_t)side};
    } else if (r < 75) {
        m->kind = TF_OFL_CANCEL_BY_ORDER;
        m->cancel_by_order = (tf_ofl_cancel_by_order){.command_seq = seq, .order_id = oid};
    } else if (r < 95) {
        m->kind = TF_OFL_REPLACE;
        m->replace = (tf_ofl_replace){.command_seq = seq,
                                      .order_id = oid,
                                      .client_order_id = seq,
                                      .price = price_near(mid, spread),
                                      .quantity = {1 + below(20), 0}};
    } else {
        m->kind = TF_OFL_NEW_MARKET;
        m->new_market = (tf_ofl_new_market){.command_seq = seq,
                                            .account_id = 1 + below(3),
                                            .client_order_id = seq,
                                            .instrument_id = 1 + below(2),
                                            .quantity = {1 + below(40), 0},
                                            .side = (uint8_t)side};
    }
}

/* One stream: n commands around a mid that drifts by up to `drift` ticks a command. */
static void stream(uint64_t seed, uint32_t width, int64_t mid, int64_t spread, int64_t drift, int n)
{
    static const uint64_t instruments[] = {1, 2};
    rng = seed;
    tf_engine_config cfg = {
        .size = sizeof cfg, .instruments = instruments, .n_instruments = 2, .max_orders = 3000};
    tf_engine *e = NULL;
    em_model *m = NULL;
    CHECK_RC(tf_engine_create(&cfg, &e), 0);
    CHECK_RC(em_create(instruments, 2, 3000, &m), 0);
    if (!e || !m)
        return;
    CHECK(e->lad_w >= width);
    e->lad_w = width; /* narrower than created: each side uses the front of its own arrays */
    int bad_hash = 0, bad_events = 0, bad_sides = 0;
    uint64_t placements = 0, in_tree = 0;
    for (int i = 1; i <= n; i++) {
        tf_ofl_msg c;
        tf_engine_counters k;
        tf_engine_get_counters(e, &k);
        next_command(&c, (uint64_t)i, mid, spread, k.next_order_id);
        tf_engine_sink s = {.ev = ev, .cap = sizeof ev / sizeof ev[0]};
        uint64_t base0 = (uint64_t)e->sides[0].base + (uint64_t)e->sides[1].base;
        int rc = tf_engine_apply(e, &c, &s);
        size_t me = 0;
        int mrc = em_apply(m, &c, mev, sizeof mev / sizeof mev[0], &me);
        placements += (uint64_t)e->sides[0].base + (uint64_t)e->sides[1].base != base0;
        bad_events += rc != mrc || s.n != me;
        for (size_t j = 0; j < s.n && j < me; j++)
            bad_events += ev[j].kind != mev[j].kind;
        bad_hash += tf_engine_state_hash(e) != em_state_hash(m);
        if (i % 97 == 0 || i == n) {
            bad_sides += !sides_ok(e);
            in_tree += e->sides[0].n_nodes - e->sides[0].n_win;
        }
        mid += (int64_t)below(2 * (uint64_t)drift + 1) - drift;
        if (mid < 1)
            mid = 1;
    }
    CHECK_EQ(bad_hash, 0);
    CHECK_EQ(bad_events, 0);
    CHECK_EQ(bad_sides, 0);
    /* the stream did what it is for: levels in the tree, and a drifting mid's window placed
     * more than once */
    CHECK(in_tree > 0);
    if (drift >= 3) { /* the streams near the ends of the range drift too little to move */
        CHECK(placements > 1);
    }
    em_destroy(m);
    tf_engine_destroy(e);
}

int main(void)
{
    for (uint64_t seed = 1; seed <= 4; seed++) {
        stream(seed * 0x9E3779B97F4A7C15ull, 64, 1000, 120, 3, 20000);
        stream(seed * 0xC2B2AE3D27D4EB4Full, 1024, 100000, 3000, 40, 20000);
        stream(seed * 0x165667B19E3779F9ull, 64, INT64_MAX - 40, 100, 0, 8000); /* the top */
        stream(seed * 0x27D4EB2F165667C5ull, 64, 30, 60, 1, 8000);              /* near price 1 */
    }
    return tf_test_report();
}

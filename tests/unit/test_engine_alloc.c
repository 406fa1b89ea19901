/* Applying commands never allocates: every malloc/calloc/realloc/free in the process is counted
 * (this program interposes them, tests/unit/alloc_count.h) while a million mixed commands of the
 * exchange-core mix and 200,000 of the OFL1 cycle go through the engine, tables growing and
 * levels coming and going included, and 300,000 records of a stream that is 45% gateway commands
 * (run_gateway). The flow generator runs on the same loop and allocates nothing either. */
#include <stdlib.h>

#include "engine_streams.h"
#include "harness.h"
#include "tollfree/engine.h"

#include "alloc_count.h"

#if !TF_ALLOC_COUNTING
int main(void)
{
    printf("allocation counting skipped under AddressSanitizer (the release build runs it)\n");
    return tf_test_report();
}
#else
static long allocs(void)
{
    return tf_alloc_calls + tf_free_calls;
}

static void run(uint32_t mix, uint32_t target, long n)
{
    static const uint64_t ids[] = {1, 2, 3};
    tf_engine_flow_config fc = {.size = sizeof fc,
                                .mix = mix,
                                .seed = 3,
                                .instruments = ids,
                                .n_instruments = 3,
                                .target_orders = target};
    tf_engine_config ec = {
        .size = sizeof ec, .instruments = ids, .n_instruments = 3, .max_orders = target * 8};
    tf_engine_flow *f = NULL;
    tf_engine *e = NULL;
    tf_alloc_on = 1;
    long before = allocs();
    CHECK_RC(tf_engine_flow_open(&fc, &f), 0);
    CHECK_RC(tf_engine_create(&ec, &e), 0);
    CHECK(allocs() > before); /* the counter sees the library's allocations at all */
    if (!f || !e)
        return;
    static tf_ofl_msg ev[256];
    tf_engine_sink sink = {.ev = ev, .cap = 256};
    tf_engine_counters c;
    before = allocs();
    long bad = 0;
    for (long i = 0; i < n; i++) {
        tf_ofl_msg m;
        tf_engine_flow_next(f, &m);
        sink.n = 0;
        bad += tf_engine_apply(e, &m, &sink) < 0;
    }
    tf_engine_get_counters(e, &c);
    (void)tf_engine_state_hash(e);
    CHECK_EQ(allocs() - before, 0);
    CHECK_EQ(bad, 0);
    CHECK(c.trades > 0 && c.resting_orders > 0 && c.price_levels > 0);
    printf("mix %u: %ld records, %llu trades, %llu resting on %llu levels: 0 heap calls\n", mix, n,
           (unsigned long long)c.trades, (unsigned long long)c.resting_orders,
           (unsigned long long)c.price_levels);
    tf_alloc_on = 0;
    tf_engine_destroy(e);
    tf_engine_flow_close(f);
}

static int discard(void *ctx, const tf_ofl_msg *ev, size_t n)
{
    (void)ctx;
    (void)ev;
    (void)n;
    return 0;
}

/* Gateway commands (Order of every type/tif/flag, Cancel, ReplaceByClient) mixed with OFL1 ones:
 * the differential tests' stream generator (tests/model/engine_streams.c, no oracle: it
 * allocates nothing), a seed whose stream is 45% gateway commands. */
static void run_gateway(long n)
{
    static const uint64_t ids[] = {1, 2, 3};
    tf_engine_config ec = {
        .size = sizeof ec, .instruments = ids, .n_instruments = 3, .max_orders = 50000};
    es_gen g;
    uint64_t seed = 1;
    for (es_init(&g, seed, ids, 3); g.gateway_pct < 45; es_init(&g, ++seed, ids, 3))
        ;
    tf_engine *e = NULL;
    tf_alloc_on = 1;
    CHECK_RC(tf_engine_create(&ec, &e), 0);
    if (!e)
        return;
    static tf_ofl_msg ev[64];
    tf_engine_sink sink = {.ev = ev, .cap = 64, .flush = discard};
    long before = allocs(), bad = 0, gateway = 0;
    for (long i = 0; i < n; i++) {
        tf_ofl_msg m;
        es_next(&g, &m);
        gateway += m.kind >= TF_OFX_ORDER && m.kind <= TF_OFX_REPLACE_BY_CLIENT;
        sink.n = 0;
        bad += tf_engine_apply(e, &m, &sink) < 0;
        if (i % 1000 == 0) { /* the queries too */
            tf_engine_level l;
            int64_t px;
            tf_engine_order o;
            (void)tf_engine_level_at(e, 1, TF_OFL_BUY, g.mid - 1, &l);
            (void)tf_engine_last_trade(e, 1, &px);
            (void)tf_engine_find_client(e, 1, 1, &o);
        }
    }
    (void)tf_engine_state_hash(e);
    tf_engine_counters c;
    tf_engine_get_counters(e, &c);
    CHECK_EQ(allocs() - before, 0);
    CHECK_EQ(bad, 0);
    CHECK(gateway > n / 3 && c.trades > 0 && c.resting_orders > 0);
    printf("gateway stream (seed %llu): %ld records, %ld gateway commands, %llu trades: 0 heap "
           "calls\n",
           (unsigned long long)seed, n, gateway, (unsigned long long)c.trades);
    tf_alloc_on = 0;
    tf_engine_destroy(e);
}

int main(void)
{
    run(TF_ENGINE_MIX_EXCHANGE_CORE, 20000, 1000000);
    run(TF_ENGINE_MIX_OFL1, 2000, 200000);
    run_gateway(300000);
    return tf_test_report();
}
#endif

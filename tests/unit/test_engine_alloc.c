/* Applying commands never allocates: every malloc/calloc/realloc/free in the process is counted
 * (this program interposes them, tests/unit/alloc_count.h) while a million mixed commands of the
 * exchange-core mix and 200,000 of the OFL1 cycle go through the engine, tables growing and
 * levels coming and going included. The flow generator runs on the same loop and allocates
 * nothing either. */
#include <stdlib.h>

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

int main(void)
{
    run(TF_ENGINE_MIX_EXCHANGE_CORE, 20000, 1000000);
    run(TF_ENGINE_MIX_OFL1, 2000, 200000);
    return tf_test_report();
}
#endif

/* The streaming step and the reset never allocate: every malloc/calloc/realloc/free in the
 * process is counted (this program interposes them and forwards to glibc) while bars are fed. */
#include <stdlib.h>

#include "harness.h"
#include "tollfree/kernel.h"

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

int main(void)
{
    int64_t params[6] = {200, 100, 14, 100, 33, 50};
    tf_strategy *s = NULL;
    tf_alloc_on = 1;
    long before = allocs();
    CHECK_RC(tf_strategy_open(&s, params), 0);
    CHECK(allocs() > before); /* the counter sees the library's allocations at all */
    if (!s)
        return tf_test_report();
    before = allocs();
    double x = 100.0;
    long long sum = 0;
    for (int i = 0; i < 100000; i++) {
        x *= (i % 7 < 3) ? 1.001 : 0.9995;
        sum += tf_strategy_step(s, x);
    }
    tf_strategy_reset(s);
    for (int i = 0; i < 1000; i++)
        sum += tf_strategy_step(s, 100.0 + (i % 13));
    CHECK_EQ(allocs() - before, 0);
    CHECK(tf_strategy_bars(s) == 1000);
    printf("positions summed: %lld\n", sum);
    tf_strategy_close(s);
    return tf_test_report();
}
#endif

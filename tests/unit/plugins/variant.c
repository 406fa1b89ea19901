/* Test plugins, one per VARIANT (tests/unit/CMakeLists.txt builds each as a MODULE): every way a
 * plugin can be refused, plus a good one (a constant-target strategy) and one whose step breaks
 * the contract. */
#include <stdint.h>

#include "tollfree/strategy.h"

#define V_GOOD 0
#define V_BAD_ABI 1
#define V_SMALL_SIZE 2
#define V_NO_SYMBOL 3
#define V_BAD_NAME 4
#define V_NULL_DEF 5
#define V_NO_STEP 6
#define V_ZERO_STATE 7
#define V_BAD_TARGET 8
#define V_DUP_PARAM 9

typedef struct st {
    double every; /* flip every this many bars */
    int64_t n;
    int side;
} st;

static const char *const names[] = {"every", "every"};

static int init(void *state, const double *p)
{
    if (!(p[0] >= 1.0))
        return 1;
    st *s = state;
    s->every = p[0];
    s->n = 0;
    s->side = 1;
    return 0;
}

/* Long, flat, short, flat, ... changing every `every` bars (so trades and flat bars). */
static int step(void *state, double c)
{
    st *s = state;
    (void)c;
    int64_t k = (int64_t)((double)s->n++ / s->every);
    if (VARIANT == V_BAD_TARGET && s->n == 5)
        return 7;
    return (k % 4 == 0) ? 1 : (k % 4 == 2) ? -1 : 0;
}

static const tf_strategy_def def = {
    .size = VARIANT == V_SMALL_SIZE ? 24 : sizeof(tf_strategy_def),
    .abi = VARIANT == V_BAD_ABI ? 99 : TF_STRATEGY_ABI,
    .name = VARIANT == V_BAD_NAME ? "Bad-Name" : "variant",
    .n_params = VARIANT == V_DUP_PARAM ? 2 : 1,
    .param_names = names,
    .state_size = VARIANT == V_ZERO_STATE ? 0 : sizeof(st),
    .init = init,
    .step = VARIANT == V_NO_STEP ? 0 : step,
    .state_bytes = 0,
};

#if VARIANT == V_NO_SYMBOL
__attribute__((visibility("default"))) const tf_strategy_def *not_the_symbol(void);
const tf_strategy_def *not_the_symbol(void)
#else
__attribute__((visibility("default"))) const tf_strategy_def *tollfree_strategy(void);
const tf_strategy_def *tollfree_strategy(void)
#endif
{
    return VARIANT == V_NULL_DEF ? 0 : &def;
}

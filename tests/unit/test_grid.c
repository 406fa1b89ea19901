/* strategy.h's grids by name: tf_grid_named (ranges inclusive, the cartesian product with the
 * last parameter fastest, values LO + k*STEP) and tf_grid_where, with every refusal naming the
 * part at fault. The defs here are local: a grid needs only the names. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tollfree/error.h"
#include "tollfree/strategy.h"

static int init_ok(void *state, const double *params)
{
    (void)state;
    (void)params;
    return 0;
}

static int step_hold(void *state, double close)
{
    (void)state;
    (void)close;
    return TF_HOLD;
}

static const char *const two_names[] = {"fast", "slow"};
static const tf_strategy_def two = {.size = sizeof(tf_strategy_def),
                                    .abi = TF_STRATEGY_ABI,
                                    .name = "two",
                                    .n_params = 2,
                                    .param_names = two_names,
                                    .state_size = 16,
                                    .init = init_ok,
                                    .step = step_hold};
static const char *const three_names[] = {"period", "lower", "upper"};
static const tf_strategy_def three = {.size = sizeof(tf_strategy_def),
                                      .abi = TF_STRATEGY_ABI,
                                      .name = "three",
                                      .n_params = 3,
                                      .param_names = three_names,
                                      .state_size = 16,
                                      .init = init_ok,
                                      .step = step_hold};

static void test_product(void)
{
    double *g = NULL;
    int64_t m = -1;
    char msg[512];
    /* any order of naming; the product in the def's order, last fastest */
    CHECK_RC(tf_grid_named(&two, "slow=10:30:10, fast = 1:2:1", NULL, &g, &m, msg, sizeof msg), 0);
    CHECK_EQ(m, 6);
    static const double want[12] = {1, 10, 1, 20, 1, 30, 2, 10, 2, 20, 2, 30};
    if (g && m == 6)
        CHECK_BITS(g, want, sizeof want);
    free(g);

    /* a single value; a real step computed as LO + k*STEP (not by repeated addition) */
    g = NULL;
    CHECK_RC(
        tf_grid_named(&three, "period=14,lower=0.1:0.3:0.1,upper=70", "", &g, &m, msg, sizeof msg),
        0);
    /* 0.1 + 2 * 0.1 is 0.30000000000000004 > 0.3: the range holds two values */
    CHECK_EQ(m, 2);
    if (g && m == 2) {
        CHECK(g[0] == 14 && g[1] == 0.1 && g[2] == 70);
        CHECK(g[4] == 0.1 + 1.0 * 0.1 && g[5] == 70);
    }
    free(g);
    g = NULL;
    CHECK_RC(
        tf_grid_named(&three, "period=14,lower=0:30:7.5,upper=70", NULL, &g, &m, msg, sizeof msg),
        0);
    CHECK_EQ(m, 5); /* 0, 7.5, 15, 22.5, 30: HI included */
    if (g && m == 5)
        CHECK(g[3 * 4 + 1] == 30.0);
    free(g);
}

static void test_where(void)
{
    double *g = NULL;
    int64_t m = 0;
    char msg[512];
    CHECK_RC(tf_grid_named(&two, "fast=1:5:1,slow=1:5:1", "fast<slow", &g, &m, msg, sizeof msg), 0);
    CHECK_EQ(m, 10);
    int ok = 1;
    for (int64_t j = 0; g && j < m; j++)
        ok &= g[2 * j] < g[2 * j + 1];
    CHECK(ok);
    if (g && m == 10)
        CHECK(g[0] == 1 && g[1] == 2 && g[18] == 4 && g[19] == 5); /* order kept */
    free(g);
    g = NULL;
    /* several conditions, ',' and "&&", numbers on either side */
    CHECK_RC(tf_grid_named(&two, "fast=1:5:1,slow=1:5:1", "fast < slow && slow>=4, 2<=fast", &g, &m,
                           msg, sizeof msg),
             0);
    CHECK_EQ(m, 5); /* (2,4) (2,5) (3,4) (3,5) (4,5) */
    free(g);
    g = NULL;
    CHECK_RC(tf_grid_named(&two, "fast=1:5:1,slow=1:5:1", "fast<slow,fast>=2,slow>=4", &g, &m, msg,
                           sizeof msg),
             0);
    CHECK_EQ(m, 5);
    free(g);

    double p[6] = {1, 2, 2, 2, 3, 1};
    unsigned char keep[3];
    static const unsigned char want_ne[3] = {1, 0, 1}, want_eq[3] = {0, 1, 0};
    CHECK_RC(tf_grid_where("fast != slow", two_names, 2, p, 3, keep, msg, sizeof msg), 0);
    CHECK_BITS(keep, want_ne, 3);
    CHECK_RC(tf_grid_where("fast==slow", two_names, 2, p, 3, keep, msg, sizeof msg), 0);
    CHECK_BITS(keep, want_eq, 3);
    CHECK_RC(tf_grid_where("fast<=1.5", two_names, 2, p, 3, keep, msg, sizeof msg), 0);
    CHECK(keep[0] == 1 && keep[1] == 0 && keep[2] == 0);
    CHECK_RC(tf_grid_where("fast>slow", two_names, 2, p, 3, keep, msg, sizeof msg), 0);
    CHECK(keep[0] == 0 && keep[1] == 0 && keep[2] == 1);

    CHECK_RC(tf_grid_where("fast<medium", two_names, 2, p, 3, keep, msg, sizeof msg),
             TF_E_BAD_INPUT);
    CHECK(strstr(msg, "'medium'") && strstr(msg, "fast, slow"));
    CHECK_RC(tf_grid_where("fast slow", two_names, 2, p, 3, keep, msg, sizeof msg), TF_E_BAD_INPUT);
    CHECK(strstr(msg, "no comparison") != NULL);
    CHECK_RC(tf_grid_where("fast<", two_names, 2, p, 3, keep, msg, sizeof msg), TF_E_BAD_INPUT);
    CHECK_RC(tf_grid_where("fast<slow,", two_names, 2, p, 3, keep, msg, sizeof msg),
             TF_E_BAD_INPUT);
    CHECK_RC(tf_grid_where("  ", two_names, 2, p, 3, keep, msg, sizeof msg), TF_E_BAD_INPUT);
    CHECK_RC(tf_grid_where(NULL, two_names, 2, p, 3, keep, msg, sizeof msg), TF_E_NULL_ARG);
    CHECK_RC(tf_grid_where("fast<slow", two_names, 2, p, -1, keep, msg, sizeof msg),
             TF_E_INVALID_ARG);
}

static void test_refusals(void)
{
    double *g = (double *)&g; /* untouched on error */
    double *const before = g;
    int64_t m = 7;
    char msg[512];
    CHECK_RC(tf_grid_named(&two, "fast=1:3:1,medium=2", NULL, &g, &m, msg, sizeof msg),
             TF_E_BAD_INPUT);
    CHECK(strstr(msg, "unknown parameter 'medium'") && strstr(msg, "fast, slow"));
    CHECK_RC(tf_grid_named(&two, "fast=1:3:1", NULL, &g, &m, msg, sizeof msg), TF_E_BAD_INPUT);
    CHECK(strstr(msg, "parameter slow missing") != NULL);
    CHECK_RC(tf_grid_named(&two, "fast=1:3:1,slow=2,fast=4", NULL, &g, &m, msg, sizeof msg),
             TF_E_BAD_INPUT);
    CHECK(strstr(msg, "fast named twice") != NULL);
    CHECK_RC(tf_grid_named(&two, "fast=1:3:0,slow=2", NULL, &g, &m, msg, sizeof msg),
             TF_E_BAD_INPUT);
    CHECK(strstr(msg, "fast: STEP must be > 0") != NULL);
    CHECK_RC(tf_grid_named(&two, "fast=1:3:-1,slow=2", NULL, &g, &m, msg, sizeof msg),
             TF_E_BAD_INPUT);
    CHECK_RC(tf_grid_named(&two, "fast=5:3:1,slow=2", NULL, &g, &m, msg, sizeof msg),
             TF_E_BAD_INPUT);
    CHECK(strstr(msg, "fast: LO 5 > HI 3") != NULL);
    CHECK_RC(tf_grid_named(&two, "fast=1:3,slow=2", NULL, &g, &m, msg, sizeof msg), TF_E_BAD_INPUT);
    CHECK(strstr(msg, "LO:HI:STEP") != NULL);
    CHECK_RC(tf_grid_named(&two, "fast=x,slow=2", NULL, &g, &m, msg, sizeof msg), TF_E_BAD_INPUT);
    CHECK_RC(tf_grid_named(&two, "fast=nan,slow=2", NULL, &g, &m, msg, sizeof msg), TF_E_BAD_INPUT);
    CHECK_RC(tf_grid_named(&two, "fast=1:inf:1,slow=2", NULL, &g, &m, msg, sizeof msg),
             TF_E_BAD_INPUT);
    CHECK_RC(tf_grid_named(&two, "fast,slow=2", NULL, &g, &m, msg, sizeof msg), TF_E_BAD_INPUT);
    CHECK_RC(tf_grid_named(&two, "", NULL, &g, &m, msg, sizeof msg), TF_E_BAD_INPUT);
    /* more than 10 M combos: each range alone, and the product */
    CHECK_RC(tf_grid_named(&two, "fast=1:1e9:1,slow=2", NULL, &g, &m, msg, sizeof msg), TF_E_LIMIT);
    CHECK(strstr(msg, "more than 10000000") != NULL);
    CHECK_RC(
        tf_grid_named(&two, "fast=1:4000:1,slow=1:4000:1", "fast<slow", &g, &m, msg, sizeof msg),
        TF_E_LIMIT);
    CHECK(strstr(msg, "16000000 combos") != NULL);
    /* where naming an unknown parameter; where keeping nothing */
    CHECK_RC(tf_grid_named(&two, "fast=1:3:1,slow=2", "fast<slw", &g, &m, msg, sizeof msg),
             TF_E_BAD_INPUT);
    CHECK(strstr(msg, "'slw'") != NULL);
    CHECK_RC(tf_grid_named(&two, "fast=3:4:1,slow=2", "fast<slow", &g, &m, msg, sizeof msg),
             TF_E_BAD_INPUT);
    CHECK(strstr(msg, "keeps none of the 2 combos") != NULL);
    CHECK(g == before && m == 7);
    CHECK_RC(tf_grid_named(NULL, "fast=1", NULL, &g, &m, msg, sizeof msg), TF_E_NULL_ARG);
    CHECK_RC(tf_grid_named(&two, NULL, NULL, &g, &m, msg, sizeof msg), TF_E_NULL_ARG);
    CHECK_RC(tf_grid_named(&two, "fast=1,slow=2", NULL, NULL, &m, msg, sizeof msg), TF_E_NULL_ARG);
}

int main(void)
{
    test_product();
    test_where();
    test_refusals();
    return tf_test_report();
}

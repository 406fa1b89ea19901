/* include/tollfree/research.h: the derived figures and their edges, the column table and the
 * ranking, the fee rule, the grid notes (checked against what the kernel does), the folds and
 * the out-of-sample run (checked against sweeps of each part done here by hand), and every
 * error return. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "tollfree/error.h"
#include "tollfree/kernel.h"
#include "tollfree/research.h"
#include "tollfree/strategy.h"

static uint64_t rng = 88172645463325252ull;

static void test_derived(void)
{
    tf_stats s[6] = {
        {.trades = 0},                                          /* no trade */
        {.pnl = 1.0, .trades = 1, .wins = 1, .gross_win = 1.0}, /* one win, no loss */
        {.pnl = 3.0, .trades = 2, .wins = 2, .gross_win = 3.0, .mean = 1.5, .m2 = 0.5},
        {.pnl = -2.0, .trades = 2, .gross_loss = -2.0, .mean = -1.0}, /* std 0 */
        {.pnl = 1.0,
         .trades = 4,
         .wins = 2,
         .gross_win = 2.0,
         .gross_loss = -1.0,
         .mean = 0.25,
         .m2 = 3.0},
        {.pnl = NAN, .trades = 3, .wins = 1, .gross_win = INFINITY, .gross_loss = NAN, .mean = 1},
    };
    tf_derived d[6];
    CHECK_RC(tf_stats_derive(s, 6, d), 0);
    CHECK(isnan(d[0].win_rate) && isnan(d[0].profit_factor) && isnan(d[0].sharpe_per_trade) &&
          isnan(d[0].avg_trade));
    CHECK(d[1].win_rate == 1.0 && isinf(d[1].profit_factor) && isnan(d[1].sharpe_per_trade));
    CHECK(isinf(d[2].profit_factor) && tf_test_same_bits(d[2].sharpe_per_trade, 1.5 / sqrt(0.5)));
    CHECK(d[3].profit_factor == 0.0 && isnan(d[3].sharpe_per_trade) && d[3].avg_trade == -1.0);
    CHECK(d[4].win_rate == 0.5 && d[4].profit_factor == 2.0 && d[4].sharpe_per_trade == 0.25);
    CHECK(d[4].avg_trade == 0.25);
    CHECK(isinf(d[5].profit_factor) && isnan(d[5].avg_trade)); /* gross_loss NaN: not < 0 */
    /* a NaN gross_win passes through with its sign (as numpy's gw / -gl gives it) */
    tf_stats nanwin = {.trades = 2, .gross_win = NAN, .gross_loss = -1.0};
    CHECK_RC(tf_stats_derive(&nanwin, 1, d), 0);
    CHECK(tf_test_same_bits(d[0].profit_factor, NAN) && !signbit(d[0].profit_factor));
    CHECK_RC(tf_stats_derive(s, -1, d), TF_E_INVALID_ARG);
    CHECK_RC(tf_stats_derive(NULL, 1, d), TF_E_NULL_ARG);
    CHECK_RC(tf_stats_derive(s, 1, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_stats_derive(NULL, 0, NULL), 0);
}

static void test_columns(void)
{
    CHECK_EQ(tf_column_count(), 21 + TF_TIME_FIGURES);
    for (int k = 0; k < TF_TIME_FIGURES; k++) /* the time-aware figures, by their names */
        CHECK(!strcmp(tf_column_name(21 + k), tf_time_figure_name(k)) &&
              tf_column_flags(21 + k) == TF_COLUMN_TIME);
    CHECK(!strcmp(tf_column_name(0), "L") && !strcmp(tf_column_name(TF_COLUMN_PNL), "pnl"));
    CHECK(!strcmp(tf_column_name(20), "avg_trade") && tf_column_name(21 + TF_TIME_FIGURES) == NULL);
    CHECK(tf_column_name(-1) == NULL && tf_column_flags(21 + TF_TIME_FIGURES) == 0);
    CHECK(tf_column_flags(2) == (TF_COLUMN_WINDOW | TF_COLUMN_INT));
    CHECK(tf_column_flags(7) == TF_COLUMN_INT && tf_column_flags(6) == 0);
    CHECK(tf_column_flags(16) == (TF_COLUMN_STATS | TF_COLUMN_INT));
    int sign = 0;
    char msg[600] = "";
    CHECK_EQ(tf_column_find("-max_dd", 7, &sign, msg, sizeof msg), 15);
    CHECK_EQ(sign, -1);
    CHECK_EQ(tf_column_find("pnl,trades", 3, &sign, msg, sizeof msg), TF_COLUMN_PNL);
    CHECK_EQ(sign, 1);
    CHECK_RC(tf_column_find("-pnl", 4, NULL, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK_RC(tf_column_find("zz", 2, &sign, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK(!strncmp(msg, "unknown column 'zz'; columns: L, half, sq,", 42));
    CHECK(strstr(msg, "sharpe_per_trade, avg_trade") != NULL);
    CHECK_RC(tf_column_find(NULL, 0, &sign, msg, sizeof msg), TF_E_NULL_ARG);
    char tiny[8];
    CHECK_RC(tf_column_find("zz", 2, NULL, tiny, sizeof tiny), TF_E_INVALID_ARG);
    CHECK(strlen(tiny) == 7); /* truncated, terminated */

    int64_t params[12] = {6, 3, 2, 3, 1, 2, 8, 4, 3, 4, 1, 2};
    double pnl[2] = {1.5, NAN};
    int64_t trades[2] = {3, 0};
    tf_stats st[2] = {{.pnl = 1.5, .trades = 3, .wins = 2, .max_dd = 0.5}, {.trades = 0}};
    tf_results r = {params, pnl, trades, NULL, 2, NULL, 0, NULL, NULL};
    double v[2];
    CHECK_RC(tf_column_values(&r, 0, 1, v), 0);
    CHECK(v[0] == 6.0 && v[1] == 8.0);
    CHECK_RC(tf_column_values(&r, TF_COLUMN_PNL, -1, v), 0);
    CHECK(v[0] == -1.5 && isnan(v[1]));
    CHECK_RC(tf_column_values(&r, 15, 1, v), TF_E_INVALID_ARG); /* statistics absent */
    CHECK(isnan(tf_column_value(&r, 15, 0)));
    CHECK_RC(tf_column_values(&r, 21, 1, v), TF_E_INVALID_ARG);
    CHECK_RC(tf_column_values(&r, 0, 0, v), TF_E_INVALID_ARG);
    CHECK_RC(tf_column_values(NULL, 0, 1, v), TF_E_NULL_ARG);
    CHECK_RC(tf_column_values(&r, 0, 1, NULL), TF_E_NULL_ARG);
    r.stats = st;
    CHECK_RC(tf_column_values(&r, 15, -1, v), 0);
    CHECK(v[0] == -0.5 && tf_test_same_bits(v[1], -0.0));
    CHECK(tf_column_value(&r, 17, 0) == 2.0 / 3.0 && isnan(tf_column_value(&r, 17, 1)));
    CHECK(tf_column_value(&r, 7, 0) == 3.0 && isnan(tf_column_value(&r, 7, 2)));
    CHECK(isnan(tf_column_value(NULL, 7, 0)));
    r.pnl = NULL;
    CHECK_RC(tf_column_values(&r, TF_COLUMN_PNL, 1, v), TF_E_NULL_ARG);
}

/* A strategy's table: its parameter names, then pnl, trades and the rest; the HMA table is the
 * one with dparams NULL (the same numbers as tf_column_*). */
static void test_named_columns(void)
{
    static const char *const names[] = {"fast", "slow"};
    double dp[4] = {2.0, 10.0, 2.5, 20.0};
    double pnl[2] = {1.5, -2.0};
    int64_t trades[2] = {3, 4};
    tf_stats st[2] = {{.pnl = 1.5, .trades = 3, .max_dd = 0.5}, {.trades = 4, .max_dd = 2.0}};
    tf_results r = {NULL, pnl, trades, st, 2, dp, 2, names, NULL};
    tf_results hma = {0};
    char msg[2048];
    int sign = 0;
    CHECK_EQ(tf_results_column_count(&hma), tf_column_count());
    CHECK_EQ(tf_results_column_pnl(&hma), TF_COLUMN_PNL);
    CHECK(!strcmp(tf_results_column_name(&hma, 2), "sq"));
    CHECK_EQ(tf_results_column_count(&r), tf_column_count() - 4);
    CHECK_EQ(tf_results_column_pnl(&r), 2);
    CHECK(!strcmp(tf_results_column_name(&r, 0), "fast"));
    CHECK(!strcmp(tf_results_column_name(&r, 1), "slow"));
    CHECK(!strcmp(tf_results_column_name(&r, 2), "pnl"));
    CHECK(!strcmp(tf_results_column_name(&r, 3), "trades"));
    CHECK(
        !strcmp(tf_results_column_name(&r, tf_column_count() - 5 - TF_TIME_FIGURES), "avg_trade"));
    CHECK(!strcmp(tf_results_column_name(&r, tf_column_count() - 5), "periods_per_year"));
    { /* a time-aware column reads tf_results.time; without it, a refusal, not a guess */
        tf_time_stats ts[2] = {{.cagr = 3.0, .mtm_max_dd = 1.0}, {.cagr = -1.0}};
        double v[2];
        int cagr = tf_column_find("cagr", 4, NULL, NULL, 0);
        CHECK(cagr >= 0 && (tf_column_flags(cagr) & TF_COLUMN_TIME));
        tf_results rt = {NULL, pnl, trades, st, 2, dp, 2, names, NULL};
        int col = tf_results_column_find(&rt, "cagr", 4, NULL, NULL, 0);
        CHECK_RC(tf_column_values(&rt, col, 1, v), TF_E_INVALID_ARG);
        CHECK(isnan(tf_column_value(&rt, col, 0)));
        rt.time = ts;
        CHECK_RC(tf_column_values(&rt, col, -1, v), 0);
        CHECK(v[0] == -3.0 && v[1] == 1.0);
        int64_t order[2];
        CHECK_RC(tf_column_values(&rt, col, 1, v), 0);
        CHECK_RC(tf_rank(v, 2, order), 0);
        CHECK(order[0] == 0 && order[1] == 1);
    }
    CHECK(tf_results_column_name(&r, tf_column_count() - 4) == NULL);
    CHECK(tf_results_column_name(&r, -1) == NULL);
    CHECK_EQ(tf_results_column_flags(&r, 0), TF_COLUMN_WINDOW); /* a real, not an integer */
    CHECK_EQ(tf_results_column_flags(&r, 3), TF_COLUMN_INT);
    CHECK_EQ(tf_results_column_find(&r, "slow", 4, &sign, msg, sizeof msg), 1);
    CHECK_EQ(tf_results_column_find(&r, "-max_dd", 7, &sign, msg, sizeof msg), 11);
    CHECK_EQ(sign, -1);
    CHECK_RC(tf_results_column_find(&r, "L", 1, NULL, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK(!strncmp(msg, "unknown column 'L'; columns: fast, slow, pnl, trades,", 53));
    CHECK_EQ(tf_results_column_find(&hma, "p3", 2, NULL, msg, sizeof msg), 4);
    double v[2];
    CHECK_RC(tf_column_values(&r, 0, 1, v), 0);
    CHECK(v[0] == 2.0 && v[1] == 2.5);
    CHECK_RC(tf_column_values(&r, 1, -1, v), 0);
    CHECK(v[0] == -10.0 && v[1] == -20.0);
    CHECK_RC(tf_column_values(&r, 2, 1, v), 0);
    CHECK(v[0] == 1.5 && v[1] == -2.0);
    CHECK(tf_column_value(&r, 11, 1) == 2.0 && tf_column_value(&r, 3, 1) == 4.0);
    CHECK_RC(tf_column_values(&r, 17, 1, v), TF_E_INVALID_ARG); /* past the table */
    r.stats = NULL;
    CHECK_RC(tf_column_values(&r, 11, 1, v), TF_E_INVALID_ARG); /* statistics absent */
    /* a bad strategy table */
    tf_results bad = r;
    bad.param_names = NULL;
    CHECK_RC(tf_results_column_count(&bad), TF_E_INVALID_ARG);
    CHECK(tf_results_column_name(&bad, 0) == NULL);
    CHECK_RC(tf_column_values(&bad, 0, 1, v), TF_E_INVALID_ARG);
    bad = r;
    bad.n_params = 0;
    CHECK_RC(tf_results_column_pnl(&bad), TF_E_INVALID_ARG);
    CHECK_RC(tf_results_column_find(&bad, "pnl", 3, NULL, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK_RC(tf_results_column_count(NULL), TF_E_NULL_ARG);
}

static void test_rank(void)
{
    double v[7] = {1.0, NAN, 3.0, -0.0, 3.0, 0.0, NAN};
    int64_t order[7];
    CHECK_RC(tf_rank(v, 7, order), 0);
    int64_t want[7] = {2, 4, 0, 3, 5, 1, 6}; /* ties and NaN keep combo order; -0 == 0 */
    CHECK(memcmp(order, want, sizeof want) == 0);
    CHECK_RC(tf_rank(v, 0, NULL), 0);
    CHECK_RC(tf_rank(v, -1, order), TF_E_INVALID_ARG);
    CHECK_RC(tf_rank(NULL, 2, order), TF_E_NULL_ARG);
    CHECK_RC(tf_rank(v, 2, NULL), TF_E_NULL_ARG);
}

static void test_fee(void)
{
    char msg[256] = "";
    CHECK_RC(tf_fee_check(0.0, msg, sizeof msg), 0);
    CHECK_RC(tf_fee_check(0.09, NULL, 0), 0);
    CHECK_RC(tf_fee_check(99.5, msg, sizeof msg), 0);
    CHECK(msg[0] == '\0'); /* untouched on success */
    CHECK_RC(tf_fee_check(-1.0, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK(strstr(msg, "rebate") && strstr(msg, "got -1"));
    CHECK_RC(tf_fee_check(1e300, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK(strstr(msg, "0 <= fee < 100") != NULL);
    CHECK_RC(tf_fee_check(100.0, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK_RC(tf_fee_check(NAN, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK(!strncmp(msg, "fee must be finite", 18));
    CHECK_RC(tf_fee_check(-INFINITY, NULL, 0), TF_E_INVALID_ARG);
    double fee = -7.0;
    CHECK_RC(tf_fee_parse("0.09", &fee, msg, sizeof msg), 0);
    CHECK(fee == 0.09);
    CHECK_RC(tf_fee_parse(" 0x1p-3", &fee, msg, sizeof msg), 0);
    CHECK(fee == 0.125);
    CHECK_RC(tf_fee_parse("0", &fee, msg, sizeof msg), 0);
    CHECK(fee == 0.0);
    const char *bad[] = {"-1", "1e300", "100", "nan", "inf", "x", "1 ", "", "1e-400", "1e400"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        fee = 5.0;
        CHECK_RC(tf_fee_parse(bad[k], &fee, msg, sizeof msg), TF_E_INVALID_ARG);
        CHECK(fee == 5.0 && strstr(msg, bad[k]) != NULL);
    }
    CHECK_RC(tf_fee_parse("-1", &fee, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK(strstr(msg, "a negative fee, a rebate, is refused") != NULL);
    CHECK_RC(tf_fee_parse("x", &fee, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK(!strncmp(msg, "wants a finite number of percent points", 39));
    CHECK_RC(tf_fee_parse(NULL, &fee, msg, sizeof msg), TF_E_NULL_ARG);
    CHECK_RC(tf_fee_parse("1", NULL, msg, sizeof msg), TF_E_NULL_ARG);
}

/* warm-up of a combo as research.h defines it */
static int64_t warmup(const int64_t *c)
{
    int64_t h = (c[0] > c[1] ? c[0] : c[1]) + c[2] - 1;
    int64_t q = c[3] > c[4] ? c[3] : c[4];
    q = (q > c[5] ? q : c[5]) + c[3] - 1;
    return h > q ? h : q;
}

static void test_grid_check(void)
{
    /* The rule against the kernel: on a series of at most `warmup` bars a combo never trades;
     * on warmup + 2 bars of a zigzag every such small combo does. */
    enum { M = 300 };
    static int64_t params[6 * M];
    static double close[400], pnl[M];
    static int64_t trades[M];
    for (int j = 0; j < M; j++)
        for (int k = 0; k < 6; k++)
            params[6 * j + k] = 1 + (int64_t)(tf_test_uniform(&rng) * (k == 2 ? 6 : 30));
    tf_sweep_opts o = {.size = sizeof o, .threads = 1};
    for (int rep = 0; rep < 20; rep++) {
        tf_test_random_walk(close, 400, 0.004, &rng);
        int64_t n = 2 + (int64_t)(tf_test_uniform(&rng) * 70);
        CHECK_RC(tf_sweep(close, n, params, M, pnl, trades, &o), 0);
        tf_grid_report g;
        int notes = tf_grid_check(params, M, n, &g, NULL, 0);
        int64_t never = 0, bad = 0;
        for (int j = 0; j < M; j++)
            if (warmup(params + 6 * j) >= n) {
                never++;
                bad += trades[j] != 0 || pnl[j] != 0.0;
            }
        CHECK_EQ(bad, 0);
        CHECK_EQ(g.too_long, never);
        CHECK(notes >= (never > 0));
    }
    /* One that needs more bars than its longest window: L=20 sq=5 half=10 -> 24 bars. */
    int64_t c[18] = {20, 10, 5, 4, 1, 2, 6, 3, 2, 3, 1, 2, 20, 10, 5, 4, 1, 2};
    tf_grid_report g;
    char msg[1024];
    CHECK_EQ(tf_grid_check(c, 3, 24, &g, msg, sizeof msg), 2);
    CHECK(g.too_long == 2 && g.first_too_long == 0 && g.first_warmup == 24);
    CHECK(g.duplicates == 1 && g.first_duplicate == 2 && g.duplicate_of == 0);
    CHECK(strstr(msg, "2 of 3 combos can never trade on 24 bars") != NULL);
    CHECK(strstr(msg, "combo 1, L=20 half=10 sq=5 p=4 p3=1 p2=2, needs 24 bars") != NULL);
    CHECK(strstr(msg, "; 1 duplicate combos repeat an earlier combo's row (the first, combo 3, "
                      "repeats combo 1)") != NULL);
    CHECK_EQ(tf_grid_check(c, 3, 25, &g, msg, sizeof msg), 1);
    CHECK(g.too_long == 0 && g.first_too_long == -1 && !strncmp(msg, "1 duplicate", 11));
    CHECK_EQ(tf_grid_check(c, 2, 25, NULL, msg, sizeof msg), 0);
    CHECK(msg[0] == '\0');
    /* the first duplicate is the lowest index among the repeats, with its first occurrence */
    int64_t d[30] = {9, 9, 9, 9, 9, 9, 5, 5, 5, 5, 5, 5, 5, 5, 5,
                     5, 5, 5, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9};
    CHECK_EQ(tf_grid_check(d, 5, 1000, &g, NULL, 0), 1);
    CHECK(g.duplicates == 3 && g.first_duplicate == 2 && g.duplicate_of == 1);
    CHECK_RC(tf_grid_check(c, -1, 10, &g, NULL, 0), TF_E_INVALID_ARG);
    CHECK_RC(tf_grid_check(c, 1, -1, &g, NULL, 0), TF_E_INVALID_ARG);
    CHECK_RC(tf_grid_check(NULL, 1, 10, &g, NULL, 0), TF_E_NULL_ARG);
    int64_t zero[6] = {0, 1, 1, 1, 1, 1};
    CHECK_RC(tf_grid_check(zero, 1, 10, &g, NULL, 0), TF_E_INVALID_ARG);
    CHECK_EQ(tf_grid_check(NULL, 0, 10, &g, NULL, 0), 0);
}

static void test_folds(void)
{
    tf_fold f[8];
    char msg[256] = "";
    tf_oos_opts o = {.size = sizeof o, .split = 0.7};
    CHECK_EQ(tf_folds(10, &o, f, 8, msg, sizeof msg), 1);
    CHECK(f[0].is_start == 0 && f[0].is_end == 7 && f[0].oos_start == 7 && f[0].oos_end == 10);
    o = (tf_oos_opts){.walk_forward = 3}; /* size 0: this layout */
    CHECK_EQ(tf_folds(103, &o, f, 8, msg, sizeof msg), 3);
    CHECK(f[0].is_start == 0 && f[0].is_end == 25 && f[1].is_start == 25 && f[1].is_end == 50);
    CHECK(f[2].is_start == 50 && f[2].oos_start == 75 && f[2].oos_end == 103);
    CHECK_EQ(tf_folds(103, &o, NULL, 0, msg, sizeof msg), 3);
    CHECK_RC(tf_folds(103, &o, f, 2, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK_RC(tf_folds(103, &o, NULL, 2, msg, sizeof msg), TF_E_NULL_ARG);
    CHECK_RC(tf_folds(3, &o, f, 8, msg, sizeof msg), TF_E_BAD_INPUT);
    CHECK(!strncmp(msg, "fold 1 has an empty in-sample or out-of-sample part (3 bars)", 60));
    o = (tf_oos_opts){.split = 0.05};
    CHECK_RC(tf_folds(10, &o, f, 8, msg, sizeof msg), TF_E_BAD_INPUT);
    CHECK(strstr(msg, "fold 1 has an empty") && strstr(msg, "split"));
    tf_oos_opts bad[] = {
        {0},
        {.split = 0.5, .walk_forward = 2},
        {.split = 1.0},
        {.split = -0.5},
        {.split = NAN},
        {.walk_forward = 1001},
        {.walk_forward = -1},
        {.split = 0.5, .metric = "sq"},
        {.split = 0.5, .metric = "nope"},
        {.size = 8, .split = 0.5},
    };
    const char *why[] = {"exactly one",      "exactly one",  "split wants",
                         "split wants",      "split wants",  "walk_forward wants 1..1000",
                         "walk_forward",     "not a metric", "unknown column 'nope'",
                         "tf_oos_opts: size"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        msg[0] = '\0';
        CHECK_RC(tf_folds(100, &bad[k], f, 8, msg, sizeof msg), TF_E_INVALID_ARG);
        if (!strstr(msg, why[k]))
            fprintf(stderr, "case %zu: '%s' lacks '%s'\n", k, msg, why[k]);
        CHECK(strstr(msg, why[k]) != NULL);
    }
    CHECK_RC(tf_folds(100, NULL, f, 8, msg, sizeof msg), TF_E_NULL_ARG);
    o = (tf_oos_opts){.split = 0.5};
    CHECK_RC(tf_folds(-1, &o, f, 8, msg, sizeof msg), TF_E_INVALID_ARG);
}

/* a better than b (NaN worse than any number) */
static int better(double a, double b)
{
    return a == a && (b != b || a > b);
}

/* One fold by hand: sweeps of each part with statistics, the metric from tf_stats_derive. */
static void check_fold(const double *close, const int64_t *params, int64_t m, const tf_fold *f,
                       int col, int sign, const tf_oos_row *row)
{
    static double pnl[2][64], val[2][64];
    static int64_t tr[2][64];
    static tf_stats st[2][64];
    int64_t lo[2] = {f->is_start, f->oos_start}, hi[2] = {f->is_end, f->oos_end};
    for (int k = 0; k < 2; k++) {
        tf_sweep_opts o = {.size = sizeof o, .threads = 1, .stats = st[k]};
        CHECK_RC(tf_sweep(close + lo[k], hi[k] - lo[k], params, m, pnl[k], tr[k], &o), 0);
        tf_derived d[64];
        tf_stats_derive(st[k], m, d);
        for (int64_t j = 0; j < m; j++) {
            double v = col == TF_COLUMN_PNL ? pnl[k][j]
                       : col == 15          ? st[k][j].max_dd
                                            : d[j].sharpe_per_trade;
            val[k][j] = sign < 0 ? -v : v;
        }
    }
    int64_t w = 0;
    for (int64_t j = 1; j < m; j++)
        if (better(val[0][j], val[0][w]))
            w = j;
    int64_t rank = 1, best = 0;
    for (int64_t j = 0; j < m; j++) {
        rank += better(val[1][j], val[1][w]);
        if (better(val[1][j], val[1][best]))
            best = j;
    }
    CHECK_EQ(row->winner, w);
    CHECK(tf_test_same_bits(row->is_value, val[0][w]) && tf_test_same_bits(row->is_pnl, pnl[0][w]));
    CHECK(tf_test_same_bits(row->oos_value, val[1][w]) &&
          tf_test_same_bits(row->oos_pnl, pnl[1][w]));
    CHECK(row->is_trades == tr[0][w] && row->oos_trades == tr[1][w]);
    CHECK_EQ(row->oos_rank, rank);
    CHECK(tf_test_same_bits(row->oos_best_value, val[1][best]));
}

/* tf_oos_run_with: a built-in's folds against tf_sweep_with on each part by hand; hma through
 * it equals tf_oos_run; a combo init refuses is named before any sweep. */
static void test_oos_run_with(void)
{
    enum { N = 2000, M = 12 };
    static double close[N];
    tf_test_random_walk(close, N, 0.004, &rng);
    const tf_strategy_def *sma = tf_strategy_builtin("sma_cross");
    CHECK(sma != NULL);
    if (!sma)
        return;
    double dp[2 * M];
    for (int j = 0; j < M; j++) {
        dp[2 * j] = 2 + j % 4;
        dp[2 * j + 1] = 10 + 7 * (j / 4);
    }
    tf_oos_row rows[3];
    char msg[512];
    tf_oos_opts o = {.size = sizeof o, .walk_forward = 3, .metric = "-max_dd"};
    tf_sweep_opts so = {.size = sizeof so, .threads = 2};
    CHECK_EQ(tf_oos_run_with(sma, close, N, dp, M, &o, rows, 3, msg, sizeof msg, &so), 3);
    tf_fold f[3];
    tf_folds(N, &o, f, 3, NULL, 0);
    for (int i = 0; i < 3; i++) {
        double pnl[2][M], val[2][M];
        int64_t tr[2][M];
        tf_stats st[2][M];
        int64_t lo[2] = {f[i].is_start, f[i].oos_start}, hi[2] = {f[i].is_end, f[i].oos_end};
        for (int k = 0; k < 2; k++) {
            tf_sweep_opts one = {.size = sizeof one, .threads = 1, .stats = st[k]};
            CHECK_RC(tf_sweep_with(sma, close + lo[k], hi[k] - lo[k], dp, M, pnl[k], tr[k], &one),
                     0);
            for (int j = 0; j < M; j++)
                val[k][j] = -st[k][j].max_dd;
        }
        int64_t w = 0;
        for (int64_t j = 1; j < M; j++)
            if (better(val[0][j], val[0][w]))
                w = j;
        int64_t rank = 1;
        for (int64_t j = 0; j < M; j++)
            rank += better(val[1][j], val[1][w]);
        CHECK(memcmp(&rows[i].fold, &f[i], sizeof f[i]) == 0);
        CHECK_EQ(rows[i].winner, w);
        CHECK(tf_test_same_bits(rows[i].is_value, val[0][w]) &&
              tf_test_same_bits(rows[i].oos_pnl, pnl[1][w]));
        CHECK(rows[i].is_trades == tr[0][w] && rows[i].oos_trades == tr[1][w]);
        CHECK_EQ(rows[i].oos_rank, rank);
    }
    /* the reference gives the same rows */
    tf_oos_row ref[3];
    o.reference = 1;
    CHECK_EQ(tf_oos_run_with(sma, close, N, dp, M, &o, ref, 3, msg, sizeof msg, NULL), 3);
    CHECK(memcmp(ref, rows, sizeof rows) == 0);

    /* hma through tf_oos_run_with is tf_oos_run */
    const tf_strategy_def *hma = tf_strategy_builtin("hma");
    int64_t ip[6 * M];
    double hp[6 * M];
    for (int j = 0; j < M; j++)
        tf_combo_from_length(5 + 4 * j, ip + 6 * j);
    for (int j = 0; j < 6 * M; j++)
        hp[j] = (double)ip[j];
    o = (tf_oos_opts){.size = sizeof o, .split = 0.6, .metric = "sharpe_per_trade"};
    CHECK_EQ(tf_oos_run(close, N, ip, M, &o, ref, 3, msg, sizeof msg, &so), 1);
    CHECK_EQ(tf_oos_run_with(hma, close, N, hp, M, &o, rows, 3, msg, sizeof msg, &so), 1);
    CHECK(memcmp(ref, rows, sizeof rows[0]) == 0);

    /* a combo init refuses: named, before any sweep */
    dp[2 * 5 + 1] = dp[2 * 5];
    CHECK_RC(tf_oos_run_with(sma, close, N, dp, M, &o, rows, 3, msg, sizeof msg, NULL),
             TF_E_STRATEGY);
    CHECK(strstr(msg, "combo") != NULL);
    CHECK_RC(tf_oos_run_with(NULL, close, N, dp, M, &o, rows, 3, msg, sizeof msg, NULL),
             TF_E_NULL_ARG);
}

static void test_oos_run(void)
{
    enum { N = 3000, M = 40 };
    static double close[N];
    static int64_t params[6 * M];
    tf_test_random_walk(close, N, 0.004, &rng);
    for (int j = 0; j < M; j++)
        tf_combo_from_length(4 + 3 * j, params + 6 * j);
    const char *metrics[] = {"pnl", "-max_dd", "sharpe_per_trade"};
    const int cols[] = {TF_COLUMN_PNL, 15, 19}, signs[] = {1, -1, 1};
    tf_oos_row rows[4];
    char msg[256];
    for (int k = 0; k < 3; k++) {
        tf_oos_opts o = {.size = sizeof o, .walk_forward = 3, .metric = metrics[k]};
        tf_sweep_opts so = {.size = sizeof so, .threads = 2};
        CHECK_EQ(tf_oos_run(close, N, params, M, &o, rows, 4, msg, sizeof msg, &so), 3);
        tf_fold f[3];
        tf_folds(N, &o, f, 3, NULL, 0);
        for (int i = 0; i < 3; i++) {
            CHECK(memcmp(&rows[i].fold, &f[i], sizeof f[i]) == 0);
            check_fold(close, params, M, &f[i], cols[k], signs[k], &rows[i]);
        }
        o = (tf_oos_opts){.split = 0.6, .metric = metrics[k], .reference = 1};
        CHECK_EQ(tf_oos_run(close, N, params, M, &o, rows, 1, msg, sizeof msg, NULL), 1);
        tf_fold one = {0, 1800, 1800, N};
        check_fold(close, params, M, &one, cols[k], signs[k], &rows[0]);
    }
    /* NaN everywhere out of sample (no trades on 30 bars with long windows): the winner's rank
     * is 1 + the numbers (none), the best NaN. */
    int64_t longp[12];
    tf_combo_from_length(60, longp);
    tf_combo_from_length(80, longp + 6);
    tf_oos_opts o = {.split = 0.99, .metric = "avg_trade"};
    CHECK_EQ(tf_oos_run(close, N, longp, 2, &o, rows, 1, msg, sizeof msg, NULL), 1);
    CHECK(isnan(rows[0].oos_value) && isnan(rows[0].oos_best_value) && rows[0].oos_rank == 1);

    /* errors */
    tf_stats st[M];
    tf_sweep_opts with_stats = {.stats = st};
    o = (tf_oos_opts){.split = 0.5};
    CHECK_RC(tf_oos_run(close, N, params, M, &o, rows, 1, msg, sizeof msg, &with_stats),
             TF_E_INVALID_ARG);
    CHECK(strstr(msg, "stats must be NULL") != NULL);
    CHECK_RC(tf_oos_run(close, N, params, 0, &o, rows, 1, msg, sizeof msg, NULL), TF_E_INVALID_ARG);
    CHECK_RC(tf_oos_run(close, N, params, M, &o, rows, 0, msg, sizeof msg, NULL), TF_E_INVALID_ARG);
    CHECK_RC(tf_oos_run(close, N, params, M, &o, NULL, 1, msg, sizeof msg, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_oos_run(NULL, N, params, M, &o, rows, 1, msg, sizeof msg, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_oos_run(close, -1, params, M, &o, rows, 1, msg, sizeof msg, NULL),
             TF_E_INVALID_ARG);
    CHECK_RC(tf_oos_run(close, 1, params, M, &o, rows, 1, msg, sizeof msg, NULL), TF_E_BAD_INPUT);
    tf_sweep_opts badfee = {.fee = &(double){NAN}};
    CHECK_RC(tf_oos_run(close, N, params, M, &o, rows, 1, msg, sizeof msg, &badfee),
             TF_E_INVALID_ARG);
    CHECK(!strncmp(msg, "fold 1: ", 8));
    tf_progress stop = {.cancel = 1};
    tf_sweep_opts cancelled = {.threads = 1, .progress = &stop};
    CHECK_RC(tf_oos_run(close, N, params, M, &o, rows, 1, msg, sizeof msg, &cancelled),
             TF_E_CANCELLED);

    /* the verdict */
    tf_oos_row r[2] = {{.oos_rank = 3, .oos_pnl = 1.5}, {.oos_rank = 6, .oos_pnl = 2.0}};
    CHECK_RC(tf_oos_verdict(r, 2, 40, msg, sizeof msg), 0);
    CHECK(!strcmp(msg, "the in-sample winner's mean out-of-sample rank is 4.5 of 40 (holds up: "
                       "top quarter; random choice: 20.5), its oos pnl summed over folds 3.5"));
    CHECK_RC(tf_oos_verdict(r, 2, 10, msg, sizeof msg), 0);
    CHECK(strstr(msg, "(weak: top half;") != NULL);
    CHECK_RC(tf_oos_verdict(r, 2, 8, msg, sizeof msg), 0);
    CHECK(strstr(msg, "(does not hold up: bottom half;") != NULL);
    CHECK_RC(tf_oos_verdict(r, 0, 8, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK_RC(tf_oos_verdict(r, 1, 0, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK_RC(tf_oos_verdict(NULL, 1, 8, msg, sizeof msg), TF_E_NULL_ARG);
}

int main(void)
{
    test_derived();
    test_columns();
    test_named_columns();
    test_rank();
    test_fee();
    test_grid_check();
    test_folds();
    test_oos_run();
    test_oos_run_with();
    return tf_test_report();
}

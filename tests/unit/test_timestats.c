/* include/tollfree/research.h, the time-aware figures (docs/definition.md section 10) and the
 * fold winner's min_trades: a hand-checked case, the combos path against the positions path
 * (positions from the streaming handle here), thread counts, invariants against the kernel's
 * statistics (the closed-trade drawdown is among the MTM marks, exposure), and every refusal. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tollfree/error.h"
#include "tollfree/kernel.h"
#include "tollfree/research.h"
#include "tollfree/strategy.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static int same(const tf_time_stats *a, const tf_time_stats *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

static void test_hand(void)
{
    const double c[5] = {100.0, 100.0, 110.0, 121.0, 121.0};
    const int8_t pos[5] = {0, 1, 1, 0, 0};
    double fee = 0.0;
    tf_time_opts o = {.size = sizeof o, .fee = &fee, .periods_per_year = 4.0};
    tf_time_stats s;
    CHECK_RC(tf_time_stats_positions(c, 5, pos, &o, &s, NULL, 0), 0);
    CHECK(fabs(s.equity - 21.0) < 1e-12 && fabs(s.compounded - 21.0) < 1e-12);
    CHECK(fabs(s.cagr - 21.0) < 1e-9); /* 4 changes at 4 a year: one year */
    CHECK(s.mean_bars == 2.0 && s.max_bars == 2.0 && s.exposure_pct == 40.0);
    CHECK(s.mtm_max_dd == 0.0 && isnan(s.calmar) && isnan(s.sortino));
    CHECK(isnan(s.mean_days) && isnan(s.max_days) && s.periods_per_year == 4.0);
    CHECK(fabs(s.buy_hold - 21.0) < 1e-12);
    /* a short that loses 10 then gains back to flat: drawdown 10 from the start */
    const double d[4] = {100.0, 100.0, 110.0, 100.0};
    const int8_t sh[4] = {0, -1, -1, -1};
    CHECK_RC(tf_time_stats_positions(d, 4, sh, &o, &s, NULL, 0), 0);
    CHECK(fabs(s.mtm_max_dd - 10.0) < 1e-12 && fabs(s.equity) < 1e-12);
    CHECK(isnan(s.mean_bars) && s.max_bars == 0.0); /* no closed trade */
    /* no bar, one bar: defined NaNs, no crash */
    CHECK_RC(tf_time_stats_positions(d, 0, sh, &o, &s, NULL, 0), 0);
    CHECK(isnan(s.cagr) && isnan(s.buy_hold) && isnan(s.exposure_pct));
    CHECK_RC(tf_time_stats_positions(d, 1, sh, NULL, &s, NULL, 0), 0);
    CHECK(isnan(s.cagr) && isnan(s.sharpe) && s.buy_hold == 0.0);
}

static void test_dates(void)
{
    enum { N = 253 };
    double c[N];
    int64_t t[N];
    int8_t pos[N];
    for (int i = 0; i < N; i++) {
        c[i] = 100.0 + i * 0.1;
        t[i] = 1577836800000000000ll + (int64_t)i * (int64_t)(365.25 * 86400e9 / (N - 1));
        pos[i] = i < 10 ? 0 : i < 100 ? 1 : -1;
    }
    tf_time_opts o = {.size = sizeof o, .times = t};
    tf_time_stats s;
    double ppy;
    CHECK_RC(tf_time_stats_positions(c, N, pos, &o, &s, NULL, 0), 0);
    CHECK(fabs(s.periods_per_year - 252.0) < 1e-6);
    CHECK_RC(tf_time_periods(t, N, &o, &ppy, NULL, 0), 0);
    CHECK(tf_test_same_bits(ppy, s.periods_per_year));
    CHECK(fabs(s.mean_days - 90.0 * 365.25 / (N - 1)) < 1e-9 && s.max_days == s.mean_days);
    CHECK(s.max_bars == 90.0);
    /* times that span nothing: NaN periods, NaN annualised figures */
    for (int i = 0; i < N; i++)
        t[i] = 0;
    CHECK_RC(tf_time_stats_positions(c, N, pos, &o, &s, NULL, 0), 0);
    CHECK(isnan(s.periods_per_year) && isnan(s.cagr) && isnan(s.sharpe));
}

/* The HMA combos path equals, bit for bit, the positions path fed the streaming handle's
 * positions, for 1 and 3 threads; the invariants against the kernel's statistics hold. */
static void test_combos(void)
{
    enum { N = 3000, M = 5 };
    double *c = malloc(sizeof(double) * N);
    int8_t *pos = malloc(N);
    double x = 100.0;
    for (int i = 0; i < N; i++) {
        x *= 1.0 + 0.02 * (tf_test_uniform(&rng) - 0.5);
        c[i] = x;
    }
    int64_t params[M][6];
    const int64_t Ls[M] = {6, 20, 55, 130, 2900};
    for (int j = 0; j < M; j++)
        CHECK_RC(tf_combo_from_length(Ls[j], params[j]), 0);
    double fee = 0.05;
    tf_time_opts o1 = {.size = sizeof o1, .fee = &fee, .threads = 1};
    tf_time_opts o3 = o1;
    o3.threads = 3;
    tf_time_stats a[M], b[M];
    CHECK_RC(tf_time_stats_hma(c, N, &params[0][0], M, &o1, a, NULL, 0), 0);
    CHECK_RC(tf_time_stats_hma(c, N, &params[0][0], M, &o3, b, NULL, 0), 0);
    CHECK(memcmp(a, b, sizeof a) == 0);
    double pnl[M];
    int64_t trades[M];
    tf_stats st[M];
    tf_sweep_opts so = {.size = sizeof so, .fee = &fee, .stats = st, .threads = 1};
    CHECK_RC(tf_sweep(c, N, &params[0][0], M, pnl, trades, &so), 0);
    for (int j = 0; j < M; j++) {
        tf_strategy *s;
        CHECK_RC(tf_strategy_open(&s, params[j]), 0);
        CHECK_RC(tf_strategy_set_fee(s, fee), 0);
        for (int i = 0; i < N; i++)
            pos[i] = (int8_t)tf_strategy_step(s, c[i]);
        tf_strategy_close(s);
        tf_time_stats p;
        CHECK_RC(tf_time_stats_positions(c, N, pos, &o1, &p, NULL, 0), 0);
        CHECK(same(&p, &a[j]));
        /* the closed equity after each trade is pnl's running sum: one of the marks */
        CHECK(a[j].mtm_max_dd >= st[j].max_dd);
        CHECK(tf_test_same_bits(a[j].exposure_pct, (double)st[j].exposure_bars / N * 100.0));
        if (trades[j] == 0) /* a position may be open: its mark is the equity */
            CHECK(isnan(a[j].mean_bars) && a[j].compounded == 0.0 &&
                  (st[j].exposure_bars > 0 || a[j].equity == 0.0));
    }
    CHECK(trades[M - 1] == 0); /* L = 2900 opens at most once on 3000 bars */
    free(c);
    free(pos);
}

static void test_refusals(void)
{
    const double c[3] = {1.0, 2.0, 3.0};
    const int8_t bad[3] = {0, 2, 0};
    tf_time_stats s;
    char msg[256] = "";
    CHECK_RC(tf_time_stats_positions(c, 3, bad, NULL, &s, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK(strstr(msg, "position 2 at bar 1") != NULL);
    tf_time_opts o = {.size = sizeof o, .periods_per_year = -5.0};
    const int8_t ok[3] = {0, 1, 1};
    CHECK_RC(tf_time_stats_positions(c, 3, ok, &o, &s, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK(strstr(msg, "periods per year") != NULL);
    o.periods_per_year = INFINITY;
    CHECK_RC(tf_time_stats_positions(c, 3, ok, &o, &s, msg, sizeof msg), TF_E_INVALID_ARG);
    o = (tf_time_opts){.size = 3};
    CHECK_RC(tf_time_stats_positions(c, 3, ok, &o, &s, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK_RC(tf_time_stats_positions(c, -1, ok, NULL, &s, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK_RC(tf_time_stats_positions(NULL, 3, ok, NULL, &s, msg, sizeof msg), TF_E_NULL_ARG);
    int64_t p[6] = {0, 1, 1, 1, 1, 1};
    CHECK(tf_time_stats_hma(c, 3, p, 1, NULL, &s, msg, sizeof msg) == TF_E_WINDOW_TOO_SHORT);
    CHECK_RC(tf_time_stats_with(NULL, c, 3, NULL, 0, NULL, &s, msg, sizeof msg), TF_E_NULL_ARG);
    CHECK(!strcmp(tf_time_figure_name(0), "equity") &&
          tf_time_figure_name(TF_TIME_FIGURES) == NULL);
    CHECK(isnan(tf_time_figure(&s, -1)));
}

/* tf_oos_opts.min_trades: winners have enough in-sample trades; none eligible: winner -1. */
static void test_min_trades(void)
{
    enum { N = 4000, M = 6 };
    double *c = malloc(sizeof(double) * N);
    double x = 100.0;
    for (int i = 0; i < N; i++) {
        x *= 1.0 + 0.01 * (tf_test_uniform(&rng) - 0.5);
        c[i] = x;
    }
    int64_t params[M][6];
    const int64_t Ls[M] = {6, 12, 30, 60, 120, 240};
    for (int j = 0; j < M; j++)
        CHECK_RC(tf_combo_from_length(Ls[j], params[j]), 0);
    tf_oos_row rows[4];
    char msg[512];
    tf_oos_opts o = {.size = sizeof o, .walk_forward = 3, .min_trades = 1000000};
    tf_sweep_opts so = {.size = sizeof so, .threads = 1};
    CHECK_RC(tf_oos_run(c, N, &params[0][0], M, &o, rows, 4, msg, sizeof msg, &so), 3);
    for (int k = 0; k < 3; k++)
        CHECK(rows[k].winner == -1 && isnan(rows[k].is_value) && rows[k].oos_rank == 0);
    CHECK_RC(tf_oos_verdict(rows, 3, M, msg, sizeof msg), 0);
    CHECK(strstr(msg, "no fold had an eligible combo") != NULL);
    o.min_trades = 20;
    CHECK_RC(tf_oos_run(c, N, &params[0][0], M, &o, rows, 4, msg, sizeof msg, &so), 3);
    for (int k = 0; k < 3; k++)
        CHECK(rows[k].winner < 0 || rows[k].is_trades >= 20);
    o.min_trades = -1;
    CHECK_RC(tf_oos_run(c, N, &params[0][0], M, &o, rows, 4, msg, sizeof msg, &so),
             TF_E_INVALID_ARG);
    CHECK(strstr(msg, "min_trades") != NULL);
    free(c);
}

int main(void)
{
    test_hand();
    test_dates();
    test_combos();
    test_refusals();
    test_min_trades();
    return tf_test_report();
}

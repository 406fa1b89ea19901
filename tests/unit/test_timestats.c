/* include/tollfree/research.h, the time-aware figures (docs/definition.md section 10) and the
 * fold winner's min_trades: a hand-checked case, the combos path against the positions path
 * (positions from the streaming handle here), thread counts, invariants against the kernel's
 * statistics (the closed-trade drawdown is among the MTM marks, exposure), and every refusal. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
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

/* The definition's MTM drawdown written out bar by bar (docs/definition.md section 10: each
 * bar's mark of an open trade, then the exit bar's closed equity), independent of the library's
 * shortcut (src/kernel/timeacc.h proves most trades' marks change nothing without visiting
 * them): pos[n] -1..1. */
static double model_mtm_dd(const double *c, int64_t n, const int8_t *pos, double fee)
{
    double *p1 = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    p1[0] = 0.0;
    for (int64_t t = 1; t < n; t++)
        p1[t] = p1[t - 1] + (c[t] - c[t - 1]);
    double eq = 0.0, peak = 0.0, mdd = 0.0;
    int cur = 0;
    int64_t e = -1;
    for (int64_t t = 0; t < n; t++) {
        double mk = NAN;
        int have = 0;
        if (pos[t] != cur) {
            if (cur != 0) {
                double r = (double)cur * (c[t] - c[e]) / c[e] * 100.0 - fee;
                eq = eq + r;
                mk = eq;
                have = 1;
            }
            e = t;
            cur = pos[t];
        } else if (cur != 0) {
            mk = eq + 100.0 / c[e] * ((double)cur * (p1[t] - p1[e]));
            have = 1;
        }
        if (have) {
            if (mk > peak)
                peak = mk;
            if (peak - mk > mdd)
                mdd = peak - mk;
        }
    }
    free(p1);
    return mdd;
}

/* Random positions (runs of 1 to `hold` bars, flat sometimes) over closes with the hostile
 * values the definition covers: the library's MTM drawdown equals the bar-by-bar model's bits,
 * through every branch of the shortcut (no new peak, new peak inside the drawdown, the bars
 * marked one by one, the words' bounds proving a trade changes nothing, trades over one word,
 * two or many, words reaching a non-finite value). */
static void test_marks_model(void)
{
    enum { N = 4000 };
    double *c = malloc(sizeof(double) * N);
    int8_t *pos = malloc(N);
    tf_time_stats s;
    double fee = 0.05;
    tf_time_opts o = {.size = sizeof o, .fee = &fee};
    int ok = 1;
    { /* a new peak inside a trade, then a drop (2.3) above the drawdown so far (2) but inside
       * the trade's swing: the marks of that trade must be visited */
        const double hc[7] = {100.0, 98.0, 100.0, 100.0, 102.3, 100.0, 100.5};
        const int8_t hp[7] = {1, 1, 0, 1, 1, 1, 0};
        double z = 0.0;
        tf_time_opts zo = {.size = sizeof zo, .fee = &z};
        CHECK_RC(tf_time_stats_positions(hc, 7, hp, &zo, &s, NULL, 0), 0);
        CHECK(fabs(s.mtm_max_dd - 2.3) < 1e-9);
        CHECK(tf_test_same_bits(s.mtm_max_dd, model_mtm_dd(hc, 7, hp, 0.0)));
    }
    { /* a long trade entered at a zero close (k = inf) that is the highest close of its word
       * (closes in quarters: every p1 exact): the words' bound at the entry's own p1 makes
       * inf * 0, a NaN bound, which must not pass the test that the trade's marks (-inf here:
       * a drawdown of inf) change nothing; its exit at zero books NaN, so only the marks can
       * give the drawdown */
        double hc[64];
        int8_t hp[64];
        for (int i = 0; i < 64; i++) {
            hc[i] = -1.0 - 0.25 * i;
            hp[i] = (int8_t)(i >= 3 && i < 10);
        }
        hc[3] = hc[10] = 0.0;
        double z = 0.0;
        tf_time_opts zo = {.size = sizeof zo, .fee = &z};
        CHECK_RC(tf_time_stats_positions(hc, 64, hp, &zo, &s, NULL, 0), 0);
        CHECK(tf_test_same_bits(s.mtm_max_dd, model_mtm_dd(hc, 64, hp, 0.0)));
    }
    for (int round = 0; round < 90; round++) {
        int trend = round % 3 == 0; /* rising closes, mostly long: new peaks, small drawdowns */
        tf_test_random_walk(c, N, 0.01 + 0.01 * (round % 4), &rng);
        if (trend)
            for (int i = 1; i < N; i++)
                c[i] = c[i - 1] * (1.0 + 0.0004 + 0.004 * (tf_test_uniform(&rng) - 0.5));
        if (round % 6 == 1)
            c[N / 2 + round] = NAN;
        if (round % 6 == 2)
            c[N - 300 + round] = INFINITY;
        if (round % 6 == 3)
            c[1000] = 0.0; /* k = inf for a trade entered there */
        if (round % 6 == 4)
            for (int i = 2000; i < N; i++)
                c[i] = -c[i]; /* negative closes: k < 0, the marks' order reversed */
        /* up to 161 bars (one, two or three words), or 1500 (trades over many words: the words'
         * bounds, the exact scan and the bar-by-bar marks over long runs) */
        int64_t hold = round % 10 == 9 ? 1500 : 1 + (round % 5) * 40;
        int cur = 0;
        for (int i = 0; i < N;) {
            int64_t len = 1 + (int64_t)(tf_test_uniform(&rng) * (double)hold);
            double u = tf_test_uniform(&rng);
            cur = u < 0.1 ? 0 : u < (trend ? 0.95 : 0.55) ? 1 : -1;
            for (int64_t k = 0; k < len && i < N; k++)
                pos[i++] = (int8_t)cur;
        }
        if (round % 6 == 3) /* a trade surely entered at the zero close: marks of +-inf, then a
                               peak or a drawdown of inf (the words' bounds test without
                               finiteness checks must still prove only what holds) */
            pos[1000] = pos[999] == 1 ? -1 : 1;
        CHECK_RC(tf_time_stats_positions(c, N, pos, &o, &s, NULL, 0), 0);
        double want = model_mtm_dd(c, N, pos, fee);
        union {
            uint64_t u;
            double d;
        } canon = {0xfff8000000000000ull};
        if (want != want)
            want = canon.d;
        if (!tf_test_same_bits(s.mtm_max_dd, want)) {
            ok = 0;
            fprintf(stderr, "round %d: mtm_max_dd %.17g, the bar-by-bar model %.17g\n", round,
                    s.mtm_max_dd, want);
        }
    }
    CHECK(ok);
    free(c);
    free(pos);
}

/* tf_sweep_time on every ISA this CPU has and 1, 2 and 3 threads: the sweep's outputs are
 * tf_sweep's bits, and each combo's figures the positions path's bits given the streaming
 * handle's positions (dates given, duplicated combos in the grid, a combo still open at the
 * end, one that never trades); tf_time_stats_hma gives the same. */
static void test_sweep_time_paths(void)
{
    enum { N = 6000, M = 7 };
    double *c = malloc(sizeof(double) * N);
    int64_t *t = malloc(sizeof(int64_t) * N);
    int8_t *pos = malloc(N);
    tf_test_random_walk(c, N, 0.02, &rng);
    for (int i = 0; i < N; i++)
        t[i] = 1577836800000000000ll + (int64_t)i * 3600000000000ll +
               (int64_t)(tf_test_uniform(&rng) * 1e9);
    int64_t params[M][6];
    const int64_t Ls[M] = {6, 20, 6, 55, 130, 700, 4000};
    for (int j = 0; j < M; j++)
        CHECK_RC(tf_combo_from_length(Ls[j], params[j]), 0);
    double fee = 0.07;
    tf_time_opts to = {.size = sizeof to, .times = t, .fee = &fee};
    tf_time_stats want[M];
    for (int j = 0; j < M; j++) {
        tf_strategy *s;
        CHECK_RC(tf_strategy_open(&s, params[j]), 0);
        CHECK_RC(tf_strategy_set_fee(s, fee), 0);
        for (int i = 0; i < N; i++)
            pos[i] = (int8_t)tf_strategy_step(s, c[i]);
        tf_strategy_close(s);
        CHECK_RC(tf_time_stats_positions(c, N, pos, &to, &want[j], NULL, 0), 0);
    }
    CHECK(same(&want[0], &want[2]));
    double pnl0[M], pnl[M];
    int64_t tr0[M], tr[M];
    tf_stats st0[M], st[M];
    tf_sweep_opts so = {.size = sizeof so, .threads = 1, .fee = &fee, .stats = st0};
    CHECK_RC(tf_sweep(c, N, &params[0][0], M, pnl0, tr0, &so), 0);
    CHECK(tr0[M - 1] <= 3 && st0[M - 1].exposure_bars > 0); /* HMA is never flat once in: open */
    int paths = 0, ok = 1;
    for (int isa = TF_ISA_SCALAR; isa <= TF_ISA_AVX512; isa++) {
        if (!tf_isa_supported((tf_isa)isa))
            continue;
        for (int threads = 1; threads <= 3; threads++) {
            tf_time_stats got[M];
            tf_sweep_opts o = {
                .size = sizeof o, .threads = threads, .isa = (tf_isa)isa, .fee = &fee, .stats = st};
            CHECK_RC(tf_sweep_time(c, N, &params[0][0], M, pnl, tr, &o, &to, got, NULL, 0), 0);
            int same_sweep = !memcmp(pnl, pnl0, sizeof pnl) && !memcmp(tr, tr0, sizeof tr) &&
                             !memcmp(st, st0, sizeof st);
            int same_fig = !memcmp(got, want, sizeof got);
            if (!same_sweep || !same_fig) {
                ok = 0;
                fprintf(stderr, "tf_sweep_time %s, %d threads: sweep %s, figures %s\n",
                        tf_isa_name((tf_isa)isa), threads, same_sweep ? "same" : "DIFFER",
                        same_fig ? "same" : "DIFFER");
            }
            paths++;
        }
    }
    CHECK(ok && paths >= 3);
    /* without stats: the figures alone; the HMA combos function */
    tf_time_stats got[M];
    tf_sweep_opts o = {.size = sizeof o, .threads = 2, .fee = &fee};
    CHECK_RC(tf_sweep_time(c, N, &params[0][0], M, pnl, tr, &o, &to, got, NULL, 0), 0);
    CHECK(!memcmp(got, want, sizeof got) && !memcmp(pnl, pnl0, sizeof pnl));
    tf_time_opts to2 = to;
    to2.threads = 2;
    CHECK_RC(tf_time_stats_hma(c, N, &params[0][0], M, &to2, got, NULL, 0), 0);
    CHECK(!memcmp(got, want, sizeof got));
    /* zero bars: the figures of no bar */
    CHECK_RC(tf_sweep_time(c, 0, &params[0][0], 1, pnl, tr, &o, NULL, got, NULL, 0), 0);
    CHECK(isnan(got[0].cagr) && isnan(got[0].buy_hold) && got[0].compounded == 0.0);
    free(c);
    free(t);
    free(pos);
}

/* ---- tf_sweep_with_time: the figures inside every strategy's sweep ---- */

static const tf_strategy_def *loop_base; /* whose step the steps and changes below loop over */

static int loop_steps(void *state, const double *close, int64_t n, int32_t *targets)
{
    for (int64_t i = 0; i < n; i++)
        targets[i] = loop_base->step(state, close[i]);
    return 0;
}

static int loop_changes(void *states, size_t stride, const double *close, int64_t n, int32_t *pos,
                        int32_t *bars, int32_t *targets, int64_t *counts)
{
    for (uint32_t l = 0; l < 3; l++) {
        void *st = (char *)states + l * stride;
        int32_t p = pos[l];
        int64_t k = 0;
        for (int64_t i = 0; i < n; i++) {
            int t = loop_base->step(st, close[i]);
            if (t != TF_HOLD && t != p) {
                bars[l * n + k] = (int32_t)i;
                targets[l * n + k] = t;
                p = t;
                k++;
            }
        }
        counts[l] = k;
        pos[l] = p;
    }
    return 0;
}

/* Combo j of built-in b (its parameters in a row of 6). */
static void builtin_combo(int b, int j, double *p)
{
    switch (b) {
    case 0: /* sma_cross, ema_cross: fast, slow */
    case 1:
        p[0] = 2 + j % 5;
        p[1] = 9 + 4 * j;
        break;
    case 2: /* donchian: w */
        p[0] = 3 + 7 * j;
        break;
    case 3: /* rsi: period, lower, upper */
        p[0] = 4 + j;
        p[1] = 25 + j;
        p[2] = 70;
        break;
    case 4: /* bollinger: w, k */
        p[0] = 8 + 3 * j;
        p[1] = 1.0 + 0.25 * (j % 4);
        break;
    default: { /* hma: the six windows */
        int64_t w[6];
        tf_combo_from_length(6 + 9 * j, w);
        for (int k = 0; k < 6; k++)
            p[k] = (double)w[k];
    }
    }
}

/* tf_sweep_with_time on every built-in (its fast sweep; "hma" the kernel's), and on copies that
 * take the generic paths (step by step, a steps member, a changes member of 3 lanes), on 1, 2
 * and 3 threads, with dates, a duplicated combo and a NaN close: the sweep's outputs are
 * tf_sweep_with's bits, and the figures those of the second pass over streaming handles
 * (tf_time_stats_with). */
static void test_sweep_with_time(void)
{
    static const char *const names[] = {"sma_cross", "ema_cross", "donchian",
                                        "rsi",       "bollinger", "hma"};
    enum { N = 5000, M = 9 };
    double *c = malloc(sizeof(double) * N);
    int64_t *t = malloc(sizeof(int64_t) * N);
    tf_test_random_walk(c, N, 0.02, &rng);
    c[N / 3] = NAN;
    for (int i = 0; i < N; i++)
        t[i] = 1577836800000000000ll + (int64_t)i * 86400000000000ll;
    double fee = 0.06;
    tf_time_opts to = {.size = sizeof to, .times = t, .fee = &fee, .threads = 2};
    int ok = 1, runs = 0;
    for (int b = 0; b < 6; b++) {
        const tf_strategy_def *def = tf_strategy_builtin(names[b]);
        CHECK(def != NULL);
        if (!def)
            continue;
        uint32_t k = def->n_params;
        double grid[M * 6];
        for (int j = 0; j < M; j++)
            builtin_combo(b, j == M - 1 ? 0 : j, grid + j * k); /* the last repeats the first */
        tf_time_stats want[M];
        CHECK_RC(tf_time_stats_with(def, c, N, grid, M, &to, want, NULL, 0), 0);
        double pnl0[M], pnl[M];
        int64_t tr0[M], tr[M];
        tf_stats st0[M], st[M];
        tf_sweep_opts so = {.size = sizeof so, .threads = 1, .fee = &fee, .stats = st0};
        CHECK_RC(tf_sweep_with(def, c, N, grid, M, pnl0, tr0, &so), 0);
        loop_base = def;
        for (int v = 0; v < (b == 5 ? 1 : 4); v++) {
            tf_strategy_def d = *def; /* a copy: the generic paths, not the built-in's fast one */
            if (v == 2)
                d.steps = loop_steps;
            if (v == 3) {
                d.changes = loop_changes;
                d.lanes = 3;
            }
            const tf_strategy_def *use = v == 0 ? def : &d;
            for (int threads = 1; threads <= 3; threads++) {
                tf_time_stats got[M];
                tf_sweep_opts o = {.size = sizeof o, .threads = threads, .fee = &fee, .stats = st};
                memset(got, 0xab, sizeof got);
                CHECK_RC(tf_sweep_with_time(use, c, N, grid, M, pnl, tr, &o, &to, got, NULL, 0), 0);
                int same_sweep = !memcmp(pnl, pnl0, sizeof pnl) && !memcmp(tr, tr0, sizeof tr) &&
                                 !memcmp(st, st0, sizeof st);
                int same_fig = !memcmp(got, want, sizeof got);
                if (!same_sweep || !same_fig) {
                    ok = 0;
                    fprintf(stderr,
                            "tf_sweep_with_time %s path %d, %d threads: sweep %s, "
                            "figures %s\n",
                            names[b], v, threads, same_sweep ? "same" : "DIFFER",
                            same_fig ? "same" : "DIFFER");
                }
                runs++;
            }
        }
        /* trades happened, and the figures are not all trivial */
        CHECK(tr0[0] > 0 && want[0].exposure_pct > 0.0);
    }
    CHECK(ok && runs == 5 * 12 + 3);
    /* refusals: no def, a def that breaks the contract, a max_bytes the figures exceed */
    const tf_strategy_def *sma = tf_strategy_builtin("sma_cross");
    double g[2] = {3, 10}, pnl[1];
    int64_t tr[1];
    tf_time_stats got[1];
    char msg[200] = "";
    CHECK_RC(tf_sweep_with_time(NULL, c, N, g, 1, pnl, tr, NULL, &to, got, msg, sizeof msg),
             TF_E_NULL_ARG);
    tf_strategy_def bad = *sma;
    bad.n_params = 0;
    CHECK(tf_sweep_with_time(&bad, c, N, g, 1, pnl, tr, NULL, &to, got, msg, sizeof msg) < 0);
    tf_sweep_opts small = {.size = sizeof small, .max_bytes = 1000};
    CHECK_RC(tf_sweep_with_time(sma, c, N, g, 1, pnl, tr, &small, &to, got, msg, sizeof msg),
             TF_E_LIMIT);
    CHECK(strstr(msg, "max_bytes") != NULL);
    free(c);
    free(t);
}

/* tf_sweep_time's refusals: a max_bytes the figures' sums alone exceed (the message names the
 * budget), one the sweep exceeds, bad time options, NULL outputs, bad sweep options. */
static void test_sweep_time_refusals(void)
{
    enum { N = 1000 };
    double c[N];
    tf_test_random_walk(c, N, 0.01, &rng);
    int64_t p[6];
    CHECK_RC(tf_combo_from_length(20, p), 0);
    double pnl;
    int64_t tr;
    tf_time_stats ts;
    char msg[256] = "";
    tf_sweep_opts o = {.size = sizeof o, .threads = 1, .max_bytes = 1000};
    CHECK_RC(tf_sweep_time(c, N, p, 1, &pnl, &tr, &o, NULL, &ts, msg, sizeof msg), TF_E_LIMIT);
    CHECK(strstr(msg, "max_bytes 1000") != NULL);
    o.max_bytes = 40000; /* the sums fit (32,000 bytes), the sweep's working memory does not */
    CHECK_RC(tf_sweep_time(c, N, p, 1, &pnl, &tr, &o, NULL, &ts, msg, sizeof msg), TF_E_LIMIT);
    o.max_bytes = 0;
    tf_time_opts bad = {.size = sizeof bad, .periods_per_year = -1.0};
    CHECK_RC(tf_sweep_time(c, N, p, 1, &pnl, &tr, &o, &bad, &ts, msg, sizeof msg),
             TF_E_INVALID_ARG);
    CHECK(strstr(msg, "periods per year") != NULL);
    CHECK_RC(tf_sweep_time(c, N, p, 1, &pnl, &tr, &o, NULL, NULL, msg, sizeof msg), TF_E_NULL_ARG);
    CHECK_RC(tf_sweep_time(c, N, p, -1, &pnl, &tr, &o, NULL, &ts, msg, sizeof msg),
             TF_E_INVALID_ARG);
    double inf = INFINITY;
    tf_sweep_opts badfee = {.size = sizeof badfee, .fee = &inf};
    CHECK_RC(tf_sweep_time(c, N, p, 1, &pnl, &tr, &badfee, NULL, &ts, msg, sizeof msg),
             TF_E_INVALID_ARG);
    /* a time-aware figure ranks a plain sweep, not a fold's winner */
    tf_oos_opts oo = {.size = sizeof oo, .walk_forward = 3, .metric = "cagr"};
    tf_oos_row rows[4];
    tf_sweep_opts so1 = {.size = sizeof so1, .threads = 1};
    CHECK_RC(tf_oos_run(c, N, p, 1, &oo, rows, 4, msg, sizeof msg, &so1), TF_E_INVALID_ARG);
    CHECK(strstr(msg, "time-aware") != NULL);
    /* the warm-up run within max_bytes: a budget too small is refused, naming it; a budget
     * that holds it runs (the same rows as without a budget) */
    tf_oos_opts wo = {.size = sizeof wo, .walk_forward = 3, .warmup = 100};
    tf_oos_row wrows[2][4];
    tf_sweep_opts wso = {.size = sizeof wso, .threads = 1, .max_bytes = 2000};
    CHECK_RC(tf_oos_run(c, N, p, 1, &wo, wrows[0], 4, msg, sizeof msg, &wso), TF_E_LIMIT);
    CHECK(strstr(msg, "warm-up") != NULL && strstr(msg, "max_bytes 2000") != NULL);
    wso.max_bytes = 1 << 20;
    CHECK_RC(tf_oos_run(c, N, p, 1, &wo, wrows[0], 4, msg, sizeof msg, &wso), 3);
    wso.max_bytes = 0;
    CHECK_RC(tf_oos_run(c, N, p, 1, &wo, wrows[1], 4, msg, sizeof msg, &wso), 3);
    CHECK(memcmp(wrows[0], wrows[1], 3 * sizeof wrows[0][0]) == 0); /* the 3 folds written */
    int64_t shortp[6] = {0, 1, 1, 1, 1, 1};
    CHECK_RC(tf_sweep_time(c, N, shortp, 1, &pnl, &tr, &o, NULL, &ts, msg, sizeof msg),
             TF_E_WINDOW_TOO_SHORT);
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
    test_marks_model();
    test_sweep_time_paths();
    test_sweep_time_refusals();
    test_sweep_with_time();
    return tf_test_report();
}

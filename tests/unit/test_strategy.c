/* Strategies (include/tollfree/strategy.h): every built-in on random data with NaN and +-inf
 * gives the same raw bits (pnl, trades, every statistic) through tf_sweep_with at 1, 2 and 4
 * threads, tf_sweep_with_reference and streaming; a hand-worked case per built-in; "hma" through
 * the contract equals tf_sweep and the published fingerprint; plugins load, and every refusal
 * names the file and the reason; identical combos once; cancel; every error return. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "harness.h"
#include "tollfree/error.h"
#include "tollfree/kernel.h"
#include "tollfree/strategy.h"

#define N_DEFAULT 150000

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double unif(void)
{
    return (double)(rnd() >> 11) / 9007199254740992.0;
}

/* A random walk with, when holes is set, NaN and +-inf sprinkled in (and sometimes a run of
 * equal closes, so equal lines give HOLD). */
static void random_close(double *c, int64_t n, int holes)
{
    double x = 100.0;
    for (int64_t i = 0; i < n; i++) {
        x *= 1.0 + (unif() - 0.5) * 0.02;
        c[i] = (i % 97 > 90) ? c[i > 0 ? i - 1 : 0] : x;
        if (i == 0)
            c[i] = x;
    }
    if (!holes)
        return;
    for (int k = 0; k < 4 && n > 0; k++) {
        int64_t at = (int64_t)(unif() * (double)n);
        c[at] = k == 0 ? NAN : k == 1 ? INFINITY : k == 2 ? -INFINITY : NAN;
    }
}

/* ---- the three paths agree ---- */

/* Every path for def over close[n] and params[m][k]; each combo's streaming too. */
static void check_paths(const tf_strategy_def *def, const double *close, int64_t n,
                        const double *params, int64_t m, double fee, const char *what)
{
    size_t k = def->n_params;
    double *pnl_r = malloc(sizeof(double) * (size_t)m), *pnl = malloc(sizeof(double) * (size_t)m);
    int64_t *tr_r = malloc(sizeof(int64_t) * (size_t)m), *tr = malloc(sizeof(int64_t) * (size_t)m);
    tf_stats *st_r = calloc((size_t)m, sizeof(tf_stats)), *st = calloc((size_t)m, sizeof(tf_stats));
    tf_sweep_opts o = {.size = sizeof o, .fee = &fee, .stats = st_r, .threads = 1};
    CHECK_RC(tf_sweep_with_reference(def, close, n, params, m, pnl_r, tr_r, &o), 0);
    static const int threads[] = {1, 2, 4};
    for (int t = 0; t < 3; t++) {
        for (int with_stats = 0; with_stats < 2; with_stats++) {
            memset(pnl, 0xa5, sizeof(double) * (size_t)m);
            memset(st, 0xa5, sizeof(tf_stats) * (size_t)m);
            tf_sweep_opts q = {.size = sizeof q, .fee = &fee, .threads = threads[t]};
            q.stats = with_stats ? st : NULL;
            CHECK_RC(tf_sweep_with(def, close, n, params, m, pnl, tr, &q), 0);
            int ok = memcmp(pnl, pnl_r, sizeof(double) * (size_t)m) == 0 &&
                     memcmp(tr, tr_r, sizeof(int64_t) * (size_t)m) == 0 &&
                     (!with_stats || memcmp(st, st_r, sizeof(tf_stats) * (size_t)m) == 0);
            CHECK(ok);
            if (!ok)
                fprintf(stderr, "  %s: %s, %d threads, stats %d differ from the reference\n", what,
                        def->name, threads[t], with_stats);
        }
    }
    /* Every ISA path this CPU runs (the fast sweeps' bitmasks), with statistics. */
    for (tf_isa isa = TF_ISA_SCALAR; isa <= TF_ISA_AVX512; isa++) {
        if (!tf_isa_supported(isa))
            continue;
        memset(st, 0xa5, sizeof(tf_stats) * (size_t)m);
        tf_sweep_opts q = {.size = sizeof q, .fee = &fee, .threads = 2, .isa = isa, .stats = st};
        CHECK_RC(tf_sweep_with(def, close, n, params, m, pnl, tr, &q), 0);
        int ok = memcmp(pnl, pnl_r, sizeof(double) * (size_t)m) == 0 &&
                 memcmp(st, st_r, sizeof(tf_stats) * (size_t)m) == 0;
        CHECK(ok);
        if (!ok)
            fprintf(stderr, "  %s: %s, ISA %s differs from the reference\n", what, def->name,
                    tf_isa_name(isa));
    }
    for (int64_t j = 0; j < m; j++) {
        tf_strategy *s = NULL;
        CHECK_RC(tf_strategy_open_with(&s, def, params + (size_t)j * k), 0);
        if (!s)
            continue;
        CHECK_RC(tf_strategy_set_fee(s, fee), 0);
        for (int pass = 0; pass < 2; pass++) { /* the second after a reset */
            for (int64_t i = 0; i < n; i++)
                tf_strategy_step(s, close[i]);
            tf_stats one;
            CHECK_RC(tf_strategy_stats(s, &one), 0);
            int ok = memcmp(&one, &st_r[j], sizeof one) == 0 &&
                     memcmp(&pnl_r[j], &one.pnl, sizeof(double)) == 0 &&
                     tf_strategy_trades(s) == tr_r[j] && tf_strategy_bars(s) == n;
            CHECK(ok);
            if (!ok)
                fprintf(stderr,
                        "  %s: %s combo %lld streaming (pass %d) differs: pnl %.17g/%.17g "
                        "trades %lld/%lld exposure %lld/%lld bars %lld\n",
                        what, def->name, (long long)j, pass, one.pnl, pnl_r[j],
                        (long long)one.trades, (long long)tr_r[j], (long long)one.exposure_bars,
                        (long long)st_r[j].exposure_bars, (long long)tf_strategy_bars(s));
            tf_strategy_reset(s);
        }
        tf_strategy_close(s);
    }
    free(pnl_r);
    free(pnl);
    free(tr_r);
    free(tr);
    free(st_r);
    free(st);
}

/* A random grid of m combos for a built-in: valid, with duplicates and some zero-trade combos
 * (windows longer than the series). */
static void random_grid(const char *name, double *p, int64_t m, int64_t n_bars)
{
    for (int64_t j = 0; j < m; j++) {
        double *q = p + j * 3;
        if (j > 0 && j % 7 == 3) { /* a duplicate of an earlier row */
            memcpy(q, p + (int64_t)(unif() * (double)j) * 3, sizeof(double) * 3);
            continue;
        }
        int64_t big = j % 11 == 5 ? n_bars + 3 : 0; /* longer than the series: no trade */
        if (j % 13 == 7)
            big = n_bars / 3; /* a window over several time blocks */
        int64_t a = 1 + (int64_t)(unif() * 30), b = a + 1 + (int64_t)(unif() * 60);
        if (!strcmp(name, "sma_cross") || !strcmp(name, "ema_cross")) {
            q[0] = (double)a;
            q[1] = (double)(b + big);
        } else if (!strcmp(name, "donchian")) {
            q[0] = (double)(a + big);
        } else if (!strcmp(name, "rsi")) {
            q[0] = (double)(a + big);
            q[1] = floor(unif() * 50.0);
            q[2] = q[1] + 1.0 + floor(unif() * (99.0 - q[1]));
        } else if (!strcmp(name, "bollinger")) {
            q[0] = (double)(b + big);
            q[1] = 0.25 + unif() * 2.5;
        }
    }
}

/* Packs rows of 3 down to the def's k parameters. */
static void pack(double *p, int64_t m, uint32_t k)
{
    for (int64_t j = 0; j < m; j++)
        memmove(p + j * k, p + j * 3, sizeof(double) * k);
}

static void test_builtins_random(void)
{
    static const char *names[] = {"sma_cross", "ema_cross", "donchian", "rsi", "bollinger"};
    static const int64_t sizes[] = {0, 1, 5, 97, 3000, 20000};
    for (size_t b = 0; b < sizeof names / sizeof names[0]; b++) {
        const tf_strategy_def *def = tf_strategy_builtin(names[b]);
        CHECK(def != NULL);
        if (!def)
            continue;
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            int64_t n = sizes[s], m = 41;
            double *c = malloc(sizeof(double) * (size_t)(n + 1));
            double *p = malloc(sizeof(double) * 3 * (size_t)m);
            random_close(c, n, s % 2 == 0 || n > 10000);
            random_grid(names[b], p, m, n);
            pack(p, m, def->n_params);
            char what[64];
            snprintf(what, sizeof what, "random n=%lld", (long long)n);
            check_paths(def, c, n, p, m, s == 3 ? 0.0 : 0.09, what);
            free(c);
            free(p);
        }
    }
}

/* ---- hand-worked cases ---- */

/* Runs def over close[n] for one combo with no fee: pnl, trades and the statistics. */
static tf_stats run_one(const tf_strategy_def *def, const double *close, int64_t n,
                        const double *params)
{
    double fee = 0.0, pnl;
    int64_t trades;
    tf_stats st;
    memset(&st, 0, sizeof st);
    tf_sweep_opts o = {.size = sizeof o, .fee = &fee, .stats = &st, .threads = 1};
    CHECK_RC(tf_sweep_with(def, close, n, params, 1, &pnl, &trades, &o), 0);
    return st;
}

/* Positions after each bar, by streaming with the default fee. */
static void positions(const tf_strategy_def *def, const double *close, int64_t n,
                      const double *params, int *pos)
{
    tf_strategy *s = NULL;
    CHECK_RC(tf_strategy_open_with(&s, def, params), 0);
    for (int64_t i = 0; i < n; i++)
        pos[i] = s ? tf_strategy_step(s, close[i]) : 99;
    tf_strategy_close(s);
}

static void check_positions(const char *name, const double *params, const double *close, int n,
                            const int *want)
{
    int pos[32];
    positions(tf_strategy_builtin(name), close, n, params, pos);
    int ok = memcmp(pos, want, sizeof(int) * (size_t)n) == 0;
    CHECK(ok);
    if (!ok) {
        fprintf(stderr, "  %s positions:", name);
        for (int i = 0; i < n; i++)
            fprintf(stderr, " %d/%d", pos[i], want[i]);
        fprintf(stderr, "\n");
    }
}

static void test_hand_worked(void)
{
    /* sma_cross(1, 2): SMA_1 = close, SMA_2 = mean of the last two; from bar 1: +1 when the
     * close is above the previous close, -1 below, HOLD equal. */
    {
        const double c[] = {10, 11, 11, 9, 12, 12};
        const double p[] = {1, 2};
        const int want[] = {0, 1, 1, -1, 1, 1};
        check_positions("sma_cross", p, c, 6, want);
        /* long 11 -> 9: -18.1818...%, short 9 -> 12: -33.33..%; fee 0 */
        tf_stats st = run_one(tf_strategy_builtin("sma_cross"), c, 6, p);
        double r1 = 1.0 * (9.0 - 11.0) / 11.0 * 100.0, r2 = -1.0 * (12.0 - 9.0) / 9.0 * 100.0;
        CHECK_EQ(st.trades, 2);
        CHECK(st.pnl == 0.0 + r1 + r2);
        CHECK(st.worst == r2 && st.best == r1);
        CHECK_EQ(st.exposure_bars, 5);
        CHECK_EQ(st.wins, 0);
    }
    /* ema_cross(1, 3): EMA_1 = close, a_3 = 0.5: EMA_3 = 10, 10.5 (bar 1), 10.75 (bar 2, the
     * first target: 11 > 10.75 -> +1), then 9.875 at 9 (-1). */
    {
        const double c[] = {10, 11, 11, 9, 9};
        const double p[] = {1, 3};
        const int want[] = {0, 0, 1, -1, -1};
        check_positions("ema_cross", p, c, 5, want);
    }
    /* donchian(2): from bar 2, above the max of the two bars before -> +1, below the min -> -1;
     * a NaN in the window gives HOLD while it is there. */
    {
        const double c[] = {10, 11, 12, 11, 9, NAN, 20, 21, 5};
        const double p[] = {2};
        const int want[] = {0, 0, 1, 1, -1, -1, -1, -1, -1};
        check_positions("donchian", p, c, 9, want);
        const double c2[] = {10, 11, 12, 11, 9, 8, 20, 21, 5};
        const int want2[] = {0, 0, 1, 1, -1, -1, 1, 1, -1};
        check_positions("donchian", p, c2, 9, want2);
    }
    /* rsi(2, 30, 70): d = +1, +1 -> ag 1, al 0 -> 100 (> 70: -1) at bar 2; then d = -3: ag =
     * (1*1+0)/2 = 0.5, al = 1.5, rsi = 100 - 100/(1+1/3) = 25 (< 30: +1); then d = 0: ag 0.25,
     * al 0.75, rsi 25 (+1); flat series: ag = al = 0 would be 50 (HOLD). */
    {
        const double c[] = {10, 11, 12, 9, 9};
        const double p[] = {2, 30, 70};
        const int want[] = {0, 0, -1, 1, 1};
        check_positions("rsi", p, c, 5, want);
        const double flat[] = {5, 5, 5, 5};
        const int want_flat[] = {0, 0, 0, 0};
        check_positions("rsi", p, flat, 4, want_flat);
    }
    /* bollinger(3, 1): bar 2: 10,10,13 -> m 11, sd sqrt(2), 13 above the band -> -1; bar 3:
     * 10,13,11 -> 11 inside, t == -1 and close <= m -> 0 (flat, the short closes at 11); bar 4:
     * 13,11,7 -> 7 below the band -> +1; bar 5: 11,7,8 -> inside, below m -> HOLD (stays +1);
     * bar 6: 7,8,9 -> m 8, sd 0.816, 9 above -> -1 (the long closes at 9). */
    {
        const double c[] = {10, 10, 13, 11, 7, 8, 9};
        const double p[] = {3, 1};
        const int want[] = {0, 0, -1, 0, 1, 1, -1};
        check_positions("bollinger", p, c, 7, want);
        tf_stats st = run_one(tf_strategy_builtin("bollinger"), c, 7, p);
        CHECK_EQ(st.trades, 2);
        CHECK_EQ(st.exposure_bars, 4); /* bars 2, 4, 5 and 6 end in a position */
        double r1 = -1.0 * (11.0 - 13.0) / 13.0 * 100.0, r2 = 1.0 * (9.0 - 7.0) / 7.0 * 100.0;
        CHECK(st.pnl == 0.0 + r1 + r2);
        CHECK_EQ(st.wins, 2);
    }
}

/* ---- HMA through the contract ---- */

static void test_hma(const double *close)
{
    const tf_strategy_def *hma = tf_strategy_builtin("hma");
    CHECK(hma != NULL && hma->n_params == 6);
    if (!hma || !close)
        return;
    /* The default grid (80 Hull lengths 6..200): tf_sweep_with == tf_sweep, every statistic. */
    int64_t ip[80 * 6];
    double dp[80 * 6];
    for (int64_t j = 0; j < 80; j++)
        CHECK_RC(tf_combo_from_length(6 + (j * 194) / 79, ip + 6 * j), 0);
    for (int i = 0; i < 80 * 6; i++)
        dp[i] = (double)ip[i];
    double pnl_a[80], pnl_b[80];
    int64_t tr_a[80], tr_b[80];
    tf_stats st_a[80], st_b[80];
    tf_sweep_opts oa = {.size = sizeof oa, .stats = st_a}, ob = {.size = sizeof ob, .stats = st_b};
    CHECK_RC(tf_sweep(close, N_DEFAULT, ip, 80, pnl_a, tr_a, &oa), 0);
    CHECK_RC(tf_sweep_with(hma, close, N_DEFAULT, dp, 80, pnl_b, tr_b, &ob), 0);
    CHECK_BITS(pnl_a, pnl_b, sizeof pnl_a);
    CHECK_BITS(tr_a, tr_b, sizeof tr_a);
    CHECK_BITS(st_a, st_b, sizeof st_a);
    char buf[64];
    snprintf(buf, sizeof buf, "%.4f", pnl_b[0]);
    CHECK(strcmp(buf, "-5165.5844") == 0);
    CHECK_EQ(tr_b[0], 57029);

    /* The step-by-step model (HMA's step + the booking) gives the fast path's bits on the
     * default data: the fingerprint combo, a middle one and the last. */
    static const int pick[] = {0, 37, 79};
    for (int q = 0; q < 3; q++) {
        int j = pick[q];
        double pnl;
        int64_t tr;
        tf_stats st;
        tf_sweep_opts o = {.size = sizeof o, .stats = &st};
        CHECK_RC(tf_sweep_with_reference(hma, close, N_DEFAULT, dp + 6 * j, 1, &pnl, &tr, &o), 0);
        CHECK_BITS(&st, &st_a[j], sizeof st);
        CHECK_BITS(&pnl, &pnl_a[j], sizeof pnl);
    }

    /* Random data with holes: the model and streaming (the old handle and the new) agree with
     * tf_sweep. */
    int64_t n = 2000;
    double *c = malloc(sizeof(double) * (size_t)n);
    random_close(c, n, 1);
    double grid[5 * 6] = {6, 3, 2, 3,    1,    2,  30,   15,  5,   15, 5, 8, 1, 1, 1,
                          1, 1, 1, 3000, 1500, 55, 1500, 500, 750, 6,  3, 2, 3, 1, 2};
    int64_t igrid[5 * 6];
    for (int i = 0; i < 30; i++)
        igrid[i] = (int64_t)grid[i];
    double pnl_k[5];
    int64_t tr_k[5];
    tf_stats st_k[5];
    tf_sweep_opts ok = {.size = sizeof ok, .stats = st_k};
    CHECK_RC(tf_sweep(c, n, igrid, 5, pnl_k, tr_k, &ok), 0);
    check_paths(hma, c, n, grid, 5, TF_FEE_DEFAULT, "hma random");
    double pnl_r[5];
    int64_t tr_r[5];
    tf_stats st_r[5];
    tf_sweep_opts orf = {.size = sizeof orf, .stats = st_r};
    CHECK_RC(tf_sweep_with_reference(hma, c, n, grid, 5, pnl_r, tr_r, &orf), 0);
    CHECK_BITS(st_r, st_k, sizeof st_k);
    for (int j = 0; j < 5; j++) {
        tf_strategy *old = NULL;
        CHECK_RC(tf_strategy_open(&old, igrid + 6 * j), 0);
        for (int64_t i = 0; old && i < n; i++)
            tf_strategy_step(old, c[i]);
        tf_stats so;
        CHECK_RC(tf_strategy_stats(old, &so), 0);
        CHECK_BITS(&so, &st_k[j], sizeof so);
        tf_strategy_close(old);
    }
    /* Not whole numbers: refused before anything runs. */
    double frac[6] = {6.5, 3, 2, 3, 1, 2};
    CHECK_RC(tf_sweep_with(hma, c, n, frac, 1, pnl_k, tr_k, NULL), TF_E_STRATEGY);
    free(c);
}

/* ---- finding strategies, plugins ---- */

static void plugin_path(char *buf, size_t cap, const char *name)
{
    const char *b = getenv("TF_BUILD_DIR");
    snprintf(buf, cap, "%s/tests/plugins/%s.so", b ? b : ".", name);
}

static void test_lookup(void)
{
    const char *want[] = {"hma", "sma_cross", "ema_cross", "donchian", "rsi", "bollinger"};
    for (int i = 0; i < 6; i++) {
        CHECK(tf_strategy_builtin_name(i) && !strcmp(tf_strategy_builtin_name(i), want[i]));
        const tf_strategy_def *d = tf_strategy_builtin(want[i]);
        CHECK(d && !strcmp(d->name, want[i]));
        CHECK_RC(tf_strategy_def_check(d, NULL, 0), 0);
    }
    CHECK(tf_strategy_builtin_name(6) == NULL && tf_strategy_builtin_name(-1) == NULL);
    CHECK(tf_strategy_builtin("nope") == NULL && tf_strategy_builtin(NULL) == NULL);
    const tf_strategy_def *r = tf_strategy_builtin("rsi");
    CHECK(r && r->n_params == 3 && !strcmp(r->param_names[0], "period") &&
          !strcmp(r->param_names[1], "lower") && !strcmp(r->param_names[2], "upper"));
    const tf_strategy_def *b = tf_strategy_builtin("bollinger");
    CHECK(b && !strcmp(b->param_names[0], "window") && !strcmp(b->param_names[1], "k"));

    char msg[512];
    const tf_strategy_def *d = NULL;
    tf_strategy_lib *lib = (tf_strategy_lib *)1;
    CHECK_RC(tf_strategy_resolve("donchian", &d, &lib, msg, sizeof msg), 0);
    CHECK(d == tf_strategy_builtin("donchian") && lib == NULL);
    CHECK_RC(tf_strategy_resolve("macd", &d, &lib, msg, sizeof msg), TF_E_STRATEGY);
    CHECK(strstr(msg, "macd") && strstr(msg, "sma_cross") && strstr(msg, "bollinger"));
    CHECK_RC(tf_strategy_resolve(NULL, &d, &lib, msg, sizeof msg), TF_E_NULL_ARG);
    CHECK_RC(tf_strategy_def_check(NULL, msg, sizeof msg), TF_E_STRATEGY);

    /* params_check names the combo and its values. */
    const tf_strategy_def *sma = tf_strategy_builtin("sma_cross");
    double p[] = {5, 20, 20, 20, 3, 9};
    int64_t bad = -1;
    CHECK_RC(tf_strategy_params_check(sma, p, 3, &bad, msg, sizeof msg), TF_E_STRATEGY);
    CHECK_EQ(bad, 1);
    CHECK(strstr(msg, "sma_cross") && strstr(msg, "combo 1") && strstr(msg, "fast=20") &&
          strstr(msg, "slow=20"));
    CHECK_RC(tf_strategy_params_check(sma, p, 1, &bad, msg, sizeof msg), 0);
    CHECK_RC(tf_strategy_params_check(sma, p, -1, &bad, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK_RC(tf_strategy_params_check(sma, NULL, 1, &bad, msg, sizeof msg), TF_E_NULL_ARG);
    CHECK_RC(tf_strategy_params_check(NULL, p, 1, &bad, msg, sizeof msg), TF_E_STRATEGY);
    /* Each built-in's refusals. */
    struct {
        const char *name;
        double p[3];
    } refused[] = {{"sma_cross", {0, 5}},
                   {"sma_cross", {2.5, 5}},
                   {"ema_cross", {5, 5}},
                   {"ema_cross", {NAN, 5}},
                   {"donchian", {0}},
                   {"donchian", {1.5}},
                   {"rsi", {0, 30, 70}},
                   {"rsi", {14, 70, 30}},
                   {"rsi", {14, -1, 70}},
                   {"rsi", {14, 30, 101}},
                   {"bollinger", {1, 2}},
                   {"bollinger", {20, 0}},
                   {"bollinger", {20, INFINITY}},
                   {"hma", {0}},
                   {"donchian", {(double)TF_STREAM_MAX_WINDOW + 1}}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const tf_strategy_def *def = tf_strategy_builtin(refused[i].name);
        double q[6] = {refused[i].p[0], refused[i].p[1], refused[i].p[2], 1, 1, 1};
        int rc = tf_strategy_params_check(def, q, 1, NULL, msg, sizeof msg);
        CHECK_RC(rc, TF_E_STRATEGY);
        if (rc != TF_E_STRATEGY)
            fprintf(stderr, "  %s case %zu accepted\n", refused[i].name, i);
        tf_strategy *s = NULL;
        CHECK_RC(tf_strategy_open_with(&s, def, q), TF_E_STRATEGY);
    }
}

static void test_plugins(void)
{
    char path[4096], msg[1024];
    tf_strategy_lib *lib = NULL;

    /* The sample plugin gives the built-in sma_cross's bits, on every path. */
    plugin_path(path, sizeof path, "tfplug_sma");
    CHECK_RC(tf_strategy_load(path, &lib, msg, sizeof msg), 0);
    const tf_strategy_def *pd = tf_strategy_lib_def(lib);
    CHECK(pd && !strcmp(pd->name, "plugin_sma"));
    if (pd) {
        int64_t n = 3000, m = 41;
        double *c = malloc(sizeof(double) * (size_t)n), *p = malloc(sizeof(double) * 3 * (size_t)m);
        random_close(c, n, 1);
        random_grid("sma_cross", p, m, n);
        pack(p, m, 2);
        check_paths(pd, c, n, p, m, 0.09, "plugin");
        double pnl_a[41], pnl_b[41];
        int64_t tr_a[41], tr_b[41];
        tf_stats st_a[41], st_b[41];
        tf_sweep_opts oa = {.size = sizeof oa, .stats = st_a},
                      ob = {.size = sizeof ob, .stats = st_b};
        CHECK_RC(tf_sweep_with(pd, c, n, p, m, pnl_a, tr_a, &oa), 0);
        CHECK_RC(tf_sweep_with(tf_strategy_builtin("sma_cross"), c, n, p, m, pnl_b, tr_b, &ob), 0);
        CHECK_BITS(st_a, st_b, sizeof st_a);
        /* init refusing a combo: named. */
        double badp[] = {5, 20, 9, 3};
        int64_t bad = -1;
        CHECK_RC(tf_strategy_params_check(pd, badp, 2, &bad, msg, sizeof msg), TF_E_STRATEGY);
        CHECK(bad == 1 && strstr(msg, "fast=9") && strstr(msg, "slow=3"));
        CHECK_RC(tf_sweep_with(pd, c, n, badp, 2, pnl_a, tr_a, NULL), TF_E_STRATEGY);
        free(c);
        free(p);
    }
    /* resolve takes a path too. */
    const tf_strategy_def *d = NULL;
    tf_strategy_lib *lib2 = NULL;
    CHECK_RC(tf_strategy_resolve(path, &d, &lib2, msg, sizeof msg), 0);
    CHECK(d && lib2 && !strcmp(d->name, "plugin_sma"));
    tf_strategy_unload(lib2);
    tf_strategy_unload(lib);
    tf_strategy_unload(NULL);

    /* The good variant: flat bars between positions, so exposure differs from n - first bar. */
    plugin_path(path, sizeof path, "tfplug_good");
    lib = NULL;
    CHECK_RC(tf_strategy_load(path, &lib, msg, sizeof msg), 0);
    if (lib) {
        int64_t n = 1000;
        double *c = malloc(sizeof(double) * (size_t)n);
        random_close(c, n, 1);
        double p[] = {1, 3, 7, 50, 2000, 3};
        check_paths(tf_strategy_lib_def(lib), c, n, p, 6, 0.09, "variant");
        tf_stats st = run_one(tf_strategy_lib_def(lib), c, 16, p + 2); /* every 7 bars */
        /* bars 0..6 long, 7..13 flat, 14..15 short: one trade, 9 bars in a position */
        CHECK_EQ(st.trades, 1);
        CHECK_EQ(st.exposure_bars, 9);
        free(c);
        tf_strategy_unload(lib);
    }

    /* Every refusal names the file and the reason. */
    struct {
        const char *plugin, *reason;
    } bad[] = {{"tfplug_bad_abi", "ABI 99"},
               {"tfplug_small_size", "size 24"},
               {"tfplug_no_symbol", "no symbol tollfree_strategy"},
               {"tfplug_bad_name", "bad strategy name \"Bad-Name\""},
               {"tfplug_null_def", "returned NULL"},
               {"tfplug_no_step", "no step"},
               {"tfplug_zero_state", "zero state"},
               {"tfplug_dup_param", "given twice"},
               {"tfplug_does_not_exist", "cannot open"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        plugin_path(path, sizeof path, bad[i].plugin);
        lib = (tf_strategy_lib *)1;
        msg[0] = '\0';
        CHECK_RC(tf_strategy_load(path, &lib, msg, sizeof msg), TF_E_STRATEGY);
        int ok = strstr(msg, path) && strstr(msg, bad[i].reason);
        CHECK(ok);
        if (!ok)
            fprintf(stderr, "  %s: message \"%s\" lacks \"%s\"\n", bad[i].plugin, msg,
                    bad[i].reason);
        CHECK(lib == (tf_strategy_lib *)1); /* untouched */
        const tf_strategy_def *dd = NULL;
        tf_strategy_lib *ll = NULL;
        CHECK_RC(tf_strategy_resolve(path, &dd, &ll, msg, sizeof msg), TF_E_STRATEGY);
    }
    CHECK_RC(tf_strategy_load(NULL, &lib, msg, sizeof msg), TF_E_NULL_ARG);

    /* A step breaking the contract (a target of 7): refused, outputs untouched. */
    plugin_path(path, sizeof path, "tfplug_bad_target");
    lib = NULL;
    CHECK_RC(tf_strategy_load(path, &lib, msg, sizeof msg), 0);
    if (lib) {
        double c[20], p[] = {2}, pnl = 42.0;
        int64_t tr = 42;
        for (int i = 0; i < 20; i++)
            c[i] = 100 + i;
        CHECK_RC(tf_sweep_with(tf_strategy_lib_def(lib), c, 20, p, 1, &pnl, &tr, NULL),
                 TF_E_STRATEGY);
        CHECK_RC(tf_sweep_with_reference(tf_strategy_lib_def(lib), c, 20, p, 1, &pnl, &tr, NULL),
                 TF_E_STRATEGY);
        CHECK(pnl == 42.0 && tr == 42);
        tf_strategy *s = NULL;
        CHECK_RC(tf_strategy_open_with(&s, tf_strategy_lib_def(lib), p), 0);
        int last = 0;
        for (int i = 0; i < 5; i++)
            last = tf_strategy_step(s, c[i]);
        CHECK_RC(last, TF_E_STRATEGY);
        CHECK_EQ(tf_strategy_bars(s), 4);
        tf_strategy_close(s);
        tf_strategy_unload(lib);
    }
}

/* A def built by the caller, checked field by field. */
static int ok_init(void *s, const double *p)
{
    (void)s;
    (void)p;
    return 0;
}

static int hold_step(void *s, double c)
{
    (void)s;
    (void)c;
    return TF_HOLD;
}

static void test_def_check(void)
{
    static const char *const one[] = {"x"};
    static const char *const bad_names[] = {"x y"};
    tf_strategy_def good = {sizeof good, TF_STRATEGY_ABI, "mine", 1,    one, 8,
                            ok_init,     hold_step,       NULL,   NULL, 0,   NULL};
    char msg[256];
    CHECK_RC(tf_strategy_def_check(&good, msg, sizeof msg), 0);
    tf_strategy_def d = good;
    d.n_params = 0;
    CHECK_RC(tf_strategy_def_check(&d, msg, sizeof msg), TF_E_STRATEGY);
    d = good;
    d.n_params = TF_STRATEGY_MAX_PARAMS + 1;
    CHECK_RC(tf_strategy_def_check(&d, msg, sizeof msg), TF_E_STRATEGY);
    d = good;
    d.param_names = bad_names;
    CHECK_RC(tf_strategy_def_check(&d, msg, sizeof msg), TF_E_STRATEGY);
    CHECK(strstr(msg, "x y") != NULL);
    d = good;
    d.param_names = NULL;
    CHECK_RC(tf_strategy_def_check(&d, msg, sizeof msg), TF_E_STRATEGY);
    d = good;
    d.name = "";
    CHECK_RC(tf_strategy_def_check(&d, msg, sizeof msg), TF_E_STRATEGY);
    d = good;
    d.init = NULL;
    CHECK_RC(tf_strategy_def_check(&d, msg, sizeof msg), TF_E_STRATEGY);
    CHECK(strstr(msg, "init") != NULL);
    d = good;
    d.size = 8;
    CHECK_RC(tf_strategy_def_check(&d, msg, sizeof msg), TF_E_STRATEGY);
    d = good;
    d.abi = 2;
    CHECK_RC(tf_strategy_def_check(&d, msg, sizeof msg), TF_E_STRATEGY);
    /* A longer def (a future member) is fine. */
    d = good;
    d.size = sizeof good + 16;
    CHECK_RC(tf_strategy_def_check(&d, msg, sizeof msg), 0);

    /* All HOLD: never a trade, never exposed. */
    double c[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, p = 1, pnl = 1;
    int64_t tr = 1;
    tf_stats st;
    tf_sweep_opts o = {.size = sizeof o, .stats = &st, .threads = 2};
    CHECK_RC(tf_sweep_with(&good, c, 10, &p, 1, &pnl, &tr, &o), 0);
    CHECK(pnl == 0.0 && tr == 0 && st.exposure_bars == 0);
    CHECK_RC(tf_sweep_with(&d, c, 10, &p, 1, &pnl, &tr, &o), 0);
    d.abi = 2;
    CHECK_RC(tf_sweep_with(&d, c, 10, &p, 1, &pnl, &tr, &o), TF_E_STRATEGY);
    CHECK_RC(tf_sweep_with_reference(&d, c, 10, &p, 1, &pnl, &tr, &o), TF_E_STRATEGY);
    tf_strategy *s = NULL;
    CHECK_RC(tf_strategy_open_with(&s, &d, &p), TF_E_STRATEGY);
}

/* ---- dedupe, progress, cancel, errors ---- */

static void test_sweep_errors(void)
{
    const tf_strategy_def *sma = tf_strategy_builtin("sma_cross");
    int64_t n = 5000;
    double *c = malloc(sizeof(double) * (size_t)n);
    random_close(c, n, 0);
    double p[] = {5, 20, 3, 9, 5, 20, 5, 20, 3, 9};
    double pnl[5];
    int64_t tr[5];
    tf_progress prog = {0, 0, 0};
    tf_sweep_opts o = {.size = sizeof o, .progress = &prog, .threads = 2};
    CHECK_RC(tf_sweep_with(sma, c, n, p, 5, pnl, tr, &o), 0);
    /* Two distinct combos: the work is counted in combos x time blocks. */
    CHECK(prog.total > 0 && prog.total % 2 == 0 && prog.done == prog.total);
    CHECK(pnl[0] == pnl[2] && pnl[0] == pnl[3] && pnl[1] == pnl[4] && tr[1] == tr[4]);

    /* The generic path (a def of the caller's): one unit per distinct combo. */
    tf_strategy_def mine = *sma;
    mine.name = "mine";
    tf_progress pm = {0, 0, 0};
    tf_sweep_opts om2 = {.size = sizeof om2, .progress = &pm, .threads = 2};
    double pnl3[5];
    CHECK_RC(tf_sweep_with(&mine, c, n, p, 5, pnl3, tr, &om2), 0);
    CHECK_EQ(pm.total, 2);
    CHECK_EQ(pm.done, 2);
    CHECK_BITS(pnl3, pnl, sizeof pnl);

    /* Cancelled: TF_E_CANCELLED, outputs untouched. */
    double pnl2[5] = {7, 7, 7, 7, 7};
    tf_progress cancel = {0, 0, 1};
    tf_sweep_opts oc = {.size = sizeof oc, .progress = &cancel};
    CHECK_RC(tf_sweep_with(sma, c, n, p, 5, pnl2, tr, &oc), TF_E_CANCELLED);
    CHECK(pnl2[0] == 7 && pnl2[4] == 7);
    CHECK_RC(tf_sweep_with(tf_strategy_builtin("donchian"), c, n, p, 5, pnl2, tr, &oc),
             TF_E_CANCELLED);
    CHECK(pnl2[0] == 7 && pnl2[4] == 7);

    /* Errors. */
    double bad[] = {5, 20, 20, 5};
    CHECK_RC(tf_sweep_with(sma, c, n, bad, 2, pnl2, tr, NULL), TF_E_STRATEGY);
    CHECK(pnl2[0] == 7);
    CHECK_RC(tf_sweep_with(NULL, c, n, p, 1, pnl, tr, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_sweep_with(sma, NULL, n, p, 1, pnl, tr, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_sweep_with(sma, c, n, NULL, 1, pnl, tr, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_sweep_with(sma, c, n, p, 1, NULL, tr, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_sweep_with(sma, c, -1, p, 1, pnl, tr, NULL), TF_E_TOO_MANY_BARS);
    CHECK_RC(tf_sweep_with(sma, c, n, p, -1, pnl, tr, NULL), TF_E_TOO_MANY_COMBOS);
    CHECK_RC(tf_sweep_with(sma, c, n, p, 0, NULL, NULL, NULL), 0);
    tf_sweep_opts ot = {.size = sizeof ot, .threads = -1};
    CHECK_RC(tf_sweep_with(sma, c, n, p, 1, pnl, tr, &ot), TF_E_THREADS);
    double inf = INFINITY;
    tf_sweep_opts of = {.size = sizeof of, .fee = &inf};
    CHECK_RC(tf_sweep_with(sma, c, n, p, 1, pnl, tr, &of), TF_E_INVALID_ARG);
    CHECK_RC(tf_sweep_with_reference(sma, c, n, p, 1, pnl, tr, &of), TF_E_INVALID_ARG);
    tf_sweep_opts oi = {.size = sizeof oi, .isa = (tf_isa)99};
    CHECK_RC(tf_sweep_with(sma, c, n, p, 1, pnl, tr, &oi), TF_E_INVALID_ARG);
    CHECK_RC(tf_sweep_with_reference(sma, c, n, p, 1, pnl, tr, &oi), TF_E_INVALID_ARG);
    CHECK_RC(tf_sweep_with_reference(NULL, c, n, p, 1, pnl, tr, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_sweep_with_reference(sma, c, n, p, 1, pnl, NULL, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_sweep_with_reference(sma, c, n, bad, 2, pnl2, tr, NULL), TF_E_STRATEGY);
    CHECK(pnl2[0] == 7);
    tf_sweep_opts om = {.size = sizeof om, .max_bytes = 64};
    CHECK_RC(tf_sweep_with(sma, c, n, p, 5, pnl2, tr, &om), TF_E_LIMIT);
    CHECK_RC(tf_sweep_with(tf_strategy_builtin("ema_cross"), c, n, p, 5, pnl2, tr, &om),
             TF_E_LIMIT);
    CHECK(pnl2[0] == 7);
    tf_strategy *s = NULL;
    CHECK_RC(tf_strategy_open_with(NULL, sma, p), TF_E_NULL_ARG);
    CHECK_RC(tf_strategy_open_with(&s, NULL, p), TF_E_NULL_ARG);
    CHECK_RC(tf_strategy_open_with(&s, sma, NULL), TF_E_NULL_ARG);
    free(c);
}

/* Streaming any strategy never allocates in its step (alloc_count.h; not counted under ASan). */
static void test_step_allocs(void)
{
    static const struct {
        const char *name;
        double p[6];
    } cases[] = {{"hma", {30, 15, 5, 15, 5, 8}}, {"sma_cross", {5, 20}},
                 {"ema_cross", {5, 20}},         {"donchian", {20}},
                 {"rsi", {14, 30, 70}},          {"bollinger", {20, 2}}};
    double c[2000];
    random_close(c, 2000, 0);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tf_strategy *s = NULL;
        CHECK_RC(tf_strategy_open_with(&s, tf_strategy_builtin(cases[k].name), cases[k].p), 0);
        tf_alloc_calls = tf_free_calls = 0;
        tf_alloc_on = 1;
        for (int i = 0; s && i < 2000; i++)
            tf_strategy_step(s, c[i]);
        tf_strategy_reset(s);
        tf_alloc_on = 0;
        CHECK_EQ(tf_alloc_calls + tf_free_calls, 0);
        tf_strategy_close(s);
    }
}

/* ---- the optional steps member: a block of bars a call ---- */

static const tf_strategy_def *steps_base; /* whose step the steps below loop over */
static int steps_fault;                   /* 1: return nonzero; 2: write a target of 7 */

static int loop_steps(void *state, const double *close, int64_t n, int32_t *targets)
{
    for (int64_t i = 0; i < n; i++)
        targets[i] = steps_base->step(state, close[i]);
    if (steps_fault == 2 && n > 10)
        targets[10] = 7;
    return steps_fault == 1;
}

/* A def with steps gives exactly the bits of the same def stepped bar by bar (the reference,
 * which never calls steps, against the threaded sweep, which does, and streaming), and a steps
 * that fails or writes a bad target stops the sweep with TF_E_STRATEGY, outputs untouched. */
static void test_steps_member(void)
{
    static const char *const names[] = {"sma_cross", "rsi", "bollinger"};
    static const double params[][3] = {{3, 17, 0}, {14, 30, 70}, {20, 2, 0}};
    enum { N = 20000 };
    double *close = malloc(sizeof(double) * N);
    random_close(close, N, 1);
    for (int s = 0; s < 3; s++) {
        steps_base = tf_strategy_builtin(names[s]);
        tf_strategy_def d = *steps_base; /* a copy: the generic path, not the built-in's fast one */
        d.steps = loop_steps;
        steps_fault = 0;
        uint32_t k = d.n_params;
        double grid[2 * 3];
        memcpy(grid, params[s], sizeof(double) * k);
        memcpy(grid + k, params[s], sizeof(double) * k);
        grid[k] += 1; /* a second, different combo */
        check_paths(&d, close, N, grid, 2, 0.09, "steps");
        double pnl[2] = {-1, -1};
        int64_t tr[2] = {-1, -1};
        tf_sweep_opts o = {.size = sizeof o, .threads = 2};
        for (steps_fault = 1; steps_fault <= 2; steps_fault++) {
            CHECK_RC(tf_sweep_with(&d, close, N, grid, 2, pnl, tr, &o), TF_E_STRATEGY);
            CHECK(pnl[0] == -1 && tr[1] == -1);
        }
        d.size = offsetof(tf_strategy_def, steps); /* built before steps: never read */
        steps_fault = 1;
        CHECK_RC(tf_sweep_with(&d, close, N, grid, 2, pnl, tr, &o), 0);
    }
    free(close);
}

/* ---- the optional changes member: lanes combos a call, only the bars that move ---- */

static const tf_strategy_def *changes_base; /* whose step the changes below loop over */
static uint32_t changes_lanes;
/* 1: return nonzero; 2: write TF_HOLD; 3: write the position itself; 4: bars out of order;
 * 5: a count above n; 6: a target of 7; 7: a bar past the run */
static int changes_fault;

static void changes_break(int64_t n, int32_t *bars, int32_t *targets, int64_t *counts)
{
    if (counts[0] < 2)
        return;
    if (changes_fault == 2)
        targets[0] = TF_HOLD;
    if (changes_fault == 3)
        targets[1] = targets[0];
    if (changes_fault == 4) {
        int32_t b = bars[0];
        bars[0] = bars[1];
        bars[1] = b;
    }
    if (changes_fault == 5)
        counts[0] = n + 1;
    if (changes_fault == 6)
        targets[0] = 7;
    if (changes_fault == 7)
        bars[counts[0] - 1] = (int32_t)n;
}

static int loop_changes(void *states, size_t stride, const double *close, int64_t n, int32_t *pos,
                        int32_t *bars, int32_t *targets, int64_t *counts)
{
    for (uint32_t l = 0; l < changes_lanes; l++) {
        void *st = (char *)states + l * stride;
        int32_t p = pos[l];
        int64_t k = 0;
        for (int64_t i = 0; i < n; i++) {
            int t = changes_base->step(st, close[i]);
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
    changes_break(n, bars, targets, counts);
    return changes_fault == 1;
}

/* A def with changes gives exactly the bits of the same def stepped bar by bar, for one lane,
 * three (the last group partial) and sixteen (every combo in one group), states of different
 * sizes (bollinger's window ring) included; changes that fail or break the contract stop the
 * sweep with TF_E_STRATEGY, outputs untouched; lanes outside 1 .. 16 are refused by the check,
 * and a def built before the member never has it read. */
static void test_changes_member(void)
{
    static const char *const names[] = {"sma_cross", "rsi", "bollinger"};
    static const double params[][3] = {{3, 17, 0}, {14, 30, 70}, {20, 2, 0}};
    static const uint32_t lanes[] = {1, 3, 16};
    enum { N = 20000, M = 8 };
    double *close = malloc(sizeof(double) * N);
    random_close(close, N, 1);
    for (int s = 0; s < 3; s++) {
        changes_base = tf_strategy_builtin(names[s]);
        tf_strategy_def d = *changes_base; /* a copy: the generic path, not the fast one */
        d.changes = loop_changes;
        uint32_t k = d.n_params;
        double grid[M * 3];
        for (int j = 0; j < M; j++) {
            memcpy(grid + j * k, params[s], sizeof(double) * k);
            grid[j * k] += j % 7; /* combo 7 repeats combo 0 */
        }
        changes_fault = 0;
        for (int q = 0; q < 3; q++) {
            d.lanes = changes_lanes = lanes[q];
            CHECK_RC(tf_strategy_def_check(&d, NULL, 0), 0);
            check_paths(&d, close, N, grid, M, 0.09, "changes");
        }
        double pnl[M], pnl0[M];
        int64_t tr[M];
        tf_sweep_opts o = {.size = sizeof o, .threads = 2};
        for (int j = 0; j < M; j++)
            pnl0[j] = pnl[j] = -1;
        d.lanes = changes_lanes = 3;
        for (changes_fault = 1; changes_fault <= 7; changes_fault++) {
            CHECK_RC(tf_sweep_with(&d, close, N, grid, M, pnl, tr, &o), TF_E_STRATEGY);
            CHECK(memcmp(pnl, pnl0, sizeof pnl) == 0);
        }
        d.lanes = 0;
        CHECK_RC(tf_strategy_def_check(&d, NULL, 0), TF_E_STRATEGY);
        d.lanes = TF_STRATEGY_MAX_LANES + 1;
        CHECK_RC(tf_strategy_def_check(&d, NULL, 0), TF_E_STRATEGY);
        d.lanes = 3;
        d.size = offsetof(tf_strategy_def, lanes); /* built before changes: never read */
        changes_fault = 1;
        CHECK_RC(tf_sweep_with(&d, close, N, grid, M, pnl, tr, &o), 0);
    }
    free(close);
}

int main(void)
{
    double *close = tf_test_default_close();
    CHECK(close != NULL);
    test_lookup();
    test_def_check();
    test_hand_worked();
    test_builtins_random();
    test_hma(close);
    test_plugins();
    test_sweep_errors();
    test_step_allocs();
    test_steps_member();
    test_changes_member();
    free(close);
    printf("%d passed, %d failed\n", tf_test_passed, tf_test_failed);
    return tf_test_failed ? 1 : 0;
}

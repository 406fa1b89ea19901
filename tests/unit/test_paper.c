/* tf_paper_run (include/tollfree/paper.h) with the in-process engine: its PnL from the fills
 * equals tf_sweep's on the rounded series, raw bits, for random combos; the default tick comes
 * from the data (a five-decimal series trades its own doubles); a tick coarser than the data's is
 * refused unless asked; every error return. The service path is tested from Python
 * (python/tests/test_paper.py, a real `engine serve`). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tollfree/kernel.h"
#include "tollfree/paper.h"
#include "tollfree/strategy.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t next_u64(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double uniform(void)
{
    return ((double)(next_u64() >> 11) + 0.5) / 9007199254740992.0;
}

/* A geometric random walk from start: full 17-digit doubles, no decimal tick fits. */
static void random_walk(double *x, int64_t n, double start, double vol)
{
    double p = start;
    for (int64_t i = 0; i < n; i++) {
        double z = sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform());
        p *= exp(vol * z);
        x[i] = p;
    }
}

/* A random walk of whole ticks of 10^-k, as a price file with k decimals parses: m / 10^k. */
static void decimal_walk(double *x, int64_t n, int64_t start_ticks, int64_t step, int k)
{
    double p10 = 1.0;
    for (int j = 0; j < k; j++)
        p10 *= 10.0;
    int64_t m = start_ticks;
    for (int64_t i = 0; i < n; i++) {
        m += (int64_t)(next_u64() % (uint64_t)(2 * step + 1)) - step;
        if (m < start_ticks / 2)
            m = start_ticks / 2;
        x[i] = (double)m / p10;
    }
}

static void random_combo(int64_t c[6], int64_t hi)
{
    for (int k = 0; k < 6; k++)
        c[k] = 1 + (int64_t)(next_u64() % (uint64_t)hi);
}

/* The kernel's figure on close rounded to ticks of 10^-k, written here independently of the
 * library: round(x * 10^k) / 10^k. */
static void sweep_rounded(const double *close, int64_t n, int k, const int64_t c[6], double *pnl,
                          int64_t *trades)
{
    double p10 = 1.0;
    for (int j = 0; j < k; j++)
        p10 *= 10.0;
    double *px = malloc(sizeof *px * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        px[i] = nearbyint(close[i] * p10) / p10;
    tf_sweep_opts so = {.size = sizeof so, .threads = 1};
    CHECK_RC(tf_sweep(px, n, c, 1, pnl, trades, &so), 0);
    free(px);
}

static int run(const double *close, int64_t n, const tf_paper_config *c, tf_paper_result *r,
               char *msg)
{
    memset(r, 0, sizeof *r);
    r->size = sizeof *r;
    return tf_paper_run(close, n, c, r, msg, 512);
}

static void test_random_combos_random_walk(void)
{
    enum { N = 20000 };
    double *x = malloc(sizeof *x * N);
    random_walk(x, N, 1.2345, 0.0015);
    double t = 0;
    CHECK_RC(tf_paper_tick_from_data(x, N, &t), 0); /* no power of ten holds every close */
    CHECK(t == TF_PAPER_DEFAULT_TICK);
    char msg[512];
    for (int j = 0; j < 20; j++) {
        tf_paper_config c = {.size = sizeof c};
        random_combo(c.combo, j < 10 ? 12 : 120);
        tf_paper_result r;
        CHECK_RC(run(x, N, &c, &r, msg), 0);
        double kp;
        int64_t kt;
        sweep_rounded(x, N, 4, c.combo, &kp, &kt);
        CHECK(r.tick_source == TF_PAPER_TICK_DEFAULT && r.tick == 1e-4);
        CHECK(tf_test_same_bits(r.pnl, kp) && r.trades == kt);
        CHECK(tf_test_same_bits(r.kernel_pnl, kp) && r.kernel_trades == kt);
        CHECK(tf_test_same_bits(r.stream_pnl, kp) && r.stream_trades == kt);
        CHECK(r.parity == 1);
        CHECK(r.rounded_closes > N / 2 && r.first_rounded >= 0);
        /* the unrounded figure is the sweep on x itself */
        double up;
        int64_t ut;
        tf_sweep_opts so = {.size = sizeof so, .threads = 1};
        CHECK_RC(tf_sweep(x, N, c.combo, 1, &up, &ut, &so), 0);
        CHECK(tf_test_same_bits(r.unrounded_pnl, up) && r.unrounded_trades == ut);
        CHECK(tf_test_same_bits(r.unrounded_diff, r.pnl - up));
        CHECK(r.has_state_hash && r.in_process && r.bars == N);
        CHECK(r.orders == r.fills && r.fills >= r.trades);
    }
    free(x);
}

static void test_decimal_series(void)
{
    /* EURUSD-like: five decimals. The default tick is 1e-5 and the run trades the series'
     * own doubles; 1e-4 (the default before) would round them. */
    enum { N = 30000 };
    double *x = malloc(sizeof *x * N);
    decimal_walk(x, N, 108123, 12, 5);
    double t = 0;
    CHECK_RC(tf_paper_tick_from_data(x, N, &t), 1);
    CHECK(t == 1e-5);
    char msg[512];
    for (int j = 0; j < 10; j++) {
        tf_paper_config c = {.size = sizeof c};
        random_combo(c.combo, 40);
        tf_paper_result r;
        CHECK_RC(run(x, N, &c, &r, msg), 0);
        CHECK(r.tick_source == TF_PAPER_TICK_DATA && r.tick == 1e-5);
        CHECK(r.rounded_closes == 0 && r.first_rounded == -1);
        double up;
        int64_t ut;
        tf_sweep_opts so = {.size = sizeof so, .threads = 1};
        CHECK_RC(tf_sweep(x, N, c.combo, 1, &up, &ut, &so), 0);
        CHECK(r.parity && r.unrounded_parity);
        CHECK(tf_test_same_bits(r.pnl, up) && r.trades == ut && r.unrounded_diff == 0.0);
        /* a finer decimal tick is exact too (division by 10^k is correctly rounded) */
        c.tick = 1e-7;
        CHECK_RC(run(x, N, &c, &r, msg), 0);
        CHECK(r.tick_source == TF_PAPER_TICK_GIVEN && r.rounded_closes == 0);
        CHECK(tf_test_same_bits(r.pnl, up) && r.unrounded_parity);
    }
    /* Every close rounds to itself: the definition, bar by bar. */
    for (int64_t i = 0; i < N; i++) {
        int64_t q;
        if (tf_paper_round(x[i], 1e-5, &q) || tf_paper_price(q, 1e-5) != x[i]) {
            CHECK(0);
            break;
        }
    }
    /* Integer prices: tick 1. Two decimals: 0.01. */
    double y[4] = {101, 99, 250, 7};
    CHECK_RC(tf_paper_tick_from_data(y, 4, &t), 1);
    CHECK(t == 1.0);
    double z[3] = {1234.56, 1234.5, 1200.07};
    CHECK_RC(tf_paper_tick_from_data(z, 3, &t), 1);
    CHECK(t == 0.01);
    double neg[2] = {1.5, -2.0};
    CHECK_RC(tf_paper_tick_from_data(neg, 2, &t), 0);
    CHECK(t == TF_PAPER_DEFAULT_TICK);
    free(x);
}

static void test_coarse_tick(void)
{
    /* GOOG-like daily closes with two decimals: a tick of 50 changes them. */
    enum { N = 2500 };
    double *x = malloc(sizeof *x * N);
    decimal_walk(x, N, 150000, 900, 2);
    char msg[512];
    tf_paper_config c = {.size = sizeof c, .combo = {6, 3, 2, 3, 1, 2}, .tick = 50};
    tf_paper_result r;
    CHECK_RC(run(x, N, &c, &r, msg), TF_E_BAD_INPUT);
    CHECK(strstr(msg, "coarse") != NULL && strstr(msg, "0.01") != NULL);
    CHECK(strstr(msg, "bar 0") != NULL);
    c.coarse_tick = 1;
    CHECK_RC(run(x, N, &c, &r, msg), 0);
    CHECK(r.parity && r.rounded_closes > 0 && r.tick == 50);
    /* the answer differs from the unrounded sweep and says so */
    CHECK(!r.unrounded_parity || r.rounded_closes == 0);
    CHECK(tf_test_same_bits(r.unrounded_diff, r.pnl - r.unrounded_pnl));
    /* 0.25 on closes that are quarters: nothing changes, nothing refused */
    for (int64_t i = 0; i < N; i++)
        x[i] = 100.0 + 0.25 * (double)(i % 37);
    c.coarse_tick = 0;
    c.tick = 0.25;
    CHECK_RC(run(x, N, &c, &r, msg), 0);
    CHECK(r.rounded_closes == 0 && r.unrounded_parity);
    free(x);
}

static void test_half_spread_and_outputs(void)
{
    enum { N = 8000 };
    double *x = malloc(sizeof *x * N);
    decimal_walk(x, N, 123450, 30, 5);
    tf_paper_fill *log = malloc(sizeof *log * 2 * N);
    double *eq = malloc(sizeof *eq * N), *mtm = malloc(sizeof *mtm * N);
    char msg[512];
    tf_progress pg = {0};
    tf_paper_config c = {.size = sizeof c, .combo = {6, 3, 2, 3, 1, 2}, .progress = &pg};
    tf_paper_result r = {
        .size = sizeof r, .fill_log = log, .fill_log_cap = 2 * N, .equity = eq, .mtm = mtm};
    CHECK_RC(tf_paper_run(x, N, &c, &r, msg, sizeof msg), 0);
    CHECK(r.parity && r.fills > 0 && r.fill_log == log);
    int64_t done, total;
    tf_progress_read(&pg, &done, &total);
    CHECK(done == N && total == N);
    int at_close = 1;
    for (int64_t f = 0; f < r.fills; f++) {
        int64_t q;
        tf_paper_round(x[log[f].bar], r.tick, &q);
        at_close &= q == log[f].px_ticks && (log[f].dir == 1 || log[f].dir == -1);
    }
    CHECK(at_close);
    CHECK(tf_test_same_bits(eq[N - 1], r.pnl));
    CHECK(r.position == 0 ? tf_test_same_bits(mtm[N - 1], r.pnl) : 1);
    /* a short log keeps the first rows and still counts every fill */
    tf_paper_fill short_log[3];
    tf_paper_result r2 = {.size = sizeof r2, .fill_log = short_log, .fill_log_cap = 3};
    CHECK_RC(tf_paper_run(x, N, &c, &r2, msg, sizeof msg), 0);
    CHECK(r2.fills == r.fills && memcmp(short_log, log, sizeof short_log) == 0);
    CHECK(r2.state_hash == r.state_hash);

    /* The quoted market: same positions, worse prices; the spread's cost is the difference. */
    c.half_spread = 2;
    CHECK_RC(run(x, N, &c, &r2, msg), 0);
    CHECK(r2.trades == r.trades && tf_test_same_bits(r2.kernel_pnl, r.kernel_pnl));
    CHECK(r2.pnl < r2.kernel_pnl && tf_test_same_bits(r2.spread_cost, r2.kernel_pnl - r2.pnl));
    CHECK(!r2.parity);
    free(log);
    free(eq);
    free(mtm);
    free(x);
}

static void test_fee(void)
{
    enum { N = 6000 };
    double *x = malloc(sizeof *x * N);
    random_walk(x, N, 100.0, 0.001);
    const double fees[] = {0.0, 0.25, 99.5, 0.1 + 0.2};
    char msg[512];
    for (int j = 0; j < 4; j++) {
        tf_paper_config c = {.size = sizeof c, .combo = {20, 10, 4, 10, 3, 5}, .fee = &fees[j]};
        tf_paper_result r;
        CHECK_RC(run(x, N, &c, &r, msg), 0);
        double *px = malloc(sizeof *px * N);
        for (int64_t i = 0; i < N; i++)
            px[i] = nearbyint(x[i] * 1e4) / 1e4;
        double kp;
        int64_t kt;
        tf_sweep_opts so = {.size = sizeof so, .threads = 1, .fee = &fees[j]};
        CHECK_RC(tf_sweep(px, N, c.combo, 1, &kp, &kt, &so), 0);
        CHECK(r.parity && tf_test_same_bits(r.pnl, kp) && r.trades == kt);
        free(px);
    }
    free(x);
}

static void test_journal(void)
{
    char dir[] = "/tmp/tf_paper_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    double x[500];
    decimal_walk(x, 500, 10000, 20, 2);
    char msg[512];
    tf_paper_config c = {.size = sizeof c, .combo = {3, 1, 1, 2, 1, 1}, .journal_dir = dir};
    tf_paper_result r;
    CHECK_RC(run(x, 500, &c, &r, msg), 0);
    CHECK(r.parity && r.commands > 0);
    char path[256];
    snprintf(path, sizeof path, "%s/commands.ofl", dir);
    CHECK(access(path, R_OK) == 0);
    /* a directory that holds a journal is refused, before any bar */
    CHECK_RC(run(x, 500, &c, &r, msg), TF_E_INVALID_ARG);
    CHECK(strstr(msg, "already holds") != NULL);
    unlink(path);
    snprintf(path, sizeof path, "%s/events.ofl", dir);
    unlink(path);
    rmdir(dir);
}

static void test_errors(void)
{
    double x[50];
    decimal_walk(x, 50, 10000, 20, 2);
    char msg[512];
    tf_paper_config c = {.size = sizeof c, .combo = {3, 1, 1, 2, 1, 1}};
    tf_paper_result r = {.size = sizeof r};
    CHECK_RC(tf_paper_run(x, 50, NULL, &r, msg, sizeof msg), TF_E_NULL_ARG);
    CHECK_RC(tf_paper_run(x, 50, &c, NULL, msg, sizeof msg), TF_E_NULL_ARG);
    CHECK_RC(tf_paper_run(NULL, 50, &c, &r, msg, sizeof msg), TF_E_NULL_ARG);
    CHECK_RC(tf_paper_run(x, 50, &c, &r, NULL, 10), TF_E_NULL_ARG);
    CHECK_RC(tf_paper_run(x, -1, &c, &r, msg, sizeof msg), TF_E_TOO_MANY_BARS);
    CHECK_RC(tf_paper_run(x, 50, &c, &r, NULL, 0), 0); /* no message wanted */
    r.size = 8;
    CHECK_RC(tf_paper_run(x, 50, &c, &r, msg, sizeof msg), TF_E_INVALID_ARG);
    c.size = 8;
    CHECK_RC(run(x, 50, &c, &r, msg), TF_E_INVALID_ARG);
    c.size = sizeof c;
    c.tick = -1;
    CHECK_RC(run(x, 50, &c, &r, msg), TF_E_INVALID_ARG);
    c.tick = NAN;
    CHECK_RC(run(x, 50, &c, &r, msg), TF_E_INVALID_ARG);
    c.tick = 0;
    double nan_fee = NAN;
    c.fee = &nan_fee;
    CHECK_RC(run(x, 50, &c, &r, msg), TF_E_INVALID_ARG);
    double rebate = -0.01; /* tf_fee_check: a negative fee is refused */
    c.fee = &rebate;
    CHECK_RC(run(x, 50, &c, &r, msg), TF_E_INVALID_ARG);
    CHECK(strstr(msg, "negative") != NULL);
    c.fee = NULL;
    c.half_spread = -1;
    CHECK_RC(run(x, 50, &c, &r, msg), TF_E_INVALID_ARG);
    c.half_spread = 0;
    /* the window of changes in flight: bounded; in-process it changes nothing (applied at
     * once), and a caller of the layout before it (its size) gets the default */
    c.max_inflight = TF_PAPER_MAX_INFLIGHT + 1;
    CHECK_RC(run(x, 50, &c, &r, msg), TF_E_INVALID_ARG);
    CHECK(strstr(msg, "max_inflight") != NULL);
    tf_paper_result r0 = {.size = sizeof r0}, r1 = {.size = sizeof r1};
    c.max_inflight = 0;
    CHECK_RC(run(x, 50, &c, &r0, msg), 0);
    c.max_inflight = TF_PAPER_MAX_INFLIGHT;
    CHECK_RC(run(x, 50, &c, &r1, msg), 0);
    CHECK(memcmp(&r0.pnl, &r1.pnl, sizeof r0.pnl) == 0 && r0.state_hash == r1.state_hash &&
          r0.commands == r1.commands);
    c.size = offsetof(tf_paper_config, max_inflight);
    CHECK_RC(run(x, 50, &c, &r1, msg), 0);
    c.size = sizeof c;
    c.max_inflight = 0;
    c.engine_url = "unix:/nonexistent/x.sock";
    c.journal_dir = "/tmp";
    CHECK_RC(run(x, 50, &c, &r, msg), TF_E_INVALID_ARG);
    c.journal_dir = NULL;
    CHECK(run(x, 50, &c, &r, msg) < 0 && strstr(msg, "x.sock") != NULL);
    c.engine_url = NULL;
    c.combo[2] = 0;
    CHECK_RC(run(x, 50, &c, &r, msg), TF_E_WINDOW_TOO_SHORT);
    c.combo[2] = TF_STREAM_MAX_WINDOW + 1;
    CHECK_RC(run(x, 50, &c, &r, msg), TF_E_WINDOW_TOO_LONG);
    c.combo[2] = 1;
    x[7] = -2.0;
    CHECK_RC(run(x, 50, &c, &r, msg), TF_E_BAD_INPUT);
    CHECK(strstr(msg, "bar 7") != NULL && strstr(msg, "not a positive price") != NULL);
    x[7] = 100.0;
    c.half_spread = 1000000;
    CHECK_RC(run(x, 50, &c, &r, msg), TF_E_BAD_INPUT);
    CHECK(strstr(msg, "half spread") != NULL);
    c.half_spread = 0;
    tf_progress pg = {.cancel = 1};
    c.progress = &pg;
    CHECK_RC(run(x, 50, &c, &r, msg), TF_E_CANCELLED);
    c.progress = NULL;
    /* a message cut to a small buffer stays terminated */
    x[3] = 0.0;
    char tiny[8];
    memset(tiny, 'x', sizeof tiny);
    CHECK_RC(tf_paper_run(x, 50, &c, &r, tiny, sizeof tiny), TF_E_BAD_INPUT);
    CHECK(tiny[7] == 0);

    int64_t q;
    CHECK_RC(tf_paper_round(1.0, 0.0, &q), TF_E_INVALID_ARG);
    CHECK_RC(tf_paper_round(1.0, 0.01, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_paper_round(0.001, 0.01, &q), TF_E_BAD_INPUT);
    CHECK_RC(tf_paper_round(INFINITY, 0.01, &q), TF_E_BAD_INPUT);
    CHECK_RC(tf_paper_round(1.005, 0.01, &q), 0);
    double t;
    CHECK_RC(tf_paper_tick_from_data(NULL, 3, &t), TF_E_NULL_ARG);
    CHECK_RC(tf_paper_tick_from_data(x, 3, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_paper_tick_from_data(x, -1, &t), TF_E_TOO_MANY_BARS);
    /* prices of decimal ticks divide; others multiply */
    CHECK(tf_paper_price(108123, 1e-5) == 1.08123);
    CHECK(tf_paper_price(7, 0.25) == 1.75);
}

/* tf_paper_format reads both structs under the size rule (docs/api.md): a result shorter than
 * its first layout, a longer one with a byte this library does not know set, and a config below
 * its minimum are refused before anything is written; 0 and a longer struct with a zero tail
 * read as the library's own layout. */
static void format_sizes(const tf_paper_config *c, const tf_paper_result *r)
{
    char want[4096], buf[4096];
    int n = tf_paper_format(c, r, 1, want, sizeof want);
    CHECK(n > 0);
    tf_paper_result shrt = *r;
    shrt.size = offsetof(tf_paper_result, seconds); /* a layout that never was: too short */
    memcpy(buf, "untouched", 10);
    CHECK_RC(tf_paper_format(c, &shrt, 1, buf, sizeof buf), TF_E_INVALID_ARG);
    CHECK(!strcmp(buf, "untouched"));
    shrt.size = sizeof shrt.size;
    CHECK_RC(tf_paper_format(c, &shrt, 0, buf, sizeof buf), TF_E_INVALID_ARG);
    struct {
        tf_paper_result r;
        uint64_t next; /* a field of a newer layout */
    } longer;
    memset(&longer, 0, sizeof longer);
    longer.r = *r;
    longer.r.size = sizeof longer;
    CHECK_EQ(tf_paper_format(c, &longer.r, 1, buf, sizeof buf), n);
    CHECK(!strcmp(buf, want));
    longer.next = 1; /* an option this library would ignore: refused */
    CHECK_RC(tf_paper_format(c, &longer.r, 1, buf, sizeof buf), TF_E_INVALID_ARG);
    tf_paper_result zero = *r;
    zero.size = 0;
    CHECK_EQ(tf_paper_format(c, &zero, 1, buf, sizeof buf), n);
    CHECK(!strcmp(buf, want));
    tf_paper_config cs = *c;
    cs.size = offsetof(tf_paper_config, combo); /* below the config's first layout */
    CHECK_RC(tf_paper_format(&cs, r, 1, buf, sizeof buf), TF_E_INVALID_ARG);
}

static void test_format(void)
{
    double x[400];
    decimal_walk(x, 400, 10000, 20, 2);
    char msg[512], buf[4096];
    tf_paper_config c = {.size = sizeof c, .combo = {3, 1, 1, 2, 1, 1}};
    tf_paper_result r;
    CHECK_RC(run(x, 400, &c, &r, msg), 0);
    int n = tf_paper_format(&c, &r, 1, buf, sizeof buf);
    CHECK(n > 0 && (size_t)n == strlen(buf) && buf[n - 1] == '\n');
    CHECK(strstr(buf, "\"parity\": true") && strstr(buf, "\"tick_source\": \"data\"") &&
          strstr(buf, "\"unrounded_parity\": true") && strstr(buf, "\"state_hash\": \"0x"));
    n = tf_paper_format(&c, &r, 0, buf, sizeof buf);
    CHECK(n > 0 && strstr(buf, "parity against the rounded series: yes") &&
          strstr(buf, "tick   0.01 (from the data") && strstr(buf, "changed no close"));
    /* cut to a small buffer: terminated, and the whole length returned */
    char small[16];
    CHECK_EQ(tf_paper_format(&c, &r, 0, small, sizeof small), n);
    CHECK(strlen(small) == sizeof small - 1);
    CHECK_EQ(tf_paper_format(&c, &r, 0, NULL, 0), n);
    CHECK_RC(tf_paper_format(NULL, &r, 0, buf, sizeof buf), TF_E_NULL_ARG);
    CHECK_RC(tf_paper_format(&c, NULL, 0, buf, sizeof buf), TF_E_NULL_ARG);
    CHECK_RC(tf_paper_format(&c, &r, 0, NULL, 8), TF_E_NULL_ARG);
    format_sizes(&c, &r);
}

/* Every built-in through tf_paper_run: the fills' pnl equals tf_sweep_with's on the rounded
 * series (rounded here), raw bits, in the auction; with a half spread no parity is asked but the
 * kernel figure is still the sweep's; hma by name is HMA with combo; refusals name the combo;
 * an old-size config (no strategy fields) is HMA; the format shows the strategy. */
static void test_strategies(void)
{
    enum { N = 12000 };
    double *x = malloc(sizeof *x * N), *px = malloc(sizeof *px * N);
    random_walk(x, N, 1.2345, 0.0015);
    for (int64_t i = 0; i < N; i++)
        px[i] = nearbyint(x[i] * 1e4) / 1e4;
    static const struct {
        const char *name;
        double p[3];
    } cases[] = {{"sma_cross", {3, 17, 0}}, {"ema_cross", {4, 30, 0}}, {"donchian", {12, 0, 0}},
                 {"donchian", {1, 0, 0}},   {"rsi", {14, 30, 70}},     {"rsi", {3, 45, 55}},
                 {"bollinger", {20, 2, 0}}, {"bollinger", {9, 0.5, 0}}};
    char msg[512];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const tf_strategy_def *def = tf_strategy_builtin(cases[k].name);
        CHECK(def != NULL);
        if (!def)
            continue;
        tf_paper_config c = {.size = sizeof c, .strategy = def, .params = cases[k].p};
        tf_paper_result r;
        CHECK_RC(run(x, N, &c, &r, msg), 0);
        double kp, up;
        int64_t kt, ut;
        tf_sweep_opts so = {.size = sizeof so, .threads = 1};
        CHECK_RC(tf_sweep_with(def, px, N, cases[k].p, 1, &kp, &kt, &so), 0);
        CHECK_RC(tf_sweep_with(def, x, N, cases[k].p, 1, &up, &ut, &so), 0);
        CHECK(tf_test_same_bits(r.pnl, kp) && r.trades == kt);
        CHECK(tf_test_same_bits(r.kernel_pnl, kp) && r.kernel_trades == kt);
        CHECK(tf_test_same_bits(r.stream_pnl, kp) && r.stream_trades == kt);
        CHECK(tf_test_same_bits(r.unrounded_pnl, up) && r.unrounded_trades == ut);
        CHECK(r.parity == 1 && r.trades > 0);
        if (!r.parity)
            fprintf(stderr, "  %s: pnl %.17g trades %lld, sweep %.17g %lld\n", cases[k].name, r.pnl,
                    (long long)r.trades, kp, (long long)kt);
        /* the quoted market: the kernel figure is the strategy's sweep */
        c.half_spread = 2;
        CHECK_RC(run(x, N, &c, &r, msg), 0);
        CHECK(tf_test_same_bits(r.kernel_pnl, kp) && r.kernel_trades == kt);
        CHECK(tf_test_same_bits(r.spread_cost, kp - r.pnl));
    }
    /* hma by name is HMA with combo: the same result, field for field (but the time) */
    const tf_strategy_def *hma = tf_strategy_builtin("hma");
    double hp[6] = {6, 3, 2, 3, 1, 2};
    tf_paper_config a = {.size = sizeof a, .combo = {6, 3, 2, 3, 1, 2}};
    tf_paper_config b = {.size = sizeof b, .strategy = hma, .params = hp};
    tf_paper_result ra, rb;
    CHECK_RC(run(x, N, &a, &ra, msg), 0);
    CHECK_RC(run(x, N, &b, &rb, msg), 0);
    ra.seconds = rb.seconds = 0;
    CHECK(memcmp(&ra, &rb, sizeof ra) == 0);
    hp[2] = 2.5;
    CHECK_RC(run(x, N, &b, &rb, msg), TF_E_INVALID_ARG);
    CHECK(strstr(msg, "hma's sq must be a whole number") != NULL);

    /* a combo init refuses; a def the contract refuses; params missing */
    const tf_strategy_def *sma = tf_strategy_builtin("sma_cross");
    double bad[2] = {20, 5};
    tf_paper_config c = {.size = sizeof c, .strategy = sma, .params = bad};
    CHECK_RC(run(x, N, &c, &rb, msg), TF_E_STRATEGY);
    CHECK(strstr(msg, "fast=20") && strstr(msg, "slow=5"));
    c.params = NULL;
    CHECK_RC(run(x, N, &c, &rb, msg), TF_E_NULL_ARG);
    tf_strategy_def broken = *sma;
    broken.abi = TF_STRATEGY_ABI + 1;
    c = (tf_paper_config){.size = sizeof c, .strategy = &broken, .params = bad};
    CHECK_RC(run(x, N, &c, &rb, msg), TF_E_STRATEGY);
    /* a caller of the layout before the strategy fields: HMA with its combo */
    tf_paper_config old = {.size = offsetof(tf_paper_config, strategy),
                           .combo = {6, 3, 2, 3, 1, 2},
                           .strategy = sma,
                           .params = bad};
    CHECK_RC(run(x, N, &old, &rb, msg), 0);
    rb.seconds = 0;
    CHECK(memcmp(&ra, &rb, sizeof ra) == 0);

    /* the summary names the strategy and its params */
    double sp[2] = {3, 17};
    c = (tf_paper_config){.size = sizeof c, .strategy = sma, .params = sp};
    CHECK_RC(run(x, N, &c, &rb, msg), 0);
    char buf[2048];
    tf_paper_format(&c, &rb, 1, buf, sizeof buf);
    CHECK(strstr(buf, "\"strategy\": \"sma_cross\", \"combo\": [3, 17], ") != NULL);
    tf_paper_format(&c, &rb, 0, buf, sizeof buf);
    const char *head = "paper: sma_cross fast=3,slow=17, 12000 bars, closing auction";
    CHECK(!strncmp(buf, head, strlen(head)));
    free(x);
    free(px);
}

int main(void)
{
    test_strategies();
    test_random_combos_random_walk();
    test_decimal_series();
    test_coarse_tick();
    test_half_spread_and_outputs();
    test_fee();
    test_journal();
    test_errors();
    test_format();
    return tf_test_report();
}

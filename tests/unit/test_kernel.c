/* The kernel gate in C: every fast path (each ISA this CPU runs, 1..4 threads) and the streaming
 * API give exactly the bits of tf_sweep_reference; the default sweep reproduces the published
 * fingerprint; every error return of the kernel API is triggered. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "kernel/kernel_internal.h"
#include "tollfree/kernel.h"

#define N_DEFAULT 150000

static void default_grid(int64_t *params)
{
    for (int64_t j = 0; j < 80; j++)
        CHECK_RC(tf_combo_from_length(6 + (j * 194) / 79, params + 6 * j), 0);
}

/* Known derivations (half to even: L=5 -> round(2.5) = 2, L=7 -> round(3.5) = 4) and errors.
 * python/tests checks the whole range 1..100000 against Python's round(). */
static void test_combo_from_length(void)
{
    static const int64_t want[][6] = {{6, 3, 2, 3, 1, 2},
                                      {5, 2, 2, 2, 1, 1},
                                      {7, 4, 3, 4, 1, 2},
                                      {200, 100, 14, 100, 33, 50},
                                      {30, 15, 5, 15, 5, 8}};
    int64_t c[6];
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        CHECK_RC(tf_combo_from_length(want[k][0], c), 0);
        CHECK(memcmp(c, want[k], sizeof c) == 0);
    }
    CHECK_RC(tf_combo_from_length(1, c), 0);
    CHECK(c[0] == 1 && c[1] == 1 && c[2] == 1 && c[3] == 1 && c[4] == 1 && c[5] == 1);
    CHECK_RC(tf_combo_from_length(0, c), TF_E_WINDOW_TOO_SHORT);
    CHECK_RC(tf_combo_from_length(TF_MAX_WINDOW + 1, c), TF_E_WINDOW_TOO_LONG);
    CHECK_RC(tf_combo_from_length(5, NULL), TF_E_NULL_ARG);
}

/* Fees the statistics gate cycles through: the default, none, a larger one, a rebate. */
static const double gate_fees[] = {TF_FEE_DEFAULT, 0.0, 0.25, -0.01};
static int gate_fee_turn;

/* Every output (tf_stats rows) with a fee on every path equals the reference's rows, raw bits. */
static void check_stats_paths(const double *close, int64_t n, const int64_t *params, int64_t m,
                              const char *what)
{
    double fee = gate_fees[gate_fee_turn++ % 4];
    size_t rows = sizeof(tf_stats) * (size_t)(m + 1);
    tf_stats *want = malloc(rows), *got = malloc(rows);
    double *pr = malloc(sizeof(double) * (size_t)(m + 1)),
           *pf = malloc(sizeof(double) * (size_t)(m + 1));
    int64_t *tr = malloc(sizeof(int64_t) * (size_t)(m + 1)),
            *tf = malloc(sizeof(int64_t) * (size_t)(m + 1));
    memset(want, 0x5A, rows);
    tf_sweep_opts ro = {.fee = &fee, .stats = want};
    CHECK_RC(tf_sweep_reference(close, n, params, m, pr, tr, &ro), 0);
    int bad = 0;
    for (int64_t j = 0; j < m; j++)
        if (memcmp(&want[j].pnl, &pr[j], sizeof(double)) || want[j].trades != tr[j])
            bad++;
    for (int isa = TF_ISA_AUTO; isa <= TF_ISA_AVX512; isa++) {
        if (!tf_isa_supported((tf_isa)isa))
            continue;
        for (int threads = 1; threads <= 3; threads += 2) {
            tf_sweep_opts o = {.threads = threads, .isa = (tf_isa)isa, .fee = &fee, .stats = got};
            memset(got, 0xA5, rows);
            CHECK_RC(tf_sweep(close, n, params, m, pf, tf, &o), 0);
            if (memcmp(got, want, sizeof(tf_stats) * (size_t)m) ||
                memcmp(pf, pr, sizeof(double) * (size_t)m)) {
                bad++;
                fprintf(stderr, "%s: statistics (fee %g) %s x %d threads differ\n", what, fee,
                        tf_isa_name((tf_isa)isa), threads);
            }
        }
    }
    tf_series *ser = NULL;
    if (n > 0 && tf_series_open(&ser, close, n, (size_t)1 << 30) == 0) {
        for (int round = 0; round < 2; round++) {
            tf_sweep_opts o = {.fee = &fee, .stats = got};
            memset(got, 0xA5, rows);
            CHECK_RC(tf_series_sweep(ser, params, m, pf, tf, &o), 0);
            if (memcmp(got, want, sizeof(tf_stats) * (size_t)m)) {
                bad++;
                fprintf(stderr, "%s: series statistics (fee %g, round %d) differ\n", what, fee,
                        round);
            }
        }
        tf_series_close(ser);
    }
    for (int64_t j = 0; j < m; j++) {
        tf_strategy *s = NULL;
        if (tf_strategy_open(&s, params + 6 * j))
            continue;
        CHECK_RC(tf_strategy_set_fee(s, fee), 0);
        for (int64_t i = 0; i < n; i++)
            tf_strategy_step(s, close[i]);
        tf_stats row;
        memset(&row, 0xA5, sizeof row);
        CHECK_RC(tf_strategy_stats(s, &row), 0);
        if (memcmp(&row, &want[j], sizeof row)) {
            bad++;
            fprintf(stderr, "%s: streaming statistics of combo %lld (fee %g) differ\n", what,
                    (long long)j, fee);
        }
        tf_strategy_close(s);
    }
    CHECK_EQ(bad, 0);
    free(want);
    free(got);
    free(pr);
    free(pf);
    free(tr);
    free(tf);
}

static void check_paths(const double *close, int64_t n, const int64_t *params, int64_t m,
                        const char *what)
{
    check_stats_paths(close, n, params, m, what);
    double *pr = malloc(sizeof(double) * (size_t)(m + 1));
    double *pf = malloc(sizeof(double) * (size_t)(m + 1));
    int64_t *tr = malloc(sizeof(int64_t) * (size_t)(m + 1));
    int64_t *tf = malloc(sizeof(int64_t) * (size_t)(m + 1));
    CHECK_RC(tf_sweep_reference(close, n, params, m, pr, tr, NULL), 0);
    int bad = 0;
    for (int isa = TF_ISA_AUTO; isa <= TF_ISA_AVX512; isa++) {
        if (!tf_isa_supported((tf_isa)isa))
            continue;
        for (int threads = 1; threads <= 4; threads++) {
            tf_sweep_opts o = {.threads = threads, .isa = (tf_isa)isa};
            memset(pf, 0xA5, sizeof(double) * (size_t)m);
            memset(tf, 0xA5, sizeof(int64_t) * (size_t)m);
            CHECK_RC(tf_sweep(close, n, params, m, pf, tf, &o), 0);
            if (memcmp(pr, pf, sizeof(double) * (size_t)m) ||
                memcmp(tr, tf, sizeof(int64_t) * (size_t)m)) {
                bad++;
                fprintf(stderr, "%s: %s x %d threads differs from the reference\n", what,
                        tf_isa_name((tf_isa)isa), threads);
            }
        }
    }
    CHECK_EQ(bad, 0);
    /* A prepared series: filling its cache, then reading it; all rows, and about half. */
    size_t budgets[2] = {(size_t)1 << 32, (size_t)n * 8 * 3 * (size_t)(m / 2 + 1)};
    for (int k = 0; k < 2 && n > 0; k++) {
        tf_series *ser = NULL;
        CHECK_RC(tf_series_open(&ser, close, n, budgets[k]), 0);
        for (int round = 0; ser && round < 2; round++) {
            memset(pf, 0xA5, sizeof(double) * (size_t)m);
            CHECK_RC(tf_series_sweep(ser, params, m, pf, tf, NULL), 0);
            if (memcmp(pr, pf, sizeof(double) * (size_t)m) ||
                memcmp(tr, tf, sizeof(int64_t) * (size_t)m)) {
                bad++;
                fprintf(stderr, "%s: series sweep (budget %d, round %d) differs\n", what, k, round);
            }
        }
        tf_series_close(ser);
    }
    CHECK_EQ(bad, 0);
    /* Streaming, combo by combo. */
    for (int64_t j = 0; j < m; j++) {
        tf_strategy *s = NULL;
        int rc = tf_strategy_open(&s, params + 6 * j);
        if (rc == TF_E_WINDOW_TOO_LONG)
            continue; /* the streaming limit is lower; checked separately */
        CHECK_RC(rc, 0);
        if (!s)
            continue;
        for (int64_t i = 0; i < n; i++)
            tf_strategy_step(s, close[i]);
        double p = tf_strategy_pnl(s);
        int64_t t = tf_strategy_trades(s);
        if (memcmp(&p, &pr[j], sizeof p) || t != tr[j]) {
            bad++;
            fprintf(stderr, "%s: streaming combo %lld differs (%.17g/%lld vs %.17g/%lld)\n", what,
                    (long long)j, p, (long long)t, pr[j], (long long)tr[j]);
        }
        /* reset replays to the same bits */
        tf_strategy_reset(s);
        for (int64_t i = 0; i < n; i++)
            tf_strategy_step(s, close[i]);
        double p2 = tf_strategy_pnl(s);
        CHECK(memcmp(&p, &p2, sizeof p) == 0 && tf_strategy_trades(s) == t);
        tf_strategy_close(s);
    }
    CHECK_EQ(bad, 0);
    free(pr);
    free(pf);
    free(tr);
    free(tf);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double rnd_unit(void)
{
    return (double)(rnd() >> 11) / 9007199254740992.0;
}

static void test_default(const double *close)
{
    int64_t params[80 * 6];
    default_grid(params);
    /* The grid's first and last combos as docs/definition.md section 2 gives them. */
    const int64_t first[6] = {6, 3, 2, 3, 1, 2}, last[6] = {200, 100, 14, 100, 33, 50};
    CHECK(memcmp(params, first, sizeof first) == 0);
    CHECK(memcmp(params + 79 * 6, last, sizeof last) == 0);

    double pnl;
    int64_t trades;
    CHECK_RC(tf_sweep(close, N_DEFAULT, params, 1, &pnl, &trades, NULL), 0);
    char buf[64];
    snprintf(buf, sizeof buf, "%.2f", pnl);
    CHECK(strcmp(buf, "-5165.58") == 0);
    snprintf(buf, sizeof buf, "%.4f", pnl);
    CHECK(strcmp(buf, "-5165.5844") == 0);
    CHECK_EQ(trades, 57029);

#if defined(__SANITIZE_ADDRESS__)
    /* Unoptimized sanitizer build: a slice of the grid keeps the run short; the release build
     * checks all 80 combos. */
    int64_t m = 6;
#else
    int64_t m = 80;
#endif
    check_paths(close, N_DEFAULT, params, m, "default sweep");
}

static void test_random(void)
{
    static const int64_t counts[] = {0, 1, 7, 257};
    for (int round = 0; round < 12; round++) {
        int64_t n = (int64_t)(rnd() % 3000);
        if (round == 0)
            n = 0;
        if (round == 1)
            n = 5; /* shorter than most windows */
        double *c = malloc(sizeof(double) * (size_t)(n + 1));
        double x = 100.0;
        for (int64_t i = 0; i < n; i++) {
            x *= exp((rnd_unit() - 0.5) * 0.01);
            c[i] = x;
        }
        if (n > 50 && round % 3 == 2) {
            c[n / 3] = NAN;
            c[n / 2] = INFINITY;
            c[n / 2 + 7] = -INFINITY;
        }
        int64_t m = counts[round % 4];
        if (m == 257 && n > 1000)
            n = 1000; /* keep the reference quick */
        int64_t *p = malloc(sizeof(int64_t) * 6 * (size_t)(m + 1));
        for (int64_t k = 0; k < 6 * m; k++) {
            uint64_t r = rnd() % 100;
            p[k] = r < 10 ? 1 : r < 20 ? (int64_t)(rnd() % 1000) + 1 : (int64_t)(rnd() % 60) + 1;
        }
        if (m >= 1 && round == 4)
            p[0] = n + 10; /* longer than the series */
        char what[64];
        snprintf(what, sizeof what, "random round %d (n=%lld m=%lld)", round, (long long)n,
                 (long long)m);
        check_paths(c, n, p, m, what);
        free(c);
        free(p);
    }
}

/* One random window length: mostly short, some 1, some up to 1000, and (long series only) some
 * up to 5000, longer than a time block's slice, so both first-stage methods run. */
static int64_t rnd_len(int64_t n)
{
    uint64_t r = rnd() % 100;
    if (r < 10)
        return 1;
    if (r < 18)
        return (int64_t)(rnd() % 1000) + 1;
    if (r < 21 && n > 5000)
        return (int64_t)(rnd() % 5000) + 1;
    return (int64_t)(rnd() % 60) + 1;
}

/* Random grids as a service sees them: duplicate combos (computed once, answered per row),
 * combos sharing an inner series (p, p3, p2) or an HMA (L, half, sq), lengths 1..1000 (some
 * to 5000), series shorter than the windows, spanning several time blocks, NaN and +-inf. */
static void test_random_grids(void)
{
#if defined(__SANITIZE_ADDRESS__)
    const int rounds = 10;
#else
    const int rounds = 48;
#endif
    for (int round = 0; round < rounds; round++) {
        int kind = round % 4;
        int64_t n = kind == 0   ? (int64_t)(rnd() % 300)
                    : kind == 1 ? 9000 + (int64_t)(rnd() % 12000)
                                : (int64_t)(rnd() % 5000);
        int64_t m = kind == 1 ? 1 + (int64_t)(rnd() % 6) : 1 + (int64_t)(rnd() % 40);
        double *c = malloc(sizeof(double) * (size_t)(n + 1));
        double x = 100.0;
        for (int64_t i = 0; i < n; i++) {
            x *= exp((rnd_unit() - 0.5) * 0.01);
            c[i] = x;
        }
        for (int k = 0; n > 0 && round % 3 == 0 && k < 3; k++) {
            int64_t at = (int64_t)(rnd() % (uint64_t)n);
            c[at] = k == 0 ? NAN : k == 1 ? INFINITY : -INFINITY;
        }
        int64_t *p = malloc(sizeof(int64_t) * 6 * (size_t)m);
        for (int64_t j = 0; j < m; j++) {
            int64_t *q = p + 6 * j;
            for (int k = 0; k < 6; k++)
                q[k] = rnd_len(n);
            const int64_t *src = p + 6 * (int64_t)(rnd() % (uint64_t)(j + 1));
            /* kind 3, odd rounds: every combo shares one inner series (large, split groups) */
            uint64_t r = j == 0 ? 3 : kind == 3 && round % 2 ? 1 : rnd() % 4;
            if (r == 0) /* a duplicate combo */
                memcpy(q, src, 6 * sizeof(int64_t));
            else if (r == 1) /* the same inner series */
                q[TF_P_P] = src[TF_P_P], q[TF_P_P3] = src[TF_P_P3], q[TF_P_P2] = src[TF_P_P2];
            else if (r == 2) /* the same HMA */
                q[TF_P_L] = src[TF_P_L], q[TF_P_HALF] = src[TF_P_HALF], q[TF_P_SQ] = src[TF_P_SQ];
        }
        char what[80];
        snprintf(what, sizeof what, "random grid %d (n=%lld m=%lld)", round, (long long)n,
                 (long long)m);
        check_paths(c, n, p, m, what);
        free(c);
        free(p);
    }
}

static void test_errors(void)
{
    double close[4] = {1, 2, 3, 4}, pnl[2] = {7.0, 7.0};
    int64_t trades[2] = {9, 9};
    int64_t good[6] = {2, 1, 1, 1, 1, 1}, zero[6] = {2, 1, 0, 1, 1, 1};
    int64_t huge[6] = {2, 1, 1, TF_MAX_WINDOW + 1, 1, 1}, neg[6] = {-5, 1, 1, 1, 1, 1};

    CHECK_RC(tf_sweep(close, 4, zero, 1, pnl, trades, NULL), TF_E_WINDOW_TOO_SHORT);
    CHECK_RC(tf_sweep(close, 4, neg, 1, pnl, trades, NULL), TF_E_WINDOW_TOO_SHORT);
    CHECK_RC(tf_sweep(close, 4, huge, 1, pnl, trades, NULL), TF_E_WINDOW_TOO_LONG);
    CHECK_RC(tf_sweep_reference(close, 4, huge, 1, pnl, trades, NULL), TF_E_WINDOW_TOO_LONG);
    CHECK_RC(tf_sweep(close, -1, good, 1, pnl, trades, NULL), TF_E_TOO_MANY_BARS);
    CHECK_RC(tf_sweep(close, TF_MAX_BARS + 1, good, 1, pnl, trades, NULL), TF_E_TOO_MANY_BARS);
    CHECK_RC(tf_sweep(close, 4, good, -1, pnl, trades, NULL), TF_E_TOO_MANY_COMBOS);
    CHECK_RC(tf_sweep(NULL, 4, good, 1, pnl, trades, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_sweep(close, 4, NULL, 1, pnl, trades, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_sweep(close, 4, good, 1, NULL, trades, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_sweep(close, 4, good, 1, pnl, NULL, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_sweep_reference(NULL, 4, good, 1, pnl, trades, NULL), TF_E_NULL_ARG);
    tf_sweep_opts bad_threads = {.threads = -1}, bad_isa = {.threads = 1, .isa = (tf_isa)99};
    CHECK_RC(tf_sweep(close, 4, good, 1, pnl, trades, &bad_threads), TF_E_THREADS);
    bad_threads.threads = TF_MAX_THREADS + 1;
    CHECK_RC(tf_sweep(close, 4, good, 1, pnl, trades, &bad_threads), TF_E_THREADS);
    CHECK_RC(tf_sweep(close, 4, good, 1, pnl, trades, &bad_isa), TF_E_INVALID_ARG);
    for (int isa = TF_ISA_SCALAR; isa <= TF_ISA_AVX512; isa++) {
        tf_sweep_opts o = {.threads = 1, .isa = (tf_isa)isa};
        int want = tf_isa_supported((tf_isa)isa) ? 0 : TF_E_ISA_UNAVAILABLE;
        CHECK_RC(tf_sweep(close, 4, good, 1, pnl, trades, &o), want);
    }
    /* A memory budget is checked before anything is allocated. */
    tf_sweep_opts tight = {.threads = 1, .max_bytes = 1000};
    CHECK_RC(tf_sweep(close, 4, good, 1, pnl, trades, &tight), TF_E_LIMIT);
    tight.max_bytes = (size_t)64 << 20;
    CHECK_RC(tf_sweep(close, 4, good, 1, pnl, trades, &tight), 0);
    pnl[1] = 7.0;
    trades[1] = 9;
    /* outputs untouched by every failed call above */
    CHECK(pnl[1] == 7.0 && trades[1] == 9);
    /* zero counts are not errors; NULL is fine with a zero count */
    CHECK_RC(tf_sweep(NULL, 0, NULL, 0, NULL, NULL, NULL), 0);
    CHECK_RC(tf_sweep(close, 4, NULL, 0, NULL, NULL, NULL), 0);
    CHECK_RC(tf_sweep(NULL, 0, good, 1, pnl, trades, NULL), 0);
    CHECK(pnl[0] == 0.0 && trades[0] == 0);
    CHECK_RC(tf_params_check(good, 1), 0);
    CHECK_RC(tf_params_check(NULL, 1), TF_E_NULL_ARG);

    tf_strategy *s = (tf_strategy *)1;
    int64_t slong[6] = {TF_STREAM_MAX_WINDOW + 1, 1, 1, 1, 1, 1};
    CHECK_RC(tf_strategy_open(&s, zero), TF_E_WINDOW_TOO_SHORT);
    CHECK_RC(tf_strategy_open(&s, slong), TF_E_WINDOW_TOO_LONG);
    CHECK_RC(tf_strategy_open(&s, NULL), TF_E_NULL_ARG);
    CHECK_RC(tf_strategy_open(NULL, good), TF_E_NULL_ARG);
    CHECK(s == (tf_strategy *)1);
    CHECK(tf_strategy_footprint(zero) == 0);
    CHECK(tf_strategy_footprint(good) > 0);
    tf_strategy_close(NULL);

    tf_isa isa;
    CHECK_RC(tf_isa_parse("avx2", &isa), 0);
    CHECK_EQ(isa, TF_ISA_AVX2);
    CHECK_RC(tf_isa_parse("mmx", &isa), TF_E_INVALID_ARG);
    CHECK_RC(tf_isa_parse(NULL, &isa), TF_E_NULL_ARG);
    CHECK(strcmp(tf_isa_name((tf_isa)42), "unknown") == 0);
    CHECK(strcmp(tf_strerror(TF_E_WINDOW_TOO_SHORT), "window length must be >= 1") == 0);
    CHECK(strcmp(tf_strerror(-2), "No such file or directory") == 0);
    CHECK(strcmp(tf_strerror(-999999), "unknown error code") == 0);
}

/* Length 1 everywhere (WMA is the identity) and a grid with repeated combos. */
static void test_small_windows(void)
{
    double c[300];
    for (int i = 0; i < 300; i++)
        c[i] = 100.0 + sin(i * 0.3) + 0.01 * i;
    int64_t p[4 * 6] = {1, 1, 1, 1, 1, 1, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 6, 3, 2, 3, 1, 2};
    check_paths(c, 300, p, 4, "small windows");
}

/* A prepared series gives tf_sweep's bits whatever its cache holds: empty, partial, full, and
 * with two threads sweeping it at once. */
typedef struct series_job {
    tf_series *s;
    const int64_t *params;
    int64_t m;
    double pnl[80];
    int64_t trades[80];
    int rc;
} series_job;

static void *series_worker(void *arg)
{
    series_job *j = arg;
    tf_sweep_opts o = {.threads = 1};
    j->rc = 0;
    for (int64_t k = 0; k < j->m && !j->rc; k++) /* one-combo calls, the chatty pattern */
        j->rc = tf_series_sweep(j->s, j->params + 6 * k, 1, &j->pnl[k], &j->trades[k], &o);
    return NULL;
}

static void test_series(const double *close)
{
    int64_t params[80 * 6];
    default_grid(params);
    const int64_t n = 30000, m = 80; /* a prefix keeps this quick under the sanitizers */
    double want_p[80], got_p[80];
    int64_t want_t[80], got_t[80];
    CHECK_RC(tf_sweep(close, n, params, m, want_p, want_t, NULL), 0);
    size_t budgets[] = {0, 20 * (size_t)n * 8, (size_t)1 << 30};
    for (int b = 0; b < 3; b++) {
        tf_series *s = NULL;
        CHECK_RC(tf_series_open(&s, close, n, budgets[b]), 0);
        if (!s)
            continue;
        for (int round = 0; round < 2; round++) {
            memset(got_p, 0, sizeof got_p);
            CHECK_RC(tf_series_sweep(s, params, m, got_p, got_t, NULL), 0);
            CHECK_BITS(got_p, want_p, sizeof want_p);
            CHECK_BITS(got_t, want_t, sizeof want_t);
        }
        size_t cached = tf_series_cached_bytes(s);
        CHECK(cached <= budgets[b]);
        CHECK(b == 0 ? cached == 0 : cached > 0);
        series_job jobs[2] = {{.s = s, .params = params, .m = m},
                              {.s = s, .params = params, .m = m}};
        pthread_t tid[2];
        for (int k = 0; k < 2; k++)
            pthread_create(&tid[k], NULL, series_worker, &jobs[k]);
        for (int k = 0; k < 2; k++) {
            pthread_join(tid[k], NULL);
            CHECK_RC(jobs[k].rc, 0);
            CHECK_BITS(jobs[k].pnl, want_p, sizeof want_p);
            CHECK_BITS(jobs[k].trades, want_t, sizeof want_t);
        }
        int64_t bad[6] = {6, 3, 0, 3, 1, 2};
        CHECK_RC(tf_series_sweep(s, bad, 1, got_p, got_t, NULL), TF_E_WINDOW_TOO_SHORT);
        tf_series_close(s);
    }
    tf_series *s = (tf_series *)1;
    CHECK_RC(tf_series_open(&s, NULL, 5, 0), TF_E_NULL_ARG);
    CHECK_RC(tf_series_open(&s, close, -1, 0), TF_E_TOO_MANY_BARS);
    CHECK_RC(tf_series_open(NULL, close, 5, 0), TF_E_NULL_ARG);
    CHECK(s == (tf_series *)1);
    CHECK_RC(tf_series_sweep(NULL, params, 1, got_p, got_t, NULL), TF_E_NULL_ARG);
    tf_series_close(NULL);
}

/* Why this process cannot run a path: the CPU lacks it, or TF_ISA_MAX caps it away. */
static const char *why_not(tf_isa isa)
{
#if defined(__x86_64__)
    const char *feature = isa == TF_ISA_AVX512 ? "avx512f" : isa == TF_ISA_AVX2 ? "avx2" : NULL;
    int cpu = isa == TF_ISA_AVX512 ? __builtin_cpu_supports("avx512f")
              : isa == TF_ISA_AVX2 ? __builtin_cpu_supports("avx2")
                                   : 1;
    static char buf[96];
    if (cpu) {
        const char *cap = getenv("TF_ISA_MAX");
        snprintf(buf, sizeof buf, "capped by TF_ISA_MAX=%s", cap ? cap : "");
    } else {
        snprintf(buf, sizeof buf, "no %s", feature ? feature : "support");
    }
    return buf;
#else
    (void)isa;
    return "not an x86-64 build";
#endif
}

/* A green gate must say which paths it did not exercise here (an AVX2-only CPU never runs the
 * AVX-512 path): one line each, on stdout, where ctest -V and the test log show it. */
static void report_unexercised(void)
{
    static const char *const label[] = {"", "scalar", "SSE2", "AVX2", "AVX-512"};
    int missing = 0;
    for (int isa = TF_ISA_SCALAR; isa <= TF_ISA_AVX512; isa++) {
        if (!tf_isa_supported((tf_isa)isa)) {
            missing++;
            printf("gate: %s path not exercised on this CPU (%s)\n", label[isa],
                   why_not((tf_isa)isa));
        }
    }
    if (!missing)
        printf("gate: every ISA path exercised (scalar, SSE2, AVX2, AVX-512)\n");
}

/* In a child exec'ed with TF_ISA_MAX=avx2 (the cap is read once per process): AVX-512 is
 * refused, AUTO picks AVX2 where the CPU has it, and AUTO gives the reference's bits. */
static int isa_max_child(void)
{
    CHECK(!tf_isa_supported(TF_ISA_AVX512));
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) {
        CHECK(tf_isa_supported(TF_ISA_AVX2));
        CHECK_EQ(tf_isa_best(), TF_ISA_AVX2);
    }
#endif
    double c[4] = {1, 2, 3, 4}, pnl[80], ref_p[80];
    int64_t trades[80], ref_t[80], good[6] = {2, 1, 1, 1, 1, 1};
    tf_sweep_opts forced = {.threads = 1, .isa = TF_ISA_AVX512};
    CHECK_RC(tf_sweep(c, 4, good, 1, pnl, trades, &forced), TF_E_ISA_UNAVAILABLE);

    double *close = tf_test_default_close();
    CHECK(close != NULL);
    if (close) {
        int64_t params[80 * 6];
        default_grid(params);
        const int64_t n = 30000; /* a prefix keeps this quick under the sanitizers */
        CHECK_RC(tf_sweep_reference(close, n, params, 80, ref_p, ref_t, NULL), 0);
        for (int threads = 1; threads <= 2; threads++) {
            tf_sweep_opts o = {.threads = threads, .isa = TF_ISA_AUTO};
            CHECK_RC(tf_sweep(close, n, params, 80, pnl, trades, &o), 0);
            CHECK_BITS(pnl, ref_p, sizeof ref_p);
            CHECK_BITS(trades, ref_t, sizeof ref_t);
        }
    }
    free(close);
    printf("isa-max child: ");
    return tf_test_report();
}

static void test_isa_max(const char *self)
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        setenv("TF_ISA_MAX", "avx2", 1);
        execl("/proc/self/exe", self, "--isa-max-child", (char *)NULL);
        perror("exec /proc/self/exe");
        _exit(127);
    }
    if (pid < 0)
        return;
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The statistics worked by hand on a forced signal: long 100 -> 110 (+10), short 110 -> 121
 * (-10), long 121 -> 133.1 (+10, up to rounding), with fee 0; bars 0 and 1 have no line. */
static void test_stats_by_hand(void)
{
    const double f[] = {NAN, 1.0, 1.0, 0.0, 2.0, 0.0, 5.0};
    const double s[] = {0.0, NAN, 0.0, 1.0, 1.0, 1.0, 5.0};
    const double c[] = {99.0, 98.0, 100.0, 110.0, 121.0, 133.1, 140.0};
    tfk_sar st = tfk_sar_start(0.0);
    tfk_sar_extra x = tfk_sar_extra_start();
    for (int64_t i = 0; i < 7; i++)
        tfk_sar_step(&st, &x, f[i], s[i], c[i], i);
    tf_stats o;
    tfk_sar_output(&st, &x, 7, &o);
    double r1 = 10.0, r2 = -10.0, r3 = 1.0 * (133.1 - 121.0) / 121.0 * 100.0;
    CHECK(o.trades == 3 && o.wins == 2 && o.exposure_bars == 5);
    CHECK(fabs(o.pnl - (r1 + r2 + r3)) < 1e-12);
    CHECK(fabs(o.gross_win - (r1 + r3)) < 1e-12 && fabs(o.gross_loss - r2) < 1e-12);
    CHECK(o.best == (r1 > r3 ? r1 : r3) || fabs(o.best - r1) < 1e-12);
    CHECK(fabs(o.worst - r2) < 1e-12 && o.worst == o.gross_loss);
    double mean = (r1 + r2 + r3) / 3.0;
    double m2 = (r1 - mean) * (r1 - mean) + (r2 - mean) * (r2 - mean) + (r3 - mean) * (r3 - mean);
    CHECK(fabs(o.mean - mean) < 1e-12 && fabs(o.m2 - m2) < 1e-9);
    CHECK(fabs(o.max_dd - 10.0) < 1e-12); /* the peak 10 after trade 1, pnl 0 after trade 2 */
    /* No trade: every statistic 0, exposure counts from the open. */
    tfk_sar st0 = tfk_sar_start(TF_FEE_DEFAULT);
    tfk_sar_extra x0 = tfk_sar_extra_start();
    tfk_sar_step(&st0, &x0, 1.0, 0.0, 50.0, 3);
    tfk_sar_output(&st0, &x0, 10, &o);
    CHECK(o.trades == 0 && o.wins == 0 && o.best == 0.0 && o.worst == 0.0 && o.max_dd == 0.0);
    CHECK(o.exposure_bars == 7);
    /* Options: a bad size, unknown non-zero tail bytes, a non-finite fee. */
    double cl[4] = {1, 2, 3, 4}, pnl[1];
    int64_t good[6] = {1, 1, 1, 1, 1, 1}, trades[1];
    tf_sweep_opts small = {.size = 4};
    CHECK_RC(tf_sweep(cl, 4, good, 1, pnl, trades, &small), TF_E_INVALID_ARG);
    double inf = INFINITY;
    tf_sweep_opts bad_fee = {.fee = &inf};
    CHECK_RC(tf_sweep(cl, 4, good, 1, pnl, trades, &bad_fee), TF_E_INVALID_ARG);
    CHECK_RC(tf_sweep_reference(cl, 4, good, 1, pnl, trades, &bad_fee), TF_E_INVALID_ARG);
    struct {
        tf_sweep_opts o;
        uint64_t future;
    } longer = {{.size = sizeof longer}, 0};
    CHECK_RC(tf_sweep(cl, 4, good, 1, pnl, trades, &longer.o), 0);
    longer.future = 1;
    CHECK_RC(tf_sweep(cl, 4, good, 1, pnl, trades, &longer.o), TF_E_INVALID_ARG);
    /* An older caller's layout: up to max_bytes only, so no fee, stats or progress. */
    tf_sweep_opts v1 = {.size = offsetof(tf_sweep_opts, max_bytes) + sizeof(size_t), .threads = 1};
    CHECK_RC(tf_sweep(cl, 4, good, 1, pnl, trades, &v1), 0);
    tf_strategy *sg = NULL;
    CHECK_RC(tf_strategy_open(&sg, good), 0);
    CHECK_RC(tf_strategy_set_fee(sg, NAN), TF_E_INVALID_ARG);
    tf_strategy_step(sg, 1.0);
    CHECK_RC(tf_strategy_set_fee(sg, 0.0), TF_E_INVALID_ARG); /* after a bar */
    tf_strategy_reset(sg);
    CHECK_RC(tf_strategy_set_fee(sg, 0.0), 0);
    tf_strategy_close(sg);
    CHECK_RC(tf_strategy_step(NULL, 1.0), TF_E_NULL_ARG);
    CHECK_RC(tf_strategy_stats(NULL, &o), TF_E_NULL_ARG);
    CHECK_RC(tf_strategy_set_fee(NULL, 0.0), TF_E_NULL_ARG);
    CHECK(tf_strategy_pnl(NULL) == 0.0 && tf_strategy_trades(NULL) == 0);
    tf_strategy_reset(NULL);
}

/* Progress counts every unit once; a cancel set before the start stops the sweep with
 * TF_E_CANCELLED and leaves the outputs untouched. */
static void test_progress(const double *close)
{
    int64_t params[80 * 6];
    default_grid(params);
    double pnl[80];
    int64_t trades[80];
    tf_progress pg = {0};
    tf_sweep_opts o = {.threads = 2, .progress = &pg};
    CHECK_RC(tf_sweep(close, N_DEFAULT, params, 80, pnl, trades, &o), 0);
    int64_t done = -1, total = -1;
    tf_progress_read(&pg, &done, &total);
    CHECK(total > 0 && done == total);
    tf_progress stop = {0};
    tf_progress_cancel(&stop);
    o.progress = &stop;
    memset(pnl, 0x5A, sizeof pnl);
    CHECK_RC(tf_sweep(close, N_DEFAULT, params, 80, pnl, trades, &o), TF_E_CANCELLED);
    uint64_t first;
    memcpy(&first, pnl, sizeof first);
    CHECK(first == 0x5A5A5A5A5A5A5A5Aull);
    tf_progress_read(&stop, &done, NULL);
    CHECK(done == 0);
    tf_progress_cancel(NULL);
    tf_progress_read(NULL, &done, &total);
    CHECK(done == 0 && total == 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--isa-max-child"))
        return isa_max_child();
    double *close = tf_test_default_close();
    CHECK(close != NULL);
    if (close) {
        test_default(close);
        test_series(close);
        test_progress(close);
    }
    free(close);
    test_combo_from_length();
    test_stats_by_hand();
    test_random();
    test_random_grids();
    test_errors();
    test_small_windows();
    test_isa_max(argv[0]);
    report_unexercised();
    return tf_test_report();
}

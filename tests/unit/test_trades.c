/* Trade lists (tf_trades_list) against the sweep, one for one, for HMA and every built-in; the
 * anchored folds; the warmed-up walk-forward (tf_oos_opts.warmup) against a model written here
 * from the streaming handle's positions and the booking line of docs/definition.md. */
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

/* A random valid combo of def (built-ins: whole windows; the rules of docs/strategies.md). */
static void random_params(const tf_strategy_def *def, double *p)
{
    const char *n = def->name;
    int a = 2 + (int)(tf_test_uniform(&rng) * 20), b = a + 1 + (int)(tf_test_uniform(&rng) * 60);
    if (!strcmp(n, "hma")) {
        int64_t w[6];
        tf_combo_from_length(4 + (int64_t)(tf_test_uniform(&rng) * 80), w);
        for (int k = 0; k < 6; k++)
            p[k] = (double)w[k];
    } else if (!strcmp(n, "sma_cross") || !strcmp(n, "ema_cross")) {
        p[0] = a;
        p[1] = b;
    } else if (!strcmp(n, "donchian")) {
        p[0] = a;
    } else if (!strcmp(n, "rsi")) {
        p[0] = a;
        p[1] = 20 + (int)(tf_test_uniform(&rng) * 15);
        p[2] = 65 + (int)(tf_test_uniform(&rng) * 15);
    } else if (!strcmp(n, "bollinger")) {
        p[0] = a;
        p[1] = 1.0 + 0.5 * (int)(tf_test_uniform(&rng) * 4);
    }
}

/* One combo: the trade list against tf_sweep_with (and tf_sweep for hma) with statistics. */
static void check_combo(const tf_strategy_def *def, const double *p, const double *close, int64_t n,
                        double fee)
{
    static tf_trade tr[20000];
    tf_stats st, sw;
    double pnl;
    int64_t trades;
    char msg[256];
    tf_sweep_opts o = {.size = sizeof o, .threads = 1, .fee = &fee, .stats = &sw};
    CHECK_RC(tf_sweep_with(def, close, n, p, 1, &pnl, &trades, &o), 0);
    int64_t rows = tf_trades_list(def, p, close, n, fee, tr, 20000, &st, msg, sizeof msg);
    CHECK(rows >= 0 && rows <= 20000);
    if (rows < 0 || rows > 20000)
        return;
    CHECK_EQ(tf_trades_list(def, p, close, n, fee, NULL, 0, NULL, msg, sizeof msg), rows);
    CHECK_BITS(&st, &sw, sizeof st);
    int64_t closed = rows && tr[rows - 1].open ? rows - 1 : rows;
    CHECK_EQ(closed, trades);
    double sum = 0.0, best = 0.0, worst = 0.0;
    int64_t wins = 0;
    for (int64_t k = 0; k < closed; k++) {
        const tf_trade *t = &tr[k];
        sum += t->ret;
        wins += t->ret > 0.0;
        best = k == 0 || t->ret > best ? t->ret : best;
        worst = k == 0 || t->ret < worst ? t->ret : worst;
        CHECK(!t->open && t->entry_bar < t->exit_bar && t->exit_bar < n);
        CHECK(t->direction == 1 || t->direction == -1);
        CHECK(tf_test_same_bits(t->entry_price, close[t->entry_bar]));
        CHECK(tf_test_same_bits(t->exit_price, close[t->exit_bar]));
        if (k > 0)
            CHECK(t->entry_bar >= tr[k - 1].exit_bar);
    }
    CHECK(tf_test_same_bits(sum, pnl));
    CHECK_EQ(wins, sw.wins);
    CHECK(tf_test_same_bits(best, sw.best) && tf_test_same_bits(worst, sw.worst));
    if (rows > closed) { /* the open position: to the last bar, in no figure */
        const tf_trade *t = &tr[rows - 1];
        CHECK(t->exit_bar == n - 1 && tf_test_same_bits(t->exit_price, close[n - 1]));
        double r =
            (double)t->direction * (t->exit_price - t->entry_price) / t->entry_price * 100.0 - fee;
        CHECK(tf_test_same_bits(t->ret, r));
    }
    if (!strcmp(def->name, "hma")) {
        int64_t w[6];
        double hp;
        int64_t ht;
        tf_stats hs;
        for (int k = 0; k < 6; k++)
            w[k] = (int64_t)p[k];
        tf_sweep_opts ho = {.size = sizeof ho, .threads = 1, .fee = &fee, .stats = &hs};
        CHECK_RC(tf_sweep(close, n, w, 1, &hp, &ht, &ho), 0);
        CHECK(tf_test_same_bits(hp, sum) && ht == closed);
        CHECK_BITS(&hs, &st, sizeof hs);
    }
}

/* Every built-in (hma included), random combos, random data, two fees. */
static void test_trades_every_builtin(void)
{
    enum { N = 6000 };
    static double close[N];
    for (int i = 0; tf_strategy_builtin_name(i); i++) {
        const tf_strategy_def *def = tf_strategy_builtin(tf_strategy_builtin_name(i));
        for (int rep = 0; rep < 6; rep++) {
            tf_test_random_walk(close, N, 0.01, &rng);
            double p[TF_STRATEGY_MAX_PARAMS] = {0};
            random_params(def, p);
            check_combo(def, p, close, N, rep % 2 ? 0.0 : 0.09);
        }
    }
}

static void test_trades_edges(void)
{
    const tf_strategy_def *hma = tf_strategy_builtin("hma");
    double close[50], p[6] = {10, 5, 3, 5, 2, 2}, bad[6] = {0, 5, 3, 5, 2, 2};
    tf_test_random_walk(close, 50, 0.01, &rng);
    char msg[256] = "";
    tf_trade t[4];
    CHECK_EQ(tf_trades_list(hma, p, close, 0, 0.09, t, 4, NULL, msg, sizeof msg), 0);
    CHECK_EQ(tf_trades_list(hma, p, close, 5, 0.09, t, 4, NULL, msg, sizeof msg), 0);
    CHECK_RC(tf_trades_list(hma, bad, close, 50, 0.09, t, 4, NULL, msg, sizeof msg), TF_E_STRATEGY);
    CHECK(strstr(msg, "hma") != NULL);
    CHECK_RC(tf_trades_list(hma, p, close, 50, NAN, t, 4, NULL, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK_RC(tf_trades_list(hma, p, close, 50, 0.09, NULL, 4, NULL, msg, sizeof msg),
             TF_E_NULL_ARG);
    CHECK_RC(tf_trades_list(NULL, p, close, 50, 0.09, t, 4, NULL, msg, sizeof msg), TF_E_NULL_ARG);
    CHECK_RC(tf_trades_list(hma, p, close, -1, 0.09, t, 4, NULL, msg, sizeof msg),
             TF_E_INVALID_ARG);
    /* more rows than cap: the count of all, the first cap written */
    static double c2[3000];
    tf_test_random_walk(c2, 3000, 0.01, &rng);
    tf_trade all[3000], few[2];
    int64_t rows = tf_trades_list(hma, p, c2, 3000, 0.09, all, 3000, NULL, msg, sizeof msg);
    CHECK(rows > 2);
    CHECK_EQ(tf_trades_list(hma, p, c2, 3000, 0.09, few, 2, NULL, msg, sizeof msg), rows);
    CHECK_BITS(few, all, sizeof few);
}

static void test_anchored_folds(void)
{
    tf_fold f[4];
    tf_oos_opts o = {.size = sizeof o, .walk_forward = 3, .anchored = 1};
    CHECK_EQ(tf_folds(103, &o, f, 4, NULL, 0), 3);
    CHECK(f[0].is_start == 0 && f[0].is_end == 25 && f[0].oos_end == 50);
    CHECK(f[1].is_start == 0 && f[1].is_end == 50 && f[1].oos_start == 50 && f[1].oos_end == 75);
    CHECK(f[2].is_start == 0 && f[2].is_end == 75 && f[2].oos_end == 103);
    char msg[256] = "";
    o = (tf_oos_opts){.walk_forward = 3, .warmup = -2};
    CHECK_RC(tf_folds(103, &o, f, 4, msg, sizeof msg), TF_E_INVALID_ARG);
    CHECK(strstr(msg, "warmup") != NULL);
}

/* The model of a warmed-up part [s, e): a streaming handle fed from w0 gives the position the
 * strategy holds after each bar; the part starts flat at s and follows those positions, each
 * change booked by the line of docs/definition.md section 5. */
static void model_part(const tf_strategy_def *def, const double *p, const double *close, int64_t w0,
                       int64_t s, int64_t e, double fee, double *pnl, int64_t *trades)
{
    tf_strategy *h;
    CHECK_RC(tf_strategy_open_with(&h, def, p), 0);
    tf_strategy_set_fee(h, fee);
    int64_t pos = 0;
    double entry = 0.0;
    *pnl = 0.0;
    *trades = 0;
    for (int64_t i = w0; i < e; i++) {
        int64_t want = tf_strategy_step(h, close[i]);
        if (i < s || want == pos)
            continue;
        if (pos != 0) {
            *pnl += (double)pos * (close[i] - entry) / entry * 100.0 - fee;
            *trades += 1;
        }
        pos = want;
        entry = close[i];
    }
    tf_strategy_close(h);
}

/* A warmed-up walk-forward of def (rows from tf_oos_run_with) against the model of each part. */
static void check_warm(const tf_strategy_def *def, const double *dp, int64_t m, const double *close,
                       int64_t n, const tf_oos_opts *o, const tf_oos_row *rows, int nf)
{
    double fee = 0.09;
    for (int k = 0; k < nf; k++) {
        const tf_fold *f = &rows[k].fold;
        double best_is = -INFINITY, vis[64], vos[64];
        int64_t w = 0, tis[64], tos[64];
        for (int64_t j = 0; j < m; j++) {
            const double *p = dp + j * def->n_params;
            int64_t s[2] = {f->is_start, f->oos_start}, e[2] = {f->is_end, f->oos_end};
            for (int part = 0; part < 2; part++) {
                int64_t w0 =
                    o->warmup == TF_OOS_WARMUP_ALL || o->warmup > s[part] ? 0 : s[part] - o->warmup;
                model_part(def, p, close, w0, s[part], e[part], fee, part ? &vos[j] : &vis[j],
                           part ? &tos[j] : &tis[j]);
            }
            if (vis[j] > best_is) {
                best_is = vis[j];
                w = j;
            }
        }
        int64_t rank = 1;
        for (int64_t j = 0; j < m; j++)
            rank += vos[j] > vos[w];
        CHECK_EQ(rows[k].winner, w);
        CHECK(tf_test_same_bits(rows[k].is_pnl, vis[w]) && rows[k].is_trades == tis[w]);
        CHECK(tf_test_same_bits(rows[k].oos_pnl, vos[w]) && rows[k].oos_trades == tos[w]);
        CHECK_EQ(rows[k].oos_rank, rank);
    }
    (void)n;
}

static void test_warmup(void)
{
    enum { N = 3000, M = 10 };
    static double close[N];
    tf_test_random_walk(close, N, 0.01, &rng);
    char msg[512] = "";
    tf_oos_row rows[4], cold[4], again[4];
    for (int i = 0; tf_strategy_builtin_name(i); i++) {
        const tf_strategy_def *def = tf_strategy_builtin(tf_strategy_builtin_name(i));
        double dp[M * 6];
        for (int j = 0; j < M; j++)
            random_params(def, dp + j * def->n_params);
        int64_t warm[] = {TF_OOS_WARMUP_ALL, 37, 500};
        for (int a = 0; a < 2; a++)
            for (size_t v = 0; v < 3; v++) {
                tf_oos_opts o = {
                    .size = sizeof o, .walk_forward = 4, .anchored = a, .warmup = warm[v]};
                tf_sweep_opts so = {.size = sizeof so, .threads = 2};
                int nf = tf_oos_run_with(def, close, N, dp, M, &o, rows, 4, msg, sizeof msg, &so);
                CHECK_EQ(nf, 4);
                if (nf != 4) {
                    fprintf(stderr, "%s: %s\n", def->name, msg);
                    continue;
                }
                check_warm(def, dp, M, close, N, &o, rows, nf);
                /* one thread, the reference (step by step): the same bits */
                so.threads = 1;
                o.reference = 1;
                CHECK_EQ(tf_oos_run_with(def, close, N, dp, M, &o, again, 4, msg, sizeof msg, &so),
                         4);
                CHECK_BITS(again, rows, sizeof rows);
                /* the first fold's in sample starts at bar 0: no warm-up, the cold bits */
                o = (tf_oos_opts){.size = sizeof o, .walk_forward = 4, .anchored = a};
                CHECK_EQ(tf_oos_run_with(def, close, N, dp, M, &o, cold, 4, msg, sizeof msg, &so),
                         4);
                CHECK(tf_test_same_bits(cold[0].is_pnl, rows[0].is_pnl) &&
                      cold[0].winner == rows[0].winner);
            }
    }
}

/* HMA by its int64 windows: warmed-up tf_oos_run equals tf_oos_run_with("hma"); a warm-up
 * longer than every combo's own warm-up is the same as all of it (HMA forgets). */
static void test_warmup_hma(void)
{
    enum { N = 4000, M = 8 };
    static double close[N];
    tf_test_random_walk(close, N, 0.01, &rng);
    int64_t ip[M * 6];
    double dp[M * 6];
    for (int j = 0; j < M; j++) {
        tf_combo_from_length(6 + 11 * j, ip + 6 * j);
        for (int k = 0; k < 6; k++)
            dp[6 * j + k] = (double)ip[6 * j + k];
    }
    tf_oos_row a[3], b[3], c[3];
    char msg[256];
    tf_oos_opts o = {.size = sizeof o,
                     .walk_forward = 3,
                     .warmup = TF_OOS_WARMUP_ALL,
                     .metric = "sharpe_per_trade"};
    CHECK_EQ(tf_oos_run(close, N, ip, M, &o, a, 3, msg, sizeof msg, NULL), 3);
    CHECK_EQ(tf_oos_run_with(tf_strategy_builtin("hma"), close, N, dp, M, &o, b, 3, msg, sizeof msg,
                             NULL),
             3);
    CHECK_BITS(a, b, sizeof a);
    o.warmup = 400; /* > every combo's warm-up (L = 83: about 100 bars) */
    CHECK_EQ(tf_oos_run(close, N, ip, M, &o, c, 3, msg, sizeof msg, NULL), 3);
    CHECK_BITS(a, c, sizeof a);
    int64_t big[6] = {10, 5, 3, 5, 2, (int64_t)1 << 25};
    CHECK_RC(tf_oos_run(close, N, big, 1, &o, a, 3, msg, sizeof msg, NULL), TF_E_WINDOW_TOO_LONG);
    CHECK(strstr(msg, "warm-up") != NULL);
}

int main(void)
{
    test_trades_every_builtin();
    test_trades_edges();
    test_anchored_folds();
    test_warmup();
    test_warmup_hma();
    return tf_test_report();
}
